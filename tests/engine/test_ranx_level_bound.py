"""ranx's ``-lN`` on ndcg/dcg (review R3 F6): grades below N gain 0 through one parameter,
``min_grade=N``, whatever N, never a gains entry per grade below N (an 83-byte request with
``dcg@5-l300000`` used to cost 15 s and a 4.4 MB canonical name; ``-l100000000`` GBs)."""

from __future__ import annotations

import math
import tracemalloc

import pytest

import cranfield
from cranfield.errors import MeasureError

QRELS = {"1": {"a": 100_000_000, "b": 1, "c": 3}}
RUN = {"1": {"b": 3.0, "a": 2.0, "c": 1.0}}


@pytest.mark.parametrize("name, expected", [
    # only a (grade 1e8, rank 2) gains: 1e8 / log2(3); the ideal has a alone at rank 1
    ("dcg@5-l100000000", 100_000_000 / math.log2(3)),
    ("ndcg@5-l100000000", 1 / math.log2(3)),
    ("dcg@5-l300000", 100_000_000 / math.log2(3)),
    # grades 3 and 1e8 gain; b (grade 1) does not
    ("dcg@5-l2", 100_000_000 / math.log2(3) + 3 / math.log2(4)),
    ("dcg-l2", 100_000_000 / math.log2(3) + 3 / math.log2(4)),
])
def test_a_large_level_is_one_parameter_with_the_right_value(name, expected):
    tracemalloc.start()
    try:
        ev = cranfield.evaluate(QRELS, RUN, [name])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ev.aggregate[name] == pytest.approx(expected, rel=1e-12)
    canonical = ev.measures[name]["canonical"]
    assert len(canonical) < 200, canonical[:300]
    assert "min_grade=" in canonical and "gains=none" in canonical
    assert peak < 50_000_000  # bytes: no allocation growing with N


def test_a_level_beyond_int64_is_a_measure_error_naming_the_parameter():
    with pytest.raises(MeasureError, match="min_grade"):
        cranfield.evaluate(QRELS, RUN, ["dcg@5-l99999999999999999999"])


def test_min_grade_is_the_gains_of_the_grades_below_it_set_to_zero():
    """nDCG(min_grade=N)@k equals the old spelling, a gains entry of 0 per grade below N."""
    qrels = {"1": {"a": 1, "b": 2, "c": 3, "d": 4}, "2": {"a": 4, "e": 2}}
    run = {"1": {"d": 1.0, "a": 4.0, "b": 3.0, "c": 2.0}, "2": {"e": 2.0, "a": 1.0, "x": 3.0}}
    ev = cranfield.evaluate(qrels, run, ["nDCG(min_grade=3)@3", "nDCG(gains={1:0,2:0})@3",
                                         "ndcg@3-l3"])
    for topic in ("1", "2"):
        row = ev.per_topic[topic]
        assert row["nDCG(min_grade=3)@3"] == row["nDCG(gains={1:0,2:0})@3"] == \
            row["ndcg@3-l3"]
