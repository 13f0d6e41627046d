"""POST /v1/comparisons, POST /v1/pools and the report pages, through the contract client
(every response is checked against openapi.yaml)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from conftest import finished_job
from scipy import stats

import cranfield
from cranfield.compare.comparison import compare

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS = (DATA / "qrels.test").read_text()
FULL = (DATA / "results.test").read_text()
TRUNC = (DATA / "results.trunc").read_text()

# five topics where per-topic AP is easy to check by hand
SMALL_QRELS = {f"t{i}": {"r": 1} for i in range(1, 6)}
A = {f"t{i}": {"r": 2.0, "x": 1.0} for i in range(1, 6)}             # AP 1 everywhere
B = {f"t{i}": {"r": 1.0 if i <= 2 else 2.0, "x": 2.0 if i <= 2 else 1.0}
     for i in range(1, 6)}                                           # AP 0.5 on t1, t2


def body(**extra):
    out = {"runs": [{"name": "full", "run": FULL}, {"name": "trunc", "run": TRUNC}],
           "qrels": QRELS, "measures": ["map", "P.10"]}
    out.update(extra)
    return out


def test_comparison_numbers_equal_the_engine_and_scipy(client):
    resp = client.post("/v1/comparisons", json=body(options={"complete_topics": True}))
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    doc = resp.get_json()
    full = cranfield.evaluate(QRELS, FULL, ["map", "P.10"], complete_topics=True)
    trunc = cranfield.evaluate(QRELS, TRUNC, ["map", "P.10"], complete_topics=True)
    assert doc["topics"] == ["301", "302", "303"]
    # with complete_topics a topic the run lacks counts 0 (trec_eval -c)
    a, b = (np.array([dict(zip(ev.topic_order, ev.values["map"], strict=True))[t]
                      for t in doc["topics"]]) for ev in (full, trunc))
    pair = next(p for p in doc["pairs"] if p["measure"] == "map")
    assert (pair["a"], pair["b"]) == ("full", "trunc")
    assert pair["mean_diff"] == pytest.approx((b - a).mean(), abs=1e-12)
    expected = stats.ttest_rel(b, a)
    assert pair["t_test"]["p_value"] == pytest.approx(expected.pvalue, abs=1e-12)
    assert pair["t_test"]["statistic"] == pytest.approx(expected.statistic, abs=1e-9)
    # three topics: the randomization test enumerates all 2^3 sign vectors
    assert pair["randomization"]["exact"] and pair["randomization"]["n_permutations"] == 8
    assert doc["summary"]["map"]["full"]["aggregate"] == pytest.approx(full.aggregate["map"])
    assert doc["summary"]["map"]["full"]["mean"] == pytest.approx(a.mean(), abs=1e-12)
    # Holm over the family of 2 measures x 1 pair
    assert doc["correction"] == {"method": "holm", "family_size": {
        "t": 2, "randomization": 2, "bootstrap": 2}}
    ps = sorted(p["t_test"]["p_value"] for p in doc["pairs"])
    assert sorted(p["t_test"]["p_adjusted"] for p in doc["pairs"]) == pytest.approx(
        [min(1, 2 * ps[0]), min(1, max(2 * ps[0], ps[1]))])
    assert set(doc["provenance"]["runs"]) == {"full", "trunc"}
    assert len(doc["provenance"]["qrels_sha256"]) == 64


def test_comparison_equals_the_library(client):
    resp = client.post("/v1/comparisons", json={
        "runs": [{"name": "A", "run": A}, {"name": "B", "run": B}], "qrels": SMALL_QRELS,
        "measures": ["map"], "baseline": "A", "seed": 3, "permutations": 500})
    assert resp.status_code == 200
    doc = resp.get_json()
    lib = compare(SMALL_QRELS, {"A": A, "B": B}, ["map"], baseline="A", seed=3,
                  n_permutations=500, per_topic=True, curves=True)
    pair, lib_pair = doc["pairs"][0], lib["pairs"][0]
    for key in ("mean_diff", "ci_low", "ci_high", "wins", "ties", "losses", "largest_losses",
                "t_test", "randomization", "bootstrap"):
        assert pair[key] == lib_pair[key], key
    assert pair["mean_diff"] == pytest.approx(-0.2)  # (0.5 - 1) on 2 of 5 topics
    assert (pair["wins"], pair["ties"], pair["losses"]) == (0, 3, 2)
    assert [x["topic"] for x in pair["largest_losses"]] == ["t1", "t2"]


def test_gate_fails_with_reasons_and_offending_topics(client):
    worse = {f"t{i}": {"r": 1.0, "x": 2.0} for i in range(1, 21)}
    good = {f"t{i}": {"r": 2.0, "x": 1.0} for i in range(1, 21)}
    qrels = {f"t{i}": {"r": 1} for i in range(1, 21)}
    resp = client.post("/v1/comparisons", json={
        "runs": [{"name": "prod", "run": good}, {"name": "candidate", "run": worse}],
        "qrels": qrels, "measures": ["map"], "baseline": "prod", "gate": "map:0.01"})
    assert resp.status_code == 200
    gate = resp.get_json()["gate"]
    assert gate["verdict"] == "fail"
    check = gate["checks"][0]
    assert check["candidate"] == "candidate" and check["drop"] == pytest.approx(0.5)
    assert len(check["offending_topics"]) == 20
    passing = client.post("/v1/comparisons", json={
        "runs": [{"name": "prod", "run": good}, {"name": "candidate", "run": good}],
        "qrels": qrels, "measures": ["map"], "gate": {"measure": "map", "max_drop": 0.01}})
    assert passing.get_json()["gate"]["verdict"] == "pass"


@pytest.mark.parametrize("payload, path", [
    ({"runs": [{"run": FULL}], "qrels": QRELS}, "runs"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}]}, "qrels"),
    ({"runs": [{"run": FULL}, {"run": TRUNC, "evaluation_id": "0" * 32}], "qrels": QRELS},
     "runs[1].run"),
    ({"runs": [{"name": "x", "run": FULL}, {"name": "x", "run": TRUNC}], "qrels": QRELS},
     "runs[1].name"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "baseline": "nope"},
     "baseline"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "correction": "sidak"},
     "correction"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "alpha": 1.5}, "alpha"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "tests": ["z"]}, "tests[0]"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "gate": "map"}, "gate"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS,
      "gate": {"measure": "map", "max_drop": -1}}, "gate.max_drop"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "gate": "nope:0.1"},
     "gate.measure"),
    ({"runs": [{"run": FULL}, {"run": "301 Q0 d 1 x run\n"}], "qrels": QRELS},
     "runs[1] line 1"),
    ({"runs": [{"run": FULL}, {"run": {"301": {"d": "high"}}}], "qrels": QRELS},
     "runs[1].301.d"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "measures": ["gm_map"]},
     "measures"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "measures": ["nope"]},
     "measures"),
    ({"runs": [{"run": FULL}, {"evaluation_id": "f" * 32}], "qrels": QRELS},
     "runs[1].evaluation_id"),
    ({"runs": [{"run": FULL}, {"run": TRUNC}], "qrels": QRELS, "extra": 1}, "extra"),
])
def test_bad_comparisons_name_the_field(client, payload, path):
    resp = client.post("/v1/comparisons", json=payload)
    assert resp.status_code == 422, resp.get_json()
    assert resp.mimetype == "application/problem+json"
    assert path in resp.get_json()["errors"], resp.get_json()


def test_comparison_as_html_and_text(client):
    page = client.post("/v1/comparisons", json=body(baseline="full"),
                       headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert html.count('class="chart pr-curve"') == 1 and 'class="chart topic-diff"' in html
    assert "http://" not in html and "https://" not in html  # self-contained
    text = client.post("/v1/comparisons", json=body(), headers={"Accept": "text/plain"})
    assert text.status_code == 200 and "trunc" in text.get_data(as_text=True)
    assert client.post("/v1/comparisons", json=body(),
                       headers={"Accept": "image/png"}).status_code == 406


def test_comparison_from_uploaded_files(client):
    resp = client.post("/v1/comparisons", data={
        "runs": [(io.BytesIO(FULL.encode()), "full.txt"), (io.BytesIO(TRUNC.encode()),
                                                           "trunc.txt")],
        "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"), "measures": "map,P.10",
        "baseline": "full", "permutations": "1000", "gate": "map:0.5"},
        content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert [r["name"] for r in doc["runs"]] == ["full", "trunc"]  # the CLI's naming rule
    assert doc["baseline"] == "full" and doc["gate"]["verdict"] == "pass"
    bad = client.post("/v1/comparisons", data={
        "runs": [(io.BytesIO(FULL.encode()), "a.txt"), (io.BytesIO(TRUNC.encode()), "b.txt")],
        "qrels": (io.BytesIO(QRELS.encode()), "q.txt"), "alpha": "low"},
        content_type="multipart/form-data")
    assert bad.status_code == 422 and "alpha" in bad.get_json()["errors"]


def test_large_uploads_keep_their_file_names(client, monkeypatch):
    """Bodies of 1 MiB or more are cut by service.multipart: the runs keep their names."""
    from service import evaluation_request

    monkeypatch.setattr(evaluation_request, "FAST_MULTIPART_MIN_BYTES", 0)
    resp = client.post("/v1/comparisons", data={
        "runs": [(io.BytesIO(FULL.encode()), "full.txt"), (io.BytesIO(TRUNC.encode()),
                                                           "trunc.txt")],
        "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"), "measures": "map"},
        content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    assert [r["name"] for r in resp.get_json()["runs"]] == ["full", "trunc"]


def test_finished_evaluations_compared_by_id_and_their_report_pages(client):
    ids = []
    for run in (FULL, TRUNC):
        resp = client.post("/v1/evaluations", json={"run": run, "qrels": QRELS,
                                                     "measures": ["map", "P.10"]},
                           headers={"Prefer": "respond-async"})
        assert resp.status_code == 202
        assert finished_job(client, resp.headers["Location"])["status"] == "finished"
        ids.append(resp.headers["Location"].rsplit("/", 1)[1])
    by_id = client.post("/v1/comparisons", json={
        "runs": [{"name": "full", "evaluation_id": ids[0]},
                 {"name": "trunc", "evaluation_id": ids[1]}], "measures": ["map", "P.10"]})
    assert by_id.status_code == 200, by_id.get_json()
    inline = client.post("/v1/comparisons", json=body()).get_json()
    doc = by_id.get_json()
    assert doc["pairs"] == inline["pairs"] and doc["summary"] == inline["summary"]
    assert doc["provenance"]["runs"]["full"]["evaluation_id"] == ids[0]
    # other qrels than the evaluations were made against: refused
    other = client.post("/v1/comparisons", json={
        "runs": [{"evaluation_id": ids[0]}, {"run": TRUNC}], "qrels": {"301": {"d": 1}}})
    assert other.status_code == 422 and "runs[0].evaluation_id" in other.get_json()["errors"]
    # a browser asking for the job gets its report page; so does /report
    page = client.get(f"/v1/jobs/{ids[0]}", headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert 'class="chart topic-bars"' in page.get_data(as_text=True)
    assert client.get(f"/v1/jobs/{ids[0]}/report").mimetype == "text/html"
    assert client.get(f"/v1/jobs/{ids[0]}").mimetype == "application/json"


def test_queued_comparison_has_the_same_result_and_a_report(client):
    resp = client.post("/v1/comparisons", json=body(), headers={"Prefer": "respond-async"})
    assert resp.status_code == 202 and resp.headers["Location"].startswith("/v1/jobs/")
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    inline = client.post("/v1/comparisons", json=body()).get_json()
    assert job["result"]["pairs"] == inline["pairs"]
    page = client.get(resp.headers["Location"] + "/report")
    assert page.mimetype == "text/html" and 'class="chart pr-curve"' in page.get_data(
        as_text=True)


def test_evaluation_as_html(client):
    page = client.post("/v1/evaluations", json={"run": FULL, "qrels": QRELS},
                       headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert 'class="chart pr-curve"' in html and 'class="chart topic-bars"' in html


def test_pool_by_hand(client):
    runs = [{"name": "a", "run": {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0},
                                  "q2": {"e1": 1.0, "e2": 1.0}}},
            {"name": "b", "run": {"q1": {"d4": 3.0, "d1": 2.0}}}]
    resp = client.post("/v1/pools", json={"runs": runs, "depth": 1})
    assert resp.status_code == 200
    doc = resp.get_json()
    # q2's tie is broken by docno descending (trec_eval): e2 ranks first
    assert doc["topics"] == {"q1": ["d1", "d4"], "q2": ["e2"]}
    assert doc["total"] == 3 and doc["contributed"] == {"a": 2, "b": 1}
    text = client.post("/v1/pools", json={"runs": runs, "depth": 2},
                       headers={"Accept": "text/plain"})
    assert text.get_data(as_text=True).splitlines()[:3] == ["q1 0 d1", "q1 0 d2", "q1 0 d4"]


def test_pool_leaves_out_judged_documents(client):
    assert client.put("/v1/qrels/pool-test", json={"qrels": {"q1": {"d1": 0}}}).status_code == 201
    runs = [{"run": {"q1": {"d1": 3.0, "d2": 2.0}}}, {"run": {"q1": {"d3": 1.0}}}]
    doc = client.post("/v1/pools", json={"runs": runs, "depth": 2,
                                         "qrels_id": "pool-test"}).get_json()
    assert doc["topics"] == {"q1": ["d2", "d3"]} and doc["already_judged"] == 1


@pytest.mark.parametrize("payload, path", [
    ({"runs": [{"run": FULL}]}, "depth"),
    ({"runs": [{"run": FULL}], "depth": 0}, "depth"),
    ({"runs": [], "depth": 3}, "runs"),
    ({"runs": [{"name": "x"}], "depth": 3}, "runs[0].run"),
    ({"runs": [{"run": FULL}], "depth": 3, "qrels_id": "missing-qrels"}, "qrels_id"),
    ({"runs": [{"run": "x y\n"}], "depth": 3}, "runs[0] line 1"),
])
def test_bad_pools_name_the_field(client, payload, path):
    resp = client.post("/v1/pools", json=payload)
    assert resp.status_code == 422 and resp.mimetype == "application/problem+json"
    assert path in resp.get_json()["errors"], resp.get_json()
