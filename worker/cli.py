"""``cranfield worker``: an RQ worker on Cranfield's queue (no Flask here)."""

from __future__ import annotations

import os

QUEUE = "cranfield"


def run_worker(redis_url: str | None, burst: bool = False, name: str | None = None) -> int:
    """Run jobs in this process (RQ's SimpleWorker): forking a work horse per job would throw
    away the decoded-qrels cache after every job."""
    from redis import Redis
    from rq import Queue, SimpleWorker

    url = redis_url or os.environ.get("REDIS_URL")
    if not url:
        raise SystemExit("cranfield worker: set REDIS_URL or pass --redis-url")
    conn = Redis.from_url(url)
    worker = SimpleWorker([Queue(QUEUE, connection=conn)], connection=conn, name=name)
    worker.work(burst=burst, with_scheduler=False)
    return 0
