"""POST /v1/comparisons with ir_measures' Accuracy@k, through the contract client (every
response checked against openapi.yaml; review R3 F1, F2, F3): a topic where a run has no
Accuracy value (no relevant document in the top k) is left out of the pair's tests and its
wins/ties/losses, which stay integers; a pair with no topic valued by both runs says
``tested: false`` with null counts, which the contract allows only there; a gate on Accuracy
of two identical runs passes; the weighted mean is the evaluation's."""

from __future__ import annotations

import pytest
from accuracy_ranks import RANKS, qrels_and_runs

QRELS, RUNS = qrels_and_runs(RANKS)  # with its hand computation: tests/accuracy_ranks.py


def post(client, runs, **extra):
    resp = client.post("/v1/comparisons", json={
        "runs": [{"name": n, "run": r} for n, r in runs.items()], "qrels": QRELS,
        "measures": ["Accuracy@3"], "baseline": next(iter(runs)), **extra})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    return resp.get_json()


def test_accuracy_pair_counts_over_the_topics_with_values(client):
    doc = post(client, RUNS)
    (pair,) = doc["pairs"]
    assert pair["tested"] is True
    assert (pair["n_topics"], pair["topics_without_value"]) == (4, 1)
    assert (pair["wins"], pair["ties"], pair["losses"]) == (1, 1, 2)
    assert pair["mean_diff"] == pytest.approx(-0.25, abs=1e-15)
    assert pair["t_test"]["df"] == 3
    (warn,) = [w for w in doc["warnings"] if w["code"] == "topics-without-value"]
    assert warn["topics"] == ["t3"]
    assert doc["summary"]["Accuracy@3"]["A"]["mean"] == 0.75
    assert doc["summary"]["Accuracy@3"]["B"]["mean"] == 0.5


def test_identical_runs_gated_on_accuracy_pass(client):
    doc = post(client, {"A": RUNS["A"], "A2": RUNS["A"]}, gate="Accuracy@3:0.01")
    assert doc["gate"]["verdict"] == "pass", doc["gate"]["reasons"]
    (pair,) = doc["pairs"]
    assert (pair["wins"], pair["ties"], pair["losses"]) == (0, 4, 0)


def test_a_pair_no_topic_values_for_both_is_untested_and_contract_valid(client):
    ranks = {"A": {"t1": "RNN", "t2": "NNN"}, "B": {"t1": "NNN", "t2": "RNN"}}
    qrels, runs = qrels_and_runs(ranks)
    resp = client.post("/v1/comparisons", json={
        "runs": [{"name": n, "run": r} for n, r in runs.items()], "qrels": qrels,
        "measures": ["Accuracy@3"], "baseline": "A", "gate": "Accuracy@3:0.01"})
    assert resp.status_code == 200
    doc = resp.get_json()
    (pair,) = doc["pairs"]
    assert pair["tested"] is False and pair["n_topics"] == 0
    assert (pair["wins"], pair["ties"], pair["losses"]) == (None, None, None)
    assert doc["gate"]["verdict"] == "undecided"


def test_weighted_accuracy_is_the_evaluations(client):
    metadata = {"t1": {"segments": ["x"], "weight": 2}, "t2": {"segments": ["x"]},
                "t3": {"segments": ["x"], "weight": 3}, "t4": {"segments": ["y"]},
                "t5": {"segments": ["y"], "weight": 0.5}}
    doc = post(client, RUNS, options={"topic_metadata": metadata})
    for name, run in RUNS.items():
        resp = client.post("/v1/evaluations", json={
            "qrels": QRELS, "run": run, "measures": ["Accuracy@3"],
            "options": {"topic_metadata": metadata}})
        assert resp.status_code == 200
        assert doc["weighted"]["Accuracy@3"][name] == pytest.approx(
            resp.get_json()["weighted"]["Accuracy@3"], rel=1e-15)
    assert doc["weighted"]["Accuracy@3"]["A"] == pytest.approx(
        (2 * 1.0 + 1.0 + 0.5 + 0.5 * 0.5) / 4.5)
    (pair,) = doc["segments"]["x"]["pairs"]
    assert (pair["n_topics"], pair["wins"], pair["ties"], pair["losses"]) == (2, 0, 0, 2)
