"""Benchmark of recorded results (issue #18): ``backend.results.ResultStore`` holding a
nightly job's history.

Records ``--results`` (default 1,000) results of one system, each an evaluation document of
``--topics`` (default 7,000) topics × 5 measures (map, ndcg_cut.10, P.10, recall.100,
recip_rank) with per-topic values, as ``cranfield.reports.result_document.evaluation_document``
makes it (``per_topic`` on). One synthetic run (``bench/compare.py``'s seeded data) is evaluated
once with ``cranfield.evaluate``; each night's document is that one with every per-topic
value perturbed (Gaussian noise, a slow drift, clipped to [0, 1]; the aggregate recomputed),
its own run digest, and a recording time one day after the previous night's.

Printed, per database: its size per result (PostgreSQL: ``pg_database_size`` after minus
before, ÷ results, and the tables' ``pg_total_relation_size``; SQLite: the file after a WAL
checkpoint), the time to record one (median, p95, over every result recorded), ``trend`` over
all of them (median of ``--repeat`` calls; target < 200 ms) and the input of a comparison by
ids: ``per_topic`` of two results for the 5 measures, and ``get`` of both (median of
``--repeat``; target < 1 s). Anchors, measured in the same run and printed with ratios:
``cranfield.evaluate`` of the 7,000-topic run, and ``orjson.dumps`` of one document. Nothing
is asserted: the machine is shared, so the load average is printed beside the figures.

PostgreSQL: a database with a random name is made on 127.0.0.1:5432 (user postgres) and
dropped ``WITH (FORCE)`` at the end; ``--database-url`` uses another (not made nor dropped;
a system with a random name is recorded into it and left). ``--sqlite`` also measures a
temporary SQLite file; ``--no-postgres`` skips PostgreSQL.

    python bench/history.py                        # 1,000 results on PostgreSQL
    python bench/history.py --results 50 --sqlite  # a smoke check (< 1 minute)
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder leads sys.path, where bench/queue.py and bench/http.py
# would shadow the standard library's queue and http: drop it, and make the repository's
# root importable (bench.compare's data).
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path.pop(0)
if os.path.dirname(_HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import hashlib  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402

import numpy as np  # noqa: E402
import orjson  # noqa: E402

import cranfield  # noqa: E402
from backend.results import ResultStore  # noqa: E402
from bench.compare import MEASURES, make_data, timed  # noqa: E402
from cranfield.reports.result_document import evaluation_document  # noqa: E402

TREND_TARGET = 0.200   # seconds, issue #18
COMPARE_TARGET = 1.0
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
TENANT = "bench"
START = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f} (1/5 min)"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


# --------------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------------

class Nights:
    """A nightly history: the base document, and night ``i``'s perturbed copy of it."""

    def __init__(self, n_topics: int, seed: int):
        qrels, runs = make_data(1, n_topics, seed)
        self.qrels = cranfield.read_qrels(qrels)
        self.run = next(iter(runs.values()))
        self.seed = seed
        ev = cranfield.evaluate(self.qrels, self.run, MEASURES)
        digest = hashlib.sha256(b"qrels").hexdigest()
        self.base = evaluation_document(ev, {"per_topic": True}, "0" * 64, digest, None,
                                        "bench-qrels@1")
        self.keys = [m["key"] for m in self.base["measures"]]
        self.topics = list(self.base["per_topic"])
        self.values = {k: np.asarray([np.nan if (v := self.base["per_topic"][t].get(k)) is None
                                      else v for t in self.topics], dtype=np.float64)
                       for k in self.keys}

    def evaluate(self):
        """The anchor: evaluating the run once, as a recording's evaluation does."""
        return cranfield.evaluate(self.qrels, self.run, MEASURES)

    def document(self, night: int) -> dict:
        rng = np.random.default_rng((self.seed, night))
        drift = 0.02 * np.sin(night / 30.0)
        columns, aggregate = {}, {}
        for k in self.keys:
            x = np.clip(self.values[k] + drift + rng.normal(0.0, 0.03, len(self.topics)),
                        0.0, 1.0)
            columns[k] = [None if v != v else v for v in x.tolist()]
            finite = x[np.isfinite(x)]
            aggregate[k] = float(finite.mean()) if finite.size else None
        per_topic = {t: dict(zip(self.keys, row, strict=True))
                     for t, row in zip(self.topics, zip(*columns.values(), strict=True),
                                       strict=True)}
        provenance = dict(self.base["provenance"],
                          run_sha256=hashlib.sha256(b"night %d" % night).hexdigest(),
                          runid=f"nightly-{night:04d}")
        return dict(self.base, aggregate=aggregate, provenance=provenance, per_topic=per_topic)


