"""Hostile multipart bodies (issue #27) on every multipart route (evaluations, comparisons,
pools, PUT /v1/qrels/{id}): a part without a name, a part taken once given twice, a part no
route knows. Each is a 422 problem naming the part, never a 500 (a nameless file part was
filed under None, and the problem keyed by it could not be encoded) and never a silent
reading (a second ``run`` file was ignored, a repeated ``run`` field had one value used).
The three POST routes are tried with both readers of a form: werkzeug's (small bodies) and
service.multipart's (large ones; here forced on small bodies)."""

from __future__ import annotations

import pytest

import service.evaluation_request as evaluation_request

B = "hostile-boundary"
RUN = b"q1 Q0 d1 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq2 Q0 d4 1 2.0 r\nq2 Q0 d5 2 1.0 r\n"
RUN2 = b"q1 Q0 d2 1 3.0 s\nq1 Q0 d1 2 2.0 s\nq2 Q0 d4 1 1.0 s\n"
QRELS = b"q1 0 d1 1\nq2 0 d5 1\n"


def part(name: str | None, content: bytes, filename: str | None = None) -> bytes:
    disposition = "form-data" + ("" if name is None else f'; name="{name}"') + \
        ("" if filename is None else f'; filename="{filename}"')
    return f"--{B}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + content + b"\r\n"


def body(*parts: bytes) -> dict:
    return {"data": b"".join(parts) + f"--{B}--\r\n".encode(),
            "content_type": f"multipart/form-data; boundary={B}"}


@pytest.fixture(params=["werkzeug", "service.multipart"])
def parser(request, monkeypatch):
    """Which reader cuts the POST routes' forms (service.multipart's from 0 bytes, or never)."""
    monkeypatch.setattr(evaluation_request, "FAST_MULTIPART_MIN_BYTES",
                        0 if request.param == "service.multipart" else 1 << 40)
    return request.param


# every POST route's valid form, and the parts it takes once
VALID = {
    "/v1/evaluations": [part("run", RUN, "r.txt"), part("qrels", QRELS, "q.txt"),
                        part("measures", b"map")],
    "/v1/comparisons": [part("runs", RUN, "a.txt"), part("runs", RUN2, "b.txt"),
                        part("qrels", QRELS, "q.txt"), part("measures", b"map"),
                        part("permutations", b"100"), part("seed", b"1")],
    "/v1/pools": [part("runs", RUN, "a.txt"), part("runs", RUN2, "b.txt"),
                  part("depth", b"2")],
}
SINGLE = {
    "/v1/evaluations": [part("run", RUN2, "r2.txt"), part("run", RUN.decode().encode()),
                        part("qrels", QRELS, "q2.txt"), part("qrels", QRELS),
                        part("qrels_id", b"x"), part("depth", b"5"), part("per_topic", b"true"),
                        part("record", b'{"system": "s", "label": "l"}'),
                        part("relevance_level", b"1")],
    "/v1/comparisons": [part("qrels", QRELS, "q2.txt"), part("qrels", QRELS),
                        part("alpha", b"0.05"), part("seed", b"2"), part("baseline", b"a"),
                        part("depth", b"5")],
    "/v1/pools": [part("depth", b"3"), part("profile", b"trec_eval-10")],
}


def _name_of(p: bytes) -> str:
    return p.split(b'name="', 1)[1].split(b'"', 1)[0].decode()


def _problem(resp, status: int = 422) -> dict:
    assert resp.status_code == status, (resp.status_code, resp.get_data()[:400])
    assert resp.mimetype == "application/problem+json"
    return resp.get_json()


@pytest.mark.parametrize("route", list(VALID))
def test_the_valid_forms_are_answered(client, parser, route):
    resp = client.post(route, **body(*VALID[route]))
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    if route == "/v1/evaluations":
        assert doc["aggregate"]["map"] == 0.75  # q1: 1/1, q2: 1/2
    elif route == "/v1/pools":
        assert doc["depth"] == 2 and doc["topics"] == {"q1": ["d1", "d2"], "q2": ["d4", "d5"]}


@pytest.mark.parametrize("route", list(VALID))
@pytest.mark.parametrize("nameless", [
    pytest.param((None, "r.txt"), id="file without name"),
    pytest.param(("", "r.txt"), id="file with empty name"),
    pytest.param((None, None), id="field without name"),
    pytest.param(("", None), id="field with empty name")])
def test_a_part_without_a_name_is_refused_naming_the_part(client, parser, route, nameless):
    name, filename = nameless
    resp = client.post(route, **body(part(name, RUN, filename), *VALID[route]))
    doc = _problem(resp)
    (key,) = doc["errors"]
    assert key.startswith("part"), doc
    if filename is not None:
        assert "r.txt" in key, doc
    if parser == "service.multipart":
        assert key.startswith("part 1"), doc  # its place in the body
    assert doc["errors"][key][0].startswith("no name"), doc


@pytest.mark.parametrize("route", list(VALID))
def test_a_part_taken_once_given_twice_is_refused_naming_it(client, parser, route):
    for extra in SINGLE[route]:
        name = _name_of(extra)
        if name in {_name_of(p) for p in VALID[route]}:  # a second of a part the form has
            doc = _problem(client.post(route, **body(*VALID[route], extra)))
            assert list(doc["errors"]) == [name], (name, doc)
            assert doc["errors"][name][0] == ("given 2 times (as fields or files); give it "
                                              "once"), (name, doc)
        # given twice (a part the valid form lacks, or a third)
        doc = _problem(client.post(route, **body(*VALID[route], extra, extra)))
        assert list(doc["errors"]) == [name], (name, doc)


