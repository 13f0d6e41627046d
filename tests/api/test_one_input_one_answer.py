"""Issue #14's findings at the API, each a regression test: stored qrels round-trip exactly
and are versioned by content; hostile numbers and ids are 4xx naming the field or line,
never a 500 or a silent misreading; the same input gives the same numbers inline and
stored."""

from __future__ import annotations

import io
import json

import pytest
from conftest import finished_job

RUN = {"q1": {"dA": 3.0, "dB": 2.0, "dC": 1.0}}
MEASURES = ["map", "num_rel", "num_rel_ret", "P.5"]


def evaluate(client, body, status=200, **kwargs):
    resp = client.post("/v1/evaluations", json=dict({"measures": MEASURES}, **body), **kwargs)
    assert resp.status_code == status, resp.get_json()
    return resp.get_json()


def put(client, qrels_id, status=201, **kwargs):
    resp = client.put(f"/v1/qrels/{qrels_id}", **kwargs)
    assert resp.status_code == status, resp.get_json()
    return resp.get_json()


def test_a_docid_that_would_inject_lines_into_stored_qrels_is_refused(client):
    """{"dA 5\\nq1 0 dB": 1} was stored as two judgments: num_rel 2 and map 1.0 through
    qrels_id, num_rel 1 and map 0.333 inline."""
    body = {"qrels": {"q1": {"dA 5\nq1 0 dB": 1}}}
    problem = put(client, "inj", 422, json=body)
    assert list(problem["errors"]) == ["qrels.q1.dA 5\nq1 0 dB"]
    assert "may not contain a space" in problem["errors"]["qrels.q1.dA 5\nq1 0 dB"][0]
    assert client.get("/v1/qrels/inj").status_code == 404  # nothing stored
    inline = evaluate(client, {"run": RUN, **body}, 422)
    assert inline["errors"] == problem["errors"]


@pytest.mark.parametrize("docid", ["d 1", "d\t1", "", "d\x00"])
def test_a_docid_outside_the_grammar_is_refused_before_it_is_stored(client, docid):
    """A stored docid "d 1" made every later evaluation with it a 500."""
    put(client, "bad-id", 422, json={"qrels": {"q1": {docid: 1, "ok": 1}}})
    assert client.get("/v1/qrels/bad-id").status_code == 404


QRELS_TEXT = b"q1 0 dC 2\nq1 0 dA 0\nq1 0 dZ 1\nq2 0 x 1\n"


@pytest.mark.parametrize("how", ["text", "json", "multipart"])
def test_stored_qrels_give_the_numbers_the_same_qrels_give_inline(client, how):
    if how == "text":
        meta = put(client, "same", data=QRELS_TEXT, content_type="text/plain")
    elif how == "json":
        meta = put(client, "same", json={"qrels": {"q1": {"dC": 2, "dA": 0, "dZ": 1},
                                                   "q2": {"x": 1}}})
    else:
        meta = put(client, "same", data={"qrels": (io.BytesIO(QRELS_TEXT), "q.txt")},
                   content_type="multipart/form-data")
    assert meta["diversity"] is False and meta["judgments"] == 4
    stored = evaluate(client, {"run": RUN, "qrels_id": "same"})
    inline = evaluate(client, {"run": RUN, "qrels": QRELS_TEXT.decode()})
    assert stored["aggregate"] == inline["aggregate"]
    assert stored["per_topic"] == inline["per_topic"]
    assert stored["per_topic"]["q1"]["num_rel"] == 2
    assert stored["per_topic"]["q1"]["map"] == pytest.approx(1 / 2 * (1 / 3))


def test_the_version_is_the_digest_of_the_content_not_of_its_spelling(client):
    a = put(client, "v", data=b"q1 0 dA 1\nq1 0 dB 2\n", content_type="text/plain")
    # the same judgments: other order, Q0 in the ignored column, CRLF, JSON
    for payload in ({"data": b"q1 Q0 dB 2\r\nq1 Q0 dA 1\r\n", "content_type": "text/plain"},
                    {"json": {"qrels": {"q1": {"dB": 2, "dA": 1}}}}):
        again = put(client, "v", 200, **payload)
        assert again["version"] == a["version"] and again["versions"] == [a["version"]]
    # different judgments: a new version
    b = put(client, "v", data=b"q1 0 dA 1\nq1 0 dB 3\n", content_type="text/plain")
    assert b["version"] != a["version"]
    # the same lines as subtopic qrels mean something else: another version, and says so
    c = client.put("/v1/qrels/v?diversity=true", data=b"q1 0 dA 1\nq1 0 dB 3\n",
                   content_type="text/plain")
    assert c.status_code == 201 and c.get_json()["diversity"] is True
    assert c.get_json()["version"] not in (a["version"], b["version"])


