/* Python view of the type-traits table (kernels/type_traits.h): onewell.runtime.native_types derives every
 * supported-type set from it, so Python and C cannot disagree about which types the kernels take. */
#include "bindings.h"

#include "kernels/type_traits.h"

/* What the table says of type t on every kernel path (after fallback), whether or not this CPU can run it, as
 * {path name: value or None}: the matmul kernel's name, the activation quantizer's, or the batch size from which
 * the matmul is a float GEMM (type_traits.h, float_gemm; None: every batch gives each vector bit for bit what it
 * gets alone) */
typedef enum { PER_PATH_KERNEL, PER_PATH_ACT_QUANT, PER_PATH_FLOAT_GEMM } per_path_fact;

static PyObject *per_path(const ow_type_traits_t *t, per_path_fact fact) {
    PyObject *out = PyDict_New();
    for (int p = 0; out && p < OW_KPATH_COUNT; p++) {
        const char *name = NULL;
        int gemm_from = 0;
        if (fact == PER_PATH_ACT_QUANT) {
            name = ow_type_act_quant(t, (ow_kpath)p).name;
        } else {
            ow_tile_slot tile;
            ow_dot_slot dot;
            ow_type_kernel(t, (ow_kpath)p, &tile, &dot);
            name = tile.fn ? tile.name : dot.name;
            gemm_from = tile.fn ? tile.float_gemm : 0;
        }
        PyObject *v = fact == PER_PATH_FLOAT_GEMM ? (gemm_from ? PyLong_FromLong(gemm_from) : Py_NewRef(Py_None))
                                                  : (name ? PyUnicode_FromString(name) : Py_NewRef(Py_None));
        if (!v || PyDict_SetItemString(out, ow_kpath_name((ow_kpath)p), v) < 0) Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

static PyObject *optional_type(int t) { return t >= 0 ? PyLong_FromLong(t) : Py_NewRef(Py_None); }

static PyObject *row_dict(int id, const ow_type_traits_t *t) {
    PyObject *kernels = per_path(t, PER_PATH_KERNEL), *act_quant = per_path(t, PER_PATH_ACT_QUANT);
    PyObject *gemm_from = per_path(t, PER_PATH_FLOAT_GEMM);
    PyObject *row = NULL;
    if (kernels && act_quant && gemm_from)
        row = Py_BuildValue("{s:i,s:s,s:L,s:n,s:N,s:N,s:N,s:O,s:O,s:O,s:O,s:O,s:O}", "id", id, "name", t->name,
                            "block_size", (long long)t->block_size, "block_bytes", (Py_ssize_t)t->block_bytes,
                            "act_type", optional_type(t->act_type), "repack_to", optional_type(t->repack_to),
                            "repack_from", optional_type(t->repacked && t->repack ? t->repack_from : -1),
                            "executor_weight", t->executor_weight ? Py_True : Py_False,
                            "repacked", t->repacked ? Py_True : Py_False,
                            "dequant_row", t->to_float ? Py_True : Py_False, "kernels", kernels,
                            "act_quant", act_quant, "float_gemm_from", gemm_from);
    Py_XDECREF(kernels);
    Py_XDECREF(act_quant);
    Py_XDECREF(gemm_from);
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
     "type_traits() -> one dict per type: id, name, block_size, block_bytes, act_type, repack_to, repack_from, executor_weight, "
     "repacked, dequant_row, kernels {path: name}, act_quant {path: name}"},
    {NULL, NULL, 0, NULL},
};