@pytest.mark.parametrize("route", list(VALID))
def test_an_unknown_part_is_refused_naming_it(client, parser, route):
    for extra in (part("bogus", b"1"), part("bogus", RUN, "x.txt"), part("Run", RUN, "r.txt")):
        doc = _problem(client.post(route, **body(*VALID[route], extra)))
        assert _name_of(extra) in doc["errors"], doc


def test_repeatable_parts_stay_repeatable(client, parser):
    """measures on an evaluation; runs, measures on a comparison: every value is read."""
    doc = client.post("/v1/evaluations", **body(
        part("run", RUN, "r.txt"), part("qrels", QRELS, "q.txt"), part("measures", b"map"),
        part("measures", b"P.1"))).get_json()
    assert doc["aggregate"] == {"map": 0.75, "P_1": 0.5}
    resp = client.post("/v1/comparisons", **body(
        *VALID["/v1/comparisons"], part("runs", RUN2, "c.txt"), part("measures", b"P.1")))
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert [r["name"] for r in doc["runs"]] == ["a", "b", "c"]
    assert [m["key"] if isinstance(m, dict) else m for m in doc["measures"]] == ["map", "P_1"]


# ---- PUT /v1/qrels/{id} (werkzeug's reader) -------------------------------------------------

def test_put_qrels_form_refuses_nameless_repeated_and_unknown_parts(client):
    ok = client.put("/v1/qrels/q", **body(part("qrels", QRELS, "q.txt")))
    assert ok.status_code == 201, ok.get_json()
    cases = {
        "nameless file": (part(None, QRELS, "q.txt"), "part (filename 'q.txt')"),
        "nameless field": (part(None, b"x"), "part (a field)"),
        "qrels twice": (part("qrels", QRELS, "q2.txt"), "qrels"),
        "qrels file and field": (part("qrels", QRELS), "qrels"),
        "diversity twice": (part("diversity", b"true") + part("diversity", b"false"),
                            "diversity"),
        "unknown field": (part("bogus", b"1"), "bogus"),
        "unknown file": (part("run", QRELS, "r.txt"), "run"),
    }
    for case, (extra, key) in cases.items():
        resp = client.put("/v1/qrels/q", **body(part("qrels", QRELS, "q.txt"), extra))
        doc = _problem(resp)
        assert list(doc["errors"]) == [key], (case, doc)
    # nothing was stored by a refused request: still the first version only
    assert len(client.get("/v1/qrels/q").get_json().get("versions", [1])) == 1


# ---- the cases seen (issue #27), by name ----------------------------------------------------

@pytest.mark.parametrize("route", list(VALID))
def test_seen_file_part_with_filename_but_no_name_is_422_not_500(client, parser, route):
    nameless = f'--{B}\r\nContent-Disposition: form-data; filename="run.txt"\r\n\r\n'.encode() \
        + RUN + b"\r\n"
    doc = _problem(client.post(route, **body(*VALID[route], nameless)))
    (key,) = doc["errors"]
    assert "run.txt" in key and key.startswith("part"), doc


def test_seen_second_run_file_part_is_refused_not_ignored(client, parser):
    resp = client.post("/v1/evaluations", **body(
        part("run", RUN, "r.txt"), part("run", RUN2, "r2.txt"), part("qrels", QRELS, "q.txt")))
    assert _problem(resp)["errors"] == {"run": ["given 2 times (as fields or files); give "
                                                "it once"]}


def test_seen_repeated_run_field_is_refused_not_one_used(client, parser):
    resp = client.post("/v1/evaluations", **body(
        part("run", RUN), part("run", RUN2), part("qrels", QRELS, "q.txt")))
    assert list(_problem(resp)["errors"]) == ["run"]


# ---- numbers in form fields: ASCII digits, as JSON writes them ------------------------------

NUMBER_FIELDS = {
    "/v1/evaluations": ["relevance_level", "depth", "collection_size", "details_depth"],
    "/v1/comparisons": ["permutations", "bootstrap_samples", "seed", "largest_losses", "depth",
                        "relevance_level", "collection_size", "alpha"],
    "/v1/pools": ["depth"],
}
BAD_NUMBERS = ["１", "５", "1_0", "+5", " 5", "5 ", "٣", "0x10", "", "𝟓"]
BAD_FLOATS = ["nan", "inf", "-Infinity", "0.0_5", "０.05", " 0.05", "5e", "1e99999"]


@pytest.mark.parametrize("route", list(NUMBER_FIELDS))
def test_a_number_field_is_read_only_in_ascii_digits(client, parser, route):
    """int() read "１" as 1, "1_0" as 10, "+5" and " 5" as 5 (issue #27): refused, naming the
    field; the same number in ASCII digits is read."""
    for name in NUMBER_FIELDS[route]:
        valid = [p for p in VALID[route] if _name_of(p) != name]
        for value in BAD_NUMBERS + (BAD_FLOATS if name == "alpha" else []):
            resp = client.post(route, **body(*valid, part(name, value.encode())))
            doc = _problem(resp)
            assert list(doc["errors"]) == [name], (name, value, doc)
    # read, and answered as read
    doc = client.post("/v1/pools", **body(*VALID["/v1/pools"][:2], part("depth", b"1")))
    assert doc.get_json()["topics"] == {"q1": ["d1", "d2"], "q2": ["d4"]}  # each top 1
    resp = client.post("/v1/comparisons", **body(*VALID["/v1/comparisons"],
                                                 part("alpha", b"5e-2")))
    assert resp.status_code == 200, resp.get_json()
