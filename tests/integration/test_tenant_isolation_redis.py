"""Tenant isolation on the Redis store (issue #16): with API keys on, one tenant's stored
qrels, jobs and finished evaluations are invisible to another, on a real redis-server with
gunicorn and a real RQ worker in front of it.

tests/api/test_auth.py checks the same rules on the in-memory store; on Redis the tenant's
space is ``RedisStore.scoped`` (a key prefix per tenant) and the job's ``meta["tenant"]``,
which only a real Redis exercises. A ``scoped`` that returned the shared store would let
team-b read, list, delete and evaluate against team-a's qrels: every test here fails then.
"""

from __future__ import annotations

import urllib.request

import pytest
from servers import (
    DATA,
    call,
    running_gunicorn,
    running_worker,
    wait_job,
)

from service.auth import key_line

KEYS = {  # key -> (role, tenant)
    "read-a": ("read", "team-a"), "write-a": ("write", "team-a"), "admin-a": ("admin", "team-a"),
    "write-b": ("write", "team-b"), "admin-b": ("admin", "team-b"),
}
QRELS = (DATA / "qrels.test").read_bytes()
# team-b's qrels of the same name: topic 301 only
QRELS_B = b"".join(line + b"\n" for line in QRELS.splitlines() if line.startswith(b"301 "))
RUN = (DATA / "results.test").read_text()


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def api(redis_server):
    keys = ";".join(key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items())
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_API_KEYS": keys,
                           "CRANFIELD_WORKERS": "1"}) as url:
        yield url


@pytest.fixture(scope="module")
def worker(redis_server):
    with running_worker(redis_server.url) as proc:
        yield proc


def put_qrels(api, key, qrels_id, text):
    return call(api, "PUT", f"/v1/qrels/{qrels_id}", text, auth(key), content_type="text/plain")


def queued(api, key, path, body):
    status, headers, doc = call(api, "POST", path, body, {"Prefer": "respond-async", **auth(key)})
    assert status == 202, doc
    return headers["Location"]


def test_redis_qrels_of_one_tenant_are_invisible_to_another(api):
    status, _, a = put_qrels(api, "write-a", "iso-qrels", QRELS)
    assert status == 201 and a["judgments"] == 3681
    # team-b gets, lists, deletes and evaluates against "iso-qrels": as if it did not exist
    assert call(api, "GET", "/v1/qrels/iso-qrels", headers=auth("write-b"))[0] == 404
    assert call(api, "GET", f"/v1/qrels/iso-qrels@{a['version']}",
                headers=auth("write-b"))[0] == 404
    status, _, listing = call(api, "GET", "/v1/qrels", headers=auth("write-b"))
    assert status == 200 and listing["total"] == 0, listing
    assert call(api, "DELETE", "/v1/qrels/iso-qrels", headers=auth("admin-b"))[0] == 404
    for path, body in (("/v1/evaluations", {"run": RUN, "qrels_id": "iso-qrels"}),
                       ("/v1/comparisons", {"runs": [{"run": RUN}, {"run": RUN}],
                                            "qrels_id": "iso-qrels"}),
                       ("/v1/pools", {"runs": [{"run": RUN}], "depth": 5,
                                      "qrels_id": "iso-qrels"})):
        status, _, problem = call(api, "POST", path, body, auth("write-b"))
        assert status == 422 and "qrels_id" in problem["errors"], (path, status, problem)
    # team-a still has it, unchanged (team-b's DELETE did not reach it)
    status, _, again = call(api, "GET", "/v1/qrels/iso-qrels", headers=auth("read-a"))
    assert status == 200 and again["versions"] == [a["version"]]
    status, _, listing = call(api, "GET", "/v1/qrels", headers=auth("read-a"))
    assert status == 200 and [q["id"] for q in listing["items"]] == ["iso-qrels"], listing


