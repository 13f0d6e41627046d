"""Measures beyond trec_eval, the textbook set: the contingency table (Fallout, Specificity,
NPV, FDR, SetAccuracy), F_beta and F@k, AP normalised by min(k, R), 11-point interpolated AP
and graded AP (issue #15). Keyword parameters (registry kind ``kw``), as in :mod:`.extended`,
which registers its measures first; none of them is in ``all_trec``.
"""

from __future__ import annotations

import numpy as np

from ..errors import MeasureError
from ..inputs.grammar import WEIGHT_LIMIT
from .context import Context, f_beta, safe_div
from .extended import K_OPTIONAL
from .registry import Param, register

_K_REQUIRED = Param("k", "integer", None, "rank cutoff (required: @k)", minimum=1)
_BETA = Param("beta", "number", 1.0, "weight of recall: F_beta = (1 + beta^2) P R / "
              "(beta^2 P + R)", minimum=0.0, maximum=WEIGHT_LIMIT)
_N = Param("N", "integer", None, "documents in the collection (default: the evaluation's "
           "collection_size, trec_eval's -N)", minimum=1)


def _micro_f(a, b, c, d, p):
    if p["k"] is not None:
        raise MeasureError(f"F@{p['k']}", "micro-averaging is defined for the set F only")
    return f_beta(safe_div(a, a + b), safe_div(a, a + c), p["beta"] ** 2)


@register("F", family="set", kind="kw", all_trec=(), params=(K_OPTIONAL, _BETA), ir_name="F",
          extra={"micro": _micro_f})
def f_measure(ctx: Context, p: dict):
    """F_beta of precision and recall, of the whole retrieved set or of the top k.

    Formula: F_beta = (1 + beta^2) P R / (beta^2 P + R); P = rel_ret / ret, R = rel_ret / R
    (at k: P@k with divisor k, R@k). beta > 1 weighs recall more; beta is given as beta
    (trec_eval's set_F takes beta^2).
    0/0: P + R = 0 gives 0.
    Reference: van Rijsbergen 1979, Information Retrieval, ch. 7.
    """
    if p["k"] is None:
        precision = safe_div(ctx.num_rel_ret, ctx.N)
        recall = safe_div(ctx.num_rel_ret, ctx.R)
    else:
        hits = ctx.rel_in_top(p["k"])
        precision = hits / float(p["k"])
        recall = safe_div(hits, ctx.R)
    return f_beta(precision, recall, p["beta"] ** 2)


def _table(ctx: Context, p: dict):
    """The contingency table per topic (:meth:`Context.contingency`), N from the measure or
    the evaluation's collection_size."""
    return ctx.contingency(p.get("N") or ctx.collection_size)


def _needs_n(p: dict, ctx: Context, name: str):
    if not (p.get("N") or ctx.collection_size):
        raise MeasureError(name, "needs the collection size: N=... or collection_size")


@register("Fallout", family="set", kind="kw", all_trec=(), params=(_N,), ir_name="Fallout",
          uses_collection_size=True,
          extra={"micro": lambda a, b, c, d, p: safe_div(b, b + d)})
def fallout(ctx: Context, p: dict):
    """Fallout (false-positive rate): the share of the collection's non-relevant documents
    that were retrieved.

    Formula: b / (b + d) (contingency table: a rel. retrieved, b non-rel. retrieved, c rel.
    not retrieved, d non-rel. not retrieved; d = N - a - b - c).
    0/0: b + d = 0 gives 0.
    Reference: Salton & McGill 1983; Manning, Raghavan & Schütze 2008, §8.3.
    """
    _needs_n(p, ctx, "Fallout")
    _, b, _, d = _table(ctx, p)
    return safe_div(b, b + d)


@register("Specificity", family="set", kind="kw", all_trec=(), params=(_N,),
          ir_name="Specificity", uses_collection_size=True,
          extra={"micro": lambda a, b, c, d, p: safe_div(d, b + d)})
def specificity(ctx: Context, p: dict):
    """Specificity (true-negative rate).

    Formula: d / (b + d), d = N - a - b - c.
    0/0: b + d = 0 gives 0.
    Reference: Manning, Raghavan & Schütze 2008, §8.3.
    """
    _needs_n(p, ctx, "Specificity")
    _, b, _, d = _table(ctx, p)
    return safe_div(d, b + d)


@register("NPV", family="set", kind="kw", all_trec=(), params=(_N,), ir_name="NPV",
          uses_collection_size=True,
          extra={"micro": lambda a, b, c, d, p: safe_div(d, c + d)})
def negative_predictive_value(ctx: Context, p: dict):
    """Negative predictive value: the share of the documents not retrieved that are not
    relevant.

    Formula: d / (c + d), d = N - a - b - c.
    0/0: c + d = 0 gives 0.
    Reference: Altman & Bland 1994, Diagnostic tests 2: predictive values.
    """
    _needs_n(p, ctx, "NPV")
    _, _, c, d = _table(ctx, p)
    return safe_div(d, c + d)


@register("FDR", family="set", kind="kw", all_trec=(), ir_name="FDR",
          extra={"micro": lambda a, b, c, d, p: safe_div(b, a + b)})
def false_discovery_rate(ctx: Context, p: dict):
    """False discovery rate: the share of the retrieved documents that are not relevant.

    Formula: b / (a + b) = 1 - precision.
    0/0: nothing retrieved gives 0.
    Reference: Benjamini & Hochberg 1995.
    """
    a, b, _, _ = _table(ctx, p)
    return safe_div(b, a + b)


@register("SetAccuracy", family="set", kind="kw", all_trec=(), params=(_N,),
          ir_name="SetAccuracy",
          uses_collection_size=True,
          extra={"micro": lambda a, b, c, d, p: safe_div(a + d, a + b + c + d)})
