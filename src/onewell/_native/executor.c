/* The executor's life cycle and the forward step (the order of the jobs in executor_jobs.c). */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime under -std=c11 */
#include "executor_internal.h"
#include "ops_layernorm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const prof_names[OW_PROF_COUNT] = {
    "embed", "norm_quant", "qkv_matmul", "rope_kv", "attention", "wo_matmul",
    "ffn_gate_up_matmul", "swiglu", "down_matmul", "output_matmul", "idle",
};

const char *ow_prof_name(ow_prof_cat c) { return (c >= 0 && c < OW_PROF_COUNT) ? prof_names[c] : "?"; }

/* --- the description: cheap consistency checks (Python's plan has checked everything with good messages) --- */

static int matrix_ok(const ow_matrix *m, int64_t rows, int64_t cols) {
    if (!m->data || m->rows != rows || m->cols != cols || !ow_wtype_supported(m->type)) return 0;
    const ow_atype at = ow_act_type_for((ow_wtype)m->type);
    const int64_t abs_ = ow_type_block_size(at);
    if (abs_ <= 0 || cols % abs_) return 0;
    /* the activation scratch holds 4 bytes per column (F32, the widest format; Q8_0 R16 takes 1.25) */
    if (ow_act_row_bytes(at, cols) > 4 * (size_t)cols) return 0;
    return ow_row_bytes_ok((ow_wtype)m->type, cols, m->row_bytes);   /* Q8_0 R16 rows may be padded */
}

static int desc_ok(const ow_model_desc *d) {
    if (!d || !d->layers) return 0;
    if (d->n_vocab < 1 || d->n_embd < 1 || d->n_layer < 1 || d->n_head < 1 || d->n_head_kv < 1 || d->head_dim < 2 ||
        d->n_ff < 1 || d->n_head % d->n_head_kv || d->head_dim % 2 || !(d->rms_eps > 0) ||
        (d->rope_style != OW_ROPE_NORMAL && d->rope_style != OW_ROPE_NEOX))
        return 0;
    if (d->n_rot < 0 || d->n_rot % 2 || d->n_rot > d->head_dim ||
        (d->activation != OW_ACT_SILU && d->activation != OW_ACT_GELU_TANH) || !(d->embd_scale >= 0) ||
        !(d->attn_scale >= 0) || !(d->attn_softcap >= 0) || !(d->final_softcap >= 0))
        return 0;
    if (d->bidirectional != 0 && d->bidirectional != 1) return 0;
    if (!d->bidirectional && !d->output_norm) return 0;
    /* an encoder needs no output projection (ow_executor_encode returns hidden states) */
    if ((!d->bidirectional || d->output.data) && !matrix_ok(&d->output, d->n_vocab, d->n_embd)) return 0;
    if ((d->embd_norm == NULL) != (d->embd_norm_b == NULL) || ((d->embd_norm || d->bidirectional) && !(d->norm_eps > 0)))
        return 0;
    const ow_matrix *te = &d->token_embd;
    /* the gather dequantizes rows of ggml types; a repacked table would gain nothing (one row per token) */
    if (!te->data || te->rows != d->n_vocab || te->cols != d->n_embd || !ow_wtype_supported(te->type) ||
        !ow_type_traits(te->type)->to_float ||
        d->n_embd % ow_type_block_size((ow_ggml_type)te->type) ||
        te->row_bytes != (size_t)(d->n_embd / ow_type_block_size((ow_ggml_type)te->type)) *
                             ow_type_block_bytes((ow_ggml_type)te->type))
        return 0;
    const int64_t nq = d->n_head * d->head_dim, nkv = d->n_head_kv * d->head_dim;
    for (int64_t l = 0; l < d->n_layer; l++) {
        const ow_layer_desc *L = &d->layers[l];
        /* pre-norm (RMSNorm before attention and FFN) or post-norm (LayerNorm after each residual add) */
        const int post = L->attn_out_norm != NULL;
        if (post ? (L->attn_norm || L->ffn_norm || !L->attn_out_norm_b || !L->layer_out_norm || !L->layer_out_norm_b ||
                    !(d->norm_eps > 0) || L->attn_post_norm || L->ffn_post_norm)
                 : (!L->attn_norm || !L->ffn_norm || L->attn_out_norm_b || L->layer_out_norm || L->layer_out_norm_b))
            return 0;
        if (post != d->bidirectional) return 0;   /* encoder layers run only in ow_executor_encode, and only them */
        if (!(L->rope_theta > 0) || L->sliding_window < 0) return 0;
        if ((L->bq == NULL) != (L->bk == NULL) || (L->bq == NULL) != (L->bv == NULL)) return 0;
        if (!matrix_ok(&L->wq, nq, d->n_embd) || !matrix_ok(&L->wk, nkv, d->n_embd) ||
            !matrix_ok(&L->wv, nkv, d->n_embd) || !matrix_ok(&L->wo, d->n_embd, nq) ||
            !matrix_ok(&L->w_gate, d->n_ff, d->n_embd) || !matrix_ok(&L->w_up, d->n_ff, d->n_embd) ||
            !matrix_ok(&L->w_down, d->n_embd, d->n_ff))
            return 0;
    }
    return 1;
}

