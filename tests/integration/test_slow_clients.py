"""Slow clients beside normal traffic (issue #27, "Stalls"): the recommended deployment.

docker-compose.yml puts nginx (deploy/nginx.conf.template) in front of gunicorn: nginx reads
each request whole before gunicorn sees it, so 50 connections trickling their headers or
their body hold nginx connections, never gunicorn's 2 × 4 threads. Here the same template is
rendered for a local nginx (Debian's, unpacked by ``make system-deps``: the Makefile's ``proxy``
target) in front of the repository's gunicorn (2 workers × 4 threads, Redis), all on
loopback, and every request of the normal traffic (``/healthz`` and a small ``POST
/v1/evaluations``) must answer within 2 s while the 50 trickle (on a busy machine, within
BUSY_FACTOR times what it takes with no slow client, measured in the test: a stalled request
never answers). The same load against gunicorn alone stalls it: that control shows the load
is one that matters.

Bounded: 50 sockets, a fixed number of normal requests, a byte per slow socket every
``TRICKLE_S``; the tricklers stop on an event. Without nginx the tests skip (fail under
CI=true)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from servers import DATA, ROOT, call, free_port, running_gunicorn, stop, wait_healthy

TEMPLATE = ROOT / "deploy" / "nginx.conf.template"
SLOW = 50          # slow connections: half trickle headers, half a body
TRICKLE_S = 0.25   # a byte per slow connection every TRICKLE_S seconds
ROUNDS = 12        # normal traffic: ROUNDS × (GET /healthz, POST /v1/evaluations)
BOUND_S = 2.0      # the longest any normal request may wait, on an idle machine
BUSY_FACTOR = 5    # on a busy one: this many times what it takes with no slow client
MAX_BODY = 1_000_000  # over the evaluation below (140 kB)

EVALUATION = orjson.dumps({"run": (DATA / "results.test").read_text(),
                           "qrels": (DATA / "qrels.test").read_text(), "measures": ["map"]})


def nginx_binary() -> str:
    """nginx: CRANFIELD_NGINX, the one ``make system-deps`` unpacked into the virtualenv, or one
    on PATH (Debian's package). Missing: skip, or fail under CI=true."""
    candidates = [os.environ.get("CRANFIELD_NGINX"),
                  str(ROOT / ".venv" / "nginx" / "usr" / "sbin" / "nginx"),
                  shutil.which("nginx"), "/usr/sbin/nginx"]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    message = "nginx not installed (make system-deps; or apt-get install nginx-light)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def render(template: str, values: dict[str, str]) -> str:
    """The template as the nginx image's envsubst renders it: each ${CRANFIELD_PROXY_*}
    replaced, nothing else touched (nginx's own $variables stay)."""
    text = re.sub(r"\$\{(CRANFIELD_PROXY_[A-Z_]+)\}", lambda m: values[m.group(1)], template)
    assert "${" not in text
    return text


@contextlib.contextmanager
def running_proxy(upstream: str, max_body: int = MAX_BODY):
    """nginx with deploy/nginx.conf.template in front of ``upstream`` (host:port) on a free
    loopback port, in a temporary prefix of its own; its base URL, nginx stopped after."""
    binary = nginx_binary()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="cranfield-nginx-") as prefix:
        # nginx's workers drop root (to nobody) and spool bodies under the prefix
        os.chmod(prefix, 0o755)
        site = Path(prefix, "cranfield.conf")
        site.write_text(render(TEMPLATE.read_text(), {
            "CRANFIELD_PROXY_LISTEN": f"127.0.0.1:{port}",
            "CRANFIELD_PROXY_UPSTREAM": upstream,
            "CRANFIELD_PROXY_MAX_BODY": str(max_body)}))
        temp = "".join(f"{kind}_temp_path {prefix}/{kind};\n"
                       for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        # the http context the image's /etc/nginx/nginx.conf gives the site
        conf = Path(prefix, "nginx.conf")
        conf.write_text(f"daemon off;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
                        f"error_log {prefix}/error.log warn;\n"
                        "events { worker_connections 1024; }\n"
                        f"http {{\naccess_log off;\n{temp}include {site};\n}}\n")
        log = Path(prefix, "error.log")
        proc = subprocess.Popen([binary, "-p", prefix, "-e", str(log), "-c", str(conf)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc, log, "nginx")
            yield url
        finally:
            stop(proc)


class SlowClients:
    """``count`` connections to ``base``, each sending one byte every ``TRICKLE_S`` seconds
    from one thread: the even ones a request's headers (never finished), the odd ones a
    body of 10,000 bytes after complete headers (never finished either). ``started`` is set
    once every connection is open and has sent its first bytes."""

    def __init__(self, base: str, count: int = SLOW):
        host, port = base.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.count = count
        self.socks: list[socket.socket] = []
        self.sent = 0
        self.started = threading.Event()
        self.trickled = threading.Event()  # set once every connection has trickled a byte
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)

    def __enter__(self):
        self.thread.start()
        assert self.started.wait(30), "the slow clients could not connect"
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(10)
        for sock in self.socks:
            sock.close()

    def _run(self) -> None:
        for i in range(self.count):
            sock = socket.create_connection(self.address, timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if i % 2:  # complete headers, then the body a byte at a time
                sock.sendall(b"POST /v1/evaluations HTTP/1.1\r\nHost: localhost\r\n"
                             b"Content-Type: application/json\r\n"
                             b"Content-Length: 10000\r\n\r\n{")
            else:  # the headers a byte at a time (after the request line)
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            self.socks.append(sock)
        self.started.set()
        while not self.done.wait(TRICKLE_S):  # the trickle: waits on the stop event
            for sock in self.socks:
                sock.sendall(b" " if self.socks.index(sock) % 2 else b"a")
                self.sent += 1
            self.trickled.set()

    def all_open_and_unanswered(self) -> bool:
        """No slow connection has been answered or closed by the server (so they were all
        still slow, holding whatever they hold, while the normal traffic ran)."""
        import select

        readable, _, _ = select.select(self.socks, [], [], 0)
        return not readable


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def normal_traffic(base: str, rounds: int = ROUNDS, timeout: float = 30) -> list[tuple]:
    """``rounds`` × (GET /healthz, a small POST /v1/evaluations), one after the other, each
    on a fresh connection: (what, seconds waited, status, MAP or None)."""
    seen = []
    for _ in range(rounds):
        def health():
            with urllib.request.urlopen(base + "/healthz", timeout=timeout) as resp:
                return resp.status, None

        def evaluation():
            status, _, doc = call(base, "POST", "/v1/evaluations", EVALUATION)
            assert status == 200, doc
            return status, round(doc["aggregate"]["map"], 4)

        for what, fn in (("healthz", health), ("evaluation", evaluation)):
            seconds, (status, value) = timed(fn)
            seen.append((what, seconds, status, value))
    return seen


def answer_bound(base: str) -> float:
    """The longest a normal request may wait beside slow clients: BOUND_S, or, where the
    machine is busy, BUSY_FACTOR times the slowest of a round without them, measured now
    (a stalled request never answers at all, so any finite bound tells the two apart)."""
    seen = normal_traffic(base, rounds=1)
    assert {status for _, _, status, _ in seen} == {200}
    return max(BOUND_S, BUSY_FACTOR * max(seconds for _, seconds, _, _ in seen))


@pytest.fixture(scope="module")
def api(redis_server):
    """gunicorn as the recommended deployment runs it: with Redis, 2 workers × 4 threads."""
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_WORKERS": "2",
                           "CRANFIELD_THREADS": "4",
                           "CRANFIELD_MAX_CONTENT_LENGTH": str(MAX_BODY)}) as url:
        yield url


