"""ir_measures' ``Accuracy`` means ir_measures' value (issue #28), summary included.

ir_measures' accuracy provider (0.4.3, providers/accuracy_provider.py) reports no value for
a topic with no relevant document in the top k, and evaluated alone (its own evaluator's
``iter_calc``, which does not fill in the measure's default) its mean leaves that topic
out. Cranfield's per-topic value is then NaN (JSON null) and the summary, aggregate
``mean_reported``, is the mean over the topics that have one. The oracle is ir_measures
itself, computed at test time (pyproject's ``test`` extra): on its own test data
(tests/test_accuracy.py of terrierteam/ir_measures: 0.7083, where averaging a 0 for the topic
it leaves out would give 0.4722) and on random data.

Ties: ir_measures sorts a topic's documents by score with Python's stable sort (ties keep
the input order); Cranfield ranks ties by docno descending (trec_eval). ir_measures is
handed each topic's documents in Cranfield's order, scores (and ties) unchanged, so both
rank alike.
"""

from __future__ import annotations

import math

# the oracle: pyproject's test extra (a missing one fails the run, it does not skip it)
import ir_measures
import numpy as np
import pytest
from ir_measures import Qrel, ScoredDoc
from trec_order import trec_order

import cranfield

TOLERANCE = 1e-12

# terrierteam/ir_measures tests/test_accuracy.py (its qrels and run, as it writes them)
UPSTREAM_QRELS = """
0 0 C0_1 0
0 0 B0_1 1
0 0 A0_1 2
1 0 A1_1 2
1 0 A1_2 2
1 0 B1_1 1
1 0 C1_2 0
2 0 B1_1 1
"""
UPSTREAM_RUN = """
0 0 C0_1 1 0.4 run
0 0 A0_1 2 0.3 run
0 0 C0_2 3 0.2 run
0 0 C0_3 4 0.1 run
1 0 C1_1 1 0.8 run
1 0 A1_1 2 0.7 run
1 0 C1_2 3 0.6 run
1 0 B1_1 4 0.5 run
1 0 C1_3 5 0.4 run
2 0 B1_1 2 0.2 run
2 0 C1_1 3 0.1 run
"""


def ir_inputs(qrels: dict, run: dict):
    """The qrels and run as ir_measures' named tuples, each topic's documents listed in
    Cranfield's rank order (so that ir_measures' stable sort ranks ties alike)."""
    q = [Qrel(t, d, g) for t, docs in qrels.items() for d, g in docs.items()]
    r = [ScoredDoc(t, d, docs[d]) for t, docs in run.items() for d in trec_order(docs)]
    return q, r


def theirs(name: str, qrels: dict, run: dict) -> tuple[dict[str, float], float]:
    """ir_measures' per-topic values (only the topics it reports) and its mean, evaluated
    alone with the accuracy provider and with ir_measures' default pipeline."""
    measure = ir_measures.parse_measure(name)
    q, r = ir_inputs(qrels, run)
    per_topic = {m.query_id: m.value for m in ir_measures.accuracy.iter_calc([measure], q, r)}
    mean = ir_measures.accuracy.calc_aggregate([measure], q, r)[measure]
    assert _same(ir_measures.calc_aggregate([measure], q, r)[measure], mean)
    return per_topic, mean


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE or (math.isnan(a) and math.isnan(b))


def assert_cranfield_is_ir_measures(name: str, qrels: dict, run: dict, **options):
    per_topic, mean = theirs(name, qrels, run)
    ev = cranfield.evaluate(qrels, run, [name], **options)
    ours = {t: v[name] for t, v in ev.per_topic.items()}
    for t, v in ours.items():
        if t in per_topic:
            assert _same(v, per_topic[t]), (name, t, v, per_topic[t])
        else:  # ir_measures reports no value: Cranfield has none either
            assert math.isnan(v), (name, t, v)
    assert set(per_topic) <= set(ours)
    assert _same(ev.aggregate[name], mean), (name, ev.aggregate[name], mean)
    return ev, per_topic, mean


def upstream() -> tuple[dict, dict]:
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for line in UPSTREAM_QRELS.split("\n"):
        if line.strip():
            t, _, d, g = line.split()
            qrels.setdefault(t, {})[d] = int(g)
    for line in UPSTREAM_RUN.split("\n"):
        if line.strip():
            t, _, d, _, s, _ = line.split()
            run.setdefault(t, {})[d] = float(s)
    return qrels, run


