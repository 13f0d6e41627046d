"""Issue #15, the gate: a tolerance at the threshold, failing closed, its own family, the
bootstrap's size at small n, confidence levels, and the exit codes.

Oracles: statsmodels' multipletests (Holm), scipy's t interval, and an independent paired
bootstrap (plain numpy, another random stream) for the size of the shift test.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

from cranfield import evaluate
from cranfield.cli import main
from cranfield.cli_compare import EXIT_GATE_FAILED, EXIT_GATE_UNDECIDED
from cranfield.compare import stats
from cranfield.compare.comparison import compare, compare_evaluations
from cranfield.compare.comparison_settings import BOOTSTRAP_MIN_TOPICS
from cranfield.compare.comparison_text import format_text
from cranfield.compare.gate import GATE_TOL, gate


def _topics(n):
    return [f"q{i:02d}" for i in range(n)]


def _qrels(topics):
    return {t: {f"r{i}": 1 for i in range(10)} for t in topics}


def _run(topics, relevant_in_top10):
    """A run whose top 10 holds ``relevant_in_top10[i]`` relevant documents on topic i (so its
    P@10 is that over 10), relevant ones first."""
    out = {}
    for t, k in zip(topics, relevant_in_top10, strict=True):
        docs = [f"r{i}" for i in range(k)] + [f"x{i}" for i in range(10 - k)]
        out[t] = {doc: 100.0 - rank for rank, doc in enumerate(docs)}
    return out


def _p10_doc(base, cand, n=30, **kwargs):
    topics = _topics(n)
    runs = {"base": _run(topics, [base] * n), "cand": _run(topics, [cand] * n)}
    return compare(_qrels(topics), runs, ["P.10"], baseline="base", per_topic=True, **kwargs)


# ---- the threshold: decided at a stated tolerance -------------------------------------------

def test_a_drop_of_exactly_max_drop_passes_whatever_the_rounding():
    down_from_4 = _p10_doc(4, 3)  # 0.4 → 0.3: the drop is 0.10000000000000003 in floats
    down_from_5 = _p10_doc(5, 4)  # 0.5 → 0.4: 0.09999999999999998
    for doc in (down_from_4, down_from_5):
        result = gate(doc, measure="P.10", max_drop=0.1, test="t")
        (check,) = result["checks"]
        assert result["verdict"] == "pass", check["reasons"]
        assert "within the allowed 0.1" in check["reasons"][0]
        assert check["offending_topics"] == []  # per topic, the same tolerance
    assert gate(down_from_4, measure="P.10", max_drop=0.1)["checks"][0]["drop"] > 0.1
    # beyond the tolerance it fails: 1e-9 is the tolerance, 1e-6 is a real difference
    for doc in (down_from_4, down_from_5):
        result = gate(doc, measure="P.10", max_drop=0.1 - 1e-6, test="t")
        assert result["verdict"] == "fail"
        assert len(result["checks"][0]["offending_topics"]) == 20
    assert GATE_TOL == 1e-9


def test_relative_drop_of_exactly_max_drop_passes():
    doc = _p10_doc(5, 4)  # 20% of 0.5
    assert gate(doc, measure="P.10", max_drop=0.2, relative=True, test="t")["verdict"] == "pass"
    assert gate(doc, measure="P.10", max_drop=0.19, relative=True, test="t")["verdict"] == \
        "fail"


# ---- failing closed -------------------------------------------------------------------------

def test_a_gated_measure_without_values_is_undecided_not_a_pass():
    topics = _topics(30)
    qrels = _qrels(topics)
    evs = {"base": evaluate(qrels, _run(topics, [5] * 30), ["P.10"]),
           "cand": evaluate(qrels, _run(topics, [2] * 30), ["P.10"])}
    evs["cand"].values["P_10"][3] = np.nan  # a measure's 0/0 on one topic
    doc = compare_evaluations(evs, ["P.10"], baseline="base", gate="P.10:0.01")
    result = doc["gate"]
    assert result["verdict"] == "undecided"
    assert "cannot be decided: non-numeric per-topic values" in result["checks"][0]["reasons"][0]
    assert "gate: UNDECIDED" in format_text(doc)


@pytest.mark.parametrize("test", ["t", "randomization", "wilcoxon"])
def test_one_topic_cannot_decide_a_drop(test):
    doc = _p10_doc(5, 2, n=1, tests=["t", "randomization"], wilcoxon=True)
    result = gate(doc, measure="P.10", max_drop=0.1, test=test)
    (check,) = result["checks"]
    assert result["verdict"] == "undecided", check["reasons"]
    assert "does not pass" in check["reasons"][0]
    # a drop within the allowance needs no test: a pass
    assert gate(doc, measure="P.10", max_drop=0.5, test=test)["verdict"] == "pass"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_randomization_gate_cannot_fail_on_five_topics_or_fewer_and_says_so(n):
    doc = _p10_doc(8, 2, n=n, tests=["randomization"])  # every topic drops 0.6
    (check,) = doc["gate"]["checks"] if "gate" in doc else gate(
        doc, measure="P.10", max_drop=0.1)["checks"]
    assert check["verdict"] == "undecided"
    assert check["smallest_p_adjusted"] == pytest.approx(2 / 2**n)
    assert (f"cannot reach p_adj < 0.05 on {n} topics (smallest attainable p_adj "
            f"{2 / 2**n:.4g})") in check["reasons"][0]


def test_randomization_gate_fails_from_six_topics():
    doc = _p10_doc(8, 2, n=6, tests=["randomization"])
    (check,) = gate(doc, measure="P.10", max_drop=0.1)["checks"]
    assert check["verdict"] == "fail" and check["p_adjusted"] == pytest.approx(2 / 64)


# ---- the gate's family ----------------------------------------------------------------------

def _five_topic_runs():
    # one relevant document per topic; AP = RR = 1/rank. A: ranks 2,2,4,4,2; B: 1,1,1,2,1
    topics = [f"t{i}" for i in range(1, 6)]
    qrels = {t: {"r": 1, "x1": 0} for t in topics}

    def run(ranks):
        return {t: {**{f"x{j}": 10.0 - j for j in range(1, rank)}, "r": 10.0 - rank}
                for t, rank in zip(topics, ranks, strict=True)}

    return {"A": run([2, 2, 4, 4, 2]), "B": run([1, 1, 1, 2, 1])}, qrels


def test_an_ungated_measure_does_not_change_the_verdict():
    runs, qrels = _five_topic_runs()
    # B → A drops MAP by 0.5 on all 5 topics: exact randomization p = 2/32 = 0.0625
    alone = compare(qrels, runs, ["map"], baseline="B", gate="map:0.1@0.1")
    more = compare(qrels, runs, ["map", "recip_rank"], baseline="B", gate="map:0.1@0.1")
    for doc in (alone, more):
        (check,) = doc["gate"]["checks"]
        assert doc["gate"]["verdict"] == "fail"
        assert check["p_adjusted"] == pytest.approx(0.0625)  # was 0.125 with recip_rank
        assert doc["gate"]["correction"] == {
            "method": "holm", "family_size": 1,
            "family": "the gate's checks (gated measures × candidates), not every compared "
                      "measure and pair"}
    # the document's own table is still corrected over everything it compares
    (pair,) = [p for p in more["pairs"] if p["measure"] == "map"]
    assert pair["randomization"]["p_adjusted"] == pytest.approx(0.125)
    assert "over the gate's 1 check(s), not the whole table" in format_text(more)


@pytest.mark.parametrize("method", ["holm", "bonferroni"])
def test_gate_family_is_the_gated_measures_and_equals_statsmodels(method):
    rng = np.random.default_rng(5)
    topics = _topics(40)
    base = rng.integers(3, 9, size=40)
    runs = {"base": _run(topics, base.tolist()),
            "c1": _run(topics, np.clip(base - rng.integers(0, 3, 40), 0, 10).tolist()),
            "c2": _run(topics, np.clip(base - rng.integers(-1, 2, 40), 0, 10).tolist())}
    doc = compare(_qrels(topics), runs, ["P.10", "P.5", "recip_rank", "map"], baseline="base",
                  correction=method, gate=["P.10:0.0@0.5", "P.5:0.0@0.5"])
    checks = doc["gate"]["checks"]
    assert doc["gate"]["correction"]["family_size"] == 4  # 2 gated measures × 2 candidates
    raw = [c["p_value"] for c in checks]
    expected = multipletests(raw, method=method)[1]
    assert [c["p_adjusted"] for c in checks] == pytest.approx(expected.tolist(), rel=1e-12)


# ---- the bootstrap's size at small n --------------------------------------------------------

def _size(diffs, alpha=0.05):
    return float(np.mean(stats.bootstrap_test(diffs, 999, seed=11).p_value < alpha))


def _independent_bootstrap_size(diffs, alpha=0.05, b=999, seed=99):
    """The shift test written plainly: resample topics, centre the means at 0."""
    rng = np.random.default_rng(seed)
    n, k = diffs.shape
    rejections = 0
    for j in range(k):
        d = diffs[:, j]
        means = d[rng.integers(0, n, size=(b, n))].mean(axis=1)
        p = (np.sum(np.abs(means - d.mean()) >= abs(d.mean())) + 1) / (b + 1)
        rejections += p < alpha
    return rejections / k


def test_bootstrap_size_is_too_high_below_the_threshold_and_close_above():
    rng = np.random.default_rng(2024)
    null = {n: rng.standard_normal((n, 3000)) for n in (5, 10, BOOTSTRAP_MIN_TOPICS)}
    assert _size(null[5]) > 0.12          # ~0.15: three times alpha
    assert _size(null[10]) > 0.075        # ~0.08-0.11
    assert _size(null[BOOTSTRAP_MIN_TOPICS]) <= 0.07   # ~0.06 at 30
    # an independent bootstrap agrees: the inflation is the method's, not the code's
    assert _independent_bootstrap_size(null[5][:, :1000]) > 0.12
    # discrete differences (P@10-like) too
    levels = rng.choice([-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3], size=(BOOTSTRAP_MIN_TOPICS,
                                                                       3000))
    assert _size(levels) <= 0.07


def test_bootstrap_warns_and_cannot_gate_below_the_threshold():
    small = _p10_doc(8, 2, n=BOOTSTRAP_MIN_TOPICS - 1)
    assert "bootstrap-few-topics" in [w["code"] for w in small["warnings"]]
    (check,) = gate(small, measure="P.10", max_drop=0.1, test="bootstrap")["checks"]
    assert check["verdict"] == "undecided"
    assert "the bootstrap test cannot gate on 29 topics" in check["reasons"][0]
    big = _p10_doc(8, 2, n=BOOTSTRAP_MIN_TOPICS)
    assert "bootstrap-few-topics" not in [w["code"] for w in big["warnings"]]
    assert gate(big, measure="P.10", max_drop=0.1, test="bootstrap")["verdict"] == "fail"


# ---- confidence intervals -------------------------------------------------------------------

def test_intervals_are_at_one_minus_alpha_and_say_they_are_not_adjusted():
    rng = np.random.default_rng(9)
    topics = _topics(12)
    a, b = rng.integers(0, 11, 12), rng.integers(0, 11, 12)
    runs = {"a": _run(topics, a.tolist()), "b": _run(topics, b.tolist())}
    doc = compare(_qrels(topics), runs, ["P.10"], alpha=0.1, tests=["t", "bootstrap"])
    assert doc["ci"]["level"] == pytest.approx(0.9) and doc["ci"]["adjusted"] is False
    x = a / 10
    low, high = scipy.stats.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=scipy.stats.sem(x))
    summary = doc["summary"]["P_10"]["a"]
    assert (summary["ci_low"], summary["ci_high"]) == pytest.approx((low, high), rel=1e-12)
    d = (b - a) / 10
    low, high = scipy.stats.t.interval(0.9, len(d) - 1, loc=d.mean(), scale=scipy.stats.sem(d))
    (pair,) = doc["pairs"]
    assert (pair["ci_low"], pair["ci_high"]) == pytest.approx((low, high), rel=1e-9)
    boot = stats.bootstrap_test(d, 10000, 0, level=0.9)
    assert pair["bootstrap"]["ci_low"] == pytest.approx(float(boot.ci_low[0]))
    text = format_text(doc)
    assert "90% CIs are not adjusted for multiple comparisons" in text
    assert "90% CI" in text and "95% CI" not in text


# ---- exit codes -----------------------------------------------------------------------------

def test_gate_exit_codes_are_their_own_and_documented(capsys):
    assert (EXIT_GATE_FAILED, EXIT_GATE_UNDECIDED) == (3, 5)
    with pytest.raises(SystemExit) as exc:
        main(["compare", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for line in ("0  done; every gate passed", "1  usage error",
                 "2  malformed command line", "3  a gate failed",
                 "4  a docid repeated within a topic",
                 "5  no gate failed, but one could not be decided (not a pass)",
                 "7  no topic with both results and judgments"):
        assert line in text


def test_wilcoxon_gate_that_cannot_reach_alpha_is_undecided():
    # three topics, each dropping 0.6: three tied differences, normal approximation, whose
    # smallest p is 2·Φ(−√3) = 0.083 ≥ 0.05
    doc = _p10_doc(8, 2, n=3, tests=["t"], wilcoxon=True)
    (check,) = gate(doc, measure="P.10", max_drop=0.1, test="wilcoxon")["checks"]
    assert check["verdict"] == "undecided"
    assert check["smallest_p_adjusted"] == pytest.approx(0.0832645166635504)
    assert "the wilcoxon test cannot reach p_adj < 0.05 on 3 topics" in check["reasons"][0]


def test_the_gate_decides_on_adjusted_not_raw_p_values():
    """Issue #16's miss: a gate using raw p-values passed every test. Here P_5's drop is
    significant raw (p < 0.05) but not once Holm adjusts it over the gate's 2 checks, so the
    gate passes; with one gated measure (a family of 1, raw = adjusted) it fails."""
    rng = np.random.default_rng(54)
    topics = _topics(25)
    base = rng.integers(3, 9, size=25)
    cand = np.clip(base - rng.integers(-1, 2, 25), 0, 10)
    # c1 ranks fewer relevant documents in P_5's top 5 than base does: a drop of 0.064
    runs = {"base": _run(topics, cand.tolist()), "c1": _run(topics, base.tolist())}
    both = compare(_qrels(topics), runs, ["P.10", "P.5"], baseline="base", n_permutations=2000,
                   gate=["P.10:0.0", "P.5:0.0"])
    (p5,) = [c for c in both["gate"]["checks"] if c["measure"] == "P_5"]
    assert p5["p_value"] < 0.05 <= p5["p_adjusted"]
    assert p5["verdict"] == "pass" and both["gate"]["verdict"] == "pass"
    alone = compare(_qrels(topics), runs, ["P.5"], baseline="base", n_permutations=2000,
                    gate=["P.5:0.0"])
    (check,) = alone["gate"]["checks"]
    assert check["p_adjusted"] == check["p_value"] < 0.05
    assert check["verdict"] == "fail" and alone["gate"]["verdict"] == "fail"
