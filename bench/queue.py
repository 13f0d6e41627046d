"""Queue benchmark: an M-size run (6,980 x 1,000) uploaded as TREC text -> finished job.

Starts a private redis-server, the API under gunicorn (REDIS_URL set) and N `cranfield worker`
processes, all on loopback; prints the end-to-end time of one job (upload, queue, evaluation in
topic shards, the run's SHA-256, combination, result) with 1 worker and with 2 workers, run in
alternating pairs so that a noisy machine's drift affects both alike, and the peak memory of
a worker.

    python bench/queue.py               # needs bench/data/M-* (python bench/datagen.py --scales M)
    python bench/queue.py --drain       # the workers alone: 1 vs 2 draining a queue (issue #19)

``--drain`` measures the workers apart from the upload and the API: with no worker running,
--jobs M-size evaluations are queued through the API (each cut into --shards shard jobs and a
combine job, as real ones are), then 1 (or 2) fresh `cranfield worker` processes are started
and timed until the last job has ended (RQ's own ``ended_at``). It alternates 1 and 2 workers
on an identical queue (Redis emptied, the same jobs queued again; each drain first waits up
to --quiet-wait seconds for an idle second) --repeat times, and prints the medians, the
2-vs-1 ratio beside its ideal (min(2, cores)), each run's CPU seconds by role (workers with
their horses and start-up, Redis, the idle API, and everything else on the machine, from
/proc) and each worker's busy time, then checks every job ended with a result equal to an
in-process ``cranfield.evaluate`` of the same files.

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


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores; /proc/stat's first line:
    everything but idle and iowait; guest time is already in user)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def enqueue(api: str, body: bytes, content_type: str) -> str:
    """POST one evaluation with ``Prefer: respond-async``; its job id (202 expected)."""
    req = urllib.request.Request(api + "/v1/evaluations", data=body, method="POST",
                                 headers={"Content-Type": content_type,
                                          "Prefer": "respond-async"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        if resp.status != 202:
            raise RuntimeError(f"expected 202 Accepted, got {resp.status}")
        return resp.headers["Location"].rsplit("/", 1)[-1]


def reap(proc: subprocess.Popen, timeout: float = 30) -> float:
    """Stop an idle worker (warm shutdown) and reap it with wait4: the CPU seconds of its
    whole life, with the work horses (and scheduler) it reaped."""
    proc.terminate()
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            proc.kill()
            deadline = float("inf")
        time.sleep(0.01)


def wait_quiet(limit: float, below: float = 0.3) -> float:
    """Wait (at most ``limit`` seconds) for a second in which the whole machine was busy on
    fewer than ``below`` cores: other work on these 2 cores would be measured as ours. The
    cores busy in the last second looked at."""
    deadline = time.monotonic() + limit
    while True:
        start = machine_busy()
        time.sleep(1)
        busy = machine_busy() - start
        if busy < below or time.monotonic() > deadline:
            return busy


class Drain:
    """A queue of identical sharded jobs drained by 1 or 2 fresh workers (``--drain``)."""

    def __init__(self, args, api: str, redis_url: str, body: bytes, content_type: str,
                 procs: list[subprocess.Popen]):
        from redis import Redis

        self.args, self.api, self.redis_url = args, api, redis_url
        self.body, self.content_type, self.procs = body, content_type, procs
        self.conn = Redis.from_url(redis_url)
        self.redis_pid = procs[0].pid
        self.api_pids = [procs[1].pid] + children(procs[1].pid)

    def fill(self) -> tuple[list[str], list[str]]:
        """An empty Redis, then --jobs evaluations queued through the API: (their combine
        jobs' ids, every RQ job's id)."""
        from rq.job import Job

        self.conn.flushall()
        ids = [enqueue(self.api, self.body, self.content_type) for _ in range(self.args.jobs)]
        shards = [s for j in Job.fetch_many(ids, connection=self.conn)
                  for s in (j.meta.get("shards") or [])]
        if len(shards) != self.args.jobs * self.args.shards:
            raise RuntimeError(f"expected {self.args.shards} shards per job, got "
                               f"{len(shards)} for {self.args.jobs} jobs")
        return ids, shards + ids

    def run(self, n_workers: int) -> dict:
        """Fill the queue, start ``n_workers`` workers, time until every job has ended."""
        from rq.job import Job

        ids, every = self.fill()
        quiet = wait_quiet(self.args.quiet_wait)  # the API's upload threads, Redis, others
        before = (cpu_seconds(self.redis_pid), sum(cpu_seconds(p) for p in self.api_pids),
                  machine_busy(), sum(os.times()[:2]))
        t0 = time.time()
        workers = []
        for i in range(n_workers):
            workers.append(subprocess.Popen(
                [CRANFIELD, "worker", "--redis-url", self.redis_url, "--name",
                 f"drain-{n_workers}w-{i + 1}-{int(t0)}"], cwd=ROOT,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            self.procs.append(workers[-1])
        deadline = time.monotonic() + self.args.timeout
        try:
            while True:
                jobs = Job.fetch_many(every, connection=self.conn)
                states = [getattr(j.get_status(refresh=False), "value", None) if j else None
                          for j in jobs]
                bad = [(j, s) for j, s in zip(jobs, states, strict=True)
                       if s in ("failed", "canceled", "stopped", None)]
                if bad:
                    job, state = bad[0]
                    detail = ((job.exc_info or "").strip().splitlines() or [""])[-1] if job \
                        else "gone"
                    raise RuntimeError(f"a job ended {state}: {detail}")
                if all(s == "finished" for s in states):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the queue did not drain in {self.args.timeout} s")
                time.sleep(0.1)
        finally:
            cpu = []
            for w in workers:
                cpu.append(reap(w))
                self.procs.remove(w)
        stopped = time.time()
        after = (cpu_seconds(self.redis_pid), sum(cpu_seconds(p) for p in self.api_pids),
                 machine_busy(), sum(os.times()[:2]))
        redis_s, api_s, machine_s, client_s = (a - b for a, b in zip(after, before,
                                                                      strict=True))
        end = max(j.ended_at.timestamp() for j in jobs)
        per_worker: dict[str, list] = {}
        for j in jobs:
            per_worker.setdefault(j.worker_name, []).append(j)
        busy = {name: sum((j.ended_at - j.started_at).total_seconds() for j in js)
                for name, js in per_worker.items()}
        shard_s = [(j.ended_at - j.started_at).total_seconds() for j in jobs[:-len(ids)]]
        combine_s = [(j.ended_at - j.started_at).total_seconds() for j in jobs[-len(ids):]]
        return {
            "workers": n_workers, "seconds": end - t0, "quiet": quiet,
            "startup": min(j.started_at.timestamp() for j in jobs) - t0,
            "cpu": cpu, "redis": redis_s, "api": api_s, "client": client_s,
            "others": machine_s - sum(cpu) - redis_s - api_s - client_s,
            "window": stopped - t0,
            "busy": sorted(busy.values(), reverse=True),
            "jobs_per_worker": sorted((len(js) for js in per_worker.values()), reverse=True),
            "first_start": sorted(min(j.started_at.timestamp() for j in js) - t0
                                  for js in per_worker.values()),
            "last_end": sorted(max(j.ended_at.timestamp() for j in js) - t0
                               for js in per_worker.values()),
            "shard_median": statistics.median(shard_s),
            "combine_median": statistics.median(combine_s),
            "results": [j.return_value() for j in jobs[-len(ids):]],
        }


def reference(data: Path, options: dict) -> dict:
    """The same files evaluated in this process: (aggregate, per-topic values, run SHA-256)."""
    import hashlib
    import inspect

    import cranfield

    known = inspect.signature(cranfield.evaluate).parameters
    ev = cranfield.evaluate(cranfield.read_qrels(data / "qrels.txt"),
                            cranfield.read_run(data / "run.txt"), MEASURES,
                            **{k: v for k, v in options.items() if k in known})
    return {"aggregate": dict(ev.aggregate), "per_topic": ev.per_topic,
            "run_sha256": hashlib.sha256((data / "run.txt").read_bytes()).hexdigest()}


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None or a != a or b != b:
        return (a is None or a != a) and (b is None or b != b)
    return abs(a - b) <= 1e-12 * max(1.0, abs(b))


def check(run: dict, ref: dict) -> tuple[int, bool]:
    """Every combine job's outcome is a result (no problem) whose aggregate and run SHA-256
    equal the in-process evaluation's; the first job's per-topic values too. (jobs checked,
    whether the aggregates were bit-identical)."""
    exact = True
    for i, outcome in enumerate(run["results"]):
        if not isinstance(outcome, dict) or "result" not in outcome:
            problem = (outcome or {}).get("problem") if isinstance(outcome, dict) else outcome
            raise RuntimeError(f"job {i + 1} finished without a result: {problem}")
        doc = outcome["result"]
        if doc["provenance"]["run_sha256"] != ref["run_sha256"]:
            raise RuntimeError(f"job {i + 1}: run_sha256 differs from the file's")
        agg = doc["aggregate"]
        if set(agg) != set(ref["aggregate"]) or not all(
                same(agg[k], ref["aggregate"][k]) for k in agg):
            raise RuntimeError(f"job {i + 1}: aggregate {agg} != in-process "
                               f"{ref['aggregate']}")
        exact = exact and all(agg[k] == ref["aggregate"][k] for k in agg)
        if i == 0:
            rows = doc["per_topic"]
            if set(rows) != set(ref["per_topic"]) or not all(
                    same(rows[t].get(k), v) for t, row in ref["per_topic"].items()
                    for k, v in row.items()):
                raise RuntimeError("job 1: per-topic values differ from in-process")
    return len(run["results"]), exact


def drain_main(args, data: Path, api: str, redis_url: str, body: bytes, content_type: str,
               procs: list[subprocess.Popen]) -> int:
    cores = os.cpu_count() or 1
    drain = Drain(args, api, redis_url, body, content_type, procs)
    print(f"drain: {args.jobs} M-size jobs ({len(body) / 2**20:.0f} MB {args.upload} "
          f"bodies, {len(MEASURES)} measures) queued through the API with no worker "
          f"running, each {args.shards} shard jobs + 1 combine job; then 1 or 2 fresh "
          f"`cranfield worker` processes timed from their start until the last job ended; "
          f"{args.repeat} pairs, alternating; {cores} cores; load "
          f"{os.getloadavg()[0]:.1f}/{os.getloadavg()[1]:.1f} (1/5 min)")
    runs: dict[int, list[dict]] = {1: [], 2: []}
    ratios, ref, exact, quiet = [], None, True, []
    print(f"{'run':>4s} {'workers':>7s} {'drain s':>8s} {'start-up':>8s} "
          f"{'worker CPU s':>14s} {'CPU/wall':>8s} {'redis':>6s} {'API':>5s} "
          f"{'others':>7s} {'idle?':>5s}  jobs, busy s, last end s per worker; median shard / "
          f"combine s")
    for r in range(args.repeat):
        pair = {}
        for n in ((1, 2) if r % 2 == 0 else (2, 1)):
            run = drain.run(n)
            if ref is None:  # once, outside any timed window
                ref = reference(data, run["results"][0]["result"]["provenance"]["options"])
            exact = check(run, ref)[1] and exact
            runs[n].append(run)
            pair[n] = run["seconds"]
            cpu = sum(run["cpu"])
            print(f"{r + 1:>4d} {n:>7d} {run['seconds']:8.2f} {run['startup']:8.2f} "
                  f"{cpu:8.2f} {'+'.join(f'{c:.1f}' for c in run['cpu']) if n > 1 else '':>5s} "
                  f"{cpu / (run['window'] * n):8.2f} {run['redis']:6.2f} "
                  f"{run['api']:5.2f} {run['others']:7.2f} {run['quiet']:5.2f}  "
                  f"{'/'.join(map(str, run['jobs_per_worker']))}, "
                  f"{'/'.join(f'{b:.2f}' for b in run['busy'])}, "
                  f"{'/'.join(f'{e:.2f}' for e in run['last_end'])}; "
                  f"{run['shard_median']:.2f} / {run['combine_median']:.2f}")
        ratios.append(pair[1] / pair[2])
        if all(x[-1]["others"] / x[-1]["window"] < 0.25 for x in runs.values()):
            quiet.append(ratios[-1])
    med = statistics.median
    one = [x["seconds"] for x in runs[1]]
    two = [x["seconds"] for x in runs[2]]
    ideal = min(2, cores)
    print(f"{'workers':>8s} {'median s':>9s} {'after start-up':>15s} {'worker CPU s':>13s} "
          f"{'others (cores)':>15s}  runs")
    for n, xs in ((1, one), (2, two)):
        print(f"{n:>8d} {med(xs):9.2f} {med([x['seconds'] - x['startup'] for x in runs[n]]):15.2f} "
              f"{med([sum(x['cpu']) for x in runs[n]]):13.2f} "
              f"{med([x['others'] / x['window'] for x in runs[n]]):15.2f}  "
              + " ".join(f"{x:.2f}" for x in xs))
    ratio = med(one) / med(two)
    busy_elsewhere = {n: med([x["others"] / x["window"] for x in runs[n]]) for n in (1, 2)}
    if quiet:
        verdict = (f"{'PASS' if med(quiet) >= 1.8 else 'FAIL'} on the {len(quiet)} pair(s) "
                   f"with the machine otherwise idle (median {med(quiet):.2f}x)")
    elif max(busy_elsewhere.values()) < 0.25:
        verdict = "PASS" if ratio >= 1.8 else "FAIL"
    else:
        verdict = ("inconclusive: other work on the machine took a median "
                   f"{busy_elsewhere[1]:.2f} / {busy_elsewhere[2]:.2f} cores during the "
                   "1- / 2-worker drains")
    print(f"drain, 2 workers vs 1: {ratio:.2f}x (ratio of medians; median of paired ratios "
          f"{med(ratios):.2f}x: {' '.join(f'{x:.2f}' for x in ratios)}); ideal "
          f"min(2, {cores} cores) = {ideal:.2f}x; target >= 1.8x: {verdict}")
    own = {n: med([sum(x["cpu"]) + x["redis"] for x in runs[n]]) for n in (1, 2)}
    others = {n: med([x["others"] / x["window"] for x in runs[n]]) for n in (1, 2)}
    print(f"bound from CPU alone: 1 worker's drain spent {own[1]:.2f} CPU-s of its own (the "
          f"worker with its start-up, Redis), 2 workers' {own[2]:.2f}: on {cores} idle cores "
          f"2 workers can be at most {min(cores, 2) * own[1] / own[2]:.2f}x faster; the rest "
          f"of the machine used {others[1]:.2f} / {others[2]:.2f} cores (median) during the "
          f"1- / 2-worker drains")
    print(f"pairs in which the rest of the machine used < 0.25 cores in both drains: "
          f"{len(quiet)} of {args.repeat}" + (f", ratios {' '.join(f'{x:.2f}' for x in quiet)}"
                                              f", median {med(quiet):.2f}x" if quiet else ""))
    after = [[x["seconds"] - x["startup"] for x in runs[n]] for n in (1, 2)]
    print(f"after start-up (first job started to last ended): "
          f"{med(after[0]) / med(after[1]):.2f}x; start-up (processes launched to the first "
          f"job started) median {med([x['startup'] for x in runs[1]]):.2f} s with 1 worker, "
          f"{med([x['startup'] for x in runs[2]]):.2f} s with 2")
    print("worker CPU/wall: the workers' CPU seconds (their whole life, start-up included) "
          "over the window they lived x workers (1.00 = every worker always on a core); "
          "others = the rest of the machine's busy CPU-s in that window; idle? = cores busy "
          "in the second before the workers started (waited for < 0.3, up to --quiet-wait)")
    print(f"checked: all {args.jobs} jobs x {2 * args.repeat} drains finished with a result "
          f"(no problem), run_sha256 and aggregate "
          f"{'bit-identical' if exact else 'equal within 1e-12'} to an in-process "
          f"cranfield.evaluate of the same files, and each drain's first job's per-topic "
          f"values too")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--upload", choices=("multipart", "json"), default="multipart",
                        help="TREC files as multipart/form-data (like curl -F) or in JSON")
    parser.add_argument("--drain", action="store_true",
                        help="measure the workers alone: --jobs jobs queued first, then 1 vs "
                             "2 workers started (instead of the end-to-end figure)")
    parser.add_argument("--quiet-wait", type=float, default=60,
                        help="--drain: wait up to this long for the machine to be idle (under "
                             "0.3 busy cores for 1 s) before each drain (default 60)")
    parser.add_argument("--jobs", type=int, default=12,
                        help="--drain: M-size jobs queued per drain (default 12: ~20 s for "
                             "one worker)")
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
        if args.drain:
            return drain_main(args, data, api, redis_url, body, content_type, procs)

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