def test_ir_measures_own_test_data_gives_its_mean():
    qrels, run = upstream()
    # what ir_measures' test asserts (tests/test_accuracy.py), then ir_measures' own mean
    _, per_topic, mean = assert_cranfield_is_ir_measures("Accuracy(rel=1)", qrels, run)
    assert per_topic == pytest.approx({"0": 2 / 3, "1": 0.5 * (2 / 3 + 1 / 3), "2": 1.0})
    ev, per_topic, mean = assert_cranfield_is_ir_measures("Accuracy(rel=2)", qrels, run)
    assert per_topic == pytest.approx({"0": 2 / 3, "1": 0.75})
    # topic 2 has no document graded 2: no value, left out of the mean (averaging a 0 for
    # it would give (2/3 + 3/4) / 3 = 0.4722)
    assert math.isnan(ev.per_topic["2"]["Accuracy(rel=2)"])
    assert ev.aggregate["Accuracy(rel=2)"] == pytest.approx((2 / 3 + 0.75) / 2, abs=1e-12)
    assert round(ev.aggregate["Accuracy(rel=2)"], 4) == 0.7083
    for name in ("Accuracy", "Accuracy@2", "Accuracy@3", "Accuracy(rel=2)@2"):
        assert_cranfield_is_ir_measures(name, qrels, run)
    # Accuracy@1: topic 2's top 1 is relevant, no pair to misorder: ir_measures divides by 0
    with pytest.raises(ZeroDivisionError):
        theirs("Accuracy@1", qrels, run)
    assert cranfield.evaluate(qrels, run, ["Accuracy@1"]).per_topic["2"]["Accuracy@1"] == 1.0


@pytest.mark.parametrize("name", ["Accuracy@5", "Accuracy@10", "Accuracy@20", "Accuracy",
                                  "Accuracy(rel=1)@10", "Accuracy@100"])
def test_nists_test_files_give_ir_measures_values(name):
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    with open("tests/data/trec_eval/qrels.test", encoding="ascii") as f:
        for line in f:
            t, _, d, g = line.split()
            qrels.setdefault(t, {})[d] = int(g)
    with open("tests/data/trec_eval/results.test", encoding="ascii") as f:
        for line in f:
            t, _, d, _, s, _ = line.split()
            run.setdefault(t, {})[d] = float(s)
    ev, per_topic, _ = assert_cranfield_is_ir_measures(name, qrels, run)
    assert len(ev.per_topic) >= 2 and per_topic


