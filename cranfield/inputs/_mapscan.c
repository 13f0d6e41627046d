/* Compiled fast paths of the readers in cranfield.inputs (mappings, trec_fast, docid_keys) and
 * of cranfield.inputs.ranking: Python mappings, the plainest TREC run lines, and per-topic
 * hash joins.
 *
 * Each only ever *accepts* what its Python twin reads the same way, and returns None for
 * anything else (a non-string docid, a forbidden character, a value that is not a plain int
 * or float, a bool, a non-finite score, a grade beyond int64 or with a fraction, an odd
 * line): the Python path then reads the input and names the problem. So the two paths give
 * the same Run or the same refusal (tests/engine/test_mapscan.py holds them equal on
 * generated inputs). Python's own loops over a 7-million-entry run mapping cost about a
 * second; scan does that work in ~0.15 s.
 *
 * scan(mapping, topics, grades, docids) -> (values: bytearray, lengths: bytearray) | None
 *     topics: the mapping's keys in the order to read them (already checked ids); docids: a
 *     numpy object array of as many slots as the topics hold docids, filled in that order.
 *     values: float64 scores, or int64 grades when ``grades`` is true; lengths: int64.
 * lookup(run, topics, bounds, docids) -> bytearray | None (a topic's docs not a dict)
 *     float64 per docid: run[topics[q]].get(docids[i]) for bounds[q] <= i < bounds[q+1],
 *     NaN where absent (a run's scores are finite), a non-float value read as its double.
 * positions(scores, lo, hi, query) -> (first: bytearray, second: bytearray)
 *     cranfield.inputs.ranking.segmented_search twice, in C: for each i, in scores[lo[i]:hi[i]]
 *     (descending), the first position whose score is not > query[i] and the first whose
 *     score is not >= query[i] (int64). scores and query: float64 or float32 alike; lo, hi:
 *     int64, in range.
 *
 * parse_run(chunk, delim, topic_codes)
 *         -> (codes: bytearray int32, offsets: bytearray int32, data: bytearray,
 *             scores: bytearray float64) | None
 *     Whole lines of a TREC run (``chunk`` ends after a newline, or is the file's end), each
 *     "topic iter docid rank score runid" split by the one ``delim`` byte: each line's topic
 *     code (``topic_codes`` maps topic ids to codes in first-seen order; new ones are added),
 *     its docid (Arrow string layout: offsets from 0) and its score. Only the plainest lines
 *     are read: printable ASCII, six non-empty fields, a topic not starting with '#', a
 *     score -?digits[.digits][e[-+]digits] (or -?.digits...) that is finite; an empty line
 *     is skipped. Anything else returns None, and cranfield.inputs.io reads the input its own way.
 *
 * The two below work on 64-bit docid hashes (cranfield.inputs.docid_keys.docid_hashes) topic
 * by topic, so each topic's table stays in cache where one sort of all the keys would not;
 * equal hashes are only candidates, which the callers compare as strings.
 *
 * block_duplicates(hashes, starts, ends) -> bytearray (int64 rows) | None
 *     every row whose hash another row of its block [starts[b], ends[b]) shares.
 * block_join(run_hashes, run_lo, run_hi, qrels_hashes, qrels_lo, qrels_hi, order)
 *         -> (run_rows: bytearray, qrels_rows: bytearray) | None
 *     for each qrels topic q in ``order`` (those with a run block), every (run row, qrels
 *     row) of equal hash with the run row in [run_lo[q], run_hi[q]) and the qrels row in
 *     [qrels_lo[q], qrels_hi[q]); run rows ascending within a topic, and for one run row its
 *     qrels rows ascending.
 * Both return None (the callers then sort) when a table probe runs past MAX_PROBE, and
 * block_join when the pairs pass 8 per row: hashes that collide on purpose.
 *
 * rank_mapping: a run mapping checked, its judged docids looked up and ranked in one pass,
 * in cranfield/inputs/_rankpass.c (which also defines mapping_kind: the dict types scan and
 * rank_mapping read; _mapping_values.h holds what both accept as an id, score and grade).
 *
 * json_*, hash_hits: the large-JSON scan of cranfield.inputs.json_body, in
 * cranfield/inputs/_jsonscan.c (the second source of this module;
 * cranfield/inputs/_json_kernels.py gives them their names).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_mapping_values.h"
#include "_seeded_mix.h"

/* Table slots come from a hash mixed with a per-process random seed (splitmix64's
   finalizer), so that no input can be made to cluster in the tables: the docid hashes and
   FNV-1a are public and unseeded. Probes are capped as well (MAX_PROBE): a longer one makes
   the function decline (None), and the callers take the path that sorts. */
static uint64_t seed;
#define MAX_PROBE 128

