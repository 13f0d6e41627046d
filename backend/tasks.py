"""The work behind every job: an evaluation, a shard of one, the combine step, a comparison.
RQ workers run it through ``worker.jobs``' entry points; the web service runs it in process
(the embedded mode, and synchronous comparisons). A job receives references — blob keys and
qrels ids — never megabytes, and returns the same document the synchronous API returns."""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import cranfield
from cranfield.errors import error_report
from cranfield.inputs import columnar
from cranfield.inputs.json_body import columns_sha256, read_json_mapping
from cranfield.measures import PROFILES
from cranfield.measures.budget import BudgetError, check_values, evaluation_budget
from cranfield.measures.names import needs_subtopics
from cranfield.reports.result_document import details_for, evaluation_document

from .contract import (
    BatchEvaluationJob,
    CombineJob,
    ComparisonJob,
    EvaluationJob,
    Job,
    PoolJob,
    ShardJob,
    bounds_for,
)
from .limits import run_problem, topics_problem
from .store import QRELS_CACHE, NotFound

log = logging.getLogger("cranfield.jobs")
T = TypeVar("T")


class BadInput(Exception):
    """The job's input cannot be evaluated; retrying cannot help. ``problem`` is the
    problem+json body the API shows for the failed job."""

    def __init__(self, problem: dict):
        super().__init__(problem.get("detail", "bad input"))
        self.problem = problem


class DatabaseUnavailable(Exception):
    """The results database stayed unreachable for the whole retry budget: the job fails
    with :attr:`problem` (503) rather than finish unrecorded."""

    def __init__(self, what: str, budget_s: float, cause: BaseException):
        self.problem = {
            "status": 503, "title": "Service Unavailable",
            "detail": (f"could not {what}: the results database was unreachable for "
                       f"{budget_s:g} s (CRANFIELD_DB_RETRY_S) ({type(cause).__name__}); "
                       "submit the job again once it is back")}
        super().__init__(self.problem["detail"])


def transient_database_error(exc: BaseException) -> bool:
    """A database error that waiting can cure: the server refused or dropped the connection,
    a pooled connection was dead, the pool or a lock timed out. Integrity, data and
    programming errors are not: retrying them would fail the same way."""
    from sqlalchemy import exc as sa

    if isinstance(exc, sa.IntegrityError | sa.DataError | sa.ProgrammingError):
        return False
    if isinstance(exc, sa.OperationalError | sa.InterfaceError | sa.DisconnectionError
                  | sa.TimeoutError):
        return True
    return isinstance(exc, sa.DBAPIError) and bool(exc.connection_invalidated)


# Backoff between attempts: 0.1 s doubling to at most 2 s (jittered, so workers retrying
# together do not reconnect in step): a 5 s outage is ridden out within ~2 s of its end.
RETRY_FIRST_S = 0.1
RETRY_CAP_S = 2.0


def with_database_retry(action: Callable[[], T], budget_s: float, what: str, *,
                        job_id: str | None = None, sleep: Callable[[float], None] = time.sleep,
                        clock: Callable[[], float] = time.monotonic) -> T:
    """``action()``, retried with exponential backoff while it fails with a
    :func:`transient_database_error`, for up to ``budget_s`` seconds; then
    :class:`DatabaseUnavailable`. Other errors propagate at once. ``action`` must be safe to
    repeat (what a job records is recorded once by its job id: see
    :meth:`backend.results.ResultStore.record`). Each retry is logged (``db_retry``)."""
    deadline = clock() + budget_s
    pause, attempt = RETRY_FIRST_S, 0
    while True:
        attempt += 1
        try:
            return action()
        except Exception as exc:
            if not transient_database_error(exc):
                raise
            left = deadline - clock()
            if left <= 0:
                log.error("results database unreachable: giving up", extra={
                    "event": "db_retry_exhausted", "job_id": job_id, "what": what,
                    "attempts": attempt, "error": type(exc).__name__})
                raise DatabaseUnavailable(what, budget_s, exc) from exc
            wait = min(pause * random.uniform(0.5, 1.0), left)
            log.warning("results database unreachable: retrying", extra={
                "event": "db_retry", "job_id": job_id, "what": what, "attempt": attempt,
                "retry_in_s": round(wait, 3), "error": type(exc).__name__})
            sleep(wait)
            pause = min(pause * 2, RETRY_CAP_S)


def _database_step(job: Job, action: Callable[[], T], what: str) -> T:
    """``action`` as a job's step that touches the results database: a queued job's (one
    with a job id) rides out an outage of up to CRANFIELD_DB_RETRY_S; anything else (a
    synchronous request) tries once and its error propagates (the API answers 503)."""
    if job.job_id is None:
        return action()
    from .config import db_retry_seconds

    return with_database_retry(action, db_retry_seconds(), what, job_id=job.job_id)


def _missing(exc: Exception) -> dict:
    """A job input (stored qrels, a run blob) is gone: deleted, or expired."""
    return {"status": 422, "title": "Missing input", "detail": str(exc),
            "errors": {"qrels_id": [str(exc)]}}


# what a job's inputs can fail with once read: a stored input gone, one over a limit, an
# engine error; each ends the job with a problem (:func:`_failure`)
INPUT_FAILURES = (NotFound, BadInput, cranfield.CranfieldError)


def _failure(exc: Exception) -> dict:
    """The problem a job fails with for one of :data:`INPUT_FAILURES`."""
    if isinstance(exc, NotFound):
        return _missing(exc)
    if isinstance(exc, BadInput):
        return exc.problem
    return problem_of(exc)


