/* The large-JSON scanning kernels of cranfield.inputs.json_body, in C: a second source of the
 * cranfield.inputs._mapscan extension (its method table lists these as json_*;
 * cranfield/inputs/_json_kernels.py gives them their Python names). They replaced numba kernels
 * of the same names and results.
 *
 * Every kernel reads a buffer of bytes (bytes, or a numpy uint8 view of them) and answers with
 * positions; none builds a Python object per document, and the long ones release the GIL, so
 * json_body reads the pieces of one mapping on several threads at once.
 * Byte values: '"' 34, '\\' 92, '{' 123, '}' 125, '[' 91, ']' 93, ':' 58, ',' 44.
 *
 * json_skip_ws(buf, i) -> int         the first non-whitespace position from i
 * json_value_end(buf, i) -> int       the end of the JSON value at i (its extent only), or -1
 * json_member_at(buf, i) -> (key start, key end, value start) | (-1, -1, -1)
 * json_after_value(buf, i) -> (next member, False) | (end, True) | (-1, False)
 * json_object_start(buf) -> int       after the top-level '{'; -1 not an object, -2 empty
 * json_scores(buf, i, stop, doc_bytes, doc_off, values, hashes, slow_rows, slow_span)
 *         -> (status, end, topic spans: bytearray int64 pairs, rows per topic: bytearray
 *             int64, docid bytes used, rows, slow rows, any docid byte >= 128)
 * json_repeated_keys(buf) -> 0 | 1 | -1
 * hash_hits(hashes, table, out) -> int
 *
 * json_scores is sound, not complete, as its numba twin was: it accepts only text it reads
 * exactly as orjson would, and otherwise answers a status other than END/STOPPED, on which
 * json_body hands the body to orjson (the arbiter). Where this one differs from the numba
 * kernel it only declines more: an output array too small for what it would write, or a
 * docid-table probe past MAX_PROBE (FNV-1a is public: the table's slots are mixed with the
 * per-process seed, as _mapscan.c's are).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_seeded_mix.h"

#define END 0
#define STOPPED 1
#define NOT_THIS_SHAPE 2
#define ESCAPE 3
#define DUPLICATE 4
#define JSON_MAX_PROBE 128
#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static uint64_t json_seed;

void jsonscan_set_seed(uint64_t s) { json_seed = s; }

static inline uint64_t json_mix(uint64_t h) { return seeded_mix(h, json_seed); }

/* Exact powers of ten: an integer below 2**53 times or over one of these is rounded once, so
   the product or quotient is the correctly rounded value (Clinger's fast path). */
static const double POW10[23] = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static inline Py_ssize_t skip_ws(const uint8_t *b, Py_ssize_t n, Py_ssize_t i) {
    while (i < n) {
        uint8_t c = b[i];
        if (c != 32 && c != 10 && c != 13 && c != 9) break;
        i++;
    }
    return i;
}

/* b[i] is an opening quote: the index after the closing quote, or -1 if the string is
   unterminated or holds a raw control character (both invalid JSON). */
static Py_ssize_t string_end(const uint8_t *b, Py_ssize_t n, Py_ssize_t i) {
    i++;
    while (i < n) {
        uint8_t c = b[i];
        if (c == 34) return i + 1;
        if (c == 92) { i += 2; continue; }
        if (c < 32) return -1;
        i++;
    }
    return -1;
}

static Py_ssize_t value_end(const uint8_t *b, Py_ssize_t n, Py_ssize_t i) {
    if (i >= n) return -1;
    uint8_t c = b[i];
    if (c == 34) return string_end(b, n, i);
    if (c == 123 || c == 91) {
        Py_ssize_t depth = 0;
        while (i < n) {
            c = b[i];
            if (c == 34) {
                i = string_end(b, n, i);
                if (i < 0) return -1;
                continue;
            }
            if (c == 123 || c == 91) depth++;
            else if (c == 125 || c == 93) {
                depth--;
                if (depth == 0) return i + 1;
            }
            i++;
        }
        return -1;
    }
    while (i < n) {  /* a number or a literal runs to the next delimiter */
        c = b[i];
        if (c == 44 || c == 125 || c == 93 || c == 32 || c == 10 || c == 13 || c == 9) break;
        i++;
    }
    return i;
}

/* A strict JSON number at i (read up to n): its end or -1; *exact is 0 when the value needs a
   correctly rounding parser (over 15 significant digits or a large exponent). */
