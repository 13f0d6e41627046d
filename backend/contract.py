"""The queue's contract: the queue's name and the dotted paths of the RQ entry points jobs
are enqueued by (``worker.jobs``; a path, never an import, so the web service does not load
the worker)."""

from __future__ import annotations

QUEUE = "cranfield"

EVALUATE_FUNCTION = "worker.jobs.evaluate_job"
SHARD_FUNCTION = "worker.jobs.evaluate_shard_job"
COMBINE_FUNCTION = "worker.jobs.combine_shards_job"
COMPARE_FUNCTION = "worker.jobs.compare_job"
