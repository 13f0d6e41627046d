"""A queued POST /v1/evaluations/batch (issue #30): with ``Prefer: respond-async`` or a body
over ASYNC_THRESHOLD_BYTES the batch is a job (kind ``batch``), as a single evaluation is;
its result is the document the synchronous route answers for the same body (JSON and
multipart, inline and stored qrels, options, curves), GET /v1/jobs/{id} as text/plain the
synchronous text; a bad run fails the job with the synchronous route's problem; refusals
before queueing are answered at once and leave nothing stored. Every response is checked
against openapi.yaml (ContractClient); the jobs run in the embedded queue."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from conftest import ContractClient, finished_job

from service.app import create_app

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS = (DATA / "qrels.test").read_text()
RUN = (DATA / "results.test").read_text()
PROBLEM = "application/problem+json"
MEASURES = ["map", "P.5", "ndcg_cut.10", "num_rel_ret"]
ASYNC = {"Prefer": "respond-async"}


def reversed_run(text: str, runid: str = "rev") -> str:
    """The run with every score negated (its ranking reversed)."""
    lines = []
    for line in text.splitlines():
        t, q0, d, rank, score, _ = line.split()
        lines.append(f"{t} {q0} {d} {rank} {-float(score)!r} {runid}")
    return "\n".join(lines) + "\n"


def mapping(text: str) -> dict:
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        t, _, d, _, score, _ = line.split()
        out.setdefault(t, {})[d] = float(score)
    return out


REV = reversed_run(RUN)


def make_app(**config):
    return create_app({"TESTING": True, **config})


def make_client(**config) -> ContractClient:
    return ContractClient(make_app(**config).test_client())


@pytest.fixture
def client():
    return make_client()


def blobs(app) -> dict:
    """The run and qrels blobs the app's store holds (the memory store under the qrels'
    database)."""
    store = app.extensions["cranfield"].store
    return getattr(store, "cache", store)._blobs


def queued(client, body=None, *, headers=None, **kwargs) -> dict:
    """The finished or failed job a batch POST queued (202, Location, Preference-Applied)."""
    resp = client.post("/v1/evaluations/batch", json=body,
                       headers={**ASYNC, **(headers or {})}, **kwargs)
    assert resp.status_code == 202, resp.get_data(as_text=True)
    job = resp.get_json()
    assert job["kind"] == "batch" and job["status"] in ("queued", "started", "finished")
    assert resp.headers["Location"] == f"/v1/jobs/{job['id']}"
    assert resp.headers["Preference-Applied"] == "respond-async"
    return finished_job(client, resp.headers["Location"])


def result(client, body=None, **kwargs) -> dict:
    job = queued(client, body, **kwargs)
    assert job["status"] == "finished", job.get("problem")
    return job["result"]


def synchronous(client, body=None, **kwargs) -> dict:
    resp = client.post("/v1/evaluations/batch", json=body, **kwargs)
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert "Preference-Applied" not in resp.headers
    return resp.get_json()


@pytest.mark.parametrize("extra", [
    {"measures": MEASURES},
    {},  # trec_eval's official set
    {"measures": MEASURES, "options": {"complete_topics": True, "depth": 5,
                                       "relevance_level": 2}, "curves": True},
    {"measures": ["map", "P.10"], "per_topic": False},
])
def test_a_queued_batch_is_the_synchronous_document(client, extra):
    body = {"runs": [{"name": "text", "run": RUN}, {"run": mapping(REV)},
                     {"name": "again", "run": reversed_run(RUN, "other")}],
            "qrels": QRELS, **extra}
    got = result(client, body)
    assert got == synchronous(client, body)
    assert [d["name"] for d in got["evaluations"]] == ["text", "run2", "again"]
    assert [d["provenance"]["runid"] for d in got["evaluations"]] == [
        "STANDARD", "cranfield", "other"]
    assert got["evaluations"][0]["aggregate"] != got["evaluations"][1]["aggregate"]


def test_a_body_over_the_threshold_is_queued_without_being_asked():
    app = make_app(ASYNC_THRESHOLD_BYTES=1000)
    client = ContractClient(app.test_client())
    body = {"runs": [{"run": RUN}, {"run": REV}], "qrels": QRELS, "measures": MEASURES}
    resp = client.post("/v1/evaluations/batch", json=body)
    assert resp.status_code == 202 and resp.get_json()["kind"] == "batch"
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished"
    assert job["result"] == synchronous(make_client(), body)
    # a finished job's inputs are dropped: the run blobs and the inline qrels' blob
    assert blobs(app) == {}


def test_a_large_body_of_mappings_read_into_columns(client):
    """Past FAST_JSON_MIN_BYTES the runs come as columns from the compiled scan: stored as
    JSON and read back by the worker, the same documents."""
    run = {f"q{t}": {f"d{d}": ((t * 7919 + d * 104729) % 1000) / 7.0 for d in range(1000)}
           for t in range(60)}
    qrels = {f"q{t}": {f"d{d}": 1 for d in range(t % 5, 1000, 37)} for t in range(60)}
    body = {"runs": [{"run": run}, {"name": "x", "run": run}], "qrels": qrels,
            "measures": ["map", "P.10"]}
    got = result(client, body)
    assert got == synchronous(client, body)
    assert got["evaluations"][0]["provenance"]["runid"] == "cranfield"


def multipart() -> dict:
    return {"runs": [(io.BytesIO(RUN.encode()), "bm25.txt"), (io.BytesIO(REV.encode()),
                                                              "rev.txt"), REV],
            "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"), "measures": "map,P.5",
            "complete_topics": "true", "curves": "true"}


def test_multipart_is_the_synchronous_document(client):
    got = result(client, data=multipart(), content_type="multipart/form-data")
    sync = synchronous(client, data=multipart(), content_type="multipart/form-data")
    assert got == sync
    assert [d["name"] for d in got["evaluations"]] == ["bm25", "rev", "run3"]


def test_stored_qrels_pinned_at_submission(client):
    put = client.put("/v1/qrels/batch-queue", json={"qrels": mapping_qrels()})
    assert put.status_code in (200, 201), put.get_json()
    body = {"runs": [{"name": "a", "run": RUN}, {"name": "b", "run": REV}],
            "qrels_id": "batch-queue", "measures": MEASURES}
    got = result(client, body)
    assert got == synchronous(client, body)
    assert got["qrels"]["version"] == got["evaluations"][0]["provenance"]["qrels_version"]


def mapping_qrels() -> dict:
    out: dict[str, dict[str, int]] = {}
    for line in QRELS.splitlines():
        t, _, d, grade = line.split()
        out.setdefault(t, {})[d] = int(grade)
    return out


def test_topic_metadata_segments_per_run(client):
    metadata = {"301": {"segments": ["a"], "weight": 2}, "302": {"segments": ["a", "b"]},
                "303": {"segments": ["b"]}}
    body = {"runs": [{"run": RUN}, {"run": REV}], "qrels": QRELS, "measures": ["map"],
            "options": {"topic_metadata": metadata}}
    got = result(client, body)
    assert "segments" in got["evaluations"][0] and got == synchronous(client, body)


def test_text_plain_of_the_job_is_the_synchronous_text(client):
    text = {"Accept": "text/plain"}
    for per_topic in (None, True, False):
        flag = {} if per_topic is None else {"per_topic": per_topic}
        for runs in ([{"run": RUN}, {"run": REV}, {"run": mapping(REV)}], [{"run": RUN}]):
            body = {"runs": runs, "qrels": QRELS, "measures": MEASURES, **flag}
            # per_topic unsaid: as the Accept of the submission says (text: the summary)
            job = queued(client, body, headers=text)
            assert job["status"] == "finished"
            got = client.get(f"/v1/jobs/{job['id']}", headers=text)
            assert got.status_code == 200 and got.mimetype == "text/plain"
            sync = client.post("/v1/evaluations/batch", json=body, headers=text)
            assert got.get_data(as_text=True) == sync.get_data(as_text=True)
            assert ("\t301\t" in sync.get_data(as_text=True)) == bool(per_topic)
    asked = {"runs": [{"run": RUN}, {"run": REV}], "qrels": QRELS,
             "measures": ["runid", "map"]}
    job = queued(client, asked, headers=text)
    got = client.get(f"/v1/jobs/{job['id']}", headers=text).get_data(as_text=True)
    assert got == client.post("/v1/evaluations/batch", json=asked,
                              headers=text).get_data(as_text=True)


def test_the_job_page_and_no_csv(client):
    job = queued(client, {"runs": [{"name": "bm25", "run": RUN}, {"name": "rev", "run": REV}],
                          "qrels": QRELS, "measures": ["map", "P.5"]})
    page = client.get(f"/v1/jobs/{job['id']}", headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    aggregate = job["result"]["evaluations"][0]["aggregate"]
    assert "<td>bm25</td><td>STANDARD</td>" in html and f"{aggregate['map']:.4f}" in html
    assert "<td>rev</td><td>rev</td>" in html and job["id"] in html
    csv = client.get(f"/v1/jobs/{job['id']}", headers={"Accept": "text/csv"})
    assert csv.status_code == 406 and csv.mimetype == PROBLEM


def test_progress_counts_the_runs(client):
    job = queued(client, {"runs": [{"run": RUN}, {"run": REV}], "qrels": QRELS})
    assert job["progress"]["stage"] == "done"
    assert job["progress"]["runs_done"] == job["progress"]["runs_total"] == 2


# --- a bad run fails the job with the synchronous route's problem ---------------------------

def same_failure(client, body=None, status: int = 422, **kwargs) -> dict:
    """The queued job's problem, the same as the synchronous route's for the same body
    (``data``: a function making the form, as a form's files are read once)."""
    data = kwargs.pop("data", None)
    if data is not None:
        kwargs["data"] = data()
    sync = client.post("/v1/evaluations/batch", json=body, **kwargs)
    assert sync.status_code == status and sync.mimetype == PROBLEM, sync.get_data()
    expected = sync.get_json()
    if data is not None:
        kwargs["data"] = data()
    job = queued(client, body, **kwargs)
    assert job["status"] == "failed", job
    problem = job["problem"]
    for key in ("status", "title", "detail", "errors"):
        assert problem[key] == expected[key], key
    return problem


def test_a_bad_run_fails_the_job_naming_it(client):
    problem = same_failure(client, {"runs": [{"run": RUN}, {"run": "301 Q0 d1 1 x r\n"}],
                                    "qrels": QRELS})
    assert list(problem["errors"]) == ["runs[1].run line 1"]
    problem = same_failure(client, {"runs": [{"run": RUN}, {"run": {"301": {"d 1": 1.0}}}],
                                    "qrels": QRELS})
    assert list(problem["errors"]) == ["runs[1].run.301.d 1"]
    problem = same_failure(client, {"runs": [{"run": RUN}, {"run": REV},
                                             {"run": "999 Q0 d1 1 1 r\n"}], "qrels": QRELS})
    assert list(problem["errors"]) == ["runs[2].run"] and problem["code"] == "no-overlap"
    assert problem["detail"].startswith("runs[2]: ")
    problem = same_failure(client, {"runs": [{"run": RUN}], "qrels": "301 0 d1 x\n"})
    assert list(problem["errors"]) == ["qrels line 1"]
    # multipart: a file's run, named by its place
    problem = same_failure(client, data=lambda: {
        "runs": [(io.BytesIO(RUN.encode()), "a.txt"), (io.BytesIO(b"301 Q0 d1 1 x r\n"),
                                                       "b.txt")],
        "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt")},
        content_type="multipart/form-data")
    assert list(problem["errors"]) == ["runs[1].run line 1"]


