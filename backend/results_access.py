"""The results store of a worker process (issue #18): opened on first use, once per process,
on :func:`backend.config.database_url`, and migrated to head then (safely beside other
processes: ``backend.results.migrate``). RQ forks a work horse per job: one opened in the parent
(``cranfield worker`` opens it before its first job) is inherited, its pooled connections
left to the parent (SQLAlchemy's ``dispose(close=False)``), so a horse opens its own."""

from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_store = None
_pid: int | None = None


def result_store():
    """This process's :class:`backend.results.ResultStore`."""
    global _store, _pid
    with _lock:
        if _store is not None and _pid != os.getpid():  # a forked child: not the parent's
            _store.engine.dispose(close=False)           # connections
            _pid = os.getpid()
        if _store is None:
            from .config import database_url
            from .results import ResultStore

            store = ResultStore(database_url())
            store.upgrade()  # processes take turns (results.migrate's locks)
            _store, _pid = store, os.getpid()
        return _store


def qrels_store(redis):
    """Stored qrels as a worker reads them (issue #25): Redis connection ``redis`` is the
    cache, this process's results database (:func:`result_store`, opened on the first cache
    miss or write) the system of record."""
    from .qrels_db import DurableStore, QrelsDatabase
    from .store import RedisStore

    return DurableStore(lambda: QrelsDatabase(result_store().engine), RedisStore(redis))


def reset() -> None:
    """Forget the store (tests)."""
    global _store, _pid
    with _lock:
        if _store is not None:
            _store.close()
        _store = _pid = None
