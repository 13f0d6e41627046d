"""A finished job's result in the format asked (issue #25): ``GET /v1/jobs/{id}`` with
``Accept: text/plain`` or ``text/csv`` answers what the synchronous ``POST`` answers, byte for
byte (a differential over measure sets and per-topic on and off), so a client never sends the
run again to get text; before the job ends, 409. Every job reports ``progress`` (stage,
topics done of total), comparisons too. Responses are checked against openapi.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import finished_job

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = (DATA / "results.test").read_text()
QRELS = (DATA / "qrels.test").read_text()
ASYNC = {"Prefer": "respond-async"}


def _sync_and_queued(client, body: dict, accept: str) -> tuple[bytes, bytes, dict]:
    sync = client.post("/v1/evaluations", json=body, headers={"Accept": accept})
    assert sync.status_code == 200, sync.get_data(as_text=True)
    queued = client.post("/v1/evaluations", json=body, headers=ASYNC)
    assert queued.status_code == 202
    job = finished_job(client, queued.headers["Location"])
    assert job["status"] == "finished", job
    text = client.get(queued.headers["Location"], headers={"Accept": accept})
    assert text.status_code == 200 and text.mimetype == accept
    return sync.get_data(), text.get_data(), job


@pytest.mark.parametrize("accept", ["text/plain", "text/csv"])
@pytest.mark.parametrize("measures", [None, ["all_trec"], ["map", "P.5,10", "relstring",
                                                           "ndcg_cut.10", "gm_map"]])
@pytest.mark.parametrize("per_topic", [True, False])
def test_a_queued_result_as_text_is_the_sync_answer_byte_for_byte(client, accept, measures,
                                                                  per_topic):
    body = {"run": RUN, "qrels": QRELS, "measures": measures, "per_topic": per_topic}
    sync, queued, _ = _sync_and_queued(client, body, accept)
    assert queued == sync
    assert len(sync) > 100


@pytest.mark.parametrize("per_topic", [None, False, True])
def test_queued_as_text_plain_follows_the_sync_rule_for_per_topic(client, per_topic):
    """Issue #26: text/plain is the summary unless per_topic is asked for (like cranfield
    eval without -q), queued or not: a job POSTed as text/plain keeps what its request
    meant, and its text is the synchronous answer, names as trec_eval prints them."""
    body = {"run": RUN, "qrels": QRELS, "measures": ["nDCG@10", "map"],
            **({} if per_topic is None else {"per_topic": per_topic})}
    sync = client.post("/v1/evaluations", json=body, headers={"Accept": "text/plain"})
    queued = client.post("/v1/evaluations", json=body,
                         headers={"Accept": "text/plain", **ASYNC})
    assert queued.status_code == 202
    job = finished_job(client, queued.headers["Location"])
    assert ("per_topic" in job["result"]) is bool(per_topic)
    text = client.get(queued.headers["Location"], headers={"Accept": "text/plain"})
    assert text.get_data() == sync.get_data()
    summary = b"map                   \tall\t0.1785\nndcg_cut_10           \tall\t0.3016\n"
    if per_topic:
        assert text.get_data().endswith(summary) and text.get_data().count(b"\n") == 8
    else:
        assert text.get_data() == summary


def test_a_job_queued_as_json_prints_the_per_topic_values_its_result_holds(client):
    """A job keeps what its POST asked: as JSON, per_topic not given is true, so the
    job's result holds per-topic values and its text prints them (-q's text); a job
    POSTed as text/plain without per_topic holds the summary only (above)."""
    body = {"run": RUN, "qrels": QRELS, "measures": ["map"]}
    queued = client.post("/v1/evaluations", json=body, headers=ASYNC)
    job = finished_job(client, queued.headers["Location"])
    assert "per_topic" in job["result"]
    text = client.get(queued.headers["Location"], headers={"Accept": "text/plain"})
    sync = client.post("/v1/evaluations", json=dict(body, per_topic=True),
                       headers={"Accept": "text/plain"})
    assert text.get_data() == sync.get_data() and sync.get_data().count(b"\n") == 4


def test_a_recorded_queued_result_as_text_names_the_result(client):
    body = {"run": RUN, "qrels": QRELS, "measures": ["map"], "per_topic": False,
            "record": {"system": "fmt", "label": "n1"}}
    sync, queued, job = _sync_and_queued(client, body, "text/plain")
    assert sync == queued == b"map                   \tall\t0.1785\n"
    again = client.get(f"/v1/jobs/{job['id']}", headers={"Accept": "text/plain"})
    assert again.headers["Cranfield-Result-Id"] == job["result"]["recorded"]["id"]
    listed = client.get("/v1/systems/fmt/results").get_json()["items"]
    assert {r["id"] for r in listed} >= {job["result"]["recorded"]["id"]}


def test_sync_text_answer_of_a_recorded_evaluation_carries_its_id(client):
    resp = client.post("/v1/evaluations", json={
        "run": RUN, "qrels": QRELS, "measures": ["map"],
        "record": {"system": "fmt-sync", "label": "n1"}}, headers={"Accept": "text/csv"})
    assert resp.status_code == 200
    [item] = client.get("/v1/systems/fmt-sync/results").get_json()["items"]
    assert resp.headers["Cranfield-Result-Id"] == item["id"]


def test_unfinished_job_as_text_is_409(app, client):
    backend = app.extensions["cranfield"]
    job_id = "f" * 32
    with backend._lock:  # a job that never runs: as the queue shows one still waiting
        backend._jobs[job_id] = {"id": job_id, "status": "queued", "kind": "evaluation",
                                 "created_at": 0.0, "tenant": None}
    resp = client.get(f"/v1/jobs/{job_id}", headers={"Accept": "text/plain"})
    assert resp.status_code == 409
    problem = resp.get_json()
    assert problem["type"].endswith("/job-not-finished")
    assert problem["errors"] == {"status": ["is queued, not finished"]}
    state = client.get(f"/v1/jobs/{job_id}").get_json()
    assert state["progress"] == {"stage": "queued", "topics_done": 0, "topics_total": None}


def test_a_finished_evaluation_reports_its_topics(client):
    queued = client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS,
                                                  "measures": ["map"]}, headers=ASYNC)
    job = finished_job(client, queued.headers["Location"])
    assert job["progress"] == {"stage": "done", "topics_done": 3, "topics_total": 3}


def test_a_comparison_job_reports_progress_and_renders_as_text(client):
    other = "".join(line.replace("1.0", "2.0") for line in RUN.splitlines(keepends=True))
    body = {"runs": [{"name": "a", "run": RUN}, {"name": "b", "run": other}],
            "qrels": QRELS, "measures": ["map"], "permutations": 100,
            "bootstrap_samples": 100}
    sync = client.post("/v1/comparisons", json=body, headers={"Accept": "text/plain"})
    queued = client.post("/v1/comparisons", json=body, headers=ASYNC)
    job = finished_job(client, queued.headers["Location"])
    assert job["status"] == "finished"
    assert job["progress"] == {"stage": "done", "topics_done": 0, "topics_total": None,
                               "runs_done": 2, "runs_total": 2}
    text = client.get(queued.headers["Location"], headers={"Accept": "text/plain"})
    assert text.get_data() == sync.get_data()
    csv = client.get(queued.headers["Location"], headers={"Accept": "text/csv"})
    assert csv.status_code == 406


def test_a_progress_note_redis_cannot_take_does_not_fail_the_job(caplog):
    """worker.jobs' progress reporter: Redis refusing the note (a blip during the job) is
    logged; the job goes on to its result (the note raised out of backend.tasks.execute
    before it recorded the result, losing the evaluation)."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    from worker.jobs import _reporter

    class Job:
        id, meta, saved = "f" * 32, {}, 0

        def save_meta(self):
            type(self).saved += 1
            if type(self).saved == 2:
                raise RedisConnectionError("Connection refused")

    job = Job()
    report = _reporter(job)
    report(stage="evaluating", topics_total=3)
    report(stage="recording")  # Redis down for this one
    report(stage="done")
    assert job.meta["progress"] == {"stage": "done", "topics_total": 3}
    assert Job.saved == 3
    assert any(getattr(r, "event", None) == "progress_not_saved" for r in caplog.records)
