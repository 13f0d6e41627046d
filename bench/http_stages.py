"""Where a small request's cost goes, for bench/http.py ``--stages``: the service's own app
(its hooks, its configuration) with one route per cumulative stage of ``POST
/v1/evaluations``, each calling the service's own functions and answering the ceiling's
constant body, so that load on each route shows what every stage adds under gunicorn:

    bare       the stack: gunicorn, Flask and the service's request hooks (body not read)
    validate   + body read, JSON decoded, validated by the request schema (marshmallow)
    inputs     + run and qrels read into columns, their SHA-256s, the size limits
    evaluate   + the engine (the request's measures)
    (the API)  + the response document and its JSON: POST /v1/evaluations itself

Bench-only: the routes are added here, never to the service.
"""

from __future__ import annotations

import io
import time

from flask import Flask, Response
from werkzeug.test import EnvironBuilder

from bench.http_ceiling import BODY

# (route, what the stage adds), in order; the last row is the API itself
STAGES = (("/stages/bare", "bare route: gunicorn, Flask, the service's hooks"),
          ("/stages/validate", "+ body read, JSON decoded, schema (marshmallow)"),
          ("/stages/inputs", "+ run and qrels into columns, SHA-256s, limits"),
          ("/stages/evaluate", "+ the engine (5 measures)"),
          ("/v1/evaluations", "+ response document: the API itself"))


def create_app() -> Flask:
    from service import evaluations as api
    from service.app import create_app as service_app
    from service.inputs import read_inputs

    def constant() -> Response:
        return Response(BODY, mimetype="application/json")

    def bare() -> Response:
        return constant()

    def validate() -> Response:
        api.load_request()
        return constant()

    def inputs() -> Response:
        read_inputs(api.load_request())[2].result()  # the run's SHA-256 too
        return constant()

    def evaluate() -> Response:
        api.run_evaluation(api.load_request())
        return constant()

    app = service_app()
    for (path, _), view in zip(STAGES[:-1], (bare, validate, inputs, evaluate),
                                strict=True):
        app.add_url_rule(path, view.__name__, view, methods=["POST"])
    return app


def in_process(app: Flask, path: str, body: bytes, seconds: float = 2.0) -> float:
    """Microseconds per request of ``POST path`` called straight through WSGI in this process,
    in a tight loop (warm caches, no sockets, no other process): the stage's cost at best."""
    environ = EnvironBuilder(path=path, method="POST", data=body,
                             content_type="application/json").get_environ()

    def call() -> None:
        status = []
        b"".join(app(dict(environ, **{"wsgi.input": io.BytesIO(body)}),
                     lambda s, h, exc=None: status.append(s)))
        if not status[0].startswith("200"):
            raise RuntimeError(f"{path}: {status[0]}")

    for _ in range(200):
        call()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            call()
        n += 100
    return (time.perf_counter() - t0) / n * 1e6
