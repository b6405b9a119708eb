/* The parallel jobs of a forward step. Each is one ow_pool_parallel_for over rows (matmuls), heads (Q/K/V,
 * attention) or tokens (norm + quantize), with a chunk size that does not depend on the thread count: chunk
 * boundaries, and so every row tile a kernel computes, are the same for 1 or N threads (bit-identical logits).
 * Ops that only need the rows a chunk just produced are fused into the chunk (bias, RoPE, KV store, SwiGLU,
 * residual add), which saves a barrier and a pass over the data. */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime under -std=c11 */
#include <string.h>

#include "executor_internal.h"

/* --- running a job, with the profile's bookkeeping ------------------------------------------------------- */

/* Wall time of the job, split: idle = thread time not spent in tasks (waiting at the barrier, or not woken),
 * the rest among the categories the tasks charged, in proportion. */
static void run_job(ow_executor *ex, int64_t n, int64_t chunk, ow_task_fn fn, void *ctx, ow_prof_cat main_cat) {
    if (!ex->profile) {
        ow_pool_parallel_for(ex->pool, n, chunk, fn, ctx);
        return;
    }
    memset(ex->tprof, 0, sizeof(ow_thread_prof) * (size_t)ex->n_threads);
    const int64_t t0 = ow_now_ns();
    ow_pool_parallel_for(ex->pool, n, chunk, fn, ctx);
    const int64_t wall = ow_now_ns() - t0;

    int64_t by_cat[OW_PROF_COUNT] = {0}, busy = 0;
    for (int w = 0; w < ex->n_threads; w++)
        for (int c = 0; c < OW_PROF_COUNT; c++) { by_cat[c] += ex->tprof[w].ns[c]; busy += ex->tprof[w].ns[c]; }
    const int threads = (chunk >= n || ex->n_threads == 1) ? 1 : ex->n_threads;  /* ran inline: no barrier */
    int64_t idle = (threads * wall - busy) / threads;
    if (idle < 0) idle = 0;
    const int64_t work = wall - idle;
    ex->prof.ns[OW_PROF_IDLE] += idle;
    if (busy <= 0) { ex->prof.ns[main_cat] += work; return; }
    int64_t given = 0;
    for (int c = 0; c < OW_PROF_COUNT; c++) {
        if (c == (int)main_cat || !by_cat[c]) continue;
        const int64_t share = (int64_t)((double)work * (double)by_cat[c] / (double)busy);
        ex->prof.ns[c] += share;
        given += share;
    }
    ex->prof.ns[main_cat] += work - given;
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The claimed chunk, resized so the chunks split evenly among the threads. With few chunks the last one leaves a
 * thread waiting for a whole chunk: Qwen2.5-0.5B's wo and down (896 rows) are 7 chunks of 128, 4 + 3 at 2
 * threads, which is 5.6 % of a 2-thread prefill step idle (docs/perf-log.md, entry 21). Tries the nearest chunk
 * counts that are multiples of the threads, more chunks first; `align` keeps chunks whole (R16 row groups, heads).
 * Many chunks balance themselves, and a chunk never changes a row's result, only which thread computes it. */
static int64_t balanced_chunk(const ow_executor *ex, int64_t n, int64_t chunk, int64_t align) {
    const int64_t threads = ex->n_threads, count = (n + chunk - 1) / chunk;
    if (threads < 2 || count < 2 || count % threads == 0 || count > 4 * threads) return chunk;
    const int64_t tries[2] = {(count / threads + 1) * threads, count / threads * threads};
    for (int i = 0; i < 2; i++) {
        if (tries[i] < threads) continue;
        const int64_t c = round_up((n + tries[i] - 1) / tries[i], align);
        if (((n + c - 1) / c) % threads == 0) return c;
    }
    return chunk;
}

static inline void matmul(const ow_executor *ex, const ow_matrix *w, ow_act_view in, int n, float *y,
                          int64_t y_stride, int64_t r0, int64_t r1) {
    ow_matmul_rows_path((ow_wtype)w->type, w->data, w->row_bytes, w->cols, in.data, in.stride, n, y, y_stride, r0, r1,
                        ex->kpath);
}

/* --- norm + activation quantization ----------------------------------------------------------------------- */

typedef struct {
    ow_executor *ex;
    const float *x;
    int64_t x_stride, n_cols;
    const float *norm;
    int n_types;
    ow_atype types[OW_ACT_SLOTS];
    size_t stride;
} prepare_job;

static void prepare_task(void *ctx, int64_t begin, int64_t end, int worker) {
    prepare_job *j = ctx;
    ow_executor *ex = j->ex;
    int64_t t0 = ow_prof_start(ex);
    for (int64_t t = begin; t < end; t++) {
        const float *src = j->x + t * j->x_stride;
        if (j->norm) {
            float *dst = ex->xn + t * j->n_cols;
            ow_rmsnorm_f32(dst, src, j->norm, 1, j->n_cols, ex->d.rms_eps);
            src = dst;
        }
        for (int s = 0; s < j->n_types; s++)
            ow_quantize_act_path(j->types[s], src, ex->xq[s] + (size_t)t * j->stride, j->n_cols, ex->kpath);
    }
    ow_prof_lap(ex, worker, OW_PROF_NORM_QUANT, t0);
}

void ow_exec_prepare_input(ow_executor *ex, const float *x, int64_t x_stride, int n, int64_t n_cols,
                           const float *norm, const ow_matrix *const *mats, int n_mats, ow_act_view *views) {
    prepare_job j = {.ex = ex, .x = x, .x_stride = x_stride, .n_cols = n_cols, .norm = norm, .n_types = 0};
    int slot_of[8];
    for (int i = 0; i < n_mats; i++) {
        const ow_atype at = ow_act_type_for((ow_wtype)mats[i]->type);
        int s = 0;
        while (s < j.n_types && j.types[s] != at) s++;
        if (s == j.n_types) j.types[j.n_types++] = at;
        slot_of[i] = s;
    }
    /* the widest activation row (F32) is 4 bytes per column; rows start 64-byte aligned */
    size_t widest = 0;
    for (int s = 0; s < j.n_types; s++) {
        const size_t b = ow_act_row_bytes(j.types[s], n_cols);
        if (b > widest) widest = b;
    }
    j.stride = (size_t)round_up((int64_t)widest, OW_ALIGN);
    for (int i = 0; i < n_mats; i++) views[i] = (ow_act_view){ex->xq[slot_of[i]], j.stride};
    run_job(ex, n, 1, prepare_task, &j, OW_PROF_NORM_QUANT);
}

/* --- Q, K, V ---------------------------------------------------------------------------------------------- */

typedef struct {
    ow_executor *ex;
    const ow_layer_desc *L;
    int layer, n;
    const ow_act_view *views;
} qkv_job;

/* Units are heads: [0, n_head) query heads, then n_head_kv key heads, then n_head_kv value heads. Keys and values
 * are computed into k_new / v_new, then each token's rows of this chunk are stored at its (sequence, position):
 * the tokens of a step may belong to different caches. */
static void qkv_task(void *ctx, int64_t begin, int64_t end, int worker) {
    qkv_job *j = ctx;
    ow_executor *ex = j->ex;
    const int64_t hd = ex->d.head_dim, nh = ex->d.n_head, nkv = ex->d.n_head_kv, n_rot = ex->d.n_rot;
    for (int64_t u = begin; u < end;) {
        const int seg = u < nh ? 0 : (u < nh + nkv ? 1 : 2);
        const int64_t seg_first = seg == 0 ? 0 : nh + (seg - 1) * nkv;
        const int64_t seg_end = seg == 0 ? nh : seg_first + nkv;
        const int64_t run_end = end < seg_end ? end : seg_end;
        const int64_t h0 = u - seg_first, h1 = run_end - seg_first, r0 = h0 * hd, r1 = h1 * hd;
        const ow_matrix *w = seg == 0 ? &j->L->wq : (seg == 1 ? &j->L->wk : &j->L->wv);
        const float *bias = seg == 0 ? j->L->bq : (seg == 1 ? j->L->bk : j->L->bv);
        const float *head_norm = seg == 0 ? j->L->q_norm : (seg == 1 ? j->L->k_norm : NULL);
        float *y = seg == 0 ? ex->q : (seg == 1 ? ex->k_new : ex->v_new);
        const int64_t y_stride = seg == 0 ? ex->n_q : ex->n_kv;

        int64_t t0 = ow_prof_start(ex);
        matmul(ex, w, j->views[seg], j->n, y, y_stride, r0, r1);
        t0 = ow_prof_lap(ex, worker, OW_PROF_QKV, t0);
        uint8_t *cache = seg == 1 ? ex->k_cache : ex->v_cache;
        for (int t = 0; t < j->n; t++) {
            float *row = y + t * y_stride + r0;
            if (bias) ow_add_bias_f32(row, bias + r0, 1, r1 - r0);
            if (head_norm) ow_rmsnorm_f32(row, row, head_norm, h1 - h0, hd, ex->d.rms_eps);
            if (seg != 2)
                ow_rope_apply_f32(row, ex->rope_cs + t * n_rot, 1, h1 - h0, hd, n_rot, (ow_rope_style)ex->d.rope_style);
            if (seg != 0 && !ex->d.bidirectional) {   /* an encoder's attention reads k_new / v_new; r0 is a whole head:
                                                        a block boundary of every KV type */
                uint8_t *dst = ow_cache_row(ex, cache, ex->seq[t], j->layer, ex->pos[t]);
                ow_kv_store(ex->kv_type, dst + ow_kv_bytes(ex->kv_type, r0), row, r1 - r0, ex->kpath);
            }
        }
        ow_prof_lap(ex, worker, OW_PROF_ROPE_KV, t0);
        u = run_end;
    }
}

void ow_exec_qkv(ow_executor *ex, int layer, int n, const ow_act_view views[3]) {
    qkv_job j = {ex, &ex->layers[layer], layer, n, views};
    const int64_t units = ex->d.n_head + 2 * ex->d.n_head_kv, chunk = ex->chunk_rows / ex->d.head_dim;
    run_job(ex, units, balanced_chunk(ex, units, chunk < 1 ? 1 : chunk, 1), qkv_task, &j, OW_PROF_QKV);
}

/* --- attention -------------------------------------------------------------------------------------------- */

typedef struct {
    ow_executor *ex;
    int layer;
} attn_job;

/* Units are (token, head) pairs, token-major; a chunk's heads of one token go to one call. */
static void attn_task(void *ctx, int64_t begin, int64_t end, int worker) {
    attn_job *j = ctx;
    ow_executor *ex = j->ex;
    const int64_t nh = ex->d.n_head;
    const int64_t window = ex->layers[j->layer].sliding_window;
    int64_t t0 = ow_prof_start(ex);
    for (int64_t u = begin; u < end;) {
        const int64_t t = u / nh, h0 = u % nh;
        const int64_t h1 = (end - u < nh - h0) ? h0 + (end - u) : nh;
        /* positions first..pos[t]: all of them, or the last `window` in a sliding-window layer */
        const int64_t first = window > 0 && ex->pos[t] >= window ? ex->pos[t] - window + 1 : 0;
        const ow_attn_args a = {
            .out = ex->attn + t * ex->n_q, .q = ex->q + t * ex->n_q,
            .k = ow_cache_row(ex, ex->k_cache, ex->seq[t], j->layer, (int)first),
            .v = ow_cache_row(ex, ex->v_cache, ex->seq[t], j->layer, (int)first),
            .n_ctx = ex->pos[t] + 1 - first, .n_head = nh, .n_head_kv = ex->d.n_head_kv, .head_dim = ex->d.head_dim,
            .scale = ex->attn_scale, .kv_type = ex->kv_type, .softcap = ex->d.attn_softcap,
        };
        ow_attention_heads(&a, h0, h1, ex->scores + (int64_t)worker * ex->n_ctx);
        u += h1 - h0;
    }
    ow_prof_lap(ex, worker, OW_PROF_ATTENTION, t0);
}

void ow_exec_attention(ow_executor *ex, int layer, int n) {
    attn_job j = {ex, layer};
    run_job(ex, (int64_t)n * ex->d.n_head, 1, attn_task, &j, OW_PROF_ATTENTION);
}

/* --- projections ------------------------------------------------------------------------------------------ */

typedef struct {
    ow_executor *ex;
    const ow_matrix *w;
    ow_act_view in;
    int n;
    const float *post_norm;
    ow_prof_cat cat;
} residual_job;

/* Rows [begin, end) of w @ input into proj, added to x at once unless a post-norm needs the whole row first. */
static void residual_task(void *ctx, int64_t begin, int64_t end, int worker) {
    residual_job *j = ctx;
    ow_executor *ex = j->ex;
    const int64_t ne = ex->d.n_embd;
    const int64_t t0 = ow_prof_start(ex);
    matmul(ex, j->w, j->in, j->n, ex->proj, ne, begin, end);
    if (!j->post_norm)
        for (int t = 0; t < j->n; t++) {
            float *x = ex->x + t * ne + begin;
            ow_add_f32(x, x, ex->proj + t * ne + begin, end - begin);
        }
    ow_prof_lap(ex, worker, j->cat, t0);
}

/* Tokens [begin, end): x[t] += rmsnorm(proj[t]) * post_norm. */
static void post_norm_task(void *ctx, int64_t begin, int64_t end, int worker) {
    residual_job *j = ctx;
    ow_executor *ex = j->ex;
    const int64_t ne = ex->d.n_embd;
    const int64_t t0 = ow_prof_start(ex);
    for (int64_t t = begin; t < end; t++) {
        float *p = ex->proj + t * ne, *x = ex->x + t * ne;
        ow_rmsnorm_f32(p, p, j->post_norm, 1, ne, ex->d.rms_eps);
        ow_add_f32(x, x, p, ne);
    }
    ow_prof_lap(ex, worker, OW_PROF_NORM_QUANT, t0);
}

void ow_exec_matmul_residual(ow_executor *ex, const ow_matrix *w, ow_act_view in, int n, const float *post_norm,
                             ow_prof_cat cat) {
    residual_job j = {ex, w, in, n, post_norm, cat};
    run_job(ex, w->rows, balanced_chunk(ex, w->rows, ex->chunk_rows, OW_CHUNK_ALIGN), residual_task, &j, cat);
    if (post_norm) run_job(ex, n, 1, post_norm_task, &j, OW_PROF_NORM_QUANT);
}

typedef struct {
    ow_executor *ex;
    const ow_matrix *gate, *up;
    const ow_act_view *views;
    int n;
} gate_up_job;

static void gate_up_task(void *ctx, int64_t begin, int64_t end, int worker) {
    gate_up_job *j = ctx;
    ow_executor *ex = j->ex;
    const int64_t nff = ex->d.n_ff;
    int64_t t0 = ow_prof_start(ex);
    matmul(ex, j->gate, j->views[0], j->n, ex->gate_up, 2 * nff, begin, end);
    matmul(ex, j->up, j->views[1], j->n, ex->gate_up + nff, 2 * nff, begin, end);
    t0 = ow_prof_lap(ex, worker, OW_PROF_GATE_UP, t0);
    const int gelu = ex->d.activation == OW_ACT_GELU_TANH;
    for (int t = 0; t < j->n; t++) {
        const float *g = ex->gate_up + t * 2 * nff + begin;
        float *out = ex->ffn + t * nff + begin;
        if (gelu) ow_geglu_f32(out, g, g + nff, end - begin);
        else ow_swiglu_f32(out, g, g + nff, end - begin);
    }
    ow_prof_lap(ex, worker, OW_PROF_SWIGLU, t0);
}

void ow_exec_gate_up(ow_executor *ex, const ow_matrix *gate, const ow_matrix *up, const ow_act_view views[2], int n) {
    gate_up_job j = {ex, gate, up, views, n};
    run_job(ex, ex->d.n_ff, balanced_chunk(ex, ex->d.n_ff, ex->chunk_rows, OW_CHUNK_ALIGN), gate_up_task, &j,
            OW_PROF_GATE_UP);
}

typedef struct {
    ow_executor *ex;
    ow_act_view in;
    int n;
    float *y;
    int64_t y_stride;
} output_job;

static void output_task(void *ctx, int64_t begin, int64_t end, int worker) {
    output_job *j = ctx;
    const int64_t t0 = ow_prof_start(j->ex);
    matmul(j->ex, &j->ex->d.output, j->in, j->n, j->y, j->y_stride, begin, end);
    const float cap = j->ex->d.final_softcap;
    if (cap > 0)
        for (int t = 0; t < j->n; t++) ow_softcap_f32(j->y + t * j->y_stride + begin, j->y + t * j->y_stride + begin,
                                                      end - begin, cap);
    ow_prof_lap(j->ex, worker, OW_PROF_OUTPUT, t0);
}

void ow_exec_output(ow_executor *ex, ow_act_view in, int n, float *y, int64_t y_stride) {
    output_job j = {ex, in, n, y, y_stride};
    const int64_t rows = ex->d.output.rows;
    int64_t chunk = round_up(rows / OW_OUTPUT_CHUNKS, OW_ROW_TILE);
    if (chunk < ex->chunk_rows) chunk = ex->chunk_rows;
    run_job(ex, rows, chunk, output_task, &j, OW_PROF_OUTPUT);
}
