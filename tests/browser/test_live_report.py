"""The report pages as the service serves them: gunicorn (the repository's config, embedded
jobs), a comparison queued and finished, and Chromium opening the job's page by URL."""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from servers import start_gunicorn, stop  # noqa: E402

DATA = ROOT / "tests" / "data" / "trec_eval"


def _post(url: str, body: dict, headers: dict) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.status, dict(resp.headers), resp.read()


def test_a_finished_comparison_page_renders_in_chromium(chromium):
    base, proc = start_gunicorn()
    try:
        runs = [{"name": n, "run": (DATA / f).read_text()}
                for n, f in (("full", "results.test"), ("truncated", "results.trunc"))]
        status, headers, _ = _post(base + "/v1/comparisons", {
            "runs": runs, "qrels": (DATA / "qrels.test").read_text(), "baseline": "full",
            "options": {"complete_topics": True}, "gate": "map:0.5"},
            {"Prefer": "respond-async"})
        assert status == 202
        job_url = base + headers["Location"]
        deadline = time.monotonic() + 60
        while json.loads(urllib.request.urlopen(job_url, timeout=10).read())["status"] not in (
                "finished", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        dom = chromium.dump_dom(job_url + "/report")
        assert dom.count('class="chart pr-curve"') == 1
        assert dom.count("<polyline") >= 2  # one curve per run
        assert 'class="chart topic-diff"' in dom and 'data-topic="303"' in dom
        assert "PASS" in dom  # the gate's verdict
        shot = chromium.screenshot(job_url + "/report", (1280, 1800))
        assert shot.non_white() > 0.02 and len(shot.colours()) >= 20
        # a browser asking for the job itself is shown the same page
        req = urllib.request.Request(job_url, headers={"Accept": "text/html"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.headers.get_content_type() == "text/html"
    finally:
        stop(proc)
