"""Reading a request's runs and qrels: inline (TREC text, mappings, or uploaded Arrow IPC /
Parquet files) or stored qrels, held to MAX_TOPICS and MAX_DOCS_PER_TOPIC, with their SHA-256
digests; the engine's errors as the 4xx that names the field.

An Arrow or Parquet upload is recognised by its magic bytes (``ARROW1``, an IPC stream's
continuation marker, ``PAR1``) and bounded before anything is decompressed: rows (a run: at
most MAX_TOPICS x MAX_DOCS_PER_TOPIC) and uncompressed bytes (MAX_CONTENT_LENGTH, what the
same data as text could weigh) from its metadata, topics and documents per topic once the
topic column is coded, before the docids and scores are read."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import orjson
from flask import current_app, has_request_context, request

import cranfield
from backend import contract
from backend.store import split_ref
from cranfield import CranfieldError, read_qrels, read_run
from cranfield.inputs import columnar, table_bytes
from cranfield.inputs.json_body import Columns, columns_sha256, mapping_sha256
from cranfield.measures import resolve_profile
from cranfield.measures.names import needs_subtopics

from .auth import current_tenant
from .limits import check_qrels, check_run, check_topics
from .problems import Problem, from_engine_error
from .schemas import PROFILE_NAMED


def serialised(value, kind: str, label: str) -> tuple[bytes, str]:
    """(bytes, format) of a run or qrels (``kind``) as a queued job stores them: TREC text as
    sent ("trec", encoded once if it came as a JSON string), a mapping as JSON ("json"), an
    Arrow or Parquet upload as sent ("arrow", "parquet") once its metadata is within the
    bounds (:func:`check_table_upload`, naming ``label``), before it is stored."""
    if isinstance(value, str):
        return value.encode("utf-8"), "trec"
    if isinstance(value, bytes | memoryview):
        fmt = table_bytes.sniff(value)
        if fmt is not None:
            check_table_upload(value, kind, label, fmt)
        return value, fmt or "trec"
    if isinstance(value, Columns):
        return bytes(value.raw), "json"
    return orjson.dumps(value), "json"


def read_input(value, kind: str, subtopics: bool = False, label: str | None = None,
               gains: str = "integer") -> tuple[Any, Any]:
    """(the run or qrels as read, how to get its SHA-256): TREC text is hashed as sent; a
    mapping by its content (:func:`columns_sha256`), so that the digest does not depend on
    key order or on how the body was decoded. ``subtopics``: diversity qrels; ``label``: the
    name errors give the input (default ``kind``, e.g. ``runs[2]`` for a compared run);
    ``gains``: qrels declared to hold real gains (``options.gains``, issue #31) are read as
    such, by the engine's Python paths."""
    reader = read_run if kind == "run" else partial(read_qrels, diversity=subtopics,
                                                    gains=gains)
    label = label or kind
    if isinstance(value, Columns):
        if gains == "real" and kind == "qrels":  # (the scan read integer grades: reals too)
            return value.value.with_real_gains(), value.value
        return value.value, value.value
    if isinstance(value, Mapping):
        read = reader(value, name=label)
        return read, (value if len(read) <= 10_000 else read)
    data = value.encode("utf-8") if isinstance(value, str) else value
    fmt = table_bytes.sniff(data)
    if fmt is not None:  # an Arrow IPC or Parquet upload: digested by content, as a mapping
        read = read_table_upload(data, kind, label, subtopics, fmt, gains)
        return read, read
    return reader(data, name=label), data


class _Shape:
    """What the limit checks read of a run: its topics and each row's topic."""

    def __init__(self, topics, topic_index):
        self.topics, self.topic_index = topics, topic_index

    def __len__(self) -> int:
        return len(self.topic_index)


def table_bounds(kind: str) -> dict:
    """The metadata bounds of an Arrow or Parquet upload of ``kind`` under the app's limits:
    a run's rows (MAX_TOPICS x MAX_DOCS_PER_TOPIC; qrels' judgments per topic are not
    limited) and the uncompressed bytes (MAX_CONTENT_LENGTH): a queued job's, as the queue
    stamps them (:func:`backend.contract.table_bounds`)."""
    return contract.bounds_for(contract.table_bounds(current_app.config), kind)


def too_large(exc: CranfieldError, label: str) -> Problem:
    return Problem(413, "Request Entity Too Large", str(exc), kind="too-large",
                   errors={label: [exc.reason]})


def check_table_upload(data, kind: str, label: str, fmt: str | None = None) -> None:
    """413 naming ``label`` when an upload's metadata is over the bounds, 422 when it is not
    a readable file (for a queued job, before it is stored)."""
    try:
        table_bytes.check_table_bytes(data, kind, label, fmt=fmt, **table_bounds(kind))
    except CranfieldError as exc:
        if getattr(exc, "code", None) == "too-large":
            raise too_large(exc, label) from None
        raise from_engine_error(exc) from None


def read_table_upload(data, kind: str, label: str, subtopics: bool = False,
                      fmt: str | None = None, gains: str = "integer"):
    """An Arrow IPC or Parquet upload as a Run or Qrels: bounded by its metadata (413), the
    topic limits checked before the docids and scores are read (413), errors naming the
    part (422)."""
    cfg = current_app.config

    def check(topics, topic_index):
        shape = _Shape(topics, topic_index)
        if kind == "run":
            check_run(shape, label, cfg)
        else:
            check_topics(topics, label, cfg)

    try:
        if kind == "run":
            return columnar.read_run_bytes(data, label, check=check, fmt=fmt,
                                           **table_bounds(kind))
        return columnar.read_qrels_bytes(data, label, subtopics, check=check, fmt=fmt,
                                         gains=gains, **table_bounds(kind))
    except CranfieldError as exc:
        if getattr(exc, "code", None) == "too-large":
            raise too_large(exc, label) from None
        raise


def digest(source) -> str:
    """The SHA-256 (hex) of what :func:`read_input` gives as the way to get it: bytes as
    sent, a mapping or columns by their content."""
    if isinstance(source, bytes | memoryview):
        return hashlib.sha256(source).hexdigest()
    if isinstance(source, Mapping):
        return mapping_sha256(source)
    return columns_sha256(source)


# SHA-256 runs beside the evaluation (hashlib releases the GIL on large buffers).
_DIGESTS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cranfield-digest")


def digest_beside(source) -> Future:
    """:func:`digest` of ``source`` on a thread of its own, beside the caller's work."""
    return _DIGESTS.submit(digest, source)


def _done(value) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


def _check_limits(run: cranfield.Run, qrels: cranfield.Qrels) -> None:
    """413 naming ``run``, ``run.<topic>`` or ``qrels`` when an input is over
    MAX_TOPICS or MAX_DOCS_PER_TOPIC (the checks comparisons and pools make too)."""
    check_run(run, "run", current_app.config)
    check_qrels(qrels, "qrels", current_app.config)


def measure_problem(exc: cranfield.MeasureError, names: list[str] | None) -> Problem:
    """An unknown or malformed measure as the 4xx naming it by its index in ``names``
    (``measures[2]``), or ``measures`` when it is not one of them."""
    index = next((i for i, n in enumerate(names or []) if n.strip() == exc.name.strip()), None)
    path = f"measures[{index}]" if index is not None else "measures"
    return from_engine_error(exc, path)


def stored_qrels(ref: str, kinds: tuple[str, ...] = ("qrels",)):
    """(qrels, metadata) of the caller's tenant's stored qrels ``ref`` (``id`` or
    ``id@version``); 422 naming ``qrels_id`` when there are none such, or when they are of a
    kind (``qrels_format``: judgment groups, preferences) not among ``kinds`` (comparisons
    and pools read ad hoc qrels only)."""
    from backend.store import StoreError

    scoped = current_app.extensions["cranfield"].store.scoped(current_tenant())
    try:
        qrels_id, version = split_ref(ref)
        kind = scoped.meta(qrels_id, version).get("qrels_format", "qrels")
        if kind not in kinds:
            raise Problem(422, "Invalid request", f"stored qrels {ref!r} are {kind} "
                          f"judgments; this request reads {' or '.join(kinds)}",
                          kind="invalid-request", errors={"qrels_id": [
                              f"qrels_format {kind}: not one this request reads"]})
        return scoped.load_qrels(ref)
    except StoreError as exc:
        raise Problem(422, "Unknown qrels", str(exc), kind="unknown-qrels",
                      errors={"qrels_id": [str(exc)]}) from None


def settle_stored_gains(req: dict, meta: Mapping | None = None) -> None:
    """An evaluation of stored qrels declaring real gains (their version's ``gains``, issue
    #31) that names no profile runs under cranfield's, which reads them, as
    :func:`cranfield.evaluate` runs a Qrels declaring them: ``req["options"]["profile"]``
    settled before anything reads it (a queued job carries it). ``meta``: the version's
    metadata, when the caller has it; else looked up (an unknown id is left for the lookup
    that reads the qrels to refuse). Whether the request named a profile is its own
    (``request.environ``, set by the options schema), never an earlier request's. A
    ``qrels_id`` naming no version is pinned to the version read here (``id@version``), so
    the evaluation reads the very judgments whose gains settled its profile, not a version
    put in between."""
    from backend.store import StoreError

    options = req.get("options")
    named = has_request_context() and request.environ.get(PROFILE_NAMED, False)
    if not req.get("qrels_id") or options is None or named or \
            options.get("gains") is not None:
        return
    qrels_id, version = split_ref(req["qrels_id"])
    if meta is None:
        scoped = current_app.extensions["cranfield"].store.scoped(current_tenant())
        try:
            meta = scoped.meta(qrels_id, version)
        except StoreError:
            return
    if version is None:  # the version whose gains are read below is the one evaluated
        req["qrels_id"] = f"{qrels_id}@{meta['version']}"
    if meta.get("gains") == "real":
        options["profile"] = resolve_profile(None, "real")


def engine_problem(exc: CranfieldError, measures: list[str] | None) -> Problem:
    """An engine error as the 4xx that names its field (an unknown measure: by its index)."""
    if isinstance(exc, cranfield.MeasureError):
        return measure_problem(exc, measures)
    return from_engine_error(exc)


def read_inputs(req: dict) -> tuple[cranfield.Run, cranfield.Qrels, Future, str]:
    """The request's run and qrels, read (stored qrels looked up, ``req["qrels_version"]``
    recorded) and within the limits, with their SHA-256 digests: the run's as a future, since
    a big run's is hashed beside the evaluation. Engine errors become 4xx naming the field."""
    opts = req["options"]
    measures = req["measures"]
    stored = None
    if req.get("qrels_id"):
        qrels_stored, stored = stored_qrels(req["qrels_id"])
    req["qrels_version"] = f"{stored['id']}@{stored['version']}" if stored else None
    try:
        run, run_source = read_input(req.pop("run"), "run")
        # a big run's SHA-256 runs beside the evaluation; a small one's costs less than that
        run_digest = (digest_beside(run_source) if len(run) >= 100_000
                      else _done(digest(run_source)))
        if stored:
            qrels, qrels_digest = qrels_stored, stored["sha256"]
        else:
            qrels, qrels_source = read_input(req.pop("qrels"), "qrels",
                                             needs_subtopics(measures, opts["profile"]),
                                             gains=opts.get("gains") or "integer")
            qrels_digest = digest(qrels_source)
        _check_limits(run, qrels)
    except CranfieldError as exc:
        raise engine_problem(exc, measures) from None
    return run, qrels, run_digest, qrels_digest
