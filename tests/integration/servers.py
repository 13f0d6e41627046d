"""Real servers for integration tests: gunicorn with the repository's config, on free
loopback ports."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "trec_eval"
CRANFIELD = str(Path(sys.executable).with_name("cranfield"))

# Deadlines generous enough for a loaded 2-core machine with a cold numba cache: the waits
# poll, so a fast start costs nothing; only a server that never comes up waits this long.
START_TIMEOUT = float(os.environ.get("CRANFIELD_TEST_START_TIMEOUT", "180"))
JOB_TIMEOUT = float(os.environ.get("CRANFIELD_TEST_JOB_TIMEOUT", "180"))

# The servers' logs: one directory for the test session, removed when it ends
_LOGS = tempfile.TemporaryDirectory(prefix="cranfield-test-logs-")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(extra_env: dict | None = None) -> tuple[str, subprocess.Popen]:
    """gunicorn with the repository's config on a free port; returns (base URL, process)."""
    port = free_port()
    env = dict(os.environ, CRANFIELD_ACCESS_LOG="/dev/null")
    for key in ("REDIS_URL", "CRANFIELD_WORKERS", "CRANFIELD_THREADS"):
        env.pop(key, None)  # only what the caller asks for; the config file decides the rest
    # recorded results: a SQLite file of this server's own unless the caller names a
    # database (never the shared instance/cranfield.db)
    env.setdefault("CRANFIELD_DATABASE_URL",
                   f"sqlite:///{tempfile.mkdtemp(prefix='results-', dir=_LOGS.name)}/results.db")
    env.update(extra_env or {})
    # gunicorn logs to a file: a pipe nobody reads could fill up and stall it
    fd, log_path = tempfile.mkstemp(prefix="gunicorn-", suffix=".log", dir=_LOGS.name)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "service" / "gunicorn.conf.py"),
         "--bind", f"127.0.0.1:{port}", "service.app:create_app()"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=fd)
    os.close(fd)  # the child has its own copy
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc, Path(log_path), "gunicorn")
    return url, proc


def wait_healthy(url: str, proc: subprocess.Popen, log_path: Path, what: str,
                 kill=None) -> None:
    """Poll ``url``'s /healthz until it answers 200; if ``proc`` exits first or
    START_TIMEOUT passes, ``kill`` it (default: SIGKILL, waited for) and raise with its
    log."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                if kill is not None:
                    kill(proc)
                else:
                    proc.kill()
                    proc.wait(timeout=10)
                raise RuntimeError(f"{what} did not start in {START_TIMEOUT:g} s: " +
                                   log_path.read_text(errors="replace")) from None
            time.sleep(0.2)


def stop(proc: subprocess.Popen, grace: float = 60) -> None:
    """Stop a process a test started and reap it: SIGTERM (a worker finishes its job,
    gunicorn its requests), then SIGKILL if it has not exited after ``grace`` seconds. The
    process is always waited for, so no ``Popen`` is left to warn when it is collected (a
    ResourceWarning that would fail whichever test runs next), and a slow shutdown on a
    busy machine does not fail the test that used the process: shutdown itself is tested
    where it is the subject (test_nightly_faults: a worker stopped mid-job)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()  # SIGKILL cannot be refused: the wait ends


@contextlib.contextmanager
def running_gunicorn(extra_env: dict | None = None):
    """:func:`start_gunicorn` for a ``with`` block: its base URL, the server stopped after."""
    url, proc = start_gunicorn(extra_env)
    try:
        yield url
    finally:
        stop(proc)


