"""Stored qrels kept durably (issue #25): the results database is their system of record,
Redis their cache (without Redis, this process's memory caches their texts only: see
``MemoryStore.cached_entry``).

Tables, on the same metadata as ``backend.results`` (so the same Alembic migrations make
them: ``0004_stored_qrels``): ``qrels_sets`` (one per tenant and qrels id, with its creation
time, which orders the listing), ``qrels_versions`` (one per distinct version of an id: its
metadata as ``backend.store.describe`` gives it, and its zlib-compressed canonical text) and
``qrels_order`` (the id's versions as they were put, oldest first: a version put again after
another comes back as a new entry, as on Redis). The shared space of a service without API
keys is the tenant ``''``, as for results.

:class:`DurableStore` is the store the routes and ``backend.tasks`` use (the interface of
``backend.store.RedisStore``): writes go to the database, then refresh the cache; reads try
the cache and, on a miss, read the database and refill the cache. A refill is guarded by
the id's generation in the cache (every write bumps it first), so a reader that read the
database before a write can never put what it read back over the write. Listings are read
from the database (they span ids; caching them would need a second index kept coherent).
Run blobs stay in the cache store only: they live minutes.

:func:`import_redis_qrels` carries qrels stored in Redis by an earlier version (the same
keys the cache uses) into the database once, at service start.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import zlib
from collections.abc import Callable

import orjson
from sqlalchemy import (
    Double,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from . import keys
from . import store as cache_store
from .results import Base
from .store import Busy, NotFound, check_if_match, split_ref, version_text
from .versioned_sets import add_set, find_set, last_put, set_page, tenant_key

log = logging.getLogger("cranfield.qrels")

MAX_ID = 128  # service/qrels.py ID_PATTERN
# Concurrent puts of one id: on PostgreSQL they queue on the id's row (SELECT ... FOR
# UPDATE); on SQLite two writers may both take the next position, and the second's insert
# fails its primary key: it starts again, reading the first's version as the latest.
PUT_ATTEMPTS = 20


class QrelsSet(Base):
    __tablename__ = "qrels_sets"
    __table_args__ = (Index("uq_qrels_sets_tenant_qrels_id", "tenant", "qrels_id", unique=True),
                      Index("ix_qrels_sets_tenant_created", "tenant", "created"))

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    qrels_id: Mapped[str] = mapped_column(String(MAX_ID))
    created: Mapped[float] = mapped_column(Double)  # epoch seconds, as the metadata's


class QrelsVersion(Base):
    __tablename__ = "qrels_versions"
    __table_args__ = (ForeignKeyConstraint(["set_pk"], ["qrels_sets.pk"], ondelete="CASCADE"),)

    set_pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(64), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64))
    meta: Mapped[str] = mapped_column(Text)  # JSON: describe() with created and id
    text: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)  # zlib canonical text


class QrelsOrder(Base):
    __tablename__ = "qrels_order"
    __table_args__ = (ForeignKeyConstraint(["set_pk", "version"],
                                           ["qrels_versions.set_pk", "qrels_versions.version"],
                                           ondelete="CASCADE"),)

    set_pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(64))


SETS, VERSIONS, ORDER = QrelsSet.__table__, QrelsVersion.__table__, QrelsOrder.__table__

#: (versions oldest first, {version: metadata}, the id's creation time)
Entry = tuple[list[str], dict[str, dict], float]


class QrelsDatabase:
    """The stored qrels in the results database (``engine``: the results store's)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @staticmethod
    def _set(conn: Connection, tenant: str | None, qrels_id: str, *, lock: bool = False):
        return find_set(conn, SETS, "qrels_id", tenant, qrels_id, lock=lock)

    @staticmethod
    def _entry(conn: Connection, set_pk: int, created: float) -> Entry:
        order = conn.execute(select(ORDER.c.version).where(ORDER.c.set_pk == set_pk)
                             .order_by(ORDER.c.position)).scalars().all()
        metas = {v: orjson.loads(m) for v, m in conn.execute(
            select(VERSIONS.c.version, VERSIONS.c.meta).where(VERSIONS.c.set_pk == set_pk))}
        return list(order), metas, created

    def entry(self, tenant: str | None, qrels_id: str) -> Entry | None:
        """The id's versions and their metadata (None: no such id)."""
        with self.engine.connect() as conn:
            found = self._set(conn, tenant, qrels_id)
            if found is None:
                return None
            entry = self._entry(conn, found.pk, found.created)
        return entry if entry[0] else None  # deleted between the two reads

    @staticmethod
    def _note(conn: Connection, pk: int, version: str, extra: dict | None) -> None:
        """Record ``extra`` (``pool_depth``) in a stored version's metadata, over what an
        earlier put recorded (the version is its content; this is what a client says of
        it)."""
        if not extra:
            return
        where = (VERSIONS.c.set_pk == pk, VERSIONS.c.version == version)
        stored = orjson.loads(conn.scalar(select(VERSIONS.c.meta).where(*where)))
        if any(stored.get(k) != v for k, v in extra.items()):
            conn.execute(update(VERSIONS).where(*where).values(
                meta=orjson.dumps({**stored, **extra}).decode()))

    def put(self, tenant: str | None, qrels_id: str, meta: dict, blob: bytes,
            if_match: str | None, extra: dict | None = None) -> tuple[Entry, bool]:
        """Add the version ``meta`` describes (``blob``: its compressed canonical text) as the
        id's latest, unless it already is: (the id's entry after, whether it was added).
        :class:`~backend.store.VersionMismatch` if ``if_match`` is not the latest. ``extra``:
        members of ``meta`` recorded on the version even when it is already stored."""
        version = meta["version"]
        for attempt in range(PUT_ATTEMPTS):
            try:
                with self.engine.begin() as conn:
                    found = self._set(conn, tenant, qrels_id, lock=True)
                    last = None if found is None else last_put(conn, ORDER, found.pk)
                    check_if_match(qrels_id, last.version if last else None, if_match)
                    if last is not None and last.version == version:
                        self._note(conn, found.pk, version, extra)
                        return self._entry(conn, found.pk, found.created), False
                    now = time.time()
                    if found is None:
                        pk = add_set(conn, SETS, "qrels_id", tenant, qrels_id, now)
                        created = now
                    else:
                        pk, created = found.pk, found.created
                    known = conn.scalar(select(VERSIONS.c.version).where(
                        VERSIONS.c.set_pk == pk, VERSIONS.c.version == version))
                    if known is None:  # a version put again keeps its first metadata
                        conn.execute(insert(VERSIONS).values(
                            set_pk=pk, version=version, sha256=meta["sha256"], text=blob,
                            meta=orjson.dumps(dict(meta, created=now, id=qrels_id)).decode()))
                    else:
                        self._note(conn, pk, version, extra)
                    conn.execute(insert(ORDER).values(
                        set_pk=pk, position=last.position + 1 if last else 0, version=version))
                    return self._entry(conn, pk, created), True
            except IntegrityError:  # another put of this id came first: read it and go again
                if attempt == PUT_ATTEMPTS - 1:
                    raise Busy(f"qrels {qrels_id!r} is being written by too many requests "
                               f"at once; retry shortly") from None
                # a random share of a growing pause, so racing writers fall out of step
                time.sleep(random.uniform(0.5, 1.0) * 0.002 * (attempt + 1))
        raise AssertionError("unreachable")

    def text(self, tenant: str | None, qrels_id: str, version: str) -> bytes | None:
        """One version's compressed canonical text (None: no such version)."""
        with self.engine.connect() as conn:
            return conn.scalar(select(VERSIONS.c.text).join(SETS, SETS.c.pk == VERSIONS.c.set_pk)
                               .where(SETS.c.tenant == tenant_key(tenant),
                                      SETS.c.qrels_id == qrels_id,
                                      VERSIONS.c.version == version))

    def list(self, tenant: str | None, offset: int, limit: int
             ) -> tuple[list[tuple[str, Entry]], int]:
        """A page of the tenant's ids, oldest first, with their entries; and how many there
        are."""
        with self.engine.connect() as conn:
            rows, total = set_page(conn, SETS, [SETS.c.pk, SETS.c.qrels_id, SETS.c.created],
                                   tenant, offset, limit)
            pks = [r.pk for r in rows]
            orders: dict[int, list[str]] = {pk: [] for pk in pks}
            metas: dict[int, dict[str, dict]] = {pk: {} for pk in pks}
            if pks:
                for pk, version in conn.execute(
                        select(ORDER.c.set_pk, ORDER.c.version).where(ORDER.c.set_pk.in_(pks))
                        .order_by(ORDER.c.set_pk, ORDER.c.position)):
                    orders[pk].append(version)
                for pk, version, meta in conn.execute(
                        select(VERSIONS.c.set_pk, VERSIONS.c.version, VERSIONS.c.meta)
                        .where(VERSIONS.c.set_pk.in_(pks))):
                    metas[pk][version] = orjson.loads(meta)
        return [(r.qrels_id, (orders[r.pk], metas[r.pk], r.created)) for r in rows], total

    def delete(self, tenant: str | None, qrels_id: str) -> list[str] | None:
        """Delete the id with all its versions: the versions it had (None: no such id)."""
        with self.engine.begin() as conn:
            found = self._set(conn, tenant, qrels_id, lock=True)
            if found is None:
                return None
            versions = conn.execute(select(VERSIONS.c.version)
                                    .where(VERSIONS.c.set_pk == found.pk)).scalars().all()
            conn.execute(delete(ORDER).where(ORDER.c.set_pk == found.pk))
            conn.execute(delete(VERSIONS).where(VERSIONS.c.set_pk == found.pk))
            conn.execute(delete(SETS).where(SETS.c.pk == found.pk))
        return list(versions)

    def add_entry(self, tenant: str | None, qrels_id: str, entry: Entry,
                  texts: dict[str, bytes]) -> bool:
        """Keep an id read from elsewhere (the one-shot import) as it is, if the database has
        no such id: whether it was added."""
        order, metas, created = entry
        try:
            with self.engine.begin() as conn:
                if self._set(conn, tenant, qrels_id) is not None:
                    return False
                pk = add_set(conn, SETS, "qrels_id", tenant, qrels_id, created)
                for version in dict.fromkeys(order):
                    conn.execute(insert(VERSIONS).values(
                        set_pk=pk, version=version, sha256=metas[version]["sha256"],
                        meta=orjson.dumps(metas[version]).decode(), text=texts[version]))
                conn.execute(insert(ORDER), [{"set_pk": pk, "position": i, "version": v}
                                             for i, v in enumerate(order)])
        except IntegrityError:  # another process imported it at the same moment
            return False
        return True


def _view(qrels_id: str, entry: Entry | None, version: str | None) -> dict:
    """The metadata the API answers for ``version`` (None: the latest) of an id."""
    if entry is None or not entry[0]:
        raise NotFound(f"no qrels {qrels_id!r}")
    order, metas, _ = entry
    version = version or order[-1]
    if version not in metas:
        raise NotFound(f"no version {version!r} of qrels {qrels_id!r}")
    return dict(metas[version], versions=list(order), latest=order[-1])


class Prepare:
    """A step the store takes before its first use (the one-shot import), once it succeeds:
    one that failed (Redis unreachable at start) is tried again on the next use, which
    fails as it fails (a 503), rather than answering from a database that lacks the ids."""

    def __init__(self, step: Callable[[], object] | None = None):
        self._step = step
        self._lock = threading.Lock()

    def __call__(self) -> None:
        if self._step is None:
            return
        with self._lock:
            if self._step is not None:
                self._step()
                self._step = None


class DurableStore:
    """Stored qrels in the database, cached in ``cache`` (a ``RedisStore`` or a
    ``MemoryStore``, which also keeps the run blobs). ``database``: a
    :class:`QrelsDatabase`, or a function that opens one, called on the first write or
    cache miss (so a worker whose qrels are cached evaluates while the database is down).
    ``prepare``: what to do before the first use (:class:`Prepare`)."""

    def __init__(self, database: QrelsDatabase | Callable[[], QrelsDatabase], cache,
                 tenant: str | None = None, prepare: Prepare | None = None):
        self._database = database
        self.cache = cache
        self.tenant = tenant
        self.prepare = prepare or Prepare()

    @property
    def database(self) -> QrelsDatabase:
        if not isinstance(self._database, QrelsDatabase):
            self._database = self._database()
        return self._database

    def scoped(self, tenant: str | None) -> DurableStore:
        """The store as ``tenant`` sees it: its own qrels (see RedisStore.scoped)."""
        if tenant is None:
            return self
        return DurableStore(lambda: self.database, self.cache.scoped(tenant), tenant,
                            self.prepare)

    # -- qrels ------------------------------------------------------------------------------
    def put_qrels(self, qrels_id: str, qrels, if_match: str | None = None,
                  diversity: bool = False, qrels_format: str = "qrels",
                  extra_meta: dict | None = None) -> tuple[dict, bool]:
        """Store a version; ``extra_meta``: members kept in its metadata beside what
        :func:`~backend.store.describe` gives (``pool_depth``), not part of its content: a
        put of a stored version records them over an earlier put's."""
        text, meta = version_text(qrels, diversity, qrels_format)
        meta.update(extra_meta or {})
        blob = zlib.compress(text, 6)
        self.prepare()
        # dropped before as well as after: were the cache unreachable, nothing is written
        self.cache.cache_drop(qrels_id)
        entry, created = self.database.put(self.tenant, qrels_id, meta, blob, if_match,
                                           extra_meta)
        self.cache.cache_put_text(qrels_id, meta["version"], meta["sha256"], blob)
        self._refresh(qrels_id)
        return _view(qrels_id, entry, meta["version"]), created

    def _refresh(self, qrels_id: str) -> Entry | None:
        """The id's entry read from the database after the cache's generation of the id was
        bumped, and put in the cache unless another write bumped it since."""
        self.cache.cache_drop(qrels_id)
        return self._fill(qrels_id)

    def _fill(self, qrels_id: str) -> Entry | None:
        token = self.cache.cache_token(qrels_id)
        entry = self.database.entry(self.tenant, qrels_id)
        if entry is not None:
            self.cache.cache_fill(qrels_id, token, entry)
        return entry

    def _entry(self, qrels_id: str) -> Entry | None:
        self.prepare()
        try:
            cached = self.cache.cached_entry(qrels_id)
        except _cache_down() as exc:
            # Redis is a cache: while it is unreachable, reads go to the database (writes do
            # not: they must bump the id's generation in the cache first, else the cache
            # would answer the old versions once it is back)
            log.warning("qrels cache unreachable: reading the database",
                        extra={"event": "qrels_cache_down", "error": type(exc).__name__})
            return self.database.entry(self.tenant, qrels_id)
        return cached if cached is not None else self._fill(qrels_id)

    def versions(self, qrels_id: str) -> list[str]:
        entry = self._entry(qrels_id)
        return list(entry[0]) if entry else []

    def meta(self, qrels_id: str, version: str | None = None) -> dict:
        return _view(qrels_id, self._entry(qrels_id), version)

    def load_qrels(self, ref: str):
        qrels_id, version = split_ref(ref)
        meta = self.meta(qrels_id, version)

        def blob() -> bytes:
            try:
                data = self.cache.cached_text(qrels_id, meta["version"], meta["sha256"])
            except _cache_down():  # as in _entry: the database answers
                data, cache_up = None, False
            else:
                cache_up = True
            if data is None:
                data = self.database.text(self.tenant, qrels_id, meta["version"])
                if data is None:
                    raise NotFound(f"qrels {ref!r} was deleted")
                if cache_up:  # a version's text never changes: refilling it is always safe
                    self.cache.cache_put_text(qrels_id, meta["version"], meta["sha256"], data)
            return data

        return (cache_store.QRELS_CACHE.get(meta["sha256"], blob, meta.get("diversity", False),
                                            meta.get("qrels_format", "qrels")), meta)

    def list_qrels(self, offset: int, limit: int) -> tuple[list[dict], int]:
        self.prepare()
        items, total = self.database.list(self.tenant, offset, limit)
        out = []
        for qrels_id, entry in items:
            try:
                out.append(_view(qrels_id, entry, None))
            except NotFound:  # deleted while the page was read
                continue
        return out, total

    def delete_qrels(self, qrels_id: str) -> None:
        self.prepare()
        self.cache.cache_drop(qrels_id)
        versions = self.database.delete(self.tenant, qrels_id)
        if versions is None:
            raise NotFound(f"no qrels {qrels_id!r}")
        self.cache.cache_drop(qrels_id, versions, forget=True)

    # -- runs: in the cache store only ------------------------------------------------------
    def put_blob(self, key: str, data: bytes, ttl: int) -> str:
        return self.cache.put_blob(key, data, ttl)

    def get_blob(self, key: str) -> bytes:
        return self.cache.get_blob(key)

    def delete_blob(self, key: str) -> None:
        self.cache.delete_blob(key)


def _cache_down() -> tuple[type[BaseException], ...]:
    """The errors of an unreachable cache (Redis down or timing out); a memory cache has
    none."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return RedisConnectionError, RedisTimeoutError


# -- the one-shot import ------------------------------------------------------------------------

def import_redis_qrels(redis, database: QrelsDatabase) -> int:
    """Carry the qrels an earlier version stored in Redis (``backend/keys.py``'s keys, every
    tenant's space) into the database, each id the database does not have, with its versions,
    their order, metadata and texts as they are. Once per Redis: a marker key says it was
    done (were it lost, running again finds the ids there and adds nothing). The number of
    ids imported."""
    if redis.get(keys.qrels_imported()) is not None:
        return 0
    started = time.monotonic()
    imported = versions = 0
    for tenant, space in _spaces(redis):
        for raw_id in redis.zrange(keys.qrels_index(space), 0, -1, withscores=True):
            qrels_id, created = raw_id[0].decode(), float(raw_id[1])
            entry, texts = _redis_entry(redis, space, qrels_id, created)
            if entry is None:
                continue
            if database.add_entry(tenant, qrels_id, entry, texts):
                imported += 1
                versions += len(texts)
    redis.set(keys.qrels_imported(), orjson.dumps({"at": time.time(), "ids": imported}))
    if imported:
        log.info("imported %d stored qrels ids (%d versions) from Redis into the database "
                 "in %.2f s", imported, versions, time.monotonic() - started)
    else:
        log.info("no stored qrels in Redis to import into the database")
    return imported


def _spaces(redis) -> list[tuple[str | None, str]]:
    """(tenant, space) of the shared space and of every tenant with a qrels index."""
    spaces: list[tuple[str | None, str]] = [(None, keys.ROOT)]
    prefix, suffix = f"{keys.ROOT}:tenant:", ":qrels"
    for key in redis.scan_iter(match=f"{prefix}*{suffix}", count=1000):
        key = key.decode()
        tenant = key[len(prefix):-len(suffix)]
        # a qrels id named "qrels" has a hash key of this shape too: only a sorted set is an
        # index, and tenant names hold no ':'
        if ":" not in tenant and redis.type(key) == b"zset":
            spaces.append((tenant, keys.space(tenant)))
    return spaces


def _redis_entry(redis, space: str, qrels_id: str, created: float
                 ) -> tuple[Entry | None, dict[str, bytes]]:
    order = [v.decode() for v in redis.lrange(keys.qrels_order(space, qrels_id), 0, -1)]
    metas = {k.decode(): orjson.loads(v)
             for k, v in redis.hgetall(keys.qrels(space, qrels_id)).items()}
    texts = {}
    for version in dict.fromkeys(order):
        text = redis.get(keys.qrels_text(space, qrels_id, version))
        if version not in metas or text is None:
            log.warning("stored qrels %r in %s: version %s is incomplete in Redis; not "
                        "imported", qrels_id, space, version)
            return None, {}
        texts[version] = text
    return ((order, metas, created), texts) if order else (None, {})
