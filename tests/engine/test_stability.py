"""The stability statistics (issue #31, cranfield/compare/stability.py) against oracles:
scipy's ``kendalltau`` for τ_b; τ_AP and RBO_ext written here by hand from their papers
(Yilmaz, Aslam & Robertson, SIGIR 2008; Webber, Moffat & Zobel, TOIS 2010), plus worked
examples; the bootstrap CIs deterministic with a seed and containing the point estimate;
the pairs' statuses from the comparisons' own tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from cranfield.compare import stats
from cranfield.compare.stability import (
    bootstrap_intervals,
    kendall_tau_b,
    pair_status,
    rbo_ext,
    stability,
    stability_work,
    tau_ap,
    tau_ap_symmetric,
)
from cranfield.errors import InputError

# -- oracles, by hand from the papers ---------------------------------------------------------

def ranked_names(scores: list[float]) -> list[int]:
    """Systems best first; equal scores in index order (the engine's documented tie rule)."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def tau_ap_by_hand(truth: list[float], estimate: list[float]) -> float:
    """Yilmaz et al. 2008, eq. 1: walk the estimated list; C(i) = the items above the i-th
    that are also above it in the true list; τ_AP = 2/(N−1) Σ_{i=2..N} C(i)/(i−1) − 1."""
    true_list, est_list = ranked_names(truth), ranked_names(estimate)
    n = len(est_list)
    total = 0.0
    for i in range(1, n):          # the (i+1)-th item, i items above it
        item = est_list[i]
        above_in_truth = set(true_list[:true_list.index(item)])
        c = sum(1 for other in est_list[:i] if other in above_in_truth)
        total += c / i
    return 2.0 / (n - 1) * total - 1.0


def rbo_ext_by_hand(x: list[float], y: list[float], p: float) -> float:
    """Webber et al. 2010, eq. 32, lists of equal length k:
    RBO_ext = X_k/k · p^k + (1−p)/p · Σ_{d=1..k} X_d/d · p^d, X_d = |S:d ∩ T:d|."""
    s, t = ranked_names(x), ranked_names(y)
    k = len(s)
    overlap = [len(set(s[:d]) & set(t[:d])) for d in range(1, k + 1)]
    tail = sum(overlap[d - 1] / d * p**d for d in range(1, k + 1))
    return overlap[-1] / k * p**k + (1 - p) / p * tail


def random_scores(rng, n: int, ties: bool) -> list[float]:
    v = rng.random(n)
    return list(np.round(v, 1) if ties else v)


CASES = [(seed, n, ties) for seed in range(12) for n in (2, 3, 5, 9, 20)
         for ties in (False, True)]


# -- Kendall's τ_b ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed,n,ties", CASES)
def test_kendall_tau_b_equals_scipy(seed, n, ties):
    rng = np.random.default_rng(seed)
    x, y = random_scores(rng, n, ties), random_scores(rng, n, ties)
    expected = scipy_stats.kendalltau(x, y).statistic  # variant b, ties counted
    got = kendall_tau_b(x, y)
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("x,y", [([], []), ([0.3], [0.2]), ([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]),
                                 ([0.1, 0.2], [0.4, 0.4])])
def test_kendall_tau_b_undefined_as_scipy(x, y):
    assert math.isnan(kendall_tau_b(x, y))
    if len(x) >= 2:
        assert math.isnan(scipy_stats.kendalltau(x, y).statistic)


# -- τ_AP ------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed,n,ties", CASES)
def test_tau_ap_equals_the_papers_definition(seed, n, ties):
    rng = np.random.default_rng(100 + seed)
    x, y = random_scores(rng, n, ties), random_scores(rng, n, ties)
    if ties and (len(set(x)) == 1 or len(set(y)) == 1):
        assert math.isnan(tau_ap(x, y))
        return
    assert tau_ap(x, y) == pytest.approx(tau_ap_by_hand(x, y), abs=1e-12)
    assert tau_ap_symmetric(x, y) == pytest.approx(
        (tau_ap_by_hand(x, y) + tau_ap_by_hand(y, x)) / 2, abs=1e-12)


def test_tau_ap_worked_example_of_ircor():
    """The example of R's ircor package (Urbano & Marrero, whose tauAP implements Yilmaz et
    al.): x the true scores, y the estimate, no ties: 0.3928571."""
    x = [0.67, 0.45, 0.29, 0.12, 0.57, 0.24, 0.94, 0.75, 0.08, 0.54]
    y = [0.48, 0.68, 0.32, 0.09, 0.06, 0.61, 0.87, 0.22, 0.44, 0.84]
    assert tau_ap(x, y) == pytest.approx(0.3928571, abs=5e-8)
    assert tau_ap_by_hand(x, y) == pytest.approx(0.3928571, abs=5e-8)


def test_tau_ap_weighs_the_top_more_than_kendall():
    """The paper's point (section 3): one swap at the top costs τ_AP more than one at the
    bottom, while Kendall's τ is the same for both."""
    truth = [5, 4, 3, 2, 1]
    top, bottom = [4, 5, 3, 2, 1], [5, 4, 3, 1, 2]
    assert kendall_tau_b(truth, top) == kendall_tau_b(truth, bottom) == pytest.approx(0.8)
    assert tau_ap(truth, top) < tau_ap(truth, bottom)
    # by hand: top swap C = (0, 2, 3, 4) -> 2/4 (0 + 1 + 1 + 1) - 1 = 0.5
    assert tau_ap(truth, top) == pytest.approx(0.5)
    assert tau_ap(truth, truth) == 1.0 and tau_ap(truth, truth[::-1]) == -1.0


@pytest.mark.parametrize("x,y", [([], []), ([0.2], [0.3]), ([0.4, 0.4, 0.4], [0.1, 0.2, 0.3]),
                                 ([0.1, 0.2, 0.3], [0.0, 0.0, 0.0])])
def test_tau_ap_undefined(x, y):
    assert math.isnan(tau_ap(x, y)) and math.isnan(tau_ap_symmetric(x, y))


# -- RBO -------------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.5, 0.9, 0.98])
@pytest.mark.parametrize("seed,n,ties", CASES)
def test_rbo_ext_equals_the_papers_definition(seed, n, ties, p):
    rng = np.random.default_rng(200 + seed)
    x, y = random_scores(rng, n, ties), random_scores(rng, n, ties)
    if ties and (len(set(x)) == 1 or len(set(y)) == 1):
        assert math.isnan(rbo_ext(x, y, p))
        return
    assert rbo_ext(x, y, p) == pytest.approx(rbo_ext_by_hand(x, y, p), abs=1e-12)


def test_rbo_worked_examples():
    """By hand: the same ranking gives p^k + (1−p)/p Σ p^d = 1; swapping the top two of three
    gives X = (0, 2, 3): p³ + (1−p)/p (p² + p³) = p."""
    assert rbo_ext([3, 2, 1], [3, 2, 1], 0.9) == pytest.approx(1.0)
    assert rbo_ext([3, 2, 1], [2, 3, 1], 0.9) == pytest.approx(0.9)
    assert rbo_ext([3, 2, 1], [2, 3, 1], 0.6) == pytest.approx(0.6)
    assert rbo_ext([1.0], [2.0]) == pytest.approx(1.0)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5])