def test_every_run_within_the_input_limits():
    client = make_client(MAX_TOPICS=3, MAX_DOCS_PER_TOPIC=2000)
    problem = same_failure(client, {"runs": [{"run": RUN}, {"run": RUN + "999 Q0 dx 1 1 r\n"}],
                                    "qrels": QRELS}, 413)
    assert list(problem["errors"]) == ["runs[1].run"]
    client = make_client(MAX_DOCS_PER_TOPIC=10)
    problem = same_failure(client, {"runs": [{"run": "301 Q0 d1 1 1 r\n"}, {"run": RUN}],
                                    "qrels": QRELS}, 413)
    assert [k.rsplit(".", 1)[0] for k in problem["errors"]] == ["runs[1].run"]


def cutoffs(n: int) -> str:
    return "P." + ",".join(str(k) for k in range(1, n + 1))


def test_the_values_budget_is_the_queued_one():
    """3 runs × 10 instances × 3 topics = 90 values: over MAX_EVALUATION_VALUES 89 answered
    at once (which says a queued batch is held to MAX_QUEUED_EVALUATION_VALUES), within it
    queued; over MAX_QUEUED_EVALUATION_VALUES the job fails with its name and factors."""
    body = {"runs": [{"run": RUN}, {"run": REV}, {"run": RUN}], "qrels": QRELS,
            "measures": [cutoffs(10)]}
    client = make_client(MAX_EVALUATION_VALUES=89, MAX_QUEUED_EVALUATION_VALUES=90)
    sync = client.post("/v1/evaluations/batch", json=body)
    assert sync.status_code == 422 and sync.get_json()["budget"]["total"] == 90
    assert "Prefer: respond-async" in sync.get_json()["detail"]
    assert "MAX_QUEUED_EVALUATION_VALUES 90" in sync.get_json()["detail"]
    assert result(client, body) == synchronous(make_client(), body)
    client = make_client(MAX_QUEUED_EVALUATION_VALUES=89)
    job = queued(client, body)
    assert job["status"] == "failed"
    assert job["problem"]["budget"] == {
        "name": "MAX_QUEUED_EVALUATION_VALUES", "limit": 89, "total": 90,
        "factors": {"runs": 3, "instances": 10, "topics": 3}}
    assert list(job["problem"]["errors"]) == ["runs"]
    assert "3 runs × 10 measure instances × 3 topics = 90 values, over " \
           "MAX_QUEUED_EVALUATION_VALUES 89" in job["problem"]["detail"]


