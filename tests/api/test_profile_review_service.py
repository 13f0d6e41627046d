"""The review of the cranfield profile (issue #31, commit 8e7f5b1), its service and backend
findings: qrels declaring real gains run under ``cranfield`` when no profile is named, and
under a named trec_eval profile the declaration changes nothing.

- A re-score runs under the profile a fresh evaluation of the same request would get, not
  the profile the original recorded (already resolved against the original's qrels): the
  recorded one counts as named unless it is the default for the original's own gains. The
  numbers equal a fresh POST /v1/evaluations; a gate against a baseline re-scored under
  LLM-judged qrels compares like with like (no 409 loop, no 422 "different profile").
- Whether a request named a profile is the request's own, not left over in the app context.
- An evaluation of stored qrels by id without a version reads the version whose gains
  settled its profile, though another is put in between.
- A sharded evaluation under a trec_eval profile refuses a non-integer grade of a topic the
  run lacks, as the unsharded one does, word for word.
"""

from __future__ import annotations

import random

import pytest
from conftest import finished_job, finished_rescore

import cranfield
from backend.contract import CombineJob, EvaluationJob, QrelsInput, ShardJob
from backend.tasks import BadInput, combine_shards, run_job, run_shard

# scores that tie as C floats (trec_eval-9.0.8) but not as doubles (trec_eval-10, cranfield)
RUN = {"q1": {"a": 1.0000000001, "b": 1.0, "c": 0.5}, "q2": {"x": 2.0, "y": 1.0}}
QINT = {"q1": {"a": 0, "b": 2, "c": 1}, "q2": {"x": 1, "y": 0}}
QINT2 = {"q1": {"a": 1, "b": 2, "c": 1}, "q2": {"x": 1, "y": 0}}
QREAL = "q1 0 a 0\nq1 0 b 2.5\nq1 0 c 1\nq2 0 x 1\nq2 0 y 0\n"
QREALI = "q1 0 a 0\nq1 0 b 2\nq1 0 c 1\nq2 0 x 1\nq2 0 y 0\n"  # integer-valued, declared real
MEASURES = ["ndcg", "ndcg_cut.2"]

Q = "q1 0 a 2.5\nq1 0 b 0.5\nq1 0 c 0\nq2 0 x 3\nq2 0 y 1.5\n"
QI = "q1 0 a 2\nq1 0 b 1\nq1 0 c 0\nq2 0 x 3\nq2 0 y 1\n"
R = "q1 Q0 a 1 3.0 r\nq1 Q0 b 2 2.0 r\nq2 Q0 y 1 2 r\nq2 Q0 x 2 1 r\n"


def _put(client, name: str, qrels, real: bool = False) -> str:
    body = {"qrels": qrels, **({"gains": "real"} if real else {})}
    resp = client.put(f"/v1/qrels/{name}", json=body)
    assert resp.status_code in (200, 201), resp.get_json()
    return f"{name}@{resp.get_json()['version']}"


def _fresh(client, qrels_id: str, options: dict, run=None, measures=MEASURES):
    body = {"run": RUN if run is None else run, "qrels_id": qrels_id, "measures": measures}
    if options:
        body["options"] = options
    return client.post("/v1/evaluations", json=body)


@pytest.fixture
def stored(client):
    """The qrels of the re-scoring table, put: integer grades (twice), real gains, and
    integer-valued grades declared real."""
    return {"int": _put(client, "int", QINT), "int2": _put(client, "int2", QINT2),
            "real": _put(client, "real", QREAL, real=True),
            "reali": _put(client, "reali", QREALI, real=True)}


def _rescore(client, system: str, qrels_id: str) -> dict:
    resp = client.post(f"/v1/systems/{system}/rescore", json={"qrels_id": qrels_id})
    assert resp.status_code == 202, resp.get_json()
    doc = finished_rescore(client, resp.get_json()["id"])
    assert doc["state"] == "finished" and doc["total"] == 1, doc
    return doc