/* --- life cycle ------------------------------------------------------------------------------------------- */

static size_t aligned(size_t bytes) { return (bytes + OW_ALIGN - 1) / OW_ALIGN * OW_ALIGN; }

static void *carve(uint8_t **cursor, size_t bytes) {
    void *p = *cursor;
    *cursor += aligned(bytes);
    return p;
}

void ow_executor_destroy(ow_executor *ex) {
    if (!ex) return;
    ow_pool_destroy(ex->pool);
    free(ex->k_cache);
    free(ex->v_cache);
    free(ex->arena);
    free(ex->tprof);
    free(ex->layers);
    free(ex);
}

ow_executor *ow_executor_create(const ow_model_desc *desc, int n_threads, int n_ctx, int max_batch) {
    return ow_executor_create_multi(desc, n_threads, n_ctx, max_batch, 1);
}

ow_executor *ow_executor_create_multi(const ow_model_desc *desc, int n_threads, int n_ctx, int max_batch, int n_seq) {
    return ow_executor_create_kv(desc, n_threads, n_ctx, max_batch, n_seq, OW_KV_F32);
}

ow_executor *ow_executor_create_kv(const ow_model_desc *desc, int n_threads, int n_ctx, int max_batch, int n_seq,
                                   int kv_type) {
    if (!desc_ok(desc) || n_ctx < 1 || max_batch < 1 || max_batch > n_ctx || n_seq < 1 ||
        !ow_kv_type_ok(kv_type, desc->head_dim))
        return NULL;
    if (n_threads < 1) n_threads = 1;
    ow_executor *ex = calloc(1, sizeof *ex);
    if (!ex) return NULL;
    ex->d = *desc;
    if (!ex->d.n_rot) ex->d.n_rot = desc->head_dim;
    ex->n_threads = n_threads;
    ex->n_ctx = n_ctx;
    ex->max_batch = max_batch;
    ex->n_seq = n_seq;
    ex->kv_type = (ow_kv_type)kv_type;
    ex->kpath = ow_kpath_for_isa(ow_isa_best());
    ex->chunk_rows = OW_DEFAULT_CHUNK_ROWS;
    ex->n_q = desc->n_head * desc->head_dim;
    ex->n_kv = desc->n_head_kv * desc->head_dim;
    ex->attn_scale = desc->attn_scale > 0 ? desc->attn_scale : (float)(1.0 / sqrt((double)desc->head_dim));
    atomic_init(&ex->busy, 0);

    const size_t n_layers = (size_t)desc->n_layer;
    ex->layers = malloc(n_layers * sizeof *ex->layers);
    ex->tprof = aligned_alloc(OW_ALIGN, aligned(sizeof(ow_thread_prof) * (size_t)n_threads));
    /* KV cache: large and touched only as positions fill (the allocator maps fresh zero pages lazily) */
    size_t per_seq, kv_raw;
    if (__builtin_mul_overflow(n_layers * (size_t)n_ctx, ow_kv_bytes(ex->kv_type, ex->n_kv), &per_seq) ||
        __builtin_mul_overflow(per_seq, (size_t)n_seq, &kv_raw) || kv_raw > SIZE_MAX / 4)
        goto fail;
    const size_t kv_bytes = aligned(kv_raw);
    ex->k_cache = aligned_alloc(OW_ALIGN, kv_bytes);
    ex->v_cache = aligned_alloc(OW_ALIGN, kv_bytes);
    if (!ex->layers || !ex->tprof || !ex->k_cache || !ex->v_cache) goto fail;
    memcpy(ex->layers, desc->layers, n_layers * sizeof *ex->layers);
    ex->d.layers = ex->layers;

    const size_t B = (size_t)max_batch, F = sizeof(float);
    const size_t ne = (size_t)desc->n_embd, nq = (size_t)ex->n_q, nff = (size_t)desc->n_ff;
    size_t widest = ne > nq ? ne : nq;
    if (nff > widest) widest = nff;
    ex->xq_slot_bytes = B * aligned(4 * widest);  /* F32 activations are the widest format */
    const size_t sizes[] = {
        B * ne * F, B * ne * F, B * nq * F, B * nq * F, B * ne * F, B * 2 * nff * F, B * nff * F,
        B * (size_t)desc->head_dim * F, B * sizeof(int32_t), (size_t)n_threads * (size_t)n_ctx * F,
        (size_t)desc->n_vocab * F, B * sizeof(int32_t), B * (size_t)ex->n_kv * F, B * (size_t)ex->n_kv * F,
        B * sizeof(int32_t),
    };
    size_t total = OW_ACT_SLOTS * aligned(ex->xq_slot_bytes);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) total += aligned(sizes[i]);
    ex->arena = aligned_alloc(OW_ALIGN, total);
    if (!ex->arena) goto fail;
    memset(ex->arena, 0, total);
    uint8_t *cur = ex->arena;
    ex->x = carve(&cur, sizes[0]);
    ex->xn = carve(&cur, sizes[1]);
    ex->q = carve(&cur, sizes[2]);
    ex->attn = carve(&cur, sizes[3]);
    ex->proj = carve(&cur, sizes[4]);
    ex->gate_up = carve(&cur, sizes[5]);
    ex->ffn = carve(&cur, sizes[6]);
    ex->rope_cs = carve(&cur, sizes[7]);
    ex->pos = carve(&cur, sizes[8]);
    ex->scores = carve(&cur, sizes[9]);
    ex->logits_tmp = carve(&cur, sizes[10]);
    ex->seq = carve(&cur, sizes[11]);
    ex->k_new = carve(&cur, sizes[12]);
    ex->v_new = carve(&cur, sizes[13]);
    ex->span_len = carve(&cur, sizes[14]);
    for (int s = 0; s < OW_ACT_SLOTS; s++) ex->xq[s] = carve(&cur, ex->xq_slot_bytes);

    ex->pool = ow_pool_create(n_threads);
    if (!ex->pool) goto fail;
    return ex;
