"""Recorded results over the API (issue #18): record from POST /v1/evaluations (sync, and the
embedded queue), read back, list/filter/paginate, delete, pin a baseline, the trend, and
tenant isolation on every new route. Every response is checked against openapi.yaml (the
contract client); each test records in a SQLite file of its own (conftest)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from conftest import ContractClient, finished_job
from scipy import stats

from service.app import create_app
from service.auth import key_line

RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0},
       "q3": {"d6": 1.0, "d7": 0.5}, "q4": {"d8": 4.0, "d9": 3.0}}
QRELS = {"q1": {"d1": 1, "d3": 1}, "q2": {"d5": 2}, "q3": {"d6": 1, "d9": 1},
         "q4": {"d9": 1, "d10": 1}}
MEASURES = ["map", "P.2", "ndcg_cut.10"]
RESULTS_ON_POSTGRES = True  # every test here runs on SQLite and on PostgreSQL (conftest)


def _evaluate(client, record, headers=None, **extra):
    body = {"run": RUN, "qrels": QRELS, "measures": MEASURES, **extra}
    if record is not None:
        body["record"] = record
    return client.post("/v1/evaluations", json=body, headers=headers or {})


@pytest.fixture
def clocked(app):
    """The store's clock: one day later at each recording, from 2026-11-01 06:00 UTC."""
    times = iter(datetime(2026, 11, 1, 6, tzinfo=UTC) + timedelta(days=i) for i in range(100))
    app.extensions["results"].clock = lambda: next(times)
    return app


def test_record_from_the_sync_path_and_read_it_back(client):
    resp = _evaluate(client, {"system": "bm25", "label": "nightly-1", "commit": "abc123",
                              "tags": ["nightly", "main"]})
    assert resp.status_code == 200
    doc = resp.get_json()
    recorded = doc["recorded"]
    assert recorded["system"] == "bm25" and recorded["label"] == "nightly-1"
    assert len(recorded["id"]) == 32
    got = client.get(f"/v1/results/{recorded['id']}").get_json()
    assert got["id"] == recorded["id"] and got["system"] == "bm25"
    assert got["commit"] == "abc123" and got["tags"] == ["nightly", "main"]
    assert got["aggregate"] == doc["aggregate"]
    assert got["document"]["per_topic"] == doc["per_topic"]
    assert got["document"]["aggregate"] == doc["aggregate"]
    assert got["document"]["provenance"]["run_sha256"] == doc["provenance"]["run_sha256"]
    assert got["measures"] == [m["key"] for m in doc["measures"]]
    # the evaluation's numbers, as an unrecorded evaluation gives them
    plain = _evaluate(client, None).get_json()
    assert "recorded" not in plain
    assert plain["aggregate"] == got["aggregate"]
    assert plain["per_topic"] == got["document"]["per_topic"]


def test_per_topic_values_are_recorded_even_when_not_asked_for(client):
    doc = _evaluate(client, {"system": "bm25", "label": "x"}, per_topic=False).get_json()
    assert "per_topic" not in doc and doc["recorded"]["system"] == "bm25"
    got = client.get(f"/v1/results/{doc['recorded']['id']}").get_json()
    assert set(got["document"]["per_topic"]) == {"q1", "q2", "q3", "q4"}
    # curves asked for without per-topic values: the answer has none per topic
    doc = _evaluate(client, {"system": "bm25", "label": "y"}, per_topic=False,
                    curves=True).get_json()
    assert "per_topic" not in doc and "per_topic" not in doc["curves"]


def test_record_from_the_embedded_queue(client):
    resp = _evaluate(client, {"system": "queued", "label": "async-1"},
                     headers={"Prefer": "respond-async"})
    assert resp.status_code == 202
    location = resp.headers["Location"]
    job = finished_job(client, location)
    assert job["status"] == "finished", job
    recorded = job["result"]["recorded"]
    got = client.get(f"/v1/results/{recorded['id']}").get_json()
    assert got["system"] == "queued" and got["label"] == "async-1"
    assert got["aggregate"] == job["result"]["aggregate"]


