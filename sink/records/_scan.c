/*
 * sink.records._scan: the consuming thread's per-message loops, one C pass each.
 *
 * What a consumed batch goes through before a format sees it (is any message an error, where
 * does the partition change, the values, the smallest and largest timestamp of a run, do the
 * Avro values share one header) was one Python-level step per message per attribute: the largest
 * part of the time STOREAS AVRO from Confluent Avro spent beside consume() itself
 * (docs/benchmarks.md). Each function here is one of those steps; sink/records/scan.py holds the
 * Python version of each, used when this module was not built, and the tests hold both to the
 * same answers.
 *
 * Messages are read where a confluent_kafka.Message keeps each field: bind(Message, probes)
 * looks for the one place in the object where every probe message (built by the caller with
 * known, distinct timestamps, partitions, values and errors) holds its own timestamp and its
 * type, its partition, its value and its error, and the loops read them from there. A method
 * call per message per field (with a reference taken and dropped on the message and on what the
 * method returns) cost more than the field itself, on ~2,000 messages per consume() call.
 * Nothing about the struct's layout is assumed: a field no single place holds for every probe is
 * read through the C function behind its method (bind() takes those of Message.error/partition/
 * timestamp/value, METH_NOARGS methods of a C type, and calls them directly), as is every field
 * of an object of another type (asked through Python).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { M_ERROR, M_PARTITION, M_TIMESTAMP, M_VALUE, M_COUNT };
static const char *const method_names[M_COUNT] = {"error", "partition", "timestamp", "value"};
static PyTypeObject *message_type = NULL;
static PyCFunction method_funcs[M_COUNT];
/* Where a Message keeps its timestamp (int64) and its type (int): found by bind() in probe
 * messages it was given, or -1 (timestamp() is called instead). */
static Py_ssize_t timestamp_at = -1, kind_at = -1;
/* Where a Message keeps its value (a bytes object, NULL for none), its error (a KafkaError, None
 * or NULL for none) and its partition (int32): found by bind() in the probes, or -1. */
static Py_ssize_t value_at = -1, error_at = -1, partition_at = -1;

/* Whether msg is a Message whose fields the loops may read where it keeps them. */
static inline int
exact(PyObject *msg)
{
    return message_type != NULL && Py_TYPE(msg) == message_type;
}

static inline PyObject *
field_at(PyObject *msg, Py_ssize_t at)
{
    PyObject *obj;
    memcpy(&obj, (const char *)msg + at, sizeof obj);
    return obj;
}

/* msg.<method>(): a new reference, or NULL with an exception set. */
static PyObject *
call(PyObject *msg, int which)
{
    if (message_type != NULL && Py_TYPE(msg) == message_type) {
        return method_funcs[which](msg, NULL);
    }
    PyObject *name = PyUnicode_FromString(method_names[which]);
    if (name == NULL) {
        return NULL;
    }
    PyObject *out = PyObject_CallMethodNoArgs(msg, name);
    Py_DECREF(name);
    return out;
}

/*
 * The one offset in `obj` (a `size`-byte object) where each probe holds its own value, or -1
 * when none or several do. `width` is 8 (int64) or 4 (int).
 */
static Py_ssize_t
find_field(PyObject *probes, const long long *want, Py_ssize_t size, int width)
{
    Py_ssize_t found = -1;
    Py_ssize_t n = PyList_GET_SIZE(probes);
    for (Py_ssize_t off = sizeof(PyObject); off + width <= size; off += width) {
        int all = 1;
        for (Py_ssize_t p = 0; p < n && all; p++) {
            const char *at = (const char *)PyList_GET_ITEM(probes, p) + off;
            long long got;
            if (width == 8) {
                int64_t v;
                memcpy(&v, at, 8);
                got = v;
            } else {
                int32_t v;
                memcpy(&v, at, 4);
                got = v;
            }
            all = got == want[p];
        }
        if (all) {
            if (found != -1) {
                return -1; /* ambiguous */
            }
            found = off;
        }
    }
    return found;
}

/*
 * Find where Message objects keep their timestamp and its type, from probe messages built with
 * known, distinct timestamps, and check each against the probe's own timestamp() once more.
 */
