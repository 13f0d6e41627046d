"""Agreement between judges: Cohen's kappa (unweighted, linearly and quadratically weighted),
Fleiss' kappa and Krippendorff's alpha (nominal, ordinal, interval), each from the counts it
is defined on, so that sums of counts over topics give the statistic over those topics (the
bootstrap over topics, :mod:`cranfield.judges.agreement_document`, resamples such sums).

A statistic that its formula leaves undefined (0/0: no pairable judgment, or one category
only, so chance agreement is perfect) is ``None``, never a number made up for it. The
functions of counts also take stacks of counts (leading axes), and then give arrays of the
statistic, NaN where undefined: one call for every topic, or every resample.

Room: judges.
"""

from __future__ import annotations

import numpy as np

__all__ = ["WEIGHTS", "LEVELS", "confusion", "cohen_kappa", "kappa_from_confusion",
           "fleiss_counts", "fleiss_kappa", "fleiss_from_sums", "fleiss_agreements", "coincidences",
           "krippendorff_alpha", "alpha_from_coincidences"]

#: Cohen's kappa weightings (None: unweighted)
WEIGHTS = (None, "linear", "quadratic")
#: Krippendorff's alpha levels of measurement
LEVELS = ("nominal", "ordinal", "interval")


def _values(values: np.ndarray, undefined: np.ndarray):
    """A statistic of one set of counts as a float (None where undefined), or of a stack of
    them as an array (NaN where undefined)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(undefined, np.nan, values)
    if out.ndim == 0:
        return None if np.isnan(out) else float(out)
    return out


def confusion(a, b, categories) -> np.ndarray:
    """The K x K confusion matrix of two judges over the items both judged: ``a`` and ``b``
    their judgments (equal length, NaN: not judged), ``categories`` the K values in scale
    order; cell (i, j) counts the items ``a`` put in category i and ``b`` in j. Stacks of
    judgments (..., items) give stacks of matrices (..., K, K), one per pair of rows."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    cats = np.asarray(categories, dtype=float)
    k = len(cats)
    both = ~(np.isnan(a) | np.isnan(b))
    cell = np.searchsorted(cats, np.where(both, a, cats[0])) * k + \
        np.searchsorted(cats, np.where(both, b, cats[0]))
    stack = np.arange(int(np.prod(a.shape[:-1], dtype=int))).reshape(a.shape[:-1])
    flat = (stack[..., None] * k * k + cell)[both]
    counts = np.bincount(flat, minlength=max(1, stack.size) * k * k)[: stack.size * k * k]
    return counts.reshape(*a.shape[:-1], k, k).astype(float)


def _weights(k: int, weights: str | None) -> np.ndarray:
    """Cohen's disagreement weights w_ij over category positions i, j (0..K-1): unweighted
    1 - [i = j]; linear |i - j|; quadratic (i - j)^2 (scaling cancels in kappa)."""
    i, j = np.indices((k, k))
    if weights is None:
        return (i != j).astype(float)
    if weights == "linear":
        return np.abs(i - j).astype(float)
    if weights == "quadratic":
        return ((i - j) ** 2).astype(float)
    raise ValueError(f"weights must be one of {WEIGHTS}, not {weights!r}")


