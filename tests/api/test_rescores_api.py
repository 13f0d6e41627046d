"""Re-scoring recorded results under a new qrels version (issue #31), over the API with the
embedded queue: POST /v1/systems/{name}/rescore and /v1/rescores, GET /v1/rescores/{id},
the trend's series and boundaries, and a gate against a baseline evaluated under other qrels.
Every response is checked against openapi.yaml (the contract client); each test runs on
SQLite and on PostgreSQL (conftest). The numbers are checked against average precision
computed here by its definition (Buckley & Voorhees; trec_eval's AP), not by the engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ap_by_definition import average_precision, mean_ap
from conftest import ContractClient, finished_rescore

from service.app import create_app
from service.auth import key_line

RESULTS_ON_POSTGRES = True
# v2 adds judgments (d2 and d4 relevant) to v1
V1 = {"q1": {"d1": 1}, "q2": {"d5": 1}}
V2 = {"q1": {"d1": 1, "d2": 1}, "q2": {"d5": 1, "d4": 1}}
NIGHTS = [
    {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}},
    {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d5": 2.0, "d4": 1.0}},
    {"q1": {"d2": 3.0, "d3": 2.0, "d1": 1.0}, "q2": {"d6": 2.0, "d5": 1.0}},
]
TREND_POINT = {"id", "label", "commit", "created_at", "mean", "n_topics", "ci_low", "ci_high",
               "gate"}


@pytest.fixture
def clocked(app):
    times = iter(datetime(2026, 11, 1, 6, tzinfo=UTC) + timedelta(days=i) for i in range(100))
    app.extensions["results"].clock = lambda: next(times)
    return app


def _put_qrels(client, qrels, name="adhoc", headers=None) -> str:
    resp = client.put(f"/v1/qrels/{name}", json={"qrels": qrels}, headers=headers or {})
    assert resp.status_code in (200, 201), resp.get_json()
    return f"{name}@{resp.get_json()['version']}"


def _record(client, run, label, keep_run=True, system="bm25", headers=None, qrels_id="adhoc"):
    resp = client.post("/v1/evaluations", headers=headers or {}, json={
        "run": run, "qrels_id": qrels_id, "measures": ["map", "P.2"],
        "record": {"system": system, "label": label, "commit": f"c-{label}",
                   "tags": ["nightly"], "keep_run": keep_run}})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()["recorded"]["id"]


def _finished(client, rescore_id: str, headers=None) -> dict:
    """The re-score once no item is queued (its jobs run on the embedded queue's thread)."""
    return finished_rescore(client, rescore_id, headers=headers)


@pytest.fixture
def history(clocked):
    """Three nights under v1, the first two keeping their runs, then v2 put."""
    client = ContractClient(clocked.test_client())
    v1 = _put_qrels(client, V1)
    ids = [_record(client, run, f"night-{i + 1}", keep_run=i < 2)
           for i, run in enumerate(NIGHTS)]
    v2 = _put_qrels(client, V2)
    return client, v1, v2, ids


def test_a_rescore_records_linked_results_at_the_original_times(history):
    client, v1, v2, ids = history
    resp = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2})
    assert resp.status_code == 202
    doc = resp.get_json()
    assert resp.headers["Location"].endswith(f"/v1/rescores/{doc['id']}")
    assert doc["total"] == 3 and doc["skipped"] == 1 and doc["qrels_id"] == v2
    skipped = [i for i in doc["items"] if i["state"] == "skipped"]
    assert [i["result_id"] for i in skipped] == [ids[2]]
    assert "run was not kept" in skipped[0]["reason"]
    done = _finished(client, doc["id"])
    assert (done["done"], done["failed"], done["queued"], done["skipped"]) == (2, 0, 0, 1)
    by_original = {i["result_id"]: i["new_result_id"] for i in done["items"]}
    assert done["new_result_ids"] == [by_original[ids[0]], by_original[ids[1]]]
    for night, original_id in enumerate(ids[:2]):
        original = client.get(f"/v1/results/{original_id}").get_json()
        new = client.get(f"/v1/results/{by_original[original_id]}").get_json()
        assert new["created_at"] == original["created_at"]
        assert (new["system"], new["label"], new["commit"], new["tags"]) == \
            ("bm25", f"night-{night + 1}", f"c-night-{night + 1}", ["nightly"])
        assert original["qrels_version"] == v1 and new["qrels_version"] == v2
        assert new["document"]["provenance"]["rescores"] == original_id
        assert new["document"]["provenance"]["run_sha256"] == \
            original["document"]["provenance"]["run_sha256"]
        assert new["measures"] == original["measures"] == ["map", "P_2"]
        assert new["aggregate"]["map"] == pytest.approx(mean_ap(NIGHTS[night], V2), abs=1e-12)
        assert original["aggregate"]["map"] == pytest.approx(mean_ap(NIGHTS[night], V1),
                                                             abs=1e-12)
        # the same numbers an evaluation of the same run under v2 gives
        direct = client.post("/v1/evaluations", json={
            "run": NIGHTS[night], "qrels_id": v2, "measures": ["map", "P.2"]}).get_json()
        assert new["aggregate"] == direct["aggregate"]
        assert new["document"]["per_topic"] == direct["per_topic"]


