"""Stored qrels: ``PUT/GET/DELETE /v1/qrels/{qrels_id}``, ``GET /v1/qrels``.

Versions are immutable and named by content; ``ETag`` is the version and ``If-Match`` makes
an update safe; ``qrels_id@version`` addresses an old version. They are kept in the results
database and cached in Redis (``backend/qrels_db.py``): a restart or a FLUSHALL loses none."""

from __future__ import annotations

import re

import orjson
from flask import Blueprint, Response, current_app, g, request

import cranfield
from backend.store import StoreError, split_ref
from cranfield.inputs.grammar import GAINS

from .auth import current_tenant
from .limits import check_qrels, check_topics
from .multipart import check_parts
from .paging import boolean, boolean_word, next_page, page
from .problems import Problem
from .request_body import read_body, read_json_object

bp = Blueprint("qrels", __name__, url_prefix="/v1/qrels")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def store():
    """The stored qrels the caller's tenant sees (all of them when API keys are off)."""
    return current_app.extensions["cranfield"].store.scoped(current_tenant())


def _json(doc, status=200, headers=None) -> Response:
    resp = Response(orjson.dumps(doc), status=status, mimetype="application/json")
    for k, v in (headers or {}).items():
        resp.headers[k] = v
    return resp


def _check_id(qrels_id: str) -> None:
    # fullmatch: "$" alone lets a trailing newline through (kept, then a 500 on Location)
    if not ID_PATTERN.fullmatch(qrels_id):
        raise Problem(422, "Invalid qrels id", f"{qrels_id!r} is not a valid qrels id",
                      kind="invalid-request", errors={"qrels_id": [
                          "1-128 characters: letters, digits, '.', '_', '-'"]})


def store_problem(exc: StoreError) -> Problem:
    """The problem a qrels store's error is (404, 412, 503 with Retry-After; else 400): the
    qrels, topic metadata and consensus routes answer it."""
    titles = {404: "Not Found", 412: "Precondition Failed", 503: "Service Unavailable"}
    return Problem(exc.status, titles.get(exc.status, "Bad Request"), str(exc),
                   kind={404: "not-found", 412: "precondition-failed",
                         503: "unavailable"}.get(exc.status, "bad-request"),
                   headers={"Retry-After": "1"} if exc.status == 503 else None)


def _kind(value: object, field: str) -> str:
    """``qrels_format``: the kind of judgments stored (trec_eval's -R), 422 naming ``field``
    when it is not one."""
    from cranfield.reports.jg_document import QRELS_FORMATS

    if value not in QRELS_FORMATS:
        raise Problem(422, "Invalid request", f"{field} must be one of {list(QRELS_FORMATS)}",
                      kind="invalid-request", errors={field: [
                          f"Must be one of: {', '.join(QRELS_FORMATS)}."]})
    return str(value)


def _body_kind(body_value: object) -> str:
    """The kind a JSON or multipart body says in its ``qrels_format`` member (default
    ``qrels``); the query parameter is text/plain's, and refused beside such a body."""
    if "qrels_format" in request.args:
        raise Problem(422, "Invalid request", "a JSON or multipart body says the kind in its "
                      "qrels_format member, not in the query", kind="invalid-request",
                      errors={"qrels_format": ["give it in the body (the query parameter is "
                                               "for a text/plain body)"]})
    return _kind(body_value, "qrels_format") if body_value is not None else "qrels"


# a pool's depth as POST /v1/pools takes it (PoolRequestSchema.depth)
MAX_POOL_DEPTH = 10_000


def _pool_depth(value: object, text: bool = False) -> int | None:
    """``pool_depth`` of a JSON or multipart body (``text``: a form field's text): the depth
    of the pool the version's judgments cover (see docs/api.md, "Qrels versions compared"),
    kept in its metadata; 422 naming it unless an integer 1..MAX_POOL_DEPTH. A query
    parameter of that name is refused (422): a text/plain body has no place for it (send the
    file as a multipart part beside a pool_depth field)."""
    if "pool_depth" in request.args:
        raise Problem(422, "Invalid request", "the pool depth is a pool_depth member of a JSON "
                      "or multipart body, not a query parameter", kind="invalid-request",
                      errors={"pool_depth": ["give it in a JSON or multipart body"]})
    if value is None:
        return None
    if text and isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or \
            not 1 <= value <= MAX_POOL_DEPTH:
        raise Problem(422, "Invalid request", f"pool_depth must be an integer "
                      f"1..{MAX_POOL_DEPTH}", kind="invalid-request",
                      errors={"pool_depth": [f"an integer 1..{MAX_POOL_DEPTH}"]})
    return value


