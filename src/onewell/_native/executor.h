/* The native executor: a whole forward step of a decoder-only transformer (Llama / Qwen2 / Gemma 3 family) in one
 * call. Every optional feature is off when its pointer is NULL or its number 0 (see ow_layer_desc, ow_model_desc).
 *
 * The weights stay where Python put them (raw GGUF rows, zero-copy from the file mapping); the executor owns a
 * thread pool, a KV cache (f32, f16 or q8_0: kv_cache.h) and scratch buffers sized once for max_batch tokens, so a step allocates nothing.
 * Every size was validated in Python first (onewell/runtime/plan.py); the C side rechecks what is cheap and
 * returns an error code rather than touching memory it should not.
 *
 * Determinism: every output element is computed by one thread in a fixed order that does not depend on the
 * thread count (matmul chunks are whole row tiles of fixed size; norms, RoPE, attention work per row/head),
 * so logits are bit-identical for any number of threads. docs/architecture.md describes the step.
 */
#ifndef ONEWELL_EXECUTOR_H
#define ONEWELL_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

/* A weight matrix: rows x cols of a ggml type as stored in the file, or of OW_TYPE_Q8_0_R16 (a copy repacked at
 * load, kernels/q8_0_r16.h, rows padded to row_bytes); row r at data + r*row_bytes (any alignment). The token
 * embedding table must be a ggml type (the gather dequantizes its rows). */
typedef struct {
    const uint8_t *data;
    int32_t type;      /* ow_ggml_type */
    int64_t rows, cols;
    size_t row_bytes;
} ow_matrix;

/* One layer. The Python binding fills it by name from the table in bind_executor.c (layer_fields). */
typedef struct {
    const float *attn_norm, *ffn_norm;  /* [n_embd] */
    const float *bq, *bk, *bv;          /* [rows of wq/wk/wv], or all NULL (no q/k/v biases) */
    const float *q_norm, *k_norm;       /* [head_dim] RMSNorm of each query / key head before RoPE, or NULL */
    const float *attn_post_norm;        /* [n_embd] RMSNorm of the attention output before its residual add, or NULL */
    const float *ffn_post_norm;         /* [n_embd] the same for the FFN output, or NULL */
    /* Post-norm (BERT) layer when attn_out_norm is set: attn_norm and ffn_norm are then NULL and the layer is
     * x = LayerNorm(x + wo(attention(x))) (attn_out_norm, _b), then x = LayerNorm(x + ffn(x)) (layer_out_norm, _b). */
    const float *attn_out_norm, *attn_out_norm_b, *layer_out_norm, *layer_out_norm_b;  /* [n_embd] each, or NULL */
    ow_matrix wq, wk, wv, wo, w_gate, w_up, w_down;
    float rope_theta;                   /* this layer's RoPE base */
    int sliding_window;                 /* 0: full attention; else position p sees j with p - j < sliding_window */
} ow_layer_desc;

typedef enum { OW_ACT_SILU = 0, OW_ACT_GELU_TANH = 1 } ow_activation;  /* the gated FFN: SwiGLU, GeGLU */

typedef struct {
    int64_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int64_t n_rot;                  /* dims of a head RoPE rotates (even, <= head_dim); 0 = head_dim */
    float rms_eps;
    int rope_style;                 /* ow_rope_style: 0 normal (pairs 2i, 2i+1), 1 neox (pairs i, i + n_rot/2) */
    int activation;                 /* ow_activation */
    float embd_scale;               /* token embeddings are multiplied by it (Gemma: sqrt(n_embd)); 0 = 1 */
    float attn_scale;               /* attention score scale; 0 = 1/sqrt(head_dim) */
    float attn_softcap;             /* > 0: scores = c * tanh(scores / c) before the softmax; 0 = off */
    float final_softcap;            /* > 0: logits = c * tanh(logits / c); 0 = off */
    ow_matrix token_embd, output;   /* both [n_vocab][n_embd]; the same table when embeddings are tied */
    const float *output_norm;       /* [n_embd] */
    const float *rope_freqs;        /* [n_rot/2] RoPE frequency factors (angle i divided by it), or NULL */
    const ow_layer_desc *layers;    /* [n_layer], copied by ow_executor_create */
    /* encoders (ow_executor_encode) */
    int bidirectional;              /* 1: every token attends to its whole sequence; only ow_executor_encode runs,
                                       output and output_norm may be absent (forward refuses with OW_EXEC_EARG) */
    float norm_eps;                 /* LayerNorm epsilon (the embedding norm, post-norm layers) */
    const float *embd_type_row;     /* [n_embd] added to every token embedding (BERT token type 0), or NULL */
    const float *embd_norm, *embd_norm_b;  /* [n_embd] LayerNorm of the embeddings, or NULL */
} ow_model_desc;

typedef enum {
    OW_LOGITS_LAST = 0,    /* logits of the last token: n_vocab floats */
    OW_LOGITS_ALL = 1,     /* logits of every token: n_tokens x n_vocab floats */
    OW_LOGITS_ARGMAX = 2,  /* greedy: forward returns the id of the last token's largest logit; logits unused */
    OW_LOGITS_NONE = 3,    /* only fill the KV cache (a prefill chunk that is not the last) */
} ow_logits_mode;

typedef enum {
    OW_EXEC_OK = 0,
    OW_EXEC_EARG = -1,      /* bad arguments: null pointers, n_tokens < 1, unknown mode */
    OW_EXEC_ETOKEN = -2,    /* a token id outside [0, n_vocab) */
    OW_EXEC_ECTX = -3,      /* pos0 + n_tokens > n_ctx */
    OW_EXEC_EBATCH = -4,    /* n_tokens > max_batch */
    OW_EXEC_EBUSY = -5,     /* another thread is running a step on this executor */
    OW_EXEC_ESEQ = -6,      /* a sequence id outside [0, n_seq) */
    OW_EXEC_EPOS = -7,      /* a position outside [0, n_ctx), or a sequence's positions in the batch not consecutive */
} ow_exec_status;