@contextlib.contextmanager
def running_worker(redis_url: str, database: str | None = None):
    """A ``cranfield worker`` on ``redis_url`` for a ``with`` block (recording results in
    ``database`` when given), stopped after."""
    env = dict(os.environ)
    if database is not None:
        env["CRANFIELD_DATABASE_URL"] = database
    proc = subprocess.Popen([CRANFIELD, "worker", "--redis-url", redis_url], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        stop(proc)


class RedisServer:
    """A private redis-server on a free port; with ``folder``, append-only persistence there
    (fsync on every write), so a restart keeps what was queued."""

    def __init__(self, port: int | None = None, folder: Path | None = None):
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.folder = folder
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        import shutil

        import redis

        persistence = (["--dir", str(self.folder), "--appendonly", "yes", "--appendfsync",
                        "always"] if self.folder else ["--appendonly", "no"])
        self.proc = subprocess.Popen(
            [shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", *persistence], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                redis.Redis(port=self.port).ping()
                return
            except (redis.ConnectionError, redis.BusyLoadingError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None


@contextlib.contextmanager
def running_redis(folder: Path | None = None):
    """A private :class:`RedisServer` for a ``with`` block (``folder``: append-only
    persistence there), stopped after; skipped without redis-server (failing with CI=true)."""
    require_redis_server()
    server = RedisServer(folder=folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def require_redis_server() -> None:
    """Skip without redis-server; with CI=true, fail instead (the queue tests must run)."""
    import shutil

    import pytest

    if shutil.which("redis-server") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is required (CI=true): install it")
        pytest.skip("redis-server not installed")


def call(base: str, method: str, path: str, body=None, headers=None, content_type=None):
    data = orjson.dumps(body) if isinstance(body, dict) else body
    hdrs = dict(headers or {})
    if data is not None:
        hdrs["Content-Type"] = content_type or "application/json"
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
            return resp.status, dict(resp.headers), orjson.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, dict(err.headers), orjson.loads(raw) if raw else None


def text_of(base: str, location: str) -> bytes:
    """A job's or result's text (``Accept: text/plain``) at ``location`` of ``base``."""
    req = urllib.request.Request(base + location, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read()


def wait_until(condition, timeout: float, what: str, interval: float = 0.05):
    """Poll ``condition()`` until it is truthy (returned), failing after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s: {what}"
        time.sleep(interval)


def wait_job(base: str, location: str, timeout: float = JOB_TIMEOUT,
             headers: dict | None = None) -> dict:
    """The job once it is finished, failed or canceled; after ``timeout`` seconds, as it is
    then (the caller's status assertion fails, showing it)."""
    deadline = time.monotonic() + timeout
    while True:
        status, _, job = call(base, "GET", location, headers=headers)
        assert status == 200, job
        if job["status"] in ("finished", "failed", "canceled") or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


BODY = {"run": (DATA / "results.test").read_text(), "qrels": (DATA / "qrels.test").read_text(),
        "measures": ["all_trec"]}


def arrow_tables():
    """results.test and qrels.test as pyarrow Tables (the columns an Arrow upload has):
    (run, qrels)."""
    import numpy as np
    import pyarrow as pa

    import cranfield

    run = cranfield.read_run(str(DATA / "results.test"))
    qrels = cranfield.read_qrels(str(DATA / "qrels.test"))
    run_t = pa.table({"topic": [run.topics[i] for i in run.topic_index.tolist()],
                      "docid": run.docids_at(np.arange(len(run))).tolist(),
                      "score": run.scores, "runid": [run.runid] * len(run)})
    qrels_t = pa.table({"topic": [qrels.topics[i] for i in qrels.topic_index.tolist()],
                        "docid": qrels.docids.tolist(), "grade": qrels.grades})
    return run_t, qrels_t


#: The PostgreSQL server tests create their databases on (TEST_POSTGRES_ADMIN_URL points them
#: at another one; an unreachable one skips them, or fails them under CI=true).
PG_ADMIN = os.environ.get("TEST_POSTGRES_ADMIN_URL",
                          "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def postgres_database(prefix: str):
    """The URL of a new, empty PostgreSQL database named ``prefix`` + a random suffix,
    dropped on exit (``WITH (FORCE)``: servers still connected to it are cut off); None when
    no server answers at :data:`PG_ADMIN`."""
    import uuid

    from sqlalchemy import create_engine, make_url, text

    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT",
                          connect_args={"connect_timeout": 3})
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception:  # noqa: BLE001 - any failure to connect means "no server"
        admin.dispose()
        yield None
        return
    name = prefix + uuid.uuid4().hex[:12]
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()
