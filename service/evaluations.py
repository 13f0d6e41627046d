"""``POST /v1/evaluations``: evaluate a run against qrels, synchronously.

The body is JSON (``run`` and ``qrels`` as mappings or as TREC text) or multipart/form-data
(``run`` and ``qrels`` files). JSON is decoded by orjson; validation of the envelope is
marshmallow's, validation of the millions of scores inside is the engine's (vectorised, and
it names the offending field path).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson
from flask import Blueprint, Response, current_app, request
from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

import cranfield
from cranfield import CranfieldError, read_qrels, read_run
from cranfield.measures import DEFAULT_PROFILE, PROFILES
from cranfield.trec_format import format_csv, format_trec

from .problems import Problem, from_engine_error

bp = Blueprint("evaluations", __name__, url_prefix="/v1/evaluations")


# --------------------------------------------------------------------------------------------
# Schemas
# --------------------------------------------------------------------------------------------

class StrictBoolean(fields.Boolean):
    """JSON true/false only (marshmallow would also take 0, 1, "yes"...)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


def strict_bool(**kwargs) -> fields.Boolean:
    return StrictBoolean(**kwargs)


class RunOrQrels(fields.Field):
    """A ``{topic: {docid: value}}`` mapping or TREC text; its contents are checked by the
    engine, which names the exact path or line of anything wrong."""

    default_error_messages = {"invalid": "must be an object {{topic: {{docid: value}}}} or "
                                         "TREC text"}

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, str):
            if not value or value.isspace():  # isspace stops at the first other character
                raise ValidationError("is empty")
            return value
        if isinstance(value, Mapping):
            if not value:
                raise ValidationError("is empty: no topics")
            return value
        raise self.make_error("invalid")


class OptionsSchema(Schema):
    class Meta:
        unknown = RAISE

    profile = fields.String(load_default=DEFAULT_PROFILE, validate=validate.OneOf(PROFILES))
    relevance_level = fields.Integer(load_default=1, strict=True)
    judged_only = strict_bool(load_default=False)
    depth = fields.Integer(load_default=None, allow_none=True, strict=True,
                           validate=validate.Range(min=0))
    complete_topics = strict_bool(load_default=False)
    collection_size = fields.Integer(load_default=0, strict=True,
                                     validate=validate.Range(min=0))


_OPTIONS_SCHEMA = OptionsSchema()
_DEFAULT_OPTIONS = _OPTIONS_SCHEMA.load({})


class EvaluationRequestSchema(Schema):
    class Meta:
        unknown = RAISE

    run = RunOrQrels(required=True)
    qrels = RunOrQrels(required=True)
    measures = fields.List(fields.String(validate=validate.Length(min=1)), load_default=None,
                           validate=validate.Length(min=1, max=200))
    options = fields.Nested(OptionsSchema, load_default=lambda: dict(_DEFAULT_OPTIONS))
    per_topic = strict_bool(load_default=True)
    details = strict_bool(load_default=False)
    details_depth = fields.Integer(load_default=10, strict=True,
                                   validate=validate.Range(min=1, max=1000))
    latency_ms = fields.Dict(keys=fields.String(), values=fields.Float(allow_nan=False),
                             load_default=None)

    @validates_schema
    def _latency_topics(self, data, **kwargs):
        latency = data.get("latency_ms")
        if latency is not None and any(v < 0 for v in latency.values()):
            raise ValidationError("latencies must be >= 0", "latency_ms")


# Schemas are built once: instantiating one per request costs more than a small evaluation.
_REQUEST_SCHEMA = EvaluationRequestSchema()


# --------------------------------------------------------------------------------------------
# Request parsing
# --------------------------------------------------------------------------------------------

def _flatten(messages: Any, prefix: str = "") -> dict[str, list[str]]:
    """marshmallow's nested messages as {"options.depth": [...], "measures[2]": [...]}."""
    out: dict[str, list[str]] = {}
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return {prefix or "body": messages}
    if isinstance(messages, Mapping):
        for key, value in messages.items():
            if isinstance(key, int):
                path = f"{prefix}[{key}]"
            elif key == "_schema":
                path = prefix or "body"
            else:
                path = f"{prefix}.{key}" if prefix else str(key)
            for k, v in _flatten(value, path).items():
                out.setdefault(k, []).extend(v)
        return out
    return {prefix or "body": [str(messages)]}


