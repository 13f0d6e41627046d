"""Summaries of per-topic values: trec_eval's summary of an evaluation (each topic's value
added in turn in a double, in topic order: means, sums, geometric means; :func:`summary`),
:func:`trec_mean` for other means over topics, and, with topic metadata
(:mod:`cranfield.inputs.segments`), an evaluation's per-segment summaries and weighted means
(:func:`segment_aggregates`, :func:`weighted_value`). Room: measures."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import DEFAULT_PROFILE, PROFILES

if TYPE_CHECKING:
    from ..inputs.ranking import Ranked
    from ..inputs.run_qrels import Qrels
    from ..inputs.segments import TopicMetadata

MIN_GEO_MEAN = 1e-5  # trec_eval.h: values are floored here before the geometric mean


def _aggregate(instances, values, ranked: Ranked, qrels: Qrels, runid: str,
               complete_topics: bool, profile: str = DEFAULT_PROFILE,
               zscored: bool = False) -> dict[str, Any]:
    """trec_eval's summary (trec_eval.c, meas_acc.c, meas_avg.c): each averaged topic's
    value added into a double in turn, in topic order (strcmp, the order of ``ranked``),
    then divided by the topic count. The order and the one-at-a-time adds are what make its
    last printed digit when a mean sits on x.xxxx5 (numpy's pairwise sum can print the other
    one), so the sums here are sequential: :func:`_sequential_sum`. ``zscored`` (-Z): the
    values are z-scores (gm_*'s of the logs), summed as doubles."""
    out: dict[str, Any] = {}
    T = len(ranked.topics) if complete_topics else int(ranked.in_run.sum())
    use = slice(None) if complete_topics or T == len(ranked.topics) else ranked.in_run
    # 9.0.8 -c never evaluates a qrels topic the run lacks: gm_* adds log(1e-5) for each
    # after the sum (meas_avg.c); 10.0 evaluates it, so its log is added in its place
    patched = complete_topics and not PROFILES[profile].keeps_missing_topic_values
    for inst in instances:
        how = inst.measure.aggregate
        v = values[inst.key][use]
        if how == "none":
            continue
        if how == "runid":
            out[inst.key] = runid
        elif how == "num_q":
            out[inst.key] = T
        elif how == "sum":
            if inst.measure.name == "num_rel" and complete_topics:
                # trec_eval -c recomputes num_rel over all qrels, counting grade > 0 (m_num_rel.c)
                out[inst.key] = int((qrels.grades > 0).sum())
            elif zscored:
                out[inst.key] = _sequential_sum(v.astype(np.float64))
            else:
                out[inst.key] = int(v.sum())
        elif how == "gmean":
            v = values[inst.key][ranked.in_run] if patched else v
            # math.log/exp: the C library's, as trec_eval calls them (numpy's own SIMD
            # log may differ in the last bit)
            if zscored:  # already z-scores of the logs (cranfield.inputs.zscores)
                logs = v.astype(np.float64).tolist()
            else:
                logs = [math.log(x) for x in np.maximum(v.astype(np.float64), MIN_GEO_MEAN)]
            total = _sequential_sum(np.asarray(logs, np.float64))
            if patched:
                total += (T - len(v)) * math.log(MIN_GEO_MEAN)
            out[inst.key] = math.exp(total / T) if T else 0.0
        elif how == "mean_reported":
            # ir_measures' mean (Accuracy): over the topics that have a value, NaN if none
            v = v.astype(np.float64)[~np.isnan(v)]
            out[inst.key] = _sequential_sum(v) / len(v) if len(v) else math.nan
        else:
            v = v if v.dtype == np.float64 else v.astype(np.float64)
            out[inst.key] = _sequential_sum(v) / T if T else 0.0
    return out


def summary(instances, values, ranked, qrels, runid: str, complete_topics: bool,
            profile: str = DEFAULT_PROFILE, zscored: bool = False) -> dict[str, Any]:
    """trec_eval's summary of per-topic ``values`` over the topics of ``ranked`` (anything
    with ``topics`` and ``in_run``; ``qrels.grades`` is read for num_rel's -c count): the
    ``aggregate`` of an evaluation, formed for a subset of its topics too (a segment's,
    :mod:`cranfield.inputs.segments`)."""
    return _aggregate(instances, values, ranked, qrels, runid, complete_topics, profile,
                      zscored)


def trec_mean(values) -> float:
    """The mean of ``values`` as trec_eval forms it: added in turn in a double, in the order
    given (topic order, strcmp), then divided by their count (0.0 for none). Other means
    over topics (a comparison's) use it so that they print the digit trec_eval prints."""
    v = np.asarray(values, dtype=np.float64)
    return _sequential_sum(v) / len(v) if len(v) else 0.0


def _sequential_sum(v: np.ndarray) -> float:
    """v[0] + v[1] + ... one add at a time in a double, as trec_eval accumulates
    (``accum += value`` per topic). Not ``v.sum()`` (pairwise) nor ``math.fsum`` (exact):
    ``np.add.accumulate`` adds in order, one element after the other."""
    if not len(v):
        return 0.0
    return float(np.add.accumulate(v)[-1])


# --------------------------------------------------------------------------------------------
# An evaluation's segments and weighted means
# --------------------------------------------------------------------------------------------

def segment_aggregates(md: TopicMetadata, instances, values: dict[str, np.ndarray], ranked,
                       qrels, runid: str, options: dict) -> tuple[dict, dict]:
    """(segments, weighted) of one evaluation: ``segments`` {label: {"topics": n,
    "aggregate": {key: value}}} (labels in byte order), ``weighted`` {key: value}. ``values``
    hold one value per topic of ``ranked.topics``; ``qrels`` is read only with
    ``complete_topics`` (num_rel's -c summary counts grade > 0 over the qrels)."""
    complete = bool(options.get("complete_topics"))
    profile = options["profile"]
    zscored = bool(options.get("zscores"))
    topics = list(ranked.topics)
    in_run = np.asarray(ranked.in_run, bool)
    evaluated = np.ones(len(topics), bool) if complete else in_run
    grades_by_topic = _positive_grades(qrels, topics) if complete else None
    kept = [i for i in instances if i.measure.aggregate not in ("runid", "none")
            and i.measure.name not in ("runid", "relstring")]
    segments: dict[str, dict] = {}
    arrays = {i.key: np.asarray(values[i.key]) for i in kept}
    for label, rows in md.segment_rows(topics).items():
        rows = rows[evaluated[rows]]  # ascending: the segment's topics in the run's order
        n = int(rows.size)
        if not n:
            segments[label] = {"topics": 0, "aggregate": {}}
            continue
        sub = SimpleNamespace(topics=[topics[i] for i in rows.tolist()], in_run=in_run[rows])
        sub_values = {key: arr[rows] for key, arr in arrays.items()}
        # the summary reads qrels only for -c's num_rel (its judgments with grade > 0): the
        # segment's count of them stands in for its judgments
        sub_qrels = SimpleNamespace(grades=np.ones(int(grades_by_topic[rows].sum()), np.int64)
                                    if complete else np.zeros(0, np.int64))
        segments[label] = {"topics": n, "aggregate": summary(
            kept, sub_values, sub, sub_qrels, runid, complete, profile, zscored)}
    w = md.weight_array(topics)[evaluated]
    weighted: dict[str, Any] = {}
    for inst in kept:
        v = np.asarray(values[inst.key])[evaluated]
        if inst.measure.name == "num_rel" and complete:
            v = grades_by_topic  # as the -c summary: grade > 0 over all qrels of the topic
        weighted[inst.key] = weighted_value(inst.measure.aggregate, v, w, zscored)
    return segments, weighted


def weighted_value(how: str, v: np.ndarray, w: np.ndarray, zscored: bool = False) -> float:
    """One measure's weighted aggregate of per-topic values ``v`` with weights ``w`` (``how``:
    the measure's aggregate: mean, sum, num_q, gmean; mean_reported: the weighted mean over
    the topics that have a value, NaN being none)."""
    v = np.asarray(v, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    if how == "mean_reported":
        has = ~np.isnan(v)
        v, w = v[has], w[has]
    total = w.sum()
    if how == "num_q":
        return float(total)
    if how == "sum":
        return float(np.multiply(v, w).sum())
    if how == "gmean" and not zscored:
        v = np.log(np.maximum(v, MIN_GEO_MEAN))
    if total == 0:
        mean = math.nan
    else:  # numpy.average's own arithmetic: (a * w).sum() / w.sum()
        mean = float(np.multiply(v, w).sum() / total)
    return math.exp(mean) if how == "gmean" and math.isfinite(mean) else mean


def _positive_grades(qrels, topics: list[str]) -> np.ndarray:
    """Per topic of ``topics``: its qrels' judgments with grade > 0."""
    counts = np.bincount(np.asarray(qrels.topic_index)[np.asarray(qrels.grades) > 0],
                         minlength=len(qrels.topics))
    by_name = dict(zip(qrels.topics, counts.tolist(), strict=True))
    return np.asarray([by_name.get(t, 0) for t in topics], dtype=np.int64)


def unlabelled(md: TopicMetadata, evaluated: list[str]) -> list[str]:
    """The evaluated topics the metadata does not name (they weigh 1, carry no label)."""
    return [t for t in evaluated if t not in md.labels]