def test_rbo_refuses_a_persistence_outside_0_1(p):
    with pytest.raises(InputError, match="persistence"):
        rbo_ext([1, 2], [2, 1], p)


# -- bootstrap CIs ---------------------------------------------------------------------------

def matrices(seed=0, systems=8, topics=40, noise=0.05):
    rng = np.random.default_rng(seed)
    quality = np.linspace(0.2, 0.6, systems)[:, None]
    a = np.clip(quality + rng.normal(0, 0.2, (systems, topics)), 0, 1)
    b = np.clip(a + rng.normal(0, noise, a.shape), 0, 1)
    return a, b


def test_bootstrap_is_deterministic_with_a_seed_and_contains_the_estimate():
    a, b = matrices(systems=15, noise=0.25)
    first = bootstrap_intervals(a, b, 300, seed=7)
    again = bootstrap_intervals(a, b, 300, seed=7)
    other = bootstrap_intervals(a, b, 300, seed=8)
    assert first == again
    assert first != other
    mean_a, mean_b = a.mean(axis=1), b.mean(axis=1)
    point = {"kendall_tau": kendall_tau_b(mean_a, mean_b), "tau_ap": tau_ap(mean_a, mean_b),
             "tau_ap_symmetric": tau_ap_symmetric(mean_a, mean_b),
             "rbo": rbo_ext(mean_a, mean_b)}
    for name, value in point.items():
        low, high, undefined = first[name]
        assert undefined == 0
        assert low <= value <= high, name
        assert low < high, name


