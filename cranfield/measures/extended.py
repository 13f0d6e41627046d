"""Measures beyond trec_eval: graded measures with a choice of gain and discount (CG, DCG,
nDCG), and ir_measures' ERR, Judged, RBP, Accuracy and Compat with ir_measures' meaning, plus
ranx's hits and RBP (issue #15). The textbook set (contingency table, F_beta, F@k, AP
normalised by min(k, R), 11-point interpolated AP, GAP) is in :mod:`.textbook`, registered
after these.

They take keyword parameters (registry kind ``kw``), named ir_measures-style:
``nDCG(gain=exp)@10``, ``DCG(discount=jk,b=2)@10``, ``CG@10``, ``ERR@20``, ``F(beta=2)@10``,
``F(beta=0.5)``, ``Fallout(N=500000)``, ``AP(norm=min)@10``, ``IAP11``, ``Judged@10``,
``RBP(rel=1)``, ``Compat(p=0.8)``. None of them is in ``all_trec``: trec_eval prints none of
them.
"""

from __future__ import annotations

import numpy as np

from ..inputs.grammar import WEIGHT_LIMIT
from ..inputs.ranking import within_topic_index
from .context import Context, safe_div
from .registry import Param, register

K_OPTIONAL = Param("k", "integer", None, "rank cutoff (none: the whole ranking)", minimum=1)
_GAIN = Param("gain", "enum", "linear", "gain of grade g > 0: linear (g) or exponential "
              "(2^g - 1); grades <= 0 and unjudged documents gain 0",
              choices=("linear", "exp"))
_DISCOUNT = Param("discount", "enum", "log2", "log2: 1/log2(i + 1); jk: Järvelin-"
                  "Kekäläinen's 1/log_b(max(i, b))", choices=("log2", "jk"))
_BASE = Param("b", "number", 2.0, "log base of the jk discount (ranks below b are not "
              "discounted)", minimum=1.0000001)
_TIES = Param("ties", "enum", "trec_eval", "trec_eval: tied scores ranked by trec_eval's "
              "tie-break (docno descending); average: each document of a tie group at ranks "
              "i..j takes the mean discount of ranks i..j (the cutoff zeroing ranks past k), "
              "the expectation over every order of the tie (McSherry & Najork 2008; "
              "scikit-learn's dcg_score/ndcg_score with ignore_ties=False)",
              choices=("trec_eval", "average"))


_GAINS = Param("gains", "mapping grade->gain", None, "ir_measures' gains={grade: gain, ...}: "
               "the gain of each listed grade (others: their grade); a gain <= 0 and a "
               "negative grade gain 0", minimum=-WEIGHT_LIMIT, maximum=WEIGHT_LIMIT,
               key=Param("grade", "integer", None, "relevance grade", minimum=0))


_MIN_GRADE = Param("min_grade", "integer", 1, "grades below it gain 0 whatever gains= says "
                   "(ranx's -lN suffix: min_grade=N); 1: every positive grade gains",
                   minimum=1)


def _gain(labels: np.ndarray, kind: str, gains=None, min_grade: int = 1) -> np.ndarray:
    g = np.where(labels > 0, labels, 0).astype(np.float64)
    for grade, value in gains or ():
        g[labels == grade] = max(value, 0.0)
    if min_grade > 1:  # one comparison, whatever N: no entry per grade below it
        g[labels < min_grade] = 0.0
    return np.power(2.0, g) - 1.0 if kind == "exp" else g


def _discount(ranks: np.ndarray, kind: str, b: float) -> np.ndarray:
    ranks = ranks.astype(np.float64)
    if kind == "jk":
        return np.log(b) / np.log(np.maximum(ranks, b))
    return 1.0 / np.log2(ranks + 1.0)


def _top(ctx: Context, k) -> np.ndarray:
    return ctx.hr <= k if k is not None else np.ones(len(ctx.hr), dtype=bool)


