"""Stored topic metadata and recorded segments (issue #28) in the results database, on SQLite
and on a real PostgreSQL (127.0.0.1:5432; required under CI=true): the migration 0005 from a
database that already holds results (made at 0004) and back, versions, If-Match, tenants and
concurrent puts (backend/topic_metadata_db.py), and a recorded result's per-segment
aggregates and weighted means as the trend by segment reads them (backend/results.py).
"""

from __future__ import annotations

import threading
import zlib
from datetime import UTC, datetime, timedelta

import pytest
from servers import PG_ADMIN, postgres_database
from sqlalchemy import create_engine, inspect, text

import cranfield
from backend.results import MIGRATIONS, Base, ResultStore, migrate
from backend.store import Busy, NotFound, VersionMismatch
from backend.topic_metadata_db import TopicMetadataStore
from cranfield.inputs.segments import read_topic_metadata
from cranfield.reports.result_document import evaluation_document

METADATA = {"q1": {"segments": ["tail"], "weight": 3.0},
            "q2": {"segments": ["head", "lang=de"]}, "q3": {"segments": []}}
QRELS = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
RUN = {"q1": {"x": 2.0, "a": 1.0}, "q2": {"b": 2.0, "x": 1.0}, "q3": {"x": 2.0, "c": 1.0}}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request, tmp_path_factory):
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path_factory.mktemp("segments") / "results.db")
        return
    with postgres_database("cranfield_segments_") as url:
        yield url


@pytest.fixture
def url(database, require):
    require(database is not None, f"a PostgreSQL server at {PG_ADMIN} (trust auth)")
    return database


@pytest.fixture
def results(url):
    store = ResultStore(url, clock=iter(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i)
                                        for i in range(1000)).__next__)
    store.upgrade()
    with store.engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())
    yield store
    store.close()


def _document(run=RUN, metadata=METADATA) -> dict:
    ev = cranfield.evaluate(QRELS, run, ["map", "num_rel_ret"], topic_metadata=metadata)
    return evaluation_document(ev, {"per_topic": True}, "a" * 64, "b" * 64, None)


