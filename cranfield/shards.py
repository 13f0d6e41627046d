"""One evaluation from evaluations of a run's shards (disjoint sets of its topics):
:func:`combine`, and :func:`evaluate_missing_topics` for the qrels topics the run lacks
(complete_topics). Room: top (beside evaluate)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import EvaluationError
from .evaluate import Evaluation, evaluate, finish_evaluation
from .inputs.io import read_qrels
from .inputs.ranking import Ranked
from .inputs.run_qrels import Qrels, Run


def evaluate_missing_topics(qrels: Qrels, topics: list[str], measures, **options
                            ) -> Evaluation:
    """The per-topic values complete_topics gives qrels topics a run lacks (to combine with
    the shards of that run)."""
    empty = Run([], np.zeros(0, np.int32), np.zeros(0, dtype=object), np.zeros(0), "", "run")
    return evaluate(qrels.subset(topics), empty, measures, require_overlap=False,
                    **dict(options, complete_topics=True))


def combine(parts: list[Evaluation], qrels: Any, run_topics: list[str], runid: str
            ) -> Evaluation:
    """One evaluation from evaluations of disjoint sets of topics (shards of one run, each
    evaluated with the same measures and options against the qrels of its topics; with
    complete_topics, the qrels topics missing from the run belong to exactly one part).

    Per-topic values are taken as they are; aggregates are recomputed over all topics in
    trec_eval order, so the result equals evaluating the whole run at once.
    """
    from .inputs.run_qrels import byte_key

    qrels_obj = read_qrels(qrels)
    topics = [t for p in parts for t in p.topic_order]
    if len(set(topics)) != len(topics):
        raise EvaluationError("the parts share topics: they are not shards of one run")
    order = sorted(range(len(topics)), key=lambda i: byte_key(topics[i]))
    position = np.empty(len(topics), dtype=np.int64)
    position[order] = np.arange(len(topics))
    offsets = np.cumsum([0] + [len(p.topic_order) for p in parts])

    def joined(get) -> np.ndarray:
        return np.concatenate([np.asarray(get(p)) for p in parts])[order]

    values = {inst.key: joined(lambda p, k=inst.key: p.values[k]) for inst in parts[0].instances}
    r = [p.ranked for p in parts]
    hit_topic = np.concatenate([position[o + x.hit_topic] for o, x in zip(offsets, r,
                                                                            strict=False)])
    hit_rank = np.concatenate([x.hit_rank for x in r])
    hit_label = np.concatenate([x.hit_label for x in r])
    srt = np.lexsort((hit_rank, hit_topic))
    q_topic = np.concatenate([position[o + x.q_topic] for o, x in zip(offsets, r, strict=False)])
    q_grade = np.concatenate([x.q_grade for x in r])
    q_srt = np.argsort(q_topic, kind="stable")
    ranked = Ranked([topics[i] for i in order], joined(lambda p: p.ranked.num_ret),
                    hit_topic[srt], hit_rank[srt], hit_label[srt], q_topic[q_srt],
                    q_grade[q_srt], joined(lambda p: p.ranked.in_run),
                    {k: joined(lambda p, k=k: p.ranked.cutoff_ties[k])
                     for k in parts[0].ranked.cutoff_ties},
                    *((np.concatenate([getattr(x, f) for x in r])[srt]
                       for f in ("hit_tie_first", "hit_tie_last"))
                      if all(x.hit_tie_first is not None for x in r) else ()))
    return finish_evaluation(parts[0].instances, values, ranked, qrels_obj, run_topics, runid,
                             dict(parts[0].options), parts[0].topic_metadata)
