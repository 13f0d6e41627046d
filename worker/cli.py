"""``cranfield worker``: an RQ worker on Cranfield's queue (no Flask here)."""

from __future__ import annotations

import logging
import os

QUEUE = "cranfield"
log = logging.getLogger("cranfield.worker")


def worker_class():
    """RQ's forking Worker (a work horse per job, watched with heartbeats, so a killed worker's
    job is retried elsewhere), warming the decoded-qrels cache in the parent before each fork:
    the horse inherits it, so jobs against the same qrels decode them once per worker."""
    from rq import Worker

    class CranfieldWorker(Worker):
        def execute_job(self, job, queue):
            spec = job.args[0] if job.args else {}
            if isinstance(spec, dict) and spec.get("qrels_ref"):
                from .store import RedisStore

                try:
                    RedisStore(self.connection).scoped(spec.get("tenant")).load_qrels(
                        spec["qrels_ref"])
                except Exception:  # the job itself reports what is wrong with its input
                    log.debug("could not warm qrels %s", spec["qrels_ref"], exc_info=True)
            return super().execute_job(job, queue)

    return CranfieldWorker


def preload() -> None:
    """Import and exercise what jobs use once, in the parent: each forked work horse inherits
    warm modules instead of importing pyarrow (~0.4 s) and paying the first columnar read
    and evaluation (~0.2 s) for every job."""
    import cranfield
    import cranfield.report  # noqa: F401
    import worker.jobs  # noqa: F401
    from cranfield.io import _fast_run
    from cranfield.json_body import warm_up

    warm_up()  # JSON runs: the compiled scan, loaded from numba's cache
    try:
        import pyarrow.compute  # noqa: F401
        import pyarrow.csv  # noqa: F401
    except ImportError:  # the engine works without pyarrow
        return
    text = b"".join(b"q%d Q0 d%d %d %f warm\n" % (t, i, i, 1 / (i + 1))
                    for t in range(3) for i in range(50))
    run = _fast_run(text, "warm-up")
    if run is not None:
        cranfield.evaluate(run, {"q1": {"d1": 1}}, ["map", "ndcg_cut.10"])


def run_worker(redis_url: str | None, burst: bool = False, name: str | None = None,
               monitoring_interval: int | None = None,
               maintenance_interval: int | None = None) -> int:
    from rq import Queue

    from .store import redis_client

    url = redis_url or os.environ.get("REDIS_URL")
    if not url:
        raise SystemExit("cranfield worker: set REDIS_URL or pass --redis-url")
    preload()
    conn = redis_client(url)
    kwargs = {}
    if monitoring_interval:
        kwargs["job_monitoring_interval"] = monitoring_interval
    if maintenance_interval:
        kwargs["maintenance_interval"] = maintenance_interval
    worker = worker_class()([Queue(QUEUE, connection=conn)], connection=conn, name=name,
                            **kwargs)
    worker.work(burst=burst, with_scheduler=True)
    return 0
