/* What both mapping passes of cranfield.inputs._mapscan (_mapscan.c's scan, _rankpass.c's
   rank_mapping) accept from a {topic: {docid: value}} mapping: an id by the input grammar, a
   score, a grade, and the containers (dict, collections.defaultdict, collections.OrderedDict).
   Each only accepts what the Python path reads the same way; anything else is left to it. */
#ifndef CRANFIELD_MAPPING_VALUES_H
#define CRANFIELD_MAPPING_VALUES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* An id holds no ASCII whitespace or control character (cranfield.inputs.grammar._ID_FORBIDDEN);
   a surrogate code point is left to the Python path (which encodes ids with
   surrogateescape: some surrogates are bytes, the others are refused). */
static inline int id_ok(PyObject *s) {
    if (!PyUnicode_Check(s)) return 0;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) { PyErr_Clear(); return 0; }
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n == 0) return 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *p = (const unsigned char *)data;
        Py_ssize_t i = 0;
        /* eight bytes at a time: a byte below 0x21 or equal to 0x7F sets its word's flag
           (exact as a test of whether there is one: ~w clears the bytes from 0x80 up) */
        for (; i + 8 <= n; i += 8) {
            uint64_t w, d;
            memcpy(&w, p + i, 8);
            d = w ^ 0x7F7F7F7F7F7F7F7FULL;
            if (((w - 0x2121212121212121ULL) & ~w & 0x8080808080808080ULL) |
                ((d - 0x0101010101010101ULL) & ~d & 0x8080808080808080ULL))
                return 0;
        }
        for (; i < n; i++)
            if (p[i] <= 0x20 || p[i] == 0x7F) return 0;
        return 1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c <= 0x20 || c == 0x7F || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    }
    return 1;
}

/* A score as np.fromiter(..., float64) reads it, or 0 when the Python path must decide. */
static inline int score_of(PyObject *v, double *out) {
    if (PyFloat_Check(v)) {
        *out = PyFloat_AS_DOUBLE(v);
    } else if (PyLong_CheckExact(v)) {  /* (a subclass may convert through __float__) */
        *out = PyLong_AsDouble(v);
        if (*out == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    } else {
        return 0;
    }
    return isfinite(*out);
}

/* A grade as an exact int64 (an int, or an integral float below 2^53), else 0. */
static inline int grade_of(PyObject *v, int64_t *out) {
    if (PyLong_CheckExact(v)) {  /* (a subclass may convert through __index__) */
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

/* The mapping types the compiled passes read (defined in _rankpass.c): 1 for an exact dict,
   2 for an exact collections.defaultdict, 3 for an exact collections.OrderedDict (whose
   iteration order is its own, not its dict's), 0 for anything else (a subclass, another
   Mapping: the Python path), -1 with an exception set. */
int mapping_kind(PyObject *m);

#endif
