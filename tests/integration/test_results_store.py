"""Recorded results (backend/results.py, issue #18) on SQLite and on a real PostgreSQL.

Each module run makes its own PostgreSQL database (random name) on 127.0.0.1:5432 and drops
it at the end; without a server there the PostgreSQL half is skipped, or fails under CI=true
(``require``). Every test starts from empty tables.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from servers import PG_ADMIN, postgres_database
from sqlalchemy import create_engine, inspect, text

from backend.config import database_url
from backend.results import MIGRATIONS, Base, ResultStore, migrate
from backend.store import NotFound

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
# Student-t quantiles t_{df, 0.975}, written down (scipy.stats.t.ppf(0.975, df))
T_975 = {2: 4.302652729749462, 3: 3.1824463052837078, 4: 2.7764451051977934}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request, tmp_path_factory):
    """A URL of an empty database of this module (None: no PostgreSQL server)."""
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path_factory.mktemp("results") / "results.db")
        return
    with postgres_database("cranfield_test_") as url:
        yield url


class Clock:
    """Recording times under the test's control: T0, then one hour later each call."""

    def __init__(self, start: datetime = T0, step: timedelta = timedelta(hours=1)):
        self.now, self.step = start, step

    def __call__(self) -> datetime:
        now, self.now = self.now, self.now + self.step
        return now


@pytest.fixture
def url(database, require):
    require(database is not None, f"a PostgreSQL server at {PG_ADMIN} (trust auth)")
    return database


@pytest.fixture
def store(url):
    """A migrated store with empty tables and a :class:`Clock`."""
    s = ResultStore(url, clock=Clock())
    s.upgrade()
    with s.engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())
    yield s
    s.close()


def document(per_topic=None, *, aggregate=None, qrels_version="robust@1a2b", **extra):
    """An evaluation document as the API answers it."""
    per_topic = {"401": {"map": 0.5, "P_10": 0.4}, "402": {"map": 0.25, "P_10": 0.1}} \
        if per_topic is None else per_topic
    keys = list(dict.fromkeys(k for row in per_topic.values() for k in row)) or ["map"]
    doc = {
        "measures": [{"key": k, "canonical": k, "per_topic": True} for k in keys],
        "aggregate": aggregate if aggregate is not None else {
            k: sum(r[k] for r in per_topic.values() if isinstance(r.get(k), float))
            / max(1, len(per_topic)) for k in keys},
        "topics": {"evaluated": list(per_topic), "run_only": [], "qrels_only": []},
        "warnings": [],
        "provenance": {"engine": "cranfield", "profile": "trec_eval",
                       "options": {"relevance_level": 1, "judged_only": False},
                       "run_sha256": "a" * 64, "qrels_sha256": "b" * 64, "runid": "bm25"},
        "per_topic": per_topic,
        **extra,
    }
    if qrels_version:
        doc["provenance"]["qrels_version"] = qrels_version
    return doc


def same(a, b) -> bool:
    """Equal as JSON, NaN included, floats bit for bit, key order included."""
    return json.dumps(a, allow_nan=True) == json.dumps(b, allow_nan=True)


# -- migrations ---------------------------------------------------------------------------------

def test_migrations_from_an_empty_database_to_head(url):
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
        assert inspect(engine).get_table_names() == []
        migrate(url)
        tables = set(inspect(engine).get_table_names())
        assert tables == {"alembic_version", "systems", "results", "result_tags",
                          "result_values", "baselines", "gate_verdicts",
                          "qrels_sets", "qrels_versions", "qrels_order",  # 0004: stored qrels
                          # 0005: stored topic metadata, recorded segments (issue #28)
                          "topic_metadata_sets", "topic_metadata_versions", "result_segments",
                          "kept_runs", "kept_run_chunks",  # 0006: kept runs (issue #31)
                          "rescores", "rescore_items"}  # 0007: re-scoring (issue #31)
        with engine.connect() as connection:  # the migrations make what the models declare
            assert compare_metadata(MigrationContext.configure(connection), Base.metadata) == []
        head = ScriptDirectory(MIGRATIONS).get_current_head()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")
                                      ).scalars().all() == [head]
        migrate(url)  # at head: nothing to do
        again = ResultStore(url)
        again.upgrade()
        again.close()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")
                                      ).scalars().all() == [head]
    finally:
        engine.dispose()