def generate(seed: int, n_topics: int = 12):
    """Graded qrels (-1..3: a negative grade is judged below every level), ties (scores
    drawn from 9 values), unjudged retrieved documents, runs of 1 to 60 documents."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for i in range(n_topics):
        t = f"t{i:02d}"
        pool = [f"d{j:03d}" for j in range(int(rng.integers(5, 90)))]
        judged = rng.choice(pool, size=int(rng.integers(1, len(pool) + 1)), replace=False)
        qrels[t] = {str(d): int(rng.choice([-1, 0, 0, 0, 1, 1, 2, 3])) for d in judged}
        depth = int(rng.integers(1, min(60, len(pool)) + 1))
        docs = rng.choice(pool, size=depth, replace=False)
        run[t] = {str(d): float(rng.integers(0, 9)) / 4 for d in docs}
    return qrels, run


NAMES = ["Accuracy", "Accuracy@1", "Accuracy@3", "Accuracy@5", "Accuracy@10", "Accuracy@50",
         "Accuracy(rel=2)@5", "Accuracy(rel=2)", "Accuracy(rel=3)@10", "Accuracy(rel=0)@10",
         "Accuracy(rel=0)"]


def crashes(name: str, qrels: dict, run: dict, t: str) -> bool:
    """ir_measures raises ZeroDivisionError on a topic whose top k holds no non-relevant
    document (Cranfield: 1, no pair misordered)."""
    q, r = ir_inputs({t: qrels[t]}, {t: run[t]})
    try:
        list(ir_measures.accuracy.iter_calc([ir_measures.parse_measure(name)], q, r))
    except ZeroDivisionError:
        return True
    return False


@pytest.mark.parametrize("seed", [28, 29, 30, 31])
def test_random_data_gives_ir_measures_values(seed):
    qrels, run = generate(seed)
    compared = 0
    for name in NAMES:
        crash = [t for t in run if crashes(name, qrels, run, t)]
        ev = cranfield.evaluate(qrels, run, [name])
        for t in crash:  # ir_measures has no number there: Cranfield's documented 1
            assert ev.per_topic[t][name] == 1.0
        keep = [t for t in run if t not in crash]
        sub_q = {t: qrels[t] for t in keep}
        sub_r = {t: run[t] for t in keep}
        _, per_topic, _ = assert_cranfield_is_ir_measures(name, sub_q, sub_r)
        compared += len(keep)
        # the data are worth it: some topics have no value, most have one
        if name in ("Accuracy(rel=3)@10", "Accuracy@1"):
            assert len(per_topic) < len(keep), name
    assert compared >= len(NAMES) * len(run) // 2


def test_a_qrels_topic_missing_from_the_run_has_no_value():
    """complete_topics (-c) evaluates the qrels topics the run lacks; ir_measures never
    reports them: no value, not in the mean (both profiles)."""
    qrels, run = upstream()
    qrels["9"] = {"X": 1, "Y": 0}
    per_topic, mean = theirs("Accuracy(rel=1)", qrels, run)
    assert "9" not in per_topic
    for profile in cranfield.PROFILES:
        ev = cranfield.evaluate(qrels, run, ["Accuracy(rel=1)", "P@5"], complete_topics=True,
                                profile=profile)
        if "9" in ev.per_topic:  # trec_eval-10 prints the topics the run lacks
            assert math.isnan(ev.per_topic["9"]["Accuracy(rel=1)"])
            assert ev.per_topic["9"]["P@5"] == 0.0
        assert ev.aggregate["P@5"] == pytest.approx(
            sum(v["P@5"] for t, v in ev.per_topic.items() if t != "9") / 4)
        assert ev.aggregate["Accuracy(rel=1)"] == pytest.approx(mean, abs=TOLERANCE)


def test_no_topic_with_a_value_gives_nan_as_ir_measures():
    qrels, run = {"q": {"a": 0, "b": 1}}, {"q": {"a": 2.0, "b": 1.0}}
    per_topic, mean = theirs("Accuracy@1", qrels, run)
    assert per_topic == {} and math.isnan(mean)
    ev = cranfield.evaluate(qrels, run, ["Accuracy@1"])
    assert math.isnan(ev.aggregate["Accuracy@1"])


def test_the_spelling_is_labelled_ir_measures_with_its_summary():
    from cranfield.measures import REGISTRY
    from cranfield.reports.measure_docs import describe

    d = describe(REGISTRY["Accuracy"])
    assert d["spellings"] == [{"name": "Accuracy", "tool": "ir_measures"}]
    assert d["aggregate"] == "mean_reported"
    assert "left out" in d["zero_rule"] or "leaves the topic out" in d["zero_rule"]


def test_segments_and_weights_leave_out_the_topics_without_a_value():
    """Per segment, the summary is the segment's own ir_measures mean; weighted, the topics
    without a value carry no weight (numpy's average over the others)."""
    qrels = {"0": {"a": 1, "b": 0}, "1": {"a": 0, "b": 0}, "2": {"a": 1, "b": 0, "c": 1}}
    run = {"0": {"a": 2.0, "b": 1.0}, "1": {"a": 2.0, "b": 1.0},
           "2": {"b": 3.0, "a": 2.0, "c": 1.0}}
    md = {"0": {"segments": ["x"], "weight": 2.0}, "1": {"segments": ["x"], "weight": 5.0},
          "2": {"segments": ["y"], "weight": 1.0}}
    ev = cranfield.evaluate(qrels, run, ["Accuracy"], topic_metadata=md)
    assert ev.per_topic["0"]["Accuracy"] == 1.0 and ev.per_topic["2"]["Accuracy"] == 0.0
    assert math.isnan(ev.per_topic["1"]["Accuracy"])  # nothing relevant
    assert ev.aggregate["Accuracy"] == 0.5
    assert ev.segments["x"]["aggregate"]["Accuracy"] == 1.0  # topic 1 left out
    assert ev.weighted["Accuracy"] == pytest.approx(np.average([1.0, 0.0], weights=[2, 1]))
    _, x_mean = theirs("Accuracy", {t: qrels[t] for t in "01"}, {t: run[t] for t in "01"})
    assert x_mean == 1.0
