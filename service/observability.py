"""Metrics, request ids and JSON-lines logs for the API: ``init_app(app)``.

- ``GET /metrics`` (Prometheus text format): ``cranfield_http_requests_total{route,method,
  status}`` and ``cranfield_http_request_duration_seconds{route,method}``, where ``route`` is
  the URL rule (``/v1/jobs/<job_id>``, never the raw path; ``unmatched`` when no rule
  matched), so the number of series stays bounded; then, read at scrape time, the job
  counters and duration histogram, the decoded-qrels cache's hits and misses (from Redis, or
  this process in the embedded mode; see ``backend.telemetry``) and the queue's depth.
  Under gunicorn, ``PROMETHEUS_MULTIPROC_DIR`` (set by ``service/gunicorn.conf.py``) makes
  every worker process write its HTTP metrics to files there and /metrics sum them all.
- Request ids: an incoming ``X-Request-ID`` of at most 128 characters of ``[A-Za-z0-9._-]`` is
  kept, anything else replaced by a new one (uuid4, 32 hex digits); it is in ``g.request_id``,
  in :func:`current_request_id` (routes put it in job specs, so workers log it), in every log
  line written while the request is served, and in the response's ``X-Request-ID``.
- One access line per request (logger ``cranfield.access``): method, route, path (without the
  query string), status, duration_ms, request_id, remote_addr, and the caller's key_id and
  tenant when API keys are on. Never a header: no ``Authorization``, no API key. Successful
  probes and scrapes (/healthz, /readyz, /metrics) are logged at DEBUG, everything else at
  INFO (5xx at WARNING).
"""

from __future__ import annotations

import logging
import os
import re
import time

from flask import Blueprint, Flask, Response, current_app, g, has_request_context, request

from backend.config import metrics_dir
from backend.telemetry import (  # noqa: F401 (configure_logging, JsonFormatter: this module's API)
    CACHE_REPORTER,
    REQUEST_ID,
    JsonFormatter,
    configure_logging,
    metric_families,
    read_counters,
)

EXTENSION = "cranfield_observability"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Latency buckets (seconds): a small evaluation answers in milliseconds, a large upload in
#: tens of seconds; gunicorn's timeout is two minutes.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   120.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
QUIET_ROUTES = frozenset({"/healthz", "/readyz", "/metrics"})
_VALID_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")

access_log = logging.getLogger("cranfield.access")
log = logging.getLogger("cranfield.observability")
bp = Blueprint("observability", __name__)


def current_request_id() -> str | None:
    """The id of the request being served (None outside a request): put it in job specs."""
    return g.get("request_id") if has_request_context() else REQUEST_ID.get()


def request_id_from(header: str | None) -> str:
    """The incoming id if it is sane, else a new one (128 random bits, 32 hex digits, like a
    uuid4's hex; os.urandom is the cheaper way to them)."""
    if header and _VALID_ID.fullmatch(header):
        return header
    return os.urandom(16).hex()