static inline uint64_t mix(uint64_t h) { return seeded_mix(h, seed); }

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mapping, *topics, *docids;
    int grades;
    if (!PyArg_ParseTuple(args, "OO!pO", &mapping, &PyList_Type, &topics, &grades, &docids))
        return NULL;
    /* mapping: a dict, defaultdict or OrderedDict, or a list of the topics' dicts in the
       topics' order (as _rankpass.c's mapping_topics gives them: no lookup per topic) */
    int listed = PyList_CheckExact(mapping);
    if (listed ? PyList_GET_SIZE(mapping) != PyList_GET_SIZE(topics) : !PyDict_Check(mapping)) {
        PyErr_SetString(PyExc_ValueError, "scan: a dict, or a list of one dict per topic");
        return NULL;
    }
    /* a tuple of the topics: a topic id's own __hash__ may run Python code, which must not
       be able to change the sequence under us */
    int outer = listed ? 1 : mapping_kind(mapping);
    if (outer <= 0) {
        if (outer < 0) return NULL;
        Py_RETURN_NONE;  /* a dict subclass: the Python path */
    }
    PyObject *held = PyList_AsTuple(topics);
    if (held == NULL) return NULL;
    topics = held;
    Py_ssize_t n_topics = PyTuple_GET_SIZE(topics), total = 0;
    for (Py_ssize_t t = 0; t < n_topics; t++) {
        /* (listed: no topic is hashed, so no Python code runs and the list stays as it is) */
        PyObject *docs = listed ? PyList_GET_ITEM(mapping, t)
                                : PyDict_GetItemWithError(mapping, PyTuple_GET_ITEM(topics, t));
        if (docs == NULL) {
            Py_DECREF(topics);
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        int kind = mapping_kind(docs);
        if (kind <= 0) { Py_DECREF(topics); if (kind < 0) return NULL; Py_RETURN_NONE; }
        total += PyDict_GET_SIZE(docs);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(docids, &view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) {
        Py_DECREF(topics);
        return NULL;
    }
    if (view.format == NULL || strcmp(view.format, "O") != 0 || view.itemsize != 8 ||
        view.len != total * 8) {
        PyBuffer_Release(&view);
        Py_DECREF(topics);
        PyErr_SetString(PyExc_ValueError, "docids must be an object array, one slot a docid");
        return NULL;
    }
    PyObject **slots = (PyObject **)view.buf;
    for (Py_ssize_t i = 0; i < total; i++)  /* (so that replacing one runs no destructor) */
        if (slots[i] != NULL && slots[i] != Py_None) {
            PyBuffer_Release(&view);
            Py_DECREF(topics);
            PyErr_SetString(PyExc_ValueError, "docids must be a fresh object array (None)");
            return NULL;
        }
    /* bytearrays: numpy reads them as writable arrays without a copy */
    PyObject *values = PyByteArray_FromStringAndSize(NULL, total * 8);
    PyObject *lengths = PyByteArray_FromStringAndSize(NULL, n_topics * 8);
    if (values == NULL || lengths == NULL) goto fail;
    char *vbuf = PyByteArray_AS_STRING(values);
    int64_t *lbuf = (int64_t *)PyByteArray_AS_STRING(lengths);
    Py_ssize_t k = 0;
    for (Py_ssize_t t = 0; t < n_topics; t++) {
        /* (a topic id's own __hash__ may have changed the mapping since it was counted) */
        PyObject *docs = listed ? PyList_GET_ITEM(mapping, t)
                                : PyDict_GetItem(mapping, PyTuple_GET_ITEM(topics, t));
        int kind = docs == NULL ? 0 : mapping_kind(docs);
        if (kind <= 0) { if (kind < 0) goto fail; goto fallback; }
        Py_ssize_t pos = 0, size = PyDict_GET_SIZE(docs);
        PyObject *key, *value, *order = NULL;
        if (k + size > total) goto fallback;  /* changed while read */
        if (kind == 3) {  /* an OrderedDict: in its own order, as Python iterates it */
            order = PyObject_GetIter(docs);
            if (order == NULL) goto fail;
        }
        for (;;) {
            if (order != NULL) {
                /* (exact str keys: their hash and equality run no Python code) */
                key = PyIter_Next(order);
                if (key == NULL) { Py_DECREF(order); if (PyErr_Occurred()) goto fail; break; }
                Py_DECREF(key);  /* (the dict holds it) */
                if (!PyUnicode_CheckExact(key)) { Py_DECREF(order); goto fallback; }
                value = PyDict_GetItem(docs, key);
                if (value == NULL) { Py_DECREF(order); goto fallback; }
            } else if (!PyDict_Next(docs, &pos, &key, &value)) {
                break;
            }
            if (k >= total || !id_ok(key)) { Py_XDECREF(order); goto fallback; }
            if (grades) {
                int64_t g;
                if (!grade_of(value, &g)) { Py_XDECREF(order); goto fallback; }
                memcpy(vbuf + 8 * k, &g, 8);
            } else {
                double d;
                if (!score_of(value, &d)) { Py_XDECREF(order); goto fallback; }
                memcpy(vbuf + 8 * k, &d, 8);
            }
            PyObject *old = slots[k];  /* None: no destructor runs */
            Py_INCREF(key);
            slots[k] = key;
            Py_XDECREF(old);
            k++;
        }
        lbuf[t] = size;
    }
    PyBuffer_Release(&view);
    Py_DECREF(topics);
    if (k != total) goto fallback_released;
    return Py_BuildValue("(NN)", values, lengths);
fallback:
    PyBuffer_Release(&view);
    Py_DECREF(topics);
fallback_released:
    Py_DECREF(values);
    Py_DECREF(lengths);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&view);
    Py_DECREF(topics);
    Py_XDECREF(values);
    Py_XDECREF(lengths);
    return NULL;
}

