"""Re-scoring recorded results under other qrels (issue #31): ``POST
/v1/systems/{name}/rescore`` and ``POST /v1/rescores`` (several systems) with ``{"qrels_id":
"ID@VERSION"}`` queue one job per kept run of the systems' results (a result without a kept
run is listed as skipped, with the reason; one re-scored under these qrels already is done
at once, nothing recorded again) and answer 202 with the re-score's id; ``GET
/v1/rescores/{id}`` gives its progress (total, queued, done, failed, skipped, the new results'
ids), kept in the results database: a Redis restart loses nothing, and the jobs it lost are
queued again when the progress is asked for (by one poll at a time, at most once per
RESCORE_RECOVERY_INTERVAL seconds; the others read the progress alone).

Each job (:func:`backend.rescoring.rescore_one`) evaluates the kept run with the original
result's measures and options and records a new result of the same system, with the
original's time, label, commit and tags, the new qrels version and a link to the result it
re-scores: the trend then shows a series per qrels version
(``GET /v1/systems/{name}/trend``'s ``series``). Systems, results and re-scores are the
caller's tenant's; another tenant's are 404s. A request covers at most MAX_RESCORE_RESULTS
results (422 otherwise, counted before anything is planned)."""

from __future__ import annotations

import re

import orjson
from flask import Blueprint, Response, current_app, request
from marshmallow import RAISE, Schema, ValidationError, fields, validate

from .auth import current_tenant
from .problems import Problem
from .request_body import read_json_object
from .results import check_system_name, no_system, results_store
from .schemas import stored_ref

bp = Blueprint("rescores", __name__, url_prefix="/v1")
RESCORE_ID = re.compile(r"^[0-9a-f]{32}$")


class RescoreRequest(Schema):
    class Meta:
        unknown = RAISE

    qrels_id = stored_ref("qrels")


class RescoresRequest(RescoreRequest):
    # at most MAX_RESCORE_SYSTEMS distinct names (checked against the configuration)
    systems = fields.List(fields.String(validate=validate.Length(1, 200)), required=True,
                          validate=validate.Length(min=1))


def _load(schema: Schema, required: str, allowed: set[str]) -> dict:
    if request.mimetype != "application/json":
        raise Problem(415, "Unsupported Media Type", 'send application/json: {"qrels_id": '
                      '"ID@VERSION"}', kind="unsupported-media-type")
    body = read_json_object(required, allowed)
    try:
        loaded = schema.load(body)
    except ValidationError as exc:
        errors = {k: v if isinstance(v, list) else [str(v)] for k, v in exc.messages.items()}
        raise Problem(422, "Invalid request", "; ".join(
            f"{k}: {' '.join(map(str, v))}" for k, v in errors.items()),
            kind="invalid-request", errors=errors) from None
    if loaded.get("qrels_id") is None:
        raise Problem(422, "Invalid request", "qrels_id: give the stored qrels to re-score "
                      "under (ID or ID@VERSION)", kind="invalid-request",
                      errors={"qrels_id": ["Missing data for required field."]})
    return loaded


def _qrels(ref: str) -> tuple[str, str]:
    """(``id@version``, SHA-256) of the tenant's stored qrels ``ref`` (an id alone: its
    latest version, pinned now); 422 naming ``qrels_id`` when there are none such, or they
    are not ad hoc qrels (judgment groups, preferences)."""
    from backend.store import StoreError, split_ref

    scoped = current_app.extensions["cranfield"].store.scoped(current_tenant())
    qrels_id, version = split_ref(ref)
    try:
        meta = scoped.meta(qrels_id, version)
    except StoreError as exc:
        raise Problem(422, "Unknown qrels", str(exc), kind="unknown-qrels",
                      errors={"qrels_id": [str(exc)]}) from None
    kind = meta.get("qrels_format", "qrels")
    if kind != "qrels":
        message = f"stored qrels {ref!r} are {kind} judgments; re-scoring reads qrels"
        raise Problem(422, "Invalid request", message, kind="invalid-request",
                      errors={"qrels_id": [message]})
    return f"{meta['id']}@{meta['version']}", meta["sha256"]


