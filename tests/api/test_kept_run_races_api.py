"""Kept runs under concurrent deletes (issue #31, review R31b findings 1, 3, 4, 6): a delete
racing a recording never leaves a result naming a deleted run; a read under way is not cut
by a delete; a kept run is read a row group at a time. Each test runs on SQLite and on
PostgreSQL (conftest); the races are made deterministic by hooks, never by sleeping."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.exc import OperationalError

import cranfield
from backend.kept_runs import KeptRuns
from backend.results import ResultStore

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = (DATA / "results.test").read_bytes()
RESULTS_ON_POSTGRES = True
DOC = {"measures": [{"key": "map"}], "aggregate": {"map": 0.5}, "provenance": {}}


def impatient(url: str) -> ResultStore:
    """A store whose writes fail at once on a lock another transaction holds (SQLite's busy
    timeout 0, PostgreSQL's lock_timeout 1 ms) instead of waiting for it."""
    store = ResultStore(url)
    store.engine.dispose()

    @event.listens_for(store.engine, "connect")
    def _no_wait(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA busy_timeout=0" if store.engine.dialect.name == "sqlite"
                       else "SET lock_timeout = 1")
        cursor.close()
    return store


def test_a_delete_during_a_recording_never_leaves_it_naming_a_deleted_run(
        results_database, monkeypatch):
    store = ResultStore(results_database)
    runs = KeptRuns(store)
    run = cranfield.read_run(RUN)
    a = runs.record_with_run(None, {"system": "s", "label": "a"}, dict(DOC), run)
    digest = a["run_sha256"]
    other = impatient(results_database)
    lock = KeptRuns.lock
    outcome: list = []
    recorder = threading.current_thread()

    def delete_a():
        try:
            outcome.append(other.delete(None, a["id"]))
        except OperationalError as error:  # the recording holds the run's lock
            outcome.append(type(error).__name__)

    def locking(session, tenant, sha):
        pk = lock(session, tenant, sha)
        # B holds the run's lock (the delete's own release calls this too: not again)
        if not outcome and threading.current_thread() is recorder:
            thread = threading.Thread(target=delete_a)
            thread.start()
            thread.join()
        return pk

    monkeypatch.setattr(KeptRuns, "lock", staticmethod(locking))
    b = runs.record_with_run(None, {"system": "s", "label": "b"}, dict(DOC), run)
    monkeypatch.setattr(KeptRuns, "lock", staticmethod(lock))
    # the delete could not take the run from under B's recording: it failed on the lock
    assert outcome == ["OperationalError"]
    assert b["run_sha256"] == digest and runs.exists(None, digest)
    assert (runs.count(), runs.count_chunks()) == (1, 1)
    # afterwards A's delete keeps the run (B names it); B's delete takes it
    assert store.delete(None, a["id"]) is True
    assert runs.exists(None, digest) and runs.read(None, digest).runid == run.runid
    assert store.delete(None, b["id"]) is True
    assert (runs.count(), runs.count_chunks()) == (0, 0)
    other.close()
    store.close()
