/* One compiled pass over a run mapping {topic: {docid: score}}: it checks every id and score
 * by the input grammar, looks each judged docid up in its topic's dict, and ranks the ones
 * found as trec_eval does (score descending, then docno descending), emitting only what the
 * measures read (cranfield.inputs.ranking.Ranked) and no array with a row per retrieved
 * document. Part of cranfield.inputs._mapscan (with _mapscan.c and _jsonscan.c).
 *
 * rank_mapping(run, topics, run_to_qrels, qrels_bounds, qrels_docids, float32, cut_ks,
 *              tie_work_cap)
 *     -> (num_ret, hit_rt, hit_qrow, hit_rank, hit_first, hit_last, cut_tied) | None
 *   run: a dict, collections.defaultdict or collections.OrderedDict (exactly; inner dicts
 *   alike); topics: its keys, a list of str in the order to read them (already checked by
 *   the Python side); run_to_qrels: int64[len(topics)], each topic's qrels topic or -1;
 *   qrels_bounds: int64[Tq + 1], qrels topic q's rows are [bounds[q], bounds[q + 1]);
 *   qrels_docids: a list of str, one per qrels row; float32: the scores rounded to a C float
 *   first (trec_eval 9.0.8); cut_ks: int64[K], the cutoffs whose ties are reported.
 *   Out, as bytearrays: num_ret int64[len(topics)]; for each hit (a judged docid the run
 *   holds, in a topic with qrels), by topic then rank: its run topic, qrels row, 1-based rank,
 *   and the first and last rank of its tie group (int64); cut_tied uint8[K][len(topics)]: 1
 *   where the topic has more than k documents and the k-th score equals the (k+1)-th.
 *
 *   rank(x) = 1 + #{y : s(y) > s(x)} + #{y : s(y) = s(x) and docid(y) > docid(x)}
 *   (docids compared by code point, which is UTF-8 byte order: trec_eval's strcmp). The
 *   counts come from a binary search when the dict's scores are already non-increasing in
 *   its order (the usual case), a linear count for a topic with few judged docids, else a
 *   sorted copy of the scores.
 *
 *   None (the Python path then reads the run and names any problem, so refusals stay those
 *   of cranfield.inputs.mappings) for: a container not exactly one of the three types, a key
 *   not an exact str or failing the id grammar, a value not an exact int or float or not a
 *   finite score, a qrels docid not an exact str, a dict whose size does not match what was
 *   read, or docid comparisons in tie groups past tie_work_cap (scores tied on purpose).
 *   Nothing here runs Python code (exact str keys hash and compare in C), so no dict can
 *   change under the pass.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_mapping_values.h"

static PyObject *defaultdict_type, *ordereddict_type;

int mapping_kind(PyObject *m) {
    if (PyDict_CheckExact(m)) return 1;
    if (defaultdict_type == NULL) {
        PyObject *collections = PyImport_ImportModule("collections");
        if (collections == NULL) return -1;
        PyObject *dd = PyObject_GetAttrString(collections, "defaultdict");
        PyObject *od = PyObject_GetAttrString(collections, "OrderedDict");
        Py_DECREF(collections);
        if (dd == NULL || od == NULL) { Py_XDECREF(dd); Py_XDECREF(od); return -1; }
        defaultdict_type = dd;  /* (held for the life of the process) */
        ordereddict_type = od;
    }
    if ((PyObject *)Py_TYPE(m) == defaultdict_type) return 2;
    if ((PyObject *)Py_TYPE(m) == ordereddict_type) return 3;
    return 0;
}

/* An exact str's hash: the one it caches (a dict key's is always there), else computed
   (no Python code runs for an exact str); -1 with an exception on failure. */
static inline Py_hash_t str_hash(PyObject *s) {
    Py_hash_t h = ((PyASCIIObject *)s)->hash;
    return h != -1 ? h : PyObject_Hash(s);
}

