"""``evaluate``: one run against one qrels, per-topic values and trec_eval's summary
(formed by :mod:`cranfield.measures.aggregation`); :class:`Evaluation` holds them. Its option and
input checks are in :mod:`cranfield.evaluate_checks`; shards of a run are combined by
:mod:`cranfield.shards`. Room: top."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from .errors import EvaluationError
from .evaluate_checks import (
    AGGREGATIONS,  # noqa: F401 (the service's schema takes it from here)
    EvaluationPlan,
    check_collection_size,
    check_options,
    declared_gains,
    plan_evaluation,
    require_inputs,
    topics_evaluated,
)
from .inputs.arrow_arrays import arrow_strings
from .inputs.io import read_qrels, read_run
from .inputs.mappings import MappedRun, mapped_run, per_topic_dicts
from .inputs.ranking import Ranked, rank_run
from .inputs.run_qrels import Qrels, Run
from .inputs.swapped import refuse_swapped
from .inputs.trec_fast import release_memory
from .measures import PROFILES, Context, real_gains
from .measures.aggregation import segment_aggregates, summary
from .measures.budget import check_values
from .measures.context import no_topics
from .measures.names import Instance
from .measures.registry import INT64_MIN

# trec_eval 10 -c: measures reset to 0 (or '') for a qrels topic missing from the run, by
# printed name, after evaluating it against a one-document non-pool ranking.
_RESET_FOR_MISSING = ("num_ret", "utility", "relstring", "rbp_resid")
# A run this long, once ranked and let go of, gives its memory back to the OS at once.
RELEASE_AFTER_ROWS = 1 << 20


@dataclass(frozen=True)
class TopicSets:
    """Which topics were evaluated, and which appear on one side only."""

    evaluated: list[str]
    run_only: list[str]
    qrels_only: list[str]

    def as_dict(self) -> dict[str, list[str]]:
        return {"evaluated": self.evaluated, "run_only": self.run_only,
                "qrels_only": self.qrels_only}


@dataclass(eq=False)
class Evaluation:
    """The result of :func:`evaluate`.

    ``values[key]`` holds one value per topic of ``topic_order``; ``per_topic`` and
    ``aggregate`` present them as dicts. ``measures[key]`` describes each reported number
    (its registry measure, canonical name and how it is aggregated).
    """

    instances: list[Instance]
    values: dict[str, np.ndarray]
    topic_order: list[str]
    printed: np.ndarray                  # bool per topic: has per-topic values
    aggregate: dict[str, Any]
    measures: dict[str, dict]
    topics: TopicSets
    runid: str
    options: dict[str, Any] = field(default_factory=dict)
    ranked: Ranked | None = field(default=None, repr=False)
    # the input lint of an evaluation read back from its document (which keeps no ranking
    # to lint again); None: lint ``ranked`` (result_document.warnings_for)
    lint: list[dict] | None = field(default=None, repr=False)
    # with topic metadata (cranfield.inputs.segments): {label: {"topics": n, "aggregate": {...}}},
    # {key: weighted value} and the metadata itself; None without
    segments: dict[str, dict] | None = None
    weighted: dict[str, Any] | None = None
    topic_metadata: Any = field(default=None, repr=False)

    @property
    def cutoff_ties(self) -> dict[int, np.ndarray]:
        """For each rank cutoff the measures use: topics where a score tie straddles it."""
        return self.ranked.cutoff_ties if self.ranked is not None else {}

    @cached_property
    def per_topic(self) -> dict[str, dict[str, Any]]:
        """{topic: {measure key: value}} for the topics with per-topic values."""
        keys = [i.key for i in self.instances if i.measure.per_topic]
        columns = [self.values[k].tolist() for k in keys]
        rows = self.printed.nonzero()[0].tolist()
        return per_topic_dicts(self.topic_order, rows, keys, columns)

    @property
    def profile(self) -> str:
        return self.options["profile"]

    def to_arrow(self, per_topic: bool = True, summary: bool = True):
        """The numbers as a pyarrow Table in long form, one row per topic and measure, as
        ir_measures' ``Metric`` (and its ``--output_format jsonl``) names them: ``query_id``
        (string), ``measure`` (string: the key of :attr:`per_topic` / :attr:`aggregate`, the
        name as asked), ``value`` (float64; counts such as ``num_rel`` exact up to 2^53, a
        0/0 stays NaN). The topics of :attr:`per_topic` come first, in its (strcmp) order,
        each with its measures in the evaluation's order; then, with ``summary``, the
        aggregate as rows whose ``query_id`` is ``all``, as trec_eval prints them (``num_q``
        and the other summary-only measures appear there only). Text values are not numbers
        and are left out: ``runid`` (:attr:`runid`) and ``relstring``.

        ``ev.to_arrow().to_pandas().pivot(index="query_id", columns="measure",
        values="value")`` is the wide table (a topic per row)."""
        try:
            import pyarrow as pa
        except ImportError:  # pragma: no cover - pyarrow is a dependency of the engine
            raise ImportError("Evaluation.to_arrow needs pyarrow (pip install pyarrow)") \
                from None
        topics: list[np.ndarray] = []
        measures: list[np.ndarray] = []
        parts: list[np.ndarray] = []
        if per_topic:
            rows = self.printed.nonzero()[0]
            keys, columns = [], []
            for inst in self.instances:
                if inst.measure.per_topic and _numeric(self.values[inst.key]):
                    keys.append(inst.key)
                    columns.append(np.asarray(self.values[inst.key])[rows].astype(np.float64))
            if keys and len(rows):
                # topic-major, as trec_eval -q prints: each topic's measures together
                parts.append(np.stack(columns, axis=1).ravel())
                order = _objects([self.topic_order[r] for r in rows.tolist()])
                topics.append(np.repeat(order, len(keys)))
                measures.append(np.tile(_objects(keys), len(order)))
        if summary:
            keys = [i.key for i in self.instances if i.key in self.aggregate and
                    _numeric(self.aggregate[i.key])]
            parts.append(np.asarray([float(self.aggregate[k]) for k in keys], np.float64))
            topics.append(_objects(["all"] * len(keys)))
            measures.append(_objects(keys))

        def column(pieces: list[np.ndarray], dtype) -> np.ndarray:
            return np.concatenate(pieces) if pieces else np.zeros(0, dtype)

        # built from buffers: pa.array and pa.table import pandas (~0.3 s) to look at a list
        values = np.ascontiguousarray(column(parts, np.float64), np.float64)
        return pa.Table.from_arrays(
            [arrow_strings(column(topics, object)), arrow_strings(column(measures, object)),
             pa.Array.from_buffers(pa.float64(), len(values), [None, pa.py_buffer(values)])],
            names=["query_id", "measure", "value"])

    def to_pandas(self, per_topic: bool = True, summary: bool = True):
        """:meth:`to_arrow` as a pandas DataFrame (columns ``query_id``, ``measure``,
        ``value``; NaN where trec_eval prints ``-nan``). pandas is optional: imported only
        here."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("Evaluation.to_pandas needs pandas, which Cranfield does not "
                              "install (pip install pandas); Evaluation.to_arrow() gives "
                              "the same table as a pyarrow Table without it") from None
        return self.to_arrow(per_topic=per_topic, summary=summary).to_pandas()


