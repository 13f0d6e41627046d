"""Job metrics that outlive the process that counted them, and JSON-lines logging.

Jobs run in RQ work horses (forked per job, on any machine), so their counters live in Redis,
in one hash, ``cranfield:metrics:counters``; whichever web process serves ``GET /metrics``
reads it and renders Prometheus counters and a histogram. Without Redis (the embedded mode,
one process) the same counters live in :data:`MEMORY`. Recording never raises: a metric
that cannot be written is logged and dropped, never the job or the request.

Hash fields (values are Redis integers, except the duration sums):

    enqueued|KIND  finished|KIND  failed|KIND              jobs, per kind
    duration_bucket|KIND|LE  duration_sum|KIND  duration_count|KIND
                                                            cumulative, as Prometheus's are
    qrels_cache_hits  qrels_cache_misses                    decoded-qrels LRU lookups

Logging: :class:`JsonFormatter` writes one JSON object per line, with the request id of the
HTTP request being served (or of the request that enqueued the job being run) from
:data:`REQUEST_ID`. Never imports Flask: the worker uses this module, and the web service's
``service.observability`` builds on it.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping

import orjson

from . import keys
from .contract import KIND_OF_FUNCTION

log = logging.getLogger("cranfield.metrics")

KEY = keys.job_counters()

#: The job functions' kinds (the label of the job metrics), by function name.
KINDS = {path.rpartition(".")[2]: kind for path, kind in KIND_OF_FUNCTION.items()}
OUTCOMES = ("finished", "failed")
#: Upper bounds (seconds) of the job-duration histogram's buckets: shards of a small run take
#: a tenth of a second, a multi-million-line evaluation minutes, the timeout is an hour.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                    600.0, 1800.0, 3600.0)

#: The request id of the HTTP request being served, or of the one whose job is running.
REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("cranfield_request_id",
                                                                        default=None)


def kind_of(function) -> str:
    """The kind of a job from its function (dotted path, as RQ's ``job.func_name``, or the
    function itself): ``worker.jobs.evaluate_job`` -> ``evaluation``."""
    name = function if isinstance(function, str) else getattr(function, "__name__", "")
    name = (name or "").rpartition(".")[2]
    return KINDS.get(name, name or "unknown")


# --------------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------------

class MemoryCounters:
    """The Redis hash's fields in process memory: the embedded mode's job metrics."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}

    def incr(self, fields: Mapping[str, float]) -> None:
        with self._lock:
            for field, amount in fields.items():
                self._values[field] = self._values.get(field, 0) + amount

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._values)


MEMORY = MemoryCounters()


def _incr(connection, fields: Mapping[str, float]) -> None:
    """Add ``fields`` to the counters (Redis when ``connection`` is given, else memory);
    logs and drops what cannot be written."""
    if not fields:
        return
    if connection is None:
        MEMORY.incr(fields)
        return
    try:
        pipe = connection.pipeline(transaction=False)
        for field, amount in fields.items():
            if isinstance(amount, float):
                pipe.hincrbyfloat(KEY, field, amount)
            else:
                pipe.hincrby(KEY, field, amount)
        pipe.execute()
    except Exception as exc:  # a metric is never worth failing a job or a request for
        log.warning("could not record metrics: %s: %s", exc.__class__.__name__, exc)


def record_enqueued(connection, kind: str, count: int = 1) -> None:
    """``count`` jobs of ``kind`` were enqueued (``connection`` None: the embedded mode)."""
    _incr(connection, {f"enqueued|{kind}": int(count)})


_METERED_QUEUE = None


def metered_queue(name: str, connection):
    """An RQ ``Queue`` that counts every job enqueued through it (``enqueue_call`` and
    ``enqueue``), by kind: the web service's queue, so that each enqueue site (evaluations,
    shards, combines, comparisons) is counted without a line of its own."""
    global _METERED_QUEUE
    if _METERED_QUEUE is None:
        from rq import Queue

        class MeteredQueue(Queue):
            def enqueue_call(self, func, *args, **kwargs):
                job = super().enqueue_call(func, *args, **kwargs)
                record_enqueued(self.connection, kind_of(func))
                return job

        _METERED_QUEUE = MeteredQueue
    return _METERED_QUEUE(name, connection=connection)


def duration_fields(kind: str, seconds: float) -> dict[str, float]:
    """The histogram's increments for one observation: every bucket whose bound is at
    least ``seconds`` (cumulative), ``+Inf``, the count and the sum."""
    fields: dict[str, float] = {f"duration_bucket|{kind}|{_le(b)}": 1
                                for b in DURATION_BUCKETS if seconds <= b}
    fields[f"duration_bucket|{kind}|+Inf"] = 1
    fields[f"duration_count|{kind}"] = 1
    fields[f"duration_sum|{kind}"] = float(seconds)
    return fields