def problem_of(exc: cranfield.CranfieldError) -> dict:
    """A failed job's problem for an engine error: the same mapping the API's error handler
    and the CLI's exit codes use (``cranfield.errors.error_report``); a budget's, the
    problem the synchronous request gets (:func:`budget_problem`)."""
    if isinstance(exc, BudgetError):
        return budget_problem(exc)
    return error_report(exc).problem()


def budget_problem(exc: BudgetError) -> dict:
    """Work over a budget (issue #27) as one problem, the API's 422 and a queued job's
    failure alike: the budget's name, its limit and the factors of the total."""
    return {"status": 422, "title": "Over the work budget", "detail": str(exc),
            "code": "over-budget", "errors": {exc.field: [str(exc)]},
            "budget": {"name": exc.budget, "limit": exc.limit, "total": exc.total,
                       "factors": dict(exc.factors)}}


@contextmanager
def job_budget(job: Job) -> Iterator[None]:
    """The evaluations of a queued ``job`` held to the budgets the queue stamped on it
    (``Job.work_bounds``; none: unbounded, as a spec built outside the queue)."""
    bounds = job.work_bounds or {}
    with evaluation_budget(bounds.get("max_measure_instances"),
                           bounds.get("max_evaluation_values"),
                           values_name="MAX_QUEUED_EVALUATION_VALUES",
                           max_segments=bounds.get("max_segments")):
        yield


def _within_limits(job: Job, value, label: str) -> None:
    """A queued job's run or qrels held to the input limits the queue stamped on it
    (``work_bounds``' ``max_topics``, ``max_docs_per_topic``: MAX_TOPICS and
    MAX_DOCS_PER_TOPIC), as the API holds a synchronous request's: :class:`BadInput` with
    the same 413 problem (:mod:`backend.limits`), before any work is done with it."""
    bounds = job.work_bounds or {}
    if isinstance(value, cranfield.Run):
        problem = run_problem(value, label, bounds.get("max_topics"),
                              bounds.get("max_docs_per_topic"))
    else:
        problem = topics_problem(value.topics, label, bounds.get("max_topics"))
    if problem is not None:
        raise BadInput(problem)


def _load_qrels(store, job: Job, measures: list[str] | None = None):
    """(qrels, their SHA-256, ``id@version`` if stored) for a job: stored ones through the
    worker's decode cache, inline ones from their blob, with subtopics when ``measures``
    (default: the job's) need them."""
    source = job.qrels
    if source.ref:
        qrels, meta = store.scoped(job.tenant).load_qrels(source.ref)
        return qrels, meta["sha256"], f"{meta['id']}@{meta['version']}"
    raw = store.get_blob(source.key)
    kind = job.options.get("qrels_format", "qrels")
    if kind != "qrels":  # judgment groups or preferences: their reader (text or JSON shape)
        return (*_read_kind(raw, kind, source), None)
    subtopics = needs_subtopics(job.measures if measures is None else measures,
                                job.options["profile"])
    gains = job.options.get("gains") or "integer"  # real gains (issue #31): as declared
    if source.format == "json":
        qrels = read_json_mapping(raw, "qrels", gains)
        return qrels, columns_sha256(qrels), None
    if source.format in ("arrow", "parquet"):
        qrels = columnar.read_qrels_bytes(raw, "qrels", subtopics, fmt=source.format,
                                          gains=gains, **bounds_for(job.table_bounds, "qrels"))
        return qrels, columns_sha256(qrels), None
    return (cranfield.read_qrels(raw, name="qrels", diversity=subtopics, gains=gains),
            source.sha256, None)


def _read_kind(raw: bytes, kind: str, source) -> tuple:
    """(judgment groups or preferences, SHA-256) of an inline input of ``kind``, as the
    synchronous path reads it (``service.rel_formats.read_rel_qrels``): text hashed as
    sent, the JSON shape by the canonical text a stored version of the kind keeps."""
    import orjson

    from cranfield.inputs.judgment_files import read_prefs, read_qrels_jg

    from .store import canonical_kind_text, read_kind

    if source.format != "json":
        return read_kind(raw, kind), source.sha256 or hashlib.sha256(raw).hexdigest()
    value = orjson.loads(raw)
    read = (read_qrels_jg(value, name="qrels") if kind == "qrels_jg" else
            read_prefs(value, name="qrels", qrels=kind == "qrels_prefs"))
    return read, hashlib.sha256(canonical_kind_text(read, kind)).hexdigest()


def drop_inputs(store, keys) -> None:
    """Delete a finished job's input blobs (``None`` keys skipped)."""
    for key in keys:
        if key:
            store.delete_blob(key)


def _read_stored_run(raw: bytes, fmt: str, label: str, sha256: str | None = None,
                     bounds: dict | None = None):
    """(a stored run as read, its SHA-256): TREC text is hashed as sent (unless the digest is
    known), a mapping by its content, as the synchronous path does. ``bounds``: an Arrow or
    Parquet run's (:func:`backend.contract.bounds_for`: whatever path stored it, a job
    never decompresses more than the app allows)."""
    if fmt == "trec":
        return cranfield.read_run(raw, name=label), sha256 or hashlib.sha256(raw).hexdigest()
    if fmt in ("arrow", "parquet"):  # the API's reader; digested by content, as a mapping
        run = columnar.read_run_bytes(raw, label, fmt=fmt, **(bounds or {}))
        return run, columns_sha256(run)
    run = read_json_mapping(raw, "run")  # its kind, not the label: "runs[0]" read as qrels
    return run, columns_sha256(run)


