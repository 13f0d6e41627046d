"""Many judges of stored qrels (issue #31): ``GET /v1/qrels/{id}/agreement`` and
``POST /v1/qrels/{id}/consensus``; and the ``judges`` object of ``PUT /v1/qrels/{id}``.

Judged qrels are stored as trec_eval's judgment groups (``qrels_format`` ``qrels_jg``: the
group names the judge), put as text, the nested JSON shape, JSON rows or columns
(:mod:`cranfield.judges.judged`). A PUT may give each judge's provenance (``judges``: kind
person or model, model name, prompt digest, notes), kept in the version's metadata.

The agreement (:func:`cranfield.judges.agreement_document.agreement_document`): every
statistic per topic and overall, with bootstrap intervals over topics (``resamples``, default
AGREEMENT_RESAMPLES, at most MAX_AGREEMENT_RESAMPLES; ``seed``; ``level``), as JSON or
text/plain. The consensus (:func:`cranfield.judges.consensus.consensus`) is stored as a new
version of the same id (or of ``target``), its recipe (method, judges, tie rule, gains and
the source id@version) in the version's metadata as ``consensus``.

Bounds, before any work: the judgments (MAX_JUDGED_JUDGMENTS), the judges (MAX_JUDGES) and
the agreement's work (MAX_AGREEMENT_WORK:
:func:`cranfield.judges.agreement_document.agreement_work`). Another tenant's id is unknown
(404)."""

from __future__ import annotations

import orjson
from flask import Blueprint, Response, current_app, g, request
from marshmallow import RAISE, Schema, ValidationError, fields, validate

from backend.store import StoreError, split_ref

from .negotiation import negotiate
from .paging import bad_parameter, boolean, integer
from .problems import Problem
from .qrels import ID_PATTERN, store

bp = Blueprint("judges", __name__, url_prefix="/v1/qrels")

JUDGE_KINDS = ("person", "model")


class JudgeSchema(Schema):
    """One judge's provenance: free-form but bounded, as the PUT's ``judges.NAME``."""

    class Meta:
        unknown = RAISE

    kind = fields.String(required=True, validate=validate.OneOf(JUDGE_KINDS))
    model = fields.String(validate=validate.Length(min=1, max=200))
    prompt_digest = fields.String(validate=validate.Length(min=1, max=200))
    notes = fields.String(validate=validate.Length(max=2000))


class ConsensusSchema(Schema):
    """``POST /v1/qrels/{id}/consensus``'s body."""

    class Meta:
        unknown = RAISE

    method = fields.String(required=True, validate=validate.OneOf(
        ("majority", "max", "mean", "judge")))
    judge = fields.String(validate=validate.Length(min=1, max=200))
    judges = fields.List(fields.String(validate=validate.Length(min=1, max=200)),
                         validate=validate.Length(min=1))
    target = fields.String(validate=validate.Regexp(ID_PATTERN.pattern, error=(
        "1-128 characters: letters, digits, '.', '_', '-'")))


_JUDGE = JudgeSchema()
_CONSENSUS = ConsensusSchema()


def flat_messages(messages, prefix: str = "") -> dict[str, list[str]]:
    """marshmallow's nested error messages as ``{"judges[0]": [...], "judges.x.kind": [...]}``
    (a list's messages are keyed by index, which JSON cannot hold as a key)."""
    if isinstance(messages, list | tuple):
        return {prefix or "body": [str(m) for m in messages]}
    out: dict[str, list[str]] = {}
    for key, value in messages.items():
        name = (f"{prefix}[{key}]" if isinstance(key, int) else
                f"{prefix}.{key}" if prefix else str(key))
        out.update(flat_messages(value, name))
    return out


def _invalid(errors: dict, detail: str = "Invalid request") -> Problem:
    return Problem(422, "Invalid request", detail, kind="invalid-request", errors=errors)


def _not_found(detail: str) -> Problem:
    return Problem(404, "Not Found", detail, kind="not-found", errors={"qrels_id": [detail]})


