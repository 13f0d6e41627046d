"""Recorded evaluation results (issue #18): kept durably, per tenant, in a SQL database.

SQLAlchemy 2 over PostgreSQL (psycopg 3) or SQLite (the embedded default: a file in the
instance folder, see :func:`backend.config.database_url`); the schema is made and changed by
Alembic migrations (``backend/migrations``), run by :meth:`ResultStore.upgrade` (or
:func:`migrate`) with a configuration built in code: no ``alembic.ini`` at run time.

Tables: ``systems`` (a tenant's named systems), ``results`` (one recorded evaluation: its
summary columns, the topic list and the rest of the document), ``result_tags`` (for the tag
filter), ``result_values`` (per-topic values, one row per result and measure) and
``baselines`` (a system's accepted result) and ``gate_verdicts`` (what gated comparisons
decided of a result, for the trend). The shared space of a service without API keys
is the tenant ``''`` in the database (tenant names are 1-64 characters, see service/auth.py),
so unique constraints hold for it too. Another tenant's result or system is simply not found.

Per-topic values: one binary column per result and measure, measured against a row per
(result, measure, topic) on PostgreSQL 15 (this machine), 7,000 topics x 5 measures, 20
results recorded per layout, sizes from pg_total_relation_size (tables, TOAST, indexes)::

    layout                                bytes/result   record one   read one (get)
    (a) a row per (result, measure, topic)   5.08 MB       3,714 ms      274 ms
    (b) a binary column per measure          0.31 MB          74 ms       37 ms

(medians; (b)'s 0.31 MB includes the rest of the document and the topic list, 17 kB).
(b) is 16x smaller, 50x faster to record and 7x faster to read: it is the layout here. A
column is the values' float64 (or int64, when every value is an integer) bytes in the order
of the result's topic list, which is stored once per result; ``flags`` (one byte per topic,
NULL when every topic has a value) tells a ``None`` from a value and from a topic that lacks
the measure, so the document reads back exactly as it was recorded (NaN included: float64
keeps it; a column of anything else is JSON). Each row also keeps the mean of the column's
finite values and its 95% Student-t CI, computed when recorded, so a trend over a thousand
results reads a thousand small rows, not their values (1,000 results: 31 ms on PostgreSQL,
22 ms on SQLite).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import threading
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import (
    Boolean,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    create_engine,
    delete,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    sessionmaker,
    undefer,
)

from .store import NotFound
from .versioned_sets import tenant_key

log = logging.getLogger("cranfield.results")

MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")

MAX_NAME = 200    # system names and labels
MAX_COMMIT = 100
MAX_TAG = 100

# kinds of a per-topic column
FLOAT, INTEGER, JSON = "f", "i", "j"
# flags per topic
VALUE, NONE, ABSENT = 0, 1, 2
_ABSENT = object()


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })


class System(Base):
    __tablename__ = "systems"
    __table_args__ = (Index("uq_systems_tenant_name", "tenant", "name", unique=True),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(MAX_NAME))
    # its results keep their runs unless the record says otherwise (issue #31); None: no
    keep_runs: Mapped[bool | None] = mapped_column(Boolean)


class Result(Base):
    __tablename__ = "results"
    __table_args__ = (Index("ix_results_system_created", "system_pk", "created_at"),
                      Index("uq_results_tenant_job_id", "tenant", "job_id", unique=True),
                      Index("ix_results_tenant_run_sha256", "tenant", "run_sha256"),
                      Index("uq_results_rescores_qrels_sha256", "rescores", "qrels_sha256",
                            unique=True))

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    tenant: Mapped[str] = mapped_column(String(64))
    system_pk: Mapped[int] = mapped_column(ForeignKey("systems.pk", ondelete="CASCADE"))
    label: Mapped[str] = mapped_column(String(MAX_NAME))
    commit: Mapped[str | None] = mapped_column(String(MAX_COMMIT))
    tags: Mapped[str] = mapped_column(Text)              # JSON list, in the recorded order
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    qrels_version: Mapped[str | None] = mapped_column(String(MAX_NAME))
    qrels_sha256: Mapped[str | None] = mapped_column(String(64))
    measures: Mapped[str] = mapped_column(Text)          # JSON list of the measures' keys
    aggregate: Mapped[str] = mapped_column(Text)         # JSON {key: value}
    # read by get() only, not by listings: deferred
    topics: Mapped[bytes | None] = mapped_column(LargeBinary, deferred=True)  # zlib JSON list;
    #                                                               None: no per_topic
    document: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)  # zlib JSON, the
    #                                           document with per_topic's place held by null
    # the queued job that recorded it (None: the synchronous API): a retried job finds it
    job_id: Mapped[str | None] = mapped_column(String(64))
    # the topic metadata its segments and weights came from (issue #28): stored metadata's
    # id@version, and the SHA-256 of the metadata (stored or inline); None: none given
    topic_metadata_version: Mapped[str | None] = mapped_column(String(MAX_NAME))
    topic_metadata_sha256: Mapped[str | None] = mapped_column(String(64))
    # the run it kept (issue #31): the SHA-256 of the run's canonical rows, a row of
    # kept_runs of its tenant (backend/kept_runs.py); None: its run was not kept
    run_sha256: Mapped[str | None] = mapped_column(String(64))
    # the result this one re-scores under other qrels (issue #31, backend/rescoring.py): its
    # id; None: an evaluation recorded it. Once per qrels digest (uq_results_rescores_...)
    rescores: Mapped[str | None] = mapped_column(String(32))


class ResultTag(Base):
    __tablename__ = "result_tags"
    __table_args__ = (Index("ix_result_tags_tag", "tag"),)

    result_pk: Mapped[int] = mapped_column(ForeignKey("results.pk", ondelete="CASCADE"),
                                           primary_key=True)
    tag: Mapped[str] = mapped_column(String(MAX_TAG), primary_key=True)


class ResultValues(Base):
    """One measure's per-topic values of one result (see the module's docstring)."""
    __tablename__ = "result_values"

    result_pk: Mapped[int] = mapped_column(ForeignKey("results.pk", ondelete="CASCADE"),
                                           primary_key=True)
    measure: Mapped[str] = mapped_column(String(MAX_NAME), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)       # order of the measure in a topic's row
    kind: Mapped[str] = mapped_column(String(1))         # FLOAT, INTEGER or JSON
    data: Mapped[bytes] = mapped_column(LargeBinary)     # float64/int64 bytes, or JSON text
    flags: Mapped[bytes | None] = mapped_column(LargeBinary)  # uint8 per topic; None: all VALUE
    n: Mapped[int] = mapped_column(Integer)              # finite values
    mean: Mapped[float | None] = mapped_column(Double)
    ci_low: Mapped[float | None] = mapped_column(Double)
    ci_high: Mapped[float | None] = mapped_column(Double)


class Baseline(Base):
    __tablename__ = "baselines"

    system_pk: Mapped[int] = mapped_column(ForeignKey("systems.pk", ondelete="CASCADE"),
                                           primary_key=True)
    result_pk: Mapped[int] = mapped_column(ForeignKey("results.pk", ondelete="CASCADE"),
                                           index=True)


class GateVerdict(Base):
    """A gated comparison's verdict on one recorded result it checked as a candidate (its
    checks of that candidate, as ``cranfield.compare.gate`` gives them, JSON). The trend marks a
    result with its latest verdict."""
    __tablename__ = "gate_verdicts"
    __table_args__ = (Index("ix_gate_verdicts_result_checked", "result_pk", "checked_at"),
                      Index("uq_gate_verdicts_result_job_id", "result_pk", "job_id",
                            unique=True))

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    result_pk: Mapped[int] = mapped_column(ForeignKey("results.pk", ondelete="CASCADE"))
    checked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    verdict: Mapped[str] = mapped_column(String(16))     # pass, fail or undecided
    baseline_id: Mapped[str | None] = mapped_column(String(32))  # a recorded baseline's id
    checks: Mapped[str] = mapped_column(Text)            # JSON list of the gate's checks
    job_id: Mapped[str | None] = mapped_column(String(64))  # the queued comparison's, if one


class ResultSegment(Base):
    """A recorded result's aggregate of one measure over one segment of its topics (scope
    ``SEGMENT``) or its weighted mean (scope ``WEIGHTED``, segment ``''``), from the topic
    metadata it was evaluated with (issue #28): what a trend by segment reads."""
    __tablename__ = "result_segments"

    result_pk: Mapped[int] = mapped_column(ForeignKey("results.pk", ondelete="CASCADE"),
                                           primary_key=True)
    scope: Mapped[str] = mapped_column(String(1), primary_key=True)
    segment: Mapped[str] = mapped_column(String(MAX_NAME), primary_key=True)
    measure: Mapped[str] = mapped_column(String(MAX_NAME), primary_key=True)
    n_topics: Mapped[int] = mapped_column(Integer)
    value: Mapped[float | None] = mapped_column(Double)  # None: not a finite number


SEGMENT, WEIGHTED = "s", "w"


# -- encoding ------------------------------------------------------------------------------

def _dumps(value: Any) -> str:
    """JSON that reads back exactly: floats by their shortest repr, NaN and ±Infinity kept."""
    return json.dumps(value, allow_nan=True, ensure_ascii=False, separators=(",", ":"))


def _pack(value: Any) -> bytes:
    return zlib.compress(_dumps(value).encode("utf-8"), 6)


def _unpack(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob).decode("utf-8"))


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _column_stats(x: np.ndarray) -> tuple[int, float | None, float | None, float | None]:
    """(n, mean, ci_low, ci_high) of the finite values of ``x`` (in strcmp topic order): the
    mean summed as trec_eval sums (cranfield.measures.aggregation.trec_mean: in turn, in a double),
    so a trend point prints the evaluation's aggregate, last digit included, where numpy's
    pairwise sum printed 0.0075 beside 0.0074 (issue #27); a 95% Student-t CI
    (cranfield.compare.stats.mean_ci); None where undefined (no values; one value has no CI)."""
    from cranfield.compare.stats import mean_ci
    from cranfield.measures.aggregation import trec_mean

    x = x[np.isfinite(x)]
    if x.size == 0:
        return 0, None, None, None
    pairwise, low, high = mean_ci(x, 0.95)
    mean = trec_mean(x)
    if low == pairwise == high:  # zero variance: the CI is the mean itself
        low = high = mean
    return int(x.size), *(None if v != v else float(v) for v in (mean, low, high))


