"""Many judges over HTTP (issue #31), through the contract-checking client: judged qrels put
as text, rows and columns store one version; each judge's provenance kept in its metadata;
GET .../agreement equal to the engine's document (and its text); POST .../consensus storing
a new version with its recipe; bounds, refusals naming fields, tenant isolation."""

from __future__ import annotations

import pytest
from conftest import ContractClient
from judged_qrels import TEXT, put_judged, rows

from cranfield.judges.agreement_document import agreement_document, format_agreement
from cranfield.judges.judged import read_judged
from service.app import create_app
from service.auth import key_line

# the judges' provenance and the consensus recipe are kept in the version's metadata in the
# results database: every test runs on SQLite and on PostgreSQL
RESULTS_ON_POSTGRES = True

JUDGES = {"alice": {"kind": "person", "notes": "NIST assessor"},
          "llm": {"kind": "model", "model": "umbrela-gpt-4o", "prompt_digest": "sha256:ab12"}}


def test_text_rows_and_columns_store_the_same_version_with_the_judges(client):
    first = put_judged(client, judges=JUDGES)
    assert first["qrels_format"] == "qrels_jg" and first["judgments"] == 13
    assert first["judges"] == JUDGES
    columns = {c: [r[c] for r in rows()] for c in ("topic", "judge", "docid", "rel")}
    for form in (rows(), columns):
        again = put_judged(client, "k", form)
        assert again["version"] == first["version"] and again["sha256"] == first["sha256"]
    assert client.get("/v1/qrels/j").get_json()["judges"] == JUDGES


@pytest.mark.parametrize(("body", "field"), [
    ({"judges": {"carol": {"kind": "person"}}}, "judges.carol"),
    ({"judges": {"llm": {"kind": "robot"}}}, "judges.llm.kind"),
    ({"judges": {"llm": {"kind": "model", "temperature": 0}}}, "judges.llm.temperature"),
    ({"judges": {"llm": "gpt"}}, "judges.llm"),
    ({"judges": []}, "judges"),
    ({"qrels": [{"topic": "1", "judge": "a", "docid": "d", "rel": "x"}]}, "qrels[0].rel"),
])
def test_bad_judged_puts_are_refused_naming_the_field(client, body, field):
    resp = client.put("/v1/qrels/j", json={"qrels": TEXT, "qrels_format": "qrels_jg", **body})
    assert resp.status_code == 422, resp.get_json()
    assert field in resp.get_json()["errors"]
    assert client.get("/v1/qrels/j").status_code == 404  # nothing stored


def test_judges_only_with_judged_qrels(client):
    resp = client.put("/v1/qrels/p", json={"qrels": "1 0 d 1\n", "judges": JUDGES})
    assert resp.status_code == 422 and "judges" in resp.get_json()["errors"]
    rows_as_plain = client.put("/v1/qrels/p", json={"qrels": rows()})
    assert rows_as_plain.status_code == 422 and "qrels" in rows_as_plain.get_json()["errors"]


def test_rows_beyond_max_judged_judgments_are_refused_before_reading():
    client = ContractClient(create_app({"TESTING": True, "MAX_JUDGED_JUDGMENTS": 12})
                            .test_client())
    resp = client.put("/v1/qrels/j", json={"qrels": rows(), "qrels_format": "qrels_jg"})
    assert resp.status_code == 422 and "13 judgments, more than the 12" in \
        resp.get_json()["detail"]


def test_agreement_equals_the_engines_document(client):
    version = put_judged(client, judges=JUDGES)["version"]
    doc = client.get("/v1/qrels/j/agreement?resamples=300&seed=5&level=0.9").get_json()
    expected = agreement_document(read_judged(TEXT), resamples=300, seed=5, level=0.9)
    assert {k: doc[k] for k in expected} == expected
    assert doc["qrels"]["version"] == version and doc["provenance"] == JUDGES
    assert doc["overall"]["cohen"][0]["judges"] == ["alice", "bob"]
    assert doc["overall"]["cohen"][0]["kappa"] == pytest.approx(
        expected["overall"]["cohen"][0]["kappa"])
    text = client.get("/v1/qrels/j/agreement?resamples=300&seed=5&level=0.9",
                      headers={"Accept": "text/plain"})
    assert text.mimetype == "text/plain"
    assert text.get_data(as_text=True) == format_agreement({**expected, "qrels": {}})
    overall = client.get("/v1/qrels/j/agreement?per_topic=false&resamples=0").get_json()
    assert overall["topics"] == [] and "kappa_ci" not in overall["overall"]["fleiss"]
    pinned = client.get(f"/v1/qrels/j@{version}/agreement?resamples=0").get_json()
    assert pinned["overall"] == overall["overall"]


