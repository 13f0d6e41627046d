"""Stored topic metadata (issue #28): topic -> segment labels and an optional weight, kept
and versioned in the results database as stored qrels are (``backend/qrels_db.py``), read
by the engine's one reader (:func:`cranfield.inputs.segments.read_topic_metadata`).

A version is named by its content: the engine's SHA-256 of the metadata (the same whatever
form it came in: ``TopicMetadata.sha256``), its first 16 hex digits the version, as for
qrels; the text kept is a header line, then the canonical JSON mapping (topics and labels in
byte order, each ``{"segments": [labels], "weight": w}``). Putting the same metadata twice
makes no new version; different metadata does; ``id@version`` addresses an old one;
``If-Match`` makes an update safe.

Tables (on ``backend.results``' metadata, made by the migration ``0005_topic_metadata``):
``topic_metadata_sets`` (one per tenant and id, with its creation time, which orders the
listing) and ``topic_metadata_versions`` (one row per put that made the id's latest
version: its position, version, digest, metadata JSON and zlib-compressed canonical text;
a version put again after another is a new row at the next position, its first metadata
kept). The shared space of a service without API keys is the tenant ``''``. Nothing is in
Redis: metadata is small, read once per request (queued jobs carry it inline)."""

from __future__ import annotations

import time
import zlib
from typing import Any

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
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from .results import Base
from .store import VERSION_CHARS, Busy, NotFound, check_if_match, split_ref
from .versioned_sets import add_set, find_set, last_put, set_page

MAX_ID = 128
PUT_ATTEMPTS = 20  # concurrent puts of one id on SQLite: see backend/qrels_db.py
CANONICAL_HEADER = b"# cranfield-topic-metadata-1\n"


class TopicMetadataSet(Base):
    __tablename__ = "topic_metadata_sets"
    __table_args__ = (Index("uq_topic_metadata_sets_tenant_metadata_id", "tenant",
                            "metadata_id", unique=True),
                      Index("ix_topic_metadata_sets_tenant_created", "tenant", "created"))

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    metadata_id: Mapped[str] = mapped_column(String(MAX_ID))
    created: Mapped[float] = mapped_column(Double)  # epoch seconds


class TopicMetadataVersion(Base):
    __tablename__ = "topic_metadata_versions"
    __table_args__ = (ForeignKeyConstraint(["set_pk"], ["topic_metadata_sets.pk"],
                                           ondelete="CASCADE"),
                      Index("ix_topic_metadata_versions_set_pk_version", "set_pk",
                            "version"))

    set_pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(64))
    sha256: Mapped[str] = mapped_column(String(64))
    meta: Mapped[str] = mapped_column(Text)  # JSON: describe() with created and id
    text: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)  # zlib canonical text


SETS, VERSIONS = TopicMetadataSet.__table__, TopicMetadataVersion.__table__


def _strcmp(value: str) -> bytes:
    return value.encode("utf-8", "surrogateescape")


def canonical_mapping(metadata) -> dict[str, dict[str, Any]]:
    """``{topic: {"segments": [labels], "weight": w}}`` of a
    :class:`cranfield.inputs.segments.TopicMetadata`, topics and each topic's labels in byte
    (strcmp) order: what :func:`~cranfield.inputs.segments.read_topic_metadata` reads back to the
    same metadata (its digest included: the engine's digest orders them so too)."""
    return {t: {"segments": sorted(metadata.labels[t], key=_strcmp),
                "weight": metadata.weights[t]}
            for t in sorted(metadata.labels, key=_strcmp)}


def canonical_text(mapping: dict[str, dict[str, Any]]) -> bytes:
    """The stored text of a canonical mapping: the header line, then the mapping as compact
    JSON."""
    return CANONICAL_HEADER + orjson.dumps(mapping) + b"\n"


def read_canonical(text: bytes) -> dict[str, dict[str, Any]]:
    """The mapping a stored text holds."""
    if not text.startswith(CANONICAL_HEADER):
        raise ValueError("not a canonical topic metadata text")
    return orjson.loads(text[len(CANONICAL_HEADER):])


def describe(metadata, mapping: dict[str, dict[str, Any]], text: bytes) -> dict:
    """A version's metadata: ``version`` (the first 16 hex digits of ``sha256``, the
    engine's digest of the metadata: one digest whatever form it came in, the one an
    evaluation's ``provenance.options.topic_metadata.sha256`` shows), topics, topics per
    segment, whether any weight is not 1, size of the stored text."""
    segments: dict[str, int] = {}
    for entry in mapping.values():
        for label in entry["segments"]:
            segments[label] = segments.get(label, 0) + 1
    return {"version": metadata.sha256[:VERSION_CHARS], "sha256": metadata.sha256,
            "topics": len(mapping),
            "segments": {k: segments[k] for k in sorted(segments, key=_strcmp)},
            "weighted": any(e["weight"] != 1.0 for e in mapping.values()),
            "size_bytes": len(text)}


