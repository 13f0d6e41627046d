"""Kept runs (issue #31): a recorded evaluation's run, kept in the results database so it can be
read back (``GET /v1/results/{id}/run``) and re-scored under other qrels.

Storage. A run is kept once per tenant and content digest, whatever the number of results
that refer to it: ``kept_runs`` (tenant, ``sha256``, rows, topics, bytes, chunks, creation
time) and ``kept_run_chunks`` (its Parquet file, zstd level 1, cut into blobs of at most
:data:`CHUNK_BYTES`, 1 MiB, numbered from 0). A result names its run by ``results.run_sha256``
(same tenant). The Parquet file has the columns ``topic`` (string, dictionary-encoded),
``docid`` (string), ``score`` (float64) and ``runid`` (string, the run's runid on every row),
rows in the canonical order below: the columns :func:`cranfield.inputs.columnar.run_from_table`
reads, so the stored bytes are a run file any Cranfield reader takes.

Canonical order: rows by topic (the topics' UTF-8 bytes ascending, trec_eval's strcmp order),
then score descending, then docid's UTF-8 bytes descending (trec_eval's order of tied
scores): the order the evaluation ranks them in.

The digest. ``sha256`` is the SHA-256 of the run's *canonical rows*: the runid's UTF-8 bytes
and a newline, then, row after row in canonical order, the topic's UTF-8 bytes, a tab, the
docid's UTF-8 bytes, a tab, and the score's 8 bytes (IEEE-754 binary64, big-endian; -0.0 as
0.0). Ids hold no tab or newline (the input grammar) and the score has a fixed size, so the
bytes can be read one way only. Runs that evaluate the same (the same rows in another order,
scores spelled 1.50 or 1.5, TREC text, JSON or Parquet with the same runid) share one digest
and one stored copy. It is built by Arrow kernels a batch at a time (M's 7M rows: 1.6 s here,
against 9 s for hashing the canonical text, whose scores need Python's ``repr``).

The canonical TREC text, what ``GET /v1/results/{id}/run`` answers as ``text/plain``: one
line per row in canonical order, ``topic Q0 docid rank score runid`` and a newline, single
spaces, ``rank`` the row's position within its topic from 1, ``score`` the double as Python's
``repr`` writes it (the shortest text that reads back to the same double; -0.0 as 0.0). Read
back, it has the run's digest: ``canonical_sha256(read_run(text)) == run_sha256``.

Memory. No whole second copy of a run is made: :meth:`KeptRuns.keep` computes the
canonical order (an int64 permutation, 8 bytes a row), then walks the run in batches of
:data:`BATCH_ROWS` rows, once to hash the rows, and (when the run is new) once to write the
Parquet row groups through a ``pyarrow.parquet.ParquetWriter`` whose sink inserts each full
1 MiB chunk as it fills; :meth:`KeptRuns.read` and the chunk iterators read the Parquet file
through a file object that fetches one chunk row at a time (:class:`ChunkFile`), a row
group at a time (:func:`row_group_batches`), in one database snapshot
(:meth:`KeptRuns.snapshot`). Sizes are bounded before anything is kept: a kept run is a
run the evaluation already read within the service's limits (``MAX_CONTENT_LENGTH``,
``MAX_TOPICS``, ``MAX_DOCS_PER_TOPIC``, the evaluation budgets), so its Parquet file is
smaller than the upload it came from.

Lifetime. Deleting a result releases its run (:meth:`KeptRuns.release`, called by
``ResultStore.delete`` in the deleting transaction): the run's row is locked (an UPDATE that
changes nothing: a row lock on PostgreSQL, the write lock on SQLite), the results still
naming it counted, and with none left the run and its chunks are deleted in that same
transaction. Recording a result with a run locks the run's row in the recording transaction
and fails with :class:`KeptRunGone` if a release deleted it meanwhile;
:meth:`KeptRuns.record_with_run` keeps the run again and records once more.
Another tenant never sees a run: every read is by (tenant, sha256).

Python API (H31g's re-scoring reads runs back through it)::

    runs = KeptRuns(store)                 # a ResultStore, or an SQLAlchemy Engine
    sha = runs.keep(tenant, run)           # a cranfield Run -> its sha256 (kept once)
    runs.exists(tenant, sha) -> bool
    runs.info(tenant, sha) -> {"sha256", "rows", "topics", "bytes", "chunks"} | None
    runs.read(tenant, sha) -> cranfield Run   (NotFound if none)
    runs.trec_chunks(tenant, sha) -> iterator of bytes (the canonical TREC text)
    runs.parquet_chunks(tenant, sha) -> iterator of bytes (the stored Parquet file)
    runs.record_with_run(tenant, record, document, run, job_id=None) -> result summary
    runs.release(session, tenant, sha) -> bool   (inside a deleting transaction)
    runs.count(tenant=None) -> number of kept runs (a tenant's, or all)
    canonical_sha256(run) -> str           # the digest of any cranfield Run

``tenant`` is as in ``backend.results`` (None: the shared space of a service without keys).
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from sqlalchemy import (
    BigInteger,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped, Session, mapped_column

from .results import Base, Result, ResultStore, System
from .store import NotFound
from .versioned_sets import tenant_key

#: The largest blob of ``kept_run_chunks``.
CHUNK_BYTES = 1 << 20
#: Rows formatted, hashed or written as one Parquet row group at a time.
BATCH_ROWS = 1 << 17
#: zstd level of the Parquet pages. Measured on 2M rows of M and of L (bench/data): level 1
#: 8.32 MB per million lines in 0.46 s, level 3 8.30 MB in 0.63 s; dictionary-encoding docid
#: and score as well (pyarrow's default) 10.4-11.9 MB in 1.1 s: only topic and runid are.
ZSTD_LEVEL = 1
DICTIONARY_COLUMNS = ["topic", "runid"]
PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"
#: a kept run no result names is swept (:meth:`KeptRuns.sweep`) once it is this old (s): a
#: recording names its run moments after keeping it, and keeps it again if it was swept
ORPHAN_AGE_S = 3600


class KeptRun(Base):
    """A tenant's kept run: one per content digest (see the module's docstring)."""
    __tablename__ = "kept_runs"
    __table_args__ = (Index("uq_kept_runs_tenant_sha256", "tenant", "sha256", unique=True),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    sha256: Mapped[str] = mapped_column(String(64))
    n_rows: Mapped[int] = mapped_column(BigInteger)
    n_topics: Mapped[int] = mapped_column(Integer)
    n_bytes: Mapped[int] = mapped_column(BigInteger)    # of the Parquet file
    n_chunks: Mapped[int] = mapped_column(Integer)
    created: Mapped[float] = mapped_column(Double)      # epoch seconds


class KeptRunChunk(Base):
    """One blob of a kept run's Parquet file (``seq`` from 0, in order)."""
    __tablename__ = "kept_run_chunks"

    run_pk: Mapped[int] = mapped_column(ForeignKey("kept_runs.pk", ondelete="CASCADE"),
                                        primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class KeptRunGone(LookupError):
    """The kept run a result was to name was released (deleted) before the result was
    recorded: keep it again."""


# -- the canonical form ------------------------------------------------------------------------

def as_run(run):
    """A :class:`cranfield.inputs.run_qrels.Run` of ``run``: a function is called, a mapped
    run (``cranfield.inputs.mappings.MappedRun``) read as columns."""
    if callable(run) and not hasattr(run, "topic_index"):
        run = run()
    columns = getattr(run, "columns", None)
    return columns() if callable(columns) else run


def canonical_order(run) -> np.ndarray:
    """The permutation putting ``run``'s rows in canonical order: topic (strcmp order: the
    run's topic list is in it), score descending, docid's bytes descending (int64)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from cranfield.inputs.arrow_arrays import arrow_strings

    n = len(run)
    docids = run.docids
    if isinstance(docids, np.ndarray):
        docids = arrow_strings(docids)
    topic_index = np.ascontiguousarray(run.topic_index)
    kind = pa.int32() if topic_index.dtype == np.int32 else pa.int64()
    topic_index = topic_index.astype(kind.to_pandas_dtype(), copy=False)
    table = pa.table({
        "t": pa.Array.from_buffers(kind, n, [None, pa.py_buffer(topic_index)]),
        "s": pa.Array.from_buffers(pa.float64(), n, [None, pa.py_buffer(
            np.ascontiguousarray(run.scores, dtype=np.float64))]),
        "d": docids})
    order = pc.sort_indices(table, sort_keys=[("t", "ascending"), ("s", "descending"),
                                              ("d", "descending")])
    del table
    return np.frombuffer(order.buffers()[1], dtype=np.uint64, count=n,
                         offset=order.offset * 8).view(np.int64)


def _docids_at(run, rows: np.ndarray):
    """The docids of ``rows`` as one pyarrow string array."""
    import pyarrow as pa

    from cranfield.inputs.arrow_arrays import arrow_strings, take_rows

    if isinstance(run.docids, np.ndarray):
        return arrow_strings(run.docids[rows])
    docids = take_rows(run.docids, rows)
    return docids.combine_chunks() if isinstance(docids, pa.ChunkedArray) else docids


def _score_strings(scores: np.ndarray):
    """Each score as Python's ``repr`` writes it (the shortest text of the double), as a
    pyarrow string array: each distinct value formatted once. -0.0 is written 0.0 (it ranks
    as 0.0)."""
    import pyarrow as pa

    values, inverse = np.unique(np.asarray(scores, dtype=np.float64) + 0.0,
                                return_inverse=True)
    texts = pa.array(list(map(float.__repr__, values.tolist())), pa.string())
    return texts.take(pa.array(inverse.reshape(-1).astype(np.int64)))


class _Lines:
    """Canonical TREC lines of consecutive batches of rows in canonical order, built by Arrow
    kernels (no Python per row but one ``repr`` per distinct score); the rank counts on
    across batches."""

    def __init__(self, runid: str):
        self.end = runid + "\n"
        self.last_topic: str | None = None
        self.rank = 0

    def format(self, codes: np.ndarray, topics, docids, scores: np.ndarray) -> memoryview:
        """The lines of a batch: ``codes`` tell the rows' topics apart (equal codes, same
        topic; the batch's rows grouped by topic), ``topics`` the rows' topic strings."""
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(codes)
        if n == 0:
            return memoryview(b"")
        positions = np.arange(n, dtype=np.int64)
        first = np.ones(n, dtype=bool)
        first[1:] = codes[1:] != codes[:-1]
        start = np.maximum.accumulate(np.where(first, positions, 0))
        ranks = positions - start + 1
        head = str(topics[0].as_py()) if hasattr(topics[0], "as_py") else str(topics[0])
        if head == self.last_topic:  # the previous batch's topic goes on
            ranks[start == 0] += self.rank
        last_topic = topics[n - 1]
        self.last_topic = last_topic.as_py() if hasattr(last_topic, "as_py") else last_topic
        self.rank = int(ranks[-1])
        lines = pc.binary_join_element_wise(
            topics, "Q0", docids, pc.cast(pa.array(ranks), pa.string()),
            _score_strings(scores), self.end, " ")
        offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=n + 1,
                                offset=lines.offset * 4)
        return memoryview(lines.buffers()[2])[int(offsets[0]):int(offsets[-1])]


def _batches(run, order: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(rows in canonical order, their topic indexes) per batch of :data:`BATCH_ROWS`."""
    for start in range(0, len(order), BATCH_ROWS):
        rows = order[start:start + BATCH_ROWS]
        yield rows, run.topic_index[rows]


def canonical_text_chunks(run, order: np.ndarray | None = None) -> Iterator[memoryview]:
    """``run``'s canonical TREC text (see the module's docstring), a batch at a time."""
    from cranfield.inputs.arrow_arrays import arrow_strings

    order = canonical_order(run) if order is None else order
    names = arrow_strings(run.topics)
    lines = _Lines(run.runid)
    for rows, topic_index in _batches(run, order):
        codes = topic_index.astype(np.int64)
        yield lines.format(codes, names.take(codes), _docids_at(run, rows), run.scores[rows])


def _record_bytes(topics, docids, scores: np.ndarray) -> memoryview:
    """A batch's rows as the digest reads them: topic, tab, docid, tab, the score's 8 bytes
    (IEEE-754 binary64, big-endian, -0.0 as 0.0), row after row (Arrow kernels)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(scores)
    if n == 0:
        return memoryview(b"")
    packed = (np.asarray(scores, dtype=np.float64) + 0.0).astype(">f8")
    score = pa.Array.from_buffers(pa.binary(8), n, [None, pa.py_buffer(packed)])
    rows = pc.binary_join_element_wise(
        pc.cast(topics, pa.binary()), pc.cast(docids, pa.binary()), pc.cast(score, pa.binary()),
        pa.scalar(b"\t", pa.binary()))
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int32, count=n + 1,
                            offset=rows.offset * 4)
    return memoryview(rows.buffers()[2])[int(offsets[0]):int(offsets[-1])]


def canonical_sha256(run, order: np.ndarray | None = None) -> str:
    """The kept run's digest of ``run`` (hex): SHA-256 of its runid's UTF-8 bytes and a
    newline, then, row after row in canonical order, the topic's UTF-8 bytes, a tab, the
    docid's, a tab, and the score's 8 bytes (IEEE-754 binary64, big-endian; -0.0 as 0.0).
    Ids hold no tab (the input grammar) and the score has a fixed size, so the bytes read one
    way only; two runs that rank the same have the same digest, and so does the canonical
    text read back (``read_run(trec_chunks(...))``)."""
    from cranfield.inputs.arrow_arrays import arrow_strings

    order = canonical_order(run) if order is None else order
    names = arrow_strings(run.topics)
    digest = hashlib.sha256(run.runid.encode("utf-8") + b"\n")
    for rows, topic_index in _batches(run, order):
        digest.update(_record_bytes(names.take(topic_index.astype(np.int64)),
                                    _docids_at(run, rows), run.scores[rows]))
    return digest.hexdigest()


# -- chunks in and out -------------------------------------------------------------------------

class _ChunkSink(io.RawIOBase):
    """A write-only file whose bytes go to ``kept_run_chunks`` rows of ``run_pk``, one row per
    full :data:`CHUNK_BYTES` (the rest at :meth:`finish`)."""

    def __init__(self, connection: Connection, run_pk: int, chunk_bytes: int):
        super().__init__()
        self.connection, self.run_pk, self.chunk_bytes = connection, run_pk, chunk_bytes
        self.buffer = bytearray()
        self.seq = 0
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.buffer += view
        self.size += len(view)
        while len(self.buffer) >= self.chunk_bytes:
            self._put(bytes(self.buffer[:self.chunk_bytes]))
            del self.buffer[:self.chunk_bytes]
        return len(view)

    def tell(self) -> int:
        return self.size

    def _put(self, blob: bytes) -> None:
        self.connection.execute(insert(KeptRunChunk).values(run_pk=self.run_pk, seq=self.seq,
                                                            data=blob))
        self.seq += 1

    def finish(self) -> int:
        if self.buffer:
            self._put(bytes(self.buffer))
            self.buffer.clear()
        return self.seq


class ChunkFile(io.RawIOBase):
    """A read-only, seekable file over a kept run's chunks, fetching one chunk row at a time
    on ``connection`` (the one it was opened on; the last chunk read is kept)."""

    def __init__(self, connection: Connection, run_pk: int):
        super().__init__()
        self.connection, self.run_pk = connection, run_pk
        lengths = connection.execute(
            select(KeptRunChunk.seq, func.length(KeptRunChunk.data))
            .where(KeptRunChunk.run_pk == run_pk).order_by(KeptRunChunk.seq)).all()
        self.starts = np.zeros(len(lengths) + 1, dtype=np.int64)
        self.starts[1:] = np.cumsum([length for _, length in lengths])
        self.size = int(self.starts[-1])
        self.position = 0
        self.cached: tuple[int, bytes] | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def tell(self) -> int:
        return self.position

    def chunk(self, seq: int) -> bytes:
        if self.cached is None or self.cached[0] != seq:
            data = self.connection.scalar(select(KeptRunChunk.data).where(
                KeptRunChunk.run_pk == self.run_pk, KeptRunChunk.seq == seq))
            if data is None:  # released, and read outside a snapshot (see KeptRuns.snapshot)
                raise NotFound(f"kept run {self.run_pk} was deleted while it was read")
            self.cached = (seq, bytes(data))
        return self.cached[1]

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left: -1), copied once (``RawIOBase.read``
        fills a bytearray, then copies it to bytes)."""
        end = self.size if size is None or size < 0 else min(self.size, self.position + size)
        pieces = []
        while self.position < end:
            seq = int(np.searchsorted(self.starts, self.position, side="right")) - 1
            data = self.chunk(seq)
            at = self.position - int(self.starts[seq])
            take = min(end - self.position, len(data) - at)
            pieces.append(memoryview(data)[at:at + take])
            self.position += take
        return pieces[0].tobytes() if len(pieces) == 1 else b"".join(pieces)

    def readinto(self, target) -> int:
        view = memoryview(target).cast("B")
        done = 0
        while done < len(view) and self.position < self.size:
            seq = int(np.searchsorted(self.starts, self.position, side="right")) - 1
            data = self.chunk(seq)
            at = self.position - int(self.starts[seq])
            take = min(len(view) - done, len(data) - at)
            view[done:done + take] = data[at:at + take]
            done += take
            self.position += take
        return done


def row_group_batches(parquet) -> Iterator:
    """``parquet``'s record batches, one row group read at a time: ``iter_batches`` over the
    whole file reads every row group before its first batch (a kept run's whole compressed
    file in memory, twice at peak: R31b finding 3)."""
    for group in range(parquet.num_row_groups):
        yield from parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=[group],
                                        use_threads=False)