/* Two exact str equal, as str.__eq__ (a str is stored in its smallest kind: equal strings
   have equal kinds and lengths). */
static inline int str_equal(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), n * kind) == 0;
}

typedef struct { double s; Py_ssize_t i; } scored_t;

static int by_score_desc(const void *a, const void *b) {
    double x = ((const scored_t *)a)->s, y = ((const scored_t *)b)->s;
    return (x < y) - (x > y);
}

/* one hit of a topic, before its hits are put in rank order */
typedef struct { int64_t rank, qrow, first, last; } hit_t;

/* Exact str a > b by code point (1, 0, or -1 on error: not expected for exact str). */
static inline int docid_greater(PyObject *a, PyObject *b) {
    if (PyUnicode_KIND(a) == PyUnicode_1BYTE_KIND && PyUnicode_KIND(b) == PyUnicode_1BYTE_KIND) {
        Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b);
        int c = memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), na < nb ? na : nb);
        return c > 0 || (c == 0 && na > nb);
    }
    int c = PyUnicode_Compare(a, b);
    if (c == -1 && PyErr_Occurred()) return -1;
    return c > 0;
}

/* An int64 vector argument (its buffer), or -1 with an exception. */
static int i64_arg(PyObject *obj, Py_buffer *view, Py_ssize_t len, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) return -1;
    const char *f = view->format ? view->format : "B";
    if (view->itemsize != 8 || (f[0] != 'l' && f[0] != 'q') || f[1] != 0 ||
        (len >= 0 && view->len != len * 8)) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "rank_mapping: %s must be an int64 vector of the right "
                     "length", what);
        return -1;
    }
    return 0;
}