def _json_body() -> dict:
    raw = request.get_data(cache=False)
    if not raw:
        raise Problem(400, "Malformed request", "the request body is empty",
                      kind="malformed-request", errors={"body": ["is empty"]})
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Problem(400, "Malformed JSON", f"the body is not valid JSON: {exc}",
                      kind="malformed-json", errors={"body": [str(exc)]}) from None
    if not isinstance(body, dict):
        raise Problem(422, "Invalid request", "the body must be a JSON object",
                      kind="invalid-request", errors={"body": ["must be a JSON object"]})
    return body


_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _form_body() -> dict:
    """multipart/form-data: ``run`` and ``qrels`` files (or fields), ``measures`` (repeated or
    comma-separated), options as plain fields."""
    body: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for name in ("run", "qrels"):
        upload = request.files.get(name)
        if upload is not None:
            body[name] = upload.read().decode("utf-8", "replace")
        elif name in request.form:
            body[name] = request.form[name]
    measures = [m.strip() for v in request.form.getlist("measures") for m in v.split(",")
                if m.strip()]
    if measures:
        body["measures"] = measures
    options: dict[str, Any] = {}
    for key in request.form:
        if key in ("run", "qrels", "measures"):
            continue
        value = request.form[key]
        if key in ("per_topic", "details", "judged_only", "complete_topics"):
            if value.lower() not in _BOOL:
                errors[key] = ["must be true or false"]
                continue
            parsed: Any = _BOOL[value.lower()]
        elif key in ("relevance_level", "depth", "collection_size", "details_depth"):
            try:
                parsed = int(value)
            except ValueError:
                errors[key] = ["must be an integer"]
                continue
        else:
            parsed = value
        if key in _OPTIONS_SCHEMA.fields:
            options[key] = parsed
        else:
            body[key] = parsed
    for key in request.files:
        if key not in ("run", "qrels"):
            errors[key] = ["unknown file field (expected run and qrels)"]
    if errors:
        raise Problem(422, "Invalid request", "some form fields are invalid",
                      kind="invalid-request", errors=errors)
    if options:
        body["options"] = options
    return body


def load_request() -> dict:
    mimetype = request.mimetype
    if mimetype == "application/json" or mimetype.endswith("+json"):
        body = _json_body()
    elif mimetype == "multipart/form-data":
        body = _form_body()
    else:
        raise Problem(415, "Unsupported Media Type",
                      f"send application/json or multipart/form-data, not {mimetype or 'nothing'}",
                      kind="unsupported-media-type")
    try:
        return _REQUEST_SCHEMA.load(body)
    except ValidationError as exc:
        raise Problem(422, "Invalid request", "the request does not match the schema",
                      kind="invalid-request", errors=_flatten(exc.messages)) from None


# --------------------------------------------------------------------------------------------
# Evaluation and response
# --------------------------------------------------------------------------------------------

def _as_input(value) -> tuple[Any, str]:
    """(what the engine reads, SHA-256 for provenance). TREC text is encoded once and hashed
    as sent; a mapping is hashed as canonical JSON (sorted keys)."""
    if isinstance(value, str):
        data = value.encode("utf-8")
        return data, hashlib.sha256(data).hexdigest()
    return value, hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _check_limits(run: cranfield.Run, qrels: cranfield.Qrels) -> None:
    cfg = current_app.config
    n_topics = max(len(run.topics), len(qrels.topics))
    if n_topics > cfg["MAX_TOPICS"]:
        raise Problem(413, "Too many topics", f"{n_topics} topics exceed the limit of "
                      f"{cfg['MAX_TOPICS']}", kind="too-large",
                      errors={"run": [f"at most {cfg['MAX_TOPICS']} topics"]})
    if len(run):
        per_topic = np.bincount(run.topic_index, minlength=len(run.topics))
        worst = int(per_topic.argmax())
        if per_topic[worst] > cfg["MAX_DOCS_PER_TOPIC"]:
            raise Problem(413, "Too many documents", f"topic {run.topics[worst]!r} has "
                          f"{int(per_topic[worst])} documents; the limit is "
                          f"{cfg['MAX_DOCS_PER_TOPIC']}", kind="too-large",
                          errors={f"run.{run.topics[worst]}": [
                              f"at most {cfg['MAX_DOCS_PER_TOPIC']} documents per topic"]})


