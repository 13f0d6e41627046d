"""Budgets before work (issue #27), through the Flask test client with the bounds lowered:
the seen requests, scaled down, are 422 naming the budget and its factors, before the work
(an evaluation's measure instances and instances × topics; a pool's runs × topics × documents),
and a queued job over its budget fails with the same problem. Every response is checked
against openapi.yaml."""

from __future__ import annotations

import pytest
from conftest import ContractClient, finished_job

from service.app import create_app

PROBLEM = "application/problem+json"
ASYNC = {"Prefer": "respond-async"}


def make_client(**config) -> ContractClient:
    return ContractClient(create_app({"TESTING": True, **config}).test_client())


def run(n_topics: int, n_docs: int = 3, shift: int = 0) -> dict:
    """n_topics topics of n_docs scored documents (shifted: another run's order)."""
    return {f"q{t}": {f"d{(d + shift) % n_docs}": float(n_docs - d) for d in range(n_docs)}
            for t in range(n_topics)}


def qrels(n_topics: int) -> dict:
    return {f"q{t}": {"d0": 1, "d1": 0} for t in range(n_topics)}


def cutoffs(n: int) -> str:
    return "P." + ",".join(str(k) for k in range(1, n + 1))


# --------------------------------------------------------------------------------------------
# Evaluations: "measures": ["P.1,2,…,20000"], scaled down
# --------------------------------------------------------------------------------------------

def test_one_name_over_the_instance_budget_is_422_before_the_inputs_are_read():
    client = make_client(MAX_MEASURE_INSTANCES=50)
    # the run is not even valid: the budget refuses before anything is read
    resp = client.post("/v1/evaluations", json={"run": {"q0": {"d0": "x"}}, "qrels": qrels(1),
                                                "measures": [cutoffs(200)]})
    assert resp.status_code == 422 and resp.mimetype == PROBLEM
    body = resp.get_json()
    assert body["type"].endswith("/work-over-budget")
    assert body["budget"] == {"name": "MAX_MEASURE_INSTANCES", "limit": 50, "total": 200,
                              "factors": {"instances": 200}}
    assert "200 instances, over MAX_MEASURE_INSTANCES 50" in body["detail"]
    assert "alone expands to 200" in body["detail"]
    assert list(body["errors"]) == ["measures"]


def test_instances_summed_over_names_count_against_the_budget():
    client = make_client(MAX_MEASURE_INSTANCES=50)
    resp = client.post("/v1/evaluations", json={"run": run(2, 3), "qrels": qrels(2),
                                                "measures": [cutoffs(30), "ndcg_cut.1,2,3,4,"
                                                             + ",".join(map(str, range(5, 26)))]})
    assert resp.status_code == 422
    assert resp.get_json()["budget"]["total"] == 55


def test_instances_times_topics_over_the_value_budget_is_422_naming_the_factors():
    client = make_client(MAX_EVALUATION_VALUES=1000, MAX_QUEUED_EVALUATION_VALUES=10_000)
    resp = client.post("/v1/evaluations", json={"run": run(40, 3), "qrels": qrels(40),
                                                "measures": [cutoffs(30)]})
    assert resp.status_code == 422 and resp.mimetype == PROBLEM
    body = resp.get_json()
    assert body["budget"] == {"name": "MAX_EVALUATION_VALUES", "limit": 1000, "total": 1200,
                              "factors": {"instances": 30, "topics": 40}}
    assert ("measures expand to 30 instances × 40 topics = 1,200 values, over "
            "MAX_EVALUATION_VALUES 1,000") in body["detail"]
    # within the queued budget: the way out is said
    assert "Prefer: respond-async" in body["detail"]
    assert "MAX_QUEUED_EVALUATION_VALUES 10,000" in body["detail"]


def test_the_topics_factor_is_the_topics_evaluated():
    # 40 run topics, 10 of them judged: 30 × 10 = 300 values, within 1,000
    client = make_client(MAX_EVALUATION_VALUES=1000)
    resp = client.post("/v1/evaluations", json={"run": run(40, 3), "qrels": qrels(10),
                                                "measures": [cutoffs(30)]})
    assert resp.status_code == 200
    assert len(resp.get_json()["per_topic"]) == 10
    # complete_topics: every judged topic is evaluated
    resp = client.post("/v1/evaluations", json={"run": run(5, 3), "qrels": qrels(40),
                                                "measures": [cutoffs(30)],
                                                "options": {"complete_topics": True}})
    assert resp.status_code == 422
    assert resp.get_json()["budget"]["factors"] == {"instances": 30, "topics": 40}