class Observability:
    """One app's HTTP metrics (counter and histogram) and its request hooks."""

    def __init__(self, app: Flask):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.app = app
        self.multiprocess_dir = metrics_dir()
        self.registry = CollectorRegistry()
        self.requests = Counter("cranfield_http_requests", "HTTP requests answered, by route "
                                "(URL rule), method and status.",
                                ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("cranfield_http_request_duration_seconds",
                                 "Time to answer an HTTP request (seconds), by route and "
                                 "method.", ["route", "method"], buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        # each (route, method, status)'s children, found once: labels() costs more than the
        # increment itself, and every request pays it
        self._children: dict[tuple[str, str, int], tuple] = {}

    # -- request hooks ----------------------------------------------------------------------
    # Every request passes these hooks: each reads ``g`` and the environ once (a proxy
    # lookup costs ~1-2 us, and a small evaluation is a few hundred).
    def begin(self) -> None:
        ctx = g._get_current_object()
        ctx._obs_start = time.perf_counter()
        ctx.request_id = request_id = request_id_from(
            request.environ.get("HTTP_X_REQUEST_ID"))
        ctx._obs_token = REQUEST_ID.set(request_id)

    def finish(self, response: Response) -> Response:
        ctx = g._get_current_object()
        request_id = getattr(ctx, "request_id", None)
        if request_id is None:  # another before_request hook stopped ours from running
            request_id = ctx.request_id = request_id_from(
                request.environ.get("HTTP_X_REQUEST_ID"))
        response.headers["X-Request-ID"] = request_id
        self._observe(response.status_code)
        return response

    def teardown(self, exc: BaseException | None) -> None:
        if exc is not None and not g.get("_obs_done"):  # propagated, never answered by Flask
            self._observe(500)
        token = g.pop("_obs_token", None)
        if token is not None:
            try:
                REQUEST_ID.reset(token)
            except ValueError:  # set in another context: just forget the id
                REQUEST_ID.set(None)

    def _observe(self, status: int) -> None:
        ctx = g._get_current_object()
        req = request._get_current_object()
        ctx._obs_done = True
        start = getattr(ctx, "_obs_start", None)
        duration = time.perf_counter() - start if start is not None else 0.0
        rule = req.url_rule
        route = rule.rule if rule is not None else "unmatched"
        method = req.method if req.method in METHODS else "other"
        try:
            children = self._children.get((route, method, status))
            if children is None:
                children = self._children[(route, method, status)] = (
                    self.requests.labels(route, method, str(status)),
                    self.latency.labels(route, method))
            children[0].inc()
            children[1].observe(duration)
        except Exception:  # pragma: no cover - a metrics file we cannot write
            log.exception("could not record the request's metrics")
        level = (logging.WARNING if status >= 500 else
                 logging.DEBUG if route in QUIET_ROUTES and status < 400 else logging.INFO)
        if access_log.isEnabledFor(level):
            fields = {"method": req.method[:16], "route": route, "path": req.path,
                      "status": status, "duration_ms": round(duration * 1000, 3),
                      "request_id": getattr(ctx, "request_id", None),
                      "remote_addr": req.remote_addr}
            # service/auth.py: who called (never the key)
            principal = getattr(ctx, "principal", None)
            if principal is not None:
                fields["key_id"] = getattr(principal, "key_id", None)
                fields["tenant"] = getattr(principal, "tenant", None)
            access_log.log(level, "%s %s %s", method, req.path, status, extra=fields)
        if CACHE_REPORTER.pending():
            self.flush_cache()

    # -- job metrics ------------------------------------------------------------------------
    def _backend(self):
        return self.app.extensions.get("cranfield")

    def _redis(self):
        backend = self._backend()
        return getattr(backend, "redis", None) if getattr(backend, "kind", None) == "redis" \
            else None

    def flush_cache(self) -> None:
        """This process's decoded-qrels cache lookups since the last flush, into the
        counters (Redis, or memory)."""
        CACHE_REPORTER.flush(self._redis())

    def queue_depth(self) -> int | None:
        backend = self._backend()
        return backend.queued_count() if backend is not None else None

    def job_families(self) -> list:
        redis = self._redis()
        try:
            return metric_families(read_counters(redis), self.queue_depth())
        except Exception as exc:  # Redis down: the HTTP metrics are still worth serving
            log.warning("job metrics unavailable: %s: %s", exc.__class__.__name__, exc)
            from prometheus_client.core import GaugeMetricFamily

            return [GaugeMetricFamily("cranfield_job_metrics_up", "Whether the job metrics "
                                      "could be read (0: Redis did not answer).", value=0)]

    def collect(self):
        """Everything /metrics shows: HTTP metrics (summed over gunicorn's processes in
        multiprocess mode) and the job metrics read now."""
        if self.multiprocess_dir:
            from prometheus_client.multiprocess import MultiProcessCollector

            yield from MultiProcessCollector(None, self.multiprocess_dir).collect()
        else:
            yield from self.registry.collect()
        yield from self.job_families()


@bp.get("/metrics")
def metrics() -> Response:
    """Prometheus text exposition format."""
    from prometheus_client import generate_latest

    obs: Observability = current_app.extensions[EXTENSION]
    obs.flush_cache()
    body = generate_latest(obs)  # type: ignore[arg-type] (anything with collect() will do)
    return Response(body, content_type=CONTENT_TYPE)


def init_app(app: Flask) -> Observability:
    """Register the hooks and /metrics on ``app`` (once; a second call changes nothing). The
    request hooks go first among before_request hooks (so an early 401 still has an id and
    is counted) and run last among after_request hooks (so they see the final status)."""
    if EXTENSION in app.extensions:
        return app.extensions[EXTENSION]
    obs = Observability(app)
    app.extensions[EXTENSION] = obs
    app.before_request_funcs.setdefault(None, []).insert(0, obs.begin)
    app.after_request_funcs.setdefault(None, []).insert(0, obs.finish)
    app.teardown_request_funcs.setdefault(None, []).insert(0, obs.teardown)
    app.register_blueprint(bp)
    return obs
