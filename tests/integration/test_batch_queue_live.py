"""A queued POST /v1/evaluations/batch on real parts (issue #30): gunicorn queueing on a
private redis-server, a ``cranfield worker`` doing the work. A batch over
ASYNC_THRESHOLD_BYTES is enqueued on RQ by dotted path (``worker.jobs.evaluate_batch_job``)
with the app's timeout and TTLs, carrying only keys and names; it waits, queued, until a
worker comes; the worker's result holds, for each run, the numbers the library's
``cranfield.evaluate_many`` gives for it (and the job's text/plain the library's text); the
inputs are dropped from Redis once it has finished; a bad run fails the job with the problem
the synchronous route gives; ``cranfield.client.Client.evaluate_many`` follows the 202. Waits
are on events (the job's state), never on the clock."""

from __future__ import annotations

import hashlib
import math

import orjson
import pytest
from servers import call, running_gunicorn, running_worker, text_of, wait_job

import cranfield
from cranfield.reports.result_document import evaluation_document
from cranfield.reports.trec_format import format_trec

THRESHOLD = 20_000  # bytes: the batches below are over it, the small bodies under it
MEASURES = ["map", "P.5", "ndcg_cut.10", "recip_rank", "num_rel_ret"]
N_RUNS, N_TOPICS, N_DOCS = 8, 12, 60
QRELS = "".join(f"q{t} 0 d{d} {1 + (d + t) % 2}\n" for t in range(N_TOPICS)
                for d in range(2 * N_DOCS) if (d * d + 3 * t) % 7 < 2)


STEPS = (1, 7, 11, 13, 17, 19, 23, 29)  # prime to 2 * N_DOCS: N_DOCS distinct docids a topic


def run_text(i: int) -> str:
    """Run ``i``: every topic's N_DOCS documents, ranked differently per run, runid ``r<i>``."""
    return "".join(f"q{t} Q0 d{(d * STEPS[i] + t) % (2 * N_DOCS)} {d + 1} "
                   f"{N_DOCS - d + i / 10:.3f} r{i}\n"
                   for t in range(N_TOPICS) for d in range(N_DOCS))


def mapping(text: str) -> dict:
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        t, _, d, _, score, _ = line.split()
        out.setdefault(t, {})[d] = float(score)
    return out


RUNS = {f"run{i}": run_text(i) for i in range(N_RUNS)}


def batch_body(**extra) -> dict:
    """The runs (the last one as a mapping) against the qrels: over THRESHOLD."""
    runs = [{"name": name, "run": text} for name, text in RUNS.items()]
    runs[-1]["run"] = mapping(runs[-1]["run"])
    return {"runs": runs, "qrels": QRELS, "measures": MEASURES, **extra}


def library() -> dict:
    """The library's evaluations of the runs (the last one from its mapping, as sent)."""
    runs = dict(RUNS)
    last = list(runs)[-1]
    runs[last] = mapping(runs[last])
    return cranfield.evaluate_many(QRELS, runs, MEASURES)


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (a is None and isinstance(b, float) and math.isnan(b)) or (
            a is not None and math.isclose(a, b, rel_tol=0, abs_tol=1e-12))
    return a == b


@pytest.fixture(scope="module")
def api(redis_server):
    with running_gunicorn({"REDIS_URL": redis_server.url,
                           "CRANFIELD_ASYNC_THRESHOLD_BYTES": str(THRESHOLD)}) as url:
        yield url


def rq_job(redis_url: str, job_id: str):
    import redis
    from rq.job import Job

    return Job.fetch(job_id, connection=redis.Redis.from_url(redis_url))


def blob_keys(redis_url: str) -> list[bytes]:
    import redis

    return list(redis.Redis.from_url(redis_url).scan_iter("*:blob:*"))


