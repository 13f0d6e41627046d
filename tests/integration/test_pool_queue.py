"""Pools on a real Redis with a real RQ worker (issue #27): a pool over the async threshold is
queued (it was answered in the web process whatever its size: 40 runs × 20 topics × 5,000
documents took 75 s and 1.6 GB there), its result equals the synchronous answer, and a pool
over MAX_QUEUED_POOL_WORK fails at once with the problem a synchronous pool over
MAX_POOL_WORK gets."""

from __future__ import annotations

import pytest
from servers import call, running_gunicorn, running_worker, wait_job

N_RUNS, N_TOPICS, N_DOCS = 6, 5, 40


def run(n_topics: int, n_docs: int, shift: int) -> str:
    """TREC text: ``n_topics`` topics of ``n_docs`` documents, each run ranking them
    differently (so the pool is a union)."""
    return "".join(f"q{t} Q0 d{(d + 7 * shift + t) % (2 * n_docs)} {d + 1} "
                   f"{n_docs - d} r{shift}\n" for t in range(n_topics) for d in range(n_docs))


def body(depth: int) -> dict:
    return {"runs": [{"name": f"r{i}", "run": run(N_TOPICS, N_DOCS, i)} for i in range(N_RUNS)],
            "depth": depth}


@pytest.fixture(scope="module")
def api(redis_server):
    # the body of body() is about 25 kB: over this threshold it is queued; the queued budget
    # lets depth 10 through (6 × 5 × 10 = 300) and not depth 40 (1,200)
    with running_gunicorn({"REDIS_URL": redis_server.url,
                           "CRANFIELD_ASYNC_THRESHOLD_BYTES": "4096",
                           "CRANFIELD_MAX_POOL_WORK": "1000",
                           "CRANFIELD_MAX_QUEUED_POOL_WORK": "1000"}) as url:
        yield url


@pytest.fixture(scope="module")
def sync_api():
    with running_gunicorn() as url:
        yield url


def test_a_pool_over_the_async_threshold_is_queued_and_equals_the_sync_answer(
        api, sync_api, redis_server):
    status, _, sync = call(sync_api, "POST", "/v1/pools", body(10))
    assert status == 200
    assert sync["depth"] == 10 and sync["runs"] == [f"r{i}" for i in range(N_RUNS)]
    assert sorted(sync["topics"]) == [f"q{t}" for t in range(N_TOPICS)]
    with running_worker(redis_server.url):
        status, headers, job = call(api, "POST", "/v1/pools", body(10))
        assert status == 202, job
        assert job["kind"] == "pool" and job["status"] == "queued"
        done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    assert done["kind"] == "pool"
    assert done["result"] == sync
    assert done["result"]["total"] == sum(done["result"]["sizes"].values()) > N_TOPICS * 10


def test_a_queued_pool_over_its_budget_fails_fast_with_the_same_problem(
        api, sync_api, redis_server):
    with running_gunicorn({"CRANFIELD_MAX_POOL_WORK": "1000"}) as small:
        status, _, refused = call(small, "POST", "/v1/pools", body(40))
    assert status == 422
    assert refused["budget"] == {"name": "MAX_POOL_WORK", "limit": 1000, "total": 1200,
                                 "factors": {"runs": N_RUNS, "topics": N_TOPICS,
                                             "documents": N_DOCS}}
    with running_worker(redis_server.url):
        status, headers, job = call(api, "POST", "/v1/pools", body(40))
        assert status == 202, job
        done = wait_job(api, headers["Location"])
    assert done["status"] == "failed", done
    problem = done["problem"]
    assert problem["status"] == 422 and problem["code"] == "over-budget"
    assert problem["detail"] == (f"this pool is {N_RUNS} runs × {N_TOPICS} topics × {N_DOCS} "
                                 "documents = 1,200 rows, over MAX_QUEUED_POOL_WORK 1,000: "
                                 "pool fewer runs or topics, or a smaller depth")
    assert refused["detail"].startswith(problem["detail"].replace(
        "MAX_QUEUED_POOL_WORK", "MAX_POOL_WORK"))
    # failed before any run was ranked: no result, inputs dropped
    assert "result" not in done
