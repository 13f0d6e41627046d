"""Faults on the nightly path lose nothing (issue #25), with real processes: PostgreSQL
refusing connections for 5 s while 20 queued records run leaves 20 results recorded exactly
once; Redis down for 6 s leaves every ``cranfield worker`` running and every queued job
finished; a killed (SIGKILL) or frozen (SIGSTOP) worker's job is taken over within the
documented bound (docs/queue-and-workers.md).

The waits poll a condition with a deadline; the only fixed sleeps are the outage windows
themselves, the thing under test."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from servers import (
    BODY,
    CRANFIELD,
    ROOT,
    RedisServer,
    call,
    require_redis_server,
    running_gunicorn,
    stop,
)

MAP = 0.1785  # results.test against qrels.test (BODY)


@pytest.fixture
def persistent_redis(tmp_path):
    """A private redis-server with append-only persistence (fsync on every write): stopped
    and started again on the same port, it keeps what was queued."""
    require_redis_server()
    server = RedisServer(folder=tmp_path / "redis-aof")
    server.folder.mkdir()
    server.start()
    yield server
    server.stop()


def start_worker(redis_url: str, log: Path, env: dict | None = None,
                 args: tuple[str, ...] = ()) -> subprocess.Popen:
    """A ``cranfield worker`` logging its JSON lines to ``log``, in a session of its own (so
    SIGKILL/SIGSTOP reach its work horse too)."""
    with open(log, "ab") as out:
        return subprocess.Popen([CRANFIELD, "worker", "--redis-url", redis_url, *args],
                                cwd=ROOT, env=dict(os.environ, **(env or {})),
                                start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=out)


def log_events(log: Path) -> list[dict]:
    """The JSON lines of a worker's log (other lines skipped)."""
    events = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def wait_until(condition, timeout: float, what: str, interval: float = 0.05):
    """Poll ``condition()`` until it is truthy (returned), failing after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s: {what}"
        time.sleep(interval)


def job_state(api: str, location: str) -> dict | None:
    """The job, or None while the API cannot say (503: Redis is down)."""
    status, _, job = call(api, "GET", location)
    if status == 503:
        return None
    assert status == 200, job
    return job


def wait_all_ended(api: str, locations: list[str], timeout: float) -> dict[str, dict]:
    ended: dict[str, dict] = {}

    def all_ended():
        for location in locations:
            if location in ended:
                continue
            job = job_state(api, location)
            if job is not None and job["status"] in ("finished", "failed", "canceled"):
                ended[location] = job
        return len(ended) == len(locations)

    wait_until(all_ended, timeout, f"{len(locations)} jobs to end")
    return ended


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGCONT)  # a frozen one must run to hear SIGTERM
        except ProcessLookupError:
            pass
    stop(proc)


# --------------------------------------------------------------------------------------------
# Redis down for 6 s under two workers
# --------------------------------------------------------------------------------------------

REDIS_OUTAGE_S = 6


def test_workers_ride_out_a_redis_outage_and_every_queued_job_finishes(persistent_redis,
                                                                       tmp_path):
    """Two workers (each job 0.5 s long, so some run while Redis goes), 12 queued jobs;
    Redis stops for 6 s and comes back on its port with its append-only file. Both worker
    processes are still running afterwards, each logged its reconnect attempts as JSON
    lines, and every job finished with the right numbers."""
    logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    env = {"CRANFIELD_TEST_JOB_DELAY": "0.5",
           "CRANFIELD_DATABASE_URL": f"sqlite:///{tmp_path}/results.db"}
    with running_gunicorn({"REDIS_URL": persistent_redis.url,
                           "CRANFIELD_WORKERS": "1"}) as api:
        workers = [start_worker(persistent_redis.url, log, env) for log in logs]
        try:
            locations = []
            for _ in range(12):
                status, headers, job = call(api, "POST", "/v1/evaluations", BODY,
                                            {"Prefer": "respond-async"})
                assert status == 202, job
                locations.append(headers["Location"])
            # the outage starts while jobs run: wait for one to have started
            wait_until(lambda: any((job_state(api, loc) or {}).get("status") == "started"
                                   for loc in locations), 120, "a job to start")
            persistent_redis.stop()
            time.sleep(REDIS_OUTAGE_S)  # the outage under test
            persistent_redis.start()

            ended = wait_all_ended(api, locations, 180)
            for location, job in ended.items():
                assert job["status"] == "finished", (location, job)
                assert round(job["result"]["aggregate"]["map"], 4) == MAP
            for proc, log in zip(workers, logs, strict=True):
                assert proc.poll() is None, (f"a worker exited ({proc.returncode}): "
                                             + log.read_text(errors="replace")[-3000:])
            for log in logs:
                reconnects = [e for e in log_events(log) if e.get("event") == "redis_reconnect"]
                assert reconnects, log.read_text(errors="replace")[-3000:]
                assert all(e["attempt"] >= 1 and e["retry_in_s"] > 0 for e in reconnects)
        finally:
            for proc in workers:
                stop_worker(proc)