@pytest.mark.parametrize(("query", "field"), [
    ("resamples=10001", "resamples"), ("resamples=-1", "resamples"), ("level=1", "level"),
    ("level=abc", "level"), ("seed=x", "seed"), ("per_topic=maybe", "per_topic")])
def test_bad_agreement_parameters_are_400_naming_them(client, query, field):
    put_judged(client)
    resp = client.get(f"/v1/qrels/j/agreement?{query}")
    assert resp.status_code == 400 and field in resp.get_json()["errors"]


def test_agreement_work_is_bounded_before_the_work():
    client = ContractClient(create_app({"TESTING": True, "MAX_AGREEMENT_WORK": 200_000})
                            .test_client())
    put_judged(client)
    resp = client.get("/v1/qrels/j/agreement?resamples=1000")
    assert resp.status_code == 422 and "resamples" in resp.get_json()["errors"]
    assert client.get("/v1/qrels/j/agreement?resamples=0").status_code == 200


def test_agreement_of_unknown_or_plain_qrels(client):
    assert client.get("/v1/qrels/nope/agreement").status_code == 404
    client.put("/v1/qrels/plain", data="1 0 d 1\n", content_type="text/plain")
    resp = client.get("/v1/qrels/plain/agreement")
    assert resp.status_code == 422 and "qrels_id" in resp.get_json()["errors"]
    put_judged(client)
    assert client.get("/v1/qrels/j@0123456789abcdef/agreement").status_code == 404


def test_consensus_stores_a_new_version_with_its_recipe(client):
    source = put_judged(client, judges=JUDGES)
    resp = client.post("/v1/qrels/j/consensus", json={"method": "majority"})
    assert resp.status_code == 201, resp.get_json()
    meta = resp.get_json()
    assert meta["qrels_format"] == "qrels" and meta["latest"] == meta["version"]
    assert meta["versions"] == [source["version"], meta["version"]]
    assert meta["consensus"] == {
        "method": "majority", "judges": ["alice", "bob", "llm"], "tie": "lower",
        "gains": "integer", "source": {"id": "j", "version": source["version"],
                                       "sha256": source["sha256"]},
        "provenance": JUDGES}
    assert resp.headers["Location"] == f"/v1/qrels/j@{meta['version']}"
    # 301: d1 2,1,2 -> 2; d2 0,0,1 -> 0; d5 1,1 -> 1. 302: d3 1,1 -> 1; d4 0,2,0 -> 0
    assert meta["judgments_per_grade"] == {"0": 2, "1": 2, "2": 1}
    # the consensus is itself no judged qrels
    assert client.get(f"/v1/qrels/j@{meta['version']}/agreement").status_code == 422


def test_a_consensus_into_its_own_id_leaves_the_defaults_working(client):
    """The issue's flow, judge, derive the consensus into the same id, then look (review R31
    finding 8): the bare id's agreement is its latest judged version's (before: 422, the
    latest being plain), and the default diff compares the consensus with the consensus
    before it, not with the judgment groups between them (before: 422, different kinds)."""
    source = put_judged(client)
    first = client.post("/v1/qrels/j/consensus", json={"method": "majority"}).get_json()
    agreement = client.get("/v1/qrels/j/agreement?resamples=20&seed=2")
    assert agreement.status_code == 200, agreement.get_json()
    doc = agreement.get_json()
    assert doc["qrels"] == {"id": "j", "version": source["version"],
                            "sha256": source["sha256"]}
    assert doc["overall"] == agreement_document(read_judged(TEXT), resamples=20,
                                                seed=2)["overall"]
    alone = client.get("/v1/qrels/j/diff")  # one consensus yet: itself, nothing changed
    assert alone.status_code == 200, alone.get_json()
    assert (alone.get_json()["from"]["version"], alone.get_json()["to"]["version"]) == \
        (first["version"], first["version"])
    # bob now calls d4 of 302 relevant: 0,2,2 -> 2 by majority
    put_judged(client, qrels=TEXT.replace("302 bob d4 0", "302 bob d4 2"))
    second = client.post("/v1/qrels/j/consensus", json={"method": "majority"}).get_json()
    diff = client.get("/v1/qrels/j/diff")
    assert diff.status_code == 200, diff.get_json()
    body = diff.get_json()
    assert (body["from"]["version"], body["to"]["version"]) == \
        (first["version"], second["version"])
    [topic] = body["topics"]
    assert topic["topic"] == "302" and topic["regraded"] == [
        {"docid": "d4", "from": 0, "to": 2}]