def _objects(strings: list[str]) -> np.ndarray:
    out = np.empty(len(strings), dtype=object)
    out[:] = strings
    return out


def _numeric(values: Any) -> bool:
    """Whether a measure's value (or per-topic column) is a number, not text (``runid``,
    ``relstring``)."""
    if isinstance(values, np.ndarray):
        if values.dtype != object:
            return values.dtype.kind in "biuf"
        return not any(isinstance(v, str) for v in values.tolist())
    return isinstance(values, int | float | np.integer | np.floating) and \
        not isinstance(values, bool)


def evaluate(qrels: Any, run: Any, measures: list[str] | str | None = None, *,
             profile: str | None = None, relevance_level: int = 1,
             judged_only: bool = False, depth: int | None = None,
             complete_topics: bool = False, collection_size: int = 0,
             aggregation: str = "macro", require_overlap: bool = True,
             zscores: Any = None, qrels_format: str = "qrels",
             topic_metadata: Any = None, gains: str | None = None) -> Evaluation:
    """Evaluate ``run`` against ``qrels`` with trec_eval's semantics: the qrels come
    first, as trec_eval, ranx, pytrec_eval and ir_measures take them.

    ``qrels``/``run``: a path, TREC text, a file object, a mapping, or what
    :func:`read_qrels`/:func:`read_run` return; given the other way round (a run's text, a
    mapping of scores or a Run as qrels; qrels' text or a Qrels as the run), an
    :class:`InputError` says so and names the order (:mod:`cranfield.inputs.swapped`).
    ``measures``: names as trec_eval's ``-m`` or ir_measures-style (default: trec_eval's
    ``official`` set). Options are trec_eval's:
    ``relevance_level`` (-l), ``judged_only`` (-J), ``depth`` (-M), ``complete_topics`` (-c),
    ``collection_size`` (-N). ``profile`` is ``trec_eval-9.0.8`` (default; float32 scores,
    ``+0.9`` recall cutoffs), ``trec_eval-10``, or ``cranfield`` (trec_eval 10's arithmetic,
    and real gains: the default when the qrels declare them). ``aggregation="micro"``
    averages the set measures that define it (set_P, set_recall, set_F, F, Fallout,
    Specificity, NPV, FDR, Accuracy) over the summed contingency table of the topics instead
    of over their values (``macro``, the default and trec_eval's way; other measures stay
    macro).
    ``require_overlap=False`` lets a run with no judged topic through (used to evaluate the
    missing topics of a sharded run). ``zscores`` (trec_eval's ``-Z``): a path, text
    (``topic measure mean stddev`` lines) or a mapping ``{topic: {measure: (mean, stddev)}}``
    (:mod:`cranfield.inputs.zscores`): every per-topic value becomes its z-score and the summary is
    formed from them, as trec_eval does; ``options["zscores"]`` then records its digest.

    The integer options must lie in :data:`cranfield.evaluate_checks.OPTION_BOUNDS` (int64;
    depth and collection_size >= 0). A collection_size (or a measure's ``N``) given to a
    measure that reads it must be at least each topic's retrieved plus relevant-not-retrieved
    documents. Empty qrels or an
    empty run (no line but comments) are an :class:`EvaluationError`, not zeros.

    Subtopic qrels (a :class:`Qrels` read with ``diversity=True``, where a docid appears once
    per subtopic): diversity measures read every subtopic; ordinary measures see each
    (topic, docid) once, with its highest grade across the subtopics. Qrels text with a
    docid twice in a topic stays an error for ordinary measures, as in trec_eval.

    ``qrels_format`` (trec_eval's ``-R``): ``qrels_jg`` (judgment groups), ``prefs`` or
    ``qrels_prefs`` (preference judgments) read ``qrels`` as that format
    (:mod:`cranfield.inputs.judgment_files`) and return a
    :class:`cranfield.measures.jg_measures.JgEvaluation` (``per_topic``, ``summary()``; trec_eval's
    text from :func:`cranfield.reports.jg_text.format_jg`) with their own measures; they take
    ``relevance_level`` and ``judged_only`` (qrels_jg only), ``depth``, ``complete_topics`` and
    ``profile`` and refuse the other options.

    ``topic_metadata`` (:mod:`cranfield.inputs.segments`): a path, text (``topic labels [weight]``
    lines) or a mapping ``{topic: {"segments": [...], "weight": w}}``: the evaluation then
    has ``segments`` (per label, the summary over the evaluated topics carrying it) and
    ``weighted`` (each measure's weighted aggregate); ``options["topic_metadata"]`` records
    its digest. Not with ``aggregation="micro"``.

    ``gains="real"`` declares that the qrels hold real-valued gains (issue #31; a
    :class:`Qrels` built or read with ``gains="real"`` declares them itself): gain-based
    measures use them as they are, a measure that counts relevant documents needs ``rel=``
    (``P(rel=0.5)@10``) and says so, and ``options["gains"]`` is ``"real"``
    (:mod:`cranfield.measures.real_gains`). Without it, a grade that is not an integer is
    refused as always. Real gains are read under the ``cranfield`` profile, which an
    evaluation declaring them (or of a Qrels declaring them) runs under unless it names
    another: a trec_eval profile reads every grade as trec_eval does, and refuses one that is
    not an integer with the same error as without the declaration.
    """
    refuse_swapped(qrels, run)  # code written for the old order (run first)
    gains = declared_gains(qrels, profile, gains)
    plan = plan_evaluation(measures, profile=profile, relevance_level=relevance_level,
                           judged_only=judged_only, depth=depth,
                           complete_topics=complete_topics, collection_size=collection_size,
                           aggregation=aggregation, require_overlap=require_overlap,
                           zscores=zscores, qrels_format=qrels_format,
                           topic_metadata=topic_metadata, gains=gains)
    if plan.qrels_format != "qrels":
        return _evaluate_rel_format(qrels, run, measures, **plan.rel_format_options)
    if plan.diversity:
        return evaluate_diversity(qrels, run, plan.instances, plan.options,
                                  plan.require_overlap, plan.zs, plan.md, plan.gains)
    mapped = mapped_run(run)  # a dict, defaultdict or OrderedDict: ranked in one compiled pass
    if mapped is None:
        qrels_obj = qrels_before_run(qrels, run, plan.gains)
        held = [read_run(run)]
        del run  # evaluate_read holds the run alone, and lets it go once ranked (peak memory)
        return evaluate_read(plan, qrels_obj, held.pop())
    try:
        return evaluate_read(plan, judged_qrels(qrels, plan.gains), mapped)
    except Exception:
        read_run(run)  # a problem in the run is named first, as when it was read whole first
        raise


