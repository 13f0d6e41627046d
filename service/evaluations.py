"""``POST /v1/evaluations``: evaluate a run against qrels, synchronously.

The body is JSON (``run`` and ``qrels`` as mappings or as TREC text) or multipart/form-data
(``run`` and ``qrels`` files). JSON is decoded by orjson; validation of the envelope is
marshmallow's, validation of the millions of scores inside is the engine's (vectorised, and
it names the offending field path).
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from itertools import chain
from typing import Any

import orjson
from flask import Blueprint, Response, after_this_request, current_app, request
from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

import cranfield
from cranfield import CranfieldError, read_qrels, read_run
from cranfield.evaluate import AGGREGATIONS
from cranfield.grammar import INT64_MAX, INT64_MIN
from cranfield.io import split_trec_text
from cranfield.json_body import Columns, columns_sha256, decode_body, mapping_sha256
from cranfield.measures import DEFAULT_PROFILE, PROFILES
from cranfield.names import needs_subtopics
from cranfield.report import details_for, evaluation_document
from cranfield.trec_format import format_csv, format_trec

from . import multipart
from .auth import current_tenant
from .jobs import present
from .limits import check_qrels, check_run
from .negotiation import negotiate
from .observability import current_request_id
from .problems import Problem, from_engine_error
from .request_body import read_body
from .timing import timed

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
        if isinstance(value, Columns):  # a large mapping, already read and checked
            return value
        if isinstance(value, str | bytes | memoryview):  # bytes, memoryview: an uploaded file
            if _blank(value):
                raise ValidationError("is empty")
            return value
        if isinstance(value, Mapping):
            if not value:
                raise ValidationError("is empty: no topics")
            _reject_booleans(value, attr)
            return value
        raise self.make_error("invalid")


class NameList(fields.Field):
    """A list of 1 to ``max_names`` non-empty strings (measure names), checked in one pass:
    a ``List(String(...))`` deserialises and validates each element as a field of its own,
    which costs a small evaluation more than the evaluation's reading of its run. Errors
    are those marshmallow's List(String) gives, by index (``measures[2]``)."""

    default_error_messages = {"invalid": "Not a valid list.",
                              "length": "Length must be between 1 and {max_names}.",
                              "null": "Field may not be null.",
                              "string": "Not a valid string.",
                              "empty": "Shorter than minimum length 1."}

    def __init__(self, *, max_names: int, **kwargs):
        super().__init__(**kwargs)
        self.max_names = max_names

    def _element_error(self, value) -> str | None:
        if value is None:
            return self.error_messages["null"]
        if not isinstance(value, str):
            return self.error_messages["string"]
        return None if value else self.error_messages["empty"]

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, list | tuple):
            raise self.make_error("invalid")
        errors = {i: [message] for i, v in enumerate(value)
                  if (message := self._element_error(v)) is not None}
        if errors:
            raise ValidationError(errors)
        if not 1 <= len(value) <= self.max_names:
            raise self.make_error("length", max_names=self.max_names)
        return list(value)


def _blank(value: str | bytes | memoryview) -> bool:
    """Empty or only whitespace (isspace stops at the first other character; a view is
    copied whole only if its first 64 KiB are blank)."""
    if isinstance(value, memoryview):
        return not len(value) or (bytes(value[:65536]).isspace() and bytes(value).isspace())
    return not value or value.isspace()


def _reject_booleans(mapping: Mapping, attr: str) -> None:
    """JSON true/false are not scores or grades (Python would read them as 1/0). One pass over
    the value types in C; the slow search for the path runs only when one is found."""
    docs = [d for d in mapping.values() if isinstance(d, Mapping)]
    if bool in set(map(type, chain.from_iterable(d.values() for d in docs))):
        for topic, d in mapping.items():
            for docid, v in (d.items() if isinstance(d, Mapping) else ()):
                if isinstance(v, bool):
                    raise ValidationError({f"{topic}.{docid}": [
                        f"{str(v).lower()} is not a number"]})