def kappa_from_confusion(matrix, weights: str | None = None):
    """Cohen's kappa from a K x K confusion matrix O of two judges (n = sum O).

    kappa = 1 - sum_ij w_ij O_ij / sum_ij w_ij E_ij, with E_ij = O_i. O_.j / n the counts
    chance would give from each judge's own marginals, w the disagreement weights of
    :func:`_weights` (unweighted kappa: (p_o - p_e) / (1 - p_e)).

    Parameters: ``matrix`` the confusion counts, or a stack of them (..., K, K: then an
    array of kappas, NaN where undefined); ``weights`` None, ``"linear"`` or
    ``"quadratic"`` (Cohen 1968's weighted kappa, weights by distance of the categories'
    positions on the scale, as scikit-learn's ``cohen_kappa_score``).
    0/0: no item judged by both (n = 0), or sum w E = 0 (both judges used one and the same
    category: chance agrees perfectly): None.
    Reference: J. Cohen, "A coefficient of agreement for nominal scales", Educ. Psychol.
    Meas. 20 (1960); "Weighted kappa", Psychol. Bull. 70 (1968)."""
    o = np.asarray(matrix, dtype=float)
    w = _weights(o.shape[-1], weights)
    n = o.sum((-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = o.sum(-1)[..., :, None] * o.sum(-2)[..., None, :] / n[..., None, None]
        chance = (w * expected).sum((-2, -1))
        kappa = 1.0 - (w * o).sum((-2, -1)) / chance
    return _values(kappa, (n == 0) | (chance == 0))


def cohen_kappa(a, b, categories=None, weights: str | None = None) -> float | None:
    """Cohen's kappa of two judges' judgments ``a`` and ``b`` of the same items (NaN: not
    judged; only items both judged count), over ``categories`` (the scale, sorted; default
    the values either judge used). See :func:`kappa_from_confusion` for the formula, the
    weights, the 0/0 rule and the references."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if categories is None:
        seen = np.concatenate([a, b])
        categories = np.unique(seen[~np.isnan(seen)])
    return kappa_from_confusion(confusion(a, b, categories), weights)


def fleiss_counts(matrix, categories) -> np.ndarray:
    """Items x categories counts of a judges x items matrix (NaN: not judged): cell (i, j)
    how many judges put item i in category j."""
    m = np.asarray(matrix, dtype=float)
    cats = np.asarray(categories, dtype=float)
    out = np.zeros((m.shape[1], len(cats)))
    judged = ~np.isnan(m)
    items = np.nonzero(judged)[1]
    np.add.at(out, (items, np.searchsorted(cats, m[judged])), 1.0)
    return out


def fleiss_from_sums(items, agreement, totals):
    """Fleiss' kappa from sums over N items, each judged by the same n >= 2 judges:
    ``items`` N, ``agreement`` sum_i P_i, ``totals`` the count of judgments per category
    over all items (sum_j totals_j = N n); or stacks of them (then an array, NaN where
    undefined). See :func:`fleiss_kappa`."""
    items, agreement = np.asarray(items, dtype=float), np.asarray(agreement, dtype=float)
    totals = np.asarray(totals, dtype=float)
    total = totals.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = totals / total[..., None]
        p_e = (p * p).sum(-1)
        kappa = (agreement / items - p_e) / (1.0 - p_e)
    return _values(kappa, (items == 0) | (total == 0) | (p_e == 1.0))


def fleiss_agreements(counts) -> np.ndarray:
    """P_i = (sum_j n_ij^2 - n) / (n (n - 1)) of each row of an items x categories count
    table whose rows all sum to n >= 2: the share of agreeing ordered pairs of judges."""
    c = np.asarray(counts, dtype=float)
    n = c.sum(1)
    return ((c * c).sum(1) - n) / (n * (n - 1))


def fleiss_kappa(counts) -> float | None:
    """Fleiss' kappa of N items each judged by the same number n >= 2 of judges.

    kappa = (P - P_e) / (1 - P_e), with P = mean_i P_i, P_i = (sum_j n_ij^2 - n) / (n (n-1))
    (n_ij: judges putting item i in category j), P_e = sum_j p_j^2, p_j = sum_i n_ij / (N n).

    Parameters: ``counts`` the N x K items x categories table (:func:`fleiss_counts`); every
    row sums to the same n >= 2 (ValueError otherwise: the formula assumes it).
    0/0: no item, or P_e = 1 (every judgment in one category): None.
    Reference: J. L. Fleiss, "Measuring nominal scale agreement among many raters",
    Psychol. Bull. 76 (1971)."""
    c = np.asarray(counts, dtype=float)
    if c.shape[0] == 0:
        return None
    n = c.sum(1)
    if not np.all(n == n[0]) or n[0] < 2:
        raise ValueError("Fleiss' kappa needs every item judged by the same number (>= 2) "
                         "of judges")
    return fleiss_from_sums(len(c), fleiss_agreements(c).sum(), c.sum(0))


def coincidences(matrix, categories) -> np.ndarray:
    """Krippendorff's K x K coincidence matrix of a judges x items matrix (NaN: not judged):
    each item u with m_u >= 2 judgments adds, for every ordered pair of judgments of it by
    different judges, 1 / (m_u - 1) to cell (c, k) of their values; items judged once are
    not pairable and add nothing."""
    m = np.asarray(matrix, dtype=float)
    cats = np.asarray(categories, dtype=float)
    counts = fleiss_counts(m, cats)
    mu = counts.sum(1)
    pairable = mu >= 2
    c = counts[pairable]
    scale = 1.0 / (mu[pairable] - 1.0)
    # sum over items of (n_uc n_uk - [c = k] n_uc) / (m_u - 1)
    out = np.einsum("u,uc,uk->ck", scale, c, c)
    out -= np.diag((scale[:, None] * c).sum(0))
    return out


def _delta2(level: str, categories, totals) -> np.ndarray:
    """Krippendorff's squared differences delta^2_ck between categories c and k: nominal
    [c != k]; interval (c - k)^2 of the values; ordinal (sum_{g=c..k} n_g - (n_c + n_k)/2)^2
    with n_g the coincidence totals of the ranks between (``totals`` (..., K): one matrix
    per set of totals)."""
    cats = np.asarray(categories, dtype=float)
    k = len(cats)
    if level == "nominal":
        return 1.0 - np.eye(k)
    if level == "interval":
        return (cats[:, None] - cats[None, :]) ** 2
    if level == "ordinal":
        n = np.asarray(totals, dtype=float)
        cum = np.concatenate([np.zeros((*n.shape[:-1], 1)), np.cumsum(n, axis=-1)], axis=-1)
        lo, hi = np.minimum.outer(np.arange(k), np.arange(k)), \
            np.maximum.outer(np.arange(k), np.arange(k))
        between = cum[..., hi + 1] - cum[..., lo]
        return (between - (n[..., lo] + n[..., hi]) / 2.0) ** 2
    raise ValueError(f"level must be one of {LEVELS}, not {level!r}")


def alpha_from_coincidences(o, categories, level: str = "nominal"):
    """Krippendorff's alpha from a coincidence matrix ``o`` (:func:`coincidences`), or a
    stack of them (..., K, K: then an array, NaN where undefined), over ``categories`` (the
    values, sorted). See :func:`krippendorff_alpha`."""
    o = np.asarray(o, dtype=float)
    totals = o.sum(-2)
    n = totals.sum(-1)
    d2 = _delta2(level, categories, totals)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (o * d2).sum((-2, -1)) / n
        expected = (totals[..., :, None] * totals[..., None, :] * d2).sum((-2, -1)) / (
            n * (n - 1.0))
        alpha = 1.0 - observed / expected
    return _values(alpha, (n <= 1) | (expected == 0))


def krippendorff_alpha(matrix, level: str = "nominal", categories=None) -> float | None:
    """Krippendorff's alpha of a judges x items matrix with missing judgments (NaN).

    alpha = 1 - D_o / D_e, D_o = (1/n) sum_ck o_ck delta^2_ck, D_e = 1/(n(n-1)) sum_ck n_c
    n_k delta^2_ck, with o the coincidence matrix (:func:`coincidences`), n_c its column
    totals, n = sum_c n_c the pairable judgments, delta^2 the level's difference
    (:func:`_delta2`).

    Parameters: ``matrix`` judges x items (NaN: not judged); ``level`` ``"nominal"``,
    ``"ordinal"`` or ``"interval"``; ``categories`` the values in order (default: those in
    ``matrix``).
    0/0: fewer than two pairable judgments, or D_e = 0 (every pairable judgment has one
    value): None.
    Reference: K. Krippendorff, "Computing Krippendorff's alpha-reliability" (2011), and
    Content Analysis, 4th ed. (2018), ch. 12."""
    m = np.asarray(matrix, dtype=float)
    if categories is None:
        categories = np.unique(m[~np.isnan(m)])
    return alpha_from_coincidences(coincidences(m, categories), categories, level)
