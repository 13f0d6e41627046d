"""Stored qrels survive restarts (issue #25), in real processes.

(a) The embedded service as ``make run`` starts it (``cranfield serve``, no Redis, the
SQLite file in its data folder): qrels put and a result recorded, the whole process group
killed (SIGKILL) and started again: the qrels' versions and the result are there, and an
evaluation by ``qrels_id`` gives the same numbers.

(b) With Redis (gunicorn and ``cranfield worker`` on a private redis-server, the results
database on SQLite and on PostgreSQL): qrels put, night 1 queued; FLUSHALL, and a new worker
whose memory holds nothing: night 2 queued gives the same aggregate and the same
qrels_version, the worker having read the qrels from the database. Qrels an earlier version
kept in Redis alone (written there before the service starts) are imported at start and
survive the FLUSHALL too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from servers import (
    CRANFIELD,
    DATA,
    ROOT,
    call,
    free_port,
    running_gunicorn,
    running_worker,
    wait_healthy,
    wait_job,
)

import cranfield

QRELS_TEXT = (DATA / "qrels.test").read_text()
RUN_TEXT = (DATA / "results.test").read_text()
MEASURES = ["map", "ndcg_cut.10", "P.10", "recip_rank"]
EXPECTED = cranfield.evaluate(str(DATA / "qrels.test"), str(DATA / "results.test"),
                              MEASURES).aggregate


# -- (a) the embedded service ---------------------------------------------------------------

def serve(port: int, data_dir: Path, log: Path) -> subprocess.Popen:
    """``cranfield serve`` as ``make run`` starts it: no Redis, no database URL (the SQLite
    file in CRANFIELD_DATA_DIR), in a process group of its own (to be killed whole)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "CRANFIELD_REDIS_URL", "CRANFIELD_DATABASE_URL",
                        "CRANFIELD_WORKERS")}
    env.update(CRANFIELD_DATA_DIR=str(data_dir), CRANFIELD_ACCESS_LOG="/dev/null")
    with open(log, "ab") as out:
        proc = subprocess.Popen([CRANFIELD, "serve", "--port", str(port)], cwd=ROOT, env=env,
                                stdout=out, stderr=out, start_new_session=True)
    wait_healthy(f"http://127.0.0.1:{port}", proc, log, "cranfield serve", kill=kill)
    return proc


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL to the whole group (gunicorn's master and workers): nothing is flushed."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_the_embedded_service_keeps_qrels_and_results_across_a_kill(tmp_path):
    port, data = free_port(), tmp_path / "instance"
    base = f"http://127.0.0.1:{port}"
    proc = serve(port, data, tmp_path / "serve.log")
    try:
        status, headers, v1 = call(base, "PUT", "/v1/qrels/robust", QRELS_TEXT.encode(),
                                   content_type="text/plain")
        assert status == 201, v1
        changed = QRELS_TEXT.replace(" 1\n", " 2\n", 5)
        status, _, v2 = call(base, "PUT", "/v1/qrels/robust", changed.encode(),
                             {"If-Match": headers["ETag"]}, content_type="text/plain")
        assert status == 201 and v2["versions"] == [v1["version"], v2["version"]], v2
        body = {"run": RUN_TEXT, "qrels_id": f"robust@{v1['version']}", "measures": MEASURES,
                "record": {"system": "bm25", "label": "night-1"}}
        status, _, before = call(base, "POST", "/v1/evaluations", body)
        assert status == 200, before
        assert before["aggregate"] == pytest.approx(EXPECTED, abs=1e-12)
        result_id = before["recorded"]["id"]
        status, _, recorded = call(base, "GET", f"/v1/results/{result_id}")
        assert status == 200
    finally:
        kill(proc)
    assert (data / "cranfield.db").exists()  # where make run keeps them

    deadline = time.monotonic() + 60  # the killed workers' socket released
    while not port_free(port):
        assert time.monotonic() < deadline, "the port stayed taken"
        time.sleep(0.1)
    proc = serve(port, data, tmp_path / "serve.log")
    try:
        status, headers, meta = call(base, "GET", "/v1/qrels/robust")
        assert status == 200, meta
        assert headers["ETag"] == f'"{v2["version"]}"'
        assert meta == v2  # the same metadata: versions, created, sizes
        status, _, listing = call(base, "GET", "/v1/qrels")
        assert [m["id"] for m in listing["items"]] == ["robust"] and listing["total"] == 1
        status, _, again = call(base, "GET", f"/v1/results/{result_id}")
        assert status == 200 and again == recorded
        status, _, after = call(base, "POST", "/v1/evaluations",
                                dict(body, record={"system": "bm25", "label": "night-2"}))
        assert status == 200, after
        assert after["aggregate"] == before["aggregate"]
        assert after["provenance"]["qrels_version"] == before["provenance"]["qrels_version"] \
            == f"robust@{v1['version']}"
        status, _, latest = call(base, "POST", "/v1/evaluations",
                                 {"run": RUN_TEXT, "qrels_id": "robust", "measures": ["map"]})
        assert latest["provenance"]["qrels_version"] == f"robust@{v2['version']}"
        status, _, history = call(base, "GET", "/v1/systems/bm25/results")
        assert status == 200, history
        assert [r["label"] for r in history["items"]] == ["night-2", "night-1"]
    finally:
        kill(proc)


# -- (b) Redis as the cache ---------------------------------------------------------------------

@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path, require):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/results.db"
    url = request.getfixturevalue("results_postgres")
    require(url is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    from sqlalchemy import create_engine

    from backend.results import Base, migrate

    migrate(url)
    engine = create_engine(url)  # the module's database, emptied for each parameter
    with engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())
    engine.dispose()
    return url


