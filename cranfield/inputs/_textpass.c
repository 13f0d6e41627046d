/* One compiled pass over a run's TREC text against qrels indexed once (cranfield.evaluate_many,
 * issue #30): it reads the lines by the input grammar, finds each topic's judged documents
 * and ranks them as trec_eval does (score descending, then docno descending), emitting what
 * cranfield.inputs.ranking.assemble_ranked needs and no column per line. Part of
 * cranfield.inputs._mapscan (with _mapscan.c, _jsonscan.c and _rankpass.c);
 * cranfield/inputs/text_pass.py is its Python side.
 *
 * text_qrels(topics, bounds, docids) -> capsule | None
 *   The qrels as the pass reads them, built once per call of evaluate_many: topics (list of
 *   str, qrels order), bounds (int64[T + 1]: topic q's rows are [bounds[q], bounds[q+1])),
 *   docids (list of str, one per row). None when an id is not an exact str or cannot be
 *   encoded as UTF-8, or a topic's rows name a docid twice (the pass is then not used).
 *
 * rank_text(table, data, float32, cut_ks, tie_work_per_row, tie_work_min)
 *     -> (topics, num_ret, hit_rt, hit_qrow, hit_rank, hit_first, hit_last, cut_tied,
 *         runid, rows) | None
 *   data: the bytes of a run file. Out as rank_mapping's (cranfield/inputs/_rankpass.c):
 *   topics: the run's topic ids (str, strcmp order); num_ret int64 per topic; for each hit
 *   (a judged docid the run holds), by topic then rank, its run topic, qrels row, 1-based
 *   rank and tie group's first and last rank (int64 bytearrays); cut_tied uint8[K][topics];
 *   runid: the last content line's sixth field; rows: the content lines.
 *
 *   The lines are read as the line reader (cranfield.inputs.trec_lines.slow_run) reads them,
 *   restricted to what it reads the same way: printable ASCII text (no byte >= 0x80, no
 *   control character but tab and a CR right before LF), fields split on runs of spaces and
 *   tabs, blank lines and lines whose first field starts with '#' skipped, at least six
 *   fields (later ones ignored), a score spelled -?digits[.digits][e[-+]digits] (as
 *   _mapscan.c's plain_score, which float() reads alike) and finite. None (the caller then
 *   reads the run with read_run, which names any problem in the line reader's words) for
 *   anything else: another byte, fewer fields, another spelling of a number, no content line,
 *   a docid twice in a topic, docid comparisons in tie groups past tie_work_per_row * (rows +
 *   qrels rows) + tie_work_min, a hash probe past MAX_PROBE. The work between reading the
 *   arguments and building the results runs without the GIL (the caller's threads overlap
 *   it with evaluations); data must be a bytes object (TypeError for any other buffer) and
 *   the table is read-only, so nothing the pass reads can change under it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_seeded_mix.h"

#define MAX_PROBE 128
#define CAPSULE_NAME "cranfield.inputs._mapscan.text_qrels"

/* _mapscan.c: a score as its compiled run reader reads it (needs the GIL on its slow path) */
int plain_score(const char *p, Py_ssize_t n, double *out);

static uint64_t tp_seed;
static int tp_seeded;

/* An id's table hash: eight bytes at a time (the last word zero-padded, the length mixed
   in), then the seeded finalizer; equal hashes are only candidates (the bytes are compared). */
static inline uint64_t id_hash_in(const char *p, Py_ssize_t n, uintptr_t limit) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        h = (h ^ word) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        uint64_t word = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if ((uintptr_t)p + 8 <= limit) {  /* (one load, the bytes past the id masked off) */
            memcpy(&word, p, 8);
            word &= ~0ULL >> (8 * (8 - n));
        } else
#endif
            memcpy(&word, p, (size_t)n);
        h = (h ^ word) * 0xff51afd7ed558ccdULL;
    }
    return seeded_mix(h, tp_seed);
}

/* (ids in a buffer of their own, or whose end is not known: no load past them) */
static inline uint64_t id_hash(const char *p, Py_ssize_t n) { return id_hash_in(p, n, 0); }

/* byte order, then length: strcmp's order of ids that hold no NUL */
static inline int bytes_cmp(const char *a, Py_ssize_t na, const char *b, Py_ssize_t nb) {
    int c = memcmp(a, b, na < nb ? na : nb);
    if (c) return c;
    return (na > nb) - (na < nb);
}

typedef struct {
    Py_ssize_t n_topics, n_rows;
    char *chars;             /* every topic id, then every docid, UTF-8 */
    Py_ssize_t *t_off;       /* [n_topics + 1] into chars */
    Py_ssize_t *d_off;       /* [n_rows + 1] into chars */
    uint64_t *d_hash;        /* [n_rows] */
    int64_t *bounds;         /* [n_topics + 1] */
    int32_t *t_slots;        /* topic table: topic index or -1 */
    uint64_t t_mask;
} qtable_t;

