/* Python entry of the thread pool, the bandwidth probe and the small ops (threadpool.h, bandwidth.h, ops.h).
 * onewell/runtime/native_ops.py validates dtypes, shapes and contiguity with readable messages first; the checks
 * here repeat what keeps memory safe (buffer sizes against the counts), so a wrong call from anywhere gets a
 * ValueError instead of a crash. The GIL is released while C works. */
#include "bindings.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bandwidth.h"
#include "kv_cache.h"
#include "ops.h"
#include "threadpool.h"

#define POOL_CAPSULE "onewell.pool"
#define MAX_THREADS 1024
/* The diagnostics below (stress, overhead) run jobs * items * (work + 1) busy steps: bounded, so a wrong call
 * ends in seconds, not never. */
#define MAX_ITEMS (1LL << 24)
#define MAX_JOBS (1LL << 20)
#define MAX_WORK_STEPS (1LL << 28)

static int work_ok(long long jobs, long long items, long long work) {
    if (jobs < 0 || jobs > MAX_JOBS || items < 0 || items > MAX_ITEMS || work < 0) return 0;
    const int64_t steps = ow_size_mul(ow_size_mul(jobs, items), ow_size_add(work, 1));
    return steps >= 0 && steps <= MAX_WORK_STEPS;
}

/* ---- helpers ---- */

/* Keeps the GIL (destructors may run during finalization); no job can be running, so the join is quick. */
static void pool_capsule_free(PyObject *cap) {
    ow_pool *p = PyCapsule_GetPointer(cap, POOL_CAPSULE);
    if (p) ow_pool_destroy(p);
    else PyErr_Clear();
}

/* None -> NULL (run on the calling thread); a pool capsule -> its pool; anything else -> error (returns -1). */
static int get_pool(PyObject *obj, ow_pool **out) {
    if (obj == Py_None) { *out = NULL; return 0; }
    ow_pool *p = PyCapsule_GetPointer(obj, POOL_CAPSULE);
    if (!p) { PyErr_Clear(); PyErr_SetString(PyExc_TypeError, "expected a pool (from pool_create) or None"); return -1; }
    *out = p;
    return 0;
}

static void release(Py_buffer *bufs[], int n) {
    for (int i = 0; i < n; i++)
        if (bufs[i]->obj) PyBuffer_Release(bufs[i]);
}

/* ---- pool ---- */

static PyObject *py_pool_create(PyObject *self, PyObject *args) {
    (void)self;
    int n;
    if (!PyArg_ParseTuple(args, "i", &n)) return NULL;
    if (n < 1 || n > MAX_THREADS) return PyErr_Format(PyExc_ValueError, "n_threads must be 1..%d, got %d", MAX_THREADS, n);
    ow_pool *p;
    Py_BEGIN_ALLOW_THREADS
    p = ow_pool_create(n);
    Py_END_ALLOW_THREADS
    if (!p) return PyErr_Format(PyExc_OSError, "could not start %d threads", n - 1);
    PyObject *cap = PyCapsule_New(p, POOL_CAPSULE, pool_capsule_free);
    if (!cap) ow_pool_destroy(p);
    return cap;
}

static PyObject *py_pool_threads(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    ow_pool *p;
    if (!PyArg_ParseTuple(args, "O", &obj) || get_pool(obj, &p) < 0) return NULL;
    return PyLong_FromLong(ow_pool_threads(p));
}

static PyObject *py_pool_set_spin_us(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    double us;
    ow_pool *p;
    if (!PyArg_ParseTuple(args, "Od", &obj, &us) || get_pool(obj, &p) < 0) return NULL;
    if (!(us >= 0 && us <= 1e9)) return PyErr_Format(PyExc_ValueError, "spin must be 0..1e9 us");
    ow_pool_set_spin_ns(p, (int64_t)(us * 1000.0));
    Py_RETURN_NONE;
}

static PyObject *py_pool_spin_us(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    ow_pool *p;
    if (!PyArg_ParseTuple(args, "O", &obj) || get_pool(obj, &p) < 0) return NULL;
    return PyFloat_FromDouble((double)ow_pool_spin_ns(p) / 1000.0);
}