class OptionsSchema(Schema):
    class Meta:
        unknown = RAISE

    profile = fields.String(load_default=DEFAULT_PROFILE, validate=validate.OneOf(PROFILES))
    # 64-bit bounds, as the engine's (a 40-digit level or depth 2**63 was a 500)
    relevance_level = fields.Integer(load_default=1, strict=True, validate=validate.Range(
        min=INT64_MIN, max=INT64_MAX))
    judged_only = strict_bool(load_default=False)
    depth = fields.Integer(load_default=None, allow_none=True, strict=True,
                           validate=validate.Range(min=0, max=INT64_MAX))
    complete_topics = strict_bool(load_default=False)
    collection_size = fields.Integer(load_default=0, strict=True,
                                     validate=validate.Range(min=0, max=INT64_MAX))
    aggregation = fields.String(load_default="macro",
                                validate=validate.OneOf(AGGREGATIONS))


_OPTIONS_SCHEMA = OptionsSchema()
_DEFAULT_OPTIONS = _OPTIONS_SCHEMA.load({})


class EvaluationRequestSchema(Schema):
    class Meta:
        unknown = RAISE

    run = RunOrQrels(required=True)
    qrels = RunOrQrels(load_default=None, allow_none=False)
    qrels_id = fields.String(load_default=None, allow_none=False, validate=validate.Regexp(
        r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}(@[0-9a-f]{16})?$",
        error="must be a stored qrels id, optionally @version"))
    measures = NameList(max_names=200, load_default=None)
    options = fields.Nested(OptionsSchema, load_default=lambda: dict(_DEFAULT_OPTIONS))
    per_topic = strict_bool(load_default=True)
    details = strict_bool(load_default=False)
    details_depth = fields.Integer(load_default=10, strict=True,
                                   validate=validate.Range(min=1, max=1000))
    curves = strict_bool(load_default=False)
    latency_ms = fields.Dict(keys=fields.String(), values=fields.Float(allow_nan=False),
                             load_default=None)

    @validates_schema
    def _one_qrels(self, data, **kwargs):
        if (data.get("qrels") is None) == (data.get("qrels_id") is None):
            raise ValidationError("give exactly one of qrels and qrels_id", "qrels")

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
    with timed("read"):
        raw = read_body()
    if not raw:
        raise Problem(400, "Malformed request", "the request body is empty",
                      kind="malformed-request", errors={"body": ["is empty"]})
    # Large bodies: run and qrels mappings straight into columns (None: small, or not for
    # the fast path; orjson decides)
    try:
        with timed("decode"):
            body = decode_body(raw)
            if body is None:
                body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Problem(400, "Malformed JSON", f"the body is not valid JSON: {exc}",
                      kind="malformed-json", errors={"body": [str(exc)]}) from None
    if not isinstance(body, dict):
        raise Problem(422, "Invalid request", "the body must be a JSON object",
                      kind="invalid-request", errors={"body": ["must be a JSON object"]})
    return body


_BOOL = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


# Uploads at least this big are cut by service.multipart (werkzeug streams smaller ones).
FAST_MULTIPART_MIN_BYTES = 1 << 20


def _form_parts():
    """(form fields, files as bytes with their file names: :class:`multipart.Uploads`) of a
    multipart body."""
    if (request.content_length or 0) >= FAST_MULTIPART_MIN_BYTES:
        with timed("read"):
            raw = read_body()
        with timed("decode"):
            parsed = multipart.parse(raw, request.mimetype_params.get("boundary", ""),
                                     current_app.config.get("MAX_FORM_MEMORY_SIZE"))
            if parsed is None:  # not plain enough: werkzeug parses the bytes already read
                parser = request.make_form_data_parser()
                _, form, uploads = parser.parse(io.BytesIO(raw), request.mimetype,
                                                len(raw), request.mimetype_params)
                parsed = form, _uploads(uploads)
                for upload in uploads.values():
                    upload.close()
        return parsed
    return request.form, _uploads(request.files)


def _uploads(files) -> multipart.Uploads:
    """werkzeug's file storages as :class:`multipart.Uploads` (contents read whole)."""
    return multipart.Uploads((k, f.filename, f.read()) for k, f in files.items(multi=True))


