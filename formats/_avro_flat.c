/*
 * formats._avro_flat: Avro bodies of one flat record schema, checked and decoded in one C walk.
 *
 * formats/avro_columns.py decodes a batch of bodies column by column with numpy: the Python
 * work is per field, but each field is a dozen array operations over a couple of thousand
 * positions, which cost more than the bytes they read (docs/benchmarks.md, "Flat Avro and JSON
 * text in C").
 * Here each body is walked once, field by field, as a reader of the schema would.
 *
 *   check(data, starts, ends, header, kinds, nulls) -> bool
 *   decode(data, starts, ends, header, kinds, nulls) -> list | None
 *   check_values(values, header, kinds, nulls) -> bool
 *   decode_values(values, header, kinds, nulls) -> list | None
 *
 * Body i is data[starts[i] + header : ends[i]] (starts, ends: int64 buffers), or values[i] after
 * its header (values: a list of bytes, walked where each lies: a consumed batch's values need not
 * be joined, a copy of every byte, to be checked or decoded). kinds has one
 * byte per field: b boolean, i int, l long, f float, d double, s string, y bytes; nulls one byte
 * per field: 0 not nullable, 1 a ["null", T] union (null is branch 0), 2 a [T, "null"] union.
 *
 * A body is accepted exactly when formats/avro_columns.decode_columns accepts it: union branches
 * 0/1, ints in range, booleans 0/1, zig-zag varints of at most 10 bytes (the tenth at most 1),
 * lengths that are not negative and stay inside the body, valid UTF-8 in strings, no bytes left
 * over, and less than 2 GiB of text per column (Arrow's int32 offsets). One bad body makes both
 * functions say so for the whole batch (False / None): the per-record path then finds and
 * reports it.
 *
 * decode gives per field a tuple (values, present, offsets): values the column's data (int32,
 * int64, float32, float64 little-endian, one byte 0/1 per boolean, or a string column's bytes),
 * present one byte per row (1 = not null) or None when the field is not nullable, offsets the
 * int32 offsets of a string/bytes column (count + 1 of them) or None. A null row's value is
 * zero, its string empty. A float32 NaN gets its quiet bit set, as the per-record path's round
 * trip through a Python float does.
 *
 * The walks let go of the GIL only for a megabyte of data or more. A sink's batch is a couple of
 * hundred kilobytes, walked in about a tenth of a millisecond on its consuming thread: handing
 * the GIL to another thread there could leave that thread waiting up to the interpreter's
 * switch interval (5 ms) to have it back.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "formats._avro_flat writes little-endian columns as the machine's own (the build skips it)"
#endif

#define RELEASE_FROM (1 << 20)

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

typedef struct {
    const uint8_t *data;
    Py_ssize_t size;
    const int64_t *starts;
    const int64_t *ends;
    PyObject *const *items; /* the values one by one (bytes objects), or NULL: data/starts/ends */
    Py_ssize_t count;
    Py_ssize_t header;
    const char *kinds;
    const char *nulls;
    Py_ssize_t nfields;
} Batch;

typedef struct {
    uint8_t *values;   /* count * width bytes (string/bytes: the text) */
    uint8_t *present;  /* count bytes, or NULL */
    int32_t *offsets;  /* count + 1, or NULL */
} Column;

/* A zig-zag varint at *p (not past end): its value, and *p moved past it; 0 when malformed. */
static inline int
read_varint(const uint8_t **p, const uint8_t *end, int64_t *out)
{
    const uint8_t *at = *p;
    if (at < end && !(*at & 0x80)) { /* the usual one-byte varint: a branch, a short length */
        *p = at + 1;
        *out = (int64_t)(*at >> 1) ^ -(int64_t)(*at & 1);
        return 1;
    }
    uint64_t raw = 0;
    for (int k = 0; k < 10; k++) {
        if (at >= end) {
            return 0;
        }
        uint8_t byte = *at++;
        if (k == 9 && byte > 1) {
            return 0; /* beyond 64 bits, or longer than 10 bytes */
        }
        raw |= (uint64_t)(byte & 0x7F) << (7 * k);
        if (!(byte & 0x80)) {
            *p = at;
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 1;
        }
    }
    return 0; /* not reached: the tenth byte either ends the varint or is rejected */
}

