"""The contract and its interactive docs (Swagger UI assets ship with flask-swagger-ui, so
``/docs`` works offline)."""

from __future__ import annotations

import sys
from pathlib import Path

from flask import Blueprint, Response, redirect, request
from flask_swagger_ui import get_swaggerui_blueprint


def _openapi_path() -> Path:
    """The contract: beside the package in a source tree (or an editable install), else where
    the wheel puts it (``share/cranfield``, pyproject's data-files)."""
    here = Path(__file__).resolve().parents[1] / "openapi.yaml"
    installed = Path(sys.prefix) / "share" / "cranfield" / "openapi.yaml"
    return here if here.exists() or not installed.exists() else installed


OPENAPI_PATH = _openapi_path()

bp = Blueprint("contract", __name__)


@bp.get("/")
def root():
    """A person who opens the service's address finds its documentation (302, not a 404
    problem); relative to where the API is mounted."""
    return redirect(f"{request.script_root}/docs/", code=302)


@bp.get("/openapi.yaml")
def openapi_yaml():
    return Response(OPENAPI_PATH.read_bytes(), mimetype="application/yaml")


def docs_blueprint():
    return get_swaggerui_blueprint("/docs", "/openapi.yaml",
                                   # no validator badge: an image from another site,
                                   # which the page's policy (negotiation.py) refuses
                                   config={"app_name": "Cranfield API", "validatorUrl": None},
                                   blueprint_name="docs")
