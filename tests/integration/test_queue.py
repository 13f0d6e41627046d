"""Queued evaluations on a real Redis (a private redis-server started here) with real RQ
worker processes (`cranfield worker`), and the API under gunicorn in front of them."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time

import pytest
from servers import BODY, CRANFIELD, DATA, ROOT, call, start_gunicorn, stop, wait_job

# Results outlive every test of the module on a loaded machine (a queued comparison reads
# finished evaluations); the expiry test checks the TTL Redis holds instead of sleeping it out.
RESULT_TTL = 600


@pytest.fixture(scope="module")
def api(redis_server):
    url, proc = start_gunicorn({"REDIS_URL": redis_server.url,
                                "CRANFIELD_RESULT_TTL": str(RESULT_TTL),
                                "CRANFIELD_WORKERS": "2"})
    yield url
    stop(proc)


def start_worker(redis_url: str) -> subprocess.Popen:
    return subprocess.Popen([CRANFIELD, "worker", "--redis-url", redis_url], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture
def worker(redis_server):
    proc = start_worker(redis_server.url)
    yield proc
    stop(proc)



def test_async_evaluation_equals_sync_on_real_workers(api, worker):
    status, _, sync = call(api, "POST", "/v1/evaluations", BODY)
    assert status == 200
    status, headers, job = call(api, "POST", "/v1/evaluations", BODY,
                                {"Prefer": "respond-async"})
    assert status == 202 and job["status"] == "queued"
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    assert done["result"]["aggregate"] == sync["aggregate"]
    assert done["result"]["per_topic"] == sync["per_topic"]
    assert round(done["result"]["aggregate"]["map"], 4) == 0.1785
    assert done["result"]["provenance"]["run_sha256"] == sync["provenance"]["run_sha256"]


def test_qrels_store_versions_and_cache_on_redis(api, worker):
    qrels_text = (DATA / "qrels.test").read_bytes()
    status, headers, meta = call(api, "PUT", "/v1/qrels/adhoc-test", qrels_text,
                                 content_type="text/plain")
    assert status == 201 and meta["judgments"] == 3681 and meta["topics"] == 3
    v1 = meta["version"]
    status, _, again = call(api, "PUT", "/v1/qrels/adhoc-test", qrels_text,
                            content_type="text/plain")
    assert status == 200 and again["versions"] == [v1]
    status, _, _ = call(api, "PUT", "/v1/qrels/adhoc-test", qrels_text + b"301 0 extra 1\n",
                        {"If-Match": '"ffffffffffffffff"'}, content_type="text/plain")
    assert status == 412
    status, _, v2meta = call(api, "PUT", "/v1/qrels/adhoc-test", qrels_text + b"301 0 extra 1\n",
                             {"If-Match": f'"{v1}"'}, content_type="text/plain")
    assert status == 201 and v2meta["versions"] == [v1, v2meta["version"]]
    status, _, listing = call(api, "GET", "/v1/qrels")
    assert "adhoc-test" in [i["id"] for i in listing["items"]]
    # three jobs against the old version: one worker decodes it once
    caches, results = [], []
    for _ in range(3):
        _, headers, _ = call(api, "POST", "/v1/evaluations",
                             {"run": BODY["run"], "qrels_id": f"adhoc-test@{v1}",
                              "measures": ["map"]}, {"Prefer": "respond-async"})
        done = wait_job(api, headers["Location"])
        assert done["status"] == "finished", done.get("problem")
        caches.append(done["result"]["provenance"]["qrels_decodes_by_worker"])
        results.append(done["result"]["aggregate"]["map"])
    assert caches == [1, 1, 1]  # decoded once, served from the cache twice
    assert round(results[0], 4) == 0.1785 and len(set(results)) == 1
    assert call(api, "DELETE", "/v1/qrels/adhoc-test")[0] == 204
    assert call(api, "GET", "/v1/qrels/adhoc-test")[0] == 404


def test_bad_input_fails_at_once_with_the_reason(api, worker):
    _, headers, _ = call(api, "POST", "/v1/evaluations",
                         {"run": "q1 Q0 d1 1 1.0 r\nq1 Q0 d1 2 0.5 r\n",
                          "qrels": {"q1": {"d1": 1}}}, {"Prefer": "respond-async"})
    done = wait_job(api, headers["Location"], timeout=20)
    assert done["status"] == "failed"
    assert "run line 2" in done["problem"]["errors"]


def test_cancel_a_queued_job_and_results_expire(api, redis_server):
    # no worker running: the job waits in the queue and can be canceled
    _, headers, _ = call(api, "POST", "/v1/evaluations", BODY, {"Prefer": "respond-async"})
    status, _, job = call(api, "DELETE", headers["Location"])
    assert status == 202 and job["status"] == "canceled"
    # a finished result is kept RESULT_TTL, then gone: Redis holds that TTL on the job; once
    # Redis expires the job (made due here rather than waited out), the job is 404
    from redis import Redis
    from rq.job import Job

    proc = start_worker(redis_server.url)
    try:
        _, headers, _ = call(api, "POST", "/v1/evaluations", BODY, {"Prefer": "respond-async"})
        assert wait_job(api, headers["Location"])["status"] == "finished"
        conn = Redis.from_url(redis_server.url)
        job = Job.fetch(headers["Location"].rsplit("/", 1)[1], connection=conn)
        assert 0 < conn.ttl(job.key) <= RESULT_TTL
        conn.pexpire(job.key, 1)
        deadline = time.monotonic() + 30
        while call(api, "GET", headers["Location"])[0] != 404:
            assert time.monotonic() < deadline, "the expired job is still served"
            time.sleep(0.05)
    finally:
        stop(proc)


def test_redis_down_gives_503_and_recovers(api, redis_server):
    before = call(api, "GET", "/v1/qrels")[2]["total"]
    redis_server.stop()
    try:
        status, headers, problem = call(api, "POST", "/v1/evaluations", BODY,
                                        {"Prefer": "respond-async"})
        assert status == 503 and headers["Retry-After"] == "5"
        assert problem["status"] == 503
        assert call(api, "GET", "/readyz")[0] == 503
        # stored qrels are the database's (issue #25): Redis only caches them
        status, _, listing = call(api, "GET", "/v1/qrels")
        assert status == 200 and listing["total"] == len(listing["items"]) == before
        # synchronous evaluation with inline qrels needs no Redis
        assert call(api, "POST", "/v1/evaluations", BODY)[0] == 200
    finally:
        redis_server.start()
    # every gunicorn worker process recovers on its first request: stale pooled connections
    # are replaced and retried, not reported as 503
    for _ in range(6):
        assert call(api, "GET", "/readyz")[0] == 200
        assert call(api, "GET", "/v1/qrels")[0] == 200


def _digits(values, width):
    """Zero-padded decimal digits of non-negative ints as a (n, width) byte matrix."""
    import numpy as np

    out = np.empty((len(values), width), np.uint8)
    v = values.astype(np.int64)
    for i in range(width - 1, -1, -1):
        out[:, i] = 48 + v % 10
        v //= 10
    return out


def big_run(topics: int, docs: int, seed: int = 0) -> bytes:
    """A TREC run of topics x docs lines built as one byte matrix (no loop per line)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    n = topics * docs
    s = rng.integers(0, 100000, n)

    def const(text: bytes):
        return np.frombuffer(text, np.uint8)[None].repeat(n, 0)

    parts = [const(b"t"), _digits(np.repeat(np.arange(topics), docs), 4), const(b" Q0 d"),
             _digits(np.tile(np.arange(docs), topics), 7), const(b" 1 "), _digits(s // 1000, 2),
             const(b"."), _digits(s % 1000, 3), const(b" r\n")]
    return np.hstack(parts).tobytes()


def test_worker_killed_mid_job_the_job_finishes_once_on_another_worker(api, redis_server):
    """SIGKILL a worker (and its work horse) while it evaluates; a second worker's registry
    clean-up finds the abandoned job once its heartbeat lapses (10 + 20 s on defaults) and runs
    it again; the result equals the in-process evaluation and is written once."""
    from redis import Redis
    from rq.job import Job
    from rq.results import Result

    import cranfield

    run = big_run(300, 10000)
    qrels = "".join(f"t{t:04d} 0 d{d:07d} {d % 3}\n" for t in range(300)
                    for d in range(0, 10000, 50)).encode()
    assert call(api, "PUT", "/v1/qrels/kill-test", qrels, content_type="text/plain")[0] in (
        200, 201)
    intervals = ["--monitoring-interval", "1", "--maintenance-interval", "2"]
    first = subprocess.Popen([CRANFIELD, "worker", "--redis-url", redis_server.url, *intervals],
                             cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    second = None
    try:
        body = {"run": run.decode(), "qrels_id": "kill-test", "measures": ["all_trec"],
                "details": True, "details_depth": 1000}
        status, headers, _ = call(api, "POST", "/v1/evaluations", body,
                                  {"Prefer": "respond-async"})
        assert status == 202
        deadline = time.monotonic() + 60
        while call(api, "GET", headers["Location"])[2]["status"] != "started":
            assert time.monotonic() < deadline, "the job never started"
            time.sleep(0.02)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        assert call(api, "GET", headers["Location"])[2]["status"] == "started"
        second = subprocess.Popen([CRANFIELD, "worker", "--redis-url", redis_server.url,
                                   *intervals], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        done = wait_job(api, headers["Location"], timeout=180)
        assert done["status"] == "finished", done.get("problem")
        # the job's record lives RESULT_TTL: count its results before the slow in-process
        # evaluation below
        job = Job.fetch(headers["Location"].rsplit("/", 1)[1],
                        connection=Redis.from_url(redis_server.url))
        successes = [r for r in job.results() if r.type == Result.Type.SUCCESSFUL]
        assert len(successes) == 1
        expected = cranfield.evaluate(qrels, run, ["all_trec"])
        for key, value in expected.aggregate.items():
            if key != "runid":
                assert done["result"]["aggregate"][key] == pytest.approx(value, abs=1e-12), key
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()  # a worker lost mid-job: no warm shutdown wanted
                proc.wait()


@pytest.fixture(scope="module")
def sharding_api(redis_server):
    url, proc = start_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_SHARDS": "3",
                                "CRANFIELD_SHARD_MIN_BYTES": "1", "CRANFIELD_WORKERS": "1"})
    yield url
    stop(proc)


@pytest.mark.parametrize("run_file, options", [
    ("results.test", {}),
    ("results.test", {"profile": "trec_eval-10", "relevance_level": 2}),
    ("results.trunc", {"complete_topics": True}),
    ("results.trunc", {"complete_topics": True, "profile": "trec_eval-10", "depth": 100}),
])
def test_sharded_job_equals_the_unsharded_evaluation(sharding_api, redis_server, run_file,
                                                     options):
    """A queued run split into topic shards, run by two workers and combined, gives exactly
    the synchronous result."""
    body = {"run": (DATA / run_file).read_text(), "qrels": BODY["qrels"],
            "measures": ["all_trec", "nDCG@10", "P(rel=2)@5"], "options": options}
    workers = [start_worker(redis_server.url) for _ in range(2)]
    try:
        status, _, sync = call(sharding_api, "POST", "/v1/evaluations", body)
        assert status == 200
        status, headers, _ = call(sharding_api, "POST", "/v1/evaluations", body,
                                  {"Prefer": "respond-async"})
        assert status == 202
        done = wait_job(sharding_api, headers["Location"])
        assert done["status"] == "finished", done.get("problem")
        shards = done["result"]["provenance"]["shards"]
        progress = done["progress"]
        assert progress["shards_done"] == progress["shards_total"] == shards
        assert progress["topics_done"] == progress["topics_total"]
        run_topics = len({line.split()[0] for line in body["run"].splitlines()})
        if run_file == "results.test":  # topics listed together: the shards split them
            assert progress["topics_total"] == run_topics
        assert done["result"]["provenance"]["shards"] >= 2
        for key in ("aggregate", "per_topic", "topics", "measures"):
            assert done["result"][key] == sync[key], key
        # the API hashed the text beside storing its pieces: the SHA-256 of the text as sent
        expected = hashlib.sha256(body["run"].encode()).hexdigest()
        assert done["result"]["provenance"]["run_sha256"] == sync["provenance"]["run_sha256"] \
            == expected
    finally:
        for w in workers:
            stop(w)


def test_queued_comparison_on_real_workers_from_inline_runs_and_finished_evaluations(
        api, worker):
    """A comparison queued on RQ equals the synchronous one; finished evaluation jobs
    (fetched by the worker from RQ) compare like the inline runs they came from."""
    qrels = (DATA / "qrels.test").read_text()
    runs = {"full": (DATA / "results.test").read_text(),
            "trunc": (DATA / "results.trunc").read_text()}
    body = {"runs": [{"name": n, "run": r} for n, r in runs.items()], "qrels": qrels,
            "measures": ["map", "P.10"], "gate": "map:0.05"}
    status, _, sync = call(api, "POST", "/v1/comparisons", body)
    assert status == 200
    status, headers, _ = call(api, "POST", "/v1/comparisons", body, {"Prefer": "respond-async"})
    assert status == 202
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done.get("problem")
    for key in ("summary", "pairs", "gate", "topics"):
        assert done["result"][key] == sync[key], key
    ids = []
    for run in runs.values():
        status, headers, _ = call(api, "POST", "/v1/evaluations",
                                  {"run": run, "qrels": qrels, "measures": ["map", "P.10"]},
                                  {"Prefer": "respond-async"})
        assert status == 202
        assert wait_job(api, headers["Location"])["status"] == "finished"
        ids.append(headers["Location"].rsplit("/", 1)[1])
    by_id = {"runs": [{"name": n, "evaluation_id": i} for n, i in zip(runs, ids, strict=True)],
             "measures": ["map", "P.10"], "gate": "map:0.05"}
    status, headers, _ = call(api, "POST", "/v1/comparisons", by_id, {"Prefer": "respond-async"})
    assert status == 202
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done.get("problem")
    assert done["result"]["pairs"] == sync["pairs"]
    assert done["result"]["provenance"]["runs"]["full"]["evaluation_id"] == ids[0]
    # an unknown evaluation id fails the job at once, naming the field
    bad = {"runs": [{"evaluation_id": ids[0]}, {"evaluation_id": "0" * 32}]}
    status, headers, _ = call(api, "POST", "/v1/comparisons", bad, {"Prefer": "respond-async"})
    failed = wait_job(api, headers["Location"])
    assert failed["status"] == "failed"
    assert "runs[1].evaluation_id" in failed["problem"]["errors"]


def test_a_job_spec_of_another_version_fails_with_the_reason(redis_server, worker):
    """A job queued by an API of another release (another spec version) is refused by the
    worker with a problem naming both versions, never read as if it were this version's."""
    from redis import Redis
    from rq import Queue

    from backend.contract import EVALUATE_FUNCTION, QUEUE, SPEC_VERSION

    conn = Redis.from_url(redis_server.url)
    old = {"kind": "evaluation", "version": SPEC_VERSION - 1, "measures": ["map"],
           "options": {}, "run_key": "run-gone", "qrels_ref": "q@1"}
    job = Queue(QUEUE, connection=conn).enqueue_call(EVALUATE_FUNCTION, args=(old,))
    deadline = time.monotonic() + 60
    while job.get_status(refresh=True) not in ("finished", "failed"):
        assert time.monotonic() < deadline, "the worker did not take the job"
        time.sleep(0.1)
    outcome = job.return_value()
    assert outcome["problem"]["title"] == "Unreadable job"
    assert outcome["problem"]["detail"] == (
        f"job spec version {SPEC_VERSION - 1}: this worker reads version {SPEC_VERSION} "
        "(API and workers must run the same release)")