def _measure_problem(exc: cranfield.MeasureError, names: list[str] | None) -> Problem:
    index = next((i for i, n in enumerate(names or []) if n.strip() == exc.name.strip()), None)
    path = f"measures[{index}]" if index is not None else "measures"
    return from_engine_error(exc, path)


def run_evaluation(req: dict):
    """Read, check limits, evaluate; every engine error becomes a 4xx naming the field.
    Returns the evaluation, the inputs as read and their SHA-256 digests."""
    opts = req["options"]
    measures = req["measures"]
    run_input, run_digest = _as_input(req.pop("run"))
    qrels_input, qrels_digest = _as_input(req.pop("qrels"))
    try:
        run = read_run(run_input, name="run")
        qrels = read_qrels(qrels_input, name="qrels")
        _check_limits(run, qrels)
        ev = cranfield.evaluate(run, qrels, measures, **opts)
    except cranfield.MeasureError as exc:
        raise _measure_problem(exc, measures) from None
    except CranfieldError as exc:
        raise from_engine_error(exc) from None
    return ev, run, qrels, (run_digest, qrels_digest)


def warnings_for(ev: cranfield.Evaluation, run: cranfield.Run,
                 qrels: cranfield.Qrels) -> list[dict]:
    """An input lint: things that make numbers easy to misread."""
    out: list[dict] = []
    t = ev.topics
    if t.run_only:
        out.append({"code": "topics-run-only", "message": f"{len(t.run_only)} run topic(s) "
                    "have no judgments and were not evaluated", "topics": t.run_only[:20]})
    if t.qrels_only:
        counted = "counted as 0" if ev.options["complete_topics"] else "not evaluated"
        out.append({"code": "topics-qrels-only", "message": f"{len(t.qrels_only)} judged "
                    f"topic(s) are missing from the run ({counted})",
                    "topics": t.qrels_only[:20]})
    ranked = ev.ranked
    empty = [ranked.topics[i] for i in np.flatnonzero((ranked.num_ret == 0) & ranked.in_run)]
    if empty:
        out.append({"code": "empty-topics", "message": f"{len(empty)} topic(s) retrieved no "
                    "documents", "topics": empty[:20]})
    no_rel = np.bincount(ranked.q_topic[ranked.q_grade >= ev.options["relevance_level"]],
                         minlength=len(ranked.topics)) == 0
    if no_rel.any():
        names = [ranked.topics[i] for i in np.flatnonzero(no_rel)]
        out.append({"code": "topics-without-relevant", "message": f"{len(names)} topic(s) "
                    "have no relevant document in the qrels; most measures score them 0",
                    "topics": names[:20]})
    top = np.minimum(ranked.num_ret, 10)
    judged = np.bincount(ranked.hit_topic[(ranked.hit_rank <= 10) & (ranked.hit_label >= 0)],
                         minlength=len(ranked.topics))
    holes = (top - judged) > 0
    if holes.any():
        share = float((top - judged).sum() / max(int(top.sum()), 1))
        out.append({"code": "unjudged-in-top-10", "message": f"{int(holes.sum())} topic(s) have "
                    f"unjudged documents in their top 10 ({share:.1%} of those ranks); they "
                    "count as non-relevant", "topics": [ranked.topics[i] for i in
                                                       np.flatnonzero(holes)[:20]]})
    for k, tied in sorted(ev.cutoff_ties.items()):
        if tied.any():
            names = [ranked.topics[i] for i in np.flatnonzero(tied)]
            out.append({"code": "tie-at-cutoff", "message": f"in {len(names)} topic(s) a score "
                        f"tie straddles rank {k}: which document counts is decided by docno",
                        "cutoff": k, "topics": names[:20]})
    return out


