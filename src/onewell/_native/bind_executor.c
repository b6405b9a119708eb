/* Python entry of the executor (executor.h). onewell/runtime/plan.py validates the model description and
 * onewell/runtime/native.py every step's arguments first, with readable messages; the checks here repeat what
 * keeps memory safe. The executor lives in a capsule that also holds the Py_buffers of every weight, so the
 * weights (views of the GGUF mapping) stay alive as long as the executor. Steps run with the GIL released. */
#include "bindings.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "executor.h"
#include "kernels/matvec.h"
#include "kv_cache.h"
#include "kernels/type_traits.h"
#include "ops.h"
#include "ops_layernorm.h"

#define CAPSULE_NAME "onewell.executor"

typedef struct {
    ow_executor *ex;
    Py_ssize_t n_buffers;
    Py_buffer buffers[];
} holder;

static void holder_free(holder *h) {
    if (!h) return;
    ow_executor_destroy(h->ex);
    for (Py_ssize_t i = 0; i < h->n_buffers; i++) PyBuffer_Release(&h->buffers[i]);
    PyMem_Free(h);
}

static void capsule_destructor(PyObject *capsule) { holder_free(PyCapsule_GetPointer(capsule, CAPSULE_NAME)); }

static holder *get_holder(PyObject *capsule) {
    holder *h = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    if (h && !h->ex) { PyErr_SetString(PyExc_ValueError, "executor is not initialized"); return NULL; }
    return h;
}

/* --- the named description: one table per dict, joined to the C structs by name ------------------------ */

typedef enum { F_MATRIX, F_VECTOR, F_F32, F_I64, F_INT } field_kind;
/* Sizes a tensor's rows / columns / length must have, from the config (D_NONE: not a tensor). */
typedef enum { D_NONE, D_VOCAB, D_EMBD, D_Q, D_KV, D_FF, D_HEAD, D_ROT_PAIRS, D_COUNT } dim_rule;
static const char *const dim_names[D_COUNT] = {"-", "n_vocab", "n_embd", "n_head*head_dim", "n_head_kv*head_dim",
                                               "n_ff", "head_dim", "n_rot/2"};

typedef struct {
    const char *name;
    size_t offset;      /* in ow_model_desc or ow_layer_desc */
    field_kind kind;
    dim_rule rows, cols; /* a matrix: rows x cols; a vector: rows elements */
    int required;
    double lo, hi;      /* a scalar's allowed range (inclusive) */
} field;