def qrels_before_run(qrels: Any, run: Any, gains: str | None = None) -> Qrels:
    """:func:`judged_qrels` of ``qrels``, read before the run (so that the qrels reader's
    transient memory comes and goes before the run's columns exist). If the qrels cannot be
    read, the run is read first: with both bad, the run's problem is the one raised, as when
    the run was read first."""
    try:
        return judged_qrels(qrels, gains)
    except Exception as exc:
        failed = exc
    read_run(run)  # raises the run's own error, if it has one
    raise failed


def judged_qrels(qrels: Any, gains: str | None = None) -> Qrels:
    """The qrels ordinary measures read: ``qrels`` read (not for subtopics; with ``gains``
    ``"real"``, as real gains), a Qrels given as such with each docid judged once per topic
    (text is read so already)."""
    qrels_obj: Qrels = read_qrels(qrels, gains=gains or "integer")
    if isinstance(qrels, Qrels):
        if gains == "integer" and qrels_obj.gains == "real":  # (a trec_eval profile's)
            qrels_obj = qrels_obj.with_integer_grades()
        qrels_obj = one_judgment_per_document(qrels_obj)
    return qrels_obj


def evaluate_read(plan: EvaluationPlan, qrels_obj: Qrels, run_obj: Run) -> Evaluation:
    """:func:`evaluate` of a run and qrels already read (``qrels_obj`` as
    :func:`judged_qrels` gives them) under ``plan`` (ordinary measures)."""
    instances, options = plan.instances, dict(plan.options)
    profile, depth = options["profile"], options["depth"]
    judged_only, complete_topics = options["judged_only"], options["complete_topics"]
    relevance_level, collection_size = options["relevance_level"], options["collection_size"]
    require_overlap, zs, md = plan.require_overlap, plan.zs, plan.md
    if require_overlap:
        require_inputs(run_obj, qrels_obj)
    # (topics_evaluated's sets are not needed when both sides name the same topics; a mapped
    # run then takes the qrels' list, so that the later comparisons are by identity)
    same_topics = run_obj.topics == qrels_obj.topics
    if same_topics and isinstance(run_obj, MappedRun):
        run_obj.topics = qrels_obj.topics
    check_values(len(instances), len(qrels_obj.topics) if same_topics
                 else topics_evaluated(run_obj, qrels_obj, complete_topics))
    cutoffs = sorted({int(i.value) for i in instances if i.measure.kind == "cutoffs"})
    tie_cutoffs = tuple(k for k in cutoffs if k <= 1000)
    real = real_gains.check(instances, qrels_obj, options)  # (issue #31)
    if qrels_obj.topics:
        ranked = rank_run(run_obj, real[0] if real else qrels_obj,
                          float32_scores=PROFILES[profile].float32_scores,
                          depth=depth, judged_only=judged_only,
                          complete_topics=complete_topics, tie_cutoffs=tie_cutoffs)
        if real:
            ranked = real_gains.ranked_real(ranked, real[1])
    else:  # no judgments (a shard of a run none of whose topics is judged): no topic
        ranked = no_topics(tie_cutoffs)
    # the run's columns go once ranked, when nothing else holds the run (peak memory)
    run_topics, runid, rows = run_obj.topics, run_obj.runid, len(run_obj)
    ours = not isinstance(run_obj, MappedRun)  # (a mapping is its caller's: nothing to give)
    del run_obj
    if rows >= RELEASE_AFTER_ROWS and ours:
        release_memory()
    if require_overlap and not ranked.in_run.any():
        raise EvaluationError("no topic has both results and relevance judgments "
                              f"(run topics: {len(run_topics)}, qrels topics: "
                              f"{len(qrels_obj.topics)})", code="no-overlap")
    missing = ~ranked.in_run
    if missing.any():
        # trec_eval 10 evaluates them against one non-pool document, which -J then drops
        bogus = 0 if judged_only else min(1, depth if depth is not None else 1)
        ranked = _with_num_ret(ranked, np.where(missing, bogus, ranked.num_ret))
    contexts: dict[int, Context] = {}

    def context(level: int) -> Context:
        if level not in contexts:
            contexts[level] = Context(ranked, level, profile, collection_size)
        return contexts[level]

    check_collection_size(instances, context, ranked, missing, relevance_level,
                          collection_size)
    values: dict[str, np.ndarray] = {}
    for inst in instances:
        arr = inst.measure.compute(context(inst.level(relevance_level)), inst.value)
        values[inst.key] = np.asarray(arr)
    if missing.any():
        _fill_missing(values, instances, missing, profile)
    if zs is not None:
        _standardise(zs, values, instances, ranked, profile)
    return finish_evaluation(instances, values, ranked, qrels_obj, run_topics, runid,
                             options, md)


