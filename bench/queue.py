"""Queue benchmark: an M-size run (6,980 x 1,000) uploaded as TREC text -> finished job.

Starts a private redis-server, the API under gunicorn (REDIS_URL set) and N `cranfield worker`
processes, all on loopback; prints the end-to-end time of one job (upload, queue, evaluation in
topic shards, the run's SHA-256, combination, result) with 1 worker and with 2 workers, run in
alternating pairs so that a noisy machine's drift affects both alike, and the peak memory of
a worker.

    python bench/queue.py               # needs bench/data/M-* (python bench/datagen.py --scales M)

Bounded: each phase waits at most --timeout seconds; everything is stopped at the end.
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    # keep bench/http.py from shadowing the standard library's http; the repository's root
    # takes the entry instead (bench.procstat is imported from there)
    sys.path[0] = __import__("os").path.dirname(sys.path[0])

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

from bench.datagen import cached_dataset  # noqa: E402
from bench.procstat import children, cpu_seconds  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CRANFIELD = str(Path(sys.executable).with_name("cranfield"))
MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return json.loads(resp.read())


def rss_mb(pid: int) -> float:
    """Current memory of a worker plus its work horse (a forked child), in MB: the sum of
    their PSS (proportional set size), so pages the horse shares with its parent count once
    (RSS would count them twice); VmRSS where smaps_rollup is not available."""
    total = 0.0
    for p in [pid] + children(pid):
        try:
            lines = Path(f"/proc/{p}/smaps_rollup").read_text().splitlines()
            key = "Pss:"
        except OSError:
            try:
                lines = Path(f"/proc/{p}/status").read_text().splitlines()
                key = "VmRSS"
            except OSError:
                continue
        total += sum(int(line.split()[1]) / 1024 for line in lines if line.startswith(key))
    return total


class PeakSampler:
    """Samples a worker's memory (with its horse) every 20 ms in a thread; ``peak`` in MB."""

    def __init__(self, pid: int):
        import threading

        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.02)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


class CpuMeter:
    """CPU seconds spent by each role (API, Redis, workers, this client) between ``start``
    and ``stop``: on a machine whose cores all of them share, N workers cannot finish before
    the job's total CPU divided by the cores, however the work is split."""

    def __init__(self, roles: dict[str, list[int]]):
        self.roles = roles

    def _read(self) -> dict[str, float]:
        out = {role: sum(cpu_seconds(p) for p in pids) for role, pids in self.roles.items()}
        times = os.times()
        out["client (this bench)"] = times.user + times.system
        return out

    def start(self, workers: list[int]) -> None:
        # a worker's long-lived children (its scheduler), as opposed to its work horses
        self.resident = {pid: set(children(pid)) for pid in workers}
        self.before = self._read()

    def stop(self) -> dict[str, float]:
        # A horse's CPU joins its worker's count once the worker has reaped it, and the
        # horse reports the job finished before it exits: wait for that (1 s at most).
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and any(
                set(children(pid)) - kept for pid, kept in self.resident.items()):
            time.sleep(0.005)
        after = self._read()
        return {role: after[role] - self.before[role] for role in after}


def multipart(run: bytes, qrels: bytes, measures: list[str]) -> tuple[bytes, str]:
    """A multipart/form-data body, as `curl -F run=@run.txt -F qrels=@qrels.txt` sends."""
    boundary = "cranfield-bench-boundary"
    parts = []
    for name, data in (("run", run), ("qrels", qrels)):
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                     f'filename="{name}.txt"\r\nContent-Type: text/plain\r\n\r\n'.encode()
                     + data + b"\r\n")
    for m in measures:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="measures"'
                     f'\r\n\r\n{m}\r\n'.encode())
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


ACCEPTED: list[float] = []  # seconds from send to 202, per job
LAST: dict = {}  # the last job: its id and when it was sent (wall clock)