def _strcmp_order(topics: list[str]) -> list[int] | None:
    """The positions of ``topics`` in trec_eval's order (strcmp: their UTF-8 bytes), or None
    when they are in it already (an evaluation's per_topic is)."""
    keys = [t.encode("utf-8", "surrogateescape") for t in topics]
    if all(a < b for a, b in zip(keys, keys[1:], strict=False)):
        return None
    return sorted(range(len(keys)), key=keys.__getitem__)


def _encode_column(column: list) -> tuple[str, bytes, bytes | None, np.ndarray]:
    """(kind, data, flags, the numeric values) of one measure's values over the topics."""
    if set(map(type, column)) <= {float}:  # the usual column: every topic has a float
        values = np.fromiter(column, dtype=np.float64, count=len(column))
        return FLOAT, values.tobytes(), None, values
    flags = np.fromiter((ABSENT if v is _ABSENT else NONE if v is None else VALUE
                         for v in column), dtype=np.uint8, count=len(column))
    present = [v for v in column if v is not _ABSENT and v is not None]
    numbers = np.asarray([float(v) for v in present if _is_number(v)], dtype=np.float64)
    packed = flags.tobytes() if flags.any() else None
    if all(isinstance(v, float) for v in present):
        kind, dtype = FLOAT, np.float64
    elif all(isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63
             for v in present):
        kind, dtype = INTEGER, np.int64
    else:
        data = _dumps([None if v is _ABSENT else v for v in column]).encode("utf-8")
        return JSON, data, packed, numbers
    values = np.zeros(len(column), dtype=dtype)
    values[flags == VALUE] = present
    return kind, values.tobytes(), packed, numbers