static Py_ssize_t number(const uint8_t *b, Py_ssize_t i, Py_ssize_t n, double *out, int *exact) {
    int neg = 0;
    *out = 0.0;
    *exact = 0;
    if (i < n && b[i] == 45) { neg = 1; i++; }
    if (i >= n) return -1;
    /* digits are accumulated without a bound: past 19 the significand wraps, but then
       digits > 15 sends the number to the full parser anyway */
    uint64_t sig = 0;
    int64_t digits = 0, exp10 = 0;
    int integer = 1;  /* no fraction, no exponent: JSON readers give an int (-0 is 0) */
    if (b[i] == 48) {
        i++;
    } else if (b[i] >= 49 && b[i] <= 57) {
        while (i < n && b[i] >= 48 && b[i] <= 57) {
            sig = sig * 10u + (uint64_t)(b[i] - 48);
            digits++;
            i++;
        }
    } else {
        return -1;
    }
    if (i < n && b[i] == 46) {
        integer = 0;
        i++;
        Py_ssize_t start = i;
        while (i < n && b[i] >= 48 && b[i] <= 57) {
            sig = sig * 10u + (uint64_t)(b[i] - 48);
            i++;
        }
        if (i == start) return -1;
        digits += i - start;  /* leading zeros count too: a few more go the long way */
        exp10 -= i - start;
    }
    if (i < n && (b[i] == 101 || b[i] == 69)) {
        integer = 0;
        i++;
        int eneg = 0;
        if (i < n && (b[i] == 43 || b[i] == 45)) { eneg = b[i] == 45; i++; }
        Py_ssize_t start = i;
        int64_t e = 0;
        while (i < n && b[i] >= 48 && b[i] <= 57) {
            if (e < 100000) e = e * 10 + (b[i] - 48);
            i++;
        }
        if (i == start) return -1;
        exp10 += eneg ? -e : e;
    }
    if (digits > 15 || sig >= (1ULL << 53) || exp10 < -22 || exp10 > 22) return i;
    double value = (double)sig;
    if (exp10 < 0) value /= POW10[-exp10];
    else value *= POW10[exp10];
    *exact = 1;
    if (neg && integer && sig == 0) { *out = 0.0; return i; }  /* the integer -0 is 0 */
    *out = neg ? -value : value;
    return i;
}

/* ---- arguments ----------------------------------------------------------------------- */

static int read_buffer(PyObject *obj, Py_buffer *view) {
    return PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS);
}

/* A writable output array of items of ``itemsize`` bytes: its length in items. */
static Py_ssize_t out_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize,
                             const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE)) return -1;
    if (view->itemsize != itemsize) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: items of %zd bytes", what, itemsize);
        return -1;
    }
    return view->len / itemsize;
}

static int position_ok(Py_ssize_t i) {
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "a position must not be negative");
        return 0;
    }
    return 1;
}

/* The small kernels' arguments (a buffer, a position): the buffer held in ``v`` and the
   position in ``i``, or -1 with the Python error set. */
static int buffer_at(PyObject *args, Py_buffer *v, Py_ssize_t *i) {
    PyObject *obj;
    if (!PyArg_ParseTuple(args, "On", &obj, i) || !position_ok(*i)) return -1;
    return read_buffer(obj, v) ? -1 : 0;
}

/* ---- the small kernels --------------------------------------------------------------- */

PyObject *json_skip_ws(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t i;
    Py_buffer v;
    if (buffer_at(args, &v, &i)) return NULL;
    Py_ssize_t r = skip_ws((const uint8_t *)v.buf, v.len, i);
    PyBuffer_Release(&v);
    return PyLong_FromSsize_t(r);
}

PyObject *json_value_end(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t i;
    Py_buffer v;
    if (buffer_at(args, &v, &i)) return NULL;
    Py_ssize_t r = value_end((const uint8_t *)v.buf, v.len, i);
    PyBuffer_Release(&v);
    return PyLong_FromSsize_t(r);
}