/* Stress: every item of every job must be processed exactly once, by a valid worker index. */
typedef struct {
    _Atomic uint32_t *count;
    _Atomic int64_t sum; /* sum of (item + 1) over processed items */
    _Atomic int bad_worker;
    int threads;
    ow_pool *pool;
    int nested; /* each task runs its range as an inner parallel_for on the same pool (which runs it inline) */
    int64_t work; /* busy iterations per item, so jobs last long enough for every worker to join */
    _Atomic int64_t *chunks_by_worker; /* or NULL */
} stress_ctx;

static void busy(int64_t iterations) {
    for (volatile int64_t i = 0; i < iterations; i++) {}
}

typedef struct {
    stress_ctx *outer;
    int64_t offset;
} nested_ctx;

static void count_range(stress_ctx *s, int64_t begin, int64_t end, int worker) {
    if (worker < 0 || worker >= s->threads) { atomic_store(&s->bad_worker, 1); return; }
    if (s->chunks_by_worker) atomic_fetch_add_explicit(&s->chunks_by_worker[worker], 1, memory_order_relaxed);
    int64_t local = 0;
    for (int64_t i = begin; i < end; i++) {
        atomic_fetch_add_explicit(&s->count[i], 1, memory_order_relaxed);
        busy(s->work);
        local += i + 1;
    }
    atomic_fetch_add_explicit(&s->sum, local, memory_order_relaxed);
}

static void nested_task(void *ctx, int64_t begin, int64_t end, int worker) {
    nested_ctx *n = ctx;
    count_range(n->outer, n->offset + begin, n->offset + end, worker);
}

static void stress_task(void *ctx, int64_t begin, int64_t end, int worker) {
    stress_ctx *s = ctx;
    if (s->nested) {
        nested_ctx n = {s, begin};
        ow_pool_parallel_for(s->pool, end - begin, 1, nested_task, &n);
    } else {
        count_range(s, begin, end, worker);
    }
}

/* pool_stress(n_threads, n_jobs, n_items, chunk, static=0, nested=0, work=0) -> checksum = sum over jobs of
 * sum of (item+1). nested: every task runs its range as an inner job on the same pool (must run inline). */
static PyObject *py_pool_stress(PyObject *self, PyObject *args) {
    (void)self;
    int n_threads, is_static = 0, nested = 0;
    long long n_jobs, n_items, chunk, work = 0;
    if (!PyArg_ParseTuple(args, "iLLL|ppL", &n_threads, &n_jobs, &n_items, &chunk, &is_static, &nested, &work)) return NULL;
    if (n_threads < 1 || n_threads > MAX_THREADS || !work_ok(n_jobs, n_items, work))
        return PyErr_Format(PyExc_ValueError, "bad stress parameters (at most 2^20 jobs, 2^24 items, 2^28 steps)");
    stress_ctx s = {NULL, 0, 0, n_threads, NULL, nested, work, NULL};
    s.count = calloc((size_t)n_items + 1, sizeof *s.count);
    if (!s.count) return PyErr_NoMemory();
    long long failed_job = -1, failed_item = -1;
    unsigned failed_count = 0;
    int created = 1;
    Py_BEGIN_ALLOW_THREADS
    ow_pool *p = ow_pool_create(n_threads);
    if (!p) created = 0;
    s.pool = p;
    for (long long j = 0; p && j < n_jobs && failed_job < 0; j++) {
        if (is_static) ow_pool_parallel_for_static(p, n_items, chunk, stress_task, &s);
        else ow_pool_parallel_for(p, n_items, chunk, stress_task, &s);
        for (long long i = 0; i < n_items; i++) {
            unsigned c = atomic_load_explicit(&s.count[i], memory_order_relaxed);
            if (c != (unsigned)(j + 1)) { failed_job = j; failed_item = i; failed_count = c; break; }
        }
    }
    ow_pool_destroy(p);
    Py_END_ALLOW_THREADS
    free((void *)s.count);
    if (!created) return PyErr_Format(PyExc_OSError, "could not start %d threads", n_threads - 1);
    if (failed_job >= 0)
        return PyErr_Format(PyExc_RuntimeError, "job %lld: item %lld processed %u times in total, expected %lld",
                            failed_job, failed_item, failed_count, failed_job + 1);
    if (atomic_load(&s.bad_worker)) return PyErr_Format(PyExc_RuntimeError, "a task got a worker index out of range");
    return PyLong_FromLongLong((long long)atomic_load(&s.sum));
}

