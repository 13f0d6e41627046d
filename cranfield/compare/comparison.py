"""Comparing systems over topics: per-run means, paired tests for every measure × pair, a
correction for multiple comparisons; a regression gate for CI jobs is checked on the result
(:mod:`cranfield.compare.gate`), and :mod:`cranfield.compare.comparison_text` prints it.

``compare`` evaluates each run against one qrels and hands the evaluations to
``compare_evaluations``, which does the statistics (the service calls it directly with stored
evaluations). Every paired quantity is ``diff = b − a``: positive means run ``b`` scored
higher than run ``a`` (with a baseline, ``a`` is the baseline). All measure × pair
differences form one ``(n_topics, n_measures · n_pairs)`` matrix, and each test runs once on
it (cranfield.compare.stats is batched), so ten runs over thousands of topics take seconds.

The result is a JSON-ready document (plain floats, ints, strings; NaN and ±inf become None).

Compare room. Below it: what is compared (:mod:`cranfield.compare.comparison_scope`), the
statistics (:mod:`cranfield.compare.comparison_statistics`), the settings
(:mod:`cranfield.compare.comparison_settings`), the work budget
(:mod:`cranfield.compare.comparison_work`) and the gate (:mod:`cranfield.compare.gate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import InputError
from ..evaluate import Evaluation
from ..evaluate_checks import declared_gains, plan_evaluation
from ..evaluate_many import evaluate_many
from ..inputs import run_naming
from ..inputs.io import read_qrels
from ..inputs.swapped import refuse_swapped_runs
from ..measures import resolve_profile
from ..measures.names import needs_subtopics, resolve
from .comparison_scope import (
    aggregate_of,
    common_topics,
    comparable_measures,
    run_pairs,
    runs_lint,
    shared_options,
)
from .comparison_settings import EVAL_OPTIONS, ComparisonSettings, num, percent
from .comparison_statistics import (
    left_out_warnings,
    pair_results,
    run_summary,
    topics_with_values,
)
from .comparison_work import check_work, comparison_work
from .gate import gate_results, gate_specs

DEFAULT_MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.1000", "recip_rank"]
# what compare() passes to each run's evaluation: the options the runs share, and the
# qrels' declared gains (issue #31), which settle the profile when none is named
COMPARE_EVAL_OPTIONS = (*EVAL_OPTIONS, "gains")

#: names for runs given by file (moved below, to cranfield.inputs.run_naming, where
#: cranfield.evaluate_many names them too); the CLI and the service take it from here
run_names = run_naming.run_names


# --------------------------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------------------------

def compare(qrels: Any, runs: dict[str, Any], measures: list[str] | str | None = None, *,
            baseline: str | None = None, tests=("t", "randomization", "bootstrap"),
            wilcoxon: bool = False, correction: str = "holm", alpha: float = 0.05,
            n_permutations: int = 10000, n_samples: int = 10000, seed: int = 0,
            largest_losses: int = 5, per_topic: bool = False, curves: bool = False,
            gate: Any = None, max_work: int | None = None, interface: str = "api",
            topic_metadata: Any = None, **eval_options) -> dict:
    """Evaluate every run of ``runs`` ({name: run}) against ``qrels`` and compare them.

    Each run is anything :func:`cranfield.evaluate` accepts (a path, TREC text, a
    ``{topic: {docid: score}}`` mapping, a Run); ``qrels`` likewise (read once).
    ``measures``: names as for evaluate; default ``DEFAULT_MEASURES`` (map, ndcg_cut.10, P.10,
    recall.1000, recip_rank); a gate's measure is added when missing. ``eval_options`` are
    evaluate's: ``profile``, ``relevance_level``, ``judged_only``, ``depth``,
    ``complete_topics``, ``collection_size``, ``gains``. ``gains="real"`` declares real-valued
    gains (issue #31) as it does to evaluate: with no profile named every run is evaluated
    under ``cranfield``'s, which reads them (gain-based measures use them as they are, a
    binary measure without ``rel=`` is refused naming it); a trec_eval profile named beside
    it reads the qrels as trec_eval does and refuses a grade that is not an integer as
    without the declaration. Everything else (``max_work`` too), and the document returned,
    is as :func:`compare_evaluations`.
    """
    refuse_swapped_runs(qrels, runs)  # code written for the old order (runs first)
    unknown = sorted(set(eval_options) - set(COMPARE_EVAL_OPTIONS))
    if unknown:
        raise TypeError(f"compare() got unexpected option(s) {unknown}; evaluation options "
                        f"are {list(COMPARE_EVAL_OPTIONS)}")
    settings = ComparisonSettings.check(runs, baseline, tests, wilcoxon, correction, alpha,
                                        n_permutations, n_samples, seed, largest_losses)
    gates = gate_specs(gate)
    # the profile and gains as evaluate settles them (a Qrels declaring real gains, and no
    # profile named: cranfield's), passed on as settled so every run is evaluated so
    gains = declared_gains(qrels, eval_options.get("profile"), eval_options.get("gains"))
    profile = resolve_profile(eval_options.get("profile"), gains)
    eval_options = {**eval_options, "profile": profile,
                    **({"gains": gains} if gains is not None else {})}
    names = with_gate_measures(
        [measures] if isinstance(measures, str) else list(measures or DEFAULT_MEASURES),
        gates, profile)
    # evaluate's refusals of its options and measures (an unknown gains value, a binary
    # measure without rel= beside real gains...) before the qrels are read, in its order;
    # the plan says how the qrels' grades are read ("integer" under a trec_eval profile)
    plan = plan_evaluation(names, **eval_options)
    qrels_obj = read_qrels(qrels, diversity=needs_subtopics(names, profile),
                           gains=plan.gains or "integer")
    evaluations = evaluate_many(qrels_obj, runs, names, **eval_options)
    return compare_evaluations(evaluations, names, gate=gates or None, **settings.as_kwargs(),
                               per_topic=per_topic, curves=curves, max_work=max_work,
                               interface=interface, topic_metadata=topic_metadata)


def with_gate_measures(names: list[str], gates, profile: str) -> list[str]:
    """``names`` and the measure of each gate (a :class:`Gate` or its dict) they do not
    already cover (by key, so ``AP`` counts as ``map``): a gated measure must be compared."""
    names = list(names)
    wanted = {i.key for n in names for i in resolve([n], profile)}
    for spec in gates:
        measure = spec["measure"] if isinstance(spec, Mapping) else spec.measure
        if not {i.key for i in resolve([measure], profile)} <= wanted:
            names.append(measure)
    return names


def compare_evaluations(evaluations: dict[str, Evaluation],
                        measures: list[str] | str | None = None, *,
                        baseline: str | None = None, tests=("t", "randomization", "bootstrap"),
                        wilcoxon: bool = False, correction: str = "holm", alpha: float = 0.05,
                        n_permutations: int = 10000, n_samples: int = 10000, seed: int = 0,
                        largest_losses: int = 5, per_topic: bool = False,
                        curves: bool = False, gate: Any = None,
                        max_work: int | None = None, interface: str = "api",
                        topic_metadata: Any = None) -> dict:
    """Compare runs from their evaluations ({name: Evaluation}, at least two, all computed with
    the same options against the same qrels).

    Measures: ``measures`` names (as evaluate takes them) matched to each evaluation's
    measures by canonical name (so ``AP`` finds ``map``), or None for every comparable
    measure of the first evaluation. Only per-topic numeric measures can be compared: naming
    ``gm_map``, ``runid``, ``num_q`` or ``relstring`` raises MeasureError ("has no per-topic
    values to compare"); a nickname (``official``) skips them with a warning.

    Topics: the topics every run was evaluated on (with ``complete_topics`` evaluations,
    every qrels topic, missing ones scored 0 as trec_eval -c does). Topics some run lacks are
    left out and listed in a ``topics-not-in-all-runs`` warning, so a run's ``mean`` (over the
    common topics) can differ from its own trec_eval ``aggregate``; both are reported.

    Pairs: with ``baseline``, every other run against it (a = baseline, b = the other);
    without, every pair i < j in the order given (a = the earlier run). Per measure × pair:
    mean of ``d = b − a`` with its Student-t CI; the tests in ``tests`` (``t``: paired
    t-test; ``randomization``: sign-flip test, exact over all 2^n sign vectors when
    n ≤ 16, else ``n_permutations`` random ones; ``bootstrap``: ``n_samples`` paired
    resamples, percentile CI and shift p-value, with a ``bootstrap-few-topics`` warning below
    ``BOOTSTRAP_MIN_TOPICS`` (30) topics, where it rejects a true null too often;
    ``wilcoxon`` when ``wilcoxon`` is set or listed: Cranfield's own signed-rank test, its
    ``method`` exact or normal as :func:`cranfield.compare.stats.wilcoxon_test` states), all seeded
    by ``seed``; Cohen's d_z; wins/ties/losses of b (d > 0, = 0, < 0);
    and ``largest_losses``: up to that many topics with d < 0, most negative first (ties in
    topic order). Formulas and edge cases: :mod:`cranfield.compare.stats`.

    Multiple comparisons: each test's p-values are adjusted over the whole family of
    measure × pair comparisons with ``correction`` (holm, bonferroni, bh or none;
    :func:`cranfield.compare.stats.correct_p_values`); ``significant`` is ``p_adjusted < alpha``.
    Confidence intervals (each run's mean, the mean difference, the bootstrap's) are at level
    1 − ``alpha`` and are NOT adjusted for multiple comparisons; ``ci`` says so.

    A measure whose per-topic NaN means "no value" (aggregate ``mean_reported``: ir_measures'
    ``Accuracy@k``, no relevant document in the top k) is compared over the topics where
    every run has a value (its summary means, tests and wins/ties/losses), as ir_measures'
    own mean leaves such a topic out; a ``topics-without-value`` warning names the topics
    left out and each pair counts them (``n_topics``, ``topics_without_value``). Any other
    difference column with a non-finite per-topic value (a measure's 0/0), or with no topic
    left, is not tested: ``tested`` is false, its numbers (wins/ties/losses too) are None
    and a ``nan-values`` warning names it. ``per_topic`` adds every
    run's per-topic values over the common topics; ``curves`` each run's mean 11-point
    interpolated precision-recall curve (over the common topics, as the tables). ``gate``: a
    :class:`Gate`, a dict of its fields, the text ``MEASURE:MAX_DROP[%][@ALPHA]``, or a list
    of them; the document then carries ``gate``, the result of :func:`gate` (baseline
    defaults to ``baseline``, else the first run; the gate's p-values are adjusted over its
    own checks only; verdict pass, fail or undecided). Reference: Sakai 2014, "Statistical
    reform in information retrieval?", SIGIR Forum.

    Work: with ``max_work`` (or inside ``with work_budget(limit)``), a comparison whose
    :func:`comparison_work` exceeds it raises :class:`WorkBudgetError` as soon as the
    measures and common topics are known, before any array of the comparison is made. The
    resampling's memory does not grow with the resamples (:mod:`cranfield.compare.stats` works in
    chunks).

    ``interface`` (``api`` or ``cli``): how warnings name an option (``complete_topics`` or
    ``-c``), as :func:`cranfield.reports.result_document.option_name` spells it.

    ``topic_metadata`` (:func:`cranfield.inputs.segments.read_topic_metadata`'s input): the
    document gains ``segments`` {label: {"topics", "family", "correction", "summary",
    "pairs", "warnings"}}: each segment's common topics compared as the whole (the same
    tests, seeds and correction method), its p-values adjusted over its own family (that
    segment's measure × pair comparisons; ``family`` names it); and ``weighted`` {measure:
    {run: weighted mean over the common topics}} (a topic the metadata lacks weighs 1). The
    work budget counts every segment's comparison besides the whole one.
    :func:`cranfield.compare.segment_comparison.segment_document` gives one segment as a comparison
    document (what a gate on a segment judges).
    """
    settings = ComparisonSettings.check(evaluations, baseline, tests, wilcoxon, correction,
                                        alpha, n_permutations, n_samples, seed, largest_losses)
    specs = gate_specs(gate)
    for spec in specs:  # before the work, not after it
        if spec.test not in settings.tests:
            raise InputError("gate", f"the gate uses the {spec.test} test, which is not among "
                             f"the tests run ({', '.join(settings.tests)})", field="gate.test")
    run_names = list(evaluations)
    evs = [evaluations[n] for n in run_names]
    options = shared_options(run_names, evs)
    if all(ev.options.get("gains") == "real" for ev in evs):  # as each evaluation says
        options["gains"] = "real"  # (issue #31; integer grades: no key, as before)
    warnings: list[dict] = []
    keys, described = comparable_measures(run_names, evs, measures, warnings)
    topics, rows = common_topics(run_names, evs, warnings, interface)
    pair_runs = run_pairs(run_names, settings.baseline)
    md = masks = None
    sizes: list[int] = []
    if topic_metadata is not None:
        from ..inputs.segments import read_topic_metadata
        from ..measures.budget import check_segments

        md = read_topic_metadata(topic_metadata)
        check_segments(None, 0, len(md.segment_names()))  # MAX_SEGMENTS, before any work
        # each segment's common topics, in one pass over the topics' labels
        sizes = [int(r.size) for r in md.segment_rows(topics).values()]
    check_work(comparison_work(len(pair_runs), len(keys), len(topics), settings.tests,
                               settings.n_permutations, settings.n_samples, sizes),
                max_work)
    if md is not None:  # the masks (labels x topics) once the work is within the budget
        from .segment_comparison import segment_masks

        masks = segment_masks(md, topics)
    # values[m, r, t]: measure m of run r on common topic t
    values = np.empty((len(keys), len(evs), len(topics)))
    for m, run_keys in enumerate(keys):
        for r, ev in enumerate(evs):
            values[m, r] = np.asarray(ev.values[run_keys[r]], dtype=np.float64)[rows[r]]
    measure_keys = [k[0] for k in keys]
    aggregates = [aggregate_of(evs[0], k[0]) for k in keys]
    # use[m, t]: whether topic t counts for measure m (Accuracy: every run has a value there)
    use = topics_with_values(aggregates, values)
    warnings += left_out_warnings(measure_keys, aggregates, topics, use)
    doc: dict[str, Any] = {
        "runs": [{"name": n, "runid": ev.runid, "topics_evaluated": len(ev.topics.evaluated)}
                 for n, ev in zip(run_names, evs, strict=True)],
        "baseline": settings.baseline,
        "measures": described,
        "topics": topics,
        "alpha": settings.alpha,
        "correction": {"method": settings.correction, "family_size": {}},
    }
    level = 1.0 - settings.alpha
    doc["ci"] = {"level": level, "adjusted": False,
                 "note": f"confidence intervals are {percent(level)}% (1 − alpha) and not "
                         "adjusted for multiple comparisons (the p-values are, by "
                         f"{settings.correction})"}
    doc["summary"] = run_summary(measure_keys, run_names, topics, evs, keys, values, warnings,
                                 level, use)
    pairs, family = pair_results(measure_keys, run_names, pair_runs, topics, values, settings,
                                 warnings, use)
    doc["correction"]["family_size"] = family
    doc["pairs"] = pairs
    if md is not None:
        doc["segments"], doc["weighted"] = _segments(md, masks, measure_keys, run_names,
                                                     pair_runs, topics, evs, keys, values,
                                                     settings, aggregates)
    if per_topic:
        doc["per_topic"] = {
            name: {t: dict(zip(measure_keys, (num(v) for v in row), strict=True))
                   for t, row in zip(topics, values[:, r, :].T.tolist(), strict=True)}
            for r, name in enumerate(run_names)}
    if curves:
        doc["curves"] = _curves(run_names, evs, warnings, topics)
    # each run's input lint first (what ``cranfield eval`` warns of it), as an evaluation's
    # page leads with its own, then the comparison's
    doc["warnings"] = runs_lint(run_names, evs, interface) + warnings
    doc["options"] = {**options, **settings.as_kwargs(), "tests": list(settings.tests)}
    del doc["options"]["baseline"]
    if md is not None:  # its digest and size, as an evaluation's options record them
        doc["options"]["topic_metadata"] = md.summary()
    if specs:
        lookup = {(name, key): values[m, r] for m, key in enumerate(measure_keys)
                  for r, name in enumerate(run_names)}
        doc["gate"] = gate_results(doc, specs, lookup)
    return doc



def _segments(md, masks: dict[str, np.ndarray], measure_keys, run_names, pair_runs,
              topics: list[str], evs, keys, values: np.ndarray,
              settings: ComparisonSettings, aggregates: list[str]) -> tuple[dict, dict]:
    """Each segment compared over its common topics as the whole is (:func:`run_summary`,
    :func:`pair_results`: the same tests and correction, its own family; a mean_reported
    measure over the segment's topics where every run has a value), and the weighted
    means of every run (:func:`cranfield.measures.aggregation.weighted_value`: mean_reported over
    the topics that have a value, as an evaluation's weighted mean)."""
    from ..measures.aggregation import weighted_value

    level = 1.0 - settings.alpha
    out: dict[str, dict] = {}
    for label, mask in masks.items():
        rows = np.flatnonzero(mask)
        seg_topics = [topics[i] for i in rows.tolist()]
        family = {"segment": label, "tests": 0, "correction": settings.correction}
        entry: dict[str, Any] = {"topics": seg_topics, "family": family,
                                 "correction": {"method": settings.correction,
                                                "family_size": {}},
                                 "summary": {}, "pairs": [], "warnings": []}
        if rows.size:
            sub = values[:, :, rows]
            seg_use = topics_with_values(aggregates, sub)
            seg_warnings = left_out_warnings(measure_keys, aggregates, seg_topics, seg_use)
            summary = run_summary(measure_keys, run_names, seg_topics, evs, keys, sub,
                                  seg_warnings, level, seg_use)
            for per_run in summary.values():  # a run's own aggregate is over all its topics
                for s in per_run.values():
                    del s["aggregate"]
            pairs, sizes = pair_results(measure_keys, run_names, pair_runs, seg_topics, sub,
                                        settings, seg_warnings, seg_use)
            family["tests"] = len(pairs)
            entry.update(summary=summary, pairs=pairs, warnings=[
                {**w, "segment": label, "message": f"segment {label!r}: {w['message']}"}
                for w in seg_warnings])
            entry["correction"]["family_size"] = sizes
        out[label] = entry
    w = md.weight_array(topics)
    # an evaluation's weighted mean (aggregation.weighted_value), mean_reported's included
    weighted = {key: {name: num(weighted_value(
                    "mean_reported" if aggregates[m] == "mean_reported" else "mean",
                    values[m, r], w))
                      for r, name in enumerate(run_names)}
                for m, key in enumerate(measure_keys)}
    return out, weighted


def _curves(run_names: list[str], evs: list[Evaluation], warnings: list[dict],
            topics: list[str]) -> dict:
    """Each run's mean curve over the comparison's ``topics`` (those its tables compare)."""
    from ..reports.curves import precision_recall

    out = {}
    for name, ev in zip(run_names, evs, strict=True):
        if ev.ranked is None:
            warnings.append({"code": "curves-unavailable",
                             "message": f"run {name!r}: its evaluation kept no ranking, so "
                                        "no precision-recall curve"})
            continue
        curve = precision_recall(ev, per_topic=False, topics=topics)
        out[name] = {"recall_levels": curve["recall_levels"],
                     "mean_interpolated_precision":
                         [num(v) for v in curve["mean_interpolated_precision"]],
                     "topics_averaged": curve["topics_averaged"],
                     "interpolation": curve["interpolation"], "note": curve["note"]}
    return out
