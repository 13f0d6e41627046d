"""Where stored qrels live and where jobs run: Redis + RQ workers when ``REDIS_URL`` is set,
else in this process (the embedded default). Routes see one interface."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from . import keys
from .config import work_bounds
from .contract import (
    BATCH_FUNCTION,
    COMBINE_FUNCTION,
    COMPARE_FUNCTION,
    EVALUATE_FUNCTION,
    POOL_FUNCTION,
    QUEUE,
    SHARD_FUNCTION,
    BatchEvaluationJob,
    CombineJob,
    ComparisonJob,
    EvaluationJob,
    Job,
    PoolJob,
    ShardJob,
    job_options,
    table_bounds,
)
from .store import MemoryStore, RedisStore, redis_client
from .tasks import execute, finished_evaluation, run_batch, run_comparison, run_pool
from .telemetry import metered_queue, observe_embedded_job, record_enqueued


def new_job_id() -> str:
    return uuid.uuid4().hex


# A slot reserved by a request that never submitted its job (its process died) is given
# back after this many seconds; a request that fails otherwise gives its slot back at once.
RESERVATION_TTL = 600


class MemoryBackend:
    """Jobs on one background thread, results kept ``result_ttl`` seconds."""

    kind = "embedded"
    #: the app's results store (create_app sets it): where jobs with a ``record`` keep results
    results = None

    def __init__(self, config: dict):
        self.store = MemoryStore()
        self.result_ttl = config["RESULT_TTL"]
        self.table_bounds = table_bounds(config)  # stamped on every job (_bounded)
        self.work_bounds = work_bounds(config)  # ... and these (issue #27)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cranfield-job")
        self._jobs: dict[str, dict] = {}
        self._reserved: dict[str, str | None] = {}  # job id -> tenant: slots not yet submitted
        self._lock = threading.Lock()

    def ping(self) -> None:
        return None

    def submit(self, spec: EvaluationJob | ComparisonJob, job_id: str | None = None) -> str:
        """Queue ``spec`` under ``job_id`` (the slot ``reserve_job`` gave, else a new id)."""
        job_id = job_id or new_job_id()
        spec = _bounded(spec, self.table_bounds, job_id, self.work_bounds)
        with self._lock:
            self._reserved.pop(job_id, None)
            self._jobs[job_id] = {"id": job_id, "status": "queued", "kind": spec.kind,
                                  "created_at": time.time(), "tenant": spec.tenant}
        self._pool.submit(self._run, job_id, spec)
        record_enqueued(None, spec.kind)
        return job_id

    def _run(self, job_id: str, spec: EvaluationJob | ComparisonJob) -> None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job["status"] == "canceled":
                return
            job.update(status="started", started_at=time.time(), progress={"stage": "reading"})

        def report(**fields) -> None:  # backend.tasks' progress, shown by job()
            with self._lock:
                job["progress"] = {**job.get("progress", {}), **fields}

        try:
            if isinstance(spec, PoolJob):
                outcome = run_pool(self.store, spec, progress=report)
            elif isinstance(spec, BatchEvaluationJob):
                outcome = run_batch(self.store, spec, progress=report)
            elif isinstance(spec, ComparisonJob):
                outcome = run_comparison(self.store, spec, lambda job_id: (
                    self.finished_evaluation(job_id, spec.tenant)), self.results,
                    progress=report)
            else:
                outcome = execute(self.store, spec, self.results, progress=report)
        except Exception as exc:  # a bug, reported on the job rather than lost
            outcome = {"problem": {"status": 500, "title": "Job crashed",
                                   "detail": f"{exc.__class__.__name__}: {exc}"}}
        observe_embedded_job(spec, job_id, outcome, job["started_at"])
        with self._lock:
            job.update(outcome, ended_at=time.time(),
                       status="failed" if "problem" in outcome else "finished")

    def finished_evaluation(self, job_id: str, tenant: str | None) -> dict | None:
        """The document of ``tenant``'s finished evaluation job (None if there is none)."""
        job = self.job(job_id) or {}
        if (job.get("tenant") != tenant or job.get("status") != "finished"
                or job.get("kind") != EvaluationJob.kind):
            return None
        return job.get("result")

    def queued_count(self) -> int:
        with self._lock:
            return sum(1 for j in self._jobs.values() if j["status"] == "queued")

    def active_jobs(self, tenant: str | None) -> int:
        """The tenant's jobs queued or running, and slots reserved for jobs being submitted."""
        with self._lock:
            return self._active(tenant)

    def _active(self, tenant: str | None) -> int:
        return (sum(1 for j in self._jobs.values()
                    if j.get("tenant") == tenant and j["status"] in ("queued", "started"))
                + sum(1 for t in self._reserved.values() if t == tenant))

    def reserve_job(self, tenant: str | None, cap: int) -> tuple[str | None, int]:
        """(a job id holding one of the tenant's ``cap`` slots, or None if all are taken; the
        slots taken). Counting and taking are one step: concurrent requests cannot all see
        room for one more. ``submit`` with that ``job_id`` fills the slot; a request that
        fails before that gives it back (``release_job``)."""
        with self._lock:
            active = self._active(tenant)
            if active >= cap:
                return None, active
            job_id = new_job_id()
            self._reserved[job_id] = tenant
            return job_id, active + 1

    def release_job(self, job_id: str, tenant: str | None) -> None:
        """Give back a slot ``reserve_job`` gave whose job was not submitted (else nothing)."""
        with self._lock:
            self._reserved.pop(job_id, None)

    def job(self, job_id: str) -> dict | None:
        with self._lock:
            now = time.time()
            for key in [k for k, j in self._jobs.items()
                        if j.get("ended_at", now) + self.result_ttl < now]:
                del self._jobs[key]
            job = self._jobs.get(job_id)
            if not job:
                return None
            return dict(job, progress=progress_view(job["status"], job.get("progress")))

    def cancel(self, job_id: str) -> bool:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                return False
            if job["status"] == "queued":
                job.update(status="canceled", ended_at=time.time())
            return True