# --------------------------------------------------------------------------------------------
# One database
# --------------------------------------------------------------------------------------------

def pg_sizes(store: ResultStore) -> tuple[int, int]:
    """(pg_database_size, the result tables' pg_total_relation_size) in bytes."""
    from sqlalchemy import text

    tables = ("systems", "results", "result_tags", "result_values", "baselines",
              "gate_verdicts")
    with store.engine.connect() as connection:
        database = connection.scalar(text("SELECT pg_database_size(current_database())"))
        relations = sum(connection.scalar(text(f"SELECT pg_total_relation_size('{t}')"))
                        for t in tables)
    return int(database), int(relations)


def sqlite_size(store: ResultStore, path: str) -> int:
    """The file's size after a WAL checkpoint (what a copy of the database would hold)."""
    from sqlalchemy import text

    with store.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute(text("SELECT 1"))
    wal = path + "-wal"
    return os.path.getsize(path) + (os.path.getsize(wal) if os.path.exists(wal) else 0)


def measure(kind: str, url: str, nights: Nights, args, anchors: dict,
            sqlite_path: str | None = None) -> None:
    system = f"nightly-{uuid.uuid4().hex[:8]}"
    clock_night = [0]
    store = ResultStore(url, clock=lambda: START + timedelta(days=clock_night[0]))
    try:
        store.upgrade()
        before = pg_sizes(store) if kind == "postgresql" else sqlite_size(store, sqlite_path)
        print(f"\n== {kind}: {args.results:,} results of {len(nights.topics):,} topics × "
              f"{len(nights.keys)} measures; {load()} at the start")
        record_s, build_s, ids = [], [], []
        started_all = time.perf_counter()
        for i in range(args.results):
            started = time.perf_counter()
            doc = nights.document(i)
            build_s.append(time.perf_counter() - started)
            clock_night[0] = i
            record = {"system": system, "label": f"night {i}",
                      "commit": hashlib.sha1(b"%d" % i).hexdigest(), "tags": ["nightly"]}
            started = time.perf_counter()
            summary = store.record(TENANT, record, doc)
            record_s.append(time.perf_counter() - started)
            ids.append(summary["id"])
            if args.progress and (i + 1) % args.progress == 0:
                print(f"  recorded {i + 1:,} ({ms(statistics.median(record_s))} median so "
                      f"far, {load()})", flush=True)
        recording = time.perf_counter() - started_all
        load_recorded = load()
        if kind == "postgresql":
            after = pg_sizes(store)
            per_result = (after[0] - before[0]) / args.results / 1e6
            size_rows = [
                ("database size per result", f"{per_result:.3f} MB",
                 f"pg_database_size {before[0] / 1e6:.1f} MB → {after[0] / 1e6:.1f} MB"),
                ("  tables per result", f"{(after[1] - before[1]) / args.results / 1e6:.3f} MB",
                 "pg_total_relation_size of the 5 tables (heap, TOAST, indexes)"),
            ]
        else:
            after = sqlite_size(store, sqlite_path)
            size_rows = [("database size per result",
                          f"{(after - before) / args.results / 1e6:.3f} MB",
                          f"file {before / 1e6:.2f} MB → {after / 1e6:.1f} MB (after a WAL "
                          "checkpoint)")]

        # reading: interleaved, so each figure sees the same load
        a, b = ids[0], ids[-1]
        steps = {
            "trend": lambda: store.trend(TENANT, system, "map")[0],
            "per_topic": lambda: (store.per_topic(TENANT, a, nights.keys),
                                  store.per_topic(TENANT, b, nights.keys)),
            "get": lambda: (store.get(TENANT, a), store.get(TENANT, b)),
        }
        for fn in steps.values():  # warm-up (connection pool, statement caches)
            fn()
        seconds: dict[str, list[float]] = {k: [] for k in steps}
        out: dict[str, object] = {}
        for _ in range(args.repeat):
            for key, fn in steps.items():
                started = time.perf_counter()
                out[key] = fn()
                seconds[key].append(time.perf_counter() - started)
        trend_s, per_topic_s, get_s = (statistics.median(seconds[k]) for k in steps)
        trend = out["trend"]
        pa, pb = out["per_topic"]
        ga, _ = out["get"]
        assert len(trend) == args.results, (len(trend), args.results)
        assert all(len(pa[k]) == len(nights.topics) == len(pb[k]) for k in nights.keys)
        assert ga["document"]["per_topic"] == nights.document(0)["per_topic"]

        api = api_figures(url, system, a, b, nights.keys, args.repeat)

        evaluate, dumps = anchors["evaluate"], anchors["dumps"]
        rec_med, rec_p95 = statistics.median(record_s), float(np.percentile(record_s, 95))
        rows = size_rows + [
            ("record one (median)", ms(rec_med),
             f"{rec_med / dumps:.1f}× orjson.dumps of the document; "
             f"{rec_med / evaluate:.2f}× evaluating its run"),
            ("record one (p95)", ms(rec_p95), f"max {ms(max(record_s))}; all {args.results:,}: "
             f"{recording:.1f} s with building the documents "
             f"({ms(statistics.median(build_s))} each, not in the figure)"),
            (f"trend over {args.results:,} results", ms(trend_s),
             f"median of {args.repeat}; target < {TREND_TARGET * 1e3:.0f} ms: "
             f"{'met' if trend_s < TREND_TARGET else 'NOT met'}; "
             f"{trend_s / evaluate:.2f}× evaluating one run"),
            ("compare by ids: per_topic × 2", ms(per_topic_s),
             f"5 measures of 2 results, median of {args.repeat}; target < "
             f"{COMPARE_TARGET:.0f} s: {'met' if per_topic_s < COMPARE_TARGET else 'NOT met'}; "
             f"{per_topic_s / (2 * evaluate):.2f}× evaluating the 2 runs again"),
            ("  get × 2 (whole documents)", ms(get_s),
             f"{get_s / (2 * evaluate):.2f}× evaluating the 2 runs again; "
             f"{get_s / (2 * dumps):.1f}× orjson.dumps of 2 documents"),
            ("compare by ids, whole (API)", ms(api["compare"]),
             f"POST /v1/comparisons of the 2 results on the 5 measures, default tests (t, "
             f"10,000 permutations, 10,000 bootstrap samples), in process, median of "
             f"{api['compare_n']}; target < {COMPARE_TARGET:.0f} s: "
             f"{'met' if api['compare'] < COMPARE_TARGET else 'NOT met'}"),
            (f"trend (API, JSON), {args.results:,} points", ms(api["trend"]),
             f"GET /v1/systems/{{name}}/trend in process, median of {args.repeat}"),
            ("  the trend page (HTML)", ms(api["page"]),
             f"the same with Accept: text/html, {api['page_kb']:.0f} kB, median of "
             f"{args.repeat}"),
        ]
        width = max(len(r[0]) for r in rows)
        print(f"{'':{width}}  {'figure':>10}  detail")
        for label, figure, detail in rows:
            print(f"{label:{width}}  {figure:>10}  {detail}")
        print(f"{load_recorded} after recording, {load()} after reading — figures are "
              "bounded by a busy machine (2 cores shared with other work), not by the store")
    finally:
        store.close()


