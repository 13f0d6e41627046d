"""Stored qrels (immutable versions, compact in Redis) and run blobs for queued jobs.

Since issue #25 the results database keeps stored qrels (``backend/qrels_db.py``) and these
stores are their cache (the ``cache_*`` methods); ``RedisStore`` and ``MemoryStore`` still
answer the whole interface on their own (tests, and the layout of the cache).

Qrels are kept as zlib-compressed canonical TREC text — topic, subtopic, docid, grade, sorted —
so a version is the SHA-256 of that text: putting the same judgments twice makes no new
version, putting different ones does. Decoded qrels are cached per process by content hash
(LRU), so fifty jobs against the same qrels decode them once.
"""

from __future__ import annotations

import hashlib
import threading
import time
import zlib
from collections import OrderedDict

import orjson

import cranfield
from cranfield import Qrels

from . import keys

VERSION_CHARS = 16
# A refill of an id's cached versions lasts this long: the generation guard keeps a reader's
# stale refill out while a write runs, but a writer that died between its database commit
# and its own refresh leaves no later bump; the cache then answers the older versions at
# most this long before the database is read again
CACHED_VERSIONS_TTL_S = 300


class StoreError(Exception):
    """Base of the store's errors; ``status`` is the HTTP status the API answers with."""

    status = 400


class NotFound(StoreError):
    status = 404


class VersionMismatch(StoreError):
    status = 412


class Busy(StoreError):
    """Too many writes of one id at once to land this one now (SQLite only: its writers
    race for the next position): the client is told to retry, never a 500."""

    status = 503


# The first line of every canonical text: the format's version and the qrels' kind. It is a
# comment to the reader, and part of the digest, so ad hoc and subtopic readings of the same
# lines are different versions.
CANONICAL_HEADER = {False: b"# cranfield-qrels-2 adhoc\n", True: b"# cranfield-qrels-2 subtopics\n"}
# The kinds trec_eval reads with -R (issue #28) have their own header, so that the same lines
# qrels declaring real-valued gains (issue #31): their own header, so that their digest differs
# from integer grades', and a text read back is read as real gains (QrelsCache.get)
REAL_GAINS_HEADER = b"# cranfield-qrels-2 adhoc real-gains\n"
# stored as plain qrels and as judgment groups are different versions
KIND_HEADER = {kind: f"# cranfield-qrels-2 {kind}\n".encode() for kind in
               ("qrels_jg", "prefs", "qrels_prefs")}


def _level_text(level: float) -> str:
    """A preference's rel_level as the canonical text writes it: an integral value as an
    integer (``1``), another as Python's shortest round-trip repr (``0.5``, ``1e-05``)."""
    return str(int(level)) if level.is_integer() and abs(level) < 2.0**53 else repr(level)


def canonical_kind_text(judgments, qrels_format: str) -> bytes:
    """Judgment groups (``qrels_jg``: ``qid jg docno rel``) or preferences (``prefs``:
    ``qid jg jsg docno rel_level``; ``qrels_prefs``: ``qid jg docno rel_level``) as text of
    that format, the kind's header first, lines in byte order: what
    :func:`cranfield.inputs.judgment_files.read_qrels_jg` /
    :func:`cranfield.inputs.judgment_files.read_prefs` read back to the same judgments (the grammar
    keeps spaces out of ids)."""
    if qrels_format == "qrels_jg":
        rows = [f"{t} {jg} {d} {rel}" for t, groups in judgments.topics.items()
                for jg, docs in groups.items() for d, rel in docs.items()]
    elif qrels_format == "qrels_prefs":
        rows = [f"{t} {jg} {d} {_level_text(level)}" for t, items in judgments.topics.items()
                for jg, _, d, level in items]
    else:
        rows = [f"{t} {jg} {jsg} {d} {_level_text(level)}"
                for t, items in judgments.topics.items() for jg, jsg, d, level in items]
    rows.sort(key=lambda r: r.encode("utf-8", "surrogateescape"))
    return KIND_HEADER[qrels_format] + "".join(r + "\n" for r in rows).encode(
        "utf-8", "surrogateescape")


def read_kind(data: bytes, qrels_format: str, name: str = "qrels"):
    """Judgments of a kind trec_eval reads with -R from their text: the one reader of each
    (:mod:`cranfield.inputs.judgment_files`)."""
    from cranfield.inputs.judgment_files import read_prefs, read_qrels_jg

    if qrels_format == "qrels_jg":
        return read_qrels_jg(bytes(data), name=name)
    return read_prefs(bytes(data), name=name, qrels=qrels_format == "qrels_prefs")


