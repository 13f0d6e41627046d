"""``POST /v1/pools``: what to judge. Per topic, the union of every run's top ``depth``
documents (:mod:`cranfield.pooling`), optionally without those already judged in stored
qrels. The runs are sent as a comparison's are (inline, or multipart files named by their
file names); every run and the stored qrels are held to MAX_TOPICS and MAX_DOCS_PER_TOPIC
(413 naming ``runs[i].run``, ``runs[i].run.<topic>`` or ``qrels_id``).
"""

from __future__ import annotations

import orjson
from flask import Blueprint, Response, current_app
from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

import cranfield
from cranfield.measures import PROFILES
from cranfield.pooling import format_pool, pool

from .comparisons import RunEntrySchema, load_runs_body, run_entry_names
from .inputs import read_input, stored_qrels
from .limits import check_qrels, check_run
from .negotiation import negotiate

bp = Blueprint("pools", __name__, url_prefix="/v1/pools")


class PoolRequestSchema(Schema):
    class Meta:
        unknown = RAISE

    runs = fields.List(fields.Nested(RunEntrySchema(only=("name", "run"))), required=True,
                       validate=validate.Length(min=1, max=200))
    depth = fields.Integer(required=True, strict=True,
                           validate=validate.Range(min=1, max=10_000))
    qrels_id = fields.String(load_default=None, allow_none=False, validate=validate.Regexp(
        r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}(@[0-9a-f]{16})?$",
        error="must be a stored qrels id, optionally @version"))
    profile = fields.String(load_default="trec_eval-9.0.8",
                            validate=validate.OneOf(cranfield.PROFILES))

    @validates_schema
    def _runs_given(self, data, **kwargs):
        for i, r in enumerate(data.get("runs") or []):
            if r.get("run") is None:
                raise ValidationError({"runs": {i: {"run": ["is required"]}}})


_POOL_SCHEMA = PoolRequestSchema()


@bp.post("")
def create_pool():
    """The pool to judge: per topic, the union of every run's top ``depth`` documents,
    optionally without those already judged in stored qrels."""
    fmt = negotiate(["application/json", "text/plain"])
    req = load_runs_body(_POOL_SCHEMA, option_keys=())
    cfg = current_app.config
    judged = None
    if req.get("qrels_id"):
        judged, _ = stored_qrels(req["qrels_id"])
        check_qrels(judged, "qrels_id", cfg)
    names = run_entry_names(req)
    runs = {}
    # an engine error is the app's error handler's (service/problems.py)
    for i, (name, entry) in enumerate(zip(names, req["runs"], strict=True)):
        runs[name], _ = read_input(entry["run"], "run", label=f"runs[{i}]")
        check_run(runs[name], f"runs[{i}].run", cfg)
    result = pool(runs, req["depth"], judged=judged,
                  float32_scores=PROFILES[req["profile"]].float32_scores)
    if fmt == "text/plain":
        return Response(format_pool(result), mimetype="text/plain")
    return Response(orjson.dumps(result), mimetype="application/json")

