"""The agreement statistics (issue #31) against their oracles, on generated judgments with
missing ones: scikit-learn's ``cohen_kappa_score`` (weights None, linear, quadratic),
statsmodels' ``fleiss_kappa`` and the ``krippendorff`` package's ``alpha`` (nominal, ordinal,
interval). And the 0/0 rules: what a formula leaves undefined is None."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cranfield.judges.agreement import (
    alpha_from_coincidences,
    cohen_kappa,
    coincidences,
    confusion,
    fleiss_counts,
    fleiss_kappa,
    kappa_from_confusion,
    krippendorff_alpha,
)

SEEDS = range(12)


def judgments(seed: int, judges: int = 4, items: int = 60, grades: int = 4,
              missing: float = 0.25) -> np.ndarray:
    """A judges x items matrix of grades 0..grades-1, judges agreeing more than chance (each
    judge is the item's true grade plus noise), ``missing`` of the cells NaN."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, grades, items)
    noise = rng.integers(-1, 2, (judges, items)) * (rng.random((judges, items)) < 0.4)
    m = np.clip(truth + noise, 0, grades - 1).astype(float)
    m[rng.random((judges, items)) < missing] = np.nan
    return m


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", SEEDS)
def test_cohen_kappa_equals_scikit_learn(seed, weights):
    from sklearn.metrics import cohen_kappa_score

    m = judgments(seed, judges=2, grades=3 + seed % 3)
    both = ~np.isnan(m).any(0)
    a, b = m[0][both].astype(int), m[1][both].astype(int)
    expected = cohen_kappa_score(a, b, weights=weights)
    assert cohen_kappa(m[0], m[1], weights=weights) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_on_a_declared_scale_equals_scikit_learn_with_labels(weights):
    """A scale wider than what the two judges used (grade 3 nobody gave) weighs distances
    over the whole scale, as scikit-learn's ``labels``."""
    from sklearn.metrics import cohen_kappa_score

    a, b = [0, 1, 4, 4, 1, 0, 2], [0, 2, 4, 1, 1, 0, 2]
    scale = [0, 1, 2, 3, 4]
    expected = cohen_kappa_score(a, b, labels=scale, weights=weights)
    assert cohen_kappa(a, b, scale, weights) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_fleiss_kappa_equals_statsmodels(seed):
    from statsmodels.stats.inter_rater import fleiss_kappa as oracle

    m = judgments(seed, judges=5, grades=3, missing=0.0)
    table = fleiss_counts(m, [0, 1, 2])
    assert fleiss_kappa(table) == pytest.approx(oracle(table, method="fleiss"), abs=1e-12)


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
@pytest.mark.parametrize("seed", SEEDS)
def test_krippendorff_alpha_equals_the_package_with_missing_judgments(seed, level):
    import krippendorff

    m = judgments(seed, judges=3 + seed % 3, grades=3 + seed % 2, missing=0.3)
    assert np.isnan(m).any()
    expected = krippendorff.alpha(reliability_data=m, level_of_measurement=level)
    assert krippendorff_alpha(m, level) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("level", ["interval", "ordinal"])
def test_krippendorff_alpha_on_real_values_equals_the_package(level):
    """Real-valued judgments (an LLM's probabilities) read at the interval level."""
    import krippendorff

    rng = np.random.default_rng(7)
    m = np.round(rng.random((3, 25)) * 4) / 4
    m[rng.random(m.shape) < 0.2] = np.nan
    expected = krippendorff.alpha(reliability_data=m, level_of_measurement=level)
    assert krippendorff_alpha(m, level) == pytest.approx(expected, abs=1e-12)


def test_sums_of_counts_give_the_statistic_of_the_union():
    """What the bootstrap over topics relies on: confusion and coincidence matrices of two
    topics summed are those of the two topics' items side by side."""
    a, b = judgments(1, judges=3, items=20), judgments(2, judges=3, items=30)
    cats = [0, 1, 2, 3]
    union = np.concatenate([a, b], axis=1)
    assert np.allclose(confusion(a[0], a[1], cats) + confusion(b[0], b[1], cats),
                       confusion(union[0], union[1], cats))
    summed = coincidences(a, cats) + coincidences(b, cats)
    assert alpha_from_coincidences(summed, cats, "ordinal") == pytest.approx(
        krippendorff_alpha(union, "ordinal", cats), abs=1e-12)


def test_perfect_agreement_is_one_and_chance_structure_is_used():
    assert cohen_kappa([0, 1, 2, 1], [0, 1, 2, 1]) == 1.0
    assert krippendorff_alpha([[0, 1, 2, np.nan], [0, 1, 2, 1]], "interval") == 1.0
    assert fleiss_kappa([[2, 0], [0, 2], [2, 0]]) == 1.0


def test_undefined_statistics_are_none():
    # no item judged by both
    assert cohen_kappa([0, np.nan], [np.nan, 1]) is None
    # both judges used one category: chance agreement is perfect (0/0)
    assert cohen_kappa([1, 1, 1], [1, 1, 1]) is None
    assert kappa_from_confusion(np.zeros((3, 3)), "quadratic") is None
    # one value among the pairable judgments, or nothing pairable
    assert krippendorff_alpha([[1, 1, np.nan], [1, 1, 2]]) is None
    assert krippendorff_alpha([[1, np.nan], [np.nan, 2]]) is None
    assert fleiss_kappa(np.zeros((0, 2))) is None
    assert fleiss_kappa([[3, 0], [3, 0]]) is None


def test_fleiss_refuses_items_with_different_numbers_of_judges():
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([[2, 0], [1, 2]])


def test_unknown_weights_and_levels_are_refused():
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa([0, 1], [1, 0], weights="cubic")
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[0, 1], [1, 0]], "ratio")


