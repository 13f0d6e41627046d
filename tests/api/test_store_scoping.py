"""backend/store.py in process, on both stores (issue #16): MemoryStore and RedisStore on a
private redis-server, each asked the same questions, tenant scoping first.

tests/api/test_auth.py checks tenant isolation through the routes, on the in-memory store
only; tests/integration/test_tenant_isolation_redis.py checks it on Redis through gunicorn
(in other processes, so mutmut sees none of it). Here ``RedisStore.scoped`` returning the
shared store, or a prefix that two tenants share, fails in process. The redis-server is
required: skipped without one, failing with CI=true.
"""

from __future__ import annotations

import sys
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

import cranfield
from backend import store as store_mod
from backend.store import (
    CANONICAL_HEADER,
    MemoryStore,
    NotFound,
    QrelsCache,
    RedisStore,
    VersionMismatch,
    canonical_text,
    check_if_match,
    describe,
    redis_client,
    split_ref,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from servers import RedisServer, require_redis_server  # noqa: E402

QRELS_A = cranfield.read_qrels("1 0 d1 1\n1 0 d2 0\n2 0 d1 2\n")
QRELS_B = cranfield.read_qrels("7 0 x9 1\n")


@pytest.fixture(scope="module")
def redis_url():
    require_redis_server()
    server = RedisServer()
    server.start()
    yield server.url
    server.stop()


@pytest.fixture
def ticking_clock(monkeypatch):
    """The stores' clock, made to advance a millisecond at every reading: items put one
    after the other get distinct creation times without the test sleeping."""
    import itertools

    ticks = itertools.count()
    start = time.time()
    monkeypatch.setattr(store_mod, "time", SimpleNamespace(
        time=lambda: start + next(ticks) / 1000))


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    """A new process-wide qrels cache per test: a hit left by another test (or by the other
    store: the cache is keyed by content) would hide how this store loads its blob."""
    cache = QrelsCache()
    monkeypatch.setattr(store_mod, "QRELS_CACHE", cache)
    return cache


@pytest.fixture(params=["memory", "redis"])
def store(request):
    if request.param == "memory":
        return MemoryStore()
    conn = redis_client(request.getfixturevalue("redis_url"))
    conn.flushdb()
    return RedisStore(conn)


# --------------------------------------------------------------------------------------------
# Tenant scoping
# --------------------------------------------------------------------------------------------

def test_scoped_none_is_the_shared_store(store):
    assert store.scoped(None) is store


def test_a_tenant_sees_only_its_own_qrels(store):
    a, b = store.scoped("team-a"), store.scoped("team-b")
    assert a is not store and b is not store
    meta, created = a.put_qrels("q", QRELS_A)
    assert created is True
    for other in (b, store):
        with pytest.raises(NotFound, match="no qrels 'q'"):
            other.meta("q")
        with pytest.raises(NotFound):
            other.load_qrels("q")
        with pytest.raises(NotFound):
            other.delete_qrels("q")
        assert other.list_qrels(0, 10) == ([], 0)
    # the same tenant, asked again, sees them
    again = store.scoped("team-a")
    assert again.meta("q")["version"] == meta["version"]
    assert [m["id"] for m in again.list_qrels(0, 10)[0]] == ["q"]


def test_two_tenants_keep_the_same_id_apart(store):
    a, b = store.scoped("team-a"), store.scoped("team-b")
    meta_a, _ = a.put_qrels("same", QRELS_A)
    meta_b, _ = b.put_qrels("same", QRELS_B)
    assert meta_a["version"] != meta_b["version"]
    assert a.load_qrels("same")[0].topics == ["1", "2"]
    assert b.load_qrels("same")[0].topics == ["7"]
    assert a.meta("same")["versions"] == [meta_a["version"]]
    assert b.meta("same")["versions"] == [meta_b["version"]]
    b.delete_qrels("same")
    assert a.meta("same")["version"] == meta_a["version"]
    with pytest.raises(NotFound):
        b.meta("same")


def test_the_shared_space_does_not_see_into_a_tenant_and_back(store):
    store.put_qrels("shared", QRELS_B)
    with pytest.raises(NotFound):
        store.scoped("t").meta("shared")
    assert store.meta("shared")["topics"] == 1


def test_run_blobs_are_shared_between_tenants(store):
    store.scoped("team-a").put_blob("k1", b"run bytes", 60)
    assert store.scoped("team-b").get_blob("k1") == b"run bytes"
    assert store.get_blob("k1") == b"run bytes"
    store.scoped("team-b").delete_blob("k1")
    with pytest.raises(NotFound, match="input 'k1' expired or was never stored"):
        store.get_blob("k1")


def test_redis_tenant_keys_are_under_the_tenant_prefix(redis_url):
    conn = redis_client(redis_url)
    conn.flushdb()
    shared = RedisStore(conn)
    assert shared.prefix == "cranfield"
    scoped = shared.scoped("team-a")
    assert scoped.redis is conn
    assert scoped.prefix == "cranfield:tenant:team-a"
    assert shared.scoped("team-a").prefix == scoped.prefix
    meta, _ = scoped.put_qrels("q", QRELS_A)
    v = meta["version"]
    assert sorted(k.decode() for k in conn.keys("*")) == sorted([
        "cranfield:tenant:team-a:qrels",
        "cranfield:tenant:team-a:qrels:q",
        "cranfield:tenant:team-a:qrels:q:order",
        f"cranfield:tenant:team-a:qrels:q:v:{v}",
    ])
    scoped.put_blob("b1", b"x", 60)
    assert conn.get("cranfield:blob:b1") == b"x"
    assert 0 < conn.ttl("cranfield:blob:b1") <= 60
    assert zlib.decompress(conn.get(f"cranfield:tenant:team-a:qrels:q:v:{v}")) == \
        canonical_text(QRELS_A)
    assert 0 < conn.ttl(f"cranfield:tenant:team-a:qrels:q:v:{v}") or \
        conn.ttl(f"cranfield:tenant:team-a:qrels:q:v:{v}") == -1


def test_memory_scoped_views_share_lock_texts_and_blobs_not_qrels():
    shared = MemoryStore()
    a = shared.scoped("a")
    assert shared.scoped("a") is a
    assert a._lock is shared._lock
    assert a._texts is shared._texts and a._blobs is shared._blobs
    assert a._qrels is not shared._qrels and a._order is not shared._order
    assert a._tenants == {} and shared._tenants == {"a": a}


# --------------------------------------------------------------------------------------------
# Versions, If-Match, listing, deletion (the rest of the module, on both stores)
# --------------------------------------------------------------------------------------------

def test_versions_and_if_match(store):
    m1, created = store.put_qrels("q", QRELS_A)
    assert created is True
    assert m1["id"] == "q" and m1["versions"] == [m1["version"]] and m1["latest"] == m1["version"]
    assert m1["topics"] == 2 and m1["judgments"] == 3
    assert m1["judgments_per_grade"] == {"0": 1, "1": 1, "2": 1}
    assert m1["diversity"] is False
    again, created = store.put_qrels("q", QRELS_A)
    assert created is False and again["versions"] == [m1["version"]]
    with pytest.raises(VersionMismatch, match=f"qrels 'q' is at version '{m1['version']}', "
                                              "not 'nope'"):
        store.put_qrels("q", QRELS_B, if_match="nope")
    m2, created = store.put_qrels("q", QRELS_B, if_match=f'"{m1["version"]}"')
    assert created is True
    assert store.meta("q")["versions"] == [m1["version"], m2["version"]]
    assert store.meta("q")["latest"] == m2["version"]
    assert store.meta("q", m1["version"])["version"] == m1["version"]
    assert store.meta("q", m1["version"])["latest"] == m2["version"]
    # back to the first judgments: a third entry in the order, the same version
    m3, created = store.put_qrels("q", QRELS_A)
    assert created is True and m3["version"] == m1["version"]
    assert store.meta("q")["versions"] == [m1["version"], m2["version"], m1["version"]]
    with pytest.raises(NotFound, match="no version 'ffff' of qrels 'q'"):
        store.meta("q", "ffff")
    qrels, meta = store.load_qrels(f"q@{m2['version']}")
    assert qrels.topics == ["7"] and meta["version"] == m2["version"]
    qrels, meta = store.load_qrels("q")
    assert qrels.topics == ["1", "2"] and meta["version"] == m1["version"]


def test_a_new_id_with_if_match_is_refused(store):
    with pytest.raises(VersionMismatch, match="qrels 'n' is at version None, not 'abc'"):
        store.put_qrels("n", QRELS_A, if_match="abc")
    with pytest.raises(NotFound):
        store.meta("n")


def test_list_offset_limit_and_delete(store, ticking_clock):
    for name in ("one", "two", "three"):
        store.put_qrels(name, QRELS_A if name != "two" else QRELS_B)
    items, total = store.list_qrels(0, 10)
    assert total == 3 and [m["id"] for m in items] == ["one", "two", "three"]
    items, total = store.list_qrels(1, 1)
    assert total == 3 and [m["id"] for m in items] == ["two"]
    assert [m["id"] for m in store.list_qrels(2, 5)[0]] == ["three"]
    store.delete_qrels("two")
    with pytest.raises(NotFound, match="no qrels 'two'"):
        store.delete_qrels("two")
    with pytest.raises(NotFound, match="no qrels 'two'"):
        store.meta("two")
    items, total = store.list_qrels(0, 10)
    assert total == 2 and [m["id"] for m in items] == ["one", "three"]
    # the id can be used again
    meta, created = store.put_qrels("two", QRELS_A)
    assert created is True and meta["versions"] == [meta["version"]]


def test_diversity_qrels_keep_their_subtopics(store):
    q = cranfield.read_qrels("1 1 d1 1\n1 2 d1 0\n", diversity=True)
    meta, _ = store.put_qrels("div", q, diversity=True)
    assert meta["diversity"] is True
    loaded, meta = store.load_qrels("div")
    assert loaded.subtopics is not None and sorted(loaded.subtopics.tolist()) == ["1", "2"]
    adhoc, _ = store.put_qrels("adhoc", q)
    assert adhoc["version"] != meta["version"]


def test_blob_expiry(store):
    store.put_blob("gone", b"x", 1)
    assert store.get_blob("gone") == b"x"
    with pytest.raises(NotFound, match="input 'missing' expired or was never stored"):
        store.get_blob("missing")


def test_memory_blob_ttl_is_honoured(monkeypatch):
    s = MemoryStore()
    now = time.time()
    monkeypatch.setattr(store_mod, "time", SimpleNamespace(time=lambda: now))
    assert s.put_blob("k", b"data", 10) == "k"
    monkeypatch.setattr(store_mod, "time", SimpleNamespace(time=lambda: now + 10))
    assert s.get_blob("k") == b"data"
    monkeypatch.setattr(store_mod, "time", SimpleNamespace(time=lambda: now + 10.5))
    with pytest.raises(NotFound):
        s.get_blob("k")


# --------------------------------------------------------------------------------------------
# The helpers
# --------------------------------------------------------------------------------------------

def test_canonical_text_and_describe():
    text = canonical_text(cranfield.read_qrels("2 0 b 1\n1 0 z 0\n1 0 a 2\n"))
    assert text == b"# cranfield-qrels-2 adhoc\n1 0 a 2\n1 0 z 0\n2 0 b 1\n"
    q = cranfield.read_qrels("1 2 d1 1\n1 1 d1 0\n", diversity=True)
    assert canonical_text(q, True) == b"# cranfield-qrels-2 subtopics\n1 1 d1 0\n1 2 d1 1\n"
    assert canonical_text(q) == b"# cranfield-qrels-2 adhoc\n1 0 d1 0\n1 0 d1 1\n"
    assert CANONICAL_HEADER[True] != CANONICAL_HEADER[False]
    meta = describe(q, text, True)
    import hashlib

    digest = hashlib.sha256(text).hexdigest()
    assert meta == {"version": digest[:16], "sha256": digest, "topics": 1, "judgments": 2,
                    "judgments_per_grade": {"0": 1, "1": 1}, "size_bytes": len(text),
                    "diversity": True}


def test_check_if_match_and_split_ref():
    check_if_match("q", "v1", None)
    check_if_match("q", "v1", "v1")
    check_if_match("q", "v1", '"v1"')
    check_if_match("q", None, "")
    with pytest.raises(VersionMismatch):
        check_if_match("q", "v1", "v2")
    assert VersionMismatch.status == 412 and NotFound.status == 404
    assert split_ref("q") == ("q", None)
    assert split_ref("q@v1") == ("q", "v1")
    assert split_ref("q@") == ("q", None)


def test_qrels_cache_hits_misses_and_eviction():
    cache = QrelsCache(size=2)
    blobs = {k: zlib.compress(canonical_text(QRELS_A)) for k in ("a", "b", "c")}
    loads = []

    def loader(k):
        return lambda: loads.append(k) or blobs[k]

    first = cache.get("a", loader("a"), False)
    assert cache.get("a", loader("a"), False) is first
    assert cache.stats() == {"hits": 1, "misses": 1, "size": 1}
    cache.get("b", loader("b"), False)
    cache.get("a", loader("a"), False)  # a is now the most recent
    cache.get("c", loader("c"), False)  # evicts b, the least recent
    assert cache.stats() == {"hits": 2, "misses": 3, "size": 2}
    cache.get("a", loader("a"), False)
    cache.get("b", loader("b"), False)
    assert loads == ["a", "b", "c", "b"]
    assert QrelsCache().size == 16


# --------------------------------------------------------------------------------------------
# Loading through an empty cache, and the Redis store's keys and retries
# --------------------------------------------------------------------------------------------

def test_load_reads_the_stored_blob_through_the_cache(store, fresh_cache):
    meta, _ = store.put_qrels("q", QRELS_A)
    qrels, got = store.load_qrels("q")
    assert fresh_cache.stats() == {"hits": 0, "misses": 1, "size": 1}
    assert qrels.topics == ["1", "2"] and got["version"] == meta["version"]
    assert canonical_text(qrels) == canonical_text(QRELS_A)
    store.load_qrels("q")
    assert fresh_cache.stats() == {"hits": 1, "misses": 1, "size": 1}


def test_diversity_is_read_back_from_the_stored_meta(store):
    q = cranfield.read_qrels("1 1 d1 1\n1 2 d1 0\n", diversity=True)
    store.put_qrels("div", q, diversity=True)
    loaded, meta = store.load_qrels("div")
    assert meta["diversity"] is True
    assert canonical_text(loaded, True) == canonical_text(q, True)
    store.put_qrels("adhoc", QRELS_A)
    loaded, meta = store.load_qrels("adhoc")
    assert meta["diversity"] is False and canonical_text(loaded) == canonical_text(QRELS_A)


def test_a_returning_version_keeps_its_first_metadata(store, ticking_clock):
    m1, _ = store.put_qrels("q", QRELS_A)
    store.put_qrels("q", QRELS_B)
    m3, created = store.put_qrels("q", QRELS_A)
    assert created is True and m3["created"] == m1["created"]


def test_re_putting_an_id_keeps_its_place_in_the_list(store, ticking_clock):
    store.put_qrels("one", QRELS_A)
    store.put_qrels("two", QRELS_A)
    store.put_qrels("one", QRELS_B)  # a new version of the first id
    assert [m["id"] for m in store.list_qrels(0, 10)[0]] == ["one", "two"]


def test_deleting_a_missing_blob_is_quiet(store):
    store.delete_blob("never-stored")
    store.put_blob("k", b"x", 60)
    store.delete_blob("k")
    store.delete_blob("k")
    with pytest.raises(NotFound):
        store.get_blob("k")


def test_redis_delete_leaves_no_key_behind(redis_url):
    conn = redis_client(redis_url)
    conn.flushdb()
    s = RedisStore(conn).scoped("t")
    s.put_qrels("q", QRELS_A)
    s.put_qrels("q", QRELS_B)
    s.delete_qrels("q")
    assert conn.keys("*") == []


def test_redis_load_of_a_deleted_blob_is_not_found(redis_url):
    conn = redis_client(redis_url)
    conn.flushdb()
    s = RedisStore(conn)
    meta, _ = s.put_qrels("q", QRELS_A)
    conn.delete(f"cranfield:qrels:q:v:{meta['version']}")
    with pytest.raises(NotFound) as err:
        s.load_qrels("q")
    assert str(err.value) == "qrels 'q' was deleted"
    # the error's traceback holds the client in a cycle: were its socket collected before
    # the connection, an unclosed-socket warning would fail whichever test runs then
    conn.close()


def test_redis_list_skips_an_id_whose_qrels_are_gone(redis_url):
    conn = redis_client(redis_url)
    conn.flushdb()
    s = RedisStore(conn)
    conn.zadd("cranfield:qrels", {"ghost": 1.0})  # listed, but its versions were deleted
    s.put_qrels("real", QRELS_A)
    items, total = s.list_qrels(0, 10)
    assert total == 2 and [m["id"] for m in items] == ["real"]


def test_redis_put_retries_when_another_writer_moves_the_order(redis_url, monkeypatch):
    conn = redis_client(redis_url)
    conn.flushdb()
    s = RedisStore(conn)
    calls = []
    real = store_mod.check_if_match

    def racing(qrels_id, latest, if_match):
        calls.append(latest)
        if len(calls) == 1:  # another writer pushes a version between WATCH and EXEC
            conn.rpush("cranfield:qrels:q:order", "other")
        real(qrels_id, latest, if_match)

    monkeypatch.setattr(store_mod, "check_if_match", racing)
    conn.hset("cranfield:qrels:q", "other", b'{"version": "other", "created": 1.0}')
    meta, created = s.put_qrels("q", QRELS_A)
    assert calls == [None, "other"]
    assert created is True and meta["versions"] == ["other", meta["version"]]


def test_redis_client_settings(tmp_path):
    client = redis_client("redis://127.0.0.1:1/0")
    pool = client.connection_pool
    assert pool.connection_class.__name__ == "BlobConnection"
    kw = pool.connection_kwargs
    assert (kw["socket_timeout"], kw["socket_connect_timeout"], kw["socket_read_size"],
            kw["health_check_interval"]) == (5, 2, 1 << 20, 10)
    import redis

    assert kw["retry_on_error"] == [redis.ConnectionError, redis.TimeoutError]
    retry = kw["retry"]
    assert retry._retries == 2
    assert (retry._backoff._cap, retry._backoff._base) == (0.2, 0.01)
    unix = redis_client(f"unix://{tmp_path}/redis.sock")
    assert unix.connection_pool.connection_class is redis.UnixDomainSocketConnection


def test_the_cache_reads_diversity_and_names_the_qrels_in_errors(fresh_cache):
    q = cranfield.read_qrels("1 1 d1 1\n1 2 d1 0\n", diversity=True)
    blob = zlib.compress(canonical_text(q, True))
    loaded = fresh_cache.get("div", lambda: blob, True)
    assert sorted(loaded.subtopics.tolist()) == ["1", "2"]
    with pytest.raises(cranfield.InputError) as err:
        fresh_cache.get("bad", lambda: zlib.compress(b"1 0 d\n"), False)
    assert str(err.value).startswith("qrels:1: ")


def test_if_match_strips_only_quotes():
    with pytest.raises(VersionMismatch):
        check_if_match("q", "v1", "Xv1X")


def test_describe_defaults_to_ad_hoc():
    assert describe(QRELS_A, canonical_text(QRELS_A))["diversity"] is False
