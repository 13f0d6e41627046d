"""The M request from Arrow against the engine (issue #19): one M-size evaluation (6,980 topics
x 1,000 docs, bench/datagen.py's seeded data) sent to ``POST /v1/evaluations`` under gunicorn
(synchronous: the async threshold raised out of the way) with the run and qrels as

* Arrow IPC stream parts of a multipart body (what ``Client.evaluate`` sends for a frame),
* Parquet parts,
* TREC text parts (the CLI's ``--server`` upload),
* a JSON body of mappings,

each sent ``--repeat`` times, send to last byte of the result; medians printed beside the
engine's own time in this process (``evaluate`` on the run and qrels already read, and
reading the Arrow table into columns). Also the JSON fast path's alternatives on the same
run (``--json``: the figures of docs/performance.md's "JSON fast path" section).

    python bench/arrow_upload.py [--repeat 3] [--workers 1] [--json]
"""

from __future__ import annotations

import sys

# Run as a script, this file's folder leads sys.path, where bench/http.py and bench/queue.py
# would shadow the standard library: the repository's root takes that entry instead.
if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path[0] = __import__("os").path.dirname(sys.path[0])

import argparse  # noqa: E402
import http.client  # noqa: E402
import io  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.datagen import ensure_dataset  # noqa: E402

MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]


def tables(run, qrels):
    """The run and qrels as Arrow tables (topic and docid strings per row)."""
    import pyarrow as pa

    topics = pa.array(run.topics)
    run_t = pa.table({"topic": topics.take(pa.array(run.topic_index)),
                      "docid": run.docids if isinstance(run.docids, pa.ChunkedArray | pa.Array)
                      else pa.array(run.docids.tolist()),
                      "score": run.scores})
    qtopics = pa.array(qrels.topics)
    qrels_t = pa.table({"topic": qtopics.take(pa.array(qrels.topic_index)),
                        "docid": pa.array(qrels.docids.tolist(), pa.string()),
                        "grade": qrels.grades})
    return run_t, qrels_t


