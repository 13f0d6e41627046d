"""``POST /v1/evaluations``: evaluate a run against qrels, synchronously.

The body is JSON (``run`` and ``qrels`` as mappings or as TREC text) or multipart/form-data
(``run`` and ``qrels`` files). JSON is decoded by orjson; validation of the envelope is
marshmallow's, validation of the millions of scores inside is the engine's (vectorised, and
it names the offending field path). The body is read by :mod:`service.evaluation_request`,
the run and qrels by :mod:`service.inputs`; a large or ``Prefer: respond-async`` request is
queued by :mod:`service.enqueue`.
"""

from __future__ import annotations

import re

import orjson
from flask import Blueprint, Response, current_app
from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

import cranfield
from backend.kept_runs import KeptRunGone
from backend.tasks import name_topic_metadata, record_evaluation
from cranfield import CranfieldError
from cranfield.measures.budget import BudgetError, evaluation_budget
from cranfield.reports.result_document import details_for, evaluation_document
from cranfield.reports.trec_format import format_csv, format_trec

from .auth import current_tenant
from .enqueue import check_measure_instances, enqueue_evaluation, over_budget, wants_async
from .evaluation_request import form_body, load_body
from .inputs import engine_problem, read_inputs
from .negotiation import negotiate
from .problems import Problem
from .rel_formats import check_rel_request, evaluate_rel, resolve_format
from .schemas import EvaluationOptionsSchema, NameList, RunOrQrels, stored_ref, strict_bool
from .timing import timed
from .topic_metadata import resolve as resolve_topic_metadata

bp = Blueprint("evaluations", __name__, url_prefix="/v1/evaluations")


# --------------------------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------------------------

_DEFAULT_OPTIONS = EvaluationOptionsSchema().load({})


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # openapi.yaml's Record patterns exclude them


def _printable(value: str) -> bool:
    if CONTROL.search(value):
        raise ValidationError("printable characters only (no control characters or line "
                              "breaks)")
    return True


def _name(limit: int, **kwargs) -> fields.String:
    return fields.String(validate=[validate.Length(min=1, max=limit), _printable], **kwargs)


class RecordSchema(Schema):
    """``record``: keep the result in the results store (issue #18) as a result of
    ``system``, labelled ``label`` (a build, a date...), with the code's ``commit`` and
    ``tags`` to filter by."""
    class Meta:
        unknown = RAISE

    system = _name(200, required=True)
    label = _name(200, required=True)
    commit = _name(100, load_default=None, allow_none=True)
    tags = fields.List(_name(64), load_default=list, validate=validate.Length(max=20))
    # keep the run with the result (issue #31, backend/kept_runs.py); None: the system's
    # default (PUT /v1/systems/{name}/settings), else not
    keep_run = strict_bool(load_default=None, allow_none=True)


class EvaluationRequestSchema(Schema):
    class Meta:
        unknown = RAISE

    run = RunOrQrels(required=True)
    qrels = RunOrQrels(load_default=None, allow_none=False)
    qrels_id = stored_ref("qrels")
    # stored topic metadata (issue #28), optionally @version: not with options.topic_metadata
    topic_metadata_id = stored_ref("topic metadata")
    measures = NameList(max_names=200, load_default=None)
    options = fields.Nested(EvaluationOptionsSchema,
                            load_default=lambda: dict(_DEFAULT_OPTIONS))
    # None: not given; load_request makes it true, or false for trec_eval's text (which,
    # like trec_eval without -q, is the summary unless per-topic values are asked for)
    per_topic = strict_bool(load_default=None, allow_none=False)
    details = strict_bool(load_default=False)
    details_depth = fields.Integer(load_default=10, strict=True,
                                   validate=validate.Range(min=1, max=1000))
    curves = strict_bool(load_default=False)
    latency_ms = fields.Dict(keys=fields.String(), values=fields.Float(allow_nan=False),
                             load_default=None)
    record = fields.Nested(RecordSchema, load_default=None)

    @validates_schema
    def _one_qrels(self, data, **kwargs):
        if (data.get("qrels") is None) == (data.get("qrels_id") is None):
            raise ValidationError("give exactly one of qrels and qrels_id", "qrels")

    @validates_schema
    def _zscores_are_not_recorded(self, data, **kwargs):
        # z-scores under the measure's own key would sit in its trend, baseline and gates
        # beside raw values (found in review: a trend of map read 0.1785, -666695.6, 0.1785)
        if data.get("record") is not None and (data.get("options") or {}).get("zscores"):
            raise ValidationError("a result standardised with options.zscores is not "
                                  "recorded: its values are z-scores, which a trend, a "
                                  "baseline or a gate would read as the measure's own",
                                  "record")

    @validates_schema
    def _latency_topics(self, data, **kwargs):
        latency = data.get("latency_ms")
        if latency is not None and any(v < 0 for v in latency.values()):
            raise ValidationError("latencies must be >= 0", "latency_ms")


# Schemas are built once: instantiating one per request costs more than a small evaluation.
_REQUEST_SCHEMA = EvaluationRequestSchema()