def _tell(progress, **fields) -> None:
    """Report how far a job is (``progress(stage=…, topics_total=…)``: the queue shows it
    as the job's ``progress``), when someone listens."""
    if progress is not None:
        progress(**fields)


def run_job(store, job: EvaluationJob, progress=None) -> dict:
    """Evaluate ``job`` against ``store`` and build the document; ``progress`` (see
    :func:`_tell`) learns the run's topics once it is read, and when they are evaluated."""
    try:
        run_bytes = store.get_blob(job.run_key)
        qrels, qrels_digest, qrels_version = _load_qrels(store, job)
        decodes = QRELS_CACHE.misses  # by this worker so far (a forked horse inherits it)
        run, run_digest = _read_stored_run(run_bytes, job.run_format, "run", job.run_sha256,
                                           bounds_for(job.table_bounds, "run"))
        _within_limits(job, run, "run")  # the synchronous evaluation's 413s, in its order
        _within_limits(job, qrels, "qrels")
        topics = len(run.topics)
        _tell(progress, stage="evaluating", topics_total=topics)
        ev = cranfield.evaluate(qrels, run, job.measures, **job.options)
        _tell(progress, topics_done=topics)
    except NotFound as exc:
        raise BadInput(_missing(exc)) from None
    except cranfield.CranfieldError as exc:
        raise BadInput(problem_of(exc)) from None
    if job.options.get("qrels_format", "qrels") != "qrels":  # judgment groups, preferences
        from cranfield.reports.jg_document import jg_document

        return jg_document(ev, job.options, run.topics, qrels.topics, run_digest, qrels_digest,
                           per_topic=job.per_topic, qrels_version=qrels_version,
                           latency_ms=job.latency_ms)
    details = details_for(ev, run, qrels, job.details_depth) if job.details else None
    doc = evaluation_document(ev, job.document_settings(), run_digest, qrels_digest, details,
                              qrels_version)
    if qrels_version:
        doc["provenance"]["qrels_decodes_by_worker"] = decodes
    return name_topic_metadata(doc, job.topic_metadata_version)


def name_topic_metadata(doc: dict, version: str | None) -> dict:
    """``doc`` (an evaluation's or comparison's) with ``provenance.topic_metadata_version``:
    the stored topic metadata (``id@version``) its segments came from, if they came from
    stored metadata (issue #28); its digest is in ``provenance.options.topic_metadata``."""
    if version:
        doc.setdefault("provenance", {})["topic_metadata_version"] = version
    return doc


def execute(store, job: EvaluationJob, results=None, progress=None) -> dict:
    """Run a job to its outcome: ``{"result": document}`` or, for input that cannot be
    evaluated, ``{"problem": problem}`` at once (a retry could not help). A job with a
    ``record`` keeps its result in ``results`` (a :class:`backend.results.ResultStore`;
    None: this process's, :func:`backend.results_access.result_store`). Inputs are dropped
    only once the outcome exists (and is recorded), so a worker killed mid-job, or a
    database that cannot be reached, leaves them for the retry."""
    try:
        with job_budget(job):
            outcome = {"result": run_job(store, job, progress)}
    except BadInput as exc:
        outcome = {"problem": exc.problem}
    if job.record is not None and "result" in outcome:
        _tell(progress, stage="recording")
    _record_outcome(job, outcome, results, store)
    drop_inputs(store, (job.run_key, job.qrels.key))
    return outcome


def record_evaluation(results, tenant: str | None, record: dict, doc: dict,
                      per_topic: bool, job_id: str | None = None, run=None) -> dict:
    """Keep ``doc`` (built with per-topic values) as a result in ``results``, then shape it
    as the request asked: ``recorded`` added (``{"id", "system", "label"}``, and
    ``run_sha256`` when its run was kept), the per-topic values (and per-topic curves)
    removed unless ``per_topic``. Returns ``doc``.
    ``job_id``: the queued job's; asked again, it finds the result recorded before.
    ``run`` (a run as read, or a function reading it): kept with the result (issue #31,
    :mod:`backend.kept_runs`) when ``record["keep_run"]`` is true, or is not given and the
    system's default is to keep runs."""
    from .kept_runs import KeptRuns

    kept = KeptRuns(results)
    if run is not None and kept.wants_run(tenant, record):
        summary = kept.record_with_run(tenant, record, doc, run, job_id=job_id)
    else:
        summary = (results.record(tenant, record, doc) if job_id is None
                   else results.record(tenant, record, doc, job_id=job_id))
    if not per_topic:
        doc.pop("per_topic", None)
        if isinstance(doc.get("curves"), dict):
            doc["curves"].pop("per_topic", None)
    doc["recorded"] = {k: summary[k] for k in ("id", "system", "label")}
    if summary.get("run_sha256"):
        doc["recorded"]["run_sha256"] = summary["run_sha256"]
    return doc


def _job_run(inputs, job: EvaluationJob):
    """The job's run, read again from its input blobs (still there: they are dropped once the
    outcome is recorded) to be kept with its result: a combine job's pieces, cut at line
    boundaries, read as the one run they were cut from."""
    if isinstance(job, CombineJob):
        # one buffer, each piece appended as it is fetched and dropped: the pieces and their
        # join are never all alive at once (R31b finding 5: the run's text twice)
        text = bytearray()
        for key in job.shard_keys:
            piece = inputs.get_blob(key)
            if piece:
                text += piece
                if not piece.endswith(b"\n"):
                    text += b"\n"
            del piece
        return cranfield.read_run(text, name="run")
    return _read_stored_run(inputs.get_blob(job.run_key), job.run_format, "run",
                            job.run_sha256, bounds_for(job.table_bounds, "run"))[0]