PyObject *rank_mapping(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *run, *topic_list, *rq_obj, *qb_obj, *qd_list, *ks_obj;
    int float32;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "OO!OOOpOn", &run, &PyList_Type, &topic_list, &rq_obj,
                          &qb_obj, &qd_list, &float32, &ks_obj, &cap))
        return NULL;
    /* run: the mapping, or its topics' dicts in topics' order (mapping_topics gives them) */
    int listed = PyList_CheckExact(run);
    int outer = listed ? 1 : mapping_kind(run);
    if (outer <= 0) {
        if (outer < 0) return NULL;
        Py_RETURN_NONE;
    }
    Py_ssize_t n_topics = PyList_GET_SIZE(topic_list), n_qrows;
    Py_buffer rqv = {0}, qbv = {0}, ksv = {0}, qdv = {0};
    int got = 0;
    PyObject *const *qdocids;  /* (no Python code runs in the pass: the list stays as it is) */
    if (PyList_Check(qd_list)) {
        qdocids = ((PyListObject *)qd_list)->ob_item;
        n_qrows = PyList_GET_SIZE(qd_list);
    } else {  /* an object array (Qrels.docids): its slots, without a list of them */
        if (PyObject_GetBuffer(qd_list, &qdv, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) return NULL;
        if (qdv.format == NULL || strcmp(qdv.format, "O") != 0 ||
            qdv.itemsize != sizeof(PyObject *)) {
            PyBuffer_Release(&qdv);
            PyErr_SetString(PyExc_ValueError, "rank_mapping: qrels_docids must be a list or "
                            "an object array");
            return NULL;
        }
        qdocids = (PyObject *const *)qdv.buf;
        n_qrows = qdv.len / (Py_ssize_t)sizeof(PyObject *);
    }
    if (i64_arg(rq_obj, &rqv, n_topics, "run_to_qrels")) goto args_failed;
    got = 1;
    if (i64_arg(qb_obj, &qbv, -1, "qrels_bounds")) goto args_failed;
    got = 2;
    if (i64_arg(ks_obj, &ksv, -1, "cut_ks")) goto args_failed;
    got = 3;
    const int64_t *run_to_qrels = rqv.buf, *bounds = qbv.buf, *ks = ksv.buf;
    Py_ssize_t n_qtopics = qbv.len / 8 - 1, n_ks = ksv.len / 8;
    if (n_qtopics < 0 || bounds[0] != 0 || bounds[n_qtopics] != n_qrows) goto bad_args;
    for (Py_ssize_t q = 0; q < n_qtopics; q++)
        if (bounds[q] > bounds[q + 1]) goto bad_args;
    for (Py_ssize_t t = 0; t < n_topics; t++)
        if (run_to_qrels[t] < -1 || run_to_qrels[t] >= n_qtopics) goto bad_args;
    /* the hits' bound: a hit per qrels row of each run topic's qrels topic (two run topics
       may name one qrels topic: each has its hits) */
    Py_ssize_t out_rows = 0;
    for (Py_ssize_t t = 0; t < n_topics; t++) {
        int64_t q = run_to_qrels[t];
        if (q >= 0) out_rows += (Py_ssize_t)(bounds[q + 1] - bounds[q]);
        if (out_rows > PY_SSIZE_T_MAX / 8) goto bad_args;
    }
    for (Py_ssize_t k = 0; k < n_ks; k++)
        if (ks[k] < 1) goto bad_args;

    PyObject *result = NULL, *num_ret = NULL, *cut_tied = NULL;
    PyObject *out[5] = {NULL, NULL, NULL, NULL, NULL};  /* rt, qrow, rank, first, last */
    int64_t *h_out[5];
    PyObject **keys = NULL;
    double *s = NULL, *sv = NULL;  /* the scores in dict order; sorted descending */
    Py_hash_t *hs = NULL;           /* the keys' hashes, in dict order */
    int32_t *table = NULL;          /* a topic's keys by hash: their index, -1 for none */
    int32_t *at_rank = NULL;        /* a topic's hits by rank - 1, -1 for none */
    scored_t *sorted = NULL;
    hit_t *hits = NULL;
    Py_ssize_t room = 0, hit_room = 0, work = 0, table_room = 0, n_hits = 0;
    int declined = 0;

    /* the topics' dicts: every key an exact str (the run holds exactly these keys) */
    if ((listed ? PyList_GET_SIZE(run) : PyDict_GET_SIZE(run)) != n_topics) {
        declined = 1;
        goto done;
    }
    num_ret = PyByteArray_FromStringAndSize(NULL, n_topics * 8);
    cut_tied = PyByteArray_FromStringAndSize(NULL, n_ks * n_topics);
    if (num_ret == NULL || cut_tied == NULL) goto done;
    int64_t *nret = (int64_t *)PyByteArray_AS_STRING(num_ret);
    uint8_t *ctied = (uint8_t *)PyByteArray_AS_STRING(cut_tied);
    if (n_ks > 0 && n_topics > 0) memset(ctied, 0, n_ks * n_topics);
    /* a hit per qrels row of its topic at most: the outputs at that size (out_rows), cut to
       the hits at the end */
    for (int j = 0; j < 5; j++) {
        out[j] = PyByteArray_FromStringAndSize(NULL, out_rows * 8);
        if (out[j] == NULL) goto done;
        h_out[j] = (int64_t *)PyByteArray_AS_STRING(out[j]);
    }

    for (Py_ssize_t t = 0; t < n_topics; t++) {
        PyObject *topic = PyList_GET_ITEM(topic_list, t);
        if (!PyUnicode_CheckExact(topic)) { declined = 1; goto done; }
        PyObject *docs = listed ? PyList_GET_ITEM(run, t) : PyDict_GetItem(run, topic);
        int kind = docs == NULL ? 0 : mapping_kind(docs);
        if (kind <= 0) { if (kind == 0) declined = 1; goto done; }
        Py_ssize_t n = PyDict_GET_SIZE(docs), pos = 0, i = 0;
        if (n >= INT32_MAX / 4) { declined = 1; goto done; }
        if (n > room) {
            Py_ssize_t want = n > 2 * room ? n : 2 * room;
            PyObject **k2 = PyMem_Realloc(keys, want * sizeof(PyObject *));
            if (k2 == NULL) { PyErr_NoMemory(); goto done; }
            keys = k2;
            double *s2 = PyMem_Realloc(s, want * sizeof(double));
            if (s2 == NULL) { PyErr_NoMemory(); goto done; }
            s = s2;
            scored_t *o2 = PyMem_Realloc(sorted, want * sizeof(scored_t));
            if (o2 == NULL) { PyErr_NoMemory(); goto done; }
            sorted = o2;
            double *v2 = PyMem_Realloc(sv, want * sizeof(double));
            if (v2 == NULL) { PyErr_NoMemory(); goto done; }
            sv = v2;
            Py_hash_t *h2 = PyMem_Realloc(hs, want * sizeof(Py_hash_t));
            if (h2 == NULL) { PyErr_NoMemory(); goto done; }
            hs = h2;
            int32_t *a2 = PyMem_Realloc(at_rank, want * sizeof(int32_t));
            if (a2 == NULL) { PyErr_NoMemory(); goto done; }
            at_rank = a2;
            memset(at_rank, 0xFF, want * sizeof(int32_t));  /* (all -1 between topics) */
            room = want;
        }
        /* a judged topic's keys go into a table by hash as they are read (the dict's own
           hashes: an exact str caches its hash), so that a judged docid's lookup gives its
           place in the dict's order */
        int64_t q = run_to_qrels[t];
        Py_ssize_t mask = 7;
        if (q >= 0) {
            while (mask + 1 < 2 * n) mask = 2 * mask + 1;
            if (mask + 1 > table_room) {
                int32_t *t2 = PyMem_Realloc(table, (mask + 1) * sizeof(int32_t));
                if (t2 == NULL) { PyErr_NoMemory(); goto done; }
                table = t2;
                table_room = mask + 1;
            }
            memset(table, 0xFF, (mask + 1) * sizeof(int32_t));
        }
        /* (1) check and read: the order is irrelevant here, ranks depend on scores and
           docids only, so an OrderedDict is read in its dict's order too */
        PyObject *key, *value;
        int monotone = 1;
        while (PyDict_Next(docs, &pos, &key, &value)) {
            double d;
            if (i >= n || !PyUnicode_CheckExact(key) || !id_ok(key) ||
                !(PyFloat_CheckExact(value) || PyLong_CheckExact(value)) ||
                !score_of(value, &d)) {
                declined = 1;
                goto done;
            }
            if (float32) d = (double)(float)d;
            keys[i] = key;
            s[i] = d;
            if (i && d > s[i - 1]) monotone = 0;
            if (q >= 0) {
                Py_hash_t h = str_hash(key);
                if (h == -1) goto done;
                hs[i] = h;
                Py_ssize_t slot = (Py_ssize_t)((size_t)h & (size_t)mask);
                while (table[slot] >= 0) slot = (slot + 1) & mask;
                table[slot] = (int32_t)i;
            }
            i++;
        }
        if (i != n) { declined = 1; goto done; }
        nret[t] = n;
        if (q < 0) continue;  /* no judgments: checked, not ranked */

        /* (2) the judged docids the topic holds */
        Py_ssize_t a = bounds[q], b = bounds[q + 1], nh = 0;
        int have_sorted = 0;
        if (!monotone && (b - a > 8 || n_ks)) {
            for (Py_ssize_t j = 0; j < n; j++) { sorted[j].s = s[j]; sorted[j].i = j; }
            qsort(sorted, n, sizeof(scored_t), by_score_desc);
            for (Py_ssize_t j = 0; j < n; j++) sv[j] = sorted[j].s;
            have_sorted = 1;
        }
        for (Py_ssize_t r = a; r < b; r++) {
            PyObject *docid = qdocids[r];
            if (docid == NULL || !PyUnicode_CheckExact(docid)) { declined = 1; goto done; }
            Py_hash_t h = str_hash(docid);
            if (h == -1) goto done;
            Py_ssize_t slot = (Py_ssize_t)((size_t)h & (size_t)mask), at = -1;
            for (; table[slot] >= 0; slot = (slot + 1) & mask) {
                Py_ssize_t j = table[slot];
                if (hs[j] == h && str_equal(keys[j], docid)) { at = j; break; }
            }
            if (at < 0) continue;  /* not retrieved */
            double x = s[at];
            Py_ssize_t above = 0, end = 0, offset = 0;
            if (monotone) {
                /* the scores descending in dict order: the tie group is around the hit */
                above = at;
                while (above > 0 && s[above - 1] == x) above--;
                end = at + 1;
                while (end < n && s[end] == x) end++;
                if (end - above > 1) {
                    work += end - above;
                    if (work > cap) { declined = 1; goto done; }
                    for (Py_ssize_t m = above; m < end; m++) {
                        int g = docid_greater(keys[m], docid);
                        if (g < 0) goto done;
                        offset += g;
                    }
                }
            } else if (have_sorted) {
                /* the scores descending: above = #{s > x} by a branchless binary search, then
                   the tie group's end by a scan (x is among them: one step but for ties) */
                const double *desc = sv;
                Py_ssize_t base = 0, len = n;
                while (len > 1) {
                    Py_ssize_t half = len / 2;
                    base = desc[base + half] > x ? base + half : base;
                    len -= half;
                }
                above = base + (desc[base] > x);
                end = above;
                while (end < n && desc[end] >= x) end++;
                if (end - above > 1) {
                    work += end - above;
                    if (work > cap) { declined = 1; goto done; }
                    for (Py_ssize_t m = above; m < end; m++) {
                        int g = docid_greater(keys[sorted[m].i], docid);
                        if (g < 0) goto done;
                        offset += g;
                    }
                }
            } else {
                Py_ssize_t eq = 0;
                for (Py_ssize_t m = 0; m < n; m++) {
                    above += s[m] > x;
                    eq += s[m] == x;
                }
                end = above + eq;
                if (eq > 1) {
                    work += n;
                    if (work > cap) { declined = 1; goto done; }
                    for (Py_ssize_t m = 0; m < n; m++) {
                        if (s[m] != x) continue;
                        int g = docid_greater(keys[m], docid);
                        if (g < 0) goto done;
                        offset += g;
                    }
                }
            }
            if (nh == hit_room) {
                Py_ssize_t want = hit_room ? 2 * hit_room : 64;
                hit_t *h2 = PyMem_Realloc(hits, want * sizeof(hit_t));
                if (h2 == NULL) { PyErr_NoMemory(); goto done; }
                hits = h2;
                hit_room = want;
            }
            hits[nh].rank = above + offset + 1;
            hits[nh].qrow = r;
            hits[nh].first = above + 1;
            hits[nh].last = end;
            nh++;
        }
        /* (3) the hits in rank order: ranks are distinct, 1..n, so each hit is put at its
           rank and the ranks are read in order (left as they were found: -1). Two hits of
           one rank (qrels naming a docid twice in a topic) are left to the Python path */
        if (nh > out_rows - n_hits) { declined = 1; goto done; }  /* (never: the bound) */
        for (Py_ssize_t h = 0; h < nh; h++) {
            if (at_rank[hits[h].rank - 1] >= 0) { declined = 1; goto done; }
            at_rank[hits[h].rank - 1] = (int32_t)h;
        }
        for (Py_ssize_t p = 0, left = nh; left > 0 && p < n; p++) {
            int32_t h = at_rank[p];
            if (h < 0) continue;
            at_rank[p] = -1;
            left--;
            h_out[0][n_hits] = t;
            h_out[1][n_hits] = hits[h].qrow;
            h_out[2][n_hits] = hits[h].rank;
            h_out[3][n_hits] = hits[h].first;
            h_out[4][n_hits] = hits[h].last;
            n_hits++;
        }
        /* (4) a tie across each cutoff k: the k-th and (k+1)-th scores equal */
        for (Py_ssize_t c = 0; c < n_ks; c++) {
            int64_t k = ks[c];
            if (n <= k) continue;
            ctied[c * n_topics + t] = monotone ? s[k - 1] == s[k]
                                               : sorted[k - 1].s == sorted[k].s;
        }
    }
    for (int j = 0; j < 5; j++)
        if (PyByteArray_Resize(out[j], n_hits * 8)) goto done;
    result = Py_BuildValue("(NNNNNNN)", num_ret, out[0], out[1], out[2], out[3], out[4],
                           cut_tied);
    num_ret = cut_tied = NULL;
    for (int j = 0; j < 5; j++) out[j] = NULL;
done:
    Py_XDECREF(num_ret);
    Py_XDECREF(cut_tied);
    for (int j = 0; j < 5; j++) Py_XDECREF(out[j]);
    PyMem_Free(keys); PyMem_Free(s); PyMem_Free(sv); PyMem_Free(sorted); PyMem_Free(hits);
    PyMem_Free(hs); PyMem_Free(table); PyMem_Free(at_rank);
    PyBuffer_Release(&rqv); PyBuffer_Release(&qbv); PyBuffer_Release(&ksv);
    if (qdv.obj != NULL) PyBuffer_Release(&qdv);
    if (declined && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
bad_args:
    PyErr_SetString(PyExc_ValueError, "rank_mapping: bounds, run_to_qrels or cut_ks out of range");
args_failed:
    if (got > 0) PyBuffer_Release(&rqv);
    if (got > 1) PyBuffer_Release(&qbv);
    if (got > 2) PyBuffer_Release(&ksv);
    if (qdv.obj != NULL) PyBuffer_Release(&qdv);
    return NULL;
}

/* Code point order of two exact str: strcmp order of their UTF-8 (ids hold no surrogate). */
static int by_code_point(const void *a, const void *b) {
    PyObject *x = *(PyObject *const *)a, *y = *(PyObject *const *)b;
    Py_ssize_t nx = PyUnicode_GET_LENGTH(x), ny = PyUnicode_GET_LENGTH(y);
    Py_ssize_t n = nx < ny ? nx : ny;
    int kx = PyUnicode_KIND(x), ky = PyUnicode_KIND(y);
    if (kx == PyUnicode_1BYTE_KIND && ky == PyUnicode_1BYTE_KIND) {
        int c = memcmp(PyUnicode_DATA(x), PyUnicode_DATA(y), n);
        if (c) return c;
    } else {
        const void *dx = PyUnicode_DATA(x), *dy = PyUnicode_DATA(y);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_UCS4 cx = PyUnicode_READ(kx, dx, i), cy = PyUnicode_READ(ky, dy, i);
            if (cx != cy) return cx < cy ? -1 : 1;
        }
    }
    return (nx > ny) - (nx < ny);
}

