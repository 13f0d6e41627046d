"""Configuration, read from the environment in this one place: the web app's settings
(:func:`app_settings`), gunicorn's (:func:`server_settings`) and the worker's
(:func:`worker_settings`). Every variable is ``CRANFIELD_<NAME>``; ``REDIS_URL`` is also
read unprefixed, as hosting platforms set it. Without any, the service runs on the defaults
below (no Redis: jobs live in the serving process; stored qrels, like results, in the
results database). The engine's own knobs (reader thresholds) are the engine's:
``cranfield/settings.py``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "CRANFIELD_"

#: The web app's settings and their defaults (``create_app(config)`` overrides them).
APP_DEFAULTS: dict[str, Any] = {
    "MAX_CONTENT_LENGTH": 512 * 1024 * 1024,   # bytes; larger bodies get 413
    "MAX_FORM_MEMORY_SIZE": 512 * 1024 * 1024,  # multipart text fields (werkzeug's limit)
    "MAX_TOPICS": 100_000,
    "MAX_DOCS_PER_TOPIC": 10_000,
    # units of work of a synchronous comparison (cranfield.compare.comparison_work.comparison_work);
    # more: 422, or queue it with Prefer: respond-async. 4e10: at most ~3 s and ~250 MB here
    "MAX_COMPARISON_WORK": 40_000_000_000,
    # units of work of one stability document (issue #31, GET /v1/stability, service/stability.py):
    # the rank statistics' bootstrap, the pairs' tests under both judgments and the results
    # and values read, counted before any is read; more: 422 naming work
    "MAX_STABILITY_WORK": 40_000_000_000,
    # budgets before work (issue #27), checked before the work is done: the measure
    # instances one evaluation's names expand to (P.1,2,…,20000 is 20,000); its values,
    # instances × topics evaluated, synchronous and queued (5e6 values: a ~150 MB answer)
    "MAX_MEASURE_INSTANCES": 10_000,
    "MAX_EVALUATION_VALUES": 5_000_000,
    "MAX_QUEUED_EVALUATION_VALUES": 20_000_000,
    # topic metadata (issue #28): distinct segment labels (each its own summary, and in a
    # comparison its own paired-test family), synchronous and queued; more: 422. Its
    # aggregates, instances x (topic-label pairs + labels), count against the values above
    "MAX_SEGMENTS": 1_000,
    # a pool's work, runs × topics × documents pooled per topic (min(depth, the longest
    # topic)), synchronous and queued: a larger one is 422 (cranfield.compare.pooling.pool_work)
    "MAX_POOL_WORK": 2_000_000,
    "MAX_QUEUED_POOL_WORK": 20_000_000,
    # the runs one POST /v1/evaluations/batch evaluates against its qrels (issue #30); more:
    # 422 naming runs, before any is read
    "MAX_BATCH_RUNS": 200,
    # the memory an uploaded Parquet / Arrow run or qrels will take once read, estimated from
    # its metadata before anything is decompressed (cranfield.inputs.table_bounds.memory_estimate:
    # rows x bytes a row + uncompressed bytes), sync and queued; more: 413. The variable, when set,
    # bounds the library and the CLI too (CRANFIELD_TABLE_MAX_MEMORY; unset, they have none)
    "TABLE_MAX_MEMORY": 1024 * 1024 * 1024,
    "REDIS_URL": None,
    "ASYNC_THRESHOLD_BYTES": 32 * 1024 * 1024,  # larger bodies are queued (202)
    "JOB_TIMEOUT": 3600,        # seconds a job may run
    "RESULT_TTL": 24 * 3600,    # seconds results are kept
    "QUEUED_TTL": 6 * 3600,     # seconds a job may wait in the queue
    "INPUT_TTL": 7 * 24 * 3600,  # seconds an enqueued run is kept if no worker takes it
    "SHARDS": 4,                # a large queued run is split into this many topic shards
    "SHARD_MIN_BYTES": 16 * 1024 * 1024,  # ... when its TREC text is at least this large
    "MAX_QUEUED_JOBS": 100,     # per tenant: queued or running jobs before 429
    "API_KEYS_FILE": None,      # API keys on (see service/auth.py): a file of hashed keys
    "API_KEYS": None,           # ... or the same lines in the variable itself
    "RATE_LIMIT": None,         # per key, e.g. 600/60 (requests per seconds); None: no limit
    # recorded results (issue #18): a SQLAlchemy URL; None: database_url() (the variable
    # CRANFIELD_DATABASE_URL, else the embedded SQLite file)
    "DATABASE_URL": None,
    # the largest page of a listing of systems or of a system's results, and the
    # most points of a trend (the newest of its window)
    "MAX_PAGE_ITEMS": 1000,
    # the results one re-score (issue #31, POST /v1/systems/{name}/rescore, /v1/rescores)
    # covers, counted before anything is planned; more: 422 naming systems
    "MAX_RESCORE_RESULTS": 1000,
    # per tenant: re-score jobs queued or running (one per result re-scored; a result already
    # queued under the same qrels shares its job) before a re-score is 429
    "MAX_QUEUED_RESCORES": 1000,
    # the systems one POST /v1/rescores names (422 naming systems beyond)
    "MAX_RESCORE_SYSTEMS": 100,
    # seconds: GET /v1/rescores/{id} queues again the items whose jobs the queue lost (Redis
    # restarted empty) at most once in this interval per re-score, one poll at a time (a
    # Redis lock); other polls read the progress alone (backend.rescoring.recover)
    "RESCORE_RECOVERY_INTERVAL": 10,
    # many judges (issue #31, service/judges.py): the judgments a judged qrels PUT as rows or
    # columns holds, and those GET .../agreement and POST .../consensus read (413 beyond);
    # the judges of one judged qrels (pairs of them: Cohen's kappa each); the bootstrap's
    # resamples over topics (default, most a request may ask); the agreement's units of work,
    # cranfield.judges.agreement_document.agreement_work, counted before the work (422
    # naming resamples beyond it; 5e8: about 5 s here)
    "MAX_JUDGED_JUDGMENTS": 2_000_000,
    "MAX_JUDGES": 50,
    "AGREEMENT_RESAMPLES": 1000,
    "MAX_AGREEMENT_RESAMPLES": 10_000,
    "MAX_AGREEMENT_WORK": 500_000_000,
    # proxies in front of the service whose X-Forwarded-For / -Proto are believed (the
    # compose deployment's nginx: 1): the access log and rate limits then see the client's
    # address, not the proxy's. 0: none believed (a client could write any address there)
    "TRUSTED_PROXIES": 0,
}
_APP_INTEGERS = ("MAX_CONTENT_LENGTH", "MAX_FORM_MEMORY_SIZE", "MAX_TOPICS",
                 "MAX_DOCS_PER_TOPIC", "MAX_COMPARISON_WORK", "MAX_STABILITY_WORK",
                 "MAX_MEASURE_INSTANCES",
                 "MAX_EVALUATION_VALUES", "MAX_QUEUED_EVALUATION_VALUES", "MAX_SEGMENTS",
                 "MAX_POOL_WORK", "MAX_BATCH_RUNS",
                 "MAX_QUEUED_POOL_WORK", "TABLE_MAX_MEMORY", "ASYNC_THRESHOLD_BYTES",
                 "JOB_TIMEOUT", "RESULT_TTL", "QUEUED_TTL", "INPUT_TTL", "SHARDS",
                 "SHARD_MIN_BYTES", "MAX_QUEUED_JOBS", "MAX_PAGE_ITEMS",
                 "MAX_RESCORE_RESULTS", "MAX_QUEUED_RESCORES",
                 "MAX_RESCORE_SYSTEMS", "RESCORE_RECOVERY_INTERVAL", "MAX_JUDGED_JUDGMENTS",
                 "MAX_JUDGES",
                 "AGREEMENT_RESAMPLES", "MAX_AGREEMENT_RESAMPLES", "MAX_AGREEMENT_WORK")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


class ConfigError(RuntimeError):
    """Invalid configuration: raised at start-up, never per request."""


def _variable(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    return (os.environ if environ is None else environ).get(name)


def redis_url(environ: Mapping[str, str] | None = None) -> str | None:
    """``CRANFIELD_REDIS_URL``, else ``REDIS_URL``; None: no Redis (the embedded mode)."""
    env = os.environ if environ is None else environ
    return env.get(PREFIX + "REDIS_URL") or env.get("REDIS_URL") or None


def database_url(environ: Mapping[str, str] | None = None, url: str | None = None) -> str:
    """``url`` if given, else ``CRANFIELD_DATABASE_URL`` (SQLAlchemy's form; ``postgres://``
    and ``postgresql://`` are read as ``postgresql+psycopg://``, psycopg 3 being the driver
    installed). Neither: the embedded SQLite file ``cranfield.db`` in ``CRANFIELD_DATA_DIR``,
    else in ``instance/`` at the repository root (like Flask's instance folder), so the
    service needs nothing else."""
    env = os.environ if environ is None else environ
    url = url or env.get(PREFIX + "DATABASE_URL")
    if url:
        for scheme in ("postgres://", "postgresql://"):
            if url.startswith(scheme):
                return "postgresql+psycopg://" + url[len(scheme):]
        return url
    folder = env.get(PREFIX + "DATA_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "instance")
    return "sqlite:///" + os.path.join(os.path.abspath(folder), "cranfield.db")


#: seconds a queued job's record rides out an unreachable results database (retried with
#: exponential backoff) before the job fails with "could not record the result"
DB_RETRY_S_DEFAULT = 30.0


def db_retry_seconds(environ: Mapping[str, str] | None = None) -> float:
    """``CRANFIELD_DB_RETRY_S`` (default 30): how long a queued job retries recording its
    result (or a gate verdict) while the results database cannot be reached; 0: no retry.
    :class:`ConfigError` unless a number of seconds, 0 or more."""
    text = _variable(PREFIX + "DB_RETRY_S", environ)
    if text is None or text == "":
        return DB_RETRY_S_DEFAULT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ConfigError(f"CRANFIELD_DB_RETRY_S must be a number of seconds, 0 or more, "
                          f"got {text!r}")
    return value


def log_level(environ: Mapping[str, str] | None = None) -> str:
    """``CRANFIELD_LOG_LEVEL`` (default ``info``), lower case; :class:`ConfigError` if it is
    not a level."""
    text = _variable("CRANFIELD_LOG_LEVEL", environ) or "info"
    if text.lower() not in LOG_LEVELS:
        raise ConfigError(f"CRANFIELD_LOG_LEVEL must be debug, info, warning, error or "
                          f"critical, got {text!r}")
    return text.lower()


def app_settings(overrides: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The web app's settings: :data:`APP_DEFAULTS`, then ``CRANFIELD_*`` variables, then
    ``overrides``, validated (:class:`ConfigError` names the first bad one)."""
    from_env: dict[str, Any] = {}
    for key in APP_DEFAULTS:
        value = _variable(PREFIX + key, environ)
        if value is not None:
            from_env[key] = value
    from_env["REDIS_URL"] = redis_url(environ)  # the worker's reading: an empty one is unset
    config = {**APP_DEFAULTS, **from_env, **(overrides or {})}
    db_retry_seconds(environ)  # read by the embedded queue's jobs: a bad one stops start-up
    for key in _APP_INTEGERS:
        try:
            config[key] = int(config[key])
        except (TypeError, ValueError):
            raise ConfigError(f"CRANFIELD_{key} must be an integer, got {config[key]!r}") \
                from None
        if config[key] <= 0:
            raise ConfigError(f"CRANFIELD_{key} must be positive, got {config[key]}")
    proxies = str(config["TRUSTED_PROXIES"])
    if not (proxies.isascii() and proxies.isdigit()):  # 0 is the default: none believed
        raise ConfigError(f"CRANFIELD_TRUSTED_PROXIES must be 0 or a positive integer, "
                          f"got {config['TRUSTED_PROXIES']!r}")
    config["TRUSTED_PROXIES"] = int(proxies)
    return config


def work_bounds(config: Mapping[str, Any]) -> dict[str, int | None]:
    """``backend.contract.Job.work_bounds`` under the app's settings: the budgets a queued
    job is held to (the queued ones; the measure instances as a synchronous request's)."""
    return {"max_measure_instances": config.get("MAX_MEASURE_INSTANCES"),
            "max_evaluation_values": config.get("MAX_QUEUED_EVALUATION_VALUES"),
            "max_segments": config.get("MAX_SEGMENTS"),
            "max_pool_work": config.get("MAX_QUEUED_POOL_WORK"),
            # the input limits, held in the worker as the API holds them (413 alike)
            "max_topics": config.get("MAX_TOPICS"),
            "max_docs_per_topic": config.get("MAX_DOCS_PER_TOPIC")}


def metrics_dir(environ: Mapping[str, str] | None = None) -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR``: where every gunicorn worker writes its HTTP metrics (set
    by the operator, or by gunicorn.conf.py's ``on_starting`` before the workers fork)."""
    return (os.environ if environ is None else environ).get("PROMETHEUS_MULTIPROC_DIR") or None


def bind_address(environ: Mapping[str, str] | None = None) -> tuple[str, int]:
    """(host, port) of ``CRANFIELD_BIND`` (``HOST:PORT``, or ``HOST`` on port 8000; default
    ``127.0.0.1:8000``)."""
    text = _variable("CRANFIELD_BIND", environ) or "127.0.0.1:8000"
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = text, "8000"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"CRANFIELD_BIND must be HOST:PORT, got {text!r}")
    return host or "127.0.0.1", int(port)


@dataclass(frozen=True)
class ServerSettings:
    """gunicorn's settings (``service/gunicorn.conf.py``)."""
    bind: str
    workers: int
    threads: int
    timeout: int
    access_log: str | None
    log_level: str
    metrics_dir: str | None


def _positive(name: str, default: int, environ: Mapping[str, str] | None) -> int:
    text = _variable(name, environ)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {text!r}")
    return value


def server_settings(cpu_count: int, environ: Mapping[str, str] | None = None
                    ) -> ServerSettings:
    """gunicorn's settings. Without Redis, queued jobs live in the serving process: one
    process (with threads) keeps them visible to every request; with Redis,
    processes scale out (up to 4, one per core)."""
    env = os.environ if environ is None else environ
    shared_state = redis_url(env) is not None
    return ServerSettings(
        bind=_variable("CRANFIELD_BIND", env) or "127.0.0.1:8000",
        workers=_positive("CRANFIELD_WORKERS", min(4, cpu_count) if shared_state else 1, env),
        threads=_positive("CRANFIELD_THREADS", 4, env),
        timeout=_positive("CRANFIELD_TIMEOUT", 120, env),
        access_log=_variable("CRANFIELD_ACCESS_LOG", env) or None,
        log_level=log_level(env),
        metrics_dir=metrics_dir(env),
    )


@dataclass(frozen=True)
class WorkerSettings:
    """The RQ worker's settings (``cranfield worker``)."""
    redis_url: str | None
    log_level: str
    #: tests only: seconds a work horse waits once its job is marked started (a job slow
    #: enough to kill a worker in the middle of); unset in production
    test_job_delay: float
    #: CRANFIELD_DB_RETRY_S (:func:`db_retry_seconds`)
    db_retry_s: float = DB_RETRY_S_DEFAULT


def worker_settings(environ: Mapping[str, str] | None = None) -> WorkerSettings:
    delay = _variable("CRANFIELD_TEST_JOB_DELAY", environ)
    try:
        seconds = float(delay) if delay else 0.0
    except ValueError:
        raise ConfigError(f"CRANFIELD_TEST_JOB_DELAY must be a number, got {delay!r}") \
            from None
    return WorkerSettings(redis_url=redis_url(environ), log_level=log_level(environ),
                          test_job_delay=seconds, db_retry_s=db_retry_seconds(environ))