/*
 * Whether s[0:n] holds no byte >= 0x80. Words are OR-ed together with one test at the end; the
 * last partial word is read whole when the buffer (which ends at limit) has room, its extra bytes
 * masked off, so a short string costs one load.
 */
static inline int
ascii_only(const uint8_t *s, Py_ssize_t n, const uint8_t *limit)
{
    uint64_t acc = 0, word;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&word, s + i, 8);
        acc |= word;
    }
    if (i < n) {
        Py_ssize_t rest = n - i;
        if (limit - (s + i) >= 8) {
            memcpy(&word, s + i, 8);
            acc |= word & (~(uint64_t)0 >> (8 * (8 - rest))); /* little-endian: the first bytes */
        }
        else {
            for (; i < n; i++) {
                acc |= s[i];
            }
        }
    }
    return !(acc & 0x8080808080808080ULL);
}

/* Whether s[0:n] is valid UTF-8 (RFC 3629: no overlongs, no surrogates, at most U+10FFFF). */
static int
valid_utf8(const uint8_t *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if (!(word & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) {
                return 0;
            }
            i += 2;
        }
        else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) {
                return 0;
            }
            uint8_t c1 = s[i + 1], c2 = s[i + 2];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) {
                return 0;
            }
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) {
                return 0; /* overlong, or a surrogate */
            }
            i += 3;
        }
        else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) {
                return 0;
            }
            uint8_t c1 = s[i + 1], c2 = s[i + 2], c3 = s[i + 3];
            if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80 || (c3 & 0xC0) != 0x80) {
                return 0;
            }
            if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) {
                return 0; /* overlong, or beyond U+10FFFF */
            }
            i += 4;
        }
        else {
            return 0;
        }
    }
    return 1;
}

/*
 * Walk every body. With cols == NULL only check (and sum each string/bytes column's text into
 * totals); otherwise also write the columns, whose buffers are sized from the check's totals.
 * Returns 1 when every body is accepted.
 */
