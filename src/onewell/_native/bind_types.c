/* Python view of the type-traits table (kernels/type_traits.h): onewell.runtime.native_types derives every
 * supported-type set from it, so Python and C cannot disagree about which types the kernels take. */
#include "bindings.h"

#include "kernels/type_traits.h"

/* {path name: kernel name or None} for every path (after fallback), whether or not this CPU can run it */
static PyObject *kernel_names(const ow_type_traits_t *t, int activation) {
    PyObject *out = PyDict_New();
    for (int p = 0; out && p < OW_KPATH_COUNT; p++) {
        const char *name;
        if (activation) {
            name = ow_type_act_quant(t, (ow_kpath)p).name;
        } else {
            ow_tile_slot tile;
            ow_dot_slot dot;
            ow_type_kernel(t, (ow_kpath)p, &tile, &dot);
            name = tile.fn ? tile.name : dot.name;
        }
        PyObject *v = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
        if (!v || PyDict_SetItemString(out, ow_kpath_name((ow_kpath)p), v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

/* {path name: the batch size from which its matmul is a float GEMM, or None: every batch gives each vector bit for
 * bit what it gets alone} (type_traits.h, float_gemm) */
static PyObject *float_gemm_from(const ow_type_traits_t *t) {
    PyObject *out = PyDict_New();
    for (int p = 0; out && p < OW_KPATH_COUNT; p++) {
        ow_tile_slot tile;
        ow_dot_slot dot;
        ow_type_kernel(t, (ow_kpath)p, &tile, &dot);
        PyObject *v = tile.fn && tile.float_gemm ? PyLong_FromLong(tile.float_gemm) : Py_NewRef(Py_None);
        if (!v || PyDict_SetItemString(out, ow_kpath_name((ow_kpath)p), v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

static PyObject *optional_type(int t) { return t >= 0 ? PyLong_FromLong(t) : Py_NewRef(Py_None); }

static PyObject *row_dict(int id, const ow_type_traits_t *t) {
    PyObject *kernels = kernel_names(t, 0), *act_quant = kernel_names(t, 1), *exact = float_gemm_from(t);
    PyObject *row = NULL;
    if (kernels && act_quant && exact)
        row = Py_BuildValue("{s:i,s:s,s:L,s:n,s:N,s:N,s:O,s:O,s:O,s:O,s:O,s:O}", "id", id, "name", t->name,
                            "block_size", (long long)t->block_size, "block_bytes", (Py_ssize_t)t->block_bytes,
                            "act_type", optional_type(t->act_type), "repack_to", optional_type(t->repack_to),
                            "executor_weight", t->executor_weight ? Py_True : Py_False,
                            "repacked", t->repacked ? Py_True : Py_False,
                            "dequant_row", t->to_float ? Py_True : Py_False, "kernels", kernels,
                            "act_quant", act_quant, "float_gemm_from", exact);
    Py_XDECREF(kernels);
    Py_XDECREF(act_quant);
    Py_XDECREF(exact);
    return row;
}

static int append_rows(PyObject *out, int first, int count) {
    for (int id = first; id < first + count; id++) {
        const ow_type_traits_t *t = ow_type_traits(id);
        if (!t) continue;
        PyObject *row = row_dict(id, t);
        if (!row || PyList_Append(out, row) < 0) { Py_XDECREF(row); return -1; }
        Py_DECREF(row);
    }
    return 0;
}

static PyObject *py_type_traits(PyObject *self, PyObject *args) {
    (void)self; (void)args;
    PyObject *out = PyList_New(0);
    if (out && (append_rows(out, 0, OW_GGML_TYPE_SLOTS) < 0 ||
                append_rows(out, OW_OWN_TYPE_BASE, OW_OWN_TYPE_SLOTS) < 0))
        Py_CLEAR(out);
    return out;
}

PyMethodDef ow_type_methods[] = {
    {"type_traits", py_type_traits, METH_NOARGS,
     "type_traits() -> one dict per type: id, name, block_size, block_bytes, act_type, repack_to, executor_weight, "
     "repacked, dequant_row, kernels {path: name}, act_quant {path: name}"},
    {NULL, NULL, 0, NULL},
};