# (the original's qrels, the original's options, the new qrels, the options of the fresh
# evaluation whose numbers the re-score must give)
RESCORES = [
    # no profile named: the new version's gains decide, as for a fresh evaluation
    ("int", {}, "real", {}),
    ("int", {}, "reali", {}),
    ("real", {}, "int", {}),
    ("reali", {}, "int", {}),
    # named trec_eval-9.0.8 is its default: taken as the default
    ("int", {"profile": "trec_eval-9.0.8"}, "reali", {}),
    # named, and not the default for the original's gains: kept
    ("int", {"profile": "trec_eval-10"}, "reali", {"profile": "trec_eval-10"}),
    ("int", {"profile": "cranfield"}, "int2", {"profile": "cranfield"}),
    ("reali", {"profile": "trec_eval-10"}, "int", {"profile": "trec_eval-10"}),
]


@pytest.mark.parametrize(("original", "options", "target", "fresh"), RESCORES)
def test_a_rescore_runs_under_the_profile_a_fresh_evaluation_gets(
        client, stored, original, options, target, fresh):
    body = {"run": RUN, "qrels_id": original, "measures": MEASURES,
            "record": {"system": "s", "label": "n1", "keep_run": True}}
    if options:
        body["options"] = options
    recorded = client.post("/v1/evaluations", json=body)
    assert recorded.status_code == 200, recorded.get_json()
    expected = _fresh(client, target, fresh)
    assert expected.status_code == 200, expected.get_json()
    expected = expected.get_json()
    doc = _rescore(client, "s", target)
    assert (doc["done"], doc["failed"]) == (1, 0), doc["items"]
    result = client.get(f"/v1/results/{doc['new_result_ids'][0]}").get_json()["document"]
    assert result["aggregate"] == expected["aggregate"]
    assert result["per_topic"] == expected["per_topic"]
    assert result["provenance"]["options"] == expected["provenance"]["options"]
    assert result["provenance"]["qrels_version"] == stored[target]
    assert result["provenance"]["rescores"] == recorded.get_json()["recorded"]["id"]


def test_the_table_tells_the_profiles_apart(client, stored):
    """The re-scoring table's numbers differ between the profiles (so a re-score under the
    wrong one cannot equal the fresh evaluation): the run's float32 tie."""
    cran = _fresh(client, "reali", {}).get_json()
    nine = _fresh(client, "reali", {"profile": "trec_eval-9.0.8"}).get_json()
    assert cran["provenance"]["options"]["profile"] == "cranfield"
    assert nine["provenance"]["options"]["profile"] == "trec_eval-9.0.8"
    assert cran["aggregate"]["ndcg"] == pytest.approx(0.8348359082471151, abs=1e-12)
    assert nine["aggregate"]["ndcg"] == pytest.approx(0.9751172083949178, abs=1e-12)
    ten = _fresh(client, "int", {"profile": "trec_eval-10"}).get_json()
    assert _fresh(client, "int", {}).get_json()["aggregate"] != ten["aggregate"]


def test_a_named_trec_eval_profile_rescored_under_real_gains_fails_as_today(client, stored):
    """trec_eval-10 named (not the default for integer grades): kept, so the real grade is
    refused with the error a fresh evaluation naming it gets, word for word."""
    recorded = client.post("/v1/evaluations", json={
        "run": RUN, "qrels_id": "int", "measures": MEASURES,
        "options": {"profile": "trec_eval-10"},
        "record": {"system": "named", "label": "n1", "keep_run": True}})
    assert recorded.status_code == 200, recorded.get_json()
    fresh = _fresh(client, "real", {"profile": "trec_eval-10"})
    assert fresh.status_code == 422
    assert fresh.get_json()["detail"] == "qrels.q1.b: grade 2.5 is not an integer"
    doc = _rescore(client, "named", "real")
    assert (doc["done"], doc["failed"]) == (0, 1)
    (item,) = doc["items"]
    assert item["state"] == "failed"
    assert item["reason"] == "qrels.q1.b: grade 2.5 is not an integer"


TOPICS = [f"q{i}" for i in range(12)]


def _run(seed: int) -> dict:
    rnd = random.Random(seed)
    return {t: {f"d{j}": rnd.random() for j in range(6)} for t in TOPICS}