static void qtable_free(qtable_t *q) {
    if (q == NULL) return;
    free(q->chars); free(q->t_off); free(q->d_off); free(q->d_hash); free(q->bounds);
    free(q->t_slots); free(q);
}

static void capsule_free(PyObject *capsule) {
    qtable_free(PyCapsule_GetPointer(capsule, CAPSULE_NAME));
}

/* the qrels topic of a topic id, -1: none, -2: probes past MAX_PROBE */
static Py_ssize_t qtopic_of(const qtable_t *q, const char *p, Py_ssize_t n) {
    uint64_t at = id_hash(p, n) & q->t_mask;
    for (int probes = 0; probes <= MAX_PROBE; probes++) {
        int32_t t = q->t_slots[at];
        if (t < 0) return -1;
        if (q->t_off[t + 1] - q->t_off[t] == n && memcmp(q->chars + q->t_off[t], p, n) == 0)
            return t;
        at = (at + 1) & q->t_mask;
    }
    return -2;
}

static int utf8_of(PyObject *s, const char **p, Py_ssize_t *n) {
    if (!PyUnicode_CheckExact(s)) return 0;
    *p = PyUnicode_AsUTF8AndSize(s, n);
    if (*p == NULL) { PyErr_Clear(); return 0; }
    return 1;
}

/* 1 when a topic's rows name a docid twice, 0 when not, -1 (MemoryError set) */
static int judged_twice(const qtable_t *q) {
    int64_t widest = 0;
    for (Py_ssize_t t = 0; t < q->n_topics; t++)
        if (q->bounds[t + 1] - q->bounds[t] > widest) widest = q->bounds[t + 1] - q->bounds[t];
    if (widest < 2) return 0;
    uint64_t size = 16;
    while (size < 2 * (uint64_t)widest) size *= 2;
    int64_t *seen = malloc(size * sizeof(int64_t));  /* a topic's rows by hash, -1: none */
    if (seen == NULL) { PyErr_NoMemory(); return -1; }
    int twice = 0;
    for (Py_ssize_t t = 0; t < q->n_topics && !twice; t++) {
        int64_t b0 = q->bounds[t], b1 = q->bounds[t + 1];
        if (b1 - b0 < 2) continue;
        uint64_t mask = 16;
        while (mask < 2 * (uint64_t)(b1 - b0)) mask *= 2;
        memset(seen, 0xff, mask * sizeof(int64_t));
        mask -= 1;
        for (int64_t r = b0; r < b1 && !twice; r++) {
            uint64_t at = q->d_hash[r] & mask;  /* (at most half full: the probe ends) */
            Py_ssize_t n = q->d_off[r + 1] - q->d_off[r];
            for (; seen[at] >= 0; at = (at + 1) & mask) {
                int64_t o = seen[at];
                if (q->d_hash[o] == q->d_hash[r] && q->d_off[o + 1] - q->d_off[o] == n &&
                    memcmp(q->chars + q->d_off[o], q->chars + q->d_off[r], n) == 0) {
                    twice = 1;
                    break;
                }
            }
            seen[at] = r;
        }
    }
    free(seen);
    return twice;
}

