"""cranfield.compare.comparison: per-run means, paired tests over measure × pair, the correction
across the family, topic handling, errors, the JSON document, and the regression gate.

The worked example: five topics t1..t5, each with one relevant document ``r``, so a topic's
AP is 1/rank of ``r`` (0 when not retrieved) and P@1 is 1 when ``r`` is first.

    rank of r     t1  t2  t3  t4  t5   ->  AP per topic               mean
    A (baseline)   2   2   4   4   2       .5   .5   .25  .25  .5     0.4
    B              1   1   1   2   1       1    1    1    .5   1      0.9
    C              1   -   -   4   3       1    0    0    .25  1/3    0.316667

B − A = (.5, .5, .75, .25, .5): all positive, so of the 2^5 sign vectors only all-plus and
all-minus reach |Σ d|: exact randomization p = 2/32 = 0.0625.
C − A = (.5, −.5, −.25, 0, −1/6), |Σ d| = 5/12: over the 16 sign patterns of the non-zero
differences, ±.5 ±.5 ∈ {1, 0, 0, −1} and ±.25 ±1/6 ∈ {±5/12, ±1/12}; |sum| ≥ 5/12 for all 8
patterns with ±1 and for 4 of the 8 with 0 → p = 12/16 = 0.75.
Holm over this family of two: 0.0625 · 2 = 0.125, then max(0.125, 0.75 · 1) = 0.75.
"""

from __future__ import annotations

import json
import math

import numpy as np
import orjson
import pytest
import scipy.stats

import cranfield
from cranfield.compare import stats
from cranfield.compare.comparison import compare, compare_evaluations
from cranfield.compare.gate import Gate, gate, parse_gate
from cranfield.errors import EvaluationError, InputError, MeasureError

TOPICS = ["t1", "t2", "t3", "t4", "t5"]
AP = {"A": [0.5, 0.5, 0.25, 0.25, 0.5], "B": [1, 1, 1, 0.5, 1], "C": [1, 0, 0, 0.25, 1 / 3]}


def run_with(ranks, topics=None):
    """A mapping run placing the relevant document ``r`` at ``ranks[i]`` (None: not retrieved)
    below non-relevant documents x1, x2, ..."""
    topics = topics or [f"t{i + 1}" for i in range(len(ranks))]
    out = {}
    for topic, rank in zip(topics, ranks, strict=True):
        docs = {f"x{j}": 10.0 - j for j in range(1, (rank or 5))}
        if rank is not None:
            docs["r"] = 10.0 - rank
        out[topic] = docs
    return out


def qrels_for(topics):
    return {t: {"r": 1, "x1": 0} for t in topics}


QRELS = qrels_for(TOPICS)
RUNS = {"A": run_with([2, 2, 4, 4, 2]), "B": run_with([1, 1, 1, 2, 1]),
        "C": run_with([1, None, None, 4, 3])}


def pair_of(doc, measure, a, b):
    (p,) = [p for p in doc["pairs"] if p["measure"] == measure and (p["a"], p["b"]) == (a, b)]
    return p


@pytest.fixture(scope="module")
def doc():
    return compare(QRELS, RUNS, ["map", "P.1"], baseline="A")


def _own(doc: dict) -> list[dict]:
    """The comparison's own warnings (each run's input lint comes first, naming its run)."""
    return [w for w in doc["warnings"] if "run" not in w]


def test_means_and_aggregates(doc):
    means = {run: v["mean"] for run, v in doc["summary"]["map"].items()}
    assert means == pytest.approx({"A": 0.4, "B": 0.9, "C": 0.95 / 3})
    assert doc["summary"]["map"]["C"]["aggregate"] == pytest.approx(0.95 / 3)
    assert doc["summary"]["P_1"]["B"]["mean"] == pytest.approx(0.8)
    low, high = doc["summary"]["map"]["A"]["ci_low"], doc["summary"]["map"]["A"]["ci_high"]
    half = scipy.stats.t.ppf(0.975, 4) * np.std(AP["A"], ddof=1) / math.sqrt(5)
    assert (low, high) == pytest.approx((0.4 - half, 0.4 + half))
    assert [m["key"] for m in doc["measures"]] == ["map", "P_1"]
    assert doc["measures"][0]["canonical"] == "map(rel=1,profile=trec_eval-9.0.8)"
    # five topics: only the bootstrap's small-sample warning (after the runs' input lint)
    assert doc["topics"] == TOPICS
    assert [w["code"] for w in _own(doc)] == ["bootstrap-few-topics"]


