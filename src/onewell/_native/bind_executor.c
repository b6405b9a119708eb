/* Python entry of the executor (executor.h). onewell/runtime/plan.py validates the model description and
 * onewell/runtime/native.py every step's arguments first, with readable messages; the checks here repeat what
 * keeps memory safe. The executor lives in a capsule that also holds the Py_buffers of every weight, so the
 * weights (views of the GGUF mapping) stay alive as long as the executor. Steps run with the GIL released. */
#include "bindings.h"

#include <string.h>

#include "executor.h"
#include "kernels/matvec.h"
#include "kernels/type_traits.h"
#include "ops.h"

#define CAPSULE_NAME "onewell.executor"
#define MATS_PER_LAYER 7   /* wq wk wv wo w_gate w_up w_down */
#define VECS_PER_LAYER 5   /* attn_norm ffn_norm bq bk bv */

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

/* (buffer, type, rows, cols, row_bytes) -> m, keeping the buffer in h */
static int parse_matrix(PyObject *item, holder *h, ow_matrix *m) {
    PyObject *obj;
    int type;
    long long rows, cols, row_bytes;
    if (!PyArg_ParseTuple(item, "OiLLL", &obj, &type, &rows, &cols, &row_bytes)) return -1;
    Py_buffer *b = &h->buffers[h->n_buffers];
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS) < 0) return -1;
    h->n_buffers++;
    if (rows < 1 || cols < 1 || row_bytes < 1 || (unsigned long long)b->len < (unsigned long long)rows * (unsigned long long)row_bytes) {
        PyErr_Format(PyExc_ValueError, "weight buffer of %zd bytes is too small for %lld rows of %lld bytes", b->len, rows, row_bytes);
        return -1;
    }
    *m = (ow_matrix){(const uint8_t *)b->buf, type, rows, cols, (size_t)row_bytes};
    return 0;
}

/* float32 buffer of exactly n elements (or None when allowed) -> pointer, keeping the buffer in h */
static int parse_vector(PyObject *obj, Py_ssize_t n, int optional, holder *h, const float **out) {
    if (obj == Py_None && optional) { *out = NULL; return 0; }
    Py_buffer *b = &h->buffers[h->n_buffers];
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS) < 0) return -1;
    h->n_buffers++;
    if (b->len != n * (Py_ssize_t)sizeof(float) || (uintptr_t)b->buf % sizeof(float)) {
        PyErr_Format(PyExc_ValueError, "vector buffer of %zd bytes: need %zd aligned float32 values", b->len, n);
        return -1;
    }
    *out = b->buf;
    return 0;
}

/* executor_create(config, matrices, vectors, n_threads, n_ctx, max_batch[, n_seq = 1]) -> capsule
 *   config   = (n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, rope_theta, rms_eps, rope_style)
 *   matrices = [token_embd, output] + per layer [wq, wk, wv, wo, w_gate, w_up, w_down], each
 *              (buffer, type, rows, cols, row_bytes)
 *   vectors  = [output_norm] + per layer [attn_norm, ffn_norm, bq, bk, bv] (float32 buffers; biases may be None) */