PyObject *text_qrels(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *topics, *bounds_obj, *docids;
    if (!PyArg_ParseTuple(args, "O!OO!", &PyList_Type, &topics, &bounds_obj, &PyList_Type,
                          &docids))
        return NULL;
    if (!tp_seeded) {
        PyObject *os = PyImport_ImportModule("os");
        PyObject *bytes = os ? PyObject_CallMethod(os, "urandom", "i", 8) : NULL;
        Py_XDECREF(os);
        if (bytes == NULL) return NULL;
        if (PyBytes_Check(bytes) && PyBytes_GET_SIZE(bytes) == 8)
            memcpy(&tp_seed, PyBytes_AS_STRING(bytes), 8);
        Py_DECREF(bytes);
        tp_seeded = 1;
    }
    Py_ssize_t nt = PyList_GET_SIZE(topics), nr = PyList_GET_SIZE(docids);
    Py_buffer bv;
    if (PyObject_GetBuffer(bounds_obj, &bv, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) return NULL;
    const char *f = bv.format ? bv.format : "B";
    if (bv.itemsize != 8 || (f[0] != 'l' && f[0] != 'q') || f[1] != 0 ||
        bv.len != (nt + 1) * 8) {
        PyBuffer_Release(&bv);
        PyErr_SetString(PyExc_ValueError, "text_qrels: bounds must be int64[len(topics) + 1]");
        return NULL;
    }
    const int64_t *bounds = bv.buf;
    if (bounds[0] != 0 || bounds[nt] != nr) goto bad_bounds;
    for (Py_ssize_t t = 0; t < nt; t++)
        if (bounds[t] > bounds[t + 1]) goto bad_bounds;

    qtable_t *q = calloc(1, sizeof(qtable_t));
    if (q == NULL) { PyBuffer_Release(&bv); return PyErr_NoMemory(); }
    q->n_topics = nt;
    q->n_rows = nr;
    Py_ssize_t total = 0, n = 0;
    const char *p = NULL;
    for (Py_ssize_t i = 0; i < nt + nr; i++) {
        PyObject *s = i < nt ? PyList_GET_ITEM(topics, i) : PyList_GET_ITEM(docids, i - nt);
        if (!utf8_of(s, &p, &n)) goto declined;
        total += n;
    }
    uint64_t slots = 16;
    while (slots < 2 * (uint64_t)nt + 2) slots *= 2;
    q->chars = malloc(total + 8);  /* (8 bytes past the ids: id_hash_in's one load) */
    if (q->chars != NULL) memset(q->chars + total, 0, 8);  /* (masked off, yet defined) */
    q->t_off = malloc((nt + 1) * sizeof(Py_ssize_t));
    q->d_off = malloc((nr + 1) * sizeof(Py_ssize_t));
    q->d_hash = malloc((nr ? nr : 1) * sizeof(uint64_t));
    q->bounds = malloc((nt + 1) * sizeof(int64_t));
    q->t_slots = malloc(slots * sizeof(int32_t));
    if (!q->chars || !q->t_off || !q->d_off || !q->d_hash || !q->bounds || !q->t_slots) {
        qtable_free(q);
        PyBuffer_Release(&bv);
        return PyErr_NoMemory();
    }
    memcpy(q->bounds, bounds, (nt + 1) * sizeof(int64_t));
    PyBuffer_Release(&bv);
    q->t_mask = slots - 1;
    memset(q->t_slots, 0xff, slots * sizeof(int32_t));
    Py_ssize_t at = 0;
    q->t_off[0] = 0;
    for (Py_ssize_t t = 0; t < nt; t++) {
        utf8_of(PyList_GET_ITEM(topics, t), &p, &n);
        memcpy(q->chars + at, p, n);
        at += n;
        q->t_off[t + 1] = at;
        if (t > INT32_MAX - 1) { qtable_free(q); Py_RETURN_NONE; }
        Py_ssize_t found = qtopic_of(q, p, n);
        if (found != -1) { qtable_free(q); Py_RETURN_NONE; }  /* a repeat, or probes: decline */
        uint64_t s = id_hash(p, n) & q->t_mask;
        while (q->t_slots[s] >= 0) s = (s + 1) & q->t_mask;
        q->t_slots[s] = (int32_t)t;
    }
    q->d_off[0] = at;
    for (Py_ssize_t r = 0; r < nr; r++) {
        utf8_of(PyList_GET_ITEM(docids, r), &p, &n);
        memcpy(q->chars + at, p, n);
        q->d_hash[r] = id_hash_in(q->chars + at, n, (uintptr_t)(q->chars + total + 8));
        at += n;
        q->d_off[r + 1] = at;
    }
    if (judged_twice(q)) {  /* (a docid judged twice in a topic: left to the Python path,
                               as rank_mapping leaves it) */
        qtable_free(q);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    PyObject *capsule = PyCapsule_New(q, CAPSULE_NAME, capsule_free);
    if (capsule == NULL) qtable_free(q);
    return capsule;
declined:
    free(q);
    PyBuffer_Release(&bv);
    Py_RETURN_NONE;
bad_bounds:
    PyBuffer_Release(&bv);
    PyErr_SetString(PyExc_ValueError, "text_qrels: bounds out of range");
    return NULL;
}

/* ---- the run ------------------------------------------------------------------------- */

/* byte classes: 0 an id byte, 1 a field separator (space, tab), 2 refused (but a CR right
   before an LF), 3 LF */
static unsigned char byte_class[256];
static int classes_ready;

static void init_classes(void) {
    for (int c = 0; c < 256; c++)
        byte_class[c] = (c <= 0x20 || c >= 0x7F) ? 2 : 0;
    byte_class[' '] = byte_class['\t'] = 1;
    byte_class['\n'] = 3;
    classes_ready = 1;
}

/* The plain spelling plain_score accepts, read without the GIL when Clinger's fast path
   applies (1, *out set); 2: the spelling is plain but the value needs plain_score (with
   the GIL); 0: not plain (decline). */
static int quick_score(const char *p, Py_ssize_t n, double *out) {
    static const double pow10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
                                     1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
                                     1e18, 1e19, 1e20, 1e21, 1e22};
    Py_ssize_t i = 0, digits = 0, frac = 0, exp_digits = 0;
    int negative = 0, sig = 0, exp_sign = 1, slow = 0;
    uint64_t m = 0;
    long exp = 0;
    if (n <= 0 || n >= 64) return 0;
    if (p[i] == '-') { negative = 1; i++; }
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        digits++;
        if (m == 0 && p[i] == '0') continue;
        if (++sig > 17) slow = 1; else m = m * 10 + (uint64_t)(p[i] - '0');
    }
    if (i < n && p[i] == '.') {
        i++;
        Py_ssize_t f0 = i;
        for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
            frac++;
            if (m == 0 && p[i] == '0') continue;
            if (++sig > 17) slow = 1; else m = m * 10 + (uint64_t)(p[i] - '0');
        }
        if (i == f0) return 0;
        digits += frac;
    }
    if (digits == 0) return 0;
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '-' || p[i] == '+')) { if (p[i] == '-') exp_sign = -1; i++; }
        for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
            exp_digits++;
            if (exp <= 10000) exp = exp * 10 + (p[i] - '0');
        }
        if (exp_digits == 0) return 0;
    }
    if (i != n) return 0;
    if (slow || exp > 10000 || m > (1ULL << 53)) return 2;
    long e10 = exp_sign * exp - frac;
    double v = (double)m;
    if (m != 0) {
        if (e10 < -22 || e10 > 22) return 2;
        v = e10 < 0 ? v / pow10[-e10] : v * pow10[e10];
    }
    *out = negative ? -v : v;
    return 1;
}