fail:
    ow_executor_destroy(ex);
    return NULL;
}

/* --- settings and profile --------------------------------------------------------------------------------- */

int ow_executor_set_kpath(ow_executor *ex, int kpath) {
    if (kpath < 0 || kpath >= OW_KPATH_COUNT || !ow_kpath_available((ow_kpath)kpath)) return -1;
    ex->kpath = (ow_kpath)kpath;
    return 0;
}
int ow_executor_kpath(const ow_executor *ex) { return (int)ex->kpath; }

void ow_executor_set_chunk_rows(ow_executor *ex, int64_t rows) {
    if (rows < OW_ROW_TILE) rows = OW_ROW_TILE;
    ex->chunk_rows = (rows + OW_ROW_TILE - 1) / OW_ROW_TILE * OW_ROW_TILE;
}
int64_t ow_executor_chunk_rows(const ow_executor *ex) { return ex->chunk_rows; }
int ow_executor_threads(const ow_executor *ex) { return ex->n_threads; }
int ow_executor_n_ctx(const ow_executor *ex) { return ex->n_ctx; }
int ow_executor_max_batch(const ow_executor *ex) { return ex->max_batch; }
int ow_executor_n_seq(const ow_executor *ex) { return ex->n_seq; }
int ow_executor_kv_type(const ow_executor *ex) { return (int)ex->kv_type; }
int64_t ow_executor_n_vocab(const ow_executor *ex) { return ex->d.n_vocab; }
int64_t ow_executor_n_embd(const ow_executor *ex) { return ex->d.n_embd; }

void ow_executor_set_profile(ow_executor *ex, int on) { ex->profile = on != 0; }
void ow_executor_profile(const ow_executor *ex, ow_exec_profile *out) { *out = ex->prof; }
void ow_executor_reset_profile(ow_executor *ex) { memset(&ex->prof, 0, sizeof ex->prof); }

/* --- the step --------------------------------------------------------------------------------------------- */

