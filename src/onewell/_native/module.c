/* Python entry of the native core. The only C that knows about Python objects lives in bind_*.c;
 * every size they receive was validated on the Python side first (onewell/runtime/native.py). */
#include "bindings.h"
#include "cpu_features.h"

static PyObject *py_cpu_features(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    const ow_cpu_features *f = ow_cpu();
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s}",
                         "avx2", f->avx2, "fma", f->fma, "f16c", f->f16c, "avx_vnni", f->avx_vnni,
                         "avx512f", f->avx512f, "avx512bw", f->avx512bw, "avx512vl", f->avx512vl,
                         "avx512_vnni", f->avx512_vnni, "avx512_bf16", f->avx512_bf16, "amx_tile", f->amx_tile,
                         "neon", f->neon, "dotprod", f->dotprod, "i8mm", f->i8mm,
                         "isa", ow_isa_name(ow_isa_best()));
}

static PyMethodDef core_methods[] = {
    {"cpu_features", py_cpu_features, METH_NOARGS, "CPU SIMD features and the ISA path chosen (after ONEWELL_ISA)."},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef *const tables[] = {core_methods, ow_pool_methods, ow_kernel_methods, ow_executor_methods,
                                       ow_type_methods};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "onewell._native._core", "onewell native core", -1, NULL};

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++) {
        if (PyModule_AddFunctions(m, tables[t]) < 0) { Py_DECREF(m); return NULL; }
    }
    return m;
}
