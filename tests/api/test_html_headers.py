"""Every HTML answer carries its Content-Security-Policy and X-Content-Type-Options as HTTP
headers (issue #27, "Pages"), whichever route gives it: a table of every operation whose
contract (openapi.yaml) has a text/html answer, checked to be the whole list, plus the HTML
the contract does not list (a job's progress page, the redirect of ``/``). Each policy is
held to what its page needs: the report pages' own <meta> policy (no script at all), and
Swagger UI's (its scripts from /docs/, its one inline script by its hash)."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, finished_job

from cranfield.reports.html_page import CSP as META_CSP
from service.negotiation import PAGE_POLICY

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}}
OTHER = {"q1": {"d2": 3.0, "d1": 2.0, "d3": 1.0}, "q2": {"d5": 2.0, "d4": 1.0}}
QRELS = {"q1": {"d1": 1, "d3": 1}, "q2": {"d5": 2}}
HTML = {"Accept": "text/html"}


def _evaluation(record: str | None = None) -> dict:
    body = {"run": RUN, "qrels": QRELS, "measures": ["map", "P.2"]}
    if record:
        body["record"] = {"system": "bm25", "label": record}
    return body


def _comparison() -> dict:
    return {"runs": [{"name": "a", "run": RUN}, {"name": "b", "run": OTHER}], "qrels": QRELS,
            "measures": ["map"]}


def _job(client, path: str, body: dict) -> str:
    resp = client.post(path, json=body, headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    location = resp.headers["Location"]
    assert finished_job(client, location)["status"] == "finished"
    return location


def _recorded(client, label: str) -> str:
    resp = client.post("/v1/evaluations", json=_evaluation(label))
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()["recorded"]["id"]


def _stability(client):
    """GET /v1/stability's page: two systems recorded under two versions of stored qrels."""
    versions = [client.put("/v1/qrels/pages", json={"qrels": qrels}).get_json()["version"]
                for qrels in (QRELS, {**QRELS, "q2": {"d4": 1, "d5": 2}})]
    for system, run in (("a", RUN), ("b", OTHER)):
        for version in versions:
            resp = client.post("/v1/evaluations", json={
                "run": run, "qrels_id": f"pages@{version}", "measures": ["map"],
                "record": {"system": system, "label": version}})
            assert resp.status_code == 200, resp.get_json()
    return client.get(f"/v1/stability?measure=map&from=pages@{versions[0]}"
                      f"&to=pages@{versions[1]}", headers=HTML)


#: (method, path as openapi.yaml spells it) -> a request through the contract client that
#: answers that operation with HTML
ROUTES = {
    ("post", "/v1/evaluations"):
        lambda c: c.post("/v1/evaluations", json=_evaluation(), headers=HTML),
    ("post", "/v1/comparisons"):
        lambda c: c.post("/v1/comparisons", json=_comparison(), headers=HTML),
    ("get", "/v1/jobs/{job_id}"):
        lambda c: c.get(_job(c, "/v1/evaluations", _evaluation()), headers=HTML),
    ("get", "/v1/jobs/{job_id}/report"):
        lambda c: c.get(_job(c, "/v1/comparisons", _comparison()) + "/report"),
    ("get", "/docs/"):
        lambda c: c.get("/docs/"),
    ("get", "/v1/systems/{name}/trend"):
        lambda c: (_recorded(c, "n1"), _recorded(c, "n2"),
                   c.get("/v1/systems/bm25/trend?measure=map", headers=HTML))[-1],
    ("get", "/v1/results/{result_id}/comparison"):
        lambda c: (ids := (_recorded(c, "n1"), _recorded(c, "n2")),
                   c.get(f"/v1/results/{ids[1]}/comparison?with={ids[0]}", headers=HTML))[-1],
    ("get", "/v1/stability"): _stability,
}


def html_operations() -> set[tuple[str, str]]:
    """Every (method, path) of the contract with a text/html answer."""
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    found = set()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if not isinstance(operation, dict):
                continue
            for answer in operation.get("responses", {}).values():
                if "text/html" in (answer.get("content") or {}):
                    found.add((method, path))
    return found


def test_the_table_is_every_html_operation_of_the_contract():
    assert set(ROUTES) == html_operations()


def directives(policy: str) -> dict[str, list[str]]:
    return {name: values for name, *values in
            (part.split() for part in policy.split(";") if part.strip())}


def script_hashes(page: bytes) -> set[str]:
    return {"'sha256-" + base64.b64encode(hashlib.sha256(s).digest()).decode() + "'"
            for s in re.findall(rb"<script>(.*?)</script>", page, re.S)}


def check_page_headers(resp) -> dict[str, list[str]]:
    assert resp.mimetype == "text/html"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    policy = directives(resp.headers["Content-Security-Policy"])
    # never framed, no <base>, no form posts: on every page
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"] and policy["form-action"] == ["'none'"]
    assert policy["default-src"] == ["'none'"]
    return policy


@pytest.mark.parametrize("operation", sorted(ROUTES), ids=" ".join)
def test_every_html_answer_has_both_headers(client, operation):
    resp = ROUTES[operation](client)
    assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
    policy = check_page_headers(resp)
    page = resp.get_data()
    if operation[1] == "/docs/":
        # Swagger UI: its files from /docs/ (same origin), its inline configuration by the
        # hash of exactly the script this answer holds; the contract and "Try it out" fetch
        # from this origin
        hashes = script_hashes(page)
        assert len(hashes) == 1
        assert policy["script-src"] == ["'self'", *hashes]
        assert policy["connect-src"] == ["'self'"]
        assert policy["style-src"] == ["'self'", "'unsafe-inline'"]
        assert b'src="/docs/swagger-ui-bundle.js"' in page
        return
    # the report pages: the header is their own <meta> policy (plus what a <meta> cannot
    # say), and they have no script for it to allow
    assert resp.headers["Content-Security-Policy"] == PAGE_POLICY
    assert PAGE_POLICY.startswith(META_CSP + ";")
    assert "script-src" not in policy and b"<script" not in page.lower()
    meta = re.search(rb'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert meta is not None and meta.group(1).decode() == META_CSP


def test_a_job_still_queued_is_a_page_with_the_headers(app):
    """The progress page (it reloads itself; no <meta> policy of its own): the header holds
    for it. Rendered for a queued job through the app's own after-request hooks."""
    from service.jobs import _page

    with app.test_request_context("/v1/jobs/j1", headers=HTML):
        resp = app.process_response(_page({"id": "j1", "status": "queued"}))
    check_page_headers(resp)
    assert resp.headers["Content-Security-Policy"] == PAGE_POLICY
    assert b"Job j1: queued" in resp.get_data()


def test_the_redirect_of_the_root_is_html_with_the_headers(client):
    resp = client.get("/")
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/docs/")
    check_page_headers(resp)


@pytest.mark.parametrize("path", ["/healthz", "/v1/measures", "/openapi.yaml",
                                  "/docs/swagger-ui-bundle.js", "/v1/jobs/nope"])
def test_every_other_answer_says_nosniff(client, path):
    resp = client.get(path, check=path != "/docs/swagger-ui-bundle.js")
    resp.close()  # a file sent as it is read: closed here, not left to the collector
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert "Content-Security-Policy" not in resp.headers  # not a page
    if path.endswith(".js"):  # nosniff: a script is run only with a script's type
        assert resp.mimetype == "text/javascript"