def record_outcome(connection, kind: str, status: str, duration_seconds: float | None
                   ) -> None:
    """A job of ``kind`` ended: ``status`` is ``finished`` or ``failed`` (a job whose
    outcome is a problem document counts as failed, as the API reports it)."""
    fields: dict[str, float] = {f"{status}|{kind}": 1}
    if duration_seconds is not None and duration_seconds >= 0:
        fields.update(duration_fields(kind, duration_seconds))
    _incr(connection, fields)


def observe_embedded_job(spec, job_id: str, outcome: Mapping, started_at: float) -> None:
    """An embedded-mode job (``backend.queue.MemoryBackend``, no Redis) ended with
    ``outcome`` (``{"result": …}`` or ``{"problem": …}``): count it and log it, with the id
    of the request that submitted it, as the RQ worker does. ``spec``: the job's
    ``backend.contract`` spec."""
    kind = spec.kind
    status = "failed" if "problem" in outcome else "finished"
    duration = max(0.0, time.time() - started_at)
    record_outcome(None, kind, status, duration)
    fields = {"event": "job_ended", "job_id": job_id, "kind": kind, "outcome": status,
              "duration_ms": round(duration * 1000, 3), "tenant": spec.tenant,
              "request_id": spec.request_id}
    if status == "failed":
        fields["problem"] = {k: outcome["problem"].get(k) for k in ("status", "title", "detail")}
    logging.getLogger("cranfield.worker").log(
        logging.INFO if status == "finished" else logging.WARNING, f"job {status}",
        extra=fields)


def record_cache(connection, hits: int, misses: int) -> None:
    """Lookups in the decoded-qrels LRU (``backend.store.QRELS_CACHE``)."""
    fields = {}
    if hits > 0:
        fields["qrels_cache_hits"] = int(hits)
    if misses > 0:
        fields["qrels_cache_misses"] = int(misses)
    _incr(connection, fields)


class CacheReporter:
    """Reports how much this process's ``QRELS_CACHE`` counters grew since the last report:
    web processes call :meth:`flush` after each request (their synchronous evaluations and
    submissions against stored qrels look the qrels up too) and before rendering /metrics."""

    def __init__(self):
        self._lock = threading.Lock()
        self._reported = (0, 0)

    def pending(self) -> bool:
        """Lookups since the last report (read without the lock: a stale answer only delays a
        report to the next request)."""
        from .store import QRELS_CACHE

        return (QRELS_CACHE.hits, QRELS_CACHE.misses) != self._reported

    def flush(self, connection) -> None:
        from .store import QRELS_CACHE

        if (QRELS_CACHE.hits, QRELS_CACHE.misses) == self._reported:
            return  # the usual case: nothing looked up since the last report
        with self._lock:
            hits, misses = QRELS_CACHE.hits, QRELS_CACHE.misses
            seen_hits, seen_misses = self._reported
            if hits == seen_hits and misses == seen_misses:
                return
            self._reported = (hits, misses)
        record_cache(connection, hits - seen_hits, misses - seen_misses)


CACHE_REPORTER = CacheReporter()


# --------------------------------------------------------------------------------------------
# Reading: Prometheus metric families for /metrics
# --------------------------------------------------------------------------------------------

def read_counters(connection) -> dict[str, float]:
    """The counters as recorded (Redis when ``connection`` is given, else memory)."""
    if connection is None:
        return MEMORY.snapshot()
    return {k.decode(): float(v) for k, v in connection.hgetall(KEY).items()}