/* pool_chunks_by_worker(pool, n_items, chunk, work) -> [chunks run by worker 0, 1, ...] for one dynamic job */
static PyObject *py_pool_chunks_by_worker(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    long long n_items, chunk, work;
    ow_pool *p;
    if (!PyArg_ParseTuple(args, "OLLL", &obj, &n_items, &chunk, &work) || get_pool(obj, &p) < 0) return NULL;
    if (!work_ok(1, n_items, work))
        return PyErr_Format(PyExc_ValueError, "bad parameters (at most 2^24 items, 2^28 steps)");
    int threads = ow_pool_threads(p);
    stress_ctx s = {NULL, 0, 0, threads, p, 0, work, NULL};
    s.count = calloc((size_t)n_items + 1, sizeof *s.count);
    s.chunks_by_worker = calloc((size_t)threads, sizeof *s.chunks_by_worker);
    if (!s.count || !s.chunks_by_worker) { free((void *)s.count); free((void *)s.chunks_by_worker); return PyErr_NoMemory(); }
    Py_BEGIN_ALLOW_THREADS
    ow_pool_parallel_for(p, n_items, chunk, stress_task, &s);
    Py_END_ALLOW_THREADS
    PyObject *list = PyList_New(threads);
    for (int w = 0; list && w < threads; w++) PyList_SET_ITEM(list, w, PyLong_FromLongLong((long long)s.chunks_by_worker[w]));
    free((void *)s.count);
    free((void *)s.chunks_by_worker);
    return list;
}

static void empty_task(void *ctx, int64_t begin, int64_t end, int worker) { (void)ctx; (void)begin; (void)end; (void)worker; }

/* pool_overhead(pool, n_calls, n_items, chunk, static=0) -> seconds per call of an empty job */
static PyObject *py_pool_overhead(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    long long calls, n, chunk;
    int is_static = 0;
    ow_pool *p;
    if (!PyArg_ParseTuple(args, "OLLL|p", &obj, &calls, &n, &chunk, &is_static) || get_pool(obj, &p) < 0) return NULL;
    if (calls < 1 || !work_ok(calls, n, 0))
        return PyErr_Format(PyExc_ValueError, "n_calls must be 1 .. 2^20, n_items 0 .. 2^24, chunk >= 0");
    struct timespec t0, t1;
    Py_BEGIN_ALLOW_THREADS
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long long i = 0; i < calls; i++) {
        if (is_static) ow_pool_parallel_for_static(p, n, chunk, empty_task, NULL);
        else ow_pool_parallel_for(p, n, chunk, empty_task, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    Py_END_ALLOW_THREADS
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return PyFloat_FromDouble(s / (double)calls);
}

/* ---- bandwidth ---- */

/* bandwidth_run(pool, kind, total_bytes, reps) -> ([seconds...], traffic_bytes, checksum) */
static PyObject *py_bandwidth_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    int kind, reps;
    long long total;
    ow_pool *p;
    if (!PyArg_ParseTuple(args, "OiLi", &obj, &kind, &total, &reps) || get_pool(obj, &p) < 0) return NULL;
    if (kind < OW_BW_READ || kind > OW_BW_TRIAD_NT) return PyErr_Format(PyExc_ValueError, "unknown kind %d", kind);
    if (reps < 1 || reps > 100000) return PyErr_Format(PyExc_ValueError, "reps must be 1..100000");
    /* the probe's buffers take total_bytes: at most half the machine's memory, or a typo is an OOM kill */
    const long long half_ram = (long long)sysconf(_SC_PHYS_PAGES) * (long long)sysconf(_SC_PAGESIZE) / 2;
    if (total < 1 || total > (1LL << 42) || (half_ram > 0 && total > half_ram))
        return PyErr_Format(PyExc_ValueError, "total_bytes must be 1 .. %lld (half the memory)", half_ram);
    double *seconds = calloc((size_t)reps, sizeof(double));
    if (!seconds) return PyErr_NoMemory();
    int64_t traffic = 0;
    double checksum = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = ow_bandwidth_run(p, (ow_bw_kind)kind, total, reps, seconds, &traffic, &checksum);
    Py_END_ALLOW_THREADS
    if (rc != 0) { free(seconds); return PyErr_NoMemory(); }
    PyObject *list = PyList_New(reps);
    if (!list) { free(seconds); return NULL; }
    for (int r = 0; r < reps; r++) {
        PyObject *f = PyFloat_FromDouble(seconds[r]);
        if (!f) { Py_DECREF(list); free(seconds); return NULL; }
        PyList_SET_ITEM(list, r, f);
    }
    free(seconds);
    return Py_BuildValue("(NLd)", list, (long long)traffic, checksum);
}

