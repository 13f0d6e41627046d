"""One error handler: every error leaves as ``application/problem+json`` (RFC 9457) with
``type``, ``title``, ``status``, ``detail`` and, for bad input, an ``errors`` mapping from
field path (``run.q1.d3``, ``qrels line 17``, ``measures[2]``) to sentences."""

from __future__ import annotations

import logging

import orjson
from flask import Flask, Response
from werkzeug.exceptions import HTTPException

from cranfield import CranfieldError
from cranfield.errors import error_report, problem_kind

PROBLEM = "application/problem+json"
TYPE_BASE = "https://cranfield.dev/problems/"

log = logging.getLogger("cranfield.service")


class Problem(Exception):
    """An error with an HTTP status, raised by routes and turned into problem+json."""

    def __init__(self, status: int, title: str, detail: str, *, kind: str | None = None,
                 errors: dict[str, list[str]] | None = None, headers: dict | None = None,
                 extra: dict | None = None):
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.kind = kind or title.lower().replace(" ", "-")
        self.errors = errors
        self.headers = headers or {}
        self.extra = extra or {}


def problem_response(problem: Problem) -> Response:
    body = {"type": TYPE_BASE + problem.kind, "title": problem.title,
            "status": problem.status, "detail": problem.detail}
    if problem.errors:
        body["errors"] = problem.errors
    body.update(problem.extra)
    resp = Response(orjson.dumps(body), status=problem.status, mimetype=PROBLEM)
    for k, v in problem.headers.items():
        resp.headers[k] = v
    return resp


def from_engine_error(exc: Exception, field_prefix: str = "") -> Problem:
    """An engine error as a problem: ``cranfield.errors.error_report`` decides the status,
    title, code and fields (the same mapping the workers and the CLI use); anything that is
    not an engine error is re-raised."""
    if not isinstance(exc, CranfieldError):
        raise exc
    report = error_report(exc, field_prefix)
    return Problem(report.status, report.title, report.detail, kind=problem_kind(exc),
                   errors=report.errors, extra={"code": report.code})


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(Problem)
    def _problem(exc: Problem):
        return problem_response(exc)

    @app.errorhandler(CranfieldError)
    def _engine(exc: CranfieldError):  # an engine error a view did not place: its own fields
        return problem_response(from_engine_error(exc))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        title = exc.name
        detail = exc.description or title
        if exc.code == 413:
            detail = (f"the request body exceeds the limit of "
                      f"{app.config['MAX_CONTENT_LENGTH']} bytes")
        headers = {}
        if exc.code == 405 and exc.valid_methods:
            headers["Allow"] = ", ".join(exc.valid_methods)
        return problem_response(Problem(exc.code or 500, title, detail, headers=headers))

    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover - redis is a dependency
        RedisConnectionError = RedisTimeoutError = ()  # noqa: N806

    @app.errorhandler(RedisConnectionError)
    @app.errorhandler(RedisTimeoutError)
    def _redis_down(exc: Exception):  # the queue and store are unavailable, not the input wrong
        log.warning("redis unavailable: %s", exc)
        return problem_response(Problem(503, "Service Unavailable",
                                        "the job queue (Redis) is unreachable; retry shortly",
                                        kind="unavailable", headers={"Retry-After": "5"}))

    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

    @app.errorhandler(DBAPIError)
    def _database_error(exc: DBAPIError):
        # the database (results and stored qrels) cannot be reached: a refused connection,
        # or one dropped mid-request (the driver may call that an InterfaceError, or any
        # error with the connection invalidated); any other database error is a bug
        if isinstance(exc, OperationalError | InterfaceError) or exc.connection_invalidated:
            log.warning("database unavailable: %s", exc.__class__.__name__)
            return problem_response(Problem(503, "Service Unavailable",
                                            "the database is unreachable; retry shortly",
                                            kind="unavailable", headers={"Retry-After": "5"}))
        return _unexpected(exc)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):  # a bug, never bad input: log it, answer in one shape
        log.exception("unhandled error")
        return problem_response(Problem(500, "Internal Server Error",
                                        "the server failed to handle this request"))
