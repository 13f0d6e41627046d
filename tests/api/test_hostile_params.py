"""Hostile query parameters (issue #27): every query parameter of every operation in
openapi.yaml, read from the spec here, is sent NUL and other control characters, bytes that
are not UTF-8, a second time; the date parameters dates with no UTC form; the integer
parameters numbers Python's int() reads but the contract does not write (fullwidth digits,
underscores, a sign, spaces). Each answer is a 400 problem+json naming that parameter, never a
500 and never a silent reading. The routes reach the database with each (a recorded result,
a known system, a measure it holds), on SQLite and on PostgreSQL (``RESULTS_ON_POSTGRES``:
PostgreSQL's text cannot hold NUL, where the 500s were seen)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from conftest import ContractClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from judged_qrels import put_judged

ROOT = Path(__file__).resolve().parents[2]
RESULTS_ON_POSTGRES = True  # each test here on SQLite and on PostgreSQL (conftest)

RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}}
QRELS = {"q1": {"d1": 1, "d3": 1}, "q2": {"d5": 2}}
QRELS_TEXT = "q1 0 d1 1\nq2 0 d5 1\n"
OTHER_RUN = {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d5": 2.0, "d4": 1.0}}
OTHER_QRELS = {**QRELS, "q2": {"d4": 1, "d5": 2}}


def _operations() -> list[tuple[str, str, list[dict]]]:
    """(method, path, query parameters) of every operation of the contract."""
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    shared = spec.get("components", {}).get("parameters", {})

    def resolved(p: dict) -> dict:
        return shared[p["$ref"].rsplit("/", 1)[-1]] if "$ref" in p else p

    out = []
    for path, item in spec["paths"].items():
        common = [resolved(p) for p in item.get("parameters", [])]
        for method, op in item.items():
            if method == "parameters":
                continue
            params = common + [resolved(p) for p in op.get("parameters", [])]
            out.append((method.upper(), path, [p for p in params if p["in"] == "query"]))
    return out


OPERATIONS = _operations()
QUERY_PARAMS = [(m, path, p["name"], p.get("schema", {})) for m, path, ps in OPERATIONS
                for p in ps]
API_OPERATIONS = [(m, path) for m, path, _ in OPERATIONS if path.startswith("/v1/")]


def test_the_spec_has_the_parameters_this_test_knows():
    """The table below is the spec's: a parameter added to openapi.yaml is in it."""
    names = {(m, path, name) for m, path, name, _ in QUERY_PARAMS}
    assert ("GET", "/v1/systems/{name}/results", "tag") in names
    assert ("GET", "/v1/systems/{name}/trend", "measure") in names
    assert ("GET", "/v1/qrels", "limit") in names
    assert len(names) >= 20, sorted(names)


# ---- a world in which every route reaches its database --------------------------------------

@pytest.fixture
def world(client):
    """A recorded result of system ``s`` (with map), stored qrels ``small``, stored judged
    qrels ``judged`` (qrels_format qrels_jg: GET .../agreement reads only those), and systems
    ``a`` and ``b`` recorded under two versions of stored qrels ``graded`` (GET /v1/stability
    compares two versions): the values the routes' path and required parameters are filled
    with."""
    resp = client.post("/v1/evaluations", json={
        "run": RUN, "qrels": QRELS, "measures": ["map", "P.2"],
        "record": {"system": "s", "label": "one", "tags": ["nightly"]}})
    assert resp.status_code == 200, resp.get_json()
    first = resp.get_json()["recorded"]["id"]
    second = client.post("/v1/evaluations", json={
        "run": RUN, "qrels": QRELS, "measures": ["map", "P.2"],
        "record": {"system": "s", "label": "two"}}).get_json()["recorded"]["id"]
    assert client.put("/v1/qrels/small", data=QRELS_TEXT,
                      content_type="text/plain").status_code == 201
    assert put_judged(client, "judged")["qrels_format"] == "qrels_jg"
    versions = [client.put("/v1/qrels/graded", json={"qrels": qrels}).get_json()["version"]
                for qrels in (QRELS, OTHER_QRELS)]
    for system, run in (("a", RUN), ("b", OTHER_RUN)):
        for version in versions:
            resp = client.post("/v1/evaluations", json={
                "run": run, "qrels_id": f"graded@{version}", "measures": ["map"],
                "record": {"system": system, "label": version}})
            assert resp.status_code == 200, resp.get_json()
    return {"name": "s", "result_id": second, "qrels_id": "small", "job_id": "0" * 32,
            "with": first, "from": f"graded@{versions[0]}", "to": f"graded@{versions[1]}"}