def _record_outcome(job: EvaluationJob, outcome: dict, results, inputs=None) -> None:
    """Record a finished job's result if it asks to be. A queued job rides out a database
    outage of up to CRANFIELD_DB_RETRY_S and records once (by its job id); still down
    after that, its outcome becomes a 503 problem ("could not record the result"), never
    a result left unrecorded. Another error propagates: the job fails and is retried, its
    inputs kept."""
    if job.record is None or "result" not in outcome:
        return

    def record() -> dict:
        store = results
        if store is None:  # opened (and migrated) on first use: inside the retry too
            from .results_access import result_store

            store = result_store()
        return record_evaluation(store, job.tenant, job.record, outcome["result"],
                                 job.per_topic, job.job_id,
                                 run=None if inputs is None else lambda: _job_run(inputs, job))

    try:
        _database_step(job, record, "record the result")
    except ValueError as exc:  # a record the API would not have let through
        outcome.clear()
        outcome["problem"] = _field_problem("record", str(exc))
    except DatabaseUnavailable as exc:
        outcome.clear()
        outcome["problem"] = exc.problem


# --------------------------------------------------------------------------------------------
# Sharded jobs: a large run is cut at topic boundaries, each piece evaluated by its own job on
# any worker, and a combine job (depending on them all) merges and re-aggregates.
# --------------------------------------------------------------------------------------------


def run_shard(store, job: ShardJob, on_topics=None) -> dict:
    """Evaluate one piece of a run against the qrels of its topics; ``on_topics(n)`` is told
    how many topics the piece holds as soon as it is read (for progress)."""
    try:
        run = cranfield.read_run(store.get_blob(job.run_key), name="run")
        if on_topics is not None:
            on_topics(len(run.topics))
        # a topic's documents are in one piece (the cut is at topic boundaries): held to
        # MAX_DOCS_PER_TOPIC here; the run's topics, all pieces', in the combine step
        bounds = job.work_bounds or {}
        problem = run_problem(run, "run", None, bounds.get("max_docs_per_topic"))
        if problem is not None:
            return {"problem": problem}
        qrels, _, _ = _load_qrels(store, job)
        with job_budget(job):
            ev = cranfield.evaluate(qrels.subset(run.topics), run, job.measures,
                                    require_overlap=False, **job.options)
    except NotFound as exc:
        return {"problem": _missing(exc)}
    except cranfield.CranfieldError as exc:
        problem = problem_of(exc)
        if isinstance(exc, cranfield.InputError) and exc.line is not None:
            problem["detail"] += f" (line {exc.line} of shard {job.shard + 1})"
        return {"problem": problem}
    details = details_for(ev, run, qrels, job.details_depth) if job.details else None
    return {"evaluation": ev, "run_topics": list(run.topics), "runid": run.runid,
            "details": details}


def run_combine(store, job: CombineJob, shards: list[dict], results=None) -> dict:
    """Merge shard outcomes into the document the unsharded job would have produced, record
    it if the job asks to be (see :func:`execute`), then drop the job's inputs (result or
    problem alike; a crash leaves them for the retry)."""
    outcome = combine_shards(store, job, shards)
    _record_outcome(job, outcome, results, store)
    drop_inputs(store, (*job.shard_keys, job.qrels.key))
    return outcome


def combine_shards(store, job: CombineJob, shards: list[dict]) -> dict:
    from cranfield.shards import combine, evaluate_missing_topics

    for outcome in shards:
        if "problem" in outcome:
            return {"problem": outcome["problem"]}
    try:
        qrels, qrels_digest, qrels_version = _load_qrels(store, job)
        if getattr(qrels, "gains", None) == "real" and \
                not PROFILES[job.options["profile"]].reads_real_gains:
            # a trec_eval profile reads grades as trec_eval does, all of them (issue #31):
            # each shard read only its run's topics, so a grade that is not an integer in a
            # topic the run lacks is refused here, as the unsharded evaluation refuses it
            qrels = qrels.with_integer_grades()
        topics = [t for o in shards for t in o["run_topics"]]
        problem = topics_problem(set(topics), "run", (job.work_bounds or {}).get("max_topics"))
        if problem is not None:  # the whole run's topics, as the synchronous 413 counts them
            return {"problem": problem}
        _within_limits(job, qrels, "qrels")
        if len(set(topics)) != len(topics):  # a topic's lines were not together: no shards
            whole = b"".join(store.get_blob(k) for k in job.shard_keys)
            run = cranfield.read_run(whole, name="run")
            _within_limits(job, run, "run")
            with job_budget(job):
                ev = cranfield.evaluate(qrels, run, job.measures, **job.options)
            details = details_for(ev, run, qrels, job.details_depth) if job.details else None
        else:
            parts = [o["evaluation"] for o in shards if len(o["evaluation"].topic_order)]
            covered = set(topics)
            missing = [t for t in qrels.topics if t not in covered]
            # each shard was held to the budget on its own topics: the whole, here, before
            # the shards' values are joined
            if parts:
                judged = len(qrels.topics) if job.options["complete_topics"] else \
                    len(covered.intersection(qrels.topics))
                with job_budget(job):
                    check_values(len(parts[0].instances), judged)
            if job.options["complete_topics"] and missing:
                parts.append(evaluate_missing_topics(qrels, missing, job.measures,
                                                     **job.options))
            if not parts or not any(p.ranked.in_run.any() for p in parts):
                raise cranfield.EvaluationError("no topic has both results and relevance "
                                                "judgments", code="no-overlap")
            ev = combine(parts, qrels, sorted(covered), shards[-1]["runid"])
            details = ({t: d for o in shards for t, d in (o["details"] or {}).items()}
                       if job.details else None)
    except INPUT_FAILURES as exc:
        return {"problem": _failure(exc)}
    doc = evaluation_document(ev, job.document_settings(), job.run_sha256, qrels_digest,
                              details, qrels_version)
    doc["provenance"]["shards"] = len(shards)
    return {"result": name_topic_metadata(doc, job.topic_metadata_version)}


