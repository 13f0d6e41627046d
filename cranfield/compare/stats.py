"""Statistics for comparing systems over topics: paired tests, CIs, corrections, effect sizes.

Measure-agnostic: every function takes plain numbers, one per topic. Paired data arrive as
``diffs`` of shape ``(n_topics, n_pairs)``, one column per compared pair, and the convention
throughout is ``diff = b - a`` (system minus baseline: positive means b scored higher). A 1-D
``diffs`` is read as a single column. Inputs must be finite: a NaN score is a missing
value, and silently averaging over it would be a wrong answer, so it raises ValueError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np
from scipy import special

# Memory per chunk of the random sign / count matrices (float64). The chunk length depends
# only on n_topics (the random stream is drawn chunk by chunk, so it is part of what a seed
# means: changing it would change the sign vectors drawn).
_CHUNK_BYTES = 64 * 2**20
# The most one product of resamples × columns (float64) may take: the sign-vector sums of a
# chunk, or the bootstrap means of all resamples. A product that fits is one matmul over every
# column, as before tiling existed; a larger one is split into tiles of columns of one fixed
# width. The tiling depends only on the shape (resamples, topics, columns), never on how much
# memory a call is allowed (``max_bytes``), so results never depend on that either.
_TILE_BYTES = 64 * 2**20
# Relative to the column's sum of |d|: rounding in a long float sum is ~n·eps of it at worst,
# so this separates "equal up to rounding" from genuinely different sums.
_REL_TOL = 1e-10
# A column whose sd is this small relative to max|d| is constant up to rounding error.
_ZERO_SD = 1e-12
DEFAULT_EXACT_THRESHOLD = 16
# The Wilcoxon test is exact (dynamic programming over all 2^n sign patterns) up to this many
# non-zero, untied differences, and a normal approximation beyond (see wilcoxon_test).
WILCOXON_EXACT_MAX_N = 50


@dataclass(frozen=True)
class TTest:
    """One paired t-test (``paired_t_test``); ``mean_diff`` and the CI are of ``b - a``."""

    statistic: float
    df: int
    p_value: float
    mean_diff: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class TTestResult:
    """Batched paired t-tests (``t_test``): arrays with one entry per column of ``diffs``."""

    statistic: np.ndarray
    df: int
    p_value: np.ndarray
    mean_diff: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


@dataclass(frozen=True)
class RandomizationResult:
    p_value: np.ndarray
    mean_diff: np.ndarray
    n_permutations: int  # sign vectors evaluated: 2**n when exact
    seed: int
    exact: bool


@dataclass(frozen=True)
class BootstrapResult:
    p_value: np.ndarray
    mean_diff: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    level: float
    n_samples: int
    seed: int


@dataclass(frozen=True)
class WilcoxonResult:
    """Per column: ``statistic`` min(W+, W−) over the non-zero differences, ``p_value``
    (two-sided), ``n`` the non-zero differences ranked, ``method`` "exact" or "normal" ("none"
    when no difference is left), ``smallest_p`` the smallest p-value the method can give on
    these magnitudes (every sign alike)."""

    statistic: np.ndarray
    p_value: np.ndarray
    n: np.ndarray | None = None
    method: tuple[str, ...] = ()
    smallest_p: np.ndarray | None = None


class WinsTiesLosses(NamedTuple):
    wins: np.ndarray
    ties: np.ndarray
    losses: np.ndarray


def _columns(diffs) -> np.ndarray:
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim == 1:
        d = d[:, None]
    if d.ndim != 2:
        raise ValueError(f"diffs must be 1-D or 2-D (n_topics, n_pairs), got shape {d.shape}")
    if not np.isfinite(d).all():
        raise ValueError("diffs must be finite (NaN/inf is not a score difference)")
    # Column-major so each column is reduced like a 1-D array (pairwise summation): a pair's
    # statistics are then bit-identical whether tested alone or in a batch.
    return np.asfortranarray(d)


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")


def _moments(d: np.ndarray):
    """Per column: mean, sd (ddof=1; nan if n < 2), and whether the column is constant."""
    n = d.shape[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = d.sum(axis=0) / n if n else np.full(d.shape[1], np.nan)
        sd = d.std(axis=0, ddof=1) if n >= 2 else np.full(d.shape[1], np.nan)
    scale = np.abs(d).max(axis=0) if n else np.zeros(d.shape[1])
    constant = sd <= _ZERO_SD * scale
    return mean, sd, constant


def mean_ci(x, level: float = 0.95) -> tuple[float, float, float]:
    """Student-t confidence interval of the mean over topics.

    ``mean ± t_{n-1, (1+level)/2} · s / sqrt(n)`` with ``s`` the sample sd (ddof=1).
    ``x``: 1-D finite scores. Edge cases: n = 0 → (nan, nan, nan); n = 1 → (mean, nan, nan);
    zero variance → (mean, mean, mean). Reference: Sakai 2014, "Statistical reform in
    information retrieval?", SIGIR Forum 48(1).
    """
    _check_level(level)
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    mean, sd, constant = (float(v[0]) for v in _moments(_columns(x)))
    if x.size < 2:
        return mean, float("nan"), float("nan")
    half = 0.0 if constant else special.stdtrit(x.size - 1, 0.5 + level / 2) * sd / np.sqrt(x.size)
    return mean, mean - half, mean + half


def t_test(diffs, level: float = 0.95) -> TTestResult:
    """Two-sided paired t-test per column of ``diffs`` (b - a).

    ``t = mean(d) / (s_d / sqrt(n))``, df = n - 1, ``p = 2 · T_{df}(-|t|)``; CI
    ``mean ± t_{df,(1+level)/2} · s_d / sqrt(n)``. Edge cases: n < 2 → statistic, p and CI nan.
    Zero variance (sd ≤ 1e-12·max|d|, i.e. constant up to rounding): all differences 0 →
    statistic nan, p 1.0 (no evidence of any difference); constant non-zero → statistic ±inf,
    p 0.0 (every topic moved by the same amount); the CI collapses to the mean.
    Reference: Smucker, Allan & Carterette 2007, "A comparison of statistical significance
    tests for information retrieval evaluation", CIKM.
    """
    _check_level(level)
    d = _columns(diffs)
    n = d.shape[0]
    mean, sd, constant = _moments(d)
    df = n - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        se = sd / np.sqrt(n)
        t = np.where(constant, np.where(mean == 0, np.nan, np.sign(mean) * np.inf), mean / se)
        half = np.where(constant, 0.0, special.stdtrit(df, 0.5 + level / 2) * se if n >= 2 else se)
    p = np.where(constant & (mean == 0), 1.0, 2.0 * special.stdtr(df, -np.abs(t)))
    if n < 2:
        t, p = np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    return TTestResult(t, df, p, mean, mean - half, mean + half)


def paired_t_test(a, b, level: float = 0.95) -> TTest:
    """Two-sided paired t-test of ``b`` against baseline ``a`` on ``d = b - a``.

    Same formula and edge-case rules as ``t_test``; matches ``scipy.stats.ttest_rel(b, a)``.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"a and b must be 1-D of equal length, got {a.shape} and {b.shape}")
    r = t_test(b - a, level)
    return TTest(float(r.statistic[0]), r.df, float(r.p_value[0]), float(r.mean_diff[0]),
                 float(r.ci_low[0]), float(r.ci_high[0]))


