"""POST /v1/comparisons with qrels declaring real-valued gains (issue #31): ``options.gains``
"real" (JSON body, multipart field) compares as ``cranfield.compare.compare(...,
gains="real")`` does, synchronously and queued (Prefer: respond-async), and recorded results
evaluated so still compare; a trec_eval profile named beside the declaration refuses a real
grade with the problem it gives without it; a binary measure without rel= is a 422 naming
it. Every response is checked against openapi.yaml (the contract client)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from conftest import ContractClient, finished_job

import cranfield
from cranfield.compare.comparison import compare

TOPICS = [f"t{i}" for i in range(1, 9)]
MEASURES = ["ndcg", "nDCG@5", "ERR@5", "P(rel=0.5)@5", "AP(rel=1)"]


def _data():
    """(qrels text of real gains, {name: run text}): eight topics, two runs."""
    rng = np.random.default_rng(3131)
    qrels, runs = [], {"bm25": [], "dense": []}
    for topic in TOPICS:
        docs = [f"{topic}d{i}" for i in range(10)]
        gains = np.round(rng.uniform(0, 3, len(docs)), 3)
        gains[rng.random(len(docs)) < 0.3] = 0.0
        qrels += [f"{topic} 0 {d} {g:g}" for d, g in zip(docs, gains.tolist(), strict=True)]
        for name, lines in runs.items():
            ranked = list(rng.permutation(docs + [f"{topic}u{i}" for i in range(2)]))
            lines += [f"{topic} Q0 {d} {r + 1} {20 - r} {name}" for r, d in enumerate(ranked)]
    return ("\n".join(qrels) + "\n",
            {name: "\n".join(lines) + "\n" for name, lines in runs.items()})


QRELS, RUNS = _data()
FIRST_REAL = next((i, line.split()[3]) for i, line in enumerate(QRELS.splitlines(), start=1)
                  if "." in line.split()[3])


def _body(**extra) -> dict:
    return {"runs": [{"name": n, "run": r} for n, r in RUNS.items()], "qrels": QRELS,
            "measures": MEASURES, "options": {"gains": "real"}, **extra}


@pytest.fixture(scope="module")
def library() -> dict:
    """The library's document for the request _body() makes (the API's defaults: per-topic
    values and curves)."""
    return compare(QRELS, RUNS, MEASURES, gains="real", per_topic=True, curves=True)


def _without_provenance(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "provenance"}


def _same_as_library(doc: dict, library: dict) -> None:
    import orjson

    assert _without_provenance(doc) == orjson.loads(orjson.dumps(library))
    assert doc["options"]["profile"] == "cranfield" and doc["options"]["gains"] == "real"
    for name, run in RUNS.items():  # and the means are each run's evaluate(gains="real")
        ev = cranfield.evaluate(QRELS, run, MEASURES, gains="real")
        for measure in MEASURES:
            assert doc["summary"][measure][name]["mean"] == pytest.approx(
                ev.aggregate[measure], rel=1e-12, abs=1e-15), (name, measure)


def test_json_body_with_options_gains_real(client, library):
    resp = client.post("/v1/comparisons", json=_body())
    assert resp.status_code == 200, resp.get_json()
    _same_as_library(resp.get_json(), library)
    # naming cranfield's profile beside it: the same answer
    named = client.post("/v1/comparisons", json=_body(options={"gains": "real",
                                                               "profile": "cranfield"}))
    assert _without_provenance(named.get_json()) == _without_provenance(resp.get_json())
    # the same qrels as a mapping of real gains
    mapping: dict = {}
    for line in QRELS.splitlines():
        topic, _, docid, grade = line.split()
        mapping.setdefault(topic, {})[docid] = float(grade)
    by_map = client.post("/v1/comparisons", json=_body(qrels=mapping))
    assert by_map.status_code == 200, by_map.get_json()
    assert _without_provenance(by_map.get_json()) == _without_provenance(resp.get_json())


def test_multipart_field_gains(client, library):
    data = {"runs": [(io.BytesIO(text.encode()), f"{name}.txt")
                     for name, text in RUNS.items()],
            "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"),
            "measures": ",".join(MEASURES), "gains": "real"}
    resp = client.post("/v1/comparisons", data=data, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    _same_as_library(resp.get_json(), library)


def test_a_queued_comparison_carries_the_declaration(client, library):
    resp = client.post("/v1/comparisons", json=_body(), headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    _same_as_library(job["result"], library)


def test_a_queued_comparison_by_size_carries_it_too(library):
    from service.app import create_app

    queued = ContractClient(create_app({"TESTING": True, "ASYNC_THRESHOLD_BYTES": 100})
                            .test_client())
    resp = queued.post("/v1/comparisons", json=_body())
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(queued, resp.headers["Location"])
    assert job["status"] == "finished", job
    _same_as_library(job["result"], library)


def test_recorded_results_evaluated_with_real_gains_still_compare(client, library):
    ids = {}
    for name, run in RUNS.items():
        resp = client.post("/v1/evaluations", json={
            "run": run, "qrels": QRELS, "measures": MEASURES, "options": {"gains": "real"},
            "record": {"system": name, "label": "night-1"}})
        assert resp.status_code == 200, resp.get_json()
        ids[name] = resp.get_json()["recorded"]["id"]
    by_id = client.post("/v1/comparisons", json={
        "runs": [{"name": n, "result_id": ids[n]} for n in RUNS], "measures": MEASURES})
    assert by_id.status_code == 200, by_id.get_json()
    doc = by_id.get_json()
    assert doc["pairs"] == library["pairs"] and doc["summary"] == library["summary"]
    assert doc["options"]["profile"] == "cranfield" and doc["options"]["gains"] == "real"
    # one recorded, one inline against the same qrels text, declared: the same comparison
    mixed = client.post("/v1/comparisons", json={
        "runs": [{"name": "bm25", "result_id": ids["bm25"]},
                 {"name": "dense", "run": RUNS["dense"]}],
        "qrels": QRELS, "measures": MEASURES, "options": {"gains": "real"}})
    assert mixed.status_code == 200, mixed.get_json()
    assert mixed.get_json()["pairs"] == library["pairs"]
    assert mixed.get_json()["provenance"]["runs"]["bm25"]["result_id"] == ids["bm25"]


def test_stored_qrels_declaring_real_gains_compare_under_cranfield(client, library):
    put = client.put("/v1/qrels/llm-cmp", json={"qrels": QRELS, "gains": "real"})
    assert put.status_code in (200, 201), put.get_json()
    resp = client.post("/v1/comparisons", json={
        "runs": [{"name": n, "run": r} for n, r in RUNS.items()], "qrels_id": "llm-cmp",
        "measures": MEASURES})
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json()["pairs"] == library["pairs"]
    assert resp.get_json()["options"]["profile"] == "cranfield"


def _problem(resp) -> dict:
    assert resp.status_code == 422, resp.get_json()
    doc = resp.get_json()
    return {k: doc[k] for k in ("type", "title", "status", "detail", "errors")}


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_a_trec_eval_profile_refuses_a_real_grade_as_without_the_declaration(client,
                                                                             profile):
    line, grade = FIRST_REAL
    today = _problem(client.post("/v1/comparisons", json=_body(
        measures=["ndcg"], options={"profile": profile})))
    assert today["detail"].endswith(f"grade: '{grade}' is not an integer grade")
    assert f"qrels line {line}" in today["errors"], today
    declared = _problem(client.post("/v1/comparisons", json=_body(
        measures=["ndcg"], options={"profile": profile, "gains": "real"})))
    assert declared == today
    form = {"runs": [(io.BytesIO(text.encode()), f"{name}.txt")
                     for name, text in RUNS.items()],
            "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"),
            "measures": "ndcg", "gains": "real", "profile": profile}
    multipart = _problem(client.post("/v1/comparisons", data=form,
                                     content_type="multipart/form-data"))
    assert multipart["detail"] == today["detail"]
    # an evaluation's refusal of the same qrels is the same sentence
    evaluated = _problem(client.post("/v1/evaluations", json={
        "run": RUNS["bm25"], "qrels": QRELS, "measures": ["ndcg"],
        "options": {"profile": profile, "gains": "real"}}))
    assert evaluated["detail"] == today["detail"]
    # queued: the job fails with the same problem
    resp = client.post("/v1/comparisons", json=_body(
        measures=["ndcg"], options={"profile": profile, "gains": "real"}),
        headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "failed", job
    assert job["problem"]["detail"].endswith(f"grade: '{grade}' is not an integer grade")


def test_a_binary_measure_without_rel_is_refused_naming_it(client):
    problem = _problem(client.post("/v1/comparisons", json=_body(measures=["ndcg", "P.5"])))
    assert "P_5" in problem["detail"] and "rel=" in problem["detail"]
    evaluated = _problem(client.post("/v1/evaluations", json={
        "run": RUNS["bm25"], "qrels": QRELS, "measures": ["ndcg", "P.5"],
        "options": {"gains": "real"}}))
    assert evaluated["detail"] == problem["detail"]
    # the default measures (map, P.10...) likewise: map named
    default = _problem(client.post("/v1/comparisons", json={
        k: v for k, v in _body().items() if k != "measures"}))
    assert "'map'" in default["detail"] and "rel=" in default["detail"]


def test_an_unknown_gains_value_is_refused(client):
    resp = client.post("/v1/comparisons", json=_body(options={"gains": "float"}))
    assert resp.status_code == 422
    assert "options.gains" in resp.get_json()["errors"], resp.get_json()