def set_accuracy(ctx: Context, p: dict):
    """Set accuracy: the share of the collection classified right (retrieved and relevant,
    or neither). Cranfield's contingency-table measure, called Accuracy before issue #15;
    ``Accuracy`` is ir_measures' ranking accuracy.

    Formula: (a + d) / (a + b + c + d) = (a + d) / N.
    0/0: N = 0 is refused (N is required).
    Reference: Manning, Raghavan & Schütze 2008, §8.3.
    """
    _needs_n(p, ctx, "SetAccuracy")
    a, b, c, d = _table(ctx, p)
    return safe_div(a + d, a + b + c + d)


@register("AP_norm", family="rank", kind="kw", all_trec=(),
          params=(_K_REQUIRED, Param("norm", "enum", "R", "divisor: R (trec_eval's map_cut) or "
                                     "min (min(k, R))", choices=("R", "min"))),
          ir_name="AP")
def average_precision_normalised(ctx: Context, p: dict):
    """Average precision over the top k with a choice of divisor.

    Formula: AP@k = (1 / D) sum_{i <= k: rel(i)} P@i, D = R (norm=R, trec_eval's map_cut)
    or min(k, R) (norm=min, the textbooks' AP@k, which a perfect top k scores 1).
    0/0: D = 0 gives 0.
    Reference: Manning, Raghavan & Schütze 2008, §8.4; trec_eval m_map_cut.c.
    """
    k = p["k"]
    keep = ctx.rel_r <= k
    num = ctx.tsum(ctx.rel_t[keep], ctx.rel_k[keep] / ctx.rel_r[keep])
    den = np.minimum(k, ctx.R) if p["norm"] == "min" else ctx.R
    return safe_div(num, den)


@register("IAP11", family="rank", kind="kw", all_trec=(), ir_name="IAP11")
def eleven_point_interpolated_ap(ctx: Context, p: dict):
    """The textbook 11-point interpolated average precision.

    Formula: mean over r in {0, 0.1, ..., 1} of max{P@i : recall@i >= r} (0 if no rank
    reaches recall r). Unlike trec_eval's iprec_at_recall / 11pt_avg, which map each recall
    level to a count of relevant documents, recall is compared exactly (10 * rel >= r10 * R).
    0/0: R = 0 gives 0.
    Reference: Manning, Raghavan & Schütze 2008, §8.4; Salton & McGill 1983.
    """
    return np.where(ctx.R > 0, interpolated_precision(ctx).sum(axis=1) / 11.0, 0.0)


def interpolated_precision(ctx: Context) -> np.ndarray:
    """(topics x 11) the textbook interpolated precision at recall 0, 0.1, ..., 1: the best
    precision at any rank whose recall reaches the level (exactly: 10 * rel >= level * R);
    0 where no rank does."""
    precision = ctx.rel_k / ctx.rel_r
    out = np.zeros((ctx.T, 11))
    for level in range(11):
        ok = 10 * ctx.rel_k >= level * ctx.R[ctx.rel_t]
        np.maximum.at(out[:, level], ctx.rel_t[ok], precision[ok])
    return out


def _thresholds(text: str | None, top_grade: int, name: str) -> np.ndarray:
    """delta[k] = sum_{j <= k} g_j for k = 0..c (delta[0] = 0): g from ``a:b:c``, or uniform
    over the grades 1..c of the qrels."""
    if text is None:
        c = max(top_grade, 1)
        g = np.full(c, 1.0 / c)
    else:
        try:
            g = np.array([float(x) for x in str(text).split(":")])
        except ValueError:
            raise MeasureError(name, "g must be probabilities per grade, like 0.2:0.3:0.5") \
                from None
        if (g < 0).any() or abs(g.sum() - 1.0) > 1e-9:
            raise MeasureError(name, "the probabilities in g must be >= 0 and sum to 1")
        if top_grade > len(g):
            raise MeasureError(name, f"g gives {len(g)} grades; the qrels have grade "
                                     f"{top_grade}")
    return np.concatenate(([0.0], np.cumsum(g)))


@register("GAP", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(Param("g", "string", None, "probability that a user's relevance threshold "
                        "is each grade 1..c, as a:b:c summing to 1 (default: uniform over the "
                        "grades of the qrels)"),),
          ir_name="GAP")
def graded_average_precision(ctx: Context, p: dict):
    """Graded average precision: AP for users whose relevance threshold is grade i with
    probability g_i.

    Formula: sum_n (x_n / n) sum_{m <= n} x_m delta(min(g_m, g_n)) / sum_i R_i delta(i),
    x_n = [grade of rank n > 0], delta(k) = sum_{j <= k} g_j, R_i the documents of grade i.
    With one grade it is AP.
    0/0: no positive grade gives 0.
    Reference: Robertson, Kanoulas & Yilmaz 2010, Extending average precision to graded
    relevance judgments.
    """
    top = int(max(ctx.qg.max(initial=0), ctx.hl.max(initial=0)))
    delta = _thresholds(p["g"], top, "GAP")
    rel = ctx.hl > 0
    t, r, g = ctx.ht[rel], ctx.hr[rel], ctx.hl[rel]
    inner = np.zeros(len(t))
    for k in range(1, top + 1):
        above = ctx.cumsum_in_topic(t, (g == k).astype(np.int64))  # grade-k docs up to n
        inner += above * delta[np.minimum(k, g)]
    num = ctx.tsum(t, inner / r)
    judged = ctx.qg > 0
    den = ctx.tsum(ctx.qt[judged], delta[np.minimum(ctx.qg[judged], len(delta) - 1)])
    return safe_div(num, den)
