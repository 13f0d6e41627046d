"""POST /v1/evaluations/batch (issue #30): several runs against one qrels in one call. Each
run's document is the one POST /v1/evaluations answers for that run alone (JSON and
multipart, inline and stored qrels, text/plain block by block); refusals name runs[i]; the
bounds (MAX_BATCH_RUNS, MAX_TOPICS, MAX_EVALUATION_VALUES, MAX_MEASURE_INSTANCES) hold before
the work. Every response is checked against openapi.yaml (ContractClient). A queued batch:
test_evaluations_batch_queue.py."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import ContractClient

from service.app import create_app

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS = (DATA / "qrels.test").read_text()
RUN = (DATA / "results.test").read_text()
PROBLEM = "application/problem+json"
MEASURES = ["map", "P.5", "ndcg_cut.10", "num_rel_ret"]


def reversed_run(text: str) -> str:
    """The run with every score negated (its ranking reversed), runid ``rev``."""
    lines = []
    for line in text.splitlines():
        t, q0, d, rank, score, _ = line.split()
        lines.append(f"{t} {q0} {d} {rank} {-float(score)!r} rev")
    return "\n".join(lines) + "\n"


def mapping(text: str) -> dict:
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        t, _, d, _, score, _ = line.split()
        out.setdefault(t, {})[d] = float(score)
    return out


REV = reversed_run(RUN)


def make_client(**config) -> ContractClient:
    return ContractClient(create_app({"TESTING": True, **config}).test_client())


@pytest.fixture
def client():
    return make_client()


def alone(client, run, **extra) -> dict:
    resp = client.post("/v1/evaluations", json={"run": run, "qrels": QRELS, **extra})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def documents(resp) -> dict:
    assert resp.status_code == 200, resp.get_json()
    return {doc.pop("name"): doc for doc in resp.get_json()["evaluations"]}


@pytest.mark.parametrize("extra", [
    {"measures": MEASURES},
    {},  # trec_eval's official set
    {"measures": MEASURES, "options": {"complete_topics": True, "depth": 5,
                                       "relevance_level": 2}, "curves": True},
    {"measures": ["map", "P.10"], "per_topic": False},
])
def test_each_document_is_the_evaluation_of_that_run_alone(client, extra):
    resp = client.post("/v1/evaluations/batch", json={
        "runs": [{"name": "text", "run": RUN}, {"run": mapping(REV)}], "qrels": QRELS,
        **extra})
    docs = documents(resp)
    assert list(docs) == ["text", "run2"]
    assert docs["text"] == alone(client, RUN, **extra)
    assert docs["run2"] == alone(client, mapping(REV), **extra)
    assert docs["text"]["aggregate"] != docs["run2"]["aggregate"]  # two runs, two answers
    assert set(resp.get_json()["qrels"]) == {"sha256"}
    assert resp.get_json()["qrels"]["sha256"] == docs["text"]["provenance"]["qrels_sha256"]


def test_a_large_body_read_into_columns_gives_the_same_documents(client):
    """A body over FAST_JSON_MIN_BYTES (1 MiB) has its runs read by the compiled column scan:
    the same documents, the same refusals naming runs[i].run."""
    run = {f"q{t}": {f"d{d}": ((t * 7919 + d * 104729) % 1000) / 7.0 for d in range(1000)}
           for t in range(60)}
    qrels = {f"q{t}": {f"d{d}": 1 for d in range(t % 5, 1000, 37)} for t in range(60)}
    body = {"runs": [{"run": run}, {"name": "x", "run": run}], "qrels": qrels,
            "measures": ["map", "P.10"]}
    docs = documents(client.post("/v1/evaluations/batch", json=body))
    single = client.post("/v1/evaluations", json={"run": run, "qrels": qrels,
                                                  "measures": ["map", "P.10"]}).get_json()
    assert docs == {"run1": single, "x": single}
    bad = dict(run, q5={"d 1": 1.0})
    body["runs"][1]["run"] = bad
    problem = refused(client.post("/v1/evaluations/batch", json=body))
    assert list(problem["errors"]) == ["runs[1].run.q5.d 1"]


def test_one_run_is_the_evaluation(client):
    docs = documents(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}], "qrels": mapping_qrels(), "measures": MEASURES}))
    single = client.post("/v1/evaluations", json={"run": RUN, "qrels": mapping_qrels(),
                                                  "measures": MEASURES}).get_json()
    assert docs == {"run1": single}


def mapping_qrels() -> dict:
    out: dict[str, dict[str, int]] = {}
    for line in QRELS.splitlines():
        t, _, d, grade = line.split()
        out.setdefault(t, {})[d] = int(grade)
    return out


def test_text_is_cranfield_eval_per_run_after_a_runid_line(client):
    def text(path, body):
        resp = client.post(path, json=body, headers={"Accept": "text/plain"})
        assert resp.status_code == 200 and resp.mimetype == "text/plain"
        return resp.get_data(as_text=True)

    for per_topic in (None, True):
        flag = {} if per_topic is None else {"per_topic": per_topic}
        batch = text("/v1/evaluations/batch", {"runs": [{"name": "a", "run": RUN},
                                                        {"name": "b", "run": REV}],
                                               "qrels": QRELS, "measures": MEASURES, **flag})
        blocks = [text("/v1/evaluations", {"run": r, "qrels": QRELS, "measures": MEASURES,
                                           **flag}) for r in (RUN, REV)]
        assert batch == ("runid                 \tall\tSTANDARD\n" + blocks[0]
                         + "runid                 \tall\trev\n" + blocks[1])
        assert ("\t301\t" in batch) == bool(per_topic)
    # runid asked for: each block prints it, with no line before it
    asked = text("/v1/evaluations/batch", {"runs": [{"run": RUN}, {"run": REV}],
                                           "qrels": QRELS, "measures": ["runid", "map"]})
    assert asked == "".join(text("/v1/evaluations", {"run": r, "qrels": QRELS,
                                                     "measures": ["runid", "map"]})
                            for r in (RUN, REV))
    assert asked.startswith("runid                 \tall\tSTANDARD\n")
    # a mapping's runid is cranfield's, as POST /v1/evaluations names it
    mapped = text("/v1/evaluations/batch", {"runs": [{"run": RUN}, {"run": mapping(REV)}],
                                            "qrels": QRELS, "measures": ["map"]})
    assert "runid                 \tall\tcranfield\n" in mapped
    # one run: exactly the evaluation's text
    one = text("/v1/evaluations/batch", {"runs": [{"run": RUN}], "qrels": QRELS})
    assert one == text("/v1/evaluations", {"run": RUN, "qrels": QRELS})


def test_text_is_what_cranfield_eval_prints_for_the_same_runs(client, tmp_path, capsys):
    from cranfield.cli import main

    paths = []
    for name, text in (("qrels.txt", QRELS), ("bm25.txt", RUN), ("rev.txt", REV)):
        paths.append(str(tmp_path / name))
        (tmp_path / name).write_text(text)
    for flags, body in (([], {}), (["-q"], {"per_topic": True})):
        capsys.readouterr()
        assert main(["eval", "-m", "map", "-m", "P.5", *flags, *paths]) == 0
        printed = capsys.readouterr().out
        resp = client.post("/v1/evaluations/batch", json={
            "runs": [{"run": RUN}, {"run": REV}], "qrels": QRELS, "measures": ["map", "P.5"],
            **body}, headers={"Accept": "text/plain"})
        assert resp.get_data(as_text=True) == printed


def test_uploaded_files_are_named_by_their_file_names(client):
    resp = client.post("/v1/evaluations/batch", data={
        "runs": [(io.BytesIO(RUN.encode()), "bm25.txt"), (io.BytesIO(REV.encode()),
                                                          "rev.txt")],
        "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"), "measures": "map,P.5",
        "complete_topics": "true", "curves": "true"}, content_type="multipart/form-data")
    docs = documents(resp)
    assert list(docs) == ["bm25", "rev"]
    for name, run in (("bm25", RUN), ("rev", REV)):
        single = client.post("/v1/evaluations", data={
            "run": (io.BytesIO(run.encode()), "run.txt"),
            "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"), "measures": "map,P.5",
            "complete_topics": "true", "curves": "true"}, content_type="multipart/form-data")
        assert docs[name] == single.get_json()


def test_topic_metadata_segments_per_run(client):
    metadata = {"301": {"segments": ["a"], "weight": 2}, "302": {"segments": ["a", "b"]},
                "303": {"segments": ["b"]}}
    body = {"qrels": QRELS, "measures": ["map"], "options": {"topic_metadata": metadata}}
    docs = documents(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": REV}], **body}))
    for name, run in (("run1", RUN), ("run2", REV)):
        single = client.post("/v1/evaluations", json={"run": run, **body}).get_json()
        assert "segments" in single and docs[name] == single
    # multipart: the metadata as a file, a run as a text field (named by its place)
    resp = client.post("/v1/evaluations/batch", data={
        "runs": [(io.BytesIO(RUN.encode()), "a.txt"), REV], "qrels": QRELS, "measures": "map",
        "topic_metadata": (io.BytesIO(b"301 a\n302 b\n"), "segments.txt")},
        content_type="multipart/form-data")
    docs = documents(resp)
    assert list(docs) == ["a", "run2"]
    assert set(docs["a"]["segments"]) == {"a", "b"}


def test_stored_qrels(client):
    put = client.put("/v1/qrels/batch-qrels", json={"qrels": mapping_qrels()})
    assert put.status_code in (200, 201), put.get_json()
    resp = client.post("/v1/evaluations/batch", json={
        "runs": [{"name": "a", "run": RUN}, {"name": "b", "run": REV}],
        "qrels_id": "batch-qrels", "measures": MEASURES})
    body = resp.get_json()
    docs = documents(resp)
    for name, run in (("a", RUN), ("b", REV)):
        single = client.post("/v1/evaluations", json={"run": run, "qrels_id": "batch-qrels",
                                                      "measures": MEASURES}).get_json()
        assert docs[name] == single
    version = docs["a"]["provenance"]["qrels_version"]
    assert body["qrels"] == {"sha256": docs["a"]["provenance"]["qrels_sha256"],
                             "version": version}
    unknown = client.post("/v1/evaluations/batch", json={"runs": [{"run": RUN}],
                                                         "qrels_id": "nowhere"})
    assert unknown.status_code == 422 and "qrels_id" in unknown.get_json()["errors"]


# --- refusals ------------------------------------------------------------------------------

def refused(resp, status: int = 422) -> dict:
    assert resp.status_code == status and resp.mimetype == PROBLEM, resp.get_data()
    return resp.get_json()


def test_a_bad_run_is_named_by_its_place(client):
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": "301 Q0 d1 1 x r\n"}], "qrels": QRELS}))
    assert list(body["errors"]) == ["runs[1].run line 1"]
    assert body["detail"].startswith("runs[1].run:1:")
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": {"301": {"d 1": 1.0}}}], "qrels": QRELS}))
    assert list(body["errors"]) == ["runs[1].run.301.d 1"]
    # a run that cannot be evaluated: POST /v1/evaluations' problem, under runs[i].run
    lone = refused(client.post("/v1/evaluations", json={"run": "999 Q0 d1 1 1 r\n",
                                                        "qrels": QRELS}))
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": REV}, {"run": "999 Q0 d1 1 1 r\n"}], "qrels": QRELS}))
    assert body["code"] == lone["code"] == "no-overlap"
    assert body["errors"] == {"runs[2].run": lone["errors"]["run"]}
    assert body["detail"] == "runs[2]: " + lone["detail"]


def test_refusals_of_the_request(client):
    def errors(body):
        return refused(client.post("/v1/evaluations/batch", json=body))["errors"]

    assert "runs" in errors({"qrels": QRELS})
    assert "runs" in errors({"runs": [], "qrels": QRELS})
    assert "qrels" in errors({"runs": [{"run": RUN}]})
    assert "qrels" in errors({"runs": [{"run": RUN}], "qrels": QRELS, "qrels_id": "x"})
    assert "runs[1].name" in errors({"runs": [{"name": "a", "run": RUN},
                                              {"name": "a", "run": REV}], "qrels": QRELS})
    assert "runs[1].name" in errors({"runs": [{"run": RUN}, {"name": "run1", "run": REV}],
                                     "qrels": QRELS})
    assert "runs[0].result_id" in errors({"runs": [{"result_id": "0" * 32}], "qrels": QRELS})
    assert "runs[0].run" in errors({"runs": [{"name": "a"}], "qrels": QRELS})
    assert "options.qrels_format" in errors({"runs": [{"run": RUN}], "qrels": QRELS,
                                             "options": {"qrels_format": "prefs"}})
    assert "measures[1]" in errors({"runs": [{"run": RUN}], "qrels": QRELS,
                                    "measures": ["map", "no_such_measure"]})
    resp = client.post("/v1/evaluations/batch", json={"runs": [{"run": RUN}], "qrels": QRELS},
                       headers={"Accept": "text/html"})
    assert refused(resp, 406)["status"] == 406


def test_at_most_max_batch_runs_before_any_is_read():
    client = make_client(MAX_BATCH_RUNS=2)
    ok = client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": REV}], "qrels": QRELS, "measures": ["map"]})
    assert ok.status_code == 200
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": REV}, {"run": "not a run"}], "qrels": QRELS}))
    assert body["errors"] == {"runs": ["Length must be between 1 and 2."]}
    body = refused(client.post("/v1/evaluations/batch", data={
        "runs": [(io.BytesIO(RUN.encode()), f"r{i}.txt") for i in range(3)],
        "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt")}, content_type="multipart/form-data"))
    assert body["errors"] == {"runs": ["Length must be between 1 and 2."]}


def test_every_run_within_the_input_limits():
    client = make_client(MAX_TOPICS=3, MAX_DOCS_PER_TOPIC=2000)
    four = RUN + "999 Q0 dx 1 1 r\n"
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": four}], "qrels": QRELS}), 413)
    assert list(body["errors"]) == ["runs[1].run"]
    client = make_client(MAX_DOCS_PER_TOPIC=10)
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": "301 Q0 d1 1 1 r\n"}, {"run": RUN}], "qrels": QRELS}), 413)
    assert [k.rsplit(".", 1)[0] for k in body["errors"]] == ["runs[1].run"]


# --- budgets -------------------------------------------------------------------------------

def cutoffs(n: int) -> str:
    return "P." + ",".join(str(k) for k in range(1, n + 1))


def test_runs_times_instances_times_topics_over_the_value_budget():
    # 3 runs × 10 instances × 3 topics = 90 values
    client = make_client(MAX_EVALUATION_VALUES=89)
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": REV}, {"run": RUN}], "qrels": QRELS,
        "measures": [cutoffs(10)]}))
    assert body["type"].endswith("/work-over-budget")
    assert body["budget"] == {"name": "MAX_EVALUATION_VALUES", "limit": 89, "total": 90,
                              "factors": {"runs": 3, "instances": 10, "topics": 3}}
    assert "3 runs × 10 measure instances × 3 topics = 90 values, over " \
           "MAX_EVALUATION_VALUES 89" in body["detail"]
    assert list(body["errors"]) == ["runs"]
    client = make_client(MAX_EVALUATION_VALUES=90)
    assert client.post("/v1/evaluations/batch", json={
        "runs": [{"run": RUN}, {"run": REV}, {"run": RUN}], "qrels": QRELS,
        "measures": [cutoffs(10)]}).status_code == 200


def test_the_topics_factor_is_the_most_a_run_is_evaluated_over():
    client = make_client(MAX_EVALUATION_VALUES=1000)
    one_topic = "".join(line + "\n" for line in RUN.splitlines() if line.split()[0] == "301")
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": one_topic}, {"run": RUN}], "qrels": QRELS,
        "measures": [cutoffs(200)]}))
    assert body["budget"]["factors"] == {"runs": 2, "instances": 200, "topics": 3}
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": one_topic}, {"run": one_topic}], "qrels": QRELS,
        "measures": [cutoffs(600)]}))
    assert body["budget"]["factors"] == {"runs": 2, "instances": 600, "topics": 1}
    assert client.post("/v1/evaluations/batch", json={
        "runs": [{"run": one_topic}], "qrels": QRELS,
        "measures": [cutoffs(600)]}).status_code == 200
    # complete_topics: every judged topic is evaluated
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": one_topic}], "qrels": QRELS, "measures": [cutoffs(600)],
        "options": {"complete_topics": True}}))
    assert body["budget"]["factors"] == {"runs": 1, "instances": 600, "topics": 3}


def test_measure_instances_over_budget_before_any_input_is_read():
    client = make_client(MAX_MEASURE_INSTANCES=5)
    body = refused(client.post("/v1/evaluations/batch", json={
        "runs": [{"run": "not read"}], "qrels": QRELS, "measures": [cutoffs(6)]}))
    assert body["budget"]["name"] == "MAX_MEASURE_INSTANCES"


# --- the Python client ---------------------------------------------------------------------

def test_client_evaluate_many(served, tmp_path):
    from cranfield.client import ApiError, Client

    api = Client(served)
    (tmp_path / "bm25.txt").write_text(RUN)
    (tmp_path / "rev.run").write_text(REV)
    by_path = api.evaluate_many(QRELS, [str(tmp_path / "bm25.txt"), tmp_path / "rev.run",
                                        mapping(REV)], MEASURES)
    assert list(by_path) == ["bm25", "rev", "run3"]  # cranfield.evaluate_many's names
    single = api.evaluate(QRELS, RUN, MEASURES)
    assert by_path["bm25"] == single
    assert by_path["rev"]["aggregate"] == by_path["run3"]["aggregate"] \
        == api.evaluate(QRELS, REV, MEASURES)["aggregate"]
    named = api.evaluate_many(QRELS, {"a": RUN, "b": REV}, ["map"], accept="text/plain")
    assert named.startswith("runid                 \tall\tSTANDARD\nmap")
    assert "runid                 \tall\trev\n" in named
    try:
        api.evaluate_many(QRELS, {"a": RUN, "b": "999 Q0 d1 1 1 r\n"}, ["map"])
    except ApiError as exc:
        assert exc.status == 422 and list(exc.problem["errors"]) == ["runs[1].run"]
    else:
        raise AssertionError("a run without an overlap was evaluated")