#define M(f) offsetof(ow_model_desc, f)
#define L(f) offsetof(ow_layer_desc, f)
#define BIG 2147483647.0
static const field config_fields[] = {
    {"n_vocab", M(n_vocab), F_I64, D_NONE, D_NONE, 1, 1, BIG},
    {"n_embd", M(n_embd), F_I64, D_NONE, D_NONE, 1, 1, 1 << 20},
    {"n_layer", M(n_layer), F_I64, D_NONE, D_NONE, 1, 1, 100000},
    {"n_head", M(n_head), F_I64, D_NONE, D_NONE, 1, 1, 1 << 16},
    {"n_head_kv", M(n_head_kv), F_I64, D_NONE, D_NONE, 1, 1, 1 << 16},
    {"head_dim", M(head_dim), F_I64, D_NONE, D_NONE, 1, 2, 1 << 16},
    {"n_ff", M(n_ff), F_I64, D_NONE, D_NONE, 1, 1, 1 << 24},
    {"rms_eps", M(rms_eps), F_F32, D_NONE, D_NONE, 1, 1e-30, 1},
    {"rope_style", M(rope_style), F_INT, D_NONE, D_NONE, 1, 0, 1},
    /* feature flags: absent = 0 = off (n_rot 0 = head_dim, embd_scale 0 = 1, attn_scale 0 = 1/sqrt(head_dim)) */
    {"n_rot", M(n_rot), F_I64, D_NONE, D_NONE, 0, 0, 1 << 16},
    {"activation", M(activation), F_INT, D_NONE, D_NONE, 0, 0, 1},
    {"embd_scale", M(embd_scale), F_F32, D_NONE, D_NONE, 0, 0, 1e30},
    {"attn_scale", M(attn_scale), F_F32, D_NONE, D_NONE, 0, 0, 1e30},
    {"attn_softcap", M(attn_softcap), F_F32, D_NONE, D_NONE, 0, 0, 1e30},
    {"final_softcap", M(final_softcap), F_F32, D_NONE, D_NONE, 0, 0, 1e30},
    {"bidirectional", M(bidirectional), F_INT, D_NONE, D_NONE, 0, 0, 1},
    {"norm_eps", M(norm_eps), F_F32, D_NONE, D_NONE, 0, 0, 1},
};
static const field model_fields[] = {
    {"token_embd", M(token_embd), F_MATRIX, D_VOCAB, D_EMBD, 1, 0, 0},
    /* required unless the model is an encoder (checked in ow_executor_create: desc_ok) */
    {"output", M(output), F_MATRIX, D_VOCAB, D_EMBD, 0, 0, 0},
    {"output_norm", M(output_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"rope_freqs", M(rope_freqs), F_VECTOR, D_ROT_PAIRS, D_NONE, 0, 0, 0},
    {"embd_type_row", M(embd_type_row), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"embd_norm", M(embd_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"embd_norm_b", M(embd_norm_b), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
};
static const field layer_fields[] = {
    /* attn_norm, ffn_norm: required in a pre-norm layer, absent in a post-norm one (desc_ok checks which) */
    {"attn_norm", L(attn_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"wq", L(wq), F_MATRIX, D_Q, D_EMBD, 1, 0, 0},
    {"wk", L(wk), F_MATRIX, D_KV, D_EMBD, 1, 0, 0},
    {"wv", L(wv), F_MATRIX, D_KV, D_EMBD, 1, 0, 0},
    {"wo", L(wo), F_MATRIX, D_EMBD, D_Q, 1, 0, 0},
    {"ffn_norm", L(ffn_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"w_gate", L(w_gate), F_MATRIX, D_FF, D_EMBD, 1, 0, 0},
    {"w_up", L(w_up), F_MATRIX, D_FF, D_EMBD, 1, 0, 0},
    {"w_down", L(w_down), F_MATRIX, D_EMBD, D_FF, 1, 0, 0},
    {"bq", L(bq), F_VECTOR, D_Q, D_NONE, 0, 0, 0},
    {"bk", L(bk), F_VECTOR, D_KV, D_NONE, 0, 0, 0},
    {"bv", L(bv), F_VECTOR, D_KV, D_NONE, 0, 0, 0},
    {"q_norm", L(q_norm), F_VECTOR, D_HEAD, D_NONE, 0, 0, 0},
    {"k_norm", L(k_norm), F_VECTOR, D_HEAD, D_NONE, 0, 0, 0},
    {"attn_post_norm", L(attn_post_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"ffn_post_norm", L(ffn_post_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"attn_out_norm", L(attn_out_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"attn_out_norm_b", L(attn_out_norm_b), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"layer_out_norm", L(layer_out_norm), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"layer_out_norm_b", L(layer_out_norm_b), F_VECTOR, D_EMBD, D_NONE, 0, 0, 0},
    {"rope_theta", L(rope_theta), F_F32, D_NONE, D_NONE, 1, 1e-30, 1e30},
    {"sliding_window", L(sliding_window), F_INT, D_NONE, D_NONE, 0, 0, BIG},
};
#undef M
#undef L
#define N_FIELDS(t) (sizeof t / sizeof *t)

static int count_buffers(const field *fields, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += fields[i].kind == F_MATRIX || fields[i].kind == F_VECTOR;
    return c;
}

/* A scalar of the table into its struct member; the value must lie in [lo, hi]. */
static int parse_scalar(PyObject *obj, const field *f, char *base, const char *where) {
    if (f->kind == F_F32) {
        const double v = PyFloat_AsDouble(obj);
        if (v == -1.0 && PyErr_Occurred()) return -1;
        if (!(v >= f->lo && v <= f->hi)) {
            char msg[256];   /* PyErr_Format has no %g */
            snprintf(msg, sizeof msg, "%s: '%s' = %.17g is outside [%g, %g]", where, f->name, v, f->lo, f->hi);
            PyErr_SetString(PyExc_ValueError, msg);
            return -1;
        }
        *(float *)(base + f->offset) = (float)v;
        return 0;
    }
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be an int, got %R", where, f->name, obj);
        return -1;
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || (double)v < f->lo || (double)v > f->hi) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' = %R is outside [%.0f, %.0f]", where, f->name, obj, f->lo, f->hi);
        return -1;
    }
    if (f->kind == F_I64) *(int64_t *)(base + f->offset) = v;
    else *(int *)(base + f->offset) = (int)v;
    return 0;
}

/* (buffer, type, rows, cols, row_bytes) with rows x cols as the table says -> ow_matrix, the buffer kept in h */
static int parse_matrix(PyObject *item, const field *f, const int64_t *dims, holder *h, ow_matrix *m,
                        const char *where) {
    PyObject *obj;
    int type;
    long long rows, cols, row_bytes;
    if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "OiLLL", &obj, &type, &rows, &cols, &row_bytes)) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be a tuple (buffer, type, rows, cols, row_bytes)", where, f->name);
        return -1;
    }
    if (rows != dims[f->rows] || cols != dims[f->cols]) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' is %lld x %lld, the config implies %s x %s = %lld x %lld", where,
                     f->name, rows, cols, dim_names[f->rows], dim_names[f->cols], (long long)dims[f->rows],
                     (long long)dims[f->cols]);
        return -1;
    }
    Py_buffer *b = &h->buffers[h->n_buffers];
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS) < 0) return -1;
    h->n_buffers++;
    if (row_bytes < 1 || ow_need(b, rows, row_bytes, "matrix") < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: '%s': buffer of %zd bytes is too small for %lld rows of %lld bytes", where,
                     f->name, b->len, rows, row_bytes);
        return -1;
    }
    *m = (ow_matrix){(const uint8_t *)b->buf, type, rows, cols, (size_t)row_bytes};
    return 0;
}