static ALWAYS_INLINE int
walk_impl(const Batch *b, int64_t *totals, Column *cols)
{
    for (Py_ssize_t f = 0; f < b->nfields; f++) {
        totals[f] = 0;
        if (cols != NULL && cols[f].offsets != NULL) {
            cols[f].offsets[0] = 0;
        }
    }
    for (Py_ssize_t row = 0; row < b->count; row++) {
        const uint8_t *p, *end, *limit;
        if (b->items != NULL) {
            PyObject *value = b->items[row];
            Py_ssize_t size = PyBytes_GET_SIZE(value);
            if (size < b->header) {
                return 0;
            }
            p = (const uint8_t *)PyBytes_AS_STRING(value) + b->header;
            end = limit = (const uint8_t *)PyBytes_AS_STRING(value) + size;
        }
        else {
            int64_t start = b->starts[row], stop = b->ends[row];
            if (start < 0 || stop > b->size || start + b->header > stop) {
                return 0;
            }
            p = b->data + start + b->header;
            end = b->data + stop;
            limit = b->data + b->size;
        }
        for (Py_ssize_t f = 0; f < b->nfields; f++) {
            char kind = b->kinds[f];
            char nullable = b->nulls[f];
            Column *col = cols == NULL ? NULL : &cols[f];
            int present = 1;
            if (nullable) {
                int64_t branch;
                if (!read_varint(&p, end, &branch) || (branch != 0 && branch != 1)) {
                    return 0;
                }
                present = branch != (int64_t)(nullable - 1);
                if (col != NULL) {
                    col->present[row] = (uint8_t)present;
                }
            }
            switch (kind) {
            case 'b': {
                uint8_t v = 0;
                if (present) {
                    if (p >= end || *p > 1) {
                        return 0;
                    }
                    v = *p++;
                }
                if (col != NULL) {
                    col->values[row] = v;
                }
                break;
            }
            case 'i':
            case 'l': {
                int64_t v = 0;
                if (present) {
                    if (!read_varint(&p, end, &v)) {
                        return 0;
                    }
                    if (kind == 'i' && (v < INT32_MIN || v > INT32_MAX)) {
                        return 0;
                    }
                }
                if (col != NULL) {
                    if (kind == 'i') {
                        int32_t v32 = (int32_t)v;
                        memcpy(col->values + 4 * row, &v32, 4);
                    }
                    else {
                        memcpy(col->values + 8 * row, &v, 8);
                    }
                }
                break;
            }
            case 'f':
            case 'd': {
                Py_ssize_t width = kind == 'f' ? 4 : 8;
                if (present && end - p < width) {
                    return 0;
                }
                if (col != NULL) {
                    uint8_t *out = col->values + width * row;
                    if (!present) {
                        memset(out, 0, (size_t)width);
                    }
                    else if (kind == 'f') {
                        uint32_t bits;
                        memcpy(&bits, p, 4);
                        if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu)) {
                            bits |= 0x00400000u; /* a NaN: quiet, as a float32 -> float -> float32 trip */
                        }
                        memcpy(out, &bits, 4);
                    }
                    else {
                        memcpy(out, p, 8);
                    }
                }
                if (present) {
                    p += width;
                }
                break;
            }
            case 's':
            case 'y': {
                int64_t size = 0;
                if (present) {
                    if (!read_varint(&p, end, &size) || size < 0 || size > end - p) {
                        return 0;
                    }
                    if (kind == 's' && !ascii_only(p, (Py_ssize_t)size, limit)
                        && !valid_utf8(p, (Py_ssize_t)size)) {
                        return 0;
                    }
                    totals[f] += size;
                    if (totals[f] >= ((int64_t)1 << 31)) {
                        return 0; /* more text than Arrow's int32 offsets reach */
                    }
                }
                if (col != NULL) {
                    int32_t at = col->offsets[row];
                    memcpy(col->values + at, p, (size_t)size);
                    col->offsets[row + 1] = at + (int32_t)size;
                }
                p += size;
                break;
            }
            default:
                return 0;
            }
        }
        if (p != end) {
            return 0; /* bytes left over after the last field */
        }
    }
    return 1;
}

/*
 * walk_impl() made twice, the check (no columns) and the decode: with cols a constant in each
 * branch the compiler drops every "is there a column" test from the check's inner loop, which is
 * what the pass-through runs on every consumed batch.
 */
static int
walk(const Batch *b, int64_t *totals, Column *cols)
{
    return cols == NULL ? walk_impl(b, totals, NULL) : walk_impl(b, totals, cols);
}

/* header, kinds and nulls (the same in both calling conventions) into b. */
static int
get_fields(PyObject *header, PyObject *kinds, PyObject *nulls, Batch *b)
{
    b->header = PyLong_AsSsize_t(header);
    if (!PyBytes_Check(kinds) || !PyBytes_Check(nulls) || PyErr_Occurred()) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "kinds and nulls must be bytes");
        }
        return 0;
    }
    if (b->header < 0) {
        PyErr_SetString(PyExc_ValueError, "header must not be negative");
        return 0;
    }
    b->nfields = PyBytes_GET_SIZE(kinds);
    if (b->nfields != PyBytes_GET_SIZE(nulls)) {
        PyErr_SetString(PyExc_ValueError, "kinds and nulls: one byte per field");
        return 0;
    }
    for (Py_ssize_t f = 0; f < b->nfields; f++) {
        char kind = PyBytes_AS_STRING(kinds)[f];
        char nullable = PyBytes_AS_STRING(nulls)[f];
        if (!strchr("bilfdsy", kind) || kind == 0 || nullable < 0 || nullable > 2) {
            PyErr_Format(PyExc_ValueError, "field %zd: kind %d / null branch %d not known", f, kind, nullable);
            return 0;
        }
    }
    b->kinds = PyBytes_AS_STRING(kinds);
    b->nulls = PyBytes_AS_STRING(nulls);
    return 1;
}

