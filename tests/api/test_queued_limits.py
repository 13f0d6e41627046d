"""MAX_TOPICS and MAX_DOCS_PER_TOPIC hold for queued pools and comparisons as for
synchronous ones (issue #27): a queued job whose run, inline qrels or stored qrels is over a
limit fails, before any work, with the 413 problem the synchronous request gets (status,
title, detail and errors alike). They were not checked in the worker at all: a queued pool
or comparison took runs of any number of topics and documents. Through the embedded queue
(the worker's code, backend/tasks.py, in process; tests/integration/test_queued_bounds.py
runs a real RQ worker); every response checked against openapi.yaml."""

from __future__ import annotations

import pytest
from conftest import ContractClient, finished_job

from service.app import create_app

ASYNC = {"Prefer": "respond-async"}
TOPICS, DOCS = 4, 3


@pytest.fixture
def client() -> ContractClient:
    return ContractClient(create_app({"TESTING": True, "MAX_TOPICS": TOPICS,
                                      "MAX_DOCS_PER_TOPIC": DOCS}).test_client())


def run(n_topics: int = TOPICS, n_docs: int = DOCS, shift: int = 0) -> dict:
    return {f"q{t}": {f"d{(d + shift) % n_docs}": float(n_docs - d) for d in range(n_docs)}
            for t in range(n_topics)}


def wide_topic() -> dict:
    over = run()
    over["q2"] = {f"d{d}": float(-d) for d in range(DOCS + 2)}
    return over


def qrels(n_topics: int = TOPICS) -> dict:
    return {f"q{t}": {"d0": 1} for t in range(n_topics)}


def pool_body(*runs, **extra) -> dict:
    return {"runs": [{"run": r} for r in runs], "depth": 2, **extra}


def compare_body(*runs, **extra) -> dict:
    return {"runs": [{"run": r} for r in runs], "measures": ["map"], "tests": ["t"],
            "permutations": 100, "bootstrap_samples": 100, **{"qrels": qrels(), **extra}}


def same_413(client, path: str, body: dict, field: str) -> dict:
    """The synchronous 413 for ``body`` and the queued job's failure: the same problem."""
    sync = client.post(path, json=body)
    assert sync.status_code == 413, sync.get_data(as_text=True)[:300]
    expected = sync.get_json()
    assert list(expected["errors"]) == [field]
    resp = client.post(path, json=body, headers=ASYNC)
    assert resp.status_code == 202, resp.get_data(as_text=True)[:300]
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "failed", job
    assert "result" not in job
    problem = job["problem"]
    assert {k: problem[k] for k in ("status", "title", "detail", "errors")} == {
        k: expected[k] for k in ("status", "title", "detail", "errors")}
    return problem


def test_queued_pool_run_over_max_topics(client):
    problem = same_413(client, "/v1/pools", pool_body(run(), run(TOPICS + 1)), "runs[1].run")
    assert problem["detail"] == "runs[1].run: 5 topics exceed the limit of 4"
    assert problem["errors"] == {"runs[1].run": ["at most 4 topics"]}


def test_queued_pool_topic_over_max_docs(client):
    problem = same_413(client, "/v1/pools", pool_body(run(), wide_topic()), "runs[1].run.q2")
    assert problem["detail"] == "runs[1].run: topic 'q2' has 5 documents; the limit is 3"


def test_queued_pool_stored_qrels_over_max_topics(client):
    # stored while MAX_TOPICS allowed them (PUT holds qrels to it now), since lowered
    app = client.client.application
    app.config.update(MAX_TOPICS=TOPICS + 1)
    assert client.put("/v1/qrels/wide", json={"qrels": qrels(TOPICS + 1)}).status_code == 201
    app.config.update(MAX_TOPICS=TOPICS)
    problem = same_413(client, "/v1/pools", pool_body(run(), qrels_id="wide"), "qrels_id")
    assert problem["detail"] == "qrels_id: 5 topics exceed the limit of 4"


def test_queued_comparison_run_over_max_topics(client):
    same_413(client, "/v1/comparisons", compare_body(run(), run(TOPICS + 1)), "runs[1].run")


def test_queued_comparison_topic_over_max_docs(client):
    problem = same_413(client, "/v1/comparisons", compare_body(wide_topic(), run()),
                       "runs[0].run.q2")
    assert problem["errors"] == {"runs[0].run.q2": ["at most 3 documents per topic"]}


def test_queued_comparison_inline_qrels_over_max_topics(client):
    same_413(client, "/v1/comparisons", compare_body(run(), run(shift=1),
                                                     qrels=qrels(TOPICS + 1)), "qrels")


def test_queued_pool_and_comparison_at_the_limits_finish(client):
    for path, body in (("/v1/pools", pool_body(run(), wide_topic() | {"q2": run()["q2"]})),
                       ("/v1/comparisons", compare_body(run(), run(shift=1)))):
        sync = client.post(path, json=body)
        assert sync.status_code == 200, sync.get_data(as_text=True)[:300]
        resp = client.post(path, json=body, headers=ASYNC)
        job = finished_job(client, resp.headers["Location"])
        assert job["status"] == "finished", job
        if path == "/v1/pools":
            assert job["result"] == sync.get_json()
        else:
            assert job["result"]["topics"] == sync.get_json()["topics"]
            assert len(job["result"]["topics"]) == TOPICS


# --------------------------------------------------------------------------------------------
# Queued evaluations (unsharded here; sharded: tests/integration/test_queued_bounds.py)
# --------------------------------------------------------------------------------------------

def evaluation_body(run_value: dict, qrels_value: dict | None = None) -> dict:
    return {"run": run_value, "qrels": qrels() if qrels_value is None else qrels_value,
            "measures": ["map"]}


@pytest.mark.parametrize(("body", "field"), [
    (evaluation_body(run(TOPICS + 2)), "run"),
    (evaluation_body(wide_topic()), "run.q2"),
    (evaluation_body(run(), qrels(TOPICS + 1)), "qrels"),
    (evaluation_body(run(TOPICS + 1), qrels(TOPICS + 1)), "run"),  # the run's first, as sync
], ids=["run-topics", "run-docs", "qrels-topics", "both"])
def test_queued_evaluation_over_a_limit_fails_with_the_sync_413(client, body, field):
    same_413(client, "/v1/evaluations", body, field)


def test_queued_evaluation_at_the_limits_finishes(client):
    body = evaluation_body(run())
    resp = client.post("/v1/evaluations", json=body, headers=ASYNC)
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert job["result"]["aggregate"] == client.post("/v1/evaluations",
                                                     json=body).get_json()["aggregate"]