typedef struct { const char *p; int32_t len; } span_t;
typedef struct { double s; int32_t i; } scored_t;
typedef struct { int64_t rank, qrow, first, last; } hit_t;
typedef struct { int64_t *data; Py_ssize_t len, cap; } vec_t;
typedef struct { const char *p; Py_ssize_t len; int32_t code; } rtopic_t;

static int vec_push(vec_t *v, int64_t x) {
    if (v->len == v->cap) {
        Py_ssize_t cap = v->cap ? v->cap * 2 : 1024;
        int64_t *data = realloc(v->data, cap * sizeof(int64_t));
        if (data == NULL) return -1;
        v->data = data;
        v->cap = cap;
    }
    v->data[v->len++] = x;
    return 0;
}

static int by_score_desc(const void *a, const void *b) {
    double x = ((const scored_t *)a)->s, y = ((const scored_t *)b)->s;
    return (x < y) - (x > y);
}

static int by_rank(const void *a, const void *b) {
    int64_t x = ((const hit_t *)a)->rank, y = ((const hit_t *)b)->rank;
    return (x > y) - (x < y);
}

static int by_topic_bytes(const void *a, const void *b) {
    const rtopic_t *x = a, *y = b;
    return bytes_cmp(x->p, x->len, y->p, y->len);
}

/* what the pass works on; freed in one place */
typedef struct {
    const char *data;
    Py_ssize_t len;
    int float32;
    const int64_t *ks;
    Py_ssize_t n_ks;
    Py_ssize_t work_per_row, work_min;
    const qtable_t *q;
    /* lines */
    Py_ssize_t rows, cap;
    int32_t *code;
    span_t *doc;
    double *score;
    span_t runid;
    char *tail;              /* a last line without an LF, copied with one */
    Py_ssize_t tail_len;
    Py_ssize_t n_slow;       /* rows whose score plain_score reads, with the GIL */
    int32_t *slow;
    span_t *slow_span;
    /* topics */
    rtopic_t *topic;
    Py_ssize_t n_topics, topic_cap;
    int32_t *t_slots;
    uint64_t t_mask;
    int32_t *rank_of_code;
    /* results */
    int64_t *num_ret;
    uint8_t *cut_tied;
    vec_t h_rt, h_qrow, h_rank, h_first, h_last;
} pass_t;

static void pass_free(pass_t *w) {
    free(w->tail); free(w->code); free(w->doc); free(w->score); free(w->slow); free(w->slow_span);
    free(w->topic); free(w->t_slots); free(w->rank_of_code); free(w->num_ret);
    free(w->cut_tied); free(w->h_rt.data); free(w->h_qrow.data); free(w->h_rank.data);
    free(w->h_first.data); free(w->h_last.data);
}

enum { PASS_OK = 0, PASS_DECLINED = 1, PASS_NOMEM = 2 };

