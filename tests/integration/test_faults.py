"""Faults against real processes: Redis restarted with jobs queued (append-only persistence
on) and the jobs still finish; malformed, oversized and slow requests get 4xx while the server
keeps serving; tenants and the queued-job cap on Redis with real gunicorn processes."""

from __future__ import annotations

import socket
import subprocess
import time

import orjson
import pytest
from servers import (
    BODY,
    CRANFIELD,
    ROOT,
    call,
    running_redis,
    start_gunicorn,
    stop,
)

from service.auth import key_line


@pytest.fixture(scope="module")
def persistent_redis(tmp_path_factory):
    with running_redis(tmp_path_factory.mktemp("redis-aof")) as server:
        yield server


KEYS = {"ci-a": ("write", "team-a"), "ci-b": ("write", "team-b")}


@pytest.fixture(scope="module")
def keyed_api(persistent_redis):
    keys = ";".join(key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items())
    url, proc = start_gunicorn({"REDIS_URL": persistent_redis.url, "CRANFIELD_WORKERS": "2",
                                "CRANFIELD_API_KEYS": keys, "CRANFIELD_MAX_QUEUED_JOBS": "3",
                                "CRANFIELD_MAX_CONTENT_LENGTH": str(1 << 20)})
    yield url
    stop(proc)


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def submit(api: str, key: str) -> str:
    status, headers, job = call(api, "POST", "/v1/evaluations", BODY,
                                {"Prefer": "respond-async", **auth(key)})
    assert status == 202, job
    return headers["Location"]


def test_queued_jobs_survive_a_redis_restart_and_the_cap_holds(keyed_api, persistent_redis):
    """No worker yet: jobs stay queued. The tenant's cap (3) answers the 4th with 429 and
    Retry-After, another tenant is not held back. Redis restarts (its append-only file
    keeps the queue); the API answers 503 while it is down, then recovers; a worker started
    afterwards finishes every job, each visible only to its tenant."""
    mine = [submit(keyed_api, "ci-a") for _ in range(3)]
    status, headers, problem = call(keyed_api, "POST", "/v1/evaluations", BODY,
                                    {"Prefer": "respond-async", **auth("ci-a")})
    assert status == 429 and int(headers["Retry-After"]) > 0
    assert problem["type"].endswith("too-many-jobs")
    theirs = submit(keyed_api, "ci-b")
    assert call(keyed_api, "GET", theirs, headers=auth("ci-a"))[0] == 404

    persistent_redis.stop()
    status, headers, _ = call(keyed_api, "GET", mine[0], headers=auth("ci-a"))
    assert status == 503 and "Retry-After" in headers
    persistent_redis.start()

    worker = subprocess.Popen([CRANFIELD, "worker", "--redis-url", persistent_redis.url],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for location, key in [(m, "ci-a") for m in mine] + [(theirs, "ci-b")]:
            done = _wait(keyed_api, location, key)
            assert done["status"] == "finished", done
            assert round(done["result"]["aggregate"]["map"], 4) == 0.1785
        # the jobs have ended: the cap has room again, and the new job runs too
        status, headers, _ = call(keyed_api, "POST", "/v1/evaluations", BODY,
                                  {"Prefer": "respond-async", **auth("ci-a")})
        assert status == 202
        assert _wait(keyed_api, headers["Location"], "ci-a")["status"] == "finished"
    finally:
        stop(worker)


def _wait(api: str, location: str, key: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, _, job = call(api, "GET", location, headers=auth(key))
        if status == 200 and job["status"] in ("finished", "failed", "canceled"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


def _raw(port: int, data: bytes, wait: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_malformed_oversized_and_slow_requests_get_4xx_and_the_server_stays_up(keyed_api):
    port = int(keyed_api.rsplit(":", 1)[1])
    headers = auth("ci-a")
    # malformed JSON, a JSON array, garbage bytes: 400/422, never 5xx
    for body in (b'{"run": ', b"[1, 2]", bytes(range(256))):
        status, _, problem = call(keyed_api, "POST", "/v1/evaluations", body, headers)
        assert 400 <= status < 500, (body[:20], status, problem)
    # over the 1 MiB limit: 413 before the body is read. Sent as headers only: a client still
    # writing 2 MB when the server answers and closes may see a reset instead of the answer
    answer = _raw(port, b"POST /v1/evaluations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                  b"ci-a\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                  % (2 << 20))
    head, _, payload = answer.partition(b"\r\n\r\n")
    status, problem = int(head.split()[1]), orjson.loads(payload)
    assert status == 413 and problem["status"] == 413
    # a request line that is not HTTP: gunicorn answers 400
    assert _raw(port, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400")
    # slow clients: each sends headers and part of a body, then stalls
    slow = []
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(b"POST /v1/evaluations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ci-a"
                     b"\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
                     b'{"run": ')
        slow.append(sock)
    try:
        # meanwhile the service keeps answering, evaluations included
        assert call(keyed_api, "GET", "/healthz")[0] == 200
        status, _, doc = call(keyed_api, "POST", "/v1/evaluations", BODY, headers)
        assert status == 200 and round(doc["aggregate"]["map"], 4) == 0.1785
    finally:
        for sock in slow:  # they give up: an incomplete body is a 400, not a crash
            sock.close()
    time.sleep(0.5)
    assert call(keyed_api, "GET", "/healthz")[0] == 200
    assert call(keyed_api, "GET", "/readyz")[0] == 200
