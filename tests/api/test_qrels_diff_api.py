"""GET /v1/qrels/{id}/diff (issue #31) through the contract-checking client: the diff's
values, its defaults, pages, the pool depth each version covers (PUT's pool_depth), the
404s naming what is unknown, tenant isolation, judgment groups and refused kinds; and
``cranfield qrels diff ID --server`` printing the route's text/plain byte for byte."""

from __future__ import annotations

import contextlib
import io

import pytest
from conftest import ContractClient

from service.app import create_app
from service.auth import key_line

V1 = "301 0 a 1\n301 0 b 0\n301 0 c 2\n302 0 x 1\n"
V2 = "301 0 a 1\n301 0 b 1\n301 0 d 0\n303 0 y 2\n303 0 z 0\n"
TEXT = "text/plain"


def put(client, qrels_id: str, text: str, **query) -> dict:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    resp = client.put(f"/v1/qrels/{qrels_id}" + (f"?{params}" if params else ""), data=text,
                      content_type=TEXT)
    assert resp.status_code in (200, 201), resp.get_json()
    return resp.get_json()


@pytest.fixture
def two(client):
    resp = client.put("/v1/qrels/q", json={"qrels": V1, "pool_depth": 20})
    assert resp.status_code == 201, resp.get_json()
    v1 = resp.get_json()["version"]
    v2 = put(client, "q", V2)["version"]
    return v1, v2


def test_diff_values_and_defaults(client, two):
    v1, v2 = two
    doc = client.get("/v1/qrels/q/diff").get_json()
    assert (doc["from"]["version"], doc["to"]["version"]) == (v1, v2)
    assert doc["from"]["ref"] == f"q@{v1}" and doc["kind"] == "qrels"
    assert (doc["from"]["pool_depth"], doc["from"]["pool_depth_note"]) == (20, None)
    assert doc["to"]["pool_depth"] is None
    assert doc["to"]["pool_depth_note"] == "not recorded: the version was stored without " \
        "pool_depth"
    assert doc["totals"] == {"added": 3, "removed": 2, "regraded": 1, "unchanged": 1,
                             "judgments_from": 4, "judgments_to": 5, "topics_from": 2,
                             "topics_to": 2, "topics_added": 1, "topics_removed": 1,
                             "topics_changed": 1, "topics_unchanged": 0}
    assert (doc["topics_added"], doc["topics_removed"]) == (["303"], ["302"])
    assert doc["topics"][0] == {
        "topic": "301", "status": "changed",
        "counts": {"added": 1, "removed": 1, "regraded": 1, "unchanged": 1},
        "added": [{"docid": "d", "grade": 0}], "removed": [{"docid": "c", "grade": 2}],
        "regraded": [{"docid": "b", "from": 0, "to": 1}]}
    assert [(t["topic"], t["status"]) for t in doc["topics"]] == [
        ("301", "changed"), ("302", "removed"), ("303", "added")]
    assert (doc["offset"], doc["total"], doc["next"]) == (0, 3, None)
    # the other way round: added and removed swap, the regrade turns back
    back = client.get(f"/v1/qrels/q/diff?from={v2}&to={v1}").get_json()
    assert (back["totals"]["added"], back["totals"]["removed"]) == (2, 3)
    assert back["topics"][0]["regraded"] == [{"docid": "b", "from": 1, "to": 0}]
    # to given alone: from is the version put before it
    assert client.get(f"/v1/qrels/q/diff?to={v2}").get_json()["from"]["version"] == v1


def test_a_version_put_again_is_compared_with_the_one_put_before(client, two):
    v1, v2 = two
    assert put(client, "q", V1)["version"] == v1  # q: v1, v2, v1
    doc = client.get("/v1/qrels/q/diff").get_json()
    assert (doc["from"]["version"], doc["to"]["version"]) == (v2, v1)
    # the pool depth the version was put with first
    assert doc["to"]["pool_depth"] == 20
    # a put of a stored version with pool_depth records it (over an earlier put's)
    again = client.put("/v1/qrels/q", json={"qrels": V2, "pool_depth": 50})
    assert again.status_code == 201 and again.get_json()["pool_depth"] == 50
    assert client.get(f"/v1/qrels/q@{v2}").get_json()["pool_depth"] == 50
    latest = client.put("/v1/qrels/q", json={"qrels": V2, "pool_depth": 40})
    assert latest.status_code == 200 and latest.get_json()["pool_depth"] == 40
    doc = client.get(f"/v1/qrels/q/diff?from={v1}&to={v2}").get_json()
    assert (doc["from"]["pool_depth"], doc["to"]["pool_depth"]) == (20, 40)


