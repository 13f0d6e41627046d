"""Queueing work: the tenant's job slots (MAX_QUEUED_JOBS), whether a request is to be queued
(``Prefer: respond-async`` or a large body), the job spec every queued job carries, an
evaluation's inputs stored and its job submitted, and the 202 that answers."""

from __future__ import annotations

import hashlib
import uuid

import orjson
from flask import Response, after_this_request, current_app, request

import cranfield
from backend.contract import EvaluationJob, QrelsInput
from cranfield.inputs.trec_source import split_trec_text
from cranfield.measures.budget import BudgetError, EvaluationBudget, check_instances

from .auth import current_tenant
from .inputs import digest_beside, measure_problem, serialised, stored_qrels
from .jobs import present
from .observability import current_request_id
from .problems import Problem


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


def over_budget(exc: BudgetError, queued_limit: int | None = None,
                queued_name: str | None = None) -> Problem:
    """422 for work over a budget (issue #27), naming the budget and its factors: the
    problem a queued job over its budget fails with (``backend.tasks.budget_problem``), and,
    when the work fits ``queued_limit``, the way out."""
    from backend.tasks import budget_problem

    problem = budget_problem(exc)
    detail = problem["detail"]
    if queued_limit is not None and exc.total <= queued_limit and exc.budget != "MAX_SEGMENTS":
        detail += (f"; or ask for it to be queued with Prefer: respond-async (queued work is "
                   f"held to {queued_name} {queued_limit:,})")
    return Problem(422, problem["title"], detail, kind="work-over-budget",
                   errors=problem["errors"], extra={"budget": problem["budget"]})


#: the most parameters one measure instance is written with (utility's 4 coefficients)
PARAMETERS_PER_INSTANCE = 4


def check_measure_parameters(names) -> None:
    """Before any name is parsed: 422 naming MAX_MEASURE_INSTANCES when ``names`` hold more
    parameters than PARAMETERS_PER_INSTANCE × the budget could need (evaluations,
    comparisons: their measures and gates' alike)."""
    limit = current_app.config["MAX_MEASURE_INSTANCES"]
    # a name's parameters cost their parsing whatever they expand to ("P.1,1,1,…" of 100 MB
    # is one instance), and no instance takes more than a few (a utility's 4), so more than
    # PARAMETERS_PER_INSTANCE × the budget is refused unparsed
    parameters = sum(n.count(",") + 1 for n in names or () if isinstance(n, str))
    if parameters > PARAMETERS_PER_INSTANCE * limit:
        raise over_budget(BudgetError(
            f"the measures' names hold {parameters:,} parameters, more than "
            f"{PARAMETERS_PER_INSTANCE} × MAX_MEASURE_INSTANCES {limit:,} could need: ask for "
            "fewer cutoffs or measures", budget="MAX_MEASURE_INSTANCES", limit=limit,
            total=parameters, factors={"parameters": parameters})) from None


def check_measure_instances(req: dict) -> None:
    """Before any input is read: the measure names resolve (422 naming ``measures``
    otherwise) and expand to at most MAX_MEASURE_INSTANCES instances (422 naming the
    budget otherwise), for a request answered here and one queued alike."""
    from cranfield.measures.names import resolve

    if req["options"].get("qrels_format", "qrels") != "qrels":  # judgment groups, prefs
        from .rel_formats import check_rel_measures

        return check_rel_measures(req)
    profile = req["options"]["profile"]
    limit = current_app.config["MAX_MEASURE_INSTANCES"]
    check_measure_parameters(req["measures"])
    try:
        instances = resolve(req["measures"], profile)
    except cranfield.MeasureError as exc:
        raise measure_problem(exc, req["measures"]) from None
    try:
        check_instances(len(instances), req["measures"], profile,
                        EvaluationBudget(max_instances=limit))
    except BudgetError as exc:
        raise over_budget(exc) from None


def enqueue_evaluation(req: dict) -> Response:
    """Store the inputs under their own keys and enqueue a job that carries only those keys."""
    backend = current_app.extensions["cranfield"]
    check_measure_instances(req)
    cfg = current_app.config
    job_id, carried = submission(req)
    run_bytes, run_format = serialised(req.pop("run"), "run", "run")
    spec = EvaluationJob(measures=req["measures"], options=req["options"],
                         per_topic=req["per_topic"], details=req["details"],
                         details_depth=req["details_depth"], latency_ms=req["latency_ms"],
                         curves=req["curves"], run_format=run_format,
                         record=req.get("record"), **carried)
    # A run cut into shards is hashed here, on a thread beside the stores of its pieces
    # (hashlib releases the GIL; SHA-NI hashes 250 MB in ~0.15 s): a worker re-reading every
    # piece from Redis to hash them cost ~0.7 s of a worker and of Redis. An unsharded run's
    # SHA-256 is its job's to compute.
    pieces = []
    if (backend.kind == "redis" and run_format == "trec"
            and req["options"].get("qrels_format", "qrels") == "qrels"  # no shards of prefs
            and len(run_bytes) >= cfg["SHARD_MIN_BYTES"] and cfg["SHARDS"] > 1):
        pieces = split_trec_text(run_bytes, cfg["SHARDS"])
    if len(pieces) > 1:
        backend.submit_sharded(spec, pieces, digest_beside(run_bytes), job_id)
    else:
        spec.run_key = backend.store.put_blob(f"run-{uuid.uuid4().hex}", run_bytes,
                                              cfg["INPUT_TTL"])
        backend.submit(spec, job_id)
    del run_bytes, pieces
    return accepted(job_id)


def submission(req: dict) -> tuple[str, dict]:
    """(the job slot reserved for this request — 429 when the tenant's jobs are at the cap —,
    the fields of ``backend.contract.Job`` every queued job carries: the caller's tenant and
    request id, and the qrels by reference: stored ones pinned to the version current at
    submission, inline ones put under a key of their own)."""
    backend = current_app.extensions["cranfield"]
    job_id = check_job_cap()
    qrels = None
    if req.get("qrels_id"):
        # an evaluation reads the stored kind it resolved (service.rel_formats)
        kind = (req.get("options") or {}).get("qrels_format", "qrels")
        _, meta = stored_qrels(req["qrels_id"], kinds=(kind,))
        qrels = QrelsInput(ref=f"{meta['id']}@{meta['version']}")
    elif req.get("qrels") is not None:
        data, fmt = serialised(req.pop("qrels"), "qrels", "qrels")
        qrels = QrelsInput(key=backend.store.put_blob(f"qrels-{uuid.uuid4().hex}", data,
                                                      current_app.config["INPUT_TTL"]),
                           sha256=hashlib.sha256(data).hexdigest() if fmt == "trec" else None,
                           format=fmt)
    return job_id, {"tenant": current_tenant(), "request_id": current_request_id(),
                    "qrels": qrels,
                    "topic_metadata_version": req.get("topic_metadata_version")}


def accepted(job_id: str) -> Response:
    """202 for a queued job: the job as it stands, ``Location`` to poll."""
    job = present(current_app.extensions["cranfield"].job(job_id)
                  or {"id": job_id, "status": "queued"})
    resp = Response(orjson.dumps(job), status=202, mimetype="application/json")
    resp.headers["Location"] = f"/v1/jobs/{job_id}"
    resp.headers["Preference-Applied"] = "respond-async"
    return resp
