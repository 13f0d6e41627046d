"""cranfield.compare.stats against scipy, brute-force enumeration, hand-worked numbers and seeded
simulations. Convention under test: differences are b - a (positive = b better)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats

from cranfield.compare import stats


def _t_cases():
    """~50 seeded (a, b) pairs: n from 2 up, ties, negative values, coarse and fine grids."""
    rng = np.random.default_rng(20240611)
    cases = []
    for i in range(48):
        n = [2, 3, 5, 10, 50, 200][i % 6]
        a = rng.normal(0.3, 0.5, n)
        b = a + rng.normal(0.05 * (i % 3 - 1), 0.3, n)
        if i % 4 == 1:  # ties: scores on a coarse grid, as with P@10
            a, b = np.round(a, 1), np.round(b, 1)
        if i % 4 == 2:  # some topics unchanged
            b[: n // 2] = a[: n // 2]
        cases.append((a, b))
    cases.append((np.array([0.0, 1.0]), np.array([1.0, 0.5])))
    cases.append((np.array([-1.0, -2.0, 0.5]), np.array([-1.5, 0.0, 0.25])))
    return cases


T_CASES = _t_cases()


@pytest.mark.parametrize("a,b", T_CASES)
def test_paired_t_test_equals_scipy_ttest_rel(a, b):
    ours = stats.paired_t_test(a, b)
    ref = scipy.stats.ttest_rel(b, a)
    assert ours.statistic == pytest.approx(float(ref.statistic), rel=1e-12, abs=1e-12)
    assert ours.p_value == pytest.approx(float(ref.pvalue), rel=1e-12, abs=1e-12)
    assert ours.df == len(a) - 1
    assert ours.mean_diff == pytest.approx(np.mean(b - a), abs=1e-15)
    ci = ref.confidence_interval(0.95)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10, abs=1e-12)


def test_batched_t_test_equals_per_column():
    n = 40
    rng = np.random.default_rng(3)
    diffs = rng.normal(0.02, 0.1, size=(n, 7))
    batch = stats.t_test(diffs)
    for j in range(diffs.shape[1]):
        one = stats.paired_t_test(np.zeros(n), diffs[:, j])
        assert batch.statistic[j] == one.statistic
        assert batch.p_value[j] == one.p_value
        assert (batch.ci_low[j], batch.ci_high[j]) == (one.ci_low, one.ci_high)
    assert batch.df == n - 1


def test_t_test_sign_convention_is_b_minus_a():
    r = stats.paired_t_test([0.1, 0.2, 0.3], [0.4, 0.4, 0.7])  # b better on every topic
    assert r.statistic > 0 and r.mean_diff == pytest.approx(0.3)


@pytest.mark.parametrize("column,statistic,p", [
    ([0.0, 0.0, 0.0], math.nan, 1.0),            # no difference at all
    ([0.1, 0.1, 0.1, 0.1], math.inf, 0.0),        # same gain on every topic
    ([-0.3, -0.3], -math.inf, 0.0),
    ([0.7], math.nan, math.nan),                  # n < 2: no variance estimate
])
def test_t_test_zero_variance_and_tiny_n(column, statistic, p):
    r = stats.t_test(np.array(column)[:, None])
    np.testing.assert_equal(r.statistic[0], statistic)
    np.testing.assert_equal(r.p_value[0], p)


def test_constant_difference_from_rounding_is_still_constant():
    # 0.3 - 0.2 and 0.4 - 0.3 differ in the last bit; the column is constant up to rounding
    a, b = np.array([0.2, 0.3, 0.5]), np.array([0.3, 0.4, 0.6])
    r = stats.paired_t_test(a, b)
    assert r.statistic == math.inf and r.p_value == 0.0


def test_mean_ci_hand_computation():
    # x = 1, 2, 3, 4: mean 2.5, s² = (2.25+0.25+0.25+2.25)/3 = 5/3, se = sqrt(5/3)/2 = 0.6455;
    # t_{3, 0.975} = 3.182446305284263 → half-width 2.0543, CI (0.4457, 4.5543)
    mean, low, high = stats.mean_ci([1.0, 2.0, 3.0, 4.0])
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2
    assert mean == 2.5
    assert (low, high) == pytest.approx((2.5 - half, 2.5 + half), rel=1e-12)
    assert half == pytest.approx(2.0543, abs=1e-4)
    # level 0.90: t_{3, 0.95} = 2.353363434801823
    _, low90, high90 = stats.mean_ci([1.0, 2.0, 3.0, 4.0], level=0.90)
    assert high90 - 2.5 == pytest.approx(2.353363434801823 * math.sqrt(5 / 3) / 2, rel=1e-12)


def test_mean_ci_edge_cases():
    assert stats.mean_ci([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    mean, low, high = stats.mean_ci([0.25])
    assert mean == 0.25 and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(v) for v in stats.mean_ci([]))
    with pytest.raises(ValueError):
        stats.mean_ci([1.0, 2.0], level=1.0)


# ---- randomization test -------------------------------------------------------------------

def brute_force_p(column: list[str]) -> Fraction:
    """Exact two-sided sign-flip p by enumeration in exact decimal arithmetic (no floats)."""
    d = [Fraction(x) for x in column]
    observed = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed
               for signs in itertools.product((1, -1), repeat=len(d)))
    return Fraction(hits, 2 ** len(d))


def _exact_cases():
    rng = np.random.default_rng(11)
    cases = []
    for n in range(1, 11):
        cases.append([f"{x:.3f}" for x in rng.normal(0.05, 0.2, n)])    # generic values
        cases.append([f"{x:.1f}" for x in rng.normal(0.1, 0.3, n)])     # ties, zeros, repeats
        cases.append([f"{x}" for x in rng.integers(-3, 4, n) / 10])     # ties 0.1+0.2 vs 0.3
    cases.append(["0.1", "0.2", "-0.3", "0.0"])   # observed 0: every sign vector ties → 1
    cases.append(["0.0", "0.0", "0.0"])
    return cases


@pytest.mark.parametrize("column", _exact_cases())
def test_randomization_exact_equals_brute_force(column):
    r = stats.randomization_test(np.array([float(x) for x in column])[:, None])
    assert r.exact and r.n_permutations == 2 ** len(column)
    assert Fraction(r.p_value[0]) == brute_force_p(column)


def test_randomization_exact_batched_matches_columns():
    rng = np.random.default_rng(5)
    diffs = np.round(rng.normal(0.05, 0.2, size=(9, 6)), 2)
    r = stats.randomization_test(diffs)
    expected = [float(brute_force_p([repr(float(x)) for x in diffs[:, j]])) for j in range(6)]
    assert r.p_value.tolist() == expected


@pytest.mark.parametrize("data_seed", [11, 13, 16])  # exact p ≈ 0.061, 0.100, 0.123
def test_randomization_monte_carlo_close_to_exact(data_seed):
    rng = np.random.default_rng(data_seed)
    column = [f"{x:.3f}" for x in rng.normal(0.12, 0.3, 12)]
    exact = float(brute_force_p(column))
    assert 0.02 < exact < 0.5  # a p-value with room to be wrong either way
    diffs = np.array([float(x) for x in column])[:, None]
    mc = stats.randomization_test(diffs, n_permutations=200_000, seed=1, exact_threshold=0)
    assert not mc.exact and mc.n_permutations == 200_000
    # Monte Carlo sd is sqrt(p(1-p)/N) ≤ 0.0008 here; 0.004 is ≥ 5 sd
    assert mc.p_value[0] == pytest.approx(exact, abs=0.004)
    assert stats.randomization_test(diffs).exact  # default: exact at n = 12


def test_randomization_monte_carlo_plus_one_convention():
    diffs = np.zeros((30, 1))
    diffs[:, 0] = 1.0  # every sign-flipped mean is smaller, except the all-plus vector
    r = stats.randomization_test(diffs, n_permutations=999, seed=4)
    # all-plus has probability 2^-30 per draw: count 0 → p = (0 + 1) / (999 + 1)
    assert r.p_value[0] == 1 / 1000
    zeros = stats.randomization_test(np.zeros((30, 1)), n_permutations=999)
    assert zeros.p_value[0] == 1.0  # (999 + 1) / (999 + 1)


def test_randomization_column_independent_of_companions():
    rng = np.random.default_rng(6)
    diffs = rng.normal(0.02, 0.2, size=(60, 5))
    together = stats.randomization_test(diffs, n_permutations=3000, seed=9)
    for j in range(5):
        alone = stats.randomization_test(diffs[:, [j]], n_permutations=3000, seed=9)
        assert alone.p_value[0] == together.p_value[j]


def test_randomization_and_bootstrap_reproducible():
    rng = np.random.default_rng(7)
    diffs = rng.normal(0.01, 0.2, size=(80, 4))
    for test, kw in [(stats.randomization_test, "n_permutations"),
                     (stats.bootstrap_test, "n_samples")]:
        first = test(diffs, **{kw: 2000}, seed=123)
        again = test(diffs, **{kw: 2000}, seed=123)
        other = test(diffs, **{kw: 2000}, seed=124)
        np.testing.assert_array_equal(first.p_value, again.p_value)
        assert first.seed == 123
        assert not np.array_equal(first.p_value, other.p_value)
    b1 = stats.bootstrap_test(diffs, n_samples=2000, seed=123)
    b2 = stats.bootstrap_test(diffs, n_samples=2000, seed=123)
    np.testing.assert_array_equal(b1.ci_low, b2.ci_low)
    np.testing.assert_array_equal(b1.ci_high, b2.ci_high)


# ---- bootstrap ----------------------------------------------------------------------------

def _coverage(level: float, sims: int = 2000, n: int = 50, true_diff: float = 0.03) -> float:
    # each column is one independent simulated comparison of n topics
    rng = np.random.default_rng(2024)
    diffs = rng.normal(true_diff, 0.15, size=(n, sims))
    r = stats.bootstrap_test(diffs, n_samples=2000, seed=1, level=level)
    return float(np.mean((r.ci_low <= true_diff) & (true_diff <= r.ci_high)))


def test_bootstrap_ci_coverage_is_nominal():
    # 2000 simulations: coverage sd ≈ sqrt(.95·.05/2000) ≈ 0.005, so 0.92..0.98 is ±6 sd
    # around 0.95 (the percentile CI runs slightly narrow at n = 50: expect ≈ 0.94)
    assert 0.92 <= _coverage(0.95) <= 0.98
    assert _coverage(0.80) == pytest.approx(0.80, abs=0.03)
    assert not 0.92 <= _coverage(0.50) <= 0.98  # the assertion above can fail


def test_bootstrap_two_topic_hand_example():
    # topics d = (-1, 3), mean 1; resample means: -1 (p 1/4), 1 (p 1/2), 3 (p 1/4).
    # centred: -2, 0, 2, and |centred| >= 1 with probability 1/2 → p ≈ 0.5;
    # 2.5% and 97.5% quantiles → CI (-1, 3)
    r = stats.bootstrap_test(np.array([[-1.0], [3.0]]), n_samples=20000, seed=3)
    assert r.mean_diff[0] == 1.0
    assert (r.ci_low[0], r.ci_high[0]) == (-1.0, 3.0)
    assert r.p_value[0] == pytest.approx(0.5, abs=0.015)  # MC sd 0.0035
    # d = (1, 3), mean 2: |centred| ≤ 1 < 2 always → p = (0 + 1) / (B + 1)
    r = stats.bootstrap_test(np.array([[1.0], [3.0]]), n_samples=999, seed=3)
    assert r.p_value[0] == 1 / 1000


def test_bootstrap_p_agrees_with_normal_theory():
    # for n = 400 the bootstrap distribution of the mean is ≈ N(mean, s0²/n), s0 with ddof=0
    rng = np.random.default_rng(12)
    n = 400
    diffs = rng.normal(0.0, 0.2, size=(n, 6)) + np.array([0, 0.005, 0.01, 0.015, 0.02, 0.03])
    r = stats.bootstrap_test(diffs, n_samples=20000, seed=5)
    z = diffs.mean(axis=0) / (diffs.std(axis=0) / math.sqrt(n))
    np.testing.assert_allclose(r.p_value, 2 * scipy.stats.norm.sf(np.abs(z)), atol=0.02)


def test_bootstrap_edge_cases():
    r = stats.bootstrap_test(np.zeros((10, 1)), n_samples=500)
    assert (r.p_value[0], r.ci_low[0], r.ci_high[0]) == (1.0, 0.0, 0.0)
    r = stats.bootstrap_test(np.array([[0.25, 0.0]]), n_samples=500)
    # one topic (review R2 F5): no p-value, no CI (it was p 1/(B+1): "significant" on one
    # topic), as the t test at df 0; the mean difference is the topic's
    assert np.isnan(r.p_value).all() and np.isnan(r.ci_low).all() and np.isnan(r.ci_high).all()
    assert r.mean_diff.tolist() == [0.25, 0.0]
    r = stats.bootstrap_test(np.array([[0.25], [0.25]]), n_samples=500)  # constant, n = 2
    assert (r.p_value[0], r.ci_low[0], r.ci_high[0]) == (1 / 501, 0.25, 0.25)


# ---- Wilcoxon, effect size, wins/ties/losses ------------------------------------------------

def test_wilcoxon_equals_scipy_per_column():
    rng = np.random.default_rng(13)
    diffs = np.round(rng.normal(0.03, 0.2, size=(25, 4)), 1)  # zeros and ties included
    diffs[:, 3] = 0.0
    r = stats.wilcoxon_test(diffs)
    for j in range(3):
        # ties and zeros: Cranfield's normal approximation; scipy's method pinned to match
        # (its automatic choice depends on its version), so this cannot change with scipy
        ref = scipy.stats.wilcoxon(diffs[:, j], zero_method="wilcox", method="approx",
                                   correction=False)
        assert r.method[j] == "normal"
        assert (r.statistic[j], r.p_value[j]) == (ref.statistic, pytest.approx(ref.pvalue,
                                                                               rel=1e-12))
    assert math.isnan(r.statistic[3]) and r.p_value[3] == 1.0


def test_cohens_dz_hand_example():
    # d = 0.1, 0.2, 0.3, 0.6: mean 0.3, s² = (0.04+0.01+0+0.09)/3 = 0.14/3, s = 0.21602
    # d_z = 0.3 / 0.21602 = 1.38873
    d = np.array([[0.1, 0.0, 0.2, -0.5], [0.2, 0.0, 0.2, -0.5], [0.3, 0.0, 0.2, -0.5],
                  [0.6, 0.0, 0.2, -0.5]])
    dz = stats.cohens_dz(d)
    assert dz[0] == pytest.approx(0.3 / math.sqrt(0.14 / 3), rel=1e-12)
    assert dz[0] == pytest.approx(1.38873, abs=1e-5)
    assert math.isnan(dz[1]) and dz[2] == math.inf and dz[3] == -math.inf
    assert math.isnan(stats.cohens_dz([0.4])[0])


def test_wins_ties_losses():
    d = np.array([[0.1, 0.0], [-0.2, 0.05], [0.0, -0.05], [0.3, 0.2], [-0.01, 0.0]])
    wins, ties, losses = stats.wins_ties_losses(d)
    assert (wins.tolist(), ties.tolist(), losses.tolist()) == ([2, 2], [1, 2], [2, 1])
    wins, ties, losses = stats.wins_ties_losses(d, tol=0.05)
    assert (wins.tolist(), ties.tolist(), losses.tolist()) == ([2, 1], [2, 4], [1, 0])


# ---- multiple comparisons -----------------------------------------------------------------

@pytest.mark.parametrize("p,method,expected", [
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): Holm 4·0.005 = 0.02, 3·0.01 = 0.03,
    # 2·0.03 = 0.06, 1·0.04 = 0.04 → running max 0.06; back in input order:
    ([0.01, 0.04, 0.03, 0.005], "holm", [0.03, 0.06, 0.06, 0.02]),
    # BH: 0.005·4/1 = 0.02, 0.01·4/2 = 0.02, 0.03·4/3 = 0.04, 0.04·4/4 = 0.04; min from top
    ([0.01, 0.04, 0.03, 0.005], "bh", [0.02, 0.04, 0.04, 0.02]),
    ([0.01, 0.04, 0.03, 0.005], "bonferroni", [0.04, 0.16, 0.12, 0.02]),
    ([0.01, 0.04, 0.03, 0.005], "none", [0.01, 0.04, 0.03, 0.005]),
    # capping: Bonferroni 3·0.5 = 1.5 → 1; Holm 3·0.02 = 0.06, 2·0.4 = 0.8, 1·0.5 = 0.5 → 0.8
    ([0.5, 0.02, 0.4], "bonferroni", [1.0, 0.06, 1.0]),
    ([0.5, 0.02, 0.4], "holm", [0.8, 0.06, 0.8]),
    # BH step-up: 0.02·3/1 = 0.06, 0.4·3/2 = 0.6, 0.5·3/3 = 0.5 → min from top 0.06, 0.5, 0.5
    ([0.5, 0.02, 0.4], "bh", [0.5, 0.06, 0.5]),
    # Holm capping: 2·0.7 = 1.4 → 1, then max(1, 0.9) = 1
    ([0.9, 0.7], "holm", [1.0, 1.0]),
    # NaN passes through and m = 2: Holm 2·0.01 = 0.02, 1·0.03 → max 0.03;
    # BH 0.01·2/1 = 0.02, 0.03·2/2 = 0.03; Bonferroni 0.02, 0.06
    ([0.03, math.nan, 0.01], "holm", [0.03, math.nan, 0.02]),
    ([0.03, math.nan, 0.01], "bh", [0.03, math.nan, 0.02]),
    ([0.03, math.nan, 0.01], "bonferroni", [0.06, math.nan, 0.02]),
    # ties: BH 0.02·3/1 = 0.06, 0.02·3/2 = 0.03, 0.02·3/3 = 0.02 → all 0.02
    ([0.02, 0.02, 0.02], "bh", [0.02, 0.02, 0.02]),
    ([math.nan, math.nan], "holm", [math.nan, math.nan]),
    ([], "bh", []),
])
def test_correct_p_values_hand_worked(p, method, expected):
    np.testing.assert_allclose(stats.correct_p_values(p, method), expected, rtol=1e-12,
                               atol=0, equal_nan=True)


def test_correct_p_values_rejects_bad_input():
    with pytest.raises(ValueError):
        stats.correct_p_values([0.1], "sidak")
    with pytest.raises(ValueError):
        stats.correct_p_values([1.2], "holm")


def test_non_finite_differences_rejected():
    with pytest.raises(ValueError):
        stats.t_test(np.array([[0.1], [math.nan]]))