class TopicMetadataStore:
    """Stored topic metadata in the results database (``engine``: the results store's), per
    tenant (None: the shared space of a service without API keys)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @staticmethod
    def _set(conn: Connection, tenant: str | None, metadata_id: str, *, lock: bool = False):
        return find_set(conn, SETS, "metadata_id", tenant, metadata_id, lock=lock)

    @staticmethod
    def _view(conn: Connection, set_pk: int, metadata_id: str, version: str | None) -> dict:
        rows = conn.execute(select(VERSIONS.c.version, VERSIONS.c.meta)
                            .where(VERSIONS.c.set_pk == set_pk)
                            .order_by(VERSIONS.c.position)).all()
        if not rows:
            raise NotFound(f"no topic metadata {metadata_id!r}")
        order = [r.version for r in rows]
        version = version or order[-1]
        meta = next((r.meta for r in rows if r.version == version), None)
        if meta is None:
            raise NotFound(f"no version {version!r} of topic metadata {metadata_id!r}")
        return dict(orjson.loads(meta), versions=order, latest=order[-1])

    def put(self, tenant: str | None, metadata_id: str, metadata,
            if_match: str | None = None) -> tuple[dict, bool]:
        """Keep ``metadata`` (a :class:`cranfield.inputs.segments.TopicMetadata`) as the id's latest
        version unless it is already: (the version's metadata, whether it was added).
        VersionMismatch if ``if_match`` is not the latest; Busy if too many puts of the id
        race (SQLite)."""
        mapping = canonical_mapping(metadata)
        text = canonical_text(mapping)
        meta = describe(metadata, mapping, text)
        version = meta["version"]
        blob = zlib.compress(text, 6)
        for _attempt in range(PUT_ATTEMPTS):
            try:
                with self.engine.begin() as conn:
                    found = self._set(conn, tenant, metadata_id, lock=True)
                    last = None if found is None else last_put(conn, VERSIONS, found.pk)
                    check_if_match(metadata_id, last.version if last else None, if_match,
                                   kind="topic metadata")
                    if last is not None and last.version == version:
                        return self._view(conn, found.pk, metadata_id, version), False
                    now = time.time()
                    if found is None:
                        pk = add_set(conn, SETS, "metadata_id", tenant, metadata_id, now)
                    else:
                        pk = found.pk
                    first = conn.scalar(select(VERSIONS.c.meta).where(
                        VERSIONS.c.set_pk == pk, VERSIONS.c.version == version).limit(1))
                    kept = first or orjson.dumps(dict(meta, created=now,
                                                      id=metadata_id)).decode()
                    conn.execute(insert(VERSIONS).values(
                        set_pk=pk, position=last.position + 1 if last else 0,
                        version=version, sha256=meta["sha256"], meta=kept, text=blob))
                    return self._view(conn, pk, metadata_id, version), True
            except IntegrityError:  # another put of this id came first: read it, go again
                continue
        raise Busy(f"topic metadata {metadata_id!r} is being written by too many requests "
                   "at once; try again")

    def meta(self, tenant: str | None, metadata_id: str, version: str | None = None) -> dict:
        """The metadata of ``version`` (None: the latest) of the id; NotFound if none."""
        with self.engine.connect() as conn:
            found = self._set(conn, tenant, metadata_id)
            if found is None:
                raise NotFound(f"no topic metadata {metadata_id!r}")
            return self._view(conn, found.pk, metadata_id, version)

    def load(self, tenant: str | None, ref: str) -> tuple[dict, dict]:
        """(the canonical mapping, the version's metadata) of ``id`` or ``id@version``."""
        metadata_id, version = split_ref(ref)
        with self.engine.connect() as conn:
            found = self._set(conn, tenant, metadata_id)
            if found is None:
                raise NotFound(f"no topic metadata {metadata_id!r}")
            meta = self._view(conn, found.pk, metadata_id, version)
            blob = conn.scalar(select(VERSIONS.c.text).where(
                VERSIONS.c.set_pk == found.pk, VERSIONS.c.version == meta["version"]).limit(1))
        if blob is None:
            raise NotFound(f"topic metadata {ref!r} was deleted")
        return read_canonical(zlib.decompress(blob)), meta

    def list(self, tenant: str | None, offset: int, limit: int) -> tuple[list[dict], int]:
        """A page of the tenant's ids (latest version of each), oldest first, and how many
        there are."""
        with self.engine.connect() as conn:
            rows, total = set_page(conn, SETS, [SETS.c.pk, SETS.c.metadata_id], tenant,
                                   offset, limit)
            items = []
            for row in rows:
                try:
                    items.append(self._view(conn, row.pk, row.metadata_id, None))
                except NotFound:  # deleted while the page was read
                    continue
        return items, int(total or 0)

    def delete(self, tenant: str | None, metadata_id: str) -> None:
        """Delete the id with all its versions; NotFound if there is no such id."""
        with self.engine.begin() as conn:
            found = self._set(conn, tenant, metadata_id, lock=True)
            if found is None:
                raise NotFound(f"no topic metadata {metadata_id!r}")
            conn.execute(delete(VERSIONS).where(VERSIONS.c.set_pk == found.pk))
            conn.execute(delete(SETS).where(SETS.c.pk == found.pk))
