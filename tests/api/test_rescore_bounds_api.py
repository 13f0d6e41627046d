"""Re-scoring's bounds (issue #31, review R31b findings 2 and 7): a tenant's queued re-score
jobs are bounded by MAX_QUEUED_RESCORES before anything is kept or queued (429 naming the
counts), a repeated POST queues no second job for a result already queued under the same
qrels (it is done when that job records), and a queue that cannot be reached leaves no
re-score queued forever. The embedded queue's thread is held by an event while the POSTs
are made, so what is queued is known; each test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from conftest import ContractClient
from sqlalchemy import func, select

from backend import rescoring
from backend.rescoring import Rescore, RescoreItem

RESULTS_ON_POSTGRES = True
V1 = {"q1": {"d1": 1}, "q2": {"d5": 1}}
V2 = {"q1": {"d1": 1, "d2": 1}, "q2": {"d5": 1, "d4": 1}}
V3 = {"q1": {"d2": 1}, "q2": {"d4": 1}}
NIGHTS = [
    {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d4": 2.0, "d5": 1.0}},
    {"q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0}, "q2": {"d5": 2.0, "d4": 1.0}},
    {"q1": {"d2": 3.0, "d3": 2.0, "d1": 1.0}, "q2": {"d6": 2.0, "d5": 1.0}},
]


def put_qrels(client, qrels, name="adhoc") -> str:
    resp = client.put(f"/v1/qrels/{name}", json={"qrels": qrels})
    assert resp.status_code in (200, 201), resp.get_json()
    return f"{name}@{resp.get_json()['version']}"


@pytest.fixture
def nights(app):
    client = ContractClient(app.test_client())
    put_qrels(client, V1)
    for i, run in enumerate(NIGHTS):
        resp = client.post("/v1/evaluations", json={
            "run": run, "qrels_id": "adhoc", "measures": ["map"],
            "record": {"system": "bm25", "label": f"n{i}", "keep_run": True}})
        assert resp.status_code == 200, resp.get_json()
    return client


@pytest.fixture
def held(monkeypatch):
    """The embedded queue's thread held until ``release()``; the re-scores it ran, counted
    (result ids)."""
    ran: list[str] = []
    rescore_one = rescoring.rescore_one

    def counting(store, results, wire, connection=None):
        ran.append(wire["result_id"])
        return rescore_one(store, results, wire, connection)

    monkeypatch.setattr(rescoring, "rescore_one", counting)
    gate = threading.Event()
    rescoring._EMBEDDED.submit(gate.wait)

    def release() -> list[str]:
        gate.set()
        drained = threading.Event()
        rescoring._EMBEDDED.submit(drained.set)  # one thread, in order: all before it ran
        assert drained.wait(120)
        return ran
    yield release
    gate.set()


def rescore_rows(app) -> tuple[int, int]:
    with app.extensions["results"].engine.connect() as connection:
        return (connection.scalar(select(func.count()).select_from(Rescore)),
                connection.scalar(select(func.count()).select_from(RescoreItem)))


def test_queued_rescores_are_bounded_and_never_queued_twice(app, nights, held):
    client = nights
    v2, v3 = put_qrels(client, V2), put_qrels(client, V3)
    app.config["MAX_QUEUED_RESCORES"] = 3
    first = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2})
    assert first.status_code == 202 and first.get_json()["queued"] == 3
    again = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2})
    # the same results under the same qrels: queued under the first re-score's jobs
    assert again.status_code == 202, again.get_json()
    assert (again.get_json()["total"], again.get_json()["queued"]) == (3, 3)
    other = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v3})
    problem = other.get_json()
    assert other.status_code == 429 and other.mimetype == "application/problem+json"
    assert (problem["kind"] if "kind" in problem else problem["type"].rsplit("/", 1)[-1]) \
        == "too-many-rescores"
    assert (problem["queued"], problem["adding"], problem["limit"]) == (3, 3, 3)
    assert "MAX_QUEUED_RESCORES" in problem["detail"] and other.headers["Retry-After"]
    assert rescore_rows(app) == (2, 6)  # the refused re-score kept nothing
    ran = held()
    assert sorted(ran) == sorted({i["result_id"] for i in first.get_json()["items"]})
    assert len(ran) == 3  # each kept run re-scored once, not once per POST
    docs = [client.get(f"/v1/rescores/{r.get_json()['id']}").get_json()
            for r in (first, again)]
    assert [(d["done"], d["queued"], d["failed"]) for d in docs] == [(3, 0, 0)] * 2
    assert docs[0]["new_result_ids"] == docs[1]["new_result_ids"]
    assert len(set(docs[0]["new_result_ids"])) == 3
    # the queue drained: the other qrels' re-score fits now
    later = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v3})
    assert later.status_code == 202 and later.get_json()["queued"] == 3
    assert len(held()) == 6
    assert client.get(f"/v1/rescores/{later.get_json()['id']}").get_json()["done"] == 3


def test_an_original_deleted_before_its_rescore_records_fails_the_item(app, nights, held,
                                                                       monkeypatch):
    """R31b finding 6: the original and its kept run deleted after the job read the run:
    recording the re-score raised KeptRunGone, which the item showed as a traceback's last
    line; it fails with the reason."""
    from backend.kept_runs import KeptRuns

    client = nights
    v2 = put_qrels(client, V2)
    first = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2}).get_json()
    victim = first["items"][0]["result_id"]
    store = app.extensions["results"]
    read = KeptRuns.read

    def read_then_delete(self, tenant, digest):
        run = read(self, tenant, digest)
        if not any(i is None for i in [store.summary(tenant, victim)]):
            # the victim's run is read: its result (the run's only one) is deleted now
            if store.summary(tenant, victim)["run_sha256"] == digest:
                assert store.delete(tenant, victim) is True
        return run

    monkeypatch.setattr(KeptRuns, "read", read_then_delete)
    assert len(held()) == 3
    doc = client.get(f"/v1/rescores/{first['id']}").get_json()
    assert (doc["done"], doc["failed"], doc["queued"]) == (2, 1, 0)
    failed = [i for i in doc["items"] if i["state"] == "failed"]
    assert [i["result_id"] for i in failed] == [victim]
    assert failed[0]["reason"] == "its kept run was deleted before it was re-scored"


def test_a_queue_that_cannot_be_reached_leaves_no_item_queued(app, nights, held, monkeypatch):
    """R31b finding 7: the plan was kept, then the enqueue failed (Redis down): the client got
    an error without the re-score's id, and its items stayed queued for good (counting
    against MAX_QUEUED_RESCORES). Those the queue did not take fail; a 503 names the id."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    client = nights
    v2 = put_qrels(client, V2)
    enqueue = rescoring.enqueue

    def first_then_down(backend, config, wires, results):
        enqueue(backend, config, wires[:1], results)
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(rescoring, "enqueue", first_then_down)
    app.config["MAX_QUEUED_RESCORES"] = 3
    resp = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2})
    problem = resp.get_json()
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "5"
    assert problem["status"] == 503 and len(problem["rescore_id"]) == 32
    assert len(held()) == 1  # the one job the queue took ran
    doc = client.get(f"/v1/rescores/{problem['rescore_id']}").get_json()
    assert (doc["done"], doc["failed"], doc["queued"], doc["state"]) == (1, 2, 0, "finished")
    assert {i["reason"] for i in doc["items"] if i["state"] == "failed"} == \
        {"the queue could not be reached; re-score again"}
    monkeypatch.setattr(rescoring, "enqueue", enqueue)
    again = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2})
    # nothing left queued to count: the two failed ones are queued again, the done one not
    assert again.status_code == 202 and again.get_json()["queued"] == 2
    assert len(held()) == 3
    assert client.get(f"/v1/rescores/{again.get_json()['id']}").get_json()["done"] == 3


