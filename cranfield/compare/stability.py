"""Do the conclusions hold? The stability of a system ranking between two judgments (compare
room, issue #31).

The same systems scored on the same topics under judgments A (``from``: the truth) and B
(``to``): two ``(systems, topics)`` matrices of one measure's per-topic values. Each system
is ranked by its mean over the topics; the rankings are compared by Kendall's τ_b
(:func:`kendall_tau_b`), τ_AP (:func:`tau_ap`, B's ranking against A's) and rank-biased
overlap (:func:`rbo_ext`), each with a percentile bootstrap CI over topics
(:func:`bootstrap_intervals`); and every pair of systems is tested under A and under B with
the paired test and correction of comparisons (:func:`cranfield.compare.comparison_statistics.
pair_results`), so that the pairs whose significant difference appeared, vanished or flipped
can be named (:func:`pair_changes`). :func:`stability` gives the whole document and
:func:`stability_work` what it costs, before any array is made.

Rankings: by descending mean; systems with equal means are ordered by their index (the
caller orders the systems by name), so τ_AP and RBO, defined for rankings without ties, are
defined for every ranking but one whose systems are all tied (see each function's 0/0 rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from .comparison_settings import TEST_KEYS, ComparisonSettings, num
from .comparison_statistics import pair_results
from .comparison_work import comparison_work

DEFAULT_PERSISTENCE = 0.9
DEFAULT_LEVEL = 0.95
# the work of one bootstrap resample of the rank statistics, in the units of
# cranfield.compare.comparison_work (0.02-0.08 ns each): 2 × S × T multiply-adds for the
# means under A and B, WORK_PER_TOPIC a topic to draw the resample, and the four
# statistics: S² pair comparisons at WORK_PER_SYSTEM_PAIR each plus a fixed cost per resample
# (numpy calls). Measured on 2 cores (this machine, busy): about 0.29 ms a resample at 5
# systems and 1.3 ms at 200 systems, so 4e10 units (MAX_STABILITY_WORK's default) are about
# 3 s of bootstrap whatever the number of systems
WORK_PER_TOPIC = 200
WORK_PER_SYSTEM_PAIR = 400
WORK_PER_RESAMPLE = 4_000_000
# resamples drawn at once: (chunk, topics) counts, (chunk, systems) means
_CHUNK = 256


@dataclass(frozen=True)
class StabilityWork:
    """What a stability document costs (:func:`stability_work`): its factors and ``total``."""

    systems: int
    topics: int
    resamples: int
    tests: int     # the two comparisons' work (A and B), cranfield.compare.comparison_work
    total: int

    def describe(self) -> str:
        boot = self.total - self.tests
        return (f"{self.systems:,} systems, {self.topics:,} topics, {self.resamples:,} "
                f"bootstrap resamples: {boot:,} for the rank statistics' CIs + {self.tests:,} "
                f"for the paired tests under both judgments = {self.total:,}")


def stability_work(n_systems: int, n_topics: int, n_resamples: int, test: str,
                   n_permutations: int, n_samples: int) -> StabilityWork:
    """The work of :func:`stability` on ``n_systems`` × ``n_topics``::

        total = R × (2 × S × T + 200 × T + 400 × S² + 4,000,000)
                + 2 × comparison_work(S(S-1)/2 pairs, 1 measure, T topics, test)

    R = ``n_resamples`` (the rank statistics' bootstrap), S systems, T topics; the second
    term is the paired tests of every pair under each judgment, counted as a comparison
    counts them (its permutations or samples)."""
    s, t, r = int(n_systems), int(n_topics), int(n_resamples)
    pairs = s * (s - 1) // 2
    tests = 2 * comparison_work(pairs, 1, t, (test,), n_permutations, n_samples).total \
        if pairs else 0
    boot = r * (2 * s * t + WORK_PER_TOPIC * t + WORK_PER_SYSTEM_PAIR * s * s
                + WORK_PER_RESAMPLE)
    return StabilityWork(s, t, r, tests, boot + tests)


# -- rankings and their statistics ---------------------------------------------------------

def ranking(scores) -> np.ndarray:
    """The indices of ``scores`` from the highest to the lowest; equal scores in index order
    (a stable sort of the negated scores)."""
    return np.argsort(-np.asarray(scores, dtype=float), kind="stable")


def _all_tied(x: np.ndarray) -> bool:
    return x.size >= 2 and bool(np.all(x == x[0]))


def _undefined(x: np.ndarray, y: np.ndarray) -> bool:
    """No ranking to compare: fewer than 2 systems, a score that is no number (a mean over
    no topic), or every system tied under one of the two."""
    return (x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all())
            or _all_tied(x) or _all_tied(y))


def kendall_tau_b(x, y) -> float:
    """Kendall's τ_b between the rankings by scores ``x`` and ``y`` (one entry per system)::

        τ_b = (C − D) / sqrt((n0 − n1) (n0 − n2))

    C, D: the concordant and discordant pairs of systems; n0 = n(n−1)/2; n1, n2: the pairs
    tied in ``x``, in ``y`` (a pair tied in both counts in neither C nor D): scipy's
    ``stats.kendalltau`` (variant ``b``).

    0/0: fewer than 2 systems, or every system tied in ``x`` or in ``y`` (a zero
    denominator): NaN, as scipy gives; NaN too when a score is NaN (a mean over no topic).

    Reference: M. G. Kendall, "The treatment of ties in ranking problems", Biometrika 33(3),
    1945."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = x.size
    if n < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return math.nan
    # every ordered pair: each unordered pair twice, the diagonal (n zeros) once
    sx, sy = np.sign(np.subtract.outer(x, x)), np.sign(np.subtract.outer(y, y))
    n0 = n * (n - 1) // 2
    n1 = (int(np.count_nonzero(sx == 0)) - n) // 2
    n2 = (int(np.count_nonzero(sy == 0)) - n) // 2
    if n0 == n1 or n0 == n2:
        return math.nan
    s = float(np.einsum("ij,ij->", sx, sy)) / 2.0  # C − D, a sum of ±1 (exact)
    return min(1.0, max(-1.0, s / math.sqrt(n0 - n1) / math.sqrt(n0 - n2)))


def tau_ap(truth, estimate) -> float:
    """τ_AP of the ranking by scores ``estimate`` against the ranking by ``truth`` (one entry
    per system, the same systems; not symmetric)::

        τ_AP = 2 / (N − 1) × Σ_{i=2..N} C(i) / (i − 1) − 1

    where the estimate's ranking is walked from the top and C(i) counts the systems above
    its i-th that the truth ranks above it too. An error near the top costs more than one
    near the bottom; with N systems, τ_AP is 1 for the same ranking and −1 for the reverse.

    0/0: fewer than 2 systems, a NaN score, or every system tied in ``truth`` or in
    ``estimate`` (no ranking): NaN. Ties short of that are broken by the systems' order
    (:func:`ranking`).

    Reference: E. Yilmaz, J. A. Aslam and S. Robertson, "A new rank correlation coefficient
    for information retrieval", SIGIR 2008, eq. 1."""
    truth, estimate = np.asarray(truth, dtype=float), np.asarray(estimate, dtype=float)
    n = truth.size
    if _undefined(truth, estimate):
        return math.nan
    place = np.empty(n, dtype=np.int64)
    place[ranking(truth)] = np.arange(n)
    walked = place[ranking(estimate)]  # the truth's place of the estimate's i-th system
    above = walked[None, :] < walked[:, None]   # [i, j]: j above i in the truth
    correct = np.tril(above, -1).sum(axis=1)[1:]  # C(i), j above i in the estimate
    return float(2.0 / (n - 1) * np.sum(correct / np.arange(1, n)) - 1.0)


def tau_ap_symmetric(x, y) -> float:
    """The mean of τ_AP both ways, (τ_AP(x, y) + τ_AP(y, x)) / 2: when neither judgment is
    the truth. 0/0 as :func:`tau_ap` (NaN). Reference: Yilmaz, Aslam and Robertson, SIGIR
    2008, section 3 (the symmetric version)."""
    return (tau_ap(x, y) + tau_ap(y, x)) / 2.0


def rbo_ext(x, y, persistence: float = DEFAULT_PERSISTENCE) -> float:
    """Extrapolated rank-biased overlap of the rankings by scores ``x`` and ``y`` (the same
    k systems, so both lists are of depth k)::

        RBO_ext = X_k / k × p^k + (1 − p) / p × Σ_{d=1..k} X_d / d × p^d

    X_d: how many systems both rankings put in their top d; p = ``persistence`` in (0, 1)
    (the deeper the list is read; 0.9 gives the top 10 ranks about 86% of the weight).
    1 for the same ranking; for lists of the same systems X_k = k.

    0/0: no system, a NaN score, or (2 or more systems) every system tied in ``x`` or in
    ``y``: NaN; ties short of that are broken by the systems' order (:func:`ranking`).

    Reference: W. Webber, A. Moffat and J. Zobel, "A similarity measure for indefinite
    rankings", ACM TOIS 28(4), 2010, eq. 32 (RBO_ext with equal list lengths)."""
    if not 0.0 < persistence < 1.0:
        raise InputError("persistence", f"must be between 0 and 1, got {persistence!r}",
                         field="persistence")
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    k = x.size
    if k == 0 or (k >= 2 and _undefined(x, y)) or not np.isfinite(np.r_[x, y]).all():
        return math.nan
    place_x, place_y = np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64)
    place_x[ranking(x)] = np.arange(k)
    place_y[ranking(y)] = np.arange(k)
    # a system is in both tops from depth max(place) + 1 on
    overlap = np.cumsum(np.bincount(np.maximum(place_x, place_y), minlength=k))  # X_1..X_k
    depth = np.arange(1, k + 1)
    p = float(persistence)
    weights = p ** depth
    return float(overlap[-1] / k * p**k + (1.0 - p) / p * np.sum(overlap / depth * weights))