def _form_body() -> dict:
    """multipart/form-data: ``run`` and ``qrels`` files (or fields), ``measures`` (repeated or
    comma-separated), options as plain fields."""
    body: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    form, files = _form_parts()
    for name in ("run", "qrels"):
        if name in files:
            body[name] = files[name]  # bytes: the engine reads them without a decode
        elif name in form:
            body[name] = form[name]
    measures = [m.strip() for v in form.getlist("measures") for m in v.split(",")
                if m.strip()]
    if measures:
        body["measures"] = measures
    options: dict[str, Any] = {}
    for key in form:
        if key in ("run", "qrels", "measures"):
            continue
        value = form[key]
        if key in ("per_topic", "details", "judged_only", "complete_topics", "curves"):
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
    for key in files:
        if key not in ("run", "qrels"):
            errors[key] = ["unknown file field (expected run and qrels)"]
    if errors:
        raise Problem(422, "Invalid request", "some form fields are invalid",
                      kind="invalid-request", errors=errors)
    if options:
        body["options"] = options
    return body


def load_body(schema: Schema, form_body) -> dict:
    """The request's JSON body, or its multipart form as ``form_body()`` reads it, validated
    by ``schema``: 415 for another media type, 422 naming every field that is wrong."""
    mimetype = request.mimetype
    if mimetype == "application/json" or mimetype.endswith("+json"):
        body = _json_body()
    elif mimetype == "multipart/form-data":
        body = form_body()
    else:
        raise Problem(415, "Unsupported Media Type",
                      f"send application/json or multipart/form-data, not {mimetype or 'nothing'}",
                      kind="unsupported-media-type")
    try:
        with timed("validate"):
            return schema.load(body)
    except ValidationError as exc:
        raise Problem(422, "Invalid request", "the request does not match the schema",
                      kind="invalid-request", errors=_flatten(exc.messages)) from None


def load_request() -> dict:
    return load_body(_REQUEST_SCHEMA, _form_body)


# --------------------------------------------------------------------------------------------
# Evaluation and response
# --------------------------------------------------------------------------------------------

def _serialised(value) -> tuple[bytes, str]:
    """(bytes, format) of a run or qrels as a queued job stores them: TREC text as sent
    ("trec", encoded once if it came as a JSON string), a mapping as JSON ("json")."""
    if isinstance(value, str | bytes | memoryview):
        return (value.encode("utf-8") if isinstance(value, str) else value), "trec"
    if isinstance(value, Columns):
        return bytes(value.raw), "json"
    return orjson.dumps(value), "json"


def _read(value, kind: str, subtopics: bool = False, label: str | None = None
          ) -> tuple[Any, Any]:
    """(the run or qrels as read, how to get its SHA-256): TREC text is hashed as sent; a
    mapping by its content (:func:`columns_sha256`), so that the digest does not depend on
    key order or on how the body was decoded. ``subtopics``: diversity qrels; ``label``: the
    name errors give the input (default ``kind``, e.g. ``runs[2]`` for a compared run)."""
    reader = read_run if kind == "run" else partial(read_qrels, diversity=subtopics)
    label = label or kind
    if isinstance(value, Columns):
        return value.value, value.value
    if isinstance(value, Mapping):
        read = reader(value, name=label)
        return read, (value if len(read) <= 10_000 else read)
    data = value.encode("utf-8") if isinstance(value, str) else value
    return reader(data, name=label), data


def _digest(source) -> str:
    if isinstance(source, bytes | memoryview):
        return hashlib.sha256(source).hexdigest()
    if isinstance(source, Mapping):
        return mapping_sha256(source)
    return columns_sha256(source)


# SHA-256 runs beside the evaluation (hashlib releases the GIL on large buffers).
_DIGESTS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cranfield-digest")


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _check_limits(run: cranfield.Run, qrels: cranfield.Qrels) -> None:
    """413 naming ``run``, ``run.<topic>`` or ``qrels`` when an input is over
    MAX_TOPICS or MAX_DOCS_PER_TOPIC (the checks comparisons and pools make too)."""
    check_run(run, "run", current_app.config)
    check_qrels(qrels, "qrels", current_app.config)


def _measure_problem(exc: cranfield.MeasureError, names: list[str] | None) -> Problem:
    index = next((i for i, n in enumerate(names or []) if n.strip() == exc.name.strip()), None)
    path = f"measures[{index}]" if index is not None else "measures"
    return from_engine_error(exc, path)


def _stored_qrels(ref: str):
    from backend.store import StoreError

    try:
        return current_app.extensions["cranfield"].store.scoped(current_tenant()).load_qrels(ref)
    except StoreError as exc:
        raise Problem(422, "Unknown qrels", str(exc), kind="unknown-qrels",
                      errors={"qrels_id": [str(exc)]}) from None