def submit_night(api: str, qrels_id: str, label: str) -> str:
    """The queued job's location."""
    body = {"run": RUN_TEXT, "qrels_id": qrels_id, "measures": MEASURES,
            "record": {"system": "nightly", "label": label}}
    status, headers, job = call(api, "POST", "/v1/evaluations", body,
                                {"Prefer": "respond-async"})
    assert status == 202, job
    return headers["Location"]


def finished(api: str, location: str) -> dict:
    done = wait_job(api, location)
    assert done["status"] == "finished", done
    return done["result"]


def test_a_flushall_between_two_nights_changes_nothing(redis_server, database_url):
    from backend.store import RedisStore, redis_client

    conn = redis_client(redis_server.url)
    conn.flushall()
    # what an earlier version kept in Redis alone, before this one starts
    legacy, _ = RedisStore(conn).put_qrels("legacy", cranfield.read_qrels(QRELS_TEXT))
    env = {"REDIS_URL": redis_server.url, "CRANFIELD_DATABASE_URL": database_url,
           "CRANFIELD_WORKERS": "2"}
    with running_gunicorn(env) as api:
        status, _, stored = call(api, "PUT", "/v1/qrels/robust", QRELS_TEXT.encode(),
                                 content_type="text/plain")
        assert status == 201, stored
        with running_worker(redis_server.url, database_url):
            night1 = finished(api, submit_night(api, "robust", "night-1"))
        assert night1["aggregate"] == pytest.approx(EXPECTED, abs=1e-12)

        conn.flushall()  # the cache is gone: jobs, blobs, qrels keys, the import's marker
        assert conn.keys("cranfield:*") == []
        # the API reads the qrels to check the request (refilling the cache); gone again
        # before a worker takes the jobs, the worker reads them from the database
        jobs = [submit_night(api, "robust", "night-2"), submit_night(api, "legacy", "legacy")]
        cached = conn.keys("cranfield:qrels:*")
        # the versions were refilled; the text only if the API process that answered had
        # not decoded these qrels before (its own LRU holds them by digest): either way,
        # everything cached is dropped before the worker starts
        assert {b"cranfield:qrels:robust", b"cranfield:qrels:robust:order"} <= set(cached)
        conn.delete(*cached)
        with running_worker(redis_server.url, database_url):  # a worker with a cold memory
            night2, legacy_night = (finished(api, location) for location in jobs)
        assert night2["aggregate"] == night1["aggregate"]
        assert night2["provenance"]["qrels_version"] == night1["provenance"][
            "qrels_version"] == f"robust@{stored['version']}"
        assert legacy_night["aggregate"] == night1["aggregate"]  # the same judgments
        assert legacy_night["provenance"]["qrels_version"] == f"legacy@{legacy['version']}"
        # the worker refilled the cache from the database, the text included
        assert conn.exists(f"cranfield:qrels:robust:v:{stored['version']}")
        assert conn.lrange("cranfield:qrels:robust:order", 0, -1) == [
            stored["version"].encode()]
        status, _, listing = call(api, "GET", "/v1/qrels")
        assert sorted(m["id"] for m in listing["items"]) == ["legacy", "robust"]
        status, _, results = call(api, "GET", "/v1/systems/nightly/results")
        assert [r["label"] for r in results["items"]] == ["legacy", "night-2", "night-1"]