/* mapping_topics(mapping) -> (topics, rows, dicts) | None
 *   The topic ids of a {topic: {docid: value}} mapping (a dict, defaultdict or OrderedDict)
 *   in strcmp order, each an exact str passing the id grammar whose value is one of the three
 *   types, the number of (topic, docid) entries and the topics' dicts in the topics' order
 *   (what rank_mapping and scan read, without looking each topic up); None for anything else
 *   (the Python
 *   path, cranfield.inputs.mappings._checked_topics, then names the problem or reads the
 *   mapping as it always did). Runs no Python code once the types are known. */
PyObject *mapping_topics(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *mapping;
    if (!PyArg_ParseTuple(args, "O", &mapping)) return NULL;
    int outer = mapping_kind(mapping);
    if (outer <= 0) {
        if (outer < 0) return NULL;
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyDict_GET_SIZE(mapping), pos = 0, i = 0, rows = 0;
    /* (a topic id first: by_code_point reads it as the pair's first pointer) */
    typedef struct { PyObject *topic, *docs; } pair_t;
    pair_t *keys = PyMem_Malloc((n ? n : 1) * sizeof(pair_t));
    if (keys == NULL) return PyErr_NoMemory();
    PyObject *key, *value;
    while (PyDict_Next(mapping, &pos, &key, &value)) {
        if (i >= n || !PyUnicode_CheckExact(key) || !id_ok(key)) goto decline;
        int kind = mapping_kind(value);
        if (kind <= 0) {
            if (kind < 0) { PyMem_Free(keys); return NULL; }
            goto decline;
        }
        rows += PyDict_GET_SIZE(value);
        keys[i].topic = key;
        keys[i++].docs = value;
    }
    if (i != n) goto decline;
    qsort(keys, n, sizeof(pair_t), by_code_point);
    PyObject *list = PyList_New(n), *dicts = PyList_New(n);
    if (list == NULL || dicts == NULL) {
        Py_XDECREF(list);
        Py_XDECREF(dicts);
        PyMem_Free(keys);
        return NULL;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_INCREF(keys[j].topic);
        PyList_SET_ITEM(list, j, keys[j].topic);
        Py_INCREF(keys[j].docs);
        PyList_SET_ITEM(dicts, j, keys[j].docs);
    }
    PyMem_Free(keys);
    return Py_BuildValue("(NnN)", list, rows, dicts);
decline:
    PyMem_Free(keys);
    Py_RETURN_NONE;
}

/* topic_dicts(topics, rows, keys, columns) -> {topics[r]: {keys[k]: columns[k][r]}}
 *   for r in rows (ints indexing topics), in that order: Evaluation.per_topic's dicts built
 *   without a Python frame per topic. columns: one list per key, as long as topics. */
PyObject *topic_dicts(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *topics, *rows, *keys, *columns;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &topics, &PyList_Type, &rows,
                          &PyList_Type, &keys, &PyList_Type, &columns))
        return NULL;
    Py_ssize_t n_topics = PyList_GET_SIZE(topics), n_keys = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(columns) != n_keys) goto bad;
    for (Py_ssize_t k = 0; k < n_keys; k++) {
        PyObject *col = PyList_GET_ITEM(columns, k);
        if (!PyList_Check(col) || PyList_GET_SIZE(col) != n_topics) goto bad;
    }
