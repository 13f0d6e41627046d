"""Observability on real processes: a private redis-server, the API under gunicorn with two
worker processes (Prometheus multiprocess mode, as service/gunicorn.conf.py sets it up) and a
real `cranfield worker --burst`: /metrics sums every process's HTTP metrics and shows the
jobs' counters, durations and the queue's depth; the worker's JSON log lines carry the id of
the request that enqueued the job."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from servers import CRANFIELD, DATA, ROOT, call, start_gunicorn, stop, wait_job, wait_until

RUN = (DATA / "results.test").read_text()
QRELS = (DATA / "qrels.test").read_bytes()


@pytest.fixture(scope="module")
def gunicorn(redis_server):
    # one thread per process: a process busy with a request takes no other (see below)
    url, proc = start_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_WORKERS": "2",
                                "CRANFIELD_THREADS": "1"})
    yield url, proc.pid
    stop(proc)


@pytest.fixture(scope="module")
def api(gunicorn):
    return gunicorn[0]


def scrape(base: str) -> dict:
    """/metrics as {(sample name, sorted label items): value}."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/plain")
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: dict, name: str, **labels) -> float:
    """The sample's value; the sample must be there (a missing metric is not a 0)."""
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"no sample {name}{dict(labels)} in /metrics"
    return samples[key]


def baseline(samples: dict, name: str, **labels) -> float:
    """The sample's value in a scrape taken before the counting starts: 0 when it is not
    there yet (a labelled counter appears on its first increment)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _socket_inodes(client_port: int, server_port: int) -> set[str]:
    """The inodes of the server side of the TCP connection from ``client_port`` (Linux's
    /proc/net/tcp: local and remote addresses as hex ``ip:port``)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                local, remote = int(fields[1].rsplit(":", 1)[1], 16), \
                    int(fields[2].rsplit(":", 1)[1], 16)
                if local == server_port and remote == client_port:
                    inodes.add(fields[9])
    return inodes