def _body_qrels() -> tuple[object, bool, str]:
    """The qrels in the body (JSON {"qrels": …, "diversity": bool, "qrels_format": kind},
    text/plain TREC qrels, or a multipart file ``qrels``), whether they are ndeval subtopic
    qrels, and their kind (``qrels_format``: ``qrels``, or trec_eval's -R ``qrels_jg``,
    ``prefs``, ``qrels_prefs``; text/plain: the query parameter)."""
    mimetype = request.mimetype
    if mimetype == "application/json":
        body = read_json_object("qrels", {"qrels", "diversity", "qrels_format", "pool_depth",
                                          "gains", "judges"})
        kind = _body_kind(body.get("qrels_format"))
        from .judges import judges_body  # (judges imports this module)

        g.judges = judges_body(body.get("judges"))  # each judge's provenance (issue #31)
        g.gains = _gains(body.get("gains", "integer"))
        g.pool_depth = _pool_depth(body.get("pool_depth"))
        diversity = body.get("diversity", False)
        if not isinstance(diversity, bool):
            raise Problem(422, "Invalid request", "diversity must be true or false",
                          kind="invalid-request", errors={"diversity": ["Not a valid boolean."]})
        value = body["qrels"]
        # judged qrels (qrels_jg) may also be rows [{topic, judge, docid, rel}] (issue #31)
        rows = kind == "qrels_jg" and isinstance(value, list)
        if not (rows or isinstance(value, dict | str)) or not value:
            raise Problem(422, "Invalid request", "qrels must be a non-empty mapping or text",
                          kind="invalid-request", errors={"qrels": ["is empty or not an "
                                                                    "object or text"]})
        return (value.encode() if isinstance(value, str) else value), diversity, kind
    if mimetype == "text/plain":
        data = read_body()
        if not data.strip():
            raise Problem(422, "Invalid request", "the body is empty", kind="invalid-request",
                          errors={"qrels": ["is empty"]})
        g.pool_depth = _pool_depth(None)  # (only a JSON or multipart body gives one)
        g.gains = _gains(request.args.get("gains", "integer"), query=True)
        # true or false (the forms' words), 400 naming it otherwise: "ture" was read as false
        return data, boolean("diversity", False), _kind(request.args.get("qrels_format",
                                                                         "qrels"), "qrels_format")
    if mimetype == "multipart/form-data":
        # every part named, known and once (nameless, unknown or repeated: 422 naming it)
        check_parts(request.form, request.files,
                    known=frozenset({"qrels", "diversity", "qrels_format", "pool_depth",
                                     "gains", "judges"}))
        # qrels_format and diversity are words: a file part of either was ignored (judgment
        # groups stored as plain qrels; review R1 F7), so it is refused naming it
        as_files = sorted({"diversity", "qrels_format", "pool_depth", "gains", "judges"} &
                          set(request.files))
        if as_files:
            raise Problem(422, "Invalid request", f"{', '.join(as_files)} sent as a file part: "
                          "send it as a form field", kind="invalid-request",
                          errors={k: ["send it as a form field, not a file"] for k in as_files})
        # a file part, or a plain field (the text itself), as an evaluation's qrels part
        upload = request.files.get("qrels")
        field = request.form.get("qrels")
        if upload is None and not field:
            raise Problem(422, "Invalid request", "no qrels file", kind="invalid-request",
                          errors={"qrels": ["Missing data"]})
        data = upload.read() if upload is not None else field.encode()
        g.pool_depth = _pool_depth(request.form.get("pool_depth"), text=True)
        g.gains = _gains(request.form.get("gains", "integer"))
        g.judges = _form_judges(request.form.get("judges"))
        diversity = boolean_word(request.form.get("diversity", "false"))
        if diversity is None:  # as every form's boolean field: 422 naming it
            raise Problem(422, "Invalid request", "diversity must be true or false",
                          kind="invalid-request", errors={"diversity": ["must be true or false"]})
        return data, diversity, _body_kind(request.form.get("qrels_format"))
    raise Problem(415, "Unsupported Media Type", "send application/json, text/plain or "
                  "multipart/form-data", kind="unsupported-media-type")


def _form_judges(text: str | None) -> dict | None:
    """A multipart ``judges`` field (issue #31): the JSON object a JSON body's ``judges``
    member is (each judge's provenance, beside a judged file part), 422 naming it."""
    from .judges import judges_body

    if text is None:
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise Problem(422, "Invalid request", "judges must be a JSON object",
                      kind="invalid-request", errors={"judges": [
                          "a JSON object of judge name -> provenance"]}) from None
    return judges_body(value)


def _gains(value: object, query: bool = False) -> str:
    """``gains`` of a PUT (issue #31): ``integer`` (the default) or ``real``, 422 naming it.
    A text/plain body gives it as a query parameter (``query``), refused beside another
    body, as pool_depth is."""
    if not query and "gains" in request.args:
        raise Problem(422, "Invalid request", "a JSON or multipart body says its gains in its "
                      "gains member, not in the query", kind="invalid-request",
                      errors={"gains": ["give it in the body (the query parameter is for a "
                                        "text/plain body)"]})
    if value not in GAINS:
        raise Problem(422, "Invalid request", f"gains must be one of {', '.join(GAINS)}",
                      kind="invalid-request", errors={"gains": [f"one of {', '.join(GAINS)}"]})
    return value