# required parameters, valid, so the one under test is what the route refuses (None: from the
# world)
REQUIRED = {"/v1/systems/{name}/trend": {"measure": "map"},
            "/v1/results/{result_id}/comparison": {"with": None},
            "/v1/stability": {"measure": "map", "from": None, "to": None}}
# a path's own stored qrels, where the world's plain ``small`` is not what it reads
QRELS_IDS = {"/v1/qrels/{qrels_id}/agreement": "judged"}
# what a parameter needs beside it to be used, hence answered: the stability document tells
# the randomization test's permutations only with that test
BESIDE = {("/v1/stability", "permutations"): {"test": "randomization"}}
# where an answer tells the integer parameter it read: the page's members by their names, the
# documents' in their own members (openapi.yaml's StabilityDocument, AgreementDocument)
ECHOED = {("/v1/stability", "resamples"): ("bootstrap", "resamples"),
          ("/v1/stability", "seed"): ("bootstrap", "seed"),
          ("/v1/stability", "permutations"): ("pairs_tested", "permutations"),
          ("/v1/qrels/{qrels_id}/agreement", "resamples"): ("bootstrap", "resamples"),
          ("/v1/qrels/{qrels_id}/agreement", "seed"): ("bootstrap", "seed")}


# an integer the contract takes may still cost more than the work budget, bounded before the
# work (422 work-over-budget, telling the value it read here): stability's resamples count
# 4,000,000 units each against MAX_STABILITY_WORK, 40e9 by default, below the schema's 100000
OVER_BUDGET_ECHOED = {("/v1/stability", "resamples"): ("work", "resamples")}


def _echoed(doc: dict, path: str, name: str):
    for key in ECHOED.get((path, name), (name,)):
        doc = doc[key]
    return doc


def _url(path: str, world: dict) -> str:
    path = path.replace("{qrels_id}", QRELS_IDS.get(path, world["qrels_id"]))
    for key in ("name", "result_id", "job_id"):
        path = path.replace("{" + key + "}", world[key])
    return path.replace("{name}", "map")  # /v1/measures/{name}


def _send(client: ContractClient, method: str, path: str, world: dict, pairs: list[str]):
    """The operation with the query ``pairs`` (already percent-encoded ``name=value``), its
    required parameters valid unless given among them."""
    given_names = {p.split("=", 1)[0] for p in pairs}
    needed = dict(REQUIRED.get(path, {}))
    for name in given_names:
        needed.update(BESIDE.get((path, name), {}))
    required = [f"{k}={quote(v if v is not None else world[k], safe='')}"
                for k, v in needed.items() if k not in given_names]
    url = _url(path, world)
    if path == "/v1/measures/{name}":
        url = "/v1/measures/map"
    kwargs = {}
    if method == "PUT" and path.startswith("/v1/qrels/"):
        kwargs = {"data": QRELS_TEXT, "content_type": "text/plain"}
    elif method == "PUT":
        kwargs = {"json": {"result_id": world["result_id"]}}
    elif method == "POST":
        kwargs = {"json": {"run": RUN, "qrels": QRELS}}
    return client.open(url, method=method, query_string="&".join(required + pairs), **kwargs)


def _refused(resp, name: str, why: str) -> None:
    assert resp.status_code == 400, (why, resp.status_code, resp.get_data()[:300])
    assert resp.mimetype == "application/problem+json", why
    doc = resp.get_json()
    assert doc["status"] == 400 and doc["type"].endswith("/invalid-parameter"), (why, doc)
    assert list(doc["errors"]) == [name], (why, doc)
    assert doc["detail"].startswith(f"{name}: "), (why, doc)


CONTROLS = ["\x00", "a\x00b", "m\x00ap", "\x01", "\t", "\n", "\r", "\x1b", "\x1f", "\x7f",
            "\x85", "\x9f"]
OVERFLOW_DATES = ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00",
                  "9999-12-31T23:30:00-00:45", "0001-01-01T00:59:59.999999+01:00"]
BAD_INTEGERS = ["１", "５", "1_0", "+5", " 5", "5 ", "\u0665", "0x10", "1e3", "5.0", "", "-",
                "٣", "1" * 25, "𝟓"]


