"""Measures beyond trec_eval (cranfield.measures.extended): the course material's worked
examples, hand-worked 0/0 and empty cases, and agreement with a direct per-topic
implementation written here from the textbook formulas (loops over ranked lists; nothing
shared with the engine's array code)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_worked_examples import AP_EXAMPLES, topic  # a sibling test module

import cranfield
from cranfield.measures.context import f_beta


def graded(grades_by_rank: list[int], judged: list[int] | None = None):
    """(run, qrels) for one topic: documents ranked by position, with these grades; extra
    judged grades (not retrieved) from ``judged``."""
    run = {f"d{i:02d}": float(100 - i) for i in range(len(grades_by_rank))}
    qrels = {f"d{i:02d}": g for i, g in enumerate(grades_by_rank)}
    for j, g in enumerate(judged or []):
        qrels[f"x{j:02d}"] = g
    return run, qrels


def value(run, qrels, name: str, **options) -> float:
    ev = cranfield.evaluate({"t": qrels}, {"t": run}, [name], **options)
    (inst,) = ev.instances
    return ev.per_topic["t"][inst.key]


# ---- worked examples (docs/worked_examples.md) ---------------------------------------------

ELEVEN_POINT = {"A_system1_topic1": 0.8212, "B_system2_topic1": 0.6000,
                "C_system1_topic2": 0.5636, "D_system2_topic2": 0.4545}


@pytest.mark.parametrize("name", list(ELEVEN_POINT))
def test_eleven_point_interpolated_ap_worked_example(name):
    _, ranks, depth, R, _ = next(e for e in AP_EXAMPLES if e[0] == name)
    run, qrels = topic(ranks, depth, R)
    assert round(value(run, qrels, "IAP11"), 4) == ELEVEN_POINT[name]


def test_eleven_point_levels_of_ranking_A_worked_example():
    """A's 11 interpolated precisions: 1.0, 1.0, then 5/6 seven times, then 0.6, 0.6."""
    run, qrels = topic([1, 3, 4, 5, 6, 10], 10, 6)
    expected = (2 * 1.0 + 7 * (5 / 6) + 2 * 0.6) / 11
    assert value(run, qrels, "IAP11") == pytest.approx(expected, abs=1e-12)


def test_ap_normalised_by_min_k_R_worked_example():
    """AP1@k = (1 / min(k, R)) sum_{i <= k} rel(i) P@i; ranking A at k = 5: relevant at
    1, 3, 4, 5 -> (1 + 2/3 + 3/4 + 4/5) / 5; trec_eval's map_cut divides by R = 6."""
    run, qrels = topic([1, 3, 4, 5, 6, 10], 10, 6)
    total = 1 + 2 / 3 + 3 / 4 + 4 / 5
    assert value(run, qrels, "AP(norm=min)@5") == pytest.approx(total / 5, abs=1e-12)
    assert value(run, qrels, "AP(norm=R)@5") == pytest.approx(total / 6, abs=1e-12)
    assert value(run, qrels, "AP@5") == pytest.approx(total / 6, abs=1e-12)
    perfect, q = topic(list(range(1, 11)), 20, 10)
    assert value(perfect, q, "AP(norm=min)@5") == 1.0


@pytest.mark.parametrize("p, r, expected", [(0.94, 0.26, 0.4073), (0.99, 0.92, 0.9537)])
def test_f_measure_worked_example(p, r, expected):
    assert round(float(f_beta(np.array([p]), np.array([r]), 1.0)[0]), 4) == expected


def test_f_beta_takes_beta_not_beta_squared_worked_example():
    """F_beta = (beta^2 + 1) P R / (beta^2 P + R): 10 retrieved, 4 relevant of R = 8:
    P = 0.4, R = 0.5; trec_eval's set_F.4 is the same number (its parameter is beta^2)."""
    run, qrels = topic([1, 2, 3, 4], 10, 8)
    f2 = 5 * 0.4 * 0.5 / (4 * 0.4 + 0.5)
    assert value(run, qrels, "F(beta=2)") == pytest.approx(f2, abs=1e-12)
    assert value(run, qrels, "set_F.4") == pytest.approx(f2, abs=1e-12)
    assert value(run, qrels, "F(beta=2)@5") == pytest.approx(
        5 * 0.8 * 0.5 / (4 * 0.8 + 0.5), abs=1e-12)


EXP_GRADES = [3, 2, 3, 0, 0, 1, 2, 2, 3, 0]  # the topic's judgments: the ideal sorts them
DCG_EXP = [7.00, 8.89, 12.39, 12.39, 12.39, 12.75, 13.75, 14.70, 16.80, 16.80]
NDCG_EXP = [1.00, 0.78, 0.83, 0.76, 0.71, 0.69, 0.73, 0.78, 0.90, 0.90]


