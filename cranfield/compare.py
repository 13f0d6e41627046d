"""Comparing systems over topics: per-run means, paired tests for every measure × pair, a
correction for multiple comparisons; a regression gate for CI jobs is checked on the result
(:mod:`cranfield.gate`), and :mod:`cranfield.comparison_text` prints it.

``compare`` evaluates each run against one qrels and hands the evaluations to
``compare_evaluations``, which does the statistics (the service calls it directly with stored
evaluations). Every paired quantity is ``diff = b − a``: positive means run ``b`` scored
higher than run ``a`` (with a baseline, ``a`` is the baseline). All measure × pair
differences form one ``(n_topics, n_measures · n_pairs)`` matrix, and each test runs once on
it (cranfield.stats is batched), so ten runs over thousands of topics take seconds.

The result is a JSON-ready document (plain floats, ints, strings; NaN and ±inf become None).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from . import stats
from .errors import EvaluationError, InputError, MeasureError
from .evaluate import Evaluation, evaluate, trec_mean
from .io import read_qrels
from .measures import DEFAULT_PROFILE
from .measures.registry import NICKNAMES
from .names import Instance, needs_subtopics, resolve
from .swapped import refuse_swapped_runs

DEFAULT_MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.1000", "recip_rank"]
TESTS = ("t", "randomization", "bootstrap", "wilcoxon")
CORRECTIONS = ("holm", "bonferroni", "bh", "none")
EVAL_OPTIONS = ("profile", "relevance_level", "judged_only", "depth", "complete_topics",
                "collection_size")
# the key each test's results sit under in a pair
TEST_KEYS = {"t": "t_test", "randomization": "randomization", "bootstrap": "bootstrap",
             "wilcoxon": "wilcoxon"}
MAX_OFFENDING_TOPICS = 20
# The work of a comparison, in units of about one resampled multiply-add (see comparison_work;
# measured with numpy/OpenBLAS on 2 cores: 0.02-0.08 ns a unit, the bootstrap the dearer).
WORK_PER_TOPIC = 200          # drawing one resample's random numbers, per topic
WORK_PER_COLUMN = 400         # testing one resampled statistic (compare, sort), per column
WORK_PER_DIFFERENCE = 40_000  # holding and reporting one per-topic difference (≈200 bytes)
WILCOXON_RESAMPLES = 40_000   # the Wilcoxon test (cranfield.stats): under a millisecond per column
# Below this many topics the bootstrap shift test rejects a true null too often (measured by
# simulation at alpha 0.05: 0.50 at 2 topics, 0.15 at 5, 0.08-0.11 at 10, 0.07 at 20-25,
# 0.06 at 30; tests/engine/test_gate.py): a warning, and no gate on it.
BOOTSTRAP_MIN_TOPICS = 30


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
    ``complete_topics``, ``collection_size``. Everything else (``max_work`` too), and the
    document returned, is as :func:`compare_evaluations`.
    """
    refuse_swapped_runs(qrels, runs)  # code written for the old order (runs first)
    unknown = sorted(set(eval_options) - set(EVAL_OPTIONS))
    if unknown:
        raise TypeError(f"compare() got unexpected option(s) {unknown}; evaluation options "
                        f"are {list(EVAL_OPTIONS)}")
    settings = _Settings.check(runs, baseline, tests, wilcoxon, correction, alpha,
                               n_permutations, n_samples, seed, largest_losses)
    from .gate import gate_specs  # the gate builds on this module: imported when used

    gates = gate_specs(gate)
    profile = eval_options.get("profile", DEFAULT_PROFILE)
    names = with_gate_measures(
        [measures] if isinstance(measures, str) else list(measures or DEFAULT_MEASURES),
        gates, profile)
    qrels_obj = read_qrels(qrels, diversity=needs_subtopics(names, profile))
    evaluations = {name: evaluate(qrels_obj, run, names, **eval_options)
                   for name, run in runs.items()}
    return compare_evaluations(evaluations, names, gate=gates or None, **settings.as_kwargs(),
                               per_topic=per_topic, curves=curves, max_work=max_work,
                               interface=interface, topic_metadata=topic_metadata)


