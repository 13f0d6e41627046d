"""trec_eval's measures, in ``measures.c`` order (the order trec_eval prints them in), first
part: from runid to binG, the counts and the measures of binary relevance by rank (AP, GMAP,
R-precision, bpref, reciprocal rank, interpolated precision, P, recall, infAP, Rprec_mult,
utility, 11pt_avg, binG). :mod:`.trec_graded` registers the rest, from G on, after these.
Room: measures.

Notation used in the docstrings: for one topic, R = num_rel (qrels entries with grade >=
relevance level ``l``), N = num_ret, rel(i) = "the document at rank i is relevant",
grade(i) its qrels grade. Unless a docstring says otherwise a 0 denominator gives 0, as in
trec_eval. Reference for all: NIST trec_eval 9.0.8 / 10.0 (``m_<name>.c``) and
``docs/trec_eval_semantics.md``.
"""

from __future__ import annotations

import numpy as np

from ..inputs.grammar import WEIGHT_LIMIT
from ..inputs.ranking import UNJUDGED
from .context import Context, safe_div
from .registry import PROFILES, Param, register

RANK_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RECALL_POINTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

CUTOFF_PARAMS = (Param("k", "integer list", list(RANK_CUTOFFS), "rank cutoffs", minimum=1),)


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


def ap_terms(ctx: Context, cutoff=None) -> np.ndarray:
    """Per topic, the sum of P@i over the relevant documents retrieved at ranks i <= cutoff
    (all ranks when None): the numerator of AP and of map_cut."""
    keep = slice(None) if cutoff is None else ctx.rel_r <= cutoff
    return ctx.tsum(ctx.rel_t[keep], (ctx.rel_k / ctx.rel_r)[keep])


@register("map", family="rank", ir_name="AP", aliases=("MAP",))
def average_precision(ctx: Context, _=None):
    """Average precision (mean average precision over topics).

    Formula: AP = (1/R) * sum_{i: rel(i)} P@i; unretrieved relevant documents add 0.
    0/0: R = 0 gives 0.
    Reference: Harman, TREC-2 overview (1993); trec_eval m_map.c.
    """
    return safe_div(ap_terms(ctx), ctx.R)


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


@register("P", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS, params=CUTOFF_PARAMS,
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


@register("recall", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS, params=CUTOFF_PARAMS,
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
