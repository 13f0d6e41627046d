"""HTTP benchmark: the API under gunicorn, as the README runs it, against the stack's ceiling.

1. Small requests (1 topic x 100 docs, 5 measures) for ``--seconds`` from ``--clients``
   keep-alive client processes on loopback: requests/s, p50 and p99 latency; then the same
   load against a bare Flask route returning a constant JSON body under the same gunicorn
   settings (the ceiling), and the ratio. ``--rounds`` rounds alternate the two, each with
   new connections, and the medians are compared: gunicorn hands a keep-alive connection to
   whichever process accepts it, so one round may load one process with most clients (seen
   here: the ceiling at 1,800 req/s in such a round, 3,600 in a balanced one). Each round
   prints how the server processes shared the CPU.
2. One M-size request (6,980 topics x 1,000 docs, from bench/data): the server time (send to
   last byte) with the run as a JSON mapping and as TREC text in JSON, next to the engine's
   time from mappings in this process.

    python bench/http.py                   # both parts
    python bench/http.py --skip-large --seconds 10

Bounded: every load phase stops after ``--seconds``; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import sys

# Run as a script, this file's folder leads sys.path and this file would shadow the
# standard library's ``http`` package: the repository's root takes that entry instead
# (bench.procstat is imported from there).
if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path[0] = __import__("os").path.dirname(sys.path[0])

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench.datagen import cached_dataset  # noqa: E402
from bench.procstat import children, cpu_seconds  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(app: str, port: int, workers: int, **env_extra: str) -> subprocess.Popen:
    # The README's settings: the app logs one JSON access line per request (to stderr, here
    # thrown away) and gunicorn's own access log is off. (Pointing CRANFIELD_ACCESS_LOG at
    # /dev/null would turn gunicorn's on: 12% of the API's GIL time, by py-spy.)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CRANFIELD_ACCESS_LOG", "CRANFIELD_LOG_LEVEL", "CRANFIELD_THREADS")}
    env.update(CRANFIELD_WORKERS=str(workers), PYTHONPATH=str(ROOT), **env_extra)
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c",
                             str(ROOT / "service" / "gunicorn.conf.py"), "--bind",
                             f"127.0.0.1:{port}", app], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"gunicorn for {app} did not start")


def _client(port: int, method: str, path: str, body: bytes, seconds: float, out) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"} if body else {}
    latencies = []
    errors = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        t0 = time.perf_counter()
        conn.request(method, path, body=body or None, headers=headers)
        resp = conn.getresponse()
        resp.read()
        latencies.append(time.perf_counter() - t0)
        errors += resp.status >= 500
    out.put((latencies, errors))


def load(port: int, method: str, path: str, body: bytes, seconds: float, clients: int,
         server_pid: int | None = None) -> dict:
    workers = children(server_pid) if server_pid else []
    cpu_before = [cpu_seconds(p) for p in workers]
    queue: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_client, args=(port, method, path, body, seconds, queue))
             for _ in range(clients)]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    lat = sorted(x for r in results for x in r[0])
    used = [cpu_seconds(p) - c for p, c in zip(workers, cpu_before, strict=True)]
    return {"requests": len(lat), "rps": len(lat) / seconds,
            "cpu_share": [u / max(sum(used), 1e-9) for u in used],
            "p50_ms": 1000 * lat[len(lat) // 2], "p99_ms": 1000 * lat[int(len(lat) * 0.99)],
            "errors_5xx": sum(r[1] for r in results)}


def shares(result: dict) -> str:
    return ", ".join(f"{s:.0%}" for s in result["cpu_share"])


def small_body() -> bytes:
    run = {"q1": {f"d{i}": 100.0 - i for i in range(100)}}
    qrels = {"q1": {f"d{i}": (i % 3) for i in range(0, 100, 7)}}
    return json.dumps({"run": run, "qrels": qrels, "measures": MEASURES,
                       "per_topic": True}).encode()


def timed_post(port: int, body: bytes) -> tuple[float, int, str]:
    """Send to last byte of the result (and the server's Server-Timing); a 202 (queued job)
    is followed until it ends."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/evaluations", body=body,
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    status = resp.status
    timing = resp.getheader("Server-Timing") or ""
    if status == 202:
        location = resp.getheader("Location")
        while json.loads(data)["status"] in ("queued", "started", "deferred"):
            time.sleep(0.02)
            conn.request("GET", location)
            resp = conn.getresponse()
            data = resp.read()
        status = 200 if json.loads(data)["status"] == "finished" else 500
    return time.perf_counter() - t0, status, timing


def large(ports: dict[str, int], repeat: int) -> None:
    import pickle

    import orjson

    import cranfield

    data = cached_dataset("M")
    if data is None:
        print("  no M data under bench/data: run `python bench/datagen.py --scales M` first")
        return
    if (data / "run.pickle").exists():  # written by bench/engine.py
        with open(data / "run.pickle", "rb") as fh:
            run = pickle.load(fh)
        with open(data / "qrels.pickle", "rb") as fh:
            qrels = pickle.load(fh)
    else:
        run = cranfield.read_run(data / "run.txt").to_dict()
        qrels = cranfield.read_qrels(data / "qrels.txt").to_dict()
    engine = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ev = cranfield.evaluate(qrels, run, MEASURES)
        _ = ev.per_topic
        engine.append(time.perf_counter() - t0)
    engine_s = statistics.median(engine)
    bodies = {
        "JSON mapping": orjson.dumps({"run": run, "qrels": qrels, "measures": MEASURES}),
        "TREC text in JSON": orjson.dumps({"run": (data / "run.txt").read_text(),
                                           "qrels": (data / "qrels.txt").read_text(),
                                           "measures": MEASURES}),
    }
    del run, qrels
    print(f"  engine from mappings (in process): median {engine_s:.3f} s")
    for mode, port in ports.items():
        for name, body in bodies.items():
            times, timings = [], []
            for _ in range(repeat):
                seconds, status, timing = timed_post(port, body)
                if status != 200:
                    print(f"  {name}: HTTP {status}")
                times.append(seconds)
                timings.append(timing)
            server = statistics.median(times)
            print(f"  {mode:6s} {name:18s} body {len(body) / 2**20:6.1f} MB  server time "
                  f"median {server:.3f} s  = {server / engine_s:.2f}x engine")
            if mode == "sync":  # where the median request's time went, by the server's count
                median_timing = timings[times.index(sorted(times)[len(times) // 2])]
                print(f"         Server-Timing (ms): {median_timing}")


def stages(args, ceiling_port: int, ceiling_pid: int, procs: list) -> None:
    """Load the ceiling, each stage route of bench/http_stages.py and the API itself on one
    server (alternating rounds, medians), and print what each stage adds per request: in
    machine time under this load (cores / req/s, the clients' share included) and straight
    through WSGI in this process (warm caches, no sockets)."""
    from bench.http_stages import STAGES, create_app, in_process

    port = free_port()
    server = start_gunicorn("bench.http_stages:create_app()", port, args.workers)
    procs.append(server)
    body = small_body()
    paths = [path for path, _ in STAGES]
    rps: dict[str, list[float]] = {path: [] for path in ["ceiling", *paths]}
    for _ in range(args.rounds):
        rps["ceiling"].append(load(ceiling_port, "GET", "/constant", b"", args.seconds,
                                   args.clients, ceiling_pid)["rps"])
        for path in paths:
            rps[path].append(load(port, "POST", path, body, args.seconds, args.clients,
                                  server.pid)["rps"])
    app = create_app()
    cores = os.cpu_count() or 1
    ceiling = statistics.median(rps["ceiling"])
    print(f"stages of a small request on one server ({args.rounds} alternating rounds, "
          f"medians; machine time = {cores} cores / req/s, load generator included):")
    print(f"{'':50s}{'req/s':>7s}{'of ceiling':>11s}{'machine us':>11s}{'+us':>6s}"
          f"{'in-process us':>15s}")
    print(f"{'bare Flask app (the ceiling)':50s}{ceiling:7.0f}{1:11.1%}"
          f"{cores / ceiling * 1e6:11.0f}")
    before = None
    for path, label in STAGES:
        med = statistics.median(rps[path])
        machine = cores / med * 1e6
        step = f"{machine - before:+6.0f}" if before is not None else f"{'':6s}"
        print(f"{label:50s}{med:7.0f}{med / ceiling:11.1%}{machine:11.0f}{step}"
              f"{in_process(app, path, body):15.0f}")
        before = machine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating rounds of the small-request and ceiling loads")
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--stages", action="store_true",
                        help="also load each cumulative stage of a small request on the "
                             "service's own app (bench/http_stages.py): what each one costs")
    args = parser.parse_args()

    api_port, ceiling_port = free_port(), free_port()
    api = start_gunicorn("service.app:create_app()", api_port, args.workers)
    ceiling = start_gunicorn("bench.http_ceiling:create_app()", ceiling_port, args.workers)
    procs = [api, ceiling]
    try:
        print(f"gunicorn: {args.workers} worker processes x 4 threads each (the config's "
              f"default); {args.clients} keep-alive clients; "
              f"{args.seconds:.0f} s per phase; {os.cpu_count()} cores shared by all")
        body = small_body()
        smalls, bares = [], []
        for i in range(args.rounds):
            smalls.append(load(api_port, "POST", "/v1/evaluations", body, args.seconds,
                               args.clients, api.pid))
            bares.append(load(ceiling_port, "GET", "/constant", b"", args.seconds,
                              args.clients, ceiling.pid))
            print(f"  round {i + 1}: API {smalls[-1]['rps']:.0f} req/s (process CPU shares "
                  f"{shares(smalls[-1])}), ceiling {bares[-1]['rps']:.0f} req/s "
                  f"({shares(bares[-1])})")
        small = sorted(smalls, key=lambda r: r["rps"])[len(smalls) // 2]
        bare = sorted(bares, key=lambda r: r["rps"])[len(bares) // 2]
        print(f"median round of {args.rounds}:")
        print(f"{'':34s}{'req/s':>9s}{'p50 ms':>9s}{'p99 ms':>9s}{'5xx':>6s}")
        for name, r in (("POST /v1/evaluations (1x100, 5 m.)", small),
                        ("bare Flask constant JSON", bare)):
            print(f"{name:34s}{r['rps']:9.0f}{r['p50_ms']:9.2f}{r['p99_ms']:9.2f}"
                  f"{sum(x['errors_5xx'] for x in (smalls if r is small else bares)):6d}")
        print(f"ratio: {small['rps'] / bare['rps']:.1%} of the bare-Flask ceiling "
              "(target >= 50%)")
        if args.stages:
            stages(args, ceiling_port, ceiling.pid, procs)
        if not args.skip_large:
            # sync: the server answers the request itself (#3's measure); queued: the README's
            # defaults, where a body over 32 MiB becomes a job (202, then poll to the result)
            print("M-size request (6,980 x 1,000), send to last byte of the result:")
            sync_port = free_port()
            procs.append(start_gunicorn("service.app:create_app()", sync_port, args.workers,
                                        CRANFIELD_ASYNC_THRESHOLD_BYTES=str(1 << 40)))
            large({"sync": sync_port, "queued": api_port}, args.repeat)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
