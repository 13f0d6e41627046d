"""trec_eval's measures (``cranfield/measures/trec.py``) checked number by number, in process and
fast enough to run once per mutant (issue #16, ``make mutation``).

Two sources of truth, never the engine itself:

* trec_eval's own expected outputs in ``tests/data/trec_eval`` (NIST's test folder for 10.0
  and 9.0.8 and the project's edge cases; the command behind each is in MANIFEST.md). Each
  case is evaluated through the library (``cranfield.evaluate``) *inside its test* and every
  printed ``measure topic value`` line is compared with the engine's value printed the same
  way (``%.4f``, integers as integers). The inputs are read once per module; the evaluation is
  not cached, on purpose: mutmut credits a function to the test during which it ran, so an
  evaluation shared through a module fixture would be credited to the first test only and
  every other test would never run against a mutant.
* small worked examples computed by hand, the computation written beside each: R larger
  than relevant-retrieved, score ties (trec_eval ranks a tie by docno descending), cutoffs
  beyond the ranking, graded gains, ``relevance_level`` (-l), ``depth`` (-M),
  ``complete_topics`` (-c), ``judged_only`` (-J).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import cranfield
from cranfield.inputs.io import read_qrels, read_run

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
EDGE = TE / "edge_cases"
V9, V10 = "trec_eval-9.0.8", "trec_eval-10"

PARAMS = ["iprec_at_recall..10,.20,.25,.75,.50", "P.5,7,3", "recall.20,2000",
          "Rprec_mult.5.0,0.2,0.35", "utility.2,-1,0,0", "11pt_avg..25,.5,.75",
          "ndcg.1=3,2=9,4=4.5", "ndcg_cut.10,20,23", "success.2,5,20"]
EDGE_PARAMS = ["ndcg.0=-1,1=1,2=5,3=10", "set_F.0.25", "P.1,2,3,20", "recall.1,2,3,20",
               "success.1,2,3", "map_cut.1,2,3", "ndcg_cut.1,2,3",
               "iprec_at_recall..1,.25,.33,.5", "relstring.20", "utility.1,-1,0,0",
               "Rprec_mult.0.5,1,2"]

# case id -> (profile, qrels, run, expected output, measures, options); the flags are the
# trec_eval command line of MANIFEST.md (-c complete_topics, -M depth, -l relevance_level,
# -J judged_only)
UPSTREAM = {
    "aq": ([], "qrels.test", "results.test", "out.test.aq", {}),
    "aqc": ([], "qrels.test", "results.trunc", "out.test.aqc", {"complete_topics": True}),
    "aqcM": ([], "qrels.test", "results.trunc", "out.test.aqcM",
             {"complete_topics": True, "depth": 100}),
    "aql": (["relstring.20"], "qrels.rel_level", "results.test", "out.test.aql",
            {"relevance_level": 2}),
}
CASES = {}
for name, (extra, qrels, run, out, options) in UPSTREAM.items():
    CASES[f"10-{name}"] = (V10, TE / qrels, TE / run, TE / out, ["all_trec", *extra], options)
    CASES[f"9.0.8-{name}"] = (V9, TE / qrels, TE / run, TE / "v9.0.8" / out,
                              ["all_trec", *extra], options)
CASES["10-meas_params"] = (V10, TE / "qrels.test", TE / "results.test",
                           TE / "out.test.meas_params", PARAMS, {})
CASES["9.0.8-meas_params"] = (V9, TE / "qrels.test", TE / "results.test",
                              TE / "v9.0.8" / "out.test.meas_params", PARAMS, {})
EDGE_OPTIONS = {
    "aqc": ({"complete_topics": True}, ["all_trec"]),
    "aqcl2": ({"complete_topics": True, "relevance_level": 2}, ["all_trec"]),
    "aqcJ": ({"complete_topics": True, "judged_only": True}, ["all_trec"]),
    "aqcM3": ({"complete_topics": True, "depth": 3}, ["all_trec"]),
    "aq": ({}, ["all_trec"]),
    "params": ({"complete_topics": True}, EDGE_PARAMS),
}
for name, (options, measures) in EDGE_OPTIONS.items():
    for profile, tag in ((V9, "v9.0.8"), (V10, "v10")):
        if name == "aq" and profile == V10:
            continue  # trec_eval 10.0 aborts on a qrels topic missing from the run
        CASES[f"edge-{name}-{tag}"] = (profile, EDGE / "edge.qrels", EDGE / "edge.run",
                                       EDGE / "expected" / f"{name}.{tag}.out", measures,
                                       options)


def expected_lines(path: Path) -> list[tuple[str, str, str]]:
    """(measure, topic, value text) of each line trec_eval printed."""
    out = []
    for line in path.read_text().splitlines():
        measure, topic, value = line.split("\t")
        out.append((measure.strip(), topic, value.strip()))
    return out


def as_trec_text(measure: str, value) -> str:
    """A value printed as trec_eval prints it: integers as such, strings as such, floats
    ``%.4f`` (NaN as ``-nan``, glibc's spelling for the 0/0 trec_eval computes)."""
    if isinstance(value, str):  # relstring, quoted; runid is not
        return value if measure == "runid" else f"'{value}'"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if math.isnan(value):
        return "-nan"
    return f"{value:.4f}"


@pytest.fixture(scope="module")
def inputs():
    """Runs and qrels read once (reading is not under test here)."""
    cache = {}

    def get(path: Path, kind: str):
        if path not in cache:
            cache[path] = read_run(path) if kind == "run" else read_qrels(path)
        return cache[path]
    return get


@pytest.mark.parametrize("case", list(CASES))
def test_every_value_trec_eval_printed(case, inputs):
    profile, qrels, run, expected, measures, options = CASES[case]
    ev = cranfield.evaluate(inputs(qrels, "qrels"), inputs(run, "run"), measures,
                            profile=profile, **options)
    rows = ev.per_topic
    wrong, absent = {}, []
    lines = expected_lines(expected)
    assert len(lines) > 20
    for measure, topic, want in lines:
        source = ev.aggregate if topic == "all" else rows.get(topic, {})
        if measure not in source:  # a measure must be there before its value is compared
            absent.append((measure, topic))
            continue
        got = as_trec_text(measure, source[measure])
        if got != want:
            wrong[(measure, topic)] = (got, want)
    assert not absent, f"measures missing: {absent[:20]}"
    assert not wrong, f"(got, want): {dict(list(wrong.items())[:25])}"
    # and no per-topic row trec_eval did not print
    printed = {topic for _, topic, _ in lines if topic != "all"}
    assert set(rows) == printed


# --------------------------------------------------------------------------------------------
# worked examples, computed by hand
# --------------------------------------------------------------------------------------------

# Topic "t", ranked by score: d1 (qrels grade 0), d2 (2), d3 (-1: pooled, unjudged), d4 (1),
# d5 (not in the qrels); d9 (grade 1) is relevant and never retrieved. At relevance level 1,
# R = 3 (d2, d4, d9) but only 2 are retrieved. Topic "u" is in the qrels only.
RUN = {"t": {"d1": 5.0, "d2": 4.0, "d3": 3.0, "d4": 2.0, "d5": 1.0}}
QRELS = {"t": {"d1": 0, "d2": 2, "d3": -1, "d4": 1, "d9": 1}, "u": {"x": 1}}
L2, L3, L5 = math.log2(2), math.log2(3), math.log2(5)
HAND = [  # options, measure, value for topic "t" (None: the aggregate), hand computation
    ({}, "num_rel", 3, "d2, d4, d9"),
    ({}, "num_rel_ret", 2, "d2, d4"),
    ({}, "map", 1 / 3, "(P@2 + P@4) / R = (1/2 + 2/4) / 3: R, not relevant-retrieved (2)"),
    ({}, "Rprec", 1 / 3, "one relevant in the top R = 3"),
    ({}, "recip_rank", 1 / 2, "first relevant at rank 2"),
    ({}, "P_10", 2 / 10, "a cutoff past the 5 ranks: the missing ranks are non-relevant"),
    ({}, "recall_5", 2 / 3, "2 of R = 3"),
    ({}, "bpref", 0.0, "both relevant have d1 (the only judged non-relevant, NR = 1) above"),
    ({}, "num_nonrel_judged_ret", 1, "d1 (d3's -1 and d5 are not judged)"),
    ({}, "relstring", "02.1-", "grades; '.' pooled unjudged; '-' not in the qrels"),
    ({}, "ndcg", (2 / L3 + 1 / L5) / (2 + 1 / L3 + 1 / math.log2(4)),
     "DCG = 2/log2(3) + 1/log2(5); ideal gains 2, 1, 1"),
    ({}, "ndcg_cut_2", (2 / L3) / (2 + 1 / L3), "DCG@2 / IDCG@2"),
    ({}, "set_F", 2 * 0.4 * (2 / 3) / (0.4 + 2 / 3), "set_P = 2/5, set_recall = 2/3"),
    ({"relevance_level": 2}, "num_rel", 1, "-l2: only d2 is relevant"),
    ({"relevance_level": 2}, "map", 1 / 2, "P@2 / 1"),
    ({"relevance_level": 2}, "num_nonrel_judged_ret", 2, "d1 (0) and d4 (1) are below 2"),
    ({"depth": 3}, "num_ret", 3, "-M3: d1 d2 d3"),
    ({"depth": 3}, "map", (1 / 2) / 3, "-M3: only d2 (rank 2) is left; R stays 3"),
    ({"judged_only": True}, "num_ret", 3, "-J: d1 d2 d4 (d3's -1 is not judged)"),
    ({"judged_only": True}, "map", (1 / 2 + 2 / 3) / 3, "-J: d2 at rank 2, d4 at rank 3"),
    ({"complete_topics": True}, None, ("map", (1 / 3 + 0) / 2),
     "-c: topic u (not in the run) counts as 0 in the mean"),
    ({"complete_topics": True}, None, ("num_q", 2), "-c: both qrels topics"),
    ({}, None, ("map", 1 / 3), "without -c only topic t is averaged"),
]


@pytest.mark.parametrize("options, measure, want, why", HAND,
                         ids=[f"{m}-{'-'.join(o) or 'plain'}-{i}"
                              for i, (o, m, _, _) in enumerate(HAND)])
def test_hand_computed(options, measure, want, why):
    ev = cranfield.evaluate(QRELS, RUN, ["all_trec", "ndcg_cut.2", "P.10"],
                            profile=V10, **options)
    if measure is None:
        measure, want = want
        got = ev.aggregate
    else:
        got = ev.per_topic["t"]
    assert measure in got, why
    if isinstance(want, float):
        assert got[measure] == pytest.approx(want, abs=1e-12), why
    else:
        assert got[measure] == want, why


def test_a_score_tie_is_ranked_by_docno_descending():
    # a and b both score 1: trec_eval ranks b first, so relevant a is at rank 2
    ev = cranfield.evaluate({"t": {"a": 1, "b": 0}}, {"t": {"a": 1.0, "b": 1.0}},
                            ["recip_rank", "map", "P.1"], profile=V10)
    assert ev.per_topic["t"] == {"recip_rank": 0.5, "map": 0.5, "P_1": 0.0}


@pytest.mark.parametrize("measure", ["ndcg_rel.1=4", "Rndcg.1=4"])
def test_graded_gains_reach_the_ranking_side(measure):
    # b (grade 2, gain 2) at rank 1, a (grade 1, gain 4 by the parameter) at rank 2;
    # ideal: 4, 2. DCG@1 = 2, DCG@2 = 2 + 4/log2(3); IDCG@1 = 4, IDCG@2 = 4 + 2/log2(3).
    # ndcg_rel = mean over the two relevant of DCG@r / IDCG@r; Rndcg averages the same two
    # ratios (the ideal gain changes after position 1, and position 2 = L). Both:
    want = (2 / 4 + (2 + 4 / L3) / (4 + 2 / L3)) / 2          # 0.679859...
    ev = cranfield.evaluate({"t": {"a": 1, "b": 2}}, {"t": {"b": 3.0, "a": 2.0}},
                            [measure], profile=V10)
    key = measure.replace(".", "_")
    assert key in ev.per_topic["t"]
    assert ev.per_topic["t"][key] == pytest.approx(want, abs=1e-12)


def test_rbp_persistence_parameter():
    # grades 1, 0, 1 (highest grade 1: no normalisation); p = 0.5:
    # (1 - p) * (1 + 0 * p + 1 * p^2) = 0.5 * 1.25 = 0.625; the default p = 0.9 gives
    # 0.1 * (1 + 0.81) = 0.181
    run, qrels = {"t": {"a": 3.0, "b": 2.0, "c": 1.0}}, {"t": {"a": 1, "b": 0, "c": 1}}
    ev = cranfield.evaluate(qrels, run, ["rbp.p=0.5"], profile=V10)
    assert ev.per_topic["t"]["rbp_p=0.5"] == pytest.approx(0.625, abs=1e-12)
    ev = cranfield.evaluate(qrels, run, ["rbp"], profile=V10)
    assert ev.per_topic["t"]["rbp"] == pytest.approx(0.181, abs=1e-12)


def test_no_positive_grade_anywhere_gives_zero_not_an_error():
    # no qrels document has a positive gain: the ideal ranking is empty; by trec_eval's
    # definitions ndcg_rel (a non-positive sum) and Rndcg (R = 0) are 0
    ev = cranfield.evaluate({"t": {"a": 0}}, {"t": {"a": 1.0}}, ["ndcg_rel", "Rndcg", "ndcg"],
                            profile=V10)
    assert ev.per_topic["t"] == {"ndcg_rel": 0.0, "Rndcg": 0.0, "ndcg": 0.0}


def test_no_evaluated_topic_when_overlap_is_not_required():
    # a shard whose topics are all missing from the qrels: nothing per topic, zeros overall
    ev = cranfield.evaluate({"t": {"a": 1}}, {"x": {"a": 1.0}},
                            ["iprec_at_recall", "ndcg_rel", "Rndcg", "map"],
                            require_overlap=False)
    assert ev.per_topic == {}
    assert ev.aggregate["iprec_at_recall_0.00"] == 0.0 and ev.aggregate["map"] == 0.0