# --------------------------------------------------------------------------------------------
# Comparisons: several runs (inline, or finished evaluations by job id) against one qrels.
# --------------------------------------------------------------------------------------------

def compared_measures(job: ComparisonJob) -> list[str]:
    """The measures a comparison evaluates: those asked for (default: compare's), plus any
    a gate checks (an unknown one is the gate's error, not the measures')."""
    from cranfield.compare.comparison import DEFAULT_MEASURES, with_gate_measures
    from cranfield.measures.names import resolve

    profile = job.options["profile"]
    for g in _gates(job.gate):
        try:
            resolve([g["measure"]], profile)
        except cranfield.MeasureError as exc:
            raise BadInput(_field_problem("gate.measure", str(exc))) from None
    try:
        return with_gate_measures(job.measures or DEFAULT_MEASURES, _gates(job.gate), profile)
    except cranfield.MeasureError as exc:  # an unknown name among the measures asked for
        raise BadInput(problem_of(exc)) from None


def _gates(gate) -> list[dict]:
    """The spec's gates (dicts of :class:`cranfield.compare.gate.Gate`'s fields) as a list."""
    return [] if gate is None else gate if isinstance(gate, list) else [gate]


def compare_inputs(entries: list[dict], qrels, qrels_digest: str | None,
                   qrels_version: str | None, job: ComparisonJob, measures: list[str]) -> dict:
    """The comparison document for ``entries`` (each ``{"name", "run": Run, "sha256"}``,
    ``{"name", "evaluation": document, "evaluation_id"}`` or, for a recorded result,
    ``{"name", "evaluation": document, "result_id", "field"?}``). Inline runs are evaluated
    against ``qrels``; finished evaluations and recorded results must have been made
    against the same qrels, and recorded results must have the compared measures.
    Raises :class:`BadInput` naming the field (``runs[1].run line 3``, ``gate.measure``,
    ``baseline.system``...); an inline run over the evaluation budget of the caller's
    context (:mod:`cranfield.measures.budget`) :class:`BudgetError` naming the run, for the caller
    to answer as an evaluation's (sync 422, a queued job's failure)."""
    from cranfield.compare.comparison import compare_evaluations
    from cranfield.reports.result_document import evaluation_from_document

    evaluations: dict[str, cranfield.Evaluation] = {}
    provenance_runs: dict[str, dict] = {}
    stored_qrels: dict[str, str] = {}
    # topic metadata (issue #28) segments the comparison, not each run's evaluation
    options = {k: v for k, v in job.options.items() if k != "topic_metadata"}
    qrels_names: dict[str, str] = {}
    for i, entry in enumerate(entries):
        name = entry["name"]
        if "evaluation" in entry:
            doc = entry["evaluation"]
            recorded = "result_id" in entry
            field = entry.get("field") or (f"runs[{i}].result_id" if recorded
                                           else f"runs[{i}].evaluation_id")
            prov = doc.get("provenance", {})
            digest = prov.get("qrels_sha256")
            if qrels_digest is not None and digest != qrels_digest:
                raise BadInput(_field_problem(field, (
                    "was evaluated against other qrels than this comparison's "
                    f"({_qrels_name(prov.get('qrels_version'), digest)}, not "
                    f"{_qrels_name(qrels_version, qrels_digest)}): their scores are not "
                    "comparable")))
            stored_qrels[name] = digest
            qrels_names[name] = _qrels_name(prov.get("qrels_version"), digest)
            try:
                evaluations[name] = evaluation_from_document(doc)
            except ValueError as exc:
                raise BadInput(_field_problem(field, str(exc))) from None
            if recorded:
                _check_recorded_measures(evaluations[name], measures, job, field)
                provenance_runs[name] = {"result_id": entry["result_id"],
                                         "sha256": prov.get("run_sha256")}
            else:
                provenance_runs[name] = {"evaluation_id": entry["evaluation_id"],
                                         "sha256": prov.get("run_sha256")}
            continue
        try:
            evaluations[name] = cranfield.evaluate(qrels, entry["run"], measures, **options)
        except BudgetError as exc:  # its own problem (the budget, its factors), run named
            raise BudgetError(f"runs[{i}] ({name!r}): {exc}", budget=exc.budget,
                              limit=exc.limit, total=exc.total, factors=exc.factors,
                              field=exc.field) from None
        except cranfield.MeasureError as exc:
            raise BadInput(problem_of(exc)) from None
        except cranfield.CranfieldError as exc:
            problem = problem_of(exc)
            if not isinstance(exc, cranfield.InputError):
                problem["errors"] = {f"runs[{i}]": [str(exc)]}
            raise BadInput(problem) from None
        provenance_runs[name] = {"sha256": entry["sha256"]}
    if len(set(stored_qrels.values())) > 1:
        against = ", ".join(f"{n!r}: {q}" for n, q in qrels_names.items())
        raise BadInput(_field_problem("runs", "the finished evaluations were made against "
                                      "different qrels: their scores are not comparable "
                                      f"({against})"))
    gates = _gates(job.gate)
    try:
        doc = compare_evaluations(evaluations, measures, gate=gates or None,
                                  topic_metadata=job.options.get("topic_metadata"),
                                  **job.compare_settings())
    except cranfield.CranfieldError as exc:
        raise BadInput(problem_of(exc)) from None
    doc["provenance"] = {"engine": "cranfield", "engine_version": cranfield.__version__,
                         "qrels_sha256": qrels_digest or next(iter(stored_qrels.values()), None),
                         "runs": provenance_runs}
    if qrels_version:
        doc["provenance"]["qrels_version"] = qrels_version
    return name_topic_metadata(doc, job.topic_metadata_version)