PyObject *json_member_at(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t i;
    Py_buffer v;
    if (buffer_at(args, &v, &i)) return NULL;
    const uint8_t *b = (const uint8_t *)v.buf;
    Py_ssize_t n = v.len, a = -1, z = -1, s = -1;
    i = skip_ws(b, n, i);
    if (i < n && b[i] == 34) {
        Py_ssize_t end = string_end(b, n, i);
        if (end >= 0) {
            Py_ssize_t j = skip_ws(b, n, end);
            if (j < n && b[j] == 58) {
                a = i + 1;
                z = end - 1;
                s = skip_ws(b, n, j + 1);
            }
        }
    }
    PyBuffer_Release(&v);
    return Py_BuildValue("(nnn)", a, z, s);
}

PyObject *json_after_value(PyObject *self, PyObject *args) {
    (void)self;
    Py_ssize_t i;
    Py_buffer v;
    if (buffer_at(args, &v, &i)) return NULL;
    const uint8_t *b = (const uint8_t *)v.buf;
    Py_ssize_t n = v.len, r = -1;
    int closed = 0;
    i = skip_ws(b, n, i);
    if (i < n && b[i] == 44) r = i + 1;
    else if (i < n && b[i] == 125) { r = i + 1; closed = 1; }
    PyBuffer_Release(&v);
    return Py_BuildValue("(nO)", r, closed ? Py_True : Py_False);
}

PyObject *json_object_start(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    if (read_buffer(obj, &v)) return NULL;
    const uint8_t *b = (const uint8_t *)v.buf;
    Py_ssize_t n = v.len, r;
    Py_ssize_t i = skip_ws(b, n, 0);
    if (i >= n || b[i] != 123) r = -1;
    else {
        Py_ssize_t j = skip_ws(b, n, i + 1);
        r = (j < n && b[j] == 125) ? -2 : i + 1;
    }
    PyBuffer_Release(&v);
    return PyLong_FromSsize_t(r);
}

/* ---- scores: a {topic: {docid: number}} mapping into columns -------------------------- */

typedef struct {
    const uint8_t *b;
    Py_ssize_t N;          /* the whole buffer (strings and whitespace are read to its end) */
    Py_ssize_t n;          /* where entries stop: N, or stop */
    Py_ssize_t stop;
    uint8_t *doc_bytes; Py_ssize_t cap_bytes;
    int32_t *doc_off; Py_ssize_t cap_off;
    double *values; Py_ssize_t cap_values;
    uint64_t *hashes; Py_ssize_t cap_hashes;
    int64_t *slow_rows; Py_ssize_t cap_slow;
    int64_t *slow_span; Py_ssize_t cap_span;   /* pairs */
    /* results */
    int status;
    Py_ssize_t end, k, dpos, rows, nslow;
    int high;
    int64_t *spans, *counts;  /* k pairs, k counts (PyMem_Raw) */
    int nomem;
} scan_t;

static int grow_topics(scan_t *s, Py_ssize_t *cap) {
    Py_ssize_t c = *cap ? *cap * 2 : 256;
    int64_t *sp = PyMem_RawRealloc(s->spans, (size_t)c * 2 * sizeof(int64_t));
    if (sp == NULL) { s->nomem = 1; return -1; }
    s->spans = sp;
    int64_t *co = PyMem_RawRealloc(s->counts, (size_t)c * sizeof(int64_t));
    if (co == NULL) { s->nomem = 1; return -1; }
    s->counts = co;
    *cap = c;
    return 0;
}

/* Whether rows [first, rows) hold one docid twice: a table of row numbers, stamped with the
   topic number so that it is not cleared between topics. 1 a duplicate, 0 none, -1 declined
   (a probe past JSON_MAX_PROBE, or no memory). */
static int topic_duplicates(scan_t *s, Py_ssize_t first, Py_ssize_t k,
                            int64_t **table, int64_t **stamp, Py_ssize_t *size) {
    Py_ssize_t want = *size;
    while (want < 2 * (s->rows - first)) want *= 2;
    if (want != *size) {
        PyMem_RawFree(*table);
        PyMem_RawFree(*stamp);
        *table = PyMem_RawMalloc((size_t)want * sizeof(int64_t));
        *stamp = PyMem_RawMalloc((size_t)want * sizeof(int64_t));
        *size = want;
        if (*table == NULL || *stamp == NULL) { s->nomem = 1; return -1; }
        for (Py_ssize_t j = 0; j < want; j++) (*stamp)[j] = -1;
    }
    uint64_t mask = (uint64_t)want - 1;
    int64_t *tb = *table, *st = *stamp;
    for (Py_ssize_t r = first; r < s->rows; r++) {
        uint64_t hr = s->hashes[r];
        uint64_t slot = json_mix(hr) & mask;
        int probes = 0;
        while (st[slot] == k) {
            int64_t other = tb[slot];
            if (s->hashes[other] == hr) {
                int32_t a0 = s->doc_off[other], a1 = s->doc_off[other + 1];
                int32_t b0 = s->doc_off[r], b1 = s->doc_off[r + 1];
                if (a1 - a0 == b1 - b0 &&
                    memcmp(s->doc_bytes + a0, s->doc_bytes + b0, (size_t)(a1 - a0)) == 0)
                    return 1;
            }
            slot = (slot + 1) & mask;
            if (++probes > JSON_MAX_PROBE) return -1;
        }
        st[slot] = k;
        tb[slot] = r;
    }
    return 0;
}