static PyObject *lookup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *run, *topic_list, *bound_list, *docid_list;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyDict_Type, &run, &PyList_Type, &topic_list,
                          &PyList_Type, &bound_list, &PyList_Type, &docid_list))
        return NULL;
    /* tuples of the arguments: a docid's own __eq__ or __hash__ may run Python code, which
       must not be able to change the sequences under us */
    PyObject *topics = PyList_AsTuple(topic_list), *bounds = PyList_AsTuple(bound_list),
             *docids = PyList_AsTuple(docid_list), *out = NULL, *result = NULL;
    if (topics == NULL || bounds == NULL || docids == NULL) goto done;
    Py_ssize_t n_topics = PyTuple_GET_SIZE(topics), n = PyTuple_GET_SIZE(docids);
    if (PyTuple_GET_SIZE(bounds) != n_topics + 1) {
        PyErr_SetString(PyExc_ValueError, "bounds must hold one more entry than topics");
        goto done;
    }
    out = PyByteArray_FromStringAndSize(NULL, n * 8);
    if (out == NULL) goto done;
    double *got = (double *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) got[i] = NAN;
    for (Py_ssize_t q = 0; q < n_topics; q++) {
        Py_ssize_t a = PyLong_AsSsize_t(PyTuple_GET_ITEM(bounds, q));
        if (a == -1 && PyErr_Occurred()) goto done;
        Py_ssize_t b = PyLong_AsSsize_t(PyTuple_GET_ITEM(bounds, q + 1));
        if (b == -1 && PyErr_Occurred()) goto done;
        if (a < 0 || b > n || a > b) {
            PyErr_SetString(PyExc_ValueError, "bounds out of range");
            goto done;
        }
        PyObject *docs = PyDict_GetItemWithError(run, PyTuple_GET_ITEM(topics, q));
        if (docs == NULL) { if (PyErr_Occurred()) goto done; continue; }
        if (!PyDict_CheckExact(docs)) {  /* another Mapping: the Python path looks it up */
            Py_CLEAR(out);
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        Py_INCREF(docs);  /* held while Python code may run (see above) */
        for (Py_ssize_t i = a; i < b; i++) {
            PyObject *v = PyDict_GetItemWithError(docs, PyTuple_GET_ITEM(docids, i));
            if (v == NULL) {
                if (PyErr_Occurred()) { Py_DECREF(docs); goto done; }
                continue;
            }
            double d;
            if (PyFloat_Check(v)) {  /* (as numpy reads a float, subclass or not) */
                d = PyFloat_AS_DOUBLE(v);
            } else {
                Py_INCREF(v);
                d = PyFloat_AsDouble(v);
                Py_DECREF(v);
                if (d == -1.0 && PyErr_Occurred()) { Py_DECREF(docs); goto done; }
            }
            got[i] = d;
        }
        Py_DECREF(docs);
    }
    result = out;
    out = NULL;
done:
    Py_XDECREF(out);
    Py_XDECREF(topics);
    Py_XDECREF(bounds);
    Py_XDECREF(docids);
    return result;
}

#define SEARCH(T)                                                                   \
    for (Py_ssize_t i = 0; i < n; i++) {                                            \
        const T *v = (const T *)sv.buf;                                             \
        T q = ((const T *)qv.buf)[i];                                               \
        int64_t a = lov[i], b = hiv[i], end = b;                                    \
        while (a < b) { int64_t m = a + (b - a) / 2; if (q < v[m]) a = m + 1; else b = m; } \
        first[i] = a;                                                               \
        b = end;                                                                    \
        while (a < b) { int64_t m = a + (b - a) / 2; if (q <= v[m]) a = m + 1; else b = m; } \
        second[i] = a;                                                              \
    }