def _rescore(systems: list[str], ref: str) -> Response:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from backend.rescoring import (
        TooManyQueued,
        abandon,
        count_results,
        enqueue,
        in_flight_horizon,
        plan,
        progress,
    )

    store, tenant = results_store(), current_tenant()
    for name in systems:
        check_system_name(name)
        if store.system(tenant, name) is None:
            raise no_system(name)
    version, sha256 = _qrels(ref)
    most = current_app.config["MAX_RESCORE_RESULTS"]
    count = count_results(store, tenant, systems)
    if count > most:
        message = (f"{count} results to re-score, more than MAX_RESCORE_RESULTS ({most}); "
                   "re-score fewer systems at a time")
        raise Problem(422, "Too many results to re-score", message,
                      kind="too-many-results", errors={"systems": [message]})
    try:
        rescore_id, items = plan(store, tenant, systems, version, sha256,
                                 max_queued=current_app.config["MAX_QUEUED_RESCORES"],
                                 horizon=in_flight_horizon(current_app.config))
    except TooManyQueued as exc:
        raise Problem(429, "Too Many Requests", str(exc), kind="too-many-rescores",
                      headers={"Retry-After": "10"},
                      extra={"queued": exc.queued, "adding": exc.adding,
                             "limit": exc.cap}) from None
    wires = [{"tenant": tenant, "rescore_id": rescore_id, "qrels_ref": version, **item}
             for item in items]
    try:
        enqueue(current_app.extensions["cranfield"], current_app.config, wires, store)
    except Exception as exc:
        # the re-score is kept but its id not answered: no GET would ever queue its items
        # again, and they would count against MAX_QUEUED_RESCORES; those not queued fail
        abandon(store, rescore_id, [w["position"] for w in wires],
                "the queue could not be reached; re-score again")
        if isinstance(exc, RedisConnectionError | RedisTimeoutError):
            raise Problem(503, "Service Unavailable", "the job queue (Redis) is unreachable; "
                          "the items it did not take failed: re-score again shortly",
                          kind="unavailable", headers={"Retry-After": "5"},
                          extra={"rescore_id": rescore_id}) from None
        raise
    doc = progress(store, tenant, rescore_id)
    return Response(orjson.dumps(doc), status=202, mimetype="application/json",
                    headers={"Location": f"{request.script_root}/v1/rescores/{rescore_id}"})


@bp.post("/systems/<path:name>/rescore")
def rescore_system(name: str):
    """Re-score every kept run of the system's results under stored qrels."""
    body = _load(RescoreRequest(), "qrels_id", {"qrels_id"})
    return _rescore([name], body["qrels_id"])


@bp.post("/rescores")
def rescore_systems():
    """Re-score every kept run of several systems' results under stored qrels."""
    body = _load(RescoresRequest(), "systems", {"qrels_id", "systems"})
    systems = list(dict.fromkeys(body["systems"]))
    most = current_app.config["MAX_RESCORE_SYSTEMS"]
    if len(systems) > most:
        message = (f"{len(systems)} systems, more than MAX_RESCORE_SYSTEMS ({most}); "
                   "re-score fewer systems at a time")
        raise Problem(422, "Invalid request", message, kind="invalid-request",
                      errors={"systems": [message]})
    return _rescore(systems, body["qrels_id"])


@bp.get("/rescores/<rescore_id>")
def get_rescore(rescore_id: str):
    """A re-score's progress; its items whose jobs Redis lost are queued again (by one poll
    at a time, at most once per RESCORE_RECOVERY_INTERVAL: ``backend.rescoring.recover``)."""
    from backend.rescoring import progress, recover

    if not RESCORE_ID.match(rescore_id):
        raise Problem(422, "Invalid re-score id", f"{rescore_id!r} is not a re-score id",
                      kind="invalid-request", errors={"rescore_id": [
                          "32 hex digits (lower case), as the POST answered"]})
    store, tenant = results_store(), current_tenant()
    doc = progress(store, tenant, rescore_id)
    if doc is None:
        raise Problem(404, "Not Found", f"no re-score {rescore_id!r}", kind="not-found")
    if doc["queued"] and recover(current_app.extensions["cranfield"], current_app.config,
                                 store, tenant, doc) is not None:
        doc = progress(store, tenant, rescore_id) or doc  # what the recovery found failed
    return Response(orjson.dumps(doc), mimetype="application/json")