def _evaluate_rel_format(qrels, run, measures, qrels_format: str, **o):
    """trec_eval's -R qrels_jg / prefs / qrels_prefs (cranfield.measures.jg_measures,
    prefs_measures)."""
    from .measures.jg_measures import evaluate_jg
    from .measures.prefs_measures import evaluate_prefs

    if qrels_format not in ("qrels_jg", "prefs", "qrels_prefs"):
        raise EvaluationError(f"unknown qrels_format {qrels_format!r}; choose one of "
                              "['qrels', 'qrels_jg', 'prefs', 'qrels_prefs']",
                              field="options.qrels_format")
    check_options(relevance_level=o["relevance_level"], depth=o["depth"], collection_size=0)
    refused = [k for k, off in (("collection_size", 0), ("aggregation", "macro"),
                                ("zscores", None), ("topic_metadata", None))
               if o[k] != off]
    if qrels_format != "qrels_jg" and o["relevance_level"] != 1:
        refused.append("relevance_level")
    if qrels_format != "qrels_jg" and o["judged_only"]:  # trec_eval's prefs ignore -J
        refused.append("judged_only")
    if refused:
        raise EvaluationError(f"qrels_format {qrels_format!r} does not take "
                              f"{', '.join(refused)}", field=f"options.{refused[0]}")
    names = [measures] if isinstance(measures, str) else measures
    if qrels_format == "qrels_jg":
        return evaluate_jg(qrels, run, names, relevance_level=o["relevance_level"],
                           depth=o["depth"], profile=o["profile"],
                           complete_topics=o["complete_topics"], judged_only=o["judged_only"],
                           require_overlap=o["require_overlap"])
    return evaluate_prefs(qrels, run, names, depth=o["depth"], profile=o["profile"],
                          qrels=qrels_format == "qrels_prefs",
                          complete_topics=o["complete_topics"],
                          require_overlap=o["require_overlap"])