#if PY_VERSION_HEX < 0x030D0000  /* (sized once: no rehash of 43k topics as it grows) */
    PyObject *out = _PyDict_NewPresized(PyList_GET_SIZE(rows));
#else
    PyObject *out = PyDict_New();
#endif
    if (out == NULL) return NULL;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(rows); j++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyList_GET_ITEM(rows, j));
        if (r == -1 && PyErr_Occurred()) { Py_DECREF(out); return NULL; }
        /* (the lists are re-read each time: a key's __eq__ may run Python code) */
        if (r < 0 || r >= PyList_GET_SIZE(topics)) { Py_DECREF(out); goto bad; }
        PyObject *inner = PyDict_New();
        if (inner == NULL) { Py_DECREF(out); return NULL; }
        for (Py_ssize_t k = 0; k < n_keys && k < PyList_GET_SIZE(keys); k++) {
            PyObject *col = PyList_GET_ITEM(columns, k);
            if (!PyList_Check(col) || r >= PyList_GET_SIZE(col) ||
                PyDict_SetItem(inner, PyList_GET_ITEM(keys, k), PyList_GET_ITEM(col, r))) {
                Py_DECREF(inner);
                Py_DECREF(out);
                if (!PyErr_Occurred()) goto bad;
                return NULL;
            }
        }
        int failed = PyDict_SetItem(out, PyList_GET_ITEM(topics, r), inner);
        Py_DECREF(inner);
        if (failed) { Py_DECREF(out); return NULL; }
    }
    return out;
bad:
    PyErr_SetString(PyExc_ValueError, "topic_dicts: a column per key, a value per topic, rows "
                    "indexing the topics");
    return NULL;
}
