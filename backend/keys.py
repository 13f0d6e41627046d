"""Every Redis key Cranfield writes, made here and nowhere else (RQ's own keys are RQ's).

A *space* is where one tenant's qrels live: ``cranfield`` (a service without API keys) or
``cranfield:tenant:{tenant}``. Run blobs, job slots, counters and rate-limit windows are
not in a space: blob keys are random, and the others name their tenant or key."""

from __future__ import annotations

ROOT = "cranfield"


def space(tenant: str | None) -> str:
    """The qrels space of ``tenant`` (None: the one shared space)."""
    return ROOT if tenant is None else f"{ROOT}:tenant:{tenant}"


def qrels_index(space: str) -> str:
    """Sorted set of the space's qrels ids, by creation time."""
    return f"{space}:qrels"


def qrels(space: str, qrels_id: str) -> str:
    """Hash: version -> metadata JSON, of one qrels id."""
    return f"{space}:qrels:{qrels_id}"


def qrels_order(space: str, qrels_id: str) -> str:
    """List of the id's versions, oldest first."""
    return f"{qrels(space, qrels_id)}:order"


def qrels_text(space: str, qrels_id: str, version: str) -> str:
    """One version's compressed canonical text."""
    return f"{qrels(space, qrels_id)}:v:{version}"


def qrels_generation(space: str, qrels_id: str) -> str:
    """Counter bumped by every write of the id: a cache refill read before a write is not
    kept (backend/qrels_db.py)."""
    return f"{qrels(space, qrels_id)}:gen"


def qrels_imported() -> str:
    """Marker: the qrels stored in Redis were imported into the database (once)."""
    return f"{ROOT}:qrels-imported"


def blob(key: str) -> str:
    """A run or inline qrels as sent, kept with a TTL until its job has run."""
    return f"{ROOT}:blob:{key}"


def active_jobs(tenant: str | None) -> str:
    """Sorted set of the tenant's submitted jobs (id -> submission time)."""
    return f"{ROOT}:active:{tenant or ''}"


def reserved_jobs(tenant: str | None) -> str:
    """Sorted set of the tenant's reserved, not yet submitted job slots."""
    return f"{ROOT}:reserved:{tenant or ''}"


def job_counters() -> str:
    """Hash of the job metrics' counters (backend/telemetry.py)."""
    return f"{ROOT}:metrics:counters"


def rate_window(api_key: str, slot: int) -> str:
    """One key's request count in one fixed rate-limit window."""
    return f"{ROOT}:ratelimit:{api_key}:{slot}"


def rescore_recovery(rescore_id: str) -> str:
    """A re-score's recovery lock (backend/rescoring.py ``recover``): held while one poll
    recovers the re-score's lost jobs, and for the rest of RESCORE_RECOVERY_INTERVAL."""
    return f"{ROOT}:rescore-recovery:{rescore_id}"