def canonical_text(qrels: Qrels, diversity: bool = False) -> bytes:
    """The judgments as TREC qrels text, one meaning one byte string: a header line naming
    the kind, then ``topic subtopic docid grade`` rows in (topic, docid, subtopic) order.
    The input grammar guarantees that no id holds a space, tab, newline or control
    character, so the text reads back (:func:`cranfield.read_qrels`) to exactly these
    judgments. Ad hoc qrels keep no subtopic (trec_eval ignores that column: ``0``)."""
    if diversity and qrels.subtopics is not None:
        subs = [str(s) for s in qrels.subtopics.tolist()]
    else:
        subs = ["0"] * len(qrels)
    rows = sorted(zip((qrels.topics[t] for t in qrels.topic_index.tolist()),
                      qrels.docids.tolist(), subs, qrels.grades.tolist(), strict=True))
    # (a real gain is written as Python's repr of the double: the shortest text reading back
    # to it, in the real-gain grammar)
    body = "".join(f"{t} {s} {d} {g!r}\n" for t, d, s, g in rows).encode("utf-8")
    if getattr(qrels, "gains", "integer") == "real" and not diversity:
        return REAL_GAINS_HEADER + body
    return CANONICAL_HEADER[bool(diversity)] + body


def describe(qrels: Qrels, text: bytes, diversity: bool = False,
             qrels_format: str = "qrels") -> dict:
    """The metadata of a version (``text``: its canonical text). A kind read with -R
    (``qrels_format``) counts its lines as judgments and their last field as the grade."""
    grades: dict[str, int] = {}
    if qrels_format == "qrels":
        judged = qrels.grades.tolist()
    else:
        judged = [line.rsplit(b" ", 1)[1].decode() for line in text.splitlines()[1:]]
    for g in judged:
        grades[str(g)] = grades.get(str(g), 0) + 1
    digest = hashlib.sha256(text).hexdigest()
    meta = {"version": digest[:VERSION_CHARS], "sha256": digest, "topics": len(qrels.topics),
            "judgments": len(judged), "judgments_per_grade": dict(sorted(grades.items())),
            "size_bytes": len(text), "diversity": bool(diversity)}
    if qrels_format != "qrels":  # a plain version's metadata stays as it was
        meta["qrels_format"] = qrels_format
    if qrels_format == "qrels" and getattr(qrels, "gains", "integer") == "real":
        meta["gains"] = "real"  # (integer grades: no key, as before)
    return meta


def version_text(qrels, diversity: bool = False, qrels_format: str = "qrels"
                 ) -> tuple[bytes, dict]:
    """(canonical text, metadata) of a version to store: plain qrels or a kind read with -R
    (``qrels_format``: ``qrels_jg``, ``prefs``, ``qrels_prefs``)."""
    text = (canonical_text(qrels, diversity) if qrels_format == "qrels"
            else canonical_kind_text(qrels, qrels_format))
    return text, describe(qrels, text, diversity, qrels_format)


class QrelsCache:
    """Per-process LRU of decoded qrels keyed by content hash, with hit/miss counters."""

    def __init__(self, size: int = 16):
        self.size = size
        self._items: OrderedDict[str, Qrels] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, sha256: str, blob_loader, diversity: bool, qrels_format: str = "qrels"):
        with self._lock:
            if sha256 in self._items:
                self.hits += 1
                self._items.move_to_end(sha256)
                return self._items[sha256]
            self.misses += 1
        text = zlib.decompress(blob_loader())
        gains = "real" if text.startswith(REAL_GAINS_HEADER) else "integer"
        qrels = (cranfield.read_qrels(text, name="qrels", diversity=diversity, gains=gains)
                 if qrels_format == "qrels"
                 # the kind's header is the store's line, not a comment of the judgments
                 # (trec_eval 9.0.8 refuses comment lines in these files)
                 else read_kind(text.removeprefix(KIND_HEADER[qrels_format]), qrels_format))
        with self._lock:
            self._items[sha256] = qrels
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return qrels

    def stats(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "size": len(self._items)}


QRELS_CACHE = QrelsCache()