def judges_body(value: object) -> dict | None:
    """The ``judges`` member of a PUT body, checked: an object of judge name -> provenance
    (:class:`JudgeSchema`), 422 naming ``judges.NAME.field``. Kept until :func:`judges_meta`
    holds it against the judgments read."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        raise _invalid({"judges": ["an object of judge name -> {kind, model, prompt_digest, "
                                   "notes}"]}, "judges must be a non-empty object")
    limit = current_app.config["MAX_JUDGES"]
    if len(value) > limit:
        raise _invalid({"judges": [f"at most {limit} judges (MAX_JUDGES)"]},
                       f"{len(value)} judges, more than the {limit} allowed")
    out = {}
    for name, provenance in value.items():
        try:
            if not isinstance(provenance, dict):
                raise ValidationError("not an object")
            out[name] = _JUDGE.load(provenance)
        except ValidationError as exc:
            errors = (flat_messages(exc.messages, f"judges.{name}")
                      if isinstance(provenance, dict) else
                      {f"judges.{name}": ["an object {kind, model, prompt_digest, notes}"]})
            raise _invalid(errors, f"judges.{name}: not a judge's provenance") from None
    return out


def judges_meta(judgments, qrels_format: str) -> dict | None:
    """The metadata a PUT keeps of its judges (``{"judges": {...}}``, or None without
    them): only judged qrels (qrels_jg) have judges, and each named must judge in them."""
    from cranfield.judges.judged import judges_of

    given = g.get("judges")
    if given is None:
        return None
    if qrels_format != "qrels_jg":
        raise _invalid({"judges": [f"not with qrels_format {qrels_format}"]},
                       "judges are the judgment groups of qrels_format qrels_jg")
    known = set(judges_of(judgments))
    unknown = sorted(set(given) - known)
    if unknown:
        raise _invalid({f"judges.{unknown[0]}": ["judges nothing in these qrels"]},
                       f"judge {unknown[0]!r} judges nothing in these qrels")
    return {"judges": given}


def read_judged_body(source, name: str = "qrels"):
    """Judged qrels of a JSON body (nested shape, rows or columns), held to
    MAX_JUDGED_JUDGMENTS before they are read."""
    from cranfield.judges.judged import read_judged

    return read_judged(source, name=name, max_judgments=current_app.config[
        "MAX_JUDGED_JUDGMENTS"])


def read_judged_table(data, name: str = "qrels"):
    """Judged qrels of an Arrow IPC or Parquet upload (a text/plain body or a multipart
    file part; columns ``topic``, ``judge``, ``docid``, ``rel``): bounded from the file's
    metadata before anything is read, by the uploads' table bounds (MAX_CONTENT_LENGTH
    uncompressed, TABLE_MAX_MEMORY) and MAX_JUDGED_JUDGMENTS rows (413 naming ``name``),
    then read as JSON columns are (errors naming the row and column, 422)."""
    from cranfield.errors import CranfieldError
    from cranfield.inputs.columnar import read_judged_bytes

    from .inputs import table_bounds, too_large

    bounds = {**table_bounds("judged"), "max_rows": current_app.config["MAX_JUDGED_JUDGMENTS"]}
    try:
        table = read_judged_bytes(data, name, **bounds)
    except CranfieldError as exc:
        if getattr(exc, "code", None) == "too-large":
            raise too_large(exc, name) from None
        raise
    return read_judged_body(table, name)


def _judged_version(ref: str):
    """(judgment groups, metadata) of a stored qrels_jg version; 404 for an unknown id or
    version (another tenant's too), 422 for another kind, 413 beyond the bounds. A bare id
    is its latest judged version: a consensus stored into the same id is plain qrels, and
    does not hide the judgments it was derived from."""
    from cranfield.judges.judged import judges_of

    qrels_id, version = split_ref(ref)
    if not ID_PATTERN.fullmatch(qrels_id):
        raise _not_found(f"no qrels {qrels_id!r}")
    try:
        meta = store().meta(qrels_id, version)
        if version is None and meta.get("qrels_format", "qrels") != "qrels_jg":
            meta = next((m for m in (store().meta(qrels_id, v)
                                     for v in dict.fromkeys(reversed(meta["versions"])))
                         if m.get("qrels_format", "qrels") == "qrels_jg"), meta)
    except StoreError as exc:
        raise _not_found(str(exc)) from None
    if meta.get("qrels_format", "qrels") != "qrels_jg":
        raise _invalid({"qrels_id": ["not judged qrels (qrels_format qrels_jg)"]},
                       f"qrels {ref!r} are of qrels_format {meta.get('qrels_format', 'qrels')}"
                       ": agreement and consensus read judged qrels (qrels_jg, a judge per "
                       "judgment group)")
    limit = current_app.config["MAX_JUDGED_JUDGMENTS"]
    if meta["judgments"] > limit:
        raise Problem(413, "Too Large", f"{meta['judgments']} judgments, more than the "
                      f"{limit} allowed (MAX_JUDGED_JUDGMENTS)", kind="too-large",
                      errors={"qrels_id": [f"at most {limit} judgments"]})
    try:
        groups, meta = store().load_qrels(f"{qrels_id}@{meta['version']}")
    except StoreError as exc:
        raise _not_found(str(exc)) from None
    judges = judges_of(groups)
    if len(judges) > current_app.config["MAX_JUDGES"]:
        raise Problem(413, "Too Large", f"{len(judges)} judges, more than the "
                      f"{current_app.config['MAX_JUDGES']} allowed (MAX_JUDGES)",
                      kind="too-large", errors={"qrels_id": ["too many judges"]})
    return groups, meta


def _level() -> float:
    text = request.args.get("level")
    if text is None:
        return 0.95
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 <= value < 1.0 or not text.replace(".", "", 1).isdigit():
        raise bad_parameter("level", "the interval's coverage, a decimal in [0.5, 1)")
    return value


@bp.get("/<qrels_id>/agreement")
def agreement(qrels_id: str):
    """How much the judges of stored judged qrels agree, per topic and overall."""
    from cranfield.judges.agreement_document import (
        agreement_document,
        agreement_work,
        format_agreement,
    )

    fmt = negotiate(["application/json", "text/plain"])
    config = current_app.config
    resamples = integer("resamples", config["AGREEMENT_RESAMPLES"], 0,
                        config["MAX_AGREEMENT_RESAMPLES"])
    seed = integer("seed", 0, 0, 2**32 - 1)
    level = _level()
    per_topic = boolean("per_topic", True)
    groups, meta = _judged_version(qrels_id)
    work = agreement_work(groups, resamples)
    if work > config["MAX_AGREEMENT_WORK"]:
        raise Problem(422, "Too much work", f"this agreement is {work} units of work, more "
                      f"than the {config['MAX_AGREEMENT_WORK']} allowed (MAX_AGREEMENT_WORK): "
                      "ask fewer resamples", kind="over-budget",
                      errors={"resamples": [f"{work} units of work over the budget"]})
    doc = agreement_document(groups, resamples=resamples, seed=seed, level=level)
    doc["qrels"] = {"id": meta["id"], "version": meta["version"], "sha256": meta["sha256"]}
    if "judges" in meta:
        doc["provenance"] = meta["judges"]
    if not per_topic:
        doc["topics"] = []
    if fmt == "text/plain":
        return Response(format_agreement(doc, per_topic), mimetype="text/plain")
    return Response(orjson.dumps(doc), mimetype="application/json")


def _consensus_body() -> dict:
    from .request_body import read_json_object

    if request.mimetype != "application/json":
        raise Problem(415, "Unsupported Media Type", "send application/json",
                      kind="unsupported-media-type")
    body = read_json_object("method", {"method", "judge", "judges", "target"})
    try:
        req = _CONSENSUS.load(body)
    except ValidationError as exc:
        raise _invalid(flat_messages(exc.messages), "invalid consensus request") from None
    if req["method"] == "judge":
        if "judge" not in req or "judges" in req:
            raise _invalid({"judge": ["method judge names one judge here (not judges)"]},
                           "method judge takes judge: NAME")
        req["judges"] = [req.pop("judge")]
    elif "judge" in req:
        raise _invalid({"judge": [f"only with method judge (method {req['method']} consults "
                                  "judges)"]}, "judge is for method judge")
    return req


@bp.post("/<qrels_id>/consensus")
def consensus(qrels_id: str):
    """A consensus of the judges of stored judged qrels, stored as a new version of the same
    id (or of ``target``) with its recipe in its metadata."""
    from cranfield.errors import InputError
    from cranfield.judges.consensus import consensus as make_consensus

    from .qrels import shown, store_problem

    req = _consensus_body()
    groups, meta = _judged_version(qrels_id)
    try:
        qrels, recipe = make_consensus(groups, req["method"], req.get("judges"))
    except InputError as exc:
        field = {"method": "method", "judges": "judge" if req["method"] == "judge"
                 else "judges"}.get(exc.field or "", "judges")
        raise _invalid({field: [exc.reason]}, exc.reason) from None
    recipe["source"] = {"id": meta["id"], "version": meta["version"], "sha256": meta["sha256"]}
    known = {j: meta["judges"][j] for j in recipe["judges"] if j in meta.get("judges", {})}
    if known:  # the consulted judges' provenance, as the source was put with it
        recipe["provenance"] = known
    target = req.get("target") or meta["id"]
    # (a mean's real gains: the stored version says gains real, as describe gives it)
    extra = {"consensus": recipe}
    try:
        put, created = store().put_qrels(target, qrels, request.headers.get("If-Match"),
                                         qrels_format="qrels", extra_meta=extra)
    except StoreError as exc:
        raise store_problem(exc) from None
    headers = {"ETag": f'"{put["version"]}"', "Location": f"/v1/qrels/{target}@{put['version']}"}
    resp = Response(orjson.dumps(shown(put)), status=201 if created else 200,
                    mimetype="application/json")
    for k, v in headers.items():
        resp.headers[k] = v
    return resp
