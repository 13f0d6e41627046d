"""Comparisons against recorded results (issue #18): runs named by ``result_id``, and a gate
against a system's pinned baseline (``"baseline": {"system": NAME}``), so a nightly job sends
only tonight's run. Every response is checked against openapi.yaml (the contract client);
each test records in a SQLite file of its own (conftest)."""

from __future__ import annotations

import pytest
from conftest import ContractClient, finished_job

from service.app import create_app
from service.auth import key_line

TOPICS = [f"t{i}" for i in range(1, 21)]
QRELS = {t: {"r": 1} for t in TOPICS}
GOOD = {t: {"r": 2.0, "x": 1.0} for t in TOPICS}                 # AP 1 on every topic
WORSE_ON = {"t3", "t7", "t11", "t12", "t15", "t19"}
NIGHT3 = {t: ({"r": 1.0, "x": 2.0} if t in WORSE_ON else {"r": 2.0, "x": 1.0})
          for t in TOPICS}                                         # AP 0.5 on WORSE_ON
NIGHT2 = {t: ({"r": 1.0, "x": 2.0} if t == "t1" else {"r": 2.0, "x": 1.0}) for t in TOPICS}
MEASURES = ["map", "P.1"]
RESULTS_ON_POSTGRES = True  # every test here runs on SQLite and on PostgreSQL (conftest)


def _record(client, run, label, system="bm25", headers=None, qrels=None):
    resp = client.post("/v1/evaluations", headers=headers or {}, json={
        "run": run, "qrels": qrels or QRELS, "measures": MEASURES,
        "record": {"system": system, "label": label, "tags": ["nightly"]}})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()["recorded"]["id"]


def _nights(client, headers=None):
    ids = [_record(client, run, f"night-{i}", headers=headers)
           for i, run in enumerate((GOOD, NIGHT2, NIGHT3), start=1)]
    return ids


def _problem(resp, field):
    body = resp.get_json()
    assert resp.status_code == 422, body
    assert field in body["errors"], body
    return " ".join(body["errors"][field])


def test_nightly_gate_against_the_pinned_baseline(client):
    n1, n2, n3 = _nights(client)
    assert client.put("/v1/systems/bm25/baseline", json={"result_id": n1}).status_code == 200
    # tonight's run, inline, against the accepted baseline: fails on the topics it lost
    resp = client.post("/v1/comparisons", json={
        "runs": [{"name": "tonight", "run": NIGHT3}], "qrels": QRELS, "measures": MEASURES,
        "baseline": {"system": "bm25"}, "gate": "map:0.05"})
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert doc["baseline"] == "bm25@night-1"
    assert [r["name"] for r in doc["runs"]] == ["tonight", "bm25@night-1"]
    assert doc["provenance"]["runs"]["bm25@night-1"]["result_id"] == n1
    gate = doc["gate"]
    assert gate["verdict"] == "fail"
    check = gate["checks"][0]
    assert check["baseline"] == "bm25@night-1" and check["candidate"] == "tonight"
    assert check["drop"] == pytest.approx(0.5 * len(WORSE_ON) / len(TOPICS))
    assert {t["topic"] for t in check["offending_topics"]} == WORSE_ON
    # the recorded third night against the baseline: the same verdict without any run sent
    by_id = client.post("/v1/comparisons", json={
        "runs": [{"result_id": n3}], "measures": MEASURES, "baseline": {"system": "bm25"},
        "gate": "map:0.05"}).get_json()
    assert by_id["gate"]["verdict"] == "fail"
    assert by_id["gate"]["checks"][0]["candidate"] == "bm25@night-3"
    assert by_id["pairs"][0]["mean_diff"] == doc["pairs"][0]["mean_diff"]
    assert ({t["topic"] for t in by_id["gate"]["checks"][0]["offending_topics"]}
            == WORSE_ON)
    # a small drop within the gate passes
    night2 = client.post("/v1/comparisons", json={
        "runs": [{"result_id": n2}], "measures": MEASURES, "baseline": {"system": "bm25"},
        "gate": "map:0.05"}).get_json()
    assert night2["gate"]["verdict"] == "pass"


