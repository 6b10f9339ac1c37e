/*
 * formats._json_lines: one-line JSON objects of a flat, frozen schema parsed straight into
 * Arrow buffers, with the GIL released.
 *
 * Arrow's JSON reader was the largest cost of JSON -> PARQUET / AVRO (~0.7 us per 170-byte line,
 * a quarter of it per call; docs/benchmarks.md). This parser does the one thing those files
 * need: lines of `{"field": value, ...}` whose fields are long, double, string or boolean
 * columns (nullable or not) of a schema known in advance. It accepts strict JSON only and gives
 * up (returns None) on anything it is not sure to read exactly as Arrow's reader does: a key
 * not in the schema, a key twice, a missing non-nullable field, a fraction or exponent in a long
 * column, a long outside int64, a double with a 3-digit exponent or over 300 characters (near
 * the ends of the double's range RapidJSON, under Arrow's reader, refuses some texts strtod reads,
 * such as 0.0e310), a nested value, an escaped key, a lone surrogate, invalid UTF-8, more than 64
 * fields. formats/json_lines_arrow.py then asks Arrow's reader, as before, and the
 * same checks apply to either table.
 *
 * Doubles are converted with strtod_l in the C locale: correctly rounded, like Python's float()
 * and Arrow's reader, so all three give the same double for a decimal text.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 64

typedef struct {
    const char *name;
    Py_ssize_t name_len;
    char kind; /* 'l' long, 'd' double, 's' string, 'b' boolean */
    int nullable;
    uint8_t *valid;     /* validity bitmap, one bit per row (1: a value) */
    Py_ssize_t nulls;
    uint8_t *values;    /* int64 / double: 8 bytes a row; boolean: a bit a row; string: int32 offsets */
    char *text;         /* string bytes */
    Py_ssize_t text_len, text_cap;
} Column;

static locale_t c_locale = (locale_t)0;

static inline const char *
skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t')) {
        p++;
    }
    return p;
}

static int
text_room(Column *c, Py_ssize_t more)
{
    if (c->text_len + more <= c->text_cap) {
        return 0;
    }
    Py_ssize_t cap = c->text_cap ? c->text_cap : 4096;
    while (cap < c->text_len + more) {
        cap *= 2;
    }
    if (cap > INT32_MAX) {
        return -1; /* Arrow's string offsets are int32 */
    }
    char *grown = realloc(c->text, (size_t)cap);
    if (grown == NULL) {
        return -1;
    }
    c->text = grown;
    c->text_cap = cap;
    return 0;
}

static void
put_utf8(char *out, uint32_t cp, int *len)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        *len = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        *len = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        *len = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        *len = 4;
    }
}

static int
hex4(const char *p, const char *end, uint32_t *out)
{
    if (end - p < 4) {
        return -1;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') {
            v |= (uint32_t)(ch - '0');
        } else if (ch >= 'a' && ch <= 'f') {
            v |= (uint32_t)(ch - 'a' + 10);
        } else if (ch >= 'A' && ch <= 'F') {
            v |= (uint32_t)(ch - 'A' + 10);
        } else {
            return -1;
        }
    }
    *out = v;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (2-4 bytes, no overlong form, no surrogate, at most
 * U+10FFFF), or 0. */
static int
utf8_length(const unsigned char *p, const unsigned char *end)
{
    unsigned char b = p[0];
    if (b >= 0xC2 && b <= 0xDF) {
        return end - p >= 2 && (p[1] & 0xC0) == 0x80 ? 2 : 0;
    }
    if (b >= 0xE0 && b <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) {
            return 0;
        }
        if (b == 0xE0 && p[1] < 0xA0) {
            return 0; /* overlong */
        }
        if (b == 0xED && p[1] >= 0xA0) {
            return 0; /* a surrogate */
        }
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) {
            return 0;
        }
        if ((b == 0xF0 && p[1] < 0x90) || (b == 0xF4 && p[1] >= 0x90)) {
            return 0;
        }
        return 4;
    }
    return 0;
}

/* A JSON string at p (after its opening quote) appended to c's text; the position after the
 * closing quote, or NULL. */
