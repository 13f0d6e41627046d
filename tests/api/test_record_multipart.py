"""``record`` in a multipart/form-data ``POST /v1/evaluations`` (issue #18): a form field whose
value is the JSON body's ``record`` object as JSON text, validated by the same schema. The same
evaluation sent as JSON and as multipart records the same result (per-topic values, aggregate,
provenance digests), sync and queued, whichever multipart parser cut the body; a malformed
record is the same 422 either way. Each test records in a SQLite file of its own (conftest)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import finished_job

import service.evaluation_request as evaluation_request

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = (DATA / "results.test").read_text()
QRELS = (DATA / "qrels.test").read_text()
RESULTS_ON_POSTGRES = True  # every test here runs on SQLite and on PostgreSQL (conftest)
MEASURES = ["map", "P.5", "ndcg_cut.10"]
RECORD = {"system": "bm25", "label": "nightly-1", "commit": "abc123",
          "tags": ["nightly", "main"]}


OPTIONS = {"complete_topics", "judged_only", "depth", "relevance_level"}


def as_json(client, record, headers=None, **extra):
    body = {"run": RUN, "qrels": QRELS, "measures": MEASURES, "record": record,
            **{k: v for k, v in extra.items() if k not in OPTIONS}}
    options = {k: v for k, v in extra.items() if k in OPTIONS}
    if options:
        body["options"] = options
    return client.post("/v1/evaluations", json=body, headers=headers or {})


def as_multipart(client, record, headers=None, record_as_file=False, raw=None, **extra):
    """``record`` as JSON text in a form field (``raw``: that text instead)."""
    data = {"run": (io.BytesIO(RUN.encode()), "run.txt"),
            "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"),
            "measures": ",".join(MEASURES), **{k: str(v).lower() for k, v in extra.items()}}
    text = raw if raw is not None else json.dumps(record)
    data["record"] = (io.BytesIO(text.encode()), "record.json") if record_as_file else text
    return client.post("/v1/evaluations", data=data, content_type="multipart/form-data",
                       headers=headers or {})


def stored(client, doc) -> dict:
    got = client.get(f"/v1/results/{doc['recorded']['id']}")
    assert got.status_code == 200
    return got.get_json()


def without_volatile(result: dict) -> dict:
    """A stored result (or an answer, as ``{"document": answer}``) without what differs
    between two recordings of one evaluation: the id and the time it was made."""
    out = {k: v for k, v in result.items() if k not in ("id", "created_at")}
    out["document"] = {k: v for k, v in result["document"].items() if k != "recorded"}
    return out


def assert_same_result(a: dict, b: dict) -> None:
    assert a["document"]["per_topic"] == b["document"]["per_topic"]
    assert a["document"]["aggregate"] == b["document"]["aggregate"] == a["aggregate"]
    for key in ("run_sha256", "qrels_sha256"):
        assert a["document"]["provenance"][key] == b["document"]["provenance"][key]
    assert without_volatile(a) == without_volatile(b)


@pytest.fixture(params=["werkzeug", "fast"])
def parser(request, monkeypatch):
    """Both multipart parsers: werkzeug's (small bodies) and service.multipart's."""
    if request.param == "fast":
        monkeypatch.setattr(evaluation_request, "FAST_MULTIPART_MIN_BYTES", 0)
    return request.param


def test_json_and_multipart_record_the_same_result(client, parser):
    by_json = as_json(client, RECORD, complete_topics=True)
    by_form = as_multipart(client, RECORD, complete_topics=True)
    assert by_json.status_code == by_form.status_code == 200, by_form.get_json()
    a, b = by_json.get_json(), by_form.get_json()
    assert a["recorded"]["id"] != b["recorded"]["id"]
    assert {k: v for k, v in a["recorded"].items() if k != "id"} == \
        {k: v for k, v in b["recorded"].items() if k != "id"} == \
        {"system": "bm25", "label": "nightly-1"}
    assert a["provenance"]["run_sha256"] == b["provenance"]["run_sha256"]
    assert round(a["aggregate"]["map"], 4) == 0.1785
    ra, rb = stored(client, a), stored(client, b)
    assert rb["commit"] == "abc123" and rb["tags"] == ["nightly", "main"]
    assert_same_result(ra, rb)
    # the answers agree too, recorded aside
    assert without_volatile({"document": a}) == without_volatile({"document": b})
    history = client.get("/v1/systems/bm25/results").get_json()
    assert history["total"] == 2


def test_record_and_per_topic_false_in_a_form(client):
    """Per-topic values are kept whatever per_topic says, in a form as in JSON."""
    doc = as_multipart(client, {"system": "s", "label": "l"}, per_topic=False).get_json()
    assert "per_topic" not in doc and doc["recorded"]["system"] == "s"
    got = stored(client, doc)
    assert len(got["document"]["per_topic"]) == len(as_json(
        client, {"system": "s", "label": "m"}).get_json()["per_topic"])


def _finished(client, resp) -> dict:
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    return job["result"]


@pytest.mark.parametrize("how", ["prefer", "large"])
def test_queued_json_and_multipart_record_the_same_result(app, client, how, parser):
    if how == "prefer":
        headers = {"Prefer": "respond-async"}
    else:  # a body over the threshold is queued without asking
        headers = {}
        app.config["ASYNC_THRESHOLD_BYTES"] = 1000
    a = _finished(client, as_json(client, RECORD, headers=headers))
    b = _finished(client, as_multipart(client, RECORD, headers=headers))
    assert a["recorded"]["system"] == b["recorded"]["system"] == "bm25"
    assert_same_result(stored(client, a), stored(client, b))
    # and the synchronous recording of the same evaluation
    app.config["ASYNC_THRESHOLD_BYTES"] = 1 << 30
    c = as_multipart(client, RECORD).get_json()
    assert_same_result(stored(client, b), stored(client, c))


BAD_RECORDS = [
    ({"system": "s"}, "record.label"),
    ({"system": "", "label": "x"}, "record.system"),
    ({"system": "s", "label": "a\nb"}, "record.label"),
    ({"system": "s", "label": "x", "tags": ["t"] * 21}, "record.tags"),
    ({"system": "s", "label": "x", "tags": ["ok", 3]}, "record.tags[1]"),
    ({"system": "s", "label": "x", "colour": "red"}, "record.colour"),
    ({"system": 5, "label": "x"}, "record.system"),
    ("bm25", "record"),
    ([], "record"),
    (None, None),  # JSON null: no record, as in a JSON body
]


@pytest.mark.parametrize("record, field", BAD_RECORDS)
def test_a_bad_record_is_the_same_422_in_a_form(client, record, field):
    by_json = as_json(client, record)
    by_form = as_multipart(client, record)
    if field is None:
        assert by_json.status_code == by_form.status_code == 200
        assert "recorded" not in by_json.get_json() and "recorded" not in by_form.get_json()
    else:
        assert by_json.status_code == by_form.status_code == 422
        assert by_form.mimetype == "application/problem+json"
        assert field in by_form.get_json()["errors"], by_form.get_json()
        assert by_form.get_json()["errors"] == by_json.get_json()["errors"]
    assert client.get("/v1/systems").get_json()["items"] == []


@pytest.mark.parametrize("text", ["system=bm25,label=x", "{'system': 'bm25'}", "", "{"])
def test_a_record_that_is_not_json_is_named(client, parser, text):
    resp = as_multipart(client, None, raw=text)
    assert resp.status_code == 422 and resp.mimetype == "application/problem+json"
    errors = resp.get_json()["errors"]
    assert list(errors) == ["record"]
    assert errors["record"][0].startswith("must be a JSON object: ")
    assert client.get("/v1/systems").get_json()["items"] == []


def test_a_record_file_is_refused_saying_why(client):
    resp = as_multipart(client, RECORD, record_as_file=True)
    assert resp.status_code == 422
    assert resp.get_json()["errors"] == {
        "record": ["send it as a form field (its value a JSON object), not a file"]}
    assert client.get("/v1/systems").get_json()["items"] == []
