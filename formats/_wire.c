/*
 * formats._wire: the one step of the Avro pass-through that is a loop over records.
 *
 * bodies(values, first, last, skip) is b"".join(v[skip:] for v in values[first:last]) in one
 * pass: no bytes object per record, one allocation, one memcpy per record. It exists because
 * that join was the largest single cost left on the consuming thread of STOREAS AVRO from
 * Confluent Avro (docs/benchmarks.md); formats/avro_wire.py falls back to the Python join when
 * this module was not built.
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

static PyMethodDef methods[] = {
    {"bodies", (PyCFunction)(void (*)(void))bodies, METH_FASTCALL,
     "bodies(values, first, last, skip) -> bytes: b''.join(v[skip:] for v in values[first:last])"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "formats._wire", "Avro pass-through: bodies joined in one pass.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__wire(void)
{
    return PyModule_Create(&module);
}