def test_systems_list_filter_paginate_and_delete(client, clocked):
    ids = []
    for i in range(5):
        tags = ["nightly"] if i % 2 == 0 else ["manual"]
        ids.append(_evaluate(client, {"system": "bm25", "label": f"night-{i}",
                                      "tags": tags}).get_json()["recorded"]["id"])
    _evaluate(client, {"system": "dense", "label": "only"})
    systems = client.get("/v1/systems").get_json()["items"]
    assert [s["name"] for s in systems] == ["bm25", "dense"]
    assert systems[0]["results"] == 5 and systems[0]["baseline"] is None
    assert systems[0]["latest"].startswith("2026-11-05T06:00:00")

    page = client.get("/v1/systems/bm25/results?limit=2").get_json()
    assert page["total"] == 5 and [r["id"] for r in page["items"]] == ids[::-1][:2]
    assert page["next"] == "/v1/systems/bm25/results?offset=2&limit=2"
    page = client.get(page["next"]).get_json()
    assert [r["id"] for r in page["items"]] == ids[::-1][2:4]
    last = client.get("/v1/systems/bm25/results?offset=4&limit=2").get_json()
    assert [r["id"] for r in last["items"]] == ids[:1] and last["next"] is None

    tagged = client.get("/v1/systems/bm25/results?tag=nightly").get_json()
    assert [r["label"] for r in tagged["items"]] == ["night-4", "night-2", "night-0"]
    window = client.get("/v1/systems/bm25/results",
                        query_string={"since": "2026-11-02T00:00:00Z",
                                      "until": "2026-11-04T06:00:00+00:00"}).get_json()
    assert [r["label"] for r in window["items"]] == ["night-3", "night-2", "night-1"]
    since = client.get("/v1/systems/bm25/results?since=2026-11-04&tag=nightly&limit=1")
    body = since.get_json()
    assert body["total"] == 1 and body["items"][0]["label"] == "night-4"
    assert client.get("/v1/systems/bm25/results?qrels_version=x@0123456789abcdef"
                      ).get_json()["total"] == 0

    for query, field in (("since=yesterday", "since"), ("until=2026-13-01", "until"),
                         ("limit=0", "limit"), ("offset=-1", "offset"), ("limit=x", "limit")):
        resp = client.get(f"/v1/systems/bm25/results?{query}")
        assert resp.status_code == 400 and field in resp.get_json()["errors"], query
    assert client.get("/v1/systems/nobody/results").status_code == 404

    assert client.delete(f"/v1/results/{ids[0]}").status_code == 204
    assert client.get(f"/v1/results/{ids[0]}").status_code == 404
    assert client.delete(f"/v1/results/{ids[0]}").status_code == 404
    assert client.get("/v1/systems/bm25/results").get_json()["total"] == 4
    bad = client.get("/v1/results/not-an-id")
    assert bad.status_code == 422 and "result_id" in bad.get_json()["errors"]
    # a system whose results are all deleted is no longer listed
    only = client.get("/v1/systems/dense/results").get_json()["items"][0]["id"]
    assert client.delete(f"/v1/results/{only}").status_code == 204
    assert [s["name"] for s in client.get("/v1/systems").get_json()["items"]] == ["bm25"]
    assert client.get("/v1/systems/dense/results").status_code == 404


def test_query_filters_are_kept_in_next(client):
    for i in range(3):
        _evaluate(client, {"system": "s p/ace", "label": f"l{i}", "tags": ["t 1"]})
    # (not contract-checked: the checker matches the decoded path, where %2F is a "/")
    page = client.get("/v1/systems/s p%2Face/results", check=False,
                      query_string={"tag": "t 1", "limit": 1}).get_json()
    assert page["total"] == 3
    assert page["next"] == "/v1/systems/s%20p%2Face/results?tag=t+1&offset=1&limit=1"
    again = client.get(page["next"], check=False).get_json()
    assert again["total"] == 3 and again["offset"] == 1


