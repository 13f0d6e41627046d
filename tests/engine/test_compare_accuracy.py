"""Accuracy@k compared and gated (review R3 F1, F2, F3): a topic with no relevant document in
the top k has no Accuracy value (ir_measures' meaning; its own mean leaves the topic out), so
a comparison tests Accuracy over the topics where every compared run has a value, says so in
a ``topics-without-value`` warning naming the rest and in each pair's counts (``n_topics``,
``topics_without_value``), and counts wins/ties/losses over those topics; a pair with no such
topic says ``tested: false``. Its weighted mean is the evaluation's (over the topics that have
a value). Oracles: a hand computation, and scipy's paired t-test on random data."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
from accuracy_ranks import RANKS, qrels_and_runs

import cranfield
from cranfield.compare.comparison import compare

QRELS, RUNS = qrels_and_runs(RANKS)  # with its hand computation: tests/accuracy_ranks.py
D = np.array([-0.5, -1.0, 0.5, 0.0])


@pytest.mark.parametrize("tests", [("t",), ("t", "randomization"), ("t", "wilcoxon")])
def test_hand_computed_pair_over_the_topics_with_values(tests):
    doc = compare(QRELS, RUNS, ["Accuracy@3"], baseline="A", tests=tests)
    (pair,) = doc["pairs"]
    assert pair["tested"] is True
    assert (pair["n_topics"], pair["topics_without_value"]) == (4, 1)
    assert (pair["wins"], pair["ties"], pair["losses"]) == (1, 1, 2)
    assert pair["mean_diff"] == pytest.approx(-0.25, abs=1e-15)
    t = scipy.stats.ttest_rel(D, np.zeros(4))
    assert pair["t_test"]["df"] == 3
    assert pair["t_test"]["statistic"] == pytest.approx(t.statistic, rel=1e-12)
    assert pair["t_test"]["p_value"] == pytest.approx(t.pvalue, rel=1e-12)
    assert [loss["topic"] for loss in pair["largest_losses"]] == ["t2", "t1"]
    summary = doc["summary"]["Accuracy@3"]
    assert (summary["A"]["mean"], summary["B"]["mean"]) == (0.75, 0.5)
    assert (summary["A"]["aggregate"], summary["B"]["aggregate"]) == (0.75, pytest.approx(0.6))
    (warn,) = [w for w in doc["warnings"] if w["code"] == "topics-without-value"]
    assert warn["topics"] == ["t3"] and "1 of 5" in warn["message"]
    if "randomization" in tests:  # exact over 2^4 sign vectors: |sum| >= 1.0 in 8 of 16
        assert pair["randomization"]["p_value"] == pytest.approx(
            sum(abs(np.dot(s, D)) >= 1.0 - 1e-12 for s in
                np.array(np.meshgrid(*[[-1, 1]] * 4)).T.reshape(-1, 4)) / 16)
    if "wilcoxon" in tests:
        assert pair["wilcoxon"]["n"] == 3


def test_a_measure_without_left_out_topics_is_unchanged_beside_it():
    """P@3 beside Accuracy@3 is tested over all five topics, as alone."""
    both = compare(QRELS, RUNS, ["Accuracy@3", "P@3"], baseline="A", tests=("t",),
                   correction="none")
    alone = compare(QRELS, RUNS, ["P@3"], baseline="A", tests=("t",), correction="none")
    p_both = next(p for p in both["pairs"] if p["measure"] == "P@3")
    assert p_both == alone["pairs"][0]
    assert p_both["n_topics"] == 5 and p_both["topics_without_value"] == 0


def test_identical_runs_gated_on_accuracy_pass():
    runs = {"A": RUNS["A"], "A2": RUNS["A"]}
    doc = compare(QRELS, runs, ["Accuracy@3"], baseline="A", gate="Accuracy@3:0.01")
    assert doc["gate"]["verdict"] == "pass", doc["gate"]["reasons"]
    (pair,) = doc["pairs"]
    assert (pair["wins"], pair["ties"], pair["losses"]) == (0, 4, 0)


def test_a_pair_with_no_topic_valued_by_both_says_it_is_not_tested():
    ranks = {"A": {"t1": "RNN", "t2": "NNN"}, "B": {"t1": "NNN", "t2": "RNN"}}
    qrels, runs = qrels_and_runs(ranks)
    doc = compare(qrels, runs, ["Accuracy@3"], baseline="A",
                  gate="Accuracy@3:0.01")
    (pair,) = doc["pairs"]
    assert pair["tested"] is False and pair["n_topics"] == 0
    assert pair["topics_without_value"] == 2
    assert (pair["wins"], pair["ties"], pair["losses"]) == (None, None, None)
    assert pair["t_test"]["df"] is None
    assert doc["gate"]["verdict"] == "undecided"  # fails closed, as any untested pair


def test_weighted_and_segment_means_are_the_evaluations():
    """F3: the comparison's weighted mean of Accuracy equals the evaluation's (over the
    topics that have a value), and a segment's summary mean is over its topics where every
    run has a value."""
    md = {"t1": {"segments": ["x"], "weight": 2}, "t2": {"segments": ["x"]},
          "t3": {"segments": ["x"], "weight": 3}, "t4": {"segments": ["y"]},
          "t5": {"segments": ["y"], "weight": 0.5}}
    doc = compare(QRELS, RUNS, ["Accuracy@3"], baseline="A", tests=("t",),
                  topic_metadata=md)
    for name in ("A", "B"):
        ev = cranfield.evaluate(QRELS, RUNS[name], ["Accuracy@3"], topic_metadata=md)
        assert doc["weighted"]["Accuracy@3"][name] == pytest.approx(
            ev.weighted["Accuracy@3"], rel=1e-15)
    # A: t1 1.0 (w2), t2 1.0 (w1), t4 0.5 (w1), t5 0.5 (w0.5); t3 has none
    assert doc["weighted"]["Accuracy@3"]["A"] == pytest.approx(
        np.average([1.0, 1.0, 0.5, 0.5], weights=[2, 1, 1, 0.5]))
    seg_x = doc["segments"]["x"]
    assert seg_x["summary"]["Accuracy@3"]["A"]["mean"] == 1.0   # t1, t2 (t3 left out)
    assert seg_x["summary"]["Accuracy@3"]["B"]["mean"] == 0.25
    (pair,) = seg_x["pairs"]
    assert (pair["n_topics"], pair["wins"], pair["ties"], pair["losses"]) == (2, 0, 0, 2)


def _random(seed: int, n_topics: int = 60, n_runs: int = 3):
    rng = np.random.default_rng(seed)
    qrels = {f"q{t:03d}": {f"d{d}": int(rng.random() < 0.2) for d in range(30)}
             for t in range(n_topics)}
    runs = {f"r{r}": {t: {f"d{d}": float(rng.integers(0, 50)) for d in
                          rng.choice(30, size=int(rng.integers(3, 15)), replace=False)}
                      for t in qrels}
            for r in range(n_runs)}
    return qrels, runs


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", ["Accuracy@5", "Accuracy"])
def test_random_data_against_scipy(seed, name):
    qrels, runs = _random(seed)
    doc = compare(qrels, runs, [name], tests=("t", "wilcoxon"), correction="none")
    per = {r: cranfield.evaluate(qrels, run, [name]) for r, run in runs.items()}
    topics = doc["topics"]
    vals = {r: np.array([ev.per_topic[t][name] for t in topics]) for r, ev in per.items()}
    every = ~np.any([np.isnan(v) for v in vals.values()], axis=0)
    assert 0 < every.sum() < len(topics)  # the data leaves some topics out
    for pair in doc["pairs"]:
        d = vals[pair["b"]][every] - vals[pair["a"]][every]
        assert pair["n_topics"] == every.sum()
        assert (pair["wins"], pair["ties"], pair["losses"]) == (
            int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum()))
        assert pair["mean_diff"] == pytest.approx(d.mean(), abs=1e-12)
        t = scipy.stats.ttest_rel(vals[pair["b"]][every], vals[pair["a"]][every])
        assert pair["t_test"]["p_value"] == pytest.approx(t.pvalue, rel=1e-9)
    for r in runs:
        assert doc["summary"][name][r]["mean"] == pytest.approx(vals[r][every].mean(),
                                                                abs=1e-12)
        assert doc["summary"][name][r]["aggregate"] == pytest.approx(
            np.nanmean(vals[r]), abs=1e-12)
    (warn,) = [w for w in doc["warnings"] if w["code"] == "topics-without-value"]
    assert warn["topics"] == [t for t, keep in zip(topics, every, strict=True) if not keep]
    assert not math.isnan(doc["pairs"][0]["mean_diff"])
