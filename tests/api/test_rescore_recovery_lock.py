"""A re-score's recovery runs one poll at a time, at most once per interval (issue #31).

``GET /v1/rescores/{id}`` queues again the items whose jobs the queue lost
(``backend.rescoring.resume``). Every poll used to run it: two concurrent polls could both
queue the same lost item again, and each poll cost a read of every queued item's jobs. Now a
Redis lock (SET NX on the re-score's id) lets one poll at a time recover, and keeps the
recovery from running again within RESCORE_RECOVERY_INTERVAL seconds of its start; a poll
that does not get it reads the progress alone.

On a real redis-server (required under CI=true) and the app: a night recorded with its run
kept is re-scored while no worker runs, then Redis loses the queue. The recovery is held at
an event in the middle (its read of the queue) while a second poll comes: that one answers
the progress without recovering, and the lost item is queued again once. The interval and
its setting are checked the same way, on the lock's key and its expiry, never on the clock.
"""

from __future__ import annotations

import threading

import pytest
from conftest import ContractClient

from backend.config import APP_DEFAULTS, ConfigError, app_settings
from service.app import create_app

QUEUE_KEY = "rq:queue:cranfield"
V1 = {"q1": {"d1": 1}, "q2": {"d5": 1}}
V2 = {"q1": {"d1": 1, "d2": 1}, "q2": {"d5": 1, "d4": 1}}
NIGHT = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}}
WAIT_S = 60  # an event that does not come within this fails the test (never reached)


@pytest.fixture
def make_app(redis_server, redis_conn):
    made = []

    def make(**config):
        made.append(create_app({"TESTING": True, "REDIS_URL": redis_server.url, **config}))
        return made[-1]

    yield make
    for app in made:
        app.extensions["cranfield"].redis.close()


@pytest.fixture
def reads(monkeypatch):
    """Each recovery's read of the queue (``on_queue_many``), counted; ``hold`` makes the
    next one wait, once it has read, until ``release`` is set (``inside`` is set then)."""
    from backend import rescoring

    real = rescoring.on_queue_many
    spy = {"count": 0, "answers": [], "hold": False, "inside": threading.Event(),
           "release": threading.Event()}

    def on_queue_many(conn, job_ids):
        states = real(conn, job_ids)
        spy["count"] += 1
        spy["answers"].append(states)
        if spy["hold"]:
            spy["hold"] = False
            spy["inside"].set()
            assert spy["release"].wait(WAIT_S), "the test never released the recovery"
        return states

    monkeypatch.setattr(rescoring, "on_queue_many", on_queue_many)
    return spy


def _lost_rescore(client, redis_conn) -> tuple[str, str]:
    """(re-score id, its item's job id): a night re-scored under v2 while no worker ran,
    then the queue lost (Redis restarted empty; the job's record and the queue's list
    gone)."""
    assert client.put("/v1/qrels/adhoc", json={"qrels": V1}).status_code == 201
    resp = client.post("/v1/evaluations", json={
        "run": NIGHT, "qrels_id": "adhoc", "measures": ["map"],
        "record": {"system": "bm25", "label": "night-1", "keep_run": True}})
    assert resp.status_code == 200, resp.get_json()
    resp = client.put("/v1/qrels/adhoc", json={"qrels": V2})
    assert resp.status_code in (200, 201), resp.get_json()
    resp = client.post("/v1/systems/bm25/rescore",
                       json={"qrels_id": f"adhoc@{resp.get_json()['version']}"})
    assert resp.status_code == 202, resp.get_json()
    rescore_id = resp.get_json()["id"]
    job_id = f"rescore-{rescore_id}-0"
    assert redis_conn.lrange(QUEUE_KEY, 0, -1) == [job_id.encode()]
    redis_conn.flushall()
    return rescore_id, job_id


def _progress(client, rescore_id: str) -> dict:
    resp = client.get(f"/v1/rescores/{rescore_id}")
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert (doc["state"], doc["total"], doc["queued"], doc["done"]) == ("running", 1, 1, 0)
    return doc


def test_concurrent_polls_recover_once(make_app, redis_conn, reads):
    from backend.rescoring import RECOVERY_LOCK_S, recovery_key

    app = make_app()
    client = ContractClient(app.test_client())
    rescore_id, job_id = _lost_rescore(client, redis_conn)

    reads["hold"] = True
    first: dict = {}
    poll = threading.Thread(target=lambda: first.update(
        doc=_progress(ContractClient(app.test_client()), rescore_id)))
    poll.start()
    try:
        assert reads["inside"].wait(WAIT_S), "the first poll's recovery never read the queue"
        # the first poll's recovery has found the item lost and not queued it yet
        assert reads["answers"] == [[("lost", None)]]
        key = recovery_key(rescore_id)
        assert 0 < redis_conn.pttl(key) <= RECOVERY_LOCK_S * 1000  # freed should it die
        # a second poll meanwhile: the progress, no recovery of its own
        second = _progress(ContractClient(app.test_client()), rescore_id)
        assert second["items"][0]["state"] == "queued"
        assert reads["count"] == 1
        assert redis_conn.llen(QUEUE_KEY) == 0
    finally:
        reads["release"].set()
        poll.join(WAIT_S)
    assert not poll.is_alive()
    assert first["doc"]["queued"] == 1
    # the lost item queued again once
    assert redis_conn.lrange(QUEUE_KEY, 0, -1) == [job_id.encode()]
    assert reads["count"] == 1


def test_a_poll_within_the_interval_reads_the_progress_alone(make_app, redis_conn, reads):
    from backend.rescoring import recovery_key

    app = make_app(RESCORE_RECOVERY_INTERVAL=30)
    client = ContractClient(app.test_client())
    rescore_id, job_id = _lost_rescore(client, redis_conn)

    _progress(client, rescore_id)  # recovers: the item queued again
    assert reads["answers"] == [[("lost", None)]]
    assert redis_conn.lrange(QUEUE_KEY, 0, -1) == [job_id.encode()]
    # the lock, released, stays until the interval from the recovery's start is over
    key = recovery_key(rescore_id)
    assert 20_000 < redis_conn.pttl(key) <= 30_000

    # the queue loses the job again; polls within the interval do not look
    redis_conn.delete(f"rq:job:{job_id}", QUEUE_KEY)
    for _ in range(3):
        _progress(client, rescore_id)
    assert reads["count"] == 1
    assert redis_conn.llen(QUEUE_KEY) == 0

    redis_conn.delete(key)  # the interval is over (its key expired)
    _progress(client, rescore_id)
    assert reads["answers"] == [[("lost", None)], [("lost", None)]]
    assert redis_conn.lrange(QUEUE_KEY, 0, -1) == [job_id.encode()]
    # and, once queued, found pending by the next recovery (nothing queued twice)
    redis_conn.delete(key)
    _progress(client, rescore_id)
    assert reads["answers"][-1] == [("pending", None)]
    assert redis_conn.llen(QUEUE_KEY) == 1


def test_the_interval_is_a_setting():
    assert APP_DEFAULTS["RESCORE_RECOVERY_INTERVAL"] == 10
    assert app_settings(environ={})["RESCORE_RECOVERY_INTERVAL"] == 10
    assert app_settings(environ={"CRANFIELD_RESCORE_RECOVERY_INTERVAL": "45"})[
        "RESCORE_RECOVERY_INTERVAL"] == 45
    for bad in ("0", "-3", "soon"):
        with pytest.raises(ConfigError, match="CRANFIELD_RESCORE_RECOVERY_INTERVAL"):
            app_settings(environ={"CRANFIELD_RESCORE_RECOVERY_INTERVAL": bad})
