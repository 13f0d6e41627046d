"""Issue 27, misread 2, through the API: a run or qrels starting with a UTF-8 byte-order mark
is refused on every way in (JSON string, multipart file part and text field, stored qrels
PUT as text/plain, JSON and multipart, a queued evaluation), with one 422 naming line 1."""

from __future__ import annotations

import io

import pytest
from conftest import finished_job

BOM = "\ufeff"
REASON = "line 1 starts with a UTF-8 byte-order mark (EF BB BF): save the file without it"
RUN = "q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n"
QRELS = "q1 0 d1 1\nq1 0 d2 0\n"


def _refused(resp, field: str) -> None:
    assert resp.status_code == 422, resp.get_json()
    doc = resp.get_json()
    assert doc["errors"] == {f"{field} line 1": [REASON]}


@pytest.mark.parametrize("which", ["run", "qrels"])
@pytest.mark.parametrize("how", ["json", "multipart-file", "multipart-field"])
def test_evaluation_refuses_a_bom(client, which, how):
    run = (BOM if which == "run" else "") + RUN
    qrels = (BOM if which == "qrels" else "") + QRELS
    if how == "json":
        resp = client.post("/v1/evaluations", json={"run": run, "qrels": qrels,
                                                    "measures": ["P_5"]})
    elif how == "multipart-file":
        resp = client.post("/v1/evaluations", data={
            "run": (io.BytesIO(run.encode()), "run.txt"),
            "qrels": (io.BytesIO(qrels.encode()), "qrels.txt"), "measures": "P_5"},
            content_type="multipart/form-data")
    else:
        resp = client.post("/v1/evaluations", data={"run": run, "qrels": qrels,
                                                    "measures": "P_5"},
                           content_type="multipart/form-data")
    _refused(resp, which)


def test_queued_evaluation_refuses_a_bom(client):
    resp = client.post("/v1/evaluations", json={"run": BOM + RUN, "qrels": QRELS,
                                                "measures": ["P_5"]},
                       headers={"Prefer": "respond-async"})
    if resp.status_code == 202:  # refused by the worker: the same problem in the job
        job = finished_job(client, resp.headers["Location"])
        assert job["status"] == "failed"
        assert job["problem"]["status"] == 422
        assert job["problem"]["errors"] == {"run line 1": [REASON]}
    else:
        _refused(resp, "run")


@pytest.mark.parametrize("how", ["text/plain", "json", "multipart"])
def test_stored_qrels_put_refuses_a_bom(client, how):
    text = BOM + QRELS
    if how == "text/plain":
        resp = client.put("/v1/qrels/q", data=text.encode(), content_type="text/plain")
    elif how == "json":
        resp = client.put("/v1/qrels/q", json={"qrels": text})
    else:
        resp = client.put("/v1/qrels/q", data={"qrels": (io.BytesIO(text.encode()), "q.txt")},
                          content_type="multipart/form-data")
    _refused(resp, "qrels")
    assert client.get("/v1/qrels/q").status_code == 404


def test_without_the_mark_the_same_request_evaluates(client):
    resp = client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS,
                                                "measures": ["P_5"]})
    assert resp.status_code == 200
    assert resp.get_json()["aggregate"]["P_5"] == pytest.approx(0.2)
