"""``POST /v1/evaluations/batch``: several runs against one qrels in one call (issue #30).

The request is shaped like a comparison's (:mod:`service.comparisons`): ``runs``, a list of
``{name?, run}`` (a mapping or TREC text), or repeated multipart ``runs`` files named by their
file names; ``qrels`` or ``qrels_id``; ``measures``, ``options``, ``per_topic`` and ``curves``
as an evaluation's. The qrels are read once and every run evaluated against them
(:func:`cranfield.evaluate_many`). The answer: ``{"evaluations": [{"name": ..., <the document
POST /v1/evaluations answers for that run alone>}, ...], "qrels": {"sha256", "version"?}}``;
``text/plain``: per run the block ``cranfield eval`` prints, after trec_eval's ``runid`` line
(the run's runid) when there are several runs, as ``cranfield eval QRELS RUN RUN...`` prints
them.

Bounds before work: at most MAX_BATCH_RUNS runs (422 naming ``runs``, before any is read);
every run and the qrels held to MAX_TOPICS and MAX_DOCS_PER_TOPIC (413 naming
``runs[i].run``, ``runs[i].run.<topic>``, ``qrels`` or ``qrels_id``); the measures to
MAX_MEASURE_INSTANCES before any input is read; once the runs are read, runs × instances ×
topics (the most topics a run is evaluated over) to MAX_EVALUATION_VALUES (422
``work-over-budget`` naming the budget and its factors).

Queued (``Prefer: respond-async``, or a body over ASYNC_THRESHOLD_BYTES), as a single
evaluation is (:mod:`service.enqueue`): once the measures are checked, the job takes one of
the tenant's slots, the qrels go by reference (stored ones pinned, inline ones under a key of
their own), each run's bytes under a key of its own (INPUT_TTL), and the job
(``backend.contract.BatchEvaluationJob``) carries only keys and names; 202 with the Job and
``Location``. Its worker (``backend.tasks.run_batch``) does what this route does, under the
queued budgets (MAX_QUEUED_EVALUATION_VALUES), and its result is this route's JSON document;
``GET /v1/jobs/{id}`` as ``text/plain`` gives this route's text (:func:`batch_text`).
"""

from __future__ import annotations

import uuid

import orjson
from flask import Blueprint, Response, current_app
from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

import cranfield
from backend.contract import BatchEvaluationJob
from backend.tasks import check_batch_values, name_the_run, name_topic_metadata
from cranfield import CranfieldError
from cranfield.measures.budget import BudgetError, evaluation_budget
from cranfield.measures.names import needs_subtopics
from cranfield.reports.result_document import evaluation_document
from cranfield.reports.trec_format import format_trec

from .comparisons import load_runs_body
from .enqueue import accepted, check_measure_instances, over_budget, submission, wants_async
from .inputs import (
    digest,
    engine_problem,
    read_input,
    serialised,
    settle_stored_gains,
    stored_qrels,
)
from .limits import check_qrels, check_run
from .negotiation import negotiate
from .problems import Problem
from .schemas import (
    EvaluationOptionsSchema,
    NameList,
    OptionsSchema,
    RunOrQrels,
    stored_ref,
    strict_bool,
)
from .timing import timed
from .topic_metadata import resolve as resolve_topic_metadata

bp = Blueprint("evaluations_batch", __name__)

_NAME = validate.Regexp(r"^[^\x00-\x1f]{1,200}$", error="must be 1-200 printable characters")


class BatchOptionsSchema(EvaluationOptionsSchema):
    """An evaluation's options, but for trec_eval's -R formats (judgment groups, preferences:
    POST /v1/evaluations reads those one run at a time)."""

    class Meta:
        unknown = RAISE
        exclude = ("qrels_format",)


class BatchRunSchema(Schema):
    class Meta:
        unknown = RAISE

    name = fields.String(load_default=None, validate=_NAME)
    run = RunOrQrels(required=True)


def _at_most_batch_runs(runs) -> None:
    most = current_app.config["MAX_BATCH_RUNS"]
    if len(runs) > most:
        raise ValidationError(f"Length must be between 1 and {most}.")