def run_job(api: str, body: bytes, timeout: float, content_type: str) -> float:
    t0 = time.perf_counter()
    LAST["sent"] = time.time()
    req = urllib.request.Request(api + "/v1/evaluations", data=body, method="POST",
                                 headers={"Content-Type": content_type,
                                          "Prefer": "respond-async"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        headers = dict(resp.headers)
    ACCEPTED.append(time.perf_counter() - t0)
    LAST["server_timing"] = headers.get("Server-Timing", "")
    location = api + headers["Location"]
    LAST["id"] = headers["Location"].rsplit("/", 1)[-1]
    deadline = time.monotonic() + timeout
    while True:
        state = get_json(location)
        if state["status"] in ("finished", "failed", "canceled"):
            if state["status"] != "finished":
                raise RuntimeError(f"job ended {state['status']}: {state.get('problem')}")
            return time.perf_counter() - t0
        if time.monotonic() > deadline:
            raise TimeoutError("job did not finish")
        time.sleep(0.05)


def timeline(redis_url: str) -> None:
    """When each RQ job of the last evaluation ran, in seconds after the request was sent."""
    from redis import Redis
    from rq.job import Job

    conn = Redis.from_url(redis_url)
    combine = Job.fetch(LAST["id"], connection=conn)
    jobs = [(f"shard {i}", j) for i, j in enumerate(
        Job.fetch_many(combine.meta.get("shards", []), connection=conn))]
    jobs.append(("combine", combine))
    sent = LAST["sent"]
    parts = []
    for name, job in jobs:
        if job and job.started_at and job.ended_at:
            parts.append(f"{name} {job.started_at.timestamp() - sent:.2f}-"
                         f"{job.ended_at.timestamp() - sent:.2f}")
    print("  last job's timeline (s after sending): " + ", ".join(parts))
    print(f"  its 202 after {ACCEPTED[-1]:.2f} s; Server-Timing (ms): {LAST['server_timing']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--upload", choices=("multipart", "json"), default="multipart",
                        help="TREC files as multipart/form-data (like curl -F) or in JSON")
    args = parser.parse_args()
    data = cached_dataset("M")
    if data is None or shutil.which("redis-server") is None:
        print("needs bench/data/M-* (python bench/datagen.py --scales M) and redis-server")
        return 0
    if args.upload == "json":
        body = json.dumps({"run": (data / "run.txt").read_text(),
                           "qrels": (data / "qrels.txt").read_text(),
                           "measures": MEASURES}).encode()
        content_type = "application/json"
    else:
        body, content_type = multipart((data / "run.txt").read_bytes(),
                                       (data / "qrels.txt").read_bytes(), MEASURES)
    redis_port, api_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "",
                                       "--appendonly", "no"], stdout=subprocess.DEVNULL))
        env = dict(os.environ, REDIS_URL=redis_url, CRANFIELD_ACCESS_LOG="/dev/null",
                   CRANFIELD_WORKERS="2", CRANFIELD_LOG_LEVEL="warning",
                   CRANFIELD_SHARDS=str(args.shards))
        procs.append(subprocess.Popen([sys.executable, "-m", "gunicorn", "-c",
                                       str(ROOT / "service" / "gunicorn.conf.py"), "--bind",
                                       f"127.0.0.1:{api_port}", "service.app:create_app()"],
                                      cwd=ROOT, env=env))
        api = f"http://127.0.0.1:{api_port}"
        wait_http(api + "/readyz")

        def start_worker() -> subprocess.Popen:
            proc = subprocess.Popen([CRANFIELD, "worker", "--redis-url", redis_url], cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(proc)
            return proc

        def stop_worker(proc: subprocess.Popen) -> None:
            proc.terminate()  # warm shutdown: it is idle between jobs
            proc.wait(timeout=30)
            procs.remove(proc)

        first = start_worker()
        time.sleep(1)
        print(f"M run: {len(body) / 2**20:.0f} MB {args.upload} body (TREC text), "
              f"{len(MEASURES)} measures; {args.repeat} pairs of runs, 1 and 2 workers "
              "alternating (so the machine's drift hits both alike)")
        run_job(api, body, args.timeout, content_type)  # warm-up: caches, page cache
        # Memory is sampled during a job of its own: reading smaps_rollup 50 times a second
        # costs the kernel a page-table walk each time, charged to this process, and would
        # take a share of the cores the timed jobs share.
        sampler = PeakSampler(first.pid)
        run_job(api, body, args.timeout, content_type)
        peak = sampler.stop()
        one, two, ratios = [], [], []
        cpu: dict[int, list[dict[str, float]]] = {1: [], 2: []}
        api_pids = [procs[1].pid] + children(procs[1].pid)
        for r in range(args.repeat):
            pair = {}
            for n in ((1, 2) if r % 2 == 0 else (2, 1)):
                second = start_worker() if n == 2 else None
                if second is not None:
                    time.sleep(1.5)  # registered and waiting on the queue
                workers = [first.pid] + ([second.pid] if second is not None else [])
                meter = CpuMeter({"API (gunicorn)": api_pids, "redis-server": [procs[0].pid],
                                  "workers (with horses)": workers})
                meter.start(workers)
                pair[n] = run_job(api, body, args.timeout, content_type)
                cpu[n].append(meter.stop())
                if second is not None:
                    timeline(redis_url)
                    stop_worker(second)
                elif r == 0:
                    timeline(redis_url)
            one.append(pair[1])
            two.append(pair[2])
            ratios.append(pair[1] / pair[2])
        run_mb = (data / "run.txt").stat().st_size / 2**20
        med = statistics.median
        print(f"{'workers':>8s} {'median s':>9s}  runs")
        print(f"{1:>8d} {med(one):9.2f}  {' '.join(f'{x:.2f}' for x in one)}")
        print(f"{2:>8d} {med(two):9.2f}  {' '.join(f'{x:.2f}' for x in two)}")
        print(f"2 workers vs 1: median of paired ratios {med(ratios):.2f}x "
              f"({' '.join(f'{x:.2f}' for x in ratios)}); ratio of medians "
              f"{med(one) / med(two):.2f}x (target >= 1.6x); {args.shards} shards")
        print("CPU seconds per job by role (median), and what they allow on "
              f"{os.cpu_count()} cores shared by all:")
        roles = list(cpu[1][0])
        print(f"{'workers':>8s} " + " ".join(f"{r:>22s}" for r in roles) + f"{'total':>8s}")
        totals = {}
        for n in (1, 2):
            row = {r: med([c[r] for c in cpu[n]]) for r in roles}
            totals[n] = med([sum(c.values()) for c in cpu[n]])
            print(f"{n:>8d} " + " ".join(f"{row[r]:22.2f}" for r in roles)
                  + f"{totals[n]:8.2f}")
        floor = totals[2] / (os.cpu_count() or 1)
        print(f"with 2 workers the job's {totals[2]:.2f} CPU-s cannot finish in under "
              f"{floor:.2f} s on {os.cpu_count()} cores: 1 worker's median {med(one):.2f} s "
              f"allows at most {med(one) / floor:.2f}x")
        accepted = sorted(ACCEPTED)[len(ACCEPTED) // 2]
        print(f"of which upload to 202 Accepted (the API: receive, split, store): median "
              f"{accepted:.2f} s")
        print(f"worker peak memory: {peak:.0f} MB (worker + work horse PSS) = "
              f"{peak / run_mb:.2f}x the {run_mb:.0f} MB run file")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