def test_bootstrap_resamples_topics_as_the_oracle_does():
    """One resample by hand: numpy's PCG64 from the seed draws (resamples, topics) indices;
    the means over the drawn topics give the statistics; the 2.5/97.5% quantiles of them."""
    a, b = matrices(1, systems=5, topics=12)
    n = 40
    picks = np.random.default_rng(3).integers(0, 12, size=(n, 12))
    taus = [scipy_stats.kendalltau(a[:, p].mean(axis=1), b[:, p].mean(axis=1)).statistic
            for p in picks]
    low, high, _ = bootstrap_intervals(a, b, n, seed=3)["kendall_tau"]
    assert (low, high) == pytest.approx(tuple(np.quantile(taus, [0.025, 0.975])), abs=1e-12)


def test_bootstrap_says_how_many_resamples_are_undefined():
    a = np.zeros((3, 5))
    low, high, undefined = bootstrap_intervals(a, a + 1, 20, seed=0)["kendall_tau"]
    assert math.isnan(low) and math.isnan(high) and undefined == 20


# -- the document ----------------------------------------------------------------------------

def test_pair_status():
    assert pair_status(True, True, 0.1, 0.2) == "held"
    assert pair_status(True, True, 0.1, -0.2) == "flipped"
    assert pair_status(True, False, 0.1, 0.2) == "vanished"
    assert pair_status(False, True, 0.1, 0.2) == "appeared"
    assert pair_status(False, False, 0.1, -0.2) == "none"


def test_pair_status_without_a_direction_is_held():
    """A test of medians or ranks can be significant with a mean difference of 0 (or none):
    that names no direction, so nothing flipped (review R31 finding 10)."""
    assert pair_status(True, True, 0.0, 0.2) == "held"
    assert pair_status(True, True, -0.1, 0.0) == "held"
    assert pair_status(True, True, None, -0.2) == "held"
    assert pair_status(True, True, 0.0, 0.0) == "held"
    assert pair_status(True, True, -0.1, -0.2) == "held"
    assert pair_status(True, True, -0.1, 0.2) == "flipped"


def test_stability_document_numbers_equal_the_oracles():
    a, b = matrices(2, systems=6, topics=30, noise=0.15)
    systems = [f"s{i}" for i in range(6)]
    topics = [str(t) for t in range(30)]
    doc = stability(a, b, systems, topics, measure="map", n_resamples=200, seed=1)
    mean_a, mean_b = a.mean(axis=1), b.mean(axis=1)
    st = doc["statistics"]
    assert st["kendall_tau"]["value"] == pytest.approx(
        scipy_stats.kendalltau(mean_a, mean_b).statistic, abs=1e-12)
    assert st["tau_ap"]["value"] == pytest.approx(tau_ap_by_hand(list(mean_a), list(mean_b)))
    assert st["rbo"]["value"] == pytest.approx(rbo_ext_by_hand(list(mean_a), list(mean_b), 0.9))
    assert [s["from"]["rank"] for s in doc["systems"]] == \
        list(scipy_stats.rankdata(-mean_a, method="ordinal").astype(int))
    # the pairs: the comparisons' paired t-test with Holm's correction, under each judgment
    pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
    expected = {}
    for side, m in (("from", a), ("to", b)):
        p = [scipy_stats.ttest_rel(m[j], m[i]).pvalue for i, j in pairs]
        expected[side] = stats.correct_p_values(np.array(p), "holm") < 0.05
    assert len(doc["pairs"]) == len(pairs)
    for (i, j), pair, sig_a, sig_b in zip(pairs, doc["pairs"], expected["from"],
                                          expected["to"], strict=True):
        assert (pair["a"], pair["b"]) == (systems[i], systems[j])
        assert pair["from"]["significant"] == sig_a and pair["to"]["significant"] == sig_b
        assert pair["status"] == pair_status(sig_a, sig_b, float(np.mean(a[j] - a[i])),
                                             float(np.mean(b[j] - b[i])))
    changed = [p for p in doc["pairs"] if p["status"] in ("appeared", "vanished", "flipped")]
    assert doc["changed_pairs"] == changed
    assert sum(doc["pair_counts"].values()) == len(pairs)