def record_gate_verdicts(results, tenant: str | None, doc: dict,
                         job_id: str | None = None) -> list[dict]:
    """Keep a gated comparison's verdict on each recorded result it checked as a candidate
    (``results``: a :class:`backend.results.ResultStore`), so the system's trend marks it: the
    candidate's own checks, its verdict over them (fail if one fails, else undecided if one
    is, else pass) and the recorded baseline they were against. The document's ``gate`` then
    says where: ``recorded: [{"result_id", "verdict"}]`` (left out when no candidate was a
    recorded result). A result deleted meanwhile is skipped. ``job_id``: the queued
    comparison's (one verdict per result however often it is asked)."""
    gate = doc.get("gate")
    runs = (doc.get("provenance") or {}).get("runs") or {}
    if not gate or not any("result_id" in r for r in runs.values()):
        return []
    by_candidate: dict[str, list[dict]] = {}
    for check in gate.get("checks") or []:
        by_candidate.setdefault(check["candidate"], []).append(check)
    kept = []
    for name, checks in by_candidate.items():
        result_id = (runs.get(name) or {}).get("result_id")
        if result_id is None:
            continue
        verdicts = {c["verdict"] for c in checks}
        verdict = ("fail" if "fail" in verdicts else "undecided" if "undecided" in verdicts
                   else "pass")
        against = {(runs.get(c["baseline"]) or {}).get("result_id") for c in checks}
        baseline_id = against.pop() if len(against) == 1 else None
        kept_one = (results.record_verdict(tenant, result_id, verdict, checks, baseline_id)
                    if job_id is None else
                    results.record_verdict(tenant, result_id, verdict, checks, baseline_id,
                                           job_id=job_id))
        if kept_one:
            kept.append({"result_id": result_id, "verdict": verdict})
    if kept:
        gate["recorded"] = kept
    return kept


def _qrels_name(version: str | None, digest: str | None) -> str:
    """How an error names qrels: their stored ``id@version``, else their digest."""
    if version:
        return f"qrels {version}"
    return f"qrels sha256 {digest[:12]}" if digest else "qrels of unknown digest"


def _check_recorded_measures(ev: cranfield.Evaluation, measures: list[str],
                             job: ComparisonJob, field: str) -> None:
    """BadInput naming every compared measure a recorded result has no values of."""
    from cranfield.compare.comparison_scope import measure_key_in
    from cranfield.measures.names import resolve

    missing = []
    for name in measures:
        insts = resolve([name], job.options["profile"])
        for inst in insts:
            try:
                measure_key_in(ev, inst, "")
            except (cranfield.MeasureError, KeyError):  # named as asked, unless a nickname
                missing.append(name.strip() if len(insts) == 1 else inst.key)
    if missing:
        have = ", ".join(ev.measures) or "none"
        raise BadInput(_field_problem(field, (
            f"the recorded result has no values of {', '.join(dict.fromkeys(missing))} (it "
            f"was recorded with {have}): it cannot be compared on them; compare on the "
            "measures it has (measures) or record it with them")))


def _field_problem(field: str, sentence: str) -> dict:
    return {"status": 422, "title": "Invalid input", "detail": f"{field}: {sentence}",
            "errors": {field: [sentence]}}