static int
get_batch(PyObject *const *args, Py_ssize_t nargs, Py_buffer views[3], Batch *b)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "(data, starts, ends, header, kinds, nulls)");
        return 0;
    }
    if (PyObject_GetBuffer(args[0], &views[0], PyBUF_SIMPLE) < 0) {
        return 0;
    }
    if (PyObject_GetBuffer(args[1], &views[1], PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&views[0]);
        return 0;
    }
    if (PyObject_GetBuffer(args[2], &views[2], PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&views[0]);
        PyBuffer_Release(&views[1]);
        return 0;
    }
    if (views[1].len != views[2].len || views[1].len % 8) {
        PyErr_SetString(PyExc_ValueError, "starts and ends must be int64 buffers of one length");
        goto fail;
    }
    if (!get_fields(args[3], args[4], args[5], b)) {
        goto fail;
    }
    b->data = views[0].buf;
    b->size = views[0].len;
    b->starts = views[1].buf;
    b->ends = views[2].buf;
    b->items = NULL;
    b->count = views[1].len / 8;
    return 1;
fail:
    PyBuffer_Release(&views[0]);
    PyBuffer_Release(&views[1]);
    PyBuffer_Release(&views[2]);
    return 0;
}

/*
 * The arguments of check_values/decode_values: (values, header, kinds, nulls), values a list of
 * bytes walked where they lie (no join). Nothing to release afterwards; the list must not change
 * while it is walked, so these walks keep the GIL (a sink's batch is small: see the top).
 */
static int
get_listed(PyObject *const *args, Py_ssize_t nargs, Batch *b)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "(values, header, kinds, nulls)");
        return 0;
    }
    if (!PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "values must be a list of bytes");
        return 0;
    }
    if (!get_fields(args[1], args[2], args[3], b)) {
        return 0;
    }
    b->count = PyList_GET_SIZE(args[0]);
    b->items = ((PyListObject *)args[0])->ob_item;
    for (Py_ssize_t i = 0; i < b->count; i++) {
        if (!PyBytes_Check(b->items[i])) {
            PyErr_Format(PyExc_TypeError, "value %zd is not bytes", i);
            return 0;
        }
    }
    b->data = NULL;
    b->size = 0; /* below RELEASE_FROM: walked with the GIL held */
    b->starts = b->ends = NULL;
    return 1;
}

/* walk() without the GIL when the batch is large enough for that to pay (see the top). */
static int
walk_released(const Batch *b, int64_t *totals, Column *cols)
{
    if (b->size < RELEASE_FROM) {
        return walk(b, totals, cols);
    }
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = walk(b, totals, cols);
    Py_END_ALLOW_THREADS
    return ok;
}

static void
release(Py_buffer views[3])
{
    PyBuffer_Release(&views[0]);
    PyBuffer_Release(&views[1]);
    PyBuffer_Release(&views[2]);
}

static PyObject *
check_batch(const Batch *b)
{
    int64_t *totals = PyMem_Malloc(sizeof(int64_t) * (size_t)(b->nfields ? b->nfields : 1));
    if (totals == NULL) {
        return PyErr_NoMemory();
    }
    int ok = walk_released(b, totals, NULL);
    PyMem_Free(totals);
    return PyBool_FromLong(ok);
}

