"""Stored qrels are durable (issue #25): backend/qrels_db.py keeps them in the results
database and caches them in memory or Redis. Each test runs on SQLite and on PostgreSQL
(``RESULTS_ON_POSTGRES``), with each cache: versions, If-Match, deletion and tenants as the
Redis and memory stores answer them (tests/api/test_store_scoping.py), then what only a
database behind a cache can do: survive the cache's loss, refill it, keep a reader's stale
refill out, and serve concurrent puts without a 500. The one-shot import of qrels an
earlier version kept in Redis is tested on a real redis-server (required under CI=true).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from conftest import ContractClient

import cranfield
from backend import store as store_mod
from backend.qrels_db import DurableStore, QrelsDatabase, import_redis_qrels
from backend.results import ResultStore
from backend.store import (
    MemoryStore,
    NotFound,
    QrelsCache,
    RedisStore,
    VersionMismatch,
    canonical_text,
    redis_client,
)
from service.app import create_app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from servers import RedisServer, require_redis_server  # noqa: E402

RESULTS_ON_POSTGRES = True  # tests/api/conftest.py: each test on SQLite and on PostgreSQL

QRELS_A = cranfield.read_qrels("1 0 d1 1\n1 0 d2 0\n2 0 d1 2\n")
QRELS_B = cranfield.read_qrels("7 0 x9 1\n")
RUN = {"1": {"d1": 2.0, "d2": 1.0}, "2": {"d1": 1.0, "d3": 0.5}}


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    """A new decoded-qrels LRU per test: a hit left by another test would hide a load."""
    cache = QrelsCache()
    monkeypatch.setattr(store_mod, "QRELS_CACHE", cache)
    return cache


@pytest.fixture
def ticking(monkeypatch):
    """The stores' clock advances a second at every reading: creation times differ without
    the test waiting on the real clock (and a returning version given a new time shows)."""
    import itertools
    import types

    import backend.qrels_db as qrels_db

    ticks = itertools.count(1_800_000_000)
    clock = types.SimpleNamespace(time=lambda: float(next(ticks)), sleep=time.sleep,
                                  monotonic=time.monotonic)
    for module in (qrels_db, store_mod):
        monkeypatch.setattr(module, "time", clock)
    return clock


@pytest.fixture
def apps():
    """create_app for a test: each app's Redis connections closed at its end."""
    made = []

    def make(config):
        made.append(create_app(config))
        return made[-1]

    yield make
    for app in made:
        redis = getattr(app.extensions["cranfield"], "redis", None)
        if redis is not None:
            redis.close()


@pytest.fixture
def database(results_database):
    results = ResultStore(results_database)
    yield QrelsDatabase(results.engine)
    results.close()


@pytest.fixture(params=["memory", "redis"])
def new_cache(request):
    """A function making an empty cache (a MemoryStore, or a RedisStore on a flushed Redis):
    calling it again is the cache lost (a restart, a FLUSHALL)."""
    if request.param == "memory":
        return MemoryStore
    conn = request.getfixturevalue("redis_conn")

    def flushed():
        conn.flushall()
        return RedisStore(conn)

    return flushed


@pytest.fixture
def store(database, new_cache):
    return DurableStore(database, new_cache())


def count_rows(database, table: str) -> int:
    from sqlalchemy import text

    with database.engine.connect() as conn:
        return conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()


# ----------------------------------------------------------------------------------------------
# The store's answers, as the Redis and memory stores give them
# ----------------------------------------------------------------------------------------------