def test_consensus_of_one_judge_into_a_named_target(client):
    source = put_judged(client)["version"]
    resp = client.post(f"/v1/qrels/j@{source}/consensus",
                       json={"method": "judge", "judge": "bob", "target": "bob-only"})
    assert resp.status_code == 201
    meta = resp.get_json()
    assert meta["id"] == "bob-only" and meta["judgments"] == 4
    assert meta["consensus"]["judges"] == ["bob"] and "provenance" not in meta["consensus"]
    assert client.get("/v1/qrels/j").get_json()["versions"] == [source]
    again = client.post("/v1/qrels/j/consensus",
                        json={"method": "judge", "judge": "bob", "target": "bob-only"})
    assert again.status_code == 200 and again.get_json()["version"] == meta["version"]


def test_max_and_mean_consensus(client):
    put_judged(client)
    top = client.post("/v1/qrels/j/consensus", json={"method": "max", "target": "m"})
    # 301: d1 2, d2 1, d5 1; 302: d3 1, d4 2
    assert top.get_json()["judgments_per_grade"] == {"1": 3, "2": 2}
    mean = client.post("/v1/qrels/j/consensus", json={"method": "mean", "target": "avg"})
    assert mean.status_code == 201, mean.get_json()
    assert mean.get_json()["gains"] == "real"
    assert mean.get_json()["consensus"]["gains"] == "real"


@pytest.mark.parametrize(("body", "field"), [
    ({"method": "median"}, "method"),
    ({}, "method"),
    ({"method": "judge"}, "judge"),
    ({"method": "judge", "judge": "carol"}, "judge"),
    ({"method": "max", "judge": "bob"}, "judge"),
    ({"method": "max", "judges": ["carol"]}, "judges"),
    ({"method": "max", "judges": []}, "judges"),
    ({"method": "max", "target": "bad id"}, "target"),
    ({"method": "max", "weights": 1}, "weights"),
    ({"method": "max", "judges": ["bob", "x" * 201]}, "judges[1]"),
])
def test_bad_consensus_requests_name_the_field(client, body, field):
    put_judged(client)
    resp = client.post("/v1/qrels/j/consensus", json=body)
    assert resp.status_code == 422, resp.get_json()
    assert field in resp.get_json()["errors"]
    assert len(client.get("/v1/qrels/j").get_json()["versions"]) == 1


def test_consensus_if_match_guards_the_target(client):
    version = put_judged(client)["version"]
    resp = client.post("/v1/qrels/j/consensus", json={"method": "max"},
                       headers={"If-Match": '"0123456789abcdef"'})
    assert resp.status_code == 412
    ok = client.post("/v1/qrels/j/consensus", json={"method": "max"},
                     headers={"If-Match": f'"{version}"'})
    assert ok.status_code == 201


KEYS = {"write-a": ("write", "team-a"), "write-b": ("write", "team-b")}


def test_another_tenants_judged_qrels_are_a_404(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("\n".join(key_line(k, role, tenant, k) for k, (role, tenant) in
                              KEYS.items()))
    client = ContractClient(create_app({"TESTING": True, "API_KEYS_FILE": str(path)})
                            .test_client())
    a = {"Authorization": "Bearer write-a"}
    b = {"Authorization": "Bearer write-b"}
    resp = client.put("/v1/qrels/j", json={"qrels": TEXT, "qrels_format": "qrels_jg",
                                           "judges": JUDGES}, headers=a)
    version = resp.get_json()["version"]
    assert client.get("/v1/qrels/j/agreement", headers=a).status_code == 200
    for route in ("/v1/qrels/j/agreement", f"/v1/qrels/j@{version}/agreement"):
        resp = client.get(route, headers=b)
        assert resp.status_code == 404 and list(resp.get_json()["errors"]) == ["qrels_id"]
    resp = client.post("/v1/qrels/j/consensus", json={"method": "max"}, headers=b)
    assert resp.status_code == 404
    assert client.get("/v1/qrels/j", headers=b).status_code == 404
    # b's consensus did not land in a's id either
    assert client.get("/v1/qrels/j", headers=a).get_json()["versions"] == [version]
    assert client.get("/v1/qrels/j/agreement").status_code == 401