# --- refused before it is queued: at once, nothing stored, the slot given back ---------------

def refused_at_once(app, body=None, status: int = 422, **kwargs) -> dict:
    client = ContractClient(app.test_client())
    resp = client.post("/v1/evaluations/batch", json=body, headers=ASYNC, **kwargs)
    assert resp.status_code == status and resp.mimetype == PROBLEM, resp.get_data()
    assert "Location" not in resp.headers
    assert blobs(app) == {} and app.extensions["cranfield"].active_jobs(None) == 0
    return resp.get_json()


def test_refusals_before_queueing():
    app = make_app(MAX_BATCH_RUNS=2, MAX_MEASURE_INSTANCES=5)
    body = refused_at_once(app, {"runs": [{"run": RUN}, {"run": REV}, {"run": RUN}],
                                 "qrels": QRELS, "measures": ["map"]})
    assert body["errors"] == {"runs": ["Length must be between 1 and 2."]}
    body = refused_at_once(app, {"runs": [{"run": RUN}], "qrels": QRELS,
                                 "measures": [cutoffs(6)]})
    assert body["budget"]["name"] == "MAX_MEASURE_INSTANCES"
    body = refused_at_once(app, {"runs": [{"run": RUN}], "qrels": QRELS,
                                 "measures": ["map", "no_such_measure"]})
    assert "measures[1]" in body["errors"]
    body = refused_at_once(app, {"runs": [{"run": RUN}], "qrels_id": "nowhere",
                                 "measures": ["map"]})
    assert "qrels_id" in body["errors"]
    body = refused_at_once(app, {"runs": [{"name": "a", "run": RUN}, {"name": "a", "run": REV}],
                                 "qrels": QRELS, "measures": ["map"]})
    assert "runs[1].name" in body["errors"]


