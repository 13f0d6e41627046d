"""``Server-Timing`` (W3C): where a request's time went, for clients and benchmarks."""

from __future__ import annotations

import time
from contextlib import contextmanager

from flask import Flask, g


@contextmanager
def timed(name: str):
    """Record the duration of the block as ``name`` in this request's Server-Timing."""
    start = time.perf_counter()
    try:
        yield
    finally:
        g.setdefault("server_timing", []).append((name, time.perf_counter() - start))


def register(app: Flask) -> None:
    @app.after_request
    def _server_timing(response):
        spans = g.pop("server_timing", None)
        if spans:
            response.headers["Server-Timing"] = ", ".join(
                f"{name};dur={1000 * seconds:.1f}" for name, seconds in spans)
        return response