static void
probe_timestamps(PyTypeObject *type, PyObject *probes)
{
    timestamp_at = kind_at = -1;
    Py_ssize_t n = PyList_GET_SIZE(probes);
    if (n < 3 || n > 16) {
        return;
    }
    long long kinds[16], stamps[16];
    for (Py_ssize_t p = 0; p < n; p++) {
        PyObject *msg = PyList_GET_ITEM(probes, p);
        if (Py_TYPE(msg) != type) {
            return;
        }
        PyObject *pair = method_funcs[M_TIMESTAMP](msg, NULL);
        if (pair == NULL) {
            PyErr_Clear();
            return;
        }
        int ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2;
        if (ok) {
            kinds[p] = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 0));
            stamps[p] = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 1));
        }
        Py_DECREF(pair);
        if (!ok || PyErr_Occurred()) {
            PyErr_Clear();
            return;
        }
    }
    Py_ssize_t ts = find_field(probes, stamps, type->tp_basicsize, 8);
    Py_ssize_t kind = find_field(probes, kinds, type->tp_basicsize, 4);
    if (ts != -1 && kind != -1) {
        timestamp_at = ts;
        kind_at = kind;
    }
}

/*
 * Find where Message objects keep their value, error and partition, from probe messages built
 * with distinct ones (each value a bytes object, each error a KafkaError: both told apart by
 * identity, so no other field can hold them by chance).
 */
static void
probe_fields(PyTypeObject *type, PyObject *probes)
{
    value_at = error_at = partition_at = -1;
    Py_ssize_t n = PyList_GET_SIZE(probes);
    if (n < 3 || n > 16) {
        return;
    }
    long long values[16], errors[16], partitions[16]; /* the value and error: their addresses */
    int ok = 1;
    for (Py_ssize_t p = 0; p < n; p++) {
        PyObject *msg = PyList_GET_ITEM(probes, p);
        if (Py_TYPE(msg) != type) {
            return;
        }
        PyObject *value = method_funcs[M_VALUE](msg, NULL);
        PyObject *error = method_funcs[M_ERROR](msg, NULL);
        PyObject *partition = method_funcs[M_PARTITION](msg, NULL);
        if (value == NULL || error == NULL || partition == NULL) {
            PyErr_Clear();
            ok = 0;
        }
        else {
            /* the probe holds the objects, so their addresses are what its fields hold */
            ok = PyBytes_CheckExact(value) && error != Py_None && PyLong_Check(partition);
            values[p] = (long long)(intptr_t)value;
            errors[p] = (long long)(intptr_t)error;
            partitions[p] = ok ? PyLong_AsLongLong(partition) : 0;
            if (PyErr_Occurred()) {
                PyErr_Clear();
                ok = 0;
            }
        }
        Py_XDECREF(value);
        Py_XDECREF(error);
        Py_XDECREF(partition);
        if (!ok) {
            return;
        }
    }
    int width = (int)sizeof(PyObject *);
    Py_ssize_t value = find_field(probes, values, type->tp_basicsize, width);
    Py_ssize_t error = find_field(probes, errors, type->tp_basicsize, width);
    Py_ssize_t partition = find_field(probes, partitions, type->tp_basicsize, 4);
    if (value != -1 && error != -1 && partition != -1 && value != error) {
        value_at = value;
        error_at = error;
        partition_at = partition;
    }
}

static PyObject *
bind(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "bind(Message, probes)");
        return NULL;
    }
    PyObject *type = args[0];
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "bind: expected confluent_kafka.Message");
        return NULL;
    }
    PyCFunction found[M_COUNT];
    for (int i = 0; i < M_COUNT; i++) {
        PyObject *descr = PyObject_GetAttrString(type, method_names[i]);
        if (descr == NULL) {
            return NULL;
        }
        int ok = Py_IS_TYPE(descr, &PyMethodDescr_Type)
                 && (((PyMethodDescrObject *)descr)->d_method->ml_flags
                     & (METH_VARARGS | METH_KEYWORDS | METH_NOARGS | METH_O | METH_FASTCALL | METH_METHOD))
                        == METH_NOARGS;
        if (ok) {
            found[i] = ((PyMethodDescrObject *)descr)->d_method->ml_meth;
        }
        Py_DECREF(descr);
        if (!ok) {
            Py_RETURN_FALSE; /* not the C type this was written for: every message goes through Python */
        }
    }
    memcpy(method_funcs, found, sizeof found);
    Py_XSETREF(message_type, (PyTypeObject *)Py_NewRef(type));
    probe_timestamps(message_type, args[1]);
    probe_fields(message_type, args[1]);
    return PyBool_FromLong(timestamp_at != -1);
}