def test_a_bad_table_run_stores_nothing():
    """An Arrow run whose metadata is over the bounds is refused while the runs are stored:
    the runs stored before it and the qrels are dropped, the slot given back."""
    import pyarrow as pa

    table = pa.table({"topic": ["301"] * 3, "docid": ["a", "b", "c"],
                      "score": [3.0, 2.0, 1.0]})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    app = make_app(MAX_TOPICS=1, MAX_DOCS_PER_TOPIC=2)  # at most 2 rows
    body = refused_at_once(app, data={
        "runs": [(io.BytesIO(RUN.encode()), "a.txt"), (io.BytesIO(sink.getvalue()), "t.arrow")],
        "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt")},
        content_type="multipart/form-data", status=413)
    assert any(k.startswith("runs[1].run") for k in body["errors"]), body


def test_the_job_cap_and_the_hard_size_limit():
    app = make_app(MAX_QUEUED_JOBS=1)
    backend = app.extensions["cranfield"]
    slot, _ = backend.reserve_job(None, 1)  # another request holds the only slot
    client = ContractClient(app.test_client())
    resp = client.post("/v1/evaluations/batch", json={"runs": [{"run": RUN}], "qrels": QRELS},
                       headers=ASYNC)
    assert resp.status_code == 429 and resp.get_json()["type"].endswith("/too-many-jobs")
    assert blobs(app) == {}
    backend.release_job(slot, None)
    assert queued(client, {"runs": [{"run": RUN}], "qrels": QRELS})["status"] == "finished"
    # above the hard maximum a body is 413, queued or not
    small = ContractClient(make_app(MAX_CONTENT_LENGTH=10_000,
                                    ASYNC_THRESHOLD_BYTES=1000).test_client())
    resp = small.post("/v1/evaluations/batch", json={"runs": [{"run": RUN}, {"run": REV}],
                                                     "qrels": QRELS}, headers=ASYNC)
    assert resp.status_code == 413 and resp.mimetype == PROBLEM


