"""Real-valued gains over the API (issue #31): options.gains "real" in a JSON body, the
multipart field gains, stored qrels put with gains real (kept in the version's metadata, so
evaluations by qrels_id read them so) give the numbers the library gives for the same
evaluation; without the declaration a real grade is refused as before; a binary measure
without rel= is a 422 naming it."""

from __future__ import annotations

import io

import pytest
from conftest import ContractClient, finished_job

import cranfield

QRELS_TEXT = ("q1 0 a 2.5\nq1 0 b 0.5\nq1 0 c 0\nq1 0 d 1.25\n"
              "q2 0 x 3\nq2 0 y -1\nq2 0 w 0.125\n")
QRELS_MAP = {"q1": {"a": 2.5, "b": 0.5, "c": 0, "d": 1.25},
             "q2": {"x": 3, "y": -1, "w": 0.125}}
RUN_TEXT = ("q1 Q0 a 1 3.0 r\nq1 Q0 b 2 2.0 r\nq1 Q0 z 3 1.5 r\nq1 Q0 d 4 1.0 r\n"
            "q2 Q0 y 1 2 r\nq2 Q0 w 2 1.5 r\nq2 Q0 x 3 1 r\n")
MEASURES = ["ndcg", "nDCG@2", "DCG@3", "ERR@3", "RBP", "P(rel=0.5)@2", "AP(rel=1)"]


@pytest.fixture(scope="module")
def expected() -> dict:
    ev = cranfield.evaluate(QRELS_TEXT, RUN_TEXT, MEASURES, gains="real")
    return ev.aggregate


def _same(aggregate: dict, expected: dict) -> None:
    for name in MEASURES:
        assert aggregate[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-15), name


def test_json_body_with_options_gains_real(client, expected):
    for qrels in (QRELS_TEXT, QRELS_MAP):
        resp = client.post("/v1/evaluations", json={
            "run": RUN_TEXT, "qrels": qrels, "measures": MEASURES,
            "options": {"gains": "real"}})
        assert resp.status_code == 200, resp.get_json()
        doc = resp.get_json()
        _same(doc["aggregate"], expected)
        assert doc["provenance"]["options"]["gains"] == "real"
    assert 0 < expected["ndcg"] < 1 and expected["P(rel=0.5)@2"] == 0.5


def test_multipart_field_gains(client, expected):
    data = {"run": (io.BytesIO(RUN_TEXT.encode()), "run.txt"),
            "qrels": (io.BytesIO(QRELS_TEXT.encode()), "qrels.txt"),
            "measures": ",".join(MEASURES), "gains": "real"}
    resp = client.post("/v1/evaluations", data=data, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    _same(resp.get_json()["aggregate"], expected)


def test_stored_qrels_keep_the_declaration(client, expected):
    put = client.put("/v1/qrels/llm", json={"qrels": QRELS_TEXT, "gains": "real"})
    assert put.status_code in (200, 201), put.get_json()
    meta = client.get("/v1/qrels/llm").get_json()
    assert meta["gains"] == "real"
    assert meta["judgments"] == 7
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels_id": "llm",
                                                 "measures": MEASURES})
    assert resp.status_code == 200, resp.get_json()
    _same(resp.get_json()["aggregate"], expected)


def test_stored_qrels_put_as_multipart(client, expected):
    data = {"qrels": (io.BytesIO(QRELS_TEXT.encode()), "qrels.txt"), "gains": "real"}
    put = client.put("/v1/qrels/llm2", data=data, content_type="multipart/form-data")
    assert put.status_code in (200, 201), put.get_json()
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels_id": "llm2",
                                                 "measures": MEASURES})
    _same(resp.get_json()["aggregate"], expected)


def test_without_the_declaration_a_real_grade_is_refused_as_before(client):
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels": QRELS_TEXT,
                                                 "measures": ["ndcg"]})
    assert resp.status_code == 422
    assert "'2.5' is not an integer grade" in resp.get_json()["detail"]
    put = client.put("/v1/qrels/plain", json={"qrels": QRELS_TEXT})
    assert put.status_code == 422
    assert "'2.5' is not an integer grade" in put.get_json()["detail"]


def test_a_binary_measure_without_rel_is_refused_naming_it(client):
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels": QRELS_TEXT,
                                                 "measures": ["P.5"],
                                                 "options": {"gains": "real"}})
    assert resp.status_code == 422
    detail = resp.get_json()["detail"]
    assert "P_5" in detail and "rel=" in detail


def test_an_unknown_gains_value_is_refused(client):
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels": QRELS_TEXT,
                                                 "measures": ["ndcg"],
                                                 "options": {"gains": "float"}})
    assert resp.status_code == 422
    put = client.put("/v1/qrels/bad", json={"qrels": QRELS_TEXT, "gains": "float"})
    assert put.status_code == 422
    assert "gains" in put.get_json()["errors"]


