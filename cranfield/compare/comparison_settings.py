"""The settings of a comparison (compare room): the tests and corrections it offers, the
evaluation options its runs must share, its statistical settings validated
(:class:`ComparisonSettings`), and how it reports numbers (:func:`num`, :func:`percent`).
Below :mod:`cranfield.compare.comparison`, :mod:`cranfield.compare.comparison_statistics`,
:mod:`cranfield.compare.gate` and :mod:`cranfield.compare.comparison_text`, which all name them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from ..errors import EvaluationError, InputError

TESTS = ("t", "randomization", "bootstrap", "wilcoxon")
CORRECTIONS = ("holm", "bonferroni", "bh", "none")
EVAL_OPTIONS = ("profile", "relevance_level", "judged_only", "depth", "complete_topics",
                "collection_size")
# the key each test's results sit under in a pair
TEST_KEYS = {"t": "t_test", "randomization": "randomization", "bootstrap": "bootstrap",
             "wilcoxon": "wilcoxon"}
# Below this many topics the bootstrap shift test rejects a true null too often (measured by
# simulation at alpha 0.05: 0.50 at 2 topics, 0.15 at 5, 0.08-0.11 at 10, 0.07 at 20-25,
# 0.06 at 30; tests/engine/test_gate.py): a warning, and no gate on it.
BOOTSTRAP_MIN_TOPICS = 30


@dataclass(frozen=True)
class ComparisonSettings:
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
              n_samples, seed, largest_losses) -> ComparisonSettings:
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
        # 1 - alpha too: the intervals are at level 1 - alpha, which is 1.0 in a double for
        # an alpha below about 1.1e-16 (a 500 once, issue #31's review)
        if not isinstance(alpha, int | float) or not 0 < alpha < 1 or not 0 < 1 - alpha < 1:
            raise InputError("alpha", f"must be between 0 and 1 (and 1 - alpha below 1 in "
                                      f"double precision), got {alpha!r}", field="alpha")
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



def percent(level: float) -> str:
    """A level as a percentage for labels (0.95 -> ``95``)."""
    return f"{round(100 * level, 6):g}"