def test_another_tenants_batch_job_is_not_found():
    from service.auth import key_line

    app = make_app(API_KEYS=";".join([key_line("ka", "write", "alice"),
                                      key_line("kb", "write", "bob")]))
    client = ContractClient(app.test_client())
    resp = client.post("/v1/evaluations/batch", json={"runs": [{"run": RUN}], "qrels": QRELS},
                       headers={**ASYNC, "Authorization": "Bearer ka"})
    assert resp.status_code == 202
    location = resp.headers["Location"]
    job = finished_job(client, location, headers={"Authorization": "Bearer ka"})
    assert job["status"] == "finished"
    other = client.get(location, headers={"Authorization": "Bearer kb"})
    assert other.status_code == 404


# --- the Python client follows a 202 -----------------------------------------------------------

@pytest.fixture
def app():
    return make_app(ASYNC_THRESHOLD_BYTES=1000)


def test_client_evaluate_many_polls_a_queued_batch(served, tmp_path):
    from cranfield.client import ApiError, Client

    api = Client(served)
    (tmp_path / "bm25.txt").write_text(RUN)
    seen = []
    got = api.evaluate_many(QRELS, [str(tmp_path / "bm25.txt"), REV, mapping(REV)], MEASURES,
                            progress=seen.append)
    assert list(got) == ["bm25", "run2", "run3"]
    assert seen and seen[-1]["status"] == "finished" and seen[-1]["kind"] == "batch"
    local = make_client()
    sync = synchronous(local, {"runs": [{"name": "bm25", "run": RUN}, {"run": REV},
                                        {"run": mapping(REV)}],
                               "qrels": QRELS, "measures": MEASURES})
    assert got == {d.pop("name"): d for d in sync["evaluations"]}
    text = api.evaluate_many(QRELS, {"a": RUN, "b": REV}, ["map"], accept="text/plain")
    assert text == local.post("/v1/evaluations/batch", json={
        "runs": [{"name": "a", "run": RUN}, {"name": "b", "run": REV}], "qrels": QRELS,
        "measures": ["map"]}, headers={"Accept": "text/plain"}).get_data(as_text=True)
    assert text.job is not None  # it was queued
    job = api.evaluate_many(QRELS, {"a": RUN}, ["map"], wait=False)
    assert job["kind"] == "batch" and job["status"] in ("queued", "started", "finished")
    with pytest.raises(ApiError) as caught:
        api.evaluate_many(QRELS, {"a": RUN, "b": "999 Q0 d1 1 1 r\n"}, ["map"])
    assert caught.value.status == 422
    assert list(caught.value.problem["errors"]) == ["runs[1].run"]