def test_at_the_value_budget_passes():
    client = make_client(MAX_EVALUATION_VALUES=1200)
    resp = client.post("/v1/evaluations", json={"run": run(40, 3), "qrels": qrels(40),
                                                "measures": [cutoffs(30)]})
    assert resp.status_code == 200
    assert resp.get_json()["aggregate"]["P_30"] == pytest.approx(1 / 30)


def test_a_queued_evaluation_over_the_instance_budget_is_refused_at_submission():
    client = make_client(MAX_MEASURE_INSTANCES=50)
    resp = client.post("/v1/evaluations", json={"run": run(2, 3), "qrels": qrels(2),
                                                "measures": [cutoffs(200)]}, headers=ASYNC)
    assert resp.status_code == 422
    assert resp.get_json()["budget"]["name"] == "MAX_MEASURE_INSTANCES"


def test_a_queued_evaluation_over_the_queued_budget_fails_with_the_same_problem():
    client = make_client(MAX_EVALUATION_VALUES=100, MAX_QUEUED_EVALUATION_VALUES=1000)
    body = {"run": run(40, 3), "qrels": qrels(40), "measures": [cutoffs(30)]}
    resp = client.post("/v1/evaluations", json=body, headers=ASYNC)
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "failed"
    problem = job["problem"]
    assert problem["status"] == 422 and problem["code"] == "over-budget"
    assert problem["detail"].startswith(
        "measures expand to 30 instances × 40 topics = 1,200 values, over "
        "MAX_QUEUED_EVALUATION_VALUES 1,000")
    assert list(problem["errors"]) == ["measures"]
    # within the queued budget, the same request queued runs (and is 422 synchronously)
    body["run"], body["qrels"] = run(30, 3), qrels(30)
    assert client.post("/v1/evaluations", json=body).status_code == 422
    resp = client.post("/v1/evaluations", json=body, headers=ASYNC)
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished"
    assert len(job["result"]["per_topic"]) == 30


def test_the_library_and_cli_have_no_budget_by_default():
    import cranfield

    ev = cranfield.evaluate(qrels(3), run(3, 3), [cutoffs(20_000)])
    assert len(ev.instances) == 20_000


# --------------------------------------------------------------------------------------------
# Pools: 40 runs × 20 topics × 5,000 documents, scaled down
# --------------------------------------------------------------------------------------------

def pool_body(n_runs: int, n_topics: int, n_docs: int, depth: int) -> dict:
    return {"runs": [{"name": f"r{i}", "run": run(n_topics, n_docs, shift=i)}
                     for i in range(n_runs)], "depth": depth}


def test_a_pool_over_the_work_budget_is_422_naming_the_factors():
    client = make_client(MAX_POOL_WORK=1000, MAX_QUEUED_POOL_WORK=100_000)
    resp = client.post("/v1/pools", json=pool_body(4, 5, 60, 100))
    assert resp.status_code == 422 and resp.mimetype == PROBLEM
    body = resp.get_json()
    assert body["type"].endswith("/work-over-budget")
    # documents: the depth (100) is more than any topic holds (60)
    assert body["budget"] == {"name": "MAX_POOL_WORK", "limit": 1000, "total": 1200,
                              "factors": {"runs": 4, "topics": 5, "documents": 60}}
    assert body["detail"].startswith("this pool is 4 runs × 5 topics × 60 documents = 1,200 "
                                     "rows, over MAX_POOL_WORK 1,000")
    assert "Prefer: respond-async" in body["detail"]
    assert list(body["errors"]) == ["runs"]
    # the depth is the factor when it is the smaller
    body = client.post("/v1/pools", json=pool_body(4, 5, 60, 51)).get_json()
    assert body["budget"]["factors"] == {"runs": 4, "topics": 5, "documents": 51}
    # at the budget: the pool
    resp = client.post("/v1/pools", json=pool_body(4, 5, 60, 50))
    assert resp.status_code == 200
    assert resp.get_json()["depth"] == 50