static PyObject *positions(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *scores, *lo, *hi, *query, *out1 = NULL, *out2 = NULL;
    Py_buffer sv = {0}, lv = {0}, hv = {0}, qv = {0};
    if (!PyArg_ParseTuple(args, "OOOO", &scores, &lo, &hi, &query)) return NULL;
    int flags = PyBUF_FORMAT | PyBUF_C_CONTIGUOUS;
    if (PyObject_GetBuffer(scores, &sv, flags) || PyObject_GetBuffer(lo, &lv, flags) ||
        PyObject_GetBuffer(hi, &hv, flags) || PyObject_GetBuffer(query, &qv, flags))
        goto done;
    Py_ssize_t n = qv.len / (qv.itemsize ? qv.itemsize : 1);
    Py_ssize_t rows = sv.len / (sv.itemsize ? sv.itemsize : 1);
    if (sv.format == NULL || qv.format == NULL || lv.format == NULL || hv.format == NULL) {
        PyErr_SetString(PyExc_ValueError, "positions: arrays with a format");
        goto done;
    }
    int is_double = strcmp(sv.format, "d") == 0 && strcmp(qv.format, "d") == 0;
    int is_float = strcmp(sv.format, "f") == 0 && strcmp(qv.format, "f") == 0;
    if ((!is_double && !is_float) || lv.itemsize != 8 || hv.itemsize != 8 ||
        lv.len != n * 8 || hv.len != n * 8 ||
        (strcmp(lv.format, "l") != 0 && strcmp(lv.format, "q") != 0) ||
        (strcmp(hv.format, "l") != 0 && strcmp(hv.format, "q") != 0)) {
        PyErr_SetString(PyExc_ValueError, "positions: float64/float32 scores and query, int64 bounds");
        goto done;
    }
    const int64_t *lov = (const int64_t *)lv.buf, *hiv = (const int64_t *)hv.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (lov[i] < 0 || hiv[i] > rows || lov[i] > hiv[i]) {
            PyErr_SetString(PyExc_ValueError, "positions: bounds out of range");
            goto done;
        }
    out1 = PyByteArray_FromStringAndSize(NULL, n * 8);
    out2 = PyByteArray_FromStringAndSize(NULL, n * 8);
    if (out1 == NULL || out2 == NULL) goto done;
    int64_t *first = (int64_t *)PyByteArray_AS_STRING(out1);
    int64_t *second = (int64_t *)PyByteArray_AS_STRING(out2);
    if (is_double) { SEARCH(double) } else { SEARCH(float) }
done:
    if (sv.obj) PyBuffer_Release(&sv);
    if (lv.obj) PyBuffer_Release(&lv);
    if (hv.obj) PyBuffer_Release(&hv);
    if (qv.obj) PyBuffer_Release(&qv);
    if (PyErr_Occurred()) { Py_XDECREF(out1); Py_XDECREF(out2); return NULL; }
    return Py_BuildValue("(NN)", out1, out2);
}

/* ---- TREC run lines ---------------------------------------------------------------------- */

typedef struct { char *data; Py_ssize_t len, cap; } bytes_t;

static int bytes_grow(bytes_t *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1 << 16;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) { PyErr_NoMemory(); return -1; }
    b->data = data;
    b->cap = cap;
    return 0;
}

/* A score field as pyarrow's float64 conversion reads it, restricted to a plain decimal
   spelling (a subset of what it accepts); 0 to decline. */
/* (not static: _textpass.c reads a score's slow spellings with it) */
int plain_score(const char *p, Py_ssize_t n, double *out) {
    char buf[64];
    Py_ssize_t i = 0, digits = 0;
    if (n <= 0 || n >= (Py_ssize_t)sizeof(buf)) return 0;
    if (p[i] == '-') i++;
    while (i < n && p[i] >= '0' && p[i] <= '9') { i++; digits++; }
    if (i < n && p[i] == '.') {
        i++;
        Py_ssize_t frac = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9') { i++; frac++; }
        if (frac == 0) return 0;
        digits += frac;
    }
    if (digits == 0) return 0;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '-' || p[i] == '+')) i++;
        Py_ssize_t exp = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9') { i++; exp++; }
        if (exp == 0) return 0;
    }
    if (i != n) return 0;
    /* Clinger's fast path: a mantissa below 2^53 and a power of ten below 10^23 are exact
       doubles, so one IEEE multiplication or division rounds correctly, as a full
       decimal conversion would; other spellings go to Python's own (dtoa) */
    {
        static const double pow10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
                                         1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                                         1e18, 1e19, 1e20, 1e21, 1e22};
        uint64_t m = 0;
        int negative = 0, frac = 0, sig = 0, seen_point = 0, exp_sign = 1;
        long exp = 0;
        Py_ssize_t j = 0;
        if (p[j] == '-') { negative = 1; j++; }
        for (; j < n && p[j] != 'e' && p[j] != 'E'; j++) {
            if (p[j] == '.') { seen_point = 1; continue; }
            if (m == 0 && p[j] == '0') { if (seen_point) frac++; continue; }
            if (++sig > 17) goto slow;
            m = m * 10 + (uint64_t)(p[j] - '0');
            if (seen_point) frac++;
        }
        if (j < n) {
            j++;
            if (p[j] == '-') { exp_sign = -1; j++; } else if (p[j] == '+') j++;
            for (; j < n; j++) {
                exp = exp * 10 + (p[j] - '0');
                if (exp > 10000) goto slow;
            }
        }
        long e10 = exp_sign * exp - frac;
        if (m > (1ULL << 53)) goto slow;
        double v = (double)m;
        if (m != 0) {
            if (e10 < -22 || e10 > 22) goto slow;
            v = e10 < 0 ? v / pow10[-e10] : v * pow10[e10];
        }
        *out = negative ? -v : v;
        return 1;
    }