class RedisBackend:
    """Stored qrels in Redis; jobs enqueued on RQ by dotted path with explicit timeouts and
    TTLs, carrying references (blob keys, qrels ids), never the inputs themselves."""

    kind = "redis"

    def __init__(self, url: str, config: dict):
        self.redis = redis_client(url)
        self.store = RedisStore(self.redis)
        self.queue = metered_queue(QUEUE, self.redis)
        self.config = config
        self.table_bounds = table_bounds(config)  # stamped on every job (_bounded)
        self.work_bounds = work_bounds(config)  # ... and these (issue #27)
        self._reserve = self.redis.register_script(self._RESERVE)  # EVALSHA, loaded once

    def ping(self) -> None:
        self.redis.ping()

    def finished_evaluation(self, job_id: str, tenant: str | None) -> dict | None:
        """The document of ``tenant``'s finished evaluation job (None if there is none)."""
        return finished_evaluation(self.redis, job_id, tenant)

    def queued_count(self) -> int:
        return self.queue.count

    # A tenant's slots are two sorted sets (scored by time): its submitted jobs ("active",
    # pruned of those that ended whenever the cap is checked) and the slots reserved by
    # requests still storing their inputs ("reserved"). One script counts both and takes a
    # slot, so concurrent requests (threads, API processes) cannot overshoot the cap.
    _RESERVE = """
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
    local taken = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
    if taken >= tonumber(ARGV[1]) then
        return {0, taken}
    end
    redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
    return {1, taken + 1}
    """


    def _track(self, tenant: str | None, job_id: str) -> None:
        """The job is enqueued: its slot moves from reserved to active (in that order a
        concurrent prune, which drops active ids RQ does not know, cannot drop it)."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.zadd(keys.active_jobs(tenant), {job_id: time.time()})
            pipe.zrem(keys.reserved_jobs(tenant), job_id)
            pipe.execute()

    def _prune(self, tenant: str | None) -> int:
        """The tenant's submitted jobs still queued or running: its set of submitted jobs,
        pruned of those that have ended (or expired)."""
        from rq.job import Job

        key = keys.active_jobs(tenant)
        ids = [i.decode() for i in self.redis.zrange(key, 0, -1)]
        if not ids:
            return 0
        ended = [job_id for job_id, job in zip(ids, Job.fetch_many(ids, connection=self.redis),
                                                strict=True)
                 if job is None or getattr(job.get_status(refresh=False), "value", None) in
                 ("finished", "failed", "stopped", "canceled")]
        if ended:
            self.redis.zrem(key, *ended)
        return len(ids) - len(ended)

    def active_jobs(self, tenant: str | None) -> int:
        """The tenant's jobs queued or running, and slots reserved for jobs being submitted."""
        active = self._prune(tenant)
        key = keys.reserved_jobs(tenant)
        return active + self.redis.zcount(key, time.time() - RESERVATION_TTL, "+inf")

    def reserve_job(self, tenant: str | None, cap: int) -> tuple[str | None, int]:
        """(a job id holding one of the tenant's ``cap`` slots, or None if all are taken; the
        slots taken), counted and taken in one Lua script. ``submit`` with that
        ``job_id`` fills the slot; a request that fails before that gives it back
        (``release_job``), one whose process died after ``RESERVATION_TTL`` seconds."""
        self._prune(tenant)
        job_id, now = new_job_id(), time.time()
        added, taken = self._reserve(keys=[keys.active_jobs(tenant),
                                           keys.reserved_jobs(tenant)],
                                     args=[cap, job_id, now, now - RESERVATION_TTL])
        return (job_id if added else None), int(taken)

    def release_job(self, job_id: str, tenant: str | None) -> None:
        """Give back a slot ``reserve_job`` gave whose job was not submitted (else nothing)."""
        self.redis.zrem(keys.reserved_jobs(tenant), job_id)

    def submit(self, spec: EvaluationJob | ComparisonJob, job_id: str | None = None) -> str:
        """Enqueue ``spec`` under ``job_id`` (the slot ``reserve_job`` gave, else a new id)."""
        job_id = job_id or new_job_id()
        spec = _bounded(spec, self.table_bounds, job_id, self.work_bounds)
        function = (POOL_FUNCTION if isinstance(spec, PoolJob) else COMPARE_FUNCTION
                    if isinstance(spec, ComparisonJob) else BATCH_FUNCTION
                    if isinstance(spec, BatchEvaluationJob) else EVALUATE_FUNCTION)
        options, _ = job_options(self.config["JOB_TIMEOUT"], self.config["RESULT_TTL"],
                                 self.config["QUEUED_TTL"])
        self.queue.enqueue_call(function, args=(spec.to_wire(),), job_id=job_id,
                                meta=_meta(spec), **options)
        self._track(spec.tenant, job_id)
        return job_id

    def submit_sharded(self, spec: EvaluationJob, pieces: list, run_sha256,
                       job_id: str | None = None) -> str:
        """One job per piece of the run (any worker takes them) and a combine job that RQ
        enqueues once they have all finished; the combine job's id is the job's id. Each
        piece's job is enqueued as soon as the piece is stored, so workers start while the
        rest is stored. ``run_sha256``: a future of the whole run's SHA-256 (computed beside
        the stores: hashlib releases the GIL), which the combine job carries."""
        cfg = self.config
        job_id = job_id or new_job_id()
        spec = _bounded(spec, self.table_bounds, job_id, self.work_bounds)
        common, shard_opts = job_options(cfg["JOB_TIMEOUT"], cfg["RESULT_TTL"],
                                         cfg["QUEUED_TTL"])
        keys, shard_ids = [], []
        for i, piece in enumerate(pieces):
            keys.append(self.store.put_blob(f"run-{new_job_id()}", piece, cfg["INPUT_TTL"]))
            shard_ids.append(new_job_id())
            shard = ShardJob(**dict(_fields(spec), run_key=keys[-1]), shard=i)
            self.queue.enqueue_call(SHARD_FUNCTION, args=(shard.to_wire(),),
                                    job_id=shard_ids[-1], **shard_opts)
        combine = CombineJob(**dict(_fields(spec), run_key=None,
                                    run_sha256=run_sha256.result()),
                             shard_ids=shard_ids, shard_keys=keys)
        self.queue.enqueue_call(COMBINE_FUNCTION, args=(combine.to_wire(),),
                                job_id=job_id, depends_on=shard_ids,
                                meta=dict(_meta(spec), shards=shard_ids), **common)
        self._track(spec.tenant, job_id)
        return job_id

    def _fetch(self, job_id: str):
        """(RQ job, its status as a string), or (None, None) if Redis has no such job."""
        from rq.exceptions import NoSuchJobError
        from rq.job import Job

        try:
            job = Job.fetch(job_id, connection=self.redis)
        except NoSuchJobError:
            return None, None
        status = job.get_status(refresh=True)
        return job, getattr(status, "value", status)

    def job(self, job_id: str) -> dict | None:
        job, status = self._fetch(job_id)
        if job is None:
            return None
        meta = job.meta or {}
        out = {"id": job_id, "status": {"stopped": "canceled"}.get(status, status),
               "kind": meta.get("kind"),
               "created_at": _ts(job.created_at), "started_at": _ts(job.started_at),
               "ended_at": _ts(job.ended_at), "tenant": meta.get("tenant")}
        shards = meta.get("shards")
        reported = meta.get("progress")  # what the worker said (worker.jobs' reporter)
        if shards:
            from rq.job import Job

            jobs = Job.fetch_many(shards, connection=self.redis)
            states = [getattr(j.get_status(refresh=False), "value", None) if j else None
                      for j in jobs]
            done = [s == "finished" for s in states]
            counts = [(j.meta or {}).get("topics") if j else None for j in jobs]
            out["progress"] = {
                "shards_done": sum(done), "shards_total": len(shards),
                "topics_done": sum(c or 0 for c, d in zip(counts, done, strict=True) if d),
                # known once every shard has read its piece
                "topics_total": sum(counts) if all(c is not None for c in counts) else None,
                "stage": (reported or {}).get("stage") or (
                    "evaluating" if any(s in ("started", "finished") for s in states)
                    else "queued"),
            }
            if status in ("deferred", "queued") and "started" in states:
                out["status"] = "started"
        if out["status"] not in ("queued", "started", "finished", "failed", "canceled"):
            out["status"] = "queued"  # deferred / scheduled (a retry waiting) are still to run
        out["progress"] = progress_view(out["status"], out.get("progress") or reported)
        if status == "finished":
            outcome = job.return_value() or {}
            out.update(outcome)
            if "problem" in outcome:
                out["status"] = "failed"
        elif status == "failed":
            out["problem"] = {"status": 500, "title": "Job failed",
                              "detail": (job.exc_info or "the worker failed").strip()
                              .splitlines()[-1]}
        return {k: v for k, v in out.items() if v is not None}

    def cancel(self, job_id: str) -> bool:
        from rq.command import send_stop_job_command
        from rq.exceptions import InvalidJobOperation

        job, status = self._fetch(job_id)
        if job is None:
            return False
        try:
            if status == "started":
                send_stop_job_command(self.redis, job_id)
            elif status in ("queued", "deferred", "scheduled"):
                job.cancel()
        except InvalidJobOperation:
            pass
        return True