def _dcg(ctx: Context, p: dict) -> tuple[np.ndarray, np.ndarray]:
    """(DCG@k of the run, DCG@k of the ideal ranking) per topic."""
    k, gain, disc, b = p["k"], p["gain"], p["discount"], p["b"]
    gains, low = p.get("gains"), p.get("min_grade", 1)
    if p.get("ties") == "average":
        run = _tie_averaged(ctx, k, _gain(ctx.hl, gain, gains, low), disc, b)
    else:
        top = _top(ctx, k)
        run = ctx.tsum(ctx.ht[top], _gain(ctx.hl[top], gain, gains, low) *
                       _discount(ctx.hr[top], disc, b))
    it, ik, ig, _ = ctx.ideal(_gain(ctx.qg, gain, gains, low))
    keep = ik <= k if k is not None else np.ones(len(ik), dtype=bool)
    ideal = ctx.tsum(it[keep], ig[keep] * _discount(ik[keep], disc, b))
    return run, ideal


def _tie_averaged(ctx: Context, k, gains: np.ndarray, disc: str, b: float) -> np.ndarray:
    """Per topic DCG@k averaged over every order of each tie group (McSherry & Najork 2008,
    in closed form): a judged document whose group spans ranks f..l gains its gain times the
    mean of the discounts of f..l, those past k counted as 0. Unjudged documents of the group
    gain 0 but hold their ranks in the span."""
    first = ctx.ranked.hit_tie_first
    last = ctx.ranked.hit_tie_last
    if first is None:  # no tie groups known (a ranking built without scores): no ties
        first = last = ctx.hr
    keep = (first <= k) & (gains != 0) if k is not None else gains != 0
    first, last, g, t = first[keep], last[keep], gains[keep], ctx.ht[keep]
    if not len(t):
        return np.zeros(ctx.T)
    end = np.minimum(last, k) if k is not None else last
    # D[n] = sum of the discounts of ranks 1..n; a group's discounts sum to D[end] - D[f - 1]
    table = np.concatenate(([0.0], np.cumsum(_discount(np.arange(1, int(end.max()) + 1),
                                                       disc, b))))
    mean = (table[end] - table[first - 1]) / (last - first + 1)
    return ctx.tsum(t, g * mean)


@register("CG", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(K_OPTIONAL, _GAIN), ir_name="CG")
def cumulative_gain(ctx: Context, p: dict):
    """Cumulative gain: the gains of the top k, undiscounted.

    Formula: CG@k = sum_{i <= k} gain(g_i), gain linear (g) or exp (2^g - 1).
    0/0: no judged document in the top k gives 0.
    Reference: Järvelin & Kekäläinen 2002, Cumulated gain-based evaluation of IR techniques.
    """
    top = _top(ctx, p["k"])
    return ctx.tsum(ctx.ht[top], _gain(ctx.hl[top], p["gain"]))


@register("dcg_gd", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(K_OPTIONAL, _GAIN, _DISCOUNT, _BASE, _GAINS, _TIES, _MIN_GRADE), ir_name="DCG")
def discounted_cumulative_gain(ctx: Context, p: dict):
    """Discounted cumulative gain with a choice of gain and discount.

    Formula: DCG@k = sum_{i <= k} gain(g_i) * disc(i); disc log2: 1/log2(i + 1); disc jk:
    1/log_b(max(i, b)); with gains=, a listed grade's gain replaces the grade; grades below
    min_grade gain 0 (ranx's ``dcg@k-lN`` is min_grade=N).
    ties=average (``DCG(ties=average)@10``): tied scores are not ordered by docno but averaged
    over all their orders, in closed form: a document whose tie group spans ranks i..j counts
    gain(g) * (sum_{r=i..j} disc@k(r)) / (j - i + 1), disc@k(r) = 0 for r > k; ties are
    judged on the scores as the profile reads them (float32 in trec_eval-9.0.8). It equals
    scikit-learn's dcg_score(y_true, y_score, k=k, ignore_ties=False) on a ranking that
    holds every judged document (sklearn ranks every document it is given).
    0/0: no judged document in the top k gives 0.
    Reference: Järvelin & Kekäläinen 2002; Burges et al. 2005 (exponential gain); McSherry &
    Najork 2008, Computing information retrieval performance measures efficiently in the
    presence of tied scores (ties=average).
    """
    return _dcg(ctx, p)[0]