/* in_place() -> the fields the loops read where a Message keeps them (as bind() found) */
static PyObject *
in_place(PyObject *module, PyObject *unused)
{
    PyObject *out = PyList_New(0);
    const char *names[] = {"error", "partition", "timestamp", "value"};
    int found[] = {error_at != -1, partition_at != -1, timestamp_at != -1, value_at != -1};
    for (int i = 0; out != NULL && i < 4; i++) {
        if (found[i]) {
            PyObject *name = PyUnicode_FromString(names[i]);
            if (name == NULL || PyList_Append(out, name) < 0) {
                Py_XDECREF(name);
                Py_CLEAR(out);
                break;
            }
            Py_DECREF(name);
        }
    }
    if (out == NULL) {
        return NULL;
    }
    PyObject *set = PyFrozenSet_New(out);
    Py_DECREF(out);
    return set;
}

static int
check_list(PyObject *messages, const char *what)
{
    if (!PyList_Check(messages)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a list", what);
        return -1;
    }
    return 0;
}

/*
 * messages[i] as a new reference, or NULL with RuntimeError when the list no longer reaches i: a
 * message that is not a confluent_kafka.Message answers through Python code, which could change
 * the list (and free the item) while it runs, so no loop here reads an item it does not hold.
 */
static PyObject *
item_at(PyObject *messages, Py_ssize_t i, const char *what)
{
    if (i >= PyList_GET_SIZE(messages)) {
        PyErr_Format(PyExc_RuntimeError, "%s: the list changed while it was read", what);
        return NULL;
    }
    return Py_NewRef(PyList_GET_ITEM(messages, i));
}

/* first_error(messages) -> index of the first message whose error() is not None, or -1 */
static PyObject *
first_error(PyObject *module, PyObject *messages)
{
    if (check_list(messages, "first_error") < 0) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *msg = PyList_GET_ITEM(messages, i);
        if (error_at != -1 && exact(msg)) { /* read in place: no Python runs, the list stays */
            PyObject *err = field_at(msg, error_at);
            if (err != NULL && err != Py_None) {
                return PyLong_FromSsize_t(i);
            }
            continue;
        }
        msg = item_at(messages, i, "first_error");
        if (msg == NULL) {
            return NULL;
        }
        PyObject *err = call(msg, M_ERROR);
        Py_DECREF(msg);
        if (err == NULL) {
            return NULL;
        }
        int is_none = err == Py_None;
        Py_DECREF(err);
        if (!is_none) {
            return PyLong_FromSsize_t(i);
        }
    }
    return PyLong_FromLong(-1);
}

/* Append stop to cuts; -1 on failure. */
static int
append_cut(PyObject *cuts, Py_ssize_t stop)
{
    PyObject *at = PyLong_FromSsize_t(stop);
    if (at == NULL || PyList_Append(cuts, at) < 0) {
        Py_XDECREF(at);
        return -1;
    }
    Py_DECREF(at);
    return 0;
}

/*
 * partition_cuts() of a list of Messages only, each partition read where the message keeps it;
 * NULL without an exception when one is not a Message (the caller asks them all through calls).
 */
static PyObject *
partition_cuts_in_place(PyObject *messages)
{
    Py_ssize_t n = PyList_GET_SIZE(messages);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!exact(PyList_GET_ITEM(messages, i))) {
            return NULL;
        }
    }
    PyObject *cuts = PyList_New(0);
    if (cuts == NULL) {
        return NULL;
    }
    int32_t previous = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t partition;
        memcpy(&partition, (const char *)PyList_GET_ITEM(messages, i) + partition_at, 4);
        if (i && partition != previous && append_cut(cuts, i) < 0) {
            Py_DECREF(cuts);
            return NULL;
        }
        previous = partition;
    }
    if (n && append_cut(cuts, n) < 0) {
        Py_DECREF(cuts);
        return NULL;
    }
    return cuts;
}