/* an aligned float32 buffer of exactly the table's length -> pointer, the buffer kept in h */
static int parse_vector(PyObject *obj, const field *f, const int64_t *dims, holder *h, const float **out,
                        const char *where) {
    Py_buffer *b = &h->buffers[h->n_buffers];
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS) < 0) return -1;
    h->n_buffers++;
    const int64_t n = dims[f->rows];
    if ((int64_t)b->len != ow_size_mul(n, sizeof(float)) || (uintptr_t)b->buf % sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' is a buffer of %zd bytes, need %lld aligned float32 values (%s)",
                     where, f->name, b->len, (long long)n, dim_names[f->rows]);
        return -1;
    }
    *out = b->buf;
    return 0;
}

/* Fill the struct at base from dict by the table: every key must name a field, every required field be given
 * (None = absent). dims (NULL for the config) gives the sizes tensors must have. */
static int parse_named(PyObject *dict, const field *fields, size_t n_fields, char *base, const int64_t *dims,
                       holder *h, const char *where) {
    if (!PyDict_Check(dict)) {
        PyErr_Format(PyExc_ValueError, "%s must be a dict of named entries", where);
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        const char *name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : NULL;
        size_t i = 0;
        while (name && i < n_fields && strcmp(fields[i].name, name)) i++;
        if (!name || i == n_fields) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: unknown name %R", where, key);
            return -1;
        }
    }
    for (size_t i = 0; i < n_fields; i++) {
        const field *f = &fields[i];
        PyObject *obj = PyDict_GetItemString(dict, f->name);  /* borrowed */
        if (!obj || obj == Py_None) {
            if (f->required) {
                PyErr_Format(PyExc_ValueError, "%s: '%s' is missing", where, f->name);
                return -1;
            }
            continue;
        }
        int rc;
        switch (f->kind) {
        case F_MATRIX: rc = parse_matrix(obj, f, dims, h, (ow_matrix *)(base + f->offset), where); break;
        case F_VECTOR: rc = parse_vector(obj, f, dims, h, (const float **)(base + f->offset), where); break;
        default: rc = parse_scalar(obj, f, base, where);
        }
        if (rc < 0) return -1;
    }
    return 0;
}

/* The sizes of the dim rules, from a parsed config, with overflow checks. */
static int config_dims(const ow_model_desc *d, int64_t *dims) {
    dims[D_NONE] = 1;
    dims[D_VOCAB] = d->n_vocab;
    dims[D_EMBD] = d->n_embd;
    dims[D_FF] = d->n_ff;
    dims[D_HEAD] = d->head_dim;
    dims[D_ROT_PAIRS] = (d->n_rot ? d->n_rot : d->head_dim) / 2;
    dims[D_Q] = ow_size_mul(d->n_head, d->head_dim);
    dims[D_KV] = ow_size_mul(d->n_head_kv, d->head_dim);
    if (dims[D_Q] < 0 || dims[D_KV] < 0 || dims[D_Q] > (1 << 24)) {
        PyErr_SetString(PyExc_ValueError, "executor_create: n_head * head_dim is too large");
        return -1;
    }
    if (d->n_rot % 2 || d->n_rot > d->head_dim) {
        PyErr_Format(PyExc_ValueError, "executor_create: n_rot %lld must be even and <= head_dim %lld",
                     (long long)d->n_rot, (long long)d->head_dim);
        return -1;
    }
    if (d->n_head % d->n_head_kv || d->head_dim % 2) {
        PyErr_Format(PyExc_ValueError, "executor_create: n_head %lld must be a multiple of n_head_kv %lld and "
                     "head_dim %lld even", (long long)d->n_head, (long long)d->n_head_kv, (long long)d->head_dim);
        return -1;
    }
    return 0;
}

