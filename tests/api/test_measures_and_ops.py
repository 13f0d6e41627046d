"""GET /v1/measures, /healthz, /readyz, /openapi.yaml, /docs."""

from __future__ import annotations

from pathlib import Path

import yaml
from openapi_spec_validator import validate

import cranfield

ROOT = Path(__file__).resolve().parents[2]


def test_openapi_document_is_valid_openapi_3_1(client):
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    assert spec["openapi"].startswith("3.1")
    validate(spec)
    resp = client.get("/openapi.yaml")
    assert resp.status_code == 200 and yaml.safe_load(resp.get_data()) == spec


def test_every_app_route_is_in_the_contract(app):
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    documented = {p.replace("{", "<").replace("}", ">") for p in spec["paths"]}
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or "<path:path>" in rule.rule:
            continue
        path = rule.rule.replace("<path:name>", "<name>")
        assert path in documented or path == "/docs", rule.rule


def test_measure_list_is_the_registry(client):
    doc = client.get("/v1/measures").get_json()
    names = [m["name"] for m in doc["measures"]]
    assert names == sorted(cranfield.REGISTRY, key=lambda n: cranfield.REGISTRY[n].order)
    bpref = next(m for m in doc["measures"] if m["name"] == "bpref")
    assert "Buckley" in bpref["reference"] and bpref["formula"]
    p = next(m for m in doc["measures"] if m["name"] == "P")
    assert p["parameters"][0]["default"] == [5, 10, 15, 20, 30, 100, 200, 500, 1000]
    assert "P" in p["aliases"]
    graded = client.get("/v1/measures?family=graded").get_json()["measures"]
    assert {m["family"] for m in graded} == {"graded"}


def test_resolve_measure_names(client):
    doc = client.get("/v1/measures/nDCG@10").get_json()
    assert doc["instances"] == [{"key": "nDCG@10", "measure": "ndcg_cut",
                                 "canonical": "ndcg_cut(k=10,discount=log2,"
                                              "profile=trec_eval-9.0.8)"}]
    doc = client.get("/v1/measures/P.5,10?profile=trec_eval-10").get_json()
    assert [i["key"] for i in doc["instances"]] == ["P_5", "P_10"]


def test_unknown_measure_is_404_with_suggestions(client):
    resp = client.get("/v1/measures/mapp")
    assert resp.status_code == 404 and resp.mimetype == "application/problem+json"
    assert "map" in resp.get_json()["suggestions"]


def test_health_and_readiness(client):
    from service.app import create_app

    assert client.get("/healthz").get_json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    down = type(client)(create_app({"REDIS_URL": "redis://127.0.0.1:1/0"}).test_client())
    resp = down.get("/readyz")  # nothing listens on port 1
    assert resp.status_code == 503 and resp.get_json()["status"] == "not ready"


def test_docs_are_served_offline(client):
    resp = client.get("/docs/")
    assert resp.status_code == 200 and b"swagger-ui" in resp.get_data()
    asset = client.get("/docs/swagger-ui-bundle.js", check=False)
    assert asset.status_code == 200 and len(asset.get_data()) > 100_000
    asset.close()


def test_the_root_redirects_to_the_docs(client):
    """``GET /``: 302 to the documentation, not a 404 problem (issue #26)."""
    resp = client.get("/")
    assert resp.status_code == 302 and resp.headers["Location"] == "/docs/"
    assert client.get(resp.headers["Location"]).status_code == 200


def test_the_contract_describes_the_service_serving_it(client):
    """``servers`` is relative: the document a service serves names that service, on any
    host and port (Swagger's "Try it out" goes to it), not one fixed address."""
    spec = yaml.safe_load(client.get("/openapi.yaml").get_data())
    assert [s["url"] for s in spec["servers"]] == ["/"]
