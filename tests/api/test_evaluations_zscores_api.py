"""POST /v1/evaluations with ``options.zscores`` (trec_eval's -Z as a JSON mapping): the
same bytes as ``cranfield eval -Z`` (NIST's out.test.aqZ), synchronous and queued, and a
malformed mapping refused naming its path."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import finished_job

import cranfield
from cranfield.cli import main

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
ASYNC = {"Prefer": "respond-async"}


def zscores_json(path: Path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        t, m, mean, sd = line.split()
        out.setdefault(t, {})[m] = [float(mean), float(sd)]
    return out


def body(**extra) -> dict:
    return {"run": (TE / "results.test").read_text(), "qrels": (TE / "qrels.test").read_text(),
            "measures": ["all_trec"], "per_topic": True,
            "options": {"profile": "trec_eval-10", "zscores": zscores_json(TE / "zscores_file"),
                        **extra}}


def cli_text(capsys, *flags) -> str:
    code = main(["eval", "--profile", "10", "-q", "-m", "all_trec", "-Z",
                 str(TE / "zscores_file"), *flags, str(TE / "qrels.test"),
                 str(TE / "results.test")])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def test_text_equals_the_cli_and_upstream(client, capsys):
    resp = client.post("/v1/evaluations", json=body(), headers={"Accept": "text/plain"})
    assert resp.status_code == 200, resp.get_data()
    expected = (TE / "out.test.aqZ").read_text()
    assert resp.get_data(as_text=True) == cli_text(capsys) == expected


def test_json_equals_the_library_and_the_cli(client, capsys):
    resp = client.post("/v1/evaluations", json=body())
    assert resp.status_code == 200, resp.get_data()
    doc = resp.get_json()
    ev = cranfield.evaluate(TE / "qrels.test", TE / "results.test", ["all_trec"],
                            profile="trec_eval-10", zscores=TE / "zscores_file")
    assert doc["per_topic"] == ev.per_topic
    assert doc["aggregate"] == ev.aggregate
    assert doc["per_topic"]["301"]["num_ret"] == pytest.approx(-2.7605, abs=5e-5)
    zs = doc["provenance"]["options"]["zscores"]
    assert zs["topics"] == 3 and zs["pairs"] == 285 and len(zs["sha256"]) == 64
    import json

    cli_doc = json.loads(cli_text(capsys, "--format", "json"))
    assert cli_doc["per_topic"] == doc["per_topic"]
    assert cli_doc["aggregate"] == doc["aggregate"]


def test_queued_job_gives_the_same_text(client):
    sync = client.post("/v1/evaluations", json=body(), headers={"Accept": "text/plain"})
    queued = client.post("/v1/evaluations", json=body(), headers={"Accept": "text/plain",
                                                                  **ASYNC})
    assert queued.status_code == 202
    job = finished_job(client, queued.headers["Location"])
    assert job["status"] == "finished", job
    text = client.get(queued.headers["Location"], headers={"Accept": "text/plain"})
    assert text.get_data() == sync.get_data() == (TE / "out.test.aqZ").read_bytes()


@pytest.mark.parametrize("zscores, where", [
    ({"301": {"map": [0.1]}}, "options.zscores.301.map"),
    ({"301": {"map": [0.1, -2]}}, "options.zscores.301.map"),
    ({"301": {}}, "options.zscores.301"),
    ({}, "options.zscores"),
    ("301 map 0.1 0.2", "options.zscores"),
])
def test_malformed_zscores_are_refused_naming_the_path(client, zscores, where):
    b = body()
    b["options"]["zscores"] = zscores
    resp = client.post("/v1/evaluations", json=b)
    assert resp.status_code == 422, resp.get_data()
    assert where in resp.get_json()["errors"], resp.get_json()


def test_micro_with_zscores_is_refused(client):
    resp = client.post("/v1/evaluations", json=body(aggregation="micro"))
    assert resp.status_code == 422
    assert "options.zscores" in resp.get_json()["errors"]


def test_without_zscores_options_are_as_before(client):
    b = body()
    del b["options"]["zscores"]
    doc = client.post("/v1/evaluations", json=b).get_json()
    assert "zscores" not in doc["provenance"]["options"]
    assert doc["per_topic"]["301"]["num_ret"] == 500  # out.test.aq


def test_a_standardised_result_is_not_recorded(client):
    """z-scores under map's key would sit in map's trend beside raw values (found in review:
    0.1785, -666695.6, 0.1785): record with zscores is a 422 naming record."""
    resp = client.post("/v1/evaluations", json={**body(), "record": {"system": "bm25",
                                                                      "label": "z"}})
    assert resp.status_code == 422, resp.get_data()
    [reason] = resp.get_json()["errors"]["record"]
    assert reason.startswith("a result standardised with options.zscores is not recorded")


@pytest.mark.parametrize("bound, value, words", [
    ("MAX_TOPICS", 2, "3 topics, over MAX_TOPICS 2"),
    ("MAX_EVALUATION_VALUES", 10, "pairs, over MAX_EVALUATION_VALUES 10"),
])
def test_zscores_are_bounded_before_they_are_read(app, client, monkeypatch, bound, value,
                                                  words):
    """options.zscores is held to MAX_TOPICS and MAX_EVALUATION_VALUES (pairs) before a pair
    is read: the engine's reader is never called."""
    import cranfield.inputs.zscores

    def never(*args, **kwargs):
        raise AssertionError("the z-scores were read")

    monkeypatch.setattr(cranfield.inputs.zscores, "read_zscores", never)
    app.config[bound] = value
    resp = client.post("/v1/evaluations", json=body())
    assert resp.status_code == 422, resp.get_data()
    [reason] = resp.get_json()["errors"]["options.zscores"]
    assert words in reason
