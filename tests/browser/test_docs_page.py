"""Swagger UI at /docs/ under the Content-Security-Policy header the service sends (issue
#27): served by gunicorn with the repository's config, opened by URL in Chromium, which
enforces the policy. Its scripts must run (the inline configuration allowed by its hash) and
fetch the contract: the operations of openapi.yaml appear in the page."""

from __future__ import annotations

import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from servers import running_gunicorn  # noqa: E402


def test_swagger_ui_renders_the_contract_under_the_policy(chromium):
    with running_gunicorn() as base:
        with urllib.request.urlopen(base + "/docs/", timeout=30) as resp:
            policy = resp.headers["Content-Security-Policy"]
            assert "script-src 'self' 'sha256-" in policy
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
        # Swagger UI fetches /openapi.yaml and renders after the page's load event: run the
        # page's timers and fetches for up to 20 s of virtual time, then dump the DOM
        dom = chromium.run(base + "/docs/", "--virtual-time-budget=20000", "--dump-dom")
    assert 'class="swagger-ui' in dom
    # rendered from the contract: its title and an operation block per route
    assert "Cranfield" in dom
    assert dom.count('class="opblock ') >= 20
    assert 'data-path="/v1/evaluations"' in dom or "/v1/evaluations" in dom