def test_pages_of_changed_topics(client, two):
    v1, v2 = two
    first = client.get("/v1/qrels/q/diff?limit=2").get_json()
    assert [t["topic"] for t in first["topics"]] == ["301", "302"]
    assert first["next"] == f"/v1/qrels/q/diff?from={v1}&to={v2}&offset=2&limit=2"
    second = client.get(first["next"]).get_json()
    assert [t["topic"] for t in second["topics"]] == ["303"] and second["next"] is None
    assert second["totals"] == first["totals"]
    text = client.get("/v1/qrels/q/diff?limit=2", headers={"Accept": TEXT})
    assert text.mimetype == TEXT and "\ntopic 303 " not in text.get_data(as_text=True)
    assert text.get_data(as_text=True).endswith(f"(changed topics 1-2 of 3; next page: "
                                                f"{first['next']})\n")
    too_many = client.get("/v1/qrels/q/diff?limit=100000")
    assert too_many.status_code == 400 and "limit" in too_many.get_json()["errors"]


def test_unknown_id_version_and_bad_versions(client, two):
    v1, _ = two
    cases = [("/v1/qrels/nope/diff", 404, "qrels_id"),
             ("/v1/qrels/q/diff?from=0123456789abcdef", 404, "from"),
             ("/v1/qrels/q/diff?to=0123456789abcdef", 404, "to"),
             ("/v1/qrels/q/diff?to=XYZ", 400, "to")]
    for path, status, named in cases:
        resp = client.get(path)
        assert resp.status_code == status, path
        assert resp.mimetype == "application/problem+json"
        assert list(resp.get_json()["errors"]) == [named], path
    assert "0123456789abcdef" in client.get(cases[1][0]).get_json()["detail"]
    # nothing was put before v1: it is compared with itself
    first = client.get(f"/v1/qrels/q/diff?to={v1}").get_json()
    assert (first["from"]["version"], first["to"]["version"]) == (v1, v1)
    assert first["topics"] == [] and first["totals"]["unchanged"] == 4


def test_judgment_groups_and_refused_kinds(client):
    jg = {"qrels_format": "qrels_jg"}
    put(client, "g", "1 A a 1\n1 B a 0\n", **jg)
    put(client, "g", "1 A a 1\n1 B a 2\n1 C a 1\n", **jg)
    doc = client.get("/v1/qrels/g/diff").get_json()
    assert doc["kind"] == "qrels_jg"
    assert doc["topics"][0]["added"] == [{"jg": "C", "docid": "a", "grade": 1}]
    assert doc["topics"][0]["regraded"] == [{"jg": "B", "docid": "a", "from": 0, "to": 2}]
    groups = doc["to"]["version"]
    plain = put(client, "g", "1 0 a 1\n")["version"]  # plain qrels as the id's next version
    # by default, the version of to's kind before it: none, so itself (nothing changed)
    alone = client.get("/v1/qrels/g/diff").get_json()
    assert (alone["from"]["version"], alone["to"]["version"]) == (plain, plain)
    assert alone["topics"] == []
    mixed = client.get(f"/v1/qrels/g/diff?from={groups}&to={plain}")
    assert mixed.status_code == 422 and "different kinds" in mixed.get_json()["detail"]
    put(client, "p", "1 A a 1\n", qrels_format="qrels_prefs")
    put(client, "p", "1 A a 2\n1 A b 1\n", qrels_format="qrels_prefs")
    prefs = client.get("/v1/qrels/p/diff")
    assert prefs.status_code == 422 and "no grade" in prefs.get_json()["detail"]


def test_subtopic_qrels_compare_per_subtopic(client):
    put(client, "s", "1 1 a 1\n1 2 a 0\n", diversity="true")
    put(client, "s", "1 1 a 1\n1 2 a 1\n", diversity="true")
    doc = client.get("/v1/qrels/s/diff").get_json()
    assert doc["kind"] == "subtopics"
    assert doc["topics"][0]["regraded"] == [{"subtopic": "2", "docid": "a", "from": 0, "to": 1}]


