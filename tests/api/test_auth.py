"""API keys, roles, tenant isolation on every /v1 route, rate limits and configuration errors
(the contract client checks every response, 401/403/429 included, against openapi.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ContractClient, finished_job

from service.app import ConfigError, create_app
from service.auth import KeyRing, key_line

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS = (DATA / "qrels.test").read_text()
RUN = (DATA / "results.test").read_text()

KEYS = {  # key -> (role, tenant)
    "read-a": ("read", "team-a"), "write-a": ("write", "team-a"), "admin-a": ("admin", "team-a"),
    "write-b": ("write", "team-b"), "admin-b": ("admin", "team-b"),
}
LINES = "\n".join(["# hashed keys, as CRANFIELD_API_KEYS_FILE holds them"]
                  + [key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items()])


def auth(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def keyed(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text(LINES)
    app = create_app({"TESTING": True, "API_KEYS_FILE": str(path)})
    return ContractClient(app.test_client())


def test_every_v1_route_needs_a_valid_key(keyed):
    for method, path in (("GET", "/v1/measures"), ("GET", "/v1/qrels"),
                         ("POST", "/v1/evaluations"), ("GET", "/v1/jobs/" + "0" * 32)):
        resp = keyed.open(path, method=method, json={} if method == "POST" else None)
        assert resp.status_code == 401 and resp.mimetype == "application/problem+json"
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
        wrong = keyed.open(path, method=method, headers=auth("not-a-key"))
        assert wrong.status_code == 401
        basic = keyed.open(path, method=method, headers={"Authorization": "Basic d3JpdGUtYQ=="})
        assert basic.status_code == 401
    # health, the contract and its docs stay open
    assert keyed.get("/healthz").status_code == 200
    assert keyed.get("/openapi.yaml").status_code == 200
    assert keyed.get("/v1/measures", headers=auth("read-a")).status_code == 200


def test_roles(keyed):
    body = {"run": RUN, "qrels": QRELS, "measures": ["map"]}
    assert keyed.post("/v1/evaluations", json=body, headers=auth("read-a")).status_code == 403
    ok = keyed.post("/v1/evaluations", json=body, headers=auth("write-a"))
    assert ok.status_code == 200 and round(ok.get_json()["aggregate"]["map"], 4) == 0.1785
    put = {"data": QRELS, "content_type": "text/plain"}
    assert keyed.put("/v1/qrels/adhoc", headers=auth("read-a"), **put).status_code == 403
    assert keyed.put("/v1/qrels/adhoc", headers=auth("write-a"), **put).status_code == 201
    assert keyed.get("/v1/qrels/adhoc", headers=auth("read-a")).status_code == 200
    assert keyed.delete("/v1/qrels/adhoc", headers=auth("write-a")).status_code == 403
    assert keyed.delete("/v1/qrels/adhoc", headers=auth("admin-a")).status_code == 204


def test_tenants_cannot_see_each_others_qrels(keyed):
    put = {"data": QRELS, "content_type": "text/plain"}
    a = keyed.put("/v1/qrels/shared-name", headers=auth("write-a"), **put).get_json()
    # b reads, lists, deletes and uses "shared-name": as if it did not exist
    assert keyed.get("/v1/qrels/shared-name", headers=auth("write-b")).status_code == 404
    assert keyed.get(f"/v1/qrels/shared-name@{a['version']}",
                     headers=auth("write-b")).status_code == 404
    assert keyed.get("/v1/qrels", headers=auth("write-b")).get_json()["total"] == 0
    assert keyed.delete("/v1/qrels/shared-name", headers=auth("admin-b")).status_code == 404
    for path, body in (("/v1/evaluations", {"run": RUN, "qrels_id": "shared-name"}),
                       ("/v1/comparisons", {"runs": [{"run": RUN}, {"run": RUN}],
                                            "qrels_id": "shared-name"}),
                       ("/v1/pools", {"runs": [{"run": RUN}], "depth": 5,
                                      "qrels_id": "shared-name"})):
        resp = keyed.post(path, json=body, headers=auth("write-b"))
        assert resp.status_code == 422 and "qrels_id" in resp.get_json()["errors"], path
    # b's own "shared-name" is b's: a's stays as it was
    b = keyed.put("/v1/qrels/shared-name", headers=auth("write-b"),
                  json={"qrels": {"301": {"d": 1}}}).get_json()
    assert b["judgments"] == 1 and b["versions"] == [b["version"]]
    again = keyed.get("/v1/qrels/shared-name", headers=auth("read-a")).get_json()
    assert again["judgments"] == 3681 and again["versions"] == [a["version"]]
    assert keyed.get("/v1/qrels", headers=auth("read-a")).get_json()["total"] == 1


def test_tenants_cannot_see_each_others_jobs(keyed):
    resp = keyed.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS, "measures": ["map"]},
                      headers={"Prefer": "respond-async", **auth("write-a")})
    assert resp.status_code == 202
    location = resp.headers["Location"]
    job_id = location.rsplit("/", 1)[1]
    assert "tenant" not in resp.get_json()
    assert finished_job(keyed, location, headers=auth("read-a"))["status"] == "finished"
    assert keyed.get(location, headers=auth("write-b")).status_code == 404
    assert keyed.get(location + "/report", headers=auth("write-b")).status_code == 404
    assert keyed.delete(location, headers=auth("write-b")).status_code == 404
    compare = {"runs": [{"evaluation_id": job_id}, {"run": RUN}], "qrels": QRELS,
               "measures": ["map"]}
    resp = keyed.post("/v1/comparisons", json=compare, headers=auth("write-b"))
    assert resp.status_code == 422 and "runs[0].evaluation_id" in resp.get_json()["errors"]
    assert keyed.post("/v1/comparisons", json=compare,
                      headers=auth("write-a")).status_code == 200
    assert keyed.get(location + "/report", headers=auth("read-a")).status_code == 200


def test_rate_limit_per_key(tmp_path):
    app = create_app({"TESTING": True, "API_KEYS": LINES.replace("\n", ";"),
                      "RATE_LIMIT": "3/60"})
    client = ContractClient(app.test_client())
    for _ in range(3):
        assert client.get("/v1/measures", headers=auth("read-a")).status_code == 200
    limited = client.get("/v1/measures", headers=auth("read-a"))
    assert limited.status_code == 429 and limited.mimetype == "application/problem+json"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    # another key has its own budget
    assert client.get("/v1/measures", headers=auth("write-a")).status_code == 200


@pytest.mark.parametrize("settings, message", [
    ({"API_KEYS": "secret-key-in-clear write team-a"}, "SHA-256"),
    ({"API_KEYS": f"{'a' * 64} superuser team-a"}, "role"),
    ({"API_KEYS": f"{'a' * 64} read team/a"}, "tenant"),
    ({"API_KEYS": f"{'a' * 64} read"}, "fields"),
    ({"API_KEYS": f"{'a' * 64} read t;{'a' * 64} write u"}, "twice"),
    ({"API_KEYS": "# only a comment"}, "no keys"),
    ({"API_KEYS_FILE": "/nonexistent/keys.txt"}, "cannot read"),
    ({"API_KEYS_FILE": "/x", "API_KEYS": f"{'a' * 64} read t"}, "not both"),
    ({"RATE_LIMIT": "fast"}, "RATE_LIMIT"),
    ({"MAX_QUEUED_JOBS": "many"}, "MAX_QUEUED_JOBS"),
])
def test_invalid_configuration_stops_start_up(settings, message):
    with pytest.raises(ConfigError, match=message):
        create_app({"TESTING": True, **settings})


def test_keys_are_compared_as_hashes():
    ring = KeyRing.parse(key_line("k1", "read", "t1") + "\n" + key_line("k2", "admin", "t2"),
                         "test")
    assert ring.authenticate("k2").role == "admin" and ring.authenticate("k2").tenant == "t2"
    assert ring.authenticate("k3") is None and ring.authenticate("") is None
    assert "k1" not in repr(ring.__dict__)  # only hashes are kept


def test_cli_makes_a_key_whose_line_authenticates(capsys):
    from cranfield.cli import main

    assert main(["keys", "new", "--role", "write", "--tenant", "search", "--name", "ci"]) == 0
    out = capsys.readouterr().out.splitlines()
    key = out[0].split()[-1]
    line = out[1].split(":", 1)[1].strip()
    assert key not in line
    principal = KeyRing.parse(line, "cli").authenticate(key)
    assert (principal.role, principal.tenant, principal.name) == ("write", "search", "ci")