def test_mean_diff_wins_ties_losses_and_largest_losses(doc):
    ab, ac = pair_of(doc, "map", "A", "B"), pair_of(doc, "map", "A", "C")
    assert ab["mean_diff"] == pytest.approx(0.5)
    assert ac["mean_diff"] == pytest.approx(-1 / 12)
    assert (ab["wins"], ab["ties"], ab["losses"]) == (5, 0, 0)
    assert (ac["wins"], ac["ties"], ac["losses"]) == (1, 1, 3)
    assert ab["largest_losses"] == []  # B never loses: nothing listed
    losses = ac["largest_losses"]
    assert [x["topic"] for x in losses] == ["t2", "t3", "t5"]
    assert [x["diff"] for x in losses] == pytest.approx([-0.5, -0.25, -1 / 6])
    assert (losses[0]["a"], losses[0]["b"]) == (0.5, 0.0)
    short = compare(QRELS, RUNS, ["map"], baseline="A", largest_losses=2)
    assert [x["topic"] for x in pair_of(short, "map", "A", "C")["largest_losses"]] == ["t2", "t3"]


def test_t_test_equals_scipy_ttest_rel(doc):
    for other in ("B", "C"):
        ref = scipy.stats.ttest_rel(AP[other], AP["A"])
        t = pair_of(doc, "map", "A", other)["t_test"]
        assert t["statistic"] == pytest.approx(float(ref.statistic), rel=1e-12)
        assert t["p_value"] == pytest.approx(float(ref.pvalue), rel=1e-12)
        assert t["df"] == 4
        ci = ref.confidence_interval(0.95)
        pair = pair_of(doc, "map", "A", other)
        assert (pair["ci_low"], pair["ci_high"]) == pytest.approx((ci.low, ci.high))


def test_randomization_is_exact_for_five_topics_with_hand_worked_p(doc):
    ab = pair_of(doc, "map", "A", "B")["randomization"]
    ac = pair_of(doc, "map", "A", "C")["randomization"]
    assert ab["exact"] and ab["n_permutations"] == 32 and ab["seed"] == 0
    assert ab["p_value"] == pytest.approx(0.0625)
    assert ac["p_value"] == pytest.approx(0.75)


def test_holm_hand_worked_for_a_family_of_two():
    one = compare(QRELS, RUNS, ["map"], baseline="A")
    assert one["correction"] == {"method": "holm",
                                 "family_size": {"t": 2, "randomization": 2, "bootstrap": 2}}
    ab = pair_of(one, "map", "A", "B")["randomization"]
    ac = pair_of(one, "map", "A", "C")["randomization"]
    assert ab["p_adjusted"] == pytest.approx(0.125)
    assert ac["p_adjusted"] == pytest.approx(0.75)
    assert not ab["significant"]  # 0.125 ≥ 0.05
    loose = compare(QRELS, RUNS, ["map"], baseline="A", alpha=0.2)
    assert pair_of(loose, "map", "A", "B")["randomization"]["significant"]
    bonf = compare(QRELS, RUNS, ["map"], baseline="A", correction="bonferroni")
    assert pair_of(bonf, "map", "A", "C")["randomization"]["p_adjusted"] == 1.0
    none = compare(QRELS, RUNS, ["map"], baseline="A", correction="none")
    assert pair_of(none, "map", "A", "B")["randomization"]["p_adjusted"] == pytest.approx(0.0625)


@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh"])
def test_correction_covers_every_measure_and_pair_per_test(method):
    doc = compare(QRELS, RUNS, ["map", "P.1", "recip_rank"], correction=method, wilcoxon=True)
    assert len(doc["pairs"]) == 9  # 3 measures × 3 pairs
    for test in ("t_test", "randomization", "bootstrap", "wilcoxon"):
        raw = np.array([p[test]["p_value"] for p in doc["pairs"]])
        adjusted = [p[test]["p_adjusted"] for p in doc["pairs"]]
        assert adjusted == pytest.approx(stats.correct_p_values(raw, method).tolist())
    assert doc["correction"]["family_size"] == {"t": 9, "randomization": 9, "bootstrap": 9,
                                                "wilcoxon": 9}


