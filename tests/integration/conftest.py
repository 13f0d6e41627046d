"""Fixtures: a real gunicorn serving the app, started once per session."""

from __future__ import annotations

import subprocess

import pytest
from servers import start_gunicorn


@pytest.fixture(scope="session")
def live_server():
    url, proc = start_gunicorn()
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