/* The K and V caches (2 x n_layer x n_seq x n_ctx rows of n_head_kv x head_dim values of kv_type) within the
 * machine's memory: they are reserved at once and filled as positions are used, so a wrong n_ctx would be an OOM
 * kill later. */
static int kv_cache_fits(const ow_model_desc *d, int64_t n_ctx, int64_t n_seq, int kv_type) {
    const int64_t row = ow_kv_bytes_checked(kv_type, ow_size_mul(d->n_head_kv, d->head_dim));
    const int64_t bytes = ow_size_mul(ow_size_mul(ow_size_mul(2 * d->n_layer, n_seq), n_ctx), row);
    const int64_t ram = ow_size_mul(sysconf(_SC_PHYS_PAGES), sysconf(_SC_PAGESIZE));
    if (bytes < 0 || (ram > 0 && bytes > ram)) {
        PyErr_Format(PyExc_ValueError, "executor_create: a KV cache for n_seq %lld x n_ctx %lld needs %lld bytes, "
                     "more than the machine's %lld", (long long)n_seq, (long long)n_ctx, (long long)bytes, (long long)ram);
        return -1;
    }
    return 0;
}

/* executor_create(config, tensors, layers, n_threads, n_ctx, max_batch[, n_seq = 1[, kv_type = f32]]) -> capsule
 *   kv_type = the KV cache's ow_kv_type (0 f32, 1 f16, 2 q8_0; kv_cache.h)
 *   config  = {name: number} (config_fields)
 *   tensors = {name: matrix or vector} (model_fields): a matrix is (buffer, type, rows, cols, row_bytes), a
 *             vector a float32 buffer
 *   layers  = [{name: matrix, vector or number} (layer_fields)] * n_layer; an optional tensor may be absent or None */
static PyObject *py_executor_create(PyObject *self, PyObject *args) {
    (void)self;
    ow_model_desc d = {0};
    PyObject *config, *tensors, *layer_list;
    int n_threads, n_ctx, max_batch, n_seq = 1, kv_type = OW_KV_F32;
    if (!PyArg_ParseTuple(args, "OOO!iii|ii", &config, &tensors, &PyList_Type, &layer_list, &n_threads, &n_ctx,
                          &max_batch, &n_seq, &kv_type))
        return NULL;
    if (n_seq < 1 || n_ctx < 1 || max_batch < 1 || n_threads < 1 || n_threads > 1024) {
        PyErr_SetString(PyExc_ValueError, "executor_create: n_seq, n_ctx, max_batch must be >= 1, n_threads in [1, 1024]");
        return NULL;
    }
    int64_t dims[D_COUNT];
    if (parse_named(config, config_fields, N_FIELDS(config_fields), (char *)&d, NULL, NULL, "executor_create: config") < 0 ||
        config_dims(&d, dims) < 0)
        return NULL;
    if (!ow_kv_type_ok(kv_type, d.head_dim)) {
        PyErr_Format(PyExc_ValueError, "executor_create: KV cache type %d is unknown or needs another head_dim "
                     "(q8_0: a multiple of 32) than %lld", kv_type, (long long)d.head_dim);
        return NULL;
    }
    if (PyList_GET_SIZE(layer_list) != d.n_layer) {
        PyErr_Format(PyExc_ValueError, "executor_create: %zd layer dicts for n_layer = %lld", PyList_GET_SIZE(layer_list),
                     (long long)d.n_layer);
        return NULL;
    }
    const int64_t n_buffers = count_buffers(model_fields, N_FIELDS(model_fields)) +
                              d.n_layer * count_buffers(layer_fields, N_FIELDS(layer_fields));
    holder *h = PyMem_Calloc(1, sizeof(holder) + (size_t)n_buffers * sizeof(Py_buffer));
    ow_layer_desc *layers = PyMem_Calloc((size_t)d.n_layer, sizeof *layers);
    PyObject *capsule = NULL;
    if (!h || !layers) { PyErr_NoMemory(); goto done; }

    if (parse_named(tensors, model_fields, N_FIELDS(model_fields), (char *)&d, dims, h, "executor_create: tensors") < 0)
        goto done;
    if (!d.bidirectional && (!d.output.data || !d.output_norm)) {   /* optional for encoders only */
        PyErr_Format(PyExc_ValueError, "executor_create: tensors: '%s' is missing", d.output_norm ? "output" : "output_norm");
        goto done;
    }
    for (Py_ssize_t l = 0; l < d.n_layer; l++) {
        char where[64];
        snprintf(where, sizeof where, "executor_create: layer %zd", l);
        if (parse_named(PyList_GET_ITEM(layer_list, l), layer_fields, N_FIELDS(layer_fields), (char *)&layers[l], dims,
                        h, where) < 0)
            goto done;
        const ow_layer_desc *L = &layers[l];
        /* a pre-norm layer needs its two RMSNorms; an encoder's post-norm layer its four LayerNorm vectors */
        const char *missing = NULL;
        if (!d.bidirectional) missing = !L->attn_norm ? "attn_norm" : !L->ffn_norm ? "ffn_norm" : NULL;
        else missing = !L->attn_out_norm ? "attn_out_norm" : !L->attn_out_norm_b ? "attn_out_norm_b"
                     : !L->layer_out_norm ? "layer_out_norm" : !L->layer_out_norm_b ? "layer_out_norm_b" : NULL;
        if (missing) {
            PyErr_Format(PyExc_ValueError, "%s: '%s' is missing", where, missing);
            goto done;
        }
        if ((L->bq == NULL) != (L->bk == NULL) || (L->bq == NULL) != (L->bv == NULL)) {
            PyErr_Format(PyExc_ValueError, "%s: biases 'bq', 'bk', 'bv' must be all present or all absent", where);
            goto done;
        }
    }
    d.layers = layers;
    if (kv_cache_fits(&d, n_ctx, n_seq, kv_type) < 0) goto done;
    h->ex = ow_executor_create_kv(&d, n_threads, n_ctx, max_batch, n_seq, kv_type);
    if (!h->ex) {
        PyErr_SetString(PyExc_ValueError, "executor_create: inconsistent model description or out of memory");
        goto done;
    }
    capsule = PyCapsule_New(h, CAPSULE_NAME, capsule_destructor);
    if (capsule) h = NULL;  /* owned by the capsule now */
done:
    holder_free(h);
    PyMem_Free(layers);
    return capsule;
}

