"""Issue 27, misread 5: stored qrels are held to MAX_TOPICS when they are PUT, with the same
413 problem an evaluation using them would answer (a 50-topic PUT under MAX_TOPICS=5 was 201,
and every evaluation with it then 413)."""

from __future__ import annotations

import io

import pytest


def _qrels_text(topics: int) -> str:
    return "".join(f"q{t} 0 d{t} 1\n" for t in range(topics))


def _expected_problem(client, topics: int) -> dict:
    """The 413 an evaluation with the same qrels inline answers."""
    resp = client.post("/v1/evaluations", json={
        "run": "q0 Q0 d0 1 1.0 r\n", "qrels": _qrels_text(topics), "measures": ["P_5"]})
    assert resp.status_code == 413
    return resp.get_json()


@pytest.mark.parametrize("how", ["json-text", "json-mapping", "text/plain", "multipart"])
def test_put_over_max_topics_is_the_evaluation_413(app, client, how):
    app.config.update(MAX_TOPICS=5)
    text = _qrels_text(50)
    if how == "json-text":
        resp = client.put("/v1/qrels/big", json={"qrels": text})
    elif how == "json-mapping":
        resp = client.put("/v1/qrels/big", json={
            "qrels": {f"q{t}": {f"d{t}": 1} for t in range(50)}})
    elif how == "text/plain":
        resp = client.put("/v1/qrels/big", data=text, content_type="text/plain")
    else:
        resp = client.put("/v1/qrels/big", data={"qrels": (io.BytesIO(text.encode()), "q.txt")},
                          content_type="multipart/form-data")
    assert resp.status_code == 413, resp.get_json()
    problem = resp.get_json()
    expected = _expected_problem(client, 50)
    assert problem["errors"] == expected["errors"] == {"qrels": ["at most 5 topics"]}
    assert problem["detail"] == expected["detail"] == \
        "qrels: 50 topics exceed the limit of 5"
    assert problem["type"] == expected["type"]
    assert problem["type"].endswith("too-large")
    # nothing was stored
    assert client.get("/v1/qrels/big").status_code == 404


def test_put_at_max_topics_is_stored(app, client):
    app.config.update(MAX_TOPICS=5)
    resp = client.put("/v1/qrels/five", data=_qrels_text(5), content_type="text/plain")
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["topics"] == 5
    ev = client.post("/v1/evaluations", json={"run": "q0 Q0 d0 1 1.0 r\n",
                                              "qrels_id": "five", "measures": ["P_5"]})
    assert ev.status_code == 200, ev.get_json()
    assert ev.get_json()["aggregate"]["P_5"] == pytest.approx(0.2)