_ONE_PER_DOCUMENT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def one_judgment_per_document(qrels: Qrels) -> Qrels:
    """``qrels`` as ordinary (non-diversity) measures read them: each (topic, docid) once, with
    its highest grade across subtopics, rows in their first occurrence's order. Qrels with
    no docid twice in a topic come back as they are. Remembered per Qrels object (services
    keep stored qrels and evaluate against them again and again)."""
    if len(qrels) < 2 or qrels.unique_judgments:
        return qrels  # (a reader proved each docid judged once per topic)
    try:
        known = _ONE_PER_DOCUMENT[qrels]
    except (KeyError, TypeError):
        known = False
    if known is not False:
        return qrels if known is None else known
    from .measures.diversity import docid_codes

    code, names = docid_codes(qrels.docids)
    key = qrels.topic_index.astype(np.int64) * max(len(names), 1) + code
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    out = None
    if len(uniq) < len(key):
        real = qrels.gains == "real"
        best = np.full(len(uniq), -np.inf if real else INT64_MIN,
                       dtype=np.float64 if real else np.int64)
        np.maximum.at(best, inverse.reshape(-1), qrels.grades)
        keep = np.sort(first)
        out = Qrels(qrels.topics, qrels.topic_index[keep], qrels.docids[keep],
                    best[inverse.reshape(-1)[keep]], None, qrels.source, gains=qrels.gains)
    try:
        _ONE_PER_DOCUMENT[qrels] = out
    except TypeError:
        pass
    return qrels if out is None else out