/* partition_cuts(messages) -> [stop, ...]: where each run of one partition ends */
static PyObject *
partition_cuts(PyObject *module, PyObject *messages)
{
    if (check_list(messages, "partition_cuts") < 0) {
        return NULL;
    }
    if (partition_at != -1) {
        PyObject *cuts = partition_cuts_in_place(messages);
        if (cuts != NULL || PyErr_Occurred()) {
            return cuts;
        }
    }
    PyObject *cuts = PyList_New(0);
    if (cuts == NULL) {
        return NULL;
    }
    PyObject *previous = NULL;
    Py_ssize_t n = PyList_GET_SIZE(messages);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = item_at(messages, i, "partition_cuts");
        if (msg == NULL) {
            goto fail;
        }
        PyObject *partition = call(msg, M_PARTITION);
        Py_DECREF(msg);
        if (partition == NULL) {
            goto fail;
        }
        if (previous != NULL) {
            int same = PyObject_RichCompareBool(previous, partition, Py_EQ);
            if (same < 0) {
                Py_DECREF(partition);
                goto fail;
            }
            if (!same) {
                PyObject *stop = PyLong_FromSsize_t(i);
                if (stop == NULL || PyList_Append(cuts, stop) < 0) {
                    Py_XDECREF(stop);
                    Py_DECREF(partition);
                    goto fail;
                }
                Py_DECREF(stop);
            }
        }
        Py_XSETREF(previous, partition);
    }
    Py_XDECREF(previous);
    if (n) {
        PyObject *stop = PyLong_FromSsize_t(n);
        if (stop == NULL || PyList_Append(cuts, stop) < 0) {
            Py_XDECREF(stop);
            Py_DECREF(cuts);
            return NULL;
        }
        Py_DECREF(stop);
    }
    return cuts;
fail:
    Py_XDECREF(previous);
    Py_DECREF(cuts);
    return NULL;
}

/*
 * timestamp_range(messages, start, stop) -> (smallest, largest) of the timestamps of
 * messages[start:stop] that have one (type not 0, TIMESTAMP_NOT_AVAILABLE), or (None, None).
 */
static PyObject *
timestamp_range(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || check_list(args[0], "timestamp_range") < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "timestamp_range(messages, start, stop)");
        }
        return NULL;
    }
    PyObject *messages = args[0];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (start < 0 || stop > PyList_GET_SIZE(messages) || start > stop) {
        PyErr_SetString(PyExc_IndexError, "timestamp_range: range outside the messages");
        return NULL;
    }
    long long low = 0, high = 0;
    int any = 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        if (i >= PyList_GET_SIZE(messages)) {
            PyErr_SetString(PyExc_RuntimeError, "timestamp_range: the list changed while it was read");
            return NULL;
        }
        PyObject *msg = PyList_GET_ITEM(messages, i);
        long long kind, ms;
        if (timestamp_at != -1 && exact(msg)) { /* read in place: no Python runs, the list stays */
            int32_t at_kind;
            int64_t at_ms;
            memcpy(&at_kind, (const char *)msg + kind_at, 4);
            memcpy(&at_ms, (const char *)msg + timestamp_at, 8);
            kind = at_kind;
            ms = at_ms;
        } else {
            Py_INCREF(msg);
            PyObject *pair = call(msg, M_TIMESTAMP);
            Py_DECREF(msg);
            if (pair == NULL) {
                return NULL;
            }
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                Py_DECREF(pair);
                PyErr_SetString(PyExc_TypeError, "timestamp_range: timestamp() is not a (type, ms) pair");
                return NULL;
            }
            kind = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 0));
            ms = PyLong_AsLongLong(PyTuple_GET_ITEM(pair, 1));
            Py_DECREF(pair);
            if (PyErr_Occurred()) {
                return NULL;
            }
        }
        if (kind == 0) {
            continue; /* TIMESTAMP_NOT_AVAILABLE */
        }
        if (!any) {
            low = high = ms;
            any = 1;
        } else if (ms < low) {
            low = ms;
        } else if (ms > high) {
            high = ms;
        }
    }
    if (!any) {
        return Py_BuildValue("(OO)", Py_None, Py_None);
    }
    return Py_BuildValue("(LL)", low, high);
}

static int
int64_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t n, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    const char *fmt = view->format;
    if (view->itemsize != 8 || view->len != n * 8 || fmt == NULL
        || !(strcmp(fmt, "l") == 0 || strcmp(fmt, "q") == 0 || strcmp(fmt, "<q") == 0
             || strcmp(fmt, "=q") == 0 || strcmp(fmt, "<l") == 0 || strcmp(fmt, "=l") == 0)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "join: %s must be a writable int64 array of %zd items", what, n);
        return -1;
    }
    return 0;
}

/*
 * join(values, padding, starts, ends) -> data or None
 *
 * data = b"".join(values) + padding; starts[i], ends[i] = where values[i] lies in it (int64
 * arrays of len(values), filled in place). None (nothing filled) when a value is not bytes (a
 * tombstone). What the numpy versions of the Avro steps read; the C ones read the values where
 * they lie, and same_header() checks their headers without a copy.
 */
