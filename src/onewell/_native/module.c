/* Python binding of the native core: the only file that knows about Python.
 * Every size handed in here was validated by the Python side (onewell/runtime/native.py). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cpu_features.h"

static PyObject *py_cpu_features(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    const ow_cpu_features *f = ow_cpu();
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s}",
                         "avx2", f->avx2, "fma", f->fma, "f16c", f->f16c, "avx_vnni", f->avx_vnni,
                         "avx512f", f->avx512f, "avx512bw", f->avx512bw, "avx512vl", f->avx512vl,
                         "avx512_vnni", f->avx512_vnni, "isa", ow_isa_name(ow_isa_best()));
}

static PyMethodDef methods[] = {
    {"cpu_features", py_cpu_features, METH_NOARGS, "CPU SIMD features and the ISA path chosen (after ONEWELL_ISA)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "onewell._native._core", "onewell native core", -1, methods};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