static const char *status_message(int64_t status) {
    switch (status) {
    case OW_EXEC_ETOKEN: return "a token id is outside the vocabulary";
    case OW_EXEC_ECTX: return "the step does not fit the context (pos0 + n_tokens > n_ctx)";
    case OW_EXEC_EBATCH: return "more tokens than max_batch";
    case OW_EXEC_EBUSY: return "another thread is running a step on this executor";
    case OW_EXEC_ESEQ: return "a sequence id is outside [0, n_seq)";
    case OW_EXEC_EPOS: return "a position is outside [0, n_ctx) or a sequence's positions are not consecutive";
    default: return "bad arguments";
    }
}

/* A non-empty aligned int32 buffer of at most 2^30 values -> its length, or -1 with an exception set. */
static int int32_count(const Py_buffer *b, const char *what) {
    if (b->len % (Py_ssize_t)sizeof(int32_t) || (uintptr_t)b->buf % sizeof(int32_t) || b->len == 0 ||
        b->len / (Py_ssize_t)sizeof(int32_t) > 1 << 30) {
        PyErr_Format(PyExc_ValueError, "%s must be a non-empty aligned int32 buffer", what);
        return -1;
    }
    return (int)(b->len / (Py_ssize_t)sizeof(int32_t));
}

/* The logits buffer (NULL when None) holds `need` rows of n_vocab aligned float32 values; 0, or -1 with an
 * exception set. */
static int logits_fit(float *out, const Py_buffer *logits, int64_t rows, int64_t n_vocab) {
    const int64_t need = ow_size_mul(rows, n_vocab), bytes = ow_size_mul(need, sizeof(float));
    if (need && (!out || bytes < 0 || logits->len < bytes || (uintptr_t)out % sizeof(float))) {
        PyErr_Format(PyExc_ValueError, "logits buffer must hold %lld aligned float32 values", (long long)need);
        return -1;
    }
    return 0;
}

/* A step's return value as a Python int, or its error status as an exception (NULL). */
static PyObject *step_result(int64_t status) {
    if (status < 0) {
        PyErr_Format(status == OW_EXEC_EBUSY ? PyExc_RuntimeError : PyExc_ValueError, "executor: %s", status_message(status));
        return NULL;
    }
    return PyLong_FromLongLong(status);
}

