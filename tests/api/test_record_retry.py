"""A queued job's record rides out a results-database outage (issue #25): retried with
exponential backoff for up to CRANFIELD_DB_RETRY_S, recorded exactly once by the job's id,
failed with a 503 problem when the database stays down; a synchronous record fails 503 at
once (never 500). The live outage (PostgreSQL behind a proxy that refuses connections) is
tests/integration/test_nightly_faults.py."""

from __future__ import annotations

import logging

import pytest
from conftest import ContractClient, finished_job
from sqlalchemy import func, select
from sqlalchemy.exc import DataError, IntegrityError, InterfaceError, OperationalError

from backend.config import ConfigError, db_retry_seconds, worker_settings
from backend.results import GateVerdict, Result, ResultStore
from backend.tasks import (
    DatabaseUnavailable,
    transient_database_error,
    with_database_retry,
)
from service.app import create_app

RESULTS_ON_POSTGRES = True  # the store's idempotency is checked on SQLite and PostgreSQL

RUN = {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {"d4": 2.0, "d5": 1.0}}
QRELS = {"q1": {"d1": 1}, "q2": {"d5": 2}}


def _refused() -> OperationalError:
    return OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))


class FakeClock:
    """time.monotonic and time.sleep of a test: sleeping moves the clock."""

    def __init__(self):
        self.now = 0.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


# -- the retry ------------------------------------------------------------------------------

def test_transient_errors_are_the_connections_not_the_data():
    assert transient_database_error(_refused())
    assert transient_database_error(InterfaceError("SELECT 1", {}, Exception("closed")))
    assert not transient_database_error(IntegrityError("INSERT", {}, Exception("unique")))
    assert not transient_database_error(DataError("INSERT", {}, Exception("too long")))
    assert not transient_database_error(ValueError("record.label"))


def test_retries_back_off_exponentially_within_the_budget_then_succeed(caplog):
    fake, calls = FakeClock(), []

    def action():
        calls.append(fake.now)
        if fake.now < 5.0:  # the database is down for the first 5 s
            raise _refused()
        return "recorded"

    with caplog.at_level(logging.WARNING, logger="cranfield.jobs"):
        assert with_database_retry(action, 30, "record the result", job_id="j1",
                                   sleep=fake.sleep, clock=fake.clock) == "recorded"
    # each pause at most twice the one before (jitter: 0.5-1x of 0.1 s doubling), at most 2 s
    assert len(fake.pauses) == len(calls) - 1 >= 5
    assert all(p <= 2.0 for p in fake.pauses)
    nominal = [min(0.1 * 2 ** i, 2.0) for i in range(len(fake.pauses))]
    assert all(n / 2 <= p <= n for p, n in zip(fake.pauses, nominal, strict=True))
    assert calls[-1] - 5.0 <= 2.0  # found back within one capped pause of the outage's end
    retries = [r for r in caplog.records if getattr(r, "event", None) == "db_retry"]
    assert len(retries) == len(fake.pauses)
    assert retries[0].job_id == "j1" and retries[0].error == "OperationalError"


def test_a_database_down_past_the_budget_is_a_503_problem():
    fake, calls = FakeClock(), []

    def action():
        calls.append(fake.now)
        raise _refused()

    with pytest.raises(DatabaseUnavailable) as info:
        with_database_retry(action, 3, "record the result", sleep=fake.sleep,
                            clock=fake.clock)
    assert 3.0 <= fake.now <= 3.0 + 1e-9  # the last pause is cut to what is left
    problem = info.value.problem
    assert problem["status"] == 503
    assert problem["detail"].startswith("could not record the result: the results database "
                                        "was unreachable for 3 s")


def test_an_integrity_error_is_not_retried():
    fake, calls = FakeClock(), []

    def action():
        calls.append(1)
        raise IntegrityError("INSERT", {}, Exception("unique"))

    with pytest.raises(IntegrityError):
        with_database_retry(action, 30, "record the result", sleep=fake.sleep,
                            clock=fake.clock)
    assert calls == [1] and fake.pauses == []


# -- the setting ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, seconds", [(None, 30.0), ("", 30.0), ("0", 0.0),
                                           ("2.5", 2.5), ("120", 120.0)])
def test_db_retry_setting(text, seconds):
    env = {} if text is None else {"CRANFIELD_DB_RETRY_S": text}
    assert db_retry_seconds(env) == seconds
    assert worker_settings(env).db_retry_s == seconds


@pytest.mark.parametrize("text", ["soon", "-1", "inf", "nan"])
def test_a_bad_db_retry_setting_stops_start_up(text):
    with pytest.raises(ConfigError, match="CRANFIELD_DB_RETRY_S must be a number of seconds"):
        db_retry_seconds({"CRANFIELD_DB_RETRY_S": text})


# -- the store: once per job id -----------------------------------------------------------------

def _document(store_app) -> dict:
    client = ContractClient(store_app.test_client())
    return client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS,
                                                "measures": ["map"]}).get_json()


@pytest.fixture
def app():
    return create_app({"TESTING": True})


def _count(store: ResultStore, model, *where) -> int:
    with store.sessions() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where))


def test_a_job_records_once_however_often_it_is_asked(app):
    store: ResultStore = app.extensions["results"]
    doc = _document(app)
    record = {"system": "bm25", "label": "night-1"}
    first = store.record(None, record, doc, job_id="job-1")
    again = store.record(None, {"system": "bm25", "label": "night-1"}, doc, job_id="job-1")
    assert again == first
    assert store.recorded_by_job(None, "job-1") == first
    assert _count(store, Result, Result.job_id == "job-1") == 1
    # another tenant's job of the same id is its own; results without a job id are many
    other = store.record("acme", record, doc, job_id="job-1")
    assert other["id"] != first["id"]
    store.record(None, record, doc)
    store.record(None, record, doc)
    assert _count(store, Result) == 4


