"""Budgets before work (issue #27) for comparisons: the runs a comparison evaluates are held
to an evaluation's budgets. Measure instances (MAX_MEASURE_INSTANCES, the measures asked for
and the gates' together) are counted before any input is read, sync and queued; a name's
parameters before it is parsed (a 100 MB ``P.1,1,1,…`` is one instance); each inline run's
instances × topics to MAX_EVALUATION_VALUES (sync) or MAX_QUEUED_EVALUATION_VALUES (a queued
comparison's job fails with the same problem). Over a budget: 422 work-over-budget naming
the budget, its factors and the run. Bounds lowered through create_app(config); every
response checked against openapi.yaml."""

from __future__ import annotations

import pytest
from conftest import ContractClient, finished_job
from test_budgets import cutoffs, qrels, run  # the evaluations' budget tests' inputs

from service.app import create_app

PROBLEM = "application/problem+json"
ASYNC = {"Prefer": "respond-async"}


def make_client(**config) -> ContractClient:
    return ContractClient(create_app({"TESTING": True, **config}).test_client())



def body(measures: list[str], *runs: dict, n_qrels: int = 40, **extra) -> dict:
    return {"runs": [{"run": r} for r in runs], "qrels": qrels(n_qrels),
            "measures": measures, "tests": ["t"], "permutations": 100,
            "bootstrap_samples": 100, **extra}


def budget_422(resp) -> dict:
    assert resp.status_code == 422, resp.get_data(as_text=True)[:500]
    assert resp.mimetype == PROBLEM
    doc = resp.get_json()
    assert doc["type"].endswith("/work-over-budget")
    return doc


# --------------------------------------------------------------------------------------------
# Measure instances and parameters: before any input is read
# --------------------------------------------------------------------------------------------

def test_instances_over_the_budget_are_422_before_the_runs_are_read():
    client = make_client(MAX_MEASURE_INSTANCES=50)
    bad = {"q0": {"d0": "x"}}  # not even a valid run: refused before it is read
    doc = budget_422(client.post("/v1/comparisons", json=body([cutoffs(200)], bad, bad)))
    assert doc["budget"] == {"name": "MAX_MEASURE_INSTANCES", "limit": 50, "total": 200,
                             "factors": {"instances": 200}}
    assert "200 instances, over MAX_MEASURE_INSTANCES 50" in doc["detail"]
    assert list(doc["errors"]) == ["measures"]
    # queued alike: refused at submission, no job
    doc = budget_422(client.post("/v1/comparisons", json=body([cutoffs(200)], bad, bad),
                                 headers=ASYNC))
    assert doc["budget"]["total"] == 200


def test_a_gates_measure_counts_with_the_measures():
    client = make_client(MAX_MEASURE_INSTANCES=50)
    gate = {"measure": "ndcg_cut.5", "max_drop": 0.5}
    ok = client.post("/v1/comparisons", json=body([cutoffs(50)], run(3), run(3, shift=1)))
    assert ok.status_code == 200, ok.get_data(as_text=True)[:300]
    assert len(ok.get_json()["measures"]) == 50
    doc = budget_422(client.post("/v1/comparisons", json=body(
        [cutoffs(50)], run(3), run(3, shift=1), gate=gate)))
    assert doc["budget"] == {"name": "MAX_MEASURE_INSTANCES", "limit": 50, "total": 51,
                             "factors": {"instances": 51}}


@pytest.mark.parametrize("where", ["measures", "gate"])
def test_a_name_of_many_parameters_is_refused_unparsed(monkeypatch, where):
    """``P.1,1,1,…`` is one instance but costs its length to parse: refused by its
    parameters (more than 4 × MAX_MEASURE_INSTANCES) before any name is parsed (a parser
    that fails if called proves it), in the measures or a gate's."""
    import cranfield.measures.names

    client = make_client(MAX_MEASURE_INSTANCES=50)
    name = "P." + ",".join(["1"] * 201)
    extra = ({"measures": [name]} if where == "measures" else
             {"measures": ["map"], "gate": {"measure": name, "max_drop": 0.1}})

    def parse_measure(*args, **kwargs):
        raise AssertionError("a name was parsed")

    monkeypatch.setattr(cranfield.measures.names, "parse_measure", parse_measure)
    doc = budget_422(client.post("/v1/comparisons",
                                 json={**body([], run(2), run(2, shift=1)), **extra}))
    total = 201 if where == "measures" else 202  # with the measure asked for, map
    assert doc["budget"] == {"name": "MAX_MEASURE_INSTANCES", "limit": 50, "total": total,
                             "factors": {"parameters": total}}
    monkeypatch.undo()
    # 200 parameters: parsed, one instance, compared
    resp = client.post("/v1/comparisons", json=body(["P." + ",".join(["1"] * 200)],
                                                    run(2), run(2, shift=1), n_qrels=2))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    assert [m["key"] for m in resp.get_json()["measures"]] == ["P_1"]