def test_batch_with_options_gains_real(client, expected):
    resp = client.post("/v1/evaluations/batch", json={
        "runs": [{"name": "a", "run": RUN_TEXT}], "qrels": QRELS_TEXT,
        "measures": MEASURES, "options": {"gains": "real"}})
    assert resp.status_code == 200, resp.get_json()
    (only,) = resp.get_json()["evaluations"]
    _same(only["aggregate"], expected)


def _cli_aggregate(capsys, args: list[str]) -> dict:
    import json

    from cranfield.cli import main

    assert main(["eval", "--real-gains", "--format", "json", "--no-warnings",
                 *[a for m in MEASURES for a in ("-m", m)], *args]) == 0
    return json.loads(capsys.readouterr().out)["aggregate"]


def test_the_command_line_locally_and_through_the_service(tmp_path, served, capsys,
                                                          expected):
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text(QRELS_TEXT)
    run.write_text(RUN_TEXT)
    _same(_cli_aggregate(capsys, [str(qrels), str(run)]), expected)
    _same(_cli_aggregate(capsys, ["--server", served, str(qrels), str(run)]), expected)
    # without --real-gains: today's refusal, exit 2
    from cranfield.cli import main

    assert main(["eval", "-m", "ndcg", str(qrels), str(run)]) == 2
    assert "'2.5' is not an integer grade" in capsys.readouterr().err


@pytest.mark.parametrize("qrels", [QRELS_TEXT, QRELS_MAP], ids=["text", "mapping"])
def test_a_queued_evaluation_reads_the_declared_gains(qrels, expected):
    from service.app import create_app

    queued = ContractClient(create_app({"TESTING": True, "ASYNC_THRESHOLD_BYTES": 100})
                            .test_client())
    resp = queued.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels": qrels,
                                                 "measures": MEASURES,
                                                 "options": {"gains": "real"}})
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(queued, resp.headers["Location"])
    assert job["status"] == "finished", job
    _same(job["result"]["aggregate"], expected)


def test_the_compiled_json_scan_never_reads_real_gains(client, monkeypatch, expected):
    """Past FAST_JSON_MIN_BYTES the body's mappings go to the compiled scan, which reads
    integer grades only: real grades send the body to orjson and the Python real-gain reader;
    integer-valued gains it reads become real gains (the same numbers either way)."""
    import cranfield.inputs.json_body
    from cranfield.inputs.json_body import Columns
    from service import evaluation_request

    monkeypatch.setattr(cranfield.inputs.json_body, "FAST_JSON_MIN_BYTES", 0)
    scanned = []
    decode = evaluation_request.decode_body

    def spy(raw, **kw):
        body = decode(raw, **kw)
        scanned.append(body is not None and isinstance(body.get("qrels"), Columns))
        return body

    monkeypatch.setattr(evaluation_request, "decode_body", spy)
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels": QRELS_MAP,
                                                 "measures": MEASURES,
                                                 "options": {"gains": "real"}})
    assert resp.status_code == 200, resp.get_json()
    _same(resp.get_json()["aggregate"], expected)
    whole = {t: {d: float(round(g)) for d, g in docs.items()} for t, docs in QRELS_MAP.items()}
    want = cranfield.evaluate(whole, RUN_TEXT, MEASURES, gains="real").aggregate
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels": whole,
                                                 "measures": MEASURES,
                                                 "options": {"gains": "real"}})
    assert resp.status_code == 200, resp.get_json()
    _same(resp.get_json()["aggregate"], want)
    assert scanned == [False, True]  # (real grades: not scanned; integer-valued: scanned)


def test_stored_qrels_put_as_text_with_the_query_parameter(client, expected):
    put = client.put("/v1/qrels/llm3?gains=real", data=QRELS_TEXT,
                     content_type="text/plain")
    assert put.status_code in (200, 201), put.get_json()
    assert client.get("/v1/qrels/llm3").get_json()["gains"] == "real"
    resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels_id": "llm3",
                                                 "measures": MEASURES})
    _same(resp.get_json()["aggregate"], expected)
    beside = client.put("/v1/qrels/llm4?gains=real", json={"qrels": QRELS_TEXT})
    assert beside.status_code == 422 and "gains" in beside.get_json()["errors"]
    # the same judgments put as real gains and as integers are different versions
    integer = client.put("/v1/qrels/ints", json={"qrels": "q1 0 a 2\n"}).get_json()
    real = client.put("/v1/qrels/reals", json={"qrels": "q1 0 a 2\n", "gains": "real"})
    assert real.get_json()["sha256"] != integer["sha256"]
    assert "gains" not in integer