def _held_by_a_child(master: int, client_port: int, server_port: int) -> bool:
    """Whether a child of gunicorn's ``master`` process has the connection open."""
    inodes = {f"socket:[{i}]" for i in _socket_inodes(client_port, server_port)}
    with open(f"/proc/{master}/task/{master}/children") as f:
        children = f.read().split()
    for pid in children:
        with contextlib.suppress(FileNotFoundError, PermissionError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(FileNotFoundError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return True
    return False


def test_http_metrics_are_summed_over_gunicorns_processes(gunicorn):
    """One request holds one gunicorn process (its body arrives slowly) while twenty others
    are served by the other process: every scrape, whichever process answers it, must show
    both processes' requests."""
    api, master = gunicorn
    body = orjson.dumps({"run": {"q1": {"d1": 1.0}}, "qrels": {"q1": {"d1": 1}},
                         "measures": ["map"]})
    before = scrape(api)
    host, port = urlsplit(api).hostname, urlsplit(api).port
    slow = socket.create_connection((host, port), timeout=30)
    try:
        slow.sendall(b"POST /v1/evaluations HTTP/1.1\r\nHost: %s:%d\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n" % (host.encode(), port, len(body)) + body[:5])
        # the event: a gunicorn process holds the connection (it accepted it and gave it
        # to its one thread, which waits for the rest of the body)
        wait_until(lambda: _held_by_a_child(master, slow.getsockname()[1], port), 60,
                   "a gunicorn process holding the slow request")
        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(lambda _: call(api, "GET", "/v1/measures")[0], range(20)))
        assert statuses == [200] * 20
        slow.sendall(body[5:])
        answer = b""
        while chunk := slow.recv(65536):
            answer += chunk
    finally:
        slow.close()
    assert answer.startswith(b"HTTP/1.1 200")
    requests, hist = "cranfield_http_requests_total", "cranfield_http_request_duration_seconds"
    for _ in range(6):  # several scrapes: each process answers some of them
        after = scrape(api)
        growth = {key: after[key] - before.get(key, 0.0) for key in after}
        assert value(growth, requests, route="/v1/measures", method="GET", status="200") == 20
        assert value(growth, requests, route="/v1/evaluations", method="POST",
                     status="200") == 1
        assert value(growth, hist + "_count", route="/v1/evaluations", method="POST") == 1
        assert value(growth, hist + "_count", route="/v1/measures", method="GET") == 20


def run_burst_worker(redis_url: str, log_path: str) -> None:
    """`cranfield worker --burst`: works through the queue, then exits; its stderr (JSON log
    lines) goes to ``log_path``."""
    with open(log_path, "wb") as log:
        proc = subprocess.run([CRANFIELD, "worker", "--burst", "--redis-url", redis_url],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, timeout=120,
                              env=dict(os.environ, CRANFIELD_LOG_LEVEL="info"))
    assert proc.returncode == 0, Path(log_path).read_text(errors="replace")


def test_jobs_are_counted_timed_and_logged_with_the_request_id(api, redis_server, tmp_path):
    qrels_id = f"obs-{uuid.uuid4().hex[:8]}"
    status, _, _ = call(api, "PUT", f"/v1/qrels/{qrels_id}", QRELS, content_type="text/plain")
    assert status == 201
    before = scrape(api)
    assert value(before, "cranfield_queue_depth") == 0
    ids = {}
    for n in (1, 2):  # two jobs against the same stored qrels: one decode, one cache hit
        rid = f"obs-it-req-{n}-{uuid.uuid4().hex[:6]}"
        status, headers, _ = call(api, "POST", "/v1/evaluations",
                                  {"run": RUN, "qrels_id": qrels_id, "measures": ["map"]},
                                  {"Prefer": "respond-async", "X-Request-ID": rid})
        assert status == 202 and headers["X-Request-ID"] == rid
        ids[rid] = headers["Location"].rsplit("/", 1)[1]
    status, headers, _ = call(api, "POST", "/v1/evaluations",
                              {"run": "q1 Q0 d1 1 abc r\n", "qrels": {"q1": {"d1": 1}}},
                              {"Prefer": "respond-async"})
    assert status == 202
    bad_id = headers["Location"].rsplit("/", 1)[1]
    queued = scrape(api)
    assert value(queued, "cranfield_queue_depth") == 3

    fd, log_path = tempfile.mkstemp(prefix="cranfield-worker-", suffix=".log",
                                    dir=tmp_path)
    os.close(fd)
    run_burst_worker(redis_server.url, log_path)
    for job_id in ids.values():
        assert wait_job(api, f"/v1/jobs/{job_id}")["status"] == "finished"
    assert wait_job(api, f"/v1/jobs/{bad_id}")["status"] == "failed"

    after = scrape(api)

    def grew(name, **labels):
        return value(after, name, **labels) - baseline(before, name, **labels)

    assert grew("cranfield_jobs_enqueued_total", kind="evaluation") == 3
    assert grew("cranfield_jobs_finished_total", kind="evaluation") == 2
    assert grew("cranfield_jobs_failed_total", kind="evaluation") == 1
    assert grew("cranfield_job_duration_seconds_count", kind="evaluation") == 3
    assert grew("cranfield_job_duration_seconds_bucket", kind="evaluation", le="+Inf") == 3
    assert grew("cranfield_job_duration_seconds_sum", kind="evaluation") > 0
    assert value(after, "cranfield_queue_depth") == 0
    # four lookups of the stored qrels, each counted once: the web process's at each
    # submission, the worker's for each job (its decode before the fork is the first job's
    # miss; the second job finds them decoded)
    hits, misses = "cranfield_qrels_cache_hits_total", "cranfield_qrels_cache_misses_total"
    assert grew(hits) + grew(misses) == 4
    assert grew(hits) >= 1 and grew(misses) >= 1

    lines = [orjson.loads(line) for line in Path(log_path).read_text().splitlines()
             if line.strip()]  # every line the worker wrote is a JSON object
    for rid, job_id in ids.items():
        mine = [line for line in lines if line.get("job_id") == job_id]
        assert {line["event"] for line in mine} == {"job_started", "job_ended"}, mine
        assert all(line["request_id"] == rid for line in mine)
        ended = next(line for line in mine if line["event"] == "job_ended")
        assert ended["outcome"] == "finished" and ended["kind"] == "evaluation"
        assert ended["duration_ms"] > 0 and ended["logger"] == "cranfield.worker"
    failed = next(line for line in lines
                  if line.get("job_id") == bad_id and line.get("event") == "job_ended")
    assert failed["outcome"] == "failed" and failed["level"] == "WARNING"
    assert failed["problem"]["status"] == 422
    assert "'abc' is not a number" in failed["problem"]["detail"]