def test_versions_if_match_and_a_returning_version(store, ticking):
    m1, created = store.put_qrels("q", QRELS_A)
    assert created is True and m1["versions"] == [m1["version"]] and m1["id"] == "q"
    assert (m1["topics"], m1["judgments"], m1["judgments_per_grade"]) == (
        2, 3, {"0": 1, "1": 1, "2": 1})
    again, created = store.put_qrels("q", QRELS_A)
    assert created is False and again == m1
    with pytest.raises(VersionMismatch, match=f"qrels 'q' is at version '{m1['version']}', "
                                              "not 'nope'"):
        store.put_qrels("q", QRELS_B, if_match="nope")
    m2, created = store.put_qrels("q", QRELS_B, if_match=f'"{m1["version"]}"')
    assert created is True and m2["versions"] == [m1["version"], m2["version"]]
    m3, created = store.put_qrels("q", QRELS_A)
    assert created is True and m3["version"] == m1["version"]
    assert m3["created"] == m1["created"]  # a returning version keeps its first metadata
    assert store.versions("q") == [m1["version"], m2["version"], m1["version"]]
    assert store.meta("q", m2["version"])["latest"] == m1["version"]
    with pytest.raises(NotFound, match="no version 'ffff' of qrels 'q'"):
        store.meta("q", "ffff")
    assert store.load_qrels(f"q@{m2['version']}")[0].topics == ["7"]
    assert store.load_qrels("q")[0].topics == ["1", "2"]
    with pytest.raises(VersionMismatch, match="qrels 'n' is at version None, not 'abc'"):
        store.put_qrels("n", QRELS_A, if_match="abc")
    with pytest.raises(NotFound, match="no qrels 'n'"):
        store.meta("n")
    assert store.versions("n") == []


def test_list_pages_and_delete(store, database, ticking):
    for name in ("one", "two", "three"):
        store.put_qrels(name, QRELS_B if name == "two" else QRELS_A)
    store.put_qrels("one", QRELS_B)  # a new version keeps the id's place
    items, total = store.list_qrels(0, 10)
    assert total == 3 and [m["id"] for m in items] == ["one", "two", "three"]
    assert items[0]["version"] == items[1]["version"]  # "one" is at QRELS_B now
    assert [m["id"] for m in store.list_qrels(1, 1)[0]] == ["two"]
    store.delete_qrels("two")
    for ask in (store.meta, store.delete_qrels, store.load_qrels):
        with pytest.raises(NotFound, match="no qrels 'two'"):
            ask("two")
    assert [m["id"] for m in store.list_qrels(0, 10)[0]] == ["one", "three"]
    assert count_rows(database, "qrels_sets") == 2
    assert count_rows(database, "qrels_versions") == 3 and count_rows(database, "qrels_order") == 3
    meta, created = store.put_qrels("two", QRELS_A)
    assert created is True and meta["versions"] == [meta["version"]]


def test_tenants_are_kept_apart_in_the_database(store, database, new_cache):
    a, b = store.scoped("team-a"), store.scoped("team-b")
    assert store.scoped(None) is store
    ma, _ = a.put_qrels("same", QRELS_A)
    mb, _ = b.put_qrels("same", QRELS_B)
    store.put_qrels("shared", QRELS_B)
    # the cache lost: the database alone answers
    again = DurableStore(database, new_cache())
    assert again.scoped("team-a").meta("same")["version"] == ma["version"]
    assert again.scoped("team-b").load_qrels("same")[0].topics == ["7"]
    assert [m["id"] for m in again.scoped("team-a").list_qrels(0, 10)[0]] == ["same"]
    assert [m["id"] for m in again.list_qrels(0, 10)[0]] == ["shared"]
    for other in (again, again.scoped("team-c")):
        with pytest.raises(NotFound):
            other.meta("same")
    with pytest.raises(NotFound):
        again.scoped("team-a").meta("shared")
    again.scoped("team-b").delete_qrels("same")
    assert again.scoped("team-a").meta("same")["version"] == ma["version"]
    with pytest.raises(NotFound):  # the other store's cache too (Redis: shared; memory:
        store.scoped("team-b").meta("same")  # it caches no versions)
    assert mb["version"] != ma["version"]


def test_diversity_qrels_read_back_from_the_database(store, database, new_cache):
    q = cranfield.read_qrels("1 1 d1 1\n1 2 d1 0\n", diversity=True)
    meta, _ = store.put_qrels("div", q, diversity=True)
    loaded, got = DurableStore(database, new_cache()).load_qrels("div")
    assert got["diversity"] is True and got["version"] == meta["version"]
    assert canonical_text(loaded, True) == canonical_text(q, True)


# ----------------------------------------------------------------------------------------------
# The database behind the cache
# ----------------------------------------------------------------------------------------------