def check_if_match(qrels_id: str, latest: str | None, if_match: str | None,
                   kind: str = "qrels") -> None:
    """``If-Match`` must name the latest version (an ETag, quoted or not), if given (``kind``:
    what the id names in the message: qrels, topic metadata)."""
    if if_match is not None and if_match.strip('"') != (latest or ""):
        raise VersionMismatch(f"{kind} {qrels_id!r} is at version {latest!r}, not {if_match!r}")


def split_ref(ref: str) -> tuple[str, str | None]:
    """``id`` or ``id@version``."""
    qrels_id, _, version = ref.partition("@")
    return qrels_id, version or None


class RedisStore:
    """Qrels versions and run blobs in Redis.

    Keys, under ``cranfield`` (or ``cranfield:tenant:{tenant}`` for a tenant's qrels):
    ``…:qrels:{id}`` (hash version -> metadata JSON), ``…:{id}:order`` (list of versions, oldest
    first), ``…:{id}:v:{version}`` (compressed text), ``…:qrels`` (sorted set of ids by
    creation time); ``cranfield:blob:{key}`` (a run or inline qrels, as sent, with a TTL).
    """

    def __init__(self, redis, prefix: str = keys.ROOT):
        self.redis = redis
        self.prefix = prefix  # a tenant's qrels live under their own prefix

    def scoped(self, tenant: str | None) -> RedisStore:
        """The store as ``tenant`` sees it: its own qrels (ids are per tenant); run blobs are
        shared (their keys are random). None: the one shared space of a service without
        API keys."""
        return self if tenant is None else RedisStore(self.redis, keys.space(tenant))

    # -- qrels ------------------------------------------------------------------------------
    def put_qrels(self, qrels_id: str, qrels: Qrels, if_match: str | None = None,
                  diversity: bool = False, qrels_format: str = "qrels",
                  extra_meta: dict | None = None) -> tuple[dict, bool]:
        text, meta = version_text(qrels, diversity, qrels_format)
        meta.update(extra_meta or {})  # (recorded on a stored version too: _note)
        version = meta["version"]
        base, order = keys.qrels(self.prefix, qrels_id), keys.qrels_order(self.prefix, qrels_id)
        with self.redis.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(order)
                    latest = pipe.lindex(order, -1)
                    latest = latest.decode() if latest else None
                    check_if_match(qrels_id, latest, if_match)
                    if latest == version:
                        pipe.unwatch()
                        self._note(base, version, extra_meta)
                        return self.meta(qrels_id, version), False
                    exists = pipe.hexists(base, version)
                    meta["created"] = time.time()
                    meta["id"] = qrels_id
                    pipe.multi()
                    if not exists:
                        pipe.hset(base, version, orjson.dumps(meta))
                        pipe.set(keys.qrels_text(self.prefix, qrels_id, version),
                                 zlib.compress(text, 6))
                    pipe.rpush(order, version)
                    pipe.zadd(keys.qrels_index(self.prefix), {qrels_id: meta["created"]}, nx=True)
                    pipe.execute()
                    if exists:
                        self._note(base, version, extra_meta)
                    return self.meta(qrels_id, version), True
                except self._watch_error():
                    continue

    def _note(self, base: str, version: str, extra: dict | None) -> None:
        """Record ``extra`` in a stored version's metadata (see QrelsDatabase._note)."""
        if extra:
            stored = orjson.loads(self.redis.hget(base, version))
            self.redis.hset(base, version, orjson.dumps({**stored, **extra}))

    @staticmethod
    def _watch_error():
        import redis

        return redis.WatchError

    def versions(self, qrels_id: str) -> list[str]:
        order = keys.qrels_order(self.prefix, qrels_id)
        return [v.decode() for v in self.redis.lrange(order, 0, -1)]

    def meta(self, qrels_id: str, version: str | None = None) -> dict:
        base = keys.qrels(self.prefix, qrels_id)
        if version is None:
            latest = self.redis.lindex(keys.qrels_order(self.prefix, qrels_id), -1)
            if latest is None:
                raise NotFound(f"no qrels {qrels_id!r}")
            version = latest.decode()
        raw = self.redis.hget(base, version)
        if raw is None:
            raise NotFound(f"no version {version!r} of qrels {qrels_id!r}")
        meta = orjson.loads(raw)
        meta["versions"] = self.versions(qrels_id)
        meta["latest"] = meta["versions"][-1] if meta["versions"] else None
        return meta

    def load_qrels(self, ref: str) -> tuple[Qrels, dict]:
        qrels_id, version = split_ref(ref)
        meta = self.meta(qrels_id, version)
        key = keys.qrels_text(self.prefix, qrels_id, meta["version"])

        def blob() -> bytes:
            data = self.redis.get(key)
            if data is None:
                raise NotFound(f"qrels {ref!r} was deleted")
            return data

        return QRELS_CACHE.get(meta["sha256"], blob, meta.get("diversity", False),
                               meta.get("qrels_format", "qrels")), meta

    def list_qrels(self, offset: int, limit: int) -> tuple[list[dict], int]:
        index = keys.qrels_index(self.prefix)
        total = self.redis.zcard(index)
        ids = [i.decode() for i in self.redis.zrange(index, offset, offset + limit - 1)]
        items = []
        for qrels_id in ids:
            try:
                items.append(self.meta(qrels_id))
            except NotFound:
                continue
        return items, total

    def delete_qrels(self, qrels_id: str) -> None:
        versions = self.versions(qrels_id)
        if not versions:
            raise NotFound(f"no qrels {qrels_id!r}")
        self.redis.delete(keys.qrels(self.prefix, qrels_id),
                          keys.qrels_order(self.prefix, qrels_id),
                          *(keys.qrels_text(self.prefix, qrels_id, v) for v in set(versions)))
        self.redis.zrem(keys.qrels_index(self.prefix), qrels_id)

    # -- as the cache of stored qrels (backend/qrels_db.py: the database keeps them) ------
    # The same keys as above, so qrels an earlier version kept here are read as cached (and
    # imported once), and the generation key ``…:{id}:gen``, bumped by every write.

    # Fills the id's metadata and order unless its generation moved since the token was read.
    # KEYS: generation, metadata hash, order list, index; ARGV: token, id, created, number of
    # versions, then version and metadata pairs, then the order.
    _FILL = """
    if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then
        return 0
    end
    redis.call('DEL', KEYS[2], KEYS[3])
    local n = tonumber(ARGV[4])
    local ttl = tonumber(ARGV[5])
    for i = 0, n - 1 do
        redis.call('HSET', KEYS[2], ARGV[6 + 2 * i], ARGV[7 + 2 * i])
    end
    for i = 6 + 2 * n, #ARGV do
        redis.call('RPUSH', KEYS[3], ARGV[i])
    end
    redis.call('EXPIRE', KEYS[2], ttl)
    redis.call('EXPIRE', KEYS[3], ttl)
    redis.call('ZADD', KEYS[4], 'NX', ARGV[3], ARGV[2])
    return 1
    """

    def cached_entry(self, qrels_id: str) -> tuple[list[str], dict[str, dict], float] | None:
        """(versions, {version: metadata}, 0.0) of the id if cached, else None."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.lrange(keys.qrels_order(self.prefix, qrels_id), 0, -1)
            pipe.hgetall(keys.qrels(self.prefix, qrels_id))
            order, metas = pipe.execute()
        order = [v.decode() for v in order]
        metas = {k.decode(): orjson.loads(v) for k, v in metas.items()}
        if not order or any(v not in metas for v in order):
            return None
        return order, metas, 0.0

    def cache_token(self, qrels_id: str) -> str:
        gen = self.redis.get(keys.qrels_generation(self.prefix, qrels_id))
        return gen.decode() if gen is not None else ""

    def cache_fill(self, qrels_id: str, token: str,
                   entry: tuple[list[str], dict[str, dict], float]) -> bool:
        order, metas, created = entry
        pairs = [x for v, m in metas.items() for x in (v, orjson.dumps(m))]
        script = self.redis.register_script(self._FILL)
        return bool(script(keys=[keys.qrels_generation(self.prefix, qrels_id),
                                 keys.qrels(self.prefix, qrels_id),
                                 keys.qrels_order(self.prefix, qrels_id),
                                 keys.qrels_index(self.prefix)],
                           args=[token, qrels_id, repr(float(created)), len(metas),
                                 CACHED_VERSIONS_TTL_S, *pairs, *order]))

    def cache_drop(self, qrels_id: str, versions=(), forget: bool = False) -> None:
        """Bump the id's generation and drop its metadata and order; ``forget`` (the id was
        deleted): its texts of ``versions`` and its place in the index too."""
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.incr(keys.qrels_generation(self.prefix, qrels_id))
            pipe.delete(keys.qrels(self.prefix, qrels_id),
                        keys.qrels_order(self.prefix, qrels_id),
                        *(keys.qrels_text(self.prefix, qrels_id, v) for v in versions))
            if forget:
                pipe.zrem(keys.qrels_index(self.prefix), qrels_id)
            pipe.execute()

    def cached_text(self, qrels_id: str, version: str, sha256: str) -> bytes | None:
        return self.redis.get(keys.qrels_text(self.prefix, qrels_id, version))

    def cache_put_text(self, qrels_id: str, version: str, sha256: str, blob: bytes) -> None:
        self.redis.set(keys.qrels_text(self.prefix, qrels_id, version), blob)

    # -- runs -------------------------------------------------------------------------------
    def put_blob(self, key: str, data: bytes, ttl: int) -> str:
        # Runs are stored as sent: they live minutes, and compressing hundreds of megabytes
        # would cost the request more than the memory it saves.
        self.redis.set(keys.blob(key), data, ex=ttl)
        return key

    def get_blob(self, key: str) -> bytes:
        data = self.redis.get(keys.blob(key))
        if data is None:
            raise NotFound(f"input {key!r} expired or was never stored")
        return data

    def delete_blob(self, key: str) -> None:
        self.redis.delete(keys.blob(key))


class TextCache:
    """Compressed qrels texts by content hash, the least recently used dropped once they
    hold more than ``max_bytes``: the database's texts as this process caches them without
    Redis. Bounded, as a cache must be: every version put or read stays otherwise, and a
    service that takes a new version each night grows until it is killed."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0

    def get(self, sha256: str) -> bytes | None:
        blob = self._items.get(sha256)
        if blob is not None:
            self._items.move_to_end(sha256)
        return blob

    def put(self, sha256: str, blob: bytes) -> None:
        old = self._items.pop(sha256, None)
        self._bytes -= len(old) if old is not None else 0
        if len(blob) > self.max_bytes:
            return  # larger than the whole cache: read from the database each time
        self._items[sha256] = blob
        self._bytes += len(blob)
        while self._bytes > self.max_bytes:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= len(dropped)

    @property
    def size_bytes(self) -> int:
        return self._bytes