def run_comparison(store, job: ComparisonJob, find_evaluation, results=None,
                   progress=None) -> dict:
    """A queued comparison to its outcome (``{"result"}`` or ``{"problem"}``): runs from their
    blobs, finished evaluations through ``find_evaluation(job_id)`` (their document, or
    None), recorded results from ``results`` (a :class:`backend.results.ResultStore`; None:
    this process's, :func:`backend.results_access.result_store`), qrels from the store.
    The qrels and each inline run held to MAX_TOPICS and MAX_DOCS_PER_TOPIC as they are
    read (the synchronous comparison's 413 problem)."""
    try:
        measures = compared_measures(job)
        if job.qrels is not None and (job.qrels.ref or job.qrels.key):
            qrels, qrels_digest, qrels_version = _load_qrels(store, job, measures)
            _within_limits(job, qrels, "qrels_id" if job.qrels.ref else "qrels")
        else:
            qrels = qrels_digest = qrels_version = None
        entries = []
        for i, run in enumerate(job.runs):
            _tell(progress, stage="reading", runs_done=i, runs_total=len(job.runs))
            if "result_id" in run:
                if results is None:
                    from .results_access import result_store

                    results = _database_step(job, result_store, "open the results database")
                field = run.get("field") or f"runs[{i}].result_id"
                found = _database_step(job, lambda store=results, rid=run["result_id"]: (
                    store.get(job.tenant, rid)), "read a recorded result")
                if found is None:
                    raise BadInput(_field_problem(
                        field, f"no recorded result {run['result_id']!r} (unknown, or "
                        "deleted)"))
                entries.append({"name": run["name"], "evaluation": found["document"],
                                "result_id": run["result_id"], "field": field})
                continue
            if "evaluation_id" in run:
                doc = find_evaluation(run["evaluation_id"])
                if doc is None:
                    raise BadInput(_field_problem(
                        f"runs[{i}].evaluation_id", f"no finished evaluation "
                        f"{run['evaluation_id']!r} (unknown, unfinished, or expired)"))
                entries.append({"name": run["name"], "evaluation": doc,
                                "evaluation_id": run["evaluation_id"]})
                continue
            value, digest = _read_stored_run(store.get_blob(run["run_key"]),
                                             run["run_format"], f"runs[{i}]",
                                             bounds=bounds_for(job.table_bounds, "run"))
            _within_limits(job, value, f"runs[{i}].run")
            entries.append({"name": run["name"], "run": value, "sha256": digest})
        _tell(progress, stage="comparing", runs_done=len(job.runs), runs_total=len(job.runs))
        with job_budget(job):  # each inline run evaluated as a queued evaluation is
            doc = compare_inputs(entries, qrels, qrels_digest, qrels_version, job, measures)
        if results is not None:  # a recorded result was compared: keep a gate's verdict
            _database_step(job, lambda: record_gate_verdicts(results, job.tenant, doc,
                                                             job.job_id),
                           "record the gate's verdict")
        outcome = {"result": doc}
    except DatabaseUnavailable as exc:
        outcome = {"problem": exc.problem}
    except INPUT_FAILURES as exc:
        outcome = {"problem": _failure(exc)}
    drop_inputs(store, [run.get("run_key") for run in job.runs]
                 + [job.qrels.key if job.qrels is not None else None])
    return outcome


# --------------------------------------------------------------------------------------------
# Pools: what to judge (issue #27: a large one is queued, and held to a work budget)
# --------------------------------------------------------------------------------------------

def run_pool(store, job: PoolJob, progress=None) -> dict:
    """A queued pool to its outcome (``{"result"}``: the document ``POST /v1/pools``
    answers, or ``{"problem"}``): runs from their blobs, the judged documents from stored
    qrels; held to ``work_bounds["max_pool_work"]`` (MAX_QUEUED_POOL_WORK) once the runs are
    read and before any is ranked, failing with the problem a synchronous pool over
    MAX_POOL_WORK gets. Each run, and the stored qrels, held to MAX_TOPICS and
    MAX_DOCS_PER_TOPIC as it is read: the synchronous pool's 413 problem."""
    from cranfield.compare.pooling import pool

    try:
        judged = None
        if job.qrels is not None and job.qrels.ref:
            judged, _, _ = _load_qrels(store, job)
            _within_limits(job, judged, "qrels_id")
        runs = {}
        for i, run in enumerate(job.runs):
            _tell(progress, stage="reading", runs_done=i, runs_total=len(job.runs))
            runs[run["name"]], _ = _read_stored_run(
                store.get_blob(run["run_key"]), run["run_format"], f"runs[{i}]",
                bounds=bounds_for(job.table_bounds, "run"))
            _within_limits(job, runs[run["name"]], f"runs[{i}].run")
        _tell(progress, stage="pooling", runs_done=len(job.runs), runs_total=len(job.runs))
        bounds = job.work_bounds or {}
        outcome = {"result": pool(runs, job.depth, judged=judged,
                                  float32_scores=PROFILES[job.profile].float32_scores,
                                  max_work=bounds.get("max_pool_work"),
                                  budget_name="MAX_QUEUED_POOL_WORK")}
    except INPUT_FAILURES as exc:
        outcome = {"problem": _failure(exc)}
    drop_inputs(store, [run.get("run_key") for run in job.runs])
    return outcome


# --------------------------------------------------------------------------------------------
# Batches: several runs against one qrels read once (issue #30: a large one is queued)
# --------------------------------------------------------------------------------------------

def check_batch_values(runs: list, qrels, measures, options: dict, limit: int | None,
                       budget: str) -> None:
    """A batch's runs × measure instances × topics (the most topics a run is evaluated over;
    every judged topic with ``complete_topics``) within ``limit`` (``budget`` names it:
    MAX_EVALUATION_VALUES answered at once, MAX_QUEUED_EVALUATION_VALUES queued), checked
    once the runs are read and before any is evaluated: :class:`BudgetError` naming
    ``runs`` and the factors otherwise. None: unbounded."""
    from cranfield.measures.names import resolve

    if limit is None:
        return
    instances = len(resolve(measures, options["profile"]))
    judged = set(qrels.topics)
    topics = (len(judged) if options.get("complete_topics") else
              max(len(judged.intersection(run.topics)) for run in runs))
    total = len(runs) * instances * topics
    if total > limit:
        raise BudgetError(
            f"{len(runs):,} runs × {instances:,} measure instances × {topics:,} topics = "
            f"{total:,} values, over {budget} {limit:,}: send fewer runs per batch, ask for "
            "fewer cutoffs or measures, or evaluate fewer topics", budget=budget, limit=limit,
            total=total, factors={"runs": len(runs), "instances": instances, "topics": topics},
            field="runs")