class BatchEvaluationRequestSchema(Schema):
    class Meta:
        unknown = RAISE

    runs = fields.List(fields.Nested(BatchRunSchema), required=True,
                       validate=[validate.Length(min=1), _at_most_batch_runs])
    qrels = RunOrQrels(load_default=None, allow_none=False)
    qrels_id = stored_ref("qrels")
    topic_metadata_id = stored_ref("topic metadata")
    measures = NameList(max_names=200, load_default=None)
    options = fields.Nested(BatchOptionsSchema, load_default=lambda: BatchOptionsSchema()
                            .load({}))
    # None: not given; true, or false for trec_eval's text (as POST /v1/evaluations)
    per_topic = strict_bool(load_default=None, allow_none=False)
    curves = strict_bool(load_default=False)

    @validates_schema
    def _one_qrels(self, data, **kwargs):
        if (data.get("qrels") is None) == (data.get("qrels_id") is None):
            raise ValidationError("give exactly one of qrels and qrels_id", "qrels")

    @validates_schema
    def _names(self, data, **kwargs):
        names = batch_names(data.get("runs") or [])
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValidationError({"runs": {i: {"name": [f"{name!r} names two runs"]}}})


REQUEST_SCHEMA = BatchEvaluationRequestSchema()

# the form fields that go into options (the others are the request's own)
_FORM_OPTIONS = (*OptionsSchema().fields, "zscores", "topic_metadata", "gains")


def batch_names(runs: list[dict]) -> list[str]:
    """The runs' names: each entry's ``name``, else ``run1``, ``run2``... by its place."""
    return [r.get("name") or f"run{i + 1}" for i, r in enumerate(runs)]


def _read_qrels(req: dict, cfg) -> tuple:
    """(qrels, their SHA-256, ``id@version`` of stored ones or None), within MAX_TOPICS."""
    if req.get("qrels_id"):
        qrels, meta = stored_qrels(req["qrels_id"])
        check_qrels(qrels, "qrels_id", cfg)
        return qrels, meta["sha256"], f"{meta['id']}@{meta['version']}"
    try:
        qrels, source = read_input(req.pop("qrels"), "qrels",
                                   needs_subtopics(req["measures"], req["options"]["profile"]),
                                   gains=req["options"].get("gains") or "integer")
    except CranfieldError as exc:
        raise engine_problem(exc, req["measures"]) from None
    check_qrels(qrels, "qrels", cfg)
    return qrels, digest(source), None


def _read_runs(req: dict, cfg) -> tuple[list, list[str]]:
    """The runs, read in order, each within MAX_TOPICS and MAX_DOCS_PER_TOPIC (413 naming
    ``runs[i].run``), and their SHA-256 digests; an input error names ``runs[i].run``."""
    runs, digests = [], []
    for i, entry in enumerate(req["runs"]):
        label = f"runs[{i}].run"
        try:
            run, source = read_input(entry.pop("run"), "run", label=label)
        except CranfieldError as exc:
            raise engine_problem(exc, req["measures"]) from None
        check_run(run, label, cfg)
        if run.runid == label:  # a mapping or table without runids: named as POST
            run.runid = "cranfield"  # /v1/evaluations names its run (read as "run")
        runs.append(run)
        digests.append(digest(source))
    return runs, digests


def _check_values(req: dict, runs: list, qrels, cfg) -> None:
    """422 naming MAX_EVALUATION_VALUES and its factors when runs × measure instances × the
    most topics a run is evaluated over exceed it (``backend.tasks.check_batch_values``, a
    queued batch's check too): before any run is evaluated."""
    try:
        check_batch_values(runs, qrels, req["measures"], req["options"],
                           cfg["MAX_EVALUATION_VALUES"], "MAX_EVALUATION_VALUES")
    except BudgetError as exc:
        raise over_budget(exc, cfg["MAX_QUEUED_EVALUATION_VALUES"],
                          "MAX_QUEUED_EVALUATION_VALUES") from None


def _evaluate(req: dict, runs: list, qrels, cfg) -> list:
    """Every run's Evaluation, in order: the qrels read and indexed once. An engine error
    names the run (``runs[i]``) it is about."""
    keyed = {f"runs[{i}]": run for i, run in enumerate(runs)}
    try:
        with evaluation_budget(cfg["MAX_MEASURE_INSTANCES"], cfg["MAX_EVALUATION_VALUES"],
                               max_segments=cfg["MAX_SEGMENTS"]):
            evs = cranfield.evaluate_many(qrels, keyed, req["measures"], **req["options"])
    except BudgetError as exc:
        raise over_budget(exc, cfg["MAX_QUEUED_EVALUATION_VALUES"],
                          "MAX_QUEUED_EVALUATION_VALUES") from None
    except CranfieldError as exc:
        raise _run_problem(exc, req["measures"]) from None
    return [evs[key] for key in keyed]


