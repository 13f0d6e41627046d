"""The application factory (Flask tutorial style): ``create_app(config=None)``.

Configuration comes from defaults, then ``CRANFIELD_*`` environment variables, then the
``config`` mapping; invalid values stop start-up with a message naming the variable.
"""

from __future__ import annotations

import os
from typing import Any

import orjson
from flask import Flask
from flask.json.provider import JSONProvider

from backend.queue import make_backend

from . import auth, comparisons, docs, evaluations, health, jobs, measures, pools, qrels, timing
from .multipart import check_boundary
from .observability import init_app as init_observability
from .problems import register_error_handlers
from .request_body import buffer_chunked_body, discard_unread_body

DEFAULTS: dict[str, Any] = {
    "MAX_CONTENT_LENGTH": 512 * 1024 * 1024,   # bytes; larger bodies get 413
    "MAX_FORM_MEMORY_SIZE": 512 * 1024 * 1024,  # multipart text fields (werkzeug's limit)
    "MAX_TOPICS": 100_000,
    "MAX_DOCS_PER_TOPIC": 10_000,
    # units of work of a synchronous comparison (cranfield.compare.comparison_work); more:
    # 422, or queue it with Prefer: respond-async. 4e10: at most ~3 s and ~250 MB here
    "MAX_COMPARISON_WORK": 40_000_000_000,
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
}
_INT_KEYS = ("MAX_CONTENT_LENGTH", "MAX_FORM_MEMORY_SIZE", "MAX_TOPICS", "MAX_DOCS_PER_TOPIC",
             "MAX_COMPARISON_WORK", "ASYNC_THRESHOLD_BYTES", "JOB_TIMEOUT", "RESULT_TTL",
             "QUEUED_TTL", "INPUT_TTL", "SHARDS", "SHARD_MIN_BYTES", "MAX_QUEUED_JOBS")


class ConfigError(RuntimeError):
    """Invalid configuration: raised at start-up, never per request."""


class OrjsonProvider(JSONProvider):
    """Flask's JSON through orjson: several times faster on large bodies."""

    def dumps(self, obj, **kwargs) -> str:
        return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY).decode()

    def loads(self, s, **kwargs):
        return orjson.loads(s)


def _from_environment() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in DEFAULTS:
        value = os.environ.get(f"CRANFIELD_{key}")
        if value is not None:
            out[key] = value
    if "REDIS_URL" in os.environ and "REDIS_URL" not in out:
        out["REDIS_URL"] = os.environ["REDIS_URL"]
    return out


def _validated(config: dict[str, Any]) -> dict[str, Any]:
    for key in _INT_KEYS:
        try:
            config[key] = int(config[key])
        except (TypeError, ValueError):
            raise ConfigError(f"CRANFIELD_{key} must be an integer, got {config[key]!r}") \
                from None
        if config[key] <= 0:
            raise ConfigError(f"CRANFIELD_{key} must be positive, got {config[key]}")
    return config


def _settings(config: dict[str, Any] | None) -> dict[str, Any]:
    """Defaults, then ``CRANFIELD_*`` variables, then ``config``, validated."""
    return _validated({**DEFAULTS, **_from_environment(), **(config or {})})


def check_configuration(config: dict[str, Any] | None = None) -> None:
    """Raise :class:`ConfigError` naming the first invalid setting (gunicorn's master calls
    this before starting any worker, so a bad value stops start-up with one clear line)."""
    settings = _settings(config)
    try:
        auth.key_ring(settings)
        auth.parse_rate(settings.get("RATE_LIMIT"))
    except auth.KeyFileError as exc:
        raise ConfigError(str(exc)) from None


def _discard_unread_body(response):
    """A body nobody read (an early 401, 403, 429, 415...) is read and dropped before the
    answer leaves: else gunicorn closes the connection its answer said it would keep."""
    discard_unread_body()
    return response


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(_settings(config))
    app.json = OrjsonProvider(app)
    app.extensions["cranfield"] = make_backend(app.config)
    register_error_handlers(app)
    init_observability(app)
    try:
        auth.init_app(app)
    except auth.KeyFileError as exc:
        raise ConfigError(str(exc)) from None
    # after the API-key check: a 401 comes first
    app.before_request(check_boundary)
    app.before_request(buffer_chunked_body)
    app.after_request(_discard_unread_body)
    timing.register(app)
    app.register_blueprint(health.bp)
    app.register_blueprint(qrels.bp)
    app.register_blueprint(jobs.bp)
    app.register_blueprint(measures.bp)
    app.register_blueprint(evaluations.bp)
    app.register_blueprint(comparisons.bp)
    app.register_blueprint(pools.bp)
    app.register_blueprint(docs.bp)
    app.register_blueprint(docs.docs_blueprint())
    return app