def test_planning_reads_no_result_documents(app, nights, held):
    """R31b finding 9: plan loaded whole result rows for up to MAX_RESCORE_RESULTS of them
    (their documents are deferred, but not their aggregates, measures and tags); it reads
    the five columns it needs."""
    from sqlalchemy import event

    client = nights
    v2 = put_qrels(client, V2)
    statements: list[str] = []
    engine = app.extensions["results"].engine

    def seen(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        resp = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2})
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert resp.status_code == 202 and resp.get_json()["queued"] == 3
    planned = [s for s in statements if "rescore" not in s.split("FROM", 1)[-1][:40]
               and "results.run_sha256" in s]
    assert planned and not [s for s in statements if "results.document" in s
                            or "results.aggregate" in s or "results.measures" in s]
    assert len(held()) == 3


def test_a_late_duplicate_job_reads_neither_document_nor_qrels(app, nights, held, monkeypatch):
    """R31b finding 2: a re-score job queued again after its result was recorded loaded the
    whole stored qrels (and the original's document) before it found the result."""
    client = nights
    v2 = put_qrels(client, V2)
    doc = client.post("/v1/systems/bm25/rescore", json={"qrels_id": v2}).get_json()
    assert len(held()) == 3
    done = client.get(f"/v1/rescores/{doc['id']}").get_json()
    item = done["items"][0]
    backend, store = app.extensions["cranfield"], app.extensions["results"]
    loads, gets = [], []
    monkeypatch.setattr(type(backend.store.scoped(None)), "load_qrels",
                        lambda *a, **k: loads.append(a))
    monkeypatch.setattr(type(store), "get", lambda *a, **k: gets.append(a))
    wire = {"tenant": None, "rescore_id": doc["id"], "position": 0, "qrels_ref": v2,
            "result_id": item["result_id"], "job_id": "late", "settings": {}}
    assert rescoring.rescore_one(backend.store, store, wire) == \
        {"result_id": item["new_result_id"]}
    assert (loads, gets) == ([], [])


def test_the_systems_of_one_rescore_are_bounded_by_configuration(app, nights, held):
    """R31b finding 12: MAX_SYSTEMS = 100 was written in service/rescores.py."""
    app.config["MAX_RESCORE_SYSTEMS"] = 2
    v2 = put_qrels(nights, V2)
    resp = nights.post("/v1/rescores", json={"qrels_id": v2, "systems": ["bm25", "x", "y"]})
    problem = resp.get_json()
    assert resp.status_code == 422 and resp.mimetype == "application/problem+json"
    assert problem["errors"]["systems"] == [
        "3 systems, more than MAX_RESCORE_SYSTEMS (2); re-score fewer systems at a time"]
    # repeated names count once
    resp = nights.post("/v1/rescores", json={"qrels_id": v2, "systems": ["bm25", "bm25"]})
    assert resp.status_code == 202 and resp.get_json()["total"] == 3
    assert rescore_rows(app) == (1, 3) and len(held()) == 3