def encode_per_topic(per_topic: dict[str, dict[str, Any]]
                     ) -> tuple[list[str], list[dict[str, Any]]]:
    """The topic list and one :class:`ResultValues` row (as a dict) per measure key."""
    topics = list(per_topic)
    rows = [per_topic[t] for t in topics]
    keys: dict[str, None] = {}
    for row in rows:
        keys.update(dict.fromkeys(row))
    # stored in the order given; the mean summed in trec_eval's topic order
    order = _strcmp_order(topics)
    out = []
    for position, key in enumerate(keys):
        kind, data, flags, numbers = _encode_column([row.get(key, _ABSENT) for row in rows])
        if order is not None:
            numbers = _encode_column([rows[i].get(key, _ABSENT) for i in order])[3]
        n, mean, low, high = _column_stats(numbers)
        out.append({"measure": key, "position": position, "kind": kind, "data": data,
                    "flags": flags, "n": n, "mean": mean, "ci_low": low, "ci_high": high})
    return topics, out


def encode_segments(document: dict) -> list[dict[str, Any]]:
    """One :class:`ResultSegment` row (as a dict) per segment and measure of the document's
    ``segments`` (``{label: {"topics": n, "aggregate": {key: value}}}``) and per measure of
    its ``weighted`` means (``{key: value}``, over the evaluated topics); a value that is
    not a finite number is kept as None (the document keeps it as it was). A segment no
    evaluated topic carries (``topics`` 0, no aggregate) is kept too, each measure None
    over 0 topics, so the trend knows it was recorded (review R2 F7)."""
    def number(v: Any) -> float | None:
        return float(v) if _is_number(v) and math.isfinite(v) else None

    rows = []
    measures = list(document.get("weighted") or {})  # the measures a segment aggregates
    for label, seg in (document.get("segments") or {}).items():
        aggregate = seg.get("aggregate") or dict.fromkeys(measures)
        for key, value in aggregate.items():
            rows.append({"scope": SEGMENT, "segment": str(label), "measure": key,
                         "n_topics": int(seg.get("topics") or 0), "value": number(value)})
    evaluated = len((document.get("topics") or {}).get("evaluated") or [])
    for key, value in (document.get("weighted") or {}).items():
        rows.append({"scope": WEIGHTED, "segment": "", "measure": key,
                     "n_topics": evaluated, "value": number(value)})
    return rows


def _metadata_sha256(provenance: dict) -> str | None:
    """The digest of the topic metadata an evaluation was made with: its options' record of
    it (``cranfield.inputs.segments.TopicMetadata.summary``), None without."""
    record = (provenance.get("options") or {}).get("topic_metadata")
    digest = record.get("sha256") if isinstance(record, dict) else None
    return digest if isinstance(digest, str) and len(digest) <= 64 else None


def decode_column(kind: str, data: bytes, flags: bytes | None, n_topics: int) -> list:
    """A column's values, one per topic: the value, None, or ``_ABSENT``."""
    if kind == JSON:
        values = json.loads(data.decode("utf-8"))
    else:
        values = np.frombuffer(data, dtype=np.float64 if kind == FLOAT else np.int64).tolist()
    if len(values) != n_topics:
        raise ValueError(f"a per-topic column of {len(values)} values for {n_topics} topics")
    if flags is not None:
        marks = np.frombuffer(flags, dtype=np.uint8)
        for i in np.flatnonzero(marks).tolist():
            values[i] = None if marks[i] == NONE else _ABSENT
    return values


# -- the store ------------------------------------------------------------------------------

def utc(value: datetime) -> datetime:
    """Aware UTC (SQLite hands back naive datetimes: they were stored as UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def iso(value: datetime) -> str:
    return utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _when(value: datetime | str | None) -> datetime | None:
    """A time filter: an aware datetime, a naive one (read as UTC), or ISO 8601 text."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    try:
        return utc(value)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is past year 9999 in UTC
        raise ValueError(f"{value.isoformat()} is outside years 1-9999 in UTC") from None


def _window(since: datetime | str | None, until: datetime | str | None) -> list:
    """The conditions of a time filter: recorded at or after ``since``, at or before
    ``until`` (see :func:`_when`)."""
    start, end = _when(since), _when(until)
    return ([] if start is None else [Result.created_at >= start]) + \
        ([] if end is None else [Result.created_at <= end])


def _text(record: dict, key: str, limit: int, *, optional: bool = False) -> str | None:
    value = record.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise ValueError(f"record.{key} must be a string of 1-{limit} characters")
    return value


# key of the PostgreSQL advisory lock migrations hold ("cranfield" in a signed bigint)
_MIGRATION_LOCK = 0x6372616E6669656C
# Alembic's ``context`` is a module global: one migration at a time in a process, too
_MIGRATING = threading.Lock()