def _is_date(name: str, schema: dict) -> bool:
    return schema.get("format") in ("date-time", "date") or name in ("since", "until")


@pytest.mark.parametrize("method,path,name,schema", QUERY_PARAMS,
                         ids=[f"{m} {p} {n}" for m, p, n, _ in QUERY_PARAMS])
def test_every_query_parameter_refuses_control_characters(client, world, method, path, name,
                                                          schema):
    for value in CONTROLS:
        resp = _send(client, method, path, world, [f"{name}={quote(value, safe='')}"])
        _refused(resp, name, f"{value!r}")
    # bytes that are no UTF-8 (werkzeug would keep them as the text "%FF")
    _refused(_send(client, method, path, world, [f"{name}=%FF"]), name, "%FF")
    _refused(_send(client, method, path, world, [f"{name}=a%C3"]), name, "a%C3")


@pytest.mark.parametrize("method,path,name,schema", QUERY_PARAMS,
                         ids=[f"{m} {p} {n}" for m, p, n, _ in QUERY_PARAMS])
def test_every_query_parameter_given_twice_is_refused(client, world, method, path, name,
                                                      schema):
    """werkzeug reads the first of a repeated parameter: the second was silently dropped."""
    value = {"integer": "5", "boolean": "true"}.get(schema.get("type"), "map")
    if name == "with":
        value = world["with"]
    resp = _send(client, method, path, world, [f"{name}={value}", f"{name}={value}"])
    _refused(resp, name, "twice")


DATE_PARAMS = [q for q in QUERY_PARAMS if _is_date(q[2], q[3])]
INTEGER_PARAMS = [q for q in QUERY_PARAMS if q[3].get("type") == "integer"]
# an integer parameter's bound the schema leaves to configuration, as its description says
# ('1..CRANFIELD_MAX_PAGE_ITEMS', '0..CRANFIELD_MAX_AGREEMENT_RESAMPLES'); no word: the page's
BOUND_SETTINGS = {(m, path, p["name"]): (re.findall(r"\.\.CRANFIELD_([A-Z_]+)",
                                                    p.get("description", "")) or
                                         ["MAX_PAGE_ITEMS"])[0]
                  for m, path, ps in OPERATIONS for p in ps}


def _valid_range(app, method: str, path: str, name: str, schema: dict) -> tuple[int, int]:
    """The integers the contract takes for the parameter: its schema's minimum and maximum,
    a bound the schema leaves out read from the setting its description names."""
    high = schema.get("maximum", app.config[BOUND_SETTINGS[(method, path, name)]])
    return schema.get("minimum", 0), high


def test_the_table_has_date_and_integer_parameters():
    assert {(p, n) for _, p, n, _ in DATE_PARAMS} >= {
        ("/v1/systems/{name}/results", "since"), ("/v1/systems/{name}/results", "until"),
        ("/v1/systems/{name}/trend", "since"), ("/v1/systems/{name}/trend", "until")}
    assert {(p, n) for _, p, n, _ in INTEGER_PARAMS} >= {
        ("/v1/qrels", "offset"), ("/v1/qrels", "limit"), ("/v1/systems", "offset"),
        ("/v1/systems", "limit"), ("/v1/systems/{name}/results", "offset"),
        ("/v1/systems/{name}/trend", "limit")}


@pytest.mark.parametrize("method,path,name,schema", DATE_PARAMS,
                         ids=[f"{m} {p} {n}" for m, p, n, _ in DATE_PARAMS])
def test_every_date_parameter_refuses_a_time_with_no_utc_form(client, world, method, path,
                                                              name, schema):
    for value in OVERFLOW_DATES:
        resp = _send(client, method, path, world, [f"{name}={quote(value, safe='')}"])
        _refused(resp, name, value)
        assert "outside years 1-9999" in resp.get_json()["errors"][name][0]
    # the calendar's ends that have a UTC form are read: every result is after year 1 and
    # before year 9999
    for value, total in (("9999-12-31T23:59:59+01:00", 2 if name == "until" else 0),
                         ("0001-01-01T00:00:00-01:00", 2 if name == "since" else 0)):
        resp = _send(client, method, path, world, [f"{name}={quote(value, safe='')}"])
        assert resp.status_code == 200, (value, resp.get_json())
        assert resp.get_json()["total"] == total, (value, resp.get_json())


