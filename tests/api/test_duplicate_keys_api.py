"""Issue 27, misread 1, through the API: a JSON body holding a key twice is read as TREC text
reads the same lines, on every route that reads JSON (evaluations sync and queued,
comparisons, pools, stored qrels), small bodies (orjson + the standard library's reader) and
large ones (the compiled reader) alike: a docid twice is the TREC text refusal naming
``run.q1.d1``, a topic twice is one topic, any other member twice is refused."""

from __future__ import annotations

import pytest

JSON = {"Content-Type": "application/json"}
DUP_RUN = b'{"q1": {"d1": 0.1, "d1": 9.0}}'
RUN = b'{"q1": {"d1": 0.5, "d2": 0.25}}'
QRELS = b'{"q1": {"d1": 1}}'


def _padding(size: int) -> bytes:
    """Topics enough to take a body past the compiled reader's threshold (1 MiB)."""
    return b", ".join(b'"p%d": {"x%d": 1.5}' % (i, i) for i in range(size // 22))


def _run(dup: bool, large: bool) -> bytes:
    body = (DUP_RUN if dup else RUN)[:-1]
    return body + (b", " + _padding(1_200_000) if large else b"") + b"}"


def _problem(resp, status=422) -> dict:
    assert resp.status_code == status, resp.get_data(as_text=True)[:500]
    return resp.get_json()


@pytest.fixture
def big_app(app):
    app.config.update(MAX_CONTENT_LENGTH=8_000_000, MAX_TOPICS=100_000)
    return app


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_evaluation_run_docid_twice(big_app, client, large):
    raw = b'{"run": %s, "qrels": %s, "measures": ["P_5"]}' % (_run(True, large), QRELS)
    doc = _problem(client.post("/v1/evaluations", data=raw, headers=JSON))
    assert doc["code"] == "duplicate-docid"
    assert doc["errors"] == {"run.q1.d1": ["docid 'd1' appears twice in topic 'q1'"]}
    # the same lines as TREC text: the same code and sentence
    text = client.post("/v1/evaluations", json={"run": "q1 Q0 d1 1 0.1 r\nq1 Q0 d1 2 9.0 r\n",
                                                "qrels": "q1 0 d1 1\n", "measures": ["P_5"]})
    assert _problem(text)["code"] == "duplicate-docid"
    assert text.get_json()["errors"]["run line 2"][0].startswith(
        "docid 'd1' appears twice in topic 'q1'")


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_evaluation_qrels_docid_twice(big_app, client, large):
    qrels = b'{"q1": {"d1": 1, "d1": 0}' + (b", " + _padding(1_200_000) if large else b"") + b"}"
    raw = b'{"run": %s, "qrels": %s, "measures": ["P_5"]}' % (RUN, qrels)
    doc = _problem(client.post("/v1/evaluations", data=raw, headers=JSON))
    assert doc["code"] == "duplicate-judgment"
    assert doc["errors"] == {"qrels.q1.d1": ["docid 'd1' is judged twice for topic 'q1'"]}


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
def test_topic_twice_is_one_topic(big_app, client, large):
    run = b'{"q1": {"d1": 0.5}, "q2": {"d9": 1}, "q1": {"d2": 0.25}}'
    if large:
        run = run[:-1] + b", " + _padding(1_200_000) + b"}"
    raw = b'{"run": %s, "qrels": %s, "measures": ["P_5", "num_ret"], "per_topic": true}' % (
        run, QRELS)
    resp = client.post("/v1/evaluations", data=raw, headers=JSON)
    assert resp.status_code == 200, resp.get_json()
    per_topic = resp.get_json()["per_topic"]
    assert per_topic["q1"]["num_ret"] == 2 and per_topic["q1"]["P_5"] == pytest.approx(0.2)


def test_queued_evaluation_is_refused_before_queueing(client):
    raw = b'{"run": %s, "qrels": %s, "measures": ["P_5"]}' % (DUP_RUN, QRELS)
    resp = client.post("/v1/evaluations", data=raw,
                       headers={**JSON, "Prefer": "respond-async"})
    assert _problem(resp)["errors"] == {"run.q1.d1": ["docid 'd1' appears twice in topic 'q1'"]}


@pytest.mark.parametrize("route", ["/v1/comparisons", "/v1/pools"])
def test_compared_and_pooled_runs(client, route):
    extra = b', "qrels": %s, "measures": ["P_5"]' % QRELS if "comparisons" in route \
        else b', "depth": 10'
    raw = b'{"runs": [{"name": "a", "run": %s}, {"name": "b", "run": %s}]%s}' % (
        RUN, DUP_RUN, extra)
    doc = _problem(client.post(route, data=raw, headers=JSON))
    assert doc["code"] == "duplicate-docid"
    assert doc["errors"] == {"runs[1].q1.d1": ["docid 'd1' appears twice in topic 'q1'"]}


def test_stored_qrels_put(client):
    doc = _problem(client.put("/v1/qrels/dup", data=b'{"qrels": {"q1": {"d1": 1, "d1": 0}}}',
                              headers=JSON))
    assert doc["code"] == "duplicate-judgment"
    assert doc["errors"] == {"qrels.q1.d1": ["docid 'd1' is judged twice for topic 'q1'"]}
    assert client.get("/v1/qrels/dup").status_code == 404
    resp = client.put("/v1/qrels/merged", data=b'{"qrels": {"q1": {"d1": 1}, "q1": {"d2": 0}}}',
                      headers=JSON)
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["judgments"] == 2


def test_a_member_twice_is_refused(client):
    raw = b'{"run": %s, "qrels": %s, "measures": ["map"], "measures": ["P_5"]}' % (RUN, QRELS)
    doc = _problem(client.post("/v1/evaluations", data=raw, headers=JSON))
    assert doc["errors"] == {"measures": [
        "'measures' is given twice in one JSON object (a JSON reader keeps only one of them, "
        "silently): give it once"]}


def test_a_record_field_twice_is_refused_as_json_and_multipart(client):
    """The ``record`` object: as a JSON body's member and as a multipart form field (JSON
    text), the same 422 naming ``record.system``."""
    expected = {"record.system": [
        "'system' is given twice in one JSON object (a JSON reader keeps only one of them, "
        "silently): give it once"]}
    as_json = client.post("/v1/evaluations", data=b'{"run": "q1 Q0 d1 1 1 r\\n", "qrels": '
                          b'"q1 0 d1 1\\n", "measures": ["P_5"], "record": {"system": "a", '
                          b'"system": "b"}}', headers=JSON)
    as_form = client.post("/v1/evaluations", data={
        "run": "q1 Q0 d1 1 1 r\n", "qrels": "q1 0 d1 1\n", "measures": "P_5",
        "record": '{"system": "a", "system": "b"}'}, content_type="multipart/form-data")
    assert _problem(as_json)["errors"] == _problem(as_form)["errors"] == expected