@pytest.mark.parametrize("k", range(1, 11))
def test_dcg_and_ndcg_exponential_gain_worked_example(k):
    run, qrels = graded(EXP_GRADES)
    assert sorted(qrels.values(), reverse=True) == [3, 3, 3, 2, 2, 2, 1, 0, 0, 0]
    assert round(value(run, qrels, f"DCG(gain=exp)@{k}"), 2) == DCG_EXP[k - 1]
    assert round(value(run, qrels, f"nDCG(gain=exp)@{k}"), 2) == NDCG_EXP[k - 1]


@pytest.mark.parametrize("grades, expected", [
    ([4, 3, 4, 2, 0, 0, 0, 1, 1, 0], 11.17),
    ([3, 3, 4, 2, 0, 0, 0, 1, 1, 0], 10.17),
    ([4, 3, 4, 2, 0, 0, 0, 1, 1, 3], 12.08),
])
def test_dcg_linear_gain_jk_discount_worked_example(grades, expected):
    run, qrels = graded(grades)
    assert round(value(run, qrels, "DCG(discount=jk,b=2)@10"), 2) == expected


def test_set_measures_from_the_contingency_table_worked_example():
    """N = 100, 10 retrieved, 4 of them relevant, R = 8: a = 4, b = 6, c = 4, d = 86."""
    run, qrels = topic([1, 2, 3, 4], 10, 8)
    assert value(run, qrels, "Fallout(N=100)") == pytest.approx(6 / 92)
    assert value(run, qrels, "Specificity(N=100)") == pytest.approx(86 / 92)
    assert value(run, qrels, "NPV(N=100)") == pytest.approx(86 / 90)
    assert value(run, qrels, "FDR") == pytest.approx(6 / 10)
    assert value(run, qrels, "SetAccuracy(N=100)") == pytest.approx(90 / 100)
    # N from the evaluation's collection_size (trec_eval's -N) when not given
    assert value(run, qrels, "Fallout", collection_size=100) == pytest.approx(6 / 92)
    with pytest.raises(cranfield.MeasureError, match="collection size"):
        value(run, qrels, "Fallout")


# ---- 0/0 and empty cases, by hand ------------------------------------------------------------

def test_zero_over_zero_cases():
    nothing_relevant = graded([0, 0, 0])
    for name in ("nDCG(gain=exp)@10", "DCG(gain=exp)@10", "CG@10", "ERR@10", "F(beta=1)",
                 "F(beta=1)@3", "IAP11", "AP(norm=min)@3"):
        assert value(*nothing_relevant, name) == 0.0, name
    # a topic whose judgments are all non-relevant: ideal DCG 0 -> nDCG 0 (not NaN)
    assert value(*graded([0, -1, 0]), "nDCG(gain=exp,discount=jk)@2") == 0.0
    # everything retrieved and relevant: FDR 0; N equal to what was retrieved: b + d = 0
    run, qrels = topic([1, 2], 2, 2)
    assert value(run, qrels, "FDR") == 0.0
    assert value(run, qrels, "Fallout(N=2)") == 0.0
    assert value(run, qrels, "NPV(N=2)") == 0.0  # c + d = 0
    assert value(run, qrels, "SetAccuracy(N=2)") == 1.0


def test_err_by_hand():
    """Grades 2, 0, 1 with g_max 2 (topic_max=true: the topic's largest grade): R = 3/4, 0,
    1/4 -> 3/4 + (1/4)(1)(1/4)/3."""
    run, qrels = graded([2, 0, 1])
    assert value(run, qrels, "ERR(topic_max=true)@10") == pytest.approx(
        0.75 + 0.25 * 0.25 / 3, abs=1e-15)
    assert value(run, qrels, "ERR(topic_max=true)@1") == pytest.approx(0.75, abs=1e-15)
    # ERR@k is gdeval's and ir_measures' (issue #15): a fixed g_max of 4, R = 3/16, then
    # 1/16 at rank 3; max_grade=4 says so explicitly
    for name in ("ERR@10", "ERR(max_grade=4)@10", "ERR"):
        assert value(run, qrels, name) == pytest.approx(
            3 / 16 + (13 / 16) * (1 / 16) / 3, abs=1e-15)
    # a grade above g_max stops the user for sure (R capped at 1): nothing below counts
    assert value(*graded([1, 3, 2]), "ERR(max_grade=1)@10") == pytest.approx(
        0.5 + 0.5 * 1.0 / 2, abs=1e-15)


