/*
 * formats._wire: the steps of the Avro pass-through that are loops over records.
 *
 * bodies(values, first, last, skip) is b"".join(v[skip:] for v in values[first:last]) in one
 * pass: no bytes object per record, one allocation, one memcpy per record. It exists because
 * that join was the largest single cost left on the consuming thread of STOREAS AVRO from
 * Confluent Avro (docs/benchmarks.md). block_cuts says where the blocks close, from the values'
 * sizes, without an array of them. formats/avro_wire.py falls back to Python and numpy when this
 * module was not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *
bodies(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "bodies(values, first, last, skip)");
        return NULL;
    }
    PyObject *values = args[0];
    if (!PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "bodies: values must be a list of bytes");
        return NULL;
    }
    Py_ssize_t first = PyLong_AsSsize_t(args[1]);
    Py_ssize_t last = PyLong_AsSsize_t(args[2]);
    Py_ssize_t skip = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (first < 0 || last > n || first > last || skip < 0) {
        PyErr_SetString(PyExc_IndexError, "bodies: range outside the values");
        return NULL;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = first; i < last; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) < skip) {
            PyErr_Format(PyExc_ValueError, "bodies: value %zd is not bytes of at least %zd bytes", i, skip);
            return NULL;
        }
        total += PyBytes_GET_SIZE(v) - skip;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        return NULL;
    }
    char *at = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = first; i < last; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        Py_ssize_t size = PyBytes_GET_SIZE(v) - skip;
        memcpy(at, PyBytes_AS_STRING(v) + skip, (size_t)size);
        at += size;
    }
    return out;
}

/*
 * block_cuts(values, first, last, skip, open_size, block_size) -> (cuts, open_size): where the
 * pass-through closes its blocks among values[first:last]. A block is written out after the
 * record that takes it to block_size bytes of bodies (each value less its `skip` header bytes),
 * as fastavro does with its sync_interval; open_size is what the open block holds already. cuts
 * are the indices (into values) just after each record that closes a block; the second item is
 * what the open block holds after the last value.
 */
static PyObject *
block_cuts(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "block_cuts(values, first, last, skip, open_size, block_size)");
        return NULL;
    }
    PyObject *values = args[0];
    if (!PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "block_cuts: values must be a list of bytes");
        return NULL;
    }
    Py_ssize_t first = PyLong_AsSsize_t(args[1]);
    Py_ssize_t last = PyLong_AsSsize_t(args[2]);
    Py_ssize_t skip = PyLong_AsSsize_t(args[3]);
    long long open = PyLong_AsLongLong(args[4]);
    long long block = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (first < 0 || last > n || first > last || skip < 0 || open < 0 || block < 1) {
        PyErr_SetString(PyExc_ValueError, "block_cuts: range outside the values, or a bad size");
        return NULL;
    }
    PyObject *cuts = PyList_New(0);
    if (cuts == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = first; i < last; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) < skip) {
            PyErr_Format(PyExc_ValueError, "block_cuts: value %zd is not bytes of at least %zd bytes", i,
                         skip);
            Py_DECREF(cuts);
            return NULL;
        }
        open += PyBytes_GET_SIZE(v) - skip;
        if (open >= block) {
            PyObject *at = PyLong_FromSsize_t(i + 1);
            if (at == NULL || PyList_Append(cuts, at) < 0) {
                Py_XDECREF(at);
                Py_DECREF(cuts);
                return NULL;
            }
            Py_DECREF(at);
            open = 0;
        }
    }
    return Py_BuildValue("(NL)", cuts, open);
}

static PyMethodDef methods[] = {
    {"block_cuts", (PyCFunction)(void (*)(void))block_cuts, METH_FASTCALL,
     "block_cuts(values, first, last, skip, open_size, block_size) -> (cuts, open_size)"},
    {"bodies", (PyCFunction)(void (*)(void))bodies, METH_FASTCALL,
     "bodies(values, first, last, skip) -> bytes: b''.join(v[skip:] for v in values[first:last])"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "formats._wire", "Avro pass-through: blocks cut and bodies joined, one pass each.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__wire(void)
{
    return PyModule_Create(&module);
}