def test_compare_by_result_ids_equals_comparing_the_runs_inline(client):
    n1, _, n3 = _nights(client)
    by_id = client.post("/v1/comparisons", json={
        "runs": [{"result_id": n1}, {"result_id": n3}], "measures": MEASURES,
        "baseline": "bm25@night-1", "seed": 3, "permutations": 500})
    assert by_id.status_code == 200, by_id.get_json()
    inline = client.post("/v1/comparisons", json={
        "runs": [{"name": "bm25@night-1", "run": GOOD}, {"name": "bm25@night-3", "run": NIGHT3}],
        "qrels": QRELS, "measures": MEASURES, "baseline": "bm25@night-1", "seed": 3,
        "permutations": 500})
    doc, want = by_id.get_json(), inline.get_json()
    assert doc["pairs"] == want["pairs"] and doc["summary"] == want["summary"]
    assert doc["per_topic"] == want["per_topic"] and doc["topics"] == want["topics"]
    assert doc["provenance"]["runs"]["bm25@night-3"]["result_id"] == n3
    assert doc["provenance"]["qrels_sha256"] == want["provenance"]["qrels_sha256"]
    # named entries keep their names; an id and an inline run mix
    mixed = client.post("/v1/comparisons", json={
        "runs": [{"name": "old", "result_id": n1}, {"name": "new", "run": NIGHT3}],
        "qrels": QRELS, "measures": MEASURES, "baseline": "old", "seed": 3,
        "permutations": 500}).get_json()
    assert mixed["pairs"][0]["mean_diff"] == want["pairs"][0]["mean_diff"]


def test_unknown_result_id_and_no_pinned_baseline_are_422(client):
    n1 = _record(client, GOOD, "night-1")
    resp = client.post("/v1/comparisons", json={
        "runs": [{"result_id": n1}, {"result_id": "0" * 32}], "measures": MEASURES})
    _problem(resp, "runs[1].result_id")
    message = _problem(client.post("/v1/comparisons", json={
        "runs": [{"result_id": n1}], "measures": MEASURES, "baseline": {"system": "bm25"}}),
        "baseline.system")
    assert message == "no baseline pinned for system bm25: PUT /v1/systems/bm25/baseline"
    _problem(client.post("/v1/comparisons", json={
        "runs": [{"result_id": n1}], "baseline": {"system": "nobody"}}), "baseline.system")
    # one run needs a system's baseline; an entry names one source
    _problem(client.post("/v1/comparisons", json={"runs": [{"result_id": n1}]}), "runs")
    resp = client.post("/v1/comparisons", json={
        "runs": [{"result_id": n1, "run": GOOD}, {"result_id": n1}], "qrels": QRELS})
    assert resp.status_code == 422
    # the pinned baseline's default name clashes with a run's
    client.put("/v1/systems/bm25/baseline", json={"result_id": n1})
    _problem(client.post("/v1/comparisons", json={
        "runs": [{"result_id": n1}], "measures": MEASURES, "baseline": {"system": "bm25"}}),
        "baseline.system")
    for baseline in ({"system": ""}, {"system": "bm25", "x": 1}, 5):
        resp = client.post("/v1/comparisons", json={
            "runs": [{"result_id": n1}], "baseline": baseline})
        assert resp.status_code == 422, baseline


def test_measures_and_qrels_must_match_the_recorded_result(client):
    n1 = _record(client, GOOD, "night-1")
    client.put("/v1/systems/bm25/baseline", json={"result_id": n1})
    message = _problem(client.post("/v1/comparisons", json={
        "runs": [{"name": "tonight", "run": NIGHT3}], "qrels": QRELS,
        "measures": ["map", "ndcg_cut.10", "recip_rank"], "baseline": {"system": "bm25"}}),
        "baseline.system")
    assert "has no values of ndcg_cut.10, recip_rank (it was recorded with map, P_1)" \
        in message
    other = {t: {"r": 1, "x": 1} for t in TOPICS}
    message = _problem(client.post("/v1/comparisons", json={
        "runs": [{"name": "tonight", "run": NIGHT3}], "qrels": other, "measures": MEASURES,
        "baseline": {"system": "bm25"}}), "baseline.system")
    assert "other qrels" in message
    n_other = _record(client, GOOD, "other-qrels", system="dense", qrels=other)
    message = _problem(client.post("/v1/comparisons", json={
        "runs": [{"result_id": n1}, {"result_id": n_other}], "measures": MEASURES}), "runs")
    assert "different qrels" in message


KEYS = {"write-a": ("write", "team-a"), "write-b": ("write", "team-b")}