# ---- agreement with direct per-topic implementations ------------------------------------------

def ref_dcg(grades, k, gain, disc, b=2.0):
    total = 0.0
    for i, g in enumerate(grades[:k], 1):
        gv = (2 ** g - 1 if gain == "exp" else g) if g > 0 else 0
        d = 1 / math.log2(i + 1) if disc == "log2" else math.log(b) / math.log(max(i, b))
        total += gv * d
    return total


def ref_err(grades, k, g_max):
    total, keep = 0.0, 1.0
    for r, g in enumerate(grades[:k], 1):
        stop = min(1.0, (2 ** g - 1) / 2 ** g_max) if g > 0 else 0.0
        total += keep * stop / r
        keep *= 1 - stop
    return total


def ref_iap11(rels, R):
    if R == 0:
        return 0.0
    points = []
    found = 0
    pr = []
    for i, rel in enumerate(rels, 1):
        found += rel
        pr.append((found / i, found / R, found))
    for level in range(11):
        ok = [p for p, _, f in pr if 10 * f >= level * R]
        points.append(max(ok) if ok else 0.0)
    return sum(points) / 11


@settings(max_examples=150, derandomize=True, deadline=None)
@given(grades=st.lists(st.integers(-1, 4), min_size=1, max_size=25),
       extra=st.lists(st.integers(0, 4), max_size=6), k=st.integers(1, 30),
       gain=st.sampled_from(["linear", "exp"]), disc=st.sampled_from(["log2", "jk"]),
       b=st.sampled_from([2.0, 3.0, 10.0]))
def test_graded_measures_agree_with_direct_loops(grades, extra, k, gain, disc, b):
    run, qrels = graded(grades, extra)
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)
    args = f"gain={gain},discount={disc},b={b:g}"
    dcg = ref_dcg(grades, k, gain, disc, b)
    idcg = ref_dcg(ideal, k, gain, disc, b)
    assert value(run, qrels, f"DCG({args})@{k}") == pytest.approx(dcg, rel=1e-12, abs=1e-12)
    assert value(run, qrels, f"nDCG({args})@{k}") == pytest.approx(
        dcg / idcg if idcg else 0.0, rel=1e-12, abs=1e-12)
    g_max = max([g for g in qrels.values()] + [0])
    assert value(run, qrels, f"ERR(topic_max=true)@{k}") == pytest.approx(
        ref_err(grades, k, g_max) if g_max > 0 else 0.0, rel=1e-12, abs=1e-12)
    assert value(run, qrels, f"ERR@{k}") == pytest.approx(ref_err(grades, k, 4), rel=1e-12,
                                                           abs=1e-12)
    rels = [int(g >= 1) for g in grades]
    R = sum(1 for g in qrels.values() if g >= 1)
    assert value(run, qrels, "IAP11") == pytest.approx(ref_iap11(rels, R), abs=1e-12)
    hits = sum(rels[:k])
    den = min(k, R)
    ap = sum(sum(rels[:i]) / i for i in range(1, min(k, len(rels)) + 1) if rels[i - 1])
    assert value(run, qrels, f"AP(norm=min)@{k}") == pytest.approx(
        ap / den if den else 0.0, abs=1e-12)
    p, r = hits / k, (hits / R if R else 0.0)
    assert value(run, qrels, f"F(beta=2)@{k}") == pytest.approx(
        5 * p * r / (4 * p + r) if p + r else 0.0, abs=1e-12)


def test_new_measures_are_in_the_registry_with_typed_parameters():
    from cranfield import REGISTRY

    params = {p.name: p for p in REGISTRY["ndcg_gd"].params}
    assert params["gain"].choices == ("linear", "exp") and params["b"].type == "number"
    assert REGISTRY["ERR"].section("Reference").startswith("Chapelle")
    for name in ("CG", "dcg_gd", "ndcg_gd", "ERR", "F", "Fallout", "Specificity", "NPV",
                 "FDR", "SetAccuracy", "Accuracy", "AP_norm", "IAP11", "Judged", "RBP",
                 "Compat"):
        m = REGISTRY[name]
        assert m.section("Formula") and m.section("0/0") and m.section("Reference"), name
        assert m.all_trec == ()