def run_names(labels: list[str | None]) -> list[str]:
    """Names for runs given by file (the CLI's paths, the API's multipart file names), unique
    and telling: the file name without its directory and extension (``runs/ql.txt`` ->
    ``ql``); where two would share that name, each the shortest path suffix that tells it
    from the others sharing it — the file name when the extensions differ (``ql.txt``,
    ``ql.run``), else as many folders as it takes (``a/results-cata`` and
    ``b/results-cata``; ``x/a/r``, ``y/a/r`` and ``b/r``), without the extension unless that
    is what tells them apart. The same path twice (nothing tells them apart): ``#2``,
    ``#3``... in order. ``-`` is ``stdin``; a run without a file name is ``run{i}``
    (1-based), as an unnamed run of a JSON request."""
    from pathlib import PurePath

    # per run, its path's parts and its file's stem: for each number of folders kept in front
    # of its file's name, (the suffix with the name's stem, with the whole name), made only
    # when needed (a path with fewer folders keeps its longest)
    paths: list[tuple[list[str], str]] = []
    for i, label in enumerate(labels):
        if label in (None, "", "-"):
            paths.append(([], "stdin" if label == "-" else f"run{i + 1}"))
            continue
        path = PurePath(label)
        parts = [p for p in path.parts if p not in (path.anchor, ".")] or [label]
        paths.append((parts, PurePath(parts[-1]).stem or parts[-1]))

    def depths(i: int) -> int:
        return max(1, len(paths[i][0]))

    def at(i: int, depth: int) -> tuple[str, str]:
        parts, stem = paths[i]
        if not parts:
            return stem, stem
        d = min(depth, len(parts) - 1)
        return ("/".join([*parts[len(parts) - 1 - d:-1], stem]),
                "/".join(parts[len(parts) - 1 - d:]))

    out = [at(i, 0)[0] for i in range(len(labels))]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(out):
        groups.setdefault(name, []).append(i)
    # each clashing run takes the shallowest form no other run of its group has at that
    # depth: counted once per depth over the group (a request's thousand same-named parts
    # cost a thousand forms per depth, not a thousand rivals each)
    for members in groups.values():
        if len(members) < 2:
            continue
        for i in members:  # nothing tells it apart: its whole path (numbered below)
            out[i] = at(i, depths(i) - 1)[1]
        left = members
        for depth in range(max(depths(i) for i in members)):
            if not left:
                break
            forms = {i: at(i, depth) for i in members}
            stems, names = Counter(f[0] for f in forms.values()), Counter(
                f[1] for f in forms.values())
            still = []
            for i in left:
                if stems[forms[i][0]] == 1:
                    out[i] = forms[i][0]
                elif names[forms[i][1]] == 1:
                    out[i] = forms[i][1]
                else:
                    still.append(i)
            left = still
    # the same path twice: numbered; linear in the labels (a request's file names), each
    # name resuming its numbering where it stopped
    unique: list[str] = []
    taken: set[str] = set()
    last: dict[str, int] = {}
    for name in out:
        n = last.get(name, 1)
        chosen = name if n == 1 else f"{name}#{n}"
        while chosen in taken:
            n += 1
            chosen = f"{name}#{n}"
        last[name] = n
        taken.add(chosen)
        unique.append(chosen)
    return unique


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
    ``method`` exact or normal as :func:`cranfield.stats.wilcoxon_test` states), all seeded
    by ``seed``; Cohen's d_z; wins/ties/losses of b (d > 0, = 0, < 0);
    and ``largest_losses``: up to that many topics with d < 0, most negative first (ties in
    topic order). Formulas and edge cases: :mod:`cranfield.stats`.

    Multiple comparisons: each test's p-values are adjusted over the whole family of
    measure × pair comparisons with ``correction`` (holm, bonferroni, bh or none;
    :func:`cranfield.stats.correct_p_values`); ``significant`` is ``p_adjusted < alpha``.
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
    resampling's memory does not grow with the resamples (:mod:`cranfield.stats` works in
    chunks).

    ``interface`` (``api`` or ``cli``): how warnings name an option (``complete_topics`` or
    ``-c``), as :func:`cranfield.result_document.option_name` spells it.

    ``topic_metadata`` (:func:`cranfield.segments.read_topic_metadata`'s input): the
    document gains ``segments`` {label: {"topics", "family", "correction", "summary",
    "pairs", "warnings"}}: each segment's common topics compared as the whole (the same
    tests, seeds and correction method), its p-values adjusted over its own family (that
    segment's measure × pair comparisons; ``family`` names it); and ``weighted`` {measure:
    {run: weighted mean over the common topics}} (a topic the metadata lacks weighs 1). The
    work budget counts every segment's comparison besides the whole one.
    :func:`cranfield.segments.segment_document` gives one segment as a comparison document
    (what a gate on a segment judges).
    """
    settings = _Settings.check(evaluations, baseline, tests, wilcoxon, correction, alpha,
                               n_permutations, n_samples, seed, largest_losses)
    from .gate import gate_results, gate_specs  # the gate builds on this module

    specs = gate_specs(gate)
    for spec in specs:  # before the work, not after it
        if spec.test not in settings.tests:
            raise InputError("gate", f"the gate uses the {spec.test} test, which is not among "
                             f"the tests run ({', '.join(settings.tests)})", field="gate.test")
    run_names = list(evaluations)
    evs = [evaluations[n] for n in run_names]
    options = _shared_options(run_names, evs)
    warnings: list[dict] = []
    keys, described = _comparable_measures(run_names, evs, measures, warnings)
    topics, rows = _common_topics(run_names, evs, warnings, interface)
    pair_runs = _pairs(run_names, settings.baseline)
    md = masks = None
    sizes: list[int] = []
    if topic_metadata is not None:
        from .budget import check_segments
        from .segments import read_topic_metadata

        md = read_topic_metadata(topic_metadata)
        check_segments(None, 0, len(md.segment_names()))  # MAX_SEGMENTS, before any work
        # each segment's common topics, in one pass over the topics' labels
        sizes = [int(r.size) for r in md.segment_rows(topics).values()]
    _check_work(comparison_work(len(pair_runs), len(keys), len(topics), settings.tests,
                                settings.n_permutations, settings.n_samples, sizes),
                max_work)
    if md is not None:  # the masks (labels x topics) once the work is within the budget
        from .segments import segment_masks

        masks = segment_masks(md, topics)
    # values[m, r, t]: measure m of run r on common topic t
    values = np.empty((len(keys), len(evs), len(topics)))
    for m, run_keys in enumerate(keys):
        for r, ev in enumerate(evs):
            values[m, r] = np.asarray(ev.values[run_keys[r]], dtype=np.float64)[rows[r]]
    measure_keys = [k[0] for k in keys]
    aggregates = [_aggregate_of(evs[0], k[0]) for k in keys]
    # use[m, t]: whether topic t counts for measure m (Accuracy: every run has a value there)
    use = _topics_with_values(aggregates, values)
    warnings += _left_out_warnings(measure_keys, aggregates, topics, use)
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
    doc["summary"] = _summary(measure_keys, run_names, topics, evs, keys, values, warnings,
                              level, use)
    pairs, family = _pair_results(measure_keys, run_names, pair_runs, topics, values, settings,
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
    doc["warnings"] = _runs_lint(run_names, evs, interface) + warnings
    doc["options"] = {**options, **settings.as_kwargs(), "tests": list(settings.tests)}
    del doc["options"]["baseline"]
    if md is not None:  # its digest and size, as an evaluation's options record them
        doc["options"]["topic_metadata"] = md.summary()
    if specs:
        lookup = {(name, key): values[m, r] for m, key in enumerate(measure_keys)
                  for r, name in enumerate(run_names)}
        doc["gate"] = gate_results(doc, specs, lookup)
    return doc


# --------------------------------------------------------------------------------------------
# Work
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Work:
    """What a comparison costs (:func:`comparison_work`): its factors and ``total``."""

    pairs: int
    measures: int
    topics: int
    permutations: int       # sign vectors the randomization test evaluates (0 without it)
    bootstrap_samples: int  # 0 without the bootstrap
    wilcoxon: bool
    total: int
    segments: tuple = ()    # with topic metadata: each non-empty segment's own Work

    @property
    def columns(self) -> int:
        return self.pairs * self.measures

    @property
    def resamples(self) -> int:
        return (self.permutations + self.bootstrap_samples
                + (WILCOXON_RESAMPLES if self.wilcoxon else 0))

    def describe(self) -> str:
        """The factors and the product, in words and figures."""
        if self.segments:
            whole = replace(self, segments=(), total=self.total - sum(
                s.total for s in self.segments))
            # bounded whatever the number of segments: segments of one size grouped, the
            # three sizes of most work named
            sizes: dict[int, list] = {}
            for s in self.segments:
                sizes.setdefault(s.topics, [0, s.total])[0] += 1
            ranked = sorted(sizes.items(), key=lambda kv: (-kv[1][0] * kv[1][1], kv[0]))
            said = ", ".join(f"{n:,} of {t:,} topic(s): {w:,} each"
                             for t, (n, w) in ranked[:3])
            if len(ranked) > 3:
                said += f", and {len(ranked) - 3:,} other size(s)"
            return (f"{whole.describe()}; and {len(self.segments):,} segment(s) compared as "
                    f"well ({said}): {self.total:,} in all")
        parts = [f"{self.permutations:,} permutations"] if self.permutations else []
        if self.bootstrap_samples:
            parts.append(f"{self.bootstrap_samples:,} bootstrap samples")
        if self.wilcoxon:
            parts.append(f"{WILCOXON_RESAMPLES:,} for the Wilcoxon test")
        return (f"{self.pairs:,} pairs × {self.measures:,} measures = {self.columns:,} columns, "
                f"{self.topics:,} topics, {self.resamples:,} resamples"
                f"{' (' + ' + '.join(parts) + ')' if len(parts) > 1 else ''}: "
                f"{self.resamples:,} × ({self.columns:,} × {self.topics:,} + {WORK_PER_TOPIC} × "
                f"{self.topics:,} + {WORK_PER_COLUMN} × {self.columns:,}) + "
                f"{WORK_PER_DIFFERENCE:,} × {self.columns:,} × {self.topics:,} = "
                f"{self.total:,}")


def comparison_work(n_pairs: int, n_measures: int, n_topics: int, tests, n_permutations: int,
                    n_samples: int, segments=()) -> Work:
    """The work of comparing ``n_pairs`` run pairs on ``n_measures`` measures over
    ``n_topics`` common topics with ``tests``::

        total = R × (C × T + 200 × T + 400 × C) + 40,000 × C × T

    C = pairs × measures (the tested columns), T = topics, R = the resamples: the sign
    vectors of the randomization test (2^T when T ≤ 16, where the test is exact, else
    ``n_permutations``; 0 without the test) + ``n_samples`` with the bootstrap + 40,000 with
    the Wilcoxon test (up to about a millisecond a column). R × C × T counts the
    resampled multiply-adds; 200 a topic and 400 a column of every resample, drawing the
    resample and testing its statistic (which cost more than the multiply-adds unless C and T
    are both large); 40,000 a column-topic, holding and reporting the differences (the
    per-topic scores, the largest losses: up to about 200 bytes). A unit costs 0.02-0.08 ns
    with numpy/OpenBLAS on two cores, and the resampling's memory is bounded whatever R
    (:mod:`cranfield.stats`), so a budget on ``total`` bounds a comparison's time and,
    through its last term, its memory.

    ``segments``: the topic count of each segment compared besides the whole
    (:mod:`cranfield.segments`); each is a comparison of its own, and ``total`` their sum.
    """
    tests = (tests,) if isinstance(tests, str) else tuple(tests)
    exact = n_topics <= stats.DEFAULT_EXACT_THRESHOLD
    perms = (2**n_topics if exact else n_permutations) if "randomization" in tests else 0
    samples = n_samples if "bootstrap" in tests else 0
    factors = Work(n_pairs, n_measures, n_topics, perms, samples, "wilcoxon" in tests, 0)
    columns, resamples = factors.columns, factors.resamples
    total = (resamples * (columns * n_topics + WORK_PER_TOPIC * n_topics
                          + WORK_PER_COLUMN * columns)
             + WORK_PER_DIFFERENCE * columns * n_topics)
    if segments:
        parts = tuple(comparison_work(n_pairs, n_measures, n, tests, n_permutations, n_samples)
                      for n in segments if n)
        return replace(factors, total=total + sum(p.total for p in parts),
                       segments=parts)
    return replace(factors, total=total)


class WorkBudgetError(EvaluationError):
    """A comparison whose work (:func:`comparison_work`) exceeds its budget: ``work`` (a
    :class:`Work`) and ``budget`` give the figures; ``field`` is ``work``."""

    def __init__(self, work: Work, budget: int):
        super().__init__(f"this comparison is {work.total:,} units of work, over the budget of "
                         f"{budget:,}: {work.describe()}; use fewer permutations, bootstrap "
                         "samples, runs, measures or topics")
        self.work = work
        self.budget = budget
        self.field = "work"


class WorkBudget:
    """The budget of the comparisons made inside ``with work_budget(limit)``: ``work`` is the
    last one's :class:`Work`, ``exceeded`` its :class:`WorkBudgetError` if it was over."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.work: Work | None = None
        self.exceeded: WorkBudgetError | None = None