@pytest.fixture(scope="module")
def proxy(api):
    with running_proxy(api.removeprefix("http://")) as url:
        yield url


def test_fifty_slow_clients_leave_the_proxied_api_answering_within_2s(proxy):
    assert normal_traffic(proxy, rounds=1)[1][2:] == (200, 0.1785)  # warm, and correct
    bound = answer_bound(proxy)
    with SlowClients(proxy) as slow:
        assert slow.trickled.wait(30), "the slow clients never trickled"
        seen = normal_traffic(proxy)
        assert slow.all_open_and_unanswered()
        assert slow.sent >= SLOW  # they trickled while the traffic ran
    assert len(seen) == 2 * ROUNDS
    # every answer right: 200, and the evaluation's MAP as trec_eval's out.test prints it
    assert {(what, status, value) for what, _, status, value in seen} == {
        ("healthz", 200, None), ("evaluation", 200, 0.1785)}
    slowest = max(seen, key=lambda row: row[1])
    print(f"slowest normal request: {slowest[0]} {slowest[1]:.3f} s of {len(seen)}")
    assert slowest[1] <= bound, f"{slowest[0]} waited {slowest[1]:.2f} s: {seen}"


def test_the_same_load_stalls_gunicorn_alone(api):
    """The control: without the proxy, 50 slow clients hold every gunicorn thread, and a
    /healthz is not answered within the bound (so the test above measures something)."""
    bound = answer_bound(api)
    with SlowClients(api):
        with pytest.raises(OSError):  # urllib's timeout
            normal_traffic(api, rounds=1, timeout=bound)


def test_the_proxy_refuses_a_body_over_the_limit_as_the_api_does(api, proxy):
    """Over the limit nginx answers 413 itself (never spooling more than the limit): the
    API's problem document, with a declared length and chunked."""
    too_long = b" " * (MAX_BODY + 1)
    direct = call(api, "POST", "/v1/evaluations", too_long)
    via = call(proxy, "POST", "/v1/evaluations", too_long)
    assert direct[0] == via[0] == 413
    assert via[2] == direct[2]
    assert via[1]["Content-Type"] == "application/problem+json"
    assert via[1]["X-Content-Type-Options"] == "nosniff"

    def chunks():
        for _ in range(MAX_BODY // 1000 + 2):
            yield b" " * 1000

    req = urllib.request.Request(proxy + "/v1/evaluations", data=chunks(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Transfer-Encoding": "chunked"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 413
    assert orjson.loads(refused.value.read()) == direct[2]


def test_a_chunked_body_under_the_limit_reaches_the_api_whole(proxy):
    """nginx reads a chunked body whole and hands it to gunicorn with its length."""
    def chunks():
        for i in range(0, len(EVALUATION), 700):
            yield EVALUATION[i:i + 700]

    req = urllib.request.Request(proxy + "/v1/evaluations", data=chunks(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Transfer-Encoding": "chunked"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert round(orjson.loads(resp.read())["aggregate"]["map"], 4) == 0.1785


def test_make_run_answers_beside_three_slow_clients_not_four():
    """``make run``'s own bound, as README and docs/configuration.md state it: gunicorn
    without Redis and without a proxy (1 process × CRANFIELD_THREADS = 4 threads) answers
    beside 3 slow connections; a 4th takes the last thread and stalls it."""
    with running_gunicorn() as base:
        bound = answer_bound(base)
        with SlowClients(base, 3):
            seen = normal_traffic(base, rounds=3)
        assert max(seconds for _, seconds, _, _ in seen) <= bound, seen
        assert {status for _, _, status, _ in seen} == {200}
        with SlowClients(base, 4):
            with pytest.raises(OSError):  # urllib's timeout
                normal_traffic(base, rounds=1, timeout=bound)