static const char *
parse_string(const char *p, const char *end, Column *c)
{
    const char *run = p;
    for (;;) {
        if (p >= end) {
            return NULL;
        }
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x80) {
            if (p > run) {
                if (text_room(c, p - run) < 0) {
                    return NULL;
                }
                memcpy(c->text + c->text_len, run, (size_t)(p - run));
                c->text_len += p - run;
            }
            if (ch == '"') {
                return p + 1;
            }
            if (ch < 0x20) {
                return NULL; /* a control character must be escaped in JSON */
            }
            if (ch >= 0x80) {
                int n = utf8_length((const unsigned char *)p, (const unsigned char *)end);
                if (n == 0) {
                    return NULL;
                }
                run = p;
                p += n;
                continue;
            }
            /* an escape */
            if (p + 1 >= end) {
                return NULL;
            }
            char out[4];
            int len = 1;
            switch (p[1]) {
            case '"': out[0] = '"'; break;
            case '\\': out[0] = '\\'; break;
            case '/': out[0] = '/'; break;
            case 'b': out[0] = '\b'; break;
            case 'f': out[0] = '\f'; break;
            case 'n': out[0] = '\n'; break;
            case 'r': out[0] = '\r'; break;
            case 't': out[0] = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (hex4(p + 2, end, &cp) < 0) {
                    return NULL;
                }
                p += 4;
                if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return NULL; /* a lone low surrogate */
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t low;
                    if (end - p < 8 || p[2] != '\\' || p[3] != 'u' || hex4(p + 4, end, &low) < 0
                        || low < 0xDC00 || low > 0xDFFF) {
                        return NULL; /* a lone high surrogate */
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    p += 6;
                }
                put_utf8(out, cp, &len);
                break;
            }
            default:
                return NULL;
            }
            if (text_room(c, len) < 0) {
                return NULL;
            }
            memcpy(c->text + c->text_len, out, (size_t)len);
            c->text_len += len;
            p += 2;
            run = p;
            continue;
        }
        p++;
    }
}

/* The end of the strict JSON number at p ("-"? int frac? exp?), or NULL; *integer: no frac/exp. */
static const char *
number_end(const char *p, const char *end, int *integer)
{
    const char *q = p;
    if (q < end && *q == '-') {
        q++;
    }
    if (q >= end) {
        return NULL;
    }
    if (*q == '0') {
        q++;
    } else if (*q >= '1' && *q <= '9') {
        while (q < end && *q >= '0' && *q <= '9') {
            q++;
        }
    } else {
        return NULL;
    }
    *integer = 1;
    if (q < end && *q == '.') {
        *integer = 0;
        q++;
        if (q >= end || *q < '0' || *q > '9') {
            return NULL;
        }
        while (q < end && *q >= '0' && *q <= '9') {
            q++;
        }
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        *integer = 0;
        q++;
        if (q < end && (*q == '+' || *q == '-')) {
            q++;
        }
        if (q >= end || *q < '0' || *q > '9') {
            return NULL;
        }
        while (q < end && *q >= '0' && *q <= '9') {
            q++;
        }
    }
    return q;
}