class MemoryStore:
    """The same interface in process memory: the embedded default when no REDIS_URL is set
    (``make run`` needs nothing else). Not shared between processes."""

    #: what the texts cached for the database may hold (``cached_text``), compressed
    TEXT_CACHE_BYTES = 256 << 20

    def __init__(self, parent: MemoryStore | None = None):
        self._lock = parent._lock if parent else threading.Lock()
        self._qrels: dict[str, dict[str, dict]] = {}
        self._order: dict[str, list[str]] = {}
        self._texts: dict[str, bytes] = parent._texts if parent else {}
        self._cached: TextCache = (parent._cached if parent
                                   else TextCache(self.TEXT_CACHE_BYTES))
        self._blobs: dict[str, tuple[float, bytes]] = parent._blobs if parent else {}
        self._tenants: dict[str, MemoryStore] = {}

    def scoped(self, tenant: str | None) -> MemoryStore:
        """The store as ``tenant`` sees it (see RedisStore.scoped)."""
        if tenant is None:
            return self
        with self._lock:
            return self._tenants.setdefault(tenant, MemoryStore(parent=self))

    def put_qrels(self, qrels_id: str, qrels: Qrels, if_match: str | None = None,
                  diversity: bool = False, qrels_format: str = "qrels",
                  extra_meta: dict | None = None) -> tuple[dict, bool]:
        text, meta = version_text(qrels, diversity, qrels_format)
        meta.update(extra_meta or {})  # (recorded on a stored version too: _note)
        with self._lock:
            order = self._order.get(qrels_id, [])
            latest = order[-1] if order else None
            check_if_match(qrels_id, latest, if_match)
            if latest == meta["version"]:
                self._qrels[qrels_id][latest].update(extra_meta or {})
                return self._meta(qrels_id, latest), False
            meta.update(created=time.time(), id=qrels_id)
            self._qrels.setdefault(qrels_id, {}).setdefault(meta["version"], meta).update(
                extra_meta or {})
            self._texts[meta["sha256"]] = zlib.compress(text, 6)
            self._order.setdefault(qrels_id, []).append(meta["version"])
            return self._meta(qrels_id, meta["version"]), True

    def _meta(self, qrels_id: str, version: str | None) -> dict:
        order = self._order.get(qrels_id)
        if not order:
            raise NotFound(f"no qrels {qrels_id!r}")
        version = version or order[-1]
        if version not in self._qrels[qrels_id]:
            raise NotFound(f"no version {version!r} of qrels {qrels_id!r}")
        return dict(self._qrels[qrels_id][version], versions=list(order), latest=order[-1])

    def meta(self, qrels_id: str, version: str | None = None) -> dict:
        with self._lock:
            return self._meta(qrels_id, version)

    def load_qrels(self, ref: str) -> tuple[Qrels, dict]:
        qrels_id, version = split_ref(ref)
        meta = self.meta(qrels_id, version)
        return QRELS_CACHE.get(meta["sha256"], lambda: self._texts[meta["sha256"]],
                               meta.get("diversity", False),
                               meta.get("qrels_format", "qrels")), meta

    def list_qrels(self, offset: int, limit: int) -> tuple[list[dict], int]:
        with self._lock:
            ids = sorted(self._order, key=lambda i: self._qrels[i][self._order[i][0]]["created"])
            return [self._meta(i, None) for i in ids[offset:offset + limit]], len(ids)

    def delete_qrels(self, qrels_id: str) -> None:
        with self._lock:
            if qrels_id not in self._order:
                raise NotFound(f"no qrels {qrels_id!r}")
            del self._order[qrels_id]
            del self._qrels[qrels_id]

    # -- as the cache of stored qrels (see RedisStore) ---------------------------------------
    # Only the texts, by content: they are immutable, while an id's versions change, and
    # this memory is not shared (gunicorn may run several processes without Redis: one
    # would keep answering versions another has replaced). The database answers those.
    def cached_entry(self, qrels_id: str) -> None:
        return None

    def cache_token(self, qrels_id: str) -> int:
        return 0

    def cache_fill(self, qrels_id: str, token: int, entry) -> bool:
        return False

    def cache_drop(self, qrels_id: str, versions=(), forget: bool = False) -> None:
        return None  # texts are kept by content, which other ids and tenants may share

    def cached_text(self, qrels_id: str, version: str, sha256: str) -> bytes | None:
        with self._lock:
            return self._cached.get(sha256)

    def cache_put_text(self, qrels_id: str, version: str, sha256: str, blob: bytes) -> None:
        with self._lock:
            self._cached.put(sha256, blob)

    def put_blob(self, key: str, data: bytes, ttl: int) -> str:
        with self._lock:
            self._blobs[key] = (time.time() + ttl, data)
        return key

    def get_blob(self, key: str) -> bytes:
        with self._lock:
            expires, data = self._blobs.get(key, (0.0, b""))
        if expires < time.time():
            raise NotFound(f"input {key!r} expired or was never stored")
        return data

    def delete_blob(self, key: str) -> None:
        with self._lock:
            self._blobs.pop(key, None)


