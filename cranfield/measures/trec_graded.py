"""trec_eval's measures, in ``measures.c`` order, second part: from G on, registered after
:mod:`.trec`'s (which this module imports first, so that the order holds). The gain-based
measures (G, ndcg, ndcg_rel, Rndcg, ndcg_cut, rbp, rbp_resid, dcg, ideal_dcg) and the gain,
discount and ideal-ranking helpers they share; between them, as measures.c lists them, the
remaining cutoff measures (map_cut, relative_P, success, trec_eval 10's unj), the set measures
(set_P, set_relative_P, set_recall, set_map, set_F), num_nonrel_judged_ret; last RR_cut,
ir_measures' RR@k. Notation as in :mod:`.trec`. Room: measures.
"""

from __future__ import annotations

import numpy as np

from ..inputs.grammar import WEIGHT_LIMIT
from ..inputs.ranking import segmented_search
from .context import Context, f_beta, safe_div
from .registry import ALL_TREC_10, Param, register
from .trec import CUTOFF_PARAMS, RANK_CUTOFFS, ap_terms, reciprocal_rank

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
# the measures (continuing trec's, from G on)
# --------------------------------------------------------------------------------------------

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
          params=CUTOFF_PARAMS, ir_name="nDCG", uses_rel_level=False)
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


@register("map_cut", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS, params=CUTOFF_PARAMS,
          ir_name="AP_cut")
def map_cut(ctx: Context, k: int):
    """Average precision over the top k, still divided by R.

    Formula: (1/R) * sum_{i <= k: rel(i)} P@i.
    0/0: R = 0 gives 0.
    Reference: trec_eval m_map_cut.c.
    """
    return safe_div(ap_terms(ctx, k), ctx.R)


@register("relative_P", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS,
          params=CUTOFF_PARAMS)
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


@register("rbp", family="graded", kind="pair", defaults=(), all_trec=ALL_TREC_10,
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


@register("rbp_resid", family="graded", kind="pair", defaults=(), all_trec=ALL_TREC_10,
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


@register("unj", family="rank", kind="cutoffs", defaults=(5, 10, 20), all_trec=ALL_TREC_10,
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