/* the code of a run topic (first seen order), new ones added; -1 declined, -2 no memory */
static int32_t topic_code(pass_t *w, const char *p, Py_ssize_t n) {
    uint64_t h = id_hash(p, n), at = h & w->t_mask;
    for (int probes = 0; ; probes++) {
        int32_t c = w->t_slots[at];
        if (c < 0) break;
        if (w->topic[c].len == n && memcmp(w->topic[c].p, p, n) == 0) return c;
        if (probes > MAX_PROBE) return -1;
        at = (at + 1) & w->t_mask;
    }
    if (w->n_topics >= INT32_MAX - 1) return -1;
    if (2 * (uint64_t)(w->n_topics + 1) > w->t_mask + 1) {  /* grow and rehash */
        uint64_t size = (w->t_mask + 1) * 4;
        int32_t *slots = malloc(size * sizeof(int32_t));
        if (slots == NULL) return -2;
        memset(slots, 0xff, size * sizeof(int32_t));
        for (Py_ssize_t c = 0; c < w->n_topics; c++) {
            uint64_t s = id_hash(w->topic[c].p, w->topic[c].len) & (size - 1);
            while (slots[s] >= 0) s = (s + 1) & (size - 1);
            slots[s] = (int32_t)c;
        }
        free(w->t_slots);
        w->t_slots = slots;
        w->t_mask = size - 1;
        at = h & w->t_mask;
        while (w->t_slots[at] >= 0) at = (at + 1) & w->t_mask;
    }
    if (w->n_topics == w->topic_cap) {
        Py_ssize_t cap = w->topic_cap ? 2 * w->topic_cap : 64;
        rtopic_t *t = realloc(w->topic, cap * sizeof(rtopic_t));
        if (t == NULL) return -2;
        w->topic = t;
        w->topic_cap = cap;
    }
    int32_t c = (int32_t)w->n_topics++;
    w->topic[c].p = p;
    w->topic[c].len = n;
    w->topic[c].code = c;
    w->t_slots[at] = c;
    return c;
}

/* The lines of [p, end), which ends with an LF (a byte of class 3 stops every scan). */
static int read_region(pass_t *w, const char *p, const char *end, int32_t *last_code,
                       Py_ssize_t *slow_cap) {
    while (p < end) {
        const char *field[6];
        Py_ssize_t flen[6];
        int k = 0;
        const char *q = p;
        for (;;) {
            unsigned char cls = byte_class[(unsigned char)*q];
            if (cls == 0) {
                const char *start = q;
                do q++; while (byte_class[(unsigned char)*q] == 0);
                if (k < 6) { field[k] = start; flen[k] = q - start; }
                k++;
            } else if (cls == 1) {
                q++;
            } else if (cls == 3 || (*q == '\r' && q[1] == '\n')) {  /* LF, CRLF */
                break;
            } else {
                return PASS_DECLINED;
            }
        }
        p = q + (*q == '\r' ? 2 : 1);
        if (k == 0 || field[0][0] == '#') continue;  /* a blank line, a comment */
        if (k < 6 || flen[2] > INT32_MAX || flen[5] > INT32_MAX) return PASS_DECLINED;
        if (w->rows == w->cap) {
            Py_ssize_t cap = 2 * w->cap;
            int32_t *c2 = realloc(w->code, cap * sizeof(int32_t));
            if (c2 == NULL) return PASS_NOMEM;
            w->code = c2;
            span_t *d2 = realloc(w->doc, cap * sizeof(span_t));
            if (d2 == NULL) return PASS_NOMEM;
            w->doc = d2;
            double *s2 = realloc(w->score, cap * sizeof(double));
            if (s2 == NULL) return PASS_NOMEM;
            w->score = s2;
            w->cap = cap;
        }
        Py_ssize_t r = w->rows;
        int got = quick_score(field[4], flen[4], &w->score[r]);
        if (got == 0) return PASS_DECLINED;
        if (got == 2) {
            if (w->n_slow == *slow_cap) {
                *slow_cap = *slow_cap ? 2 * *slow_cap : 64;
                int32_t *s2 = realloc(w->slow, *slow_cap * sizeof(int32_t));
                if (s2 == NULL) return PASS_NOMEM;
                w->slow = s2;
                span_t *p2 = realloc(w->slow_span, *slow_cap * sizeof(span_t));
                if (p2 == NULL) return PASS_NOMEM;
                w->slow_span = p2;
            }
            if (r > INT32_MAX) return PASS_DECLINED;
            w->slow[w->n_slow] = (int32_t)r;
            w->slow_span[w->n_slow].p = field[4];
            w->slow_span[w->n_slow].len = (int32_t)flen[4];
            w->n_slow++;
        }
        int32_t c = *last_code;  /* (a run lists a topic's lines together: the last one's) */
        if (c < 0 || w->topic[c].len != flen[0] || memcmp(w->topic[c].p, field[0], flen[0])) {
            c = topic_code(w, field[0], flen[0]);
            if (c == -1) return PASS_DECLINED;
            if (c == -2) return PASS_NOMEM;
            *last_code = c;
        }
        w->code[r] = c;
        w->doc[r].p = field[2];
        w->doc[r].len = (int32_t)flen[2];
        w->runid.p = field[5];
        w->runid.len = (int32_t)flen[5];
        w->rows++;
        if (w->rows > INT32_MAX - 1) return PASS_DECLINED;
    }
    return PASS_OK;
}

/* (1) the lines, without the GIL: the text up to its last LF in place; a last line without
   one from a copy that ends with an LF (and 8 bytes more: id_hash_in's one load) */
