/* The {topic: {docid: value}} mappings of cranfield.io read in one C pass.
 *
 * Python's own loops over a 7-million-entry run mapping (the docids gathered, joined and
 * checked, the values' types collected, the scores converted) cost about a second; this pass
 * does the same work in ~0.1 s. It only ever *accepts*: anything it does not read exactly as
 * cranfield.io's Python path would (a non-string docid, a forbidden character, a value
 * that is not a plain int or float, a bool, a non-finite score, a grade beyond int64 or with
 * a fraction) makes it return None, and the Python path then reads the mapping and names
 * the problem. So the two paths give the same Run or the same refusal
 * (tests/engine/test_mapscan.py proves it on generated mappings).
 *
 * scan(mapping, topics, grades, docids) -> (values: bytearray, lengths: bytearray) | None
 *     topics: the mapping's keys in the order to read them (already checked ids); docids: a
 *     numpy object array of as many slots as the topics hold docids, filled in that order.
 *     values: float64 scores, or int64 grades when ``grades`` is true; lengths: int64.
 * lookup(run, topics, bounds, docids) -> bytearray | None (a topic's docs not a dict)
 *     float64 per docid: run[topics[q]].get(docids[i]) for bounds[q] <= i < bounds[q+1],
 *     NaN where absent (a run's scores are finite), a non-float value read as its double.
 * positions(scores, lo, hi, query) -> (first: bytearray, second: bytearray)
 *     cranfield.ranking.segmented_search twice, in C: for each i, in scores[lo[i]:hi[i]]
 *     (descending), the first position whose score is not > query[i] and the first whose
 *     score is not >= query[i] (int64). scores and query: float64 or float32 alike; lo, hi:
 *     int64, in range.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* An id holds no ASCII whitespace or control character (cranfield.grammar._ID_FORBIDDEN). */
static int id_ok(PyObject *s) {
    if (!PyUnicode_Check(s)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n == 0) return 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *p = (const unsigned char *)data;
        for (Py_ssize_t i = 0; i < n; i++)
            if (p[i] <= 0x20 || p[i] == 0x7F) return 0;
        return 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c <= 0x20 || c == 0x7F) return 0;
    }
    return 1;
}