@register("ndcg_gd", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(K_OPTIONAL, _GAIN, _DISCOUNT, _BASE, _GAINS, _TIES, _MIN_GRADE), ir_name="nDCG",
          aliases=("NDCG",))
def normalized_dcg(ctx: Context, p: dict):
    """nDCG with a choice of gain and discount; the ideal ranking sorts the topic's judged
    grades (all of them, from the qrels) descending.

    Formula: nDCG@k = DCG@k / IDCG@k with the same gain and discount; with gains= (ir_measures'
    nDCG(gains={...})@k, which maps the qrels' grades before trec_eval's ndcg_cut), a listed
    grade's gain replaces the grade in both, and grades below min_grade gain 0 in both (ranx's
    ``ndcg@k-lN`` is min_grade=N). ties=average (``nDCG(ties=average)@10``): DCG@k
    averaged over every order of each group of tied scores (as DCG(ties=average)); IDCG@k is
    the ideal ordering's, which has no ties to average. Equals scikit-learn's
    ndcg_score(..., k=k, ignore_ties=False) when every judged document is retrieved (sklearn's
    ideal sorts the documents it is given; Cranfield's, all the topic's judged grades,
    unretrieved ones included).
    0/0: IDCG@k = 0 (no positive grade) gives 0.
    Reference: Järvelin & Kekäläinen 2002; Burges et al. 2005; McSherry & Najork 2008
    (ties=average).
    """
    run, ideal = _dcg(ctx, p)
    return safe_div(run, ideal)


@register("ERR", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(K_OPTIONAL,
                  Param("max_grade", "integer", 4, "g_max in R = (2^g - 1) / 2^g_max (gdeval's "
                        "and ir_measures' 4)", minimum=1),
                  Param("topic_max", "boolean", False, "true: g_max is each topic's largest "
                        "grade instead (Cranfield's ERR before issue #15)")),
          ir_name="ERR")
def expected_reciprocal_rank(ctx: Context, p: dict):
    """Expected reciprocal rank: a user stops at rank r with probability R_r, having gone on
    past every document above it. ``ERR@k`` is gdeval's ERR@k (ir_measures' ERR); ``ERR``
    without a cutoff runs over the whole ranking.

    Formula: ERR@k = sum_{r <= k} (R_r / r) prod_{i < r} (1 - R_i), R = min(1, (2^g - 1) /
    2^g_max), g_max = max_grade (default 4, as gdeval) or, with topic_max=true, the topic's
    largest grade; unjudged documents and grades <= 0: R = 0.
    0/0: a topic without a positive grade gives 0 (gdeval prints no row for it; ir_measures
    scores it 0).
    Reference: Chapelle, Metzler, Zhang & Grinspan 2009, Expected reciprocal rank for graded
    relevance; TREC Web track gdeval.pl 1.2 (cranfield.measures.webtrack.gdeval).
    """
    top = _top(ctx, p["k"]) & (ctx.hl > 0)
    t, r, g = ctx.ht[top], ctx.hr[top], ctx.hl[top].astype(np.float64)
    g_max = ctx.max_grade.astype(np.float64) if p["topic_max"] else \
        np.full(ctx.T, float(p["max_grade"]))
    with np.errstate(over="ignore"):  # 2^g_max past 2^1023 is inf: R = 0, as in the limit
        stop = (np.power(2.0, g) - 1.0) / np.power(2.0, g_max[t])
    stop = np.minimum(stop, 1.0)
    # prod_{i < r} (1 - R_i) within each topic: an exclusive running sum of logs
    with np.errstate(divide="ignore"):
        log_keep = np.log1p(-stop)
    inclusive = ctx.cumsum_in_topic(t, log_keep)
    before = np.zeros(len(t))
    same = np.flatnonzero(t[1:] == t[:-1]) + 1
    before[same] = inclusive[same - 1]
    return ctx.tsum(t, stop * np.exp(before) / r)