@bp.put("/<qrels_id>")
def put_qrels(qrels_id: str):
    _check_id(qrels_id)
    source, diversity, kind = _body_qrels()
    gains = g.get("gains", "integer")
    if gains == "real" and (kind != "qrels" or diversity):
        raise Problem(422, "Invalid request", "gains real is for plain ad hoc qrels",
                      kind="invalid-request", errors={"gains": ["not with qrels_format "
                                                                f"{kind} or diversity"]})
    if kind != "qrels":
        return _put_kind(qrels_id, source, diversity, kind)
    qrels = cranfield.read_qrels(source, name="qrels", diversity=diversity,
                                 gains=gains)  # errors: the handler
    if len(qrels) == 0:
        raise Problem(422, "Invalid input", "no judgments", kind="invalid-input",
                      errors={"qrels": ["has no judgments"]})
    # held to MAX_TOPICS now, with the 413 every evaluation using them would otherwise give
    check_qrels(qrels, "qrels", current_app.config)
    return _stored(qrels_id, qrels, diversity, "qrels")


def _put_kind(qrels_id: str, source, diversity: bool, kind: str) -> Response:
    """Judgment groups or preferences (``kind``) stored as a kind of their own: read by the
    engine's one reader of that kind (text, or the JSON shape), held to MAX_TOPICS, kept as
    their canonical text under the kind's header (:func:`backend.store.version_text`)."""
    from backend.store import read_kind
    from cranfield.inputs import table_bytes
    from cranfield.inputs.judgment_files import read_prefs

    if diversity:
        raise Problem(422, "Invalid request", f"qrels_format {kind} has no subtopics: "
                      "diversity is for ad hoc qrels", kind="invalid-request",
                      errors={"diversity": [f"not with qrels_format {kind}"]})
    if isinstance(source, dict | list) and kind == "qrels_jg":
        from .judges import read_judged_body  # nested shape, rows or columns (issue #31)

        judgments = read_judged_body(source)
    elif isinstance(source, dict):
        judgments = read_prefs(source, name="qrels", qrels=kind == "qrels_prefs")
    elif kind == "qrels_jg" and table_bytes.sniff(source) is not None:
        from .judges import read_judged_table  # columns topic, judge, docid, rel (issue #31)

        judgments = read_judged_table(source)
    else:
        if table_bytes.sniff(source) is not None:
            raise Problem(422, "Invalid request", f"qrels_format {kind} is read from TREC "
                          "text or its JSON shape, not an Arrow or Parquet file",
                          kind="invalid-input", errors={"qrels": [
                              f"not {kind} text (an Arrow or Parquet file)"]})
        judgments = read_kind(source, kind)  # errors (naming the line): the handler's
        if judgments.comment_lines:  # review R1 F6: see docs/api.md
            from cranfield.errors import InputError

            raise InputError("qrels", f"a stored {kind} version keeps no comment lines "
                             "(trec_eval 9.0.8 refuses them in this format, 10.0 skips them; "
                             "the version is its judgments, either profile reads it): remove "
                             "them", line=judgments.comment_lines[0])
    check_topics(judgments.topics, "qrels", current_app.config)
    return _stored(qrels_id, judgments, False, kind)


def _stored(qrels_id: str, qrels, diversity: bool, kind: str) -> Response:
    try:
        depth = g.get("pool_depth")
        extra = {} if depth is None else {"pool_depth": depth}
        from .judges import judges_meta

        extra.update(judges_meta(qrels, kind) or {})  # each judge's provenance (issue #31)
        meta, created = store().put_qrels(qrels_id, qrels, request.headers.get("If-Match"),
                                          diversity=diversity, qrels_format=kind,
                                          extra_meta=extra or None)
    except StoreError as exc:
        raise store_problem(exc) from None
    headers = {"ETag": f'"{meta["version"]}"',
               "Location": f"/v1/qrels/{qrels_id}@{meta['version']}"}
    return _json(shown(meta), 201 if created else 200, headers)


def shown(meta: dict) -> dict:
    """A version's metadata as the API shows it: its kind (``qrels_format``) always, a
    version stored before kinds existed being plain qrels."""
    return {**meta, "qrels_format": meta.get("qrels_format", "qrels")}


@bp.get("/<qrels_id>")
def get_qrels(qrels_id: str):
    """Metadata of the latest version, or of ``qrels_id@version``."""
    qrels_id, version = split_ref(qrels_id)
    _check_id(qrels_id)
    try:
        meta = store().meta(qrels_id, version)
    except StoreError as exc:
        raise store_problem(exc) from None
    return _json(shown(meta), headers={"ETag": f'"{meta["version"]}"'})


@bp.get("")
def list_qrels():
    offset, limit = page()
    items, total = store().list_qrels(offset, limit)
    return _json({"items": [shown(m) for m in items], "total": total, "offset": offset,
                  "limit": limit,
                  "next": next_page("/v1/qrels", {}, offset, limit, total)})


@bp.delete("/<qrels_id>")
def delete_qrels(qrels_id: str):
    _check_id(qrels_id)
    try:
        store().delete_qrels(qrels_id)
    except StoreError as exc:
        raise store_problem(exc) from None
    return Response(status=204)
