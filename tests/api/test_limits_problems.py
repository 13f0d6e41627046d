"""The 413 problems of service/limits.py, every field exact (issue #16: the mutants that
survived tests/api/test_limits_boundaries.py changed the title, which no test read).

One over MAX_TOPICS and one over MAX_DOCS_PER_TOPIC, each checked whole: status, type,
title, detail, errors. Runs whose topics' rows are scattered (TREC text with the topics
interleaved) take the other counting path (``np.bincount``); their worst topic is named too.
Every response is checked against openapi.yaml (ContractClient).
"""

from __future__ import annotations

import pytest
from conftest import ContractClient

from service.app import create_app

PROBLEM = "application/problem+json"
TYPE = "https://cranfield.dev/problems/too-large"
TOPICS, DOCS = 3, 2


@pytest.fixture
def limited():
    return ContractClient(create_app({"TESTING": True, "MAX_TOPICS": TOPICS,
                                      "MAX_DOCS_PER_TOPIC": DOCS}).test_client())


def qrels(topics) -> dict:
    return {t: {"d0": 1} for t in topics}


def evaluate(client, run_value, qrels_value) -> object:
    return client.post("/v1/evaluations", json={"run": run_value, "qrels": qrels_value,
                                                 "measures": ["num_q"]})


def problem(resp) -> dict:
    assert resp.status_code == 413, resp.get_data(as_text=True)[:300]
    assert resp.mimetype == PROBLEM
    return resp.get_json()


def test_too_many_topics_problem_is_exact(limited):
    topics = ["a", "b", "c", "d"]  # TOPICS + 1
    run = {t: {"d0": 1.0} for t in topics}
    doc = problem(evaluate(limited, run, qrels(topics[:TOPICS])))
    assert doc == {"type": TYPE, "title": "Too many topics", "status": 413,
                   "detail": "run: 4 topics exceed the limit of 3",
                   "errors": {"run": ["at most 3 topics"]}}


def test_too_many_qrels_topics_problem_is_exact(limited):
    run = {t: {"d0": 1.0} for t in ["a", "b"]}
    doc = problem(evaluate(limited, run, qrels(["a", "b", "c", "d", "e"])))
    assert doc == {"type": TYPE, "title": "Too many topics", "status": 413,
                   "detail": "qrels: 5 topics exceed the limit of 3",
                   "errors": {"qrels": ["at most 3 topics"]}}


def test_too_many_documents_problem_is_exact(limited):
    run = {"a": {"d0": 1.0}, "b": {"d0": 3.0, "d1": 2.0, "d2": 1.0}, "c": {"d0": 1.0}}
    doc = problem(evaluate(limited, run, qrels(["a", "b", "c"])))
    assert doc == {"type": TYPE, "title": "Too many documents", "status": 413,
                   "detail": "run: topic 'b' has 3 documents; the limit is 2",
                   "errors": {"run.b": ["at most 2 documents per topic"]}}


def interleaved(counts: dict[str, int]) -> str:
    """TREC run text where the topics' rows are interleaved (round robin): no topic's rows
    are one block, so the per-topic counts come from ``np.bincount``."""
    lines, rank = [], 0
    for i in range(max(counts.values())):
        for topic, n in counts.items():
            if i < n:
                rank += 1
                lines.append(f"{topic} Q0 d{i} {i + 1} {100 - rank} r\n")
    return "".join(lines)


def test_scattered_rows_at_max_docs_pass(limited):
    text = interleaved({"a": DOCS, "b": DOCS, "c": DOCS})
    assert text.splitlines()[:2] == ["a Q0 d0 1 99 r", "b Q0 d0 1 98 r"]
    resp = evaluate(limited, text, qrels(["a", "b", "c"]))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    assert resp.get_json()["aggregate"]["num_q"] == 3


def test_scattered_rows_one_over_max_docs_names_the_topic(limited):
    # the middle topic is the one over: neither the first nor the last index
    text = interleaved({"a": DOCS, "b": DOCS + 1, "c": 1})
    doc = problem(evaluate(limited, text, qrels(["a", "b", "c"])))
    assert doc == {"type": TYPE, "title": "Too many documents", "status": 413,
                   "detail": "run: topic 'b' has 3 documents; the limit is 2",
                   "errors": {"run.b": ["at most 2 documents per topic"]}}


def test_a_run_of_exactly_max_docs_rows_in_total_passes(limited):
    # len(run) == MAX_DOCS_PER_TOPIC: the early return and the full count agree
    resp = evaluate(limited, {"a": {"d0": 2.0, "d1": 1.0}}, qrels(["a"]))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