def _run_problem(exc: CranfieldError, measures) -> Problem:
    """An engine error as its 4xx, naming the run it is about (``exc.run``: ``runs[i]``;
    ``backend.tasks.name_the_run``, as a queued batch's failure names it): an error POST
    /v1/evaluations gives under ``run`` is under ``runs[i].run``, and the detail says which
    run it is."""
    problem = engine_problem(exc, measures)
    problem.errors, problem.detail = name_the_run(exc, problem.errors, problem.detail)
    return problem


@bp.post("/v1/evaluations/batch")
def create_batch():
    """Evaluate several runs against one qrels: per run, the document POST /v1/evaluations
    answers for it alone."""
    fmt = negotiate(["application/json", "text/plain"],
                    "application/json or text/plain (per run, trec_eval's text)")
    cfg = current_app.config
    req = load_runs_body(REQUEST_SCHEMA, _FORM_OPTIONS, cfg["MAX_BATCH_RUNS"])
    if req["per_topic"] is None:  # kept by a queued batch: its text is this answer's
        req["per_topic"] = fmt != "text/plain"
    resolve_topic_metadata(req, req["options"])  # topic_metadata_id: the stored mapping
    settle_stored_gains(req)  # stored real gains: cranfield's profile, unless one is named
    check_measure_instances(req)
    names = batch_names(req["runs"])
    if wants_async():
        with timed("enqueue"):
            return _enqueue_batch(req, names)
    with timed("evaluate"):
        qrels, qrels_digest, version = _read_qrels(req, cfg)
        runs, digests = _read_runs(req, cfg)
        _check_values(req, runs, qrels, cfg)
        evs = _evaluate(req, runs, qrels, cfg)
    del runs
    with timed("render"):
        if fmt == "text/plain":
            return Response(batch_text(evs, req["per_topic"]), mimetype="text/plain")
        docs = [{"name": name, **name_topic_metadata(evaluation_document(
            ev, req, run_digest, qrels_digest, None, version),
            req.get("topic_metadata_version"))}
            for name, ev, run_digest in zip(names, evs, digests, strict=True)]
        qrels_doc = {"sha256": qrels_digest, **({"version": version} if version else {})}
        return Response(orjson.dumps({"evaluations": docs, "qrels": qrels_doc},
                                     option=orjson.OPT_SERIALIZE_NUMPY),
                        mimetype="application/json")


def _enqueue_batch(req: dict, names: list[str]) -> Response:
    """Queue the batch: a job slot (429 at the tenant's MAX_QUEUED_JOBS), the qrels by
    reference, each run's bytes stored under its own key for INPUT_TTL (an Arrow or Parquet
    run's metadata checked first, naming ``runs[i].run``), and a job carrying only the keys,
    the names and the settings; 202. A run refused while they are stored leaves nothing
    stored."""
    backend = current_app.extensions["cranfield"]
    ttl = current_app.config["INPUT_TTL"]
    job_id, carried = submission(req)
    runs: list[dict[str, str]] = []
    try:
        for i, (name, entry) in enumerate(zip(names, req["runs"], strict=True)):
            data, fmt = serialised(entry.pop("run"), "run", f"runs[{i}].run")
            runs.append({"name": name, "run_format": fmt, "run_key": backend.store.put_blob(
                f"run-{uuid.uuid4().hex}", data, ttl)})
            del data
        spec = BatchEvaluationJob(measures=req["measures"], options=req["options"],
                                  per_topic=req["per_topic"], curves=req["curves"], runs=runs,
                                  **carried)
        backend.submit(spec, job_id)
    except BaseException:
        qrels = carried["qrels"]
        for key in [r["run_key"] for r in runs] + [qrels.key if qrels is not None else None]:
            if key:
                backend.store.delete_blob(key)
        raise
    return accepted(job_id)


def batch_text(evs: list, per_topic: bool) -> str:
    """Per run, what ``cranfield eval`` prints for it; with more than one run, each block
    after trec_eval's ``runid`` line (the run's runid: ``cranfield`` for a mapping), unless
    ``runid`` is one of the measures, as ``cranfield eval QRELS RUN RUN...`` prints them.
    The blocks come in the request's order (the JSON answer names each run)."""
    blocks = []
    for ev in evs:
        said = any(inst.measure.name == "runid" for inst in ev.instances)
        head = "%-22s\tall\t%s\n" % ("runid", ev.runid) if len(evs) > 1 and not said else ""
        blocks.append(head + format_trec(ev, per_topic=per_topic))
    return "".join(blocks)