slow:
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    *out = PyOS_string_to_double(buf, &end, NULL);
    if (*out == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return end == buf + n && isfinite(*out);
}

typedef struct { const char *text; Py_ssize_t len; uint64_t hash; int32_t code; } topic_slot;

static PyObject *parse_run(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer chunk;
    int delim;
    PyObject *codes_of;
    if (!PyArg_ParseTuple(args, "y*iO!", &chunk, &delim, &PyDict_Type, &codes_of)) return NULL;
    if (delim != ' ' && delim != '\t') {
        PyBuffer_Release(&chunk);
        PyErr_SetString(PyExc_ValueError, "parse_run: the delimiter is a space or a tab");
        return NULL;
    }
    const char *p = chunk.buf, *end = p + chunk.len;
    bytes_t codes = {0}, offsets = {0}, data = {0}, scores = {0};
    PyObject *result = NULL;
    int declined = 0;
    /* this chunk's topics: a small open-addressing table in front of the dict */
    Py_ssize_t tsize = 1024, tcount = 0;
    topic_slot *table = PyMem_Calloc(tsize, sizeof(topic_slot));
    int32_t zero = 0;
    if (table == NULL) { PyErr_NoMemory(); goto done; }
    if (bytes_grow(&offsets, 4)) goto done;
    memcpy(offsets.data, &zero, 4);
    offsets.len = 4;
    while (p < end) {
        const char *nl = memchr(p, '\n', end - p);
        const char *stop = nl ? nl : end;
        if (stop == p) { p = stop + 1; continue; }  /* an empty line */
        const char *field[6];
        Py_ssize_t flen[6];
        int k = 0;
        const char *start = p;
        for (const char *q = p; ; q++) {
            if (q == stop || *q == (char)delim) {
                if (k == 6 || q == start) { declined = 1; goto done; }
                field[k] = start;
                flen[k] = q - start;
                k++;
                if (q == stop) break;
                start = q + 1;
            } else if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7F) {
                declined = 1;  /* another separator, a control, non-ASCII: the full reader */
                goto done;
            }
        }
        if (k != 6 || field[0][0] == '#') { declined = 1; goto done; }
        double score;
        if (!plain_score(field[4], flen[4], &score)) { declined = 1; goto done; }
        /* the topic's code */
        uint64_t h = 1469598103934665603ULL;
        for (Py_ssize_t i = 0; i < flen[0]; i++) h = (h ^ (unsigned char)field[0][i]) * 1099511628211ULL;
        h = mix(h);
        Py_ssize_t at = (Py_ssize_t)(h & (uint64_t)(tsize - 1));
        int probes = 0;
        while (table[at].text != NULL &&
               (table[at].len != flen[0] || memcmp(table[at].text, field[0], flen[0]) != 0)) {
            at = (at + 1) & (tsize - 1);
            if (++probes > MAX_PROBE) { declined = 1; goto done; }
        }
        int32_t code;
        if (table[at].text != NULL) {
            code = table[at].code;
        } else {
            PyObject *topic = PyUnicode_DecodeASCII(field[0], flen[0], NULL);
            if (topic == NULL) goto done;
            PyObject *known = PyDict_GetItemWithError(codes_of, topic);
            if (known == NULL && PyErr_Occurred()) { Py_DECREF(topic); goto done; }
            long value;
            if (known != NULL) {
                value = PyLong_AsLong(known);
            } else {
                value = (long)PyDict_GET_SIZE(codes_of);
                PyObject *v = PyLong_FromLong(value);
                if (v == NULL || PyDict_SetItem(codes_of, topic, v)) {
                    Py_XDECREF(v); Py_DECREF(topic); goto done;
                }
                Py_DECREF(v);
            }
            Py_DECREF(topic);
            if (value < 0 || value > INT32_MAX) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a bad topic code");
                goto done;
            }
            code = (int32_t)value;
            if (2 * (tcount + 1) > tsize) {  /* grow: rehash this chunk's topics */
                Py_ssize_t nsize = tsize * 4;
                topic_slot *bigger = PyMem_Calloc(nsize, sizeof(topic_slot));
                if (bigger == NULL) { PyErr_NoMemory(); goto done; }
                for (Py_ssize_t i = 0; i < tsize; i++) {
                    if (table[i].text == NULL) continue;
                    Py_ssize_t b = (Py_ssize_t)(table[i].hash & (uint64_t)(nsize - 1));
                    while (bigger[b].text != NULL) b = (b + 1) & (nsize - 1);
                    bigger[b] = table[i];
                }
                PyMem_Free(table);
                table = bigger;
                tsize = nsize;
                at = (Py_ssize_t)(h & (uint64_t)(tsize - 1));
                while (table[at].text != NULL) at = (at + 1) & (tsize - 1);
            }
            table[at].text = field[0];
            table[at].len = flen[0];
            table[at].hash = h;
            table[at].code = code;
            tcount++;
        }
        if (data.len + flen[2] > INT32_MAX) { declined = 1; goto done; }
        if (bytes_grow(&codes, 4) || bytes_grow(&scores, 8) || bytes_grow(&data, flen[2]) ||
            bytes_grow(&offsets, 4))
            goto done;
        memcpy(codes.data + codes.len, &code, 4);
        codes.len += 4;
        memcpy(scores.data + scores.len, &score, 8);
        scores.len += 8;
        memcpy(data.data + data.len, field[2], flen[2]);
        data.len += flen[2];
        int32_t off = (int32_t)data.len;
        memcpy(offsets.data + offsets.len, &off, 4);
        offsets.len += 4;
        p = nl ? nl + 1 : end;
    }
    {
        PyObject *a = PyByteArray_FromStringAndSize(codes.data ? codes.data : "", codes.len);
        PyObject *b = PyByteArray_FromStringAndSize(offsets.data, offsets.len);
        PyObject *c = PyByteArray_FromStringAndSize(data.data ? data.data : "", data.len);
        PyObject *d = PyByteArray_FromStringAndSize(scores.data ? scores.data : "", scores.len);
        if (a && b && c && d) result = Py_BuildValue("(NNNN)", a, b, c, d);
        else { Py_XDECREF(a); Py_XDECREF(b); Py_XDECREF(c); Py_XDECREF(d); }
    }
