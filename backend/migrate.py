"""Migrating the results database safely when several processes start at once (issue #18).

gunicorn starts several workers, and RQ workers start beside them: each may find the
database behind head and run Alembic's ``upgrade`` at the same moment, and two of them
creating the same tables fail. :func:`migrate_safely` serialises them: on PostgreSQL with a
session-level advisory lock (held on a connection of its own while another connection
migrates), on a SQLite file with an exclusive ``flock`` on a file beside it. The second
process to get the lock finds the schema at head and does nothing. gunicorn's master also
migrates in ``on_starting`` (service/gunicorn.conf.py), before any worker forks.

(``backend.results.migrate`` may hold locks of its own inside these: they are other locks —
another advisory key, another file — always taken after these, so the two never deadlock.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

from sqlalchemy import text
from sqlalchemy.engine import Engine

#: the advisory lock's key: any constant shared by every Cranfield process (b"cranfld1")
LOCK_KEY = 0x6372616E666C6431


@contextlib.contextmanager
def migration_lock(engine: Engine) -> Iterator[None]:
    """Held by one process at a time per database (PostgreSQL or a SQLite file); other
    dialects and in-memory SQLite: no lock (one process only)."""
    url = engine.url
    if url.get_backend_name() == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": LOCK_KEY})
            connection.commit()  # the lock is the session's, not the transaction's
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": LOCK_KEY})
                connection.commit()
        return
    database = url.database if url.get_backend_name() == "sqlite" else None
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    path = os.path.abspath(database) + ".migrating"  # not results.py's own lock file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def migrate_safely(target) -> None:
    """Bring the database of ``target`` (a :class:`backend.results.ResultStore`, an Engine or
    a URL) to head, one process at a time."""
    from backend.results import ResultStore, make_engine, migrate

    if isinstance(target, ResultStore):
        engine, own = target.engine, False
    elif isinstance(target, Engine):
        engine, own = target, False
    else:
        engine, own = make_engine(target), True
    try:
        with migration_lock(engine):
            migrate(engine)
    finally:
        if own:
            engine.dispose()
