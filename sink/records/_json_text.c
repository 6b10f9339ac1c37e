/*
 * sink.records._json_text: the joined form of schemaless JSON values, made and checked in C.
 *
 * sink/records/json_text.py joins a run of one-line JSON objects with newlines and checks that
 * every line is one valid JSON document. In Python that was a join and three numpy scans for the
 * framing, then msgspec over the values joined once more as an array: together about a
 * microsecond per record on the consuming thread of JSON -> JSON (docs/benchmarks.md, "Flat
 * Avro and JSON text in C").
 *
 *   join(values) -> bytes | None
 *       b"\n".join(values) when every value is bytes framed as a one-line object: starts with
 *       "{", ends with "}", holds no "\n" and no "\r". None otherwise (a tombstone included).
 *   valid(data, count, max_int_digits) -> bool
 *       Whether data is exactly count lines, each one JSON document and nothing else (RFC 8259,
 *       strict), that Python's json.loads takes as msgspec does: no NaN or Infinity, no lone
 *       surrogate escapes, strings of valid UTF-8 without control characters, no integer of
 *       more than max_int_digits digits (0: no limit; sys.get_int_max_str_digits), at most
 *       MAX_DEPTH objects and arrays inside each other, no blanks before or after the document. A refusal only costs speed: the records then go one by one through
 *       the JSON converter, which decides.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_DEPTH 256 /* json.loads takes about a thousand: deeper values go the per-record way */

typedef struct {
    const uint8_t *p;
    const uint8_t *end;   /* the end of the line */
    const uint8_t *limit; /* the end of the data: reads ahead stay before it */
    Py_ssize_t max_digits;
} Cursor;

static inline void
skip_ws(Cursor *c)
{
    while (c->p < c->end && *c->p <= ' ' && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        c->p++;
    }
}

static inline int
hex4(const uint8_t *p, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') {
            v |= (uint32_t)(ch - '0');
        }
        else if (ch >= 'a' && ch <= 'f') {
            v |= (uint32_t)(ch - 'a' + 10);
        }
        else if (ch >= 'A' && ch <= 'F') {
            v |= (uint32_t)(ch - 'A' + 10);
        }
        else {
            return 0;
        }
    }
    *out = v;
    return 1;
}

/* One UTF-8 sequence of two or more bytes at p (p[0] >= 0x80): its length, or 0 when invalid. */
static inline int
utf8_sequence(const uint8_t *p, const uint8_t *end)
{
    uint8_t c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) {
            return 0;
        }
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] > 0x9F)) {
            return 0; /* overlong, or a surrogate */
        }
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) {
            return 0;
        }
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] > 0x8F)) {
            return 0; /* overlong, or beyond U+10FFFF */
        }
        return 4;
    }
    return 0;
}

/* Whether a word holds a byte that ends the fast scan of a string: '"', '\\', < 0x20, >= 0x80. */
static inline int
special_in(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"');
    uint64_t slash = w ^ (ones * '\\');
    uint64_t has_quote = (quote - ones) & ~quote;
    uint64_t has_slash = (slash - ones) & ~slash;
    uint64_t has_control = (w - ones * 0x20) & ~w;
    return ((has_quote | has_slash | has_control) & highs) || (w & highs);
}

/* A string whose opening quote c->p points at. */
static int
string(Cursor *c)
{
    const uint8_t *p = c->p + 1, *end = c->end;
    for (;;) {
        int found = 0; /* p is at a byte that ends the fast scan */
#if defined(__SSE2__)
        /* 16 bytes at a time: the first '"', '\\', control or non-ASCII byte, found directly */
        const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), below = _mm_set1_epi8(0x1F);
        /* loads may pass the line's end (not the data's): the newline ending a line is a control
           byte, so the first byte found lies at the line's end at the latest */
        while (c->limit - p >= 16 && p < end) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash));
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_max_epu8(v, below), below)); /* v <= 0x1F */
            unsigned mask = (unsigned)(_mm_movemask_epi8(hit) | _mm_movemask_epi8(v)); /* or >= 0x80 */
            if (mask) {
                p += __builtin_ctz(mask);
                found = 1;
                break;
            }
            p += 16;
        }
        if (p > end) {
            p = end; /* ran through the line's end: no closing quote on this line */
        }
#endif
        while (!found && end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            if (special_in(w)) {
                break;
            }
            p += 8;
        }
        if (p >= end) {
            return 0;
        }
        uint8_t ch = *p;
        if (ch == '"') {
            c->p = p + 1;
            return 1;
        }
        if (ch < 0x20) {
            return 0;
        }
        if (ch == '\\') {
            if (end - p < 2) {
                return 0;
            }
            uint8_t e = p[1];
            if (e == 'u') {
                uint32_t unit;
                if (end - p < 6 || !hex4(p + 2, &unit)) {
                    return 0;
                }
                p += 6;
                if (unit >= 0xDC00 && unit <= 0xDFFF) {
                    return 0; /* a low surrogate alone */
                }
                if (unit >= 0xD800 && unit <= 0xDBFF) { /* a high surrogate: its low one must follow */
                    uint32_t low;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &low) || low < 0xDC00
                        || low > 0xDFFF) {
                        return 0;
                    }
                    p += 6;
                }
                continue;
            }
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
                continue;
            }
            return 0;
        }
        if (ch >= 0x80) {
            int n = utf8_sequence(p, end);
            if (!n) {
                return 0;
            }
            p += n;
            continue;
        }
        p++;
    }
}

