"""Warnings survive (issue #25): a compared run's input lint (``warnings`` of its evaluation:
70% of its top 10 unjudged, a tie straddling rank 10) is in the comparison — JSON, text and
HTML, first on the page — whether the run is sent inline, queued, or is a recorded result
(whose recorded document keeps its warnings). Responses are checked against openapi.yaml."""

from __future__ import annotations

import pytest
from conftest import finished_job

TOPICS = [f"t{i}" for i in range(1, 11)]
QRELS = {t: {"r": 1, "j1": 0, "j2": 0} for t in TOPICS}
CLEAN = {t: {"r": 3.0, "j1": 2.0, "j2": 1.0} for t in TOPICS}
# seven unjudged documents above r, j1, j2: 70% of the top 10 unjudged
HOLES = {t: {**{f"u{k}": 20.0 - k for k in range(7)}, "r": 3.0, "j1": 2.0, "j2": 1.0}
         for t in TOPICS}
MESSAGE = ("run 'bm25@holes': 10 topic(s) have unjudged documents in their top 10 (70.0% of "
           "those ranks); they count as non-relevant (options.judged_only drops them instead)")
MEASURES = ["map", "P.10"]


def _record(client, run, label):
    resp = client.post("/v1/evaluations", json={
        "run": run, "qrels": QRELS, "measures": MEASURES,
        "record": {"system": "bm25", "label": label}})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


@pytest.fixture
def recorded(client):
    clean, holes = _record(client, CLEAN, "clean"), _record(client, HOLES, "holes")
    assert clean["warnings"] == []
    assert [w["code"] for w in holes["warnings"]] == ["unjudged-in-top-10"]
    return clean["recorded"]["id"], holes["recorded"]["id"]


def _runs_lint(doc: dict) -> list[dict]:
    return [w for w in doc["warnings"] if "run" in w]


def test_a_recorded_result_keeps_its_warnings(client, recorded):
    _, holes = recorded
    kept = client.get(f"/v1/results/{holes}").get_json()["document"]["warnings"]
    (warning,) = kept
    assert warning["code"] == "unjudged-in-top-10" and warning["topics"] == sorted(TOPICS)
    assert "(70.0% of those ranks)" in warning["message"]


def test_comparing_recorded_results_carries_their_warnings(client, recorded):
    clean, holes = recorded
    doc = client.post("/v1/comparisons", json={
        "runs": [{"result_id": clean}, {"result_id": holes}], "measures": MEASURES}).get_json()
    (warning,) = _runs_lint(doc)
    assert warning["run"] == "bm25@holes" and warning["message"] == MESSAGE
    assert warning["code"] == "unjudged-in-top-10" and warning["option"] == "judged_only"
    assert doc["warnings"][0] == warning  # first
    # the comparison a trend's point leads to: JSON, text and the page
    url = f"/v1/results/{holes}/comparison?with={clean}"
    doc = client.get(url).get_json()
    (warning,) = _runs_lint(doc)
    assert warning["run"] == "holes"  # named by their labels there
    assert warning["message"].startswith("run 'holes': 10 topic(s) have unjudged documents")
    text = client.get(url, headers={"Accept": "text/plain"}).get_data(as_text=True)
    assert f"warning: {warning['message']}\n" in text
    page = client.get(url, headers={"Accept": "text/html"}).get_data(as_text=True)
    assert 'class="no-warnings"' not in page and "None.</p>" not in page
    item = page.index('<li class="warn" data-run="holes"><code>unjudged-in-top-10</code>')
    assert "70.0% of those ranks" in page[item:page.index("</li>", item)]
    assert page.index('id="warnings"') < page.index("<table")


def test_inline_and_queued_comparisons_carry_each_runs_warnings(client):
    body = {"runs": [{"name": "clean", "run": CLEAN}, {"name": "holes", "run": HOLES}],
            "qrels": QRELS, "measures": MEASURES}
    sync = client.post("/v1/comparisons", json=body).get_json()
    (warning,) = _runs_lint(sync)
    assert warning["run"] == "holes" and "(70.0% of those ranks)" in warning["message"]
    resp = client.post("/v1/comparisons", json=body, headers={"Prefer": "respond-async"})
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert _runs_lint(job["result"]) == [warning]
