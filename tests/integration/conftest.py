"""Fixtures: a real gunicorn serving the app, started once per session; a private
redis-server and a PostgreSQL database per test module."""

from __future__ import annotations

import subprocess

import pytest
from servers import RedisServer, postgres_database, require_redis_server, start_gunicorn


@pytest.fixture(scope="session")
def live_server():
    url, proc = start_gunicorn()
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def redis_server():
    """A private redis-server for each test module (skipped without one; failing with
    CI=true)."""
    require_redis_server()
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def results_postgres(request):
    """The URL of an empty PostgreSQL database of this test module, dropped after it (None
    when no server answers: a test that needs it says so with ``require``)."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")[:24]
    with postgres_database(f"cranfield_{name}_") as url:
        yield url
