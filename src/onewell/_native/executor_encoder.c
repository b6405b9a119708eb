/* Encoder (BERT-family) pieces of a step: the post-norm layer, its LayerNorms, and bidirectional attention
 * within each sequence of the step (a block-diagonal mask over the batch). K and V are read from the step's
 * staging buffers (k_new, v_new), not the KV cache: an encoder sees every sequence whole in one step. */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime under -std=c11 */
#include "executor_internal.h"
#include "ops_layernorm.h"

/* A job without the per-category split of executor_jobs.c's run_job: the whole wall time goes to `cat`. */
static void run_simple(ow_executor *ex, int64_t n, int64_t chunk, ow_task_fn fn, void *ctx, ow_prof_cat cat) {
    const int64_t t0 = ex->profile ? ow_now_ns() : 0;
    ow_pool_parallel_for(ex->pool, n, chunk, fn, ctx);
    if (ex->profile) ex->prof.ns[cat] += ow_now_ns() - t0;
}

typedef struct {
    ow_executor *ex;
    const float *w, *b;
} layernorm_job;

static void layernorm_task(void *ctx, int64_t begin, int64_t end, int worker) {
    (void)worker;
    layernorm_job *j = ctx;
    const int64_t ne = j->ex->d.n_embd;
    float *x = j->ex->x + begin * ne;
    ow_layernorm_f32(x, x, j->w, j->b, end - begin, ne, j->ex->d.norm_eps);
}

void ow_exec_layernorm(ow_executor *ex, int n, const float *w, const float *b) {
    layernorm_job j = {ex, w, b};
    run_simple(ex, n, 1, layernorm_task, &j, OW_PROF_NORM_QUANT);
}

/* Units are (token, head) pairs, token-major. Token t is position pos[t] of a sequence whose span_len[t] tokens
 * start at batch row t - pos[t]: it attends to all of them. */
static void span_attention_task(void *ctx, int64_t begin, int64_t end, int worker) {
    ow_executor *ex = ctx;
    const int64_t nh = ex->d.n_head;
    for (int64_t u = begin; u < end;) {
        const int64_t t = u / nh, h0 = u % nh;
        const int64_t h1 = (end - u < nh - h0) ? h0 + (end - u) : nh;
        const size_t first = (size_t)(t - ex->pos[t]) * (size_t)ex->n_kv;
        const ow_attn_args a = {
            .out = ex->attn + t * ex->n_q, .q = ex->q + t * ex->n_q, .k = ex->k_new + first, .v = ex->v_new + first,
            .n_ctx = ex->span_len[t], .n_head = nh, .n_head_kv = ex->d.n_head_kv, .head_dim = ex->d.head_dim,
            .scale = ex->attn_scale, .kv_type = OW_KV_F32, .softcap = ex->d.attn_softcap,
        };
        ow_attention_heads(&a, h0, h1, ex->scores + (int64_t)worker * ex->n_ctx);
        u += h1 - h0;
    }
}

void ow_exec_encoder_layer(ow_executor *ex, int l, int n) {
    const ow_layer_desc *L = &ex->layers[l];
    const int64_t ne = ex->d.n_embd;
    ow_act_view v[3];

    const ow_matrix *qkv[3] = {&L->wq, &L->wk, &L->wv};
    ow_exec_prepare_input(ex, ex->x, ne, n, ne, NULL, qkv, 3, v);   /* no pre-norm: the input is normalized */
    ow_exec_qkv(ex, l, n, v);                                        /* keys/values stay in k_new / v_new */
    run_simple(ex, (int64_t)n * ex->d.n_head, 1, span_attention_task, ex, OW_PROF_ATTENTION);

    const ow_matrix *wo[1] = {&L->wo};
    ow_exec_prepare_input(ex, ex->attn, ex->n_q, n, ex->n_q, NULL, wo, 1, v);
    ow_exec_matmul_residual(ex, &L->wo, v[0], n, NULL, OW_PROF_WO);
    ow_exec_layernorm(ex, n, L->attn_out_norm, L->attn_out_norm_b);

    const ow_matrix *gate_up[2] = {&L->w_gate, &L->w_up};
    ow_exec_prepare_input(ex, ex->x, ne, n, ne, NULL, gate_up, 2, v);
    ow_exec_gate_up(ex, &L->w_gate, &L->w_up, v, n);

    const ow_matrix *down[1] = {&L->w_down};
    ow_exec_prepare_input(ex, ex->ffn, ex->d.n_ff, n, ex->d.n_ff, NULL, down, 1, v);
    ow_exec_matmul_residual(ex, &L->w_down, v[0], n, NULL, OW_PROF_DOWN);
    ow_exec_layernorm(ex, n, L->layer_out_norm, L->layer_out_norm_b);
}