def test_a_database_at_an_older_revision_is_brought_to_head_with_its_results(url):
    """A database made by 0001 (before gate verdicts) with a result in it: upgrading keeps
    the result and adds what is new."""
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
        migrate(url, "0001")
        assert "gate_verdicts" not in inspect(engine).get_table_names()
        with engine.begin() as connection:
            connection.execute(text("INSERT INTO systems (tenant, name) VALUES ('', 's')"))
            connection.execute(text(
                "INSERT INTO results (id, tenant, system_pk, label, tags, created_at, measures,"
                " aggregate, document) SELECT :id, '', pk, 'old', '[]', :at, :measures,"
                " :aggregate, :doc FROM systems"),
                {"id": "f" * 32, "at": T0, "measures": '["map"]', "aggregate": '{"map":0.25}',
                 "doc": zlib.compress(b"{}")})
        store = ResultStore(url)
        store.upgrade()
        try:
            points, total = store.trend(None, "s", "map")
            assert total == 1 and points[0]["mean"] == 0.25 and points[0]["gate"] is None
            assert store.record_verdict(None, "f" * 32, "pass", []) is True
        finally:
            store.close()
    finally:
        engine.dispose()


def test_processes_starting_together_migrate_once(url):
    """Three processes migrating an empty database at once (gunicorn's starting): they take
    turns, the first makes the schema, the others find it at head."""
    engine = create_engine(url)
    try:
        Base.metadata.drop_all(engine)
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE IF EXISTS alembic_version"))
        code = "import sys; from backend.results import migrate; migrate(sys.argv[1])"
        procs = [subprocess.Popen([sys.executable, "-c", code, url], cwd=ROOT,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        with engine.connect() as connection:
            assert connection.execute(text("SELECT version_num FROM alembic_version")
                                      ).scalars().all() == [
                ScriptDirectory(MIGRATIONS).get_current_head()]
    finally:
        engine.dispose()


def test_database_url_default_is_a_sqlite_file(tmp_path):
    assert database_url({"CRANFIELD_DATA_DIR": str(tmp_path)}) == \
        "sqlite:///" + str(tmp_path / "cranfield.db")
    assert database_url({}).endswith("/instance/cranfield.db")
    assert database_url({"CRANFIELD_DATABASE_URL": "postgresql://u@db/c"}) == \
        "postgresql+psycopg://u@db/c"
    assert database_url({"CRANFIELD_DATABASE_URL": "sqlite:////x.db"}) == "sqlite:////x.db"
    # the embedded default makes its folder on first use
    folder = tmp_path / "new" / "instance"
    s = ResultStore(database_url({"CRANFIELD_DATA_DIR": str(folder)}))
    s.upgrade()
    s.close()
    assert (folder / "cranfield.db").is_file()


# -- record and get -----------------------------------------------------------------------------

def test_record_and_get_round_trip_exactly(store):
    per_topic = {
        "401": {"map": 0.1 + 0.2, "P_10": 5e-324, "num_rel": 12, "runid": "x", "mix": 1},
        "402": {"map": float("nan"), "P_10": None, "num_rel": 2**62, "runid": None, "mix": 0.5},
        "403": {"map": 1 / 3, "num_rel": -7, "runid": "y", "mix": None},     # no P_10
        "404": {"map": None, "P_10": float("inf"), "num_rel": None, "runid": "z",
                "mix": float("nan")},
    }
    doc = document(per_topic, aggregate={"map": 0.21666666666666667, "P_10": None,
                                         "num_rel": 7.0, "runid": None, "mix": 0.75},
                   efficiency={"topics": 4, "mean_ms": 12.5, "p50_ms": 11.0},
                   details={"401": {"relevant_ranks": [1, 3], "unjudged_in_top": ["d9"]}})
    summary = store.record(None, {"system": "bm25", "label": "nightly 1", "commit": "abc123",
                                  "tags": ["nightly", "main"]}, doc)
    assert summary == {
        "id": summary["id"], "system": "bm25", "label": "nightly 1", "commit": "abc123",
        "tags": ["nightly", "main"], "created_at": "2026-01-01T00:00:00.000000Z",
        "qrels_version": "robust@1a2b", "qrels_sha256": "b" * 64,
        "measures": ["map", "P_10", "num_rel", "runid", "mix"],
        "aggregate": doc["aggregate"]}
    got = store.get(None, summary["id"])
    assert {k: v for k, v in got.items() if k != "document"} == summary
    assert same(got["document"], doc)
    back = got["document"]["per_topic"]
    assert math.isnan(back["402"]["map"]) and back["402"]["P_10"] is None
    assert "P_10" not in back["403"]
    assert struct.pack("<d", back["401"]["map"]) == struct.pack("<d", 0.1 + 0.2)
    assert back["401"]["P_10"] == 5e-324 and back["404"]["P_10"] == math.inf
    assert back["402"]["num_rel"] == 2**62 and type(back["401"]["num_rel"]) is int
    assert type(back["401"]["mix"]) is int and math.isnan(back["404"]["mix"])
    assert got["document"]["provenance"] == doc["provenance"]
    assert got["document"]["measures"] == doc["measures"]


def test_a_document_without_per_topic_values_reads_back_without_them(store):
    doc = document()
    del doc["per_topic"]
    rid = store.record(None, {"system": "s", "label": "l"}, doc)["id"]
    got = store.get(None, rid)
    assert "per_topic" not in got["document"] and same(got["document"], doc)
    assert got["commit"] is None and got["tags"] == []
    assert store.per_topic(None, rid, ["map"]) == {}
    empty = document({})
    rid = store.record(None, {"system": "s", "label": "l"}, empty)["id"]
    assert same(store.get(None, rid)["document"], empty)


@pytest.mark.parametrize("record", [
    {"label": "l"}, {"system": "", "label": "l"}, {"system": "s"}, {"system": 3, "label": "l"},
    {"system": "s", "label": "l", "tags": "nightly"}, {"system": "s", "label": "l", "tags": [""]},
    {"system": "s" * 201, "label": "l"}, {"system": "s", "label": "l", "commit": 7},
])
def test_a_malformed_record_is_refused(store, record):
    with pytest.raises(ValueError):
        store.record(None, record, document())
    assert store.systems(None) == []


def test_unknown_ids_are_not_found(store):
    assert store.get(None, "0" * 32) is None
    assert store.get(None, "x" * 300) is None
    assert store.delete(None, "0" * 32) is False
    with pytest.raises(NotFound):
        store.per_topic(None, "0" * 32, ["map"])


# -- listing ------------------------------------------------------------------------------------

def _nights(store, tenant=None, system="bm25", n=5):
    """``n`` results of ``system``, one a day from T0 (tags and qrels versions vary)."""
    store.clock = Clock(step=timedelta(days=1))
    out = []
    for i in range(n):
        tags = ["nightly"] + (["release"] if i % 2 == 0 else [])
        qv = "robust@v1" if i < 3 else "robust@v2"
        out.append(store.record(tenant, {"system": system, "label": f"night {i}",
                                         "tags": tags}, document(qrels_version=qv)))
    return out


def test_results_newest_first_with_filters_and_paging(store):
    nights = _nights(store)
    ids = [r["id"] for r in nights]
    page, total = store.results(None, "bm25")
    assert total == 5 and [r["id"] for r in page] == ids[::-1]
    assert page[0] == nights[-1]
    page, total = store.results(None, "bm25", offset=1, limit=2)
    assert total == 5 and [r["id"] for r in page] == [ids[3], ids[2]]
    page, total = store.results(None, "bm25", offset=4, limit=2)
    assert total == 5 and [r["id"] for r in page] == [ids[0]]
    assert store.results(None, "bm25", offset=10) == ([], 5)
    # time: inclusive bounds, aware datetimes or ISO text
    page, total = store.results(None, "bm25", since=T0 + timedelta(days=1),
                                until="2026-01-04T00:00:00Z")
    assert total == 3 and [r["id"] for r in page] == [ids[3], ids[2], ids[1]]
    page, total = store.results(None, "bm25", since="2026-01-04T00:00:01+00:00")
    assert [r["id"] for r in page] == [ids[4]] and total == 1
    page, total = store.results(None, "bm25", until=datetime(2026, 1, 1))  # naive: UTC
    assert [r["id"] for r in page] == [ids[0]]
    # tag, qrels version, and together
    page, total = store.results(None, "bm25", tag="release")
    assert total == 3 and [r["id"] for r in page] == [ids[4], ids[2], ids[0]]
    page, total = store.results(None, "bm25", qrels_version="robust@v2")
    assert total == 2 and [r["id"] for r in page] == [ids[4], ids[3]]
    page, total = store.results(None, "bm25", tag="release", qrels_version="robust@v1",
                                since=T0 + timedelta(hours=1), limit=1)
    assert total == 1 and [r["id"] for r in page] == [ids[2]]
    assert store.results(None, "bm25", tag="nope") == ([], 0)
    assert store.results(None, "unknown") == ([], 0)


def test_systems_listing(store):
    nights = _nights(store, system="bm25", n=3)
    other = _nights(store, system="dense", n=2)
    store.pin_baseline(None, "dense", other[0]["id"])
    assert store.systems(None) == [
        {"name": "bm25", "results": 3, "latest": nights[-1]["created_at"], "baseline": None},
        {"name": "dense", "results": 2, "latest": other[-1]["created_at"],
         "baseline": other[0]["id"]},
    ]


def test_delete(store):
    nights = _nights(store, n=3)
    store.pin_baseline(None, "bm25", nights[1]["id"])
    assert store.delete(None, nights[1]["id"]) is True
    assert store.get(None, nights[1]["id"]) is None
    assert store.delete(None, nights[1]["id"]) is False
    assert store.baseline(None, "bm25") is None  # the pinned result went, so did the pin
    page, total = store.results(None, "bm25")
    assert total == 2 and [r["id"] for r in page] == [nights[2]["id"], nights[0]["id"]]
    assert store.get(None, nights[0]["id"]) is not None
    for r in (nights[0], nights[2]):
        assert store.delete(None, r["id"])
    assert store.systems(None) == []  # no results left: no system listed
    assert store.results(None, "bm25") == ([], 0) and store.trend(None, "bm25", "map") == ([], 0)
    with store.engine.connect() as connection:
        for table in ("results", "result_values", "result_tags", "baselines"):
            assert connection.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 0


# -- baselines ----------------------------------------------------------------------------------

def test_baseline_pin(store):
    nights = _nights(store, n=3)
    dense = store.record(None, {"system": "dense", "label": "d"}, document())
    theirs = store.record("acme", {"system": "bm25", "label": "t"}, document())
    assert store.baseline(None, "bm25") is None
    assert store.pin_baseline(None, "bm25", nights[0]["id"]) == nights[0]
    assert store.baseline(None, "bm25") == nights[0]
    assert store.pin_baseline(None, "bm25", nights[2]["id"]) == nights[2]  # re-pinned
    assert store.baseline(None, "bm25") == nights[2]
    for system, rid in (("bm25", dense["id"]),     # another system's result
                        ("bm25", theirs["id"]),    # another tenant's result
                        ("unknown", nights[0]["id"]),
                        ("bm25", "0" * 32)):
        with pytest.raises(NotFound):
            store.pin_baseline(None, system, rid)
    assert store.baseline(None, "bm25") == nights[2]
    assert store.baseline(None, "dense") is None and store.baseline(None, "unknown") is None


# -- per-topic values and trend -----------------------------------------------------------------

def test_per_topic(store):
    per_topic = {"1": {"map": 0.5, "P_10": 0.25}, "2": {"map": None}, "3": {"map": 0.75,
                                                                           "P_10": 1.0}}
    rid = store.record(None, {"system": "s", "label": "l"}, document(per_topic))["id"]
    assert store.per_topic(None, rid, ["map", "P_10"]) == {
        "map": {"1": 0.5, "2": None, "3": 0.75}, "P_10": {"1": 0.25, "3": 1.0}}
    assert store.per_topic(None, rid, ["P_10", "ndcg"]) == {"P_10": {"1": 0.25, "3": 1.0}}
    assert list(store.per_topic(None, rid, ["P_10", "map"])) == ["P_10", "map"]
    assert store.per_topic(None, rid, []) == {}


def _ci(values):
    """Mean and 95% t CI by hand (T_975 written down above)."""
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = T_975[n - 1] * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def test_trend(store):
    store.clock = Clock(step=timedelta(days=1))
    first = store.record(None, {"system": "s", "label": "n1"}, document(
        {"a": {"map": 0.2}, "b": {"map": 0.4}, "c": {"map": 0.6}, "d": {"map": 0.8}}))
    # None and NaN are no values; a topic without the measure is none either
    second = store.record(None, {"system": "s", "label": "n2"}, document(
        {"a": {"map": 0.1}, "b": {"map": None}, "c": {"map": 0.4}, "d": {"map": float("nan")},
         "e": {"P_10": 0.3}, "f": {"map": 0.4}}))
    without = document(aggregate={"map": 0.375, "P_10": 0.25})
    del without["per_topic"]
    third = store.record(None, {"system": "s", "label": "n3"}, without)
    store.record(None, {"system": "s", "label": "other"}, document({"a": {"P_10": 0.5}}))
    fifth = store.record(None, {"system": "s", "label": "n5"}, document({"a": {"map": 0.7}}))
    store.record(None, {"system": "other", "label": "x"}, document())
    trend, total = store.trend(None, "s", "map")
    assert total == 4
    assert [p["id"] for p in trend] == [first["id"], second["id"], third["id"], fifth["id"]]
    assert [p["label"] for p in trend] == ["n1", "n2", "n3", "n5"]
    assert [p["created_at"] for p in trend] == [first["created_at"], second["created_at"],
                                               third["created_at"], fifth["created_at"]]
    # by hand: 0.2 .. 0.8: mean 0.5, sd sqrt(0.2/3), half-width t_{3,.975} sd / 2
    mean, low, high = _ci([0.2, 0.4, 0.6, 0.8])
    assert mean == pytest.approx(0.5, abs=1e-15)
    assert low == pytest.approx(0.5 - 3.1824463052837078 * math.sqrt(0.2 / 3) / 2, abs=1e-15)
    p = trend[0]
    assert p["n_topics"] == 4 and p["mean"] == pytest.approx(mean, abs=1e-12)
    assert p["ci_low"] == pytest.approx(low, abs=1e-12)
    assert p["ci_high"] == pytest.approx(high, abs=1e-12)
    mean, low, high = _ci([0.1, 0.4, 0.4])
    p = trend[1]
    assert p["n_topics"] == 3 and p["mean"] == pytest.approx(0.3, abs=1e-12)
    assert (p["ci_low"], p["ci_high"]) == (pytest.approx(low, abs=1e-12),
                                           pytest.approx(high, abs=1e-12))
    # recorded without per-topic values: the aggregate, no CI
    assert trend[2] | {"id": 0, "created_at": 0} == {
        "id": 0, "label": "n3", "commit": None, "created_at": 0, "mean": 0.375,
        "n_topics": 0, "ci_low": None, "ci_high": None, "gate": None}
    # one value: a mean, no CI
    assert (trend[3]["mean"], trend[3]["n_topics"], trend[3]["ci_low"], trend[3]["ci_high"]) \
        == (0.7, 1, None, None)
    assert store.trend(None, "s", "ndcg") == ([], 0)
    assert store.trend(None, "unknown", "map") == ([], 0)
    # a window: the newest points of it, oldest first, and how many it holds
    assert [p["label"] for p in store.trend(None, "s", "map", limit=2)[0]] == ["n3", "n5"]
    assert store.trend(None, "s", "map", limit=2)[1] == 4
    page, total = store.trend(None, "s", "map", since=second["created_at"],
                              until=third["created_at"])
    assert [p["label"] for p in page] == ["n2", "n3"] and total == 2


# -- tenants ------------------------------------------------------------------------------------

def test_tenant_isolation_on_every_method(store):
    mine = store.record("acme", {"system": "bm25", "label": "a", "tags": ["t"]}, document())
    shared = store.record(None, {"system": "bm25", "label": "s", "tags": ["t"]}, document())
    store.pin_baseline("acme", "bm25", mine["id"])
    for other in (None, "globex"):
        assert store.get(other, mine["id"]) is None
        assert store.delete(other, mine["id"]) is False
        with pytest.raises(NotFound):
            store.per_topic(other, mine["id"], ["map"])
        with pytest.raises(NotFound):
            store.pin_baseline(other, "bm25", mine["id"])
        assert [r["id"] for r in store.results(other, "bm25", tag="t")[0]] == \
            ([shared["id"]] if other is None else [])
        assert [p["id"] for p in store.trend(other, "bm25", "map")[0]] == \
            ([shared["id"]] if other is None else [])
    assert store.get("acme", shared["id"]) is None
    assert store.delete("acme", shared["id"]) is False
    assert store.systems("globex") == [] and store.baseline("globex", "bm25") is None
    assert store.baseline(None, "bm25") is None
    assert [s["results"] for s in store.systems(None)] == [1]
    assert store.systems("acme") == [{"name": "bm25", "results": 1, "latest": mine["created_at"],
                                      "baseline": mine["id"]}]
    assert store.baseline("acme", "bm25") == mine
    assert store.results("acme", "bm25") == ([mine], 1)
    assert store.get("acme", mine["id"])["label"] == "a"
    assert store.per_topic("acme", mine["id"], ["map"]) == {"map": {"401": 0.5, "402": 0.25}}
    assert store.delete("acme", mine["id"]) is True
    assert store.get(None, shared["id"]) is not None


def test_concurrent_recordings_of_a_new_system(store):
    """Threads recording the first results of one system at once: one system, every result."""
    from concurrent.futures import ThreadPoolExecutor

    store.clock = lambda: datetime.now(UTC)
    with ThreadPoolExecutor(8) as pool:
        done = list(pool.map(lambda i: store.record("acme", {"system": "new", "label": str(i)},
                                                    document()), range(8)))
    assert len({r["id"] for r in done}) == 8
    assert store.results("acme", "new", limit=100)[1] == 8
    assert [s["results"] for s in store.systems("acme")] == [8]


# -- gate verdicts, one system, paging ----------------------------------------------------------

def test_a_results_latest_gate_verdict_marks_its_trend_point(store):
    first = store.record(None, {"system": "s", "label": "n1"}, document())
    second = store.record(None, {"system": "s", "label": "n2"}, document())
    check = {"measure": "map", "baseline": "s@n1", "candidate": "s@n2", "verdict": "fail",
             "offending_topics": [{"topic": "402", "drop": 0.25}]}
    assert store.record_verdict(None, second["id"], "pass", [{**check, "verdict": "pass"}],
                                first["id"]) is True
    assert store.record_verdict(None, second["id"], "fail", [check], first["id"]) is True
    # another tenant's result, or one deleted, takes no verdict
    assert store.record_verdict("acme", second["id"], "fail", [check]) is False
    assert store.record_verdict(None, "0" * 32, "fail", [check]) is False
    points, _ = store.trend(None, "s", "map")
    assert points[0]["gate"] is None
    gate = points[1]["gate"]
    assert (gate["verdict"], gate["baseline"], gate["checks"]) == ("fail", first["id"], [check])
    assert gate["checked_at"] > second["created_at"]  # the clock moved on
    assert store.trend("acme", "s", "map") == ([], 0)
    # deleting the result takes its verdicts with it (no row left behind)
    assert store.delete(None, second["id"]) is True
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM gate_verdicts")).scalar() == 0


def test_systems_pages_and_one_system(store):
    for name in ("c", "a", "b", "a"):
        store.record("acme", {"system": name, "label": "x"}, document())
    pinned = store.record("acme", {"system": "b", "label": "y"}, document())
    store.pin_baseline("acme", "b", pinned["id"])
    assert [s["name"] for s in store.systems("acme")] == ["a", "b", "c"]
    assert [s["name"] for s in store.systems("acme", offset=1, limit=1)] == ["b"]
    assert [s["name"] for s in store.systems("acme", offset=2, limit=5)] == ["c"]
    assert store.count_systems("acme") == 3 and store.count_systems(None) == 0
    assert store.system("acme", "b") == {"name": "b", "results": 2,
                                         "latest": pinned["created_at"],
                                         "baseline": pinned["id"]}
    assert store.system("acme", "a")["results"] == 2
    assert store.system("acme", "a")["baseline"] is None
    assert store.system(None, "a") is None and store.system("acme", "z") is None


def test_a_migration_logs_one_line_and_alembic_none(tmp_path, caplog):
    """Alembic's INFO lines (plugins, context, each step: a dozen per process at every start)
    are held back; one line says where the database is and what this start changed. Its
    warnings still pass (the logger is set back after)."""
    import logging

    url = f"sqlite:///{tmp_path}/results.db"
    head = ScriptDirectory(MIGRATIONS).get_current_head()
    with caplog.at_level(logging.INFO):
        migrate(url)
        migrate(url)
    assert [r.name for r in caplog.records if r.name.startswith("alembic")] == []
    said = [r.getMessage() for r in caplog.records if r.name == "cranfield.results"]
    assert said == [f"database at revision {head} (migrated from an empty database)",
                    f"database at revision {head} (up to date)"]
    assert logging.getLogger("alembic").level == logging.NOTSET
