"""evaluate()'s checks of its options and inputs, before and while it works: the integer
options' bounds (:data:`OPTION_BOUNDS`, :func:`check_options`), empty qrels or run, the
count of topics an evaluation reports (the budget's topics factor) and a collection size
too small for a topic; and :func:`plan_evaluation`, everything an evaluation settles before
it reads its inputs (the options and measures checked, the side inputs read), settled once
for all the runs of :func:`cranfield.evaluate_many.evaluate_many`. Room: top (beside
evaluate)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import EvaluationError
from .inputs.grammar import GAINS
from .measures import PROFILES, resolve_profile
from .measures.budget import check_instances, check_segments
from .measures.names import Instance, resolve
from .measures.registry import INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    from .inputs.ranking import Ranked
    from .inputs.run_qrels import Qrels, Run

AGGREGATIONS = ("macro", "micro")

# The accepted range of each integer option of evaluate(), inclusive: (least, greatest).
# Defined once here; the CLI and the API's request schemas check against it too. Every
# value in range works (2^63 - 1 included); depth may also be None (no cut).
OPTION_BOUNDS: dict[str, tuple[int, int]] = {
    "relevance_level": (INT64_MIN, INT64_MAX),
    "depth": (0, INT64_MAX),
    "collection_size": (0, INT64_MAX),
}

NO_JUDGMENTS = "the qrels hold no judgments (the file is empty or only comments)"
NO_RESULTS = "the run holds no results (the file is empty or only comments)"


def topics_evaluated(run: Run, qrels: Qrels, complete_topics: bool) -> int:
    """How many topics an evaluation reports (trec_eval's: the judged topics the run has,
    or every judged topic with -c), counted before ranking: the budget's topics factor."""
    if complete_topics:
        return len(qrels.topics)
    return len(set(run.topics).intersection(qrels.topics))


def check_options(**options: Any) -> None:
    """EvaluationError unless each given option (by name, as evaluate() takes it) is an
    integer within :data:`OPTION_BOUNDS` (depth may be None)."""
    for name, value in options.items():
        if name == "depth" and value is None:
            continue
        lo, hi = OPTION_BOUNDS[name]
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or \
                not lo <= value <= hi:
            raise EvaluationError(f"{name} must be an integer from {lo} to {hi}, got "
                                  f"{value!r}", field=f"options.{name}")


def require_inputs(run: Run, qrels: Qrels) -> None:
    if not len(qrels):
        raise EvaluationError(NO_JUDGMENTS, field="qrels", code="empty-input")
    if not len(run):
        raise EvaluationError(NO_RESULTS, code="empty-input")


def check_collection_size(instances: list[Instance], context, ranked: Ranked,
                          missing: np.ndarray, relevance_level: int,
                          collection_size: int) -> None:
    """A collection holds at least what a topic retrieved plus its relevant documents not
    retrieved: a smaller size (collection_size, trec_eval's -N, or a measure's own N) given
    to a measure that reads it is an EvaluationError naming the topic and the counts (else
    d, the non-relevant documents not retrieved, would be negative: NPV 1.5)."""
    for inst in instances:
        if not inst.measure.uses_collection_size:
            continue
        own = inst.value.get("N") if isinstance(inst.value, dict) else None
        n = own or collection_size
        if not n:
            continue  # utility without -N: trec_eval's N = 0
        ctx = context(inst.level(relevance_level))
        retrieved = np.where(missing, 0, ctx.N)  # a topic missing from the run retrieved none
        unretrieved = ctx.R - ctx.num_rel_ret
        bad = np.flatnonzero(retrieved + unretrieved > n)
        if bad.size:
            t = int(bad[0])
            what = f"{inst.key}'s N={n}" if own else f"collection_size {n}"
            raise EvaluationError(
                f"{what} is less than topic {ranked.topics[t]!r}'s {int(retrieved[t])} "
                f"retrieved + {int(unretrieved[t])} relevant not retrieved = "
                f"{int(retrieved[t] + unretrieved[t])} documents",
                field="options.collection_size" if not own else "measures")


@dataclass
class EvaluationPlan:
    """What :func:`evaluate` settles before reading a run, once per call (and once for all
    the runs of :func:`cranfield.evaluate_many.evaluate_many`): the options checked, the
    measures resolved and their budget, the per-topic side inputs read. ``qrels_format``
    other than ``qrels`` (``-R``) settles nothing more: ``rel_format_options`` hold the
    options as given, checked by the judgment-group and preference evaluations."""

    qrels_format: str
    rel_format_options: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    instances: list[Instance] = field(default_factory=list)
    require_overlap: bool = True
    zs: Any = None
    md: Any = None
    # the qrels' declared gains (issue #31): "real", "integer", or None (as the qrels say: a
    # Qrels declaring gains="real" is real, anything read from text integer)
    gains: str | None = None

    @property
    def diversity(self) -> bool:
        """Whether the measures are ndeval's (read from subtopic qrels)."""
        return any(i.measure.family == "diversity" for i in self.instances)


