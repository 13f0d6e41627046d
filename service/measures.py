"""``GET /v1/measures``: the registry, as the CLI and the engine see it. The documents are
built by :mod:`cranfield.reports.measure_docs` (``cranfield measures`` prints the same ones)."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from cranfield import MeasureError
from cranfield.measures import DEFAULT_PROFILE, PROFILES
from cranfield.reports.measure_docs import FAMILIES, measures_document, resolution_document

from .problems import Problem

bp = Blueprint("measures", __name__, url_prefix="/v1/measures")

@bp.get("")
def list_measures():
    """Every registered measure with its parameters, formula and reference."""
    family = request.args.get("family")
    if family is not None and family not in FAMILIES:
        raise Problem(400, "Invalid parameter", f"unknown family {family!r}",
                      kind="invalid-parameter",
                      errors={"family": [f"must be one of {', '.join(FAMILIES)}"]})
    return jsonify(measures_document(family))


@bp.get("/<path:name>")
def resolve_measure(name: str):
    """Resolve any accepted name (trec_eval, ir_measures or ranx style) to canonical
    instances."""
    profile = request.args.get("profile", DEFAULT_PROFILE)
    if profile not in PROFILES:
        raise Problem(422, "Invalid parameter", f"unknown profile {profile!r}",
                      kind="invalid-parameter", errors={"profile": [
                          f"must be one of {', '.join(PROFILES)}"]})
    try:
        doc = resolution_document(name, profile)
    except MeasureError as exc:
        raise Problem(404, "Unknown measure", str(exc), kind="unknown-measure",
                      errors={"name": [exc.reason]},
                      extra={"suggestions": exc.suggestions}) from None
    return jsonify(doc)