@pytest.mark.parametrize("method,path,name,schema", INTEGER_PARAMS,
                         ids=[f"{m} {p} {n}" for m, p, n, _ in INTEGER_PARAMS])
def test_every_integer_parameter_is_ascii_decimal_only(client, world, method, path, name,
                                                       schema):
    for value in BAD_INTEGERS:
        resp = _send(client, method, path, world, [f"{name}={quote(value, safe='')}"])
        _refused(resp, name, repr(value))
    # the same number in ASCII digits is read, and answered as read
    resp = _send(client, method, path, world, [f"{name}=1"])
    assert resp.status_code == 200, resp.get_json()
    assert _echoed(resp.get_json(), path, name) == 1


def _read_as(resp, path: str, name: str, value: int) -> None:
    """``resp`` read ``name`` as ``value``: the answer (or the work budget's 422) tells it."""
    doc = resp.get_json()
    if resp.status_code == 422 and (path, name) in OVER_BUDGET_ECHOED:
        assert doc["type"].endswith("/work-over-budget"), (value, doc)
        for key in OVER_BUDGET_ECHOED[(path, name)]:
            doc = doc[key]
        assert doc == value, (name, value)
        return
    assert resp.status_code == 200, (name, value, doc)
    assert _echoed(doc, path, name) == value, (name, value)


@pytest.mark.parametrize("method,path,name,schema", INTEGER_PARAMS,
                         ids=[f"{m} {p} {n}" for m, p, n, _ in INTEGER_PARAMS])
def test_every_integer_parameter_is_read_at_its_bounds_and_refused_past_them(
        client, app, world, method, path, name, schema):
    """The ends of the range the contract gives (schema, else the setting its description
    names) are read as written; one past the top is a 400 naming the parameter."""
    low, high = _valid_range(app, method, path, name, schema)
    for value in (low, high):
        _read_as(_send(client, method, path, world, [f"{name}={value}"]), path, name, value)
    _refused(_send(client, method, path, world, [f"{name}={high + 1}"]), name, "past the top")


@pytest.mark.parametrize("method,path", API_OPERATIONS,
                         ids=[f"{m} {p}" for m, p in API_OPERATIONS])
def test_a_parameter_no_route_reads_is_held_to_the_same_rule(client, world, method, path):
    """One check for every API route: a stray ``?x=%00`` is refused before the route runs
    (nothing reads it today; nothing will read it unchecked tomorrow)."""
    _refused(_send(client, method, path, world, ["x=%00"]), "x", "stray NUL")
    _refused(_send(client, method, path, world, ["x=1", "x=2"]), "x", "stray twice")
    resp = _send(client, method, path, world, ["a%00b=1"])
    _refused(resp, "a\\x00b", "NUL in a name")


BOOLEAN_PARAMS = [q for q in QUERY_PARAMS if q[3].get("type") == "boolean"]
# what a boolean is not: read as false before (anything but "true" was), or read by a looser
# reader (Python's "１".isdigit(), a padded word, a misspelling)
BAD_BOOLEANS = ["", "ture", "flase", "t", "f", "on", "off", "2", "-1", "１", "０", " true",
                "true ", "yes please", "nope", "TRUE!", "İ", "null", "none"]


def test_the_table_has_boolean_parameters():
    assert ("PUT", "/v1/qrels/{qrels_id}", "diversity") in {
        (m, p, n) for m, p, n, _ in BOOLEAN_PARAMS}


@pytest.mark.parametrize("method,path,name,schema", BOOLEAN_PARAMS,
                         ids=[f"{m} {p} {n}" for m, p, n, _ in BOOLEAN_PARAMS])
def test_every_boolean_parameter_is_true_or_false_only(client, world, method, path, name,
                                                       schema):
    """A boolean query parameter is one of the words the forms' boolean fields take (true,
    false, 1, 0, yes, no; any ASCII case), else 400 naming it: ``?diversity=ture`` was read
    as false, and the qrels stored as plain qrels."""
    for value in BAD_BOOLEANS:
        resp = _send(client, method, path, world, [f"{name}={quote(value, safe='')}"])
        _refused(resp, name, repr(value))
        assert "true or false" in resp.get_json()["errors"][name][0]