@register("Judged", family="rank", kind="kw", all_trec=(), params=(K_OPTIONAL,),
          uses_rel_level=False, ir_name="Judged")
def judged_at(ctx: Context, p: dict):
    """Judgment rate: the fraction of the top k documents that are in the qrels, whatever
    their grade (a negative grade counts as judged, as in ir_measures); without a cutoff,
    of the whole ranking.

    Formula: #{i <= min(k, N) : document i is in the qrels} / min(k, N).
    0/0: N = 0 gives 0.
    Reference: ir_measures Judged@k (MacAvaney et al., OpenNIR); compare trec_eval 10's
    unj, which counts negative grades as unjudged.
    """
    k = p["k"]
    judged_top = ctx.tsum(ctx.ht[_top(ctx, k)])
    return safe_div(judged_top, ctx.N if k is None else np.minimum(ctx.N, k))


RBP_HORIZON = 1000  # ranks cwl_eval's user model runs over (its max_n)


@register("RBP", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(K_OPTIONAL,
                  Param("p", "number", 0.8, "persistence: the probability of going on to the "
                        "next rank", minimum=0.0, maximum=1.0),
                  Param("rel", "integer", None, "binary gain: documents graded >= rel gain 1 "
                        "(none: graded gain, grade / the topic's largest grade)")),
          ir_name="RBP")
def rank_biased_precision_ir(ctx: Context, p: dict):
    """Rank-biased precision, ir_measures' RBP: persistence 0.8 by default, binary with
    ``rel=``, graded without it; the user model runs over ranks 1..1000 as cwl_eval's does
    (ir_measures' provider), so the weights are normalised over those ranks.

    Formula: RBP = sum_{i <= min(k, 1000)} g_i w_i, w_i = (1 - p) p^(i-1) / (1 - p^1000)
    (w_i = 1/1000 when p = 1); g_i = [max(grade, 0) >= rel] with rel, else grade / the
    topic's largest grade (grades <= 0 and unjudged documents gain 0). trec_eval 10's ``rbp``
    (p = 0.9, no horizon) keeps trec_eval's meaning.
    0/0: never (the weights sum to 1 over the horizon).
    Reference: Moffat & Zobel 2008, Rank-biased precision for measurement of retrieval
    effectiveness; Azzopardi, Thomas & Moffat 2019, cwl_eval.
    """
    k = p["k"]
    depth = RBP_HORIZON if k is None else min(k, RBP_HORIZON)
    top = ctx.hr <= depth
    t, r, lab = ctx.ht[top], ctx.hr[top], ctx.hl[top]
    if p["rel"] is not None:
        gain = (np.maximum(lab, 0) >= p["rel"]).astype(np.float64)
    else:
        scale = np.maximum(ctx.max_grade, 1).astype(np.float64)[t]
        gain = np.where(lab > 0, lab, 0) / scale
    persistence = float(p["p"])
    if persistence == 1.0:
        weight = np.full(len(r), 1.0 / RBP_HORIZON)
    else:
        weight = (1.0 - persistence) * np.power(persistence, r - 1.0) / \
            (1.0 - persistence ** RBP_HORIZON)
    return ctx.tsum(t, gain * weight)


@register("hits", family="count", kind="kw", all_trec=(), params=(K_OPTIONAL,),
          extra={"spelling": "ranx"})
def ranx_hits(ctx: Context, p: dict):
    """Hits, ranx's ``hits@k``: the relevant documents retrieved in the top k (without a
    cutoff, in the whole ranking), averaged over topics as ranx averages every measure.
    trec_eval's ``num_rel_ret`` (ir_measures' ``NumRelRet``) counts the same per topic but
    its summary is the sum; this spelling means ranx's number, the mean.

    Formula: #{i <= min(k, N) : rel(i)}. Summary: the mean.
    Reference: ranx.metrics.hits (ranx 0.3).
    """
    k = p["k"]
    return ctx.rel_in_top(np.iinfo(np.int64).max if k is None else k).astype(np.float64)