static PyObject *
join(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || check_list(args[0], "join") < 0 || !PyBytes_Check(args[1])) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "join(values, padding, starts, ends)");
        }
        return NULL;
    }
    PyObject *values = args[0];
    PyObject *padding = args[1];
    Py_ssize_t n = PyList_GET_SIZE(values);
    Py_ssize_t total = PyBytes_GET_SIZE(padding);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (!PyBytes_CheckExact(v)) {
            Py_RETURN_NONE;
        }
        total += PyBytes_GET_SIZE(v);
    }
    Py_buffer starts, ends;
    if (int64_buffer(args[2], &starts, n, "starts") < 0) {
        return NULL;
    }
    if (int64_buffer(args[3], &ends, n, "ends") < 0) {
        PyBuffer_Release(&starts);
        return NULL;
    }
    PyObject *data = PyBytes_FromStringAndSize(NULL, total);
    if (data == NULL) {
        PyBuffer_Release(&starts);
        PyBuffer_Release(&ends);
        return NULL;
    }
    char *out = PyBytes_AS_STRING(data);
    int64_t *start_at = (int64_t *)starts.buf, *end_at = (int64_t *)ends.buf;
    int64_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        Py_ssize_t size = PyBytes_GET_SIZE(v);
        memcpy(out + at, PyBytes_AS_STRING(v), (size_t)size);
        start_at[i] = at;
        at += size;
        end_at[i] = at;
    }
    memcpy(out + at, PyBytes_AS_STRING(padding), (size_t)PyBytes_GET_SIZE(padding));
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return data;
}

/* values(messages) -> [message.value(), ...] */
static PyObject *
values(PyObject *module, PyObject *messages)
{
    if (check_list(messages, "values") < 0) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(messages);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = i < PyList_GET_SIZE(messages) ? PyList_GET_ITEM(messages, i) : NULL;
        PyObject *value;
        if (msg != NULL && value_at != -1 && exact(msg)) { /* read in place */
            value = field_at(msg, value_at);
            value = Py_NewRef(value != NULL ? value : Py_None);
        }
        else {
            msg = item_at(messages, i, "values");
            if (msg == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            value = call(msg, M_VALUE);
            Py_DECREF(msg);
            if (value == NULL) {
                Py_DECREF(out);
                return NULL;
            }
        }
        PyList_SET_ITEM(out, i, value);
    }
    return out;
}

/*
 * same_header(values, header) -> bool: every value is bytes at least `header` long and starts
 * with the first one's `header` bytes (False for an empty list, or when one is a tombstone).
 */
static PyObject *
same_header(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || check_list(args[0], "same_header") < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "same_header(values, header)");
        }
        return NULL;
    }
    PyObject *list = args[0];
    Py_ssize_t header = PyLong_AsSsize_t(args[1]);
    if (header == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n == 0 || header < 0) {
        Py_RETURN_FALSE;
    }
    const char *head = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(list, i);
        if (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) < header) {
            Py_RETURN_FALSE;
        }
        if (head == NULL) {
            head = PyBytes_AS_STRING(v);
        }
        else if (memcmp(head, PyBytes_AS_STRING(v), (size_t)header) != 0) {
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"values", (PyCFunction)values, METH_O, "values(messages) -> [message.value(), ...]"},
    {"same_header", (PyCFunction)(void (*)(void))same_header, METH_FASTCALL,
     "same_header(values, header) -> bool: all bytes, each at least header long, all with one header"},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(Message, probes) -> bool: read Message fields where the probes show they are kept (else "
     "through the C functions behind its methods); True when the timestamp is among them"},
    {"in_place", (PyCFunction)in_place, METH_NOARGS,
     "in_place() -> frozenset of the Message fields read where a Message keeps them"},
    {"first_error", (PyCFunction)first_error, METH_O,
     "first_error(messages) -> index of the first message with an error, or -1"},
    {"partition_cuts", (PyCFunction)partition_cuts, METH_O,
     "partition_cuts(messages) -> where each run of one partition ends"},
    {"timestamp_range", (PyCFunction)(void (*)(void))timestamp_range, METH_FASTCALL,
     "timestamp_range(messages, start, stop) -> (smallest, largest) timestamp, or (None, None)"},
    {"join", (PyCFunction)(void (*)(void))join, METH_FASTCALL,
     "join(values, padding, starts, ends) -> data, or None for a tombstone"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "sink.records._scan", "Per-message loops of the consuming thread, in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModule_Create(&module);
}