static PyObject *
check(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer views[3];
    Batch b;
    if (!get_batch(args, nargs, views, &b)) {
        return NULL;
    }
    PyObject *out = check_batch(&b);
    release(views);
    return out;
}

static PyObject *
check_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Batch b;
    if (!get_listed(args, nargs, &b)) {
        return NULL;
    }
    return check_batch(&b);
}

static Py_ssize_t
width_of(char kind)
{
    switch (kind) {
    case 'b':
        return 1;
    case 'i':
    case 'f':
        return 4;
    case 'l':
    case 'd':
        return 8;
    default:
        return 0; /* string / bytes: sized by the text */
    }
}

static PyObject *
decode_batch(const Batch *bp)
{
    const Batch b = *bp;
    Column *cols = NULL;
    PyObject *out = NULL;
    int64_t *mine = PyMem_Malloc(sizeof(int64_t) * (size_t)(b.nfields ? b.nfields : 1));
    if (mine == NULL) {
        return PyErr_NoMemory();
    }
    int ok = walk_released(&b, mine, NULL);
    if (!ok) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    cols = PyMem_Calloc((size_t)(b.nfields ? b.nfields : 1), sizeof(Column));
    out = PyList_New(b.nfields);
    if (cols == NULL || out == NULL) {
        Py_CLEAR(out);
        if (cols == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    for (Py_ssize_t f = 0; f < b.nfields; f++) {
        char kind = b.kinds[f];
        Py_ssize_t width = width_of(kind);
        PyObject *values = PyBytes_FromStringAndSize(NULL, width ? width * b.count : (Py_ssize_t)mine[f]);
        PyObject *present = b.nulls[f] ? PyBytes_FromStringAndSize(NULL, b.count) : Py_NewRef(Py_None);
        PyObject *offsets = width ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(NULL, 4 * (b.count + 1));
        PyObject *item = (values && present && offsets) ? PyTuple_Pack(3, values, present, offsets) : NULL;
        if (item != NULL) {
            cols[f].values = (uint8_t *)PyBytes_AS_STRING(values);
            cols[f].present = present == Py_None ? NULL : (uint8_t *)PyBytes_AS_STRING(present);
            cols[f].offsets = offsets == Py_None ? NULL : (int32_t *)PyBytes_AS_STRING(offsets);
        }
        Py_XDECREF(values);
        Py_XDECREF(present);
        Py_XDECREF(offsets);
        if (item == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, f, item);
    }
    ok = walk_released(&b, mine, cols);
    if (!ok) { /* cannot happen: the data is immutable and was accepted by the first walk */
        Py_SETREF(out, Py_NewRef(Py_None));
    }
done:
    PyMem_Free(cols);
    PyMem_Free(mine);
    return out;
}

static PyObject *
decode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer views[3];
    Batch b;
    if (!get_batch(args, nargs, views, &b)) {
        return NULL;
    }
    PyObject *out = decode_batch(&b);
    release(views);
    return out;
}

static PyObject *
decode_values(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Batch b;
    if (!get_listed(args, nargs, &b)) {
        return NULL;
    }
    return decode_batch(&b);
}

static PyMethodDef methods[] = {
    {"check", (PyCFunction)(void (*)(void))check, METH_FASTCALL,
     "check(data, starts, ends, header, kinds, nulls) -> bool: every body decodes cleanly"},
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(data, starts, ends, header, kinds, nulls) -> list of (values, present, offsets) | None"},
    {"check_values", (PyCFunction)(void (*)(void))check_values, METH_FASTCALL,
     "check_values(values, header, kinds, nulls) -> bool: check() of a list of values, not joined"},
    {"decode_values", (PyCFunction)(void (*)(void))decode_values, METH_FASTCALL,
     "decode_values(values, header, kinds, nulls) -> decode() of a list of values, not joined"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "formats._avro_flat", "Flat Avro bodies checked and decoded in one C walk.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__avro_flat(void)
{
    return PyModule_Create(&module);
}