_BUDGET: ContextVar[WorkBudget | None] = ContextVar("cranfield_work_budget", default=None)


@contextmanager
def work_budget(limit: int | None) -> Iterator[WorkBudget]:
    """Within the block, every comparison (:func:`compare_evaluations` without a
    ``max_work`` of its own) made in this context (thread, task) is held to ``limit`` units
    of work (None: no limit). For callers that reach the comparison through code that turns
    its errors into something else (the service, through the job functions): the yielded
    :class:`WorkBudget` keeps the work and the error."""
    budget = WorkBudget(limit)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def _check_work(work: Work, max_work: int | None) -> None:
    budget = _BUDGET.get()
    limit = max_work if max_work is not None or budget is None else budget.limit
    if budget is not None:
        budget.work = work
    if limit is not None and work.total > limit:
        exc = WorkBudgetError(work, limit)
        if budget is not None:
            budget.exceeded = exc
        raise exc


@dataclass(frozen=True)
class _Settings:
    """The statistical settings of one comparison, validated."""

    baseline: str | None
    tests: tuple[str, ...]
    correction: str
    alpha: float
    n_permutations: int
    n_samples: int
    seed: int
    largest_losses: int

    @classmethod
    def check(cls, runs, baseline, tests, wilcoxon, correction, alpha, n_permutations,
              n_samples, seed, largest_losses) -> _Settings:
        if not isinstance(runs, Mapping):
            raise InputError("runs", "must be a mapping {name: run}", field="runs")
        if len(runs) < 2:
            raise EvaluationError(f"a comparison needs at least two runs, got {len(runs)}")
        if baseline is not None and baseline not in runs:
            raise InputError("baseline", f"{baseline!r} is not one of the runs "
                             f"({', '.join(map(str, runs))})", field="baseline")
        tests = (tests,) if isinstance(tests, str) else tuple(tests)
        bad = [t for t in tests if t not in TESTS]
        if bad:
            raise InputError("tests", f"unknown test(s) {bad}; choose from {list(TESTS)}",
                             field="tests")
        if wilcoxon and "wilcoxon" not in tests:
            tests += ("wilcoxon",)
        tests = tuple(t for t in TESTS if t in tests)  # one order, whatever was given
        if correction not in CORRECTIONS:
            raise InputError("correction", f"unknown method {correction!r}; choose from "
                             f"{list(CORRECTIONS)}", field="correction")
        if not isinstance(alpha, int | float) or not 0 < alpha < 1:
            raise InputError("alpha", f"must be between 0 and 1, got {alpha!r}", field="alpha")
        for field, value, low in (("n_permutations", n_permutations, 1),
                                  ("n_samples", n_samples, 1), ("largest_losses",
                                                                largest_losses, 0)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise InputError(field, f"must be an integer ≥ {low}, got {value!r}",
                                 field=field)
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise InputError("seed", f"must be a non-negative integer, got {seed!r}",
                             field="seed")
        return cls(baseline, tests, correction, float(alpha), int(n_permutations),
                   int(n_samples), int(seed), int(largest_losses))

    def as_kwargs(self) -> dict:
        out = asdict(self)
        out["tests"] = tuple(t for t in self.tests if t != "wilcoxon")
        out["wilcoxon"] = "wilcoxon" in self.tests
        return out


def num(x) -> float | None:
    """A JSON number: NaN and ±inf (no JSON spelling) become None (the comparison, gate and
    text output all report numbers this way)."""
    x = float(x)
    return x if math.isfinite(x) else None


def _shared_options(run_names: list[str], evs: list[Evaluation]) -> dict:
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


def _comparable_measures(run_names: list[str], evs: list[Evaluation], measures,
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


def _runs_lint(run_names: list[str], evs: list[Evaluation], interface: str) -> list[dict]:
    """Every run's input lint (unjudged documents in the top 10, ties at cutoffs, topics
    missing…): an evaluation's own, or the one its document kept (``Evaluation.lint``), each
    warning naming its run (``run``, and in its message) and the options as ``interface``
    spells them."""
    from .result_document import warnings_for, warnings_for_interface

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


def _common_topics(run_names: list[str], evs: list[Evaluation], warnings: list[dict],
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
        from .result_document import option_name

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


def _pairs(run_names: list[str], baseline: str | None) -> list[tuple[int, int]]:
    """(a, b) run indices: each run against the baseline, or every pair i < j."""
    if baseline is not None:
        base = run_names.index(baseline)
        return [(base, j) for j in range(len(run_names)) if j != base]
    return [(i, j) for i in range(len(run_names)) for j in range(i + 1, len(run_names))]


def percent(level: float) -> str:
    """A level as a percentage for labels (0.95 -> ``95``)."""
    return f"{round(100 * level, 6):g}"


def _summary(measure_keys, run_names, topics, evs, keys, values, warnings,
             level: float = 0.95, use: np.ndarray | None = None) -> dict:
    """Per measure and run: the mean over the common topics (those of them ``use[m]`` keeps:
    :func:`_topics_with_values`) with its t CI at ``level``, and the run's own trec_eval
    aggregate (over its own topics)."""
    out: dict[str, dict] = {}
    for m, key in enumerate(measure_keys):
        out[key] = {}
        kept = np.flatnonzero(use[m]) if use is not None else np.arange(len(topics))
        for r, name in enumerate(run_names):
            column = values[m, r][kept]
            if not column.size:  # no topic has a value for every run: no mean (warned)
                mean = low = high = math.nan
            elif np.isfinite(column).all():
                mean, low, high = stats.mean_ci(column, level)
                # trec_eval's sum (common topics are in strcmp order): the printed mean is
                # the digit trec_eval prints, on a boundary too (issue #27)
                constant = low == mean == high  # zero variance: the CI is the mean
                mean = trec_mean(column)
                if constant:
                    low = high = mean
            else:
                mean = low = high = math.nan
                warnings.append({"code": "nan-values",
                                 "message": f"{key} of run {name!r} is not a number on some "
                                            "topics: its mean and comparisons are left out",
                                 "topics": [topics[kept[i]] for i in
                                            np.flatnonzero(~np.isfinite(column)).tolist()]})
            aggregate = evs[r].aggregate.get(keys[m][r])
            out[key][name] = {"mean": num(mean), "ci_low": num(low), "ci_high": num(high),
                              "aggregate": None if aggregate is None else num(aggregate)}
    return out


def _topics_with_values(measure_aggregates: list[str], values: np.ndarray) -> np.ndarray:
    """``use[m, t]``: whether common topic ``t`` counts for measure ``m``. A measure whose NaN
    means "no value" (aggregate ``mean_reported``: ir_measures' Accuracy, whose own mean is
    over the topics that have a value) is compared over the topics where every run has a
    value; any other measure over every common topic (a NaN there is a 0/0 and leaves the
    measure untested)."""
    use = np.ones(values.shape[::2], dtype=bool)
    for m, how in enumerate(measure_aggregates):
        if how == "mean_reported":
            use[m] = ~np.isnan(values[m]).any(axis=0)
    return use


def _left_out_warnings(measure_keys, measure_aggregates, topics, use) -> list[dict]:
    """A ``topics-without-value`` warning per mean_reported measure some topic is left out of
    (:func:`_topics_with_values`), naming the topics and counting them."""
    out = []
    for m, key in enumerate(measure_keys):
        left = np.flatnonzero(~use[m])
        if measure_aggregates[m] != "mean_reported" or not left.size:
            continue
        out.append({"code": "topics-without-value",
                    "message": f"{key}: {left.size} of {len(topics)} topic(s) have no value "
                               "for some run (no relevant document in the top k) and are left "
                               f"out of its means and paired tests, which are over the other "
                               f"{len(topics) - left.size} (ir_measures' mean leaves a topic "
                               "without a value out)",
                    "topics": [topics[i] for i in left.tolist()]})
    return out


def _pair_results(measure_keys, run_names, pair_runs, topics, values, settings: _Settings,
                  warnings, use: np.ndarray | None = None) -> tuple[list[dict], dict]:
    """Every test on every measure × pair column; then one dict per column. A column is
    tested over the topics ``use`` keeps for its measure (:func:`_topics_with_values`);
    columns with the same topics are tested at once (all of them, when no measure leaves a
    topic out). A pair says how many topics it used (``n_topics``) and how many it left out
    (``topics_without_value``); one that cannot be tested (a non-finite value on a topic it
    uses, or no topic left) says ``tested: false`` and has no counts or p-values."""
    a_idx = np.array([a for a, _ in pair_runs])
    b_idx = np.array([b for _, b in pair_runs])
    n_pairs, n_topics = len(pair_runs), len(topics)
    if use is None:
        use = np.ones((len(measure_keys), n_topics), dtype=bool)
    # rows = measure-major columns: row m·n_pairs + p is measure m, pair p
    diff_rows = (values[:, b_idx, :] - values[:, a_idx, :]).reshape(-1, n_topics)
    col_use = np.repeat(use, n_pairs, axis=0)
    n_used = col_use.sum(axis=1)
    finite = np.isfinite(np.where(col_use, diff_rows, 0.0)).all(axis=1) & (n_used > 0)
    n_cols = diff_rows.shape[0]
    level = 1.0 - settings.alpha

    def empty():
        return np.full(n_cols, np.nan)

    t_out = {k: empty() for k in ("statistic", "p_value", "mean_diff", "ci_low", "ci_high")}
    results: dict[str, dict[str, np.ndarray]] = {}
    if "t" in settings.tests:
        results["t"] = {"statistic": t_out["statistic"], "p_value": t_out["p_value"]}
    if "randomization" in settings.tests:
        results["randomization"] = {"p_value": empty()}
        rand_info = np.full(n_cols, None, dtype=object)
    if "bootstrap" in settings.tests:
        results["bootstrap"] = {"p_value": empty(), "ci_low": empty(), "ci_high": empty()}
        boot_info = np.full(n_cols, None, dtype=object)
    if "wilcoxon" in settings.tests:
        results["wilcoxon"] = {"statistic": empty(), "p_value": empty()}
        wil_method = np.full(n_cols, None, dtype=object)
        wil_n, wil_smallest = empty(), empty()
    dz, wins, ties, losses = empty(), empty(), empty(), empty()
    few_topics: set[int] = set()

    @lru_cache(maxsize=1)
    def untested_rand():  # an untested column's entry: the test on every topic, as before
        return stats.randomization_test(np.empty((n_topics, 0)), settings.n_permutations,
                                        settings.seed)

    # the tested columns, grouped by the topics they use (one group unless topics are left out)
    groups: dict[bytes, list[int]] = {}
    for col in np.flatnonzero(finite).tolist():
        groups.setdefault(col_use[col].tobytes(), []).append(col)
    for cols_list in groups.values():
        cols = np.asarray(cols_list)
        rows = np.flatnonzero(col_use[cols[0]])
        diffs = diff_rows[cols][:, rows].T  # (topics, columns), Fortran order as stats wants
        t = stats.t_test(diffs, level)
        for k in t_out:
            t_out[k][cols] = getattr(t, k)
        if "randomization" in results:
            rand = stats.randomization_test(diffs, settings.n_permutations, settings.seed)
            results["randomization"]["p_value"][cols] = rand.p_value
            for c in cols_list:
                rand_info[c] = rand
        if "bootstrap" in results:
            boot = stats.bootstrap_test(diffs, settings.n_samples, settings.seed, level)
            if rows.size < BOOTSTRAP_MIN_TOPICS:
                few_topics.add(int(rows.size))
            for k in ("p_value", "ci_low", "ci_high"):
                results["bootstrap"][k][cols] = getattr(boot, k)
            for c in cols_list:
                boot_info[c] = boot
        if "wilcoxon" in results:
            wil = stats.wilcoxon_test(diffs)
            results["wilcoxon"]["statistic"][cols] = wil.statistic
            results["wilcoxon"]["p_value"][cols] = wil.p_value
            wil_method[cols] = list(wil.method)
            wil_n[cols], wil_smallest[cols] = wil.n, wil.smallest_p
        dz[cols] = stats.cohens_dz(diffs)
        wtl = stats.wins_ties_losses(diffs)
        wins[cols], ties[cols], losses[cols] = wtl.wins, wtl.ties, wtl.losses
    for n in sorted(few_topics):
        warnings.append({"code": "bootstrap-few-topics",
                         "message": f"the bootstrap test rejects a true null too often "
                                    f"below {BOOTSTRAP_MIN_TOPICS} topics (measured at "
                                    f"alpha 0.05: about 0.15 at 5 topics, 0.08 at 10-20); "
                                    f"with {n} topics prefer the randomization or "
                                    "t test, and a gate does not use it"})
    family = {}
    for test, res in results.items():
        res["p_adjusted"] = stats.correct_p_values(res["p_value"], settings.correction)
        family[test] = int(np.count_nonzero(~np.isnan(res["p_value"])))
    mean_diff, ci_low, ci_high = t_out["mean_diff"], t_out["ci_low"], t_out["ci_high"]
    k = min(settings.largest_losses, n_topics)
    # most negative first over the topics each column uses (ties in topic order)
    worst = np.argsort(np.where(col_use, diff_rows, np.inf), axis=1, kind="stable")[:, :k]
    worst_diff = np.take_along_axis(diff_rows, worst, axis=1)
    rows_of = (np.arange(n_cols) // n_pairs, a_idx[np.arange(n_cols) % n_pairs],
               b_idx[np.arange(n_cols) % n_pairs])
    pairs: list[dict] = []
    for col in range(n_cols):
        m, a, b = (int(x[col]) for x in rows_of)
        tested = bool(finite[col])
        n_col = int(n_used[col])
        if not tested:
            why = ("no topic has a value for every run" if n_col == 0 else
                   "has non-numeric per-topic values")
            warnings.append({"code": "nan-values",
                             "message": f"{measure_keys[m]}: {run_names[b]!r} vs "
                                        f"{run_names[a]!r} {why}; not tested"})
        pair: dict[str, Any] = {"measure": measure_keys[m], "a": run_names[a],
                                "b": run_names[b], "mean_diff": num(mean_diff[col]),
                                "ci_low": num(ci_low[col]), "ci_high": num(ci_high[col]),
                                "tested": tested, "n_topics": n_col,
                                "topics_without_value": n_topics - n_col}
        for test, res in results.items():
            entry: dict[str, Any] = {}
            if "statistic" in res:
                entry["statistic"] = num(res["statistic"][col])
            if test == "t":
                entry["df"] = n_col - 1 if n_col else None
            p_adj = res["p_adjusted"][col]
            entry.update({"p_value": num(res["p_value"][col]), "p_adjusted": num(p_adj),
                          "significant": bool(p_adj < settings.alpha)})
            if test == "randomization":
                rand = rand_info[col] or untested_rand()
                entry.update({"n_permutations": rand.n_permutations, "seed": rand.seed,
                              "exact": rand.exact})
            if test == "wilcoxon" and tested:
                entry.update({"method": wil_method[col], "n": int(wil_n[col]),
                              "smallest_p": num(wil_smallest[col])})
            if test == "bootstrap":
                entry.update({"ci_low": num(res["ci_low"][col]),
                              "ci_high": num(res["ci_high"][col]),
                              "n_samples": settings.n_samples, "seed": settings.seed})
            pair[TEST_KEYS[test]] = entry
        pair["effect_size"] = {"cohens_dz": num(dz[col])}
        for name, arr in (("wins", wins), ("ties", ties), ("losses", losses)):
            pair[name] = int(arr[col]) if tested else None
        pair["largest_losses"] = [
            {"topic": topics[i], "a": num(values[m, a, i]), "b": num(values[m, b, i]),
             "diff": num(d)}
            for i, d in zip(worst[col].tolist(), worst_diff[col].tolist(), strict=True)
            if d < 0] if tested else []
        pairs.append(pair)
    return pairs, family


def _aggregate_of(ev: Evaluation, key: str) -> str:
    """How ``ev`` aggregates the measure it reports under ``key`` (mean, mean_reported...)."""
    for inst in ev.instances:
        if inst.key == key:
            return inst.measure.aggregate
    return "mean"


def _segments(md, masks: dict[str, np.ndarray], measure_keys, run_names, pair_runs,
              topics: list[str], evs, keys, values: np.ndarray, settings: _Settings,
              aggregates: list[str]) -> tuple[dict, dict]:
    """Each segment compared over its common topics as the whole is (:func:`_summary`,
    :func:`_pair_results`: the same tests and correction, its own family; a mean_reported
    measure over the segment's topics where every run has a value), and the weighted
    means of every run (:func:`cranfield.segments.weighted_value`: mean_reported over the
    topics that have a value, as an evaluation's weighted mean)."""
    from .segments import weighted_value

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
            seg_use = _topics_with_values(aggregates, sub)
            seg_warnings = _left_out_warnings(measure_keys, aggregates, seg_topics, seg_use)
            summary = _summary(measure_keys, run_names, seg_topics, evs, keys, sub,
                               seg_warnings, level, seg_use)
            for per_run in summary.values():  # a run's own aggregate is over all its topics
                for s in per_run.values():
                    del s["aggregate"]
            pairs, sizes = _pair_results(measure_keys, run_names, pair_runs, seg_topics, sub,
                                         settings, seg_warnings, seg_use)
            family["tests"] = len(pairs)
            entry.update(summary=summary, pairs=pairs, warnings=[
                {**w, "segment": label, "message": f"segment {label!r}: {w['message']}"}
                for w in seg_warnings])
            entry["correction"]["family_size"] = sizes
        out[label] = entry
    w = md.weight_array(topics)
    # an evaluation's weighted mean (segments.weighted_value), mean_reported's included
    weighted = {key: {name: num(weighted_value(
                    "mean_reported" if aggregates[m] == "mean_reported" else "mean",
                    values[m, r], w))
                      for r, name in enumerate(run_names)}
                for m, key in enumerate(measure_keys)}
    return out, weighted


def _curves(run_names: list[str], evs: list[Evaluation], warnings: list[dict],
            topics: list[str]) -> dict:
    """Each run's mean curve over the comparison's ``topics`` (those its tables compare)."""
    from .curves import precision_recall

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
