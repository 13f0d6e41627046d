"""Observability with the Flask test client: /metrics (Prometheus text), request ids, JSON-lines
logs, and the job metrics of the embedded mode (no Redis)."""

from __future__ import annotations

import hashlib
import io
import logging
import re
import time
import uuid

import orjson
import pytest
from flask import request
from prometheus_client.parser import text_string_to_metric_families

from backend import telemetry as job_metrics
from backend.contract import ComparisonJob, EvaluationJob
from service import observability

RUN = {"q1": {"d1": 2.0, "d2": 1.0, "d3": 0.5}, "q2": {"d9": 1.0}}
QRELS = {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 1}}
BODY = {"run": RUN, "qrels": QRELS, "measures": ["map", "P.5"]}
SECRET = "secret-key-123"


@pytest.fixture
def obs_app(app):
    """The API with observability. ``create_app`` registers it (``init_app`` is idempotent):
    calling it here keeps these tests meaningful on their own."""
    @app.get("/_test/log")
    def _log_inside_a_request():
        # a careless line: a credential in the text and in an extra field
        logging.getLogger("cranfield.test").warning(
            "handling %s", request.headers.get("Authorization"), extra={"api_key": SECRET})
        return {"request_id": observability.current_request_id()}

    observability.init_app(app)
    return app


@pytest.fixture
def http(obs_app):
    return obs_app.test_client()


@pytest.fixture
def logs():
    """Everything logged (INFO and up) while the test runs, as JSON lines."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(job_metrics.JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def scrape(client) -> tuple[str, dict]:
    """/metrics: the text, and its samples as {(name, sorted label items): value}."""
    resp = client.get("/metrics")
    assert resp.status_code == 200
    assert resp.mimetype == "text/plain"
    text = resp.get_data(as_text=True)
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return text, samples


def value(samples: dict, name: str, **labels) -> float:
    """The sample's value; the sample must be there (a missing metric is not a 0)."""
    key = (name, tuple(sorted(labels.items())))
    assert key in samples, f"no sample {name}{dict(labels)} in /metrics"
    return samples[key]