/* executor_forward(capsule, tokens (int32 buffer), pos0, logits (float32 buffer or None), mode) -> int */
static PyObject *py_executor_forward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *logits_obj;
    Py_buffer tokens = {0}, logits = {0};
    int pos0, mode;
    if (!PyArg_ParseTuple(args, "Oy*iOi", &capsule, &tokens, &pos0, &logits_obj, &mode)) return NULL;
    PyObject *result = NULL;
    holder *h = get_holder(capsule);
    if (!h) goto done;
    const int n = int32_count(&tokens, "tokens");
    if (n < 0) goto done;
    float *out = NULL;
    if (logits_obj != Py_None) {
        if (PyObject_GetBuffer(logits_obj, &logits, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
        out = logits.buf;
    }
    const int64_t rows = mode == OW_LOGITS_ALL ? n : mode == OW_LOGITS_LAST ? 1 : 0;
    if (logits_fit(out, &logits, rows, ow_executor_n_vocab(h->ex)) < 0) goto done;
    int64_t status;
    Py_BEGIN_ALLOW_THREADS
    status = ow_executor_forward(h->ex, tokens.buf, n, pos0, out, mode);
    Py_END_ALLOW_THREADS
    result = step_result(status);
done:
    PyBuffer_Release(&tokens);
    if (logits.obj) PyBuffer_Release(&logits);
    return result;
}

/* executor_forward_batch(capsule, tokens, seq_ids, positions (int32 buffers of one length), logits (float32
 * buffer or None), mode) -> 0. Mode 0 writes one row per sequence of the batch (its last token), 1 every row. */
static PyObject *py_executor_forward_batch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *logits_obj;
    Py_buffer tokens = {0}, seqs = {0}, positions = {0}, logits = {0};
    int mode;
    if (!PyArg_ParseTuple(args, "Oy*y*y*Oi", &capsule, &tokens, &seqs, &positions, &logits_obj, &mode)) return NULL;
    PyObject *result = NULL;
    holder *h = get_holder(capsule);
    if (!h) goto done;
    const int n = int32_count(&tokens, "tokens");
    if (n < 0 || int32_count(&seqs, "seq_ids") < 0 || int32_count(&positions, "positions") < 0) goto done;
    if (seqs.len != tokens.len || positions.len != tokens.len) {
        PyErr_SetString(PyExc_ValueError, "tokens, seq_ids and positions must have the same length");
        goto done;
    }
    if (n > ow_executor_max_batch(h->ex)) {  /* before the quadratic count below */
        PyErr_Format(PyExc_ValueError, "executor: %s", status_message(OW_EXEC_EBATCH));
        goto done;
    }
    float *out = NULL;
    if (logits_obj != Py_None) {
        if (PyObject_GetBuffer(logits_obj, &logits, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
        out = logits.buf;
    }
    int64_t rows = 0;
    if (mode == OW_LOGITS_ALL) rows = n;
    if (mode == OW_LOGITS_LAST) {  /* one per distinct sequence id */
        const int32_t *s = seqs.buf;
        for (int t = 0; t < n; t++) {
            int later = 0;
            for (int p = t + 1; p < n && !later; p++) later = s[p] == s[t];
            rows += !later;
        }
    }
    if (logits_fit(out, &logits, rows, ow_executor_n_vocab(h->ex)) < 0) goto done;
    int64_t status;
    Py_BEGIN_ALLOW_THREADS
    status = ow_executor_forward_batch(h->ex, tokens.buf, seqs.buf, positions.buf, n, out, mode);
    Py_END_ALLOW_THREADS
    result = step_result(status);
done:
    PyBuffer_Release(&tokens);
    PyBuffer_Release(&seqs);
    PyBuffer_Release(&positions);
    if (logits.obj) PyBuffer_Release(&logits);
    return result;
}

/* executor_encode(capsule, tokens (int32 buffer), seq_lens (int32 buffer), hidden (float32 buffer of
 * len(tokens) x n_embd)) -> 0: sequences back to back, each attending to itself only (an encoder step). */
static PyObject *py_executor_encode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    Py_buffer tokens = {0}, lens = {0}, hidden = {0};
    if (!PyArg_ParseTuple(args, "Oy*y*w*", &capsule, &tokens, &lens, &hidden)) return NULL;
    PyObject *result = NULL;
    holder *h = get_holder(capsule);
    if (!h) goto done;
    const int n = int32_count(&tokens, "tokens"), n_seqs = n < 0 ? -1 : int32_count(&lens, "seq_lens");
    if (n < 0 || n_seqs < 0) goto done;
    int64_t total = 0;
    for (int s = 0; s < n_seqs; s++) {
        const int32_t len = ((const int32_t *)lens.buf)[s];
        if (len < 1) { PyErr_SetString(PyExc_ValueError, "executor_encode: every sequence length must be >= 1"); goto done; }
        total += len;
    }
    if (total != n) {
        PyErr_Format(PyExc_ValueError, "executor_encode: sequence lengths add up to %lld, tokens has %d",
                     (long long)total, n);
        goto done;
    }
    const int64_t bytes = ow_size_mul(ow_size_mul(n, ow_executor_n_embd(h->ex)), sizeof(float));
    if (bytes < 0 || hidden.len != bytes || (uintptr_t)hidden.buf % sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "executor_encode: hidden must be %lld aligned bytes (len(tokens) x n_embd float32)",
                     (long long)bytes);
        goto done;
    }
    int64_t status;
    Py_BEGIN_ALLOW_THREADS
    status = ow_executor_encode(h->ex, tokens.buf, lens.buf, n_seqs, hidden.buf);
    Py_END_ALLOW_THREADS
    result = step_result(status);
done:
    PyBuffer_Release(&tokens);
    PyBuffer_Release(&lens);
    PyBuffer_Release(&hidden);
    return result;
}

