"""A real gunicorn serving the app, started once per session on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def live_server():
    port = free_port()
    env = dict(os.environ, CRANFIELD_WORKERS="2", CRANFIELD_ACCESS_LOG="/dev/null")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "service" / "gunicorn.conf.py"),
         "--bind", f"127.0.0.1:{port}", "service.app:create_app()"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as resp:
                if resp.status == 200:
                    break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("gunicorn did not start: " +
                                   proc.stderr.read().decode(errors="replace")) from None
            time.sleep(0.2)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    proc.stderr.close()
