"""The work of a comparison (compare room): what comparing so many pairs, measures and
topics with these tests costs (:func:`comparison_work`, a :class:`Work`), and the budget a
comparison is held to (``max_work``, :func:`work_budget`, :class:`WorkBudgetError`) before
any of its arrays is made.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

from ..errors import EvaluationError
from . import stats

# The work of a comparison, in units of about one resampled multiply-add (see comparison_work;
# measured with numpy/OpenBLAS on 2 cores: 0.02-0.08 ns a unit, the bootstrap the dearer).
WORK_PER_TOPIC = 200          # drawing one resample's random numbers, per topic
WORK_PER_COLUMN = 400         # testing one resampled statistic (compare, sort), per column
WORK_PER_DIFFERENCE = 40_000  # holding and reporting one per-topic difference (≈200 bytes)
# the Wilcoxon test (cranfield.compare.stats): under a millisecond per column
WILCOXON_RESAMPLES = 40_000


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
    (:mod:`cranfield.compare.stats`), so a budget on ``total`` bounds a comparison's time and,
    through its last term, its memory.

    ``segments``: the topic count of each segment compared besides the whole
    (:mod:`cranfield.inputs.segments`); each is a comparison of its own, and ``total`` their sum.
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


def check_work(work: Work, max_work: int | None) -> None:
    budget = _BUDGET.get()
    limit = max_work if max_work is not None or budget is None else budget.limit
    if budget is not None:
        budget.work = work
    if limit is not None and work.total > limit:
        exc = WorkBudgetError(work, limit)
        if budget is not None:
            budget.exceeded = exc
        raise exc
