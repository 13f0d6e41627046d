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
from cranfield.io import read_qrels, read_run

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
EDGE = TE / "edge_cases"
V9, V10 = "trec_eval-9.0.8", "trec_eval-10"

PARAMS = ["iprec_at_recall..10,.20,.25,.75,.50", "P.5,7,3", "recall.20,2000",
          "Rprec_mult.5.0,0.2,0.35", "utility.2,-1,0,0", "11pt_avg..25,.5,.75",
          "ndcg.1=3,2=9,4=4.5", "ndcg_cut.10,20,23.4", "success.2,5,20"]
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
    ev = cranfield.evaluate(inputs(run, "run"), inputs(qrels, "qrels"), measures,
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