/* Wall time of a phase run on the calling thread only. */
static void charge(ow_executor *ex, ow_prof_cat c, int64_t t0) {
    if (ex->profile) ex->prof.ns[c] += ow_now_ns() - t0;
}

static int check_step(const ow_executor *ex, const int32_t *tokens, int n, int pos0, const float *logits, int mode) {
    if (!tokens || n < 1 || pos0 < 0 || mode < OW_LOGITS_LAST || mode > OW_LOGITS_NONE) return OW_EXEC_EARG;
    if ((mode == OW_LOGITS_LAST || mode == OW_LOGITS_ALL) && !logits) return OW_EXEC_EARG;
    if (n > ex->max_batch) return OW_EXEC_EBATCH;
    if ((int64_t)pos0 + n > ex->n_ctx) return OW_EXEC_ECTX;
    for (int t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= ex->d.n_vocab) return OW_EXEC_ETOKEN;
    return OW_EXEC_OK;
}

/* The previous token of the same sequence in the batch, or -1. Quadratic, but n <= max_batch and it is
 * nothing beside a layer's matmuls. */
static int previous_of_seq(const int32_t *seq_ids, int t) {
    for (int p = t - 1; p >= 0; p--)
        if (seq_ids[p] == seq_ids[t]) return p;
    return -1;
}

static int is_last_of_seq(const int32_t *seq_ids, int n, int t) {
    for (int p = t + 1; p < n; p++)
        if (seq_ids[p] == seq_ids[t]) return 0;
    return 1;
}

static int check_batch(const ow_executor *ex, const int32_t *tokens, const int32_t *seq_ids, const int32_t *positions,
                       int n, const float *logits, int mode) {
    if (!tokens || !seq_ids || !positions || n < 1 || mode < OW_LOGITS_LAST || mode > OW_LOGITS_NONE ||
        mode == OW_LOGITS_ARGMAX)
        return OW_EXEC_EARG;
    if (mode != OW_LOGITS_NONE && !logits) return OW_EXEC_EARG;
    if (n > ex->max_batch) return OW_EXEC_EBATCH;
    for (int t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= ex->d.n_vocab) return OW_EXEC_ETOKEN;
        if (seq_ids[t] < 0 || seq_ids[t] >= ex->n_seq) return OW_EXEC_ESEQ;
        if (positions[t] < 0 || positions[t] >= ex->n_ctx) return OW_EXEC_EPOS;
        /* consecutive per sequence: no two tokens write one cache row, and none attends to a row of this
         * step that is not written yet */
        const int p = previous_of_seq(seq_ids, t);
        if (p >= 0 && positions[t] != positions[p] + 1) return OW_EXEC_EPOS;
    }
    return OW_EXEC_OK;
}

static void embed(ow_executor *ex, const int32_t *tokens, int n) {
    const ow_matrix *te = &ex->d.token_embd;
    const float scale = ex->d.embd_scale;
    const int64_t ne = ex->d.n_embd;
    for (int t = 0; t < n; t++) {
        float *x = ex->x + (int64_t)t * ne;
        ow_dequantize_row(te->type, te->data + (size_t)tokens[t] * te->row_bytes, x, ne);
        if (scale > 0 && scale != 1.0f)
            for (int64_t i = 0; i < ne; i++) x[i] *= scale;
        if (ex->d.embd_type_row) ow_add_f32(x, x, ex->d.embd_type_row, ne);
        if (ex->d.embd_norm) ow_layernorm_f32(x, x, ex->d.embd_norm, ex->d.embd_norm_b, 1, ne, ex->d.norm_eps);
    }
}

/* cos/sin of the step's positions for this layer's RoPE base: computed again only when the base changes
 * (once per step for most models; at each switch between local and global layers otherwise). */
static void rope_table_for(ow_executor *ex, const ow_layer_desc *L, int l, int n) {
    if (l > 0 && L->rope_theta == ex->layers[l - 1].rope_theta) return;
    const int64_t t0 = ex->profile ? ow_now_ns() : 0;
    ow_rope_table_ff_f32(ex->rope_cs, ex->pos, n, ex->d.n_rot, L->rope_theta, ex->d.rope_freqs);
    charge(ex, OW_PROF_ROPE_KV, t0);
}