def migrate(url_or_engine: str | Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (Alembic's ``upgrade``), with a configuration built
    here: the scripts are in ``backend/migrations``, the connection is passed to env.py.
    Processes starting together (gunicorn's, the workers) migrate one at a time: an advisory
    lock on PostgreSQL, a lock file next to a SQLite file (and threads of one process one at
    a time: Alembic's context is global); the others then find it done."""
    engine = make_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
    try:
        # Alembic's own INFO lines (its plugins, its context, each step: a dozen at every
        # start of every process) held back: the one line below says what happened
        with _MIGRATING, _quiet("alembic"), _file_lock(engine), \
                engine.begin() as connection:
            from alembic import command
            from alembic.config import Config
            from alembic.runtime.migration import MigrationContext

            config = Config()
            config.set_main_option("script_location", MIGRATIONS)
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                   {"key": _MIGRATION_LOCK})
            config.attributes["connection"] = connection
            before = MigrationContext.configure(connection).get_current_revision()
            command.upgrade(config, revision)
            after = MigrationContext.configure(connection).get_current_revision()
            # one line a start: where the database is, and what this start changed
            log.info("database at revision %s%s", after,
                     " (up to date)" if before == after else
                     f" (migrated from {before or 'an empty database'})",
                     extra={"event": "database_migrated", "revision": after,
                            "from_revision": before})
    finally:
        if isinstance(url_or_engine, str):
            engine.dispose()


@contextlib.contextmanager
def _quiet(logger_name: str, level: int = logging.WARNING):
    """``logger_name``'s INFO lines held back for the duration (its warnings still pass)."""
    logger = logging.getLogger(logger_name)
    was = logger.level
    logger.setLevel(max(level, was))
    try:
        yield
    finally:
        logger.setLevel(was)


@contextlib.contextmanager
def _file_lock(engine: Engine):
    """An exclusive lock on ``<database file>.migrate-lock`` (SQLite files only)."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    with open(os.path.abspath(database) + ".migrate-lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def make_engine(url: str) -> Engine:
    """The engine :class:`ResultStore` uses for ``url``: a SQLite file's folder made, its
    foreign keys on, WAL journal, a 30 s lock wait; pre-ping for a server."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # pre-ping: a pooled connection the server dropped (a restart, an outage) is replaced
        # before use, so the first record after an outage does not fail on it. libpq waits
        # forever for a server that does not answer: a connection attempt gives up after
        # 5 s, and a connection whose data goes unacknowledged for 15 s (the server or the
        # network gone without a reset) is dropped, so a queued record's retries
        # (CRANFIELD_DB_RETRY_S) keep their pace instead of hanging the job
        timeouts = {"connect_timeout": 5, "tcp_user_timeout": 15_000}
        options = ({k: v for k, v in timeouts.items() if k not in parsed.query}
                   if parsed.get_backend_name() == "postgresql" else {})
        return create_engine(url, pool_pre_ping=True, connect_args=options)
    if parsed.database and parsed.database != ":memory:":
        os.makedirs(os.path.dirname(os.path.abspath(parsed.database)), exist_ok=True)
    # several threads (gunicorn's) write: wait for the lock rather than fail at once
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")  # ON DELETE CASCADE, and integrity
        if parsed.database and parsed.database != ":memory:":
            # readers (the API's processes) go on while a worker records a result
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    return engine




def _pin(session: Session, system_pk: int, result_pk: int) -> None:
    """The system's baseline row made or repointed in one statement (INSERT ... ON CONFLICT
    DO UPDATE, on PostgreSQL and SQLite alike): read-then-insert let two first pins of a
    system both find no row and both insert, and one failed on the key (issue #27: 19 of 48
    concurrent PUTs answered 500)."""
    name = session.get_bind().dialect.name
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:  # a database without ON CONFLICT: read, then write (not safe against a race)
        pinned = session.get(Baseline, system_pk)
        if pinned is None:
            session.add(Baseline(system_pk=system_pk, result_pk=result_pk))
        else:
            pinned.result_pk = result_pk
        session.flush()
        return
    statement = insert(Baseline).values(system_pk=system_pk, result_pk=result_pk)
    session.execute(statement.on_conflict_do_update(
        index_elements=[Baseline.system_pk], set_={"result_pk": statement.excluded.result_pk}))


class ResultStore:
    """Recorded results, per tenant (None: the shared space of a service without API keys).
    Construct with a SQLAlchemy URL (:func:`backend.config.database_url`); the schema is
    not made until :meth:`upgrade`. ``clock`` (tests, benchmarks) gives the recording time."""

    def __init__(self, url: str, *, clock: Callable[[], datetime] | None = None):
        self.url = url
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.clock = clock or (lambda: datetime.now(UTC))

    def upgrade(self) -> None:
        """Alembic ``upgrade head``: make or bring the schema up to date; then sweep the kept
        runs no result names (:meth:`sweep_kept_runs`)."""
        migrate(self.engine)
        self.sweep_kept_runs()

    def sweep_kept_runs(self) -> int:
        """Delete kept runs a failed recording left that no result names (issue #31,
        ``KeptRuns.sweep``): at startup and after each delete. A failure is logged, never
        raised (the sweep is housekeeping). Returns how many were deleted."""
        try:
            swept = kept_runs.KeptRuns(self).sweep()
        except Exception:
            log.exception("sweeping kept runs failed")
            return 0
        if swept:
            log.info("kept runs no result names deleted",
                     extra={"event": "kept_runs_swept", "runs": swept})
        return swept

    def close(self) -> None:
        self.engine.dispose()

    # -- writing ----------------------------------------------------------------------------

    def record(self, tenant: str | None, record: dict, document: dict, *,
               job_id: str | None = None, run_sha256: str | None = None,
               created_at: datetime | None = None, rescores: str | None = None) -> dict:
        """Keep ``document`` (an evaluation document as the API answers it) as a result of
        ``record["system"]``, labelled ``record["label"]`` (``commit`` and ``tags``
        optional). Returns its summary. ValueError if the record is malformed.

        ``job_id``: the queued job recording it. A tenant's job records one result: asked
        again (the job retried after a database outage, or after its worker died once it
        had recorded), this returns the result already recorded instead of a second one.

        ``run_sha256``: the tenant's kept run the result keeps (``backend.kept_runs``; see
        ``KeptRuns.record_with_run``): its row is locked in the recording transaction, and
        ``KeptRunGone`` raised (nothing recorded) if it was released meanwhile.

        ``created_at`` and ``rescores`` (issue #31, :mod:`backend.rescoring`): a re-scored
        result keeps the time of the result it re-scores (its id, ``rescores``); a second one
        under the same qrels digest is refused by the database (IntegrityError)."""
        if job_id is not None:
            found = self.recorded_by_job(tenant, job_id)
            if found is not None:
                return found
        system = _text(record, "system", MAX_NAME)
        label = _text(record, "label", MAX_NAME)
        commit = _text(record, "commit", MAX_COMMIT, optional=True)
        tags = record.get("tags") or []
        if not isinstance(tags, list | tuple) or not all(
                isinstance(t, str) and 0 < len(t) <= MAX_TAG for t in tags):
            raise ValueError(f"record.tags must be a list of strings of 1-{MAX_TAG} characters")
        tags = list(dict.fromkeys(tags))
        measures = [m["key"] for m in document.get("measures", [])]
        provenance = document.get("provenance") or {}
        # the per-topic values are kept apart; their place among the keys is kept too
        rest = {k: None if k == "per_topic" else v for k, v in document.items()}
        per_topic = document.get("per_topic")
        topics, columns = (encode_per_topic(per_topic) if per_topic is not None
                           else (None, []))
        created = utc(self.clock() if created_at is None else created_at)
        try:
            owner_pk = self._system_pk(tenant, system)
        except IntegrityError:  # made at the same moment by another recording: it is there now
            owner_pk = self._system_pk(tenant, system)
        try:
            with self.sessions.begin() as session:
                result = Result(id=uuid.uuid4().hex, tenant=tenant_key(tenant),
                                system_pk=owner_pk, label=label, commit=commit,
                                tags=_dumps(tags), created_at=created, rescores=rescores,
                                qrels_version=provenance.get("qrels_version"),
                                qrels_sha256=provenance.get("qrels_sha256"),
                                measures=_dumps(measures),
                                aggregate=_dumps(document.get("aggregate", {})),
                                topics=None if topics is None else _pack(topics),
                                document=_pack(rest), job_id=job_id,
                                topic_metadata_version=provenance.get(
                                    "topic_metadata_version"),
                                topic_metadata_sha256=_metadata_sha256(provenance),
                                run_sha256=run_sha256)
                if run_sha256 is not None and \
                        kept_runs.KeptRuns.lock(session, tenant, run_sha256) is None:
                    raise kept_runs.KeptRunGone(run_sha256)
                session.add(result)
                session.flush()
                session.add_all(ResultTag(result_pk=result.pk, tag=t) for t in tags)
                session.add_all(ResultValues(result_pk=result.pk, **c) for c in columns)
                session.add_all(ResultSegment(result_pk=result.pk, **row)
                                for row in encode_segments(document))
                return self.summary_of(result, system)
        except IntegrityError:
            # the same job recorded it meanwhile (another attempt, whose commit this one
            # did not see: a connection lost after COMMIT was sent): that one is the result
            found = None if job_id is None else self.recorded_by_job(tenant, job_id)
            if found is None:
                raise
            return found

    def recorded_by_job(self, tenant: str | None, job_id: str) -> dict | None:
        """The summary of the result ``tenant``'s queued job ``job_id`` recorded, or None."""
        with self.sessions() as session:
            row = session.execute(
                select(Result, System.name).join(System, System.pk == Result.system_pk)
                .where(Result.tenant == tenant_key(tenant), Result.job_id == job_id)).first()
            return None if row is None else self.summary_of(row[0], row[1])

    def delete(self, tenant: str | None, result_id: str) -> bool:
        """Forget a result (its values, tags, and the baseline it was); False if there is no
        such result of this tenant. A system left without results is no longer listed (its
        row stays: deleting it could take a result being recorded at that moment with it)."""
        with self.sessions.begin() as session:
            result = self._result(session, tenant, result_id)
            if result is None:
                return False
            for table in (ResultValues, ResultSegment, ResultTag, Baseline, GateVerdict):
                session.execute(delete(table).where(table.result_pk == result.pk))
            session.delete(result)
            session.flush()
            # its kept run goes with the last result naming it (issue #31)
            kept_runs.KeptRuns.release(session, tenant, result.run_sha256)
        self.sweep_kept_runs()
        return True

    def pin_baseline(self, tenant: str | None, system: str, result_id: str) -> dict:
        """Make ``result_id`` the accepted baseline of ``system``; returns its summary.
        NotFound unless it is this tenant's result of that system."""
        try:
            with self.sessions.begin() as session:
                owner = self._system(session, tenant, system)
                result = self._result(session, tenant, result_id)
                if owner is None or result is None or result.system_pk != owner.pk:
                    raise NotFound(f"no result {result_id!r} of system {system!r}")
                _pin(session, owner.pk, result.pk)
                return self.summary_of(result, owner.name)
        except IntegrityError:
            # the result deleted between the read and the pin: its key is gone (the foreign
            # key refused the row); any other violation is not a missing result
            with self.sessions() as session:
                if self._result(session, tenant, result_id) is not None:
                    raise
            raise NotFound(f"no result {result_id!r} of system {system!r}") from None

    # -- reading ----------------------------------------------------------------------------

    def get(self, tenant: str | None, result_id: str) -> dict | None:
        """The summary and ``document``: the recorded document, per-topic values included,
        exactly as recorded (floats bit for bit, NaN and None kept, keys in their order; a
        topic's values in the order the measures first appear among the topics, as an
        evaluation document has them). None if there is no such result of this tenant."""
        with self.sessions() as session:
            result = self._result(session, tenant, result_id, whole=True)
            if result is None:
                return None
            name = session.scalar(select(System.name).where(System.pk == result.system_pk))
            document = _unpack(result.document)
            if result.topics is not None:
                columns = session.execute(
                    select(ResultValues.measure, ResultValues.kind, ResultValues.data,
                           ResultValues.flags)
                    .where(ResultValues.result_pk == result.pk)
                    .order_by(ResultValues.position)).all()
                document["per_topic"] = self._rebuild(_unpack(result.topics), columns)
            return {**self.summary_of(result, name), "document": document}

    def summary(self, tenant: str | None, result_id: str) -> dict | None:
        """The result's summary (as listings give it, without its document or its per-topic
        values), or None: what a queued comparison needs to check a result id."""
        with self.sessions() as session:
            result = self._result(session, tenant, result_id)
            if result is None:
                return None
            name = session.scalar(select(System.name).where(System.pk == result.system_pk))
            return self.summary_of(result, name)

    def per_topic(self, tenant: str | None, result_id: str, measures: list[str]
                  ) -> dict[str, dict[str, Any]]:
        """``{measure key: {topic: value}}`` for the asked measures, values as recorded
        (None kept; a topic without the measure left out). A measure the result has no
        per-topic values of is absent from the answer. NotFound: no such result."""
        with self.sessions() as session:
            result = self._result(session, tenant, result_id)
            if result is None:
                raise NotFound(f"no result {result_id!r}")
            if result.topics is None or not measures:
                return {}
            topics = _unpack(result.topics)
            columns = session.execute(
                select(ResultValues.measure, ResultValues.kind, ResultValues.data,
                       ResultValues.flags)
                .where(ResultValues.result_pk == result.pk,
                       ResultValues.measure.in_(list(measures)))).all()
        found = {}
        for measure, kind, data, flags in columns:
            values = decode_column(kind, data, flags, len(topics))
            found[measure] = {t: v for t, v in zip(topics, values, strict=True)
                              if v is not _ABSENT}
        return {m: found[m] for m in measures if m in found}

    def systems(self, tenant: str | None, *, offset: int = 0, limit: int | None = None
                ) -> list[dict]:
        """The tenant's systems by name: ``{"name", "results", "latest", "baseline"}``; a
        page of them with ``offset``/``limit``."""
        return self._listed(tenant, offset=offset, limit=limit)

    def count_systems(self, tenant: str | None) -> int:
        """How many systems :meth:`systems` lists in all (those with results)."""
        with self.sessions() as session:
            return int(session.scalar(
                select(func.count(func.distinct(System.pk)))
                .join(Result, Result.system_pk == System.pk)
                .where(System.tenant == tenant_key(tenant))) or 0)

    def system(self, tenant: str | None, name: str) -> dict | None:
        """The system ``name`` as :meth:`systems` lists it; None if it has no results."""
        found = self._listed(tenant, System.name == name)
        return found[0] if found else None

    def _listed(self, tenant: str | None, *where, offset: int = 0, limit: int | None = None
                ) -> list[dict]:
        """:meth:`systems` of the tenant's systems that also meet ``where``."""
        with self.sessions() as session:
            query = (
                select(System.name, func.count(Result.pk), func.max(Result.created_at),
                       Baseline.result_pk)
                .join(Result, Result.system_pk == System.pk)
                .outerjoin(Baseline, Baseline.system_pk == System.pk)
                .where(System.tenant == tenant_key(tenant), *where)
                .group_by(System.pk, System.name, Baseline.result_pk)
                .order_by(System.name).offset(max(0, int(offset))))
            if limit is not None:
                query = query.limit(max(0, int(limit)))
            rows = session.execute(query).all()
            ids = dict(session.execute(select(Result.pk, Result.id).where(
                Result.pk.in_([r[3] for r in rows if r[3] is not None]))).all())
        return [{"name": name, "results": n, "latest": iso(latest),
                 "baseline": ids.get(baseline)} for name, n, latest, baseline in rows]

    def results(self, tenant: str | None, system: str, *, since: datetime | str | None = None,
                until: datetime | str | None = None, tag: str | None = None,
                qrels_version: str | None = None, measures: list[str] | None = None,
                offset: int = 0, limit: int = 50) -> tuple[list[dict], int]:
        """A page of the system's result summaries, newest first, and how many match in
        all. ``since``/``until``: recorded at or after / at or before (datetime or ISO
        8601; naive is UTC); ``tag``: carrying it; ``qrels_version``: against it;
        ``measures``: recorded with one of these keys. An unknown system has no results:
        ``([], 0)``."""
        with self.sessions() as session:
            owner = self._system(session, tenant, system)
            if owner is None:
                return [], 0
            where = [Result.system_pk == owner.pk, *_window(since, until)]
            if measures is not None:
                # matched exactly against each distinct measure list (few: a system's results
                # share them), so the page and the count are the database's, not a scan of
                # every result (LIKE on the JSON text is case-insensitive on SQLite)
                wanted = set(measures)
                lists = [text_ for text_ in session.scalars(
                    select(Result.measures).where(Result.system_pk == owner.pk).distinct())
                    if wanted.intersection(json.loads(text_))]
                where.append(Result.measures.in_(lists))
            if qrels_version is not None:
                where.append(Result.qrels_version == qrels_version)
            if tag is not None:
                where.append(Result.pk.in_(select(ResultTag.result_pk)
                                           .where(ResultTag.tag == tag)))
            total = session.scalar(select(func.count()).select_from(Result).where(*where))
            page = session.scalars(
                select(Result).where(*where)
                .order_by(Result.created_at.desc(), Result.pk.desc())
                .offset(max(0, int(offset))).limit(max(0, int(limit)))).all()
            return [self.summary_of(r, owner.name) for r in page], int(total or 0)

    def baseline(self, tenant: str | None, system: str) -> dict | None:
        """The summary of the system's pinned baseline, or None."""
        with self.sessions() as session:
            row = session.execute(
                select(Result, System.name)
                .join(Baseline, Baseline.result_pk == Result.pk)
                .join(System, System.pk == Baseline.system_pk)
                .where(System.tenant == tenant_key(tenant), System.name == system)).first()
            return None if row is None else self.summary_of(row[0], row[1])

    def trend(self, tenant: str | None, system: str, measure: str, *,
              since: datetime | str | None = None, until: datetime | str | None = None,
              limit: int | None = None, ids: list[str] | None = None,
              qrels: bool = False) -> tuple[list[dict], int]:
        """The system's results oldest first, each with the mean of ``measure``'s finite
        per-topic values and its 95% Student-t CI (``n_topics`` values; computed when the
        result was recorded), and ``gate``: the latest gate verdict on it (None if no gated
        comparison checked it). A result recorded without per-topic values gives its
        aggregate value as the mean (``n_topics`` 0, no CI); one without the measure is left
        out. ``since``/``until`` as :meth:`results`; ``limit``: the newest ``limit`` points
        of the window; ``ids``: only these results; ``qrels``: each point also names its
        ``qrels_version``, ``qrels_sha256`` and the result it re-scores (``rescores``; issue
        #31: the trend's series per qrels version). Returns the points and how many the
        window holds in all."""
        with self.sessions() as session:
            owner = self._system(session, tenant, system)
            if owner is None:
                return [], 0
            where = [Result.system_pk == owner.pk, *_window(since, until)]
            if ids is not None:
                where.append(Result.id.in_(list(ids)))
            has_values = select(ResultValues.result_pk).where(
                ResultValues.result_pk == Result.pk, ResultValues.measure == measure).exists()
            # the measure is in the result's per-topic values or in its aggregate (JSON text:
            # filtered exactly below, this only narrows the count and the page)
            in_aggregate = Result.aggregate.contains(_dumps(measure) + ":", autoescape=True)
            where.append(has_values | in_aggregate)
            total = session.scalar(select(func.count()).select_from(Result).where(*where))
            newest = (select(Result.pk).where(*where)
                      .order_by(Result.created_at.desc(), Result.pk.desc()))
            if limit is not None:
                newest = newest.limit(max(0, int(limit)))
            rows = session.execute(
                select(Result.pk, Result.id, Result.label, Result.commit, Result.created_at,
                       Result.aggregate, ResultValues.n, ResultValues.mean,
                       ResultValues.ci_low, ResultValues.ci_high, Result.qrels_version,
                       Result.qrels_sha256, Result.rescores)
                .outerjoin(ResultValues, (ResultValues.result_pk == Result.pk)
                           & (ResultValues.measure == measure))
                .where(Result.pk.in_(newest.scalar_subquery()))
                .order_by(Result.created_at, Result.pk)).all()
            verdicts = self._latest_verdicts(session, [r[0] for r in rows])
        out = []
        for pk, rid, label, commit, created, aggregate, n, mean, low, high, version, sha, \
                rescores in rows:
            if n is None:  # no per-topic column: the aggregate, if the result has the measure
                value = json.loads(aggregate).get(measure, _ABSENT)
                if value is _ABSENT:
                    total -= 1
                    continue
                n = 0
                mean = float(value) if _is_number(value) and math.isfinite(value) else None
            out.append({"id": rid, "label": label, "commit": commit,
                        "created_at": iso(created), "mean": mean, "n_topics": n,
                        "ci_low": low, "ci_high": high, "gate": verdicts.get(pk),
                        **({"qrels_version": version, "qrels_sha256": sha,
                            "rescores": rescores} if qrels else {})})
        return out, int(total or 0)

    def segment_trend(self, tenant: str | None, system: str, measure: str,
                      segment: str | None, *, since: datetime | str | None = None,
                      until: datetime | str | None = None, limit: int | None = None,
                      ids: list[str] | None = None, qrels: bool = False
                      ) -> tuple[list[dict], int]:
        """:meth:`trend` of ``measure``'s aggregate over the topics of ``segment`` (None: the
        weighted mean), as each result recorded it with its topic metadata (issue #28):
        ``mean`` the recorded aggregate, ``n_topics`` the segment's topics, no CI. A result
        recorded without that segment (or without weights) is left out."""
        scope = (ResultSegment.scope == SEGMENT) & (ResultSegment.segment == segment) \
            if segment is not None else (ResultSegment.scope == WEIGHTED)
        with self.sessions() as session:
            owner = self._system(session, tenant, system)
            if owner is None:
                return [], 0
            where = [Result.system_pk == owner.pk, *_window(since, until),
                     ResultSegment.result_pk == Result.pk, ResultSegment.measure == measure,
                     scope]
            if ids is not None:
                where.append(Result.id.in_(list(ids)))
            total = session.scalar(select(func.count()).select_from(Result)
                                   .join(ResultSegment, ResultSegment.result_pk == Result.pk)
                                   .where(*where))
            query = (select(Result.pk, Result.id, Result.label, Result.commit,
                            Result.created_at, ResultSegment.n_topics, ResultSegment.value,
                            Result.qrels_version, Result.qrels_sha256, Result.rescores)
                     .join(ResultSegment, ResultSegment.result_pk == Result.pk)
                     .where(*where).order_by(Result.created_at.desc(), Result.pk.desc()))
            if limit is not None:
                query = query.limit(max(0, int(limit)))
            rows = list(reversed(session.execute(query).all()))
            verdicts = self._latest_verdicts(session, [r[0] for r in rows])
        return [{"id": rid, "label": label, "commit": commit, "created_at": iso(created),
                 "mean": value, "n_topics": n, "ci_low": None, "ci_high": None,
                 "gate": verdicts.get(pk),
                 **({"qrels_version": version, "qrels_sha256": sha, "rescores": rescores}
                    if qrels else {})}
                for pk, rid, label, commit, created, n, value, version, sha, rescores in rows], \
            int(total or 0)

    def segments_of(self, tenant: str | None, system: str) -> list[str]:
        """The segment labels the system's results were recorded with, sorted."""
        with self.sessions() as session:
            owner = self._system(session, tenant, system)
            if owner is None:
                return []
            return sorted(session.scalars(
                select(ResultSegment.segment).distinct()
                .join(Result, Result.pk == ResultSegment.result_pk)
                .where(Result.system_pk == owner.pk, ResultSegment.scope == SEGMENT)).all())

    def record_verdict(self, tenant: str | None, result_id: str, verdict: str,
                       checks: list[dict], baseline_id: str | None = None, *,
                       job_id: str | None = None) -> bool:
        """Keep a gated comparison's ``verdict`` on the recorded result ``result_id`` (the
        candidate of ``checks``), against the recorded ``baseline_id`` if it was one. False
        if there is no such result of this tenant (deleted meanwhile): nothing kept.
        ``job_id``: the queued comparison's; it keeps one verdict per result, however often
        it is asked (retried after a database outage)."""
        try:
            with self.sessions.begin() as session:
                result = self._result(session, tenant, result_id)
                if result is None:
                    return False
                if job_id is not None and session.scalar(
                        select(GateVerdict.pk).where(GateVerdict.result_pk == result.pk,
                                                     GateVerdict.job_id == job_id)):
                    return True
                session.add(GateVerdict(result_pk=result.pk, checked_at=utc(self.clock()),
                                        verdict=verdict, baseline_id=baseline_id,
                                        checks=_dumps(checks), job_id=job_id))
                return True
        except IntegrityError:
            if job_id is None:  # not the job's own verdict kept meanwhile
                raise
            return True

    @staticmethod
    def _latest_verdicts(session: Session, pks: list[int]) -> dict[int, dict]:
        """Each result's latest gate verdict: ``{"verdict", "checked_at", "baseline",
        "checks"}``: only that row of each is read (a result gated every night keeps every
        verdict; the trend reads one)."""
        if not pks:
            return {}
        ranked = select(
            GateVerdict.result_pk, GateVerdict.verdict, GateVerdict.checked_at,
            GateVerdict.baseline_id, GateVerdict.checks,
            func.row_number().over(
                partition_by=GateVerdict.result_pk,
                order_by=(GateVerdict.checked_at.desc(), GateVerdict.pk.desc())).label("rank"),
        ).where(GateVerdict.result_pk.in_(pks)).subquery()
        rows = session.execute(
            select(ranked.c.result_pk, ranked.c.verdict, ranked.c.checked_at,
                   ranked.c.baseline_id, ranked.c.checks).where(ranked.c.rank == 1)).all()
        return {pk: {"verdict": verdict, "checked_at": iso(checked), "baseline": baseline,
                     "checks": json.loads(checks)}
                for pk, verdict, checked, baseline, checks in rows}

    # -- helpers ----------------------------------------------------------------------------

    def system_pk(self, tenant: str | None, name: str) -> int:
        """The system's key, the system made first if need be (in its own transaction)."""
        with self.sessions.begin() as session:
            return self._system(session, tenant, name, create=True).pk

    _system_pk = system_pk  # its name inside this module

    @staticmethod
    def _system(session: Session, tenant: str | None, name: str, *, create: bool = False
                ) -> System | None:
        found = session.scalar(select(System).where(System.tenant == tenant_key(tenant),
                                                    System.name == name))
        if found is None and create:
            found = System(tenant=tenant_key(tenant), name=name)
            session.add(found)
            session.flush()
        return found

    @staticmethod
    def _result(session: Session, tenant: str | None, result_id: str, *, whole: bool = False
                ) -> Result | None:
        if not isinstance(result_id, str) or len(result_id) > 32:
            return None
        query = select(Result).where(Result.tenant == tenant_key(tenant), Result.id == result_id)
        if whole:
            query = query.options(undefer(Result.topics), undefer(Result.document))
        return session.scalar(query)

    @staticmethod
    def _rebuild(topics: list[str], columns) -> dict[str, dict[str, Any]]:
        decoded = [(measure, decode_column(kind, data, flags, len(topics)))
                   for measure, kind, data, flags in columns]
        out: dict[str, dict[str, Any]] = {}
        for i, topic in enumerate(topics):
            row = {}
            for measure, values in decoded:
                if values[i] is not _ABSENT:
                    row[measure] = values[i]
            out[topic] = row
        return out

    @staticmethod
    def summary_of(result: Result, system: str) -> dict:
        summary = {"id": result.id, "system": system, "label": result.label,
                   "commit": result.commit, "tags": json.loads(result.tags),
                   "created_at": iso(result.created_at),
                   "qrels_version": result.qrels_version, "qrels_sha256": result.qrels_sha256,
                   "measures": json.loads(result.measures),
                   "aggregate": json.loads(result.aggregate)}
        if result.topic_metadata_sha256 is not None:  # recorded with segments (issue #28)
            summary["topic_metadata_version"] = result.topic_metadata_version
            summary["topic_metadata_sha256"] = result.topic_metadata_sha256
        if result.run_sha256 is not None:  # it kept its run (issue #31)
            summary["run_sha256"] = result.run_sha256
        return summary

    def measure_keys(self, tenant: str | None, system: str) -> list[str]:
        """The measure keys the system's results were recorded with (each once, in the order
        first seen, newest result first): what a trend can be asked of ([] if no system).
        Reads each distinct measure list once, not each result."""
        with self.sessions() as session:
            owner = self._system(session, tenant, system)
            if owner is None:
                return []
            lists = session.execute(
                select(Result.measures, func.max(Result.created_at))
                .where(Result.system_pk == owner.pk).group_by(Result.measures)
                .order_by(func.max(Result.created_at).desc())).all()
        return list(dict.fromkeys(k for text_, _ in lists for k in json.loads(text_)))


# The stored qrels' tables (issue #25) are on this metadata too, so that whatever reads it
# (Alembic's env.py, compare_metadata, a test emptying the tables) sees every table the
# migrations make. At the end: backend.qrels_db imports Base from here. So are the stored
# topic metadata's (issue #28).
from . import kept_runs, qrels_db, rescoring, topic_metadata_db  # noqa: E402, F401
