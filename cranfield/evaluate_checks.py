"""evaluate()'s checks of its options and inputs, before and while it works: the integer
options' bounds (:data:`OPTION_BOUNDS`, :func:`check_options`), empty qrels or run, the
count of topics an evaluation reports (the budget's topics factor) and a collection size
too small for a topic. Room: top (beside evaluate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import EvaluationError
from .measures.registry import INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    from .inputs.ranking import Ranked
    from .inputs.run_qrels import Qrels, Run
    from .measures.names import Instance

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
    judged = set(qrels.topics)
    return sum(1 for t in set(run.topics) if t in judged)


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