static void scan_scores(scan_t *s, Py_ssize_t i) {
    const uint8_t *b = s->b;
    const Py_ssize_t N = s->N, n = s->n, stop = s->stop;
    Py_ssize_t topic_cap = 0;
    Py_ssize_t size = 1 << 11;
    int64_t *table = PyMem_RawMalloc((size_t)size * sizeof(int64_t));
    int64_t *stamp = PyMem_RawMalloc((size_t)size * sizeof(int64_t));
    Py_ssize_t rows = 0, dpos = 0, k = 0, nslow = 0;
    unsigned high = 0;
    int status = NOT_THIS_SHAPE;
    s->end = -1;
    if (table == NULL || stamp == NULL || grow_topics(s, &topic_cap)) { s->nomem = 1; goto fail; }
    for (Py_ssize_t j = 0; j < size; j++) stamp[j] = -1;
    if (s->cap_off < 1) goto fail;
    s->doc_off[0] = 0;
    for (;;) {
        /* "topic" : { */
        if (i >= n || b[i] != 34) break;
        Py_ssize_t kend = string_end(b, N, i);
        if (kend < 0) break;
        if (memchr(b + i + 1, 92, (size_t)(kend - 1 - (i + 1))) != NULL) {
            status = ESCAPE;
            break;
        }
        if (k == topic_cap && grow_topics(s, &topic_cap)) goto fail;
        s->spans[2 * k] = i + 1;
        s->spans[2 * k + 1] = kend - 1;
        i = skip_ws(b, N, kend);
        if (i >= n || b[i] != 58) break;
        i = skip_ws(b, N, i + 1);
        if (i >= n || b[i] != 123) break;
        i = skip_ws(b, N, i + 1);
        Py_ssize_t first = rows;
        int good = 1;
        if (i < n && b[i] == 125) {
            i++;
        } else {
            for (;;) {
                good = 0;
                /* "docid" : number */
                if (i >= n || b[i] != 34) break;
                i++;
                uint64_t h = FNV_OFFSET;
                int bad = 0;
                while (i < n) {
                    uint8_t c = b[i];
                    if (c == 34) break;
                    if (c == 92 || c < 32) { bad = 1; break; }
                    if (dpos >= s->cap_bytes) goto fail;  /* (declines; never happens with
                                                             capacity()'s sizes) */
                    high |= c;
                    s->doc_bytes[dpos++] = c;
                    h = (h ^ c) * FNV_PRIME;
                    i++;
                }
                if (bad || i >= n) {
                    if (bad && b[i] == 92) status = ESCAPE;
                    break;
                }
                if (rows + 1 >= s->cap_off || rows >= s->cap_values || rows >= s->cap_hashes)
                    goto fail;
                if (dpos > INT32_MAX) goto fail;
                s->doc_off[rows + 1] = (int32_t)dpos;
                s->hashes[rows] = h;
                i = skip_ws(b, N, i + 1);
                if (i >= n || b[i] != 58) break;
                i = skip_ws(b, N, i + 1);
                Py_ssize_t start = i;
                double value;
                int exact;
                i = number(b, i, n, &value, &exact);
                if (i < 0) break;
                s->values[rows] = value;
                if (!exact) {
                    if (nslow >= s->cap_slow || nslow >= s->cap_span) goto fail;
                    s->slow_rows[nslow] = rows;
                    s->slow_span[2 * nslow] = start;
                    s->slow_span[2 * nslow + 1] = i;
                    nslow++;
                }
                rows++;
                i = skip_ws(b, N, i);
                if (i < n && b[i] == 44) {
                    i = skip_ws(b, N, i + 1);
                    continue;
                }
                if (i < n && b[i] == 125) {
                    i++;
                    good = 1;
                }
                break;
            }
        }
        if (!good) break;
        s->counts[k] = rows - first;
        s->rows = rows;
        int dup = topic_duplicates(s, first, k, &table, &stamp, &size);
        if (dup < 0) goto fail;
        if (dup) { status = DUPLICATE; break; }
        k++;
        i = skip_ws(b, N, i);
        if (i < n && b[i] == 44) {
            i = skip_ws(b, N, i + 1);
            if (i == stop) { status = STOPPED; goto done; }
            if (stop < 0 || i < stop) continue;
            break;
        }
        if (i < n && b[i] == 125) { status = END; i++; goto done; }
        break;
    }
    s->status = status;
    s->k = s->dpos = s->rows = s->nslow = 0;
    s->high = 0;
    goto out;
fail:
    s->status = NOT_THIS_SHAPE;
    s->k = s->dpos = s->rows = s->nslow = 0;
    s->high = 0;
    goto out;
done:
    s->status = status;
    s->end = i;
    s->k = k;
    s->dpos = dpos;
    s->rows = rows;
    s->nslow = nslow;
    s->high = high >= 128;
out:
    PyMem_RawFree(table);
    PyMem_RawFree(stamp);
}