def test_pool_depth_on_every_body(client):
    json_put = client.put("/v1/qrels/d", json={"qrels": {"1": {"a": 1}}, "pool_depth": 100})
    assert json_put.status_code == 201 and json_put.get_json()["pool_depth"] == 100
    form = client.put("/v1/qrels/d", data={"qrels": "1 0 b 1\n", "pool_depth": "7"},
                      content_type="multipart/form-data")
    assert form.status_code == 201 and form.get_json()["pool_depth"] == 7
    assert client.get("/v1/qrels/d").get_json()["pool_depth"] == 7
    doc = client.get("/v1/qrels/d/diff").get_json()
    assert (doc["from"]["pool_depth"], doc["to"]["pool_depth"]) == (100, 7)
    for kwargs in ({"json": {"qrels": {"1": {"a": 1}}, "pool_depth": 0}},
                   {"json": {"qrels": {"1": {"a": 1}}, "pool_depth": "5"}},
                   {"json": {"qrels": {"1": {"a": 1}}, "pool_depth": True}},
                   {"data": {"qrels": "1 0 b 1\n", "pool_depth": "x"},
                    "content_type": "multipart/form-data"}):
        bad = client.put("/v1/qrels/d", **kwargs)
        assert bad.status_code == 422 and list(bad.get_json()["errors"]) == ["pool_depth"]
    for query_kwargs in ({"json": {"qrels": {"1": {"a": 1}}}},
                         {"data": "1 0 c 1\n", "content_type": TEXT}):
        beside = client.put("/v1/qrels/d?pool_depth=3", **query_kwargs)
        assert beside.status_code == 422 and "pool_depth" in beside.get_json()["errors"]


KEYS = {"write-a": ("write", "team-a"), "write-b": ("write", "team-b")}


def test_another_tenants_qrels_are_a_404(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("\n".join(key_line(k, role, tenant, k) for k, (role, tenant) in
                              KEYS.items()))
    client = ContractClient(create_app({"TESTING": True, "API_KEYS_FILE": str(path)})
                            .test_client())
    a = {"Authorization": "Bearer write-a"}
    b = {"Authorization": "Bearer write-b"}
    versions = [client.put("/v1/qrels/q", data=text, content_type=TEXT, headers=a)
                .get_json()["version"] for text in (V1, V2)]
    assert client.get("/v1/qrels/q/diff", headers=a).status_code == 200
    for path in ("/v1/qrels/q/diff", f"/v1/qrels/q/diff?from={versions[0]}&to={versions[1]}"):
        resp = client.get(path, headers=b)
        assert resp.status_code == 404 and list(resp.get_json()["errors"]) == ["qrels_id"]
    assert client.get("/v1/qrels/q/diff").status_code == 401


def test_cli_prints_the_routes_text_byte_for_byte(client, served, two, monkeypatch):
    from cranfield.cli import main

    monkeypatch.delenv("CRANFIELD_SERVER", raising=False)
    monkeypatch.delenv("CRANFIELD_API_KEY", raising=False)
    # more changed topics than one page of the CLI: it follows next
    monkeypatch.setattr("cranfield.cli_qrels_diff.PAGE", 2)
    v1, v2 = two
    for query, args in (("", []), (f"?from={v2}&to={v1}", ["--from", v2, "--to", v1])):
        route = client.get(f"/v1/qrels/q/diff{query}", headers={"Accept": TEXT})
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["qrels", "diff", "q", *args, "--server", served]) == 0
        assert out.getvalue() == route.get_data(as_text=True)
        assert "\ntopic 303 " in out.getvalue()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["qrels", "diff", "nope", "--server", served]) == 6
    assert "no qrels 'nope'" in err.getvalue()


def test_cli_follows_a_service_with_small_pages(app, client, served, two, monkeypatch):
    """A service whose MAX_PAGE_ITEMS is below the CLI's page: the CLI takes the service's
    page size and still prints the whole diff."""
    from cranfield.cli import main

    monkeypatch.delenv("CRANFIELD_API_KEY", raising=False)
    whole = client.get("/v1/qrels/q/diff", headers={"Accept": TEXT}).get_data(as_text=True)
    app.config["MAX_PAGE_ITEMS"] = 2
    assert "next page" in client.get("/v1/qrels/q/diff", headers={"Accept": TEXT}
                                     ).get_data(as_text=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["qrels", "diff", "q", "--server", served]) == 0
    assert out.getvalue() == whole