def details_for(ev: cranfield.Evaluation, run: cranfield.Run, qrels: cranfield.Qrels,
                depth: int) -> dict:
    """Per topic, like Elasticsearch's rank_eval: ranks of the relevant documents retrieved,
    and the unjudged documents in the top ``depth``."""
    from cranfield.ranking import top_documents

    ranked = ev.ranked
    level = ev.options["relevance_level"]
    out: dict[str, dict] = {}
    tops = top_documents(run, depth, float32_scores=ev.profile != "trec_eval-10")
    names = qrels.topics
    judged = {(names[t], d) for t, d, g in zip(qrels.topic_index.tolist(), qrels.docids.tolist(),
                                                qrels.grades.tolist(), strict=True) if g >= 0}
    starts = np.searchsorted(ranked.hit_topic, np.arange(len(ranked.topics) + 1))
    for i, topic in enumerate(ranked.topics):
        if not ranked.in_run[i]:
            continue
        lo, hi = starts[i], starts[i + 1]
        rel = ranked.hit_rank[lo:hi][ranked.hit_label[lo:hi] >= level]
        docs = tops.get(topic, [])
        unjudged = [d for d in docs if (topic, d) not in judged]
        out[topic] = {"relevant_ranks": rel.tolist(), "unjudged_in_top": unjudged,
                      "depth": depth}
    return out


def efficiency(latency: dict[str, float], evaluated: list[str]) -> dict:
    values = np.asarray(list(latency.values()), dtype=np.float64)
    out = {"topics": len(values), "mean_ms": float(values.mean()),
           "p50_ms": float(np.percentile(values, 50)),
           "p95_ms": float(np.percentile(values, 95)),
           "p99_ms": float(np.percentile(values, 99)),
           "queries_per_second": float(1000.0 / values.mean()) if values.mean() > 0 else None,
           "method": "percentiles by linear interpolation; queries/s = 1000 / mean latency"}
    missing = sorted(set(evaluated) - set(latency))
    if missing:
        out["topics_without_latency"] = missing[:20]
    return out


def evaluation_document(ev, req: dict, run_digest: str, qrels_digest: str,
                        warnings: list[dict], details: dict | None) -> dict:
    def clean(v):
        return None if isinstance(v, float) and v != v else v

    doc: dict[str, Any] = {
        "measures": [{"key": k, **v} for k, v in ev.measures.items()],
        "aggregate": {k: clean(v) for k, v in ev.aggregate.items()},
        "topics": ev.topics.as_dict(),
        "warnings": warnings,
        "provenance": {
            "engine": "cranfield", "engine_version": cranfield.__version__,
            "profile": ev.profile, "options": ev.options,
            "run_sha256": run_digest, "qrels_sha256": qrels_digest, "runid": ev.runid,
        },
    }
    if req["per_topic"]:
        doc["per_topic"] = {t: {k: clean(v) for k, v in row.items()}
                            for t, row in ev.per_topic.items()}
    if details is not None:
        doc["details"] = details
    if req.get("latency_ms"):
        doc["efficiency"] = efficiency(req["latency_ms"], ev.topics.evaluated)
    return doc


def _preferred_format() -> str:
    if not request.accept_mimetypes.provided:
        return "application/json"
    best = request.accept_mimetypes.best_match(["application/json", "text/plain", "text/csv"])
    if best is None:
        raise Problem(406, "Not Acceptable", "this resource is available as application/json, "
                      "text/plain (trec_eval's text) or text/csv", kind="not-acceptable")
    return best


@bp.post("")
def create_evaluation():
    """Evaluate synchronously and answer with per-topic and aggregate scores."""
    fmt = _preferred_format()
    req = load_request()
    ev, run, qrels, (run_digest, qrels_digest) = run_evaluation(req)
    if fmt == "text/plain":
        return Response(format_trec(ev, per_topic=req["per_topic"]), mimetype="text/plain")
    if fmt == "text/csv":
        return Response(format_csv(ev, per_topic=req["per_topic"]), mimetype="text/csv")
    details = details_for(ev, run, qrels, req["details_depth"]) if req["details"] else None
    doc = evaluation_document(ev, req, run_digest, qrels_digest,
                              warnings_for(ev, run, qrels), details)
    return Response(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY),
                    mimetype="application/json")