def test_a_commit_lost_on_the_way_back_is_found_by_the_retry(app, monkeypatch):
    """The first attempt commits, then its connection drops before it hears so (the
    ambiguous case): the retry finds the job's result rather than inserting a second."""
    store: ResultStore = app.extensions["results"]
    doc = _document(app)
    real, attempts = store.record, []

    def lost_reply(*args, **kwargs):
        attempts.append(1)
        summary = real(*args, **kwargs)
        if len(attempts) == 1:
            raise _refused()
        return summary

    monkeypatch.setattr(store, "record", lost_reply)
    fake = FakeClock()
    summary = with_database_retry(
        lambda: store.record(None, {"system": "s", "label": "l"}, doc, job_id="job-2"),
        30, "record the result", sleep=fake.sleep, clock=fake.clock)
    assert len(attempts) == 2
    assert _count(store, Result, Result.job_id == "job-2") == 1
    assert summary["id"] == store.recorded_by_job(None, "job-2")["id"]


def test_a_queued_comparison_keeps_one_verdict_per_result(app):
    store: ResultStore = app.extensions["results"]
    result = store.record(None, {"system": "s", "label": "l"}, _document(app))
    for _ in range(2):
        assert store.record_verdict(None, result["id"], "pass", [], job_id="cmp-1") is True
    assert store.record_verdict(None, result["id"], "fail", []) is True  # no job: kept too
    with store.sessions() as session:
        verdicts = session.scalars(select(GateVerdict.verdict).order_by(GateVerdict.pk)).all()
    assert verdicts == ["pass", "fail"]


# -- through the API --------------------------------------------------------------------------

def _queued_record(client, label: str) -> dict:
    resp = client.post("/v1/evaluations", json={
        "run": RUN, "qrels": QRELS, "measures": ["map"],
        "record": {"system": "bm25", "label": label}}, headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    return finished_job(client, resp.headers["Location"])


def test_a_queued_record_rides_out_an_outage_and_is_recorded_once(app, monkeypatch):
    """The embedded queue's job: the first two attempts find the database down, the third
    commits but loses the reply, the fourth finds what the third recorded."""
    store: ResultStore = app.extensions["results"]
    client = ContractClient(app.test_client())
    real, attempts = store.record, []

    def flaky(*args, **kwargs):
        attempts.append(kwargs.get("job_id"))
        if len(attempts) <= 2:
            raise _refused()
        summary = real(*args, **kwargs)
        if len(attempts) == 3:
            raise _refused()
        return summary

    monkeypatch.setattr(store, "record", flaky)
    job = _queued_record(client, "night-1")
    assert job["status"] == "finished", job
    assert len(attempts) == 4 and attempts[0] == job["id"] and len(set(attempts)) == 1
    recorded = job["result"]["recorded"]
    assert _count(store, Result) == 1
    assert store.recorded_by_job(None, job["id"])["id"] == recorded["id"]
    got = client.get(f"/v1/results/{recorded['id']}").get_json()
    assert got["label"] == "night-1"


def test_a_queued_record_fails_503_when_the_database_stays_down(app, monkeypatch):
    monkeypatch.setenv("CRANFIELD_DB_RETRY_S", "0.5")
    store: ResultStore = app.extensions["results"]
    client = ContractClient(app.test_client())
    attempts = []

    def down(*args, **kwargs):
        attempts.append(1)
        raise _refused()

    monkeypatch.setattr(store, "record", down)
    job = _queued_record(client, "night-1")
    assert job["status"] == "failed"
    assert job["problem"]["status"] == 503
    assert job["problem"]["detail"].startswith("could not record the result")
    assert len(attempts) >= 3  # retried, not given up at once
    assert _count(store, Result) == 0


def test_a_synchronous_record_while_the_database_is_down_is_503_not_500(app):
    """A store on a port where nothing listens: connection refused, as in an outage."""
    import socket

    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = ResultStore(f"postgresql+psycopg://postgres@127.0.0.1:{port}/cranfield")
    app.extensions["results"] = app.extensions["cranfield"].results = down
    client = ContractClient(app.test_client())
    try:
        resp = client.post("/v1/evaluations", json={
            "run": RUN, "qrels": QRELS, "measures": ["map"],
            "record": {"system": "bm25", "label": "night-1"}})
        assert resp.status_code == 503
        assert resp.mimetype == "application/problem+json"
        assert resp.get_json()["detail"] == "the database is unreachable; retry shortly"
        assert client.get("/v1/systems").status_code == 503
    finally:
        down.close()


@pytest.mark.parametrize("error, status", [
    (InterfaceError("SELECT 1", {}, Exception("the connection is closed")), 503),
    (DataError("SELECT 1", {}, Exception("invalid input"), connection_invalidated=True), 503),
    (DataError("SELECT 1", {}, Exception("invalid input")), 500),
])
def test_a_connection_dropped_mid_request_is_503_and_a_data_error_is_not(
        app, monkeypatch, error, status):
    """A connection lost in the middle of a request reaches the route as an InterfaceError
    (or any error with the connection invalidated): the database is unavailable, 503, as when
    it refuses connections. Any other database error is a bug (500), not an outage."""
    store = app.extensions["results"]

    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr(store, "systems", fails)
    resp = app.test_client().get("/v1/systems")
    assert resp.status_code == status and resp.mimetype == "application/problem+json"
    if status == 503:
        assert resp.headers["Retry-After"] == "5"
        assert resp.get_json()["detail"] == "the database is unreachable; retry shortly"