def test_the_cache_lost_reloads_from_the_database_and_refills(store, database, new_cache,
                                                              fresh_cache):
    m1, _ = store.put_qrels("q", QRELS_A)
    m2, _ = store.put_qrels("q", QRELS_B)
    cache = new_cache()  # a restart, a FLUSHALL
    assert cache.cached_entry("q") is None
    after = DurableStore(database, cache)
    assert after.meta("q") == m2
    assert after.meta("q", m1["version"]) == store.meta("q", m1["version"])
    if isinstance(cache, RedisStore):  # the miss refilled the cache (memory keeps texts only)
        assert cache.cached_entry("q")[0] == [m1["version"], m2["version"]]
    assert cache.cached_text("q", m1["version"], m1["sha256"]) is None
    qrels, meta = after.load_qrels(f"q@{m1['version']}")
    assert canonical_text(qrels) == canonical_text(QRELS_A) and meta == after.meta(
        "q", m1["version"])
    assert fresh_cache.stats()["misses"] == 1
    assert cache.cached_text("q", m1["version"], m1["sha256"]) is not None  # refilled too


def test_a_cached_read_needs_no_database(database, redis_conn):
    """A worker whose qrels are cached evaluates while the database is down; one whose
    cache misses reads the database (and fails as the database fails)."""
    from sqlalchemy.exc import OperationalError

    store = DurableStore(database, RedisStore(redis_conn))
    meta, _ = store.put_qrels("q", QRELS_A)

    def down():
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    cached = DurableStore(down, store.cache)
    assert cached.meta("q") == meta and cached.load_qrels("q")[1] == meta
    redis_conn.flushall()
    with pytest.raises(OperationalError):
        DurableStore(down, RedisStore(redis_conn)).meta("q")