def test_a_pool_is_queued_above_the_async_threshold_and_equals_the_sync_answer():
    body = pool_body(3, 4, 30, 10)
    sync = make_client().post("/v1/pools", json=body)
    assert sync.status_code == 200
    client = make_client(ASYNC_THRESHOLD_BYTES=1000)
    resp = client.post("/v1/pools", json=body)
    assert resp.status_code == 202
    assert resp.get_json()["kind"] == "pool"
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished" and job["kind"] == "pool"
    assert job["result"] == sync.get_json()
    assert job["result"]["total"] == sum(job["result"]["sizes"].values()) > 0
    # as text: the judging file the synchronous pool answers
    text = client.get(resp.headers["Location"], headers={"Accept": "text/plain"})
    plain = make_client().post("/v1/pools", json=body, headers={"Accept": "text/plain"})
    assert text.status_code == 200 and text.data == plain.data
    page = client.get(resp.headers["Location"], headers={"Accept": "text/html"})
    assert page.status_code == 200 and b"at depth 10" in page.data


def test_a_queued_pool_over_its_budget_fails_with_the_same_problem():
    client = make_client(MAX_POOL_WORK=100, MAX_QUEUED_POOL_WORK=1000)
    body = pool_body(4, 5, 60, 100)
    sync = client.post("/v1/pools", json=dict(body, depth=100)).get_json()
    resp = client.post("/v1/pools", json=body, headers=ASYNC)
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "failed"
    problem = job["problem"]
    assert problem["status"] == 422 and problem["code"] == "over-budget"
    assert problem["detail"] == ("this pool is 4 runs × 5 topics × 60 documents = 1,200 rows, "
                                 "over MAX_QUEUED_POOL_WORK 1,000: pool fewer runs or topics, "
                                 "or a smaller depth")
    assert problem["errors"] == {"runs": [problem["detail"]]}
    assert sync["detail"].replace("MAX_POOL_WORK 100", "MAX_QUEUED_POOL_WORK 1,000") \
        .startswith(problem["detail"])


# --------------------------------------------------------------------------------------------
# The seen requests themselves, under the defaults
# --------------------------------------------------------------------------------------------

def test_seen_p_1_to_20000_is_refused_by_default_before_the_inputs_are_read():
    # issue #27, "Accepted, and far over any budget" 1: a 0.76 MB JSON evaluation with
    # "measures": ["P.1,2,…,20000"] was 200 after 59 s and a 250 MB answer
    client = make_client()
    resp = client.post("/v1/evaluations", json={"run": run(2000, 1), "qrels": qrels(2000),
                                                "measures": [cutoffs(20_000)]})
    assert resp.status_code == 422
    body = resp.get_json()
    assert body["budget"] == {"name": "MAX_MEASURE_INSTANCES", "limit": 10_000,
                              "total": 20_000, "factors": {"instances": 20_000}}


def test_seen_p_1_to_20000_over_2000_topics_names_the_values_and_their_factors():
    # the same request where the instances are allowed: the values are counted once the
    # topics are known, before any per-topic array
    client = make_client(MAX_MEASURE_INSTANCES=20_000)
    resp = client.post("/v1/evaluations", json={"run": run(2000, 1), "qrels": qrels(2000),
                                                "measures": [cutoffs(20_000)]})
    assert resp.status_code == 422
    body = resp.get_json()
    assert body["detail"].startswith(
        "measures expand to 20,000 instances × 2,000 topics = 40,000,000 values, over "
        "MAX_EVALUATION_VALUES 5,000,000")
    assert body["budget"]["factors"] == {"instances": 20_000, "topics": 2000}
    # over the queued budget too: no way out offered
    assert "respond-async" not in body["detail"]


def test_a_name_of_many_parameters_is_refused_unparsed():
    # "P.1,1,1,…" is one instance, but its parsing costs its length: refused by its
    # parameters (more than 4 × MAX_MEASURE_INSTANCES) before it is parsed
    client = make_client(MAX_MEASURE_INSTANCES=50)
    resp = client.post("/v1/evaluations", json={"run": run(2, 3), "qrels": qrels(2),
                                                "measures": ["P." + ",".join(["1"] * 201)]})
    assert resp.status_code == 422
    assert resp.get_json()["budget"] == {"name": "MAX_MEASURE_INSTANCES", "limit": 50,
                                         "total": 201, "factors": {"parameters": 201}}
    # 200 parameters: parsed, one instance, evaluated
    resp = client.post("/v1/evaluations", json={"run": run(2, 3), "qrels": qrels(2),
                                                "measures": ["P." + ",".join(["1"] * 200)]})
    assert resp.status_code == 200
    assert list(resp.get_json()["aggregate"]) == ["P_1"]
