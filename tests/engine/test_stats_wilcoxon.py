"""Issue #15, statistics: Cranfield's own Wilcoxon signed-rank test.

Oracles: scipy.stats.wilcoxon with its method pinned (``method="exact"`` or ``"approx"``,
``zero_method="wilcox"``, ``correction=False``: never scipy's automatic choice, which changed
between versions), and exact enumeration of the 2^n sign patterns for small n. The engine
computes the test itself (no scipy.stats call), so its result cannot change with scipy.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from cranfield.compare import stats
from cranfield.compare.comparison import compare

WEB = Path(__file__).resolve().parents[1] / "data" / "web2012"


def _scipy(d, method):
    """scipy's Wilcoxon with Cranfield's method pinned, on the non-zero differences."""
    return scipy.stats.wilcoxon(d, zero_method="wilcox", method=method, correction=False)


def _enumerated_p(d) -> float:
    """Exact two-sided p by enumerating every sign pattern of the non-zero |d| (mid-ranks):
    2 · P(W+ ≤ min(W+, W−)), capped at 1."""
    d = np.asarray(d, dtype=float)
    d = d[d != 0]
    ranks = scipy.stats.rankdata(np.abs(d))
    w_plus = ranks[d > 0].sum()
    low = min(w_plus, ranks.sum() - w_plus)
    hits = sum(1 for signs in itertools.product((0, 1), repeat=d.size)
               if np.dot(signs, ranks) <= low + 1e-9)
    return min(1.0, 2 * hits / 2**d.size)


# ---- exact: no ties, at most 50 non-zero differences ----------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 12, 20, 33, 50])
def test_exact_equals_scipy_exact_pinned(n):
    rng = np.random.default_rng(n)
    d = rng.normal(0.02, 0.2, size=(n, 6))
    r = stats.wilcoxon_test(d)
    for j in range(d.shape[1]):
        ref = _scipy(d[:, j], "exact")
        assert r.method[j] == "exact" and r.n[j] == n
        assert r.statistic[j] == ref.statistic
        assert r.p_value[j] == pytest.approx(ref.pvalue, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("seed", range(6))
def test_exact_equals_enumeration(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 13))
    d = rng.normal(0, 0.3, size=n)
    r = stats.wilcoxon_test(d)
    assert r.method == ("exact",)
    assert r.p_value[0] == pytest.approx(_enumerated_p(d), rel=1e-12)


def test_exact_distribution_counts_every_subset():
    for n in range(1, 13):
        cdf = stats._wilcoxon_cdf(n)
        sums = np.array([sum(c) for k in range(n + 1)
                         for c in itertools.combinations(range(1, n + 1), k)])
        counts = np.bincount(sums, minlength=n * (n + 1) // 2 + 1)
        assert np.array_equal(np.rint(cdf * 2**n).astype(np.int64), np.cumsum(counts))
    assert stats._wilcoxon_cdf(50)[-1] == 1.0


def test_zeros_are_dropped_and_the_rest_is_exact():
    # Wilcoxon's zero method: three zeros leave 6 untied differences, tested exactly
    d = np.array([0.0, 0.3, -0.1, 0.0, 0.25, 0.45, 0.0, 0.2, 0.05])
    r = stats.wilcoxon_test(d)
    assert (r.method, int(r.n[0])) == (("exact",), 6)
    ref = _scipy(d, "exact")
    assert (r.statistic[0], r.p_value[0]) == (ref.statistic, pytest.approx(ref.pvalue))
    assert r.p_value[0] == pytest.approx(_enumerated_p(d), rel=1e-12)


# ---- normal: ties, or more than 50 non-zero differences -------------------------------------

def test_normal_with_ties_equals_scipy_approx_pinned():
    rng = np.random.default_rng(7)
    d = np.round(rng.normal(0.03, 0.2, size=(25, 5)), 1)  # zeros and ties
    r = stats.wilcoxon_test(d)
    for j in range(d.shape[1]):
        ref = _scipy(d[:, j], "approx")
        assert r.method[j] == "normal"
        assert r.statistic[j] == ref.statistic
        assert r.p_value[j] == pytest.approx(ref.pvalue, rel=1e-12)


def test_normal_beyond_50_equals_scipy_approx_pinned():
    rng = np.random.default_rng(8)
    d = rng.normal(0.01, 0.1, size=(51, 3))
    r = stats.wilcoxon_test(d)
    assert r.method == ("normal",) * 3
    for j in range(3):
        assert r.p_value[j] == pytest.approx(_scipy(d[:, j], "approx").pvalue, rel=1e-12)


def test_tied_small_sample_uses_the_normal_approximation_not_scipys_choice():
    # C − A of the compare worked example: scipy 1.17's automatic method (a permutation test)
    # gives 0.75, scipy 1.11's another number; Cranfield's rule says ties → normal: 0.5807
    d = np.array([0.5, -0.5, -0.25, 0.0, -1 / 6])
    r = stats.wilcoxon_test(d)
    assert r.method == ("normal",) and r.n[0] == 4
    assert r.p_value[0] == pytest.approx(_scipy(d, "approx").pvalue, rel=1e-12)
    assert r.p_value[0] == pytest.approx(0.5807121621890252, rel=1e-12)


# ---- float noise ----------------------------------------------------------------------------

def test_float_noise_is_a_tie_and_a_zero():
    # P@10-like levels: 0.4 − 0.3 and 0.3 − 0.2 are both 0.1 but differ in the last bits
    levels = np.array([0.4, 0.3, 0.2, 0.7, 0.6, 0.9, 0.5, 0.1, 0.8, 0.3, 0.6, 0.2])
    base = np.array([0.3, 0.2, 0.1, 0.5, 0.4, 0.6, 0.5, 0.3, 0.5, 0.1, 0.7, 0.1])
    d = levels - base
    assert len(set(np.abs(d[d != 0]).tolist())) > len(set(np.round(np.abs(d[d != 0]), 12)))
    clean = np.round(d, 12)  # the same differences without the noise
    r, r_clean = stats.wilcoxon_test(d), stats.wilcoxon_test(clean)
    assert r.method == r_clean.method == ("normal",)  # ties, seen through the noise
    assert (r.statistic[0], r.p_value[0]) == (r_clean.statistic[0], r_clean.p_value[0])
    ref = _scipy(clean, "approx")
    assert (r.statistic[0], r.p_value[0]) == (ref.statistic, pytest.approx(ref.pvalue))
    # unguarded ranking (scipy on the raw floats) sees no ties and switches method
    assert _scipy(d, "exact").pvalue != pytest.approx(r.p_value[0])
    # a difference that is zero up to rounding is dropped as a zero
    noisy_zero = np.append(d, (0.1 + 0.2) - 0.3)  # 5.6e-17
    assert stats.wilcoxon_test(noisy_zero).n[0] == r.n[0]


def test_web2012_p10_rm_vs_ql_is_the_tie_corrected_value():
    # the example: unguarded, W 30 and p 0.7895; with ties found, W 32, p 0.9278
    runs = {"ql": str(WEB / "runs" / "ql" / "results-cata-filtered.txt"),
            "rm": str(WEB / "runs" / "rm" / "results-cata-filtered.txt")}
    doc = compare(str(WEB / "qrels.adhoc.txt"), runs, ["P.10"], baseline="ql",
                  tests=["t"], wilcoxon=True)
    (pair,) = doc["pairs"]
    w = pair["wilcoxon"]
    assert w["statistic"] == 32.0 and w["method"] == "normal" and w["n"] == 11
    assert w["p_value"] == pytest.approx(0.9277506684745482, rel=1e-9)


# ---- independence from scipy ----------------------------------------------------------------

def test_no_scipy_wilcoxon_is_called(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("cranfield must not call scipy.stats.wilcoxon")

    monkeypatch.setattr(scipy.stats, "wilcoxon", refuse)
    rng = np.random.default_rng(3)
    r = stats.wilcoxon_test(np.round(rng.normal(size=(30, 3)), 1))
    assert np.isfinite(r.p_value).all()


def test_edge_cases():
    r = stats.wilcoxon_test(np.zeros((4, 1)))
    assert math.isnan(r.statistic[0]) and r.p_value[0] == 1.0 and r.n[0] == 0
    r = stats.wilcoxon_test(np.zeros((0, 2)))
    assert np.isnan(r.p_value).all()
    r = stats.wilcoxon_test([0.3])  # one difference: both sign patterns, p = 1
    assert (r.statistic[0], r.p_value[0], r.method) == (0.0, 1.0, ("exact",))
    r = stats.wilcoxon_test([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # all positive: 2/2^6
    assert r.p_value[0] == pytest.approx(2 / 64) and r.statistic[0] == 0.0


def test_smallest_p_is_the_p_with_every_sign_alike():
    rng = np.random.default_rng(21)
    untied = rng.normal(0, 0.2, size=9)
    tied = np.round(rng.normal(0, 0.2, size=20), 1)
    for d in (untied, tied, np.array([0.6, 0.6, 0.6])):
        r, alike = stats.wilcoxon_test(d), stats.wilcoxon_test(np.abs(d))
        assert r.smallest_p[0] == pytest.approx(alike.p_value[0], rel=1e-12)
    assert stats.wilcoxon_test(untied).smallest_p[0] == pytest.approx(2 / 2**9)
    # three tied differences: the normal approximation cannot go below 0.083
    assert stats.wilcoxon_test([0.6, 0.6, 0.6]).smallest_p[0] == pytest.approx(
        2 * scipy.stats.norm.sf(3 / math.sqrt(3)))