done:
    PyMem_Free(table);
    PyMem_Free(codes.data);
    PyMem_Free(offsets.data);
    PyMem_Free(data.data);
    PyMem_Free(scores.data);
    PyBuffer_Release(&chunk);
    if (declined && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}

/* ---- hash tables of row numbers, one topic at a time ---------------------------------- */

typedef struct { int64_t *data; Py_ssize_t len, cap; } rows_t;

static int rows_push(rows_t *r, int64_t v) {
    if (r->len == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 1024;
        int64_t *data = PyMem_Realloc(r->data, cap * sizeof(int64_t));
        if (data == NULL) { PyErr_NoMemory(); return -1; }
        r->data = data;
        r->cap = cap;
    }
    r->data[r->len++] = v;
    return 0;
}

static PyObject *rows_bytes(rows_t *r) {
    PyObject *out = PyByteArray_FromStringAndSize((const char *)r->data, r->len * 8);
    PyMem_Free(r->data);
    r->data = NULL;
    return out;
}

/* An int64 (or uint64) vector argument: its buffer, checked for item size and length. */
static int int64_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t len, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) return -1;
    const char *f = view->format ? view->format : "B";
    if (view->itemsize != 8 || strchr("lqLQ", f[0]) == NULL || f[1] != 0 ||
        (len >= 0 && view->len != len * 8)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: an int64 or uint64 vector of the right length", what);
        return -1;
    }
    return 0;
}

static Py_ssize_t table_size(Py_ssize_t n) {
    Py_ssize_t size = 16;
    while (size < 2 * n) size <<= 1;
    return size;
}