/* A score as np.fromiter(..., float64) reads it, or 0 when the Python path must decide. */
static int score_of(PyObject *v, double *out) {
    if (PyFloat_Check(v)) {
        *out = PyFloat_AS_DOUBLE(v);
    } else if (PyLong_Check(v) && !PyBool_Check(v)) {
        *out = PyLong_AsDouble(v);
        if (*out == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    } else {
        return 0;
    }
    return isfinite(*out);
}

/* A grade as an exact int64 (an int, or an integral float below 2^53), else 0. */
static int grade_of(PyObject *v, int64_t *out) {
    if (PyLong_Check(v) && !PyBool_Check(v)) {
        int overflow = 0;
        long long g = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (g == -1 && PyErr_Occurred())) { PyErr_Clear(); return 0; }
        *out = (int64_t)g;
        return 1;
    }
    if (PyFloat_Check(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        if (!(fabs(d) < 9007199254740992.0) || d != floor(d)) return 0;
        *out = (int64_t)d;
        return 1;
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mapping, *topics, *docids;
    int grades;
    if (!PyArg_ParseTuple(args, "O!O!pO", &PyDict_Type, &mapping, &PyList_Type, &topics,
                          &grades, &docids))
        return NULL;
    Py_ssize_t n_topics = PyList_GET_SIZE(topics), total = 0;
    for (Py_ssize_t t = 0; t < n_topics; t++) {
        PyObject *docs = PyDict_GetItemWithError(mapping, PyList_GET_ITEM(topics, t));
        if (docs == NULL) { if (PyErr_Occurred()) return NULL; Py_RETURN_NONE; }
        if (!PyDict_CheckExact(docs)) Py_RETURN_NONE;  /* other Mappings: the Python path */
        total += PyDict_GET_SIZE(docs);
    }
    Py_buffer view;
    if (PyObject_GetBuffer(docids, &view, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS))
        return NULL;
    if (view.format == NULL || strcmp(view.format, "O") != 0 || view.itemsize != 8 ||
        view.len != total * 8) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "docids must be an object array, one slot a docid");
        return NULL;
    }
    PyObject **slots = (PyObject **)view.buf;
    /* bytearrays: numpy reads them as writable arrays without a copy */
    PyObject *values = PyByteArray_FromStringAndSize(NULL, total * 8);
    PyObject *lengths = PyByteArray_FromStringAndSize(NULL, n_topics * 8);
    if (values == NULL || lengths == NULL) goto fail;
    char *vbuf = PyByteArray_AS_STRING(values);
    int64_t *lbuf = (int64_t *)PyByteArray_AS_STRING(lengths);
    Py_ssize_t k = 0;
    for (Py_ssize_t t = 0; t < n_topics; t++) {
        PyObject *docs = PyDict_GetItem(mapping, PyList_GET_ITEM(topics, t));
        Py_ssize_t pos = 0, size = PyDict_GET_SIZE(docs);
        PyObject *key, *value;
        if (k + size > total) goto fallback;  /* changed while read */
        while (PyDict_Next(docs, &pos, &key, &value)) {
            if (k >= total || !id_ok(key)) goto fallback;
            if (grades) {
                int64_t g;
                if (!grade_of(value, &g)) goto fallback;
                memcpy(vbuf + 8 * k, &g, 8);
            } else {
                double d;
                if (!score_of(value, &d)) goto fallback;
                memcpy(vbuf + 8 * k, &d, 8);
            }
            PyObject *old = slots[k];
            Py_INCREF(key);
            slots[k] = key;
            Py_XDECREF(old);
            k++;
        }
        lbuf[t] = size;
    }
    PyBuffer_Release(&view);
    if (k != total) goto fallback_released;
    return Py_BuildValue("(NN)", values, lengths);
fallback:
    PyBuffer_Release(&view);
fallback_released:
    Py_DECREF(values);
    Py_DECREF(lengths);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&view);
    Py_XDECREF(values);
    Py_XDECREF(lengths);
    return NULL;
}

static PyObject *lookup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *run, *topics, *bounds, *docids;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyDict_Type, &run, &PyList_Type, &topics,
                          &PyList_Type, &bounds, &PyList_Type, &docids))
        return NULL;
    Py_ssize_t n_topics = PyList_GET_SIZE(topics), n = PyList_GET_SIZE(docids);
    if (PyList_GET_SIZE(bounds) != n_topics + 1) {
        PyErr_SetString(PyExc_ValueError, "bounds must hold one more entry than topics");
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n * 8);
    if (out == NULL) return NULL;
    double *got = (double *)PyByteArray_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) got[i] = NAN;
    for (Py_ssize_t q = 0; q < n_topics; q++) {
        Py_ssize_t a = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, q));
        Py_ssize_t b = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, q + 1));
        if (PyErr_Occurred()) goto fail;
        if (a < 0 || b > n || a > b) {
            PyErr_SetString(PyExc_ValueError, "bounds out of range");
            goto fail;
        }
        PyObject *docs = PyDict_GetItemWithError(run, PyList_GET_ITEM(topics, q));
        if (docs == NULL) { if (PyErr_Occurred()) goto fail; continue; }
        if (!PyDict_Check(docs)) {  /* another Mapping: the Python path looks it up */
            Py_DECREF(out);
            Py_RETURN_NONE;
        }
        for (Py_ssize_t i = a; i < b; i++) {
            PyObject *v = PyDict_GetItemWithError(docs, PyList_GET_ITEM(docids, i));
            if (v == NULL) { if (PyErr_Occurred()) goto fail; continue; }
            double d = PyFloat_Check(v) ? PyFloat_AS_DOUBLE(v) : PyFloat_AsDouble(v);
            if (d == -1.0 && PyErr_Occurred()) goto fail;
            got[i] = d;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
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

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Read a {topic: {docid: value}} mapping's columns, or None."},
    {"positions", positions, METH_VARARGS, "Each query score's tie group in its segment."},
    {"lookup", lookup, METH_VARARGS, "Each judged docid's score in a run mapping (NaN: absent)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_mapscan", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__mapscan(void) { return PyModule_Create(&module); }