def test_another_tenants_results_are_unknown():
    lines = ";".join(key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items())
    keyed = ContractClient(create_app({"TESTING": True, "API_KEYS": lines}).test_client())
    a, b = ({"Authorization": f"Bearer {k}"} for k in KEYS)
    n1 = _record(keyed, GOOD, "night-1", headers=a)
    keyed.put("/v1/systems/bm25/baseline", json={"result_id": n1}, headers=a)
    resp = keyed.post("/v1/comparisons", headers=b, json={
        "runs": [{"result_id": n1}, {"run": NIGHT3}], "qrels": QRELS, "measures": MEASURES})
    _problem(resp, "runs[0].result_id")
    _problem(keyed.post("/v1/comparisons", headers=b, json={
        "runs": [{"run": NIGHT3}], "qrels": QRELS, "measures": MEASURES,
        "baseline": {"system": "bm25"}}), "baseline.system")
    ok = keyed.post("/v1/comparisons", headers=a, json={
        "runs": [{"run": NIGHT3}], "qrels": QRELS, "measures": MEASURES,
        "baseline": {"system": "bm25"}})
    assert ok.status_code == 200, ok.get_json()
    # its own baseline (night-1, AP 1 everywhere) against night 3 (AP 0.5 on 6 of 20 topics)
    pair = next(p for p in ok.get_json()["pairs"] if p["measure"] == "map")
    assert pair["mean_diff"] == pytest.approx(-0.5 * 6 / 20)


def test_queued_comparison_reads_recorded_results(app, client):
    n1, _, n3 = _nights(client)
    client.put("/v1/systems/bm25/baseline", json={"result_id": n1})
    sync = client.post("/v1/comparisons", json={
        "runs": [{"result_id": n3}], "measures": MEASURES, "baseline": {"system": "bm25"},
        "gate": "map:0.05"}).get_json()
    resp = client.post("/v1/comparisons", headers={"Prefer": "respond-async"}, json={
        "runs": [{"result_id": n3}], "measures": MEASURES, "baseline": {"system": "bm25"},
        "gate": "map:0.05"})
    assert resp.status_code == 202
    location = resp.headers["Location"]
    job = finished_job(client, location)
    assert job["status"] == "finished", job
    assert job["result"]["gate"] == sync["gate"] and job["result"]["pairs"] == sync["pairs"]
    # tonight's run inline (a JSON mapping, stored for the job) against the baseline
    resp = client.post("/v1/comparisons", headers={"Prefer": "respond-async"}, json={
        "runs": [{"name": "tonight", "run": NIGHT3}], "qrels": QRELS, "measures": MEASURES,
        "baseline": {"system": "bm25"}, "gate": "map:0.05"})
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert job["result"]["gate"]["verdict"] == "fail"
    assert job["result"]["pairs"][0]["mean_diff"] == sync["pairs"][0]["mean_diff"]
    # a result deleted before the job ran is the job's problem, naming the field
    from backend.contract import ComparisonJob
    from backend.tasks import run_comparison
    from service.comparisons import CompareOptionsSchema

    client.delete(f"/v1/results/{n3}")
    spec = ComparisonJob(measures=MEASURES, options=CompareOptionsSchema().load({}),
                         runs=[{"name": "x", "result_id": n3},
                               {"name": "b", "result_id": n1, "field": "baseline.system"}],
                         tests=["t"])
    outcome = run_comparison(None, spec, lambda _: None, app.extensions["results"])
    assert "runs[0].result_id" in outcome["problem"]["errors"]


def _gated(client, result_id, headers=None):
    resp = client.post("/v1/comparisons", headers=headers or {}, json={
        "runs": [{"result_id": result_id}], "measures": MEASURES,
        "baseline": {"system": "bm25"}, "gate": "map:0.05"})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def test_a_gates_verdict_on_a_recorded_result_is_kept_for_its_trend(client):
    n1, n2, n3 = _nights(client)
    client.put("/v1/systems/bm25/baseline", json={"result_id": n1})
    assert _gated(client, n2)["gate"]["recorded"] == [{"result_id": n2, "verdict": "pass"}]
    third = _gated(client, n3)
    assert third["gate"]["recorded"] == [{"result_id": n3, "verdict": "fail"}]
    # an inline run is nobody's result: nothing kept, nothing said
    inline = client.post("/v1/comparisons", json={
        "runs": [{"name": "tonight", "run": NIGHT3}], "qrels": QRELS, "measures": MEASURES,
        "baseline": {"system": "bm25"}, "gate": "map:0.05"}).get_json()
    assert inline["gate"]["verdict"] == "fail" and "recorded" not in inline["gate"]
    trend = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    assert [p["id"] for p in trend["points"]] == [n1, n2, n3]
    assert [(p["gate"] or {}).get("verdict") for p in trend["points"]] == [None, "pass", "fail"]
    gate = trend["points"][2]["gate"]
    assert gate["baseline"] == n1
    assert gate["checks"] == third["gate"]["checks"]
    assert {t["topic"] for t in gate["checks"][0]["offending_topics"]} == WORSE_ON
    # the means: AP 1 on every topic; 19 of 20; 0.5 on the six topics lost
    assert [p["mean"] for p in trend["points"]] == [
        pytest.approx(1.0), pytest.approx(1 - 0.5 / 20), pytest.approx(1 - 0.5 * 6 / 20)]
    # a later check of the same result replaces the mark (a looser gate passes it)
    looser = client.post("/v1/comparisons", json={
        "runs": [{"result_id": n3}], "measures": MEASURES, "baseline": {"system": "bm25"},
        "gate": "map:0.5"}).get_json()
    assert looser["gate"]["recorded"] == [{"result_id": n3, "verdict": "pass"}]
    trend = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    assert trend["points"][2]["gate"]["verdict"] == "pass"