static PyObject *block_duplicates(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *h_obj, *s_obj, *e_obj;
    if (!PyArg_ParseTuple(args, "OOO", &h_obj, &s_obj, &e_obj)) return NULL;
    Py_buffer hv, sv, ev;
    if (int64_buffer(h_obj, &hv, -1, "hashes")) return NULL;
    if (int64_buffer(s_obj, &sv, -1, "starts")) { PyBuffer_Release(&hv); return NULL; }
    if (int64_buffer(e_obj, &ev, sv.len / 8, "ends")) {
        PyBuffer_Release(&hv); PyBuffer_Release(&sv); return NULL;
    }
    const uint64_t *h = hv.buf;
    const int64_t *starts = sv.buf, *ends = ev.buf;
    Py_ssize_t n = hv.len / 8, blocks = sv.len / 8, widest = 0;
    rows_t found = {0};
    int64_t *slot = NULL;
    char *reported = NULL;
    int declined = 0;
    for (Py_ssize_t b = 0; b < blocks; b++) {
        if (starts[b] < 0 || ends[b] > n || starts[b] > ends[b]) {
            PyErr_SetString(PyExc_ValueError, "block_duplicates: a block out of range");
            goto done;
        }
        if (ends[b] - starts[b] > widest) widest = ends[b] - starts[b];
    }
    Py_ssize_t size = table_size(widest);
    slot = PyMem_Malloc(size * sizeof(int64_t));
    reported = PyMem_Calloc(n ? n : 1, 1);
    if (slot == NULL || reported == NULL) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t b = 0; b < blocks; b++) {
        Py_ssize_t m = ends[b] - starts[b];
        if (m < 2) continue;
        uint64_t mask = (uint64_t)table_size(m) - 1;
        memset(slot, 0xff, (mask + 1) * sizeof(int64_t));  /* -1: empty */
        for (int64_t r = starts[b]; r < ends[b]; r++) {
            uint64_t i = mix(h[r]) & mask;
            int probes = 0;
            while (slot[i] >= 0) {
                int64_t other = slot[i];
                if (h[other] == h[r]) {
                    if (!reported[other]) {
                        reported[other] = 1;
                        if (rows_push(&found, other)) goto done;
                    }
                    if (!reported[r]) {
                        reported[r] = 1;
                        if (rows_push(&found, r)) goto done;
                    }
                    break;
                }
                i = (i + 1) & mask;
                if (++probes > MAX_PROBE) { declined = 1; goto done; }
            }
            if (slot[i] < 0) slot[i] = r;
        }
    }
done:
    PyMem_Free(slot);
    PyMem_Free(reported);
    PyBuffer_Release(&hv); PyBuffer_Release(&sv); PyBuffer_Release(&ev);
    if (PyErr_Occurred() || declined) {
        PyMem_Free(found.data);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    return rows_bytes(&found);
}

static PyObject *block_join(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *objs[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5], &objs[6]))
        return NULL;
    static const char *names[7] = {"run_hashes", "run_lo", "run_hi", "qrels_hashes",
                                   "qrels_lo", "qrels_hi", "order"};
    Py_buffer v[7];
    int got = 0;
    rows_t run_rows = {0}, qrels_rows = {0};
    int64_t *slot = NULL, *next = NULL;
    PyObject *result = NULL;
    for (; got < 7; got++) {
        Py_ssize_t len = (got == 2) ? v[1].len / 8 : (got == 5) ? v[4].len / 8 : -1;
        if (int64_buffer(objs[got], &v[got], len, names[got])) goto done;
    }
    const uint64_t *rh = v[0].buf, *qh = v[3].buf;
    const int64_t *rlo = v[1].buf, *rhi = v[2].buf, *qlo = v[4].buf, *qhi = v[5].buf,
                  *order = v[6].buf;
    Py_ssize_t nr = v[0].len / 8, nq = v[3].len / 8, topics = v[4].len / 8;
    Py_ssize_t n_order = v[6].len / 8, widest = 0;
    if (v[1].len != v[4].len) {
        PyErr_SetString(PyExc_ValueError, "block_join: one run block per qrels topic");
        goto done;
    }
    for (Py_ssize_t k = 0; k < n_order; k++) {
        int64_t q = order[k];
        if (q < 0 || q >= topics || rlo[q] < 0 || rhi[q] > nr || rlo[q] > rhi[q] ||
            qlo[q] < 0 || qhi[q] > nq || qlo[q] > qhi[q]) {
            PyErr_SetString(PyExc_ValueError, "block_join: a block out of range");
            goto done;
        }
        if (qhi[q] - qlo[q] > widest) widest = qhi[q] - qlo[q];
    }
    Py_ssize_t size = table_size(widest);
    /* a judged docid on several qrels rows (subtopics) pairs with each: a few per row */
    Py_ssize_t max_pairs = 8 * (nr + nq) + 4096;
    slot = PyMem_Malloc(size * sizeof(int64_t));
    next = PyMem_Malloc((nq ? nq : 1) * sizeof(int64_t));
    if (slot == NULL || next == NULL) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < n_order; k++) {
        int64_t q = order[k];
        Py_ssize_t m = qhi[q] - qlo[q];
        if (m == 0 || rhi[q] == rlo[q]) continue;
        uint64_t mask = (uint64_t)table_size(m) - 1;
        memset(slot, 0xff, (mask + 1) * sizeof(int64_t));
        /* each distinct hash: one slot, holding its first qrels row; next[] chains the
           rows of equal hash in ascending order (inserted from the last row back) */
        for (int64_t r = qhi[q] - 1; r >= qlo[q]; r--) {
            uint64_t i = mix(qh[r]) & mask;
            int probes = 0;
            while (slot[i] >= 0 && qh[slot[i]] != qh[r]) {
                i = (i + 1) & mask;
                if (++probes > MAX_PROBE) goto decline;
            }
            next[r] = slot[i];
            slot[i] = r;
        }
        for (int64_t r = rlo[q]; r < rhi[q]; r++) {
            uint64_t i = mix(rh[r]) & mask;
            int probes = 0;
            while (slot[i] >= 0 && qh[slot[i]] != rh[r]) {
                i = (i + 1) & mask;
                if (++probes > MAX_PROBE) goto decline;
            }
            for (int64_t j = slot[i]; j >= 0; j = next[j]) {
                /* equal 64-bit hashes of different docids can be made on purpose: many
                   pairs are left to the sorting path, which matches such rows by string */
                if (run_rows.len >= max_pairs) goto decline;
                if (rows_push(&run_rows, r) || rows_push(&qrels_rows, j)) goto done;
            }
        }
    }
    PyObject *a = rows_bytes(&run_rows), *b = rows_bytes(&qrels_rows);
    if (a != NULL && b != NULL) result = Py_BuildValue("(NN)", a, b);
    else { Py_XDECREF(a); Py_XDECREF(b); }
    goto done;