GATE_INT = {t: {f"d{j}": j % 3 for j in range(6)} for t in TOPICS}
GATE_REAL = "".join(f"{t} 0 d{j} {(j % 3) * 0.75}\n" for t in TOPICS for j in range(6))
GATE_REALI = "".join(f"{t} 0 d{j} {j % 3 if j != 1 else 2}\n" for t in TOPICS for j in range(6))


@pytest.mark.parametrize(("before", "after"), [
    ("adhoc", "llm"),    # baseline under integer grades, LLM judgments (real) put
    ("adhoc", "llmi"),   # ... integer-valued, declared real
    ("llm", "adhoc"),    # baseline under real gains, integer grades put
])
def test_a_gate_against_a_baseline_rescored_under_other_gains(client, before, after):
    """The baseline pinned under one qrels, re-scored under the other's, then gated with
    qrels_id of the new ones: the re-score is used (no 409 loop, no 422 for a different
    profile), and its numbers are a fresh evaluation's of the baseline's run."""
    ids = {"adhoc": _put(client, "adhoc", GATE_INT),
           "llm": _put(client, "llm", GATE_REAL, real=True),
           "llmi": _put(client, "llmi", GATE_REALI, real=True)}
    base = client.post("/v1/evaluations", json={
        "run": _run(1), "qrels_id": before, "measures": ["ndcg"],
        "record": {"system": "s", "label": "n1", "keep_run": True}})
    assert base.status_code == 200, base.get_json()
    pin = client.put("/v1/systems/s/baseline",
                     json={"result_id": base.get_json()["recorded"]["id"]})
    assert pin.status_code == 200, pin.get_json()
    doc = _rescore(client, "s", after)
    assert (doc["done"], doc["failed"]) == (1, 0), doc["items"]
    fresh = _fresh(client, after, {}, run=_run(1), measures=["ndcg"]).get_json()
    rescored = client.get(f"/v1/results/{doc['new_result_ids'][0]}").get_json()["document"]
    assert rescored["aggregate"] == fresh["aggregate"]
    assert rescored["per_topic"] == fresh["per_topic"]
    assert rescored["provenance"]["options"] == fresh["provenance"]["options"]
    candidate = _fresh(client, after, {}, run=_run(2), measures=["ndcg"]).get_json()
    cmp = client.post("/v1/comparisons", json={
        "runs": [{"name": "cand", "run": _run(2)}], "qrels_id": after,
        "baseline": {"system": "s"}, "measures": ["ndcg"], "gate": "ndcg:0.05"})
    assert cmp.status_code == 200, cmp.get_json()
    (check,) = cmp.get_json()["gate"]["checks"]
    assert check["baseline"] == "s@n1" and check["candidate"] == "cand"
    assert check["mean_baseline"] == pytest.approx(fresh["aggregate"]["ndcg"], rel=1e-12)
    assert check["mean_candidate"] == pytest.approx(candidate["aggregate"]["ndcg"], rel=1e-12)
    assert cmp.get_json()["provenance"]["qrels_version"] == ids[after]


def test_a_named_profile_is_the_requests_own_not_the_app_contexts(app, client):
    """A request naming a profile, then one of stored real qrels naming none, in one app
    context (a script's or a test's): the second runs under cranfield, with the numbers it
    has alone."""
    _put(client, "llm", Q, real=True)
    expected = cranfield.evaluate(Q, R, ["ndcg"], gains="real").aggregate["ndcg"]
    with app.app_context():
        first = client.post("/v1/evaluations", json={
            "run": R, "qrels": QI, "measures": ["ndcg"],
            "options": {"profile": "trec_eval-10"}})
        assert first.status_code == 200, first.get_json()
        assert first.get_json()["provenance"]["options"]["profile"] == "trec_eval-10"
        second = client.post("/v1/evaluations", json={"run": R, "qrels_id": "llm",
                                                      "measures": ["ndcg"]})
        assert second.status_code == 200, second.get_json()
        assert second.get_json()["provenance"]["options"]["profile"] == "cranfield"
        assert second.get_json()["aggregate"]["ndcg"] == pytest.approx(expected, rel=1e-12)
        # and a request naming trec_eval-9.0.8 there still refuses the real grade
        named = client.post("/v1/evaluations", json={
            "run": R, "qrels_id": "llm", "measures": ["ndcg"],
            "options": {"profile": "trec_eval-9.0.8"}})
        assert named.status_code == 422
        assert named.get_json()["detail"] == "qrels.q1.a: grade 2.5 is not an integer"