def test_baseline_pin(client):
    a = _evaluate(client, {"system": "bm25", "label": "a"}).get_json()["recorded"]["id"]
    b = _evaluate(client, {"system": "bm25", "label": "b"}).get_json()["recorded"]["id"]
    other = _evaluate(client, {"system": "dense", "label": "c"}).get_json()["recorded"]["id"]
    assert client.get("/v1/systems/bm25/baseline").status_code == 404
    pinned = client.put("/v1/systems/bm25/baseline", json={"result_id": a})
    assert pinned.status_code == 200 and pinned.get_json()["id"] == a
    assert client.get("/v1/systems/bm25/baseline").get_json()["label"] == "a"
    assert client.put("/v1/systems/bm25/baseline", json={"result_id": b}).status_code == 200
    assert client.get("/v1/systems/bm25/baseline").get_json()["id"] == b
    systems = {s["name"]: s for s in client.get("/v1/systems").get_json()["items"]}
    assert systems["bm25"]["baseline"] == b and systems["dense"]["baseline"] is None
    # another system's result, an unknown one, a malformed body
    assert client.put("/v1/systems/bm25/baseline",
                      json={"result_id": other}).status_code == 404
    assert client.put("/v1/systems/bm25/baseline",
                      json={"result_id": "0" * 32}).status_code == 404
    for body, field in (({}, "result_id"), ({"result_id": "x"}, "result_id"),
                        ({"result_id": a, "extra": 1}, "extra"),
                        ({"result_id": 5}, "result_id")):
        resp = client.put("/v1/systems/bm25/baseline", json=body)
        assert resp.status_code == 422 and field in resp.get_json()["errors"], body
    assert client.put("/v1/systems/bm25/baseline", data="{",
                      content_type="application/json").status_code == 400
    assert client.put("/v1/systems/bm25/baseline", data=a,
                      content_type="text/plain").status_code == 415
    # deleting the baseline unpins it
    assert client.delete(f"/v1/results/{b}").status_code == 204
    assert client.get("/v1/systems/bm25/baseline").status_code == 404


def test_trend_numbers(client, clocked):
    docs = [_evaluate(client, {"system": "bm25", "label": f"n{i}"},
                      run=RUN if i != 1 else {**RUN, "q1": {"d2": 3.0, "d1": 1.0}}).get_json()
            for i in range(3)]
    a = docs[0]["recorded"]["id"]
    client.put("/v1/systems/bm25/baseline", json={"result_id": a})
    trend = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    assert trend["system"] == "bm25" and trend["measure"] == "map" and trend["baseline"] == a
    assert [p["label"] for p in trend["points"]] == ["n0", "n1", "n2"]
    for point, doc in zip(trend["points"], docs, strict=True):
        values = np.array([row["map"] for row in doc["per_topic"].values()])
        assert point["id"] == doc["recorded"]["id"]
        assert point["n_topics"] == len(values) == 4
        assert math.isclose(point["mean"], values.mean(), rel_tol=1e-12)
        assert math.isclose(point["mean"], doc["aggregate"]["map"], rel_tol=1e-12)
        half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(4)
        assert math.isclose(point["ci_low"], values.mean() - half, rel_tol=1e-9)
        assert math.isclose(point["ci_high"], values.mean() + half, rel_tol=1e-9)
    assert trend["points"][1]["mean"] < trend["points"][0]["mean"]
    assert trend["points"][0]["created_at"].startswith("2026-11-01T06:00:00")
    # a measure no result has: 404 naming those they have (issue #25: not an empty 200); no
    # measure: 400; unknown system: 404
    missing = client.get("/v1/systems/bm25/trend?measure=P_1000")
    assert missing.status_code == 404 and "map" in missing.get_json()["recorded_measures"]
    resp = client.get("/v1/systems/bm25/trend")
    assert resp.status_code == 400 and "measure" in resp.get_json()["errors"]
    assert client.get("/v1/systems/nobody/trend?measure=map").status_code == 404


@pytest.mark.parametrize(("record", "field"), [
    ({"label": "x"}, "record.system"),
    ({"system": "s"}, "record.label"),
    ({"system": "", "label": "x"}, "record.system"),
    ({"system": "s" * 201, "label": "x"}, "record.system"),
    ({"system": "s", "label": "line\nbreak"}, "record.label"),
    ({"system": "s", "label": "x", "commit": ""}, "record.commit"),
    ({"system": "s", "label": "x", "tags": ["t"] * 21}, "record.tags"),
    ({"system": "s", "label": "x", "tags": ["t" * 65]}, "record.tags[0]"),
    ({"system": "s", "label": "x", "tags": ["ok", 3]}, "record.tags[1]"),
    ({"system": "s", "label": "x", "colour": "red"}, "record.colour"),
    ({"system": 5, "label": "x"}, "record.system"),
    ("bm25", "record"),
])
def test_bad_record_fields_are_named(client, record, field):
    resp = _evaluate(client, record)
    assert resp.status_code == 422
    assert field in resp.get_json()["errors"], resp.get_json()
    assert client.get("/v1/systems").get_json()["items"] == []


