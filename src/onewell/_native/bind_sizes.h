/* Size arithmetic of the bindings, shared by every bind_*.c: each count, stride or byte size that comes from Python
 * goes through these before it is compared with a buffer, allocated, or used in pointer arithmetic. Real sizes are
 * >= 0, so -1 means "negative input or int64 overflow" and propagates: ow_size_mul(ow_size_mul(a, b), c) is -1 when
 * any step is. The ow_need* checks turn that, and a buffer that is too small, into a ValueError naming the buffer. */
#ifndef ONEWELL_BIND_SIZES_H
#define ONEWELL_BIND_SIZES_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The longest row (elements) a binding accepts: far above any model's (n_embd <= 2^20, n_ff <= 2^24), low enough
 * that a row's bytes times any per-element size stays far from overflow. */
#define OW_MAX_ROW_ELEMS (INT64_C(1) << 32)

/* a * b, or -1 when either is negative or the product overflows int64 */
static inline int64_t ow_size_mul(int64_t a, int64_t b) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) return -1;
    return r;
}

/* a + b, or -1 when either is negative or the sum overflows int64 */
static inline int64_t ow_size_add(int64_t a, int64_t b) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) return -1;
    return r;
}

/* Bytes n rows span when they start `stride` bytes apart and the last is `last` bytes long: (n - 1) * stride +
 * last; 0 for n == 0; -1 as above. */
static inline int64_t ow_size_span(int64_t n, int64_t stride, int64_t last) {
    if (n < 0 || stride < 0 || last < 0) return -1;
    return n == 0 ? 0 : ow_size_add(ow_size_mul(n - 1, stride), last);
}

/* The buffer holds at least `bytes` (a size from the helpers above); else ValueError, -1 */
static inline int ow_need_bytes(const Py_buffer *b, int64_t bytes, const char *name) {
    if (bytes < 0) {
        PyErr_Format(PyExc_ValueError, "%s: size is negative or too large", name);
        return -1;
    }
    if ((int64_t)b->len < bytes) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %lld needed", name, b->len, (long long)bytes);
        return -1;
    }
    return 0;
}

/* The buffer holds at least count items of itemsize bytes; else ValueError, -1 */
static inline int ow_need(const Py_buffer *b, int64_t count, int64_t itemsize, const char *name) {
    return ow_need_bytes(b, ow_size_mul(count, itemsize), name);
}

#endif