/* layernorm(out, x, w, b, n_rows, dim, eps, path): the encoder's LayerNorm (ops_layernorm.h) on path 0 =
 * generic, 1 = avx2 (falls back to generic without AVX2); w and b are float32 buffers of dim values. */
static PyObject *py_layernorm(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out = {0}, x = {0}, w = {0}, b = {0};
    long long rows, dim;
    float eps;
    int path;
    if (!PyArg_ParseTuple(args, "w*y*y*y*LLfi", &out, &x, &w, &b, &rows, &dim, &eps, &path)) return NULL;
    PyObject *result = NULL;
    const int64_t total = ow_size_mul(rows, dim);
    if (dim < 1 || rows < 1 || total < 0 || (path != 0 && path != 1)) {
        PyErr_SetString(PyExc_ValueError, "layernorm: bad shape or path");
        goto done;
    }
    if (ow_need(&out, total, 4, "out") < 0 || ow_need(&x, total, 4, "x") < 0 || ow_need(&w, dim, 4, "w") < 0 ||
        ow_need(&b, dim, 4, "b") < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    ow_layernorm_f32_path(out.buf, x.buf, w.buf, b.buf, rows, dim, eps, path);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&out);
    PyBuffer_Release(&x);
    PyBuffer_Release(&w);
    PyBuffer_Release(&b);
    return result;
}

/* executor_configure(capsule, kpath name or None, chunk_rows or 0, profile or -1): change what is given */
static PyObject *py_executor_configure(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    const char *kpath_name = NULL;
    long long chunk_rows;
    int profile;
    if (!PyArg_ParseTuple(args, "OzLi", &capsule, &kpath_name, &chunk_rows, &profile)) return NULL;
    holder *h = get_holder(capsule);
    if (!h) return NULL;
    int kpath = 0;
    if (kpath_name && ow_parse_kpath(kpath_name, &kpath) < 0) return NULL;
    if (chunk_rows < 0 || chunk_rows > (1LL << 30)) {
        PyErr_SetString(PyExc_ValueError, "chunk_rows out of range");
        return NULL;
    }
    if (kpath_name) ow_executor_set_kpath(h->ex, kpath);
    if (chunk_rows) ow_executor_set_chunk_rows(h->ex, chunk_rows);
    if (profile >= 0) ow_executor_set_profile(h->ex, profile);
    Py_RETURN_NONE;
}

/* executor_info(capsule) -> {threads, kpath, chunk_rows, n_ctx, max_batch, n_seq, ops_isa, kv_type} */
static PyObject *py_executor_info(PyObject *self, PyObject *capsule) {
    (void)self;
    holder *h = get_holder(capsule);
    if (!h) return NULL;
    static const char *const kv_names[] = {"f32", "f16", "q8_0"};
    return Py_BuildValue("{s:i,s:s,s:L,s:i,s:i,s:i,s:s,s:s}", "threads", ow_executor_threads(h->ex), "kpath",
                         ow_kpath_name((ow_kpath)ow_executor_kpath(h->ex)), "chunk_rows",
                         (long long)ow_executor_chunk_rows(h->ex), "n_ctx", ow_executor_n_ctx(h->ex), "max_batch",
                         ow_executor_max_batch(h->ex), "n_seq", ow_executor_n_seq(h->ex), "ops_isa", ow_ops_isa(),
                         "kv_type", kv_names[ow_executor_kv_type(h->ex)]);
}

