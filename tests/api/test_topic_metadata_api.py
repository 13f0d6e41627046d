"""Stored topic metadata and the service half of segments and weights (issue #28): versions
of ``/v1/topic-metadata/{id}`` (one version whatever form the metadata came in), evaluations
and comparisons naming it by ``topic_metadata_id`` (pinned to ``id@version``), recorded
results keeping the per-segment aggregates and weighted means the engine computed, a gate
held on one segment, and a system's trend by segment. Each test runs on SQLite and on
PostgreSQL (``RESULTS_ON_POSTGRES``). Every answer is checked against openapi.yaml.

The example: 30 topics, one relevant document ``r`` each; topics 0-9 are the ``tail``
(weight 3), 10-29 the ``head`` (weight 1). The baseline ranks ``r`` first on the tail and
second on the head; the candidate ranks it third on the tail and first on the head. So, by
hand (AP = 1/rank of ``r``): the candidate's MAP is 1/3 on the tail, 1 on the head,
(10/3 + 20)/30 = 0.7778 overall (the baseline's: 1, 0.5, 0.6667), and weighted
(30·(1/3) + 20·1)/(30 + 20) = 0.6 (the baseline's: (30 + 10)/50 = 0.8). Only the tail
regressed: a gate on it fails, the same gate on the whole passes.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ContractClient, finished_job

import cranfield
from cranfield.inputs.segments import read_topic_metadata
from service.app import create_app

RESULTS_ON_POSTGRES = True  # tests/api/conftest.py: each test on SQLite and on PostgreSQL

TOPICS = [f"q{i:02d}" for i in range(30)]
TAIL = TOPICS[:10]
QRELS = {t: {"r": 1} for t in TOPICS}
BASE = {t: ({"r": 3.0, "x1": 2.0, "x2": 1.0} if t in TAIL else {"x1": 3.0, "r": 2.0, "x2": 1.0})
        for t in TOPICS}
CAND = {t: ({"x1": 3.0, "x2": 2.0, "r": 1.0} if t in TAIL else {"r": 3.0, "x1": 2.0, "x2": 1.0})
        for t in TOPICS}
METADATA = {t: {"segments": ["tail"] if t in TAIL else ["head"],
                "weight": 3 if t in TAIL else 1} for t in TOPICS}
# the same metadata as text, topics in another order, weights spelled otherwise
METADATA_TEXT = "".join(f"{t}\t{'tail' if t in TAIL else 'head'}\t{'3.0' if t in TAIL else '1'}\n"
                        for t in reversed(TOPICS))
MEASURES = ["map", "P_1", "num_rel_ret"]


@pytest.fixture
def client(app):
    return ContractClient(app.test_client())


def put_metadata(client, metadata_id: str, body, **kwargs):
    if isinstance(body, str):
        return client.put(f"/v1/topic-metadata/{metadata_id}", data=body,
                          content_type="text/plain", **kwargs)
    return client.put(f"/v1/topic-metadata/{metadata_id}", json={"topic_metadata": body},
                      **kwargs)


def evaluate(client, run, **extra):
    resp = client.post("/v1/evaluations", json={"run": run, "qrels": QRELS,
                                                "measures": MEASURES, **extra})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def test_versions_one_per_content_whatever_the_form(client):
    first = put_metadata(client, "traffic", METADATA)
    assert first.status_code == 201
    meta = first.get_json()
    engine = read_topic_metadata(METADATA)
    assert meta["sha256"] == engine.sha256 and meta["version"] == engine.sha256[:16]
    assert meta["topics"] == 30 and meta["segments"] == {"head": 20, "tail": 10}
    assert meta["weighted"] is True and meta["versions"] == [meta["version"]]
    assert first.headers["ETag"] == f'"{meta["version"]}"'
    assert first.headers["Location"] == f"/v1/topic-metadata/traffic@{meta['version']}"
    # the same metadata as text: no new version
    again = put_metadata(client, "traffic", METADATA_TEXT)
    assert again.status_code == 200 and again.get_json()["version"] == meta["version"]
    # other metadata (q00 moves to the head): a new version, the old one still addressable
    moved = dict(METADATA, q00={"segments": ["head"], "weight": 1})
    stale = put_metadata(client, "traffic", moved, headers={"If-Match": '"0123456789abcdef"'})
    assert stale.status_code == 412
    second = put_metadata(client, "traffic", moved, headers={"If-Match": f'"{meta["version"]}"'})
    assert second.status_code == 201
    v2 = second.get_json()["version"]
    assert second.get_json()["segments"] == {"head": 21, "tail": 9}
    latest = client.get("/v1/topic-metadata/traffic").get_json()
    assert latest["version"] == v2 and latest["versions"] == [meta["version"], v2]
    old = client.get(f"/v1/topic-metadata/traffic@{meta['version']}?content=true").get_json()
    assert old["version"] == meta["version"] and old["latest"] == v2
    assert read_topic_metadata(old["topic_metadata"]) == engine  # reads back to the same
    listed = client.get("/v1/topic-metadata").get_json()
    assert [i["id"] for i in listed["items"]] == ["traffic"] and listed["total"] == 1
    # an evaluation pinned to the old version segments by it, and says which it used
    doc = evaluate(client, CAND, topic_metadata_id=f"traffic@{meta['version']}")
    assert doc["segments"]["tail"]["topics"] == 10
    assert doc["provenance"]["topic_metadata_version"] == f"traffic@{meta['version']}"
    doc = evaluate(client, CAND, topic_metadata_id="traffic")
    assert doc["segments"]["tail"]["topics"] == 9
    assert doc["provenance"]["topic_metadata_version"] == f"traffic@{v2}"
    assert doc["provenance"]["options"]["topic_metadata"]["sha256"] == \
        second.get_json()["sha256"]
    assert client.delete("/v1/topic-metadata/traffic").status_code == 204
    assert client.get("/v1/topic-metadata/traffic").status_code == 404


def test_bad_metadata_and_references_are_refused_naming_the_field(client):
    bad = put_metadata(client, "m", "q01 tail 2\nq02 tail,tail\n")
    assert bad.status_code == 422
    assert list(bad.get_json()["errors"]) == ["topic_metadata line 2"]
    negative = put_metadata(client, "m", {"q01": {"weight": -1}})
    assert negative.status_code == 422
    assert list(negative.get_json()["errors"]) == ["topic_metadata.q01.weight"]
    assert client.put("/v1/topic-metadata/bad%20id", json={"topic_metadata": METADATA}
                      ).status_code == 422
    assert put_metadata(client, "m", METADATA).status_code == 201
    unknown = client.post("/v1/evaluations", json={"run": CAND, "qrels": QRELS,
                                                   "topic_metadata_id": "nope"})
    assert unknown.status_code == 422 and list(unknown.get_json()["errors"]) == \
        ["topic_metadata_id"]
    both = client.post("/v1/evaluations", json={
        "run": CAND, "qrels": QRELS, "topic_metadata_id": "m",
        "options": {"topic_metadata": METADATA}})
    assert both.status_code == 422 and list(both.get_json()["errors"]) == \
        ["topic_metadata_id"]


def test_a_tenant_sees_only_its_own_metadata(tmp_path):
    from service.auth import key_line

    keys = {"write-a": ("write", "team-a"), "admin-a": ("admin", "team-a"),
            "write-b": ("write", "team-b")}
    path = tmp_path / "keys.txt"
    path.write_text("\n".join(key_line(k, r, t, k) for k, (r, t) in keys.items()))
    keyed = ContractClient(create_app({"TESTING": True, "API_KEYS_FILE": str(path)})
                           .test_client())

    def auth(key):
        return {"Authorization": f"Bearer {key}"}

    assert put_metadata(keyed, "m", METADATA, headers=auth("write-a")).status_code == 201
    assert keyed.get("/v1/topic-metadata/m", headers=auth("write-b")).status_code == 404
    assert keyed.get("/v1/topic-metadata", headers=auth("write-b")).get_json()["total"] == 0
    refused = keyed.post("/v1/evaluations", headers=auth("write-b"), json={
        "run": CAND, "qrels": QRELS, "topic_metadata_id": "m"})
    assert refused.status_code == 422
    # team b's own "m" is another id: its versions are its own
    assert put_metadata(keyed, "m", METADATA_TEXT, headers=auth("write-b")).status_code == 201
    assert keyed.get("/v1/topic-metadata/m", headers=auth("write-b")).get_json()[
        "versions"] == keyed.get("/v1/topic-metadata/m", headers=auth("write-a")).get_json()[
        "versions"]
    # deleting takes an admin key, as deleting qrels does
    assert keyed.delete("/v1/topic-metadata/m", headers=auth("write-a")).status_code == 403
    assert keyed.delete("/v1/topic-metadata/m", headers=auth("admin-a")).status_code == 204
    assert keyed.get("/v1/topic-metadata/m", headers=auth("write-b")).status_code == 200


def _engine(run) -> cranfield.Evaluation:
    return cranfield.evaluate(QRELS, run, MEASURES, topic_metadata=METADATA)


def test_a_recorded_result_keeps_the_segments_the_engine_computed(client):
    version = put_metadata(client, "traffic", METADATA).get_json()["version"]
    doc = evaluate(client, CAND, topic_metadata_id="traffic",
                   record={"system": "bm25", "label": "candidate"})
    engine = _engine(CAND)
    # by hand: the tail's MAP is 1/3, the head's 1; weighted 0.6 (numpy's average)
    assert engine.segments["tail"]["aggregate"]["map"] == pytest.approx(1 / 3, abs=1e-15)
    assert engine.segments["head"]["aggregate"]["map"] == 1.0
    weights = np.array([METADATA[t]["weight"] for t in TOPICS], dtype=float)
    per_topic = np.array([engine.per_topic[t]["map"] for t in TOPICS])
    assert engine.weighted["map"] == np.average(per_topic, weights=weights) == \
        pytest.approx(0.6, abs=1e-15)
    got = client.get(f"/v1/results/{doc['recorded']['id']}").get_json()
    assert got["document"]["segments"] == engine.segments  # every value, bit for bit
    assert got["document"]["weighted"] == engine.weighted
    assert got["topic_metadata_version"] == f"traffic@{version}"
    assert got["topic_metadata_sha256"] == read_topic_metadata(METADATA).sha256
    assert got["document"]["provenance"]["topic_metadata_version"] == f"traffic@{version}"
    # inline metadata records its digest, and no stored version
    inline = evaluate(client, BASE, options={"topic_metadata": METADATA_TEXT},
                      record={"system": "bm25", "label": "baseline"})
    summary = client.get(f"/v1/results/{inline['recorded']['id']}").get_json()
    assert summary["topic_metadata_version"] is None
    assert summary["topic_metadata_sha256"] == read_topic_metadata(METADATA).sha256
    assert summary["document"]["segments"] == _engine(BASE).segments
    # a result recorded without metadata has none of it
    plain = evaluate(client, BASE, record={"system": "bm25", "label": "plain"})
    got = client.get(f"/v1/results/{plain['recorded']['id']}").get_json()
    assert "segments" not in got["document"] and "topic_metadata_sha256" not in got


def test_a_queued_evaluation_is_pinned_to_the_version_it_named(client):
    version = put_metadata(client, "traffic", METADATA).get_json()["version"]
    resp = client.post("/v1/evaluations", headers={"Prefer": "respond-async"}, json={
        "run": CAND, "qrels": QRELS, "measures": MEASURES, "topic_metadata_id": "traffic",
        "record": {"system": "bm25", "label": "queued"}})
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    doc = job["result"]
    assert doc["provenance"]["topic_metadata_version"] == f"traffic@{version}"
    assert doc["segments"] == _engine(CAND).segments
    got = client.get(f"/v1/results/{doc['recorded']['id']}").get_json()
    assert got["topic_metadata_version"] == f"traffic@{version}"


def _compare(client, gate, **extra):
    return client.post("/v1/comparisons", json={
        "runs": [{"name": "base", "run": BASE}, {"name": "cand", "run": CAND}],
        "qrels": QRELS, "measures": ["map"], "baseline": "base", "tests": ["randomization"],
        "gate": gate, **extra})


def test_a_gate_on_the_tail_fails_where_the_whole_passes(client):
    version = put_metadata(client, "traffic", METADATA).get_json()["version"]
    resp = _compare(client, ["map:0.01@segment=tail", "map:0.01"],
                    topic_metadata_id="traffic")
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert doc["provenance"]["topic_metadata_version"] == f"traffic@{version}"
    tail, whole = doc["gate"]["checks"]
    assert tail["segment"] == "tail" and "segment" not in whole
    assert (tail["verdict"], whole["verdict"]) == ("fail", "pass")
    assert doc["gate"]["verdict"] == "fail"
    # the tail's means and drop, by hand: 1 -> 1/3; 10 topics all worse: the exact
    # randomization test's p is 2/2^10, adjusted (Holm) over the gate's two checks
    assert tail["mean_baseline"] == 1.0
    assert tail["mean_candidate"] == pytest.approx(1 / 3, abs=1e-15)
    assert tail["drop"] == pytest.approx(2 / 3, abs=1e-15)
    assert tail["p_value"] == pytest.approx(2 / 2**10, abs=1e-12)
    assert "on segment 'tail'" in tail["reasons"][0]
    assert {o["topic"] for o in tail["offending_topics"]} == set(TAIL)
    assert whole["mean_candidate"] == pytest.approx((10 / 3 + 20) / 30, abs=1e-12)
    # the object form says the same
    as_object = _compare(client, {"measure": "map", "max_drop": 0.01, "segment": "tail"},
                         topic_metadata_id="traffic").get_json()
    assert as_object["gate"]["checks"][0]["verdict"] == "fail"
    assert as_object["gate"]["checks"][0]["segment"] == "tail"


def test_a_gate_on_a_missing_segment_is_refused_not_passed(client):
    put_metadata(client, "traffic", METADATA)
    unknown = _compare(client, "map:0.01@segment=german", topic_metadata_id="traffic")
    assert unknown.status_code == 422
    assert "gate.segment" in unknown.get_json()["errors"]
    assert "'german'" in unknown.get_json()["detail"]
    without = _compare(client, "map:0.01@segment=tail")  # no metadata at all
    assert without.status_code == 422 and "gate.segment" in without.get_json()["errors"]
    # a segment whose topics no run has: nothing to compare, so no verdict either
    only_head = {t: v for t, v in CAND.items() if t not in TAIL}
    resp = client.post("/v1/comparisons", json={
        "runs": [{"name": "base", "run": {t: BASE[t] for t in only_head}},
                 {"name": "cand", "run": only_head}],
        "qrels": QRELS, "measures": ["map"], "baseline": "base", "tests": ["randomization"],
        "gate": "map:0.01@segment=tail", "topic_metadata_id": "traffic"})
    assert resp.status_code == 422 and "gate.segment" in resp.get_json()["errors"]
    bad = _compare(client, "map:0.01@segment=a b", topic_metadata_id="traffic")
    assert bad.status_code == 422


def test_the_trend_of_a_segment(client):
    put_metadata(client, "traffic", METADATA)
    for label, run in (("baseline", BASE), ("candidate", CAND)):
        evaluate(client, run, topic_metadata_id="traffic",
                 record={"system": "bm25", "label": label})
    evaluate(client, CAND, record={"system": "bm25", "label": "no metadata"})
    tail = client.get("/v1/systems/bm25/trend?measure=map&segment=tail").get_json()
    assert tail["segment"] == "tail" and tail["total"] == 2
    assert [p["label"] for p in tail["points"]] == ["baseline", "candidate"]
    assert [p["mean"] for p in tail["points"]] == [
        _engine(BASE).segments["tail"]["aggregate"]["map"],
        _engine(CAND).segments["tail"]["aggregate"]["map"]]
    assert [p["n_topics"] for p in tail["points"]] == [10, 10]
    weighted = client.get("/v1/systems/bm25/trend?measure=map&weighted=true").get_json()
    assert [p["mean"] for p in weighted["points"]] == [
        _engine(BASE).weighted["map"], _engine(CAND).weighted["map"]]
    assert weighted["points"][1]["mean"] == pytest.approx(0.6, abs=1e-15)
    whole = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    assert whole["total"] == 3  # the overall series has every result
    page = client.get("/v1/systems/bm25/trend?measure=map&segment=tail",
                      headers={"Accept": "text/html"})
    assert page.status_code == 200 and "map on segment tail" in page.get_data(as_text=True)
    missing = client.get("/v1/systems/bm25/trend?measure=map&segment=german")
    assert missing.status_code == 404 and "head, tail" in missing.get_json()["detail"]
    both = client.get("/v1/systems/bm25/trend?measure=map&segment=tail&weighted=true")
    assert both.status_code == 400


def test_a_queued_comparison_gates_on_the_version_it_named(client):
    version = put_metadata(client, "traffic", METADATA).get_json()["version"]
    resp = client.post("/v1/comparisons", headers={"Prefer": "respond-async"}, json={
        "runs": [{"name": "base", "run": BASE}, {"name": "cand", "run": CAND}],
        "qrels": QRELS, "measures": ["map"], "baseline": "base", "tests": ["randomization"],
        "gate": ["map:0.01@segment=tail", "map:0.01"], "topic_metadata_id": "traffic"})
    assert resp.status_code == 202
    # a new version put meanwhile does not change what the job was asked with
    put_metadata(client, "traffic", dict(METADATA, q00={"segments": ["head"]}))
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    doc = job["result"]
    assert doc["provenance"]["topic_metadata_version"] == f"traffic@{version}"
    assert len(doc["segments"]["tail"]["topics"]) == 10
    assert [(c.get("segment"), c["verdict"]) for c in doc["gate"]["checks"]] == [
        ("tail", "fail"), (None, "pass")]


def test_the_trend_of_a_segment_recorded_without_topics(client):
    """Review R2 F7: a segment no evaluated topic carried was in the recorded document but
    not in the trend's rows, so ?segment= said the results were never recorded with it. Now
    it is a point over 0 topics with no mean; a label never recorded is still 404."""
    metadata = {**METADATA, "gone1": {"segments": ["gone"]}}  # no such topic in the run
    doc = evaluate(client, CAND, options={"topic_metadata": metadata},
                   record={"system": "s", "label": "one"})
    assert doc["segments"]["gone"] == {"topics": 0, "aggregate": {}}
    gone = client.get("/v1/systems/s/trend?measure=map&segment=gone")
    assert gone.status_code == 200, gone.get_json()
    points = gone.get_json()["points"]
    assert [(p["label"], p["n_topics"], p["mean"]) for p in points] == [("one", 0, None)]
    page = client.get("/v1/systems/s/trend?measure=map&segment=gone",
                      headers={"Accept": "text/html"})
    assert page.status_code == 200 and "map on segment gone" in page.get_data(as_text=True)
    tail = client.get("/v1/systems/s/trend?measure=map&segment=tail").get_json()
    assert [p["mean"] for p in tail["points"]] == [doc["segments"]["tail"]["aggregate"]["map"]]
    never = client.get("/v1/systems/s/trend?measure=map&segment=german")
    assert never.status_code == 404 and "gone, head, tail" in never.get_json()["detail"]