# -- bootstrap -------------------------------------------------------------------------------

def resampled_means(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The systems' means over resampled topics: ``values`` (systems, topics), ``counts``
    (resamples, topics) how often each topic is drawn; (resamples, systems)."""
    return counts @ values.T / values.shape[1]


def bootstrap_intervals(a, b, n_resamples: int, seed: int, level: float = DEFAULT_LEVEL,
                        persistence: float = DEFAULT_PERSISTENCE) -> dict[str, tuple]:
    """Percentile bootstrap CIs over topics of τ_b, τ_AP (B against A), symmetric τ_AP and
    RBO_ext: ``n_resamples`` resamples of the topics with replacement (the same topics for
    A and B, which are paired), drawn by numpy's PCG64 from ``seed``; each statistic
    computed on the systems' means over the resample; the CI the ((1 − level)/2,
    (1 + level)/2) quantiles (numpy's linear interpolation) of its defined values.

    Returns ``{name: (ci_low, ci_high, undefined)}``, ``undefined`` the resamples on which
    the statistic is not defined (its 0/0 rule); the CI is (NaN, NaN) when none is.

    Reference: B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", 1993,
    ch. 13 (the percentile interval)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not 0.0 < level < 1.0:
        raise InputError("level", f"must be between 0 and 1, got {level!r}", field="level")
    n_topics = a.shape[1]
    names = ("kendall_tau", "tau_ap", "tau_ap_symmetric", "rbo")
    drawn = {k: np.full(n_resamples, np.nan) for k in names}
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples if n_topics else 0, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        picks = rng.integers(0, n_topics, size=(size, n_topics))
        counts = np.zeros((size, n_topics))
        np.add.at(counts, (np.arange(size)[:, None], picks), 1.0)
        means_a, means_b = resampled_means(a, counts), resampled_means(b, counts)
        for r in range(size):
            x, y = means_a[r], means_b[r]
            drawn["kendall_tau"][start + r] = kendall_tau_b(x, y)
            drawn["tau_ap"][start + r] = tau_ap(x, y)
            drawn["tau_ap_symmetric"][start + r] = tau_ap_symmetric(x, y)
            drawn["rbo"][start + r] = rbo_ext(x, y, persistence)
    out = {}
    for k, v in drawn.items():
        defined = v[np.isfinite(v)]
        undefined = int(n_resamples - defined.size)
        if defined.size == 0:
            out[k] = (math.nan, math.nan, undefined)
            continue
        low, high = np.quantile(defined, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
        out[k] = (float(low), float(high), undefined)
    return out


# -- significant differences -----------------------------------------------------------------

def pair_status(sig_a: bool, sig_b: bool, diff_a: float | None, diff_b: float | None) -> str:
    """What became of one pair's significant difference from A to B: ``flipped``
    (significant under both, opposite directions), ``vanished`` (under A only), ``appeared``
    (under B only), ``held`` (under both, not in opposite directions: a mean difference of 0
    or None, significant by a test of medians or ranks, names no direction) or ``none``
    (under neither)."""
    if sig_a and sig_b:
        a, b = diff_a or 0.0, diff_b or 0.0
        return "flipped" if (a > 0 and b < 0) or (a < 0 and b > 0) else "held"
    if sig_a:
        return "vanished"
    return "appeared" if sig_b else "none"


def pair_changes(a, b, systems: list[str], topics: list[str], measure: str,
                 settings: ComparisonSettings, warnings: list[dict]) -> list[dict]:
    """Every pair of systems tested under A and under B by the comparisons' paired test and
    correction (:func:`cranfield.compare.comparison_statistics.pair_results`: the test named
    first in ``settings.tests``, its adjusted p-value against ``settings.alpha``), with
    :func:`pair_status`. Each pair: ``a``, ``b`` (the systems; the difference is b − a),
    ``status`` and, under ``from`` and ``to``, ``mean_diff``, ``p_value``, ``p_adjusted``
    and ``significant``."""
    n = len(systems)
    pair_runs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    if not pair_runs:
        return []
    key = TEST_KEYS[settings.tests[0]]
    tested = {}
    for side, matrix in (("from", a), ("to", b)):
        values = np.asarray(matrix, dtype=float)[None, :, :]
        pairs, _ = pair_results([measure], systems, pair_runs, topics, values, settings,
                                warnings)
        tested[side] = pairs
    out = []
    for pa, pb in zip(tested["from"], tested["to"], strict=True):
        sides = {side: {"mean_diff": p["mean_diff"], "p_value": p[key]["p_value"],
                        "p_adjusted": p[key]["p_adjusted"],
                        "significant": p[key]["significant"]}
                 for side, p in (("from", pa), ("to", pb))}
        status = pair_status(sides["from"]["significant"], sides["to"]["significant"],
                             sides["from"]["mean_diff"], sides["to"]["mean_diff"])
        out.append({"a": pa["a"], "b": pa["b"], "status": status, **sides})
    return out


# -- the document ------------------------------------------------------------------------------

def stability(a, b, systems: list[str], topics: list[str], *, measure: str,
              test: str = "t", correction: str = "holm", alpha: float = 0.05,
              n_resamples: int = 1000, n_permutations: int = 10000, seed: int = 0,
              level: float = DEFAULT_LEVEL, persistence: float = DEFAULT_PERSISTENCE
              ) -> dict[str, Any]:
    """The stability document of ``measure``'s per-topic values ``a`` (judgment A, ``from``)
    and ``b`` (judgment B, ``to``), each ``(len(systems), len(topics))`` of finite numbers.

    ``test``/``correction``/``alpha``: the comparisons' paired test (t, randomization,
    bootstrap, wilcoxon) and correction for the pairs (:func:`pair_changes`;
    ``n_permutations`` for the randomization test, ``n_resamples`` samples for the bootstrap
    test); ``n_resamples``, ``seed``, ``level``: the rank statistics' bootstrap
    (:func:`bootstrap_intervals`); ``persistence``: RBO's p.

    Returns ``{"measure", "systems": [{name, from: {mean, rank}, to: {...}}], "n_topics",
    "statistics": {kendall_tau, tau_ap, tau_ap_symmetric, rbo: {value, ci_low, ci_high,
    undefined_resamples}}, "bootstrap": {resamples, seed, level, method}, "persistence",
    "pairs_tested": {test, correction, alpha}, "pair_counts": {status: n}, "changed_pairs":
    [the pairs that appeared, vanished or flipped], "pairs": [every pair], "warnings"}``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    shape = (len(systems), len(topics))
    for name, m in (("from", a), ("to", b)):
        if m.shape != shape:
            raise InputError(name, f"per-topic values of shape {m.shape}, expected {shape} "
                             "(systems × topics)", field=name)
        if not np.isfinite(m).all():
            raise InputError(name, "per-topic values must be finite numbers", field=name)
    if not 0.0 < persistence < 1.0:
        raise InputError("persistence", f"must be between 0 and 1, got {persistence!r}",
                         field="persistence")
    warnings: list[dict] = []
    runs = {s: None for s in systems}
    settings = ComparisonSettings.check(
        runs if len(runs) >= 2 else {"_1": None, "_2": None}, None, (test,), False,
        correction, alpha, n_permutations, n_resamples, seed, 0)
    if len(topics) == 0:
        mean_a = mean_b = np.full(len(systems), np.nan)
    else:
        mean_a, mean_b = a.mean(axis=1), b.mean(axis=1)
    rank_a, rank_b = np.empty(len(systems), int), np.empty(len(systems), int)
    rank_a[ranking(mean_a)] = np.arange(1, len(systems) + 1)
    rank_b[ranking(mean_b)] = np.arange(1, len(systems) + 1)
    point = {"kendall_tau": kendall_tau_b(mean_a, mean_b), "tau_ap": tau_ap(mean_a, mean_b),
             "tau_ap_symmetric": tau_ap_symmetric(mean_a, mean_b),
             "rbo": rbo_ext(mean_a, mean_b, persistence) if topics else math.nan}
    cis = bootstrap_intervals(a, b, n_resamples, seed, level, persistence)
    statistics = {k: {"value": num(v), "ci_low": num(cis[k][0]), "ci_high": num(cis[k][1]),
                      "undefined_resamples": cis[k][2]} for k, v in point.items()}
    if len(systems) and not len(topics):
        warnings.append({"code": "no-shared-topics", "message": "no topic has a value of "
                         "every system under both judgments: no mean, no statistic"})
    elif len(systems) < 2:
        warnings.append({"code": "too-few-systems", "message": f"{len(systems)} system(s) "
                         "under both judgments: a ranking needs two; no statistic is "
                         "defined"})
    elif any(_all_tied(m) for m in (mean_a, mean_b)):
        warnings.append({"code": "all-tied", "message": "every system has the same mean "
                         "under one judgment: its ranking says nothing, τ, τ_AP and RBO "
                         "are undefined"})
    pairs = pair_changes(a, b, list(systems), list(topics), measure, settings, warnings) \
        if len(topics) else []
    counts = {s: 0 for s in ("appeared", "vanished", "flipped", "held", "none")}
    for p in pairs:
        counts[p["status"]] += 1
    return {
        "measure": measure,
        "n_systems": len(systems),
        "n_topics": len(topics),
        "systems": [{"name": s, "from": {"mean": num(mean_a[i]), "rank": int(rank_a[i])},
                     "to": {"mean": num(mean_b[i]), "rank": int(rank_b[i])}}
                    for i, s in enumerate(systems)],
        "statistics": statistics,
        "bootstrap": {"resamples": int(n_resamples), "seed": int(seed), "level": float(level),
                      "method": "percentile, topics resampled with replacement"},
        "persistence": float(persistence),
        "pairs_tested": {"test": test, "correction": correction, "alpha": float(alpha),
                         **({"permutations": int(n_permutations)}
                            if test == "randomization" else {}),
                         **({"samples": int(n_resamples)} if test == "bootstrap" else {})},
        "pair_counts": counts,
        "changed_pairs": [p for p in pairs if p["status"] in ("appeared", "vanished",
                                                               "flipped")],
        "pairs": pairs,
        "warnings": warnings,
    }