def progress_view(status: str, reported: dict | None) -> dict:
    """A job's ``progress`` as the API shows it, whatever its kind: ``stage`` and topics
    done of total (``topics_total`` None until the run has been read), with what the work
    reported (shards, a comparison's runs); a finished job is done, all its topics too."""
    out = {"stage": "queued", "topics_done": 0, "topics_total": None, **(reported or {})}
    if status == "finished":
        out["stage"] = "done"
        if out["topics_total"] is not None:
            out["topics_done"] = out["topics_total"]
        if "shards_total" in out:
            out["shards_done"] = out["shards_total"]
        if "runs_total" in out:
            out["runs_done"] = out["runs_total"]
    return out


def _meta(spec: Job) -> dict:
    """An RQ job's meta: whose it is, and what it makes (its result's kind: a sharded
    evaluation's combine job makes an evaluation)."""
    kind = ("comparison" if isinstance(spec, ComparisonJob) else PoolJob.kind
            if isinstance(spec, PoolJob) else BatchEvaluationJob.kind
            if isinstance(spec, BatchEvaluationJob) else EvaluationJob.kind)
    return {"tenant": spec.tenant, "kind": kind}


def _bounded(spec: Job, bounds: dict, job_id: str, work: dict | None = None) -> Job:
    """``spec`` carrying the app's bounds of an Arrow or Parquet input (``table_bounds``),
    which the job's reader checks before decompressing it (backend/tasks.py), and its job
    id (what it records, it records once: ``Job.job_id``)."""
    # and the budgets it is held to before it works (issue #27): the app's queued ones
    return dataclasses.replace(spec, table_bounds=dict(bounds), job_id=job_id,
                               work_bounds=dict(work) if work is not None else None)