@register("ranx_rbp", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(Param("p", "number", 0.95, "persistence: the probability of going on to "
                        "the next rank", minimum=0.0, maximum=1.0),
                  Param("rel", "integer", 1, "documents graded below rel gain 0")),
          extra={"spelling": "ranx"})
def ranx_rank_biased_precision(ctx: Context, p: dict):
    """Rank-biased precision as ranx computes it (``rbp.95``): each rank weighed by the
    document's grade itself (not a 0/1 gain, nor grade / the largest grade as ir_measures'
    graded RBP), over the whole ranking, with no horizon normalisation. On binary qrels it
    is RBP(rel=1,p=...) up to that normalisation (p^1000).

    Formula: RBP = (1 - p) sum_{i <= N} g_i p^(i-1), g_i = grade if grade >= rel else 0
    (unjudged documents gain 0).
    0/0: never.
    Reference: ranx.metrics.rank_biased_precision (ranx 0.3); Moffat & Zobel 2008.
    """
    t, r, lab = ctx.ht, ctx.hr, ctx.hl
    gain = np.where(lab >= p["rel"], np.maximum(lab, 0), 0).astype(np.float64)
    persistence = float(p["p"])
    return ctx.tsum(t, gain * (1.0 - persistence) * np.power(persistence, r - 1.0))


# ir_measures' name and ir_measures' value: a topic with no relevant document in the top k
# has no value (NaN) and the summary is the mean over the topics that have one, as ir_measures
# evaluated alone reports it (aggregate "mean_reported")
@register("Accuracy", family="rank", kind="kw", all_trec=(), params=(K_OPTIONAL,),
          ir_name="Accuracy", aggregate="mean_reported")
def ranking_accuracy(ctx: Context, p: dict):
    """Ranking accuracy, ir_measures' Accuracy: the probability that a relevant document of
    the top k is ranked above a non-relevant one of the top k; without a cutoff, over the
    whole ranking. A diagnostic, not a set measure: Cranfield's contingency-table accuracy
    is ``SetAccuracy``.

    Formula: 1 - (1 / (n_rel n_non)) sum over relevant d in the top k of #{non-relevant
    documents above d}, n_rel and n_non the relevant and non-relevant documents of the top
    min(k, N). Relevant: grade >= rel, an unjudged document read as grade 0 (as ir_measures
    reads it: unjudged documents are non-relevant, unless rel <= 0). Summary: the mean over
    the topics that have a value (ir_measures' mean), NaN if none has.
    0/0: no relevant document in the top k gives no value (NaN per topic, JSON null; ir_measures
    reports none for that topic), so the summary leaves the topic out, as ir_measures
    evaluated alone does (0.7083 on ir_measures' own test data, where averaging a 0 for each
    such topic would give 0.4722); a qrels topic missing from the run (complete_topics) has
    no value either. No non-relevant document in the top k gives 1 (no pair is misordered;
    ir_measures 0.4.3 raises ZeroDivisionError there).
    Reference: ir_measures Accuracy (ir_measures.measures.accuracy and
    providers.accuracy_provider, 0.4.3).
    """
    k = p["k"]
    lim = np.iinfo(np.int64).max if k is None else k
    shown = (ctx.N if k is None else np.minimum(ctx.N, k)).astype(np.float64)  # the top k
    if ctx.rel_level > 0:
        # relevant: judged with grade >= rel; the rest, unjudged documents too, non-relevant
        keep = ctx.rel_r <= lim
        t = ctx.rel_t[keep]
        n_rel = ctx.tsum(t).astype(np.float64)
        misordered = ctx.tsum(t, (ctx.rel_r[keep] - ctx.rel_k[keep]).astype(np.float64))
    else:
        # rel <= 0: an unjudged document (grade 0) is relevant, so the non-relevant ones are
        # the judged documents graded below rel; a pair is misordered by each relevant
        # document below a non-relevant one
        non = (ctx.hr <= lim) & (ctx.hl < ctx.rel_level)
        t, r = ctx.ht[non], ctx.hr[non]
        n_non_t = ctx.tsum(t)
        nth = within_topic_index(t, ctx.T) + 1  # 1-based among the topic's non-relevant
        below = (shown[t] - r) - (n_non_t[t] - nth)
        n_rel = shown - n_non_t
        misordered = ctx.tsum(t, below.astype(np.float64))
    n_non = shown - n_rel
    with np.errstate(invalid="ignore", divide="ignore"):
        value = 1.0 - safe_div(misordered, n_rel * n_non)
    return np.where(n_rel > 0, value, np.nan)