static PyObject *py_executor_create(PyObject *self, PyObject *args) {
    (void)self;
    ow_model_desc d = {0};
    PyObject *mats, *vecs;
    int n_threads, n_ctx, max_batch, n_seq = 1;
    if (!PyArg_ParseTuple(args, "(LLLLLLLffi)O!O!iii|i", &d.n_vocab, &d.n_embd, &d.n_layer, &d.n_head, &d.n_head_kv,
                          &d.head_dim, &d.n_ff, &d.rope_theta, &d.rms_eps, &d.rope_style, &PyList_Type, &mats,
                          &PyList_Type, &vecs, &n_threads, &n_ctx, &max_batch, &n_seq))
        return NULL;
    if (n_seq < 1) {
        PyErr_SetString(PyExc_ValueError, "executor_create: n_seq must be at least 1");
        return NULL;
    }
    if (d.n_layer < 1 || d.n_layer > 100000 || d.head_dim < 1 || d.n_head < 1 || d.n_head_kv < 1) {
        PyErr_SetString(PyExc_ValueError, "executor_create: bad model dimensions");
        return NULL;
    }
    if (PyList_GET_SIZE(mats) != 2 + MATS_PER_LAYER * d.n_layer || PyList_GET_SIZE(vecs) != 1 + VECS_PER_LAYER * d.n_layer) {
        PyErr_SetString(PyExc_ValueError, "executor_create: matrix/vector lists do not match n_layer");
        return NULL;
    }
    const Py_ssize_t n_buffers = PyList_GET_SIZE(mats) + PyList_GET_SIZE(vecs);
    holder *h = PyMem_Calloc(1, sizeof(holder) + (size_t)n_buffers * sizeof(Py_buffer));
    ow_layer_desc *layers = PyMem_Calloc((size_t)d.n_layer, sizeof *layers);
    PyObject *capsule = NULL;
    if (!h || !layers) { PyErr_NoMemory(); goto done; }

    if (parse_matrix(PyList_GET_ITEM(mats, 0), h, &d.token_embd) < 0 || parse_matrix(PyList_GET_ITEM(mats, 1), h, &d.output) < 0 ||
        parse_vector(PyList_GET_ITEM(vecs, 0), (Py_ssize_t)d.n_embd, 0, h, &d.output_norm) < 0)
        goto done;
    const Py_ssize_t nq = (Py_ssize_t)(d.n_head * d.head_dim), nkv = (Py_ssize_t)(d.n_head_kv * d.head_dim);
    for (Py_ssize_t l = 0; l < d.n_layer; l++) {
        ow_layer_desc *L = &layers[l];
        ow_matrix *m[MATS_PER_LAYER] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (int i = 0; i < MATS_PER_LAYER; i++)
            if (parse_matrix(PyList_GET_ITEM(mats, 2 + MATS_PER_LAYER * l + i), h, m[i]) < 0) goto done;
        PyObject *const *v = &PyList_GET_ITEM(vecs, 1 + VECS_PER_LAYER * l);
        if (parse_vector(v[0], (Py_ssize_t)d.n_embd, 0, h, &L->attn_norm) < 0 || parse_vector(v[1], (Py_ssize_t)d.n_embd, 0, h, &L->ffn_norm) < 0 ||
            parse_vector(v[2], nq, 1, h, &L->bq) < 0 || parse_vector(v[3], nkv, 1, h, &L->bk) < 0 ||
            parse_vector(v[4], nkv, 1, h, &L->bv) < 0)
            goto done;
    }
    d.layers = layers;
    h->ex = ow_executor_create_multi(&d, n_threads, n_ctx, max_batch, n_seq);
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

/* The logits buffer (NULL when None) holds `need` aligned float32 values; 0, or -1 with an exception set. */
static int logits_fit(float *out, const Py_buffer *logits, int64_t need) {
    if (need && (!out || logits->len < need * (Py_ssize_t)sizeof(float) || (uintptr_t)out % sizeof(float))) {
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
    const int64_t need = mode == OW_LOGITS_ALL ? (int64_t)n * ow_executor_n_vocab(h->ex)
                         : mode == OW_LOGITS_LAST ? ow_executor_n_vocab(h->ex) : 0;
    if (logits_fit(out, &logits, need) < 0) goto done;
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
    const int64_t need = rows * ow_executor_n_vocab(h->ex);
    if (logits_fit(out, &logits, need) < 0) goto done;
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

static int parse_kpath(const char *name, int *out) {
    for (int p = 0; p < OW_KPATH_COUNT; p++) {
        if (strcmp(name, ow_kpath_name((ow_kpath)p))) continue;
        if (!ow_kpath_available((ow_kpath)p)) {
            PyErr_Format(PyExc_ValueError, "kernel path %s is not available on this CPU", name);
            return -1;
        }
        *out = p;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "unknown kernel path %s", name);
    return -1;
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
    if (kpath_name && parse_kpath(kpath_name, &kpath) < 0) return NULL;
    if (chunk_rows < 0 || chunk_rows > (1LL << 30)) {
        PyErr_SetString(PyExc_ValueError, "chunk_rows out of range");
        return NULL;
    }
    if (kpath_name) ow_executor_set_kpath(h->ex, kpath);
    if (chunk_rows) ow_executor_set_chunk_rows(h->ex, chunk_rows);
    if (profile >= 0) ow_executor_set_profile(h->ex, profile);
    Py_RETURN_NONE;
}

/* executor_info(capsule) -> {threads, kpath, chunk_rows, n_ctx, max_batch, n_seq, ops_isa} */
static PyObject *py_executor_info(PyObject *self, PyObject *capsule) {
    (void)self;
    holder *h = get_holder(capsule);
    if (!h) return NULL;
    return Py_BuildValue("{s:i,s:s,s:L,s:i,s:i,s:i,s:s}", "threads", ow_executor_threads(h->ex), "kpath",
                         ow_kpath_name((ow_kpath)ow_executor_kpath(h->ex)), "chunk_rows",
                         (long long)ow_executor_chunk_rows(h->ex), "n_ctx", ow_executor_n_ctx(h->ex), "max_batch",
                         ow_executor_max_batch(h->ex), "n_seq", ow_executor_n_seq(h->ex), "ops_isa", ow_ops_isa());
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
    if (!traits || !traits->to_float || bs <= 0 || n_cols < 1 || n_cols % bs ||
        (size_t)row_bytes != (size_t)(n_cols / bs) * ow_type_block_bytes((ow_ggml_type)type)) {
        PyErr_SetString(PyExc_ValueError, "dequantize_rows: unsupported type or inconsistent row size");
        goto done;
    }
    if (ids.len % (Py_ssize_t)sizeof(int32_t) || (uintptr_t)ids.buf % sizeof(int32_t) ||
        out.len != n_ids * n_cols * (Py_ssize_t)sizeof(float) || (uintptr_t)out.buf % sizeof(float)) {
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
     "executor_create(config, matrices, vectors, n_threads, n_ctx, max_batch[, n_seq]) -> executor capsule"},
    {"executor_forward_batch", py_executor_forward_batch, METH_VARARGS,
     "executor_forward_batch(executor, tokens_int32, seq_ids_int32, positions_int32, logits_or_None, mode) -> 0"},
    {"executor_forward", py_executor_forward, METH_VARARGS,
     "executor_forward(executor, tokens_int32, pos0, logits_or_None, mode) -> 0 or the greedy token id"},
    {"executor_configure", py_executor_configure, METH_VARARGS,
     "executor_configure(executor, kpath_or_None, chunk_rows_or_0, profile_or_-1)"},
    {"executor_info", py_executor_info, METH_O, "executor_info(executor) -> dict"},
    {"executor_profile", py_executor_profile, METH_VARARGS,
     "executor_profile(executor, reset) -> {category: seconds, calls, tokens}"},
    {"dequantize_rows", py_dequantize_rows, METH_VARARGS,
     "dequantize_rows(type, raw, row_bytes, n_cols, ids_int32, out_float32): the executor's embedding gather"},
    {NULL, NULL, 0, NULL},
};