def test_a_queued_gate_keeps_its_verdict_too(app, client):
    n1, _, n3 = _nights(client)
    client.put("/v1/systems/bm25/baseline", json={"result_id": n1})
    resp = client.post("/v1/comparisons", headers={"Prefer": "respond-async"}, json={
        "runs": [{"result_id": n3}], "measures": MEASURES, "baseline": {"system": "bm25"},
        "gate": "map:0.05"})
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["result"]["gate"]["recorded"] == [{"result_id": n3, "verdict": "fail"}]
    points = client.get("/v1/systems/bm25/trend?measure=map").get_json()["points"]
    assert [(p["gate"] or {}).get("verdict") for p in points] == [None, None, "fail"]


def test_a_result_compared_with_another_by_get(client):
    n1, _, n3 = _nights(client)
    got = client.get(f"/v1/results/{n3}/comparison?with={n1}")
    assert got.status_code == 200, got.get_json()
    doc = got.get_json()
    posted = client.post("/v1/comparisons", json={
        "runs": [{"name": "night-1", "result_id": n1}, {"name": "night-3", "result_id": n3}],
        "baseline": "night-1", "measures": MEASURES}).get_json()
    assert doc["baseline"] == "night-1" and [r["name"] for r in doc["runs"]] == [
        "night-1", "night-3"]
    assert doc["pairs"] == posted["pairs"] and doc["summary"] == posted["summary"]
    assert doc["pairs"][0]["mean_diff"] == pytest.approx(-0.5 * 6 / 20)
    # measures: as asked; by default those both were recorded with
    assert [m["key"] for m in doc["measures"]] == ["map", "P_1"]
    one = client.get(f"/v1/results/{n3}/comparison?with={n1}&measures=map").get_json()
    assert [m["key"] for m in one["measures"]] == ["map"]
    assert one["pairs"] == client.post("/v1/comparisons", json={
        "runs": [{"name": "night-1", "result_id": n1}, {"name": "night-3", "result_id": n3}],
        "baseline": "night-1", "measures": ["map"]}).get_json()["pairs"]
    # as a page and as text, as POST /v1/comparisons gives them
    page = client.get(f"/v1/results/{n3}/comparison?with={n1}", headers={"Accept": "text/html"})
    assert page.mimetype == "text/html" and "night-1 vs night-3" in page.get_data(as_text=True)
    text = client.get(f"/v1/results/{n3}/comparison?with={n1}", headers={"Accept": "text/plain"})
    assert text.mimetype == "text/plain" and "night-3" in text.get_data(as_text=True)
    # the same label twice: told apart by the ids
    again = _record(client, NIGHT3, "night-3")
    same = client.get(f"/v1/results/{again}/comparison?with={n3}").get_json()
    assert [r["name"] for r in same["runs"]] == [f"night-3 ({n3[:8]})", f"night-3 ({again[:8]})"]
    assert same["pairs"][0]["mean_diff"] == 0.0
    # refusals: a bad or unknown id, a measure neither has
    assert client.get(f"/v1/results/{n3}/comparison").status_code == 422
    assert client.get(f"/v1/results/{n3}/comparison?with=xyz").status_code == 422
    assert client.get(f"/v1/results/{n3}/comparison?with={'0' * 32}").status_code == 404
    assert client.get(f"/v1/results/{'0' * 32}/comparison?with={n3}").status_code == 404
    _problem(client.get(f"/v1/results/{n3}/comparison?with={n1}&measures=ndcg"),
             "runs[0].result_id")
    many = ",".join(["map"] * 200)  # 799 characters
    assert client.get(f"/v1/results/{n3}/comparison?with={n1}&measures={many}"
                      ).status_code == 400