def test_redis_same_qrels_id_in_two_tenants_holds_two_qrels(api, worker):
    """Each tenant's "same-name" is its own, synchronously and on the worker."""
    status, _, a = put_qrels(api, "write-a", "same-name", QRELS)
    assert status == 201 and a["judgments"] == 3681
    status, _, b = put_qrels(api, "write-b", "same-name", QRELS_B)
    assert status == 201 and b["judgments"] == 1708 and b["versions"] == [b["version"]]
    status, _, again = call(api, "GET", "/v1/qrels/same-name", headers=auth("read-a"))
    assert again["judgments"] == 3681 and again["versions"] == [a["version"]]

    body = {"run": RUN, "qrels_id": "same-name", "measures": ["map", "num_q"]}
    expected = {}
    for key, text in (("write-a", QRELS), ("write-b", QRELS_B)):
        status, _, inline = call(api, "POST", "/v1/evaluations",
                                 {"run": RUN, "qrels": text.decode(),
                                  "measures": ["map", "num_q"]}, auth(key))
        assert status == 200, inline
        expected[key] = inline["aggregate"]
    assert expected["write-a"]["num_q"] == 3 and expected["write-b"]["num_q"] == 1
    for key in ("write-a", "write-b"):
        status, _, sync = call(api, "POST", "/v1/evaluations", body, auth(key))
        assert status == 200 and sync["aggregate"] == expected[key], (key, sync)
        done = wait_job(api, queued(api, key, "/v1/evaluations", body),
                        headers=auth(key))
        assert done["status"] == "finished", done
        assert done["result"]["aggregate"] == expected[key], key
    # team-b deletes its own; team-a's stays
    assert call(api, "DELETE", "/v1/qrels/same-name", headers=auth("admin-b"))[0] == 204
    assert call(api, "GET", "/v1/qrels/same-name", headers=auth("write-b"))[0] == 404
    assert call(api, "GET", "/v1/qrels/same-name", headers=auth("read-a"))[0] == 200


def test_redis_jobs_and_evaluation_ids_of_one_tenant_are_invisible_to_another(api, worker):
    location = queued(api, "write-a", "/v1/evaluations",
                      {"run": RUN, "qrels": QRELS.decode(), "measures": ["map"]})
    job_id = location.rsplit("/", 1)[1]
    done = wait_job(api, location, headers=auth("read-a"))
    assert done["status"] == "finished", done
    assert "tenant" not in done
    assert call(api, "GET", location, headers=auth("write-b"))[0] == 404
    assert call(api, "GET", location + "/report", headers=auth("write-b"))[0] == 404
    assert call(api, "DELETE", location, headers=auth("write-b"))[0] == 404
    # comparing by team-a's evaluation id: team-b is told there is no such evaluation
    compare = {"runs": [{"evaluation_id": job_id}, {"run": RUN}], "qrels": QRELS.decode(),
               "measures": ["map"]}
    status, _, problem = call(api, "POST", "/v1/comparisons", compare, auth("write-b"))
    assert status == 422 and "runs[0].evaluation_id" in problem["errors"], problem
    # queued, the worker checks the id: the job fails naming the field
    failed = wait_job(api, queued(api, "write-b", "/v1/comparisons", compare),
                      headers=auth("write-b"))
    assert failed["status"] == "failed", failed
    assert "runs[0].evaluation_id" in failed["problem"]["errors"], failed
    # team-a, the owner, compares by it synchronously and on the worker
    status, _, own = call(api, "POST", "/v1/comparisons", compare, auth("write-a"))
    assert status == 200, own
    queued_own = wait_job(api, queued(api, "write-a", "/v1/comparisons", compare),
                          headers=auth("write-a"))
    assert queued_own["status"] == "finished", queued_own
    assert queued_own["result"]["pairs"] == own["pairs"]
    # the job itself is still team-a's
    assert call(api, "GET", location, headers=auth("read-a"))[0] == 200
    report = urllib.request.Request(api + location + "/report", headers=auth("read-a"))
    with urllib.request.urlopen(report, timeout=60) as resp:  # HTML, not JSON
        assert resp.status == 200