decline:
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(slot);
    PyMem_Free(next);
    PyMem_Free(run_rows.data);
    PyMem_Free(qrels_rows.data);
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return result;
}

/* cranfield/inputs/_jsonscan.c: the large-JSON kernels (cranfield/inputs/_json_kernels.py names them) */
PyObject *json_skip_ws(PyObject *, PyObject *);
PyObject *json_value_end(PyObject *, PyObject *);
PyObject *json_member_at(PyObject *, PyObject *);
PyObject *json_after_value(PyObject *, PyObject *);
PyObject *json_object_start(PyObject *, PyObject *);
PyObject *json_scores(PyObject *, PyObject *);
PyObject *json_repeated_keys(PyObject *, PyObject *);
PyObject *json_hash_hits(PyObject *, PyObject *);
void jsonscan_set_seed(uint64_t);

/* cranfield/inputs/_rankpass.c: a run mapping checked, looked up and ranked in one pass */
PyObject *rank_mapping(PyObject *, PyObject *);
PyObject *mapping_topics(PyObject *, PyObject *);
PyObject *topic_dicts(PyObject *, PyObject *);

/* cranfield/inputs/_textpass.c: a run's TREC text read and ranked against qrels indexed once */
PyObject *text_qrels(PyObject *, PyObject *);
PyObject *rank_text(PyObject *, PyObject *);

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Read a {topic: {docid: value}} mapping's columns, or None."},
    {"parse_run", parse_run, METH_VARARGS, "A run's plainest lines as columns, or None."},
    {"block_duplicates", block_duplicates, METH_VARARGS, "Rows sharing a hash in a block."},
    {"block_join", block_join, METH_VARARGS, "Run and qrels rows of equal hash, by topic."},
    {"positions", positions, METH_VARARGS, "Each query score's tie group in its segment."},
    {"rank_mapping", rank_mapping, METH_VARARGS, "A run mapping ranked against qrels, or None."},
    {"mapping_topics", mapping_topics, METH_VARARGS, "A mapping's sorted topic ids, or None."},
    {"topic_dicts", topic_dicts, METH_VARARGS, "{topic: {key: value}} from columns."},
    {"text_qrels", text_qrels, METH_VARARGS, "Qrels indexed for rank_text, or None."},
    {"rank_text", rank_text, METH_VARARGS, "A run's TREC text ranked against qrels, or None."},
    {"lookup", lookup, METH_VARARGS, "Each judged docid's score in a run mapping (NaN: absent)."},
    {"json_skip_ws", json_skip_ws, METH_VARARGS, "The first non-whitespace position."},
    {"json_value_end", json_value_end, METH_VARARGS, "The end of the JSON value at i, or -1."},
    {"json_member_at", json_member_at, METH_VARARGS, "A member's key span and value start."},
    {"json_after_value", json_after_value, METH_VARARGS, "After a member's value: next or end."},
    {"json_object_start", json_object_start, METH_VARARGS, "After the top-level '{'."},
    {"json_scores", json_scores, METH_VARARGS, "A {topic: {docid: number}} mapping as columns."},
    {"json_repeated_keys", json_repeated_keys, METH_VARARGS, "Whether a key may repeat."},
    {"hash_hits", json_hash_hits, METH_VARARGS, "Rows whose hash is set in a bitmap."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_mapscan", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mapscan(void) {
    PyObject *os = PyImport_ImportModule("os");
    PyObject *bytes = os ? PyObject_CallMethod(os, "urandom", "i", 8) : NULL;
    Py_XDECREF(os);
    if (bytes == NULL) return NULL;
    if (PyBytes_Check(bytes) && PyBytes_GET_SIZE(bytes) == 8)
        memcpy(&seed, PyBytes_AS_STRING(bytes), 8);
    Py_DECREF(bytes);
    jsonscan_set_seed(seed);
    return PyModule_Create(&module);
}