def test_a_large_batch_is_queued_and_the_worker_gives_the_librarys_numbers(api, redis_server):
    body = batch_body()
    status, headers, job = call(api, "POST", "/v1/evaluations/batch", body)
    assert status == 202, job
    assert job["kind"] == "batch" and job["status"] == "queued"
    assert headers["Location"] == f"/v1/jobs/{job['id']}"
    # on RQ by dotted path, with the app's timeout and TTLs; its spec holds keys, not runs
    queued = rq_job(redis_server.url, job["id"])
    assert queued.func_name == "worker.jobs.evaluate_batch_job"
    assert queued.timeout == 3600 and queued.result_ttl == 24 * 3600
    assert queued.ttl == 6 * 3600 and queued.failure_ttl == 24 * 3600
    wire = queued.args[0]
    assert wire["kind"] == "batch" and [r["name"] for r in wire["runs"]] == list(RUNS)
    assert all(set(r) == {"name", "run_key", "run_format"} for r in wire["runs"])
    assert [r["run_format"] for r in wire["runs"]] == ["trec"] * (N_RUNS - 1) + ["json"]
    assert len(str(wire)) < 5_000  # keys and names: the runs are elsewhere
    assert len(blob_keys(redis_server.url)) == N_RUNS + 1  # each run, and the qrels
    # nothing is done without a worker: the job waits, queued
    assert call(api, "GET", headers["Location"])[2]["status"] == "queued"
    with running_worker(redis_server.url):
        done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done.get("problem")
    assert done["progress"]["stage"] == "done"
    assert done["progress"]["runs_done"] == done["progress"]["runs_total"] == N_RUNS
    result = done["result"]
    assert result["qrels"] == {"sha256": hashlib.sha256(QRELS.encode()).hexdigest()}
    evs = library()
    assert [d["name"] for d in result["evaluations"]] == list(evs)
    for doc, (name, ev) in zip(result["evaluations"], evs.items(), strict=True):
        assert doc["provenance"]["runid"] == ev.runid
        assert set(doc["aggregate"]) == set(ev.aggregate)
        for key, value in ev.aggregate.items():
            assert same(doc["aggregate"][key], value), (name, key)
        # per topic: the library's document of the run (as JSON carries it)
        assert doc["per_topic"] == orjson.loads(orjson.dumps(evaluation_document(
            ev, {"per_topic": True}, None, None, None)["per_topic"],
            option=orjson.OPT_SERIALIZE_NUMPY))
        assert len(doc["per_topic"]) == len(ev.topic_order) > 1
        if name in RUNS and ev.runid != "cranfield":
            assert doc["provenance"]["run_sha256"] == \
                hashlib.sha256(RUNS[name].encode()).hexdigest()
    assert len({d["aggregate"]["map"] for d in result["evaluations"]}) > 1  # different runs
    # the job's inputs were dropped once it had finished
    assert blob_keys(redis_server.url) == []


def test_the_jobs_text_is_the_librarys_and_the_synchronous_text(api, redis_server):
    body = batch_body(per_topic=True)
    status, headers, job = call(api, "POST", "/v1/evaluations/batch", body,
                                headers={"Accept": "text/plain"})
    assert status == 202, job
    with running_worker(redis_server.url):
        done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    text = text_of(api, headers["Location"]).decode()
    expected = "".join("%-22s\tall\t%s\n" % ("runid", ev.runid) + format_trec(ev, per_topic=True)
                       for ev in library().values())
    assert text == expected
    # a small batch answered at once gives the text its queued twin gives
    small = {"runs": [{"run": head(RUNS["run0"])}, {"run": head(RUNS["run1"])}],
             "qrels": QRELS, "measures": ["map", "P.5"]}
    sync = call_text(api, small, {})
    queued = call_text(api, small, {"Prefer": "respond-async"})
    assert sync[0] == 200 and queued[0] == 202
    with running_worker(redis_server.url):
        assert wait_job(api, queued[1])["status"] == "finished"
    assert text_of(api, queued[1]).decode() == sync[1]
    assert sync[1].startswith("runid                 \tall\t")


def head(text: str, topics: int = 3) -> str:
    """A run's first ``topics`` topics: a body of two under THRESHOLD, answered at once."""
    return "".join(line + "\n" for line in text.splitlines()
                   if int(line.split()[0][1:]) < topics)


def call_text(base: str, body: dict, headers: dict) -> tuple[int, str]:
    """(202, the job's Location) of a queued text request, or (200, the text) of one answered
    at once."""
    import urllib.request

    req = urllib.request.Request(base + "/v1/evaluations/batch", data=orjson.dumps(body),
                                 method="POST", headers={"Content-Type": "application/json",
                                                         "Accept": "text/plain", **headers})
    with urllib.request.urlopen(req, timeout=60) as resp:
        if resp.status == 202:
            return 202, resp.headers["Location"]
        return resp.status, resp.read().decode()