def declared_gains(qrels: Any, profile: str | None, gains: str | None) -> str | None:
    """``gains`` as an evaluation of ``qrels`` settles its profile by: as given, or, with
    neither a profile nor gains given, ``"real"`` for a :class:`Qrels` declaring real gains
    (so it is evaluated under the ``cranfield`` profile that reads them)."""
    from .inputs.run_qrels import Qrels

    if profile is None and gains is None and isinstance(qrels, Qrels) and \
            qrels.gains == "real":
        return "real"
    return gains


def plan_evaluation(measures: list[str] | str | None, *, profile: str | None = None,
                    relevance_level: int = 1, judged_only: bool = False,
                    depth: int | None = None, complete_topics: bool = False,
                    collection_size: int = 0, aggregation: str = "macro",
                    require_overlap: bool = True, zscores: Any = None,
                    qrels_format: str = "qrels",
                    topic_metadata: Any = None, gains: str | None = None) -> EvaluationPlan:
    """:func:`evaluate`'s options and measures checked (its refusals, in its order), its
    side inputs read: everything but the qrels and the run. ``profile`` None: as
    :func:`cranfield.measures.resolve_profile` settles it from ``gains``."""
    profile = resolve_profile(profile, gains)
    if profile not in PROFILES:
        raise EvaluationError(f"unknown profile {profile!r}; choose one of {list(PROFILES)}")
    if gains is not None and gains not in GAINS:
        raise EvaluationError(f"unknown gains {gains!r}; choose one of {list(GAINS)}",
                              field="options.gains")
    if not PROFILES[profile].reads_real_gains:
        # a trec_eval profile reads grades as trec_eval does: a declaration of real gains
        # changes nothing (-R's formats included), and a grade that is not an integer is
        # refused as without it
        gains = "integer"
    if gains == "real" and qrels_format != "qrels":
        raise EvaluationError(f"qrels_format {qrels_format!r} does not take gains='real': "
                              "real gains are read from plain qrels", field="options.gains")
    plan = EvaluationPlan(qrels_format, {
        "qrels_format": qrels_format, "profile": profile, "relevance_level": relevance_level,
        "judged_only": judged_only, "depth": depth, "complete_topics": complete_topics,
        "collection_size": collection_size, "aggregation": aggregation, "zscores": zscores,
        "topic_metadata": topic_metadata, "require_overlap": require_overlap})
    if qrels_format != "qrels":
        return plan
    if aggregation not in AGGREGATIONS:
        raise EvaluationError(f"unknown aggregation {aggregation!r}; choose one of "
                              f"{list(AGGREGATIONS)}")
    check_options(relevance_level=relevance_level, depth=depth,
                  collection_size=collection_size)
    options = {"profile": profile, "relevance_level": relevance_level,
               "judged_only": judged_only, "depth": depth,
               "complete_topics": complete_topics, "collection_size": collection_size,
               "aggregation": aggregation}
    zs = None
    if zscores is not None:
        from .inputs.zscores import read_zscores

        zs = _per_topic_option("zscores", zscores, read_zscores, aggregation, options,
                               "trec_eval standardises per-topic values")
    md = None
    if topic_metadata is not None:
        from .inputs.segments import read_topic_metadata

        md = _per_topic_option("topic_metadata", topic_metadata, read_topic_metadata,
                               aggregation, options,
                               "segments and weights aggregate per-topic values")
    instances = resolve(measures, profile)
    # budgets before work (issue #27): the instances before any input is read, the values
    # once the topics are known (cranfield.measures.budget; no bound outside a budget's context)
    check_instances(len(instances), measures, profile)
    if md is not None:  # the per-segment aggregates: labels, and instances x (pairs + labels)
        check_segments(len(instances), md.assignments(), len(md.segment_names()))
    if gains == "real":  # (else once the qrels are read: a Qrels may declare them)
        from .measures.real_gains import check_measures

        check_measures(instances)
    plan.options, plan.instances, plan.require_overlap = options, instances, require_overlap
    plan.gains = gains
    plan.zs, plan.md = zs, md
    return plan


def _per_topic_option(kind: str, source: Any, reader, aggregation: str, options: dict,
                      why: str):
    """A per-topic side input of :func:`evaluate` (``kind``: zscores, topic_metadata) read
    once by ``reader``, its summary put in ``options``; refused with micro aggregation
    (``why``: what it acts on per topic)."""
    if aggregation != "macro":
        raise EvaluationError(f"{kind} cannot be combined with micro aggregation: {why}",
                              field=f"options.{kind}")
    read = reader(source)
    options[kind] = read.summary()
    return read