def metric_families(values: Mapping[str, float], queue_depth: int | None = None) -> list:
    """Prometheus metric families for the job counters in ``values`` (as read by
    :func:`read_counters`), and the queue's depth when known. Every known kind is present,
    at zero until counted, so that rates and alerts work from the first scrape."""
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    kinds = set(KINDS.values())
    buckets: dict[str, dict[str, float]] = {}
    for field, value in values.items():
        parts = field.split("|")
        if len(parts) >= 2:
            kinds.add(parts[1])
        if parts[0] == "duration_bucket" and len(parts) == 3:
            buckets.setdefault(parts[1], {})[parts[2]] = value
    kinds_sorted = sorted(kinds)
    out = []
    for what, doc in (("enqueued", "Jobs enqueued, by kind."),
                      ("finished", "Jobs that finished with a result, by kind."),
                      ("failed", "Jobs that failed (an error, or a problem with their input; "
                                 "retried attempts are not counted), by kind.")):
        family = CounterMetricFamily(f"cranfield_jobs_{what}", doc, labels=["kind"])
        for kind in kinds_sorted:
            family.add_metric([kind], values.get(f"{what}|{kind}", 0))
        out.append(family)
    hist = HistogramMetricFamily("cranfield_job_duration_seconds",
                                 "Time jobs ran on a worker (seconds), by kind.",
                                 labels=["kind"])
    for kind in kinds_sorted:
        recorded = buckets.get(kind, {})
        bounds = sorted({_le(b) for b in DURATION_BUCKETS} | (set(recorded) - {"+Inf"}),
                        key=float)
        count = values.get(f"duration_count|{kind}", 0)
        # cumulative: a bound never recorded (the buckets changed) takes the one below it
        cumulative, series = 0.0, []
        for bound in bounds:
            cumulative = max(cumulative, recorded.get(bound, 0))
            series.append((bound, cumulative))
        series.append(("+Inf", max(count, recorded.get("+Inf", 0))))
        hist.add_metric([kind], series, values.get(f"duration_sum|{kind}", 0.0))
    out.append(hist)
    out.append(CounterMetricFamily("cranfield_qrels_cache_hits",
                                   "Decoded-qrels cache lookups that found the qrels decoded.",
                                   value=values.get("qrels_cache_hits", 0)))
    out.append(CounterMetricFamily("cranfield_qrels_cache_misses",
                                   "Decoded-qrels cache lookups that had to decode the qrels.",
                                   value=values.get("qrels_cache_misses", 0)))
    if queue_depth is not None:
        out.append(GaugeMetricFamily("cranfield_queue_depth",
                                     "Jobs waiting in the queue for a worker.",
                                     value=queue_depth))
    return out


def _le(bound: float) -> str:
    return repr(float(bound))


# --------------------------------------------------------------------------------------------
# JSON-lines logging
# --------------------------------------------------------------------------------------------

_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime",
                                                               "taskName"}
_SENSITIVE = re.compile(r"authori[sz]ation|api[_-]?key|password|passwd|secret|token|cookie",
                        re.IGNORECASE)
_BEARER = re.compile(r"\b(bearer|basic)\s+[^\s\"',;]+", re.IGNORECASE)
REDACTED = "[redacted]"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``,
    ``pid``, ``request_id`` when known (the record's own, else :data:`REQUEST_ID`), and the
    record's extra fields. Fields named like a credential (authorization, api_key, token,
    password, secret, cookie) are redacted, and so is any ``Bearer …`` in the text."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC)
                    .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": _BEARER.sub(r"\1 " + REDACTED, record.getMessage()),
            "pid": record.process,
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            out["request_id"] = request_id
        for key, value in record.__dict__.items():
            if key in _RECORD_FIELDS or key.startswith("_") or key in out:
                continue
            out[key] = REDACTED if _SENSITIVE.search(key) else value
        if record.exc_info:
            out["exc_info"] = _BEARER.sub(r"\1 " + REDACTED,
                                          self.formatException(record.exc_info))
        if record.stack_info:
            out["stack_info"] = self.formatStack(record.stack_info)
        try:
            return orjson.dumps(out, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:  # e.g. an integer beyond 64 bits
            return orjson.dumps({k: v if isinstance(v, str | float | bool | None) else repr(v)
                                 for k, v in out.items()}).decode()


def logging_config(level: str | int = "INFO", access_log: str | None = None) -> dict:
    """A ``logging.config.dictConfig`` dictionary: every record as a JSON line on stderr,
    gunicorn's own loggers too (its ``logconfig_dict`` setting); gunicorn's access log, if
    ``access_log`` names one (a path, or ``-`` for stdout), as JSON lines there."""
    level = level.upper() if isinstance(level, str) else logging.getLevelName(level)
    handlers: dict[str, dict] = {"json": {"class": "logging.StreamHandler", "formatter": "json",
                                          "stream": "ext://sys.stderr"}}
    if access_log == "-":
        handlers["access"] = {"class": "logging.StreamHandler", "formatter": "json",
                              "stream": "ext://sys.stdout"}
    elif access_log:
        handlers["access"] = {"class": "logging.FileHandler", "formatter": "json",
                              "filename": access_log}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "backend.telemetry.JsonFormatter"}},
        "handlers": handlers,
        "root": {"level": level, "handlers": ["json"]},
        "loggers": {
            "gunicorn.error": {"level": level, "handlers": ["json"], "propagate": False,
                               "qualname": "gunicorn.error"},
            "gunicorn.access": {"level": "INFO", "propagate": False,
                                "handlers": ["access"] if "access" in handlers else [],
                                "qualname": "gunicorn.access"},
        },
    }


def configure_logging(level: str | int = "INFO", stream=None) -> logging.Handler:
    """Send every log record to ``stream`` (stderr) as a JSON line: one handler on the root
    logger, replacing the one an earlier call installed (handlers others installed stay)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_cranfield_json", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler._cranfield_json = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return handler
