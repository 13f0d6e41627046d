"""Evaluations against trec_eval's other judgment files (issue #28): ``options.qrels_format``
``qrels_jg`` (judgment groups), ``prefs`` or ``qrels_prefs`` (preferences), read as TREC text
of that format or its JSON shape by the engine's one reader of it
(:mod:`cranfield.inputs.judgment_files`), or stored qrels of that kind (``qrels_id``: the kind is
the stored version's). The answer is the evaluation document of
:mod:`cranfield.reports.jg_document`, or trec_eval's text
(:func:`cranfield.reports.jg_text.format_jg`: what ``cranfield eval -R <format>`` prints)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import orjson
from flask import Response, current_app

import cranfield
from cranfield import CranfieldError
from cranfield.inputs import table_bytes
from cranfield.inputs.json_body import Columns
from cranfield.measures.budget import BudgetError, evaluation_budget
from cranfield.reports.jg_document import REL_FORMATS, jg_document

from .auth import current_tenant
from .enqueue import check_measure_parameters, over_budget
from .inputs import (
    digest,
    engine_problem,
    measure_problem,
    read_input,
    settle_stored_gains,
    stored_qrels,
)
from .limits import check_run, check_topics
from .problems import Problem


def _invalid(field: str, message: str, status: int = 422) -> Problem:
    return Problem(status, "Invalid request", message, kind="invalid-request",
                   errors={field: [message]})


def resolve_format(req: dict) -> str:
    """The request's qrels format: ``options.qrels_format`` (default ``qrels``), or with
    ``qrels_id`` the stored version's kind (an explicit other format: 422 naming
    ``options.qrels_format``). A judgment-group or preference format is left in
    ``req["options"]`` (a queued job carries it); plain qrels leave the options as before."""
    from backend.store import StoreError, split_ref

    options = req["options"]
    asked = options.get("qrels_format")
    fmt = asked or "qrels"
    if req.get("qrels_id"):
        qrels_id, version = split_ref(req["qrels_id"])
        store = current_app.extensions["cranfield"].store.scoped(current_tenant())
        try:
            meta = store.meta(qrels_id, version)
            kind = meta.get("qrels_format", "qrels")
        except StoreError as exc:
            raise Problem(422, "Unknown qrels", str(exc), kind="unknown-qrels",
                          errors={"qrels_id": [str(exc)]}) from None
        if asked is not None and asked != kind:
            raise _invalid("options.qrels_format", f"the stored qrels {req['qrels_id']!r} "
                           f"are of qrels_format {kind}, not {asked} (leave it out: a "
                           "stored version's kind is its format)")
        fmt = kind
        settle_stored_gains(req, meta)  # (real gains: cranfield's profile, unless named)
    if fmt == "qrels":
        options.pop("qrels_format", None)
    else:
        options["qrels_format"] = fmt
    return fmt


def check_rel_request(req: dict, accept: str) -> None:
    """What an evaluation against judgment groups or preferences cannot give, refused
    before any work: per-topic details, curves and recording (they read an ordinary
    ranking against ad hoc qrels), CSV and HTML answers (406), an Arrow or Parquet qrels
    file (these formats are TREC text or their JSON shape)."""
    fmt = req["options"]["qrels_format"]
    if accept in ("text/csv", "text/html"):
        raise Problem(406, "Not Acceptable", f"an evaluation with qrels_format {fmt} is "
                      "answered as application/json or text/plain (trec_eval's text)",
                      kind="not-acceptable")
    for field, on in (("details", req["details"]), ("curves", req["curves"]),
                      ("record", req.get("record") is not None)):
        if on:
            raise _invalid(field, f"not with qrels_format {fmt}: {field} reads an ad hoc "
                           "ranking against ordinary qrels")
    qrels = req.get("qrels")
    if isinstance(qrels, bytes | memoryview) and table_bytes.sniff(qrels) is not None:
        raise _invalid("qrels", f"qrels_format {fmt} is read from TREC text or its JSON "
                       "shape, not an Arrow or Parquet file")
    check_rel_measures(req)


def check_rel_measures(req: dict) -> None:
    """The options and measures refused as the library refuses them (422 naming
    ``options.<name>`` or ``measures[i]``), before anything is read or queued: the
    library's own evaluation of no judgments against no run, which checks its options and
    names first and then has nothing to do. A format's measures are at most twenty
    instances: within any MAX_MEASURE_INSTANCES."""
    import numpy as np

    from cranfield.inputs.judgment_files import JudgmentGroups, Preferences
    from cranfield.inputs.run_qrels import Run

    check_measure_parameters(req["measures"])  # the names' size, before they are split
    fmt = req["options"]["qrels_format"]
    nothing = JudgmentGroups() if fmt == "qrels_jg" else Preferences()
    empty = Run([], np.zeros(0, np.int32), np.zeros(0, dtype=object), np.zeros(0), "", "run")
    try:
        cranfield.evaluate(nothing, empty, req["measures"], **req["options"])
    except cranfield.MeasureError as exc:
        raise measure_problem(exc, req["measures"]) from None
    except CranfieldError as exc:
        if str(getattr(exc, "field", "") or "").startswith("options."):
            raise engine_problem(exc, req["measures"]) from None


def read_rel_qrels(value, fmt: str, label: str = "qrels"):
    """(judgment groups or preferences as read, their SHA-256) of inline qrels of format
    ``fmt``: TREC text (hashed as sent, as text qrels are) or the JSON shape (hashed as the
    canonical text a stored version of that kind keeps)."""
    from backend.store import canonical_kind_text, read_kind
    from cranfield.inputs.judgment_files import read_prefs, read_qrels_jg

    if isinstance(value, Columns):  # a large flat mapping read by the fast JSON path
        value = orjson.loads(bytes(value.raw))
    if isinstance(value, Mapping):
        read = (read_qrels_jg(value, name=label) if fmt == "qrels_jg" else
                read_prefs(value, name=label, qrels=fmt == "qrels_prefs"))
        return read, hashlib.sha256(canonical_kind_text(read, fmt)).hexdigest()
    data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
    return read_kind(data, fmt, label), hashlib.sha256(data).hexdigest()


def evaluate_rel(req: dict, accept: str) -> Response:
    """Evaluate synchronously: the run and the judgments read and held to MAX_TOPICS and
    MAX_DOCS_PER_TOPIC, the evaluation to MAX_EVALUATION_VALUES (values, and for
    preferences judged document pairs) before work; the document or trec_eval's text."""
    from cranfield.reports.jg_text import format_jg

    cfg = current_app.config
    options = req["options"]
    fmt = options["qrels_format"]
    stored = None
    try:
        run, run_source = read_input(req.pop("run"), "run")
        if req.get("qrels_id"):
            judgments, stored = stored_qrels(req["qrels_id"], kinds=(fmt,))
            qrels_digest = stored["sha256"]
        else:
            judgments, qrels_digest = read_rel_qrels(req.pop("qrels"), fmt)
        check_run(run, "run", cfg)
        check_topics(judgments.topics, "qrels", cfg)  # as an ordinary evaluation names it
        with evaluation_budget(cfg["MAX_MEASURE_INSTANCES"], cfg["MAX_EVALUATION_VALUES"]):
            ev = cranfield.evaluate(judgments, run, req["measures"], **options)
    except BudgetError as exc:
        raise over_budget(exc, cfg["MAX_QUEUED_EVALUATION_VALUES"],
                          "MAX_QUEUED_EVALUATION_VALUES") from None
    except CranfieldError as exc:
        raise engine_problem(exc, req["measures"]) from None
    if accept == "text/plain":
        return Response(format_jg(ev, per_topic=req["per_topic"]), mimetype="text/plain")
    version = f"{stored['id']}@{stored['version']}" if stored else None
    doc = jg_document(ev, options, run.topics, judgments.topics, digest(run_source),
                      qrels_digest, per_topic=req["per_topic"], qrels_version=version,
                      latency_ms=req.get("latency_ms"))
    return Response(orjson.dumps(doc), mimetype="application/json")


__all__ = ["REL_FORMATS", "resolve_format", "check_rel_request", "check_rel_measures",
           "read_rel_qrels", "evaluate_rel"]