def finish_evaluation(instances: list[Instance], values: dict[str, np.ndarray],
                      ranked: Ranked, qrels_obj: Qrels, run_topics: list[str], runid: str,
                      options: dict, md=None) -> Evaluation:
    """Aggregates, descriptions and topic sets for per-topic ``values`` over ``ranked``;
    with topic metadata ``md``, its segments and weighted aggregates."""
    profile = options["profile"]
    printed = ranked.in_run.copy()
    if PROFILES[profile].prints_topics_missing_from_run:
        printed[:] = True
    aggregate = summary(instances, values, ranked, qrels_obj, runid,
                           options["complete_topics"], profile, bool(options.get("zscores")))
    micro = _micro(instances, ranked, options) if options.get("aggregation") == "micro" else {}
    aggregate.update(micro)
    described = {
        inst.key: _description(inst, profile, options["relevance_level"],
                               options["judged_only"], options["depth"], inst.key in micro)
        for inst in instances
    }
    evaluated = ranked.in_run.nonzero()[0].tolist()
    if run_topics == qrels_obj.topics:  # (one pass, no sets: both sides name the same topics)
        run_only, qrels_only = [], []
    else:
        in_qrels, in_run = set(qrels_obj.topics), set(run_topics)
        run_only = [t for t in run_topics if t not in in_qrels]
        qrels_only = [t for t in qrels_obj.topics if t not in in_run]
    topic_sets = TopicSets(
        evaluated=list(ranked.topics) if len(evaluated) == len(ranked.topics) else
        [ranked.topics[i] for i in evaluated], run_only=run_only, qrels_only=qrels_only)
    segments = weighted = None
    if md is not None:
        segments, weighted = segment_aggregates(md, instances, values, ranked, qrels_obj,
                                                runid, options)
    return Evaluation(instances, values, ranked.topics, printed, aggregate, described,
                      topic_sets, runid, options, ranked, segments=segments,
                      weighted=weighted, topic_metadata=md)


def _description(inst: Instance, profile: str, relevance_level: int, judged_only: bool,
                 depth: int | None, micro: bool) -> dict:
    """What ``Evaluation.measures`` says of one reported number (a fresh dict; cached, since
    a service describes the same few instances on every request). The registry name, the
    reported key and the parameter's repr fix the measure."""
    key = (inst.measure.name, inst.key, repr(inst.value), inst.rel_level, profile,
           relevance_level, judged_only, depth, micro)
    found = _DESCRIPTIONS.get(key)
    if found is None:
        found = {
            "measure": inst.measure.name,
            "canonical": inst.canonical(profile, relevance_level, judged_only, depth),
            "family": inst.measure.family,
            "aggregate": "micro" if micro else inst.measure.aggregate,
            "per_topic": inst.measure.per_topic,
        }
        if len(_DESCRIPTIONS) >= 4096:
            _DESCRIPTIONS.clear()
        _DESCRIPTIONS[key] = found
    return dict(found)


_DESCRIPTIONS: dict[tuple, dict] = {}


