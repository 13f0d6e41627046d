"""Segments and weights (issue #28, cranfield/inputs/segments.py): topic metadata read by one reader
(errors naming the line or path), per-segment summaries and weighted means of an evaluation,
per-segment paired tests with their own correction family in a comparison.

Oracles: a hand computation on a four-topic example (numbers written below), evaluate() on
the segment's topics alone (the segment's summary is the summary of those topics, -c
included), scipy.stats.ttest_rel / wilcoxon and statsmodels' Holm on a large random example,
numpy.average for the weighted means."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from statsmodels.stats.multitest import multipletests

import cranfield
from cranfield.cli import main
from cranfield.compare.comparison import compare
from cranfield.compare.comparison_work import comparison_work
from cranfield.compare.gate import gate
from cranfield.compare.segment_comparison import segment_document
from cranfield.errors import EvaluationError, InputError
from cranfield.inputs.segments import TopicMetadata, read_topic_metadata
from cranfield.reports.result_document import evaluation_document, evaluation_from_document
from cranfield.reports.trec_format import document_evaluation, format_csv, format_trec

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"

# ---------------------------------------------------------------------------------------------
# The hand example: four topics, two relevant documents each (r1, r2), three non-relevant.
#   run A: t1 r1 n1 | t2 n1 r1 | t3 n1 n2 r1 | t4 r1 r2
#   run B: t1 r1 r2 | t2 r1 n1 | t3 n1 r1    | t4 n1 n2 r1
# P_2   A: .5 .5 0 1          B: 1 .5 .5 0
# RR    A: 1 .5 1/3 1         B: 1 1 .5 1/3
# num_ret A: 2 2 3 2
# metadata: t1 tail,de weight 2; t2 tail (weight 1); t3 head weight 0.5; t4 not named (1)
# ---------------------------------------------------------------------------------------------

QRELS = {t: {"r1": 1, "r2": 1, "n1": 0, "n2": 0, "n3": 0} for t in ("t1", "t2", "t3", "t4")}


def ranking(*docs: str) -> dict[str, float]:
    return {d: float(len(docs) - i) for i, d in enumerate(docs)}


RUN_A = {"t1": ranking("r1", "n1"), "t2": ranking("n1", "r1"),
         "t3": ranking("n1", "n2", "r1"), "t4": ranking("r1", "r2")}
RUN_B = {"t1": ranking("r1", "r2"), "t2": ranking("r1", "n1"), "t3": ranking("n1", "r1"),
         "t4": ranking("n1", "n2", "r1")}
META = {"t1": {"segments": ["tail", "de"], "weight": 2}, "t2": {"segments": ["tail"]},
        "t3": {"segments": ["head"], "weight": 0.5}}
META_TEXT = "# topic segments weight\nt1\ttail,de 2\nt2 tail\n\nt3 head 0.5\n"
MEASURES = ["P.2", "recip_rank", "num_ret", "num_q"]


def test_hand_example_segments_and_weighted():
    ev = cranfield.evaluate(QRELS, RUN_A, MEASURES, topic_metadata=META)
    assert list(ev.segments) == ["de", "head", "tail"]  # byte order
    assert ev.segments["tail"] == {"topics": 2, "aggregate": {
        "P_2": 0.5, "recip_rank": 0.75, "num_ret": 4, "num_q": 2}}
    assert ev.segments["de"] == {"topics": 1, "aggregate": {
        "P_2": 0.5, "recip_rank": 1.0, "num_ret": 2, "num_q": 1}}
    head = ev.segments["head"]["aggregate"]
    assert (head["P_2"], head["num_ret"]) == (0.0, 3)
    assert head["recip_rank"] == pytest.approx(1 / 3)
    # weights 2, 1, 0.5, 1 (t4 not named): sum 4.5
    assert ev.weighted["P_2"] == pytest.approx((2 * .5 + .5 + 0 + 1) / 4.5)       # 0.5556
    assert ev.weighted["recip_rank"] == pytest.approx((2 + .5 + .5 / 3 + 1) / 4.5)  # 0.8148
    assert ev.weighted["num_ret"] == 2 * 2 + 2 + .5 * 3 + 2 == 9.5  # a weighted count
    assert ev.weighted["num_q"] == 4.5                               # the weights' sum
    assert ev.options["topic_metadata"]["topics"] == 3
    assert ev.options["topic_metadata"]["segments"] == 3


def test_hand_example_text_lines():
    ev = cranfield.evaluate(QRELS, RUN_A, ["P.2", "num_ret"], topic_metadata=META)
    plain = cranfield.evaluate(QRELS, RUN_A, ["P.2", "num_ret"])
    text = format_trec(ev)
    assert text.startswith(format_trec(plain))  # the trec_eval block unchanged
    assert text[len(format_trec(plain)):] == (
        "num_ret               \tsegment=de\t2\n"
        "P_2                   \tsegment=de\t0.5000\n"
        "num_ret               \tsegment=head\t3\n"
        "P_2                   \tsegment=head\t0.0000\n"
        "num_ret               \tsegment=tail\t4\n"
        "P_2                   \tsegment=tail\t0.5000\n"
        "num_ret               \tweighted\t9.5000\n"
        "P_2                   \tweighted\t0.5556\n")
    assert format_trec(plain) == format_trec(cranfield.evaluate(QRELS, RUN_A, ["P.2",
                                                                                 "num_ret"]))
    assert "segment=" not in format_trec(ev, summary=False)  # -n: no summary of any kind
    csv = format_csv(ev, per_topic=False)
    assert csv.splitlines()[-1] == "weighted,9.5,0.5555555555555556"
    assert "segment=tail,4,0.5" in csv.splitlines()


def test_hand_example_comparison_per_segment():
    doc = compare(QRELS, {"A": RUN_A, "B": RUN_B}, ["P.2", "recip_rank"], baseline="A",
                  tests=("t", "randomization"), topic_metadata=META_TEXT)
    tail = doc["segments"]["tail"]
    assert tail["topics"] == ["t1", "t2"]
    assert tail["family"] == {"segment": "tail", "tests": 2, "correction": "holm"}
    assert tail["correction"] == {"method": "holm", "family_size": {"t": 2, "randomization": 2}}
    p2 = next(p for p in tail["pairs"] if p["measure"] == "P_2")
    rr = next(p for p in tail["pairs"] if p["measure"] == "recip_rank")
    # B − A on tail: P_2 (.5, 0), RR (0, .5): mean .25, sd .35355, se .25, t = 1 on 1 df;
    # P(|T_1| > 1) = 1/2 (the Cauchy distribution); Holm over two p = .5: both 1
    for pair in (p2, rr):
        assert pair["mean_diff"] == pytest.approx(0.25)
        assert pair["t_test"]["statistic"] == pytest.approx(1.0)
        assert pair["t_test"]["df"] == 1
        assert pair["t_test"]["p_value"] == pytest.approx(0.5)
        assert pair["t_test"]["p_adjusted"] == pytest.approx(1.0)
        # exact sign flips of one non-zero difference: every flip is as extreme, p = 1
        assert pair["randomization"]["exact"] and pair["randomization"]["p_value"] == 1.0
        assert (pair["wins"], pair["ties"], pair["losses"]) == (1, 1, 0)
    assert tail["summary"]["P_2"] == {
        "A": {"mean": 0.5, "ci_low": 0.5, "ci_high": 0.5},
        # B (1, .5): sd .35355, se .25, t(0.975, 1 df) = 12.7062
        "B": {"mean": 0.75, "ci_low": pytest.approx(0.75 - 12.706204736 * 0.25),
              "ci_high": pytest.approx(0.75 + 12.706204736 * 0.25)}}
    # one topic: no t-test (no variance), the exact randomization p of one flip is 1
    de = doc["segments"]["de"]
    assert de["topics"] == ["t1"] and de["correction"]["family_size"]["t"] == 0
    # overall P_2 B − A: (.5, 0, .5, −1): mean 0, t = 0, p = 1
    whole = next(p for p in doc["pairs"] if p["measure"] == "P_2")
    assert whole["mean_diff"] == 0 and whole["t_test"]["p_value"] == pytest.approx(1.0)
    # weighted means of each run over the common topics (t4 weighs 1)
    assert doc["weighted"]["P_2"]["A"] == pytest.approx(2.5 / 4.5)
    assert doc["weighted"]["P_2"]["B"] == pytest.approx((2 + .5 + .25 + 0) / 4.5)


def test_segment_document_is_what_a_gate_judges():
    doc = compare(QRELS, {"A": RUN_A, "B": RUN_B}, ["P.2"], baseline="A", tests=("t",),
                  topic_metadata=META)
    view = segment_document(doc, "tail")
    assert view["topics"] == ["t1", "t2"] and view["segment"] == "tail"
    assert view["pairs"] is doc["segments"]["tail"]["pairs"]
    result = gate(view, measure="P.2", max_drop=0.0, test="t")
    check = result["checks"][0]
    assert check["mean_baseline"] == 0.5 and check["mean_candidate"] == 0.75
    assert result["verdict"] == "pass"  # B rises on tail
    # over the whole P_2 does not move; on head B rises by .5, on no segment does it drop
    with pytest.raises(KeyError):
        segment_document(doc, "nope")


# ---------------------------------------------------------------------------------------------
# A segment's summary is the summary of its topics alone: evaluate() on the subset
# ---------------------------------------------------------------------------------------------

def subset_text(path: Path, topics: set[str]) -> str:
    return "".join(line for line in path.read_text().splitlines(keepends=True)
                   if line.split() and line.split()[0] in topics)


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
@pytest.mark.parametrize("complete", [False, True], ids=["", "-c"])
@pytest.mark.parametrize("measures", [["all_trec"], ["official"], ["gm_map", "num_rel"]])
def test_segment_summary_equals_evaluating_its_topics(profile, complete, measures):
    # the run lacks 303, which -c evaluates (scored as trec_eval -c scores it)
    qrels = (TE / "qrels.test").read_text()
    run = "".join(line for line in (TE / "results.test").read_text().splitlines(True)
                  if line.split()[0] != "303")
    md = {"301": {"segments": ["a", "b"]}, "302": {"segments": ["a"]},
          "303": {"segments": ["b", "c"], "weight": 3}}
    ev = cranfield.evaluate(qrels, run, measures, profile=profile, complete_topics=complete,
                            topic_metadata=md)
    for label, topics in (("a", {"301", "302"}), ("b", {"301", "303"}), ("c", {"303"})):
        keep = [line for line in run.splitlines(True) if line.split()[0] in topics]
        if not keep and not complete:  # no topic of the segment was evaluated
            assert ev.segments[label] == {"topics": 0, "aggregate": {}}
            continue
        alone = cranfield.evaluate(
            "".join(line for line in qrels.splitlines(True) if line.split()[0] in topics),
            "".join(keep), measures, profile=profile, complete_topics=complete,
            require_overlap=bool(keep))
        expected = {k: v for k, v in alone.aggregate.items() if k != "runid"}
        got = ev.segments[label]
        assert got["topics"] == (len(topics) if complete else len({x.split()[0] for x in keep}))
        assert got["aggregate"] == pytest.approx(expected, nan_ok=True, rel=1e-15)


def test_segment_with_zscores_is_the_summary_of_its_z_scores():
    z = TE / "zscores_file"
    if not z.exists():
        z = TE / "v9.0.8" / "zscores_file"
    md = {"301": {"segments": ["x"]}, "302": {"segments": ["x"]}}
    ev = cranfield.evaluate(TE / "qrels.test", TE / "results.test", ["map", "num_ret"],
                            zscores=z, topic_metadata=md)
    per = ev.per_topic
    assert ev.segments["x"]["aggregate"]["map"] == pytest.approx(
        (per["301"]["map"] + per["302"]["map"]) / 2)
    assert ev.segments["x"]["aggregate"]["num_ret"] == pytest.approx(
        per["301"]["num_ret"] + per["302"]["num_ret"])


# ---------------------------------------------------------------------------------------------
# Oracles on a large random example: numpy.average, scipy, statsmodels
# ---------------------------------------------------------------------------------------------

def random_inputs(seed: int, n_topics: int = 240, n_docs: int = 30, runs: int = 3):
    rng = np.random.default_rng(seed)
    topics = [f"q{i:03d}" for i in range(n_topics)]
    qrels = {t: {f"d{j}": int(rng.integers(0, 3)) for j in range(n_docs)} for t in topics}
    out = {}
    for r in range(runs):
        skill = 0.3 * r
        out[f"r{r}"] = {t: {f"d{j}": float(rng.normal() + skill * qrels[t][f"d{j}"])
                            for j in range(n_docs)} for t in topics}
    labels = ["tail", "head", "lang=de", "nav"]
    md = {t: {"segments": [lb for lb in labels if rng.random() < 0.35],
              "weight": float(rng.choice([0, 0.5, 1, 2.5, 10]))}
          for t in topics if rng.random() < 0.9}  # about a tenth not named: weight 1
    return qrels, out, md


@pytest.mark.parametrize("seed", [0, 1])
def test_weighted_mean_equals_numpy_average(seed):
    qrels, runs, md = random_inputs(seed)
    ev = cranfield.evaluate(qrels, runs["r1"], ["map", "ndcg_cut.10", "P.5", "num_rel_ret",
                                                 "gm_map"], topic_metadata=md)
    topics = ev.topics.evaluated
    w = np.array([md[t]["weight"] if t in md else 1.0 for t in topics])
    for key in ("map", "ndcg_cut_10", "P_5"):
        values = np.array([ev.per_topic[t][key] for t in topics])
        assert ev.weighted[key] == np.average(values, weights=w)
    rel_ret = np.array([ev.per_topic[t]["num_rel_ret"] for t in topics], float)
    assert ev.weighted["num_rel_ret"] == pytest.approx(float((w * rel_ret).sum()))
    ap = np.array([ev.per_topic[t]["map"] for t in topics])
    assert ev.weighted["gm_map"] == pytest.approx(
        math.exp(np.average(np.log(np.maximum(ap, 1e-5)), weights=w)))
    # and each segment's mean is numpy's mean over its topics
    for label, seg in ev.segments.items():
        members = [t for t in topics if label in md.get(t, {}).get("segments", [])]
        assert seg["topics"] == len(members)
        assert seg["aggregate"]["map"] == pytest.approx(
            np.mean([ev.per_topic[t]["map"] for t in members]), rel=1e-12)


def test_weights_summing_to_zero_give_nan():
    md = {t: {"weight": 0} for t in QRELS}
    ev = cranfield.evaluate(QRELS, RUN_A, ["P.2", "num_ret", "num_q"], topic_metadata=md)
    assert math.isnan(ev.weighted["P_2"])
    assert ev.weighted["num_ret"] == 0 and ev.weighted["num_q"] == 0
    assert "P_2                   \tweighted\t  -nan\n" in format_trec(ev)
    doc = evaluation_document(ev, {"per_topic": False}, "", "", None)
    assert doc["weighted"]["P_2"] is None


@pytest.mark.parametrize("correction", ["holm", "bonferroni"])
def test_segment_tests_equal_scipy_and_statsmodels(correction):
    qrels, runs, md = random_inputs(7)
    doc = compare(qrels, runs, ["map", "P.10"], baseline="r0", tests=("t",), wilcoxon=True,
                  correction=correction, per_topic=True, topic_metadata=md)
    assert set(doc["segments"]) == {"tail", "head", "lang=de", "nav"}
    for label, seg in doc["segments"].items():
        topics = seg["topics"]
        assert topics == [t for t in doc["topics"] if label in md.get(t, {}).get("segments", [])]
        assert len(topics) > 30
        assert seg["family"] == {"segment": label, "tests": 4, "correction": correction}
        raw_t, raw_w = [], []
        for pair in seg["pairs"]:
            a = np.array([doc["per_topic"][pair["a"]][t][pair["measure"]] for t in topics])
            b = np.array([doc["per_topic"][pair["b"]][t][pair["measure"]] for t in topics])
            ref = scipy.stats.ttest_rel(b, a)
            assert pair["t_test"]["statistic"] == pytest.approx(float(ref.statistic), rel=1e-9)
            assert pair["t_test"]["p_value"] == pytest.approx(float(ref.pvalue), rel=1e-9)
            assert pair["mean_diff"] == pytest.approx(float(np.mean(b - a)), rel=1e-12)
            w = pair["wilcoxon"]
            method = "exact" if w["method"] == "exact" else "approx"
            # Cranfield ties differences equal up to float noise (0.4 − 0.3, 0.3 − 0.2);
            # scipy only exactly equal ones: rounded to 9 places, they are
            wref = scipy.stats.wilcoxon(np.round(b - a, 9), zero_method="wilcox",
                                        method=method, correction=False)
            assert w["p_value"] == pytest.approx(float(wref.pvalue), rel=1e-9)
            assert w["statistic"] == pytest.approx(float(wref.statistic))
            raw_t.append(pair["t_test"]["p_value"])
            raw_w.append(w["p_value"])
            for run in (pair["a"], pair["b"]):
                values = a if run == pair["a"] else b
                assert seg["summary"][pair["measure"]][run]["mean"] == pytest.approx(
                    float(values.mean()), rel=1e-12)
        # the correction is over this segment's four comparisons, not the whole table
        for raw, key in ((raw_t, "t_test"), (raw_w, "wilcoxon")):
            expected = multipletests(raw, method=correction)[1]
            assert [p[key]["p_adjusted"] for p in seg["pairs"]] == pytest.approx(
                expected.tolist(), rel=1e-12)
    for key in ("map", "P_10"):
        for run in runs:
            values = np.array([doc["per_topic"][run][t][key] for t in doc["topics"]])
            w = np.array([md[t]["weight"] if t in md else 1.0 for t in doc["topics"]])
            assert doc["weighted"][key][run] == pytest.approx(np.average(values, weights=w),
                                                              rel=1e-12)


def test_work_budget_counts_the_segments():
    base = comparison_work(2, 2, 240, ("t",), 10000, 10000)
    more = comparison_work(2, 2, 240, ("t",), 10000, 10000, [80, 0, 100])
    parts = [comparison_work(2, 2, n, ("t",), 10000, 10000) for n in (80, 100)]
    assert more.total == base.total + sum(p.total for p in parts)
    assert "2 segment(s) compared as well" in more.describe()


# ---------------------------------------------------------------------------------------------
# The reader: one grammar, errors naming the line or the path
# ---------------------------------------------------------------------------------------------

def test_text_and_mapping_are_one_metadata():
    from_text = read_topic_metadata(META_TEXT)
    from_map = read_topic_metadata(META)
    assert from_text == from_map and from_text.sha256 == from_map.sha256
    assert read_topic_metadata(from_text.as_text()) == from_text
    assert read_topic_metadata(from_text.as_json()) == from_text
    assert from_text.weight("t4") == 1.0 and from_text.labels["t1"] == ("tail", "de")
    assert read_topic_metadata(META_TEXT.encode()) == from_text
    assert isinstance(read_topic_metadata(from_text), TopicMetadata)


def test_path_reads_the_file(tmp_path):
    p = tmp_path / "meta.txt"
    p.write_text(META_TEXT)
    assert read_topic_metadata(p) == read_topic_metadata(META)
    assert read_topic_metadata(str(p)).source == str(p)


BAD_TEXT = [
    ("t1 tail 2 extra\n", 1, None, "has 4 fields"),
    ("t1\n", 1, None, "has 1 fields"),
    ("t1 tail\nt1 head\n", 2, "topic", "given twice (lines 1 and 2)"),
    ("t1 tail,,de\n", 1, "segments", "may not be empty"),
    ("t1 tail,tail\n", 1, "segments", "given twice"),
    ("t1 - -1\n", 1, "weight", "must be >= 0"),
    ("t1 - abc\n", 1, "weight", "is not a number"),
    ("t1 - inf\n", 1, "weight", "not a finite number"),
    # review R2 F1: weights whose sums overflow (1e308 + 1e308) gave a weighted map of 0.0
    ("t1 - 1e308\n", 1, "weight", "at most 1e+100 (so that weighted sums stay finite)"),
    ("t1 - 1e101\n", 1, "weight", "got 1e101"),
    ("# only a comment\n\n", None, None, "holds no topics"),
    ("t1 tail\nt2 a\x0bb 1\n", 2, None, "not allowed"),
    # review R2 F3: a byte-order mark, refused as qrels and runs refuse it (it was read into
    # the first topic's id, "\ufeff1", its labels and weight silently lost)
    ("\ufeff1 tail 2\n", 1, None, "byte-order mark (EF BB BF)"),
    # review R2 F13, F12: a label breaking a line of the text or CSV output, one too long
    ("t1 a\u2028b\n", 1, "segments", "U+2028 (LINE SEPARATOR)"),
    ("t1 a\x85b\n", 1, "segments", "U+0085"),
    ("t1 a\u00a0b\n", 1, "segments", "U+00A0 (NO-BREAK SPACE)"),
    ("t1 " + "x" * 201 + "\n", 1, "segments", "of 201 characters; at most 200"),
]


@pytest.mark.parametrize("text, line, field, reason", BAD_TEXT)
def test_bad_text_names_the_line(text, line, field, reason):
    with pytest.raises(InputError) as err:
        read_topic_metadata(text + ("" if "\n" in text else "\n"), name="meta.txt")
    exc = err.value
    assert reason in exc.reason and exc.line == line and exc.source == "meta.txt"
    if field is not None:
        assert exc.field == field


BAD_MAPPING = [
    ({"t1": ["tail"]}, "topic_metadata.t1", "must be an object"),
    ({"t1": {"segments": "tail"}}, "topic_metadata.t1.segments", "must be a list"),
    ({"t1": {"segments": ["a b"]}}, "topic_metadata.t1.segments", "may not contain a space"),
    ({"t1": {"segments": ["a,b"]}}, "topic_metadata.t1.segments", "contains a comma"),
    ({"t1": {"segments": ["-"]}}, "topic_metadata.t1.segments", "'-' is not a segment label"),
    ({"t1": {"segments": [3]}}, "topic_metadata.t1.segments", "must be a string"),
    ({"t1": {"weight": -1}}, "topic_metadata.t1.weight", "must be >= 0"),
    ({"t1": {"weight": True}}, "topic_metadata.t1.weight", "must be a number"),
    ({"t1": {"weight": float("nan")}}, "topic_metadata.t1.weight", "finite"),
    ({"t1": {"weight": "2"}}, "topic_metadata.t1.weight", "must be a number"),
    ({"t1": {"weight": 1e308}}, "topic_metadata.t1.weight", "at most 1e+100"),
    # review R2 F11: text reads a '#' line as a comment, so as_text() lost the topic
    ({"#1": {"segments": ["a"]}}, "topic_metadata.#1", "starts with '#'"),
    ({"t1": {"segments": ["a\u200eb"]}}, "topic_metadata.t1.segments", "U+200E"),
    ({"t1": {"segments": ["a\ufeffb"]}}, "topic_metadata.t1.segments", "U+FEFF"),
    ({"t1": {"segments": ["\u2029"]}}, "topic_metadata.t1.segments", "U+2029"),
    ({"t1": {"segments": ["x" * 201]}}, "topic_metadata.t1.segments", "at most 200"),
    ({"t1": {"weight": np.bool_(True)}}, "topic_metadata.t1.weight", "must be a number"),
    ({"t1": {"labels": ["x"]}}, "topic_metadata.t1.labels", "unknown member 'labels'"),
    ({"t 1": {}}, "topic_metadata.t 1", "topic"),
    ({}, "topic_metadata", "holds no topics"),
]


@pytest.mark.parametrize("mapping, path, reason", BAD_MAPPING)
def test_bad_mapping_names_the_path(mapping, path, reason):
    with pytest.raises(InputError) as err:
        read_topic_metadata(mapping)
    assert err.value.field == path and reason in err.value.reason


def test_max_topics_before_reading():
    with pytest.raises(InputError) as err:
        read_topic_metadata({f"t{i}": {} for i in range(5)}, max_topics=4)
    assert err.value.code == "too-large"
    with pytest.raises(InputError):
        read_topic_metadata("t1 a\nt2 b\nt3 c\n", max_topics=2)


def test_refused_combinations():
    with pytest.raises(EvaluationError) as err:
        cranfield.evaluate(QRELS, RUN_A, ["P.2"], aggregation="micro", topic_metadata=META)
    assert err.value.field == "options.topic_metadata"
    with pytest.raises(EvaluationError):
        cranfield.evaluate(TE / "qrels.test", TE / "results.test", ["qrels_jg"],
                           qrels_format="qrels_jg", topic_metadata=META)


# ---------------------------------------------------------------------------------------------
# Documents, the CLI
# ---------------------------------------------------------------------------------------------

def test_document_round_trip_prints_the_same_text():
    ev = cranfield.evaluate(QRELS, RUN_A, MEASURES, topic_metadata={
        **META, "t9": {"segments": ["empty"]}})
    doc = evaluation_document(ev, {"per_topic": True}, "", "", None)
    assert doc["segments"]["empty"] == {"topics": 0, "aggregate": {}}
    assert doc["weighted"]["num_q"] == 4.5
    assert format_trec(document_evaluation(doc)) == format_trec(ev)
    assert evaluation_from_document(doc).segments == ev.segments
    codes = [w["code"] for w in doc["warnings"]]
    assert "topics-without-metadata" in codes and "metadata-topics-not-evaluated" in codes
    plain = evaluation_document(cranfield.evaluate(QRELS, RUN_A, MEASURES),
                                {"per_topic": True}, "", "", None)
    assert "segments" not in plain and "weighted" not in plain
    assert "topic_metadata" not in plain["provenance"]["options"]


def test_cli_prints_what_the_library_does(capsys, tmp_path):
    meta = tmp_path / "meta.txt"
    meta.write_text("301 tail,de 2\n302 tail\n303 - 0.5\n")
    argv = ["eval", "-m", "map", "-m", "num_ret", "--topic-metadata", str(meta),
            str(TE / "qrels.test"), str(TE / "results.test")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    ev = cranfield.evaluate(TE / "qrels.test", TE / "results.test", ["map", "num_ret"],
                            topic_metadata=meta)
    assert out == format_trec(ev)
    assert "map                   \tsegment=tail\t0.2249\n" in out
    assert "map                   \tweighted\t0.1501\n" in out
    meta.write_text("301 tail,de 2\n302 tail x y\n")
    assert main(argv) == 2
    assert f"{meta}:2: has 4 fields" in capsys.readouterr().err


def test_cli_compare_prints_segments(capsys, tmp_path):
    meta = tmp_path / "meta.txt"
    meta.write_text("301 tail\n302 tail\n303 head\n")
    assert main(["compare", "-m", "map", "--topic-metadata", str(meta), "--tests", "t",
                 str(TE / "qrels.test"), str(TE / "results.test"),
                 str(TE / "results.test")]) == 0
    out = capsys.readouterr().out
    assert "segment tail: 2 topics; p-values adjusted by holm over this segment's family " \
           "(1 t comparisons)" in out
    assert "weighted means" in out


@pytest.mark.parametrize("complete", [False, True])
def test_shards_combine_to_the_whole_segments(complete):
    """A queued run evaluated in topic shards (backend/tasks.py: each shard against the qrels
    of its topics, then shards.combine) gives the segments and weights of the whole."""
    from cranfield.shards import combine, evaluate_missing_topics

    qrels = cranfield.read_qrels(TE / "qrels.test")
    lines = (TE / "results.test").read_text().splitlines(True)
    run_lines = [x for x in lines if x.split()[0] != "303"]  # -c scores 303 missing
    md = {"301": {"segments": ["a"], "weight": 2}, "302": {"segments": ["a", "b"]},
          "303": {"segments": ["b"], "weight": 4}}
    measures = ["map", "num_ret", "num_rel", "gm_map", "P.5"]
    whole = cranfield.evaluate(qrels, "".join(run_lines), measures, complete_topics=complete,
                               topic_metadata=md)
    parts = []
    for topic in ("301", "302"):
        run = cranfield.read_run("".join(x for x in run_lines if x.split()[0] == topic))
        parts.append(cranfield.evaluate(qrels.subset(run.topics), run, measures,
                                        require_overlap=False, complete_topics=complete,
                                        topic_metadata=md))
    if complete:
        parts.append(evaluate_missing_topics(qrels, ["303"], measures, topic_metadata=md))
    ev = combine(parts, qrels, ["301", "302"], whole.runid)
    assert ev.segments == whole.segments
    assert ev.weighted == whole.weighted
    assert ev.segments["b"]["topics"] == (2 if complete else 1)


def test_report_pages_show_segments_and_weighted():
    from cranfield.reports.html_report import render_comparison, render_evaluation

    ev = cranfield.evaluate(QRELS, RUN_A, ["P.2"], topic_metadata=META)
    page = render_evaluation(evaluation_document(ev, {"per_topic": False}, "0" * 64, "0" * 64,
                                                 None))
    assert "<h2>Segments</h2>" in page
    assert '<td>tail</td><td class="n">2</td><td class="n">0.5000</td>' in page
    assert '<td><em>weighted</em></td><td></td><td class="n">0.5556</td>' in page
    doc = compare(QRELS, {"A": RUN_A, "B": RUN_B}, ["P.2"], baseline="A", tests=("t",),
                  topic_metadata=META)
    page = render_comparison(doc)
    assert "<h2>Segment tail</h2><p>2 common topic(s); p-values adjusted by holm over this " \
           "segment's 1 comparison(s).</p>" in page
    assert "<h2>Weighted means</h2>" in page
    plain = render_comparison(compare(QRELS, {"A": RUN_A, "B": RUN_B}, ["P.2"], baseline="A",
                                      tests=("t",)))
    assert "Segment" not in plain and "Weighted means" not in plain


# ---------------------------------------------------------------------------------------------
# Budgets before work (review R2 F2, F6): distinct labels bounded, the aggregates charged,
# the masks built in one pass and only once the work is within its budget
# ---------------------------------------------------------------------------------------------

def _many_labels(n_topics: int, per_topic: int) -> dict:
    return {f"t{i}": {"segments": [f"L{i}_{j}" for j in range(per_topic)]}
            for i in range(n_topics)}


@pytest.mark.parametrize("source, kwargs, where", [
    # distinct labels over max_segments: the mapping names the topic, the text the line
    (_many_labels(3, 2), {"max_segments": 5}, {"field": "topic_metadata.t2.segments"}),
    ("t0 a,b\nt1 c,d\nt2 e,f\n", {"max_segments": 5}, {"line": 3, "field": "segments"}),
    # one topic's labels over it, before the next is read
    (_many_labels(1, 6), {"max_segments": 5}, {"field": "topic_metadata.t0.segments"}),
    ("t0 " + ",".join(f"x{j}" for j in range(6)) + "\n", {"max_segments": 5}, {"line": 1}),
])
def test_more_labels_than_max_segments_are_refused_while_reading(source, kwargs, where):
    with pytest.raises(InputError) as err:
        read_topic_metadata(source, **kwargs)
    assert err.value.code == "too-large"
    assert "more than 5 distinct segment labels" in err.value.reason
    for key, value in where.items():
        assert getattr(err.value, key) == value
    assert len(read_topic_metadata(source).segment_names()) == 6  # no bound: read


def test_segment_rows_equal_members():
    md = read_topic_metadata({**META, "t9": {"segments": ["none"]}})
    topics = ["t4", "t3", "t2", "t1", "t0"]
    rows = md.segment_rows(topics)
    assert list(rows) == md.segment_names() == ["de", "head", "none", "tail"]
    for label, r in rows.items():
        assert r.tolist() == np.flatnonzero(md.members(topics, label)).tolist()
    assert rows["tail"].tolist() == [2, 3] and rows["none"].size == 0


@pytest.mark.parametrize("metadata, measures, budget, refused", [
    # the reviewer's shape: 10 topics x 5,000 labels each (50,000 distinct)
    (_many_labels(10, 5000), ["map"], {"max_segments": 1000}, "MAX_SEGMENTS"),
    (_many_labels(10, 100), ["map"], {"max_segments": 1000}, None),
    # values: instances x (topic-label pairs + labels): 1 x (1,000 + 1,000) = 2,000
    (_many_labels(10, 100), ["map"], {"max_values": 1999}, "MAX_EVALUATION_VALUES"),
    (_many_labels(10, 100), ["map"], {"max_values": 2000}, None),
    (_many_labels(10, 100), ["map", "P.5"], {"max_values": 2000}, "MAX_EVALUATION_VALUES"),
])
def test_segment_budget_is_checked_before_the_run_is_read(metadata, measures, budget, refused,
                                                          tmp_path):
    from cranfield.measures.budget import BudgetError, evaluation_budget

    missing = tmp_path / "no-such-run"  # read only if the budget lets the evaluation on
    qrels = {t: {"d": 1} for t in metadata}
    with evaluation_budget(**budget):
        if refused is None:
            with pytest.raises(InputError):  # past the budget: the run is read
                cranfield.evaluate(qrels, missing, measures, topic_metadata=metadata)
            return
        with pytest.raises(BudgetError) as err:
            cranfield.evaluate(qrels, missing, measures, topic_metadata=metadata)
    assert err.value.budget == refused and err.value.field == "options.topic_metadata"


def test_comparison_refused_over_budget_before_the_masks(monkeypatch):
    """10 topics x 1,000 labels: the work budget refuses it from the segments' sizes (one
    pass), before a mask is made; its message is bounded (F6)."""
    import cranfield.compare.segment_comparison as segment_comparison
    from cranfield.compare.comparison import compare_evaluations
    from cranfield.compare.comparison_work import WorkBudgetError

    metadata = _many_labels(10, 1000)
    qrels = {t: {"a": 1, "b": 0} for t in metadata}
    evs = {name: cranfield.evaluate(qrels, {t: {"a": s, "b": 1 - s} for t in metadata},
                                    ["map"]) for name, s in (("x", 1.0), ("y", 0.0))}

    def no_masks(*args):
        raise AssertionError("masks built before the work budget was checked")

    monkeypatch.setattr(segment_comparison, "segment_masks", no_masks)
    with pytest.raises(WorkBudgetError) as err:
        compare_evaluations(evs, ["map"], topic_metadata=metadata, max_work=10**9)
    message = str(err.value)
    assert len(message) < 1500, len(message)
    tests = ("t", "randomization", "bootstrap")  # the default tests
    per = comparison_work(1, 1, 1, tests, 10000, 10000).total
    assert f"10,000 segment(s) compared as well (10,000 of 1 topic(s): {per:,} each)" in message
    assert err.value.work.total == (comparison_work(1, 1, 10, tests, 10000, 10000).total
                                    + 10_000 * per)


def test_work_description_names_the_largest_sizes():
    work = comparison_work(1, 1, 100, ("t",), 10000, 10000, [1, 1, 1, 1, 1, 1, 5, 4, 3, 2, 0])
    assert ("; and 10 segment(s) compared as well (6 of 1 topic(s): 40,000 each, 1 of 5 "
            "topic(s): 200,000 each, 1 of 4 topic(s): 160,000 each, and 2 other size(s)): "
            "4,800,000 in all") in work.describe()


@pytest.mark.parametrize("weight, read", [
    (np.int64(2), 2.0), (np.float32(0.5), 0.5), (np.float64(3), 3.0),  # F10: numpy numbers
    (1e100, 1e100), (-0.0, 0.0), (0, 0.0),  # WEIGHT_LIMIT itself; F4: -0 is 0
])
def test_weights_read_as_numbers(weight, read):
    md = read_topic_metadata({"t1": {"segments": ["a"], "weight": weight}})
    assert md.weights["t1"] == read and repr(md.weights["t1"]) == repr(read)
    assert md.sha256 == read_topic_metadata(f"t1 a {read!r}\n").sha256


def test_minus_zero_is_one_digest():
    """Review R2 F4: "1 a -0" and "1 a 0" were two digests (two stored versions)."""
    zero, minus = read_topic_metadata("1 a 0\n"), read_topic_metadata("1 a -0\n")
    assert minus == zero and minus.sha256 == zero.sha256
    assert minus.as_text() == "1\ta\t0.0\n"


def test_largest_weights_give_the_unweighted_mean():
    """Review R2 F1: weights at the limit keep their sums finite: two topics weighing 1e100
    each give their plain mean (two weighing 1e308 were accepted and gave 0.0)."""
    ev = cranfield.evaluate(QRELS, RUN_A, MEASURES, topic_metadata={
        "t1": {"weight": 1e100}, "t2": {"weight": 1e100}, "t3": {"weight": 0}, "t4": {"weight": 0}})
    assert ev.weighted["P_2"] == pytest.approx(0.5) and ev.weighted["num_q"] == 2e100
    assert ev.weighted["recip_rank"] == pytest.approx(0.75)


@pytest.mark.parametrize("text, refused_at", [
    ("".join(f"t{i} a\n" for i in range(4)), None),  # exactly max_topics, newline-ended
    ("".join(f"t{i} a\n" for i in range(4)).rstrip("\n"), None),
    ("# c\n" * 10 + "\n\n" + "".join(f"t{i} a\n" for i in range(4)), None),  # comments free
    ("".join(f"t{i} a\n" for i in range(5)), 5),
    ("# c\n" * 2 + "".join(f"t{i} a\n" for i in range(5)), 7),
])
def test_max_topics_counts_topics_not_lines(text, refused_at):
    """Review R2 F8: text was held to its newlines + 1, so exactly max_topics topics were
    refused as text (accepted as a mapping) and comment lines counted."""
    if refused_at is None:
        assert len(read_topic_metadata(text, max_topics=4).labels) == 4
        return
    with pytest.raises(InputError) as err:
        read_topic_metadata(text, max_topics=4)
    assert err.value.code == "too-large" and err.value.line == refused_at
    assert "more than 4 topics, over the limit of 4 topics" in err.value.reason


@pytest.mark.parametrize("label, ok", [
    ("x" * 200, True), ("x" * 201, False), ("lang=de", True), ("日本語", True), ("é", True),
    ("a\x85b", False), ("a\u2028b", False), ("a\u202eb", False), ("a\u3000b", False),
])
def test_one_label_rule_for_metadata_gates_and_the_cli(label, ok, tmp_path, capsys):
    """Review R2 F12, F13: the label rule (length, Unicode controls and spaces) is the
    engine's: the library's reader, a gate's @segment= and the CLI agree (the API's 200
    characters were the service's alone; C1 and U+2028 passed everywhere)."""
    from cranfield.compare.gate import parse_gate
    from cranfield.inputs.segments import label_problem

    assert (label_problem(label) is None) is ok
    if ok:
        assert read_topic_metadata({"t1": {"segments": [label]}}).labels["t1"] == (label,)
        assert read_topic_metadata(f"t1 {label}\n").labels["t1"] == (label,)
    else:
        for source in ({"t1": {"segments": [label]}}, f"t1 {label}\n"):
            with pytest.raises(InputError):
                read_topic_metadata(source)
        with pytest.raises(ValueError, match="segment label"):
            parse_gate(f"map:0.01@segment={label}")
        f = tmp_path / "meta.txt"
        f.write_text(f"301 {label}\n", encoding="utf-8")
        assert main(["eval", "-m", "map", "--topic-metadata", str(f), str(TE / "qrels.test"),
                     str(TE / "results.test")]) != 0


def test_one_topic_segment_has_no_bootstrap_p():
    """Review R2 F5: a segment of one common topic reported bootstrap p 1/(B+1), significant
    (a '*' in text), where the t test has no p (df 0). Now it has none either."""
    doc = compare(QRELS, {"A": RUN_A, "B": RUN_B}, ["recip_rank"], baseline="A",
                  topic_metadata={"t3": {"segments": ["one"]}})
    pair = doc["segments"]["one"]["pairs"][0]
    assert pair["mean_diff"] == pytest.approx(0.5 - 1 / 3)
    assert pair["t_test"]["p_value"] is None
    boot = pair["bootstrap"]
    assert (boot["p_value"], boot["p_adjusted"], boot["significant"]) == (None, None, False)
    assert boot["ci_low"] is None and boot["ci_high"] is None
    assert doc["segments"]["one"]["correction"]["family_size"]["bootstrap"] == 0
