"""Fixtures: a real gunicorn serving the app, started once per session; a private
redis-server and a PostgreSQL database per test module."""

from __future__ import annotations

import pytest
from servers import (
    postgres_database,
    running_gunicorn,
    running_redis,
    running_worker,
    start_gunicorn,
    stop,
)


@pytest.fixture(scope="session")
def live_server():
    url, proc = start_gunicorn()
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def redis_server():
    """A private redis-server for each test module (skipped without one; failing with
    CI=true)."""
    with running_redis() as server:
        yield server


@pytest.fixture
def worker(redis_server):
    """A ``cranfield worker`` on the module's :func:`redis_server`, for one test (a module
    that needs another worker defines its own ``worker``)."""
    with running_worker(redis_server.url) as proc:
        yield proc


@pytest.fixture(scope="module")
def results_postgres(request):
    """The URL of an empty PostgreSQL database of this test module, dropped after it (None
    when no server answers: a test that needs it says so with ``require``)."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")[:24]
    with postgres_database(f"cranfield_{name}_") as url:
        yield url


@pytest.fixture(scope="module")
def results_api(redis_server, results_postgres):
    """gunicorn recording results in this module's PostgreSQL database and queueing on its
    Redis, 2 web workers; a queued TREC run of a few kB is cut into two shards (so the combine
    step records). None without PostgreSQL (:func:`results_worker` then says so)."""
    if results_postgres is None:
        yield None
        return
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_WORKERS": "2",
                           "CRANFIELD_DATABASE_URL": results_postgres, "CRANFIELD_SHARDS": "2",
                           "CRANFIELD_SHARD_MIN_BYTES": "1000"}) as url:
        yield url


@pytest.fixture
def results_worker(redis_server, results_postgres, require):
    """A ``cranfield worker`` for :func:`results_api`, recording in the same database."""
    require(results_postgres is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    with running_worker(redis_server.url, results_postgres) as proc:
        yield proc
