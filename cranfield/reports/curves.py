"""Precision-recall curves, per topic and averaged over topics, as data for plotting.

Per topic: the uninterpolated points (recall and precision at the rank of each relevant
document retrieved) and the textbook 11-point interpolated precision (at recall 0, 0.1, ...,
1, the best precision at any rank whose recall reaches that level). Averaged: the mean of the
11-point curves over the topics the evaluation's aggregates average (trec_eval's set: the
topics with results and judgments; all qrels topics with ``complete_topics``), or over the
``topics`` asked for (a comparison's common topics), so a curve and the table beside it
describe the same topics. Reference: Manning, Raghavan & Schütze 2008, §8.4.

The curve is **not** trec_eval's ``iprec_at_recall``: that maps each recall level r to a
count of relevant documents (``(long)(r·R + 0.9)`` in 9.0.8, ``lround(r·R)`` in 10.0) before
interpolating, while the curve compares recall exactly (``10·rel >= 10r·R``). The two differ
whenever r·R is not a whole number, so the document says which interpolation it holds
(``interpolation: "textbook"``) and the numbers are not to be compared with
``iprec_at_recall_*``; ``IAP11`` is the mean of this curve.
"""

from __future__ import annotations

import numpy as np

from ..evaluate import Evaluation
from ..measures import Context
from ..measures.textbook import interpolated_precision

RECALL_LEVELS = [round(0.1 * i, 1) for i in range(11)]
INTERPOLATION = "textbook"
INTERPOLATION_NOTE = (
    "textbook 11-point interpolation (best precision at any rank whose recall reaches the "
    "level, recall compared exactly; Manning et al. 2008 §8.4); not trec_eval's "
    "iprec_at_recall, which rounds each level to a count of relevant documents, so the two "
    "are not comparable. IAP11 is the mean of this curve.")


def averaged_topics(ev: Evaluation) -> np.ndarray:
    """Per topic of ``ev.ranked``: whether the evaluation's aggregates average it (the rule
    of ``aggregation._aggregate``: every qrels topic with complete_topics, else those the run
    has)."""
    ranked = ev.ranked
    if ev.options["complete_topics"]:
        return np.ones(len(ranked.topics), bool)
    return np.asarray(ranked.in_run, bool).copy()


def precision_recall(ev: Evaluation, *, per_topic: bool = True,
                     relevance_level: int | None = None,
                     topics: list[str] | None = None) -> dict:
    """``{"recall_levels", "mean_interpolated_precision", "topics_averaged",
    "interpolation", "note", "per_topic"}``; ``per_topic[t]`` holds ``recall``, ``precision``
    (one point per relevant document retrieved, in rank order) and
    ``interpolated_precision`` (11 values). Averaged over the topics ``ev``'s aggregates
    average, or over ``topics`` (each must be one of those; ``ValueError`` otherwise)."""
    opts = ev.options
    ranked = ev.ranked
    ctx = Context(ranked, relevance_level or opts["relevance_level"], opts["profile"],
                  opts["collection_size"])
    curves = interpolated_precision(ctx)
    use = averaged_topics(ev)
    if topics is not None:
        index = {t: i for i, t in enumerate(ranked.topics)}
        outside = [t for t in topics if t not in index or not use[index[t]]]
        if outside:
            raise ValueError(f"{len(outside)} topic(s) are not averaged by the evaluation, "
                             f"so they have no curve: {outside[:5]}")
        use = np.zeros(len(ranked.topics), bool)
        use[[index[t] for t in topics]] = True
    n = int(use.sum())
    mean = curves[use].sum(axis=0) / n if n else np.zeros(11)
    out: dict = {"recall_levels": RECALL_LEVELS,
                 "mean_interpolated_precision": mean.tolist(),
                 "topics_averaged": n,
                 "interpolation": INTERPOLATION,
                 "note": INTERPOLATION_NOTE}
    if per_topic:
        precision = ctx.rel_k / ctx.rel_r
        recall = np.divide(ctx.rel_k, ctx.R[ctx.rel_t], out=np.zeros(len(ctx.rel_k)),
                           where=ctx.R[ctx.rel_t] > 0)
        bounds = ctx.rel_start.tolist()
        out["per_topic"] = {
            topic: {"recall": recall[bounds[i]:bounds[i + 1]].tolist(),
                    "precision": precision[bounds[i]:bounds[i + 1]].tolist(),
                    "interpolated_precision": curves[i].tolist()}
            for i, topic in enumerate(ranked.topics) if use[i]}
    return out
