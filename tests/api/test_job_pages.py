"""A finished job's report page (GET /v1/jobs/{id} with Accept: text/html, and /report) is
titled by what was evaluated: "Evaluation of RUNID", "Comparison: a vs b", in the <h1> and
the <title>; the job's id is the line under the title."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from conftest import finished_job

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS = (DATA / "qrels.test").read_text()
FULL = (DATA / "results.test").read_text()
TRUNC = (DATA / "results.trunc").read_text()
RUNID = "bm25<k1=0.9>&co"  # a runid is one column: no spaces


def renamed(run: str, runid: str) -> str:
    """The run with every line's runid (the sixth column) replaced."""
    return "".join(" ".join(line.split()[:5] + [runid]) + "\n" for line in run.splitlines()
                   if line.strip())


def _heads(page: str) -> tuple[str, str, str]:
    """The page's <title>, <h1> and the subtitle line under it, unescaped."""
    title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
    h1 = re.search(r"<h1>(.*?)</h1>", page, re.S).group(1)
    sub = re.search(r'<h1>.*?</h1>\s*<p class="subtitle">(.*?)</p>', page, re.S)
    return html.unescape(title), html.unescape(h1), html.unescape(sub.group(1) if sub else "")


@pytest.mark.parametrize("path, body, title", [
    ("/v1/evaluations", {"run": renamed(FULL, RUNID), "qrels": QRELS,
                         "measures": ["map", "P.10"]}, f"Evaluation of {RUNID}"),
    ("/v1/evaluations", {"run": FULL, "qrels": QRELS}, "Evaluation of STANDARD"),
    ("/v1/comparisons", {"runs": [{"name": "full", "run": FULL},
                                  {"name": "trunc", "run": TRUNC}],
                         "qrels": QRELS, "measures": ["map"]}, "Comparison: full vs trunc"),
    ("/v1/comparisons", {"runs": [{"name": "a<b", "run": FULL}, {"name": "b", "run": TRUNC},
                                  {"name": "c", "run": renamed(FULL, RUNID)}],
                         "qrels": QRELS, "measures": ["map"]}, "Comparison: a<b vs b vs c"),
])
def test_finished_job_pages_are_titled_by_their_runs(client, path, body, title):
    resp = client.post(path, json=body, headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    location = resp.headers["Location"]
    job_id = location.rsplit("/", 1)[1]
    assert finished_job(client, location)["status"] == "finished"
    for page in (client.get(location, headers={"Accept": "text/html"}),
                 client.get(location + "/report")):
        assert page.status_code == 200 and page.mimetype == "text/html"
        text = page.get_data(as_text=True)
        assert _heads(text) == (title, title, f"Cranfield job {job_id}")
        assert f"<title>Cranfield job {job_id}</title>" not in text
        assert "<b" not in text.split("<body>", 1)[1].split("</h1>", 1)[0]  # escaped


def test_a_job_under_way_keeps_the_job_title(client, monkeypatch):
    """Before it has a result, the page can only name the job (and reloads itself)."""
    from service import jobs

    monkeypatch.setattr(jobs, "_find", lambda job_id: {"id": job_id, "status": "queued"})
    page = client.get("/v1/jobs/" + "0" * 32 + "/report", check=False).get_data(as_text=True)
    assert f"<title>Cranfield job {'0' * 32}</title>" in page
    assert 'http-equiv="refresh"' in page
