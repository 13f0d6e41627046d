"""Stored qrels and queued evaluations on the embedded backend (no Redis): the same routes
and code paths the Redis backend serves (tests/integration runs them on real Redis)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import finished_job

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS = {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 1}}
RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d1": 1.0}}


def test_put_get_versions_if_match_list_delete(client):
    resp = client.put("/v1/qrels/trec8", json={"qrels": QRELS})
    assert resp.status_code == 201
    v1 = resp.get_json()["version"]
    assert resp.headers["ETag"] == f'"{v1}"'
    meta = resp.get_json()
    assert meta["topics"] == 2 and meta["judgments"] == 3
    assert meta["judgments_per_grade"] == {"1": 2, "2": 1}
    assert client.put("/v1/qrels/trec8", json={"qrels": QRELS}).status_code == 200  # same
    changed = {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 0}}
    stale = client.put("/v1/qrels/trec8", json={"qrels": changed},
                       headers={"If-Match": '"0000000000000000"'})
    assert stale.status_code == 412 and stale.mimetype == "application/problem+json"
    resp = client.put("/v1/qrels/trec8", json={"qrels": changed}, headers={"If-Match": v1})
    assert resp.status_code == 201
    v2 = resp.get_json()["version"]
    assert v2 != v1 and resp.get_json()["versions"] == [v1, v2]
    assert client.get(f"/v1/qrels/trec8@{v1}").get_json()["judgments_per_grade"] == {
        "1": 2, "2": 1}
    assert client.get("/v1/qrels/trec8").get_json()["version"] == v2
    text = (DATA / "qrels.test").read_bytes()
    assert client.put("/v1/qrels/adhoc", data=text, content_type="text/plain"
                      ).status_code == 201
    listing = client.get("/v1/qrels?limit=1").get_json()
    assert listing["total"] == 2 and [i["id"] for i in listing["items"]] == ["trec8"]
    assert listing["next"] == "/v1/qrels?offset=1&limit=1"
    assert client.delete("/v1/qrels/trec8").status_code == 204
    assert client.get("/v1/qrels/trec8").status_code == 404
    assert client.delete("/v1/qrels/trec8").status_code == 404


def test_evaluation_with_stored_qrels_records_the_version(client):
    v = client.put("/v1/qrels/small", json={"qrels": QRELS}).get_json()["version"]
    doc = client.post("/v1/evaluations", json={"run": RUN, "qrels_id": "small",
                                               "measures": ["map"]}).get_json()
    inline = client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS,
                                                  "measures": ["map"]}).get_json()
    assert doc["aggregate"] == inline["aggregate"]
    assert doc["provenance"]["qrels_version"] == f"small@{v}"


def test_bad_qrels_upload_names_the_line(client):
    resp = client.put("/v1/qrels/bad", data=b"q1 0 d1 1\nq1 0 d2 x\n", content_type="text/plain")
    assert resp.status_code == 422
    assert resp.get_json()["errors"] == {"qrels line 2": ["'x' is not an integer grade"]}
    assert client.put("/v1/qrels/bad id", json={"qrels": QRELS}, check=False).status_code == 422


def test_async_evaluation_equals_sync(client):
    body = {"run": (DATA / "results.test").read_text(), "qrels": (DATA / "qrels.test").read_text(),
            "measures": ["all_trec"]}
    sync = client.post("/v1/evaluations", json=body).get_json()
    resp = client.post("/v1/evaluations", json=body, headers={"Prefer": "respond-async"})
    assert resp.status_code == 202 and resp.headers["Location"].startswith("/v1/jobs/")
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished"
    assert job["result"]["aggregate"] == sync["aggregate"]
    assert job["result"]["per_topic"] == sync["per_topic"]


def test_async_bad_input_fails_with_the_reason(client):
    body = {"run": "q1 Q0 d1 1 abc r\n", "qrels": QRELS, "measures": ["map"]}
    resp = client.post("/v1/evaluations", json=body, headers={"Prefer": "respond-async"})
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "failed"
    assert job["problem"]["errors"] == {"run line 1": ["'abc' is not a number"]}


def test_async_unknown_measure_is_rejected_before_queueing(client):
    body = {"run": RUN, "qrels": QRELS, "measures": ["mapp"]}
    resp = client.post("/v1/evaluations", json=body, headers={"Prefer": "respond-async"})
    assert resp.status_code == 422 and "measures[0]" in resp.get_json()["errors"]


def test_large_bodies_are_queued(app, client):
    app.config["ASYNC_THRESHOLD_BYTES"] = 100
    resp = client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS,
                                                "measures": ["map", "P.2"]})
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    # q1: d1 (rel) at 1, d3 (rel) at 3: AP (1 + 2/3)/2; q2: d9 not retrieved: 0
    assert job["result"]["aggregate"]["map"] == pytest.approx((1 + 2 / 3) / 2 / 2)
    assert job["result"]["aggregate"]["P_2"] == pytest.approx((1 / 2 + 0) / 2)


def test_unknown_job_is_404(client):
    assert client.get("/v1/jobs/" + "0" * 32).status_code == 404
    assert client.delete("/v1/jobs/" + "0" * 32).status_code == 404


@pytest.mark.parametrize("query, field", [("limit=0", "limit"), ("limit=x", "limit"),
                                          ("offset=-1", "offset"), ("limit=3", "limit")])
def test_qrels_pages_are_read_as_every_listing_reads_them(app, client, query, field):
    app.config.update(MAX_PAGE_ITEMS=2)  # the limit every listing route holds to
    for path in ("/v1/qrels", "/v1/systems"):
        resp = client.get(f"{path}?{query}")
        assert resp.status_code == 400 and resp.get_json()["type"].endswith("invalid-parameter")
        assert list(resp.get_json()["errors"]) == [field], (path, resp.get_json())