/* bandwidth_read_sum(pool, x_f64, n) -> float */
static PyObject *py_bandwidth_read_sum(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    Py_buffer x = {0};
    long long n;
    ow_pool *p;
    if (!PyArg_ParseTuple(args, "Oy*L", &obj, &x, &n)) return NULL;
    Py_buffer *bufs[] = {&x};
    if (get_pool(obj, &p) < 0 || ow_need(&x, n, 8, "x") < 0) { release(bufs, 1); return NULL; }
    double s;
    Py_BEGIN_ALLOW_THREADS
    s = ow_bandwidth_read_sum(p, x.buf, n);
    Py_END_ALLOW_THREADS
    release(bufs, 1);
    return PyFloat_FromDouble(s);
}

static PyObject *py_bandwidth_isa(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyUnicode_FromString(ow_bandwidth_isa());
}

/* ---- ops ---- */

static PyObject *py_ops_isa(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    return PyUnicode_FromString(ow_ops_isa());
}

static PyObject *py_ops_set_isa(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    const int isa = ow_isa_from_name(name);
    if (isa < 0) return PyErr_Format(PyExc_ValueError, "unknown ISA path %s", name);
    if (ow_ops_set_isa((ow_isa)isa) != 0) return PyErr_Format(PyExc_ValueError, "ISA path %s is not available here", name);
    Py_RETURN_NONE;
}

