"""Job functions run by RQ workers (and in process in the embedded mode). They receive
references — blob keys and qrels ids — never megabytes, and return the same document the
synchronous API returns."""

from __future__ import annotations

from typing import Any

import cranfield
from cranfield.report import details_for, evaluation_document, warnings_for

from .store import NotFound, RedisStore

JOB_FUNCTION = "worker.jobs.evaluate_job"


class BadInput(Exception):
    """The job's input cannot be evaluated; retrying cannot help. ``problem`` is the
    problem+json body the API shows for the failed job."""

    def __init__(self, problem: dict):
        super().__init__(problem.get("detail", "bad input"))
        self.problem = problem


def _problem(exc: Exception) -> dict:
    if isinstance(exc, cranfield.InputError):
        return {"status": 422, "title": "Invalid input", "detail": str(exc),
                "errors": {exc.location: [exc.reason]}}
    if isinstance(exc, cranfield.MeasureError):
        return {"status": 422, "title": "Unknown measure", "detail": str(exc),
                "errors": {"measures": [str(exc)]}}
    return {"status": 422, "title": "Cannot evaluate", "detail": str(exc),
            "errors": {"run": [str(exc)]}}


def run_job(store, spec: dict[str, Any]) -> dict:
    """Evaluate the job described by ``spec`` against ``store`` and build the document."""
    try:
        run_bytes = store.get_blob(spec["run_key"])
        if spec.get("qrels_ref"):
            from .store import QRELS_CACHE

            qrels, meta = store.load_qrels(spec["qrels_ref"])
            decodes = QRELS_CACHE.misses  # by this worker so far (a forked horse inherits it)
            qrels_digest = meta["sha256"]
            qrels_version = f"{meta['id']}@{meta['version']}"
        else:
            raw = store.get_blob(spec["qrels_key"])
            qrels = cranfield.read_qrels(_json(raw) if spec.get("qrels_format") == "json"
                                         else raw, name="qrels")
            qrels_digest, qrels_version = spec["qrels_sha256"], None
        run = cranfield.read_run(run_bytes if spec["run_format"] == "trec" else
                                 _json(run_bytes), name="run")
        ev = cranfield.evaluate(run, qrels, spec["measures"], **spec["options"])
    except NotFound as exc:
        raise BadInput({"status": 422, "title": "Missing input", "detail": str(exc),
                        "errors": {"qrels_id": [str(exc)]}}) from None
    except cranfield.CranfieldError as exc:
        raise BadInput(_problem(exc)) from None
    details = details_for(ev, run, qrels, spec["details_depth"]) if spec["details"] else None
    doc = evaluation_document(ev, spec, spec["run_sha256"], qrels_digest,
                              warnings_for(ev, run, qrels), details)
    if qrels_version:
        doc["provenance"]["qrels_version"] = qrels_version
        doc["provenance"]["qrels_decodes_by_worker"] = decodes
    return doc


def _json(data: bytes):
    import orjson

    return orjson.loads(data)


def execute(store, spec: dict[str, Any]) -> dict:
    """Run a job to its outcome: ``{"result": document}`` or, for input that cannot be
    evaluated, ``{"problem": problem}`` at once (a retry could not help). Inputs are dropped
    only once the outcome exists, so a worker killed mid-job leaves them for the retry."""
    try:
        outcome = {"result": run_job(store, spec)}
    except BadInput as exc:
        outcome = {"problem": exc.problem}
    store.delete_blob(spec["run_key"])
    if spec.get("qrels_key"):
        store.delete_blob(spec["qrels_key"])
    return outcome


def evaluate_job(spec: dict[str, Any]) -> dict:
    """RQ entry point, enqueued by dotted path (``worker.jobs.evaluate_job``)."""
    from rq import get_current_job

    return execute(RedisStore(get_current_job().connection), spec)
