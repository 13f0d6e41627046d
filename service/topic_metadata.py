"""Stored topic metadata (issue #28): ``PUT/GET/DELETE /v1/topic-metadata/{metadata_id}``,
``GET /v1/topic-metadata``.

Topic metadata maps each topic to its segment labels and an optional weight; evaluations and
comparisons name it by ``topic_metadata_id`` (``id`` or ``id@version``) instead of sending
``options.topic_metadata`` inline. It is read by the engine's one reader
(:func:`cranfield.inputs.segments.read_topic_metadata`), kept in the results database
(``backend/topic_metadata_db.py``), versioned by content as stored qrels are: ``ETag`` is the
version, ``If-Match`` makes an update safe, ``id@version`` addresses an old version, and each
tenant sees its own."""

from __future__ import annotations

import re

import orjson
from flask import Blueprint, Response, current_app, request

from backend.store import StoreError, split_ref
from backend.topic_metadata_db import TopicMetadataStore, canonical_mapping

from .auth import current_tenant
from .paging import next_page, page
from .problems import Problem
from .qrels import store_problem
from .request_body import read_body, read_json_object

bp = Blueprint("topic_metadata", __name__, url_prefix="/v1/topic-metadata")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def store() -> TopicMetadataStore:
    """The stored topic metadata, on the results database's engine."""
    ext = current_app.extensions
    if "topic_metadata" not in ext:
        ext["topic_metadata"] = TopicMetadataStore(ext["results"].engine)
    return ext["topic_metadata"]


def _json(doc, status=200, headers=None) -> Response:
    resp = Response(orjson.dumps(doc), status=status, mimetype="application/json")
    for k, v in (headers or {}).items():
        resp.headers[k] = v
    return resp


def _check_id(metadata_id: str) -> None:
    if not ID_PATTERN.fullmatch(metadata_id):
        raise Problem(422, "Invalid topic metadata id",
                      f"{metadata_id!r} is not a valid topic metadata id",
                      kind="invalid-request", errors={"metadata_id": [
                          "1-128 characters: letters, digits, '.', '_', '-'"]})


def read_metadata(source, field: str):
    """``source`` (a mapping, or text as bytes or str) read by the engine's one reader, its
    errors the 422 naming ``field`` (and the line or topic); labels held to the engine's
    MAX_LABEL characters (what a recorded result keeps) by its label rule, as the library's
    and the CLI's are. Returns (the metadata, its canonical mapping)."""
    from cranfield.inputs.segments import read_topic_metadata

    # errors (a line, a topic's path; over MAX_TOPICS): the handler's 4xx naming them
    metadata = read_topic_metadata(source, name=field,
                                   max_topics=current_app.config["MAX_TOPICS"],
                                   max_segments=current_app.config["MAX_SEGMENTS"])
    return metadata, canonical_mapping(metadata)


def _body_source():
    """The metadata in the body: JSON ``{"topic_metadata": mapping or text}``, or text/plain
    (the file as ``cranfield eval --topic-metadata`` reads it)."""
    if request.mimetype == "application/json":
        body = read_json_object("topic_metadata", {"topic_metadata"})
        value = body["topic_metadata"]
        if not isinstance(value, dict | str) or not value:
            raise Problem(422, "Invalid request", "topic_metadata must be a non-empty "
                          "mapping or text", kind="invalid-request",
                          errors={"topic_metadata": ["is empty or not an object or text"]})
        return value.encode() if isinstance(value, str) else value
    if request.mimetype == "text/plain":
        data = read_body()
        if not data.strip():
            raise Problem(422, "Invalid request", "the body is empty", kind="invalid-request",
                          errors={"topic_metadata": ["is empty"]})
        return data
    raise Problem(415, "Unsupported Media Type", "send application/json or text/plain",
                  kind="unsupported-media-type")


@bp.put("/<metadata_id>")
def put_topic_metadata(metadata_id: str):
    _check_id(metadata_id)
    metadata, _ = read_metadata(_body_source(), "topic_metadata")
    try:
        meta, created = store().put(current_tenant(), metadata_id, metadata,
                                    request.headers.get("If-Match"))
    except StoreError as exc:
        raise store_problem(exc) from None
    headers = {"ETag": f'"{meta["version"]}"',
               "Location": f"/v1/topic-metadata/{metadata_id}@{meta['version']}"}
    return _json(meta, 201 if created else 200, headers)


@bp.get("/<metadata_id>")
def get_topic_metadata(metadata_id: str):
    """The latest version's metadata, or ``id@version``'s; with ``?content=true`` also the
    canonical mapping itself (``topic_metadata``)."""
    from .paging import boolean

    with_content = boolean("content", False)  # the query first (400), then the id (422)
    metadata_id, version = split_ref(metadata_id)
    _check_id(metadata_id)
    try:
        if with_content:
            mapping, meta = store().load(current_tenant(),
                                         f"{metadata_id}@{version}" if version else metadata_id)
            meta = dict(meta, topic_metadata=mapping)
        else:
            meta = store().meta(current_tenant(), metadata_id, version)
    except StoreError as exc:
        raise store_problem(exc) from None
    return _json(meta, headers={"ETag": f'"{meta["version"]}"'})


@bp.get("")
def list_topic_metadata():
    offset, limit = page()
    items, total = store().list(current_tenant(), offset, limit)
    return _json({"items": items, "total": total, "offset": offset, "limit": limit,
                  "next": next_page("/v1/topic-metadata", {}, offset, limit, total)})


@bp.delete("/<metadata_id>")
def delete_topic_metadata(metadata_id: str):
    _check_id(metadata_id)
    try:
        store().delete(current_tenant(), metadata_id)
    except StoreError as exc:
        raise store_problem(exc) from None
    return Response(status=204)


def resolve(req: dict, options: dict) -> None:
    """An evaluation's or comparison's topic metadata, one way in: ``topic_metadata_id``
    (the caller's stored metadata, ``id`` or ``id@version``) read from the store and put in
    ``options["topic_metadata"]`` as its canonical mapping, ``req["topic_metadata_version"]``
    naming it (``id@version``); 422 naming ``topic_metadata_id`` if there is none such, and
    when ``options.topic_metadata`` is given too. Inline metadata is read (422 naming
    ``options.topic_metadata``). A queued job carries
    the mapping inline, pinned to the version current at submission."""
    ref = req.pop("topic_metadata_id", None)
    req.setdefault("topic_metadata_version", None)
    inline = options.get("topic_metadata")
    if ref is None:
        if inline is not None:
            read_metadata(inline, "options.topic_metadata")
        return
    if inline is not None:
        raise Problem(422, "Invalid request", "give options.topic_metadata or "
                      "topic_metadata_id, not both", kind="invalid-request",
                      errors={"topic_metadata_id": ["conflicts with options.topic_metadata: "
                                                    "give one of them"]})
    try:
        mapping, meta = store().load(current_tenant(), ref)
    except StoreError as exc:
        raise Problem(422, "Unknown topic metadata", str(exc),
                      kind="unknown-topic-metadata",
                      errors={"topic_metadata_id": [str(exc)]}) from None
    options["topic_metadata"] = mapping
    req["topic_metadata_version"] = f"{meta['id']}@{meta['version']}"