def redis_client(url: str):
    """A Redis client that survives a Redis restart: a pooled connection the server closed is
    replaced and the command retried (twice, with a short back-off), instead of failing the
    first request after Redis comes back."""
    from redis import ConnectionError as RedisConnectionError
    from redis import Redis
    from redis import TimeoutError as RedisTimeoutError
    from redis.backoff import ExponentialBackoff
    from redis.retry import Retry

    extra = {"connection_class": _blob_connection()} if url.startswith("redis://") else {}
    # Replies are read 1 MiB at a time rather than redis-py's 64 KiB: a worker fetching a
    # 60 MB piece of a run waits ~20% less (0.115 -> 0.095 s here)
    return Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2,
                          socket_read_size=1 << 20,
                          retry=Retry(ExponentialBackoff(cap=0.2, base=0.01), 2),
                          retry_on_error=[RedisConnectionError, RedisTimeoutError],
                          health_check_interval=10, **extra)


def _blob_connection():
    """A TCP connection whose replies hiredis parses (in C) but whose commands are packed by
    redis-py's Python packer, which hands large values (a run of hundreds of MB) to the socket
    as they are; hiredis's packer copies every byte first (0.5 s for 240 MB here)."""
    from redis.connection import Connection, PythonRespSerializer

    class BlobConnection(Connection):
        def _construct_command_packer(self, packer):
            return packer or PythonRespSerializer(self._buffer_cutoff, self.encoder.encode)

    return BlobConnection