def ipc_stream(table) -> bytes:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def parquet(table) -> bytes:
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def post(port: int, body: bytes, content_type: str) -> tuple[float, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/evaluations", body=body, headers={"Content-Type": content_type})
    resp = conn.getresponse()
    data = resp.read()
    seconds = time.perf_counter() - t0
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {data[:300]!r}")
    conn.close()
    return seconds, resp.getheader("Server-Timing") or ""


def median_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def json_fast_path(ds, run, repeat: int) -> None:
    """The JSON fast path (the compiled scan) against orjson on the mapping shape, orjson on a
    columnar JSON shape, and Arrow, on the M run."""
    import orjson

    from cranfield.inputs import columnar
    from cranfield.inputs.json_body import decode_body, warm_up

    run_map = run.to_dict()
    mapping_body = orjson.dumps({"run": run_map})
    del run_map
    docids = run.docids_at(np.arange(len(run))).tolist()
    topics = [run.topics[i] for i in run.topic_index.tolist()]
    columnar_body = orjson.dumps({"run": {"topics": topics, "docids": docids,
                                          "scores": run.scores}},
                                 option=orjson.OPT_SERIALIZE_NUMPY)
    del docids, topics
    arrow_body = ipc_stream(tables(run, _empty_qrels())[0])
    t0 = time.perf_counter()
    warm_up()
    print(f"  compiled scan loaded in this process: "
          f"{time.perf_counter() - t0:.2f} s")

    def compiled_scan():
        body = decode_body(mapping_body, min_bytes=0)
        assert body is not None

    def orjson_mapping():
        import cranfield

        cranfield.read_run(orjson.loads(mapping_body)["run"])

    def orjson_columns():
        import pyarrow as pa

        body = orjson.loads(columnar_body)["run"]
        columnar.run_from_table(pa.table({"topic": body["topics"], "docid": body["docids"],
                                          "score": pa.array(body["scores"], pa.float64())}))

    def arrow():
        columnar.read_run_bytes(arrow_body)

    print(f"  body sizes: mapping JSON {len(mapping_body) / 2**20:.0f} MB, columnar JSON "
          f"{len(columnar_body) / 2**20:.0f} MB, Arrow IPC {len(arrow_body) / 2**20:.0f} MB")
    for name, fn in (("compiled scan of the mapping (json_body.decode_body)", compiled_scan),
                     ("orjson mapping + read_run(mapping)", orjson_mapping),
                     ("orjson columnar JSON + columnar.run_from_table", orjson_columns),
                     ("Arrow IPC + columnar.read_run_bytes", arrow)):
        print(f"  {name:52s} median {median_of(fn, repeat):.3f} s")


def _empty_qrels():
    from cranfield.inputs.run_qrels import Qrels

    return Qrels([], np.zeros(0, np.int32), np.zeros(0, object), np.zeros(0, np.int64))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="also the JSON fast path's figures")
    ap.add_argument("--skip-http", action="store_true")
    args = ap.parse_args()

    import orjson

    import cranfield
    from cranfield.client_body import _arrow_stream, _multipart
    from cranfield.inputs import columnar, table_bytes

    ds = ensure_dataset("M")
    run = cranfield.read_run(str(ds.run_path))
    qrels = cranfield.read_qrels(str(ds.qrels_path))
    run_t, qrels_t = tables(run, qrels)
    print(f"M: {len(run):,} run rows, {len(qrels):,} judgments, {len(run.topics):,} topics")

    def fresh(r):  # a new Run each time: nothing the engine keeps on one is reused
        return cranfield.Run(r.topics, r.topic_index, r.docids, r.scores, r.runid, r.source)

    engine = median_of(lambda: cranfield.evaluate(qrels, fresh(run), MEASURES).per_topic,
                       args.repeat)
    text_read = median_of(lambda: cranfield.read_run(str(ds.run_path)), args.repeat)
    from_table = median_of(lambda: columnar.run_from_table(run_t), args.repeat)
    print(f"  engine only (evaluate, inputs already read)       median {engine:.3f} s")
    print(f"  TREC text file -> Run (read_run)                  median {text_read:.3f} s")
    print(f"  Arrow table -> Run (columnar.run_from_table)      median {from_table:.3f} s")
    engine_total = median_of(lambda: cranfield.evaluate(columnar.qrels_from_table(qrels_t),
                                                        columnar.run_from_table(run_t),
                                                        MEASURES).per_topic, args.repeat)
    print(f"  engine from Arrow tables (read + evaluate)        median {engine_total:.3f} s")
    if args.json:
        json_fast_path(ds, run, args.repeat)
    if args.skip_http:
        return 0

    fields = [("measures", m) for m in MEASURES]
    arrow_body = _multipart(fields, [  # as Client.evaluate sends a frame (topic dictionary)
        ("run", "run.arrows", _arrow_stream(run_t, "run"), table_bytes.ARROW_STREAM_TYPE),
        ("qrels", "qrels.arrows", _arrow_stream(qrels_t, "qrels"), table_bytes.ARROW_STREAM_TYPE)])
    plain_body = _multipart(fields, [
        ("run", "run.arrows", _arrow_stream(run_t, "run", None), table_bytes.ARROW_STREAM_TYPE),
        ("qrels", "qrels.arrows", _arrow_stream(qrels_t, "qrels", None),
         table_bytes.ARROW_STREAM_TYPE)])
    parquet_body = _multipart(fields, [
        ("run", "run.parquet", parquet(run_t), table_bytes.PARQUET_TYPE),
        ("qrels", "qrels.parquet", parquet(qrels_t), table_bytes.PARQUET_TYPE)])
    text_body = _multipart(fields, [
        ("run", "run.txt", ds.run_path.read_bytes(), "text/plain"),
        ("qrels", "qrels.txt", ds.qrels_path.read_bytes(), "text/plain")])
    json_body = (orjson.dumps({"run": run.to_dict(), "qrels": qrels.to_dict(),
                               "measures": MEASURES}), "application/json")
    bodies = {"multipart Arrow IPC, zstd": arrow_body,
              "multipart Arrow IPC, plain": plain_body, "multipart Parquet": parquet_body,
              "multipart TREC text": text_body, "JSON mappings": json_body}
    _post_each(bodies, args, engine)
    if args.json:  # the JSON body again, the compiled scan switched off: orjson decodes it
        _post_each({"JSON mappings, no compiled scan": json_body}, args, engine,
                   CRANFIELD_FAST_JSON_MIN_BYTES=str(1 << 62))
    return 0


def _post_each(bodies: dict, args, engine: float, **env: str) -> None:
    """Each body POSTed to a gunicorn of its own settings (``env``; nothing queued): a warm-up,
    then the median of ``args.repeat`` requests and its Server-Timing, against ``engine``."""
    from bench.http import free_port, start_gunicorn

    port = free_port()
    proc = start_gunicorn("service.app:create_app()", port, args.workers,
                          CRANFIELD_ASYNC_THRESHOLD_BYTES=str(1 << 40), **env)
    try:
        for name, (body, ctype) in bodies.items():
            post(port, body, ctype)  # warm: the first request pays imports and compiles
            results = sorted(post(port, body, ctype) for _ in range(args.repeat))
            med, timing = results[len(results) // 2]
            print(f"  HTTP {name:28s} body {len(body) / 2**20:6.1f} MB  median {med:.3f} s"
                  f"  = {med / engine:.2f}x engine")
            print(f"       Server-Timing (ms): {timing}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
