"""Issue #14: the resampling tests work in bounded chunks with the results they had before,
and a comparison's work is known (and refusable) before anything is allocated.

Three kinds of chunk (cranfield.compare.stats):
- random-number chunks (``_CHUNK_BYTES``, as before): the reference below is the code as it
  was before tiling; with any chunk size both give the same bits;
- column tiles (``_TILE_BYTES``): a product of resamples × columns too big for 64 MiB is
  computed a tile of columns at a time. The tiling depends on the shape only;
- passes (``max_bytes``): how many tiles' bootstrap means are held at once; the rest are
  drawn again from the same seed. Results cannot depend on it, and do not, bit for bit.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import cranfield
from cranfield.compare import stats
from cranfield.compare.comparison import compare, compare_evaluations
from cranfield.compare.comparison_work import WorkBudgetError, comparison_work, work_budget

# --------------------------------------------------------------------------------------------
# The resampling as it was before chunking (cranfield/compare/stats.py at 57cdff2), the reference
# --------------------------------------------------------------------------------------------


def reference_randomization(d, n_permutations, seed, chunk_bytes):
    d = np.asfortranarray(np.asarray(d, dtype=np.float64))
    n = d.shape[0]
    observed = d.sum(axis=0)
    tol = stats._REL_TOL * np.abs(d).sum(axis=0)
    exact = n <= stats.DEFAULT_EXACT_THRESHOLD
    total = 2**n if exact else n_permutations
    rng = np.random.default_rng(seed)
    chunk = max(1, chunk_bytes // (8 * n))
    count = np.zeros(d.shape[1], dtype=np.int64)
    for start in range(0, total, chunk):
        rows = min(chunk, total - start)
        if exact:
            codes = np.arange(start, start + rows, dtype=np.int64)[:, None]
            flips = ((codes >> np.arange(n)) & 1).astype(np.float64)
        else:
            packed = rng.integers(0, 256, size=(rows, (n + 7) // 8), dtype=np.uint8)
            flips = np.unpackbits(packed, axis=1, count=n).astype(np.float64)
        sums = observed - 2.0 * (flips @ d)
        count += (np.abs(sums) >= np.abs(observed) - tol).sum(axis=0)
    return count / total if exact else (count + 1) / (total + 1)


def reference_bootstrap(d, n_samples, seed, chunk_bytes, level=0.95):
    d = np.asfortranarray(np.asarray(d, dtype=np.float64))
    n, k = d.shape
    observed = d.sum(axis=0) / n
    tol = stats._REL_TOL * np.abs(d).sum(axis=0) / n
    rng = np.random.default_rng(seed)
    chunk = max(1, chunk_bytes // (24 * n))
    means = np.empty((n_samples, k))
    for start in range(0, n_samples, chunk):
        rows = min(chunk, n_samples - start)
        picks = rng.integers(0, n, size=(rows, n)) + n * np.arange(rows)[:, None]
        counts = np.bincount(picks.ravel(), minlength=rows * n).reshape(rows, n)
        means[start:start + rows] = (counts.astype(np.float64) @ d) / n
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2], axis=0)
    count = (np.abs(means - observed) >= np.abs(observed) - tol).sum(axis=0)
    return (count + 1) / (n_samples + 1), low, high


def diffs(n, k, seed=0, discrete=False):
    """Continuous score differences, or discrete ones (P@10-like, many exact ties)."""
    rng = np.random.default_rng(seed)
    if discrete:
        return np.round(rng.integers(-3, 4, (n, k)) * 0.1, 10)
    return rng.random((n, k)) - 0.45


CASES = [(30, 25, False), (30, 25, True), (17, 40, False), (12, 9, True), (60, 3, False),
         (5, 7, False)]


def assert_same(a, b):
    assert np.array_equal(a, b, equal_nan=True), np.flatnonzero(a != b)[:5]


# --------------------------------------------------------------------------------------------
# Same bits as before
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, k, discrete", CASES)
@pytest.mark.parametrize("chunk_bytes", [stats._CHUNK_BYTES, 20_000])
def test_results_are_todays_bit_for_bit(monkeypatch, n, k, discrete, chunk_bytes):
    """With today's random-number chunks, and with chunks so small that every test draws
    many: the same p-values and CIs, bit for bit, as the code before tiling."""
    monkeypatch.setattr(stats, "_CHUNK_BYTES", chunk_bytes)
    d = diffs(n, k, seed=n * k, discrete=discrete)
    rand = stats.randomization_test(d, 3000, seed=7)
    assert_same(rand.p_value, reference_randomization(d, 3000, 7, chunk_bytes))
    boot = stats.bootstrap_test(d, 2500, seed=7)
    p, low, high = reference_bootstrap(d, 2500, 7, chunk_bytes)
    assert_same(boot.p_value, p)
    assert_same(boot.ci_low, low)
    assert_same(boot.ci_high, high)


# --------------------------------------------------------------------------------------------
# Chunked equals unchunked
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, k, discrete", CASES)
def test_bootstrap_passes_do_not_change_a_bit(monkeypatch, n, k, discrete):
    """Tiles of 2 columns (a tiny tile size): one pass over the resamples per tile (the
    default when tiled), or every tile's means at once: the same bits."""
    monkeypatch.setattr(stats, "_TILE_BYTES", 8 * 2000 * 2)
    assert len(stats._tiles(k, 2000)) == -(-k // 2)  # several tiles, hence several passes
    d = diffs(n, k, seed=k, discrete=discrete)
    passes = [stats.bootstrap_test(d, 2000, seed=3, max_bytes=m)
              for m in (1, 8 * 2000 * 4, 10**12)]  # a tile a pass, two, all at once
    for other in passes[1:]:
        for field in ("p_value", "ci_low", "ci_high", "mean_diff"):
            assert_same(getattr(passes[0], field), getattr(other, field))


@pytest.mark.parametrize("n, k, discrete", CASES)
@pytest.mark.parametrize("tile_columns", [1, 2, 5, 16])
def test_tiled_products_equal_the_whole_product(monkeypatch, n, k, discrete, tile_columns):
    """A tiny tile size (products a few columns wide) against one product of every column
    (unchunked): p-values are counts and come out the same bit for bit; CI bounds are order
    statistics of means that BLAS may round differently in the last place when the product
    has another width (not on this machine's OpenBLAS for tiles ≥ 2 columns wide, but that
    is BLAS's business), so they agree to 1e-12."""
    rows = 2000
    whole_r = stats.randomization_test(diffs(n, k, k, discrete), rows, seed=5)
    whole_b = stats.bootstrap_test(diffs(n, k, k, discrete), rows, seed=5)
    monkeypatch.setattr(stats, "_TILE_BYTES", 8 * rows * tile_columns)
    if k > tile_columns:
        assert len(stats._tiles(k, rows)) > 1
    tiled_r = stats.randomization_test(diffs(n, k, k, discrete), rows, seed=5)
    tiled_b = stats.bootstrap_test(diffs(n, k, k, discrete), rows, seed=5)
    if n <= stats.DEFAULT_EXACT_THRESHOLD:  # 2^n sign vectors: tiles of their own width
        assert tiled_r.exact
    assert_same(tiled_r.p_value, whole_r.p_value)
    assert_same(tiled_b.p_value, whole_b.p_value)
    np.testing.assert_allclose(tiled_b.ci_low, whole_b.ci_low, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(tiled_b.ci_high, whole_b.ci_high, rtol=1e-12, atol=1e-15)


def test_tiles_are_all_one_width_and_cover_every_column(monkeypatch):
    monkeypatch.setattr(stats, "_TILE_BYTES", 8 * 100 * 40)
    assert stats._tiles(30, 100) == [(slice(0, 30), 0)]  # fits: one product, as before
    tiles = stats._tiles(90, 100)  # 40 fit: a multiple of 16 from 16 up, so 32
    assert [(t.start, t.stop, skip) for t, skip in tiles] == [
        (0, 32, 0), (32, 64, 0), (58, 90, 6)]  # the last overlaps, not a narrow remainder
    assert stats._tiles(0, 100) == []


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------

def traced_peak_mb(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_bootstrap_memory_is_bounded():
    """200,000 samples × 200 columns: 305 MiB of means (and as much again for the
    quantiles, and twice for the p-value: 970 MiB traced) before; now a tile of means
    (≤ 64 MiB) and a chunk of draws (≤ 64 MiB) at a time: 140 MiB traced."""
    d = diffs(20, 200, seed=1)
    peak = traced_peak_mb(lambda: stats.bootstrap_test(d, 200_000, seed=1))
    assert peak < 192, peak


def test_randomization_memory_is_bounded():
    """300,000 sign vectors over 30 topics × 300 columns: the sums of a 280,000-row chunk
    were 640 MiB, and temporaries of it (1,425 MiB traced) before; now the chunk's signs
    (≤ 64 MiB) and a tile of sums (≤ 64 MiB): 103 MiB traced."""
    d = diffs(30, 300, seed=2)
    peak = traced_peak_mb(lambda: stats.randomization_test(d, 300_000, seed=1))
    assert peak < 192, peak


# --------------------------------------------------------------------------------------------
# The work of a comparison
# --------------------------------------------------------------------------------------------

QRELS = {f"q{t}": {"a": 1, "b": int(t % 3 == 0)} for t in range(20)}
RUNS = {f"r{i}": {f"q{t}": {"a": float((t + i) % 4), "b": 1.5, "c": float(i)}
                  for t in range(20)} for i in range(3)}


def test_comparison_work_is_the_documented_formula():
    w = comparison_work(45, 5, 30, ("t", "randomization", "bootstrap"), 10**6, 10**6)
    c, t, r = 225, 30, 2 * 10**6
    assert (w.columns, w.resamples) == (c, r)
    assert w.total == r * (c * t + 200 * t + 400 * c) + 40_000 * c * t
    # exact randomization (≤ 16 topics): 2^topics sign vectors, whatever was asked
    assert comparison_work(1, 1, 10, ("randomization",), 10**6, 10**6).permutations == 1024
    # tests not run cost nothing; Wilcoxon counts as 40,000 resamples
    assert comparison_work(1, 2, 30, ("t",), 10**6, 10**6).total == 40_000 * 2 * 30
    assert comparison_work(1, 1, 30, ("t", "wilcoxon"), 0, 0).resamples == 40_000


def test_over_budget_raises_before_anything_is_allocated(monkeypatch):
    evs = {name: cranfield.evaluate(QRELS, run, ["map", "P.5"]) for name, run in RUNS.items()}
    work = comparison_work(3, 2, 20, ("t", "randomization", "bootstrap"), 500, 400).total

    def boom(*args, **kwargs):
        raise AssertionError("resampled although over the budget")

    kwargs = {"n_permutations": 500, "n_samples": 400}
    doc = compare_evaluations(evs, ["map", "P.5"], max_work=work, **kwargs)  # at it: runs
    assert len(doc["pairs"]) == 6
    monkeypatch.setattr(stats, "randomization_test", boom)
    monkeypatch.setattr(stats, "t_test", boom)
    with pytest.raises(WorkBudgetError) as info:
        compare_evaluations(evs, ["map", "P.5"], max_work=work - 1, **kwargs)
    err = info.value
    assert (err.work.total, err.budget, err.field) == (work, work - 1, "work")
    assert (err.work.pairs, err.work.measures, err.work.topics) == (3, 2, 20)
    assert f"{work:,}" in str(err) and "3 pairs × 2 measures" in str(err)
    assert isinstance(err, cranfield.EvaluationError)


def test_work_budget_holds_comparisons_inside_it():
    kwargs = {"n_permutations": 200, "n_samples": 200}
    work = comparison_work(3, 1, 20, ("t", "randomization", "bootstrap"), 200, 200).total
    with work_budget(work) as budget:
        compare(QRELS, RUNS, ["map"], **kwargs)
        assert budget.work.total == work and budget.exceeded is None
    with work_budget(work - 1) as budget, pytest.raises(WorkBudgetError):
        compare(QRELS, RUNS, ["map"], **kwargs)
    assert budget.exceeded is not None and budget.exceeded.budget == work - 1
    # an explicit max_work wins; outside the block there is no budget
    with work_budget(1):
        compare(QRELS, RUNS, ["map"], max_work=work, **kwargs)
    compare(QRELS, RUNS, ["map"], **kwargs)
