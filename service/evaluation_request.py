"""Reading an API request's body: JSON (decoded by orjson, large run and qrels mappings read
straight into columns) or multipart/form-data (large uploads cut by :mod:`service.multipart`;
``run``/``qrels`` parts as TREC text, or Arrow IPC / Parquet files by their magic bytes),
validated by a schema; a 415 for another media type, a 422 naming every field that is wrong.
:func:`form_body` is an evaluation's multipart form (``run`` and ``qrels`` files, options as
plain fields, ``record`` as JSON text)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import orjson
from flask import current_app, request
from marshmallow import Schema, ValidationError

from cranfield.errors import InputError
from cranfield.inputs.json_body import decode_body
from cranfield.inputs.json_body import loads as json_loads

from . import multipart
from .paging import BOOLEAN_WORDS
from .problems import Problem
from .request_body import read_body
from .schemas import OptionsSchema
from .timing import timed

# the names of the evaluation options, which a multipart form gives as plain fields
_OPTION_NAMES = frozenset(OptionsSchema().fields) | {"qrels_format", "gains"}


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
            if body is None:  # orjson's reading, a key given twice read as TREC text would be
                body = json_loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Problem(400, "Malformed JSON", f"the body is not valid JSON: {exc}",
                      kind="malformed-json", errors={"body": [str(exc)]}) from None
    if not isinstance(body, dict):
        raise Problem(422, "Invalid request", "the body must be a JSON object",
                      kind="invalid-request", errors={"body": ["must be a JSON object"]})
    return body


# form fields whose value is JSON, validated as the JSON body's member of that name is
JSON_FIELDS = frozenset({"record", "latency_ms"})

_BOOL = BOOLEAN_WORDS  # the words every boolean written as text is read by (service.paging)


# Uploads at least this big are cut by service.multipart (werkzeug streams smaller ones).
FAST_MULTIPART_MIN_BYTES = 1 << 20


def form_parts(repeatable: frozenset[str] = frozenset()):
    """(form fields, files as bytes with their file names: :class:`multipart.Uploads`) of a
    multipart body; 422 for a part without a name, or a name outside ``repeatable`` given
    more than once (:func:`multipart.check_parts`)."""
    form, files = _form_parts()
    multipart.check_parts(form, files, repeatable)
    return form, files


def _form_parts():
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
    return multipart.Uploads((k, f.filename, f.read(), f.content_type)
                             for k, f in files.items(multi=True))


def file_parts(files: multipart.Uploads, name: str, label=None) -> list:
    """The bytes of every file part ``name``, in order: the one reader of uploaded ``run``,
    ``runs`` and ``qrels`` parts, so that a part gets the same answer (or the same refusal) on
    every route. A part is recognised by its magic bytes whatever its type (see
    :func:`service.inputs.read_input`); one whose Content-Type says Arrow IPC or Parquet and
    whose bytes are not that is 422 naming it (``label(i)``; default: ``name``)."""
    from cranfield.inputs.table_bytes import CONTENT_TYPES, sniff

    parts = files.getlist(name)
    for i, (data, content_type) in enumerate(zip(parts, files.content_types.getlist(name),
                                                 strict=True)):
        declared = CONTENT_TYPES.get(content_type or "")
        if declared is None or sniff(data) == declared:
            continue
        field = label(i) if label else name
        what = "an Arrow IPC stream or file" if declared == "arrow" else "a Parquet file"
        raise Problem(422, "Invalid request", f"{field}: the part's Content-Type is "
                      f"{content_type}, but its bytes are not {what}", kind="invalid-input",
                      errors={field: [f"not {what} (no magic bytes)"]})
    return parts


def form_body() -> dict:
    """multipart/form-data: ``run`` and ``qrels`` files (or fields), ``measures`` (repeated or
    comma-separated), options as plain fields, ``record`` and ``latency_ms`` fields whose
    values are the JSON body's members as JSON text (the schema validates them as it does
    those); every other member (``qrels_id``...) a plain field."""
    body: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    form, files = form_parts(repeatable=frozenset({"measures"}))
    for name in ("run", "qrels"):
        if name in files:  # bytes: the engine reads them without a decode
            body[name] = file_parts(files, name)[0]
        elif name in form:
            body[name] = form[name]
    measures = multipart.measure_list(form.getlist("measures"))
    if measures:
        body["measures"] = measures
    options: dict[str, Any] = {}
    for key in form:
        if key in ("run", "qrels", "measures"):
            continue
        value = form[key]
        if key == "options":  # refused alone or beside option fields: never dropped
            errors[key] = [multipart.OPTIONS_FIELD]
            continue
        if key in ("per_topic", "details", "judged_only", "complete_topics", "curves"):
            if value.lower() not in _BOOL:
                errors[key] = ["must be true or false"]
                continue
            parsed: Any = _BOOL[value.lower()]
        elif key in ("relevance_level", "depth", "collection_size", "details_depth"):
            try:
                parsed = multipart.form_number(value)  # ASCII digits only, as JSON
            except ValueError:
                errors[key] = ["must be an integer"]
                continue
        elif key in JSON_FIELDS:
            try:
                parsed = json_loads(value)  # a key given twice: refused as in a JSON body
            except orjson.JSONDecodeError as exc:
                errors[key] = [f"must be a JSON object: {exc}"]
                continue
            except InputError as exc:
                errors[f"{key}.{exc.location}"] = [exc.reason]
                continue
        else:
            parsed = value
        if key in _OPTION_NAMES or key == "topic_metadata":  # its text, as a field
            options[key] = parsed
        else:
            body[key] = parsed
    for key in files:
        if key == "options":
            errors[key] = [multipart.OPTIONS_FIELD]
        elif key in JSON_FIELDS:
            errors[key] = ["send it as a form field (its value a JSON object), not a file"]
        elif key == "topic_metadata":  # the file cranfield eval --topic-metadata reads
            options[key] = files.getlist(key)[0]
        elif key not in ("run", "qrels"):
            errors[key] = ["unknown file field (expected run, qrels and topic_metadata)"]
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
