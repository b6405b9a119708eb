/* Python entry of the quantized matvec kernels (kernels/matvec.h). onewell/runtime/native_kernels.py validates
 * arguments with readable messages first; the checks here repeat the ones that keep memory safe, so a wrong
 * call from anywhere gets a ValueError instead of a crash. The GIL is released while kernels run. */
#include "bindings.h"

#include <string.h>
#include <time.h>

#include "kernels/matvec.h"
#include "kernels/type_traits.h"
#include "kv_cache.h"

int ow_parse_kpath(const char *name, int *out) {
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

static int parse_path(const char *name, ow_kpath *out) {
    int p;
    if (ow_parse_kpath(name, &p) < 0) return -1;
    *out = (ow_kpath)p;
    return 0;
}

static int is_act_type(int at) {
    const ow_type_traits_t *t = ow_type_traits(at);
    return t && t->from_float[OW_KPATH_GENERIC].fn;
}

/* n_cols must be a positive whole number of blocks of type t, at most OW_MAX_ROW_ELEMS */
static int check_cols(int t, Py_ssize_t n_cols) {
    const int64_t bs = ow_type_block_size((ow_ggml_type)t);
    if (n_cols > OW_MAX_ROW_ELEMS) {
        PyErr_Format(PyExc_ValueError, "n_cols=%zd is above the limit of %lld", n_cols, (long long)OW_MAX_ROW_ELEMS);
        return -1;
    }
    if (n_cols <= 0 || bs == 0 || n_cols % bs) {
        PyErr_Format(PyExc_ValueError, "n_cols=%zd is not a positive multiple of the block size %lld", n_cols, (long long)bs);
        return -1;
    }
    return 0;
}

static int check_aligned(const void *p, size_t align, const char *what) {
    if ((uintptr_t)p % align) {
        PyErr_Format(PyExc_ValueError, "%s must be aligned to %zu bytes", what, align);
        return -1;
    }
    return 0;
}

static PyObject *py_kernel_paths(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (int p = 0; p < OW_KPATH_COUNT; p++) {
        if (!ow_kpath_available((ow_kpath)p)) continue;
        PyObject *name = PyUnicode_FromString(ow_kpath_name((ow_kpath)p));
        if (!name || PyList_Append(out, name) < 0) { Py_XDECREF(name); Py_DECREF(out); return NULL; }
        Py_DECREF(name);
    }
    return out;
}

static PyObject *py_kernel_default_path(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyUnicode_FromString(ow_kpath_name(ow_kpath_for_isa(ow_isa_best())));
}

static PyObject *py_act_type_for(PyObject *self, PyObject *args) {
    (void)self;
    int wt;
    if (!PyArg_ParseTuple(args, "i", &wt)) return NULL;
    return PyLong_FromLong(ow_wtype_supported(wt) ? (long)ow_act_type_for((ow_wtype)wt) : -1L);
}

/* quantize_act(act_type, x, n_cols, n_vec, out, path): n_vec rows of n_cols float32 -> n_vec packed rows */
static PyObject *py_quantize_act(PyObject *self, PyObject *args) {
    (void)self;
    int at;
    Py_ssize_t n_cols, n_vec;
    Py_buffer x, out;
    const char *path_name;
    if (!PyArg_ParseTuple(args, "iy*nnw*s", &at, &x, &n_cols, &n_vec, &out, &path_name)) return NULL;
    PyObject *result = NULL;
    ow_kpath path;
    if (parse_path(path_name, &path) < 0) goto done;
    if (!is_act_type(at)) { PyErr_Format(PyExc_ValueError, "type %d is not an activation type", at); goto done; }
    if (check_cols(at, n_cols) < 0) goto done;
    if (n_vec < 1) { PyErr_SetString(PyExc_ValueError, "n_vec must be >= 1"); goto done; }
    const size_t row_bytes = ow_act_row_bytes((ow_atype)at, n_cols);
    if (ow_need(&x, ow_size_mul(n_cols, n_vec), sizeof(float), "quantize_act: x") < 0 ||
        ow_need(&out, n_vec, (int64_t)row_bytes, "quantize_act: out") < 0)
        goto done;
    if (check_aligned(x.buf, sizeof(float), "activation input") < 0) goto done;
    if (at == OW_TYPE_F32 && check_aligned(out.buf, sizeof(float), "F32 activation output") < 0) goto done;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t v = 0; v < n_vec; v++)
        ow_quantize_act_path((ow_atype)at, (const float *)x.buf + v * n_cols, (uint8_t *)out.buf + (size_t)v * row_bytes,
                             n_cols, path);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

/* kv_store(kv_type, x, head_dim, n_rows, out, path): n_rows rows of head_dim float32 -> the KV cache's bytes
 * (kv_cache.h), as the executor stores them; f16 follows the ops ISA (set_ops_isa), q8_0 the kernel path. */
static PyObject *py_kv_store(PyObject *self, PyObject *args) {
    (void)self;
    int kv_type;
    long long hd, n_rows;
    Py_buffer x, out;
    const char *path_name;
    if (!PyArg_ParseTuple(args, "iy*LLw*s", &kv_type, &x, &hd, &n_rows, &out, &path_name)) return NULL;
    PyObject *result = NULL;
    ow_kpath path;
    if (parse_path(path_name, &path) < 0) goto done;
    if (hd < 1 || hd > OW_MAX_ROW_ELEMS || n_rows < 1 || !ow_kv_type_ok(kv_type, hd)) {
        PyErr_Format(PyExc_ValueError, "kv_store: KV type %d, head_dim %lld, n_rows %lld: no such type, or a size "
                     "it does not take (q8_0: head_dim a multiple of 32)", kv_type, hd, n_rows);
        goto done;
    }
    const int64_t row_bytes = ow_kv_bytes_checked(kv_type, hd);
    if (ow_need(&x, ow_size_mul(hd, n_rows), sizeof(float), "kv_store: x") < 0 ||
        ow_need(&out, n_rows, row_bytes, "kv_store: out") < 0)
        goto done;
    if (check_aligned(x.buf, sizeof(float), "kv_store input") < 0) goto done;
    if (kv_type != OW_KV_Q8_0 && check_aligned(out.buf, kv_type == OW_KV_F16 ? 2 : 4, "kv_store output") < 0) goto done;
    Py_BEGIN_ALLOW_THREADS
    for (long long r = 0; r < n_rows; r++)
        ow_kv_store((ow_kv_type)kv_type, (uint8_t *)out.buf + r * row_bytes, (const float *)x.buf + r * hd, hd, path);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return result;
}

typedef struct {
    int wt;
    Py_buffer w, xq, y;
    Py_ssize_t row_bytes, n_cols, xq_stride, n_vec, y_stride, r0, r1;
    ow_kpath path;
} matmul_call;

/* every size and pointer ow_matmul_rows_path will touch, checked against the buffers */
static int check_matmul(const matmul_call *c) {
    if (!ow_wtype_supported(c->wt)) { PyErr_Format(PyExc_ValueError, "weight type %d has no kernel", c->wt); return -1; }
    if (check_cols(c->wt, c->n_cols) < 0) return -1;
    /* the packed size; Q8_0 R16 and Q4_1 R16 rows may be padded to any longer stride */
    const size_t packed =
        (size_t)(c->n_cols / ow_type_block_size((ow_ggml_type)c->wt)) * ow_type_block_bytes((ow_ggml_type)c->wt);
    if (c->row_bytes < 0 || !ow_row_bytes_ok((ow_wtype)c->wt, c->n_cols, (size_t)c->row_bytes)) {
        PyErr_Format(PyExc_ValueError, "row_bytes=%zd, but a row of %zd elements takes %s%zu bytes", c->row_bytes,
                     c->n_cols, ow_type_traits(c->wt)->repacked ? "at least " : "", packed);
        return -1;
    }
    const size_t row_bytes = (size_t)c->row_bytes;
    if (c->r0 < 0 || c->r1 < c->r0) { PyErr_SetString(PyExc_ValueError, "need 0 <= r0 <= r1"); return -1; }
    if (ow_need_bytes(&c->w, ow_size_span(c->r1, (int64_t)row_bytes, (int64_t)packed), "weight buffer (r1 rows)") < 0)
        return -1;
    if (c->n_vec < 1) { PyErr_SetString(PyExc_ValueError, "n_vec must be >= 1"); return -1; }
    const ow_atype at = ow_act_type_for((ow_wtype)c->wt);
    const size_t act_bytes = ow_act_row_bytes(at, c->n_cols);
    if (c->xq_stride < 0 || (c->n_vec > 1 && (size_t)c->xq_stride < act_bytes)) {
        PyErr_SetString(PyExc_ValueError, "xq_stride is negative or shorter than one activation vector");
        return -1;
    }
    if (ow_need_bytes(&c->xq, ow_size_span(c->n_vec, c->xq_stride, (int64_t)act_bytes), "activation buffer") < 0)
        return -1;
    if (at == OW_TYPE_F32 || at == OW_TYPE_F16) {
        const size_t elem = at == OW_TYPE_F32 ? 4 : 2;
        if (check_aligned(c->xq.buf, elem, "float activations") < 0) return -1;
        if (c->xq_stride % (Py_ssize_t)elem) { PyErr_SetString(PyExc_ValueError, "xq_stride breaks element alignment"); return -1; }
    }
    if (c->y_stride < 0 || (c->n_vec > 1 && c->y_stride < c->r1)) {
        PyErr_SetString(PyExc_ValueError, "y_stride is negative or shorter than r1");
        return -1;
    }
    if (ow_need(&c->y, ow_size_span(c->n_vec, c->y_stride, c->r1), sizeof(float), "output buffer") < 0) return -1;
    return check_aligned(c->y.buf, sizeof(float), "output");
}

static void run_matmul(const matmul_call *c) {
    ow_matmul_rows_path((ow_wtype)c->wt, c->w.buf, (size_t)c->row_bytes, c->n_cols, c->xq.buf, (size_t)c->xq_stride,
                        (int)c->n_vec, c->y.buf, c->y_stride, c->r0, c->r1, c->path);
}

static int parse_matmul(PyObject *args, matmul_call *c, Py_ssize_t *n_iter) {
    const char *path_name;
    const int ok = n_iter
        ? PyArg_ParseTuple(args, "iy*nny*nnw*nnnsn", &c->wt, &c->w, &c->row_bytes, &c->n_cols, &c->xq, &c->xq_stride,
                           &c->n_vec, &c->y, &c->y_stride, &c->r0, &c->r1, &path_name, n_iter)
        : PyArg_ParseTuple(args, "iy*nny*nnw*nnns", &c->wt, &c->w, &c->row_bytes, &c->n_cols, &c->xq, &c->xq_stride,
                           &c->n_vec, &c->y, &c->y_stride, &c->r0, &c->r1, &path_name);
    if (!ok) return -1;
    if (c->n_vec > 1 << 20) { PyErr_SetString(PyExc_ValueError, "n_vec too large"); return -1; }
    if (parse_path(path_name, &c->path) < 0 || check_matmul(c) < 0) return -1;
    return 0;
}

static void release_matmul(matmul_call *c) {
    if (c->w.obj) PyBuffer_Release(&c->w);
    if (c->xq.obj) PyBuffer_Release(&c->xq);
    if (c->y.obj) PyBuffer_Release(&c->y);
}

/* matmul(wt, w, row_bytes, n_cols, xq, xq_stride, n_vec, y, y_stride, r0, r1, path) */
static PyObject *py_matmul(PyObject *self, PyObject *args) {
    (void)self;
    matmul_call c = {0};
    PyObject *result = NULL;
    if (parse_matmul(args, &c, NULL) == 0) {
        Py_BEGIN_ALLOW_THREADS
        run_matmul(&c);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    release_matmul(&c);
    return result;
}

/* matmul_bench(<matmul args>, n_iter) -> seconds for n_iter back-to-back runs (for tuning on a quiet machine) */
static PyObject *py_matmul_bench(PyObject *self, PyObject *args) {
    (void)self;
    matmul_call c = {0};
    Py_ssize_t n_iter = 0;
    PyObject *result = NULL;
    if (parse_matmul(args, &c, &n_iter) == 0) {
        if (n_iter < 1 || n_iter > (1 << 24)) {
            PyErr_SetString(PyExc_ValueError, "n_iter must be 1 .. 2^24");
        } else {
            struct timespec t0, t1;
            Py_BEGIN_ALLOW_THREADS
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (Py_ssize_t i = 0; i < n_iter; i++) run_matmul(&c);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            Py_END_ALLOW_THREADS
            result = PyFloat_FromDouble((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        }
    }
    release_matmul(&c);
    return result;
}

/* 1 if an own layout's row says it is built from ggml type st (repack_from: Q8_0 -> Q8_0 R8, Q4_0 -> Q4_0 R8 ...) */
static int has_built_layout(int st) {
    for (int id = OW_OWN_TYPE_BASE; id < OW_OWN_TYPE_BASE + OW_OWN_TYPE_SLOTS; id++) {
        const ow_type_traits_t *d = ow_type_traits(id);
        if (d && d->repack && d->repack_from == st) return 1;
    }
    return 0;
}

/* repack_r16(src_type, src, src_row_bytes, rows, n_cols, dst, dst_stride[, dst_type]): rows of a type with a
 * repacked layout (the table's repack_to: Q8_0 and Q5_0 -> Q8_0 R16, Q4_1 -> Q4_1 R16) -> rows of that layout, or of
 * dst_type, an own layout whose row says it is built from src_type (repack_from: Q8_0 -> Q8_0 R8; Q4_0, which has
 * no repack_to, only so) */
static PyObject *py_repack_r16(PyObject *self, PyObject *args) {
    (void)self;
    int st, dt = -1;
    Py_buffer src, dst;
    Py_ssize_t src_row_bytes, rows, n_cols, dst_stride;
    if (!PyArg_ParseTuple(args, "iy*nnnw*n|i", &st, &src, &src_row_bytes, &rows, &n_cols, &dst, &dst_stride, &dt))
        return NULL;
    PyObject *result = NULL;
    const ow_type_traits_t *t = ow_type_traits(st);
    ow_repack_fn repack = t && !t->repacked ? t->repack : NULL;
    if (t && !t->repacked && dt != -1 && dt != t->repack_to) {   /* another layout of the same source */
        const ow_type_traits_t *d = ow_type_traits(dt);
        repack = d && d->repacked && d->repack && d->repack_from == st ? d->repack : NULL;
        if (!repack) {
            PyErr_Format(PyExc_ValueError, "repack_r16: type %d has no layout %d", st, dt);
            goto done;
        }
    }
    if (dt == -1 && t) dt = t->repack_to;
    if (!repack) {
        char names[128] = "";
        for (int id = 0; id < OW_GGML_TYPE_SLOTS; id++) {
            const ow_type_traits_t *r = ow_type_traits(id);
            if (!r || (!r->repack && !has_built_layout(id))) continue;
            if (names[0]) strncat(names, ", ", sizeof names - strlen(names) - 1);
            strncat(names, r->name, sizeof names - strlen(names) - 1);
        }
        PyErr_Format(PyExc_ValueError, "repack_r16: type %d is neither of the types with a repacked layout (%s)", st,
                     names);
        goto done;
    }
    if (check_cols(st, n_cols) < 0) goto done;
    const size_t blocks = (size_t)(n_cols / t->block_size);
    const size_t packed = blocks * t->block_bytes;
    if (rows < 0 || src_row_bytes < (Py_ssize_t)packed ||
        dst_stride < (Py_ssize_t)(blocks * ow_type_block_bytes((ow_ggml_type)dt))) {
        PyErr_SetString(PyExc_ValueError, "repack_r16: negative rows, or a row size below the packed size");
        goto done;
    }
    if (ow_need_bytes(&src, ow_size_span(rows, src_row_bytes, (int64_t)packed), "repack_r16: src") < 0 ||
        ow_need(&dst, rows, dst_stride, "repack_r16: dst") < 0)
        goto done;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = repack(src.buf, (size_t)src_row_bytes, rows, n_cols, dst.buf, (size_t)dst_stride);
    Py_END_ALLOW_THREADS
    if (status) { PyErr_SetString(PyExc_ValueError, "repack_r16: inconsistent sizes"); goto done; }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

static PyObject *py_r16_row_stride(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t n_cols;
    if (!PyArg_ParseTuple(args, "n", &n_cols)) return NULL;
    if (check_cols(OW_TYPE_Q8_0_R16, n_cols) < 0) return NULL;
    return PyLong_FromSize_t(ow_q8_0_r16_row_stride(n_cols));
}

/* A byte-count knob: knob(bytes, -1 or -2) -> the setting before the call; -1 only reads it, -2 goes back to the
 * default; bytes 0 .. 16 MiB */
static PyObject *bytes_knob(PyObject *args, const char *usage, size_t (*get)(void), void (*set)(size_t),
                            void (*reset)(void)) {
    long long bytes;
    if (!PyArg_ParseTuple(args, "L", &bytes)) return NULL;
    if (bytes < -2 || bytes > (1LL << 24)) {
        PyErr_SetString(PyExc_ValueError, usage);
        return NULL;
    }
    const size_t before = get();
    if (bytes >= 0) set((size_t)bytes);
    if (bytes == -2) reset();
    return PyLong_FromSize_t(before);
}

/* r16_prefetch(bytes, -1 or -2) -> the distance in effect before the call; -1 only reads it, -2 goes back to this
 * CPU's defaults (one for F16 streams, one for the others: ow_default_f16_prefetch, ow_default_prefetch) */
static PyObject *py_r16_prefetch(PyObject *self, PyObject *args) {
    (void)self;
    return bytes_knob(args, "r16_prefetch: bytes must be 0 .. 16 MiB, -1 (read) or -2 (the defaults)",
                      ow_r16_prefetch, ow_r16_set_prefetch, ow_r16_reset_prefetch);
}

/* cpu_identity() -> {"vendor": "amd" | "intel" | "", "family", "model", "default_prefetch", "default_f16_prefetch",
 * "default_wide_tiles", "default_float_gemm", "l1d_kib", "default_gemm_overlap", "default_rows_gemm",
 * "default_rows_gemm_avx2", "default_rows_gemm_avx512", "default_r8"}
 * (x86; zeros elsewhere) */
static PyObject *py_cpu_identity(PyObject *self, PyObject *args) {
    (void)self;
    (void)args;
    const ow_cpu_features *f = ow_cpu();
    return Py_BuildValue("{s:s,s:i,s:i,s:n,s:n,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "vendor", f->amd ? "amd" : (f->intel ? "intel" : ""),
                         "family", f->family, "model", f->model, "default_prefetch",
                         (Py_ssize_t)ow_default_prefetch(f), "default_f16_prefetch",
                         (Py_ssize_t)ow_default_f16_prefetch(f), "default_wide_tiles", ow_default_wide_tiles(f),
                         "default_float_gemm", ow_default_float_gemm(f), "l1d_kib", f->l1d_kib,
                         "default_gemm_overlap", ow_default_gemm_overlap(f), "default_rows_gemm", ow_default_rows_gemm(f, OW_ROWS_GEMM_AVX2_VNNI),
                         "default_rows_gemm_avx2", ow_default_rows_gemm(f, OW_ROWS_GEMM_AVX2),
                         "default_rows_gemm_avx512", ow_default_rows_gemm(f, OW_ROWS_GEMM_AVX512),
                         "default_r8", ow_default_r8(f));
}

/* default_prefetch(vendor, family, model, avx512f=0) -> the distance ow_default_prefetch picks for such a CPU */
static PyObject *py_default_prefetch(PyObject *self, PyObject *args) {
    (void)self;
    const char *vendor;
    int family, model, avx512f = 0;
    if (!PyArg_ParseTuple(args, "sii|p", &vendor, &family, &model, &avx512f)) return NULL;
    ow_cpu_features f = {0};
    f.amd = strcmp(vendor, "amd") == 0;
    f.intel = strcmp(vendor, "intel") == 0;
    f.family = family;
    f.model = model;
    f.avx512f = avx512f;
    return PyLong_FromSize_t(ow_default_prefetch(&f));
}

/* An on/off knob: knob(0, 1 or -1) -> the setting before the call; -1 only reads it */
static PyObject *switch_knob(PyObject *args, const char *usage, int (*get)(void), void (*set)(int)) {
    int on;
    if (!PyArg_ParseTuple(args, "i", &on)) return NULL;
    if (on < -1 || on > 1) {
        PyErr_SetString(PyExc_ValueError, usage);
        return NULL;
    }
    const int before = get();
    if (on >= 0) set(on);
    return PyLong_FromLong(before);
}

static PyObject *py_r16_row_stream(PyObject *self, PyObject *args) {
    (void)self;
    return switch_knob(args, "r16_row_stream: 0 (4-row tiles), 1 (rows one at a time) or -1 (read)",
                       ow_r16_row_stream, ow_r16_set_row_stream);
}

static PyObject *py_wide_tiles(PyObject *self, PyObject *args) {
    (void)self;
    return switch_knob(args, "wide_tiles: 0 (one row per ymm), 1 (two rows per zmm) or -1 (read)", ow_wide_tiles,
                       ow_set_wide_tiles);
}

static PyObject *py_float_gemm(PyObject *self, PyObject *args) {
    (void)self;
    return switch_knob(args, "float_gemm: 0 (the exact tiles), 1 (a float GEMM from 32 vectors) or -1 (read)",
                       ow_float_gemm, ow_set_float_gemm);
}

static PyObject *py_gemm_overlap(PyObject *self, PyObject *args) {
    (void)self;
    return switch_knob(args, "gemm_overlap: 0 (each panel built in turn), 1 (the next panel built between the "
                       "micro-kernel calls) or -1 (read)", ow_gemm_overlap, ow_set_gemm_overlap);
}

/* rows_gemm(0 to 3, -1 or -2) -> the setting before the call: 0 to 3 on every path, or -2 while unset
 * (each path's default); -1 only reads it, -2 unsets it. Unlike the other switches it reports the setting, not what a
 * path runs, since the two paths' defaults differ (cpu_identity: default_rows_gemm, default_rows_gemm_avx2). */
static PyObject *py_rows_gemm(PyObject *self, PyObject *args) {
    (void)self;
    int on;
    if (!PyArg_ParseTuple(args, "i", &on)) return NULL;
    if (on < -2 || on > 3) {
        PyErr_SetString(PyExc_ValueError, "rows_gemm: 0 (the float GEMM), 1 (int8, 8 rows in the lanes), 2 (the same, "
                                          "AVX2's signs by xor + sub), 3 (the same but the AVX2 paths' Q8_0, in "
                                          "floats), -1 (read) or -2 (each path's default)");
        return NULL;
    }
    const int before = ow_rows_gemm_setting();
    if (on != -1) ow_set_rows_gemm(on);
    return PyLong_FromLong(before < 0 ? -2 : before);
}

/* rows_gemm_runs(path) -> whether that kernel path runs its prefill in the rows GEMMs now: the setting where one is
 * made, else the path's default on this CPU (what `onewell bench` reports) */
static PyObject *py_rows_gemm_runs(PyObject *self, PyObject *args) {
    (void)self;
    const char *path_name;
    ow_kpath path;
    if (!PyArg_ParseTuple(args, "s", &path_name) || parse_path(path_name, &path) < 0) return NULL;
    return PyBool_FromLong(ow_rows_gemm_runs(path));
}

/* r16_act_bytes(bytes, -1 or -2) -> the budget before the call; -1 only reads it, -2 goes back to OW_R16_ACT_BYTES */
static PyObject *py_r16_act_bytes(PyObject *self, PyObject *args) {
    (void)self;
    return bytes_knob(args, "r16_act_bytes: bytes must be 0 (no blocks) .. 16 MiB, -1 (read) or -2 (the default)",
                      ow_r16_act_bytes, ow_set_r16_act_bytes, ow_reset_r16_act_bytes);
}

PyMethodDef ow_kernel_methods[] = {
    {"kernel_paths", py_kernel_paths, METH_NOARGS, "Kernel paths this CPU can run, e.g. ['generic', 'avx2', 'avx2-vnni', 'avx512']."},
    {"kernel_default_path", py_kernel_default_path, METH_NOARGS, "The path ow_matmul_rows uses for ow_isa_best() (honors ONEWELL_ISA)."},
    {"act_type_for", py_act_type_for, METH_VARARGS, "act_type_for(weight_type) -> activation type id, -1 if the weight type has no kernel."},
    {"quantize_act", py_quantize_act, METH_VARARGS, "quantize_act(act_type, x, n_cols, n_vec, out, path)"},
    {"kv_store", py_kv_store, METH_VARARGS, "kv_store(kv_type, x, head_dim, n_rows, out, path): rows as the KV cache stores them"},
    {"matmul", py_matmul, METH_VARARGS, "matmul(wt, w, row_bytes, n_cols, xq, xq_stride, n_vec, y, y_stride, r0, r1, path)"},
    {"repack_r16", py_repack_r16, METH_VARARGS,
     "repack_r16(src_type, src, src_row_bytes, rows, n_cols, dst, dst_stride[, dst_type]): Q8_0/Q5_0 rows -> Q8_0 R16 "
     "rows, Q4_1 -> Q4_1 R16; dst_type Q8_0 R8: Q8_0 rows -> Q8_0 R8"},
    {"cpu_identity", py_cpu_identity, METH_NOARGS, "cpu_identity() -> vendor, family, model, default_prefetch"},
    {"default_prefetch", py_default_prefetch, METH_VARARGS,
     "default_prefetch(vendor, family, model, avx512f=0) -> software prefetch bytes chosen for such a CPU (0 = off)"},
    {"r16_prefetch", py_r16_prefetch, METH_VARARGS,
     "r16_prefetch(bytes, -1 or -2) -> previous software prefetch distance of the streaming decode kernels (0 = off; -1 reads, -2 returns to this CPU's defaults)"},
    {"wide_tiles", py_wide_tiles, METH_VARARGS,
     "wide_tiles(0, 1 or -1) -> previous setting: the AVX-512 Q4_0/Q5_0/F16 prefill tiles hold two rows per zmm (1) or one per ymm (0)"},
    {"gemm_overlap", py_gemm_overlap, METH_VARARGS,
     "gemm_overlap(0, 1 or -1) -> previous setting: the float GEMM builds its next weight panel between its micro-kernel calls (1) or after them (0); the same results"},
    {"float_gemm", py_float_gemm, METH_VARARGS,
     "float_gemm(0, 1 or -1) -> previous setting: prefill as a float GEMM from 32 vectors where a slot has one (Q8_0, F16, BF16 on the AVX2 paths; F16, BF16 on AVX-512) (1) or through the exact tiles (0)"},
    {"rows_gemm", py_rows_gemm, METH_VARARGS,
     "rows_gemm(0 to 3, -1 or -2) -> previous setting (-2: unset, each path's default; -1 reads, -2 unsets): prefill batches of 32+ vectors (float_gemm on) in int8 GEMMs with the weight rows in the vector lanes (1; 2: AVX2's Q8_0 signs by xor + sub; 3: the AVX2 paths' Q8_0 in floats): Q8_0 on the AVX2 paths, Q4_0 / Q5_0 and the K-quants on every x86 path, Q4_1 / Q5_1 on the AVX2 paths; else Q8_0 as a float GEMM and the others through their exact tiles (0)"},
    {"rows_gemm_runs", py_rows_gemm_runs, METH_VARARGS,
     "rows_gemm_runs(path) -> True if that kernel path (e.g. 'avx2') runs its prefill in the int8 rows GEMMs now (the rows_gemm setting, else the path's default here)"},
    {"r16_act_bytes", py_r16_act_bytes, METH_VARARGS,
     "r16_act_bytes(bytes, -1 or -2) -> previous activation budget per vector block of the AVX-512 R16 prefill tiles (0 = one block; -1 reads, -2 returns to the default)"},
    {"r16_row_stream", py_r16_row_stream, METH_VARARGS,
     "r16_row_stream(0, 1 or -1) -> previous setting: single-vector R16 matmuls stream rows one at a time (1) or in 4-row tiles (0)"},
    {"r16_row_stride", py_r16_row_stride, METH_VARARGS, "r16_row_stride(n_cols) -> the padded Q8_0 R16 row stride"},
    {"matmul_bench", py_matmul_bench, METH_VARARGS, "matmul_bench(<matmul args>, n_iter) -> seconds"},
    {NULL, NULL, 0, NULL},
};
