"""Precision-recall curves, per topic and averaged over topics, as data for plotting.

Per topic: the uninterpolated points (recall and precision at the rank of each relevant
document retrieved) and the textbook 11-point interpolated precision (at recall 0, 0.1, ...,
1, the best precision at any rank whose recall reaches that level). Averaged: the mean of the
11-point curves over the topics the evaluation averages (trec_eval's set; all qrels topics
with ``complete_topics``). Reference: Manning, Raghavan & Schütze 2008, §8.4.
"""

from __future__ import annotations

import numpy as np

from .evaluate import Evaluation
from .measures import Context
from .measures.extended import interpolated_precision

RECALL_LEVELS = [round(0.1 * i, 1) for i in range(11)]


def precision_recall(ev: Evaluation, *, per_topic: bool = True,
                     relevance_level: int | None = None) -> dict:
    """``{"recall_levels", "mean_interpolated_precision", "topics_averaged", "per_topic"}``;
    ``per_topic[t]`` holds ``recall``, ``precision`` (one point per relevant document
    retrieved, in rank order) and ``interpolated_precision`` (11 values)."""
    opts = ev.options
    ranked = ev.ranked
    ctx = Context(ranked, relevance_level or opts["relevance_level"], opts["profile"],
                  opts["collection_size"])
    curves = interpolated_precision(ctx)
    use = np.ones(len(ranked.topics), bool) if opts["complete_topics"] else ranked.in_run
    n = int(use.sum())
    mean = curves[use].sum(axis=0) / n if n else np.zeros(11)
    out: dict = {"recall_levels": RECALL_LEVELS,
                 "mean_interpolated_precision": mean.tolist(),
                 "topics_averaged": n}
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
