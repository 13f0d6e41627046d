"""The application factory (Flask tutorial style): ``create_app(config=None)``.

Configuration comes from defaults, then ``CRANFIELD_*`` environment variables, then the
``config`` mapping; invalid values stop start-up with a message naming the variable.
"""

from __future__ import annotations

from typing import Any

import orjson
from flask import Flask
from flask.json.provider import JSONProvider
from werkzeug.middleware.proxy_fix import ProxyFix

from backend.config import ConfigError, app_settings, database_url
from backend.queue import make_backend

from . import (
    auth,
    comparisons,
    docs,
    evaluations,
    evaluations_batch,
    health,
    jobs,
    judges,
    measures,
    pools,
    qrels,
    qrels_diff,
    rescores,
    results,
    stability,
    timing,
    topic_metadata,
)
from .multipart import check_boundary
from .negotiation import security_headers
from .observability import init_app as init_observability
from .paging import check_query
from .problems import register_error_handlers
from .request_body import buffer_chunked_body, discard_unread_body


class OrjsonProvider(JSONProvider):
    """Flask's JSON through orjson: several times faster on large bodies."""

    def dumps(self, obj, **kwargs) -> str:
        return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY).decode()

    def loads(self, s, **kwargs):
        return orjson.loads(s)


def check_configuration(config: dict[str, Any] | None = None) -> None:
    """Raise :class:`ConfigError` naming the first invalid setting (gunicorn's master calls
    this before starting any worker, so a bad value stops start-up with one clear line)."""
    settings = app_settings(config)
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


def open_results(settings: dict[str, Any]):
    """The recorded-results store (issue #18) on the ``DATABASE_URL`` setting (read as the
    workers read the variable; unset: its default), migrated to head (processes starting
    together take turns: ``backend.results.migrate``)."""
    from backend.results import ResultStore

    store = ResultStore(database_url(url=settings.get("DATABASE_URL")))
    store.upgrade()
    return store


def create_app(config: dict[str, Any] | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(app_settings(config))
    app.json = OrjsonProvider(app)
    app.extensions["results"] = open_results(app.config)
    if app.config["TRUSTED_PROXIES"]:  # behind nginx (docker-compose.yml): the client's address
        hops = app.config["TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops)
    # stored qrels are kept in the results database, cached in Redis or memory (issue #25)
    app.extensions["cranfield"] = make_backend(app.config, app.extensions["results"])
    app.extensions["cranfield"].results = app.extensions["results"]  # the embedded queue's
    register_error_handlers(app)
    init_observability(app)
    try:
        auth.init_app(app)
    except auth.KeyFileError as exc:
        raise ConfigError(str(exc)) from None
    # after the API-key check: a 401 comes first
    app.before_request(check_query)  # every query parameter, before any route reads one
    app.before_request(check_boundary)
    app.before_request(buffer_chunked_body)
    app.after_request(_discard_unread_body)
    # nosniff on every answer, a Content-Security-Policy header on every HTML one
    app.after_request(security_headers)
    timing.register(app)
    app.register_blueprint(health.bp)
    app.register_blueprint(qrels.bp)
    app.register_blueprint(qrels_diff.bp)
    app.register_blueprint(judges.bp)
    app.register_blueprint(topic_metadata.bp)
    app.register_blueprint(jobs.bp)
    app.register_blueprint(measures.bp)
    app.register_blueprint(evaluations.bp)
    app.register_blueprint(evaluations_batch.bp)
    app.register_blueprint(comparisons.bp)
    app.register_blueprint(pools.bp)
    app.register_blueprint(results.bp)
    app.register_blueprint(rescores.bp)
    app.register_blueprint(stability.bp)
    app.register_blueprint(docs.bp)
    app.register_blueprint(docs.docs_blueprint())
    return app