def test_micro_averaging_sums_the_contingency_table_worked_example():
    """Salton's illustration in IR form: 5 topics retrieve 1 document (relevant), 5 retrieve
    99 with 1 relevant; every topic has R = 1. Macro precision is the mean of the topics'
    precisions, micro precision pools the 500 retrieved documents."""
    run, qrels = {}, {}
    for t in range(10):
        depth = 1 if t < 5 else 99
        run[f"t{t}"] = {f"d{i}": float(100 - i) for i in range(depth)}
        qrels[f"t{t}"] = {"d0": 1}
    names = ["set_P", "set_recall", "set_F", "F(beta=2)", "FDR", "Fallout(N=1000)",
             "Specificity(N=1000)", "NPV(N=1000)", "SetAccuracy(N=1000)", "map"]
    macro = cranfield.evaluate(qrels, run, names)
    micro = cranfield.evaluate(qrels, run, names, aggregation="micro")
    assert macro.aggregate["set_P"] == pytest.approx((5 * 1 + 5 / 99) / 10)
    a, b, c = 10.0, 490.0, 0.0
    d = 10 * 1000 - a - b - c
    expected = {"set_P": a / (a + b), "set_recall": 1.0, "FDR": b / (a + b),
                "Fallout(N=1000)": b / (b + d), "Specificity(N=1000)": d / (b + d),
                "NPV(N=1000)": d / (c + d),
                "SetAccuracy(N=1000)": (a + d) / (a + b + c + d)}
    for key, v in expected.items():
        assert micro.aggregate[key] == pytest.approx(v, abs=1e-12), key
    p, r = a / (a + b), 1.0
    assert micro.aggregate["set_F"] == pytest.approx(2 * p * r / (p + r), abs=1e-12)
    assert micro.aggregate["F(beta=2)"] == pytest.approx(5 * p * r / (4 * p + r), abs=1e-12)
    assert micro.aggregate["map"] == macro.aggregate["map"]  # not a set measure: macro
    assert micro.measures["set_P"]["aggregate"] == "micro"
    assert micro.measures["map"]["aggregate"] == "mean"
    assert micro.per_topic == macro.per_topic


def test_precision_recall_curves_worked_example():
    """Rankings A and C (system 1): A's 11 points are 1, 1, 5/6 x7, 0.6, 0.6; the mean curve
    averages A's and C's; the points are (k/R, k/rank) at each relevant rank."""
    from cranfield.reports.curves import precision_recall

    run_a, q_a = topic([1, 3, 4, 5, 6, 10], 10, 6)
    run_c, q_c = topic([1, 6, 10], 10, 3)
    ev = cranfield.evaluate({"A": q_a, "C": q_c}, {"A": run_a, "C": run_c}, ["map", "IAP11"])
    pr = precision_recall(ev)
    a = pr["per_topic"]["A"]
    assert a["interpolated_precision"] == pytest.approx([1, 1] + [5 / 6] * 7 + [0.6, 0.6])
    assert a["recall"] == pytest.approx([1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6, 1])
    assert a["precision"] == pytest.approx([1, 2 / 3, 3 / 4, 4 / 5, 5 / 6, 6 / 10])
    c = pr["per_topic"]["C"]["interpolated_precision"]
    assert pr["mean_interpolated_precision"] == pytest.approx(
        [(x + y) / 2 for x, y in zip(a["interpolated_precision"], c, strict=True)])
    assert sum(pr["mean_interpolated_precision"]) / 11 == pytest.approx(ev.aggregate["IAP11"])
    assert pr["recall_levels"][3] == 0.3 and pr["topics_averaged"] == 2
    # a topic without a relevant document retrieved: an empty curve, zero precision
    ev = cranfield.evaluate({"A": q_a, "Z": {"y": 1}}, {"A": run_a, "Z": {"x": 1.0}}, ["map"])
    z = precision_recall(ev)["per_topic"]["Z"]
    assert z["recall"] == [] and z["interpolated_precision"] == [0.0] * 11


def ref_gap(grades, judged_grades, g):
    delta = [0.0] + list(np.cumsum(g))
    num = 0.0
    for n, gn in enumerate(grades, 1):
        if gn > 0:
            num += sum(delta[min(gm, gn)] for gm in grades[:n] if gm > 0) / n
    den = sum(delta[x] for x in judged_grades if x > 0)
    return num / den if den else 0.0