def randomization_test(diffs, n_permutations: int = 10000, seed: int = 0,
                       exact_threshold: int | None = None) -> RandomizationResult:
    """Two-sided paired randomization (sign-flip) test per column of ``diffs``.

    Under H0 each topic's difference is equally likely to have either sign; the statistic is
    |Σ s_i d_i| (equivalently |mean|) over sign vectors s ∈ {±1}^n. Exact when
    n ≤ ``exact_threshold`` (None → 16): all 2^n sign vectors, ``p = #{|Σ s d| ≥ |Σ d|} / 2^n``.
    Otherwise Monte Carlo with ``n_permutations`` random sign vectors from
    ``np.random.default_rng(seed)``: ``p = (#{|Σ s d| ≥ |Σ d|} + 1) / (n_permutations + 1)``,
    the +1 counting the observed labelling so p is never 0 (Phipson & Smyth 2010,
    "Permutation p-values should never be zero", SAGMB 9(1)). The same sign vectors serve
    every column, so one column's p does not depend on the others, and the same seed gives
    the same p. Ties within 1e-10·Σ|d| count as ties (rounding must not decide them).
    Edge cases: n = 0 → p nan; an all-zero column → p 1.0.
    Memory: sign vectors are drawn a chunk of at most 64 MiB (as float64) at a time, and
    their sums made a tile of columns of at most 64 MiB at a time: bounded whatever the
    permutations and columns.
    Reference: Smucker, Allan & Carterette 2007, CIKM.
    """
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be ≥ 1, got {n_permutations!r}")
    d = _columns(diffs)
    n = d.shape[0]
    threshold = DEFAULT_EXACT_THRESHOLD if exact_threshold is None else exact_threshold
    observed = d.sum(axis=0)
    tol = _REL_TOL * np.abs(d).sum(axis=0)
    with np.errstate(invalid="ignore"):
        mean = observed / n if n else np.full(d.shape[1], np.nan)
    if n == 0:
        return RandomizationResult(np.full(d.shape[1], np.nan), mean, 0, seed, True)
    exact = n <= threshold
    total = 2**n if exact else n_permutations
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_BYTES // (8 * n))
    tiles = _tiles(d.shape[1], min(chunk, total))
    reach = np.abs(observed) - tol  # |Σ s d| at least this counts
    count = np.zeros(d.shape[1], dtype=np.int64)
    for start in range(0, total, chunk):
        rows = min(chunk, total - start)
        if exact:  # bit i of the code says whether topic i is flipped
            codes = np.arange(start, start + rows, dtype=np.int64)[:, None]
            flips = ((codes >> np.arange(n)) & 1).astype(np.float64)
        else:
            packed = rng.integers(0, 256, size=(rows, (n + 7) // 8), dtype=np.uint8)
            flips = np.unpackbits(packed, axis=1, count=n).astype(np.float64)
            del packed
        for cols, skip in tiles:
            # s·d = Σd − 2·(flipped indicator)·d: one matmul for every column of the tile;
            # in place, each step the same operation on the same numbers as out of place
            sums = flips @ d[:, cols]
            sums *= 2.0
            np.subtract(observed[cols], sums, out=sums)
            np.abs(sums, out=sums)
            count[cols.start + skip:cols.stop] += (sums[:, skip:] >= reach[cols][skip:]).sum(
                axis=0)
            del sums
        del flips  # before the next chunk's: never two at once
    p = count / total if exact else (count + 1) / (total + 1)
    return RandomizationResult(p, mean, total, seed, exact)


def bootstrap_test(diffs, n_samples: int = 10000, seed: int = 0,
                   level: float = 0.95, *, max_bytes: int | None = None) -> BootstrapResult:
    """Paired bootstrap over topics per column of ``diffs``: percentile CI and shift p-value.

    Resample the n topics with replacement ``n_samples`` times (B); each resample's mean is
    ``c · d / n`` with ``c`` its multinomial count vector (the same B resamples serve every
    column). CI: the (1−level)/2 and (1+level)/2 quantiles of the B means. p-value (shift
    method: H0 distribution is the bootstrap distribution centred at 0):
    ``p = (#{|m*_b − m| ≥ |m|} + 1) / (B + 1)``, ties within 1e-10·mean|d| counted.
    Edge cases: n = 0 → all nan; n = 1 → no p-value and no CI (nan; the mean difference is
    the one topic's), as the t test has none at df 0: every resample is that topic, so
    there is no distribution to test against (its p would be 1/(B+1), "significant" on
    one topic; review R2 F5); an all-zero column → p 1.0 and CI (0, 0); a constant
    non-zero column of n ≥ 2 → p 1/(B+1) and a CI of width 0.

    Memory: the quantiles need all B means of a column at once. Columns are taken in tiles
    whose B means fit in 64 MiB (one tile of every column when B × columns fit; a tile has
    at least one column, 8 bytes a sample), and the means of as many tiles as fit in
    ``max_bytes`` (default 64 MiB) are held at once; each further group of tiles draws the
    same B resamples again (same seed, same stream), a chunk of at most 64 MiB at a time.
    The result does not depend on ``max_bytes``: it only trades passes for memory.
    References: Efron & Tibshirani 1993, An Introduction to the Bootstrap, §16.4;
    Sakai 2006, "Evaluating evaluation metrics based on the bootstrap", SIGIR.
    """
    _check_level(level)
    if n_samples < 1:
        raise ValueError(f"n_samples must be ≥ 1, got {n_samples!r}")
    d = _columns(diffs)
    n, k = d.shape
    if n == 0:
        nan = np.full(k, np.nan)
        return BootstrapResult(nan, nan, nan, nan, level, n_samples, seed)
    if n == 1:  # one topic: no distribution to test against (as the t test at df 0)
        nan = np.full(k, np.nan)
        return BootstrapResult(nan, d[0].astype(np.float64), nan, nan, level, n_samples, seed)
    observed = d.sum(axis=0) / n
    tol = _REL_TOL * np.abs(d).sum(axis=0) / n
    reach = np.abs(observed) - tol  # |m*_b − m| at least this counts
    tiles = _tiles(k, n_samples)
    per_pass = max(1, (_TILE_BYTES if max_bytes is None else max_bytes)
                   // max(1, 8 * n_samples * _width(tiles)))
    count = np.zeros(k, dtype=np.int64)
    low, high = np.empty(k), np.empty(k)
    quantiles = [(1 - level) / 2, (1 + level) / 2]
    for first in range(0, len(tiles), per_pass):
        group = tiles[first:first + per_pass]
        means = [np.empty((n_samples, cols.stop - cols.start)) for cols, _ in group]
        for start, rows, counts in _resample_counts(n, n_samples, seed):
            for block, (cols, _) in zip(means, group, strict=True):
                out = block[start:start + rows]
                np.matmul(counts, d[:, cols], out=out)
                out /= n
            del counts
        for block, (cols, skip) in zip(means, group, strict=True):
            new = slice(cols.start + skip, cols.stop)
            count[new] = _shifted_at_least(block[:, skip:], observed[new], reach[new])
            # in place: the quantiles are order statistics, whatever order partition leaves
            low[new], high[new] = np.quantile(block[:, skip:], quantiles, axis=0,
                                              overwrite_input=True)
        del means
    return BootstrapResult((count + 1) / (n_samples + 1), observed, low, high, level, n_samples,
                           seed)


def _tiles(k: int, rows: int) -> list[tuple[slice, int]]:
    """The column tiles of a product of ``rows`` resamples × ``k`` columns, as (columns,
    skip): all k in one tile when the float64 product fits in ``_TILE_BYTES``, else tiles of
    the widest width that fits (a multiple of 16 from 16 up), each that wide: the last one
    ends at column k and overlaps the one before, whose first ``skip`` columns it repeats.
    The tiling depends on the shape only, because BLAS may round a column's sums differently
    in a product of another width (a narrow remainder takes other kernels): so the tiling is
    part of the result, and kept as close to one product as memory allows."""
    if rows * k * 8 <= _TILE_BYTES:
        return [(slice(0, k), 0)] if k else []
    width = max(1, _TILE_BYTES // (8 * rows))
    width -= width % 16 if width >= 16 else 0
    tiles = []
    for start in range(0, k, width):
        first = min(start, k - width)
        tiles.append((slice(first, first + width), start - first))
    return tiles


def _width(tiles: list[tuple[slice, int]]) -> int:
    return tiles[0][0].stop - tiles[0][0].start if tiles else 0


def _resample_counts(n: int, n_samples: int, seed: int):
    """The bootstrap's multinomial count vectors, drawn from ``default_rng(seed)`` in chunks:
    ``(start, rows, counts)`` with ``counts`` (rows, n) float64. Every call yields the same."""
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_BYTES // (24 * n))  # int64 indices and counts, float64 copy
    for start in range(0, n_samples, chunk):
        rows = min(chunk, n_samples - start)
        picks = rng.integers(0, n, size=(rows, n))
        picks += n * np.arange(rows)[:, None]
        counts = np.bincount(picks.ravel(), minlength=rows * n).reshape(rows, n)
        del picks
        floats = counts.astype(np.float64)
        del counts
        yield start, rows, floats
        del floats  # before the next chunk's: never two at once


def _shifted_at_least(means: np.ndarray, observed: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Per column, how many |means − observed| reach ``reach``, counted a slab of rows at a
    time (no temporary the size of ``means``)."""
    count = np.zeros(means.shape[1], dtype=np.int64)
    slab = max(1, 2**22 // max(1, 8 * means.shape[1]))
    for start in range(0, means.shape[0], slab):
        shifted = means[start:start + slab] - observed
        np.abs(shifted, out=shifted)
        count += (shifted >= reach).sum(axis=0)
    return count


def wilcoxon_test(diffs) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test per column of ``diffs`` (b − a), computed here: the
    result does not depend on the installed scipy (whose automatic choice of method changed
    between versions: 1.11 and 1.17 give 0.257 and 0.5 on the same data).

    Float noise: differences are compared at the randomization test's tolerance,
    ``tol = 1e-10 · Σ|d|`` of the column: |d| ≤ tol is a zero, and sorted |d| that differ by
    at most tol are one value (tied, sharing their mid-rank), so ``0.4 − 0.3`` and
    ``0.3 − 0.2`` are ties as they should be.

    Method, in this order:

    - zeros (|d| ≤ tol) are dropped (Wilcoxon's zero method, scipy's ``zero_method="wilcox"``);
      n is the number of non-zero differences left. n = 0 → statistic nan, p 1.0 (an empty
      column: p nan).
    - W+ = Σ ranks of the positive differences (mid-ranks for ties), W− likewise;
      statistic = min(W+, W−) (scipy's two-sided statistic).
    - **exact** when n ≤ ``WILCOXON_EXACT_MAX_N`` (50) and no two non-zero |d| tie: the null
      distribution of W+ (each of the 2^n sign patterns equally likely) by dynamic
      programming over the ranks 1..n, ``p = min(1, 2 · P(W+ ≤ min(W+, W−)))``. Equals
      ``scipy.stats.wilcoxon(d, zero_method="wilcox", method="exact")``.
    - **normal** otherwise (ties, or n > 50): ``z = (W+ − n(n+1)/4) / σ`` with
      ``σ² = n(n+1)(2n+1)/24 − Σ(t³ − t)/48`` (t: the size of each group of tied |d|), no
      continuity correction, ``p = 2 · Φ(−|z|)``. Equals ``scipy.stats.wilcoxon(d,
      zero_method="wilcox", method="approx", correction=False)``.

    ``smallest_p``: the p-value with every sign alike (W+ = 0), the least the method can give
    on these magnitudes: 2/2^n when exact. A gate uses it to say when a test cannot decide.

    References: Wilcoxon 1945, "Individual comparisons by ranking methods", Biometrics
    Bulletin 1(6); Lehmann 1975, Nonparametrics, §3.2 (ties); Smucker, Allan & Carterette
    2007, CIKM.
    """
    d = _columns(diffs)
    n_topics, k = d.shape
    statistic, p, smallest = np.full(k, np.nan), np.full(k, np.nan), np.full(k, np.nan)
    used = np.zeros(k, dtype=np.int64)
    methods: list[str] = []
    for j in range(k):  # per pair, not per topic: columns differ in zeros and ties
        if n_topics == 0:
            methods.append("none")
            continue
        column = d[:, j]
        tol = _REL_TOL * np.abs(column).sum()
        signed, ranks, ties = _signed_ranks(column, tol)
        n = signed.size
        used[j] = n
        if n == 0:
            p[j] = smallest[j] = 1.0
            methods.append("none")
            continue
        w_plus = float(ranks[signed > 0].sum())
        w_minus = n * (n + 1) / 2 - w_plus
        statistic[j] = min(w_plus, w_minus)
        if n <= WILCOXON_EXACT_MAX_N and ties.max() == 1:
            cdf = _wilcoxon_cdf(n)  # P(W+ ≤ w) for w = 0..n(n+1)/2
            p[j] = min(1.0, 2.0 * cdf[int(round(statistic[j]))])
            smallest[j] = min(1.0, 2.0 / 2.0**n)
            methods.append("exact")
        else:
            mean = n * (n + 1) / 4
            var = n * (n + 1) * (2 * n + 1) / 24 - float((ties**3 - ties).sum()) / 48
            z = (w_plus - mean) / math.sqrt(var)
            p[j] = min(1.0, 2.0 * float(special.ndtr(-abs(z))))
            smallest[j] = min(1.0, 2.0 * float(special.ndtr(-mean / math.sqrt(var))))
            methods.append("normal")
    return WilcoxonResult(statistic, p, used, tuple(methods), smallest)


def _signed_ranks(column: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-zero differences (|d| > tol), their ranks by |d| (mid-ranks for values within
    ``tol`` of the one before: a run of such values is one tied group), and the size of each
    tied group."""
    signed = column[np.abs(column) > tol]
    if signed.size == 0:
        return signed, signed.copy(), np.zeros(0, dtype=np.int64)
    order = np.argsort(np.abs(signed), kind="stable")
    magnitudes = np.abs(signed)[order]
    starts = np.flatnonzero(np.concatenate(([True], np.diff(magnitudes) > tol)))
    sizes = np.diff(np.append(starts, magnitudes.size))
    mid = starts + (sizes + 1) / 2  # ranks start+1 .. start+size, 1-based
    ranks = np.empty(signed.size)
    ranks[order] = np.repeat(mid, sizes)
    return signed, ranks, sizes


@lru_cache(maxsize=64)
def _wilcoxon_cdf(n: int) -> np.ndarray:
    """P(W+ ≤ w), w = 0..n(n+1)/2, for n untied non-zero differences under H0: counts of the
    subsets of {1..n} with each sum (int64, exact: at most 2^50 at n = 50), over 2^n."""
    top = n * (n + 1) // 2
    counts = np.zeros(top + 1, dtype=np.int64)
    counts[0] = 1
    for rank in range(1, n + 1):  # add rank to every subset so far (reads the old counts)
        counts[rank:] = counts[rank:] + counts[:-rank]
    cdf = np.cumsum(counts).astype(np.float64) / 2.0**n
    cdf.flags.writeable = False
    return cdf


def correct_p_values(p, method: str = "holm") -> np.ndarray:
    """Adjust a family of p-values for multiple comparisons.

    With m non-NaN p-values sorted ascending p_(1) ≤ … ≤ p_(m):
    "bonferroni": min(1, m·p_i). "holm" (step-down; Holm 1979, Scand. J. Statist. 6):
    p̃_(i) = max_{j≤i} min(1, (m−j+1)·p_(j)). "bh" (step-up false discovery rate;
    Benjamini & Hochberg 1995, JRSS B 57): p̃_(i) = min_{j≥i} min(1, m·p_(j)/j).
    "none": unchanged. NaNs pass through and do not count in m. Any shape is accepted; the
    result has the same shape. p outside [0, 1] or an unknown method → ValueError.
    """
    if method not in ("holm", "bonferroni", "bh", "none"):
        raise ValueError(f"unknown method {method!r}: use 'holm', 'bonferroni', 'bh' or 'none'")
    p = np.asarray(p, dtype=np.float64)
    flat = p.ravel().copy()
    keep = ~np.isnan(flat)
    vals = flat[keep]
    if ((vals < 0) | (vals > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    m = vals.size
    if method == "none" or m == 0:
        return p.copy()
    if method == "bonferroni":
        adjusted = np.minimum(1.0, m * vals)
    else:
        order = np.argsort(vals, kind="stable")
        ranked = vals[order]
        rank = np.arange(1, m + 1)
        if method == "holm":
            steps = np.maximum.accumulate(np.minimum(1.0, (m - rank + 1) * ranked))
        else:
            steps = np.minimum.accumulate(np.minimum(1.0, m * ranked / rank)[::-1])[::-1]
        adjusted = np.empty(m)
        adjusted[order] = steps
    flat[keep] = adjusted
    return flat.reshape(p.shape)


def cohens_dz(diffs) -> np.ndarray:
    """Standardised mean difference of paired data per column: d_z = mean(d) / s_d (ddof=1).

    Edge cases: n < 2 → nan; zero variance (sd ≤ 1e-12·max|d|) → nan if the mean is 0, else
    ±inf. Reference: Lakens 2013, "Calculating and reporting effect sizes to facilitate
    cumulative science", Frontiers in Psychology 4:863.
    """
    d = _columns(diffs)
    mean, sd, constant = _moments(d)
    with np.errstate(invalid="ignore", divide="ignore"):
        dz = np.where(constant, np.where(mean == 0, np.nan, np.sign(mean) * np.inf), mean / sd)
    return dz if d.shape[0] >= 2 else np.full_like(mean, np.nan)


def wins_ties_losses(diffs, tol: float = 0.0) -> WinsTiesLosses:
    """Per column: topics where b beats a (d > tol), ties (|d| ≤ tol), losses (d < −tol).

    Descriptive counts (int64, summing to n_topics); no test is implied. Use ``tol`` to call
    differences within measurement granularity ties.
    """
    if tol < 0:
        raise ValueError(f"tol must be ≥ 0, got {tol!r}")
    d = _columns(diffs)
    wins, losses = (d > tol).sum(axis=0), (d < -tol).sum(axis=0)
    return WinsTiesLosses(wins, d.shape[0] - wins - losses, losses)