static inline void
set_bit(uint8_t *bits, Py_ssize_t i)
{
    bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* One value of column c at row `row`; the position after it, or NULL. */
static const char *
parse_value(const char *p, const char *end, Column *c, Py_ssize_t row)
{
    if (*p == 'n') {
        if (end - p < 4 || memcmp(p, "null", 4) != 0 || !c->nullable) {
            return NULL;
        }
        c->nulls++;
        if (c->kind == 's') {
            ((int32_t *)c->values)[row + 1] = (int32_t)c->text_len;
        }
        return p + 4;
    }
    set_bit(c->valid, row);
    switch (c->kind) {
    case 'l': {
        int integer;
        const char *q = number_end(p, end, &integer);
        if (q == NULL || !integer) {
            return NULL;
        }
        const char *d = p;
        int negative = *d == '-';
        d += negative;
        uint64_t v = 0;
        for (; d < q; d++) {
            uint64_t digit = (uint64_t)(*d - '0');
            if (v > (UINT64_MAX - digit) / 10) {
                return NULL;
            }
            v = v * 10 + digit;
        }
        if ((!negative && v > (uint64_t)INT64_MAX) || (negative && v > (uint64_t)INT64_MAX + 1)) {
            return NULL;
        }
        int64_t out = negative ? (int64_t)(0 - v) : (int64_t)v;
        memcpy(c->values + row * 8, &out, 8);
        return q;
    }
    case 'd': {
        int integer;
        const char *q = number_end(p, end, &integer);
        if (q == NULL || q - p > 300) {
            return NULL; /* over 300 characters: near the double's range ends, Arrow's reader decides */
        }
        for (const char *e = p; e < q; e++) {
            if (*e == 'e' || *e == 'E') {
                const char *digits = e + 1 + (e[1] == '+' || e[1] == '-');
                if (q - digits > 2) {
                    return NULL; /* a 3-digit exponent: RapidJSON refuses some strtod reads (0.0e310) */
                }
                break;
            }
        }
        char token[301];
        memcpy(token, p, (size_t)(q - p));
        token[q - p] = '\0';
        char *stop;
        double out = strtod_l(token, &stop, c_locale);
        if (stop != token + (q - p) || out == HUGE_VAL || out == -HUGE_VAL) {
            return NULL; /* beyond the largest double (Arrow's reader refuses it too) */
        }
        memcpy(c->values + row * 8, &out, 8);
        return q;
    }
    case 'b':
        if (end - p >= 4 && memcmp(p, "true", 4) == 0) {
            set_bit(c->values, row);
            return p + 4;
        }
        if (end - p >= 5 && memcmp(p, "false", 5) == 0) {
            return p + 5;
        }
        return NULL;
    case 's': {
        if (*p != '"') {
            return NULL;
        }
        const char *q = parse_string(p + 1, end, c);
        if (q != NULL) {
            ((int32_t *)c->values)[row + 1] = (int32_t)c->text_len;
        }
        return q;
    }
    }
    return NULL;
}

/* Row `row`, the line data[p:end] (one object); 0, or -1 to give up. */
static int
parse_line(const char *p, const char *end, Column *cols, int ncols, Py_ssize_t row)
{
    uint64_t seen = 0;
    int next = 0; /* the field expected next: keys usually come in the schema's order */
    p = skip_ws(p, end);
    if (p >= end || *p != '{') {
        return -1;
    }
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') {
        p++;
    } else {
        for (;;) {
            if (p >= end || *p != '"') {
                return -1;
            }
            const char *key = ++p;
            while (p < end && *p != '"' && *p != '\\') {
                p++;
            }
            if (p >= end || *p != '"') {
                return -1; /* an escaped key: give up */
            }
            Py_ssize_t key_len = p - key;
            p++;
            int f = -1;
            for (int k = 0; k < ncols; k++) {
                int at = (next + k) % ncols;
                if (cols[at].name_len == key_len && memcmp(cols[at].name, key, (size_t)key_len) == 0) {
                    f = at;
                    break;
                }
            }
            if (f < 0 || (seen >> f) & 1) {
                return -1; /* a field not in the schema, or twice */
            }
            seen |= (uint64_t)1 << f;
            next = f + 1 == ncols ? 0 : f + 1;
            p = skip_ws(p, end);
            if (p >= end || *p != ':') {
                return -1;
            }
            p = skip_ws(p + 1, end);
            if (p >= end) {
                return -1;
            }
            p = parse_value(p, end, &cols[f], row);
            if (p == NULL) {
                return -1;
            }
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (p < end && *p == '}') {
                p++;
                break;
            }
            return -1;
        }
    }
    if (skip_ws(p, end) != end) {
        return -1;
    }
    for (int f = 0; f < ncols; f++) {
        if (!((seen >> f) & 1)) { /* missing: null */
            if (!cols[f].nullable) {
                return -1;
            }
            cols[f].nulls++;
            if (cols[f].kind == 's') {
                ((int32_t *)cols[f].values)[row + 1] = (int32_t)cols[f].text_len;
            }
        }
    }
    return 0;
}

static void
free_columns(Column *cols, int ncols)
{
    for (int f = 0; f < ncols; f++) {
        free(cols[f].valid);
        free(cols[f].values);
        free(cols[f].text);
    }
}

/*
 * parse(data, fields) -> (rows, [(null_count, validity, values, text), ...]) or None
 *
 * data: the lines, joined by "\n". fields: a sequence of (name, kind, nullable), kind one of
 * "long", "double", "string", "boolean". Per column: validity (bytes, a bit per row; None when
 * no null), values (int64/double: 8 bytes a row; boolean: a bit a row; string: int32 offsets)
 * and text (string bytes; None for other kinds). None: not parsed, ask Arrow's reader.
 */