def test_record_limits_accepted(client):
    record = {"system": "s" * 200, "label": "é " * 100, "commit": None,
              "tags": [f"t{i}" for i in range(19)] + ["x" * 64]}
    doc = _evaluate(client, record).get_json()
    got = client.get(f"/v1/results/{doc['recorded']['id']}").get_json()
    assert got["label"] == record["label"] and len(got["tags"]) == 20


KEYS = {"write-a": ("write", "team-a"), "read-a": ("read", "team-a"),
        "write-b": ("write", "team-b")}


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def keyed():
    lines = ";".join(key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items())
    return ContractClient(create_app({"TESTING": True, "API_KEYS": lines}).test_client())


def test_tenant_isolation_on_every_route(keyed):
    doc = _evaluate(keyed, {"system": "shared", "label": "a"}, headers=auth("write-a"))
    rid = doc.get_json()["recorded"]["id"]
    keyed.put("/v1/systems/shared/baseline", json={"result_id": rid}, headers=auth("write-a"))
    b = auth("write-b")
    assert keyed.get("/v1/systems", headers=b).get_json()["items"] == []
    for path, accept in (("/v1/systems/shared/results", None), (f"/v1/results/{rid}", None),
                         ("/v1/systems/shared/baseline", None),
                         ("/v1/systems/shared/trend?measure=map", None),
                         ("/v1/systems/shared/trend?measure=map", "text/html"),
                         (f"/v1/results/{rid}/comparison?with={rid}", None),
                         (f"/v1/results/{rid}/comparison?with={rid}", "text/html")):
        resp = keyed.get(path, headers={**b, **({"Accept": accept} if accept else {})})
        assert resp.status_code == 404, path
        assert resp.get_json()["type"].endswith("not-found") or resp.get_json()["status"] == 404
    assert keyed.delete(f"/v1/results/{rid}", headers=b).status_code == 404
    assert keyed.put("/v1/systems/shared/baseline", json={"result_id": rid},
                     headers=b).status_code == 404
    # b's own "shared" system is b's; a's is untouched
    rb = _evaluate(keyed, {"system": "shared", "label": "b"}, headers=b).get_json()
    assert keyed.put("/v1/systems/shared/baseline", json={"result_id": rid},
                     headers=b).status_code == 404
    a = auth("read-a")
    assert [r["label"] for r in keyed.get("/v1/systems/shared/results", headers=a)
            .get_json()["items"]] == ["a"]
    assert keyed.get("/v1/systems/shared/baseline", headers=a).get_json()["id"] == rid
    assert keyed.get(f"/v1/results/{rb['recorded']['id']}", headers=a).status_code == 404
    assert [p["label"] for p in keyed.get("/v1/systems/shared/trend?measure=map",
                                          headers=a).get_json()["points"]] == ["a"]
    # roles: a read key reads, may not delete or pin
    assert keyed.delete(f"/v1/results/{rid}", headers=a).status_code == 403
    assert keyed.put("/v1/systems/shared/baseline", json={"result_id": rid},
                     headers=a).status_code == 403
    assert keyed.delete(f"/v1/results/{rid}", headers=auth("write-a")).status_code == 204


def test_test_apps_record_in_their_own_database(app, results_database):
    assert app.extensions["results"].url == results_database
    assert app.config["DATABASE_URL"] == results_database
    other = create_app({"TESTING": True, "DATABASE_URL": "sqlite://"})
    assert other.extensions["results"].url == "sqlite://"


def test_an_unreachable_database_is_503(app, client):
    from sqlalchemy.exc import OperationalError

    def down(*args, **kwargs):
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    app.extensions["results"].systems = down
    resp = client.get("/v1/systems")
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "5"
    assert resp.get_json()["detail"] == "the database is unreachable; retry shortly"


