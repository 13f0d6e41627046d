"""Hostile query parameters against gunicorn recording in PostgreSQL (issue #27): PostgreSQL's
text cannot hold NUL, and a NUL in ``?tag=``, ``?qrels_version=`` or ``trend?measure=`` was a
500 there. Every query parameter of every operation in openapi.yaml (read from the spec) is
sent control characters, bytes that are not UTF-8 and a second time; the date parameters
times with no UTC form; the integer parameters what int() reads but the contract does not
write. Each answer: 400, problem+json, naming that parameter; the server answers normally
after (no connection of its pool left broken). Skipped without PostgreSQL on 127.0.0.1:5432,
failing under CI=true."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml
from servers import PG_ADMIN, call, running_gunicorn

ROOT = Path(__file__).resolve().parents[2]
RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}}
QRELS = {"q1": {"d1": 1, "d3": 1}, "q2": {"d5": 2}}

CONTROLS = ["\x00", "a\x00b", "m\x00ap", "\x01", "\n", "\x7f", "\x85"]
OVERFLOW_DATES = ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00"]
BAD_INTEGERS = ["１", "1_0", "+5", " 5", "5 ", "٣"]
OTHER_RUN = {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d5": 2.0, "d4": 1.0}}
OTHER_QRELS = {**QRELS, "q2": {"d4": 1, "d5": 2}}
# judged qrels (trec_eval -R qrels_jg: a judge per group): what GET .../agreement reads
JUDGED = "301 alice d1 2\n301 bob d1 1\n301 alice d2 0\n301 bob d2 1\n302 alice d3 1\n" \
         "302 bob d3 1\n"
# where an answer tells the integer it read (else the member of its name): openapi.yaml's
# StabilityDocument and AgreementDocument; permutations told with the randomization test only
ECHOED = {("/v1/stability", "resamples"): ("bootstrap", "resamples"),
          ("/v1/stability", "seed"): ("bootstrap", "seed"),
          ("/v1/stability", "permutations"): ("pairs_tested", "permutations"),
          ("/v1/qrels/{qrels_id}/agreement", "resamples"): ("bootstrap", "resamples"),
          ("/v1/qrels/{qrels_id}/agreement", "seed"): ("bootstrap", "seed")}


def _query_params() -> list[tuple[str, str, str, str | None]]:
    """(method, path, name, schema type) of every query parameter in the contract."""
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    shared = spec.get("components", {}).get("parameters", {})
    out = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            for p in item.get("parameters", []) + op.get("parameters", []):
                p = shared[p["$ref"].rsplit("/", 1)[-1]] if "$ref" in p else p
                if p["in"] == "query":
                    out.append((method.upper(), path, p["name"], p.get("schema", {}).get("type")))
    return out


PARAMS = _query_params()


@pytest.fixture(scope="module")
def _world(results_postgres):
    """gunicorn on this module's PostgreSQL database (no Redis: the embedded queue), with two
    recorded results of system ``s`` and stored qrels ``small`` (None: no PostgreSQL)."""
    if results_postgres is None:
        yield None
        return
    with running_gunicorn({"CRANFIELD_DATABASE_URL": results_postgres}) as api:
        ids = []
        for label, tags in (("one", ["nightly"]), ("two", [])):
            status, _, doc = call(api, "POST", "/v1/evaluations", {
                "run": RUN, "qrels": QRELS, "measures": ["map"],
                "record": {"system": "s", "label": label, "tags": tags}})
            assert status == 200, doc
            ids.append(doc["recorded"]["id"])
        status, _, doc = call(api, "PUT", "/v1/qrels/small", b"q1 0 d1 1\n",
                              content_type="text/plain")
        assert status == 201, doc
        status, _, doc = call(api, "PUT", "/v1/qrels/judged",
                              {"qrels": JUDGED, "qrels_format": "qrels_jg"})
        assert status == 201 and doc["qrels_format"] == "qrels_jg", doc
        # systems a and b recorded under two versions of qrels graded: GET /v1/stability's
        versions = []
        for qrels in (QRELS, OTHER_QRELS):
            status, _, doc = call(api, "PUT", "/v1/qrels/graded", {"qrels": qrels})
            assert status in (200, 201), doc
            versions.append(f"graded@{doc['version']}")
        for system, run in (("a", RUN), ("b", OTHER_RUN)):
            for version in versions:
                status, _, doc = call(api, "POST", "/v1/evaluations", {
                    "run": run, "qrels_id": version, "measures": ["map"],
                    "record": {"system": system, "label": version}})
                assert status == 200, doc
        yield {"api": api, "with": ids[0], "result_id": ids[1], "from": versions[0],
               "to": versions[1]}


@pytest.fixture
def world(_world, require):
    require(_world is not None, f"a PostgreSQL server at {PG_ADMIN} (trust auth)")
    return _world


def _url(world: dict, method: str, path: str, pairs: list[str]) -> tuple[str, dict]:
    """The operation's path, its required parameters valid (unless given), and ``pairs``."""
    qrels_id = "judged" if path.endswith("/agreement") else "small"
    route = path
    path = path.replace("{result_id}", world["result_id"]).replace("{qrels_id}", qrels_id)
    path = path.replace("{job_id}", "0" * 32)
    path = path.replace("/v1/measures/{name}", "/v1/measures/map").replace("{name}", "s")
    given = {p.split("=", 1)[0] for p in pairs}
    required = []
    if path.endswith("/trend") and "measure" not in given:
        required.append("measure=map")
    if path.endswith("/comparison") and "with" not in given:
        required.append(f"with={world['with']}")
    if route == "/v1/stability":
        required += [f"{k}={quote(v, safe='')}" for k, v in (
            ("measure", "map"), ("from", world["from"]), ("to", world["to"])) if k not in given]
        if "permutations" in given and "test" not in given:
            required.append("test=randomization")
    return path + "?" + "&".join(required + pairs), {}


