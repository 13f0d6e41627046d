"""The statistics of a comparison document (compare room): each run's mean with its
confidence interval (the ``summary``), which topics count for which measure, and every
paired test on the measure × pair matrix of differences with its correction for multiple
comparisons (the ``pairs``), batched over :mod:`cranfield.compare.stats`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from ..measures.aggregation import trec_mean
from . import stats
from .comparison_settings import BOOTSTRAP_MIN_TOPICS, TEST_KEYS, ComparisonSettings, num


def run_summary(measure_keys, run_names, topics, evs, keys, values, warnings,
                level: float = 0.95, use: np.ndarray | None = None) -> dict:
    """Per measure and run: the mean over the common topics (those of them ``use[m]`` keeps:
    :func:`topics_with_values`) with its t CI at ``level``, and the run's own trec_eval
    aggregate (over its own topics)."""
    out: dict[str, dict] = {}
    for m, key in enumerate(measure_keys):
        out[key] = {}
        kept = np.flatnonzero(use[m]) if use is not None else np.arange(len(topics))
        for r, name in enumerate(run_names):
            column = values[m, r][kept]
            if not column.size:  # no topic has a value for every run: no mean (warned)
                mean = low = high = math.nan
            elif np.isfinite(column).all():
                mean, low, high = stats.mean_ci(column, level)
                # trec_eval's sum (common topics are in strcmp order): the printed mean is
                # the digit trec_eval prints, on a boundary too (issue #27)
                constant = low == mean == high  # zero variance: the CI is the mean
                mean = trec_mean(column)
                if constant:
                    low = high = mean
            else:
                mean = low = high = math.nan
                warnings.append({"code": "nan-values",
                                 "message": f"{key} of run {name!r} is not a number on some "
                                            "topics: its mean and comparisons are left out",
                                 "topics": [topics[kept[i]] for i in
                                            np.flatnonzero(~np.isfinite(column)).tolist()]})
            aggregate = evs[r].aggregate.get(keys[m][r])
            out[key][name] = {"mean": num(mean), "ci_low": num(low), "ci_high": num(high),
                              "aggregate": None if aggregate is None else num(aggregate)}
    return out


def topics_with_values(measure_aggregates: list[str], values: np.ndarray) -> np.ndarray:
    """``use[m, t]``: whether common topic ``t`` counts for measure ``m``. A measure whose NaN
    means "no value" (aggregate ``mean_reported``: ir_measures' Accuracy, whose own mean is
    over the topics that have a value) is compared over the topics where every run has a
    value; any other measure over every common topic (a NaN there is a 0/0 and leaves the
    measure untested)."""
    use = np.ones(values.shape[::2], dtype=bool)
    for m, how in enumerate(measure_aggregates):
        if how == "mean_reported":
            use[m] = ~np.isnan(values[m]).any(axis=0)
    return use


def left_out_warnings(measure_keys, measure_aggregates, topics, use) -> list[dict]:
    """A ``topics-without-value`` warning per mean_reported measure some topic is left out of
    (:func:`topics_with_values`), naming the topics and counting them."""
    out = []
    for m, key in enumerate(measure_keys):
        left = np.flatnonzero(~use[m])
        if measure_aggregates[m] != "mean_reported" or not left.size:
            continue
        out.append({"code": "topics-without-value",
                    "message": f"{key}: {left.size} of {len(topics)} topic(s) have no value "
                               "for some run (no relevant document in the top k) and are left "
                               f"out of its means and paired tests, which are over the other "
                               f"{len(topics) - left.size} (ir_measures' mean leaves a topic "
                               "without a value out)",
                    "topics": [topics[i] for i in left.tolist()]})
    return out


def pair_results(measure_keys, run_names, pair_runs, topics, values,
                 settings: ComparisonSettings, warnings,
                 use: np.ndarray | None = None) -> tuple[list[dict], dict]:
    """Every test on every measure × pair column; then one dict per column. A column is
    tested over the topics ``use`` keeps for its measure (:func:`topics_with_values`);
    columns with the same topics are tested at once (all of them, when no measure leaves a
    topic out). A pair says how many topics it used (``n_topics``) and how many it left out
    (``topics_without_value``); one that cannot be tested (a non-finite value on a topic it
    uses, or no topic left) says ``tested: false`` and has no counts or p-values."""
    a_idx = np.array([a for a, _ in pair_runs])
    b_idx = np.array([b for _, b in pair_runs])
    n_pairs, n_topics = len(pair_runs), len(topics)
    if use is None:
        use = np.ones((len(measure_keys), n_topics), dtype=bool)
    # rows = measure-major columns: row m·n_pairs + p is measure m, pair p
    diff_rows = (values[:, b_idx, :] - values[:, a_idx, :]).reshape(-1, n_topics)
    col_use = np.repeat(use, n_pairs, axis=0)
    n_used = col_use.sum(axis=1)
    finite = np.isfinite(np.where(col_use, diff_rows, 0.0)).all(axis=1) & (n_used > 0)
    n_cols = diff_rows.shape[0]
    level = 1.0 - settings.alpha

    def empty():
        return np.full(n_cols, np.nan)

    t_out = {k: empty() for k in ("statistic", "p_value", "mean_diff", "ci_low", "ci_high")}
    results: dict[str, dict[str, np.ndarray]] = {}
    if "t" in settings.tests:
        results["t"] = {"statistic": t_out["statistic"], "p_value": t_out["p_value"]}
    if "randomization" in settings.tests:
        results["randomization"] = {"p_value": empty()}
        rand_info = np.full(n_cols, None, dtype=object)
    if "bootstrap" in settings.tests:
        results["bootstrap"] = {"p_value": empty(), "ci_low": empty(), "ci_high": empty()}
        boot_info = np.full(n_cols, None, dtype=object)
    if "wilcoxon" in settings.tests:
        results["wilcoxon"] = {"statistic": empty(), "p_value": empty()}
        wil_method = np.full(n_cols, None, dtype=object)
        wil_n, wil_smallest = empty(), empty()
    dz, wins, ties, losses = empty(), empty(), empty(), empty()
    few_topics: set[int] = set()

    @lru_cache(maxsize=1)
    def untested_rand():  # an untested column's entry: the test on every topic, as before
        return stats.randomization_test(np.empty((n_topics, 0)), settings.n_permutations,
                                        settings.seed)

    # the tested columns, grouped by the topics they use (one group unless topics are left out)
    groups: dict[bytes, list[int]] = {}
    for col in np.flatnonzero(finite).tolist():
        groups.setdefault(col_use[col].tobytes(), []).append(col)
    for cols_list in groups.values():
        cols = np.asarray(cols_list)
        rows = np.flatnonzero(col_use[cols[0]])
        diffs = diff_rows[cols][:, rows].T  # (topics, columns), Fortran order as stats wants
        t = stats.t_test(diffs, level)
        for k in t_out:
            t_out[k][cols] = getattr(t, k)
        if "randomization" in results:
            rand = stats.randomization_test(diffs, settings.n_permutations, settings.seed)
            results["randomization"]["p_value"][cols] = rand.p_value
            for c in cols_list:
                rand_info[c] = rand
        if "bootstrap" in results:
            boot = stats.bootstrap_test(diffs, settings.n_samples, settings.seed, level)
            if rows.size < BOOTSTRAP_MIN_TOPICS:
                few_topics.add(int(rows.size))
            for k in ("p_value", "ci_low", "ci_high"):
                results["bootstrap"][k][cols] = getattr(boot, k)
            for c in cols_list:
                boot_info[c] = boot
        if "wilcoxon" in results:
            wil = stats.wilcoxon_test(diffs)
            results["wilcoxon"]["statistic"][cols] = wil.statistic
            results["wilcoxon"]["p_value"][cols] = wil.p_value
            wil_method[cols] = list(wil.method)
            wil_n[cols], wil_smallest[cols] = wil.n, wil.smallest_p
        dz[cols] = stats.cohens_dz(diffs)
        wtl = stats.wins_ties_losses(diffs)
        wins[cols], ties[cols], losses[cols] = wtl.wins, wtl.ties, wtl.losses
    for n in sorted(few_topics):
        warnings.append({"code": "bootstrap-few-topics",
                         "message": f"the bootstrap test rejects a true null too often "
                                    f"below {BOOTSTRAP_MIN_TOPICS} topics (measured at "
                                    f"alpha 0.05: about 0.15 at 5 topics, 0.08 at 10-20); "
                                    f"with {n} topics prefer the randomization or "
                                    "t test, and a gate does not use it"})
    family = {}
    for test, res in results.items():
        res["p_adjusted"] = stats.correct_p_values(res["p_value"], settings.correction)
        family[test] = int(np.count_nonzero(~np.isnan(res["p_value"])))
    mean_diff, ci_low, ci_high = t_out["mean_diff"], t_out["ci_low"], t_out["ci_high"]
    k = min(settings.largest_losses, n_topics)
    # most negative first over the topics each column uses (ties in topic order)
    worst = np.argsort(np.where(col_use, diff_rows, np.inf), axis=1, kind="stable")[:, :k]
    worst_diff = np.take_along_axis(diff_rows, worst, axis=1)
    rows_of = (np.arange(n_cols) // n_pairs, a_idx[np.arange(n_cols) % n_pairs],
               b_idx[np.arange(n_cols) % n_pairs])
    pairs: list[dict] = []
    for col in range(n_cols):
        m, a, b = (int(x[col]) for x in rows_of)
        tested = bool(finite[col])
        n_col = int(n_used[col])
        if not tested:
            why = ("no topic has a value for every run" if n_col == 0 else
                   "has non-numeric per-topic values")
            warnings.append({"code": "nan-values",
                             "message": f"{measure_keys[m]}: {run_names[b]!r} vs "
                                        f"{run_names[a]!r} {why}; not tested"})
        pair: dict[str, Any] = {"measure": measure_keys[m], "a": run_names[a],
                                "b": run_names[b], "mean_diff": num(mean_diff[col]),
                                "ci_low": num(ci_low[col]), "ci_high": num(ci_high[col]),
                                "tested": tested, "n_topics": n_col,
                                "topics_without_value": n_topics - n_col}
        for test, res in results.items():
            entry: dict[str, Any] = {}
            if "statistic" in res:
                entry["statistic"] = num(res["statistic"][col])
            if test == "t":
                entry["df"] = n_col - 1 if n_col else None
            p_adj = res["p_adjusted"][col]
            entry.update({"p_value": num(res["p_value"][col]), "p_adjusted": num(p_adj),
                          "significant": bool(p_adj < settings.alpha)})
            if test == "randomization":
                rand = rand_info[col] or untested_rand()
                entry.update({"n_permutations": rand.n_permutations, "seed": rand.seed,
                              "exact": rand.exact})
            if test == "wilcoxon" and tested:
                entry.update({"method": wil_method[col], "n": int(wil_n[col]),
                              "smallest_p": num(wil_smallest[col])})
            if test == "bootstrap":
                entry.update({"ci_low": num(res["ci_low"][col]),
                              "ci_high": num(res["ci_high"][col]),
                              "n_samples": settings.n_samples, "seed": settings.seed})
            pair[TEST_KEYS[test]] = entry
        pair["effect_size"] = {"cohens_dz": num(dz[col])}
        for name, arr in (("wins", wins), ("ties", ties), ("losses", losses)):
            pair[name] = int(arr[col]) if tested else None
        pair["largest_losses"] = [
            {"topic": topics[i], "a": num(values[m, a, i]), "b": num(values[m, b, i]),
             "diff": num(d)}
            for i, d in zip(worst[col].tolist(), worst_diff[col].tolist(), strict=True)
            if d < 0] if tested else []
        pairs.append(pair)
    return pairs, family