def test_diversity_is_read_as_written(client, world):
    """Each word is read, and read as meant: subtopic qrels (4 columns, the second the
    subtopic) stored as diversity qrels or as plain qrels."""
    for word, meant in (("true", True), ("TRUE", True), ("1", True), ("yes", True),
                        ("false", False), ("False", False), ("0", False), ("no", False)):
        resp = client.put(f"/v1/qrels/div?diversity={word}", data="q1 2 d1 1\nq1 3 d2 1\n",
                          content_type="text/plain")
        assert resp.status_code in (200, 201), (word, resp.get_json())
        assert resp.get_json()["diversity"] is meant, (word, resp.get_json())


def test_diversity_form_field_is_true_or_false_only(client, world):
    """The multipart ``diversity`` field: the same words, 422 naming it otherwise (as every
    form's boolean field)."""
    for value in ("ture", "", "１", "on"):
        resp = client.put("/v1/qrels/div", content_type="multipart/form-data",
                          data={"qrels": "q1 0 d1 1\n", "diversity": value})
        assert resp.status_code == 422, (value, resp.get_data()[:300])
        assert list(resp.get_json()["errors"]) == ["diversity"], (value, resp.get_json())
    resp = client.put("/v1/qrels/div", content_type="multipart/form-data",
                      data={"qrels": "q1 2 d1 1\n", "diversity": "Yes"})
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["diversity"] is True


# ---- the cases seen (issue #27), by name ----------------------------------------------------

def test_seen_overflow_dates_on_results_and_trend_are_400_not_500(client, world):
    for route in ("/v1/systems/s/results?", "/v1/systems/s/trend?measure=map&"):
        for name in ("since", "until"):
            for value in ("9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"):
                resp = client.get(route + f"{name}={quote(value, safe='')}")
                _refused(resp, name, f"{route} {name}={value}")


def test_seen_nul_in_tag_qrels_version_and_measure_is_400_not_500(client, world):
    _refused(client.get("/v1/systems/s/results?tag=%00"), "tag", "tag")
    _refused(client.get("/v1/systems/s/results?qrels_version=a%00b"), "qrels_version", "qv")
    _refused(client.get("/v1/systems/s/trend?measure=m%00ap"), "measure", "measure")
    # the same parameters without the NUL are read: the filters find what is there
    assert client.get("/v1/systems/s/results?tag=nightly").get_json()["total"] == 1
    assert client.get("/v1/systems/s/trend?measure=map").get_json()["total"] == 2


def test_seen_paging_parameters_read_like_int_are_refused(client, world):
    for value in ("%EF%BC%91", "1_0", "%2B5", "%205"):  # １, 1_0, +5, " 5"
        _refused(client.get(f"/v1/systems/s/results?limit={value}"), "limit", value)
        _refused(client.get(f"/v1/systems?offset={value}"), "offset", value)
        _refused(client.get(f"/v1/qrels?limit={value}"), "limit", value)
    page = client.get("/v1/systems/s/results?limit=1&offset=1").get_json()
    assert (page["limit"], page["offset"], page["total"], len(page["items"])) == (1, 1, 2, 1)


# ---- properties -----------------------------------------------------------------------------

_CONTROL_CHARS = st.sampled_from([chr(c) for c in [*range(0x20), *range(0x7f, 0xa0)]])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.sampled_from(QUERY_PARAMS), before=st.text(max_size=8), control=_CONTROL_CHARS,
       after=st.text(max_size=8))
def test_any_value_with_a_control_character_is_refused_naming_its_parameter(
        client, world, q, before, control, after):
    method, path, name, _ = q
    value = before + control + after
    resp = _send(client, method, path, world, [f"{name}={quote(value, safe='')}"])
    _refused(resp, name, repr(value))


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=st.sampled_from(INTEGER_PARAMS),
       value=st.text(alphabet=st.sampled_from("0123456789１２٣𝟓_+- .xe\t"), min_size=0,
                     max_size=6))
def test_an_integer_parameter_is_read_only_when_it_is_ascii_digits(client, app, world, q,
                                                                   value):
    """Read (and answered as read) exactly when it is ASCII digits naming an integer of the
    parameter's range (its schema's, else the setting's), else 400 naming it."""
    method, path, name, schema = q
    low, high = _valid_range(app, method, path, name, schema)
    resp = _send(client, method, path, world, [f"{name}={quote(value, safe='')}"])
    plain = value.isascii() and value.isdigit()
    if plain and low <= int(value) <= high:
        _read_as(resp, path, name, int(value))
    else:
        assert resp.status_code == 400, (value, resp.get_data()[:300])
        assert list(resp.get_json()["errors"]) == [name]