def _send(world: dict, method: str, path: str, pairs: list[str]):
    url, _ = _url(world, method, path, pairs)
    body, content_type = None, None
    if method == "PUT" and "/qrels/" in path:
        body, content_type = b"q1 0 d1 1\n", "text/plain"
    elif method == "PUT":
        body = {"result_id": world["result_id"]}
    elif method == "POST":
        body = {"run": RUN, "qrels": QRELS}
    return call(world["api"], method, url, body, content_type=content_type)


def _refused(answer, name: str, why: str) -> None:
    status, headers, doc = answer
    assert status == 400, (why, status, doc)
    assert headers["Content-Type"].startswith("application/problem+json"), why
    assert list(doc["errors"]) == [name], (why, doc)


@pytest.mark.parametrize("method,path,name,kind", PARAMS,
                         ids=[f"{m} {p} {n}" for m, p, n, _ in PARAMS])
def test_every_query_parameter_on_postgresql(world, method, path, name, kind):
    for value in CONTROLS:
        _refused(_send(world, method, path, [f"{name}={quote(value, safe='')}"]), name,
                 repr(value))
    _refused(_send(world, method, path, [f"{name}=%FF"]), name, "%FF")
    twice = world["with"] if name == "with" else ("5" if kind == "integer" else "map")
    _refused(_send(world, method, path, [f"{name}={twice}", f"{name}={twice}"]), name, "twice")
    if name in ("since", "until"):
        for value in OVERFLOW_DATES:
            _refused(_send(world, method, path, [f"{name}={quote(value, safe='')}"]), name,
                     value)
    if kind == "integer":
        for value in BAD_INTEGERS:
            _refused(_send(world, method, path, [f"{name}={quote(value, safe='')}"]), name,
                     repr(value))
        # the same number in ASCII digits is read, and answered as read
        status, _, doc = _send(world, method, path, [f"{name}=1"])
        assert status == 200, doc
        for key in ECHOED.get((path, name), (name,)):
            doc = doc[key]
        assert doc == 1, (path, name)


def test_seen_cases_on_postgresql_and_the_server_answers_after(world):
    api = world["api"]
    for url, name in (("/v1/systems/s/results?tag=%00", "tag"),
                      ("/v1/systems/s/results?qrels_version=a%00b", "qrels_version"),
                      ("/v1/systems/s/trend?measure=m%00ap", "measure")):
        _refused(call(api, "GET", url), name, url)
    for route in ("/v1/systems/s/results?", "/v1/systems/s/trend?measure=map&"):
        for name in ("since", "until"):
            for value in OVERFLOW_DATES:
                _refused(call(api, "GET", route + f"{name}={quote(value, safe='')}"), name,
                         f"{route}{name}={value}")
    # the same filters without the NUL read PostgreSQL: every pooled connection still works
    for _ in range(4):
        status, _, doc = call(api, "GET", "/v1/systems/s/results?tag=nightly")
        assert status == 200 and doc["total"] == 1 and doc["items"][0]["label"] == "one"
        status, _, doc = call(api, "GET", "/v1/systems/s/trend?measure=map&limit=1")
        assert status == 200 and doc["total"] == 2 and len(doc["points"]) == 1


def test_the_store_refuses_a_time_with_no_utc_form(results_postgres, require):
    """ResultStore.results and .trend take ISO text too (the CLI's): ValueError, not the
    OverflowError that was a 500."""
    require(results_postgres is not None, f"a PostgreSQL server at {PG_ADMIN} (trust auth)")
    from backend.results import ResultStore

    store = ResultStore(results_postgres)
    try:
        for value in OVERFLOW_DATES:
            with pytest.raises(ValueError, match="outside years 1-9999"):
                store.results(None, "s", since=value)
            with pytest.raises(ValueError, match="outside years 1-9999"):
                store.trend(None, "s", "map", until=datetime.fromisoformat(value))
        # the calendar's ends with a UTC form are read
        items, total = store.results(None, "s", until=datetime(9999, 12, 31, tzinfo=UTC))
        assert total == 2
    finally:
        store.close()