def test_rescoring_again_under_the_same_version_records_nothing_new(history):
    client, _, v2, ids = history
    first = _finished(client, client.post("/v1/systems/bm25/rescore",
                                          json={"qrels_id": v2}).get_json()["id"])
    count = client.get("/v1/systems/bm25/results").get_json()["total"]
    assert count == 5
    again = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2}).get_json()
    assert again["id"] != first["id"]
    assert (again["state"], again["done"], again["queued"]) == ("finished", 2, 0)
    assert again["new_result_ids"] == first["new_result_ids"]
    assert client.get("/v1/systems/bm25/results").get_json()["total"] == count


def test_the_trend_has_a_series_per_qrels_version_and_the_boundary(history):
    client, v1, v2, ids = history
    done = _finished(client, client.post("/v1/systems/bm25/rescore",
                                         json={"qrels_id": v2}).get_json()["id"])
    trend = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    # the old fields as they were: every result, whatever its qrels, in the old shape
    assert len(trend["points"]) == 5 and all(set(p) == TREND_POINT for p in trend["points"])
    assert [s["qrels_version"] for s in trend["series"]] == [v1, v2]
    old, new = trend["series"]
    assert [p["id"] for p in old["points"]] == ids
    assert [p["rescores"] for p in old["points"]] == [None, None, None]
    assert [p["id"] for p in new["points"]] == done["new_result_ids"]
    assert [p["rescores"] for p in new["points"]] == ids[:2]
    assert [p["created_at"] for p in new["points"]] == \
        [p["created_at"] for p in old["points"][:2]]
    assert [p["mean"] for p in new["points"]] == pytest.approx(
        [mean_ap(run, V2) for run in NIGHTS[:2]], abs=1e-12)
    [boundary] = trend["boundaries"]
    assert boundary["from"]["qrels_version"] == v1 and boundary["to"]["qrels_version"] == v2
    assert (boundary["after"], boundary["before"], boundary["at"]) == (ids[2], None, None)
    # a night evaluated under v2: the boundary moves between the last v1 night and it
    fourth = _record(client, NIGHTS[2], "night-4")
    trend = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    [boundary] = trend["boundaries"]
    assert (boundary["after"], boundary["before"]) == (ids[2], fourth)
    assert [p["id"] for p in trend["series"][1]["points"]][-1] == fourth
    html = client.get("/v1/systems/bm25/trend?measure=map",
                      headers={"Accept": "text/html"}).get_data(as_text=True)
    assert html.count('class="line series"') == 2 and html.count('class="boundary"') == 1
    assert f"qrels {v1} → {v2}" in html


def test_a_gate_uses_the_baselines_rescore_under_the_candidates_qrels(history):
    client, v1, v2, ids = history
    client.put("/v1/systems/bm25/baseline", json={"result_id": ids[0]})
    tonight = _record(client, NIGHTS[1], "night-4")  # under v2 (adhoc's latest)
    body = {"runs": [{"result_id": tonight}], "baseline": {"system": "bm25"},
            "measures": ["map"], "gate": "map:0.5"}
    refused = client.post("/v1/comparisons", json=body)
    assert refused.status_code == 409
    problem = refused.get_json()
    assert problem["type"].endswith("/baseline-not-rescored")
    assert "baseline.system" in problem["errors"]
    assert v1 in problem["detail"] and v2 in problem["detail"]
    assert "POST /v1/systems/bm25/rescore" in problem["detail"]
    done = _finished(client, client.post("/v1/systems/bm25/rescore",
                                         json={"qrels_id": v2}).get_json()["id"])
    rescored = {i["result_id"]: i["new_result_id"] for i in done["items"]}[ids[0]]
    resp = client.post("/v1/comparisons", json=body)
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    runs = doc["provenance"]["runs"]
    assert {r["result_id"] for r in runs.values()} == {tonight, rescored}
    assert doc["provenance"]["qrels_sha256"] == \
        client.get(f"/v1/results/{tonight}").get_json()["qrels_sha256"]
    # with the stored qrels named, too
    named = client.post("/v1/comparisons", json={**body, "qrels_id": v2})
    assert named.status_code == 200
    assert {r["result_id"] for r in named.get_json()["provenance"]["runs"].values()} == \
        {tonight, rescored}


