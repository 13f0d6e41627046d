"""Invalid configuration stops start-up with one clear line, before any worker starts:
gunicorn (the repository's config) and `cranfield worker` as an operator would run them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from servers import ROOT, free_port


@pytest.mark.parametrize("env, message", [
    ({"CRANFIELD_WORKERS": "lots"}, "CRANFIELD_WORKERS must be a positive integer, got 'lots'"),
    ({"CRANFIELD_THREADS": "0"}, "CRANFIELD_THREADS must be a positive integer"),
    ({"CRANFIELD_LOG_LEVEL": "loud"}, "CRANFIELD_LOG_LEVEL must be"),
    ({"CRANFIELD_MAX_TOPICS": "many"}, "CRANFIELD_MAX_TOPICS must be an integer, got 'many'"),
    ({"CRANFIELD_RESULT_TTL": "-5"}, "CRANFIELD_RESULT_TTL must be positive"),
    ({"CRANFIELD_API_KEYS": "my-secret write team"}, "SHA-256"),
    ({"CRANFIELD_API_KEYS_FILE": "/nonexistent/keys"}, "cannot read /nonexistent/keys"),
    ({"CRANFIELD_RATE_LIMIT": "often"}, "CRANFIELD_RATE_LIMIT must be COUNT/SECONDS"),
    # the results database (issue #18) is opened and migrated by the master
    ({"CRANFIELD_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/cranfield"},
     "cannot open the results database (CRANFIELD_DATABASE_URL): OperationalError"),
])
def test_gunicorn_refuses_to_start(env, message, tmp_path):
    # results in a SQLite file of the test's own (never the repository's instance/), unless
    # the case names a database
    full = dict(os.environ, CRANFIELD_ACCESS_LOG="",
                CRANFIELD_DATABASE_URL=f"sqlite:///{tmp_path / 'results.db'}")
    full.update(env)
    full.pop("REDIS_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "service" / "gunicorn.conf.py"),
         "--bind", f"127.0.0.1:{free_port()}", "service.app:create_app()"],
        cwd=ROOT, env=full, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr[-2000:]
    assert "Booting worker" not in proc.stderr  # stopped in the master, before any worker
    assert "my-secret" not in proc.stderr  # a key pasted by mistake is not echoed