/* A layer's attention half: the normed input, Q/K/V (the new K/V rows go to the cache), attention into ex->attn */
static void layer_attention(ow_executor *ex, int l, int n) {
    const ow_layer_desc *L = &ex->layers[l];
    const int64_t ne = ex->d.n_embd;
    ow_act_view v[3];
    const ow_matrix *qkv[3] = {&L->wq, &L->wk, &L->wv};
    ow_exec_prepare_input(ex, ex->x, ne, n, ne, L->attn_norm, qkv, 3, v);
    ow_exec_qkv(ex, l, n, v);
    ow_exec_attention(ex, l, n);
}

/* ... and the rest, row by row: the output projection into the residual, then the FFN */
static void layer_ffn(ow_executor *ex, int l, int n) {
    const ow_layer_desc *L = &ex->layers[l];
    const int64_t ne = ex->d.n_embd;
    ow_act_view v[2];
    const ow_matrix *wo[1] = {&L->wo};
    ow_exec_prepare_input(ex, ex->attn, ex->n_q, n, ex->n_q, NULL, wo, 1, v);
    ow_exec_matmul_residual(ex, &L->wo, v[0], n, L->attn_post_norm, OW_PROF_WO);

    const ow_matrix *gate_up[2] = {&L->w_gate, &L->w_up};
    ow_exec_prepare_input(ex, ex->x, ne, n, ne, L->ffn_norm, gate_up, 2, v);
    ow_exec_gate_up(ex, &L->w_gate, &L->w_up, v, n);

    const ow_matrix *down[1] = {&L->w_down};
    ow_exec_prepare_input(ex, ex->ffn, ex->d.n_ff, n, ex->d.n_ff, NULL, down, 1, v);
    ow_exec_matmul_residual(ex, &L->w_down, v[0], n, L->ffn_post_norm, OW_PROF_DOWN);
}

static void layer_step(ow_executor *ex, int l, int n) {
    rope_table_for(ex, &ex->layers[l], l, n);
    if (ex->layers[l].attn_out_norm) {   /* post-norm (BERT) layer: executor_encoder.c */
        ow_exec_encoder_layer(ex, l, n);
        return;
    }
    layer_attention(ex, l, n);
    layer_ffn(ex, l, n);
}

/* The rows the step's output reads: every token's (OW_LOGITS_ALL), the last token's of each sequence
 * (OW_LOGITS_LAST), the batch's last (OW_LOGITS_ARGMAX) or none. After the last layer's attention nothing else
 * reads the other rows (their K/V are cached), so their residual and attention rows are dropped and the rest of
 * that layer runs on the kept ones, moved to the front in batch order: as llama.cpp does, and 1/n_layer of a
 * prompt's FFN work saved. Every row's arithmetic does not depend on the batch (tiles = decode kernels), so the
 * logits are the same floats. Returns the kept count. */
static int keep_output_rows(ow_executor *ex, int n, int mode) {
    if (mode == OW_LOGITS_ALL) return n;
    const int64_t ne = ex->d.n_embd, nq = ex->n_q;
    int rows = 0;
    for (int t = 0; t < n; t++) {
        const int keep = mode == OW_LOGITS_LAST ? is_last_of_seq(ex->seq, n, t) : mode == OW_LOGITS_ARGMAX && t == n - 1;
        if (!keep) continue;
        if (rows != t) {
            memmove(ex->x + (int64_t)rows * ne, ex->x + (int64_t)t * ne, (size_t)ne * sizeof(float));
            memmove(ex->attn + (int64_t)rows * nq, ex->attn + (int64_t)t * nq, (size_t)nq * sizeof(float));
        }
        rows++;
    }
    return rows;
}

/* Logits of the n_rows residual rows at x (stride n_embd) into y, or (y NULL) the argmax of the single row. */
static int64_t output_rows(ow_executor *ex, const float *x, int n_rows, float *y) {
    const int64_t ne = ex->d.n_embd, nv = ex->d.n_vocab;
    const ow_matrix *out[1] = {&ex->d.output};
    ow_act_view v;
    ow_exec_prepare_input(ex, x, ne, n_rows, ne, ex->d.output_norm, out, 1, &v);
    ow_exec_output(ex, v, n_rows, y ? y : ex->logits_tmp, nv);
    if (y) return OW_EXEC_OK;
    const int64_t t0 = ex->profile ? ow_now_ns() : 0;
    const int64_t best = ow_argmax_f32(ex->logits_tmp, nv);
    charge(ex, OW_PROF_OUTPUT, t0);
    return best;
}

