"""Budgets before work (issue #27): how many measure instances a request's names expand to
(``P.1,2,…,20000`` is 20,000), and how many values those instances make over the topics
evaluated (instances × topics), counted before any per-topic array is made.

The engine holds an evaluation to the budget of the context it runs in
(``with evaluation_budget(max_instances=..., max_values=...)``): the service sets one from its
configuration (MAX_MEASURE_INSTANCES, MAX_EVALUATION_VALUES; a queued job
MAX_QUEUED_EVALUATION_VALUES); outside any such block (the library, the CLI) there is no
limit, as trec_eval has none: a long cutoff list on one's own machine costs only one's own
time and memory. Over a budget: :class:`BudgetError`, naming the budget and its factors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..errors import EvaluationError


class BudgetError(EvaluationError):
    """Work over a budget, refused before it is done: ``budget`` (the setting's name, e.g.
    ``MAX_EVALUATION_VALUES``), ``limit``, ``total`` and ``factors`` (name -> count, whose
    product is the total; for topic metadata's aggregates instances × (pairs + segments));
    ``field`` is the request field to change."""

    code = "over-budget"

    def __init__(self, message: str, *, budget: str, limit: int, total: int,
                 factors: dict[str, int], field: str = "measures"):
        super().__init__(message, field=field, code="over-budget")
        self.budget, self.limit, self.total, self.factors = budget, limit, total, factors


@dataclass(frozen=True)
class EvaluationBudget:
    """The bounds of the evaluations made in a context (None: no bound) and the names they
    are configured under (said in the error)."""

    max_instances: int | None = None
    max_values: int | None = None
    instances_name: str = "MAX_MEASURE_INSTANCES"
    values_name: str = "MAX_EVALUATION_VALUES"
    max_segments: int | None = None  # distinct segment labels of topic metadata (issue #28)
    segments_name: str = "MAX_SEGMENTS"


_BUDGET: ContextVar[EvaluationBudget | None] = ContextVar("cranfield_evaluation_budget",
                                                          default=None)


@contextmanager
def evaluation_budget(max_instances: int | None = None, max_values: int | None = None, *,
                      instances_name: str = "MAX_MEASURE_INSTANCES",
                      values_name: str = "MAX_EVALUATION_VALUES",
                      max_segments: int | None = None,
                      segments_name: str = "MAX_SEGMENTS") -> Iterator[EvaluationBudget]:
    """Within the block, every :func:`cranfield.evaluate` made in this context (thread, task)
    is held to ``max_instances`` measure instances and ``max_values`` values (instances ×
    topics; with topic metadata also instances × (topic-label pairs + segments)), and its
    topic metadata (and a comparison's) to ``max_segments`` distinct segment labels; None:
    no bound."""
    budget = EvaluationBudget(max_instances, max_values, instances_name, values_name,
                              max_segments, segments_name)
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def current_budget() -> EvaluationBudget | None:
    return _BUDGET.get()


def _widest(names: Sequence[str] | str | None, profile: str) -> tuple[str, int] | None:
    """The name that expands to the most instances (said in the error), if names are given."""
    from .names import parse_measure

    if isinstance(names, str):
        names = [names]
    best = None
    for name in names or ():
        try:
            n = len(parse_measure(name, profile)) if isinstance(name, str) else 0
        except Exception:  # refused on its own later, or already counted
            continue
        if best is None or n > best[1]:
            best = (name, n)
    return best


def check_instances(n_instances: int, names, profile: str,
                    budget: EvaluationBudget | None = None) -> None:
    """:class:`BudgetError` when ``names`` expand to more instances than the budget allows
    (before any input is read)."""
    budget = budget or _BUDGET.get()
    if budget is None or budget.max_instances is None or n_instances <= budget.max_instances:
        return
    widest = _widest(names, profile)
    said = (f"; {widest[0][:60]!r}{'…' if len(widest[0]) > 60 else ''} alone expands to "
            f"{widest[1]:,}") if widest and widest[1] > 1 else ""
    raise BudgetError(
        f"the measures expand to {n_instances:,} instances, over {budget.instances_name} "
        f"{budget.max_instances:,}{said}: ask for fewer cutoffs or measures",
        budget=budget.instances_name, limit=budget.max_instances, total=n_instances,
        factors={"instances": n_instances})


def check_values(n_instances: int, n_topics: int,
                 budget: EvaluationBudget | None = None) -> None:
    """:class:`BudgetError` when ``n_instances`` × ``n_topics`` values exceed the budget
    (once the topics are known, before any per-topic array is made)."""
    budget = budget or _BUDGET.get()
    if budget is None or budget.max_values is None:
        return
    total = n_instances * n_topics
    if total <= budget.max_values:
        return
    raise BudgetError(
        f"measures expand to {n_instances:,} instances × {n_topics:,} topics = {total:,} "
        f"values, over {budget.values_name} {budget.max_values:,}: ask for fewer cutoffs or "
        "measures, or evaluate fewer topics",
        budget=budget.values_name, limit=budget.max_values, total=total,
        factors={"instances": n_instances, "topics": n_topics})


def check_segments(n_instances: int | None, n_pairs: int, n_segments: int,
                   budget: EvaluationBudget | None = None) -> None:
    """:class:`BudgetError` (field ``options.topic_metadata``) when topic metadata has more
    distinct segment labels than ``max_segments`` (each is a summary of its own, and a
    comparison's a paired-test family), or when its aggregates, ``n_instances`` ×
    (``n_pairs`` topic-label pairs read + ``n_segments`` values answered), exceed
    ``max_values``: before any input is read (``n_instances`` None: the labels only)."""
    budget = budget or _BUDGET.get()
    if budget is None:
        return
    if budget.max_segments is not None and n_segments > budget.max_segments:
        raise BudgetError(
            f"the topic metadata has {n_segments:,} distinct segment labels, over "
            f"{budget.segments_name} {budget.max_segments:,}: each is aggregated (and "
            "compared) on its own; use fewer labels",
            budget=budget.segments_name, limit=budget.max_segments, total=n_segments,
            factors={"segments": n_segments}, field="options.topic_metadata")
    if n_instances is None or budget.max_values is None:
        return
    total = n_instances * (n_pairs + n_segments)
    if total <= budget.max_values:
        return
    raise BudgetError(
        f"the segments' aggregates are {n_instances:,} instances × ({n_pairs:,} topic-label "
        f"pairs + {n_segments:,} segments) = {total:,} values, over {budget.values_name} "
        f"{budget.max_values:,}: ask for fewer measures, or use fewer labels",
        budget=budget.values_name, limit=budget.max_values, total=total,
        factors={"instances": n_instances, "topic_label_pairs": n_pairs,
                 "segments": n_segments}, field="options.topic_metadata")