static int read_lines(pass_t *w) {
    const char *data = w->data, *end = data + w->len;
    w->t_mask = 63;
    w->t_slots = malloc(64 * sizeof(int32_t));
    w->cap = w->len / 24 + 16;
    w->code = malloc(w->cap * sizeof(int32_t));
    w->doc = malloc(w->cap * sizeof(span_t));
    w->score = malloc(w->cap * sizeof(double));
    if (!w->t_slots || !w->code || !w->doc || !w->score) return PASS_NOMEM;
    memset(w->t_slots, 0xff, 64 * sizeof(int32_t));
    Py_ssize_t slow_cap = 0;
    int32_t last_code = -1;
    const char *cut = end;
    while (cut > data && cut[-1] != '\n') cut--;
    int status = read_region(w, data, cut, &last_code, &slow_cap);
    if (status != PASS_OK) return status;
    if (cut < end) {
        Py_ssize_t n = end - cut;
        if (end[-1] == '\r') return PASS_DECLINED;  /* a CR not before an LF */
        w->tail_len = n + 1 + 8;
        w->tail = malloc(w->tail_len);
        if (w->tail == NULL) return PASS_NOMEM;
        memcpy(w->tail, cut, n);
        memset(w->tail + n, '\n', 1 + 8);
        status = read_region(w, w->tail, w->tail + n + 1, &last_code, &slow_cap);
        if (status != PASS_OK) return status;
    }
    return w->rows ? PASS_OK : PASS_DECLINED;
}

/* the end of the buffer holding an id of the run: the text's, or the last line's copy */
static inline uintptr_t span_end(const pass_t *w, const char *p) {
    uintptr_t at = (uintptr_t)p, start = (uintptr_t)w->data, end = start + (uintptr_t)w->len;
    if (at >= start && at < end) return end;
    return w->tail ? (uintptr_t)w->tail + (uintptr_t)w->tail_len : 0;
}

