"""``GET /v1/measures``: the registry, as the CLI and the engine see it."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from cranfield import REGISTRY, Measure, MeasureError, parse_measure
from cranfield.measures import DEFAULT_PROFILE, PROFILES
from cranfield.names import IR_NAMES

from .problems import Problem

bp = Blueprint("measures", __name__, url_prefix="/v1/measures")


def _aliases(m: Measure) -> list[str]:
    names = [n for n, (plain, cut) in IR_NAMES.items() if m.name in (plain, cut)]
    return sorted(set(names) | set(m.aliases))


def describe(m: Measure) -> dict:
    return {
        "name": m.name,
        "aliases": _aliases(m),
        "family": m.family,
        "summary": m.summary,
        "formula": m.section("Formula"),
        "zero_rule": m.section("0/0"),
        "reference": m.section("Reference"),
        "parameters": [p.as_dict() for p in m.params],
        "aggregate": m.aggregate,
        "per_topic": m.per_topic,
        "uses_relevance_level": m.uses_rel_level,
        "in_all_trec": list(m.all_trec),
    }


@bp.get("")
def list_measures():
    """Every registered measure with its parameters, formula and reference."""
    family = request.args.get("family")
    families = ("set", "rank", "graded", "diversity", "count", "info")
    if family is not None and family not in families:
        raise Problem(400, "Invalid parameter", f"unknown family {family!r}",
                      kind="invalid-parameter",
                      errors={"family": [f"must be one of {', '.join(families)}"]})
    items = [describe(m) for m in sorted(REGISTRY.values(), key=lambda m: m.order)
             if family is None or m.family == family]
    return jsonify(measures=items, profiles=list(PROFILES), default_profile=DEFAULT_PROFILE)


@bp.get("/<path:name>")
def resolve_measure(name: str):
    """Resolve any accepted name (trec_eval or ir_measures style) to canonical instances."""
    profile = request.args.get("profile", DEFAULT_PROFILE)
    if profile not in PROFILES:
        raise Problem(422, "Invalid parameter", f"unknown profile {profile!r}",
                      kind="invalid-parameter", errors={"profile": [
                          f"must be one of {', '.join(PROFILES)}"]})
    try:
        instances = parse_measure(name, profile)
    except MeasureError as exc:
        raise Problem(404, "Unknown measure", str(exc), kind="unknown-measure",
                      errors={"name": [exc.reason]},
                      extra={"suggestions": exc.suggestions}) from None
    measures = {i.measure.name: describe(i.measure) for i in instances}
    return jsonify(
        name=name,
        instances=[{"key": i.key, "measure": i.measure.name,
                    "canonical": i.canonical(profile, 1)} for i in instances],
        measures=list(measures.values()),
    )
