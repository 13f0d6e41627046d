"""trec_eval's measures, in ``measures.c`` order (the order trec_eval prints them in).

Notation used in the docstrings: for one topic, R = num_rel (qrels entries with grade >=
relevance level ``l``), N = num_ret, rel(i) = "the document at rank i is relevant",
grade(i) its qrels grade. Unless a docstring says otherwise a 0 denominator gives 0, as in
trec_eval. Reference for all: NIST trec_eval 9.0.8 / 10.0 (``m_<name>.c``) and
``docs/trec_eval_semantics.md``.
"""

from __future__ import annotations

import numpy as np

from ..ranking import UNJUDGED, segmented_search
from .context import Context, f_beta, safe_div
from .registry import PROFILES, WEIGHT_LIMIT, Param, register

RANK_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RECALL_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
TEN = "trec_eval-10"  # the profile of the measures only trec_eval 10 prints in all_trec

_CUTOFFS = (Param("k", "integer list", list(RANK_CUTOFFS), "rank cutoffs", minimum=1),)
_GAINS = (Param("gains", "mapping grade->gain", {},
                "gain of each relevance grade; unlisted grades gain their own value",
                minimum=-WEIGHT_LIMIT, maximum=WEIGHT_LIMIT,
                key=Param("grade", "integer", None, "relevance grade", minimum=0)),)


# --------------------------------------------------------------------------------------------
# helpers shared by the gain-based measures
# --------------------------------------------------------------------------------------------

def gain_of(labels: np.ndarray, gains: dict | None) -> np.ndarray:
    """trec_eval's gain: the grade itself (0 for unjudged and non-pool documents), unless a
    ``grade=gain`` pair overrides it."""
    g = np.where(labels > 0, labels, 0).astype(np.float64)
    for level, value in (gains or {}).items():
        g[labels == level] = value
    return g