def test_a_bad_run_fails_the_job_with_the_synchronous_problem(api, redis_server):
    runs = [{"run": head(RUNS["run0"])}, {"run": "q1 Q0 d1 1 x r\n"}]
    small = {"runs": runs, "qrels": QRELS, "measures": ["map"]}
    status, _, sync = call(api, "POST", "/v1/evaluations/batch", small)
    assert status == 422 and list(sync["errors"]) == ["runs[1].run line 1"]
    status, headers, job = call(api, "POST", "/v1/evaluations/batch", small,
                                headers={"Prefer": "respond-async"})
    assert status == 202, job
    with running_worker(redis_server.url):
        done = wait_job(api, headers["Location"])
    assert done["status"] == "failed", done
    for key in ("status", "title", "detail", "errors"):
        assert done["problem"][key] == sync[key], key
    assert blob_keys(redis_server.url) == []


def test_the_python_client_follows_the_202(api, redis_server, tmp_path):
    from cranfield.client import Client

    paths = []
    for name, text in list(RUNS.items())[:4]:
        paths.append(tmp_path / f"{name}.txt")
        paths[-1].write_text(text)
    api_client = Client(api)
    states = []
    with running_worker(redis_server.url):
        got = api_client.evaluate_many(QRELS, [str(p) for p in paths], MEASURES,
                                       progress=lambda s: states.append(s["status"]))
    assert states[-1] == "finished" and states[0] in ("queued", "started", "finished")
    expected = cranfield.evaluate_many(QRELS, [str(p) for p in paths], MEASURES)
    assert list(got) == list(expected) == [p.stem for p in paths]
    for name, ev in expected.items():
        for key, value in ev.aggregate.items():
            assert same(got[name]["aggregate"][key], value), (name, key)


def test_multipart_runs_are_queued_and_named_by_their_files(api, redis_server, tmp_path):
    from cranfield.client import Client
    from cranfield.client_body import MultipartBody, file_part

    paths = []
    for name, text in RUNS.items():
        paths.append(tmp_path / f"{name}.run")
        paths[-1].write_text(text)
    (tmp_path / "qrels.txt").write_text(QRELS)
    body = MultipartBody([("measures", m) for m in MEASURES],
                         [file_part("runs", str(p)) for p in paths]
                         + [file_part("qrels", str(tmp_path / "qrels.txt"))])
    client = Client(api)
    status, headers, raw = client.request("POST", "/v1/evaluations/batch", body)
    assert status == 202, raw
    with running_worker(redis_server.url):
        done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    expected = cranfield.evaluate_many(QRELS, [str(p) for p in paths], MEASURES)
    docs = done["result"]["evaluations"]
    assert [d["name"] for d in docs] == list(expected) == list(RUNS)
    for doc, ev in zip(docs, expected.values(), strict=True):
        for key, value in ev.aggregate.items():
            assert same(doc["aggregate"][key], value), (doc["name"], key)


def test_cranfield_eval_server_waits_for_a_queued_batch(api, redis_server, tmp_path):
    """``cranfield eval --server URL QRELS RUN...`` over the threshold: the service queues
    the batch, the command waits for it and prints what the local command prints."""
    import subprocess

    from servers import CRANFIELD, JOB_TIMEOUT, ROOT, wait_until

    paths = []
    for name, text in RUNS.items():
        paths.append(str(tmp_path / f"{name}.txt"))
        (tmp_path / f"{name}.txt").write_text(text)
    (tmp_path / "qrels.txt").write_text(QRELS)
    argv = ["eval", "-q", "-m", "map", "-m", "P.5", str(tmp_path / "qrels.txt"), *paths]
    local = subprocess.run([CRANFIELD, *argv], capture_output=True, cwd=ROOT, timeout=120)
    assert local.returncode == 0, local.stderr
    before = set(finished_batches(redis_server.url))
    with running_worker(redis_server.url):
        proc = subprocess.Popen([CRANFIELD, argv[0], "--server", api, *argv[1:]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        try:  # the events: the batch job is queued and finishes; then the command ends
            new = wait_until(lambda: set(finished_batches(redis_server.url)) - before,
                             JOB_TIMEOUT, "the command's batch job finished on RQ")
            out, err = proc.communicate(timeout=JOB_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err
    assert len(new) == 1  # it was queued
    assert out == local.stdout
    assert local.stdout.count(b"runid                 \tall\t") == N_RUNS


def finished_batches(redis_url: str) -> list[str]:
    """The ids of the batch jobs RQ has finished."""
    import redis
    from rq.registry import FinishedJobRegistry

    from backend.contract import QUEUE

    connection = redis.Redis.from_url(redis_url)
    ids = FinishedJobRegistry(QUEUE, connection=connection).get_job_ids()
    return [i for i in ids if rq_job(redis_url, i).func_name == "worker.jobs.evaluate_batch_job"]