static PyObject *
parse(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "parse(data: bytes, fields)");
        return NULL;
    }
    PyObject *data = args[0];
    PyObject *fields = PySequence_Fast(args[1], "parse: fields must be a sequence");
    if (fields == NULL) {
        return NULL;
    }
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(fields);
    if (nf == 0 || nf > MAX_FIELDS) {
        Py_DECREF(fields);
        Py_RETURN_NONE;
    }
    int ncols = (int)nf;
    Column cols[MAX_FIELDS];
    memset(cols, 0, sizeof cols);
    for (int f = 0; f < ncols; f++) {
        PyObject *spec = PySequence_Fast_GET_ITEM(fields, f);
        const char *name, *kind;
        int nullable;
        if (!PyArg_ParseTuple(spec, "s#sp", &name, &cols[f].name_len, &kind, &nullable)) {
            Py_DECREF(fields);
            return NULL;
        }
        cols[f].name = name; /* alive while `fields` is */
        cols[f].nullable = nullable;
        if (strcmp(kind, "long") == 0) {
            cols[f].kind = 'l';
        } else if (strcmp(kind, "double") == 0) {
            cols[f].kind = 'd';
        } else if (strcmp(kind, "string") == 0) {
            cols[f].kind = 's';
        } else if (strcmp(kind, "boolean") == 0) {
            cols[f].kind = 'b';
        } else {
            Py_DECREF(fields);
            Py_RETURN_NONE;
        }
    }
    const char *text = PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    Py_ssize_t rows = 0;
    if (size > 0) {
        rows = 1;
        for (const char *nl = memchr(text, '\n', (size_t)size); nl != NULL;
             nl = memchr(nl + 1, '\n', (size_t)(text + size - nl - 1))) {
            rows++;
        }
    }
    int failed = 0;
    Py_ssize_t bitmap = (rows + 7) / 8;
    for (int f = 0; f < ncols && !failed; f++) {
        Column *c = &cols[f];
        c->valid = calloc((size_t)bitmap + 1, 1);
        size_t width = c->kind == 'b' ? (size_t)bitmap + 1 : c->kind == 's' ? (size_t)(rows + 1) * 4 : (size_t)rows * 8 + 8;
        c->values = calloc(width, 1);
        failed = c->valid == NULL || c->values == NULL;
    }
    if (failed) {
        free_columns(cols, ncols);
        Py_DECREF(fields);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    const char *line = text, *end = text + size;
    for (Py_ssize_t row = 0; row < rows; row++) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *stop = nl ? nl : end;
        if (parse_line(line, stop, cols, ncols, row) < 0) {
            failed = 1;
            break;
        }
        line = stop + 1;
    }
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (!failed) {
        out = PyList_New(ncols);
        for (int f = 0; out != NULL && f < ncols; f++) {
            Column *c = &cols[f];
            Py_ssize_t width = c->kind == 'b' ? bitmap : c->kind == 's' ? (rows + 1) * 4 : rows * 8;
            PyObject *item = Py_BuildValue(
                "(nNy#N)", c->nulls,
                c->nulls ? PyBytes_FromStringAndSize((const char *)c->valid, bitmap) : Py_NewRef(Py_None),
                (const char *)c->values, width,
                c->kind == 's' ? PyBytes_FromStringAndSize(c->text ? c->text : "", c->text_len)
                               : Py_NewRef(Py_None));
            if (item == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, f, item);
        }
    } else {
        out = Py_NewRef(Py_None);
    }
    free_columns(cols, ncols);
    Py_DECREF(fields);
    if (out == NULL || out == Py_None) {
        return out;
    }
    return Py_BuildValue("(nN)", rows, out);
}

static PyMethodDef methods[] = {
    {"parse", (PyCFunction)(void (*)(void))parse, METH_FASTCALL,
     "parse(data, fields) -> (rows, per column (null_count, validity, values, text)), or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "formats._json_lines", "Flat JSON lines into Arrow buffers.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__json_lines(void)
{
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0) {
        PyErr_SetString(PyExc_ImportError, "formats._json_lines: no C locale");
        return NULL;
    }
    return PyModule_Create(&module);
}
