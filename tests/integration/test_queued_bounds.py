"""Queued pools and comparisons on a real Redis with a real RQ worker (issue #27): the
bounds a synchronous request is held to hold for the queued one, and the job fails, before
any work, with the problem the synchronous request gets. MAX_TOPICS and MAX_DOCS_PER_TOPIC
(413; they were not checked in the worker at all) for a pool's and a comparison's runs, and a
comparison's inline runs held to an evaluation's values budget (MAX_EVALUATION_VALUES here,
MAX_QUEUED_EVALUATION_VALUES in the job), and a sharded evaluation's run held to them as a
whole (its documents per topic by each shard, its topics by the combine step). One gunicorn:
without ``Prefer: respond-async`` it answers in process, with it the worker does."""

from __future__ import annotations

import pytest
from servers import call, running_gunicorn, running_worker, wait_job

ASYNC = {"Prefer": "respond-async"}
TOPICS, DOCS = 4, 3


@pytest.fixture(scope="module")
def api(redis_server):
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_MAX_TOPICS": str(TOPICS),
                           "CRANFIELD_MAX_DOCS_PER_TOPIC": str(DOCS),
                           "CRANFIELD_MAX_EVALUATION_VALUES": "10",
                           "CRANFIELD_MAX_QUEUED_EVALUATION_VALUES": "15",
                           # every queued TREC text run cut into 2 shards, combined
                           "CRANFIELD_SHARDS": "2", "CRANFIELD_SHARD_MIN_BYTES": "1"}) as url, \
            running_worker(redis_server.url):
        yield url


def run(n_topics: int = TOPICS, n_docs: int = DOCS, shift: int = 0) -> str:
    return "".join(f"q{t} Q0 d{(d + shift) % n_docs} {d + 1} {n_docs - d} r{shift}\n"
                   for t in range(n_topics) for d in range(n_docs))


QRELS = "".join(f"q{t} 0 d0 1\n" for t in range(TOPICS))


def same_problem(api: str, path: str, body: dict, status: int) -> tuple[dict, dict]:
    """(the synchronous answer's problem, the queued job's): the same status, title and
    errors."""
    code, _, sync = call(api, "POST", path, body)
    assert code == status, sync
    code, headers, job = call(api, "POST", path, body, headers=ASYNC)
    assert code == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "failed", done
    assert "result" not in done
    problem = done["problem"]
    assert problem["status"] == sync["status"] == status
    assert problem["title"] == sync["title"]
    return sync, problem


def test_a_queued_pool_run_over_max_topics_fails_with_the_sync_413(api):
    body = {"runs": [{"name": "a", "run": run()}, {"name": "b", "run": run(TOPICS + 1)}],
            "depth": 2}
    sync, problem = same_problem(api, "/v1/pools", body, 413)
    assert problem["detail"] == sync["detail"] == "runs[1].run: 5 topics exceed the limit of 4"
    assert problem["errors"] == sync["errors"] == {"runs[1].run": ["at most 4 topics"]}


def test_a_queued_comparison_topic_over_max_docs_fails_with_the_sync_413(api):
    body = {"runs": [{"run": run(n_docs=DOCS + 1)}, {"run": run(shift=1)}], "qrels": QRELS,
            "measures": ["map"], "tests": ["t"]}
    sync, problem = same_problem(api, "/v1/comparisons", body, 413)
    assert problem["detail"] == sync["detail"] == \
        "runs[0].run: topic 'q0' has 4 documents; the limit is 3"
    assert problem["errors"] == sync["errors"] == {
        "runs[0].run.q0": ["at most 3 documents per topic"]}


def test_a_queued_comparison_over_the_queued_values_budget_fails_with_the_same_problem(api):
    # 4 instances × 4 topics = 16 values: over 10 here and over 15 queued
    body = {"runs": [{"run": run()}, {"run": run(shift=1)}], "qrels": QRELS,
            "measures": ["P.1,2,3,4"], "tests": ["t"]}
    sync, problem = same_problem(api, "/v1/comparisons", body, 422)
    assert sync["budget"] == {"name": "MAX_EVALUATION_VALUES", "limit": 10, "total": 16,
                              "factors": {"instances": 4, "topics": 4}}
    assert problem["code"] == "over-budget"
    assert problem["detail"] == (
        "runs[0] ('run1'): measures expand to 4 instances × 4 topics = 16 values, over "
        "MAX_QUEUED_EVALUATION_VALUES 15: ask for fewer cutoffs or measures, or evaluate "
        "fewer topics")
    assert sync["detail"].startswith(problem["detail"].replace(
        "MAX_QUEUED_EVALUATION_VALUES 15", "MAX_EVALUATION_VALUES 10").split(": ask")[0])
    # 3 instances × 4 topics = 12: over the synchronous budget, within the queued one
    body["measures"] = ["P.1,2,3"]
    code, _, sync = call(api, "POST", "/v1/comparisons", body)
    assert code == 422 and "Prefer: respond-async" in sync["detail"]
    code, headers, job = call(api, "POST", "/v1/comparisons", body, headers=ASYNC)
    assert code == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    assert [m["key"] for m in done["result"]["measures"]] == ["P_1", "P_2", "P_3"]
    assert len(done["result"]["topics"]) == TOPICS


@pytest.mark.parametrize(("run_text", "qrels_text", "field"), [
    (run(TOPICS + 2), QRELS, "run"),  # 3 topics in each shard: only the whole is over
    (run(n_docs=DOCS + 1), QRELS, "run.q0"),
    (run(), QRELS + "q4 0 d0 1\n", "qrels"),
], ids=["topics", "docs", "qrels"])
def test_a_sharded_evaluation_over_a_limit_fails_with_the_sync_413(api, run_text, qrels_text,
                                                                    field):
    body = {"run": run_text, "qrels": qrels_text, "measures": ["map"]}
    sync, problem = same_problem(api, "/v1/evaluations", body, 413)
    assert list(sync["errors"]) == [field]
    assert problem["detail"] == sync["detail"] and problem["errors"] == sync["errors"]


def test_a_sharded_evaluation_at_the_limits_finishes_as_the_sync_answer(api):
    body = {"run": run(), "qrels": QRELS, "measures": ["map"]}
    code, _, sync = call(api, "POST", "/v1/evaluations", body)
    assert code == 200, sync
    code, headers, job = call(api, "POST", "/v1/evaluations", body, headers=ASYNC)
    assert code == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    assert done["result"]["provenance"]["shards"] == 2
    assert done["result"]["aggregate"] == sync["aggregate"]