PyObject *json_scores(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[7];
    Py_ssize_t i, stop;
    if (!PyArg_ParseTuple(args, "OnnOOOOOO", &o[0], &i, &stop, &o[1], &o[2], &o[3], &o[4],
                          &o[5], &o[6]) || !position_ok(i))
        return NULL;
    static const Py_ssize_t sizes[7] = {1, 1, 4, 8, 8, 8, 8};
    static const char *names[7] = {"buf", "doc_bytes", "doc_off", "values", "hashes",
                                   "slow_rows", "slow_span"};
    Py_buffer v[7];
    Py_ssize_t len[7];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 7; got++) {
        if (got == 0) {
            if (read_buffer(o[0], &v[0])) goto done;
            len[0] = v[0].len;
        } else {
            len[got] = out_buffer(o[got], &v[got], sizes[got], names[got]);
            if (len[got] < 0) goto done;
        }
    }
    scan_t s;
    memset(&s, 0, sizeof s);
    s.b = (const uint8_t *)v[0].buf;
    s.N = len[0];
    s.stop = stop;
    s.n = (stop < 0 || stop > s.N) ? s.N : stop;
    if (stop > s.N) s.stop = -1;  /* (json_body never passes one) */
    s.doc_bytes = v[1].buf; s.cap_bytes = len[1];
    s.doc_off = v[2].buf; s.cap_off = len[2];
    s.values = v[3].buf; s.cap_values = len[3];
    s.hashes = v[4].buf; s.cap_hashes = len[4];
    s.slow_rows = v[5].buf; s.cap_slow = len[5];
    s.slow_span = v[6].buf; s.cap_span = len[6] / 2;
    Py_BEGIN_ALLOW_THREADS
    scan_scores(&s, i);
    Py_END_ALLOW_THREADS
    if (s.nomem) {
        PyErr_NoMemory();
    } else {
        PyObject *spans = PyByteArray_FromStringAndSize((const char *)s.spans,
                                                        s.k * 2 * (Py_ssize_t)sizeof(int64_t));
        PyObject *counts = PyByteArray_FromStringAndSize((const char *)s.counts,
                                                         s.k * (Py_ssize_t)sizeof(int64_t));
        if (spans != NULL && counts != NULL)
            result = Py_BuildValue("(inNNnnnO)", s.status, s.end, spans, counts, s.dpos,
                                   s.rows, s.nslow, s.high ? Py_True : Py_False);
        else { Py_XDECREF(spans); Py_XDECREF(counts); }
    }
    PyMem_RawFree(s.spans);
    PyMem_RawFree(s.counts);
done:
    for (int j = 0; j < got; j++) PyBuffer_Release(&v[j]);
    return result;
}

/* ---- repeated_keys: may some object hold a key twice? --------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

#define MAX_DEPTH 1100  /* orjson refuses nesting past 1024 */

