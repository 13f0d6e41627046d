"""The stack's ceiling for bench/http.py: Flask answering a constant JSON body, served by
the same gunicorn settings as the API."""

from flask import Flask, Response

BODY = b'{"status":"ok","aggregate":{"map":0.5}}'


def create_app() -> Flask:
    app = Flask(__name__)

    @app.get("/healthz")
    def healthz():
        return Response(BODY, mimetype="application/json")

    @app.get("/constant")
    def constant():
        return Response(BODY, mimetype="application/json")

    return app