static int
number(Cursor *c)
{
    const uint8_t *p = c->p, *end = c->end;
    if (p < end && *p == '-') {
        p++;
    }
    const uint8_t *digits = p;
    if (p >= end) {
        return 0;
    }
    if (*p == '0') {
        p++;
    }
    else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    else {
        return 0;
    }
    int integer = 1;
    Py_ssize_t int_digits = p - digits;
    if (p < end && *p == '.') {
        integer = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') {
            return 0;
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        integer = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') {
            return 0;
        }
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }
    if (integer && c->max_digits > 0 && int_digits > c->max_digits) {
        return 0; /* json.loads refuses to convert an integer this long */
    }
    c->p = p;
    return 1;
}

static inline int
literal(Cursor *c, const char *word, Py_ssize_t n)
{
    if (c->end - c->p < n || memcmp(c->p, word, (size_t)n) != 0) {
        return 0;
    }
    c->p += n;
    return 1;
}

static int value(Cursor *c, int depth);

static int
object(Cursor *c, int depth)
{
    c->p++; /* '{' */
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 1;
    }
    for (;;) {
        if (c->p >= c->end || *c->p != '"' || !string(c)) {
            return 0;
        }
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') {
            return 0;
        }
        c->p++;
        if (!value(c, depth + 1)) {
            return 0;
        }
        skip_ws(c);
        if (c->p >= c->end) {
            return 0;
        }
        if (*c->p == '}') {
            c->p++;
            return 1;
        }
        if (*c->p != ',') {
            return 0;
        }
        c->p++;
        skip_ws(c);
    }
}

static int
array(Cursor *c, int depth)
{
    c->p++; /* '[' */
    skip_ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 1;
    }
    for (;;) {
        if (!value(c, depth + 1)) {
            return 0;
        }
        skip_ws(c);
        if (c->p >= c->end) {
            return 0;
        }
        if (*c->p == ']') {
            c->p++;
            return 1;
        }
        if (*c->p != ',') {
            return 0;
        }
        c->p++;
    }
}

/* A value, whitespace before it skipped. */
static int
value(Cursor *c, int depth)
{
    skip_ws(c);
    if (c->p >= c->end) {
        return 0;
    }
    switch (*c->p) {
    case '{':
        return depth < MAX_DEPTH && object(c, depth);
    case '[':
        return depth < MAX_DEPTH && array(c, depth);
    case '"':
        return string(c);
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    default:
        return number(c);
    }
}

static int
lines_valid(const uint8_t *data, Py_ssize_t size, Py_ssize_t count, Py_ssize_t max_digits)
{
    const uint8_t *p = data, *stop = data + size;
    Py_ssize_t lines = 0;
    for (;;) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(stop - p));
        Cursor c = {p, nl == NULL ? stop : nl, stop, max_digits};
        if (p == c.end || *p == ' ' || *p == '\t' || !value(&c, 0) || c.p != c.end) {
            return 0; /* not one document, or one with blanks around it (no framed value has) */
        }
        lines++;
        if (nl == NULL) {
            break;
        }
        p = nl + 1;
    }
    return lines == count;
}

static PyObject *
valid(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "valid(data, count, max_int_digits)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    Py_ssize_t max_digits = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int ok = lines_valid(view.buf, view.len, count, max_digits);
    PyBuffer_Release(&view);
    return PyBool_FromLong(ok);
}

static PyObject *
join(PyObject *module, PyObject *values)
{
    if (!PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "join: values must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (n == 0) {
        Py_RETURN_NONE;
    }
    Py_ssize_t total = n - 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        if (!PyBytes_Check(v)) {
            Py_RETURN_NONE; /* a tombstone (None), or not bytes */
        }
        Py_ssize_t size = PyBytes_GET_SIZE(v);
        const char *s = PyBytes_AS_STRING(v);
        if (size < 2 || s[0] != '{' || s[size - 1] != '}' || memchr(s, '\n', (size_t)size) != NULL
            || memchr(s, '\r', (size_t)size) != NULL) {
            Py_RETURN_NONE;
        }
        total += size;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        return NULL;
    }
    char *at = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        Py_ssize_t size = PyBytes_GET_SIZE(v);
        if (i) {
            *at++ = '\n';
        }
        memcpy(at, PyBytes_AS_STRING(v), (size_t)size);
        at += size;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"join", (PyCFunction)join, METH_O,
     "join(values) -> bytes | None: the values joined by newlines when each is a one-line object"},
    {"valid", (PyCFunction)(void (*)(void))valid, METH_FASTCALL,
     "valid(data, count, max_int_digits) -> bool: count lines, each one valid JSON document"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "sink.records._json_text", "One-line JSON values joined and checked in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__json_text(void)
{
    return PyModule_Create(&module);
}