# --------------------------------------------------------------------------------------------
# Values: each inline run's instances × topics, once its topics are known
# --------------------------------------------------------------------------------------------

def test_a_run_over_the_value_budget_is_422_naming_it_and_the_factors():
    client = make_client(MAX_EVALUATION_VALUES=1000, MAX_QUEUED_EVALUATION_VALUES=10_000)
    # run1: 30 instances × 10 topics = 300 values; run2: 30 × 40 = 1,200
    doc = budget_422(client.post("/v1/comparisons", json=body(
        [cutoffs(30)], run(10), run(40, shift=1))))
    assert doc["budget"] == {"name": "MAX_EVALUATION_VALUES", "limit": 1000, "total": 1200,
                             "factors": {"instances": 30, "topics": 40}}
    assert doc["detail"].startswith(
        "runs[1] ('run2'): measures expand to 30 instances × 40 topics = 1,200 values, over "
        "MAX_EVALUATION_VALUES 1,000")
    # within the queued budget: the way out is said
    assert "Prefer: respond-async" in doc["detail"]
    assert "MAX_QUEUED_EVALUATION_VALUES 10,000" in doc["detail"]
    assert list(doc["errors"]) == ["measures"]
    # at the budget: compared
    resp = client.post("/v1/comparisons", json=body([cutoffs(25)], run(10), run(40, shift=1)))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    assert len(resp.get_json()["measures"]) == 25


def test_the_topics_factor_is_the_topics_evaluated():
    client = make_client(MAX_EVALUATION_VALUES=1000)
    # 40 run topics, 10 judged: 30 × 10 = 300 values each
    resp = client.post("/v1/comparisons", json=body([cutoffs(30)], run(40), run(40, shift=1),
                                                    n_qrels=10))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    assert len(resp.get_json()["topics"]) == 10


def test_a_queued_comparison_over_the_queued_budget_fails_with_the_same_problem():
    client = make_client(MAX_EVALUATION_VALUES=100, MAX_QUEUED_EVALUATION_VALUES=1000)
    request = body([cutoffs(30)], run(10), run(40, shift=1))
    resp = client.post("/v1/comparisons", json=request, headers=ASYNC)
    assert resp.status_code == 202, resp.get_data(as_text=True)[:300]
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "failed", job
    problem = job["problem"]
    assert problem["status"] == 422 and problem["code"] == "over-budget"
    assert problem["detail"] == (
        "runs[1] ('run2'): measures expand to 30 instances × 40 topics = 1,200 values, over "
        "MAX_QUEUED_EVALUATION_VALUES 1,000: ask for fewer cutoffs or measures, or evaluate "
        "fewer topics")
    assert problem["errors"] == {"measures": [problem["detail"]]}
    assert problem["budget"] == {"name": "MAX_QUEUED_EVALUATION_VALUES", "limit": 1000,
                                 "total": 1200, "factors": {"instances": 30, "topics": 40}}
    assert "result" not in job
    # the same request answered here fails the same way, under the synchronous budget
    sync = budget_422(client.post("/v1/comparisons", json=request))
    assert sync["detail"].startswith("runs[0] ('run1'): measures expand to 30 instances × 10 "
                                     "topics = 300 values, over MAX_EVALUATION_VALUES 100")
    # within the queued budget, queued, it is compared
    resp = client.post("/v1/comparisons", json=body([cutoffs(30)], run(10), run(30, shift=1)),
                       headers=ASYNC)
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert len(job["result"]["measures"]) == 30
    assert len(job["result"]["topics"]) == 10  # the topics both runs have
