"""Concurrent first pins of a baseline (issue #27, 500 no. 1): several ``PUT
/v1/systems/{name}/baseline`` at once on a system with no baseline yet, against a real
gunicorn (2 processes x its threads) recording in SQLite and in PostgreSQL. The store read
the baselines row, then inserted one: two requests that both read none both inserted, and
one failed on the key (19 of 48 answered 500). Every request must be a 200 naming the result
it pinned, and the system must end with exactly one baseline row, one of those pinned."""

from __future__ import annotations

import threading
import urllib.request

import orjson
import pytest
from servers import PG_ADMIN, call, postgres_database, running_gunicorn
from sqlalchemy import create_engine, text

RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}}
QRELS = {"q1": {"d1": 1, "d3": 1}, "q2": {"d5": 2}}
ROUNDS = 8      # systems, each pinned first by THREADS requests at once
THREADS = 6     # the probe's six


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request, tmp_path_factory):
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path_factory.mktemp("race") / "results.db")
        return
    with postgres_database("cranfield_race_") as url:
        yield url


@pytest.fixture(scope="module")
def api(database):
    if database is None:
        yield None
        return
    with running_gunicorn({"CRANFIELD_DATABASE_URL": database, "CRANFIELD_WORKERS": "2"}) as url:
        yield url


def _record(api: str, system: str, label: str) -> str:
    status, _, doc = call(api, "POST", "/v1/evaluations", {
        "run": RUN, "qrels": QRELS, "measures": ["map"],
        "record": {"system": system, "label": label}})
    assert status == 200, doc
    return doc["recorded"]["id"]


def _pin_at_once(api: str, system: str, ids: list[str]) -> list[tuple[int, dict]]:
    """One thread per id, each PUTting it as the system's baseline as soon as all are ready
    (a barrier): their (status, body)."""
    barrier = threading.Barrier(len(ids))
    answers: list[tuple[int, dict] | None] = [None] * len(ids)

    def pin(i: int) -> None:
        request = urllib.request.Request(
            f"{api}/v1/systems/{system}/baseline", method="PUT",
            data=orjson.dumps({"result_id": ids[i]}),
            headers={"Content-Type": "application/json"})
        barrier.wait(timeout=30)
        try:
            with urllib.request.urlopen(request, timeout=60) as resp:
                answers[i] = (resp.status, orjson.loads(resp.read()))
        except urllib.error.HTTPError as err:
            answers[i] = (err.code, orjson.loads(err.read() or b"null"))

    threads = [threading.Thread(target=pin, args=(i,)) for i in range(len(ids))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(a is not None for a in answers), answers
    return answers


def test_concurrent_first_pins_of_a_baseline_are_all_200(api, database, require):
    require(database is not None, f"a PostgreSQL server at {PG_ADMIN} (trust auth)")
    statuses = []
    for round_ in range(ROUNDS):
        system = f"race-{round_}"
        ids = [_record(api, system, f"r{i}") for i in range(THREADS)]
        answers = _pin_at_once(api, system, ids)
        statuses += [status for status, _ in answers]
        for i, (status, doc) in enumerate(answers):
            assert status == 200, (system, i, status, doc)
            assert doc["id"] == ids[i] and doc["system"] == system, doc
        # one baseline, one of those pinned, as the API and the table both say
        status, _, pinned = call(api, "GET", f"/v1/systems/{system}/baseline")
        assert status == 200 and pinned["id"] in ids, pinned
        status, _, listed = call(api, "GET", "/v1/systems?limit=1000")
        (entry,) = [s for s in listed["items"] if s["name"] == system]
        assert entry["baseline"] == pinned["id"]
    assert statuses == [200] * ROUNDS * THREADS
    engine = create_engine(database)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text(
                "SELECT s.name, COUNT(*) FROM baselines b JOIN systems s ON s.pk = b.system_pk"
                " GROUP BY s.name ORDER BY s.name")).all()
    finally:
        engine.dispose()
    assert rows == [(f"race-{r}", 1) for r in range(ROUNDS)]


def test_a_later_pin_repoints_the_one_row(api, database, require):
    """The upsert's other half: a system with a baseline gets the newly pinned one."""
    require(database is not None, f"a PostgreSQL server at {PG_ADMIN} (trust auth)")
    first, second = _record(api, "repoint", "a"), _record(api, "repoint", "b")
    for rid in (first, second, first):
        status, _, doc = call(api, "PUT", "/v1/systems/repoint/baseline", {"result_id": rid})
        assert status == 200 and doc["id"] == rid, doc
        assert call(api, "GET", "/v1/systems/repoint/baseline")[2]["id"] == rid
    # a result of another system is still 404, and leaves the baseline as it was
    other = _record(api, "elsewhere", "x")
    status, _, doc = call(api, "PUT", "/v1/systems/repoint/baseline", {"result_id": other})
    assert status == 404, doc
    assert call(api, "GET", "/v1/systems/repoint/baseline")[2]["id"] == first
