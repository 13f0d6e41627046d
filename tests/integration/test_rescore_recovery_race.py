"""A re-score's recovery never queues again an item whose jobs are alive (issue #31).

``GET /v1/rescores/{id}`` asks RQ where each queued item's jobs stand
(``backend.rescoring.on_queue``) and queues again those it judges lost. A clean-clone CI run
once saw a night's re-score job run twice: the poll came in the window RQ (3.x) leaves
between the moment the last shard of a sharded re-score finishes and the moment its combine
step reaches the queue. The worker commits the shard's success and moves the combine step
from *deferred* to *ready_to_enqueue* (``ReadyJobRegistry``) in one transaction, then, in a
second step, pushes it onto the queue (status *queued*); a step that loses a race with
another writer leaves the job ready for a later maintenance pass. A combine step read as
*ready_to_enqueue* (a status that was not counted among those that will still run) made the
item "lost", and the re-score job was queued again while its combine step was about to
record the result.

Here the window is opened on purpose, on real parts: the app (``create_app``) on a private
redis-server and a SQLite results database, a night recorded with its run kept and
re-scored in two shards by RQ's ``SimpleWorker`` in this process, running the functions the
workers run. The worker is stopped at the event itself (RQ's call that pushes ready
dependents onto the queue, after the commit that made them ready) and the progress is asked
for there, as a client's poll would: the recovery runs, finds the item pending, queues
nothing; the job runs once and the combine step records the result once.

Statuses in which a job will still run are also read as such when RQ gives them to the job
itself, to its combine step or to a shard (``rate_limited``, ``ready_to_enqueue``), on jobs
made in exactly those states.
"""

from __future__ import annotations

import random

import pytest
from ap_by_definition import mean_ap

TOPICS = [f"t{i:02d}" for i in range(1, 31)]
DOCS = [f"d{i:02d}" for i in range(60)]


def _judgments() -> tuple[dict, dict]:
    rng = random.Random(31)
    v1, v2 = {}, {}
    for t in TOPICS:
        judged = rng.sample(DOCS, 12)
        v1[t] = {d: int(i < 4) for i, d in enumerate(judged[:10])}
        v2[t] = dict(v1[t], **{judged[10]: 1, judged[11]: 0})
    return v1, v2


def _run() -> dict:
    rng = random.Random(7)
    return {t: {d: round(rng.random(), 6) for d in rng.sample(DOCS, 25)} for t in TOPICS}


@pytest.fixture
def app(redis_server, redis_conn, tmp_path, monkeypatch):
    """The app on the private Redis, a night's re-score cut into two shards; the worker
    functions run in this process record in the same SQLite file (their store reopened)."""
    from backend import results_access
    from service.app import create_app

    monkeypatch.setenv("CRANFIELD_DATABASE_URL", f"sqlite:///{tmp_path / 'results.db'}")
    results_access.reset()
    made = create_app({"TESTING": True, "REDIS_URL": redis_server.url, "SHARDS": 2,
                       "SHARD_MIN_BYTES": 1000})
    yield made
    made.extensions["cranfield"].redis.close()
    results_access.reset()


def _night_queued_for_rescore(client) -> tuple[str, str, dict]:
    """(original result id, re-score id, v2 qrels) once a night recorded under v1 with its
    run kept is queued for re-scoring under v2 (no worker has run)."""
    v1, v2 = _judgments()
    resp = client.put("/v1/qrels/team", json={"qrels": v1})
    assert resp.status_code == 201, resp.get_json()
    resp = client.post("/v1/evaluations", json={
        "run": _run(), "qrels_id": "team", "measures": ["map"],
        "record": {"system": "search", "label": "night", "keep_run": True}})
    assert resp.status_code == 200, resp.get_json()
    original_id = resp.get_json()["recorded"]["id"]
    resp = client.put("/v1/qrels/team", json={"qrels": v2})
    assert resp.status_code in (200, 201), resp.get_json()
    resp = client.post("/v1/systems/search/rescore",
                       json={"qrels_id": f"team@{resp.get_json()['version']}"})
    assert resp.status_code == 202, resp.get_json()
    queued = resp.get_json()
    assert (queued["total"], queued["queued"]) == (1, 1), queued
    return original_id, queued["id"], v2


def _status(redis_conn, job_id: str) -> str | None:
    from rq.job import Job

    job = Job.fetch_many([job_id], connection=redis_conn)[0]
    return None if job is None else job.get_status(refresh=False).value