def _engine_problem(exc: CranfieldError, measures: list[str] | None) -> Problem:
    """An engine error as the 4xx that names its field (an unknown measure: by its index)."""
    if isinstance(exc, cranfield.MeasureError):
        return _measure_problem(exc, measures)
    return from_engine_error(exc)


def read_inputs(req: dict) -> tuple[cranfield.Run, cranfield.Qrels, Future, str]:
    """The request's run and qrels, read (stored qrels looked up, ``req["qrels_version"]``
    recorded) and within the limits, with their SHA-256 digests: the run's as a future, since
    a big run's is hashed beside the evaluation. Engine errors become 4xx naming the field."""
    opts = req["options"]
    measures = req["measures"]
    stored = None
    if req.get("qrels_id"):
        stored_qrels, stored = _stored_qrels(req["qrels_id"])
    req["qrels_version"] = f"{stored['id']}@{stored['version']}" if stored else None
    try:
        run, run_source = _read(req.pop("run"), "run")
        # a big run's SHA-256 runs beside the evaluation; a small one's costs less than that
        run_digest = (_DIGESTS.submit(_digest, run_source) if len(run) >= 100_000
                      else _done(_digest(run_source)))
        if stored:
            qrels, qrels_digest = stored_qrels, stored["sha256"]
        else:
            qrels, qrels_source = _read(req.pop("qrels"), "qrels",
                                        needs_subtopics(measures, opts["profile"]))
            qrels_digest = _digest(qrels_source)
        _check_limits(run, qrels)
    except CranfieldError as exc:
        raise _engine_problem(exc, measures) from None
    return run, qrels, run_digest, qrels_digest


def run_evaluation(req: dict):
    """Read, check limits, evaluate; every engine error becomes a 4xx naming the field.
    Returns the evaluation, the inputs as read and their SHA-256 digests."""
    run, qrels, run_digest, qrels_digest = read_inputs(req)
    try:
        ev = cranfield.evaluate(run, qrels, req["measures"], **req["options"])
    except CranfieldError as exc:
        raise _engine_problem(exc, req["measures"]) from None
    return ev, run, qrels, (run_digest.result(), qrels_digest)


@bp.post("")
def create_evaluation():
    """Evaluate synchronously and answer with per-topic and aggregate scores."""
    fmt = negotiate(["application/json", "text/plain", "text/csv", "text/html"],
                    "application/json, text/plain (trec_eval's text), text/csv or text/html "
                    "(a report page)")
    req = load_request()
    if wants_async():
        with timed("enqueue"):
            return enqueue_evaluation(req)
    with timed("evaluate"):
        ev, run, qrels, (run_digest, qrels_digest) = run_evaluation(req)
    with timed("render"):
        if fmt == "text/plain":
            return Response(format_trec(ev, per_topic=req["per_topic"]), mimetype="text/plain")
        if fmt == "text/csv":
            return Response(format_csv(ev, per_topic=req["per_topic"]), mimetype="text/csv")
        details = details_for(ev, run, qrels, req["details_depth"]) if req["details"] else None
        if fmt == "text/html":  # the page plots the precision-recall curve
            req = dict(req, curves=True)
        doc = evaluation_document(ev, req, run_digest, qrels_digest, details,
                                  req.get("qrels_version"))
        if fmt == "text/html":
            from cranfield.html_report import render_evaluation

            return Response(render_evaluation(doc), mimetype="text/html")
        return Response(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY),
                        mimetype="application/json")


def check_job_cap() -> str:
    """A job id holding one of the caller's tenant's MAX_QUEUED_JOBS slots (queued or
    running jobs); 429 when all are taken. The backend counts and takes the slot in one
    step, so concurrent submissions cannot overshoot the cap; if this request ends without
    submitting the job (a 4xx, Redis down), the slot is given back."""
    cap = current_app.config["MAX_QUEUED_JOBS"]
    backend = current_app.extensions["cranfield"]
    tenant = current_tenant()
    job_id, active = backend.reserve_job(tenant, cap)
    if job_id is None:
        raise Problem(429, "Too Many Requests", f"{active} jobs are queued or running for "
                      f"you; the limit is {cap}: wait for some to finish",
                      kind="too-many-jobs", headers={"Retry-After": "10"})

    @after_this_request
    def _release_unused(response: Response) -> Response:
        if response.status_code != 202:  # 202: submitted, the job holds the slot
            try:
                backend.release_job(job_id, tenant)
            except Exception:  # Redis down: the slot lapses by itself (RESERVATION_TTL)
                current_app.logger.warning("could not release job slot %s", job_id,
                                           exc_info=True)
        return response

    return job_id


