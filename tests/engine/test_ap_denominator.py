"""Average precision divides by R (every relevant document in the qrels), not by the number
of relevant documents the run retrieved (issue #16).

The worked examples in test_worked_examples.py mostly retrieve every relevant document, so
there R = relevant-retrieved and a wrong denominator goes unnoticed. Each example here has
relevant documents the run never retrieves (or retrieves only below the cutoff / depth), so
the two denominators give different values; the hand computation is written beside each.

    AP = (1/R) * sum over retrieved relevant documents d of P@rank(d)
"""

from __future__ import annotations

import pytest

import cranfield


def one_topic(relevant_ranks, depth, unretrieved):
    """(run, qrels) for topic "t": ``depth`` ranked documents, relevant at
    ``relevant_ranks``, and ``unretrieved`` more relevant documents the run never returns."""
    run = {"t": {f"d{r:02d}": float(100 - r) for r in range(1, depth + 1)}}
    qrels = {f"d{r:02d}": 1 for r in relevant_ranks}
    qrels.update({f"missing{i}": 1 for i in range(unretrieved)})
    return run, {"t": qrels}


def test_ap_divides_by_R_when_a_relevant_document_is_not_retrieved():
    # relevant at ranks 1 and 3 of 5, R = 4 (two relevant documents never retrieved):
    #   AP = (1/4) * (P@1 + P@3) = (1/4) * (1/1 + 2/3) = 5/12 = 0.416667
    #   (dividing by relevant-retrieved = 2 would give 5/6 = 0.833333)
    run, qrels = one_topic([1, 3], depth=5, unretrieved=2)
    ev = cranfield.evaluate(qrels, run, ["map", "num_rel", "num_rel_ret"])
    row = ev.per_topic["t"]
    assert (row["num_rel"], row["num_rel_ret"]) == (4, 2)
    assert row["map"] == pytest.approx(5 / 12, abs=1e-12)
    assert ev.aggregate["map"] == pytest.approx(5 / 12, abs=1e-12)


def test_ap_single_relevant_document_found_of_three():
    # relevant at rank 2 only, R = 3:  AP = (1/3) * (1/2) = 1/6 = 0.166667
    #   (dividing by relevant-retrieved = 1 would give 0.5)
    run, qrels = one_topic([2], depth=4, unretrieved=2)
    row = cranfield.evaluate(qrels, run, ["map"]).per_topic["t"]
    assert row["map"] == pytest.approx(1 / 6, abs=1e-12)


def test_map_over_topics_with_and_without_unretrieved_relevant():
    # t1: relevant at 1, 2 of 3, R = 2 (all found):   AP = (1 + 1) / 2 = 1
    # t2: relevant at 2 of 3, R = 2 (one not found):  AP = (1/2) / 2 = 1/4
    #   MAP = (1 + 1/4) / 2 = 0.625   (relevant-retrieved denominators: (1 + 1/2) / 2 = 0.75)
    run = {"t1": {"a1": 3.0, "a2": 2.0, "a3": 1.0},
           "t2": {"b1": 3.0, "b2": 2.0, "b3": 1.0}}
    qrels = {"t1": {"a1": 1, "a2": 1}, "t2": {"b2": 1, "b9": 1}}
    ev = cranfield.evaluate(qrels, run, ["map"])
    assert ev.per_topic["t1"]["map"] == pytest.approx(1.0, abs=1e-12)
    assert ev.per_topic["t2"]["map"] == pytest.approx(0.25, abs=1e-12)
    assert ev.aggregate["map"] == pytest.approx(0.625, abs=1e-12)


def test_map_cut_divides_by_R_not_by_relevant_above_the_cutoff():
    # relevant at ranks 1, 3 and 8 of 10, R = 4 (one never retrieved); map_cut.5 keeps
    # ranks <= 5:  map_cut.5 = (1/4) * (1/1 + 2/3) = 5/12 = 0.416667
    #   map       = (1/4) * (1/1 + 2/3 + 3/8) = 49/96 = 0.510417
    run, qrels = one_topic([1, 3, 8], depth=10, unretrieved=1)
    row = cranfield.evaluate(qrels, run, ["map", "map_cut.5"]).per_topic["t"]
    assert row["map_cut_5"] == pytest.approx(5 / 12, abs=1e-12)
    assert row["map"] == pytest.approx(49 / 96, abs=1e-12)


def test_ap_with_depth_cutting_off_a_relevant_document():
    # relevant at ranks 1 and 4 of 4, R = 2; depth (-M) 2 keeps ranks 1-2 only, so the
    # document at rank 4 is relevant but not retrieved:  AP = (1/2) * (1/1) = 0.5
    #   (relevant-retrieved = 1 would give 1.0)
    run, qrels = one_topic([1, 4], depth=4, unretrieved=0)
    row = cranfield.evaluate(qrels, run, ["map", "num_rel_ret"], depth=2).per_topic["t"]
    assert row["num_rel_ret"] == 1
    assert row["map"] == pytest.approx(0.5, abs=1e-12)


def test_ap_with_relevance_level_counts_only_relevant_at_that_level():
    # grades: rank 1 -> 2, rank 2 -> 1, rank 3 -> 0, unretrieved -> 2.
    # relevance_level 2: relevant = {rank 1, unretrieved}, R = 2:
    #   AP = (1/2) * (1/1) = 0.5   (relevant-retrieved = 1 would give 1.0)
    run = {"t": {"a": 3.0, "b": 2.0, "c": 1.0}}
    qrels = {"t": {"a": 2, "b": 1, "c": 0, "z": 2}}
    row = cranfield.evaluate(qrels, run, ["map"], relevance_level=2).per_topic["t"]
    assert row["map"] == pytest.approx(0.5, abs=1e-12)
