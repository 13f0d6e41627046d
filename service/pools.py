"""``POST /v1/pools``: what to judge. Per topic, the union of every run's top ``depth``
documents (:mod:`cranfield.compare.pooling`), optionally without those already judged in stored
qrels. The runs are sent as a comparison's are (inline, or multipart files named by their
file names); every run and the stored qrels are held to MAX_TOPICS and MAX_DOCS_PER_TOPIC
(413 naming ``runs[i].run``, ``runs[i].run.<topic>`` or ``qrels_id``); a queued pool's job
fails with the same problem (the worker holds them: ``backend.tasks.run_pool``).

Budgets before work (issue #27): a pool's work, runs × topics × documents per topic
(:func:`cranfield.compare.pooling.pool_work`), is held to MAX_POOL_WORK once the runs are read and
before any is ranked (422 ``work-over-budget`` naming the factors). A body over the async
threshold, or ``Prefer: respond-async``, is queued as an evaluation is (202, a ``pool`` job
carrying its runs by blob key), held to MAX_QUEUED_POOL_WORK: over it, the job fails with the
same problem.
"""

from __future__ import annotations

import uuid

import orjson
from flask import Blueprint, Response, current_app
from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

import cranfield
from backend.contract import PoolJob
from cranfield.compare.pooling import format_pool, pool
from cranfield.measures import PROFILES
from cranfield.measures.budget import BudgetError

from .comparisons import RunEntrySchema, load_runs_body, run_entry_names
from .enqueue import accepted, over_budget, submission, wants_async
from .inputs import read_input, serialised, stored_qrels
from .limits import check_qrels, check_run
from .negotiation import negotiate
from .schemas import stored_ref

bp = Blueprint("pools", __name__, url_prefix="/v1/pools")


class PoolRequestSchema(Schema):
    class Meta:
        unknown = RAISE

    runs = fields.List(fields.Nested(RunEntrySchema(only=("name", "run"))), required=True,
                       validate=validate.Length(min=1, max=200))
    depth = fields.Integer(required=True, strict=True,
                           validate=validate.Range(min=1, max=10_000))
    qrels_id = stored_ref("qrels")
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
    if wants_async():
        return _enqueue_pool(req)
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
    try:
        result = pool(runs, req["depth"], judged=judged,
                      float32_scores=PROFILES[req["profile"]].float32_scores,
                      max_work=cfg["MAX_POOL_WORK"], budget_name="MAX_POOL_WORK")
    except BudgetError as exc:
        raise over_budget(exc, cfg["MAX_QUEUED_POOL_WORK"], "MAX_QUEUED_POOL_WORK") from None
    if fmt == "text/plain":
        return Response(format_pool(result), mimetype="text/plain")
    return Response(orjson.dumps(result), mimetype="application/json")


def _enqueue_pool(req: dict) -> Response:
    """Store each run under its own key (and pin the stored qrels' version); the job carries
    the keys, never the runs. Its result is the document the synchronous pool answers."""
    backend = current_app.extensions["cranfield"]
    cfg = current_app.config
    job_id, carried = submission(req)
    runs = []
    for i, (name, entry) in enumerate(zip(run_entry_names(req), req["runs"], strict=True)):
        data, fmt = serialised(entry["run"], "run", f"runs[{i}]")
        runs.append({"name": name, "run_format": fmt, "run_key": backend.store.put_blob(
            f"run-{uuid.uuid4().hex}", data, cfg["INPUT_TTL"])})
        entry["run"] = None  # the request no longer holds what the store has
    backend.submit(PoolJob(measures=[], options={}, runs=runs, depth=req["depth"],
                           profile=req["profile"], **carried), job_id)
    return accepted(job_id)