/* (2) each topic's judged documents ranked, without the GIL */
static int rank_topics(pass_t *w) {
    const qtable_t *q = w->q;
    Py_ssize_t T = w->n_topics, rows = w->rows;
    int status = PASS_NOMEM;
    Py_ssize_t *start = NULL;
    int32_t *member = NULL, *set = NULL, *gfirst = NULL, *gend = NULL, *inv = NULL;
    uint64_t *hash = NULL;
    double *s = NULL;
    scored_t *sorted = NULL;
    hit_t *hits = NULL;
    Py_ssize_t hit_room = 0, work = 0;
    Py_ssize_t cap = w->work_per_row * (rows + q->n_rows) + w->work_min;

    /* topics in strcmp order */
    qsort(w->topic, T, sizeof(rtopic_t), by_topic_bytes);
    w->rank_of_code = malloc((T ? T : 1) * sizeof(int32_t));
    start = calloc(T + 1, sizeof(Py_ssize_t));
    member = malloc((rows ? rows : 1) * sizeof(int32_t));
    w->num_ret = malloc((T ? T : 1) * sizeof(int64_t));
    w->cut_tied = calloc(w->n_ks * T > 0 ? w->n_ks * T : 1, 1);
    if (!w->rank_of_code || !start || !member || !w->num_ret || !w->cut_tied) goto done;
    for (Py_ssize_t t = 0; t < T; t++) w->rank_of_code[w->topic[t].code] = (int32_t)t;
    /* each topic's rows, in file order (a counting sort) */
    for (Py_ssize_t r = 0; r < rows; r++) start[w->rank_of_code[w->code[r]] + 1]++;
    for (Py_ssize_t t = 0; t < T; t++) start[t + 1] += start[t];
    {
        Py_ssize_t *fill = malloc((T ? T : 1) * sizeof(Py_ssize_t));
        if (fill == NULL) goto done;
        memcpy(fill, start, T * sizeof(Py_ssize_t));
        for (Py_ssize_t r = 0; r < rows; r++) member[fill[w->rank_of_code[w->code[r]]]++] = (int32_t)r;
        free(fill);
    }
    Py_ssize_t most = 0;
    for (Py_ssize_t t = 0; t < T; t++)
        if (start[t + 1] - start[t] > most) most = start[t + 1] - start[t];
    uint64_t set_size = 16;
    while (set_size < 2 * (uint64_t)most) set_size *= 2;
    set = malloc(set_size * sizeof(int32_t));
    gfirst = malloc((most ? most : 1) * sizeof(int32_t));
    gend = malloc((most ? most : 1) * sizeof(int32_t));
    inv = malloc((most ? most : 1) * sizeof(int32_t));
    hash = malloc((most ? most : 1) * sizeof(uint64_t));
    s = malloc((most ? most : 1) * sizeof(double));
    sorted = malloc((most ? most : 1) * sizeof(scored_t));
    if (!set || !hash || !s || !sorted || !gfirst || !gend || !inv) goto done;

    for (Py_ssize_t t = 0; t < T; t++) {
        const int32_t *mine = member + start[t];
        Py_ssize_t n = start[t + 1] - start[t];
        w->num_ret[t] = n;
        /* the topic's docids in a table: a docid twice declines (the line reader names it) */
        uint64_t size = 16;
        while (size < 2 * (uint64_t)n) size *= 2;
        uint64_t mask = size - 1;
        memset(set, 0xff, size * sizeof(int32_t));
        int monotone = 1;
        for (Py_ssize_t i = 0; i < n; i++) {
            const span_t *d = &w->doc[mine[i]];
            uint64_t h = id_hash_in(d->p, d->len, span_end(w, d->p)), at = h & mask;
            hash[i] = h;
            for (int probes = 0; set[at] >= 0; probes++) {
                int32_t j = set[at];
                if (hash[j] == h && w->doc[mine[j]].len == d->len &&
                    memcmp(w->doc[mine[j]].p, d->p, d->len) == 0) {
                    status = PASS_DECLINED;
                    goto done;
                }
                if (probes > MAX_PROBE) { status = PASS_DECLINED; goto done; }
                at = (at + 1) & mask;
            }
            set[at] = (int32_t)i;
            double x = w->score[mine[i]];
            if (w->float32) x = (double)(float)x;
            s[i] = x;
            if (i && x > s[i - 1]) monotone = 0;
        }
        if (!monotone) {
            for (Py_ssize_t i = 0; i < n; i++) { sorted[i].s = s[i]; sorted[i].i = (int32_t)i; }
            qsort(sorted, n, sizeof(scored_t), by_score_desc);
        }
        /* a tie across each cutoff k: the k-th and (k+1)-th scores equal */
        for (Py_ssize_t c = 0; c < w->n_ks; c++) {
            int64_t k = w->ks[c];
            if (n <= k) continue;
            w->cut_tied[c * T + t] = monotone ? s[k - 1] == s[k] : sorted[k - 1].s == sorted[k].s;
        }
        Py_ssize_t qt = qtopic_of(q, w->topic[t].p, w->topic[t].len);
        if (qt == -2) { status = PASS_DECLINED; goto done; }
        if (qt < 0) continue;  /* no judgments: read, not ranked */
        /* each sorted position's tie group [gfirst, gend) (equal scores), in one sweep */
        for (Py_ssize_t m = 0; m < n;) {
            double x = monotone ? s[m] : sorted[m].s;
            Py_ssize_t e = m + 1;
            while (e < n && (monotone ? s[e] : sorted[e].s) == x) e++;
            for (Py_ssize_t g = m; g < e; g++) { gfirst[g] = (int32_t)m; gend[g] = (int32_t)e; }
            m = e;
        }
        if (!monotone)
            for (Py_ssize_t m = 0; m < n; m++) inv[sorted[m].i] = (int32_t)m;
        Py_ssize_t nh = 0;
        for (int64_t row = q->bounds[qt]; row < q->bounds[qt + 1]; row++) {
            const char *dp = q->chars + q->d_off[row];
            Py_ssize_t dn = q->d_off[row + 1] - q->d_off[row];
            uint64_t h = q->d_hash[row], at = h & mask;
            int32_t i = -1;
            for (int probes = 0; set[at] >= 0; probes++) {
                int32_t j = set[at];
                if (hash[j] == h && w->doc[mine[j]].len == dn &&
                    memcmp(w->doc[mine[j]].p, dp, dn) == 0) { i = j; break; }
                if (probes > MAX_PROBE) { status = PASS_DECLINED; goto done; }
                at = (at + 1) & mask;
            }
            if (i < 0) continue;
            Py_ssize_t at_sorted = monotone ? i : inv[i];
            Py_ssize_t above = gfirst[at_sorted], end = gend[at_sorted], offset = 0;
            if (end - above > 1) {
                work += end - above;
                if (work > cap) { status = PASS_DECLINED; goto done; }
                for (Py_ssize_t m = above; m < end; m++) {
                    const span_t *o = &w->doc[mine[monotone ? m : sorted[m].i]];
                    offset += bytes_cmp(o->p, o->len, dp, dn) > 0;
                }
            }
            if (nh == hit_room) {
                Py_ssize_t want = hit_room ? 2 * hit_room : 64;
                hit_t *h2 = realloc(hits, want * sizeof(hit_t));
                if (h2 == NULL) goto done;
                hits = h2;
                hit_room = want;
            }
            hits[nh].rank = above + offset + 1;
            hits[nh].qrow = row;
            hits[nh].first = above + 1;
            hits[nh].last = end;
            nh++;
        }
        if (nh > 32) {
            qsort(hits, nh, sizeof(hit_t), by_rank);
        } else {
            for (Py_ssize_t h = 1; h < nh; h++) {
                hit_t x = hits[h];
                Py_ssize_t j = h;
                for (; j > 0 && hits[j - 1].rank > x.rank; j--) hits[j] = hits[j - 1];
                hits[j] = x;
            }
        }
        for (Py_ssize_t h = 0; h < nh; h++)
            if (vec_push(&w->h_rt, t) || vec_push(&w->h_qrow, hits[h].qrow) ||
                vec_push(&w->h_rank, hits[h].rank) || vec_push(&w->h_first, hits[h].first) ||
                vec_push(&w->h_last, hits[h].last))
                goto done;
    }
    status = PASS_OK;
done:
    free(start); free(member); free(set); free(gfirst); free(gend); free(inv); free(hash); free(s); free(sorted); free(hits);
    return status;
}