def test_a_flipped_pair_is_named():
    rng = np.random.default_rng(5)
    base = rng.random((1, 40))
    a = np.vstack([base, base + 0.3, base + 0.1])
    b = np.vstack([base + 0.3, base, base + 0.1])
    doc = stability(np.clip(a, 0, 2), np.clip(b, 0, 2), ["x", "y", "z"],
                    [str(i) for i in range(40)], measure="ndcg", n_resamples=50)
    flipped = [(p["a"], p["b"]) for p in doc["changed_pairs"] if p["status"] == "flipped"]
    assert ("x", "y") in flipped
    assert doc["pair_counts"]["flipped"] >= 1


def test_degenerate_documents():
    one = stability(np.ones((1, 3)), np.ones((1, 3)), ["only"], ["1", "2", "3"],
                    measure="map", n_resamples=10)
    assert one["statistics"]["kendall_tau"]["value"] is None
    assert one["pairs"] == [] and one["warnings"][0]["code"] == "too-few-systems"
    tied = stability(np.ones((3, 4)), np.ones((3, 4)), ["a", "b", "c"], list("wxyz"),
                     measure="map", n_resamples=10)
    assert all(v["value"] is None for v in tied["statistics"].values())
    assert tied["warnings"][0]["code"] == "all-tied"
    with pytest.raises(InputError, match="finite"):
        stability(np.array([[np.nan]]), np.ones((1, 1)), ["a"], ["1"], measure="map")


def test_stability_work_counts_resamples_and_the_pairs_tests():
    work = stability_work(10, 50, 1000, "t", 10000, 1000)
    assert work.total > 1000 * 2 * 10 * 50
    assert work.tests > 0 and "10 systems" in work.describe()
    assert stability_work(1, 50, 0, "t", 10000, 1000).total == 0


def test_text_and_page_show_the_documents_numbers_and_escape_names():
    from cranfield.compare.stability_text import format_text
    from cranfield.reports.html_stability import render_stability

    a, b = matrices(4, systems=3, topics=20, noise=0.3)
    doc = stability(a, b, ["<b>x", "y & z", "w"], [str(t) for t in range(20)],
                    measure="map", n_resamples=30)
    text = format_text(doc)
    for key in ("kendall_tau", "tau_ap", "rbo"):
        assert f"{doc['statistics'][key]['value']:.4f}" in text
    assert "<b>x" in text
    page = render_stability(doc)
    assert "<b>x" not in page and "&lt;b&gt;x" in page and "y &amp; z" in page
    assert f'data-value="{doc["statistics"]["tau_ap"]["value"]!r}"' in page


def test_no_shared_topic_defines_nothing():
    """A mean over no topic is NaN: no statistic (not a τ of −1 from NaN comparisons)."""
    nan = [math.nan, math.nan, math.nan]
    assert math.isnan(kendall_tau_b(nan, [1, 2, 3]))
    assert math.isnan(tau_ap(nan, [1, 2, 3])) and math.isnan(rbo_ext([1, 2, 3], nan))
    doc = stability(np.zeros((3, 0)), np.zeros((3, 0)), ["a", "b", "c"], [], measure="map",
                    n_resamples=10)
    assert all(v["value"] is None and v["ci_low"] is None
               for v in doc["statistics"].values())
    assert doc["warnings"][0]["code"] == "no-shared-topics" and doc["pairs"] == []
