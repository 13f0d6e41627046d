"""Liveness and readiness."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    """Alive: the process answers."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    """Ready to serve: the engine loads and, when Redis is configured, Redis answers."""
    checks = {"engine": "ok"}
    ready = True
    url = current_app.config.get("REDIS_URL")
    if url:
        try:
            current_app.extensions["cranfield"].ping()
            checks["redis"] = "ok"
        except Exception as exc:  # any failure means "not ready", with the reason
            checks["redis"] = f"unavailable: {exc.__class__.__name__}"
            ready = False
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    return jsonify(body), (200 if ready else 503)