def _downgrade(engine, revision: str) -> None:
    """Alembic's downgrade, configured as :func:`backend.results.migrate` configures its
    upgrade (the service never downgrades: this checks 0005's downgrade runs)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def test_migration_0005_over_recorded_results_and_back(url):
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
        migrate(url, "0004")
        assert "topic_metadata_sets" not in inspect(engine).get_table_names()
        with engine.begin() as connection:  # a result recorded before 0005, as 0004 kept it
            connection.execute(text("INSERT INTO systems (tenant, name) VALUES ('', 'bm25')"))
            connection.execute(text(
                "INSERT INTO results (id, tenant, system_pk, label, tags, created_at, "
                "measures, aggregate, document) SELECT :id, '', pk, 'old', '[]', :at, "
                "'[\"map\"]', '{\"map\": 0.5}', :doc FROM systems"),
                {"id": "f" * 32, "at": datetime(2025, 1, 1, tzinfo=UTC),
                 "doc": zlib.compress(b'{"aggregate": {"map": 0.5}}')})
        migrate(url)
        tables = set(inspect(engine).get_table_names())
        assert {"topic_metadata_sets", "topic_metadata_versions",
                "result_segments"} <= tables
        columns = {c["name"] for c in inspect(engine).get_columns("results")}
        assert {"topic_metadata_version", "topic_metadata_sha256"} <= columns
        store = ResultStore(url)
        try:
            old = store.summary(None, "f" * 32)  # read back: no metadata, no new keys
            assert old["aggregate"] == {"map": 0.5} and "topic_metadata_sha256" not in old
            assert store.segment_trend(None, "bm25", "map", "tail") == ([], 0)
        finally:
            store.close()
        _downgrade(engine, "0004")  # and back: the tables and columns go, the result stays
        assert "result_segments" not in inspect(engine).get_table_names()
        assert "topic_metadata_sha256" not in {
            c["name"] for c in inspect(engine).get_columns("results")}
        with engine.connect() as connection:
            assert connection.execute(text("SELECT label FROM results")).scalars().all() \
                == ["old"]
        migrate(url)
    finally:
        engine.dispose()


def test_versions_if_match_tenants_and_delete(results):
    store = TopicMetadataStore(results.engine)
    md = read_topic_metadata(METADATA)
    meta, created = store.put(None, "traffic", md)
    assert created and meta["sha256"] == md.sha256 and meta["version"] == md.sha256[:16]
    assert meta["segments"] == {"head": 1, "lang=de": 1, "tail": 1} and meta["weighted"]
    # the same metadata as text: the same version, nothing added
    same, created = store.put(None, "traffic", read_topic_metadata("q3 -\nq2 lang=de,head\n"
                                                                   "q1 tail 3\n"))
    assert not created and same["versions"] == [meta["version"]]
    other = read_topic_metadata(dict(METADATA, q3={"segments": ["tail"]}))
    with pytest.raises(VersionMismatch):
        store.put(None, "traffic", other, if_match='"0000000000000000"')
    second, created = store.put(None, "traffic", other, if_match=f'"{meta["version"]}"')
    assert created and second["versions"] == [meta["version"], other.sha256[:16]]
    # the first version again: a third entry, its first metadata kept
    back, created = store.put(None, "traffic", md)
    assert created and back["versions"][-1] == meta["version"]
    assert back["created"] == meta["created"]
    mapping, got = store.load(None, f"traffic@{meta['version']}")
    assert read_topic_metadata(mapping) == md and got["latest"] == meta["version"]
    # tenants: another tenant (and the shared space) do not see it
    with pytest.raises(NotFound):
        store.meta("team-b", "traffic")
    store.put("team-b", "traffic", other)
    assert store.meta("team-b", "traffic")["versions"] == [other.sha256[:16]]
    assert store.list(None, 0, 10)[1] == 1 and store.list("team-b", 0, 10)[1] == 1
    store.delete(None, "traffic")
    with pytest.raises(NotFound):
        store.load(None, "traffic")
    assert store.meta("team-b", "traffic")["id"] == "traffic"


def test_concurrent_puts_of_one_id_all_land(results):
    store = TopicMetadataStore(results.engine)
    versions = [read_topic_metadata({"q1": {"weight": float(i)}}) for i in range(8)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(versions))

    def put(md):
        start.wait()
        for _ in range(20):
            try:
                store.put(None, "race", md)
                return
            except Busy:  # SQLite's writers race for the next position: retried
                continue
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    threads = [threading.Thread(target=put, args=(md,)) for md in versions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    listed = store.meta(None, "race")["versions"]
    assert sorted(listed) == sorted(md.sha256[:16] for md in versions)


def test_recorded_segments_are_the_documents_and_the_trend_reads_them(results):
    first = _document()
    worse = _document(run={**RUN, "q1": {"a": 1.0, "x": 2.0, "y": 3.0}})
    ids = []
    for label, doc in (("first", first), ("worse", worse)):
        summary = results.record(None, {"system": "bm25", "label": label}, doc)
        ids.append(summary["id"])
        assert summary["topic_metadata_sha256"] == read_topic_metadata(METADATA).sha256
    got = results.get(None, ids[0])
    assert got["document"]["segments"] == first["segments"]
    assert got["document"]["weighted"] == first["weighted"]
    tail, total = results.segment_trend(None, "bm25", "map", "tail")
    assert total == 2 and [p["mean"] for p in tail] == [
        first["segments"]["tail"]["aggregate"]["map"],
        worse["segments"]["tail"]["aggregate"]["map"]] == [0.5, 1 / 3]
    assert [p["n_topics"] for p in tail] == [1, 1]
    weighted, _ = results.segment_trend(None, "bm25", "map", None)
    assert [p["mean"] for p in weighted] == [first["weighted"]["map"], worse["weighted"]["map"]]
    assert results.segments_of(None, "bm25") == ["head", "lang=de", "tail"]
    counts, _ = results.segment_trend(None, "bm25", "num_rel_ret", "head")
    assert [p["mean"] for p in counts] == [1.0, 1.0]
    # deleting a result deletes its segments
    assert results.delete(None, ids[0])
    with results.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM result_segments")).scalar() == \
            len(worse["segments"]["tail"]["aggregate"]) * 3 + len(worse["weighted"])
