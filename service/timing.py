"""``Server-Timing`` (W3C): where a request's time went, for clients and benchmarks."""

from __future__ import annotations

import time

from flask import Flask, g


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
        spans = g.get("server_timing")
        if spans is None:
            spans = g.server_timing = []
        spans.append((self.name, time.perf_counter() - self.start))


def register(app: Flask) -> None:
    @app.after_request
    def _server_timing(response):
        spans = g.pop("server_timing", None)
        if spans:
            response.headers["Server-Timing"] = ", ".join(
                f"{name};dur={1000 * seconds:.1f}" for name, seconds in spans)
        return response