def test_values_are_plain_floats():
    value = cohen_kappa([0, 1, 2, 2], [0, 2, 2, 1], weights="linear")
    assert type(value) is float and not math.isnan(value)


def test_stacks_of_counts_give_each_ones_statistic_and_nan_where_undefined():
    """One call for every topic or resample: a stack gives what each matrix gives alone."""
    from cranfield.judges.agreement import fleiss_from_sums

    cats = [0, 1, 2, 3]
    ms = [judgments(s, judges=3, items=12) for s in range(5)]
    ms.append(np.full((3, 12), 1.0))  # one category only: undefined
    a = np.stack([m[0] for m in ms])
    b = np.stack([m[1] for m in ms])
    stack = confusion(a, b, cats)
    assert stack.shape == (6, 4, 4)
    for weights in (None, "linear", "quadratic"):
        values = kappa_from_confusion(stack, weights)
        for i, m in enumerate(ms):
            assert np.array_equal(stack[i], confusion(m[0], m[1], cats))
            alone = kappa_from_confusion(stack[i], weights)
            assert (np.isnan(values[i]) and alone is None) or values[i] == pytest.approx(alone)
    coinc = np.stack([coincidences(m, cats) for m in ms])
    for level in ("nominal", "ordinal", "interval"):
        values = alpha_from_coincidences(coinc, cats, level)
        alone = [alpha_from_coincidences(c, cats, level) for c in coinc]
        assert [None if np.isnan(v) else pytest.approx(v) for v in values] == alone
    sums = np.array([[3, 2.0, 6, 0], [0, 0, 0, 0], [2, 0.5, 2, 2]])
    assert np.isnan(fleiss_from_sums(sums[:, 0], sums[:, 1], sums[:, 2:])[:2]).all()
    assert fleiss_from_sums(*sums[2, :2], sums[2, 2:]) == pytest.approx(
        fleiss_from_sums(sums[:, 0], sums[:, 1], sums[:, 2:])[2])
