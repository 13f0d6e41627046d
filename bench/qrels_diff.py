"""Benchmark of the qrels diff (issue #31): two versions of a 300,000-judgment qrels compared,
by the engine alone and over HTTP.

Data (seeded): version 1 has ``--topics`` (default 1,000) topics × ``--per-topic`` (default
300) judged documents, grades 0..3 (mostly 0); version 2 keeps it but removes 2% of the
judgments, regrades 5% and adds 20% more (new documents of the same topics), plus 10 new
topics and 10 removed: what a deeper pool and a second judging round look like.

Printed (medians of ``--repeat``, default 5):
- engine: ``cranfield.inputs.qrels_diff.diff_qrels`` on the two parsed versions, and
  ``format_diff`` of the whole diff (the text ``cranfield qrels diff`` prints); anchor in the
  same run: ``cranfield.read_qrels`` of version 2's text (parsing the input once), with the
  ratio;
- HTTP, through the Flask test client in this process (no sockets, no gunicorn: the route's
  own work, its store on a temporary SQLite file with the in-memory cache): ``GET
  /v1/qrels/q/diff`` for a first page of 1,000 changed topics as JSON and as text/plain,
  (a) cold: the process's decoded qrels and its diffs dropped first, so the versions are
  decompressed and parsed again, (b) the decoded qrels kept, the diff dropped, (c) warm: the
  diff of the pair kept (paging).
Nothing is asserted; the load average is printed beside the figures (2 cores, shared).

    python bench/qrels_diff.py
    python bench/qrels_diff.py --topics 100 --repeat 3    # a smoke check
"""

from __future__ import annotations

import os
import sys

# Run as a script, this file's folder leads sys.path, where bench/queue.py and bench/http.py
# would shadow the standard library's queue and http: drop it, and make the root importable.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    sys.path.pop(0)
if os.path.dirname(_HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(_HERE))

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def versions(topics: int, per_topic: int, seed: int) -> tuple[bytes, bytes]:
    """The two versions' TREC text (see the module's docstring)."""
    rng = np.random.default_rng(seed)
    grades = rng.choice(4, size=(topics, per_topic), p=[0.7, 0.15, 0.1, 0.05])
    old = [(t, d, int(grades[t, d])) for t in range(topics) for d in range(per_topic)]
    new = []
    removed_topics = set(range(10))
    for t, d, g in old:
        if t in removed_topics:
            continue
        r = rng.random()
        if r < 0.02:
            continue  # removed
        new.append((t, d, (g + 1) % 4 if r < 0.07 else g))  # 5% regraded
    extra = int(0.2 * len(old))
    for i in range(extra):
        new.append((int(rng.integers(10, topics)), per_topic + i, int(rng.integers(0, 4))))
    new += [(topics + t, d, 1) for t in range(10) for d in range(per_topic)]

    def text(rows) -> bytes:
        return "".join(f"T{t} 0 D{d:07d} {g}\n" for t, d, g in rows).encode()

    return text(old), text(new)


def median_of(repeat: int, fn, setup=None) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--per-topic", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    import cranfield
    from cranfield.inputs.qrels_diff import diff_qrels
    from cranfield.reports.qrels_diff_text import diff_document, format_diff, side

    old_text, new_text = versions(args.topics, args.per_topic, args.seed)
    before, after = cranfield.read_qrels(old_text), cranfield.read_qrels(new_text)
    print(f"qrels diff: v1 {len(before):,} judgments ({len(before.topics)} topics), "
          f"v2 {len(after):,} ({len(after.topics)} topics); median of {args.repeat}; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")

    read_s, _ = median_of(args.repeat, lambda: cranfield.read_qrels(new_text))
    diff_s, diff = median_of(args.repeat, lambda: diff_qrels(before, after))
    t = diff["totals"]
    doc = diff_document(diff, side("v1", t["judgments_from"], t["topics_from"], unknown="file"),
                        side("v2", t["judgments_to"], t["topics_to"], unknown="file"))
    text_s, text = median_of(args.repeat, lambda: format_diff(doc))
    print(f"  diff: added {t['added']:,}, removed {t['removed']:,}, regraded "
          f"{t['regraded']:,}, unchanged {t['unchanged']:,}; {t['topics_added']} topics "
          f"added, {t['topics_removed']} removed; text {len(text) / 1e6:.1f} MB")
    print(f"  engine  diff_qrels            {diff_s * 1000:8.1f} ms  "
          f"({diff_s / read_s:.2f}x read_qrels of v2: {read_s * 1000:.1f} ms)")
    print(f"  engine  format_diff (whole)   {text_s * 1000:8.1f} ms")

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CRANFIELD_DATABASE_URL"] = f"sqlite:///{tmp}/results.db"
        os.environ.pop("CRANFIELD_REDIS_URL", None)
        from backend import store as store_module
        from service import qrels_diff as route
        from service.app import create_app

        app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 1 << 30})
        client = app.test_client()
        for text_v in (old_text, new_text):
            resp = client.put("/v1/qrels/q", data=text_v, content_type="text/plain")
            assert resp.status_code == 201, resp.get_data(as_text=True)

        def get(accept: str):
            resp = client.get("/v1/qrels/q/diff?limit=1000", headers={"Accept": accept})
            assert resp.status_code == 200, resp.get_data(as_text=True)
            return len(resp.get_data())

        def drop_all():
            store_module.QRELS_CACHE._items.clear()
            route._cache.clear()

        for accept in ("application/json", "text/plain"):
            cold_s, size = median_of(args.repeat, lambda a=accept: get(a), drop_all)
            parsed_s, _ = median_of(args.repeat, lambda a=accept: get(a), route._cache.clear)
            warm_s, _ = median_of(args.repeat, lambda a=accept: get(a))
            print(f"  http    {accept:<17} first page ({size / 1e6:.1f} MB): cold "
                  f"{cold_s * 1000:7.1f} ms, qrels decoded {parsed_s * 1000:7.1f} ms, "
                  f"diff kept {warm_s * 1000:7.1f} ms")
    print("  (http: Flask test client in this process, SQLite results database, memory cache; "
          "no gunicorn)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