def baseline(samples: dict, name: str, **labels) -> float:
    """The sample's value in a scrape taken before the counting starts: 0 when it is not
    there yet (a labelled counter appears on its first increment)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_requests_are_counted_by_route_method_and_status(http):
    for _ in range(3):
        assert http.post("/v1/evaluations", json=BODY).status_code == 200
    bad = dict(BODY, run={"q1": {"d1": "x"}})
    assert http.post("/v1/evaluations", json=bad).status_code == 422
    assert http.get("/v1/jobs/abc123def").status_code == 404
    assert http.get("/no/such/path").status_code == 404
    text, samples = scrape(http)
    requests = "cranfield_http_requests_total"
    assert value(samples, requests, route="/v1/evaluations", method="POST", status="200") == 3
    assert value(samples, requests, route="/v1/evaluations", method="POST", status="422") == 1
    # the URL rule, never the path: job ids do not make series of their own
    assert value(samples, requests, route="/v1/jobs/<job_id>", method="GET", status="404") == 1
    assert value(samples, requests, route="unmatched", method="GET", status="404") == 1
    assert "abc123def" not in text and "/no/such/path" not in text

    hist = "cranfield_http_request_duration_seconds"
    labels = {"route": "/v1/evaluations", "method": "POST"}
    assert value(samples, hist + "_count", **labels) == 4
    assert value(samples, hist + "_bucket", le="+Inf", **labels) == 4
    assert 0 < value(samples, hist + "_sum", **labels) < 60
    bounds = [float(le) for (name, items) in samples for k, le in items
              if name == hist + "_bucket" and k == "le" and le != "+Inf"
              and dict(items)["route"] == "/v1/evaluations"]
    assert sorted(bounds) == list(observability.LATENCY_BUCKETS)
    counts = [value(samples, hist + "_bucket", le=repr(b), **labels) for b in sorted(bounds)]
    assert counts == sorted(counts) and counts[-1] <= 4  # cumulative


def test_metrics_count_only_this_apps_requests_and_show_the_job_families(http):
    http.get("/healthz")
    text, samples = scrape(http)  # the scrape itself is counted once it is answered
    assert value(samples, "cranfield_http_requests_total", route="/healthz", method="GET",
                 status="200") == 1
    for family in ("cranfield_jobs_enqueued_total", "cranfield_jobs_finished_total",
                   "cranfield_jobs_failed_total", "cranfield_job_duration_seconds_bucket",
                   "cranfield_qrels_cache_hits_total", "cranfield_qrels_cache_misses_total",
                   "cranfield_queue_depth"):
        assert family in text, family
    for kind in ("evaluation", "shard", "combine", "comparison"):
        assert ("cranfield_jobs_enqueued_total", (("kind", kind),)) in samples
    assert value(samples, "cranfield_queue_depth") == 0
    _, again = scrape(http)
    assert value(again, "cranfield_http_requests_total", route="/metrics", method="GET",
                 status="200") == 1


@pytest.mark.parametrize(("sent", "kept"), [
    ("abc-123.DEF_456", True),
    ("x" * 128, True),
    (None, False),
    ("", False),
    ("x" * 129, False),
    ("has space", False),
    ("semi;colon", False),
    ("é-accent", False),
])
def test_request_id_is_echoed_when_sane_else_made(http, sent, kept):
    headers = {} if sent is None else {"X-Request-ID": sent}
    resp = http.post("/v1/evaluations", json=BODY, headers=headers)
    assert resp.status_code == 200
    rid = resp.headers["X-Request-ID"]
    if kept:
        assert rid == sent
    else:
        assert re.fullmatch(r"[0-9a-f]{32}", rid), rid
    # and errors carry one too, even ones no route answered
    assert re.fullmatch(r"[0-9a-f]{32}", http.get("/nowhere").headers["X-Request-ID"])


def test_request_id_is_what_routes_put_into_job_specs(http):
    resp = http.get("/_test/log", headers={"X-Request-ID": "route-sees-this"})
    assert resp.get_json() == {"request_id": "route-sees-this"}
    assert observability.current_request_id() is None  # outside a request


def test_logs_are_json_lines_with_the_request_id_and_no_credentials(http, logs):
    auth = {"Authorization": f"Bearer {SECRET}"}
    resp = http.post("/v1/evaluations?api_key=" + SECRET, json=BODY,
                     headers={**auth, "X-Request-ID": "req-log-1"})
    assert resp.status_code == 200
    http.get("/_test/log", headers={**auth, "X-Request-ID": "req-log-2"})
    http.post("/v1/evaluations", json=dict(BODY, measures=["mapp"]), headers=auth)
    text = logs.getvalue()
    assert SECRET not in text
    lines = [orjson.loads(line) for line in text.splitlines()]  # every line is JSON
    access = [line for line in lines if line["logger"] == "cranfield.access"]
    assert len(access) == 3
    first = access[0]
    assert first["request_id"] == "req-log-1"
    assert first["method"] == "POST" and first["route"] == "/v1/evaluations"
    assert first["path"] == "/v1/evaluations" and first["status"] == 200
    assert first["duration_ms"] > 0 and first["remote_addr"] == "127.0.0.1"
    assert first["level"] == "INFO" and first["ts"].endswith("Z")
    assert "Authorization" not in orjson.dumps(first).decode()
    assert access[2]["status"] == 422
    assert re.fullmatch(r"[0-9a-f]{32}", access[2]["request_id"])
    # a line logged while the request is served carries its id; credentials are redacted
    inside = next(line for line in lines if line["logger"] == "cranfield.test")
    assert inside["request_id"] == "req-log-2"
    assert inside["api_key"] == "[redacted]"
    assert inside["message"] == "handling Bearer [redacted]"


def test_with_api_keys_refused_requests_are_counted_and_no_key_is_logged(logs):
    """service/auth.py's hook runs before the route: a 401 still gets an id, is counted
    under its route, and the access line names the caller by key_id, never by key."""
    from service.app import create_app

    digest = hashlib.sha256(SECRET.encode()).hexdigest()
    app = create_app({"TESTING": True, "API_KEYS": f"{digest} write search obs-test"})
    observability.init_app(app)
    http = app.test_client()
    refused = http.post("/v1/evaluations", json=BODY,
                        headers={"Authorization": "Bearer wrong-key-456"})
    assert refused.status_code == 401
    assert re.fullmatch(r"[0-9a-f]{32}", refused.headers["X-Request-ID"])
    ok = http.post("/v1/evaluations", json=BODY, headers={"Authorization": f"Bearer {SECRET}",
                                                          "X-Request-ID": "keyed-1"})
    assert ok.status_code == 200 and ok.headers["X-Request-ID"] == "keyed-1"
    _, samples = scrape(http)  # /metrics stays open, as /healthz does
    requests = "cranfield_http_requests_total"
    assert value(samples, requests, route="/v1/evaluations", method="POST", status="401") == 1
    assert value(samples, requests, route="/v1/evaluations", method="POST", status="200") == 1
    text = logs.getvalue()
    assert SECRET not in text and "wrong-key-456" not in text
    access = [line for line in map(orjson.loads, text.splitlines())
              if line["logger"] == "cranfield.access"]
    assert [line["status"] for line in access] == [401, 200]
    assert access[1]["key_id"] == digest[:16] and access[1]["tenant"] == "search"
    assert "key_id" not in access[0]


def test_json_formatter_keeps_extra_fields_and_exceptions():
    formatter = job_metrics.JsonFormatter()
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("cranfield.x", logging.ERROR, __file__, 1, "failed %d", (7,),
                                   sys.exc_info())
    record.job_id = "j1"
    record.password = "hunter2"
    record.request_id = "rid-9"
    line = formatter.format(record)
    assert "\n" not in line
    doc = orjson.loads(line)
    assert doc["message"] == "failed 7" and doc["level"] == "ERROR"
    assert doc["job_id"] == "j1" and doc["request_id"] == "rid-9"
    assert doc["password"] == "[redacted]" and "hunter2" not in line
    assert "ValueError: boom" in doc["exc_info"]


def test_configure_logging_replaces_its_own_handler_only():
    root = logging.getLogger()
    before = list(root.handlers)
    level = root.level
    stream = io.StringIO()
    try:
        job_metrics.configure_logging("warning", io.StringIO())
        handler = job_metrics.configure_logging("info", stream)
        ours = [h for h in root.handlers if getattr(h, "_cranfield_json", False)]
        assert ours == [handler] and all(h in root.handlers for h in before)
        logging.getLogger("cranfield.y").info("hello", extra={"n": 3})
        doc = orjson.loads(stream.getvalue().splitlines()[-1])
        assert doc["message"] == "hello" and doc["n"] == 3 and doc["logger"] == "cranfield.y"
    finally:
        for h in list(root.handlers):
            if getattr(h, "_cranfield_json", False):
                root.removeHandler(h)
        root.setLevel(level)


def test_job_duration_histogram_is_cumulative():
    values: dict[str, float] = {}
    for seconds in (0.07, 0.3, 0.3, 5000.0):
        for field, amount in job_metrics.duration_fields("shard", seconds).items():
            values[field] = values.get(field, 0) + amount
    values["finished|shard"] = 4
    families = {f.name: f for f in job_metrics.metric_families(values, queue_depth=3)}
    hist = {(s.name, s.labels.get("le")): s.value
            for s in families["cranfield_job_duration_seconds"].samples
            if s.labels["kind"] == "shard"}
    name = "cranfield_job_duration_seconds_bucket"
    assert hist[(name, "0.05")] == 0 and hist[(name, "0.1")] == 1
    assert hist[(name, "0.25")] == 1 and hist[(name, "0.5")] == 3
    assert hist[(name, "3600.0")] == 3 and hist[(name, "+Inf")] == 4
    assert hist[("cranfield_job_duration_seconds_count", None)] == 4
    assert hist[("cranfield_job_duration_seconds_sum", None)] == pytest.approx(5000.67)
    finished = {s.labels["kind"]: s.value for s in families["cranfield_jobs_finished"].samples}
    assert finished["shard"] == 4 and finished["evaluation"] == 0
    assert families["cranfield_queue_depth"].samples[0].value == 3


def test_job_kinds_come_from_the_job_functions():
    assert job_metrics.kind_of("worker.jobs.evaluate_job") == "evaluation"
    assert job_metrics.kind_of("worker.jobs.evaluate_shard_job") == "shard"
    assert job_metrics.kind_of("worker.jobs.combine_shards_job") == "combine"
    assert job_metrics.kind_of("worker.jobs.compare_job") == "comparison"
    # an embedded job's kind is its spec's, declared by the contract (never guessed)
    assert ComparisonJob.kind == "comparison" and EvaluationJob.kind == "evaluation"


def wait(client, location: str) -> dict:
    deadline = time.monotonic() + 30
    while True:
        job = client.get(location).get_json()
        if job["status"] in ("finished", "failed") or time.monotonic() > deadline:
            return job
        time.sleep(0.02)


def test_embedded_jobs_are_counted(http):
    """Needs the embedded backend's hooks (backend/queue.py: MemoryBackend.submit and _run
    call backend.telemetry.record_enqueued / record_outcome)."""
    _, before = scrape(http)
    ok = http.post("/v1/evaluations", json=BODY, headers={"Prefer": "respond-async"})
    bad = http.post("/v1/evaluations", json=dict(BODY, run="q1 Q0 d1 1 abc r\n"),
                    headers={"Prefer": "respond-async"})
    assert ok.status_code == bad.status_code == 202
    assert wait(http, ok.headers["Location"])["status"] == "finished"
    assert wait(http, bad.headers["Location"])["status"] == "failed"
    _, after = scrape(http)

    def grew(name, **labels):
        return value(after, name, **labels) - baseline(before, name, **labels)

    assert grew("cranfield_jobs_enqueued_total", kind="evaluation") == 2
    assert grew("cranfield_jobs_finished_total", kind="evaluation") == 1
    assert grew("cranfield_jobs_failed_total", kind="evaluation") == 1
    assert grew("cranfield_job_duration_seconds_count", kind="evaluation") == 2
    assert grew("cranfield_job_duration_seconds_bucket", kind="evaluation", le="+Inf") == 2
    assert grew("cranfield_job_duration_seconds_sum", kind="evaluation") > 0
    assert value(after, "cranfield_queue_depth") == 0


def test_embedded_qrels_cache_hits_and_misses(http):
    # qrels no other test has stored: the first lookup decodes them, the second does not
    qrels = {"q1": {"d1": 1, f"d-{uuid.uuid4().hex}": 1}}
    assert http.put("/v1/qrels/obs-cache", json={"qrels": qrels}).status_code == 201
    _, before = scrape(http)
    body = {"run": RUN, "qrels_id": "obs-cache", "measures": ["map"]}
    assert http.post("/v1/evaluations", json=body).status_code == 200
    _, middle = scrape(http)
    assert http.post("/v1/evaluations", json=body).status_code == 200
    _, after = scrape(http)
    misses, hits = "cranfield_qrels_cache_misses_total", "cranfield_qrels_cache_hits_total"
    assert value(middle, misses) - baseline(before, misses) == 1
    assert value(middle, hits) - baseline(before, hits) == 0
    assert value(after, misses) - value(middle, misses) == 0
    assert value(after, hits) - value(middle, hits) == 1


def test_create_app_serves_metrics(app):
    """create_app itself registers observability (service/app.py: observability.init_app)."""
    client = app.test_client()
    assert client.get("/metrics").status_code == 200
    assert "X-Request-ID" in client.get("/healthz").headers


@pytest.mark.parametrize("proxies, logged", [(0, "127.0.0.1"), (1, "203.0.113.7")])
def test_the_access_log_names_the_client_behind_trusted_proxies(logs, proxies, logged):
    """Behind the compose deployment's nginx (CRANFIELD_TRUSTED_PROXIES=1) the access line
    names the client its X-Forwarded-For gives; with none trusted (the default), the peer,
    whatever a client writes in that header."""
    from service.app import create_app

    app = create_app({"TESTING": True, "TRUSTED_PROXIES": proxies})
    observability.init_app(app)
    resp = app.test_client().post("/v1/evaluations", json=BODY,
                                  headers={"X-Forwarded-For": "203.0.113.7"})
    assert resp.status_code == 200
    [line] = [line for line in map(orjson.loads, logs.getvalue().splitlines())
              if line["logger"] == "cranfield.access"]
    assert line["remote_addr"] == logged
