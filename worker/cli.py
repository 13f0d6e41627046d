"""``cranfield worker``: an RQ worker on Cranfield's queue (no Flask here)."""

from __future__ import annotations

import logging

log = logging.getLogger("cranfield.worker")

# A killed worker's job is another worker's within ~45 s (RQ's defaults: ~7 min). A running
# job's heartbeat is renewed every MONITORING_INTERVAL seconds and lapses HEARTBEAT_GRACE
# seconds after one is missed (RQ: 30 s, and 60 s more); every idle worker looks for lapsed
# jobs every MAINTENANCE_INTERVAL seconds (RQ: 600 s, and not at all while it waits for a
# job, which it does ~405 s at a time). Worst case: 10 + 20 s for the heartbeat to lapse,
# then within 10 + 5 s an idle worker re-queues the job (retry) and takes it.
MONITORING_INTERVAL = 10
HEARTBEAT_GRACE = 20
MAINTENANCE_INTERVAL = 10
#: the documented bound (docs/queue-and-workers.md) on how long a killed (SIGKILL) or frozen
#: (SIGSTOP) worker's job waits before another worker starts it again, on these defaults;
#: tests/integration/test_nightly_faults.py measures both against it
TAKE_OVER_S = MONITORING_INTERVAL + HEARTBEAT_GRACE + MAINTENANCE_INTERVAL \
    + MAINTENANCE_INTERVAL // 2

# A worker rides out a Redis outage: wherever it notices (waiting for a job, a heartbeat, its
# work loop), it reconnects with backoff, RECONNECT_FIRST_S doubling to RECONNECT_CAP_S
# between attempts (RQ's own wait for a job: 1 s doubling to 60 s), each attempt a JSON log
# line (event redis_reconnect), and goes on working; it never exits because Redis went away.
# A work horse that finished its job while Redis is down keeps trying to store the outcome
# for HORSE_STORE_BUDGET_S before it gives up (the job is then retried, see above).
RECONNECT_FIRST_S = 0.5
RECONNECT_CAP_S = 5.0
HORSE_STORE_BUDGET_S = 120.0
RESTART_CAP_S = 30.0  # the most a work loop that ended with Redis up waits to start again


def _redis_down_errors() -> tuple[type[BaseException], ...]:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return RedisConnectionError, RedisTimeoutError


def wait_for_redis(connection, why: BaseException | str, *, budget_s: float | None = None,
                   stopping=lambda: False) -> bool:
    """Block until ``connection``'s Redis answers a PING, trying with exponential backoff and
    logging each attempt (``redis_reconnect``) and the recovery (``redis_reconnected``).
    False if ``budget_s`` ran out or ``stopping()`` became true first."""
    import time

    down = _redis_down_errors()
    started, pause, attempt = time.monotonic(), RECONNECT_FIRST_S, 0
    error = why if isinstance(why, str) else f"{type(why).__name__}: {why}"
    while True:
        attempt += 1
        if stopping():
            return False
        left = None if budget_s is None else budget_s - (time.monotonic() - started)
        if left is not None and left <= 0:
            log.error("redis unreachable: giving up", extra={
                "event": "redis_unreachable", "attempts": attempt - 1,
                "down_s": round(time.monotonic() - started, 3), "error": error})
            return False
        wait = pause if left is None else min(pause, left)
        log.warning("redis unreachable: reconnecting", extra={
            "event": "redis_reconnect", "attempt": attempt, "retry_in_s": round(wait, 3),
            "error": error})
        time.sleep(wait)
        pause = min(pause * 2, RECONNECT_CAP_S)
        try:
            connection.ping()
        except down as exc:
            error = f"{type(exc).__name__}: {exc}"
            continue
        log.info("redis reachable again", extra={
            "event": "redis_reconnected", "attempts": attempt,
            "down_s": round(time.monotonic() - started, 3)})
        return True


