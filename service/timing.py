"""``Server-Timing`` (W3C): where a request's time went, for clients and benchmarks."""

from __future__ import annotations

import time
from contextvars import ContextVar

from flask import Flask

# This request's spans. A context variable rather than ``flask.g``: every span would go
# through g's proxy (~2 us each here); each gunicorn thread has its own context, and the
# after-request and teardown hooks empty it. So ``timed`` belongs in views and what they
# call: a span recorded after the response (in a streamed body, say) would be reported by
# the next request on the thread.
_SPANS: ContextVar[list | None] = ContextVar("cranfield_server_timing", default=None)


class timed:  # noqa: N801 (used like a function: ``with timed("decode"):``)
    """Record the duration of the block as ``name`` in this request's Server-Timing.

    A class rather than a generator-based context manager: a small request passes through
    half a dozen of these, and a class's enter/exit costs a third as much."""

    __slots__ = ("name", "start")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        spans = _SPANS.get()
        if spans is None:
            spans = []
            _SPANS.set(spans)
        spans.append((self.name, time.perf_counter() - self.start))


def take_spans() -> list | None:
    """This request's spans, and forget them (the next request on this thread starts empty)."""
    spans = _SPANS.get()
    if spans is not None:
        _SPANS.set(None)
    return spans


def register(app: Flask) -> None:
    @app.after_request
    def _server_timing(response):
        spans = take_spans()
        if spans:
            response.headers["Server-Timing"] = ", ".join(
                f"{name};dur={1000 * seconds:.1f}" for name, seconds in spans)
        return response

    @app.teardown_request
    def _forget_spans(exc):  # a request that ended in an exception never reached the hook
        take_spans()