def evaluate_diversity(qrels, run, instances, options: dict, require_overlap: bool, zs=None,
                       md=None, gains: str | None = None) -> Evaluation:
    """Diversity measures (ndeval's) from subtopic qrels: they cannot share an evaluation
    with measures that read ordinary qrels (runid and num_q can). ``gains``: the plan's, as
    :func:`cranfield.measures.real_gains.subtopic_grades` reads them."""
    from .errors import MeasureError
    from .measures.diversity import diversity_values

    real_gains.refuse_real_diversity(qrels, instances, gains)
    others = [i for i in instances if i.measure.family != "diversity"
              and i.measure.name not in ("runid", "num_q")]
    if others:
        raise MeasureError(others[0].key, "cannot be evaluated together with diversity "
                           "measures: those read subtopic qrels, this one ordinary qrels")
    run_obj: Run = read_run(run)
    qrels_obj = real_gains.subtopic_grades(read_qrels(qrels, diversity=True), instances, gains)
    if require_overlap:
        require_inputs(run_obj, qrels_obj)
    check_values(len(instances), topics_evaluated(run_obj, qrels_obj,
                                                   options["complete_topics"]))
    diverse = [i for i in instances if i.measure.family == "diversity"]
    values, ranked = diversity_values(run_obj, qrels_obj, diverse, options["complete_topics"],
                                      options["depth"])
    if require_overlap and not ranked.in_run.any():
        raise EvaluationError("no topic has both results and relevance judgments",
                              code="no-overlap")
    ctx = Context(ranked, options["relevance_level"], options["profile"],
                  options["collection_size"])
    for inst in instances:
        if inst.measure.family != "diversity":  # runid, num_q
            values[inst.key] = np.asarray(inst.measure.compute(ctx, inst.value))
    if zs is not None:
        _standardise(zs, values, instances, ranked, options["profile"])
    return finish_evaluation(instances, values, ranked, qrels_obj, run_obj.topics,
                             run_obj.runid, options, md)


def _standardise(zs, values: dict[str, np.ndarray], instances, ranked: Ranked,
                 profile: str) -> None:
    """-Z: trec_eval converts each topic it evaluates; 9.0.8 never evaluates a qrels topic
    the run lacks (-c), so those keep their 0s."""
    from .measures.zscore_standardise import standardise

    convert = np.ones(len(ranked.topics), bool)
    if not PROFILES[profile].keeps_missing_topic_values:
        convert = ranked.in_run.copy()
    standardise(zs, values, instances, ranked.topics, convert)


def _with_num_ret(ranked: Ranked, num_ret: np.ndarray) -> Ranked:
    return Ranked(ranked.topics, num_ret, ranked.hit_topic, ranked.hit_rank, ranked.hit_label,
                  ranked.q_topic, ranked.q_grade, ranked.in_run, ranked.cutoff_ties,
                  ranked.hit_tie_first, ranked.hit_tie_last)


def _fill_missing(values: dict[str, np.ndarray], instances: list[Instance], missing: np.ndarray,
                  profile: str) -> None:
    """Qrels topics missing from the run (complete_topics): 9.0.8 counts them as zeros;
    10.0 keeps what the one-document ranking gave, except for the reset measures."""
    for inst in instances:
        arr = values[inst.key]
        reset = (not PROFILES[profile].keeps_missing_topic_values
                 or inst.key in _RESET_FOR_MISSING or inst.measure.name == "unj")
        if inst.measure.name == "num_rel":
            continue
        if reset:
            arr = arr.copy()
            arr[missing] = "" if arr.dtype == object else \
                math.nan if inst.measure.aggregate == "mean_reported" else 0  # no value
            values[inst.key] = arr


def _micro(instances, ranked: Ranked, options: dict) -> dict[str, float]:
    """Micro-averaged aggregates: each set measure's ``micro`` form over the contingency
    table summed over the averaged topics (a relevant retrieved, b non-relevant retrieved,
    c relevant not retrieved, d the rest of each topic's collection, when its size is
    known). A qrels topic missing from the run (complete_topics) retrieved nothing: not the
    one-document ranking trec_eval 10 evaluates it against."""
    use = slice(None) if options["complete_topics"] else ranked.in_run
    ranked = _with_num_ret(ranked, np.where(ranked.in_run, ranked.num_ret, 0))
    out: dict[str, float] = {}
    for inst in instances:
        form = inst.measure.extra.get("micro")
        if form is None:
            continue
        ctx = Context(ranked, inst.level(options["relevance_level"]), options["profile"],
                      options["collection_size"])
        value = inst.value
        n = (dict(value).get("N") if isinstance(value, dict) else None) or \
            options["collection_size"]
        a, b, c, d = (float(x[use].sum()) if x is not None else None
                      for x in ctx.contingency(n))
        out[inst.key] = float(form(a, b, c, d, value))
    return out