def test_several_systems_at_once(history):
    client, _, v2, ids = history
    other = _record(client, NIGHTS[0], "o-1", system="other", qrels_id=_put_qrels(client, V1))
    doc = client.post("/v1/rescores", json={"qrels_id": v2,
                                            "systems": ["bm25", "other"]}).get_json()
    assert doc["systems"] == ["bm25", "other"] and doc["total"] == 4
    done = _finished(client, doc["id"])
    assert (done["done"], done["skipped"]) == (3, 1)
    assert [i["result_id"] for i in done["items"]] == [*ids, other]


# topic metadata (issue #28): q1 and q2 in segments, q2 weighing 2; a later version swaps them
AREAS = {"q1": {"segments": ["head"]}, "q2": {"segments": ["tail"], "weight": 2.0}}
AREAS_LATER = {"q1": {"segments": ["tail"]}, "q2": {"segments": ["head"]}}


def test_segments_are_rescored_with_the_stored_metadata_version_recorded(clocked):
    """A result recorded with stored topic metadata is re-scored with that version (not the
    id's latest): the re-score's segments equal an evaluation of the same run under v2 with
    that version, and each segment's map is AP by its definition on its topic; a result
    recorded with inline metadata (not kept) is skipped, saying why."""
    client = ContractClient(clocked.test_client())
    _put_qrels(client, V1)
    put = client.put("/v1/topic-metadata/areas", json={"topic_metadata": AREAS})
    assert put.status_code == 201, put.get_json()
    areas = f"areas@{put.get_json()['version']}"
    body = {"run": NIGHTS[0], "qrels_id": "adhoc", "measures": ["map", "P.2"]}
    resp = client.post("/v1/evaluations", json=dict(body, topic_metadata_id="areas", record={
        "system": "bm25", "label": "night-1", "keep_run": True}))
    assert resp.status_code == 200, resp.get_json()
    original_id = resp.get_json()["recorded"]["id"]
    resp = client.post("/v1/evaluations", json=dict(body, options={"topic_metadata": AREAS},
                                                    record={"system": "inline",
                                                            "label": "night-1",
                                                            "keep_run": True}))
    assert resp.status_code == 200, resp.get_json()
    inline_id = resp.get_json()["recorded"]["id"]
    later = client.put("/v1/topic-metadata/areas", json={"topic_metadata": AREAS_LATER})
    assert later.status_code in (200, 201) and later.get_json()["version"] not in areas
    v2 = _put_qrels(client, V2)

    resp = client.post("/v1/rescores", json={"qrels_id": v2, "systems": ["bm25", "inline"]})
    assert resp.status_code == 202, resp.get_json()
    done = _finished(client, resp.get_json()["id"])
    items = {i["result_id"]: i for i in done["items"]}
    assert items[original_id]["state"] == "done", items
    assert items[inline_id]["state"] == "skipped"
    assert "inline topic metadata" in items[inline_id]["reason"]
    new = client.get(f"/v1/results/{items[original_id]['new_result_id']}").get_json()
    assert new["topic_metadata_version"] == areas
    assert new["document"]["provenance"]["topic_metadata_version"] == areas
    direct = client.post("/v1/evaluations", json=dict(body, qrels_id=v2,
                                                      topic_metadata_id=areas))
    assert direct.status_code == 200, direct.get_json()
    segments = new["document"]["segments"]
    assert set(segments) == {"head", "tail"}
    assert segments == direct.get_json()["segments"]
    for label, topic in (("head", "q1"), ("tail", "q2")):
        assert segments[label]["topics"] == 1
        assert segments[label]["aggregate"]["map"] == pytest.approx(
            average_precision(NIGHTS[0][topic], V2[topic]), abs=1e-12)
    # the weight is kept too: the re-score's map is the weighted mean, as the direct one's
    assert new["aggregate"]["map"] == direct.get_json()["aggregate"]["map"] == pytest.approx(
        (average_precision(NIGHTS[0]["q1"], V2["q1"])
         + 2 * average_precision(NIGHTS[0]["q2"], V2["q2"])) / 3, abs=1e-12)


def test_refusals_name_the_field(history, app):
    client, _, v2, _ = history
    cases = [
        ({}, 422, "qrels_id"),
        ({"qrels_id": "nope@0123456789abcdef"}, 422, "qrels_id"),
        ({"qrels_id": "bad id!"}, 422, "qrels_id"),
        ({"qrels_id": v2, "extra": 1}, 422, "extra"),
    ]
    for body, status, field in cases:
        resp = client.post("/v1/systems/bm25/rescore", json=body)
        assert resp.status_code == status, (body, resp.get_json())
        assert field in resp.get_json()["errors"], resp.get_json()
    assert client.post("/v1/systems/nobody/rescore", json={"qrels_id": v2}).status_code == 404
    assert client.post("/v1/rescores", json={"qrels_id": v2, "systems": ["bm25", "nobody"]}
                       ).status_code == 404
    assert client.post("/v1/rescores", json={"qrels_id": v2, "systems": []}
                       ).get_json()["errors"].keys() == {"systems"}
    assert client.post("/v1/systems/bm25/rescore", data="x",
                       content_type="text/plain").status_code == 415
    assert client.get("/v1/rescores/not-an-id").status_code == 422
    assert client.get("/v1/rescores/" + "0" * 32).status_code == 404
    app.config["MAX_RESCORE_RESULTS"] = 2
    resp = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2})
    assert resp.status_code == 422 and "MAX_RESCORE_RESULTS" in resp.get_json()["detail"]