def api_figures(url: str, system: str, a: str, b: str, keys: list[str], repeat: int) -> dict:
    """The service's own answers over the recorded results (the Flask app in process, on the
    same database, its tenant's key): a whole comparison by ids, the trend, the trend page.
    Medians; each answer is checked (200, and the comparison's pair count)."""
    from service.app import create_app
    from service.auth import key_line

    app = create_app({"TESTING": True, "DATABASE_URL": url,
                      "API_KEYS": key_line("bench-key", "write", TENANT, "bench-key")})
    client = app.test_client()
    auth = {"Authorization": "Bearer bench-key"}
    trend_path = f"/v1/systems/{system}/trend?measure=map"
    body = {"runs": [{"result_id": a}, {"result_id": b}], "measures": keys}

    def warm_timed(fn, n: int) -> tuple[float, object]:
        fn()  # warm-up (the app's first request pays imports and statement caches)
        return timed(fn, n)

    try:
        compare_n = max(3, min(repeat, 5))
        compare_s, resp = warm_timed(
            lambda: client.post("/v1/comparisons", json=body, headers=auth), compare_n)
        assert resp.status_code == 200, resp.get_json()
        assert len(resp.get_json()["pairs"]) == len(keys)
        trend_s, resp = warm_timed(lambda: client.get(trend_path, headers=auth), repeat)
        assert resp.status_code == 200 and resp.get_json()["points"]
        page_s, resp = warm_timed(lambda: client.get(trend_path, headers={
            **auth, "Accept": "text/html"}), repeat)
        assert resp.status_code == 200 and resp.mimetype == "text/html"
        return {"compare": compare_s, "compare_n": compare_n, "trend": trend_s,
                "page": page_s, "page_kb": len(resp.data) / 1e3}
    finally:
        app.extensions["results"].close()


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=1000, help="results to record")
    parser.add_argument("--topics", type=int, default=7000)
    parser.add_argument("--repeat", type=int, default=20,
                        help="calls of trend, per_topic and get (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--database-url", help="a PostgreSQL database to use as it is "
                        "(default: make one with a random name on 127.0.0.1:5432, drop it)")
    parser.add_argument("--sqlite", action="store_true", help="also a temporary SQLite file")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--progress", type=int, default=0, metavar="K",
                        help="print a line every K results recorded")
    args = parser.parse_args(argv)
    if args.results < 2 or args.topics < 1 or args.repeat < 1:
        parser.error("need --results ≥ 2, --topics ≥ 1, --repeat ≥ 1")

    print(f"recorded-results benchmark (issue #18): {args.results:,} results × {args.topics:,} "
          f"topics × {len(MEASURES)} measures ({' '.join(MEASURES)}); seed {args.seed}")
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, {load()} — a shared, "
          "busy machine: figures are noisy upper bounds")

    started = time.perf_counter()
    nights = Nights(args.topics, args.seed)
    made = time.perf_counter() - started
    doc = nights.document(0)
    evaluate, _ = timed(nights.evaluate, 3)
    dumps, body = timed(lambda: orjson.dumps(doc), 20)
    anchors = {"evaluate": evaluate, "dumps": dumps}
    print(f"data: {made:.1f} s to generate and evaluate the run; one document is "
          f"{len(body) / 1e6:.2f} MB of JSON")
    print(f"anchors: cranfield.evaluate of the {args.topics:,}-topic run {ms(evaluate)} "
          f"(median of 3); orjson.dumps of one document {ms(dumps)} (median of 20); {load()}")

    if not args.no_postgres:
        if args.database_url:
            measure("postgresql", args.database_url, nights, args, anchors)
        else:
            import psycopg

            name = f"cranfield_bench_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            try:
                measure("postgresql", PG_URL.format(name=name), nights, args, anchors)
            finally:
                with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if args.sqlite:
        with tempfile.TemporaryDirectory(prefix="cranfield-history-") as folder:
            path = os.path.join(folder, "results.db")
            measure("sqlite", f"sqlite:///{path}", nights, args, anchors, sqlite_path=path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