def _take_or_zero(values: np.ndarray, idx: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """values[idx] where valid, else 0 (also when ``values`` is empty)."""
    out = np.zeros(len(idx))
    out[valid] = values[idx[valid]]
    return out


def _discount(ranks: np.ndarray) -> np.ndarray:
    return 1.0 / np.log2(ranks + 1.0)


def _dcg_prefix(ctx: Context, gains: dict | None):
    """(per-hit inclusive DCG prefix, per-hit gain) for hits with non-zero gain."""
    g = gain_of(ctx.hl, gains)
    contrib = g * _discount(ctx.hr)
    return ctx.cumsum_in_topic(ctx.ht, contrib), g


def _value_at_rank(ctx: Context, prefix: np.ndarray, topics: np.ndarray,
                   x: np.ndarray) -> np.ndarray:
    """prefix value of the last hit with rank <= x in each (topic, x) query (0 if none)."""
    start = ctx.ht.searchsorted(np.arange(ctx.T + 1, dtype=ctx.ht.dtype))
    lo, hi = start[topics], start[topics + 1]
    idx = segmented_search(ctx.hr, lo, hi, lambda v, i: v <= x[i])
    return _take_or_zero(prefix, idx - 1, idx > lo)


def _ideal_gains(ctx: Context, gains: dict | None):
    return ctx.ideal(gain_of(ctx.qg, gains) if gains else
                     np.where(ctx.qg > 0, ctx.qg, 0).astype(np.float64))


# --------------------------------------------------------------------------------------------
# the measures
# --------------------------------------------------------------------------------------------

@register("runid", family="info", aggregate="runid", per_topic=False, uses_rel_level=False,
          input="any")
def runid(ctx: Context, _=None):
    """Run id: the sixth field of the run's last line (summary only).

    Formula: none; the string is printed as trec_eval does.
    Reference: trec_eval m_runid.c.
    """
    return np.zeros(ctx.T)


@register("num_q", family="count", aggregate="num_q", integer=True, per_topic=False,
          uses_rel_level=False, ir_name="NumQ", input="any")
def num_q(ctx: Context, _=None):
    """Number of topics averaged over (summary only).

    Formula: |evaluated topics|; with complete_topics (-c), |qrels topics|.
    Reference: trec_eval m_num_q.c.
    """
    return np.ones(ctx.T, dtype=np.int64)


@register("num_ret", family="count", aggregate="sum", integer=True, uses_rel_level=False,
          ir_name="NumRet")
def num_ret(ctx: Context, _=None):
    """Number of documents retrieved.

    Formula: N, after depth (-M) and judged_only (-J). Summary: the sum over topics.
    Reference: trec_eval m_num_ret.c.
    """
    return ctx.N.copy()


@register("num_rel", family="count", aggregate="sum", integer=True, ir_name="NumRel")
def num_rel(ctx: Context, _=None):
    """Number of relevant documents in the qrels (retrieved or not).

    Formula: R = #{qrels entries with grade >= l}. Summary: the sum; with -c trec_eval
    recomputes it as #{entries with grade > 0} over all qrels topics, ignoring l.
    Reference: trec_eval m_num_rel.c.
    """
    return ctx.R.copy()


@register("num_rel_ret", family="count", aggregate="sum", integer=True, ir_name="NumRelRet",
          aliases=("NumRelRet",))
def num_rel_ret(ctx: Context, _=None):
    """Number of relevant documents retrieved.

    Formula: #{i <= N : rel(i)}. Summary: the sum.
    Reference: trec_eval m_num_rel_ret.c.
    """
    return ctx.num_rel_ret.copy()


def _ap_terms(ctx: Context, cutoff=None) -> np.ndarray:
    keep = slice(None) if cutoff is None else ctx.rel_r <= cutoff
    return ctx.tsum(ctx.rel_t[keep], (ctx.rel_k / ctx.rel_r)[keep])


@register("map", family="rank", ir_name="AP", aliases=("MAP",))
def average_precision(ctx: Context, _=None):
    """Average precision (mean average precision over topics).

    Formula: AP = (1/R) * sum_{i: rel(i)} P@i; unretrieved relevant documents add 0.
    0/0: R = 0 gives 0.
    Reference: Harman, TREC-2 overview (1993); trec_eval m_map.c.
    """
    return safe_div(_ap_terms(ctx), ctx.R)


@register("gm_map", family="rank", aggregate="gmean", per_topic=False, ir_name="GMAP")
def geometric_map(ctx: Context, _=None):
    """Geometric mean of average precision (summary only).

    Formula: exp(mean_t log(max(AP_t, 1e-5))).
    0/0: AP = 0 is floored at 1e-5 (trec_eval's MIN_GEO_MEAN).
    Reference: Robertson, "On GMAP" (CIKM 2006); trec_eval m_gm_map.c.
    """
    return average_precision(ctx)


@register("Rprec", family="rank", ir_name="Rprec", aliases=("RPrec",))
def r_precision(ctx: Context, _=None):
    """Precision after R documents.

    Formula: #{i <= min(N, R) : rel(i)} / R.
    0/0: R = 0 gives 0.
    Reference: trec_eval m_Rprec.c.
    """
    return safe_div(ctx.rel_in_top(ctx.R), ctx.R)


def _counts_above(ctx: Context, mask: np.ndarray) -> np.ndarray:
    """For each hit, how many hits of its topic above it satisfy ``mask``."""
    m = mask.astype(np.int64)
    return ctx.cumsum_in_topic(ctx.ht, m) - m


@register("bpref", family="rank", ir_name="Bpref", aliases=("BPref",))
def bpref(ctx: Context, _=None):
    """Binary preference: how often relevant documents come before judged non-relevant ones.

    Formula: (1/R) * sum over retrieved relevant d of (1 - min(n_d, R) / min(NR, R)), where n_d
    = judged non-relevant documents retrieved above d (unjudged and non-pool ones skipped) and
    NR = judged non-relevant documents in the qrels; a term is 1 when n_d = 0.
    0/0: R = 0 gives 0.
    Reference: Buckley & Voorhees, SIGIR 2004; trec_eval m_bpref.c.
    """
    nonrel = (ctx.hl >= 0) & (ctx.hl < ctx.rel_level)
    n_above = _counts_above(ctx, nonrel)[ctx.is_rel]
    t = ctx.rel_t
    R, NR = ctx.R[t], ctx.NR[t]
    term = np.where(n_above == 0, 1.0,
                    1.0 - safe_div(np.minimum(n_above, R), np.minimum(NR, R)))
    return safe_div(ctx.tsum(t, term), ctx.R)


@register("recip_rank", family="rank", ir_name="RR", aliases=("MRR",))
def reciprocal_rank(ctx: Context, _=None):
    """Reciprocal rank of the first relevant document.

    Formula: 1 / min{i : rel(i)}; no cutoff.
    0/0: no relevant document retrieved gives 0.
    Reference: Voorhees, TREC-8 QA track (1999); trec_eval m_recip_rank.c.
    """
    first = ctx.rel_start[:-1]
    has = ctx.num_rel_ret > 0
    out = np.zeros(ctx.T)
    out[has] = 1.0 / ctx.rel_r[first[has]]
    return out


def _recall_point_cutoff(ctx: Context, p: float) -> np.ndarray:
    """Recall level p as a count of relevant documents: 9.x (long)(p*R + 0.9), 10.0 lround."""
    x = p * ctx.R.astype(np.float64)
    if PROFILES[ctx.profile].rounded_recall_cutoffs:
        return np.where(x - np.floor(x) >= 0.5, np.ceil(x), np.floor(x)).astype(np.int64)
    return (x + 0.9).astype(np.int64)


def _interpolated_precision(ctx: Context) -> np.ndarray:
    """max_{j >= k} P at the j-th relevant retrieved doc, for each relevant retrieved doc k."""
    prec = ctx.rel_k / ctx.rel_r
    pos = ctx.rel_k - 1
    n = ctx.num_rel_ret[ctx.rel_t]
    out = prec.copy()
    step = 1
    longest = int(ctx.num_rel_ret.max()) if ctx.T else 0
    while step < longest:
        take = (pos + step < n).nonzero()[0]
        prev = out.copy()
        out[take] = np.maximum(prev[take], prev[take + step])
        step *= 2
    return out


def _iprec(ctx: Context, p: float) -> np.ndarray:
    c = _recall_point_cutoff(ctx, p)
    nrr = ctx.num_rel_ret
    ip = _interpolated_precision(ctx)
    out = np.zeros(ctx.T)
    ok = (c <= nrr) & (nrr > 0)
    idx = ctx.rel_start[:-1][ok] + np.maximum(c[ok], 1) - 1
    out[ok] = ip[idx]
    # nothing relevant retrieved: trec_eval reports precision at N, 0/0 when N = 0
    empty = (c <= nrr) & (nrr == 0)
    out[empty & (ctx.N == 0)] = np.nan
    return out


@register("iprec_at_recall", family="rank", kind="fcutoffs", defaults=RECALL_POINTS,
          params=(Param("recall", "float list", list(RECALL_POINTS), "recall levels",
                        minimum=0, maximum=1),), ir_name="IPrec")
def iprec_at_recall(ctx: Context, p: float):
    """Interpolated precision at recall level p (trec_eval's count-based rounding).

    Formula: with c = round(p * R) relevant documents (9.x: (long)(p*R + 0.9); 10.0:
    lround(p*R)), the maximum over k >= max(c, 1) of k / rank(k-th relevant retrieved).
    0/0: 0 when c exceeds the relevant documents retrieved; N = 0 gives NaN, as trec_eval.
    Reference: trec_eval m_iprec_at_recall.c; Manning et al., IIR §8.4.
    """
    return _iprec(ctx, p)


@register("P", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS, params=_CUTOFFS,
          ir_name="P", aliases=("Precision",))
def precision_at(ctx: Context, k: int):
    """Precision at rank k.

    Formula: #{i <= k : rel(i)} / k; ranks past N count as non-relevant.
    0/0: never (k >= 1).
    Reference: trec_eval m_P.c.
    """
    return ctx.rel_in_top(k) / float(k)


@register("relstring", family="info", kind="int", defaults=(10,), aggregate="none",
          params=(Param("length", "integer", 10, "number of ranks shown", minimum=1),),
          uses_rel_level=False)
def relstring(ctx: Context, n: int):
    """The labels of the first n ranks as characters (per topic only).

    Formula: grade digit (0-9, '>' above 9), '.' pooled-but-unjudged, '-' not in the qrels.
    Reference: trec_eval m_relstring.c.
    """
    n = int(n)
    width = np.minimum(ctx.N, n)
    # as wide as the longest string printed, not n: any n up to 2^63 - 1 costs nothing more
    grid = np.full((ctx.T, max(int(width.max(initial=0)), 1)), ord("-"), dtype=np.uint8)
    top = ctx.hr <= n
    lab = ctx.hl[top]
    ch = np.where(lab > 9, ord(">"), np.where(lab >= 0, ord("0") + np.clip(lab, 0, 9),
                                              ord(".")))
    grid[ctx.ht[top], ctx.hr[top] - 1] = ch
    raw = grid.tobytes()
    stride = grid.shape[1]
    out = np.empty(ctx.T, dtype=object)
    out[:] = [raw[i * stride: i * stride + w].decode("ascii")
              for i, w in enumerate(width.tolist())]
    return out


@register("recall", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS, params=_CUTOFFS,
          ir_name="R", aliases=("Recall",))
def recall_at(ctx: Context, k: int):
    """Recall at rank k.

    Formula: #{i <= k : rel(i)} / R.
    0/0: R = 0 gives 0.
    Reference: trec_eval m_recall.c.
    """
    return safe_div(ctx.rel_in_top(k), ctx.R)


@register("infAP", family="rank", ir_name="infAP")
def inferred_ap(ctx: Context, _=None):
    """Inferred average precision, for qrels judged on a sample of the pool.

    Formula: (1/R) * sum over retrieved relevant docs at 0-based rank j of: 1 if j = 0, else
    1/(j+1) + (j/(j+1)) * ((r+n+u)/j) * ((r+eps)/(r+n+2 eps)), with r, n, u the relevant,
    judged non-relevant and pooled-unjudged documents above and eps = 1e-5. Non-pool documents
    count in j only.
    0/0: R = 0 gives 0.
    Reference: Yilmaz & Aslam, CIKM 2006; trec_eval m_infap.c.
    """
    eps = 1e-5
    r = _counts_above(ctx, ctx.is_rel)[ctx.is_rel].astype(np.float64)
    n = _counts_above(ctx, (ctx.hl >= 0) & ~ctx.is_rel)[ctx.is_rel].astype(np.float64)
    u = _counts_above(ctx, ctx.hl == UNJUDGED)[ctx.is_rel].astype(np.float64)
    j = (ctx.rel_r - 1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        later = 1.0 / (j + 1) + (j / (j + 1)) * ((r + n + u) / j) * ((r + eps) / (r + n + 2 * eps))
    term = np.where(j == 0, 1.0, later)
    return safe_div(ctx.tsum(ctx.rel_t, term), ctx.R)


@register("gm_bpref", family="rank", aggregate="gmean", per_topic=False)
def geometric_bpref(ctx: Context, _=None):
    """Geometric mean of bpref (summary only).

    Formula: exp(mean_t log(max(bpref_t, 1e-5))).
    Reference: trec_eval m_gm_bpref.c.
    """
    return bpref(ctx)


@register("Rprec_mult", family="rank", kind="fcutoffs",
          defaults=(0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0),
          params=(Param("multiple", "float list", [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6,
                                                   1.8, 2.0], "multiples of R", minimum=0),))
def r_precision_multiple(ctx: Context, m: float):
    """Precision at a multiple of R.

    Formula: #{i <= c : rel(i)} / c with c = (long)(m * R + 0.9) (both profiles).
    0/0: c = 0 gives 0.
    Reference: trec_eval m_Rprec_mult.c.
    """
    # clipped below 2^62 first: (long) of a larger double is undefined (a huge multiple then
    # still means "past the last rank")
    c = np.minimum(m * ctx.R.astype(np.float64) + 0.9, 2.0 ** 62).astype(np.int64)
    return safe_div(ctx.rel_in_top(c), c)


@register("utility", family="set", kind="floats", defaults=(1.0, -1.0, 0.0, 0.0),
          uses_collection_size=True,
          params=(Param("coefficients", "float list", [1, -1, 0, 0],
                        "weights of rel-ret, nonrel-ret, rel-not-ret, nonrel-not-ret",
                        minimum=-WEIGHT_LIMIT, maximum=WEIGHT_LIMIT),))
def utility(ctx: Context, coef):
    """Linear utility of the retrieved set.

    Formula: p1*a + p2*b + p3*c + p4*d with a = relevant retrieved, b = N - a, c = R - a,
    d = collection size + a - N - R (collection size 0, as trec_eval's -N default).
    Summary: the mean (not the sum).
    Reference: TREC filtering track; trec_eval m_utility.c.
    """
    p1, p2, p3, p4 = (list(coef) + [0.0] * 4)[:4]
    a = ctx.num_rel_ret.astype(np.float64)
    n = ctx.N.astype(np.float64)
    r = ctx.R.astype(np.float64)
    d = ctx.collection_size + a - n - r
    return p1 * a + p2 * (n - a) + p3 * (r - a) + p4 * d


@register("11pt_avg", family="rank", kind="floats", defaults=RECALL_POINTS,
          params=(Param("recall", "float list", list(RECALL_POINTS), "recall levels",
                        minimum=0, maximum=1),))
def eleven_point_average(ctx: Context, points):
    """Mean interpolated precision over recall levels (default the 11 points 0, .1, ..., 1).

    Formula: mean over p of iprec_at_recall(p), with the profile's count rounding.
    0/0: as iprec_at_recall.
    Reference: Salton & McGill (1983); trec_eval m_11pt_avg.c.
    """
    total = np.zeros(ctx.T)
    for p in points:  # summed point by point, as trec_eval does: the same bits for any T
        total = total + _iprec(ctx, p)
    return total / len(points)


@register("binG", family="rank")
def binary_g(ctx: Context, _=None):
    """Binary G (experimental in trec_eval).

    Formula: (1/R) * sum over retrieved relevant d of 1 / log2(2 + non-relevant docs above d).
    0/0: R = 0 gives 0.
    Reference: trec_eval m_binG.c (Buckley, 2008).
    """
    nonrel_above = (ctx.rel_r - ctx.rel_k).astype(np.float64)
    return safe_div(ctx.tsum(ctx.rel_t, 1.0 / np.log2(2.0 + nonrel_above)), ctx.R)


@register("G", family="graded", kind="gains", defaults=(), params=_GAINS,
          uses_rel_level=False)
def normalized_gain(ctx: Context, gains):
    """Normalised gain G (experimental in trec_eval).

    Formula: sum over retrieved d at rank r with gain g != 0 of g / log2(2 + C(r) - S(r)),
    divided by the total ideal gain; S(r) = gain retrieved up to r, C(r) = sum_{j<=r}
    max(ideal gain at j, 1).
    0/0: no positive gain in the qrels gives 0.
    Reference: trec_eval m_G.c (Buckley, 2008).
    """
    it, ik, ig, istart = _ideal_gains(ctx, gains)
    g = gain_of(ctx.hl, gains)
    s = ctx.cumsum_in_topic(ctx.ht, g)
    cost_prefix = ctx.cumsum_in_topic(it, np.maximum(ig, 1.0))
    L = np.diff(istart)
    r = ctx.hr
    within = np.minimum(r, L[ctx.ht])
    idx = istart[ctx.ht] + within - 1
    cost = _take_or_zero(cost_prefix, idx, within > 0) + (r - within)
    nz = g != 0
    with np.errstate(divide="ignore"):
        terms = g[nz] / np.log2(2.0 + cost[nz] - s[nz])
    total_ideal = ctx.tsum(it, ig)
    return safe_div(ctx.tsum(ctx.ht[nz], terms), total_ideal)


def _idcg_at(ideal_prefix, istart, topics, k):
    L = np.diff(istart)[topics]
    within = np.minimum(k, L)
    idx = istart[topics] + within - 1
    return _take_or_zero(ideal_prefix, idx, within > 0)


@register("ndcg", family="graded", kind="gains", defaults=(), params=_GAINS,
          ir_name="nDCG", uses_rel_level=False)
def ndcg(ctx: Context, gains):
    """Normalised discounted cumulative gain over the whole ranking, trec_eval style.

    Formula: DCG / IDCG with DCG = sum_{i<=N} gain(i) / log2(i + 1), gain = the grade (linear,
    not 2^g - 1) unless overridden; IDCG over all qrels documents with positive gain, sorted by
    gain, not truncated to N.
    0/0: IDCG = 0 gives 0.
    Reference: Järvelin & Kekäläinen, ACM TOIS 20(4) 2002; trec_eval m_ndcg.c.
    """
    return safe_div(dcg(ctx, gains), ideal_dcg(ctx, gains))


@register("ndcg_rel", family="graded", kind="gains", defaults=(), params=_GAINS,
          uses_rel_level=False)
def ndcg_rel(ctx: Context, gains):
    """nDCG averaged over the relevant documents (experimental in trec_eval).

    Formula: (1/L) * [sum over retrieved d with gain > 0 at rank r of DCG@r / IDCG@min(r, L)
    + (L - such d) * DCG@N / IDCG@L], L = number of qrels documents with positive gain.
    0/0: a non-positive sum gives 0.
    Reference: trec_eval m_ndcg_rel.c (Buckley, 2008).
    """
    it, ik, ig, istart = _ideal_gains(ctx, gains)
    ideal_prefix = ctx.cumsum_in_topic(it, ig / np.log2(ik + 1.0))
    prefix, g = _dcg_prefix(ctx, gains)
    L = np.diff(istart)
    pos = g > 0
    t = ctx.ht[pos]
    terms = safe_div(prefix[pos], _idcg_at(ideal_prefix, istart, t, ctx.hr[pos]))
    topics = np.arange(ctx.T)
    dcg_n = _value_at_rank(ctx, prefix, topics, ctx.N)
    idcg_l = _idcg_at(ideal_prefix, istart, topics, L)
    missing = L - ctx.tsum(t)
    total = ctx.tsum(t, terms) + missing * safe_div(dcg_n, idcg_l)
    return np.where(total > 0, safe_div(total, L), 0.0)


@register("Rndcg", family="graded", kind="gains", defaults=(), params=_GAINS)
def r_ndcg(ctx: Context, gains):
    """nDCG averaged at the R-level boundaries of the ideal ranking (experimental).

    Formula: mean of DCG@min(b, N) / IDCG@b over the ranks b where the ideal gain changes
    (including b = L, the last positive-gain position), plus DCG@N / IDCG@L when N > L + 1.
    0/0: R = 0 gives 0.
    Reference: trec_eval m_Rndcg.c (Buckley, 2008).
    """
    it, ik, ig, istart = _ideal_gains(ctx, gains)
    ideal_prefix = ctx.cumsum_in_topic(it, ig / np.log2(ik + 1.0))
    prefix, _ = _dcg_prefix(ctx, gains)
    L = np.diff(istart)
    nxt_same = np.zeros(len(ig), dtype=bool)
    if len(ig) > 1:
        nxt_same[:-1] = (it[1:] == it[:-1]) & (ig[1:] == ig[:-1])
    b_idx = (~nxt_same).nonzero()[0]
    bt, bk = it[b_idx], ik[b_idx]
    vals = safe_div(_value_at_rank(ctx, prefix, bt, np.minimum(bk, ctx.N[bt])),
                    ideal_prefix[b_idx])
    total = ctx.tsum(bt, vals)
    count = ctx.tsum(bt).astype(np.float64)
    topics = np.arange(ctx.T)
    extra = (ctx.N > L + 1) & (L > 0)
    dcg_n = _value_at_rank(ctx, prefix, topics, ctx.N)
    idcg_l = _idcg_at(ideal_prefix, istart, topics, L)
    total = total + np.where(extra, safe_div(dcg_n, idcg_l), 0.0)
    count = count + extra
    with np.errstate(invalid="ignore", divide="ignore"):
        out = total / count
    return np.where(ctx.R == 0, 0.0, out)


@register("ndcg_cut", family="graded", kind="cutoffs", defaults=RANK_CUTOFFS,
          params=_CUTOFFS, ir_name="nDCG", uses_rel_level=False)
def ndcg_cut(ctx: Context, k: int):
    """nDCG at rank k, trec_eval style (linear gain = grade, log2(i + 1) discount).

    Formula: DCG@k / IDCG@k, both truncated at k; only grades > 0 gain.
    0/0: IDCG@k = 0 gives 0.
    Reference: Järvelin & Kekäläinen 2002; trec_eval m_ndcg_cut.c.
    """
    top = ctx.hr <= k
    g = np.where(ctx.hl[top] > 0, ctx.hl[top], 0)
    dcg_k = ctx.tsum(ctx.ht[top], g * _discount(ctx.hr[top]))
    it, ik, ig, _ = _ideal_gains(ctx, None)
    top_i = ik <= k
    idcg_k = ctx.tsum(it[top_i], ig[top_i] / np.log2(ik[top_i] + 1.0))
    return safe_div(dcg_k, idcg_k)


@register("map_cut", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS, params=_CUTOFFS,
          ir_name="AP_cut")
def map_cut(ctx: Context, k: int):
    """Average precision over the top k, still divided by R.

    Formula: (1/R) * sum_{i <= k: rel(i)} P@i.
    0/0: R = 0 gives 0.
    Reference: trec_eval m_map_cut.c.
    """
    return safe_div(_ap_terms(ctx, k), ctx.R)


@register("relative_P", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS,
          params=_CUTOFFS)
def relative_precision(ctx: Context, k: int):
    """Precision at k relative to the best possible.

    Formula: #{i <= k : rel(i)} / min(k, R).
    0/0: R = 0 gives 0.
    Reference: trec_eval m_rel_P.c.
    """
    return safe_div(ctx.rel_in_top(k), np.minimum(k, ctx.R))


@register("success", family="rank", kind="cutoffs", defaults=(1, 5, 10),
          params=(Param("k", "integer list", [1, 5, 10], "rank cutoffs", minimum=1),),
          ir_name="Success")
def success(ctx: Context, k: int):
    """Success at k: 1 if a relevant document is in the top k.

    Formula: [exists i <= k : rel(i)].
    Reference: trec_eval m_success.c.
    """
    return (ctx.rel_in_top(k) > 0).astype(np.float64)


@register("set_P", family="set", ir_name="SetP",
          extra={"micro": lambda a, b, c, d, v: safe_div(a, a + b)})
def set_precision(ctx: Context, _=None):
    """Precision of the retrieved set.

    Formula: num_rel_ret / N.
    0/0: N = 0 gives 0.
    Reference: trec_eval m_set_P.c.
    """
    return safe_div(ctx.num_rel_ret, ctx.N)


@register("set_relative_P", family="set")
def set_relative_precision(ctx: Context, _=None):
    """Relative precision of the retrieved set.

    Formula: num_rel_ret / min(N, R).
    0/0: gives 0.
    Reference: trec_eval m_set_rel_P.c.
    """
    return safe_div(ctx.num_rel_ret, np.minimum(ctx.N, ctx.R))


@register("set_recall", family="set", ir_name="SetR",
          extra={"micro": lambda a, b, c, d, v: safe_div(a, a + c)})
def set_recall(ctx: Context, _=None):
    """Recall of the retrieved set.

    Formula: num_rel_ret / R.
    0/0: R = 0 gives 0.
    Reference: trec_eval m_set_recall.c.
    """
    return safe_div(ctx.num_rel_ret, ctx.R)


@register("set_map", family="set")
def set_map(ctx: Context, _=None):
    """Set precision times set recall.

    Formula: num_rel_ret^2 / (N * R).
    0/0: gives 0.
    Reference: trec_eval m_set_map.c.
    """
    return safe_div(ctx.num_rel_ret.astype(np.float64) ** 2, ctx.N * ctx.R)


@register("set_F", family="set", kind="float", defaults=(1.0,),
          params=(Param("beta_squared", "float", 1.0,
                        "trec_eval's parameter is beta squared: 0.25 means beta = 0.5",
                        minimum=0),), ir_name="SetF",
          extra={"micro": lambda a, b, c, d, x: f_beta(safe_div(a, a + b), safe_div(a, a + c), x)})
def set_f(ctx: Context, x: float):
    """F measure of the retrieved set, trec_eval's parameterisation.

    Formula: (x + 1) * P * R' / (x * P + R') with P = set_P, R' = set_recall and x = beta^2.
    0/0: no relevant document retrieved gives 0.
    Reference: van Rijsbergen (1979); trec_eval m_set_F.c.
    """
    p = set_precision(ctx)
    r = set_recall(ctx)
    return np.where(ctx.num_rel_ret > 0, f_beta(p, r, x), 0.0)


@register("num_nonrel_judged_ret", family="count", aggregate="sum", integer=True)
def num_nonrel_judged_ret(ctx: Context, _=None):
    """Number of judged non-relevant documents retrieved.

    Formula: #{i <= N : 0 <= grade(i) < l}. Summary: the sum.
    Reference: trec_eval m_num_nonrel_judged_ret.c.
    """
    return ctx.tsum(ctx.ht[(ctx.hl >= 0) & (ctx.hl < ctx.rel_level)])


def _rbp_p(param) -> float:
    return float(dict(param or {}).get("p", 0.9))


@register("rbp", family="graded", kind="pair", defaults=(), all_trec=(TEN,),
          params=(Param("p", "float", 0.9, "persistence", minimum=0, maximum=1),),
          uses_rel_level=False, ir_name="RBP")
def rank_biased_precision(ctx: Context, param):
    """Rank-biased precision.

    Formula: (1 - p) * sum_i gain(i) * p^(i-1), gain = grade / (topic's highest grade) when
    that grade exceeds 1 (trec_eval's min-max gain normalisation), else the grade.
    0/0: never.
    Reference: Moffat & Zobel, ACM TOIS 27(1) 2008; trec_eval 10 m_rbp.c.
    """
    p = _rbp_p(param)
    top = ctx.max_grade.astype(np.float64)
    scale = np.where(top > 1, top, 1.0)[ctx.ht]
    g = np.where(ctx.hl > 0, ctx.hl, 0) / scale
    return (1 - p) * ctx.tsum(ctx.ht, g * p ** (ctx.hr - 1.0))


@register("rbp_resid", family="graded", kind="pair", defaults=(), all_trec=(TEN,),
          params=(Param("p", "float", 0.9, "persistence", minimum=0, maximum=1),),
          uses_rel_level=False)
def rbp_residual(ctx: Context, param):
    """Residual of rank-biased precision: the weight of unjudged ranks.

    Formula: p^N + (1 - p) * sum over unjudged or non-pool ranks i of p^(i-1); 0 when every
    retrieved document is judged.
    Reference: Moffat & Zobel 2008; trec_eval 10 m_rbp_resid.c.
    """
    p = _rbp_p(param)
    judged = ctx.hl >= 0
    n = ctx.N.astype(np.float64)
    total = (1 - p ** n) / (1 - p) if p != 1 else n
    unjudged_weight = total - ctx.tsum(ctx.ht[judged], p ** (ctx.hr[judged] - 1.0))
    any_unjudged = ctx.N > ctx.tsum(ctx.ht[judged])
    return np.where(any_unjudged, p ** n + (1 - p) * unjudged_weight, 0.0)


@register("unj", family="rank", kind="cutoffs", defaults=(5, 10, 20), all_trec=(TEN,),
          params=(Param("k", "integer list", [5, 10, 20], "rank cutoffs", minimum=1),),
          uses_rel_level=False)
def unjudged_at(ctx: Context, k: int):
    """Fraction of the top k that is unjudged (not in the qrels, or a negative grade).

    Formula: #{i <= min(k, N) : grade(i) unknown or < 0} / k.
    Reference: trec_eval 10 m_unjudged.c.
    """
    judged_top = ctx.tsum(ctx.ht[(ctx.hl >= 0) & (ctx.hr <= k)])
    return (np.minimum(ctx.N, k) - judged_top) / float(k)


@register("dcg", family="graded", kind="gains", defaults=(), params=_GAINS, all_trec=(),
          uses_rel_level=False, ir_name="DCG")
def dcg(ctx: Context, gains):
    """Discounted cumulative gain over the whole ranking (trec_eval's ndcg numerator).

    Formula: sum_{i<=N} gain(i) / log2(i + 1), gain = grade unless overridden.
    Reference: Järvelin & Kekäläinen 2002; trec_eval m_ndcg.c.
    """
    g = gain_of(ctx.hl, gains)
    return ctx.tsum(ctx.ht, g * _discount(ctx.hr))


@register("ideal_dcg", family="graded", kind="gains", defaults=(), params=_GAINS,
          all_trec=(), uses_rel_level=False)
def ideal_dcg(ctx: Context, gains):
    """DCG of the ideal ranking (trec_eval's ndcg denominator).

    Formula: sum over qrels documents with positive gain, sorted by gain descending, of
    gain / log2(position + 1), not truncated to N.
    Reference: trec_eval m_ndcg.c.
    """
    it, ik, ig, _ = _ideal_gains(ctx, gains)
    return ctx.tsum(it, ig / np.log2(ik + 1.0))


# --------------------------------------------------------------------------------------------
# Cutoff variants offered under ir_measures names (not in trec_eval)
# --------------------------------------------------------------------------------------------

@register("RR_cut", family="rank", kind="cutoffs", defaults=(10,), all_trec=(),
          params=(Param("k", "integer list", [10], "rank cutoff", minimum=1),), ir_name="RR")
def reciprocal_rank_at(ctx: Context, k: int):
    """Reciprocal rank of the first relevant document within the top k (MS MARCO's MRR@10).

    Formula: 1 / min{i <= k : rel(i)}, 0 if none.
    0/0: no relevant document in the top k gives 0.
    Reference: MS MARCO passage ranking (Nguyen et al. 2016); ir_measures RR@k.
    """
    rr = reciprocal_rank(ctx)
    return np.where(rr >= 1.0 / k, rr, 0.0)