def _fields(spec: EvaluationJob) -> dict:
    """An evaluation's fields, to build its shard and combine jobs from."""
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(EvaluationJob)}


def _ts(value) -> float | None:
    return value.timestamp() if value is not None else None


def make_backend(config: dict, results=None):
    """The queue of ``config`` (Redis when ``REDIS_URL`` is set, else this process). With
    ``results`` (the app's :class:`~backend.results.ResultStore`), stored qrels are kept in
    its database and cached in Redis or memory (``backend.qrels_db``); qrels an earlier
    version kept in Redis alone are imported into the database first (once)."""
    url = config.get("REDIS_URL")
    backend = RedisBackend(url, config) if url else MemoryBackend(config)
    if results is not None:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        from .qrels_db import DurableStore, Prepare, QrelsDatabase, import_redis_qrels

        database = QrelsDatabase(results.engine)
        prepare = Prepare((lambda: import_redis_qrels(backend.redis, database)) if url else None)
        backend.store = DurableStore(database, backend.store, prepare=prepare)
        try:
            prepare()
        except (RedisConnectionError, RedisTimeoutError) as exc:  # the service starts anyway
            logging.getLogger("cranfield.qrels").warning(
                "cannot import the qrels kept in Redis yet (%s); trying again at first use",
                exc.__class__.__name__)
    return backend
