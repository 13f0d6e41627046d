"""Tenant isolation on every route issue #31 added (kept runs, system settings, re-scoring,
the qrels diff, stability, judges), through the contract-checking client, on SQLite and on
PostgreSQL.

Tenant A makes one of each object: stored qrels with two versions, judged qrels (qrels_jg
with its judges), results of two systems with their runs kept, a system's settings, a
re-score (run to its end) and so a stability document. Tenant B then asks every new route
about A's ids and names. Each answer must be indistinguishable from B's answer about an id
or name that never existed: the same status (404 problem+json for the default Accept) and
the same body once A's names in the request are replaced by the never-existing ones, and
none of A's ids, digests, versions or labels that B did not send appears in it. Nothing B
asks changes A's objects. Then B builds the same world under the same names (the same qrels
id and contents, so the same ``id@version`` references, and the same runs, so the same kept
run digests): B's listings, re-score and stability document hold B's systems and results
only, and A's still hold A's.

``ROUTES`` is the table of those routes; it must equal the routes openapi.yaml has beyond
those it had before issue #31 (``BEFORE_31``): a route added to the contract without a row
here fails :func:`test_every_new_route_has_a_row`.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml
from conftest import ContractClient, finished_rescore

from service.app import create_app
from service.auth import key_line

RESULTS_ON_POSTGRES = True
ROOT = Path(__file__).resolve().parents[2]

# The contract's routes before issue #31 (openapi.yaml at a80de8b).
BEFORE_31 = {
    ("DELETE", "/v1/jobs/{job_id}"), ("DELETE", "/v1/qrels/{qrels_id}"),
    ("DELETE", "/v1/results/{result_id}"), ("DELETE", "/v1/topic-metadata/{metadata_id}"),
    ("GET", "/"), ("GET", "/docs/"), ("GET", "/healthz"), ("GET", "/metrics"),
    ("GET", "/openapi.yaml"), ("GET", "/readyz"), ("GET", "/v1/jobs/{job_id}"),
    ("GET", "/v1/jobs/{job_id}/report"), ("GET", "/v1/measures"),
    ("GET", "/v1/measures/{name}"), ("GET", "/v1/qrels"), ("GET", "/v1/qrels/{qrels_id}"),
    ("GET", "/v1/results/{result_id}"), ("GET", "/v1/results/{result_id}/comparison"),
    ("GET", "/v1/systems"), ("GET", "/v1/systems/{name}/baseline"),
    ("GET", "/v1/systems/{name}/results"), ("GET", "/v1/systems/{name}/trend"),
    ("GET", "/v1/topic-metadata"), ("GET", "/v1/topic-metadata/{metadata_id}"),
    ("POST", "/v1/comparisons"), ("POST", "/v1/evaluations"),
    ("POST", "/v1/evaluations/batch"), ("POST", "/v1/pools"),
    ("PUT", "/v1/qrels/{qrels_id}"), ("PUT", "/v1/systems/{name}/baseline"),
    ("PUT", "/v1/topic-metadata/{metadata_id}"),
}

# What B asks each new route: (path, JSON body or None, Accept types, the status for the
# first of them), made from a set of names: A's (``build``'s) or names that never existed
# (``NEVER``). ``{own}`` is B's own system, ``{own_qrels}`` B's own qrels and ``{own_target}``
# an id of B's (made before B asks anything, or free).
GET_TYPES = ("application/json", "text/plain", "text/html")
ROUTES = {
    ("GET", "/v1/results/{result_id}/run"): [
        ("/v1/results/{result}/run", None, ("text/plain", "application/vnd.apache.parquet"),
         404),
        ("/v1/results/{rescored}/run", None, ("text/plain",), 404),
    ],
    ("GET", "/v1/systems/{name}/settings"): [
        ("/v1/systems/{system}/settings", None, ("application/json",), 404),
    ],
    ("PUT", "/v1/systems/{name}/settings"): "own",  # B's PUT makes B's own system: below
    ("POST", "/v1/systems/{name}/rescore"): [
        ("/v1/systems/{system}/rescore", {"qrels_id": "{qrels}@{v2}"}, ("application/json",),
         404),
        # B's own system under A's qrels: A's qrels are not B's (422 naming qrels_id)
        ("/v1/systems/{own}/rescore", {"qrels_id": "{qrels}@{v2}"}, ("application/json",), 422),
    ],
    ("POST", "/v1/rescores"): [
        ("/v1/rescores", {"systems": ["{system}"], "qrels_id": "{own_qrels}"},
         ("application/json",), 404),
        ("/v1/rescores", {"systems": ["{own}", "{system}"], "qrels_id": "{own_qrels}"},
         ("application/json",), 404),
        ("/v1/rescores", {"systems": ["{own}"], "qrels_id": "{qrels}@{v2}"},
         ("application/json",), 422),
    ],
    ("GET", "/v1/rescores/{rescore_id}"): [
        ("/v1/rescores/{rescore}", None, ("application/json",), 404),
    ],
    ("GET", "/v1/qrels/{qrels_id}/diff"): [
        ("/v1/qrels/{qrels}/diff", None, ("application/json", "text/plain"), 404),
        ("/v1/qrels/{qrels}/diff?from={v1}&to={v2}", None, ("application/json", "text/plain"),
         404),
    ],
    ("GET", "/v1/stability"): [
        ("/v1/stability?measure=map&from={qrels}@{v1}&to={qrels}@{v2}&resamples=20", None,
         GET_TYPES, 404),
    ],
    ("GET", "/v1/qrels/{qrels_id}/agreement"): [
        ("/v1/qrels/{judged}/agreement?resamples=20", None, ("application/json", "text/plain"),
         404),
        ("/v1/qrels/{judged}@{judged_v}/agreement?resamples=20", None, ("application/json",),
         404),
    ],
    ("POST", "/v1/qrels/{qrels_id}/consensus"): [
        ("/v1/qrels/{judged}/consensus", {"method": "majority"}, ("application/json",), 404),
        ("/v1/qrels/{judged}@{judged_v}/consensus", {"method": "judge", "judge": "alice",
                                                     "target": "{own_target}"},
         ("application/json",), 404),
    ],
}

NEVER = {"result": "f" * 32, "rescored": "e" * 32, "system": "zz-never-system",
         "rescore": "d" * 32, "qrels": "zz-never-qrels", "v1": "0123456789abcdef",
         "v2": "fedcba9876543210", "judged": "zz-never-judged", "judged_v": "0" * 16}

KEYS = {"write-a": ("write", "team-a"), "write-b": ("write", "team-b")}
A, B = {"Authorization": "Bearer write-a"}, {"Authorization": "Bearer write-b"}

V1 = {"q1": {"d1": 1, "d3": 0}, "q2": {"d5": 1}, "q3": {"d7": 1, "d8": 0}}
V2 = {"q1": {"d1": 1, "d2": 1, "d3": 0}, "q2": {"d5": 1, "d4": 1}, "q3": {"d7": 0, "d8": 1}}
RUNS = {  # system -> nights
    "bm25": [{"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0},
              "q3": {"d7": 2.0, "d8": 1.0}},
             {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d5": 2.0, "d4": 1.0},
              "q3": {"d8": 2.0, "d7": 1.0}}],
    "dense": [{"q1": {"d2": 3.0, "d3": 2.0, "d1": 1.0}, "q2": {"d6": 2.0, "d5": 1.0},
               "q3": {"d7": 3.0, "d9": 1.0}}],
}
JUDGED = ("301 alice d1 2\n301 bob d1 1\n301 llm d1 2\n301 alice d2 0\n301 bob d2 0\n"
          "301 llm d2 1\n302 alice d3 1\n302 llm d3 1\n302 bob d4 0\n302 llm d4 2\n")
JUDGES = {"llm": {"kind": "model", "model": "umbrela-gpt-4o", "prompt_digest": "sha256:ab12"}}


def contract_routes() -> set[tuple[str, str]]:
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    return {(method.upper(), path) for path, ops in spec["paths"].items() for method in ops
            if method in ("get", "put", "post", "delete", "patch")}


def test_every_new_route_has_a_row():
    new = contract_routes() - BEFORE_31
    assert set(ROUTES) == new, (f"routes without a row: {sorted(new - set(ROUTES))}; rows of "
                                f"no new route: {sorted(set(ROUTES) - new)}")
    assert BEFORE_31 <= contract_routes()  # none taken away unnoticed


# --------------------------------------------------------------------------------------------
# Each tenant's world, made through the API
# --------------------------------------------------------------------------------------------

@pytest.fixture
def client():
    lines = ";".join(key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items())
    return ContractClient(create_app({"TESTING": True, "API_KEYS": lines}).test_client())


def ok(resp, *statuses: int) -> dict:
    assert resp.status_code in (statuses or (200,)), (resp.status_code, resp.get_data()[:500])
    return resp.get_json()


def finished(client, rescore_id: str, headers: dict) -> dict:
    """The re-score once no item is queued (the embedded queue runs it on a thread)."""
    doc = finished_rescore(client, rescore_id, headers=headers)
    assert doc["state"] == "finished", doc
    return doc


def build(client, headers: dict, label: str) -> dict:
    """One tenant's objects under the same names whoever builds them: qrels ``adhoc`` v1 and
    v2, judged qrels ``judged``, systems bm25 (2 nights) and dense (1 night) recorded under
    v1 with their runs kept, bm25's settings, a re-score of both under v2 (finished). The
    names, ids and values the world holds, and the secrets B must never be shown."""
    v1 = ok(client.put("/v1/qrels/adhoc", json={"qrels": V1}, headers=headers), 201)["version"]
    judged = ok(client.put("/v1/qrels/judged", headers=headers, json={
        "qrels": JUDGED, "qrels_format": "qrels_jg", "judges": JUDGES}), 201)
    results, kept = {}, set()
    for system, nights in RUNS.items():
        for night, run in enumerate(nights):
            doc = ok(client.post("/v1/evaluations", headers=headers, json={
                "run": run, "qrels_id": f"adhoc@{v1}", "measures": ["map", "P.2"],
                "record": {"system": system, "label": f"{label}-{system}-{night}",
                           "commit": f"{label}-commit-{night}", "keep_run": True}}))
            results.setdefault(system, []).append(doc["recorded"]["id"])
            kept.add(doc["recorded"]["run_sha256"])
    settings = ok(client.put("/v1/systems/bm25/settings", json={"keep_runs": True},
                             headers=headers))
    assert settings == {"system": "bm25", "keep_runs": True}
    v2 = ok(client.put("/v1/qrels/adhoc", json={"qrels": V2}, headers=headers), 201)["version"]
    started = ok(client.post("/v1/rescores", json={"systems": ["bm25", "dense"],
                                                   "qrels_id": f"adhoc@{v2}"},
                             headers=headers), 202)
    done = finished(client, started["id"], headers)
    assert (done["done"], done["failed"], done["skipped"]) == (3, 0, 0), done
    rescored = done["new_result_ids"]
    names = {"result": results["bm25"][0], "rescored": rescored[0], "system": "bm25",
             "rescore": started["id"], "qrels": "adhoc", "v1": v1, "v2": v2,
             "judged": "judged", "judged_v": judged["version"]}
    secrets = {*(i for ids in results.values() for i in ids), *rescored, *kept, started["id"],
               v1, v2, judged["version"], judged["sha256"], "umbrela-gpt-4o",
               *(f"{label}-{s}-{n}" for s, nights in RUNS.items() for n in range(len(nights))),
               # (no secret is short hex: one would turn up inside a random id by chance)
               f"{label}-commit-0", f"{label}-commit-1"}
    return {"names": names, "secrets": secrets, "results": results, "rescored": rescored,
            "kept": kept, "rescore": started["id"]}


def fill(template, names: dict):
    """``template`` (a path, or a JSON body of strings and lists) with ``names`` put in."""
    if template is None:
        return None
    if isinstance(template, str):
        return template.format(**names)
    if isinstance(template, list):
        return [fill(t, names) for t in template]
    return {k: fill(v, names) for k, v in template.items()}


def ask(client, method: str, path: str, body, accept: str):
    return client.open(path, method=method, json=body, headers={**B, "Accept": accept})


def a_state(client, rescore_id: str) -> dict:
    """What A sees of its objects: unchanged by anything B asks."""
    return {
        "qrels": ok(client.get("/v1/qrels", headers=A))["items"],
        "systems": ok(client.get("/v1/systems", headers=A))["items"],
        "settings": ok(client.get("/v1/systems/bm25/settings", headers=A)),
        "rescore": ok(client.get(f"/v1/rescores/{rescore_id}", headers=A)),
        "results": {s: ok(client.get(f"/v1/systems/{s}/results", headers=A))["items"]
                    for s in RUNS},
    }


# --------------------------------------------------------------------------------------------
# B asks about A's objects
# --------------------------------------------------------------------------------------------

def test_another_tenants_objects_are_404s_on_every_new_route(client):
    a = build(client, A, "a")
    # B's own system and qrels (other names), so that a request naming one of A's objects
    # beside one of B's is asked too
    ok(client.put("/v1/qrels/b-own-qrels", json={"qrels": V1}, headers=B), 201)
    b_run = ok(client.post("/v1/evaluations", headers=B, json={
        "run": RUNS["bm25"][0], "qrels_id": "b-own-qrels", "measures": ["map"],
        "record": {"system": "b-own", "label": "b", "keep_run": True}}))
    own = {"own": "b-own", "own_qrels": "b-own-qrels", "own_target": "b-own-target"}
    before = a_state(client, a["rescore"])
    asked = 0
    for (method, _route), probes in ROUTES.items():
        if probes == "own":
            continue
        for path, body, accepts, status in probes:
            names_a, names_never = {**a["names"], **own}, {**NEVER, **own}
            path_a, body_a = fill(path, names_a), fill(body, names_a)
            path_n, body_n = fill(path, names_never), fill(body, names_never)
            sent = path_a + orjson.dumps(body_a).decode()
            for accept in accepts:
                got, never = (ask(client, method, path_a, body_a, accept),
                              ask(client, method, path_n, body_n, accept))
                where = f"{method} {path_a} (Accept {accept})"
                assert got.status_code == never.status_code, (where, got.get_data()[:300])
                assert got.mimetype == "application/problem+json", where
                if accept == accepts[0]:
                    assert got.status_code == status, (where, got.get_json())
                text = got.get_data(as_text=True)
                # A's names in the request for the never-existing ones: the same answer
                for key in sorted(a["names"], key=lambda k: -len(a["names"][k])):
                    text = text.replace(a["names"][key], NEVER[key])
                assert orjson.loads(text) == never.get_json(), where
                for secret in a["secrets"]:
                    if secret not in sent:
                        assert secret not in got.get_data(as_text=True), (where, secret)
                asked += 1
    assert asked >= 20
    # B's 404s and 422s made and changed nothing of A's
    assert a_state(client, a["rescore"]) == before
    # B's PUT of a system's settings under A's name makes B's own system of that name
    # (the contract's PUT makes the system if need be): A's stays as it was
    own_settings = ok(client.put("/v1/systems/bm25/settings", json={"keep_runs": False},
                                 headers=B))
    assert own_settings == {"system": "bm25", "keep_runs": False}
    assert ok(client.get("/v1/systems/bm25/settings", headers=B))["keep_runs"] is False
    assert ok(client.get("/v1/systems/bm25/settings", headers=A))["keep_runs"] is True
    # B's bm25 has no results (a system that only has settings lists none, or is not found
    # by the results routes): none of A's either way
    listed = client.get("/v1/systems/bm25/results", headers=B)
    assert listed.status_code == 404 or listed.get_json()["items"] == []
    assert not any(s in listed.get_data(as_text=True) for s in a["secrets"])
    assert b_run["recorded"]["run_sha256"] in a["kept"]  # the same run, kept for each
    after = a_state(client, a["rescore"])
    assert after == before


# --------------------------------------------------------------------------------------------
# B builds the same world under the same names
# --------------------------------------------------------------------------------------------

def test_the_same_names_in_two_tenants_are_two_worlds(client):
    a = build(client, A, "a")
    before = a_state(client, a["rescore"])
    b = build(client, B, "b")
    # the same contents under the same ids: the same references and kept run digests
    assert (b["names"]["v1"], b["names"]["v2"], b["kept"]) == \
        (a["names"]["v1"], a["names"]["v2"], a["kept"])
    # B's re-score covered B's 3 results only (build checked 3 done), new ids B's own
    assert not set(b["rescored"]) & set(a["rescored"])
    assert a_state(client, a["rescore"]) == before
    for mine, theirs, headers in ((b, a, B), (a, b, A)):
        listed = ok(client.get("/v1/systems", headers=headers))["items"]
        assert sorted(s["name"] for s in listed) == ["bm25", "dense"]
        for system in RUNS:
            ids = {r["id"] for r in ok(client.get(f"/v1/systems/{system}/results",
                                                  headers=headers))["items"]}
            assert set(mine["results"][system]) <= ids <= set(mine["rescored"]) | {
                i for s in mine["results"].values() for i in s}
        qrels = ok(client.get("/v1/qrels", headers=headers))["items"]
        assert sorted(q["id"] for q in qrels) == ["adhoc", "judged"]
        v1, v2 = mine["names"]["v1"], mine["names"]["v2"]
        stability = ok(client.get(f"/v1/stability?measure=map&from=adhoc@{v1}&to=adhoc@{v2}"
                                  "&resamples=20", headers=headers))
        assert sorted(s["name"] for s in stability["systems"]) == ["bm25", "dense"]
        assert stability["n_systems"] == 2
        originals = {i for ids in mine["results"].values() for i in ids}
        for system in stability["systems"]:  # each side one of this tenant's own results
            assert system["from"]["result_id"] in originals
            assert system["to"]["result_id"] in set(mine["rescored"])
        text = orjson.dumps(stability).decode()
        for secret in theirs["secrets"] - mine["secrets"]:
            assert secret not in text, secret
        # the trend's series per qrels version (issue #31) hold this tenant's results only
        trend = ok(client.get("/v1/systems/bm25/trend?measure=map", headers=headers))
        in_series = {p["id"] for series in trend["series"] for p in series["points"]}
        assert set(mine["results"]["bm25"]) <= in_series <= originals | set(mine["rescored"])
        assert len(in_series) == 4  # bm25's 2 nights and their 2 re-scores
        rescore = ok(client.get(f"/v1/rescores/{mine['rescore']}", headers=headers))
        assert {i["result_id"] for i in rescore["items"]} == {
            i for ids in mine["results"].values() for i in ids}
        for result_id in mine["results"]["bm25"] + mine["rescored"]:
            run = client.get(f"/v1/results/{result_id}/run", headers=headers)
            assert run.status_code == 200 and run.headers["Cranfield-Run-Sha256"] in mine["kept"]
        for result_id in theirs["results"]["bm25"] + theirs["rescored"]:
            assert client.get(f"/v1/results/{result_id}/run",
                              headers=headers).status_code == 404
        diff = ok(client.get("/v1/qrels/adhoc/diff", headers=headers))
        assert orjson.dumps(diff).decode().count(v2) >= 1
    # B deletes its results: its kept runs go, A's (the same digests) stay
    for result_id in b["rescored"] + [i for ids in b["results"].values() for i in ids]:
        assert client.delete(f"/v1/results/{result_id}", headers=B).status_code == 204
    for result_id in a["results"]["bm25"]:
        assert client.get(f"/v1/results/{result_id}/run", headers=A).status_code == 200
    assert a_state(client, a["rescore"]) == before
