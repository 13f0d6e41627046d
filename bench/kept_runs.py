"""Benchmark of kept runs (issue #31): ``backend.kept_runs.KeptRuns`` keeping the M and L runs of
``bench/datagen.py`` (M: 6,980 topics x 1,000 docs, 6.98M lines; L: 43,000 x 100, 4.3M) in the
results database (PostgreSQL on 127.0.0.1:5432, a database made and dropped here; ``--sqlite``
also a temporary SQLite file), and reading them back.

Printed per scale and database, medians over ``--repeat`` rounds (each round keeps the run
into an emptied database, so every keep writes):

* bytes per million lines: the stored Parquet file (zstd) per 10^6 rows, beside the TREC
  text's (the run file as generated) and the ratio;
* keep: ``KeptRuns.keep`` whole (canonical order, SHA-256 of the canonical text, Parquet
  written through the chunking sink), in M lines/s and seconds, with its digest pass alone;
* read: ``KeptRuns.read`` (a ``Run``, as a Parquet upload is read), ``trec_chunks`` (the
  canonical text, what ``GET /v1/results/{id}/run`` streams) and ``parquet_chunks`` (the
  stored bytes), in M lines/s and MB/s of what is produced;
* anchor, the same round: ``cranfield.read_run`` of the run file (the TREC text reader).

Memory: what the run's columns hold once read, and for keep, read and
text out the peak above the resident set the step starts with, each step in a forked child
(Linux starts a child's peak at its parent's resident set): keeping adds no second copy of the
run (the sort's permutation and its scratch, a batch of 131,072 rows and one 1 MiB chunk);
reading builds the Run in columns allocated once. Nothing is asserted: the
machine is shared, so the load average is printed too.

    python bench/kept_runs.py                           # M and L on PostgreSQL, 3 rounds
    python bench/kept_runs.py --scales L --sqlite --no-postgres --repeat 1
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path.pop(0)
if os.path.dirname(_HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from functools import partial  # noqa: E402

import cranfield  # noqa: E402
from backend.kept_runs import KeptRun, KeptRunChunk, KeptRuns, canonical_sha256  # noqa: E402
from backend.results import ResultStore  # noqa: E402
from bench.datagen import ensure_dataset  # noqa: E402

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/{name}"


def rss_mb() -> float:
    """This process's resident set now, MB."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def extra_peak_mb(store: ResultStore, fn) -> float:
    """How far ``fn(store)``'s process rises above the resident set it starts with, MB: run
    in a forked child (whose peak starts at the parent's resident set: Linux copies it at
    fork) on the store's engine with its pool left to the parent."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            store.engine.dispose(close=False)
            start = rss_mb()
            fn(store)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            os.write(write, f"{peak - start:.1f}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        text = handle.read()
    os.waitpid(pid, 0)
    return float(text or "nan")


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def clock(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def empty(store: ResultStore) -> None:
    with store.engine.begin() as connection:
        connection.execute(KeptRunChunk.__table__.delete())
        connection.execute(KeptRun.__table__.delete())


def consume_of(chunks_of, digest: str) -> int:
    return sum(len(c) for c in chunks_of(None, digest))


def measure(kind: str, url: str, scale: str, run, text_bytes: int, repeat: int,
            anchor: float) -> None:
    store = ResultStore(url)
    store.upgrade()
    runs = KeptRuns(store)
    rows = len(run)
    times: dict[str, list[float]] = {k: [] for k in
                                     ("keep", "read", "trec", "parquet")}
    sizes = {}
    try:
        for _ in range(repeat):
            empty(store)
            seconds, digest = clock(lambda: runs.keep(None, run))
            times["keep"].append(seconds)
            info = runs.info(None, digest)
            seconds, back = clock(partial(runs.read, None, digest))
            times["read"].append(seconds)
            assert len(back) == rows
            del back
            seconds, sizes["trec"] = clock(partial(consume_of, runs.trec_chunks, digest))
            times["trec"].append(seconds)
            seconds, sizes["parquet"] = clock(partial(consume_of, runs.parquet_chunks,
                                                          digest))
            times["parquet"].append(seconds)
        # memory, each step in a child of its own: above what the process held before it
        empty(store)
        extra = {"keep": extra_peak_mb(store, lambda s: KeptRuns(s).keep(None, run))}
        extra["read"] = extra_peak_mb(store, lambda s: KeptRuns(s).read(None, digest))
        extra["trec"] = extra_peak_mb(store, lambda s: consume_of(KeptRuns(s).trec_chunks,
                                                                  digest))
        empty(store)
    finally:
        store.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    per_million = info["bytes"] / rows * 1e6
    text_per_million = text_bytes / rows * 1e6
    print(f"  {kind}: {info['bytes'] / 1e6:.1f} MB in {info['chunks']} chunks; "
          f"{per_million / 1e6:.2f} MB per million lines (TREC text "
          f"{text_per_million / 1e6:.2f} MB: {text_per_million / per_million:.1f}x smaller)")
    print(f"    keep            {med['keep']:7.2f} s  {rows / med['keep'] / 1e6:5.2f} M lines/s"
          f"   (+{extra['keep']:.0f} MB peak above the process holding the run)")
    print(f"    read as a Run   {med['read']:7.2f} s  {rows / med['read'] / 1e6:5.2f} M lines/s"
          f"   ({anchor / med['read']:.2f}x cranfield.read_run of the text; "
          f"+{extra['read']:.0f} MB peak, the Run it returns included)")
    print(f"    TREC text out   {med['trec']:7.2f} s  {rows / med['trec'] / 1e6:5.2f} M lines/s"
          f"  {sizes['trec'] / med['trec'] / 1e6:6.1f} MB/s   (+{extra['trec']:.0f} MB peak)")
    print(f"    Parquet out     {med['parquet']:7.2f} s  "
          f"{rows / med['parquet'] / 1e6:5.2f} M lines/s  "
          f"{sizes['parquet'] / med['parquet'] / 1e6:6.1f} MB/s   "
          f"(medians of {repeat}; {load()})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="M,L")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sqlite", action="store_true", help="also a SQLite file")
    parser.add_argument("--no-postgres", action="store_true", help="skip PostgreSQL")
    args = parser.parse_args(argv)
    for scale in args.scales.split(","):
        data = ensure_dataset(scale)
        anchor, run = clock(partial(cranfield.read_run, str(data.run_path)))
        held = (run.topic_index.nbytes + run.scores.nbytes
                + (run.docids.nbytes if hasattr(run.docids, "nbytes") else 0)) / 2**20
        rows = len(run)
        digest_s, _ = clock(partial(canonical_sha256, run))
        print(f"{scale}: {rows:,} lines, {len(run.topics):,} topics, run file "
              f"{data.run_bytes / 1e6:.1f} MB; cranfield.read_run {anchor:.2f} s "
              f"({rows / anchor / 1e6:.2f} M lines/s); the digest alone {digest_s:.2f} s; "
              f"its columns hold {held:.0f} MB")
        if not args.no_postgres:
            import psycopg

            name = f"cranfield_bench_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            try:
                measure("postgresql", PG_URL.format(name=name), scale, run, data.run_bytes,
                        args.repeat, anchor)
            finally:
                with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if args.sqlite:
            with tempfile.TemporaryDirectory(prefix="cranfield-kept-") as folder:
                measure("sqlite", f"sqlite:///{folder}/results.db", scale, run,
                        data.run_bytes, args.repeat, anchor)
        del run
    return 0


if __name__ == "__main__":
    sys.exit(main())
