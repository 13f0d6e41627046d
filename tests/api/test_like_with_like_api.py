"""Like with like, as review R31 of issue #31 found it wanting: a gate against a pinned
baseline that is itself a re-score (finding 1), the trend's series of one digest under
several names (finding 4), and a gate whose comparison sends its qrels inline (finding 9:
held to their digest already, by a 422).
Over the API with the embedded queue, every response checked against openapi.yaml; SQLite
and PostgreSQL (conftest). The means are checked against average precision by its
definition, not by the engine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ap_by_definition import mean_ap
from conftest import ContractClient, finished_rescore

RESULTS_ON_POSTGRES = True
V1 = {"q1": {"d1": 1}, "q2": {"d5": 1}}
V2 = {"q1": {"d1": 1, "d2": 1}, "q2": {"d5": 1, "d4": 1}}
V3 = {"q1": {"d3": 1}, "q2": {"d4": 1}}
NIGHT = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}}
TONIGHT = {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d5": 2.0, "d4": 1.0}}


@pytest.fixture
def client(app):
    times = iter(datetime(2026, 11, 1, 6, tzinfo=UTC) + timedelta(days=i) for i in range(100))
    app.extensions["results"].clock = lambda: next(times)
    return ContractClient(app.test_client())


def put(client, qrels, name="adhoc") -> str:
    resp = client.put(f"/v1/qrels/{name}", json={"qrels": qrels})
    assert resp.status_code in (200, 201), resp.get_json()
    return f"{name}@{resp.get_json()['version']}"


def record(client, run, label, qrels_id, system="bm25") -> str:
    resp = client.post("/v1/evaluations", json={
        "run": run, "qrels_id": qrels_id, "measures": ["map"],
        "record": {"system": system, "label": label, "keep_run": True}})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()["recorded"]["id"]


def rescore(client, qrels_id: str) -> dict:
    """{original id: its re-score's id} once the re-score has finished."""
    rid = client.post("/v1/systems/bm25/rescore", json={"qrels_id": qrels_id}).get_json()["id"]
    doc = finished_rescore(client, rid)
    assert doc["failed"] == 0 and doc["queued"] == 0, doc
    return {i["result_id"]: i["new_result_id"] for i in doc["items"] if i["new_result_id"]}


def gate(client, candidate: str) -> dict:
    resp = client.post("/v1/comparisons", json={
        "runs": [{"result_id": candidate}], "baseline": {"system": "bm25"},
        "measures": ["map"], "gate": "map:0.9"})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def baseline_of(doc: dict, candidate: str) -> str:
    [baseline] = {r["result_id"] for r in doc["provenance"]["runs"].values()} - {candidate}
    return baseline


# -- finding 1: a pinned re-score ----------------------------------------------------------

def test_a_pinned_rescore_gates_under_its_nights_other_judgments(client):
    """The night O under v1, re-scored under v2 (R) and v3 (R3); R pinned. A candidate under
    v3 is gated against R3, one under v1 against O itself: the same night under the
    candidate's judgments (before: 409 baseline-not-rescored for both, and re-scoring could
    not help, the night being re-scored already)."""
    v1 = put(client, V1)
    night = record(client, NIGHT, "night-1", v1)
    v2 = put(client, V2)
    pinned = rescore(client, v2)[night]
    assert client.put("/v1/systems/bm25/baseline",
                      json={"result_id": pinned}).status_code == 200
    v3 = put(client, V3)
    under_v3 = record(client, TONIGHT, "tonight-v3", v3)
    refused = client.post("/v1/comparisons", json={
        "runs": [{"result_id": under_v3}], "baseline": {"system": "bm25"},
        "measures": ["map"]})
    assert refused.status_code == 409  # (not yet re-scored under v3)
    assert refused.get_json()["type"].endswith("/baseline-not-rescored")
    r3 = rescore(client, v3)[night]
    doc = gate(client, under_v3)
    assert baseline_of(doc, under_v3) == r3
    means = {r["result_id"]: r for r in doc["provenance"]["runs"].values()}
    assert client.get(f"/v1/results/{r3}").get_json()["aggregate"]["map"] == \
        pytest.approx(mean_ap(NIGHT, V3), abs=1e-12)
    assert set(means) == {under_v3, r3}
    under_v1 = record(client, TONIGHT, "tonight-v1", v1)
    doc = gate(client, under_v1)
    assert baseline_of(doc, under_v1) == night
    assert client.get(f"/v1/results/{night}").get_json()["aggregate"]["map"] == \
        pytest.approx(mean_ap(NIGHT, V1), abs=1e-12)
    # under v2, the pinned re-score itself
    under_v2 = record(client, TONIGHT, "tonight-v2", v2)
    assert baseline_of(gate(client, under_v2), under_v2) == pinned


# -- finding 4: one series per digest --------------------------------------------------------

def test_one_series_per_digest_whatever_the_name(client):
    """The same judgments stored as adhoc and as other: one series (named by the first
    stored version, listing both), no boundary. Before: a series and a boundary per name
    (3 series and 2 boundaries here)."""
    v1 = put(client, V1)
    other = put(client, V1, name="other")
    ids = [record(client, NIGHT, "n1", v1), record(client, TONIGHT, "n2", other),
           record(client, NIGHT, "n3", v1)]
    trend = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    [series] = trend["series"]
    assert trend["boundaries"] == []
    assert series["qrels_version"] == v1 and series["qrels_versions"] == [v1, other]
    assert [p["id"] for p in series["points"]] == ids
    assert [p["mean"] for p in series["points"]] == pytest.approx(
        [mean_ap(NIGHT, V1), mean_ap(TONIGHT, V1), mean_ap(NIGHT, V1)], abs=1e-12)
    # other judgments: a second series and its boundary
    v2 = put(client, V2)
    fourth = record(client, TONIGHT, "n4", v2)
    trend = client.get("/v1/systems/bm25/trend?measure=map").get_json()
    assert [s["qrels_versions"] for s in trend["series"]] == [[v1, other], [v2]]
    [boundary] = trend["boundaries"]
    assert (boundary["from"]["qrels_version"], boundary["to"]["qrels_version"]) == (v1, v2)
    assert (boundary["after"], boundary["before"]) == (ids[2], fourth)


# -- finding 9: a gate with inline qrels -----------------------------------------------------

def test_a_gate_with_inline_qrels_is_held_to_their_digest(client):
    """Review R31 finding 9 said a gate with inline qrels used the pinned baseline whatever
    its qrels. It does not: the comparison refuses a recorded result evaluated under another
    digest than the inline qrels' (422 naming baseline.system); the same inline judgments,
    as sent when the night was recorded, gate against it. (No re-score can stand in: re-scores
    are under stored qrels; docs/history.md.)"""
    recorded = client.post("/v1/evaluations", json={
        "run": NIGHT, "qrels": V1, "measures": ["map"],
        "record": {"system": "bm25", "label": "night-1"}}).get_json()
    night = recorded["recorded"]["id"]
    assert client.put("/v1/systems/bm25/baseline", json={"result_id": night}).status_code == 200

    def inline_gate(qrels):
        return client.post("/v1/comparisons", json={
            "runs": [{"name": "tonight", "run": TONIGHT}], "qrels": qrels,
            "baseline": {"system": "bm25"}, "measures": ["map"], "gate": "map:0.9"})

    same = inline_gate(V1)
    assert same.status_code == 200, same.get_json()
    doc = same.get_json()
    assert {r.get("result_id") for r in doc["provenance"]["runs"].values()} == {None, night}
    assert doc["provenance"]["qrels_sha256"] == recorded["provenance"]["qrels_sha256"]
    refused = inline_gate(V2)
    assert refused.status_code == 422, refused.get_json()
    assert list(refused.get_json()["errors"]) == ["baseline.system"]
    assert "other qrels than this comparison's" in refused.get_json()["detail"]
    # the same judgments stored (their canonical text's digest, not the mapping's): the
    # night is under other qrels by digest, so the gate asks for its re-score (409)
    v1 = put(client, V1)
    stored = client.post("/v1/comparisons", json={
        "runs": [{"name": "tonight", "run": TONIGHT}], "qrels_id": v1,
        "baseline": {"system": "bm25"}, "measures": ["map"], "gate": "map:0.9"})
    assert stored.status_code == 409, stored.get_json()
    assert stored.get_json()["type"].endswith("/baseline-not-rescored")
