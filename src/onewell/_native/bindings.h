/* Each area of the native core exposes its Python functions from its own bind_*.c file;
 * module.c joins the tables. Keeps the areas (pool, kernels, executor, bench) editable independently. */
#ifndef ONEWELL_BINDINGS_H
#define ONEWELL_BINDINGS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "bind_sizes.h" /* every size from Python is checked with these */

extern PyMethodDef ow_pool_methods[];     /* bind_pool.c: thread pool, bandwidth probe, small ops */
extern PyMethodDef ow_kernel_methods[];   /* bind_kernels.c: quantized matvec/dot kernels */
extern PyMethodDef ow_executor_methods[]; /* bind_executor.c: whole forward steps */
extern PyMethodDef ow_type_methods[];     /* bind_types.c: the type-traits table */

/* A kernel path's name ("avx2", ...) -> its ow_kpath in *out: 0, or -1 with ValueError set (unknown, or not
 * available on this CPU). bind_kernels.c; every binding that takes a path by name parses it here. */
int ow_parse_kpath(const char *name, int *out);

#endif