def wants_async() -> bool:
    """RFC 7240 ``Prefer: respond-async``, or a body over the configured size."""
    # a WSGI server joins repeated headers with commas into one environ entry
    prefer = request.environ.get("HTTP_PREFER", "").lower()
    if "respond-async" in [p.strip().split(";")[0] for p in prefer.split(",")]:
        return True
    return (request.content_length or 0) > current_app.config["ASYNC_THRESHOLD_BYTES"]


def enqueue_evaluation(req: dict) -> Response:
    """Store the inputs under their own keys and enqueue a job that carries only those keys."""
    from cranfield.names import resolve

    backend = current_app.extensions["cranfield"]
    try:
        resolve(req["measures"], req["options"]["profile"])
    except cranfield.MeasureError as exc:
        raise _measure_problem(exc, req["measures"]) from None
    cfg = current_app.config
    spec = job_spec({k: req[k] for k in ("measures", "options", "per_topic", "details",
                                         "details_depth", "latency_ms", "curves")}, req)
    run_bytes, run_format = _serialised(req.pop("run"))
    spec["run_format"] = run_format
    # A run cut into shards is hashed here, on a thread beside the stores of its pieces
    # (hashlib releases the GIL; SHA-NI hashes 250 MB in ~0.15 s): a worker re-reading every
    # piece from Redis to hash them cost ~0.7 s of a worker and of Redis. An unsharded run's
    # SHA-256 is its job's to compute.
    pieces = []
    if (backend.kind == "redis" and run_format == "trec"
            and len(run_bytes) >= cfg["SHARD_MIN_BYTES"] and cfg["SHARDS"] > 1):
        pieces = split_trec_text(run_bytes, cfg["SHARDS"])
    if len(pieces) > 1:
        run_sha256 = _DIGESTS.submit(_digest, run_bytes)
        job_id = backend.submit_sharded(spec, pieces, run_sha256)
    else:
        spec["run_key"] = backend.store.put_blob(f"run-{uuid.uuid4().hex}", run_bytes,
                                                 cfg["INPUT_TTL"])
        job_id = backend.submit(spec)
    del run_bytes, pieces
    return accepted(job_id)


def job_spec(spec: dict, req: dict) -> dict:
    """``spec`` as a queued job carries it: the caller's tenant and request id, and the qrels
    by reference (stored ones pinned to the version current at submission, inline ones put
    under a key of their own), and the id of the job slot reserved for it (``job_id``: the
    backend's ``submit`` takes it out); 429 when the tenant's jobs are at the cap."""
    backend = current_app.extensions["cranfield"]
    spec.update(job_id=check_job_cap(), tenant=current_tenant(),
                request_id=current_request_id())
    if req.get("qrels_id"):
        _, meta = _stored_qrels(req["qrels_id"])
        spec["qrels_ref"] = f"{meta['id']}@{meta['version']}"
    elif req.get("qrels") is not None:
        data, fmt = _serialised(req.pop("qrels"))
        spec.update(qrels_key=backend.store.put_blob(f"qrels-{uuid.uuid4().hex}", data,
                                                     current_app.config["INPUT_TTL"]),
                    qrels_sha256=hashlib.sha256(data).hexdigest() if fmt == "trec" else None,
                    qrels_format=fmt)
    return spec


def accepted(job_id: str) -> Response:
    """202 for a queued job: the job as it stands, ``Location`` to poll."""
    job = present(current_app.extensions["cranfield"].job(job_id)
                  or {"id": job_id, "status": "queued"})
    resp = Response(orjson.dumps(job), status=202, mimetype="application/json")
    resp.headers["Location"] = f"/v1/jobs/{job_id}"
    resp.headers["Preference-Applied"] = "respond-async"
    return resp
