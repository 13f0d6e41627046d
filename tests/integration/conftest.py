"""Fixtures: a real gunicorn serving the app, started once per session."""

from __future__ import annotations

import subprocess

import pytest
from servers import RedisServer, require_redis_server, start_gunicorn


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