/* Profile categories: wall time of each phase. A parallel job's wall time is split into idle (threads done
 * with their share, waiting at the barrier for the last, or never woken) and work; the work of a job that
 * fuses two ops (Q/K/V matmul + RoPE/KV store, gate/up matmul + SwiGLU) is split by their thread time. */
typedef enum {
    OW_PROF_EMBED,
    OW_PROF_NORM_QUANT,   /* RMSNorm and activation quantization before each matmul */
    OW_PROF_QKV,
    OW_PROF_ROPE_KV,      /* q/k/v bias, RoPE, KV-cache store */
    OW_PROF_ATTENTION,
    OW_PROF_WO,           /* includes the residual add */
    OW_PROF_GATE_UP,
    OW_PROF_SWIGLU,       /* the gated activation: SwiGLU or GeGLU */
    OW_PROF_DOWN,         /* includes the residual add */
    OW_PROF_OUTPUT,       /* final norm is in NORM_QUANT; includes the greedy argmax */
    OW_PROF_IDLE,
    OW_PROF_COUNT,
} ow_prof_cat;

typedef struct {
    int64_t ns[OW_PROF_COUNT];
    int64_t calls, tokens;
} ow_exec_profile;

typedef struct ow_executor ow_executor;

/* NULL if memory or threads could not be had, or desc is inconsistent (the Python plan checks it first).
 * One sequence: the same as ow_executor_create_multi(desc, n_threads, n_ctx, max_batch, 1). */
ow_executor *ow_executor_create(const ow_model_desc *desc, int n_threads, int n_ctx, int max_batch);
/* n_seq independent sequences, each with its own KV cache of n_ctx positions, f32 (ow_executor_create_kv). */
ow_executor *ow_executor_create_multi(const ow_model_desc *desc, int n_threads, int n_ctx, int max_batch, int n_seq);
/* The same with the cache's element type kv_type (ow_kv_type; NULL if head_dim does not suit it, kv_cache.h):
 * the caches take n_seq * n_ctx * n_layer * 2 * ow_kv_bytes(kv_type, n_head_kv * head_dim) bytes (mapped lazily,
 * resident as positions fill). */
ow_executor *ow_executor_create_kv(const ow_model_desc *desc, int n_threads, int n_ctx, int max_batch, int n_seq,
                                   int kv_type);
void ow_executor_destroy(ow_executor *ex);

/* Run tokens[0..n_tokens) at positions pos0.. : fills the KV cache there and writes logits per mode.
 * Returns OW_EXEC_OK (or the token id for OW_LOGITS_ARGMAX), or a negative ow_exec_status. */
int64_t ow_executor_forward(ow_executor *ex, const int32_t *tokens, int n_tokens, int pos0, float *logits,
                            int logits_mode);

/* Several sequences in one step, every weight streamed once for all n_tokens: token i goes to sequence
 * seq_ids[i] at position positions[i] (its K/V stored there) and attends to that sequence's positions
 * 0..positions[i]. Tokens of one sequence must have consecutive positions in batch order (a prefill chunk);
 * that the cache holds the positions before them is the caller's business (onewell/runtime/native_multi.py).
 * Modes: OW_LOGITS_ALL (n_tokens rows), OW_LOGITS_LAST (one row per sequence in the batch: for its last token,
 * rows in the batch order of those tokens), OW_LOGITS_NONE. Returns OW_EXEC_OK or a negative ow_exec_status. */
int64_t ow_executor_forward_batch(ow_executor *ex, const int32_t *tokens, const int32_t *seq_ids,
                                  const int32_t *positions, int n_tokens, float *logits, int logits_mode);

/* Encoder step (desc->bidirectional): n_seqs sequences back to back in tokens, sequence i of seq_lens[i] tokens
 * at positions 0..seq_lens[i]-1, each attending to all of its own tokens and none of the others (a block-diagonal
 * mask; K and V come from the step's own buffers, nothing is cached). The sum of seq_lens must be <= max_batch.
 * hidden receives the last layer's output of every token: sum(seq_lens) x n_embd floats (pooling is the
 * caller's). Returns OW_EXEC_OK or a negative ow_exec_status. */
int64_t ow_executor_encode(ow_executor *ex, const int32_t *tokens, const int32_t *seq_lens, int n_seqs,
                           float *hidden);

/* Kernel path (ow_kpath) of the matmuls; default ow_kpath_for_isa(ow_isa_best()). -1 if unavailable here. */
int ow_executor_set_kpath(ow_executor *ex, int kpath);
int ow_executor_kpath(const ow_executor *ex);
/* Rows per claimed chunk of a matmul job (rounded up to a whole number of OW_ROW_TILE; default 128). */
void ow_executor_set_chunk_rows(ow_executor *ex, int64_t rows);
int64_t ow_executor_chunk_rows(const ow_executor *ex);
int ow_executor_threads(const ow_executor *ex);
int ow_executor_n_ctx(const ow_executor *ex);
int ow_executor_max_batch(const ow_executor *ex);
int ow_executor_n_seq(const ow_executor *ex);
int ow_executor_kv_type(const ow_executor *ex);
int64_t ow_executor_n_vocab(const ow_executor *ex);
int64_t ow_executor_n_embd(const ow_executor *ex);

void ow_executor_set_profile(ow_executor *ex, int on);
void ow_executor_profile(const ow_executor *ex, ow_exec_profile *out);
void ow_executor_reset_profile(ow_executor *ex);
const char *ow_prof_name(ow_prof_cat c);

#endif