/* The step's output from the rows keep_output_rows left at the front of ex->x (n of them; one for ARGMAX) */
static int64_t output_step(ow_executor *ex, int n, float *logits, int mode) {
    return output_rows(ex, ex->x, n, mode == OW_LOGITS_ARGMAX ? NULL : logits);
}

/* The step once ex->pos and ex->seq hold every token's place; the caller holds ex->busy. */
static int64_t run_step(ow_executor *ex, const int32_t *tokens, int n, float *logits, int mode) {
    int64_t t0 = ex->profile ? ow_now_ns() : 0;
    embed(ex, tokens, n);
    charge(ex, OW_PROF_EMBED, t0);

    const int last = (int)ex->d.n_layer - 1;
    for (int l = 0; l < last; l++) layer_step(ex, l, n);
    /* the last layer: attention for every row, the rest for the rows the output reads (a post-norm encoder
     * layer, which ow_executor_encode runs, stays whole) */
    const int post_norm = ex->layers[last].attn_out_norm != NULL;
    if (post_norm) {
        layer_step(ex, last, n);
    } else {
        rope_table_for(ex, &ex->layers[last], last, n);
        layer_attention(ex, last, n);
    }
    const int rows = keep_output_rows(ex, n, mode);
    if (!post_norm && rows > 0) layer_ffn(ex, last, rows);

    const int64_t result = mode == OW_LOGITS_NONE ? OW_EXEC_OK : output_step(ex, rows, logits, mode);
    if (ex->profile) {
        ex->prof.calls++;
        ex->prof.tokens += n;
    }
    return result;
}

int64_t ow_executor_forward(ow_executor *ex, const int32_t *tokens, int n, int pos0, float *logits, int mode) {
    if (!ex) return OW_EXEC_EARG;
    if (ex->d.bidirectional) return OW_EXEC_EARG;   /* an encoder runs ow_executor_encode */
    const int status = check_step(ex, tokens, n, pos0, logits, mode);
    if (status != OW_EXEC_OK) return status;
    if (atomic_exchange(&ex->busy, 1)) return OW_EXEC_EBUSY;
    for (int t = 0; t < n; t++) {
        ex->pos[t] = pos0 + t;
        ex->seq[t] = 0;
    }
    const int64_t result = run_step(ex, tokens, n, logits, mode);
    atomic_store(&ex->busy, 0);
    return result;
}

int64_t ow_executor_forward_batch(ow_executor *ex, const int32_t *tokens, const int32_t *seq_ids,
                                  const int32_t *positions, int n, float *logits, int mode) {
    if (!ex) return OW_EXEC_EARG;
    if (ex->d.bidirectional) return OW_EXEC_EARG;
    const int status = check_batch(ex, tokens, seq_ids, positions, n, logits, mode);
    if (status != OW_EXEC_OK) return status;
    if (atomic_exchange(&ex->busy, 1)) return OW_EXEC_EBUSY;
    memcpy(ex->pos, positions, (size_t)n * sizeof *positions);
    memcpy(ex->seq, seq_ids, (size_t)n * sizeof *seq_ids);
    const int64_t result = run_step(ex, tokens, n, logits, mode);
    atomic_store(&ex->busy, 0);
    return result;
}

int64_t ow_executor_encode(ow_executor *ex, const int32_t *tokens, const int32_t *seq_lens, int n_seqs,
                           float *hidden) {
    if (!ex || !tokens || !seq_lens || !hidden || n_seqs < 1 || !ex->d.bidirectional) return OW_EXEC_EARG;
    int64_t n = 0;
    for (int s = 0; s < n_seqs; s++) {
        if (seq_lens[s] < 1) return OW_EXEC_EARG;
        n += seq_lens[s];
        if (n > ex->max_batch) return OW_EXEC_EBATCH;   /* max_batch <= n_ctx: every sequence fits the scratch */
    }
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= ex->d.n_vocab) return OW_EXEC_ETOKEN;
    if (atomic_exchange(&ex->busy, 1)) return OW_EXEC_EBUSY;
    int64_t t = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int32_t p = 0; p < seq_lens[s]; p++, t++) {
            ex->pos[t] = p;
            ex->seq[t] = s;
            ex->span_len[t] = seq_lens[s];
        }
    const int64_t result = run_step(ex, tokens, (int)n, NULL, OW_LOGITS_NONE);
    memcpy(hidden, ex->x, (size_t)n * (size_t)ex->d.n_embd * sizeof(float));
    atomic_store(&ex->busy, 0);
    return result;
}