def name_the_run(exc: cranfield.CranfieldError, errors: dict | None,
                 detail: str) -> tuple[dict | None, str]:
    """(errors, detail) of a batch's engine error, naming the run it is about (``exc.run``,
    ``runs[i]``, set by ``cranfield.evaluate_many``): what POST /v1/evaluations gives under
    ``run`` is under ``runs[i].run`` and the detail says which run it is. An input error
    names it already (its run was read under that label): unchanged, as is an error about
    no run."""
    where = getattr(exc, "run", None)
    if where is None or isinstance(exc, cranfield.InputError):
        return errors, detail
    return ({f"{where}.{key}" if key == "run" or key.startswith("run.") else key: value
             for key, value in (errors or {}).items()}, f"{where}: {detail}")


def _read_batch_run(raw: bytes, fmt: str, label: str, bounds: dict):
    """(a queued batch's run as the synchronous route reads it under ``label``,
    ``runs[i].run``; its SHA-256). A mapping is read by the fast reader; if it is refused,
    it is read again under its label, so the error names ``runs[i].run...`` as the
    synchronous route's does. A run without runids (a mapping, a table) is ``cranfield``'s,
    as POST /v1/evaluations names it."""
    from cranfield.inputs.json_body import loads

    try:
        run, digest = _read_stored_run(raw, fmt, label, bounds=bounds)
    except cranfield.InputError:
        if fmt == "json":
            cranfield.read_run(loads(raw, root=label), name=label)
        raise
    if run.runid == label:
        run.runid = "cranfield"
    return run, digest


def run_batch(store, job: BatchEvaluationJob, progress=None) -> dict:
    """A queued batch to its outcome: ``{"result"}``, the document ``POST
    /v1/evaluations/batch`` answers (``{"evaluations": [{"name", <each run's evaluation
    document>}], "qrels": {"sha256", "version"?}}``), or ``{"problem"}``, the one the
    synchronous route gives. As it does: the qrels read once and held to MAX_TOPICS, each run
    read (under ``runs[i].run``) and held to MAX_TOPICS and MAX_DOCS_PER_TOPIC in order, then
    runs × instances × topics to the queued values' budget, then every run evaluated by
    ``cranfield.evaluate_many`` within the job's budgets (a run's error naming ``runs[i]``).
    The inputs are dropped once the outcome exists."""
    from cranfield.evaluate_many import iter_evaluations

    total = len(job.runs)
    try:
        qrels, qrels_digest, qrels_version = _load_qrels(store, job)
        _within_limits(job, qrels, "qrels_id" if job.qrels.ref else "qrels")
        runs, digests = {}, []
        for i, entry in enumerate(job.runs):
            _tell(progress, stage="reading", runs_done=i, runs_total=total)
            label = f"runs[{i}].run"
            run, digest = _read_batch_run(store.get_blob(entry["run_key"]),
                                          entry["run_format"], label,
                                          bounds_for(job.table_bounds, "run"))
            _within_limits(job, run, label)
            runs[f"runs[{i}]"] = run
            digests.append(digest)
        check_batch_values(list(runs.values()), qrels, job.measures, job.options,
                           (job.work_bounds or {}).get("max_evaluation_values"),
                           "MAX_QUEUED_EVALUATION_VALUES")
        _tell(progress, stage="evaluating", runs_done=0, runs_total=total)
        evs = []
        with job_budget(job):
            for _, ev in iter_evaluations(qrels, runs, job.measures, **job.options):
                evs.append(ev)
                _tell(progress, runs_done=len(evs))
        del runs
        docs = [{"name": entry["name"], **name_topic_metadata(evaluation_document(
            ev, job.document_settings(), digest, qrels_digest, None, qrels_version),
            job.topic_metadata_version)}
            for entry, ev, digest in zip(job.runs, evs, digests, strict=True)]
        outcome = {"result": {"evaluations": docs, "qrels": {
            "sha256": qrels_digest, **({"version": qrels_version} if qrels_version else {})}}}
    except NotFound as exc:
        outcome = {"problem": _missing(exc)}
    except BadInput as exc:
        outcome = {"problem": exc.problem}
    except BudgetError as exc:  # the budget's problem, as the synchronous route's 422
        outcome = {"problem": budget_problem(exc)}
    except cranfield.CranfieldError as exc:
        problem = problem_of(exc)
        problem["errors"], problem["detail"] = name_the_run(exc, problem.get("errors"),
                                                            problem["detail"])
        outcome = {"problem": problem}
    drop_inputs(store, [entry.get("run_key") for entry in job.runs]
                 + [job.qrels.key if job.qrels is not None else None])
    return outcome


def finished_evaluation(connection, job_id: str, tenant: str | None) -> dict | None:
    """The document of ``tenant``'s finished evaluation job on RQ (None: unknown, another
    tenant's, unfinished, failed, or not an evaluation)."""
    from rq.exceptions import NoSuchJobError
    from rq.job import Job

    try:
        job = Job.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return None
    meta = job.meta or {}
    if meta.get("tenant") != tenant or meta.get("kind") != EvaluationJob.kind:
        return None
    outcome = job.return_value() if job.get_status(refresh=False) == "finished" else None
    return (outcome or {}).get("result") if isinstance(outcome, dict) else None