/* rmsnorm(out, x, w, n_rows, dim, eps) */
static PyObject *py_rmsnorm(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out = {0}, x = {0}, w = {0};
    long long rows, dim;
    float eps;
    if (!PyArg_ParseTuple(args, "w*y*y*LLf", &out, &x, &w, &rows, &dim, &eps)) return NULL;
    Py_buffer *bufs[] = {&out, &x, &w};
    int64_t total = ow_size_mul(rows, dim);
    if (dim < 1 || total < 0) { release(bufs, 3); return PyErr_Format(PyExc_ValueError, "bad rmsnorm shape"); }
    if (ow_need(&out, total, 4, "out") < 0 || ow_need(&x, total, 4, "x") < 0 || ow_need(&w, dim, 4, "w") < 0) { release(bufs, 3); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    ow_rmsnorm_f32(out.buf, x.buf, w.buf, rows, dim, eps);
    Py_END_ALLOW_THREADS
    release(bufs, 3);
    Py_RETURN_NONE;
}

/* rope_table(cs, pos_i32, n_tok, n_rot, freq_base[, freq_factors_f32 or None]) */
static PyObject *py_rope_table(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer cs = {0}, pos = {0}, ff = {0};
    PyObject *ff_obj = Py_None;
    long long n_tok, n_rot;
    float base;
    if (!PyArg_ParseTuple(args, "w*y*LLf|O", &cs, &pos, &n_tok, &n_rot, &base, &ff_obj)) return NULL;
    Py_buffer *bufs[] = {&cs, &pos, &ff};
    if (ff_obj != Py_None && PyObject_GetBuffer(ff_obj, &ff, PyBUF_C_CONTIGUOUS) < 0) { release(bufs, 2); return NULL; }
    const int nb = ff_obj != Py_None ? 3 : 2;
    if (n_rot < 2 || n_rot % 2 || ow_size_mul(n_tok, n_rot) < 0) { release(bufs, nb); return PyErr_Format(PyExc_ValueError, "bad rope table shape"); }
    if (ow_need(&cs, ow_size_mul(n_tok, n_rot), 4, "cs") < 0 || ow_need(&pos, n_tok, 4, "pos") < 0 ||
        (nb == 3 && ow_need(&ff, n_rot / 2, 4, "freq_factors") < 0)) {
        release(bufs, nb);
        return NULL;
    }
    const float *factors = nb == 3 ? ff.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    ow_rope_table_ff_f32(cs.buf, pos.buf, n_tok, n_rot, base, factors);
    Py_END_ALLOW_THREADS
    release(bufs, nb);
    Py_RETURN_NONE;
}

/* rope_apply(x, cs, n_tok, n_head, head_dim, n_rot, style) */
static PyObject *py_rope_apply(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer x = {0}, cs = {0};
    long long n_tok, n_head, hd, n_rot;
    int style;
    if (!PyArg_ParseTuple(args, "w*y*LLLLi", &x, &cs, &n_tok, &n_head, &hd, &n_rot, &style)) return NULL;
    Py_buffer *bufs[] = {&x, &cs};
    int64_t total = ow_size_mul(ow_size_mul(n_tok, n_head), hd);
    if (n_rot < 2 || n_rot % 2 || n_rot > hd || total < 0 || (style != OW_ROPE_NORMAL && style != OW_ROPE_NEOX)) {
        release(bufs, 2);
        return PyErr_Format(PyExc_ValueError, "bad rope arguments");
    }
    if (ow_need(&x, total, 4, "x") < 0 || ow_need(&cs, ow_size_mul(n_tok, n_rot), 4, "cs") < 0) { release(bufs, 2); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    ow_rope_apply_f32(x.buf, cs.buf, n_tok, n_head, hd, n_rot, (ow_rope_style)style);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

/* binary element-wise: name(out, a, b, n) */
#define BINARY(pyname, cfn)                                                                                    \
    static PyObject *pyname(PyObject *self, PyObject *args) {                                                 \
        (void)self;                                                                                            \
        Py_buffer out = {0}, a = {0}, b = {0};                                                                 \
        long long n;                                                                                           \
        if (!PyArg_ParseTuple(args, "w*y*y*L", &out, &a, &b, &n)) return NULL;                                 \
        Py_buffer *bufs[] = {&out, &a, &b};                                                                    \
        if (ow_need(&out, n, 4, "out") < 0 || ow_need(&a, n, 4, "a") < 0 || ow_need(&b, n, 4, "b") < 0) {               \
            release(bufs, 3);                                                                                  \
            return NULL;                                                                                       \
        }                                                                                                      \
        Py_BEGIN_ALLOW_THREADS cfn(out.buf, a.buf, b.buf, n);                                                  \
        Py_END_ALLOW_THREADS release(bufs, 3);                                                                 \
        Py_RETURN_NONE;                                                                                        \
    }
BINARY(py_swiglu, ow_swiglu_f32)
BINARY(py_geglu, ow_geglu_f32)

/* softcap(out, x, n, cap): cap > 0 */
static PyObject *py_softcap(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out = {0}, x = {0};
    long long n;
    float cap;
    if (!PyArg_ParseTuple(args, "w*y*Lf", &out, &x, &n, &cap)) return NULL;
    Py_buffer *bufs[] = {&out, &x};
    if (!(cap > 0) || cap > 1e30f) { release(bufs, 2); return PyErr_Format(PyExc_ValueError, "softcap: cap must be > 0"); }
    if (ow_need(&out, n, 4, "out") < 0 || ow_need(&x, n, 4, "x") < 0) { release(bufs, 2); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    ow_softcap_f32(out.buf, x.buf, n, cap);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}
BINARY(py_add, ow_add_f32)

/* add_bias(x, bias, n_rows, dim) */
static PyObject *py_add_bias(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer x = {0}, b = {0};
    long long rows, dim;
    if (!PyArg_ParseTuple(args, "w*y*LL", &x, &b, &rows, &dim)) return NULL;
    Py_buffer *bufs[] = {&x, &b};
    int64_t total = ow_size_mul(rows, dim);
    /* dim >= 1 as rmsnorm's and softmax's: with dim 0 any row count passes the size checks and the row loop runs
     * that many times for nothing (the bindings fuzz under the sanitizer found 2^53 rows) */
    const int bad = dim < 1 || total < 0;
    if (bad || ow_need(&x, total, 4, "x") < 0 || ow_need(&b, dim, 4, "bias") < 0) {
        if (bad) PyErr_SetString(PyExc_ValueError, "bad add_bias shape");
        release(bufs, 2);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    ow_add_bias_f32(x.buf, b.buf, rows, dim);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

/* softmax(out, x, n_rows, n) */
static PyObject *py_softmax(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out = {0}, x = {0};
    long long rows, n;
    if (!PyArg_ParseTuple(args, "w*y*LL", &out, &x, &rows, &n)) return NULL;
    Py_buffer *bufs[] = {&out, &x};
    int64_t total = ow_size_mul(rows, n);
    if (n < 1 || total < 0) { release(bufs, 2); return PyErr_Format(PyExc_ValueError, "bad softmax shape"); }
    if (ow_need(&out, total, 4, "out") < 0 || ow_need(&x, total, 4, "x") < 0) { release(bufs, 2); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    ow_softmax_f32(out.buf, x.buf, rows, n);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

/* argmax(x, n) -> int */
static PyObject *py_argmax(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer x = {0};
    long long n;
    if (!PyArg_ParseTuple(args, "y*L", &x, &n)) return NULL;
    Py_buffer *bufs[] = {&x};
    if (n < 1) { release(bufs, 1); return PyErr_Format(PyExc_ValueError, "argmax of an empty array"); }
    if (ow_need(&x, n, 4, "x") < 0) { release(bufs, 1); return NULL; }
    int64_t i;
    Py_BEGIN_ALLOW_THREADS
    i = ow_argmax_f32(x.buf, n);
    Py_END_ALLOW_THREADS
    release(bufs, 1);
    return PyLong_FromLongLong((long long)i);
}

/* f32_to_f16(out_u16, x_f32, n) and f16_to_f32(out_f32, x_u16, n) */
static PyObject *py_f32_to_f16(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out = {0}, x = {0};
    long long n;
    if (!PyArg_ParseTuple(args, "w*y*L", &out, &x, &n)) return NULL;
    Py_buffer *bufs[] = {&out, &x};
    if (ow_need(&out, n, 2, "out") < 0 || ow_need(&x, n, 4, "x") < 0) { release(bufs, 2); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    ow_f32_to_f16(out.buf, x.buf, n);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

static PyObject *py_f16_to_f32(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer out = {0}, x = {0};
    long long n;
    if (!PyArg_ParseTuple(args, "w*y*L", &out, &x, &n)) return NULL;
    Py_buffer *bufs[] = {&out, &x};
    if (ow_need(&out, n, 4, "out") < 0 || ow_need(&x, n, 2, "x") < 0) { release(bufs, 2); return NULL; }
    Py_BEGIN_ALLOW_THREADS
    ow_f16_to_f32(out.buf, x.buf, n);
    Py_END_ALLOW_THREADS
    release(bufs, 2);
    Py_RETURN_NONE;
}

/* attention(pool, out, q, k, v, scores, n_ctx, n_head, n_head_kv, head_dim, scale, kv_type[, softcap]) */
static PyObject *py_attention(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    Py_buffer out = {0}, q = {0}, k = {0}, v = {0}, sc = {0};
    long long n_ctx, n_head, n_kv, hd;
    float scale, softcap = 0.0f;
    int kv_type;
    if (!PyArg_ParseTuple(args, "Ow*y*y*y*w*LLLLfi|f", &obj, &out, &q, &k, &v, &sc, &n_ctx, &n_head, &n_kv, &hd, &scale,
                          &kv_type, &softcap))
        return NULL;
    Py_buffer *bufs[] = {&out, &q, &k, &v, &sc};
    ow_pool *p;
    if (get_pool(obj, &p) < 0) { release(bufs, 5); return NULL; }
    int64_t qn = ow_size_mul(n_head, hd), kvn = ow_size_mul(ow_size_mul(n_ctx, n_kv), hd), sn = ow_size_mul(ow_pool_threads(p), n_ctx);
    if (n_ctx < 1 || n_head < 1 || n_kv < 1 || hd < 1 || n_head % n_kv || qn < 0 || kvn < 0 || sn < 0 ||
        !ow_kv_type_ok(kv_type, hd) || !(softcap >= 0)) {
        release(bufs, 5);
        return PyErr_Format(PyExc_ValueError, "bad attention arguments");
    }
    const int64_t kv_bytes = ow_kv_bytes_checked(kv_type, kvn);
    if (ow_need(&out, qn, 4, "out") < 0 || ow_need(&q, qn, 4, "q") < 0 || ow_need_bytes(&k, kv_bytes, "k") < 0 ||
        ow_need_bytes(&v, kv_bytes, "v") < 0 || ow_need(&sc, sn, 4, "scores") < 0) {
        release(bufs, 5);
        return NULL;
    }
    ow_attn_args a = {out.buf, q.buf, k.buf, v.buf, n_ctx, n_head, n_kv, hd, scale, (ow_kv_type)kv_type, softcap};
    Py_BEGIN_ALLOW_THREADS
    ow_attention(p, &a, sc.buf);
    Py_END_ALLOW_THREADS
    release(bufs, 5);
    Py_RETURN_NONE;
}

PyMethodDef ow_pool_methods[] = {
    {"pool_create", py_pool_create, METH_VARARGS, "pool_create(n_threads) -> pool (n_threads counts the caller)"},
    {"pool_threads", py_pool_threads, METH_VARARGS, "pool_threads(pool) -> int"},
    {"pool_set_spin_us", py_pool_set_spin_us, METH_VARARGS, "pool_set_spin_us(pool, us): idle spin before sleeping"},
    {"pool_spin_us", py_pool_spin_us, METH_VARARGS, "pool_spin_us(pool) -> float"},
    {"pool_stress", py_pool_stress, METH_VARARGS,
     "pool_stress(n_threads, n_jobs, n_items, chunk, static=False, nested=False, work=0) -> checksum; raises if an item ran != once"},
    {"pool_chunks_by_worker", py_pool_chunks_by_worker, METH_VARARGS,
     "pool_chunks_by_worker(pool, n_items, chunk, work) -> chunks each worker ran in one dynamic job"},
    {"pool_overhead", py_pool_overhead, METH_VARARGS,
     "pool_overhead(pool, n_calls, n_items, chunk, static=False) -> seconds per call of an empty job"},
    {"bandwidth_run", py_bandwidth_run, METH_VARARGS,
     "bandwidth_run(pool, kind, total_bytes, reps) -> ([seconds], traffic_bytes, checksum)"},
    {"bandwidth_read_sum", py_bandwidth_read_sum, METH_VARARGS, "bandwidth_read_sum(pool, x_f64, n) -> float"},
    {"bandwidth_isa", py_bandwidth_isa, METH_NOARGS, "ISA path of the bandwidth kernels"},
    {"ops_isa", py_ops_isa, METH_NOARGS, "ISA path of the ops"},
    {"ops_set_isa", py_ops_set_isa, METH_VARARGS, "ops_set_isa(name): switch the ops' ISA path (tests)"},
    {"rmsnorm", py_rmsnorm, METH_VARARGS, "rmsnorm(out, x, w, n_rows, dim, eps)"},
    {"rope_table", py_rope_table, METH_VARARGS, "rope_table(cs, pos_i32, n_tok, n_rot, freq_base[, freq_factors])"},
    {"rope_apply", py_rope_apply, METH_VARARGS, "rope_apply(x, cs, n_tok, n_head, head_dim, n_rot, style)"},
    {"swiglu", py_swiglu, METH_VARARGS, "swiglu(out, g, u, n)"},
    {"geglu", py_geglu, METH_VARARGS, "geglu(out, g, u, n)"},
    {"softcap", py_softcap, METH_VARARGS, "softcap(out, x, n, cap)"},
    {"add", py_add, METH_VARARGS, "add(out, a, b, n)"},
    {"add_bias", py_add_bias, METH_VARARGS, "add_bias(x, bias, n_rows, dim)"},
    {"softmax", py_softmax, METH_VARARGS, "softmax(out, x, n_rows, n)"},
    {"argmax", py_argmax, METH_VARARGS, "argmax(x, n) -> int"},
    {"f32_to_f16", py_f32_to_f16, METH_VARARGS, "f32_to_f16(out_u16, x_f32, n)"},
    {"f16_to_f32", py_f16_to_f32, METH_VARARGS, "f16_to_f32(out_f32, x_u16, n)"},
    {"attention", py_attention, METH_VARARGS,
     "attention(pool, out, q, k, v, scores, n_ctx, n_head, n_head_kv, head_dim, scale, kv_type[, softcap])"},
    {NULL, NULL, 0, NULL},
};