def test_stored_subtopic_qrels_count_each_document_once_for_ordinary_measures(client):
    """Stored with ?diversity=true, a docid judged for two subtopics was counted twice by
    trec_eval's measures (num_rel 3, P_5 0.6, map 0.833 where 2, 0.4, 0.583 are right)."""
    run = {"q1": {"d1": 5.0, "d2": 4.0, "d3": 3.0, "d4": 2.0, "d5": 1.0}}
    text = b"q1 1 d2 1\nq1 2 d2 1\nq1 1 d3 1\nq1 2 d9 0\n"
    resp = client.put("/v1/qrels/sub?diversity=true", data=text, content_type="text/plain")
    assert resp.status_code == 201 and resp.get_json()["diversity"] is True
    doc = evaluate(client, {"run": run, "qrels_id": "sub"})
    assert doc["aggregate"]["num_rel"] == 2
    assert doc["aggregate"]["P_5"] == pytest.approx(0.4)
    assert doc["aggregate"]["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    # as plain qrels the same lines judge d2 twice: refused, as trec_eval does
    inline = evaluate(client, {"run": run, "qrels": text.decode()}, 422)
    assert "twice" in str(inline["errors"])


@pytest.mark.parametrize("grade", ["1e19", "9223372036854775808", "18446744073709551616",
                                   "-9223372036854775809", "1.5", '"2"', "true"])
def test_a_json_grade_that_is_not_an_int64_is_422_not_unjudged(client, grade):
    """1e19 and 2**63 became INT64_MIN (unjudged): map 0.5, and stored metadata showed
    grade -9223372036854775808."""
    body = ('{"run": {"q1": {"a": 2, "b": 1}}, "qrels": {"q1": {"a": 1, "b": ' + grade +
            '}}, "measures": ["map"]}')
    resp = client.post("/v1/evaluations", data=body, content_type="application/json")
    assert resp.status_code == 422, resp.get_json()
    assert list(resp.get_json()["errors"]) in (["qrels.q1.b"], ["qrels"])
    stored = client.put("/v1/qrels/g", data='{"qrels": {"q1": {"a": 1, "b": ' + grade + '}}}',
                        content_type="application/json")
    assert stored.status_code == 422 and client.get("/v1/qrels/g").status_code == 404


def test_int64_edge_grades_are_kept_exactly(client):
    meta = put(client, "edge", json={"qrels": {"q1": {"a": 9223372036854775807,
                                                      "b": -9223372036854775808}}})
    assert meta["judgments_per_grade"] == {"-9223372036854775808": 1,
                                           "9223372036854775807": 1}


@pytest.mark.parametrize("run", [{"q1": {"d1": "3.0"}}, {"q1": {"d1": 1, "d2": "x"}}])
def test_a_string_score_is_422_on_every_path(client, run):
    """A string score was a 500 in a small body and read as 3.0 on the column path."""
    sync = evaluate(client, {"run": run, "qrels": {"q1": {"d1": 1}}}, 422)
    assert list(sync["errors"])[0].startswith("run.q1.")
    assert "is not a number" in str(sync["errors"])


def test_a_trec_grade_beyond_int64_is_422_naming_the_line(client):
    body = {"run": "q1 Q0 d1 1 1.0 r\n", "qrels": "q1 0 d1 1\nq1 0 d2 99999999999999999999\n"}
    problem = evaluate(client, body, 422)
    assert problem["errors"] == {"qrels line 2": [
        "grade 99999999999999999999 is outside the 64-bit integer range"]}


@pytest.mark.parametrize("option, value", [("depth", 2**63), ("depth", -1),
                                           ("relevance_level", 10**40),
                                           ("relevance_level", -(10**40)),
                                           ("collection_size", 2**64)])
def test_options_beyond_64_bits_are_422_not_500(client, option, value):
    body = {"run": {"q1": {"d1": 1.0}}, "qrels": {"q1": {"d1": 1}}, "options": {option: value},
            "measures": MEASURES}
    resp = client.post("/v1/evaluations", data=json.dumps(body),  # orjson: 64 bits at most
                       content_type="application/json")
    assert resp.status_code == 422, resp.get_json()
    problem = resp.get_json()
    assert list(problem["errors"]) == [f"options.{option}"]
    form = client.post("/v1/evaluations", content_type="multipart/form-data", data={
        "run": (io.BytesIO(b"q1 Q0 d1 1 1.0 r\n"), "run"),
        "qrels": (io.BytesIO(b"q1 0 d1 1\n"), "qrels"), option: str(value)})
    assert form.status_code == 422 and list(form.get_json()["errors"]) == [f"options.{option}"]


def test_the_largest_int64_options_evaluate(client):
    body = {"run": {"q1": {"d1": 1.0, "d2": 0.5}}, "qrels": {"q1": {"d1": 1}},
            "options": {"depth": 2**63 - 1, "relevance_level": 1}}
    assert evaluate(client, body)["aggregate"]["map"] == 1.0


@pytest.mark.parametrize("qrels", [b"# only a comment\n", b"\n\n", b"# a\n# b\n"])
def test_empty_or_comment_only_qrels_are_refused_with_a_sentence(client, qrels):
    """A 500 before."""
    form = client.post("/v1/evaluations", content_type="multipart/form-data", data={
        "run": (io.BytesIO(b"q1 Q0 d1 1 1.0 r\n"), "run"),
        "qrels": (io.BytesIO(qrels), "qrels")})
    assert form.status_code == 422, form.get_json()
    assert "qrels" in form.get_json()["errors"]
    text = evaluate(client, {"run": "q1 Q0 d1 1 1.0 r\n", "qrels": qrels.decode()}, 422)
    assert "qrels" in text["errors"]
    put(client, "empty", 422, data=qrels, content_type="text/plain")


def test_nbsp_in_a_docid_is_the_same_docid_at_every_size(client):
    """The line reader split on U+00A0 (a wrong docid, silently), pyarrow did not."""
    run = "".join(f"q1 Q0 d\u00a0{i} {i} {100 - i} r\n" for i in range(50))
    doc = evaluate(client, {"run": run, "qrels": "q1 0 d\u00a03 1\n"})
    assert doc["aggregate"]["map"] == pytest.approx(1 / 4)


def test_a_string_score_is_the_same_refusal_when_queued(client):
    """Prefer: respond-async read "3.0" as 3.0 (the column path); now the job fails with the
    problem the synchronous request answers."""

    body = {"run": {"q1": {"d1": "3.0", "d2": 1.0}}, "qrels": {"q1": {"d1": 1}},
            "measures": ["map"]}
    sync = evaluate(client, body, 422)
    resp = client.post("/v1/evaluations", json=body, headers={"Prefer": "respond-async"})
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "failed" and job["problem"]["errors"] == sync["errors"]