def _put_between(app, monkeypatch, module: str):
    """After the request's profile is settled from the latest version of ``llm`` (real
    gains), put another version (integer grades) before the evaluation reads the qrels."""
    import importlib

    mod = importlib.import_module(module)
    settle = mod.settle_stored_gains

    def settle_then_put(req, *args, **kwargs):
        settle(req, *args, **kwargs)
        app.extensions["cranfield"].store.scoped(None).put_qrels(
            "llm", cranfield.read_qrels(QI, name="qrels"))

    monkeypatch.setattr(mod, "settle_stored_gains", settle_then_put)


@pytest.mark.parametrize("queued", [False, True])
def test_the_version_whose_gains_settled_the_profile_is_the_one_evaluated(
        app, client, monkeypatch, queued):
    v1 = _put(client, "llm", Q, real=True)
    expected = client.post("/v1/evaluations", json={"run": R, "qrels_id": v1,
                                                     "measures": ["ndcg"]}).get_json()
    assert expected["provenance"]["options"]["profile"] == "cranfield"
    _put_between(app, monkeypatch, "service.rel_formats")
    headers = {"Prefer": "respond-async"} if queued else {}
    resp = client.post("/v1/evaluations", headers=headers,
                       json={"run": R, "qrels_id": "llm", "measures": ["ndcg"]})
    if queued:
        assert resp.status_code == 202, resp.get_json()
        job = finished_job(client, resp.headers["Location"])
        assert job["status"] == "finished", job
        doc = job["result"]
    else:
        assert resp.status_code == 200, resp.get_json()
        doc = resp.get_json()
    assert client.get("/v1/qrels/llm").get_json()["version"] != v1.split("@")[1]  # put
    assert doc["provenance"]["qrels_version"] == v1
    assert doc["provenance"]["qrels_sha256"] == expected["provenance"]["qrels_sha256"]
    assert doc["provenance"]["options"] == expected["provenance"]["options"]
    assert doc["aggregate"] == expected["aggregate"]
    assert doc["per_topic"] == expected["per_topic"]


@pytest.mark.parametrize("route", ["batch", "comparison"])
def test_batch_and_comparison_read_the_version_that_settled_the_profile(
        app, client, monkeypatch, route):
    v1 = _put(client, "llm", Q, real=True)
    expected = client.post("/v1/evaluations", json={"run": R, "qrels_id": v1,
                                                     "measures": ["ndcg"]}).get_json()
    module = {"batch": "service.evaluations_batch", "comparison": "service.comparisons"}
    _put_between(app, monkeypatch, module[route])
    if route == "batch":
        resp = client.post("/v1/evaluations/batch", json={
            "runs": [{"name": "a", "run": R}], "qrels_id": "llm", "measures": ["ndcg"]})
        assert resp.status_code == 200, resp.get_json()
        (doc,) = resp.get_json()["evaluations"]
        assert doc["aggregate"] == expected["aggregate"]
        assert doc["provenance"]["qrels_version"] == v1
        assert doc["provenance"]["options"]["profile"] == "cranfield"
    else:
        resp = client.post("/v1/comparisons", json={
            "runs": [{"name": "a", "run": R}, {"name": "b", "run": R}], "qrels_id": "llm",
            "measures": ["ndcg"]})
        assert resp.status_code == 200, resp.get_json()
        doc = resp.get_json()
        assert doc["provenance"]["qrels_version"] == v1
        assert doc["summary"]["ndcg"]["a"]["aggregate"] == pytest.approx(
            expected["aggregate"]["ndcg"], rel=1e-12)
    assert client.get("/v1/qrels/llm").get_json()["version"] != v1.split("@")[1]


# ----------------------------------------------------------------------------------------
# Sharded jobs: each shard evaluates the qrels of its own topics; the combine step reads the
# whole qrels as the profile reads them.

OPTIONS = {"relevance_level": 1, "judged_only": False, "depth": None,
           "complete_topics": False, "collection_size": 0, "aggregation": "macro"}