@register("Compat", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(Param("p", "number", 0.95, "persistence of the rank-biased overlap",
                        minimum=0.0, maximum=1.0),
                  Param("normalize", "boolean", True, "divide by the ideal ranking's own "
                        "overlap (so a perfect ranking scores 1)")),
          ir_name="Compat")
def compatibility(ctx: Context, p: dict):
    """Compatibility: the rank-biased overlap of the ranking with an ideal ranking.

    Formula: RBO = sum_{d <= D} p^(d-1) |A_d & I_d| / d / sum_{d <= D} p^(d-1), A_d the top
    d of the ranking, I_d of the ideal (the documents with grade > 0, grade descending,
    within a grade the retrieved ones in the ranking's order and then the others), D =
    max(N, |I|); normalised (the default), divided by RBO of I with itself.
    0/0: no document with a positive grade gives 0.
    Reference: Clarke, Vtyurina & Smucker 2021, Assessing top-k preferences (ACM TOIS 39(3));
    ir_measures' compat provider.
    """
    pers = float(p["p"])
    ideal_len = ctx.tsum(ctx.qt[ctx.qg > 0])
    D = np.maximum(ctx.N, ideal_len)
    top = int(D.max(initial=0))
    d = np.arange(1, top + 1, dtype=np.float64)
    w = np.power(pers, d - 1.0)
    F = np.concatenate(([0.0], np.cumsum(w / d)))   # F[n] = sum_{d <= n} p^(d-1) / d
    G = np.concatenate(([0.0], np.cumsum(w)))       # G[n] = sum_{d <= n} p^(d-1)
    # ideal position of each relevant retrieved document: documents of higher grades, then
    # the retrieved ones of its grade ranked above it
    pos = ctx.hl > 0
    t, r, g = ctx.ht[pos], ctx.hr[pos], ctx.hl[pos]
    q_pos = ctx.qg > 0
    qt, qg = ctx.qt[q_pos], ctx.qg[q_pos]
    order = np.lexsort((qg, qt))
    qt, qg = qt[order], qg[order]
    hi = _count_greater(qt, qg, t, g)
    srt = np.lexsort((r, g, t))
    tg_first = np.ones(len(srt), dtype=bool)
    tg_first[1:] = (t[srt][1:] != t[srt][:-1]) | (g[srt][1:] != g[srt][:-1])
    run_idx = np.arange(len(srt))
    group_start = np.maximum.accumulate(np.where(tg_first, run_idx, 0))
    same_above = np.empty(len(srt), dtype=np.int64)
    same_above[srt] = run_idx - group_start
    q = hi + same_above + 1
    m = np.maximum(r, q)
    tail = F[D[t]] - F[m - 1]
    overlap = ctx.tsum(t, tail)
    if p["normalize"]:
        L = ideal_len
        den = G[np.minimum(L, D)] + L * (F[D] - F[np.minimum(L, D)])
    else:
        den = G[D]
    return safe_div(overlap, den)


def _count_greater(qt: np.ndarray, qg: np.ndarray, t: np.ndarray, g: np.ndarray
                   ) -> np.ndarray:
    """For each (t, g): the rows of the (topic, grade)-sorted qrels (qt, qg) of topic t with
    a grade greater than g (one sort of both, qrels rows before hits of an equal grade)."""
    n_q = len(qt)
    order = np.lexsort((np.r_[np.zeros(n_q), np.ones(len(t))], np.r_[qg, g], np.r_[qt, t]))
    upto = np.cumsum(order < n_q)  # qrels rows at or before each sorted position
    at = np.empty(len(order), dtype=np.int64)
    at[order] = np.arange(len(order))
    return np.searchsorted(qt, t, side="right") - upto[at[n_q:]]