def load_request(fmt: str = "application/json") -> dict:
    """The evaluation request, read and validated (:func:`service.evaluation_request.load_body`),
    to be answered as ``fmt``: ``per_topic`` not given is true, except for ``text/plain``,
    which prints what ``cranfield eval`` (trec_eval) prints without ``-q``: the summary. A
    queued job keeps the value, so its text is the synchronous answer's."""
    req = load_body(_REQUEST_SCHEMA, form_body)
    if req["per_topic"] is None:
        req["per_topic"] = fmt != "text/plain"
    resolve_topic_metadata(req, req["options"])  # topic_metadata_id: the stored mapping
    return req


# --------------------------------------------------------------------------------------------
# Evaluation and response
# --------------------------------------------------------------------------------------------

def run_evaluation(req: dict):
    """Read, check limits, evaluate; every engine error becomes a 4xx naming the field.
    Returns the evaluation, the inputs as read and their SHA-256 digests. Budgets before
    work (issue #27): the measures' instances before the inputs are read, instances × topics
    once they are (MAX_MEASURE_INSTANCES, MAX_EVALUATION_VALUES: 422 naming the factors)."""
    cfg = current_app.config
    check_measure_instances(req)
    run, qrels, run_digest, qrels_digest = read_inputs(req)
    try:
        with evaluation_budget(cfg["MAX_MEASURE_INSTANCES"], cfg["MAX_EVALUATION_VALUES"],
                               max_segments=cfg["MAX_SEGMENTS"]):
            ev = cranfield.evaluate(qrels, run, req["measures"], **req["options"])
    except BudgetError as exc:
        raise over_budget(exc, cfg["MAX_QUEUED_EVALUATION_VALUES"],
                          "MAX_QUEUED_EVALUATION_VALUES") from None
    except CranfieldError as exc:
        raise engine_problem(exc, req["measures"]) from None
    return ev, run, qrels, (run_digest.result(), qrels_digest)


def _details(req: dict, ev, run, qrels) -> dict | None:
    """The per-topic details the request asks for (None when it does not)."""
    return details_for(ev, run, qrels, req["details_depth"]) if req["details"] else None


def _recorded_document(req: dict, ev, details, run_digest: str, qrels_digest: str,
                       run=None) -> dict:
    """The evaluation's document, kept in the results store (with its per-topic values,
    whatever the request's ``per_topic``), then shaped as the request asked, with
    ``recorded`` (:func:`backend.tasks.record_evaluation`); ``run`` kept with it if the
    record (or its system's default) says so."""
    doc = name_topic_metadata(evaluation_document(
        ev, dict(req, per_topic=True), run_digest, qrels_digest, details,
        req.get("qrels_version")), req.get("topic_metadata_version"))
    try:
        return record_evaluation(current_app.extensions["results"], current_tenant(),
                                 req["record"], doc, req["per_topic"], run=run)
    except ValueError as exc:  # the schema lets no such record through: the store's words
        raise Problem(422, "Invalid request", str(exc), kind="invalid-request",
                      errors={"record": [str(exc)]}) from None
    except KeptRunGone:  # deleted under the recording three times in a row (issue #31)
        raise Problem(503, "Service Unavailable", "the run to keep was deleted by concurrent "
                      "deletes of results naming it while this result was recorded; nothing "
                      "was recorded: send the evaluation again", kind="kept-run-gone",
                      headers={"Retry-After": "1"}) from None


@bp.post("")
def create_evaluation():
    """Evaluate synchronously and answer with per-topic and aggregate scores."""
    fmt = negotiate(["application/json", "text/plain", "text/csv", "text/html"],
                    "application/json, text/plain (trec_eval's text), text/csv or text/html "
                    "(a report page)")
    req = load_request(fmt)
    if resolve_format(req) != "qrels":  # judgment groups, preferences (trec_eval -R)
        check_rel_request(req, fmt)
        if not wants_async():
            with timed("evaluate"):
                return evaluate_rel(req, fmt)
    if wants_async():
        with timed("enqueue"):
            return enqueue_evaluation(req)
    with timed("evaluate"):
        ev, run, qrels, (run_digest, qrels_digest) = run_evaluation(req)
    doc = details = None
    if req["record"] is not None:
        with timed("record"):
            details = _details(req, ev, run, qrels)
            doc = _recorded_document(req, ev, details, run_digest, qrels_digest, run)
    # a text answer has no "recorded": the result's id goes in a header (the CLI says it)
    recorded = {"Cranfield-Result-Id": doc["recorded"]["id"]} if doc is not None else {}
    with timed("render"):
        if fmt == "text/plain":
            return Response(format_trec(ev, per_topic=req["per_topic"]), mimetype="text/plain",
                            headers=recorded)
        if fmt == "text/csv":
            return Response(format_csv(ev, per_topic=req["per_topic"]), mimetype="text/csv",
                            headers=recorded)
        if doc is None or fmt == "text/html":
            if details is None:  # computed once: recording computed them already
                details = _details(req, ev, run, qrels)
            if fmt == "text/html":  # the page plots the precision-recall curve
                req = dict(req, curves=True)
            doc = name_topic_metadata(evaluation_document(
                ev, req, run_digest, qrels_digest, details, req.get("qrels_version")),
                req.get("topic_metadata_version"))
        if fmt == "text/html":
            from cranfield.reports.html_report import render_evaluation

            return Response(render_evaluation(doc), mimetype="text/html")
        return Response(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY),
                        mimetype="application/json")