def test_a_poll_while_the_combine_step_is_ready_queues_nothing(app, redis_conn, monkeypatch):
    from rq import Queue, SimpleWorker
    from rq.job import Job

    from backend import rescoring
    from backend.contract import QUEUE

    client = app.test_client()
    original_id, rescore_id, v2 = _night_queued_for_rescore(client)
    job_id = f"rescore-{rescore_id}-0"
    combine = f"{job_id}-combine"
    queue_key = f"rq:queue:{QUEUE}"

    judged = []  # what each recovery found (on_queue_many's answers)
    real_on_queue_many = rescoring.on_queue_many

    def on_queue_many(conn, job_ids):
        states = real_on_queue_many(conn, job_ids)
        judged.append(states)
        return states

    monkeypatch.setattr(rescoring, "on_queue_many", on_queue_many)

    seen = {}  # the window, as the poll met it
    push_ready = Queue.enqueue_ready_jobs_by_queue

    def at_the_window(self, job_ids_by_queue_name):
        # the worker committed the last shard's success; the combine step is ready, not yet
        # on the queue: a client's poll comes now
        if combine in job_ids_by_queue_name.get(QUEUE, []) and not seen:
            seen["combine"] = _status(redis_conn, combine)
            seen["job"] = _status(redis_conn, job_id)
            seen["on_queue"] = rescoring.on_queue(redis_conn, job_id)
            before = len(judged)
            resp = client.get(f"/v1/rescores/{rescore_id}")
            assert resp.status_code == 200, resp.get_json()
            seen["progress"] = resp.get_json()
            seen["judged"] = judged[before:]
            seen["queue"] = redis_conn.lrange(queue_key, 0, -1)
        return push_ready(self, job_ids_by_queue_name)

    monkeypatch.setattr(Queue, "enqueue_ready_jobs_by_queue", at_the_window)

    worker = SimpleWorker([Queue(QUEUE, connection=redis_conn)], connection=redis_conn)
    worker.work(burst=True)

    assert seen, "the combine step never became ready"
    assert (seen["job"], seen["combine"]) == ("finished", "ready_to_enqueue")
    assert seen["on_queue"] == ("pending", None)
    # the poll's recovery ran, judged the item pending and queued nothing
    assert seen["judged"] == [[("pending", None)]]
    assert seen["queue"] == []
    assert (seen["progress"]["queued"], seen["progress"]["done"]) == (1, 0)

    # the job ran once (it cut the run in two shards), the combine step recorded the result
    resp = client.get(f"/v1/rescores/{rescore_id}")
    done = resp.get_json()
    assert (done["state"], done["done"], done["failed"]) == ("finished", 1, 0), done
    [new_id] = done["new_result_ids"]
    assert Job.fetch(job_id, connection=redis_conn).return_value() == {"shards": 2}
    assert Job.fetch(combine, connection=redis_conn).return_value() == {"result_id": new_id}
    assert redis_conn.llen(queue_key) == 0
    # each ran once (RQ keeps a result per run of a job id, a job queued again included)
    for ran in (job_id, f"{job_id}-shard-0", f"{job_id}-shard-1", combine):
        assert len(Job.fetch(ran, connection=redis_conn).results()) == 1, ran
    new = client.get(f"/v1/results/{new_id}").get_json()
    assert new["document"]["provenance"]["rescores"] == original_id
    assert new["aggregate"]["map"] == pytest.approx(mean_ap(_run(), v2), abs=1e-12)
    listed = client.get("/v1/systems/search/results").get_json()
    assert listed["total"] == 2  # the night and its one re-score


# (the re-score job, its combine step, its shards): statuses RQ gives a job that will still
# run; each reads as pending
ALIVE = [
    ("ready_to_enqueue", None, ()),
    ("rate_limited", None, ()),
    ("finished", "ready_to_enqueue", ("finished", "finished")),
    ("finished", "rate_limited", ("finished", "finished")),
    ("finished", "deferred", ("finished", "rate_limited")),
    ("finished", "deferred", ("ready_to_enqueue", "queued")),
]


@pytest.mark.parametrize("jobs", ALIVE)
def test_a_job_that_will_still_run_is_pending(redis_conn, jobs):
    from rq.job import Job

    from backend.rescoring import on_queue, on_queue_many

    first, combine, shards = jobs

    def make(job_id: str, status: str | None, depends_on=None) -> None:
        if status is None:
            return
        job = Job.create("builtins.print", id=job_id, connection=redis_conn,
                         depends_on=depends_on)
        job.save()
        job.set_status(status)
        if depends_on:
            job.register_dependency()

    shard_ids = [f"r-0-shard-{i}" for i in range(len(shards))]
    for shard_id, status in zip(shard_ids, shards, strict=True):
        make(shard_id, status)
    make("r-0", first)
    make("r-0-combine", combine, depends_on=shard_ids or None)
    assert on_queue(redis_conn, "r-0") == ("pending", None)
    assert on_queue_many(redis_conn, ["r-1", "r-0"]) == [("lost", None), ("pending", None)]


def test_every_rq_status_is_pending_or_ended():
    """Each status the installed RQ can give a job is read as one that will still run or one
    that is over: a status RQ adds (as 3.0 added ready_to_enqueue and rate_limited) fails
    here, not as items judged lost while their jobs run."""
    from rq.job import JobStatus

    from backend.rescoring import _ENDED, _PENDING

    assert not set(_PENDING) & set(_ENDED)
    assert {s.value for s in JobStatus} == set(_PENDING) | set(_ENDED)
