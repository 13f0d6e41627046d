"""A multipart/form-data body carries every member its JSON body has (issue #26): the
evaluation's ``qrels_id`` and ``latency_ms`` (JSON text in a field, as ``record``), and the
comparison's ``depth`` option, ``baseline`` as ``{"system": NAME}``, a gate object and runs
given by ``result_id`` (``evaluation_id`` is read the same way). Each gives the answer the
JSON body gives, value for value. Every response is checked against openapi.yaml (the
contract client)."""

from __future__ import annotations

import io
import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = (DATA / "results.test").read_text()
QRELS = (DATA / "qrels.test").read_text()
MEASURES = ["map", "P.5"]


def _first_topics(text: str, n: int) -> str:
    """The lines of the first ``n`` topics of a TREC file (comparisons stay small)."""
    topics: list[str] = []
    out = []
    for line in text.splitlines():
        topic = line.split()[0]
        if topic not in topics:
            topics.append(topic)
        if len(topics) <= n:
            out.append(line)
    return "\n".join(out) + "\n"


def form(client, path: str, fields: dict, files: dict | None = None, method: str = "POST"):
    data = {k: v for k, v in fields.items()}
    for name, items in (files or {}).items():
        data[name] = [(io.BytesIO(text.encode()), filename) for filename, text in items]
    return client.open(path, method=method, data=data, content_type="multipart/form-data")


def test_evaluation_form_takes_qrels_id_and_latency_ms_as_json_does(client):
    assert client.put("/v1/qrels/tq", data=QRELS, content_type="text/plain").status_code == 201
    topics = sorted({line.split()[0] for line in RUN.splitlines()})
    latency = {t: 10.0 + i for i, t in enumerate(topics)}
    by_json = client.post("/v1/evaluations", json={
        "run": RUN, "qrels_id": "tq", "measures": MEASURES, "latency_ms": latency})
    by_form = form(client, "/v1/evaluations", {
        "run": RUN, "qrels_id": "tq", "measures": ",".join(MEASURES),
        "latency_ms": json.dumps(latency)})
    assert by_json.status_code == by_form.status_code == 200, by_form.get_json()
    a, b = by_json.get_json(), by_form.get_json()
    assert a["aggregate"] == b["aggregate"] and a["per_topic"] == b["per_topic"]
    assert a["provenance"]["qrels_version"] == b["provenance"]["qrels_version"]
    assert b["provenance"]["qrels_version"].startswith("tq@")
    assert a["efficiency"] == b["efficiency"]
    assert b["efficiency"]["topics"] == len(topics)
    assert b["efficiency"]["mean_ms"] == sum(latency.values()) / len(latency)


def test_evaluation_form_refuses_latency_ms_that_is_not_json(client):
    resp = form(client, "/v1/evaluations", {"run": RUN, "qrels": QRELS,
                                            "latency_ms": "q1=12"})
    assert resp.status_code == 422
    assert list(resp.get_json()["errors"]) == ["latency_ms"]
    resp = form(client, "/v1/evaluations", {"run": RUN, "qrels": QRELS,
                                            "latency_ms": '{"q1": "fast"}'})
    assert resp.status_code == 422
    assert any(k.startswith("latency_ms") for k in resp.get_json()["errors"])


def test_comparison_form_takes_the_depth_option(client):
    qrels, a, b = _first_topics(QRELS, 5), _first_topics(RUN, 5), _first_topics(RUN, 4)
    common = {"permutations": 200, "bootstrap_samples": 200}
    by_json = client.post("/v1/comparisons", json={
        **common, "measures": MEASURES, "qrels": qrels, "options": {"depth": 3},
        "runs": [{"name": "a", "run": a}, {"name": "b", "run": b}]})
    by_form = form(client, "/v1/comparisons", {
        **{k: str(v) for k, v in common.items()}, "measures": ",".join(MEASURES),
        "depth": "3"}, {"runs": [("a.txt", a), ("b.txt", b)], "qrels": [("q.txt", qrels)]})
    assert by_json.status_code == by_form.status_code == 200, by_form.get_json()
    j, f = by_json.get_json(), by_form.get_json()
    assert f["options"]["depth"] == 3 == j["options"]["depth"]
    assert j["summary"] == f["summary"] and j["pairs"] == f["pairs"]
    deeper = client.post("/v1/comparisons", json={
        **common, "measures": MEASURES, "qrels": qrels,
        "runs": [{"name": "a", "run": a}, {"name": "b", "run": b}]}).get_json()
    assert deeper["summary"] != f["summary"]  # the option was applied, not dropped


def test_comparison_form_takes_baseline_system_a_gate_object_and_result_ids(client):
    qrels = _first_topics(QRELS, 5)
    ids = []  # two recorded results of one system; the first pinned as its baseline
    for label, run in (("one", _first_topics(RUN, 5)), ("two", _first_topics(RUN, 4))):
        resp = client.post("/v1/evaluations", json={
            "run": run, "qrels": qrels, "measures": MEASURES,
            "record": {"system": "sys", "label": label}})
        assert resp.status_code == 200, resp.get_json()
        ids.append(resp.get_json()["recorded"]["id"])
    assert client.put("/v1/systems/sys/baseline", json={"result_id": ids[0]}).status_code == 200
    gate = {"measure": "map", "max_drop": 0.5, "test": "t"}
    common = {"permutations": 200, "bootstrap_samples": 200}
    by_json = client.post("/v1/comparisons", json={
        **common, "measures": MEASURES, "runs": [{"result_id": ids[1]}], "qrels": qrels,
        "baseline": {"system": "sys"}, "gate": gate})
    by_form = form(client, "/v1/comparisons", {
        **{k: str(v) for k, v in common.items()}, "measures": ",".join(MEASURES),
        "result_id": ids[1], "baseline": json.dumps({"system": "sys"}),
        "gate": json.dumps(gate)}, {"qrels": [("qrels.txt", qrels)]})
    assert by_json.status_code == by_form.status_code == 200, by_form.get_json()
    j, f = by_json.get_json(), by_form.get_json()
    assert j["summary"] == f["summary"] and j["pairs"] == f["pairs"]
    assert f["baseline"] == "sys@one" == j["baseline"]
    assert sorted(r["name"] for r in f["runs"]) == ["sys@one", "sys@two"]
    assert f["gate"]["verdict"] == j["gate"]["verdict"]
    assert [c["measure"] for c in f["gate"]["checks"]] == ["map"]
    assert f["gate"]["checks"] == j["gate"]["checks"]


def test_qrels_form_takes_the_text_as_a_field_as_a_file(client):
    """PUT /v1/qrels/{id} as multipart: the qrels as a file part or as a plain field (what a
    generated client sends for the form's string), the same stored qrels either way."""
    as_file = form(client, "/v1/qrels/by-file", {}, {"qrels": [("q.txt", QRELS)]}, "PUT")
    as_field = form(client, "/v1/qrels/by-field", {"qrels": QRELS}, method="PUT")
    assert as_file.status_code == as_field.status_code == 201, as_field.get_json()
    a, b = as_file.get_json(), as_field.get_json()
    assert (a["sha256"], a["judgments"], a["topics"]) == (b["sha256"], b["judgments"],
                                                           b["topics"])
    assert b["judgments"] == sum(1 for line in QRELS.splitlines() if line.strip())
    empty = form(client, "/v1/qrels/none", {"diversity": "false"}, method="PUT")
    assert empty.status_code == 422 and list(empty.get_json()["errors"]) == ["qrels"]
