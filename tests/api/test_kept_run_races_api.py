"""Kept runs under concurrent deletes (issue #31, review R31b findings 1, 3, 4, 6): a delete
racing a recording never leaves a result naming a deleted run; a read under way is not cut
by a delete; a kept run is read a row group at a time. Each test runs on SQLite and on
PostgreSQL (conftest); the races are made deterministic by hooks, never by sleeping."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

import cranfield
from backend import kept_runs as kr
from backend.kept_runs import PARQUET_MEDIA_TYPE, KeptRuns
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


@pytest.fixture
def small(monkeypatch):
    """Kept runs of 64-row row groups cut into 256-byte chunks (results.test: 1,500 rows)."""
    monkeypatch.setattr(kr, "BATCH_ROWS", 64)
    monkeypatch.setattr(KeptRuns.__init__, "__kwdefaults__", {"chunk_bytes": 256})
    fetched: list[int] = []
    chunk = kr.ChunkFile.chunk

    def counting(self, seq):
        fetched.append(seq)
        return chunk(self, seq)

    monkeypatch.setattr(kr.ChunkFile, "chunk", counting)
    return fetched


def chunks_of(start: int, end: int, size: int) -> set[int]:
    return set(range(start // size, (end - 1) // size + 1))


def large_run() -> bytes:
    """20 topics of 1,000 documents, docids and scores that do not compress (about 0.3 MB
    of Parquet)."""
    import random

    rng = random.Random(31)
    return "".join(f"t{t:02d} Q0 d{rng.getrandbits(40):x} {r} {rng.random()!r} big\n"
                   for t in range(20) for r in range(1, 1001)).encode()


def test_a_kept_run_is_read_a_row_group_at_a_time(results_database, small, monkeypatch):
    monkeypatch.setattr(kr, "BATCH_ROWS", 1024)
    store = ResultStore(results_database)
    runs = KeptRuns(store, chunk_bytes=4096)
    digest = runs.keep(None, cranfield.read_run(large_run()))
    info = runs.info(None, digest)
    data = b"".join(runs.parquet_chunks(None, digest))
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    assert meta.num_row_groups == 20 and info["chunks"] == len(data) // 4096 + 1 > 60
    group = meta.row_group(0)
    columns = [group.column(i) for i in range(group.num_columns)]
    start = min(c.dictionary_page_offset or c.data_page_offset for c in columns)
    end = max((c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size
              for c in columns)
    # the magic, the first row group's chunks, and the file's last 64 KiB (pyarrow reads
    # that much at once to find the footer)
    allowed = (chunks_of(0, 4, 4096) | chunks_of(start, end, 4096)
               | chunks_of(len(data) - (64 << 10), len(data), 4096))
    whole = b"".join(runs.trec_chunks(None, digest))
    small.clear()
    stream = runs.trec_chunks(None, digest)
    first = next(stream)
    assert set(small) <= allowed and len(allowed) < info["chunks"] // 2
    assert first == whole[:len(first)] and first.count(b"\n") == 1024
    assert first + b"".join(stream) == whole
    assert len(set(small)) == info["chunks"]
    store.close()


def test_a_read_under_way_is_not_cut_by_a_delete(results_database, small):
    store = ResultStore(results_database)
    runs = KeptRuns(store)
    run = cranfield.read_run(RUN)

    def kept():
        result = runs.record_with_run(None, {"system": "s", "label": "a"}, dict(DOC), run)
        return result["id"], result["run_sha256"]

    result_id, digest = kept()
    text = b"".join(runs.trec_chunks(None, digest))
    data = b"".join(runs.parquet_chunks(None, digest))
    for reader, whole in ((runs.trec_chunks, text), (runs.parquet_chunks, data)):
        stream = reader(None, digest)
        first = next(stream)
        assert store.delete(None, result_id) is True and not runs.exists(None, digest)
        assert first + b"".join(stream) == whole  # the whole run, not a cut one
        result_id, digest = kept()
    # a re-score's read: the run deleted once its first chunk was fetched
    fetch = kr.ChunkFile.chunk
    deleted = []

    def deleting(self, seq):
        if not deleted:
            deleted.append(store.delete(None, result_id))
        return fetch(self, seq)

    kr.ChunkFile.chunk = deleting
    try:
        back = runs.read(None, digest)
    finally:
        kr.ChunkFile.chunk = fetch
    assert deleted == [True] and not runs.exists(None, digest)
    assert kr.canonical_sha256(back) == digest and len(back) == 1500
    assert (runs.count(), runs.count_chunks()) == (0, 0)
    store.close()


def test_a_parquet_download_is_whole_when_its_result_is_deleted(app, small):
    raw = app.test_client()
    resp = raw.post("/v1/evaluations", json={
        "run": RUN.decode(), "qrels": (DATA / "qrels.test").read_text(), "measures": ["map"],
        "record": {"system": "s", "label": "a", "keep_run": True}})
    assert resp.status_code == 200, resp.get_json()
    result_id = resp.get_json()["recorded"]["id"]
    digest = resp.get_json()["recorded"]["run_sha256"]
    stored = b"".join(KeptRuns(app.extensions["results"]).parquet_chunks(None, digest))
    download = raw.get(f"/v1/results/{result_id}/run", headers={"Accept": PARQUET_MEDIA_TYPE},
                       buffered=False)
    assert download.status_code == 200
    body = iter(download.response)
    first = next(body)
    assert raw.delete(f"/v1/results/{result_id}").status_code == 204
    assert raw.get(f"/v1/results/{result_id}/run").status_code == 404
    rest = b"".join(body)
    download.close()
    assert first + rest == stored and len(stored) == int(download.headers["Content-Length"])
    assert len(first) == 256 < len(stored)


def test_a_sharded_jobs_run_is_held_once_when_kept(monkeypatch):
    """R31b finding 5: a combine job's pieces are joined into one buffer as they are fetched,
    never all alive beside their join (traced by tracemalloc up to the parse)."""
    import tracemalloc

    from backend import tasks
    from backend.contract import CombineJob

    text = large_run()
    lines = text.splitlines(keepends=True)
    cuts = [0, 5000, 10000, 15000, 20000]
    pieces = {f"k{i}": b"".join(lines[a:b]).rstrip(b"\n") if i == 1 else b"".join(lines[a:b])
              for i, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False))}

    class Inputs:  # a fetched blob is a new bytes object, as Redis's are
        def get_blob(self, key):
            return bytes(bytearray(pieces[key]))

    job = CombineJob.__new__(CombineJob)
    job.shard_keys = list(pieces)
    seen = {}

    def read_run(data, name):
        seen["peak"] = tracemalloc.get_traced_memory()[1]
        seen["text"] = bytes(data)
        return name

    monkeypatch.setattr(tasks.cranfield, "read_run", read_run)
    tracemalloc.start()
    try:
        assert tasks._job_run(Inputs(), job) == "run"
    finally:
        tracemalloc.stop()
    assert seen["text"] == text  # the run, a newline after the piece that had none
    # held once (and one piece): the join beside all the pieces was twice the text
    assert seen["peak"] < 1.5 * len(text), (seen["peak"], len(text))


def test_kept_runs_no_result_names_are_swept(results_database, monkeypatch):
    """R31b finding 6: a run kept by a recording that then failed is deleted once it is
    ORPHAN_AGE_S old (by KeptRuns.sweep, at startup and after each delete); a run a result
    names never is."""
    import time

    store = ResultStore(results_database)
    runs = KeptRuns(store)
    named = runs.record_with_run(None, {"system": "s", "label": "a"}, dict(DOC),
                                 cranfield.read_run(RUN))
    orphan_run = cranfield.read_run(large_run())
    orphan = runs.keep(None, orphan_run)  # kept, then its recording failed
    chunks = runs.count_chunks()
    assert runs.count() == 2 and runs.sweep() == 0  # an hour has not passed
    assert runs.sweep(now=time.time() + kr.ORPHAN_AGE_S + 1) == 1
    assert not runs.exists(None, orphan) and runs.exists(None, named["run_sha256"])
    assert runs.count_chunks() == 1 < chunks
    # kept again (a late recording keeps it again), swept by the startup's upgrade
    assert runs.keep(None, orphan_run) == orphan and runs.count() == 2
    monkeypatch.setattr(kr, "ORPHAN_AGE_S", -1)
    store.upgrade()
    assert (runs.count(), runs.count_chunks()) == (1, 1)
    # ... and by a delete of another result
    other = runs.record_with_run(None, {"system": "s", "label": "b"}, dict(DOC),
                                 cranfield.read_run(RUN.replace(b"STANDARD", b"other")))
    runs.keep(None, orphan_run)
    assert runs.count() == 3
    assert store.delete(None, other["id"]) is True
    assert [runs.exists(None, d) for d in (named["run_sha256"], other["run_sha256"], orphan)] \
        == [True, False, False]
    store.close()


def test_a_run_deleted_under_every_recording_is_a_503_recording_nothing(app, monkeypatch):
    """R31b finding 6: KeptRunGone three times in a row was a LookupError, a 500."""
    from backend.kept_runs import KeptRunGone

    calls = []

    def gone(self, tenant, record, document, *, run_sha256=None, **kwargs):
        calls.append(run_sha256)
        raise KeptRunGone(run_sha256)

    monkeypatch.setattr(ResultStore, "record", gone)
    resp = app.test_client().post("/v1/evaluations", json={
        "run": RUN.decode(), "qrels": (DATA / "qrels.test").read_text(), "measures": ["map"],
        "record": {"system": "s", "label": "a", "keep_run": True}})
    problem = resp.get_json()
    assert resp.status_code == 503 and resp.mimetype == "application/problem+json"
    assert problem["status"] == 503 and "kept-run-gone" in (problem.get("kind") or
                                                            problem.get("type", ""))
    assert resp.headers["Retry-After"] == "1" and len(calls) == 3
    monkeypatch.undo()
    from sqlalchemy import func, select

    from backend.results import Result
    with app.extensions["results"].engine.connect() as connection:
        assert connection.scalar(select(func.count()).select_from(Result)) == 0
