/* Each area of the native core exposes its Python functions from its own bind_*.c file;
 * module.c joins the tables. Keeps the areas (pool, kernels, executor, bench) editable independently. */
#ifndef ONEWELL_BINDINGS_H
#define ONEWELL_BINDINGS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* a * b into *out; 0, or -1 when either is negative or the product overflows int64 (sizes from Python are
 * checked with this before any allocation or pointer arithmetic). */
static inline int ow_checked_mul_i64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return -1;
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

extern PyMethodDef ow_pool_methods[];     /* bind_pool.c: thread pool, bandwidth probe, small ops */
extern PyMethodDef ow_kernel_methods[];   /* bind_kernels.c: quantized matvec/dot kernels */
extern PyMethodDef ow_executor_methods[]; /* bind_executor.c: whole forward steps */
extern PyMethodDef ow_type_methods[];     /* bind_types.c: the type-traits table */

#endif