def test_systems_are_listed_in_pages(client):
    for name in ("c", "a", "b", "d", "e"):
        _evaluate(client, {"system": name, "label": "x"})
    page = client.get("/v1/systems?limit=2").get_json()
    assert [s["name"] for s in page["items"]] == ["a", "b"]
    assert (page["total"], page["offset"], page["limit"]) == (5, 0, 2)
    assert page["next"] == "/v1/systems?offset=2&limit=2"
    page = client.get(page["next"]).get_json()
    assert [s["name"] for s in page["items"]] == ["c", "d"]
    last = client.get(page["next"]).get_json()
    assert [s["name"] for s in last["items"]] == ["e"] and last["next"] is None
    assert client.get("/v1/systems?offset=9").get_json()["items"] == []
    for bad in ("limit=0", "limit=1001", "offset=-1", "limit=x"):
        assert client.get(f"/v1/systems?{bad}").status_code == 400, bad


def test_page_size_is_bounded_by_configuration():
    small = ContractClient(create_app({"TESTING": True, "MAX_PAGE_ITEMS": 3}).test_client())
    for i in range(5):
        _evaluate(small, {"system": "s", "label": f"n{i}"})
    assert small.get("/v1/systems/s/results?limit=4").status_code == 400
    assert len(small.get("/v1/systems/s/results?limit=3").get_json()["items"]) == 3
    assert small.get("/v1/systems?limit=4").status_code == 400
    # a trend is the newest MAX_PAGE_ITEMS points unless asked for fewer
    trend = small.get("/v1/systems/s/trend?measure=map").get_json()
    assert [p["label"] for p in trend["points"]] == ["n2", "n3", "n4"]
    assert (trend["total"], trend["limit"]) == (5, 3)
    assert small.get("/v1/systems/s/trend?measure=map&limit=4").status_code == 400


def test_trend_window_and_the_baseline_point(client, clocked):
    ids = [_evaluate(client, {"system": "s", "label": f"n{i}"}).get_json()["recorded"]["id"]
           for i in range(5)]  # 2026-11-01 .. 2026-11-05, 06:00 UTC
    client.put("/v1/systems/s/baseline", json={"result_id": ids[0]})
    trend = client.get("/v1/systems/s/trend?measure=map&limit=2").get_json()
    assert [p["id"] for p in trend["points"]] == ids[3:]
    assert trend["total"] == 5 and trend["baseline"] == ids[0]
    # the baseline is outside the page: its point is still given, for the line
    base = client.get("/v1/systems/s/trend?measure=map&limit=5").get_json()["points"][0]
    assert trend["baseline_point"] == base
    window = client.get("/v1/systems/s/trend?measure=map&since=2026-11-02"
                        "&until=2026-11-03T06:00:00Z").get_json()
    assert [p["label"] for p in window["points"]] == ["n1", "n2"] and window["total"] == 2
    assert client.get("/v1/systems/s/trend?measure=map&since=yesterday").status_code == 400
    long = "2026-11-02" + " " * 60
    assert client.get(f"/v1/systems/s/trend?measure=map&until={long}").status_code == 400
    assert client.get(f"/v1/systems/s/results?since={long}").status_code == 400
    assert client.get("/v1/systems/s/trend?measure=map&limit=0").status_code == 400
    # no baseline pinned: no point
    _evaluate(client, {"system": "t", "label": "x"})
    assert client.get("/v1/systems/t/trend?measure=map").get_json()["baseline_point"] is None


def test_a_comparison_of_recorded_results_reads_each_once(app, client):
    a = _evaluate(client, {"system": "bm25", "label": "a"}).get_json()["recorded"]["id"]
    b = _evaluate(client, {"system": "bm25", "label": "b"}).get_json()["recorded"]["id"]
    store, reads = app.extensions["results"], []
    real_get = store.get

    def get(tenant, result_id):
        reads.append(result_id)
        return real_get(tenant, result_id)

    store.get = get
    try:
        resp = client.get(f"/v1/results/{b}/comparison?with={a}")
    finally:
        del store.get
    assert resp.status_code == 200, resp.get_json()
    assert sorted(reads) == sorted([a, b])


@pytest.mark.parametrize("accept", ["application/json", "text/html"])
def test_a_recorded_evaluation_computes_its_details_once(client, monkeypatch, accept):
    import service.evaluations as evaluations

    calls = []
    real = evaluations.details_for
    monkeypatch.setattr(evaluations, "details_for",
                        lambda *args: calls.append(1) or real(*args))
    resp = _evaluate(client, {"system": "bm25", "label": "d"}, headers={"Accept": accept},
                     details=True)
    assert resp.status_code == 200 and resp.mimetype == accept
    assert len(calls) == 1
    if accept == "application/json":
        assert resp.get_json()["details"]
