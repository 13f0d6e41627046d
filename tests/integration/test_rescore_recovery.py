"""Losing Redis loses no re-score (issue #31), on real parts: gunicorn, a private
redis-server restarted empty, RQ workers in burst mode, the results database on SQLite and
on PostgreSQL.

A night is recorded with its run kept under qrels v1; v2 adds judgments; the night is
re-scored under v2, its kept run cut into two shards (SHARDS=2, SHARD_MIN_BYTES=1000). Redis
then restarts empty at each point a re-score's item can be at: its job queued (no worker
ran), its shards running (the job and one shard done), its combine step pending (both shards
done), and once with the job's own record put back as its worker saves it when Redis
restarted while it ran (done, its shards and combine step lost). Asking for the progress
queues the item again whole; a burst worker then re-scores it, once: the new result equals
average precision computed here by its definition under v2, and nothing is recorded twice.

A night recorded with stored topic metadata (segments, issue #28) is re-scored in shards with
that version of the metadata (not the id's latest): its segments equal an evaluation of the
same run under v2 with that version.

Workers stop after a given number of jobs (RQ's ``max_jobs``) and the test waits for their
exit: no clock is waited on.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from ap_by_definition import mean_ap
from servers import (
    CRANFIELD,
    JOB_TIMEOUT,
    ROOT,
    RedisServer,
    call,
    postgres_database,
    require_redis_server,
    running_gunicorn,
)

TOPICS = [f"t{i:02d}" for i in range(1, 31)]
DOCS = [f"d{i:02d}" for i in range(60)]
# three segments of ten topics, the last weighing 2
AREAS = {t: {"segments": [("a", "b", "c")[i // 10]], **({"weight": 2.0} if i >= 20 else {})}
         for i, t in enumerate(TOPICS)}
POINTS = ("queued", "shards-running", "combine-pending", "job-record-kept")
# a worker in burst mode that stops after N jobs (RQ's max_jobs), as ``cranfield worker``
# makes it
LIMITED_WORKER = """
import sys
from rq import Queue
from backend.contract import QUEUE
from backend.store import redis_client
from worker.cli import worker_class
conn = redis_client(sys.argv[1])
worker = worker_class()([Queue(QUEUE, connection=conn)], connection=conn)
worker.work(burst=True, max_jobs=int(sys.argv[2]))
"""


def _judgments() -> tuple[dict, dict]:
    rng = random.Random(31)
    v1, v2 = {}, {}
    for t in TOPICS:
        judged = rng.sample(DOCS, 12)
        v1[t] = {d: int(i < 4) for i, d in enumerate(judged[:10])}
        v2[t] = dict(v1[t], **{judged[10]: 1, judged[11]: 0})
    return v1, v2


def _run(night: int) -> dict:
    rng = random.Random(night)
    return {t: {d: round(rng.random(), 6) for d in rng.sample(DOCS, 25)} for t in TOPICS}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request, tmp_path_factory):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('recovery') / 'results.db'}"
        return
    with postgres_database("cranfield_rescore_recovery_") as url:
        if url is None:
            reason = "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)"
            if os.environ.get("CI") == "true":
                pytest.fail(f"required under CI=true: {reason}", pytrace=False)
            pytest.skip(f"requirement not met: {reason}")
        yield url


@pytest.fixture(scope="module")
def service(database):
    """gunicorn on a private Redis and the results database; qrels v1, one night per point
    recorded with its run kept (system ``s-POINT``) and one with stored topic metadata, then
    v2."""
    require_redis_server()
    redis = RedisServer()
    redis.start()
    env = {"REDIS_URL": redis.url, "CRANFIELD_DATABASE_URL": database,
           "CRANFIELD_SHARDS": "2", "CRANFIELD_SHARD_MIN_BYTES": "1000"}
    v1_qrels, v2_qrels = _judgments()
    try:
        with running_gunicorn(env) as api:
            status, _, v1 = call(api, "PUT", "/v1/qrels/team", {"qrels": v1_qrels})
            assert status in (200, 201), v1
            originals = {}
            for n, point in enumerate(POINTS):
                status, _, doc = call(api, "POST", "/v1/evaluations", {
                    "run": _run(n), "qrels_id": "team", "measures": ["map"],
                    "record": {"system": f"s-{point}", "label": "night", "keep_run": True}})
                assert status == 200, doc
                originals[point] = (n, doc["recorded"]["id"])
            status, _, put = call(api, "PUT", "/v1/topic-metadata/areas",
                                  {"topic_metadata": AREAS})
            assert status == 201, put
            areas = f"areas@{put['version']}"
            status, _, doc = call(api, "POST", "/v1/evaluations", {
                "run": _run(9), "qrels_id": "team", "measures": ["map", "P.10"],
                "topic_metadata_id": areas,
                "record": {"system": "s-segments", "label": "night", "keep_run": True}})
            assert status == 200 and doc["segments"], doc
            originals["segments"] = (9, doc["recorded"]["id"])
            status, _, put = call(api, "PUT", "/v1/topic-metadata/areas",
                                  {"topic_metadata": {t: {"segments": ["all"]} for t in TOPICS}})
            assert status == 201, put
            status, _, v2 = call(api, "PUT", "/v1/qrels/team", {"qrels": v2_qrels})
            assert status in (200, 201) and v2["version"] != v1["version"], v2
            yield {"api": api, "redis": redis, "database": database, "v2_qrels": v2_qrels,
                   "v2_ref": f"team@{v2['version']}", "originals": originals,
                   "areas": areas}
    finally:
        redis.stop()


def _worker(redis_url: str, database: str, max_jobs: int | None) -> None:
    """A burst worker run to its end: after ``max_jobs`` jobs, or (None) once the queue is
    empty (``cranfield worker --burst``)."""
    env = dict(os.environ, CRANFIELD_DATABASE_URL=database)
    argv = ([CRANFIELD, "worker", "--burst", "--redis-url", redis_url] if max_jobs is None
            else [sys.executable, "-c", LIMITED_WORKER, redis_url, str(max_jobs)])
    done = subprocess.run(argv, cwd=ROOT, env=env, timeout=JOB_TIMEOUT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def _status(connection, job_id: str) -> str | None:
    from rq.job import Job

    job = Job.fetch_many([job_id], connection=connection)[0]
    return None if job is None else job.get_status(refresh=False).value


@pytest.mark.parametrize("point", POINTS)
def test_redis_restarted_empty(service, point):
    import redis as redis_client
    from rq.job import Job

    api, redis, database = service["api"], service["redis"], service["database"]
    night, original_id = service["originals"][point]
    status, _, queued = call(api, "POST", f"/v1/systems/s-{point}/rescore",
                             {"qrels_id": service["v2_ref"]})
    assert status == 202, queued
    assert (queued["total"], queued["queued"]) == (1, 1), queued
    job_id = f"rescore-{queued['id']}-0"
    shards = [f"{job_id}-shard-0", f"{job_id}-shard-1"]
    combine = f"{job_id}-combine"
    connection = redis_client.Redis.from_url(redis.url)

    # bring the item to its point
    ran = {"queued": 0, "shards-running": 2, "combine-pending": 3, "job-record-kept": 1}[point]
    if ran:
        _worker(redis.url, database, ran)
    expected = {
        "queued": ("queued", None, None, None),
        "shards-running": ("finished", "finished", "queued", "deferred"),
        "combine-pending": ("finished", "finished", "finished", "queued"),
        "job-record-kept": ("finished", "queued", "queued", "deferred"),
    }[point]
    assert tuple(_status(connection, j) for j in (job_id, *shards, combine)) == expected
    if ran:
        assert Job.fetch(job_id, connection=connection).return_value() == {"shards": 2}
    kept = ({key: connection.dump(key) for key in (f"rq:job:{job_id}", f"rq:results:{job_id}")}
            if point == "job-record-kept" else {})
    assert all(kept.values())

    redis.stop()
    redis.start()  # the same port, nothing kept
    connection = redis_client.Redis.from_url(redis.url)
    for key, value in kept.items():  # the job's record, as its worker saves it back
        connection.restore(key, 0, value)
    if kept:
        assert _status(connection, job_id) == "finished"
        assert _status(connection, combine) is None

    status, _, after = call(api, "GET", f"/v1/rescores/{queued['id']}")
    assert status == 200, after
    assert (after["state"], after["queued"], after["done"]) == ("running", 1, 0), after
    # queued again whole: the re-score job, nothing else
    assert _status(connection, job_id) == "queued"
    assert connection.lrange("rq:queue:cranfield", 0, -1) == [job_id.encode()]
    status, _, again = call(api, "GET", f"/v1/rescores/{queued['id']}")
    assert (status, again["queued"]) == (200, 1)
    assert connection.llen("rq:queue:cranfield") == 1  # asking again queues nothing more

    _worker(redis.url, database, None)
    status, _, done = call(api, "GET", f"/v1/rescores/{queued['id']}")
    assert status == 200, done
    assert (done["state"], done["done"], done["failed"]) == ("finished", 1, 0), done
    [new_id] = done["new_result_ids"]
    assert Job.fetch(combine, connection=connection).return_value() == {"result_id": new_id}
    status, _, new = call(api, "GET", f"/v1/results/{new_id}")
    assert status == 200, new
    assert new["document"]["provenance"]["rescores"] == original_id
    assert new["qrels_version"] == service["v2_ref"]
    assert new["aggregate"]["map"] == pytest.approx(
        mean_ap(_run(night), service["v2_qrels"]), abs=1e-12)
    _, _, listed = call(api, "GET", f"/v1/systems/s-{point}/results")
    assert listed["total"] == 2  # the night and its one re-score


def test_segments_survive_a_sharded_rescore(service):
    api, redis, database = service["api"], service["redis"], service["database"]
    night, original_id = service["originals"]["segments"]
    status, _, queued = call(api, "POST", "/v1/systems/s-segments/rescore",
                             {"qrels_id": service["v2_ref"]})
    assert status == 202, queued
    _worker(redis.url, database, None)
    status, _, done = call(api, "GET", f"/v1/rescores/{queued['id']}")
    assert (done["state"], done["done"]) == ("finished", 1), done
    import redis as redis_client
    from rq.job import Job

    connection = redis_client.Redis.from_url(redis.url)
    job_id = f"rescore-{queued['id']}-0"
    assert Job.fetch(job_id, connection=connection).return_value() == {"shards": 2}
    _, _, new = call(api, "GET", f"/v1/results/{done['new_result_ids'][0]}")
    assert new["topic_metadata_version"] == service["areas"]
    assert new["document"]["provenance"]["shards"] == 2
    status, _, direct = call(api, "POST", "/v1/evaluations", {
        "run": _run(night), "qrels_id": service["v2_ref"], "measures": ["map", "P.10"],
        "topic_metadata_id": service["areas"]})
    assert status == 200, direct
    segments = new["document"]["segments"]
    assert set(segments) == {"a", "b", "c"}
    for label, seg in direct["segments"].items():
        assert segments[label]["topics"] == seg["topics"] == 10
        assert segments[label]["aggregate"] == pytest.approx(seg["aggregate"], abs=1e-12)
    v2 = service["v2_qrels"]
    assert segments["b"]["aggregate"]["map"] == pytest.approx(
        mean_ap(_run(night), {t: v2[t] for t in TOPICS[10:20]}), abs=1e-12)
    assert new["aggregate"]["map"] == pytest.approx(direct["aggregate"]["map"], abs=1e-12)


# where an item's jobs stand on RQ, table-driven: (the re-score job, its combine step, its
# shards), each a status or None (not in Redis), "failed:MESSAGE" a job failed for good
ON_QUEUE = [
    ((None, None, ()), ("lost", None)),
    (("queued", None, ()), ("pending", None)),
    (("started", None, ()), ("pending", None)),
    (("failed:ValueError: boom", None, ()), ("failed", "ValueError: boom")),
    (("canceled", None, ()), ("lost", None)),
    (("finished", None, ()), ("lost", None)),  # unsharded and done, or its combine lost
    (("finished", "queued", ("finished", "finished")), ("pending", None)),
    (("finished", "started", ("finished", "finished")), ("pending", None)),
    (("finished", "deferred", ("finished", "queued")), ("pending", None)),
    ((None, "deferred", ("started", "queued")), ("pending", None)),  # the job's result expired
    (("finished", "deferred", ("finished", None)), ("lost", None)),  # a shard lost
    (("finished", "deferred", ()), ("lost", None)),  # what it waits for lost
    (("finished", "deferred", ("failed:KeyError: 'q1'", "queued")), ("failed", "KeyError: 'q1'")),
    (("finished", "failed:RuntimeError: no", ("finished", "finished")),
     ("failed", "RuntimeError: no")),
    (("finished", "finished", ("finished", "finished")), ("lost", None)),  # the database says
]


@pytest.fixture(scope="module")
def bare_redis():
    require_redis_server()
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize(("jobs", "expected"), ON_QUEUE)
def test_on_queue(bare_redis, jobs, expected):
    import redis as redis_client
    from rq.job import Job
    from rq.results import Result

    from backend.rescoring import on_queue, on_queue_many

    connection = redis_client.Redis.from_url(bare_redis.url)
    connection.flushdb()
    first, combine, shards = jobs

    def make(job_id: str, status: str | None, depends_on=None) -> None:
        if status is None:
            return
        status, _, error = status.partition(":")
        job = Job.create("builtins.print", id=job_id, connection=connection,
                         depends_on=depends_on)
        job.save()
        job.set_status(status)
        if depends_on:
            job.register_dependency()
        if error:
            Result.create_failure(job, 60, f"Traceback (most recent call last):\n{error}\n")

    shard_ids = [f"r-0-shard-{i}" for i in range(len(shards))]
    for shard_id, status in zip(shard_ids, shards, strict=True):
        make(shard_id, status)
    make("r-0", first)
    make("r-0-combine", combine, depends_on=shard_ids or None)
    if combine == "deferred" and not shards:  # waits for shards no longer known
        connection.sadd(Job.fetch("r-0-combine", connection=connection).dependencies_key,
                        "r-0-shard-9")
    assert on_queue(connection, "r-0") == expected
    # several at once (one round trip for the jobs and combine steps), as GET reads them
    assert on_queue_many(connection, ["r-1", "r-0"]) == [("lost", None), expected]
