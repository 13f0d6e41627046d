"""RQ entry points, enqueued by dotted path (``backend.contract``): each reads its spec off
the queue (``backend.contract``: a kind or version this worker cannot read fails the job with
a problem, never a misreading), takes the store from the job's Redis connection (the cache
of stored qrels; the results database keeps them: ``backend.results_access.qrels_store``)
and hands both to ``backend.tasks``, where the work is. Nothing else lives here."""

from __future__ import annotations

import logging
from typing import Any

from backend.contract import (
    BatchEvaluationJob,
    CombineJob,
    ComparisonJob,
    EvaluationJob,
    PoolJob,
    ShardJob,
    SpecError,
)
from backend.results_access import qrels_store
from backend.tasks import (
    execute,
    finished_evaluation,
    run_batch,
    run_combine,
    run_comparison,
    run_pool,
    run_shard,
)


def _unreadable(exc: SpecError) -> dict:
    return {"problem": {"status": 422, "title": "Unreadable job", "detail": str(exc)}}


log = logging.getLogger("cranfield.worker")


def _save_meta(job) -> None:
    """The job's meta (its progress) written to Redis, if Redis answers: a progress note is
    not worth the work it describes, so a Redis blip (the note raised before the result was
    recorded, and the job's evaluation was lost with it) is logged and the work goes on."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    try:
        job.save_meta()
    except (RedisConnectionError, RedisTimeoutError) as exc:
        log.warning("progress not reported: Redis unreachable", extra={
            "event": "progress_not_saved", "job_id": job.id, "error": type(exc).__name__})


def _reporter(job):
    """``progress(**fields)`` for ``backend.tasks``: the fields join the job's meta
    ("progress"), where the API reads them (``RedisBackend.job``)."""
    def report(**fields) -> None:
        job.meta.setdefault("progress", {}).update(fields)
        _save_meta(job)

    return report


def evaluate_job(wire: dict[str, Any]) -> dict:
    """One whole evaluation (``worker.jobs.evaluate_job``)."""
    from rq import get_current_job

    try:
        spec = EvaluationJob.from_wire(wire)
    except SpecError as exc:
        return _unreadable(exc)
    job = get_current_job()
    report = _reporter(job)
    report(stage="reading")
    return execute(qrels_store(job.connection), spec, progress=report)


def evaluate_shard_job(wire: dict[str, Any]) -> dict:
    """One shard of a large run (``worker.jobs.evaluate_shard_job``); the number of topics it
    holds goes to the job's meta as soon as it is read (the API's progress)."""
    from rq import get_current_job

    try:
        spec = ShardJob.from_wire(wire)
    except SpecError as exc:
        return _unreadable(exc)
    job = get_current_job()

    def report(topics: int) -> None:
        job.meta["topics"] = topics
        _save_meta(job)

    return run_shard(qrels_store(job.connection), spec, on_topics=report)


def combine_shards_job(wire: dict[str, Any]) -> dict:
    """Run once every shard has finished (``worker.jobs.combine_shards_job``): fetches the
    shards' results from RQ and merges them."""
    from rq import get_current_job
    from rq.job import Job

    try:
        spec = CombineJob.from_wire(wire)
    except SpecError as exc:
        return _unreadable(exc)
    job = get_current_job()
    _reporter(job)(stage="combining")
    done = Job.fetch_many(list(spec.shard_ids), connection=job.connection)
    shards = [j.return_value() if j is not None else None for j in done]
    if any(r is None for r in shards):
        return {"problem": {"status": 500, "title": "Shard result missing",
                            "detail": "a shard's result expired before the combine step"}}
    return run_combine(qrels_store(job.connection), spec, shards)


def compare_job(wire: dict[str, Any]) -> dict:
    """A queued comparison (``worker.jobs.compare_job``); runs named by evaluation job id are
    read from RQ, for the spec's tenant only."""
    from rq import get_current_job

    try:
        spec = ComparisonJob.from_wire(wire)
    except SpecError as exc:
        return _unreadable(exc)
    job = get_current_job()
    connection = job.connection
    return run_comparison(qrels_store(connection), spec,
                          lambda job_id: finished_evaluation(connection, job_id, spec.tenant),
                          progress=_reporter(job))


def pool_job(wire: dict[str, Any]) -> dict:
    """A queued pool (``worker.jobs.pool_job``): its runs from their blobs, held to the work
    budget the queue stamped on it."""
    from rq import get_current_job

    try:
        spec = PoolJob.from_wire(wire)
    except SpecError as exc:
        return _unreadable(exc)
    job = get_current_job()
    return run_pool(qrels_store(job.connection), spec, progress=_reporter(job))


def evaluate_batch_job(wire: dict[str, Any]) -> dict:
    """A queued batch (``worker.jobs.evaluate_batch_job``, issue #30): several runs, each
    from its own blob, against one qrels read once; its progress the runs read, then
    evaluated."""
    from rq import get_current_job

    try:
        spec = BatchEvaluationJob.from_wire(wire)
    except SpecError as exc:
        return _unreadable(exc)
    job = get_current_job()
    return run_batch(qrels_store(job.connection), spec, progress=_reporter(job))


def rescore_job(wire: dict[str, Any]) -> dict:
    """One kept run re-scored under stored qrels (``worker.jobs.rescore_job``, issue #31):
    ``wire`` holds references only (tenant, re-score id, result id, qrels ``id@version``);
    the work and its record are ``backend.rescoring.rescore_one``'s."""
    from rq import get_current_job

    from backend.rescoring import rescore_one
    from backend.results_access import result_store

    if not isinstance(wire, dict) or not {"tenant", "rescore_id", "position", "result_id",
                                          "qrels_ref", "job_id"} <= set(wire):
        return {"problem": {"status": 422, "title": "Unreadable job",
                            "detail": "a re-score job's spec lacks its references"}}
    job = get_current_job()
    _reporter(job)(stage="rescoring")
    return rescore_one(qrels_store(job.connection), result_store(), wire, job.connection)


def rescore_combine_job(wire: dict[str, Any]) -> dict:
    """A sharded re-score's last step (``worker.jobs.rescore_combine_job``), run once its
    shards have finished: their results fetched from RQ, merged and recorded by
    ``backend.rescoring.rescore_combine``."""
    from rq import get_current_job
    from rq.job import Job

    from backend.rescoring import rescore_combine
    from backend.results_access import result_store

    job = get_current_job()
    _reporter(job)(stage="combining")
    done = Job.fetch_many(list(wire["shard_ids"]), connection=job.connection)
    shards = [j.return_value() if j is not None else None for j in done]
    return rescore_combine(qrels_store(job.connection), result_store(), wire, shards)