def test_the_trend_page(client):
    n1, n2, n3 = _nights(client)
    client.put("/v1/systems/bm25/baseline", json={"result_id": n1})
    _gated(client, n2)
    _gated(client, n3)
    resp = client.get("/v1/systems/bm25/trend?measure=map", headers={"Accept": "text/html"})
    assert resp.status_code == 200 and resp.mimetype == "text/html"
    page = resp.get_data(as_text=True)
    assert page.count('class="chart trend"') == 1
    assert "<script" not in page and "Content-Security-Policy" in page
    for rid, verdict in ((n1, "none"), (n2, "pass"), (n3, "fail")):
        assert f'data-id="{rid}"' in page and f'data-verdict="{verdict}"' in page
    assert 'class="baseline"' in page and f'data-id="{n1}"' in page
    # each point after the first leads to its comparison with the one before
    for rid, prev in ((n2, n1), (n3, n2)):
        href = f"/v1/results/{rid}/comparison?with={prev}&amp;measures=map"
        assert f'href="{href}"' in page
        linked = client.get(href.replace("&amp;", "&"), headers={"Accept": "text/html"})
        assert linked.status_code == 200 and "<svg" in linked.get_data(as_text=True)
    assert f'href="/v1/results/{n1}"' in page
    # the latest gate's verdict and its topics, first thing under the title
    latest = page.index('class="latest latest-fail"')
    assert latest < page.index('class="chart trend"')
    assert all(t in page[latest:page.index("</div>", latest)] for t in WORSE_ON)
    # mounted under a prefix (SCRIPT_NAME), the links keep it
    mounted = client.get("/v1/systems/bm25/trend?measure=map", check=False,
                         headers={"Accept": "text/html"}, base_url="http://localhost/eval")
    assert f'href="/eval/v1/results/{n3}/comparison?with={n2}&amp;measures=map"' in \
        mounted.get_data(as_text=True)
    # a measure none of the system's results has is a problem naming those it has (issue
    # #25: never an empty page), whatever the page asked for
    missing = client.get("/v1/systems/bm25/trend?measure=ndcg", headers={"Accept": "text/html"})
    assert missing.status_code == 404 and missing.mimetype == "application/problem+json"
    assert missing.get_json()["recorded_measures"] == ["map", "P_1"]


@pytest.mark.parametrize("name", ["a\x01b", "a\x7fb", "a\x85b", "x" * 201])
def test_a_baseline_system_is_a_system_name_as_record_and_the_routes_take_it(client, name):
    body = {"runs": [{"result_id": "0" * 32}], "baseline": {"system": name}}
    errors = client.post("/v1/comparisons", json=body).get_json()["errors"]
    assert errors == {"baseline.system": ["must be a system name (1-200 printable characters)"]}
    record = client.post("/v1/evaluations", json={
        "run": GOOD, "qrels": QRELS, "measures": MEASURES,
        "record": {"system": name, "label": "x"}})
    assert record.status_code == 422 and "record.system" in record.get_json()["errors"]


def test_a_queued_comparison_reads_only_the_results_summaries(app, client, monkeypatch):
    """The worker reads the recorded results' values itself: the API, queueing, checks the
    ids and names from their summaries and reads no document."""
    n1, _, n3 = _nights(client)
    client.put("/v1/systems/bm25/baseline", json={"result_id": n1})
    store, reads, submitted = app.extensions["results"], [], []
    monkeypatch.setattr(store, "get", lambda *a: reads.append(a) or None)
    monkeypatch.setattr(app.extensions["cranfield"], "submit",
                        lambda spec, job_id: submitted.append(spec))
    resp = client.post("/v1/comparisons", headers={"Prefer": "respond-async"}, check=False,
                       json={"runs": [{"result_id": n3}], "measures": MEASURES,
                             "baseline": {"system": "bm25"}, "gate": "map:0.05"})
    assert resp.status_code == 202, resp.get_json()
    assert reads == []
    (spec,) = submitted
    assert [(r["name"], r["result_id"]) for r in spec.runs] == [
        ("bm25@night-3", n3), ("bm25@night-1", n1)]
