"""cranfield/compare/stats.py at its edges: the exact errors users see, the documented defaults, the
results of an empty input and of an all-zero column, n = 2 (the first n with an interval),
a column constant only up to rounding (the interval collapses, the effect size is infinite),
each column's tolerance being its own, and the tie boundary of the Wilcoxon ranks.

Written against the survivors of ``make mutation`` on cranfield/compare/stats.py (issue #16);
docs/mutation.md lists the mutants that stay alive and why each is equivalent."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats as sps

from cranfield.compare import stats

# Equal up to rounding: sd ≈ 5.8e-14 ≤ 1e-12 · max|d|, so "constant" by the documented rule,
# yet a t quantile times that sd would move the interval by many ulps.
NEARLY_CONSTANT = [1.0, 1.0 + 1e-13, 1.0]


def _message(text: str) -> str:
    return "^" + re.escape(text) + "$"


# --- mean_ci, t_test, paired_t_test -----------------------------------------------------------

def test_mean_ci_of_two_topics_is_the_t_interval():
    mean, low, high = stats.mean_ci([1.0, 3.0])
    half = sps.t.ppf(0.975, 1) * math.sqrt(2) / math.sqrt(2)
    assert mean == 2.0
    assert low == pytest.approx(2.0 - half, rel=1e-12)
    assert high == pytest.approx(2.0 + half, rel=1e-12)


def test_mean_ci_of_a_column_constant_up_to_rounding_collapses_to_the_mean():
    mean, low, high = stats.mean_ci(NEARLY_CONSTANT)
    assert low == mean == high


def test_mean_ci_refuses_a_matrix_naming_its_shape():
    with pytest.raises(ValueError, match=_message("x must be 1-D, got shape (2, 2)")):
        stats.mean_ci([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("value, statistic", [(1.0, math.inf), (-1.0, -math.inf),
                                              (0.25, math.inf)])
def test_t_test_of_a_constant_non_zero_column_is_infinite_with_p_zero(value, statistic):
    r = stats.t_test([value] * 4)
    assert r.statistic[0] == statistic and r.p_value[0] == 0.0
    assert r.ci_low[0] == value == r.ci_high[0]


def test_t_test_interval_of_a_column_constant_up_to_rounding_is_the_mean():
    r = stats.t_test(NEARLY_CONSTANT)
    assert r.statistic[0] == math.inf and r.p_value[0] == 0.0
    assert r.ci_low[0] == r.mean_diff[0] == r.ci_high[0]


def test_paired_t_test_passes_its_level_on():
    a, b = [0.1, 0.4, 0.3, 0.9, 0.5], [0.2, 0.3, 0.6, 0.8, 0.9]
    r90, r95 = stats.paired_t_test(a, b, level=0.9), stats.paired_t_test(a, b)
    batch = stats.t_test(np.subtract(b, a), level=0.9)
    assert (r90.ci_low, r90.ci_high) == (batch.ci_low[0], batch.ci_high[0])
    assert r95.ci_high - r95.ci_low > r90.ci_high - r90.ci_low


@pytest.mark.parametrize("a, b, shapes", [
    ([1.0], [1.0, 2.0, 3.0], "(1,) and (3,)"),  # would broadcast silently
    ([1.0, 2.0], [1.0, 2.0, 3.0], "(2,) and (3,)"),
    ([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 5.0]], "(2, 2) and (2, 2)"),
])
def test_paired_t_test_refuses_unpaired_inputs_naming_their_shapes(a, b, shapes):
    with pytest.raises(ValueError, match=_message(
            f"a and b must be 1-D of equal length, got {shapes}")):
        stats.paired_t_test(a, b)


# --- randomization test -----------------------------------------------------------------------

def _diffs(n: int, k: int = 1, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.05, 0.2, size=(n, k))


def test_randomization_defaults_are_10000_sign_vectors_from_seed_0():
    d = _diffs(20)
    r = stats.randomization_test(d)
    assert (r.n_permutations, r.seed, r.exact) == (10000, 0, False)
    assert r.p_value[0] == stats.randomization_test(d, 10000, 0).p_value[0]


def test_randomization_with_one_sign_vector_is_allowed():
    r = stats.randomization_test(_diffs(20), n_permutations=1)
    assert r.n_permutations == 1 and r.p_value[0] in (0.5, 1.0)


@pytest.mark.parametrize("bad", [0, -5])
def test_randomization_refuses_fewer_than_one_sign_vector_word_for_word(bad):
    with pytest.raises(ValueError, match=_message(f"n_permutations must be ≥ 1, got {bad}")):
        stats.randomization_test(_diffs(20), n_permutations=bad)


def test_randomization_is_exact_up_to_and_including_the_threshold():
    at = stats.randomization_test(np.arange(1.0, 17.0))  # 16 topics: the default threshold
    assert at.exact and at.n_permutations == 2**16 and at.p_value[0] == 2 / 2**16
    assert stats.randomization_test(np.arange(1.0, 6.0), exact_threshold=5).exact
    beyond = stats.randomization_test(np.arange(1.0, 7.0), 100, exact_threshold=5)
    assert not beyond.exact and beyond.n_permutations == 100


def test_randomization_reports_the_mean_difference_per_column():
    d = np.array([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]])
    assert stats.randomization_test(d).mean_diff.tolist() == [3.0, 3.0]


def test_randomization_of_no_topics_is_nan_per_column():
    r = stats.randomization_test(np.empty((0, 3)), seed=7)
    assert r.p_value.shape == r.mean_diff.shape == (3,)
    assert np.isnan(r.p_value).all() and np.isnan(r.mean_diff).all()
    assert (r.n_permutations, r.seed, r.exact) == (0, 7, True)


@pytest.mark.parametrize("n", [8, 13, 24])  # whole bytes of signs, and not
def test_monte_carlo_sign_vectors_are_the_documented_stream(n):
    """What a seed means: each sign vector is the first n bits of ceil(n/8) uniform bytes
    from ``default_rng(seed)`` (one draw for all the vectors of a chunk), topic i flipped when
    its bit is set; p = (#{|Σ s d| ≥ |Σ d|} + 1) / (B + 1)."""
    d = _diffs(n, 2, seed=n)
    B = 300
    packed = np.random.default_rng(5).integers(0, 256, size=(B, (n + 7) // 8), dtype=np.uint8)
    flips = np.unpackbits(packed, axis=1, count=n).astype(np.float64)
    sums = np.abs(d.sum(axis=0) - 2.0 * flips @ d)
    reach = np.abs(d.sum(axis=0)) - stats._REL_TOL * np.abs(d).sum(axis=0)
    expected = ((sums >= reach).sum(axis=0) + 1) / (B + 1)
    r = stats.randomization_test(d, B, seed=5, exact_threshold=0)
    assert not r.exact and r.p_value.tolist() == expected.tolist()


def test_randomization_tolerance_is_each_columns_own():
    """Ties are counted within 1e-10 · Σ|d| of the column: a companion column a million
    million times larger must not widen it (it would make every sign vector a tie, p = 1)."""
    small = np.full(8, 0.01)
    large = np.full(8, 1e12)
    alone = stats.randomization_test(small).p_value[0]
    together = stats.randomization_test(np.column_stack([small, large])).p_value
    assert alone == together[0] == 2 / 2**8


# --- Wilcoxon ---------------------------------------------------------------------------------

def test_wilcoxon_of_no_topics_is_nan_and_none_for_every_column():
    r = stats.wilcoxon_test(np.empty((0, 3)))
    assert r.method == ("none", "none", "none")
    assert np.isnan(r.statistic).all() and np.isnan(r.p_value).all()
    assert r.smallest_p.dtype == np.float64 and np.isnan(r.smallest_p).all()
    assert r.n.tolist() == [0, 0, 0]


def test_wilcoxon_all_zero_column_does_not_stop_the_next():
    d = np.array([[0.0, 1.0], [0.0, 2.0], [0.0, 3.0], [0.0, 4.0]])
    r = stats.wilcoxon_test(d)
    assert r.method == ("none", "exact")
    assert r.p_value.tolist() == [1.0, 0.125] and r.smallest_p.tolist() == [1.0, 0.125]
    assert r.n.tolist() == [0, 4] and r.n.dtype.kind == "i"  # counts, shown as integers
    assert math.isnan(r.statistic[0]) and r.statistic[1] == 0.0


def test_wilcoxon_magnitudes_exactly_tol_apart_are_one_tied_value():
    """Σ|d| = 1e10 makes tol exactly 1.0: |d| = 2 and 3 differ by exactly tol, so they tie
    (the docstring: "differ by at most tol"), and a tie sends the test to the normal
    approximation."""
    column = np.array([2.0, 3.0, 5.0, 9.0, 1e10 - 19.0])
    assert stats._REL_TOL * np.abs(column).sum() == 1.0
    r = stats.wilcoxon_test(column)
    assert r.method == ("normal",) and r.n.tolist() == [5]
    # ranks 1.5, 1.5, 3, 4, 5 all positive: W+ = 15, one tied pair of two in σ²
    sigma = math.sqrt(5 * 6 * 11 / 24 - (2**3 - 2) / 48)
    assert r.p_value[0] == pytest.approx(2 * sps.norm.sf((15 - 7.5) / sigma), rel=1e-12)


# --- corrections, effect size, counts ---------------------------------------------------------

def test_correct_p_values_defaults_to_holm():
    p = [0.01, 0.04, 0.03]
    assert stats.correct_p_values(p).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert stats.correct_p_values(p).tolist() == stats.correct_p_values(p, "holm").tolist()


@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh", "none"])
def test_correct_p_values_keeps_the_shape_and_returns_floats(method):
    p = np.array([[0.01, 0.2], [0.03, np.nan]])
    out = stats.correct_p_values(p, method)
    assert out.shape == (2, 2) and np.isnan(out[1, 1])
    ints = stats.correct_p_values([0, 1], method)
    assert ints.dtype == np.float64 and ints.tolist() == [0.0, 1.0]


def test_correct_p_values_errors_word_for_word():
    with pytest.raises(ValueError, match=_message(
            "unknown method 'sidak': use 'holm', 'bonferroni', 'bh' or 'none'")):
        stats.correct_p_values([0.1], "sidak")
    with pytest.raises(ValueError, match=_message("p-values must lie in [0, 1]")):
        stats.correct_p_values([0.1, 1.5])


@pytest.mark.parametrize("column, dz", [
    ([1.0, 2.0, 3.0], 2.0),  # one column, given 1-D
    ([1.0, 3.0], 2.0 / math.sqrt(2.0)),  # n = 2: the first n with an sd
    ([1.0, 1.0, 1.0], math.inf),
    ([-1.0, -1.0], -math.inf),
    (NEARLY_CONSTANT, math.inf),
])
def test_cohens_dz_at_its_edges(column, dz):
    assert stats.cohens_dz(column).tolist() == [pytest.approx(dz, rel=1e-12)]


def test_wins_ties_losses_refuses_a_negative_tolerance_word_for_word():
    with pytest.raises(ValueError, match=_message("tol must be ≥ 0, got -0.1")):
        stats.wins_ties_losses([0.1], tol=-0.1)


# --- the bootstrap's count ---------------------------------------------------------------------

def test_shifted_count_holds_a_slab_of_at_most_4_mib_not_the_means():
    """``_shifted_at_least`` counts |means − observed| ≥ reach a slab of 2**22 bytes of rows
    at a time: 16 MiB of means make no temporary of their size (a slab's temporary lives
    until the next is made: two 4 MiB slabs at once, 8 MiB traced)."""
    import tracemalloc

    means = np.random.default_rng(0).normal(size=(2**15, 64))  # 16 MiB
    observed, reach = means.mean(axis=0), np.full(64, 1.0)
    expected = (np.abs(means - observed) >= reach).sum(axis=0)
    tracemalloc.start()
    try:
        count = stats._shifted_at_least(means, observed, reach)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    assert count.tolist() == expected.tolist()
    assert peak < 10, peak


# --- bootstrap --------------------------------------------------------------------------------

def test_bootstrap_defaults_are_10000_resamples_from_seed_0_at_95_percent():
    d = _diffs(12)
    r = stats.bootstrap_test(d)
    assert (r.n_samples, r.seed, r.level) == (10000, 0, 0.95)
    assert r.p_value[0] == stats.bootstrap_test(d, 10000, 0, 0.95).p_value[0]


def test_bootstrap_with_one_resample_is_allowed():
    r = stats.bootstrap_test(_diffs(12), n_samples=1)
    assert r.n_samples == 1 and r.p_value[0] in (0.5, 1.0)


@pytest.mark.parametrize("bad", [0, -1])
def test_bootstrap_refuses_fewer_than_one_resample_word_for_word(bad):
    with pytest.raises(ValueError, match=_message(f"n_samples must be ≥ 1, got {bad}")):
        stats.bootstrap_test(_diffs(12), n_samples=bad)


def test_bootstrap_of_no_topics_is_nan_per_column_and_keeps_its_parameters():
    r = stats.bootstrap_test(np.empty((0, 2)), n_samples=50, seed=3, level=0.9)
    for values in (r.p_value, r.mean_diff, r.ci_low, r.ci_high):
        assert values.dtype == np.float64 and values.shape == (2,) and np.isnan(values).all()
    assert (r.level, r.n_samples, r.seed) == (0.9, 50, 3)


@pytest.mark.parametrize("gap, counted", [(1e-10, False), (1e-12, True)])
def test_bootstrap_tie_tolerance_is_1e_10_of_the_mean_absolute_difference(gap, counted):
    """d = [gap, 1]: m = (1 + gap)/2, and the resamples [gap, gap] and [1, 1] lie m − gap
    from it, short of |m| by gap. Within 1e-10 · mean|d| ≈ 5e-11 that is a tie (counted, p
    about 1/2); a gap of 1e-10 is twice the tolerance (not counted, p = 1/(B+1))."""
    p = stats.bootstrap_test([gap, 1.0], n_samples=200).p_value[0]
    assert (p > 0.3) if counted else (p == 1 / 201)


def test_bootstrap_tolerance_is_each_columns_own():
    small, large = np.full(8, 0.01), np.full(8, 1e12)
    alone = stats.bootstrap_test(small, n_samples=200).p_value[0]
    together = stats.bootstrap_test(np.column_stack([small, large]), n_samples=200).p_value
    assert alone == together[0] == 1 / 201  # a constant non-zero column: p = 1/(B+1)


@pytest.mark.parametrize("max_bytes, passes", [(None, 3), (1, 3), ("two tiles", 2),
                                               ("three tiles", 1), (2**40, 1)])
def test_bootstrap_draws_once_per_group_of_tiles_that_fits_max_bytes(monkeypatch, max_bytes,
                                                                     passes):
    """Tiles of 16 columns (``_TILE_BYTES`` shrunk to one tile's means): 40 columns are 3
    tiles; ``max_bytes`` decides how many tiles' means are held at once, and each further
    group draws the B resamples again — the result never changes."""
    B = 64
    tile = 8 * B * 16
    monkeypatch.setattr(stats, "_TILE_BYTES", tile)
    budget = {"two tiles": 2 * tile, "three tiles": 3 * tile}.get(max_bytes, max_bytes)
    calls = []
    draw = stats._resample_counts

    def counted(*args):
        calls.append(args)
        return draw(*args)

    monkeypatch.setattr(stats, "_resample_counts", counted)
    d = _diffs(10, 40)
    r = stats.bootstrap_test(d, B, seed=2, max_bytes=budget)
    assert len(calls) == passes
    whole = stats.bootstrap_test(d, B, seed=2, max_bytes=2**40)  # every tile in one pass
    for field in ("p_value", "ci_low", "ci_high"):
        assert getattr(r, field).tolist() == getattr(whole, field).tolist()


def test_bootstrap_reports_its_level():
    assert stats.bootstrap_test(_diffs(12), n_samples=20, level=0.9).level == 0.9


# --- shared checks and tiling -----------------------------------------------------------------

@pytest.mark.parametrize("level", [0.0, 1.0, -0.1, 1.5])
def test_a_level_outside_the_open_unit_interval_is_refused_word_for_word(level):
    for call in (lambda: stats.mean_ci([1.0, 2.0], level),
                 lambda: stats.bootstrap_test([1.0, 2.0], 10, level=level)):
        with pytest.raises(ValueError, match=_message(f"level must be in (0, 1), got {level!r}")):
            call()


def test_diffs_errors_word_for_word():
    with pytest.raises(ValueError, match=_message(
            "diffs must be 1-D or 2-D (n_topics, n_pairs), got shape (1, 1, 2)")):
        stats.t_test([[[1.0, 2.0]]])
    with pytest.raises(ValueError, match=_message(
            "diffs must be finite (NaN/inf is not a score difference)")):
        stats.t_test([1.0, float("nan")])


def test_a_product_that_fits_exactly_is_one_tile(monkeypatch):
    monkeypatch.setattr(stats, "_TILE_BYTES", 8 * 100 * 20)
    assert stats._tiles(20, 100) == [(slice(0, 20), 0)]
    assert stats._tiles(21, 100) == [(slice(0, 16), 0), (slice(5, 21), 11)]


def test_a_tile_can_be_one_column_wide(monkeypatch):
    monkeypatch.setattr(stats, "_TILE_BYTES", 8 * 100)  # one column of 100 resamples
    assert stats._tiles(3, 100) == [(slice(0, 1), 0), (slice(1, 2), 0), (slice(2, 3), 0)]