def test_wilcoxon_only_when_asked_and_equal_to_scipy(doc):
    assert "wilcoxon" not in pair_of(doc, "map", "A", "C")
    with_w = compare(QRELS, RUNS, ["map"], baseline="A", wilcoxon=True)
    diff = np.subtract(AP["C"], AP["A"])
    # C − A = (.5, −.5, −.25, 0, −1/6): the zero is dropped and ±.5 tie, so Cranfield's method
    # is the normal approximation with tie correction (p 0.5807; scipy 1.17's automatic choice
    # was a permutation test, 0.75, and scipy 1.11's another): scipy with the method pinned
    ref = scipy.stats.wilcoxon(diff, zero_method="wilcox", method="approx", correction=False)
    result = pair_of(with_w, "map", "A", "C")["wilcoxon"]
    assert result["p_value"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert (result["method"], result["n"], result["statistic"]) == ("normal", 4, ref.statistic)


def test_bootstrap_and_effect_size_match_stats(doc):
    diff = np.subtract(AP["C"], AP["A"])
    ref = stats.bootstrap_test(diff, 10000, 0)
    boot = pair_of(doc, "map", "A", "C")["bootstrap"]
    assert boot["p_value"] == pytest.approx(float(ref.p_value[0]))
    assert (boot["ci_low"], boot["ci_high"]) == pytest.approx((ref.ci_low[0], ref.ci_high[0]))
    assert boot["n_samples"] == 10000 and boot["seed"] == 0
    dz = pair_of(doc, "map", "A", "C")["effect_size"]["cohens_dz"]
    assert dz == pytest.approx(diff.mean() / diff.std(ddof=1))


def test_pairs_with_baseline_and_all_pairs():
    with_base = compare(QRELS, RUNS, ["map"], baseline="B", tests=["t"])
    assert [(p["a"], p["b"]) for p in with_base["pairs"]] == [("B", "A"), ("B", "C")]
    assert with_base["baseline"] == "B"
    assert "randomization" not in with_base["pairs"][0]
    all_pairs = compare(QRELS, RUNS, ["map"], tests=["t"])
    assert [(p["a"], p["b"]) for p in all_pairs["pairs"]] == [("A", "B"), ("A", "C"),
                                                             ("B", "C")]
    assert all_pairs["baseline"] is None
    assert pair_of(all_pairs, "map", "B", "C")["mean_diff"] == pytest.approx(0.95 / 3 - 0.9)


def test_topics_missing_from_a_run_are_dropped_with_a_warning():
    runs = dict(RUNS, D=run_with([1, 1, 1, 1], TOPICS[:4]))
    doc = compare(QRELS, runs, ["map"], baseline="A", tests=["t"])
    assert doc["topics"] == TOPICS[:4]
    (warning,) = _own(doc)
    assert warning["code"] == "topics-not-in-all-runs" and warning["topics"] == ["t5"]
    assert "'D' lacks 1" in warning["message"]
    summary = doc["summary"]["map"]["A"]
    assert summary["mean"] == pytest.approx(1.5 / 4)      # over t1..t4
    assert summary["aggregate"] == pytest.approx(0.4)     # A's own trec_eval mean over t1..t5
    assert [r["topics_evaluated"] for r in doc["runs"]] == [5, 5, 5, 4]


def test_complete_topics_scores_missing_topics_zero():
    runs = {"A": RUNS["A"], "D": run_with([1, 1, 1, 1], TOPICS[:4])}
    doc = compare(QRELS, runs, ["map"], complete_topics=True, tests=["t"], per_topic=True)
    assert doc["topics"] == TOPICS and _own(doc) == []
    assert doc["per_topic"]["D"]["t5"] == {"map": 0.0}
    assert doc["summary"]["map"]["D"]["mean"] == pytest.approx(0.8)
    assert doc["pairs"][0]["largest_losses"] == [{"topic": "t5", "a": 0.5, "b": 0.0,
                                                  "diff": -0.5}]
    assert doc["options"]["complete_topics"] is True


def test_errors():
    with pytest.raises(EvaluationError, match="at least two runs"):
        compare(QRELS, {"A": RUNS["A"]})
    with pytest.raises(InputError, match="'Z' is not one of the runs") as info:
        compare(QRELS, RUNS, baseline="Z")
    assert info.value.field == "baseline" and info.value.location == "baseline"
    with pytest.raises(MeasureError, match="no per-topic values to compare"):
        compare(QRELS, RUNS, ["map", "gm_map"])
    with pytest.raises(MeasureError, match="no numeric per-topic values"):
        compare(QRELS, RUNS, ["relstring"])
    with pytest.raises(InputError, match="unknown method"):
        compare(QRELS, RUNS, correction="sidak")
    with pytest.raises(InputError, match="unknown test"):
        compare(QRELS, RUNS, tests=["z"])
    for alpha in (0, 1, 1e-17, -0.5):  # 1 - 1e-17 is 1.0: intervals at level 1 (was a 500)
        with pytest.raises(InputError, match=f"alpha: must be between 0 and 1.*{alpha!r}"):
            compare(QRELS, RUNS, alpha=alpha)
    assert compare(QRELS, RUNS, ["map"], alpha=1e-15)["alpha"] == 1e-15
    with pytest.raises(TypeError, match="unexpected option"):
        compare(QRELS, RUNS, relevance=2)
    a = cranfield.evaluate(QRELS, RUNS["A"], ["map"])
    b = cranfield.evaluate(QRELS, RUNS["B"], ["map"], relevance_level=2)
    with pytest.raises(EvaluationError, match="different relevance_level"):
        compare_evaluations({"A": a, "B": b})
    c = cranfield.evaluate(qrels_for(["t9"]), run_with([1], ["t9"]), ["map"])
    with pytest.raises(EvaluationError, match="no topic was evaluated for every run"):
        compare_evaluations({"A": a, "C": c})
    with pytest.raises(MeasureError, match="was not evaluated for run 'A'"):
        compare_evaluations({"A": a, "B": cranfield.evaluate(QRELS, RUNS["B"], ["map"])},
                            ["P.5"])


def test_nicknames_skip_what_cannot_be_compared():
    doc = compare(QRELS, RUNS, ["official"], baseline="A", tests=["t"])
    keys = [m["key"] for m in doc["measures"]]
    assert "map" in keys and "P_5" in keys
    assert not {"runid", "num_q", "gm_map"} & set(keys)
    (warning,) = _own(doc)
    assert warning["code"] == "measures-not-comparable" and "gm_map" in warning["message"]


def test_compare_evaluations_matches_measures_by_canonical_name():
    evs = {name: cranfield.evaluate(QRELS, run, ["map", "P.1"]) for name, run in RUNS.items()}
    doc = compare_evaluations(evs, ["AP"], baseline="A")
    assert [m["key"] for m in doc["measures"]] == ["map"]
    assert pair_of(doc, "map", "A", "C")["randomization"]["p_value"] == pytest.approx(0.75)
    everything = compare_evaluations(evs, baseline="A")  # None: every comparable measure
    assert [m["key"] for m in everything["measures"]] == ["map", "P_1"]


def _many_topics(n=25, drop_every=1):
    topics = [f"q{i:02d}" for i in range(n)]
    base = run_with([1] * n, topics)
    worse = run_with([2 if i % drop_every == 0 else 1 for i in range(n)], topics)
    return topics, {"base": base, "worse": worse}


def test_monte_carlo_is_reproducible_for_a_seed():
    topics = [f"q{i:02d}" for i in range(20)]
    rng = np.random.default_rng(5)
    runs = {n: run_with(rng.integers(1, 5, 20).tolist(), topics) for n in "ABC"}
    qrels = qrels_for(topics)
    one = compare(qrels, runs, ["map"], seed=7, n_permutations=2000, n_samples=2000)
    two = compare(qrels, runs, ["map"], seed=7, n_permutations=2000, n_samples=2000)
    other = compare(qrels, runs, ["map"], seed=8, n_permutations=2000, n_samples=2000)
    assert one == two
    p = [x["randomization"]["p_value"] for x in one["pairs"]]
    assert p != [x["randomization"]["p_value"] for x in other["pairs"]]
    r = one["pairs"][0]["randomization"]
    assert not r["exact"] and r["n_permutations"] == 2000 and r["seed"] == 7
    assert one["options"]["seed"] == 7 and one["options"]["n_permutations"] == 2000


def test_document_is_json_and_nan_becomes_none():
    evs = {name: cranfield.evaluate(QRELS, run, ["map", "P.1"]) for name, run in RUNS.items()}
    evs["C"].values["P_1"] = evs["C"].values["P_1"].astype(float)
    evs["C"].values["P_1"][2] = np.nan  # a 0/0 on t3
    doc = compare_evaluations(evs, baseline="A", per_topic=True, curves=True)
    text = json.dumps(doc, allow_nan=False)  # no NaN/Infinity tokens anywhere
    assert orjson.loads(orjson.dumps(doc)) == json.loads(text)
    assert doc["summary"]["P_1"]["C"]["mean"] is None
    ac = pair_of(doc, "P_1", "A", "C")
    assert ac["mean_diff"] is None and ac["t_test"]["p_value"] is None and ac["wins"] is None
    assert not ac["randomization"]["significant"]
    assert doc["per_topic"]["C"]["t3"]["P_1"] is None
    # the untested column does not count in the family
    assert doc["correction"]["family_size"]["t"] == 3
    codes = [w["code"] for w in doc["warnings"]]
    assert codes.count("nan-values") == 2
    assert _own(doc)[0]["topics"] == ["t3"]
    assert doc["curves"]["A"]["recall_levels"][-1] == 1.0
    assert len(doc["curves"]["B"]["mean_interpolated_precision"]) == 11


def test_constant_difference_gives_none_not_infinity():
    topics, runs = _many_topics(20)
    doc = compare(qrels_for(topics), runs, ["map"], tests=["t"])
    pair = doc["pairs"][0]
    assert pair["mean_diff"] == -0.5
    assert pair["t_test"]["statistic"] is None and pair["effect_size"]["cohens_dz"] is None
    assert pair["t_test"]["p_value"] == 0.0
    json.dumps(doc, allow_nan=False)


# --------------------------------------------------------------------------------------------
# gate
# --------------------------------------------------------------------------------------------

def test_gate_passes_when_nothing_drops(doc):
    result = gate(doc, measure="map", max_drop=0.01, baseline="A", candidate="B")
    assert result["verdict"] == "pass"
    (check,) = result["checks"]
    assert check["drop"] == pytest.approx(-0.5) and check["verdict"] == "pass"
    assert "no drop" in check["reasons"][0]


def test_gate_fails_on_a_large_significant_drop():
    topics, runs = _many_topics(25)  # AP 1 -> 0.5 on every topic
    doc = compare(qrels_for(topics), runs, ["map"], baseline="base",
                  gate=Gate("map", max_drop=0.1))
    result = doc["gate"]
    assert result["verdict"] == "fail"
    (check,) = result["checks"]
    assert check["candidate"] == "worse" and check["drop"] == pytest.approx(0.5)
    assert check["p_adjusted"] < 0.05
    assert "exceeds the allowed 0.1 and is significant" in check["reasons"][0]
    assert len(check["offending_topics"]) == 20  # the limit; all 25 dropped by 0.5
    assert check["offending_topics"][0] == {"topic": "q00", "baseline": 1.0,
                                            "candidate": 0.5, "drop": 0.5}
    assert check["offending_topics_from"] == "per_topic"
    assert gate(doc, measure="map", max_drop=0.6)["verdict"] == "pass"


def test_gate_large_drop_the_test_cannot_detect_is_undecided(doc):
    result = gate(doc, measure="map", max_drop=0.01, baseline="A", candidate="C")
    (check,) = result["checks"]
    # 4 non-zero differences: the exact randomization test's smallest p is 2/2^4 = 0.125, so
    # it cannot find any drop significant at 0.05: not a pass (it passed before)
    assert check["verdict"] == "undecided" and result["verdict"] == "undecided"
    assert check["drop"] == pytest.approx(1 / 12)
    # the gate's family is its one check (not map, P_1 × two pairs): p_adj = p = 0.75
    assert check["p_adjusted"] == pytest.approx(0.75) and result["correction"]["family_size"] == 1
    assert "cannot reach p_adj < 0.05 on 5 topics (smallest attainable p_adj 0.125)" in \
        check["reasons"][0]
    # with a test that can reach alpha, the same drop is not significant: a pass
    t_check = gate(doc, measure="map", max_drop=0.01, baseline="A", candidate="C", test="t")
    assert t_check["verdict"] == "pass" and "is not significant (t p_adj" in \
        t_check["reasons"][0]
    # without per-topic values in the document, offending topics come from largest_losses
    assert check["offending_topics_from"] == "largest_losses"
    assert [o["topic"] for o in check["offending_topics"]] == ["t2", "t3", "t5"]
    within = gate(doc, measure="map", max_drop=0.2, baseline="A", candidate="C")
    assert "drop 0.0833 within the allowed 0.2" in within["reasons"][0]
    assert [o["topic"] for o in within["checks"][0]["offending_topics"]] == ["t2", "t3"]


def test_gate_relative_and_one_check_per_candidate():
    topics, runs = _many_topics(20, drop_every=2)  # 10 topics 1 -> .5: mean 1 -> .75
    runs["same"] = runs["base"]
    doc = compare(qrels_for(topics), runs, ["map", "P.1"], baseline="base", per_topic=True)
    result = gate(doc, measure="map", max_drop=0.2, relative=True, test="t")
    assert [c["candidate"] for c in result["checks"]] == ["worse", "same"]
    assert result["verdict"] == "fail"  # 25% > 20%, t p_adj tiny
    worse = result["checks"][0]
    assert worse["relative_drop"] == pytest.approx(0.25)
    assert "drop 25.00% (mean 1.0000 → 0.7500) exceeds the allowed 20%" in worse["reasons"][0]
    assert len(worse["offending_topics"]) == 10  # per topic: 50% > 20%
    assert result["checks"][1]["verdict"] == "pass"
    assert gate(doc, measure="map", max_drop=0.3, relative=True, test="t")["verdict"] == "pass"
    # the name may be given as evaluate takes it
    assert gate(doc, measure="P.1", max_drop=0.3, relative=True)["checks"][0]["measure"] == "P_1"


def test_gate_reads_pairs_in_either_order():
    doc = compare(QRELS, RUNS, ["map"])  # all pairs: (A, B) is stored as b − a = B − A
    check = gate(doc, measure="map", max_drop=0.1, baseline="B", candidate="A")["checks"][0]
    assert check["drop"] == pytest.approx(0.5)
    assert check["mean_baseline"] == pytest.approx(0.9)


def test_gate_errors(doc):
    with pytest.raises(MeasureError, match="not among the compared measures"):
        gate(doc, measure="ndcg", max_drop=0.1)
    with pytest.raises(InputError, match="wilcoxon test was not run"):
        gate(doc, measure="map", max_drop=0.1, test="wilcoxon")
    with pytest.raises(InputError, match="max_drop"):
        gate(doc, measure="map", max_drop=-1)
    with pytest.raises(InputError, match="not among the tests run"):
        compare(QRELS, RUNS, ["map"], tests=["t"], gate={"measure": "map", "max_drop": 0.1})


def test_compare_adds_the_gated_measure():
    doc = compare(QRELS, RUNS, ["map"], baseline="A", gate=parse_gate("P.1:0.5"))
    assert [m["key"] for m in doc["measures"]] == ["map", "P_1"]
    assert doc["gate"]["checks"][0]["measure"] == "P_1"


@pytest.mark.parametrize("text, expected", [
    ("map:0.01", Gate("map", 0.01)),
    ("ndcg_cut.10:2%@0.01", Gate("ndcg_cut.10", 0.02, relative=True, alpha=0.01)),
    ("nDCG@10:0.02", Gate("nDCG@10", 0.02)),
    ("P(rel=2)@5:1.5%", Gate("P(rel=2)@5", 0.015, relative=True)),
    (" map : 0 ", Gate("map", 0.0)),
])
def test_parse_gate(text, expected):
    assert parse_gate(text) == expected


@pytest.mark.parametrize("text, message", [
    ("map", "expected MEASURE:MAX_DROP"),
    ("map:", "expected MEASURE:MAX_DROP"),
    (":0.1", "expected MEASURE:MAX_DROP"),
    ("map:x", "'x' is not a number"),
    ("map:-0.1", "≥ 0"),
    ("map:0.1@2", "alpha must be between 0 and 1"),
    ("map:0.1@x", "alpha 'x' is not a number"),
    ("map:1%%", "expected MAX_DROP"),
    ("map:nan", "finite"),
])
def test_parse_gate_rejects_bad_forms(text, message):
    with pytest.raises(ValueError, match=message):
        parse_gate(text)
