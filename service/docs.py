"""The contract and its interactive docs (Swagger UI assets ship with flask-swagger-ui, so
``/docs`` works offline)."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response
from flask_swagger_ui import get_swaggerui_blueprint

OPENAPI_PATH = Path(__file__).resolve().parents[1] / "openapi.yaml"

bp = Blueprint("contract", __name__)


@bp.get("/openapi.yaml")
def openapi_yaml():
    return Response(OPENAPI_PATH.read_bytes(), mimetype="application/yaml")


def docs_blueprint():
    return get_swaggerui_blueprint("/docs", "/openapi.yaml",
                                   config={"app_name": "Cranfield API"},
                                   blueprint_name="docs")