def test_graded_ap_by_hand_and_as_ap_with_one_grade():
    run, qrels = topic([1, 3, 4, 5, 6, 10], 10, 6)  # binary: GAP = AP
    assert value(run, qrels, "GAP") == pytest.approx(0.7750, abs=5e-5)
    run, qrels = graded([2, 0, 1, 2], [1])
    # g = (0.5, 0.5): delta = 0, .5, 1; rank 1 (2): 1/1; rank 3 (1): (.5 + .5)/3;
    # rank 4 (2): (1 + .5 + 1)/4; denominator: 1 + .5 + 1 + .5 (grades 2, 1, 2, extra 1)
    expected = (1 + 1 / 3 + 2.5 / 4) / 3.0
    assert value(run, qrels, "GAP") == pytest.approx(expected, abs=1e-12)
    assert value(run, qrels, "GAP(g=0.5:0.5)") == pytest.approx(expected, abs=1e-12)
    assert value(run, qrels, "GAP(g=0:1)") == pytest.approx(
        ref_gap([2, 0, 1, 2], list(qrels.values()), [0, 1]), abs=1e-12)
    assert value(*graded([0, 0]), "GAP") == 0.0
    with pytest.raises(cranfield.MeasureError, match="sum to 1"):
        value(run, qrels, "GAP(g=0.5:0.6)")
    with pytest.raises(cranfield.MeasureError, match="grade 2"):
        value(run, qrels, "GAP(g=1)")


@settings(max_examples=100, derandomize=True, deadline=None)
@given(grades=st.lists(st.integers(-1, 3), min_size=1, max_size=20),
       extra=st.lists(st.integers(0, 3), max_size=5),
       g=st.sampled_from([(1 / 3, 1 / 3, 1 / 3), (0.2, 0.3, 0.5), (0.0, 0.0, 1.0)]))
def test_graded_ap_agrees_with_a_direct_loop(grades, extra, g):
    run, qrels = graded(grades, extra)
    text = ":".join(repr(x) for x in g)
    assert value(run, qrels, f"GAP(g={text})") == pytest.approx(
        ref_gap(grades, list(qrels.values()), g), abs=1e-12)


def test_alpha_ndcg_novelty_gain_worked_example():
    """The gain of the document at rank k is sum_i J(d_k, i) (1 - alpha)^{r_{i,k-1}}: d1 covers
    subtopics 1 and 2 (gain 2), d2 covers 1 again (gain 0.5), d3 covers 1 and 3 (0.25 + 1);
    alpha-DCG@3 over its ideal-ideal normaliser S (1-alpha)^{r-1}/log2(r+1), S = 3."""
    qrels = "q 1 d1 1\nq 2 d1 1\nq 1 d2 1\nq 1 d3 1\nq 3 d3 1\n"
    run = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    ev = cranfield.evaluate(qrels, run, ["alpha_DCG(alpha=0.5)@3"])
    dcg = 2 + 0.5 / math.log2(3) + 1.25 / math.log2(4)
    ideal_ideal = 3 * (1 + 0.5 / math.log2(3) + 0.25 / math.log2(4))
    assert ev.per_topic["q"]["alpha_DCG(alpha=0.5)@3"] == pytest.approx(dcg / ideal_ideal)


def test_intent_aware_precision_worked_example():
    """IA-P@k = (1/N) sum_i (1/k) sum_{j<=k} J(d_j, i) over the N subtopics of the query:
    with the qrels above, the top 2 hold subtopic 1 twice and subtopic 2 once: (2 + 1 + 0) /
    (2 * 3)."""
    qrels = "q 1 d1 1\nq 2 d1 1\nq 1 d2 1\nq 1 d3 1\nq 3 d3 1\n"
    run = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    ev = cranfield.evaluate(qrels, run, ["P_IA@2", "strec@2"])
    assert ev.per_topic["q"]["P_IA@2"] == pytest.approx(3 / 6)
    assert ev.per_topic["q"]["strec@2"] == pytest.approx(2 / 3)


def test_zero_over_zero_cases_of_specificity_and_the_diversity_measures():
    run, qrels = topic([1, 2], 2, 2)
    assert value(run, qrels, "Specificity(N=2)") == 0.0  # b + d = 0
    # a topic whose subtopics have no relevant document (S = 0): every diversity measure is 0,
    # except nNRBP, which is NaN as in ndeval (and JSON shows null)
    names = ["alpha_nDCG@5", "alpha_DCG@5", "ERR_IA@5", "nERR_IA@5", "P_IA@5", "strec@5",
             "NRBP", "MAP_IA", "nNRBP"]
    ev = cranfield.evaluate("q 1 a 0\nr 1 b 1\n", {"q": {"a": 1.0}, "r": {"b": 1.0}}, names)
    row = ev.per_topic["q"]
    assert all(row[n] == 0.0 for n in names[:-1]) and math.isnan(row["nNRBP"])
    assert ev.per_topic["r"]["alpha_nDCG@5"] == 1.0 and math.isnan(ev.aggregate["nNRBP"])
    # nothing relevant retrieved although S > 0: all zeros, nNRBP 0
    ev = cranfield.evaluate("r 1 b 1\n", {"r": {"x": 1.0}}, names)
    assert all(ev.per_topic["r"][n] == 0.0 for n in names)
