"""What a comparison compares (compare room), from the runs' evaluations: the evaluation
options they must share, the measures they can be compared on (and each measure's key in
every evaluation, :func:`measure_key_in`), the topics common to them, the run pairs, and
each run's input lint as the comparison's warnings.
"""

from __future__ import annotations

import numpy as np

from ..errors import EvaluationError, MeasureError
from ..evaluate import Evaluation
from ..measures.names import Instance, resolve
from ..measures.registry import NICKNAMES
from .comparison_settings import EVAL_OPTIONS


def shared_options(run_names: list[str], evs: list[Evaluation]) -> dict:
    """The evaluation options, which must agree: numbers computed with different relevance
    levels, depths or profiles are not comparable."""
    first = evs[0].options
    for name, ev in zip(run_names[1:], evs[1:], strict=True):
        for opt in EVAL_OPTIONS:
            if ev.options.get(opt) != first.get(opt):
                raise EvaluationError(
                    f"runs {run_names[0]!r} and {name!r} were evaluated with different "
                    f"{opt} ({first.get(opt)!r} and {ev.options.get(opt)!r}): their scores "
                    "are not comparable")
    return {opt: first.get(opt) for opt in EVAL_OPTIONS}


def comparable_measures(run_names: list[str], evs: list[Evaluation], measures,
                        warnings: list[dict]) -> tuple[list[list[str]], list[dict]]:
    """For each compared measure, its key in every evaluation, and its description."""
    first = evs[0]
    profile = first.options["profile"]
    if measures is None:
        wanted = [(inst, False) for inst in first.instances]
    else:
        names = [measures] if isinstance(measures, str) else list(measures)
        wanted = []
        for name in names:
            insts = resolve([name], profile)
            explicit = len(insts) == 1 and name.strip() not in NICKNAMES
            wanted += [(inst, explicit) for inst in insts]
    keys: list[list[str]] = []
    described: list[dict] = []
    seen: set[str] = set()
    skipped: list[str] = []
    for inst, explicit in wanted:
        run_keys = [measure_key_in(ev, inst, name) for name, ev in zip(run_names, evs, strict=True)]
        why = _not_comparable(inst, [ev.values[k] for ev, k in zip(evs, run_keys, strict=True)])
        if why:
            if explicit:
                raise MeasureError(inst.key, why)
            skipped.append(inst.key)
            continue
        canonical = first.measures[run_keys[0]]["canonical"]
        if canonical in seen:
            continue
        seen.add(canonical)
        keys.append(run_keys)
        described.append({"key": run_keys[0], "canonical": canonical,
                          "family": first.measures[run_keys[0]]["family"]})
    if skipped:
        warnings.append({"code": "measures-not-comparable",
                         "message": f"skipped {', '.join(skipped)}: no per-topic numeric "
                                    "values to compare"})
    if not keys:
        raise MeasureError(", ".join(skipped) or "(none)", "no measure with per-topic values "
                           "to compare")
    return keys, described


def measure_key_in(ev: Evaluation, inst: Instance, run_name: str) -> str:
    """The key ``inst`` is reported under in ``ev``: same canonical name, else same key;
    :class:`MeasureError` naming ``run_name`` if ``ev`` has no such measure (also how a
    recorded result is checked before a comparison uses it)."""
    opts = ev.options
    canonical = inst.canonical(opts["profile"], opts["relevance_level"], opts["judged_only"],
                               opts["depth"])
    for key, desc in ev.measures.items():
        if desc["canonical"] == canonical:
            return key
    if inst.key in ev.values:
        return inst.key
    raise MeasureError(inst.key, f"was not evaluated for run {run_name!r}")


def _not_comparable(inst: Instance, arrays: list[np.ndarray]) -> str | None:
    if not inst.measure.per_topic:
        return "has no per-topic values to compare (its summary is not a mean over topics)"
    if any(np.asarray(a).dtype.kind not in "biuf" for a in arrays):
        return "has no numeric per-topic values to compare"
    return None


def runs_lint(run_names: list[str], evs: list[Evaluation], interface: str) -> list[dict]:
    """Every run's input lint (unjudged documents in the top 10, ties at cutoffs, topics
    missing…): an evaluation's own, or the one its document kept (``Evaluation.lint``), each
    warning naming its run (``run``, and in its message) and the options as ``interface``
    spells them."""
    from ..reports.result_document import warnings_for, warnings_for_interface

    out: list[dict] = []
    for name, ev in zip(run_names, evs, strict=True):
        if ev.lint is not None:  # made for the API when its document was
            lint = warnings_for_interface(ev.lint, interface)
        elif ev.ranked is not None:
            lint = warnings_for(ev, interface)
        else:
            lint = []
        out += [{**w, "run": name, "message": f"run {name!r}: {w.get('message', '')}"}
                for w in lint]
    return out


def _available(ev: Evaluation) -> np.ndarray:
    """The topics ``ev`` has values for that count: all of them with complete_topics (as
    trec_eval -c), else those in both run and qrels."""
    if ev.options.get("complete_topics"):
        return np.asarray(ev.topic_order, dtype=str)
    return np.asarray(ev.topics.evaluated, dtype=str)


def common_topics(run_names: list[str], evs: list[Evaluation], warnings: list[dict],
                  interface: str = "api") -> tuple[list[str], list[np.ndarray]]:
    """The topics of every run (in code-point order, which is trec_eval's byte order for
    UTF-8), and for each run the rows of ``values`` holding them."""
    sets = [_available(ev) for ev in evs]
    common = sets[0]
    for s in sets[1:]:
        common = np.intersect1d(common, s, assume_unique=True)
    if common.size == 0:
        raise EvaluationError("no topic was evaluated for every run: nothing to compare",
                              code="no-overlap")
    union = sets[0]
    for s in sets[1:]:
        union = np.union1d(union, s)
    dropped = np.setdiff1d(union, common, assume_unique=True)
    if dropped.size:
        lacking = [f"{name!r} lacks {union.size - s.size}"
                   for name, s in zip(run_names, sets, strict=True)
                   if s.size < union.size]
        from ..reports.result_document import option_name

        warnings.append({"code": "topics-not-in-all-runs",
                         "message": f"{dropped.size} topic(s) evaluated for some runs but not "
                                    f"all are left out ({'; '.join(lacking)}); use "
                                    f"{option_name('complete_topics', interface)} to score "
                                    "missing topics as 0",
                         "topics": dropped.tolist(), "option": "complete_topics"})
    rows = []
    for ev in evs:
        order = np.asarray(ev.topic_order, dtype=str)
        _, _, where = np.intersect1d(common, order, assume_unique=True, return_indices=True)
        rows.append(where)
    return common.tolist(), rows


def run_pairs(run_names: list[str], baseline: str | None) -> list[tuple[int, int]]:
    """(a, b) run indices: each run against the baseline, or every pair i < j."""
    if baseline is not None:
        base = run_names.index(baseline)
        return [(base, j) for j in range(len(run_names)) if j != base]
    return [(i, j) for i in range(len(run_names)) for j in range(i + 1, len(run_names))]


def aggregate_of(ev: Evaluation, key: str) -> str:
    """How ``ev`` aggregates the measure it reports under ``key`` (mean, mean_reported...)."""
    for inst in ev.instances:
        if inst.key == key:
            return inst.measure.aggregate
    return "mean"