static int repeated_keys(const uint8_t *b, Py_ssize_t n, int *nomem) {
    Py_ssize_t cap = 1 << 16, nkeys = 0, depth = 0;
    uint64_t *hashes = PyMem_RawMalloc((size_t)cap * sizeof(uint64_t));
    Py_ssize_t *base = PyMem_RawMalloc(MAX_DEPTH * sizeof(Py_ssize_t));
    int result;
    if (hashes == NULL || base == NULL) { *nomem = 1; result = 0; goto out; }
    Py_ssize_t i = 0;
    while (i < n) {
        uint8_t c = b[i];
        if (c == 34) {
            Py_ssize_t end = string_end(b, n, i);
            if (end < 0) { result = -1; goto out; }
            Py_ssize_t j = skip_ws(b, n, end);
            if (depth > 0 && base[depth - 1] >= 0 && j < n && b[j] == 58) {
                uint64_t h = FNV_OFFSET;
                for (Py_ssize_t q = i + 1; q < end - 1; q++) {
                    if (b[q] == 92) { result = 1; goto out; }
                    h = (h ^ b[q]) * FNV_PRIME;
                }
                if (nkeys == cap) {
                    uint64_t *grown = PyMem_RawRealloc(hashes, (size_t)cap * 2 * sizeof(uint64_t));
                    if (grown == NULL) { *nomem = 1; result = 0; goto out; }
                    hashes = grown;
                    cap *= 2;
                }
                hashes[nkeys++] = h;
                i = j + 1;
            } else {
                i = end;
            }
            continue;
        }
        if (c == 123 || c == 91) {
            if (depth == MAX_DEPTH) { result = 1; goto out; }  /* the caller settles it */
            base[depth++] = c == 123 ? nkeys : -1;
        } else if (c == 125 || c == 93) {
            if (depth == 0) { result = -1; goto out; }
            Py_ssize_t first = base[--depth];
            if (first >= 0) {
                if (nkeys - first > 1) {
                    qsort(hashes + first, (size_t)(nkeys - first), sizeof(uint64_t), cmp_u64);
                    for (Py_ssize_t q = first + 1; q < nkeys; q++)
                        if (hashes[q] == hashes[q - 1]) { result = 1; goto out; }
                }
                nkeys = first;
            }
        }
        i++;
    }
    result = depth == 0 ? 0 : -1;
out:
    PyMem_RawFree(hashes);
    PyMem_RawFree(base);
    return result;
}

PyObject *json_repeated_keys(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *obj;
    Py_buffer v;
    if (!PyArg_ParseTuple(args, "O", &obj)) return NULL;
    if (read_buffer(obj, &v)) return NULL;
    int nomem = 0, r;
    Py_BEGIN_ALLOW_THREADS
    r = repeated_keys((const uint8_t *)v.buf, v.len, &nomem);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&v);
    if (nomem) return PyErr_NoMemory();
    return PyLong_FromLong(r);
}

/* ---- hash_hits: rows whose hash selects a set entry of a bitmap ---------------------- */

PyObject *json_hash_hits(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ho, *to, *oo;
    if (!PyArg_ParseTuple(args, "OOO", &ho, &to, &oo)) return NULL;
    Py_buffer hv, tv, ov;
    Py_ssize_t nh = -1, nt = -1, no = -1, k = 0;
    if (read_buffer(ho, &hv)) return NULL;
    if (read_buffer(to, &tv)) { PyBuffer_Release(&hv); return NULL; }
    no = out_buffer(oo, &ov, 8, "out");
    if (no < 0) { PyBuffer_Release(&hv); PyBuffer_Release(&tv); return NULL; }
    nh = hv.itemsize == 8 ? hv.len / 8 : -1;
    nt = tv.itemsize == 1 ? tv.len : -1;
    if (nh < 0 || nt <= 0 || (nt & (nt - 1)) != 0 || no < nh) {
        PyErr_SetString(PyExc_ValueError, "hash_hits: uint64 hashes, a bool table of a power "
                        "of two entries, an int64 out at least as long as the hashes");
        k = -1;
    } else {
        const uint64_t *h = hv.buf;
        const uint8_t *t = tv.buf;
        int64_t *out = ov.buf;
        uint64_t mask = (uint64_t)nt - 1;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < nh; r++)
            if (t[h[r] & mask]) out[k++] = r;
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&hv);
    PyBuffer_Release(&tv);
    PyBuffer_Release(&ov);
    return k < 0 ? NULL : PyLong_FromSsize_t(k);
}
