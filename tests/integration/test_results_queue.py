"""Recording from the queued path (issue #18): the API under gunicorn and real RQ workers
(`cranfield worker`) on a private Redis, both given CRANFIELD_DATABASE_URL of a PostgreSQL
database this module creates and drops (127.0.0.1:5432, user postgres; skipped without the
server, failing under CI=true). Both the whole-job path and the sharded path (the combine
step records) are covered; the rows are read back from PostgreSQL itself as well."""

from __future__ import annotations

import pytest
from servers import (
    BODY,
    DATA,
    call,
    wait_job,
)
from sqlalchemy import create_engine, text


@pytest.fixture(scope="module")
def database(results_postgres):
    return results_postgres


@pytest.fixture(scope="module")
def api(results_api):  # conftest: gunicorn on this module's PostgreSQL and Redis
    return results_api


@pytest.fixture
def worker(results_worker):
    return results_worker


def _mapping_run() -> dict:
    """results.test as a {topic: {docid: score}} mapping (a JSON run is never sharded)."""
    run: dict[str, dict[str, float]] = {}
    for line in (DATA / "results.test").read_text().splitlines():
        topic, _, doc, _, score, *_ = line.split()
        run.setdefault(topic, {})[doc] = float(score)
    return run


def _queued(api, body) -> dict:
    status, headers, job = call(api, "POST", "/v1/evaluations", body,
                                {"Prefer": "respond-async"})
    assert status == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    return done["result"]


def _rows(database: str, result_id: str) -> tuple[int, int]:
    """(results rows, per-topic columns) of ``result_id`` in PostgreSQL itself."""
    engine = create_engine(database)
    try:
        with engine.connect() as connection:
            pk = connection.execute(text("SELECT pk FROM results WHERE id = :id"),
                                    {"id": result_id}).scalar()
            columns = connection.execute(
                text("SELECT count(*) FROM result_values WHERE result_pk = :pk"),
                {"pk": pk}).scalar()
            return (0 if pk is None else 1), int(columns)
    finally:
        engine.dispose()


def test_queued_evaluations_are_recorded_by_the_worker(api, worker, database):
    measures = ["map", "P.10", "ndcg_cut.10"]
    sync_body = {"run": BODY["run"], "qrels": BODY["qrels"], "measures": measures}
    status, _, sync = call(api, "POST", "/v1/evaluations", sync_body)
    assert status == 200
    # the whole job (a JSON run) and the sharded one (TREC text), per_topic asked or not
    whole = _queued(api, {"run": _mapping_run(), "qrels": BODY["qrels"], "measures": measures,
                          "record": {"system": "bm25", "label": "night-1",
                                     "tags": ["nightly"], "commit": "c0ffee"}})
    sharded = _queued(api, {**sync_body, "per_topic": False,
                            "record": {"system": "bm25", "label": "night-2"}})
    assert sharded["provenance"]["shards"] == 2 and "shards" not in whole["provenance"]
    assert "per_topic" in whole and "per_topic" not in sharded
    for result, label in ((whole, "night-1"), (sharded, "night-2")):
        recorded = result["recorded"]
        assert recorded["system"] == "bm25" and recorded["label"] == label
        status, _, got = call(api, "GET", f"/v1/results/{recorded['id']}")
        assert status == 200, got
        assert got["aggregate"] == sync["aggregate"] == result["aggregate"]
        assert got["document"]["per_topic"] == sync["per_topic"]
        assert got["document"]["provenance"]["run_sha256"] == \
            result["provenance"]["run_sha256"]
        assert _rows(database, recorded["id"]) == (1, len(measures))
    status, _, page = call(api, "GET", "/v1/systems/bm25/results")
    assert [r["label"] for r in page["items"]] == ["night-2", "night-1"]
    assert page["items"][1]["tags"] == ["nightly"] and page["items"][1]["commit"] == "c0ffee"
    status, _, trend = call(api, "GET", "/v1/systems/bm25/trend?measure=map")
    assert [round(p["mean"], 12) for p in trend["points"]] == \
        [round(sync["aggregate"]["map"], 12)] * 2


def test_a_queued_job_with_a_bad_record_is_refused_before_queueing(api, worker):
    status, _, problem = call(api, "POST", "/v1/evaluations",
                              {**BODY, "record": {"system": "bm25"}},
                              {"Prefer": "respond-async"})
    assert status == 422 and "record.label" in problem["errors"]


def test_queued_comparison_against_the_pinned_baseline_on_a_real_worker(api, worker):
    """The worker reads the recorded baseline (and a result named by id) from the database:
    the queued answer is the synchronous one, with an inline run (a JSON mapping) or by id."""
    topics = [f"t{i}" for i in range(1, 21)]
    qrels = {t: {"r": 1} for t in topics}
    good = {t: {"r": 2.0, "x": 1.0} for t in topics}
    worse_on = {"t2", "t5", "t9", "t14", "t17", "t20"}  # 6 of 20: significant
    tonight = {t: ({"r": 1.0, "x": 2.0} if t in worse_on else {"r": 2.0, "x": 1.0})
               for t in topics}
    ids = []
    for label, run in (("night-1", good), ("night-3", tonight)):
        status, _, doc = call(api, "POST", "/v1/evaluations", {
            "run": run, "qrels": qrels, "measures": ["map"],
            "record": {"system": "gated", "label": label}})
        assert status == 200, doc
        ids.append(doc["recorded"]["id"])
    status, _, _ = call(api, "PUT", "/v1/systems/gated/baseline", {"result_id": ids[0]})
    assert status == 200
    body = {"runs": [{"name": "tonight", "run": tonight}], "qrels": qrels, "measures": ["map"],
            "baseline": {"system": "gated"}, "gate": "map:0.05"}
    status, _, sync = call(api, "POST", "/v1/comparisons", body)
    assert status == 200, sync
    status, headers, job = call(api, "POST", "/v1/comparisons", body,
                                {"Prefer": "respond-async"})
    assert status == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done.get("problem") or done
    result = done["result"]
    assert result["baseline"] == "gated@night-1" and result["gate"]["verdict"] == "fail"
    assert {t["topic"] for t in result["gate"]["checks"][0]["offending_topics"]} == worse_on
    assert result["pairs"] == sync["pairs"] and result["gate"] == sync["gate"]
    assert result["provenance"]["runs"]["gated@night-1"]["result_id"] == ids[0]
    # tonight's recorded result by id, queued: no run sent at all
    by_id = {"runs": [{"result_id": ids[1]}], "measures": ["map"],
             "baseline": {"system": "gated"}, "gate": "map:0.05"}
    status, headers, _ = call(api, "POST", "/v1/comparisons", by_id, {"Prefer": "respond-async"})
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    assert done["result"]["gate"]["verdict"] == "fail"