def test_the_python_client(tmp_path, served, expected):
    from cranfield.client import Client

    client = Client(served)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS_TEXT)
    for qrels_id, source in (("by-path", qrels), ("by-text", QRELS_TEXT), ("by-map", QRELS_MAP)):
        meta = client.put_qrels(qrels_id, source, gains="real")
        assert meta["gains"] == "real", qrels_id
        doc = client.evaluate(run=RUN_TEXT, qrels_id=qrels_id, measures=MEASURES)
        _same(doc["aggregate"], expected)
    doc = client.evaluate(QRELS_MAP, RUN_TEXT, MEASURES, options={"gains": "real"})
    _same(doc["aggregate"], expected)


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_a_trec_eval_profile_refuses_real_gains_with_todays_error(client, profile):
    """Issue #31: a trec_eval profile named beside options.gains real refuses the real grade
    with the very problem document it gives without the declaration (JSON and multipart);
    stored qrels declaring real gains are refused under it naming topic and docid."""
    def problem(resp):
        assert resp.status_code == 422, resp.get_json()
        doc = resp.get_json()
        return {k: doc[k] for k in ("type", "title", "status", "detail", "errors")}

    today = problem(client.post("/v1/evaluations", json={
        "run": RUN_TEXT, "qrels": QRELS_TEXT, "measures": ["ndcg"],
        "options": {"profile": profile}}))
    assert "qrels line 1" in today["errors"] and \
        today["detail"].endswith("grade: '2.5' is not an integer grade")
    declared = problem(client.post("/v1/evaluations", json={
        "run": RUN_TEXT, "qrels": QRELS_TEXT, "measures": ["ndcg"],
        "options": {"profile": profile, "gains": "real"}}))
    assert declared == today
    form = {"run": (io.BytesIO(RUN_TEXT.encode()), "run.txt"),
            "qrels": (io.BytesIO(QRELS_TEXT.encode()), "qrels.txt"),
            "measures": "ndcg", "gains": "real", "profile": profile}
    multipart = problem(client.post("/v1/evaluations", data=form,
                                    content_type="multipart/form-data"))
    assert multipart["detail"] == today["detail"]
    batch = problem(client.post("/v1/evaluations/batch", json={
        "runs": [{"name": "a", "run": RUN_TEXT}], "qrels": QRELS_TEXT, "measures": ["ndcg"],
        "options": {"profile": profile, "gains": "real"}}))
    assert batch["detail"].endswith("grade: '2.5' is not an integer grade")
    assert client.put("/v1/qrels/llm-te", json={"qrels": QRELS_TEXT,
                                                "gains": "real"}).status_code in (200, 201)
    stored = problem(client.post("/v1/evaluations", json={
        "run": RUN_TEXT, "qrels_id": "llm-te", "measures": ["ndcg"],
        "options": {"profile": profile}}))
    assert stored["detail"].endswith("q1.a: grade 2.5 is not an integer"), stored


def test_real_gains_run_under_the_cranfield_profile_by_default(client, expected):
    """Declared in the body, or by stored qrels, with no profile named: the evaluation runs
    under cranfield's profile and says so; naming it gives the same numbers."""
    assert client.put("/v1/qrels/llm-default", json={"qrels": QRELS_TEXT,
                                                     "gains": "real"}).status_code in (200, 201)
    for body in ({"qrels": QRELS_TEXT, "options": {"gains": "real"}},
                 {"qrels": QRELS_TEXT, "options": {"gains": "real", "profile": "cranfield"}},
                 {"qrels_id": "llm-default"},
                 {"qrels_id": "llm-default", "options": {"profile": "cranfield"}}):
        resp = client.post("/v1/evaluations", json={"run": RUN_TEXT, "measures": MEASURES,
                                                     **body})
        assert resp.status_code == 200, (body, resp.get_json())
        doc = resp.get_json()
        assert doc["provenance"]["options"]["profile"] == "cranfield", body
        assert doc["provenance"]["options"]["gains"] == "real", body
        _same(doc["aggregate"], expected)
    resp = client.post("/v1/evaluations/batch", json={
        "runs": [{"name": "a", "run": RUN_TEXT}], "qrels_id": "llm-default",
        "measures": MEASURES})
    assert resp.status_code == 200, resp.get_json()
    (only,) = resp.get_json()["evaluations"]
    assert only["provenance"]["options"]["profile"] == "cranfield"
    _same(only["aggregate"], expected)
    # integer qrels, no profile named: trec_eval 9.0.8's, as ever
    plain = client.post("/v1/evaluations", json={"run": RUN_TEXT, "measures": ["ndcg"],
                                                  "qrels": "q1 0 a 2\n"})
    assert plain.get_json()["provenance"]["options"]["profile"] == "trec_eval-9.0.8"


def test_a_queued_evaluation_of_stored_real_gains_runs_under_cranfield(expected):
    from service.app import create_app

    queued = ContractClient(create_app({"TESTING": True}).test_client())
    assert queued.put("/v1/qrels/llm-q", json={"qrels": QRELS_TEXT,
                                               "gains": "real"}).status_code in (200, 201)
    resp = queued.post("/v1/evaluations", json={"run": RUN_TEXT, "qrels_id": "llm-q",
                                                 "measures": MEASURES},
                       headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(queued, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert job["result"]["provenance"]["options"]["profile"] == "cranfield"
    _same(job["result"]["aggregate"], expected)