PIECES = [b"q1 Q0 a 1 3.0 r\nq1 Q0 b 2 2.0 r\n", b"q2 Q0 y 1 2 r\nq2 Q0 x 2 1 r\n"]
SHARD_MEASURES = ["map", "ndcg", "num_rel"]
# q3 judged only (the run lacks it), with a grade that is not an integer
MIX = QI + "q3 0 z 0.5\n"
REFUSAL = {"status": 422, "title": "Invalid input",
           "detail": "qrels.q3.z: grade 0.5 is not an integer", "code": "invalid-input",
           "errors": {"qrels.q3.z": ["grade 0.5 is not an integer"]}}


def _sharded_and_whole(app, options: dict, measures=SHARD_MEASURES) -> tuple[dict, dict]:
    """(the combine step's outcome, the unsharded job's: its document, or its problem) of
    the two pieces against the stored ``mix``."""
    store = app.extensions["cranfield"].store
    tag = "-".join(f"{v}" for v in options.values())
    keys = [store.put_blob(f"run-shard{i}-{tag}", p, 600) for i, p in enumerate(PIECES)]
    shards = [run_shard(store, ShardJob(measures=measures, options=dict(options),
                                        qrels=QrelsInput(ref="mix"), run_key=k, shard=i))
              for i, k in enumerate(keys)]
    assert [s.get("problem") for s in shards] == [None, None]  # each piece's topics: fine
    combined = combine_shards(store, CombineJob(
        measures=measures, options=dict(options), qrels=QrelsInput(ref="mix"),
        shard_keys=keys, run_sha256="0" * 64), shards)
    whole_key = store.put_blob(f"run-whole-{tag}", b"".join(PIECES), 600)
    try:
        whole = {"result": run_job(store, EvaluationJob(
            measures=measures, options=dict(options), qrels=QrelsInput(ref="mix"),
            run_key=whole_key))}
    except BadInput as exc:
        whole = {"problem": exc.problem}
    return combined, whole


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
@pytest.mark.parametrize("complete_topics", [False, True])
def test_a_sharded_job_refuses_a_grade_of_a_topic_the_run_lacks_as_the_whole_one(
        app, client, profile, complete_topics):
    _put(client, "mix", MIX, real=True)
    options = dict(OPTIONS, profile=profile, complete_topics=complete_topics)
    combined, whole = _sharded_and_whole(app, options)
    assert whole == {"problem": REFUSAL}
    assert combined == {"problem": REFUSAL}
    sync = client.post("/v1/evaluations", json={
        "run": b"".join(PIECES).decode(), "qrels_id": "mix", "measures": SHARD_MEASURES,
        "options": {"profile": profile, "complete_topics": complete_topics}})
    assert sync.status_code == 422
    problem = sync.get_json()
    assert (problem["detail"], problem["errors"]) == (REFUSAL["detail"], REFUSAL["errors"])


def test_a_sharded_job_under_cranfield_or_integer_grades_equals_the_whole_one(app, client):
    """The check reads nothing it should not: under cranfield the real grade is read, and
    integer-valued grades declared real under trec_eval-9.0.8 give the whole job's numbers."""
    _put(client, "mix", MIX, real=True)
    measures = ["ndcg", "NumRel(rel=0.5)"]
    combined, whole = _sharded_and_whole(app, dict(OPTIONS, profile="cranfield"), measures)
    assert "result" in combined, combined
    assert combined["result"]["aggregate"] == whole["result"]["aggregate"]
    expected = cranfield.evaluate(MIX, b"".join(PIECES).decode(), measures, gains="real")
    assert combined["result"]["aggregate"] == pytest.approx(expected.aggregate, rel=1e-12)
    assert combined["result"]["aggregate"]["NumRel(rel=0.5)"] == 4
    assert combined["result"]["provenance"]["options"]["gains"] == "real"
    _put(client, "mix", QI + "q3 0 z 1\n", real=True)
    combined, whole = _sharded_and_whole(app, dict(OPTIONS, profile="trec_eval-9.0.8"))
    assert "result" in combined, combined
    assert combined["result"]["aggregate"] == whole["result"]["aggregate"]
    assert combined["result"]["aggregate"]["num_rel"] == 4
    assert "gains" not in combined["result"]["provenance"]["options"]
