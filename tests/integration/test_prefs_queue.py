"""Queued evaluations against preferences and judgment groups (issue #28) on a real Redis
with a real RQ worker: the job carries ``options.qrels_format``, the worker reads the JSON
shape (or a stored version of the kind) with the engine's one reader, is never cut into
shards (the service shards large TREC runs: here, any over 1 kB), and the job's text is
trec_eval's (NIST's out.test.prefs / out.test.qrels_jg) byte for byte."""

from __future__ import annotations

import subprocess

import pytest
from servers import CRANFIELD, DATA, ROOT, call, running_gunicorn, text_of, wait_job


@pytest.fixture(scope="module")
def api(redis_server):
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_SHARDS": "2",
                           "CRANFIELD_SHARD_MIN_BYTES": "1000"}) as url:
        yield url


def prefs_mapping() -> dict:
    out: dict = {}
    for line in (DATA / "prefs.test").read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            qid, jg, jsg, docno, level = fields
            out.setdefault(qid, {}).setdefault(jg, {}).setdefault(jsg, {})[docno] = float(level)
    return out


def test_queued_prefs_and_stored_judgment_groups_on_a_real_worker(api, worker):
    body = {"run": (DATA / "prefs.results.test").read_text(), "qrels": prefs_mapping(),
            "measures": ["all_prefs"], "per_topic": True,
            "options": {"profile": "trec_eval-10", "qrels_format": "prefs"}}
    status, sync_headers, sync = call(api, "POST", "/v1/evaluations", body)
    assert status == 200, sync
    status, headers, job = call(api, "POST", "/v1/evaluations", body,
                                headers={"Prefer": "respond-async"})
    assert status == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    result = done["result"]
    assert result["per_topic"] == sync["per_topic"]
    assert result["aggregate"] == sync["aggregate"]
    assert "shards" not in result["provenance"]
    assert result["provenance"]["qrels_sha256"] == sync["provenance"]["qrels_sha256"]
    assert text_of(api, headers["Location"]) == (DATA / "out.test.prefs").read_bytes()

    status, _, meta = call(api, "PUT", "/v1/qrels/jg?qrels_format=qrels_jg",
                           (DATA / "qrels.123").read_bytes(), content_type="text/plain")
    assert status == 201 and meta["qrels_format"] == "qrels_jg", meta
    status, headers, job = call(api, "POST", "/v1/evaluations", {
        "run": (DATA / "results.test").read_text(), "qrels_id": "jg",
        "measures": ["qrels_jg"], "per_topic": True,
        "options": {"profile": "trec_eval-10"}}, headers={"Prefer": "respond-async"})
    assert status == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    assert done["result"]["provenance"]["qrels_version"] == f"jg@{meta['version']}"
    assert done["result"]["provenance"]["options"]["qrels_format"] == "qrels_jg"
    assert text_of(api, headers["Location"]) == (DATA / "out.test.qrels_jg").read_bytes()


@pytest.mark.parametrize("fmt, qrels, run, expected", [
    ("prefs", "prefs.test", "prefs.results.test", "out.test.prefs"),
    ("qrels_jg", "qrels.123", "results.test", "out.test.qrels_jg"),
])
def test_eval_server_with_R_prints_what_local_eval_prints(api, fmt, qrels, run, expected):
    # -R goes to the service as options.qrels_format (it was left behind: plain qrels read)
    flags = ["-q", "--profile", "10", "-R", fmt, str(DATA / qrels), str(DATA / run)]
    local, remote = (subprocess.run([CRANFIELD, "eval", *server, *flags], capture_output=True,
                                    text=True, cwd=ROOT, timeout=120)
                     for server in ([], ["--server", api]))
    assert local.returncode == remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout == (DATA / expected).read_text()


def test_qrels_put_R_stores_the_kind_that_eval_qrels_id_reads(api):
    def cranfield(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([CRANFIELD, *args], capture_output=True, text=True, cwd=ROOT,
                              timeout=120)

    put = cranfield("qrels", "put", "--server", api, "-R", "qrels_jg", "--format", "json",
                    "cli-jg", str(DATA / "qrels.123"))
    assert put.returncode == 0, put.stderr
    assert '"qrels_format": "qrels_jg"' in put.stdout
    done = cranfield("eval", "--server", api, "--qrels-id", "cli-jg", "-q", "--profile", "10",
                     "-", str(DATA / "results.test"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (DATA / "out.test.qrels_jg").read_text()