/* executor_profile(capsule, reset) -> {category: seconds, ..., "calls": n, "tokens": n}; reset zeroes it after */
static PyObject *py_executor_profile(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule;
    int reset;
    if (!PyArg_ParseTuple(args, "Op", &capsule, &reset)) return NULL;
    holder *h = get_holder(capsule);
    if (!h) return NULL;
    ow_exec_profile p;
    ow_executor_profile(h->ex, &p);
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    for (int c = 0; c < OW_PROF_COUNT; c++) {
        PyObject *v = PyFloat_FromDouble((double)p.ns[c] * 1e-9);
        if (!v || PyDict_SetItemString(out, ow_prof_name((ow_prof_cat)c), v) < 0) { Py_XDECREF(v); Py_DECREF(out); return NULL; }
        Py_DECREF(v);
    }
    PyObject *calls = PyLong_FromLongLong(p.calls), *tokens = PyLong_FromLongLong(p.tokens);
    const int bad = !calls || !tokens || PyDict_SetItemString(out, "calls", calls) < 0 ||
                    PyDict_SetItemString(out, "tokens", tokens) < 0;
    Py_XDECREF(calls);
    Py_XDECREF(tokens);
    if (bad) { Py_DECREF(out); return NULL; }
    if (reset) ow_executor_reset_profile(h->ex);
    return out;
}

/* dequantize_rows(type, raw, row_bytes, n_cols, ids (int32 buffer), out (float32, len(ids) * n_cols)) */
static PyObject *py_dequantize_rows(PyObject *self, PyObject *args) {
    (void)self;
    int type;
    long long row_bytes, n_cols;
    Py_buffer raw, ids, out;
    if (!PyArg_ParseTuple(args, "iy*LLy*w*", &type, &raw, &row_bytes, &n_cols, &ids, &out)) return NULL;
    PyObject *result = NULL;
    const int64_t bs = ow_type_block_size((ow_ggml_type)type);
    const Py_ssize_t n_ids = ids.len / (Py_ssize_t)sizeof(int32_t);
    const ow_type_traits_t *traits = ow_type_traits(type);
    if (!traits || !traits->to_float || bs <= 0 || n_cols < 1 || n_cols > OW_MAX_ROW_ELEMS || n_cols % bs ||
        row_bytes < 1 || row_bytes != ow_size_mul(n_cols / bs, (int64_t)ow_type_block_bytes((ow_ggml_type)type))) {
        PyErr_SetString(PyExc_ValueError, "dequantize_rows: unsupported type or inconsistent row size");
        goto done;
    }
    if (ids.len % (Py_ssize_t)sizeof(int32_t) || (uintptr_t)ids.buf % sizeof(int32_t) ||
        out.len != ow_size_mul(ow_size_mul(n_ids, n_cols), sizeof(float)) || (uintptr_t)out.buf % sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "dequantize_rows: ids must be int32 and out hold len(ids) * n_cols float32");
        goto done;
    }
    const int32_t *id = ids.buf;
    const long long n_rows = raw.len / row_bytes;
    for (Py_ssize_t i = 0; i < n_ids; i++) {
        if (id[i] < 0 || id[i] >= n_rows) {
            PyErr_Format(PyExc_ValueError, "dequantize_rows: row %d outside [0, %lld)", id[i], n_rows);
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n_ids; i++)
        ow_dequantize_row(type, (const uint8_t *)raw.buf + (size_t)id[i] * (size_t)row_bytes, (float *)out.buf + i * n_cols, n_cols);
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&raw);
    PyBuffer_Release(&ids);
    PyBuffer_Release(&out);
    return result;
}

PyMethodDef ow_executor_methods[] = {
    {"executor_create", py_executor_create, METH_VARARGS,
     "executor_create(config, tensors, layers, n_threads, n_ctx, max_batch[, n_seq]) -> executor capsule"},
    {"executor_forward_batch", py_executor_forward_batch, METH_VARARGS,
     "executor_forward_batch(executor, tokens_int32, seq_ids_int32, positions_int32, logits_or_None, mode) -> 0"},
    {"executor_forward", py_executor_forward, METH_VARARGS,
     "executor_forward(executor, tokens_int32, pos0, logits_or_None, mode) -> 0 or the greedy token id"},
    {"layernorm", py_layernorm, METH_VARARGS,
     "layernorm(out, x, w, b, n_rows, dim, eps, path 0 generic | 1 avx2): LayerNorm with bias"},
    {"executor_encode", py_executor_encode, METH_VARARGS,
     "executor_encode(executor, tokens_int32, seq_lens_int32, hidden_float32) -> 0: an encoder step"},
    {"executor_configure", py_executor_configure, METH_VARARGS,
     "executor_configure(executor, kpath_or_None, chunk_rows_or_0, profile_or_-1)"},
    {"executor_info", py_executor_info, METH_O, "executor_info(executor) -> dict"},
    {"executor_profile", py_executor_profile, METH_VARARGS,
     "executor_profile(executor, reset) -> {category: seconds, calls, tokens}"},
    {"dequantize_rows", py_dequantize_rows, METH_VARARGS,
     "dequantize_rows(type, raw, row_bytes, n_cols, ids_int32, out_float32): the executor's embedding gather"},
    {NULL, NULL, 0, NULL},
};