def worker_class():
    """RQ's forking Worker (a work horse per job, watched with heartbeats, so a killed worker's
    job is retried elsewhere), warming the decoded-qrels cache in the parent before each fork:
    the horse inherits it, so jobs against the same qrels decode them once per worker.

    It also counts each job's outcome and duration (``backend.telemetry``, in Redis, where
    /metrics reads them) and logs the job's start and end as JSON lines carrying the id of
    the request that enqueued it (``spec["request_id"]``)."""
    from rq import Worker

    from backend.telemetry import REQUEST_ID

    down = _redis_down_errors()

    class CranfieldWorker(Worker):
        test_delay = 0.0
        # RQ's wait for a job retries a lost connection itself: 1 s doubling to this
        max_connection_wait_time = RECONNECT_CAP_S

        def heartbeat(self, timeout=None, pipeline=None):
            """RQ's heartbeat, riding out a Redis outage: it is sent first thing in each round
            of waiting for a job, so an idle worker waits here for Redis to come back (RQ
            would otherwise go round its own retry, or end its work loop)."""
            while True:
                try:
                    return super().heartbeat(timeout, pipeline=pipeline)
                except down as exc:
                    if pipeline is not None:  # queued on a pipeline: its execute() fails
                        raise
                    wait_for_redis(self.connection, exc)

        def maintain_heartbeats(self, job, execution):
            """While a work horse runs: the job's heartbeats, through a Redis outage (the
            horse goes on with the job meanwhile; RQ would end the work loop, the horse
            left running unwatched)."""
            while True:
                try:
                    return super().maintain_heartbeats(job, execution)
                except down as exc:
                    wait_for_redis(self.connection, exc)

        @property
        def dequeue_timeout(self) -> int:
            """An idle worker waits for a job at most half a maintenance interval at a time
            (RQ waits worker_ttl - 15 = 405 s), so that its maintenance, which re-queues the
            jobs of dead workers, runs on time: RQ only looks between two waits."""
            return max(1, min(super().dequeue_timeout, self.maintenance_interval // 2))

        def get_heartbeat_ttl(self, job, working_time: float = 0.0) -> int:
            """How long a running job's heartbeat lasts: the monitoring interval (or what is
            left of the job's timeout) and HEARTBEAT_GRACE (RQ: 60 s). The heartbeat is sent
            by this process, which only waits for its work horse meanwhile."""
            interval = self.job_monitoring_interval
            if job.timeout and job.timeout > 0:
                interval = min(job.timeout - working_time, interval)
            return int(interval) + max(HEARTBEAT_GRACE, self.job_monitoring_interval)

        def prepare_job_execution(self, job, *args, **kwargs):
            """In the work horse: the job is marked started; then, in tests only, the
            configured delay."""
            super().prepare_job_execution(job, *args, **kwargs)
            if self.test_delay > 0:
                import time

                time.sleep(self.test_delay)

        def execute_job(self, job, queue):
            spec = job.args[0] if job.args else {}
            spec = spec if isinstance(spec, dict) else {}
            token = REQUEST_ID.set(spec.get("request_id"))
            try:
                self._cache_mark = _cache_counts()
                _job_log(logging.INFO, "job started", job, spec, event="job_started")
                self._warm_and_execute(job, queue, spec)
            finally:
                REQUEST_ID.reset(token)

        def _warm_and_execute(self, job, queue, spec):
            """The qrels warm-up, then the fork (RQ's execute_job)."""
            ref = (spec.get("qrels") or {}).get("ref")  # execute_job made it a dict
            if ref:
                from backend.results_access import qrels_store

                try:  # from Redis, or from the database on a miss (refilling Redis)
                    qrels_store(self.connection).scoped(spec.get("tenant")).load_qrels(ref)
                except Exception:  # the job itself reports what is wrong with its input
                    log.debug("could not warm qrels %s", ref, exc_info=True)
            # what the warm-up looked up is not the job's own lookup (see _cache_counts)
            hits, misses = _cache_counts()
            self._prefetch_lookups = hits + misses - sum(self._cache_mark)
            return super().execute_job(job, queue)

        # Both run in the work horse (handle_job_failure also in this process when the horse
        # died), before RQ stores the outcome: once a client sees the job ended, /metrics
        # counts it.
        def handle_job_success(self, job, queue, *args, **kwargs):
            result = getattr(job, "_result", None)  # what the job function returned
            failed = isinstance(result, dict) and "problem" in result
            self._job_ended(job, "failed" if failed else "finished",
                            result["problem"] if failed else None)
            return self._through_outage(lambda: super(CranfieldWorker, self).handle_job_success(
                job, queue, *args, **kwargs))

        def handle_job_failure(self, job, queue, *args, **kwargs):
            retrying = job.should_retry and getattr(self, "_stopped_job_id", None) != job.id
            exc_string = kwargs.get("exc_string", args[1] if len(args) > 1 else "") or ""
            detail = exc_string.strip().splitlines()[-1:] or [None]
            self._job_ended(job, "retrying" if retrying else "failed", {"detail": detail[0]})
            return self._through_outage(lambda: super(CranfieldWorker, self).handle_job_failure(
                job, queue, *args, **kwargs))

        def handle_execution_ended(self, job, queue, heartbeat_ttl):
            """In the work horse, first thing once the job returned or raised: through an
            outage too (else the horse exits, and the job waits for its heartbeat to lapse
            to be run again)."""
            return self._through_outage(
                lambda: super(CranfieldWorker, self).handle_execution_ended(
                    job, queue, heartbeat_ttl))

        def _through_outage(self, store_outcome):
            """Store a job's outcome in Redis (RQ's transaction, safe to repeat), waiting for
            Redis (HORSE_STORE_BUDGET_S) if it is down: a job that finished during an outage
            is not run again for want of its result being written."""
            while True:
                try:
                    return store_outcome()
                except down as exc:
                    if not wait_for_redis(self.connection, exc,
                                          budget_s=HORSE_STORE_BUDGET_S):
                        raise

        def _job_ended(self, job, outcome: str, problem: dict | None) -> None:
            from backend.telemetry import kind_of, record_cache, record_outcome

            spec = job.args[0] if job.args and isinstance(job.args[0], dict) else {}
            kind = kind_of(job.func_name)
            duration = ((job.ended_at - job.started_at).total_seconds()
                        if job.started_at and job.ended_at else None)
            try:
                if outcome != "retrying":  # an attempt to be retried is not an outcome yet
                    record_outcome(self.connection, kind, outcome, duration)
                mark = getattr(self, "_cache_mark", None)
                if mark is not None:  # once per job: the horse, or the parent if it died
                    self._cache_mark = None
                    hits, misses = _cache_counts()
                    prefetch = getattr(self, "_prefetch_lookups", 0)
                    record_cache(self.connection, max(0, hits - mark[0] - prefetch),
                                 misses - mark[1])
            except down:  # Redis is down: the counts are lost, never the job's outcome
                log.warning("could not count the job's outcome: redis unreachable",
                            extra={"job_id": job.id, "event": "metrics_lost"})
            finally:
                fields = {"event": "job_ended", "outcome": outcome,
                          "duration_ms": round(duration * 1000, 3) if duration is not None
                          else None, "retries_left": job.retries_left}
                if problem:
                    fields["problem"] = {k: problem[k] for k in ("status", "title", "detail")
                                         if k in problem}
                _job_log(logging.INFO if outcome == "finished" else logging.WARNING,
                         f"job {outcome}", job, spec, **fields)

    return CranfieldWorker


def _cache_counts() -> tuple[int, int]:
    """(hits, misses) of this process's decoded-qrels cache. The parent's warm-up before the
    fork is a prefetch: a decode there counts as the job's miss, and the hit it then gives
    the job in the horse is not counted; so each lookup a job makes counts once."""
    from backend.store import QRELS_CACHE

    return QRELS_CACHE.hits, QRELS_CACHE.misses


def _job_log(level: int, message: str, job, spec: dict, **fields) -> None:
    from backend.telemetry import kind_of

    log.log(level, message, extra={"job_id": job.id, "kind": kind_of(job.func_name),
                                   "queue": job.origin, "tenant": spec.get("tenant"),
                                   "request_id": spec.get("request_id"), **fields})


def preload() -> None:
    """Import and exercise what jobs use once, in the parent: each forked work horse inherits
    warm modules instead of importing pyarrow (~0.4 s) and paying the first columnar read
    and evaluation (~0.2 s) for every job."""
    import backend.tasks  # noqa: F401
    import cranfield
    import cranfield.reports.result_document  # noqa: F401
    import worker.jobs  # noqa: F401
    from cranfield.inputs.json_body import warm_up
    from cranfield.inputs.trec_fast import warm_up_columnar_reader

    warm_up()  # JSON runs: the compiled scan (the C extension: milliseconds, nothing compiled)
    try:  # the results database, opened and migrated once: each work horse inherits it
        from backend.results_access import result_store

        result_store()
    except Exception:  # unreachable now: a job that records a result opens it (or fails)
        log.warning("cannot open the results database yet", exc_info=True)
    run = warm_up_columnar_reader()  # TREC runs: pyarrow imported, its first read paid
    if run is not None:
        cranfield.evaluate({"q1": {"d1": 1}}, run, ["map", "ndcg_cut.10"])


def run_worker(redis_url: str | None, burst: bool = False, name: str | None = None,
               monitoring_interval: int | None = None,
               maintenance_interval: int | None = None) -> int:
    from rq import Queue

    from backend.config import ConfigError, worker_settings
    from backend.contract import QUEUE
    from backend.store import redis_client
    from backend.telemetry import configure_logging

    try:
        settings = worker_settings()  # backend/config.py: where configuration is read
    except ConfigError as exc:
        raise SystemExit(f"cranfield worker: {exc}") from None
    url = redis_url or settings.redis_url
    if not url:
        raise SystemExit("cranfield worker: set REDIS_URL or pass --redis-url")
    configure_logging(settings.log_level.upper())  # JSON lines on stderr
    preload()
    conn = redis_client(url)
    cls = worker_class()

    def new_worker():
        worker = cls([Queue(QUEUE, connection=conn)], connection=conn, name=name,
                     job_monitoring_interval=monitoring_interval or MONITORING_INTERVAL,
                     maintenance_interval=maintenance_interval or MAINTENANCE_INTERVAL)
        worker.test_delay = settings.test_job_delay
        return worker

    return supervise(new_worker, conn, burst=burst)


def supervise(new_worker, connection, *, burst: bool = False) -> int:
    """Run RQ's work loop until asked to stop (SIGTERM/SIGINT) or, with ``burst``, until the
    queue is empty. RQ ends its loop on an error it does not handle (Redis gone at the
    wrong moment: between jobs, while storing an outcome; a Redis timeout) and the worker
    process would exit with status 0 while jobs wait: here it is logged, the worker waits
    for Redis (reconnecting with backoff, each attempt logged) and a new work loop starts."""
    import signal
    import threading

    from rq.worker.base import StopRequested

    down = _redis_down_errors()
    stop = threading.Event()
    restarts = 0
    while True:
        try:
            worker = new_worker()  # RQ names its connection at once: Redis must answer
        except down as exc:  # Redis is down (again) before the loop could start: wait for it
            if not wait_for_redis(connection, exc, stopping=stop.is_set):
                return 0
            continue
        cause: BaseException | str
        try:
            worker.work(burst=burst, with_scheduler=True)
            cause = "RQ's work loop ended"
        except down as exc:  # its teardown could not reach Redis either
            cause = exc
        except StopRequested:  # a signal while it tore down
            return 0
        if getattr(worker, "_shutdown_requested_date", None) is not None or stop.is_set():
            return 0  # SIGTERM/SIGINT: RQ finished the job at hand
        if burst and isinstance(cause, str):
            return 0  # the queue is empty
        restarts += 1
        log.error("work loop ended unexpectedly: restarting it once Redis answers",
                  extra={"event": "worker_restart", "restarts": restarts,
                         "worker": worker.name, "error": cause if isinstance(cause, str)
                         else f"{type(cause).__name__}: {cause}"})
        # until the next work loop installs RQ's handlers, a stop request ends the wait
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        _release(worker)
        try:
            connection.ping()
        except down:
            if not wait_for_redis(connection, cause, stopping=stop.is_set):
                return 0
        else:  # Redis answers: not an outage; a loop that keeps ending is not restarted hot
            if stop.wait(min(RECONNECT_FIRST_S * 2 ** (restarts - 1), RESTART_CAP_S)):
                return 0
        _forget(worker)


def _release(worker) -> None:
    """What an ended work loop may have left: a work horse still running its job (waited
    for: it stores its own outcome), RQ's scheduler process, the pubsub listener thread."""
    import os

    pid = getattr(worker, "_horse_pid", 0)
    if pid:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    scheduler = getattr(worker, "scheduler", None)
    process = getattr(scheduler, "_process", None)
    if process is not None and process.is_alive():
        process.terminate()
        process.join(10)
    thread = getattr(worker, "pubsub_thread", None)
    if thread is not None:
        thread.stop()
        thread.join(timeout=1)


def _forget(worker) -> None:
    """Mark the ended work loop's worker dead in Redis (its teardown could not), so the next
    loop, which may have the same --name, registers."""
    try:
        worker.register_death()
    except Exception:  # noqa: BLE001 - its key expires anyway (worker_ttl)
        log.warning("could not mark the previous worker dead", exc_info=True)