class _Stream:
    """An iterator over ``chunks`` that owns ``connection``: closed (started or not, as a
    WSGI server closes a response's iterable) it closes both."""

    def __init__(self, connection: Connection, chunks: Iterator[bytes]):
        self.connection, self.chunks = connection, chunks

    def __iter__(self) -> _Stream:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self.chunks)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.chunks.close()
        self.connection.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: S110 - at interpreter exit the pool may be gone
            pass


# -- the store ---------------------------------------------------------------------------------

class KeptRuns:
    """Kept runs in the results database of ``store`` (a :class:`ResultStore` or an Engine)."""

    def __init__(self, store: ResultStore | Engine, *, chunk_bytes: int = CHUNK_BYTES):
        self.store = store if isinstance(store, ResultStore) else None
        self.engine: Engine = store.engine if isinstance(store, ResultStore) else store
        self.chunk_bytes = int(chunk_bytes)

    # -- a system's default -----------------------------------------------------------------

    def keeps_runs(self, tenant: str | None, system: str) -> bool:
        """Whether ``system``'s results keep their runs by default (False: no such system)."""
        with self.engine.connect() as connection:
            return bool(connection.scalar(select(System.keep_runs).where(
                System.tenant == tenant_key(tenant), System.name == system)))

    def has_system(self, tenant: str | None, system: str) -> bool:
        """Whether ``tenant`` has a system ``system`` (recorded, or given settings)."""
        with self.engine.connect() as connection:
            return connection.scalar(select(System.pk).where(
                System.tenant == tenant_key(tenant), System.name == system)) is not None

    def set_keeps_runs(self, tenant: str | None, system: str, keep: bool) -> None:
        """Set ``system``'s default (the system made if it has no result yet)."""
        if self.store is None:
            raise TypeError("set_keeps_runs needs a ResultStore")
        try:
            pk = self.store.system_pk(tenant, system)
        except IntegrityError:  # made at the same moment by a recording
            pk = self.store.system_pk(tenant, system)
        with self.engine.begin() as connection:
            connection.execute(update(System).where(System.pk == pk)
                               .values(keep_runs=bool(keep)))

    def wants_run(self, tenant: str | None, record: dict) -> bool:
        """Whether a result recorded with ``record`` keeps its run: ``record["keep_run"]``,
        or, not given (or null), its system's default."""
        keep = record.get("keep_run")
        if keep is not None:
            return bool(keep)
        system = record.get("system")
        return isinstance(system, str) and self.keeps_runs(tenant, system)

    # -- keeping ----------------------------------------------------------------------------

    def keep(self, tenant: str | None, run) -> str:
        """Keep ``run`` (a :class:`cranfield.inputs.run_qrels.Run`, a mapped run, or a function
        giving one) for ``tenant`` unless a run of the same digest is kept already; returns
        the digest."""
        run = as_run(run)
        order = canonical_order(run)
        digest = canonical_sha256(run, order)
        if self.exists(tenant, digest):
            return digest
        try:
            self._write(tenant, run, order, digest)
        except IntegrityError:  # kept at the same moment by another recording: it is there
            if not self.exists(tenant, digest):
                raise
        return digest

    def _write(self, tenant: str | None, run, order: np.ndarray, digest: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from cranfield.inputs.arrow_arrays import arrow_strings

        schema = pa.schema([("topic", pa.dictionary(pa.int32(), pa.string())),
                            ("docid", pa.string()), ("score", pa.float64()),
                            ("runid", pa.dictionary(pa.int32(), pa.string()))])
        topic_names = arrow_strings(run.topics)
        runid_names = arrow_strings([run.runid])
        with self.engine.begin() as connection:
            run_pk = connection.execute(insert(KeptRun).values(
                tenant=tenant_key(tenant), sha256=digest, n_rows=len(run),
                n_topics=len(run.topics), n_bytes=0, n_chunks=0, created=time.time())
                .returning(KeptRun.pk)).scalar_one()
            sink = _ChunkSink(connection, run_pk, self.chunk_bytes)
            # the Arrow schema is not stored: read back, the columns are plain strings, as
            # any Parquet run file's; no min/max statistics (nothing filters on them)
            with pq.ParquetWriter(sink, schema, compression="zstd",
                                  compression_level=ZSTD_LEVEL, store_schema=False,
                                  use_dictionary=DICTIONARY_COLUMNS,
                                  write_statistics=False) as writer:
                for rows, topic_index in _batches(run, order):
                    n = len(rows)
                    scores = np.ascontiguousarray(run.scores[rows], dtype=np.float64)
                    # the batch's topics are a range of the sorted list: only that range is
                    # its dictionary (a row group's dictionary page holds what it uses)
                    low, high = int(topic_index[0]), int(topic_index[-1])
                    batch = pa.record_batch([
                        pa.DictionaryArray.from_arrays(
                            pa.array((topic_index - low).astype(np.int32)),
                            topic_names.slice(low, high - low + 1)),
                        _docids_at(run, rows),
                        pa.Array.from_buffers(pa.float64(), n, [None, pa.py_buffer(scores)]),
                        pa.DictionaryArray.from_arrays(
                            pa.array(np.zeros(n, dtype=np.int32)), runid_names)],
                        schema=schema)
                    writer.write_batch(batch, row_group_size=BATCH_ROWS)
            chunks = sink.finish()
            connection.execute(update(KeptRun).where(KeptRun.pk == run_pk)
                               .values(n_bytes=sink.size, n_chunks=chunks))

    def record_with_run(self, tenant: str | None, record: dict, document: dict, run, *,
                        job_id: str | None = None) -> dict:
        """``ResultStore.record`` of a result that keeps ``run``: the run kept first (once),
        then the result recorded naming it; kept again if a release took it meanwhile."""
        if self.store is None:
            raise TypeError("record_with_run needs a ResultStore")
        run = as_run(run)
        for attempt in range(3):
            digest = self.keep(tenant, run)
            try:
                return self.store.record(tenant, record, document, job_id=job_id,
                                         run_sha256=digest)
            except KeptRunGone:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    # -- reading ----------------------------------------------------------------------------

    def _row(self, connection: Connection, tenant: str | None, digest: str):
        if not isinstance(digest, str) or len(digest) != 64:
            return None
        return connection.execute(select(KeptRun).where(
            KeptRun.tenant == tenant_key(tenant), KeptRun.sha256 == digest)).first()

    def exists(self, tenant: str | None, digest: str) -> bool:
        with self.engine.connect() as connection:
            return self._row(connection, tenant, digest) is not None

    def info(self, tenant: str | None, digest: str) -> dict | None:
        """The kept run's sizes, or None if ``tenant`` has no run of that digest."""
        with self.engine.connect() as connection:
            row = self._row(connection, tenant, digest)
        if row is None:
            return None
        kept = row[0] if not hasattr(row, "sha256") else row
        return {"sha256": kept.sha256, "rows": int(kept.n_rows), "topics": int(kept.n_topics),
                "bytes": int(kept.n_bytes), "chunks": int(kept.n_chunks)}

    def count(self, tenant: Any = ...) -> int:
        """How many runs are kept: ``tenant``'s, or every tenant's (no argument)."""
        query = select(func.count()).select_from(KeptRun)
        if tenant is not ...:
            query = query.where(KeptRun.tenant == tenant_key(tenant))
        with self.engine.connect() as connection:
            return int(connection.scalar(query) or 0)

    def count_chunks(self) -> int:
        with self.engine.connect() as connection:
            return int(connection.scalar(select(func.count()).select_from(KeptRunChunk)) or 0)

    def snapshot(self) -> Connection:
        """A connection whose reads all see one snapshot of the database, so a run's chunks
        read through it are the whole run even if a release deletes it meanwhile (R31b
        finding 4): PostgreSQL REPEATABLE READ; SQLite an explicit BEGIN (in WAL mode a
        reader keeps its snapshot and writers go on). The caller closes it."""
        connection = self.engine.connect()
        try:
            if self.engine.dialect.name == "postgresql":
                connection = connection.execution_options(isolation_level="REPEATABLE READ")
                connection.begin()
            elif self.engine.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN")
        except BaseException:
            connection.close()
            raise
        return connection

    def _open(self, connection: Connection, tenant: str | None, digest: str) -> int:
        row = self._row(connection, tenant, digest)
        if row is None:
            raise NotFound(f"no kept run {digest!r}")
        return int(row.pk)

    def parquet_chunks(self, tenant: str | None, digest: str) -> Iterator[bytes]:
        """The stored Parquet file's chunks, in order (NotFound, raised at once, if none),
        read in one snapshot: a release meanwhile does not cut them. Close the iterator
        (a WSGI server does) to give back its connection."""
        connection = self.snapshot()
        try:
            run_pk = self._open(connection, tenant, digest)
            seqs = connection.scalars(select(KeptRunChunk.seq).where(
                KeptRunChunk.run_pk == run_pk).order_by(KeptRunChunk.seq)).all()
        except BaseException:
            connection.close()
            raise

        def chunks() -> Iterator[bytes]:
            for seq in seqs:
                data = connection.scalar(select(KeptRunChunk.data).where(
                    KeptRunChunk.run_pk == run_pk, KeptRunChunk.seq == seq))
                if data is None:  # not in the snapshot: cannot happen
                    raise NotFound(f"kept run {digest!r} was deleted while read")
                yield bytes(data)
        return _Stream(connection, chunks())

    def _parquet(self, tenant: str | None, digest: str, *, dictionaries: bool = False):
        """(connection, ParquetFile) over the run's chunks; the caller closes the connection.
        ``dictionaries``: topic and runid read as dictionary arrays (a code a row)."""
        import pyarrow.parquet as pq

        connection = self.snapshot()
        try:
            run_pk = self._open(connection, tenant, digest)
            return connection, pq.ParquetFile(
                ChunkFile(connection, run_pk),
                read_dictionary=["topic", "runid"] if dictionaries else None,
                pre_buffer=False)
        except BaseException:
            connection.close()
            raise

    def trec_chunks(self, tenant: str | None, digest: str) -> Iterator[bytes]:
        """The run's canonical TREC text, a row group at a time (NotFound, raised at once, if
        none): read back, its digest is ``digest``. Read in one snapshot (a release meanwhile
        does not cut it); close the iterator (a WSGI server does) to give back its
        connection."""
        connection, parquet = self._parquet(tenant, digest, dictionaries=True)

        def chunks() -> Iterator[bytes]:
            lines = None
            for batch in row_group_batches(parquet):
                topic = batch.column("topic")
                if lines is None:
                    lines = _Lines(str(batch.column("runid")[0]))
                codes = np.asarray(topic.indices.to_numpy(zero_copy_only=False),
                                   dtype=np.int64)
                yield bytes(lines.format(codes, topic.dictionary.take(topic.indices),
                                         batch.column("docid"),
                                         batch.column("score").to_numpy()))
        return _Stream(connection, chunks())

    def read(self, tenant: str | None, digest: str):
        """The kept run as a :class:`cranfield.inputs.run_qrels.Run` (the rows
        :func:`cranfield.inputs.columnar.run_from_table` reads of the stored file: topics in
        strcmp order; docids an Arrow string column, a chunk per row group; NotFound if
        ``tenant`` keeps none of that digest). Read a row group at a time into columns
        allocated once (the stored rows are in canonical order, so topics come in strcmp
        order); checked when kept, the rows are not checked again."""
        import pyarrow as pa

        from cranfield.inputs.run_qrels import Run

        info = self.info(tenant, digest)
        if info is None:
            raise NotFound(f"no kept run {digest!r}")
        rows = info["rows"]
        topic_index = np.empty(rows, dtype=np.int32)
        scores = np.empty(rows, dtype=np.float64)
        topics: list[str] = []
        docids = []
        runid = "cranfield"
        at = 0
        connection, parquet = self._parquet(tenant, digest, dictionaries=True)
        try:
            for batch in row_group_batches(parquet):
                n = batch.num_rows
                topic = batch.column("topic")
                local = np.asarray(topic.indices.to_numpy(zero_copy_only=False),
                                   dtype=np.int64)
                names = topic.dictionary.to_pylist()
                # the batch's codes in the order their topics first appear (ascending)
                used, first = np.unique(local, return_index=True)
                mapping = np.full(len(names), -1, dtype=np.int32)
                for code in used[np.argsort(first, kind="stable")].tolist():
                    if not topics or topics[-1] != names[code]:
                        topics.append(names[code])
                    mapping[code] = len(topics) - 1
                topic_index[at:at + n] = mapping[local]
                scores[at:at + n] = batch.column("score").to_numpy()
                docids.append(batch.column("docid"))
                runid = str(batch.column("runid")[n - 1]) if n else runid
                at += n
        finally:
            connection.close()
        if at != rows:
            raise ValueError(f"kept run {digest!r}: {at} rows read of {rows}")
        # a chunk per row group, as the TREC reader's large runs have them: not concatenated
        # (that would hold the docids twice)
        return Run(topics, topic_index, pa.chunked_array(docids, pa.string()), scores, runid,
                   "run")

    # -- releasing --------------------------------------------------------------------------

    @staticmethod
    def lock(session: Session, tenant: str | None, digest: str) -> int | None:
        """The kept run's key, its row locked for the transaction (None: not kept).

        The lock is a write (an UPDATE that changes nothing), not ``SELECT ... FOR UPDATE``:
        on PostgreSQL both lock the row, but SQLite ignores ``FOR UPDATE`` and pysqlite
        opens no transaction before a SELECT, so a release could commit between the check
        and the recording's INSERT (R31b finding 1). An UPDATE makes pysqlite BEGIN and
        takes SQLite's write lock before the check, so a release waits for the recording's
        commit on both databases."""
        return KeptRuns._lock_key(session, tenant_key(tenant), digest)

    @staticmethod
    def _lock_key(session: Session, key: str, digest: str) -> int | None:
        where = (KeptRun.tenant == key, KeptRun.sha256 == digest)
        if session.execute(update(KeptRun).where(*where)
                           .values(n_chunks=KeptRun.n_chunks)).rowcount == 0:
            return None
        return session.scalar(select(KeptRun.pk).where(*where))

    @classmethod
    def release(cls, session: Session, tenant: str | None, digest: str | None) -> bool:
        """In a transaction that deleted (flushed) a result naming ``digest``: delete the run
        and its chunks if no result of ``tenant`` names it any more. True if deleted."""
        if digest is None:
            return False
        return cls._release_key(session, tenant_key(tenant), digest)

    @classmethod
    def _release_key(cls, session: Session, key: str, digest: str) -> bool:
        run_pk = cls._lock_key(session, key, digest)
        if run_pk is None:
            return False
        left = session.scalar(select(func.count()).select_from(Result).where(
            Result.tenant == key, Result.run_sha256 == digest))
        if left:
            return False
        session.execute(delete(KeptRunChunk).where(KeptRunChunk.run_pk == run_pk))
        session.execute(delete(KeptRun).where(KeptRun.pk == run_pk))
        return True

    def sweep(self, older_than_s: float | None = None, *, now: float | None = None) -> int:
        """Delete the kept runs (every tenant's) made more than ``older_than_s`` seconds ago
        (default :data:`ORPHAN_AGE_S`) that no result names: kept by a recording that then
        failed (a crash, a database outage past CRANFIELD_DB_RETRY_S, KeptRunGone three
        times), which no delete would ever release (R31b finding 6). Each is released as a
        delete releases it (locked, counted again, deleted with none left), so a recording
        naming it meanwhile keeps it, and one that comes after keeps it again. Returns how many were
        deleted."""
        age = ORPHAN_AGE_S if older_than_s is None else older_than_s
        cutoff = (time.time() if now is None else now) - age
        named = select(Result.pk).where(Result.tenant == KeptRun.tenant,
                                        Result.run_sha256 == KeptRun.sha256).exists()
        with self.engine.connect() as connection:
            orphans = connection.execute(select(KeptRun.tenant, KeptRun.sha256).where(
                KeptRun.created < cutoff, ~named)).all()
        swept = 0
        for key, digest in orphans:
            with Session(self.engine) as session, session.begin():
                swept += self._release_key(session, key, digest)
        return swept