static PyObject *vec_bytes(const vec_t *v) {
    return PyByteArray_FromStringAndSize(v->data ? (const char *)v->data : "", v->len * 8);
}

PyObject *rank_text(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *capsule, *ks_obj;
    Py_buffer data, ksv;
    int float32;
    Py_ssize_t per_row, min_work;
    if (!PyArg_ParseTuple(args, "Oy*pOnn", &capsule, &data, &float32, &ks_obj, &per_row,
                          &min_work))
        return NULL;
    if (data.obj == NULL || !PyBytes_Check(data.obj)) {  /* (scanned without the GIL: a
                                                            buffer nobody can change) */
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_TypeError, "rank_text: data must be bytes");
        return NULL;
    }
    qtable_t *q = PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    if (q == NULL) { PyBuffer_Release(&data); return NULL; }
    if (PyObject_GetBuffer(ks_obj, &ksv, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS)) {
        PyBuffer_Release(&data);
        return NULL;
    }
    const char *f = ksv.format ? ksv.format : "B";
    if (ksv.itemsize != 8 || (f[0] != 'l' && f[0] != 'q') || f[1] != 0 || per_row < 0 ||
        min_work < 0) {
        PyBuffer_Release(&ksv);
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "rank_text: cut_ks must be an int64 vector");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < ksv.len / 8; k++)
        if (((const int64_t *)ksv.buf)[k] < 1) {
            PyBuffer_Release(&ksv);
            PyBuffer_Release(&data);
            PyErr_SetString(PyExc_ValueError, "rank_text: a cutoff below 1");
            return NULL;
        }
    if (!classes_ready) init_classes();
    pass_t w;
    memset(&w, 0, sizeof w);
    w.data = data.buf;
    w.len = data.len;
    w.float32 = float32;
    w.ks = ksv.buf;
    w.n_ks = ksv.len / 8;
    w.work_per_row = per_row;
    w.work_min = min_work;
    w.q = q;
    PyObject *result = NULL;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = read_lines(&w);
    Py_END_ALLOW_THREADS
    /* scores past the quick path, with the GIL (rare: over 17 digits, a large exponent) */
    for (Py_ssize_t i = 0; status == PASS_OK && i < w.n_slow; i++)
        if (!plain_score(w.slow_span[i].p, w.slow_span[i].len, &w.score[w.slow[i]])) {
            if (PyErr_Occurred()) PyErr_Clear();
            status = PASS_DECLINED;
        }
    if (status == PASS_OK) {
        Py_BEGIN_ALLOW_THREADS
        status = rank_topics(&w);
        Py_END_ALLOW_THREADS
    }
    if (status == PASS_NOMEM) {
        PyErr_NoMemory();
    } else if (status == PASS_OK) {
        Py_ssize_t T = w.n_topics;
        PyObject *topics = PyList_New(T);
        PyObject *o[8] = {
            PyByteArray_FromStringAndSize((const char *)w.num_ret, T * 8),
            vec_bytes(&w.h_rt), vec_bytes(&w.h_qrow), vec_bytes(&w.h_rank),
            vec_bytes(&w.h_first), vec_bytes(&w.h_last),
            PyByteArray_FromStringAndSize((const char *)w.cut_tied, w.n_ks * T),
            PyUnicode_DecodeASCII(w.runid.p, w.runid.len, NULL)};
        int ok = topics != NULL;
        for (int j = 0; j < 8; j++) ok = ok && o[j] != NULL;
        for (Py_ssize_t t = 0; ok && t < T; t++) {
            PyObject *id = PyUnicode_DecodeASCII(w.topic[t].p, w.topic[t].len, NULL);
            if (id == NULL) ok = 0; else PyList_SET_ITEM(topics, t, id);
        }
        if (ok) {
            result = Py_BuildValue("(NNNNNNNNNn)", topics, o[0], o[1], o[2], o[3], o[4], o[5],
                                   o[6], o[7], w.rows);
        } else {
            Py_XDECREF(topics);
            for (int j = 0; j < 8; j++) Py_XDECREF(o[j]);
        }
    }
    pass_free(&w);
    PyBuffer_Release(&ksv);
    PyBuffer_Release(&data);
    if (status == PASS_DECLINED && !PyErr_Occurred()) Py_RETURN_NONE;
    return result;
}
