"""Issue #14, the engine's half: collection sizes that cannot be, micro-averaging with
complete_topics, nNRBP with -c, subtopic qrels under ordinary measures, empty inputs and the
bounds of evaluate()'s integer options. Each test checks the numbers or the exact error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import cranfield
from cranfield import EvaluationError, InputError
from cranfield.compare.comparison import compare
from cranfield.evaluate_checks import OPTION_BOUNDS
from cranfield.measures.webtrack import ndeval

WEB = Path(__file__).resolve().parents[1] / "data" / "web2012"
M = 2 ** 63 - 1

# topic 1: d1 relevant (rank 1), d2 judged non-relevant (rank 2), x unjudged (rank 3), d3
# relevant but not retrieved: 3 retrieved + 1 relevant not retrieved = 4 documents at least
QRELS = "1 0 d1 1\n1 0 d2 0\n1 0 d3 1\n2 0 e1 1\n"
RUN = "1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n1 Q0 x 3 1 r\n"


# ---- 3. a collection smaller than what a topic retrieved plus its unretrieved relevant -----

def test_collection_size_below_retrieved_plus_relevant_is_refused():
    # before: NPV = d / (c + d) with d = 3 - 1 - 2 - 1 = -1: NPV 0 here, 1.5 in the issue
    with pytest.raises(EvaluationError) as info:
        cranfield.evaluate(QRELS, RUN, ["NPV"], collection_size=3)
    assert str(info.value) == ("collection_size 3 is less than topic '1''s 3 retrieved + 1 "
                               "relevant not retrieved = 4 documents")
    with pytest.raises(EvaluationError, match=r"^NPV\(N=3\)'s N=3 is less than topic '1''s "):
        cranfield.evaluate(QRELS, RUN, ["NPV(N=3)"])
    with pytest.raises(EvaluationError, match="collection_size 3 is less than"):
        cranfield.evaluate(QRELS, RUN, ["utility"], collection_size=3)


def test_collection_size_of_exactly_retrieved_plus_relevant_and_unused_sizes_are_fine():
    ev = cranfield.evaluate(QRELS, RUN, ["NPV", "Fallout", "utility.0,0,0,1"],
                            collection_size=4)
    t = ev.per_topic["1"]  # a = 1, b = 2, c = 1, d = 0
    assert (t["NPV"], t["Fallout"], t["utility_0,0,0,1"]) == (0.0, 1.0, 0.0)
    # measures that do not read it, and utility without -N (trec_eval's N = 0), are as before
    assert cranfield.evaluate(QRELS, RUN, ["map"], collection_size=1).aggregate["map"] == 0.5
    assert cranfield.evaluate(QRELS, RUN, ["utility"]).per_topic["1"]["utility"] == -1.0
    # a topic missing from the run (complete_topics) retrieved nothing: 1 relevant fits in 1
    ev = cranfield.evaluate(QRELS, "2 Q0 e1 1 1 r\n", ["NPV"], collection_size=2,
                            complete_topics=True)
    assert ev.aggregate["NPV"] == pytest.approx((0 + 1) / 2)  # topic 1: d/(c+d) = 0/2


# ---- 4. micro averaging with complete_topics -------------------------------------------------

def test_micro_with_complete_topics_counts_nothing_retrieved_for_a_missing_topic():
    run = "1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n"  # topic 2 missing: a = 1, b = 1 in all
    for profile in ("trec_eval-9.0.8", "trec_eval-10"):
        ev = cranfield.evaluate(QRELS, run, ["set_P", "set_recall", "FDR", "Fallout(N=10)"],
                                complete_topics=True, aggregation="micro", profile=profile)
        # before: the one-document ranking trec_eval 10 evaluates a missing topic against
        # counted as retrieved: set_P 1/3, FDR 2/3
        assert ev.aggregate["set_P"] == pytest.approx(1 / 2), profile
        assert ev.aggregate["FDR"] == pytest.approx(1 / 2), profile
        assert ev.aggregate["set_recall"] == pytest.approx(1 / 3), profile  # c = 1 + 1
        # b = 1; d = (10 - 1 - 1 - 1) + (10 - 1): topic 2 retrieved nothing, was d = 8
        assert ev.aggregate["Fallout(N=10)"] == pytest.approx(1 / (1 + 7 + 9)), profile


# ---- 5. nNRBP with -c: a qrels topic missing from the run -----------------------------------

DIV_QRELS = "1 1 d1 1\n1 2 d2 1\n2 1 e1 1\n3 1 f1 0\n"
DIV_RUN = "1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n"


def test_nnrbp_with_complete_topics_matches_ndeval_c():
    """ndeval -c prints no row for a qrels topic missing from the run and divides by all
    qrels topics: the topic adds 0, even with S = 0 (topic 3), where a run topic is NaN."""
    nd = ndeval(DIV_QRELS, DIV_RUN, complete=True, traditional=True)
    assert nd.amean["nNRBP"] == pytest.approx(1 / 3)
    ev = cranfield.evaluate(DIV_QRELS, DIV_RUN, ["nNRBP", "NRBP"], complete_topics=True)
    assert ev.aggregate["nNRBP"] == pytest.approx(nd.amean["nNRBP"])  # was NaN (null)
    assert ev.aggregate["NRBP"] == pytest.approx(nd.amean["NRBP"])
    # a run topic with S = 0 stays NaN, as ndeval prints it
    ev = cranfield.evaluate(DIV_QRELS, DIV_RUN + "3 Q0 f1 1 1 r\n", ["nNRBP"])
    assert math.isnan(ev.per_topic["3"]["nNRBP"]) and math.isnan(ev.aggregate["nNRBP"])


def test_nnrbp_with_complete_topics_on_the_web_track_data_matches_ndeval():
    qrels = cranfield.read_qrels(WEB / "qrels-for-ndeval.txt", diversity=True)
    text = (WEB / "runs" / "rm" / "results-cata-filtered.txt").read_text()
    run = "".join(line + "\n" for line in text.splitlines() if not line.startswith("151 "))
    nd = ndeval((WEB / "qrels-for-ndeval.txt").read_bytes(), run, complete=True,
                traditional=True)
    ev = cranfield.evaluate(qrels, run, ["nNRBP", "alpha_nDCG@20"], complete_topics=True)
    assert ev.aggregate["nNRBP"] == pytest.approx(nd.amean["nNRBP"], abs=5e-7)
    assert ev.aggregate["alpha_nDCG@20"] == pytest.approx(nd.amean["alpha-nDCG@20"], abs=5e-7)


# ---- 6. subtopic qrels under ordinary measures -----------------------------------------------

SUB_QRELS = ("1 1 d1 1\n1 2 d1 2\n1 3 d1 1\n"   # d1: relevant to three subtopics, top grade 2
             "1 1 d2 0\n"                       # d2: judged non-relevant
             "1 1 d3 0\n1 2 d3 1\n")            # d3: relevant to one subtopic
SUB_RUN = "1 Q0 d2 1 3 r\n1 Q0 d1 2 2 r\n1 Q0 d3 3 1 r\n"


def test_ordinary_measures_see_each_subtopic_document_once_with_its_top_grade():
    qrels = cranfield.read_qrels(SUB_QRELS, diversity=True)
    ev = cranfield.evaluate(qrels, SUB_RUN, ["num_rel", "num_rel_ret", "P.5", "map",
                                             "ndcg_cut.3"])
    # before: d1 counted once per subtopic (num_rel 4, map 0.417)
    assert ev.aggregate["num_rel"] == 2 and ev.aggregate["num_rel_ret"] == 2
    assert ev.aggregate["P_5"] == pytest.approx(2 / 5)
    assert ev.aggregate["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    assert ev.aggregate["ndcg_cut_3"] == pytest.approx(dcg / (2 + 1 / math.log2(3)))
    level2 = cranfield.evaluate(qrels, SUB_RUN, ["num_rel", "map"], relevance_level=2)
    assert level2.aggregate["num_rel"] == 1 and level2.aggregate["map"] == pytest.approx(1 / 2)
    # the same object still gives the diversity measures every subtopic
    div = cranfield.evaluate(qrels, SUB_RUN, ["strec@2", "P_IA@3"])
    assert div.per_topic["1"]["strec@2"] == pytest.approx(3 / 3)
    assert div.per_topic["1"]["P_IA@3"] == pytest.approx(4 / (3 * 3))


def test_text_qrels_with_a_docid_twice_stay_an_error_for_ordinary_measures():
    with pytest.raises(InputError, match=r"docid 'd[13]' is judged twice for topic '1'"):
        cranfield.evaluate(SUB_QRELS, SUB_RUN, ["map"])


# ---- 8. empty inputs --------------------------------------------------------------------------

@pytest.mark.parametrize("qrels", ["", "# only a comment\n", "\n# a\n\n", {"1": {}}])
def test_empty_qrels_are_an_evaluation_error(qrels):
    # before: IndexError from deep in the ranking
    with pytest.raises(EvaluationError) as info:
        cranfield.evaluate(qrels, RUN, ["map"])
    assert str(info.value) == "the qrels hold no judgments (the file is empty or only comments)"
    with pytest.raises(EvaluationError, match="the qrels hold no judgments"):
        cranfield.evaluate(qrels, RUN, ["alpha_nDCG@5"])
    with pytest.raises(EvaluationError, match="the qrels hold no judgments"):
        compare(qrels, {"a": RUN, "b": RUN}, ["map"])


@pytest.mark.parametrize("run", ["", "# only a comment\n"])
def test_an_empty_run_is_an_evaluation_error(run):
    with pytest.raises(EvaluationError) as info:
        cranfield.evaluate(QRELS, run, ["map"], complete_topics=True)
    assert str(info.value) == "the run holds no results (the file is empty or only comments)"


def test_a_shard_without_judged_topics_evaluates_to_no_topics():
    """require_overlap=False (a shard of a run, against the qrels of its topics) may meet no
    judgment at all: no topic evaluated, not an IndexError."""
    run = cranfield.read_run("9 Q0 d1 1 3 r\n")
    for qrels, names in ((cranfield.read_qrels(QRELS), ["map", "P.5", "set_F"]),
                         (cranfield.read_qrels(DIV_QRELS, diversity=True), ["alpha_nDCG@5"])):
        ev = cranfield.evaluate(qrels.subset(run.topics), run, names, require_overlap=False)
        assert ev.topic_order == [] and ev.topics.run_only == ["9"]
        assert all(v == 0 for v in ev.aggregate.values())


# ---- 9. the bounds of the integer options ----------------------------------------------------

def test_option_bounds_are_int64_with_depth_and_collection_size_non_negative():
    assert OPTION_BOUNDS == {"relevance_level": (-2 ** 63, M), "depth": (0, M),
                             "collection_size": (0, M)}


@pytest.mark.parametrize("option, value", [
    ("depth", 2 ** 63), ("depth", -1), ("relevance_level", 10 ** 40),
    ("relevance_level", -2 ** 63 - 1), ("collection_size", 2 ** 63), ("collection_size", -1),
    ("collection_size", 1.5), ("depth", True), ("relevance_level", "1"),
])
def test_options_outside_their_bounds_are_refused(option, value):
    lo, hi = OPTION_BOUNDS[option]
    with pytest.raises(EvaluationError) as info:
        cranfield.evaluate(QRELS, RUN, ["map"], **{option: value})
    assert str(info.value) == f"{option} must be an integer from {lo} to {hi}, got {value!r}"


def test_extreme_option_values_work():
    names = ["map", "P.5", "utility", "NPV", "relstring", "ndcg_cut.10", "set_F", "bpref"]
    for profile in ("trec_eval-9.0.8", "trec_eval-10"):
        ev = cranfield.evaluate(QRELS, RUN, names, depth=M, collection_size=M,
                                relevance_level=M, complete_topics=True, profile=profile)
        assert ev.aggregate["map"] == 0.0 and ev.aggregate["P_5"] == 0.0  # nothing relevant
        ev = cranfield.evaluate(QRELS, RUN, names, depth=M, collection_size=M,
                                relevance_level=-2 ** 63, profile=profile)
        assert ev.per_topic["1"]["P_5"] == pytest.approx(2 / 5)  # every judged doc relevant
        assert ev.per_topic["1"]["NPV"] == pytest.approx((M - 4) / (M - 3))
        ev = cranfield.evaluate(QRELS, RUN, names, depth=0, collection_size=4,
                                profile=profile)
        assert ev.aggregate["map"] == 0.0
    ev = cranfield.evaluate(cranfield.read_qrels(DIV_QRELS, diversity=True), RUN,
                            ["alpha_nDCG@5"], depth=M, relevance_level=-2 ** 63)
    assert ev.per_topic["1"]["alpha_nDCG@5"] == pytest.approx(1.0)