def test_reads_go_to_the_database_while_redis_is_down_and_writes_wait(database):
    """Redis is a cache: with it stopped, qrels are still read (versions, text) from the
    database; a write is refused (the cache's generation cannot be bumped, and the cache
    would answer the old versions once back), as the API's 503; with Redis back, both
    work and the cache answers the new version."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    require_redis_server()
    server = RedisServer()
    server.start()
    conn = redis_client(server.url)
    try:
        store = DurableStore(database, RedisStore(conn))
        meta, _ = store.put_qrels("q", QRELS_A)
        server.stop()
        assert store.meta("q") == meta
        qrels, loaded = store.load_qrels("q")
        assert loaded == meta and canonical_text(qrels) == canonical_text(QRELS_A)
        with pytest.raises(RedisConnectionError):
            store.put_qrels("q", QRELS_B)
        assert database.entry(None, "q")[0] == [meta["version"]]  # nothing was written
        server.start()  # same port, empty: the cache refills from the database
        m2, created = store.put_qrels("q", QRELS_B)
        assert created and store.meta("q")["versions"] == [meta["version"], m2["version"]]
    finally:
        conn.close()
        server.stop()


def test_a_refill_read_before_a_write_is_not_kept(database, redis_conn):
    store = DurableStore(database, RedisStore(redis_conn))
    m1, _ = store.put_qrels("q", QRELS_A)
    cache = store.cache
    cache.cache_drop("q")
    token = cache.cache_token("q")     # a reader misses, takes the generation ...
    stale = database.entry(None, "q")  # ... and reads the database
    m2, _ = store.put_qrels("q", QRELS_B)  # a write lands meanwhile
    assert cache.cache_fill("q", token, stale) is False
    assert store.meta("q") == m2 and m2["versions"] == [m1["version"], m2["version"]]
    token = cache.cache_token("q")
    assert cache.cache_fill("q", token, database.entry(None, "q")) is True


def test_a_stale_refill_left_by_a_dead_writer_expires(database, redis_conn):
    """A writer that died between its database commit and its own refresh leaves a stale
    refill no later write bumps: every refill of an id's versions expires
    (CACHED_VERSIONS_TTL_S), after which the database is read again."""
    store = DurableStore(database, RedisStore(redis_conn))
    m1, _ = store.put_qrels("q", QRELS_A)
    cache = store.cache
    cache.cache_drop("q")                  # the writer bumps the generation ...
    token = cache.cache_token("q")         # ... a reader takes it and reads the database
    stale = database.entry(None, "q")
    text = canonical_text(QRELS_B)  # the writer commits, then dies before its refresh
    database.put(None, "q", store_mod.describe(QRELS_B, text), zlib.compress(text), None)
    assert cache.cache_fill("q", token, stale) is True  # nothing bumped since: kept
    assert store.meta("q")["versions"] == [m1["version"]]  # stale, for now
    for key in ("cranfield:qrels:q", "cranfield:qrels:q:order"):
        assert 0 < redis_conn.ttl(key) <= store_mod.CACHED_VERSIONS_TTL_S
    redis_conn.expire("cranfield:qrels:q", 0)  # the refill's time is up
    assert len(store.meta("q")["versions"]) == 2  # read from the database again


def test_a_delete_clears_the_cache(store, database):
    meta, _ = store.put_qrels("q", QRELS_A)
    store.load_qrels("q")
    store.delete_qrels("q")
    if isinstance(store.cache, RedisStore):  # nothing of the id left but its generation
        assert [k.decode() for k in store.cache.redis.keys("cranfield:qrels:q*")] == [
            "cranfield:qrels:q:gen"]
    assert database.entry(None, "q") is None and database.text(None, "q", meta["version"]) is None


def test_concurrent_puts_of_one_id_all_land(store, database):
    """Eight writers put eight different judgments under one id at once: none fails, each
    version is in the order once, the positions have no gap."""
    versions, errors = [], []
    start = threading.Barrier(8)

    def put(i: int) -> None:
        qrels = cranfield.read_qrels(f"1 0 d{i} 1\n")
        start.wait()
        try:
            versions.append(store.put_qrels("hot", qrels)[0]["version"])
        except Exception as exc:  # noqa: BLE001 - the test reports any
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(store.versions("hot")) == sorted(versions) and len(set(versions)) == 8
    with database.engine.connect() as conn:
        from sqlalchemy import text

        positions = conn.execute(text("SELECT position FROM qrels_order ORDER BY position")
                                 ).scalars().all()
    assert positions == list(range(8))
    assert store.meta("hot")["versions"] == database.entry(None, "hot")[0]


def test_a_put_that_keeps_losing_the_race_is_a_503_to_retry(results_database, monkeypatch):
    """On SQLite racing writers of one id retry on the key conflict; one that loses every
    attempt (more writers of one id at once than PUT_ATTEMPTS) is told to retry (503,
    Retry-After), never a 500, and nothing of it is kept."""
    from sqlalchemy.exc import IntegrityError

    import backend.qrels_db as qrels_db

    client = ContractClient(create_app({"TESTING": True}).test_client())
    v1 = client.put("/v1/qrels/hot", json={"qrels": {"1": {"d1": 1}}}).get_json()["version"]
    attempts = []

    def always_beaten(*args, **kwargs):  # another writer took the position every time
        attempts.append(1)
        raise IntegrityError("INSERT", {}, Exception("UNIQUE constraint failed"))

    monkeypatch.setattr(qrels_db.QrelsDatabase, "_set", staticmethod(always_beaten))
    resp = client.put("/v1/qrels/hot", json={"qrels": {"1": {"d2": 1}}})
    assert resp.status_code == 503 and resp.headers["Retry-After"] == "1"
    assert resp.get_json()["detail"] == ("qrels 'hot' is being written by too many requests "
                                         "at once; retry shortly")
    assert len(attempts) == qrels_db.PUT_ATTEMPTS
    monkeypatch.undo()
    assert client.get("/v1/qrels/hot").get_json()["versions"] == [v1]


def test_concurrent_puts_with_the_same_if_match_one_wins(store):
    base, _ = store.put_qrels("gate", QRELS_A)
    outcomes = []
    start = threading.Barrier(6)

    def put(i: int) -> None:
        qrels = cranfield.read_qrels(f"1 0 e{i} 1\n")
        start.wait()
        try:
            outcomes.append(store.put_qrels("gate", qrels, if_match=base["version"])[1])
        except VersionMismatch:
            outcomes.append("412")

    threads = [threading.Thread(target=put, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(str, outcomes)) == ["412"] * 5 + ["True"]
    assert len(store.versions("gate")) == 2


def test_concurrent_first_puts_of_new_ids(store, database):
    errors = []
    start = threading.Barrier(6)

    def put(i: int) -> None:
        start.wait()
        try:
            store.put_qrels(f"id{i % 2}", QRELS_A)  # three writers make each id at once
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert count_rows(database, "qrels_sets") == 2 and count_rows(database, "qrels_order") == 2


# ----------------------------------------------------------------------------------------------
# Through the API: a second app on the same database (a restart) sees the qrels
# ----------------------------------------------------------------------------------------------

def test_a_new_app_on_the_same_database_has_the_qrels(results_database):
    first = ContractClient(create_app({"TESTING": True}).test_client())
    v1 = first.put("/v1/qrels/nightly", json={"qrels": {"1": {"d1": 1}}}).get_json()["version"]
    resp = first.put("/v1/qrels/nightly", json={"qrels": {"1": {"d1": 1, "d2": 1},
                                                          "2": {"d1": 2}}},
                     headers={"If-Match": v1})
    v2 = resp.get_json()["version"]
    body = {"run": RUN, "qrels_id": "nightly", "measures": ["map", "ndcg_cut.10"]}
    before = first.post("/v1/evaluations", json=body).get_json()
    restarted = ContractClient(create_app({"TESTING": True}).test_client())
    meta = restarted.get("/v1/qrels/nightly")
    assert meta.status_code == 200 and meta.headers["ETag"] == f'"{v2}"'
    assert meta.get_json()["versions"] == [v1, v2]
    assert restarted.get("/v1/qrels").get_json()["total"] == 1
    after = restarted.post("/v1/evaluations", json=body).get_json()
    assert after["aggregate"] == before["aggregate"] and after["aggregate"]["map"] > 0
    assert after["provenance"]["qrels_version"] == f"nightly@{v2}"
    stale = restarted.put("/v1/qrels/nightly", json={"qrels": {"1": {"d9": 1}}},
                          headers={"If-Match": v1})
    assert stale.status_code == 412
    assert restarted.delete("/v1/qrels/nightly").status_code == 204
    assert first.get("/v1/qrels/nightly").status_code == 404  # its cache was the other's


# ----------------------------------------------------------------------------------------------
# The one-shot import of qrels kept in Redis by an earlier version
# ----------------------------------------------------------------------------------------------

def test_qrels_kept_in_redis_are_imported_once(redis_conn, database, caplog, ticking):
    old = RedisStore(redis_conn)  # what an earlier version wrote: Redis alone
    m1, _ = old.put_qrels("robust", QRELS_A)
    m2, _ = old.put_qrels("robust", QRELS_B)
    old.put_qrels("robust", QRELS_A)
    old.put_qrels("qrels", QRELS_B)  # an id whose hash key looks like a tenant's index
    team, _ = old.scoped("team-a").put_qrels("robust", QRELS_B)
    known = DurableStore(database, MemoryStore())
    already, _ = known.put_qrels("kept", QRELS_A)
    old.put_qrels("kept", QRELS_B)  # the database has this id: it is not overwritten
    with caplog.at_level(logging.INFO, logger="cranfield.qrels"):
        assert import_redis_qrels(redis_conn, database) == 3
    assert "imported 3 stored qrels ids (4 versions) from Redis" in caplog.text
    assert import_redis_qrels(redis_conn, database) == 0  # once
    redis_conn.delete("cranfield:qrels-imported")
    assert import_redis_qrels(redis_conn, database) == 0  # and idempotent
    redis_conn.flushall()  # the cache lost: everything is in the database
    store = DurableStore(database, RedisStore(redis_conn))
    meta = store.meta("robust")
    assert meta["versions"] == [m1["version"], m2["version"], m1["version"]]
    assert meta == dict(m1, versions=meta["versions"], latest=m1["version"])  # as it was
    assert store.load_qrels(f"robust@{m2['version']}")[0].topics == ["7"]
    assert store.scoped("team-a").meta("robust")["version"] == team["version"]
    assert store.meta("qrels")["topics"] == 1
    assert store.meta("kept")["versions"] == [already["version"]]
    # listed by when each id was first put: the imported ones keep their time in Redis
    assert [m["id"] for m in store.list_qrels(0, 10)[0]] == ["robust", "qrels", "kept"]


def test_the_service_imports_at_start(redis_server, redis_conn, results_database, caplog,
                                      apps):
    RedisStore(redis_conn).put_qrels("legacy", QRELS_A)
    with caplog.at_level(logging.INFO, logger="cranfield.qrels"):
        app = apps({"TESTING": True, "REDIS_URL": redis_server.url})
    assert "imported 1 stored qrels ids" in caplog.text
    redis_conn.flushall()
    client = ContractClient(app.test_client())
    doc = client.post("/v1/evaluations", json={"run": RUN, "qrels_id": "legacy",
                                               "measures": ["map"]}).get_json()
    assert doc["provenance"]["qrels_version"].startswith("legacy@")
    assert doc["aggregate"]["map"] == pytest.approx(
        cranfield.evaluate(QRELS_A, cranfield.read_run(RUN), ["map"]).aggregate["map"])


def test_redis_down_at_start_the_import_waits_for_the_first_use(results_database, caplog,
                                                                apps):
    """The service starts without Redis (its routes answer 503 meanwhile); the import is done
    by the first use that reaches Redis, before that use reads anything."""
    from servers import free_port

    require_redis_server()
    server = RedisServer(port=free_port())
    with caplog.at_level(logging.WARNING, logger="cranfield.qrels"):
        app = apps({"TESTING": True, "REDIS_URL": server.url})
    assert "cannot import the qrels kept in Redis yet (ConnectionError)" in caplog.text
    client = ContractClient(app.test_client())
    assert client.get("/v1/qrels/legacy").status_code == 503
    server.start()
    try:
        conn = redis_client(server.url)
        old, _ = RedisStore(conn).put_qrels("legacy", QRELS_A)  # kept by an earlier version
        listing = client.get("/v1/qrels").get_json()
        assert [m["id"] for m in listing["items"]] == ["legacy"]  # read from the database
        conn.flushall()
        assert client.get("/v1/qrels/legacy").get_json()["version"] == old["version"]
        conn.close()
    finally:
        server.stop()


@pytest.mark.parametrize("method", ["put", "get", "delete"])
def test_an_id_ending_in_a_newline_is_refused_and_not_kept(client, method):
    """``$`` matched before a trailing newline: ``PUT /v1/qrels/dev%0A`` kept the id in the
    database, then failed with a 500 writing it into the Location header."""
    kwargs = {"data": "1 0 d1 1\n", "content_type": "text/plain"} if method == "put" else {}
    resp = getattr(client, method)("/v1/qrels/dev%0A", **kwargs)
    assert resp.status_code == 422, resp.get_data(as_text=True)
    assert resp.mimetype == "application/problem+json"
    assert list(resp.get_json()["errors"]) == ["qrels_id"]
    assert client.get("/v1/qrels").get_json()["total"] == 0


def test_the_memory_cache_of_texts_is_bounded_and_refills_from_the_database(database,
                                                                             monkeypatch):
    """Without Redis, this process caches the texts the database keeps: a new version each
    night must not grow it without end; a text dropped from it is read from the database."""
    monkeypatch.setattr(MemoryStore, "TEXT_CACHE_BYTES", 300, raising=False)
    cache = MemoryStore()
    store = DurableStore(database, cache)
    nights = [cranfield.read_qrels("".join(f"{t} 0 d{n}x{t} 1\n" for t in range(1, 30)))
              for n in range(12)]
    metas = [store.put_qrels("nightly", q)[0] for q in nights]
    assert len({m["version"] for m in metas}) == 12

    def held() -> list[bytes]:
        return [b for m in metas if (b := cache.cached_text("nightly", m["version"],
                                                             m["sha256"])) is not None]

    assert held() and sum(map(len, held())) <= 300 and len(held()) < 12
    for meta, qrels in zip(metas, nights, strict=True):
        loaded, read = store.load_qrels(f"nightly@{meta['version']}")
        assert read["version"] == meta["version"] and loaded.topics == qrels.topics
        assert sum(map(len, held())) <= 300