KEYS = {"write-a": ("write", "team-a"), "write-b": ("write", "team-b")}


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def test_another_tenants_systems_and_rescores_are_404s():
    lines = ";".join(key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items())
    client = ContractClient(create_app({"TESTING": True, "API_KEYS": lines}).test_client())
    a, b = auth("write-a"), auth("write-b")
    _put_qrels(client, V1, headers=a)
    _record(client, NIGHTS[0], "n1", headers=a)
    v2 = _put_qrels(client, V2, headers=a)
    doc = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2}, headers=a).get_json()
    assert client.get(f"/v1/rescores/{doc['id']}", headers=b).status_code == 404
    assert client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2},
                       headers=b).status_code == 404
    assert client.post("/v1/rescores", json={"qrels_id": v2, "systems": ["bm25"]},
                       headers=b).status_code == 404
    # b's own system under a's qrels id: a's qrels are not b's
    _put_qrels(client, V1, headers=b)
    _record(client, NIGHTS[0], "n1", headers=b)
    resp = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2}, headers=b)
    assert resp.status_code == 422 and "qrels_id" in resp.get_json()["errors"]
    assert _finished(client, doc["id"], a)["done"] == 1


def _point(pid: str, day: int, sha: str, rescores: str | None = None) -> dict:
    return {"id": pid, "label": pid, "commit": None, "mean": 0.5, "n_topics": 2,
            "ci_low": None, "ci_high": None, "gate": None,
            "created_at": f"2026-11-{day:02d}T06:00:00.000000Z",
            "qrels_version": None if sha == "inline" else f"q@{sha}",
            "qrels_sha256": sha * 4, "rescores": rescores}


@pytest.mark.parametrize(("points", "series", "boundaries"), [
    # one version: one series, no boundary
    ([("a", 1, "v1", None), ("b", 2, "v1", None)], [["a", "b"]], []),
    # evaluated under v1, then v2: the boundary between b and c
    ([("a", 1, "v1", None), ("b", 2, "v1", None), ("c", 3, "v2", None)],
     [["a", "b"], ["c"]], [("v1", "v2", "b", "c")]),
    # v1, v2, back to v1: two boundaries, two series (v1's points all in one)
    ([("a", 1, "v1", None), ("b", 2, "v2", None), ("c", 3, "v1", None)],
     [["a", "c"], ["b"]], [("v1", "v2", "a", "b"), ("v2", "v1", "b", "c")]),
    # v1's nights re-scored under v2 (same times): the v2 series after, its boundary open
    ([("a", 1, "v1", None), ("a2", 1, "v2", "a"), ("b", 2, "v1", None), ("b2", 2, "v2", "b")],
     [["a", "b"], ["a2", "b2"]], [("v1", "v2", "b", None)]),
    # re-scored under v2, then a night evaluated under v2: one boundary, before it
    ([("a", 1, "v1", None), ("a2", 1, "v2", "a"), ("c", 3, "v2", None)],
     [["a"], ["a2", "c"]], [("v1", "v2", "a", "c")]),
    # inline qrels (no stored version) are a series of their digest
    ([("a", 1, "inline", None), ("b", 2, "v1", None)], [["a"], ["b"]],
     [("inline", "v1", "a", "b")]),
])
def test_trend_series_and_boundaries(points, series, boundaries):
    """backend.rescoring.trend_series, table-driven: which points each series holds, in
    order, and where the boundaries fall."""
    from backend.rescoring import trend_series

    got_series, got_boundaries = trend_series([_point(*p) for p in points])
    assert [[p["id"] for p in s["points"]] for s in got_series] == series
    for s in got_series:
        shas = {p[2] * 4 for p in points if p[0] in {q["id"] for q in s["points"]}}
        assert shas == {s["qrels_sha256"]}
        assert all(set(p) == TREND_POINT | {"rescores"} for p in s["points"])
    assert [(b["from"]["qrels_sha256"][:len(f)], b["to"]["qrels_sha256"][:len(t)],
             b["after"], b["before"]) for b, (f, t, _, _) in
            zip(got_boundaries, boundaries, strict=True)] == boundaries
    for b in got_boundaries:
        assert b["at"] == (None if b["before"] is None else
                           next(_point(*p)["created_at"] for p in points if p[0] == b["before"]))
