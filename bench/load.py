"""Load test: a bounded mixed load on the whole stack, with 5xx, latency and memory checks.

Starts a private redis-server, the API under gunicorn (the repo's config, REDIS_URL set, 2
workers, access log to /dev/null) and 2 `cranfield worker` processes, all on loopback; stores
qrels (`PUT /v1/qrels/{id}`), then runs ``--clients`` keep-alive client processes for
``--seconds``, each a seeded weighted mix:

- ~70% small synchronous evaluations (1 topic x 100 docs, 5 measures; inline qrels, a quarter
  of them against stored qrels via ``qrels_id``), with fresh random docids and scores each time
  so nothing can be cached by content;
- ~20% qrels reads (``GET /v1/qrels/{id}``, ``{id}@{version}``, ``GET /v1/qrels``);
- ~10% async jobs (``Prefer: respond-async``, 50 topics x 100 docs), polled on
  ``GET /v1/jobs/{id}`` until they end: end-to-end time, finished or not.

Prints per request type the count, throughput, p50/p99 latency and 4xx/5xx counts; the jobs'
outcomes and end-to-end p50/p99; and the memory (RSS, PSS) of every process - gunicorn master
and workers, RQ workers (and the scheduler one of them forks), redis-server - sampled after
``--warmup`` seconds of load and at the end, with PASS/FAIL against 10% growth. Exits 1 if
the verdict fails (a 5xx, a failed job, a process gone or grown beyond 10%), else 0.

    python bench/load.py                     # 60 s, 4 clients
    python bench/load.py --seconds 10        # a quick check

Bounded: no request is sent after the deadline; a job accepted before it is followed for at
most ``--grace`` seconds more; every request has a ``--timeout``; all traffic stays on
127.0.0.1 and everything started is stopped at the end.
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    # keep bench/http.py and bench/queue.py from shadowing the standard library; the
    # repository's root takes the entry instead (bench.procstat is imported from there)
    sys.path[0] = __import__("os").path.dirname(sys.path[0])

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from bench.procstat import children  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CRANFIELD = str(Path(sys.executable).with_name("cranfield"))
MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]
GROWTH_LIMIT = 0.10
TERMINAL = ("finished", "failed", "canceled", "stopped")
# request types, in the order the table prints them
KINDS = [
    ("eval_inline", "POST /v1/evaluations  sync, inline qrels"),
    ("eval_stored", "POST /v1/evaluations  sync, qrels_id"),
    ("qrels_get", "GET  /v1/qrels/{id}[@version]"),
    ("qrels_list", "GET  /v1/qrels"),
    ("job_submit", "POST /v1/evaluations  async (202)"),
    ("job_poll", "GET  /v1/jobs/{id}  (polls)"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- test data


def generated_qrels(seed: int, topics: int = 50, judged: int = 60) -> str:
    """TREC qrels text: ``topics`` topics, ``judged`` judgments each, grades 0..2 (mostly 0)."""
    rng = random.Random(seed)
    lines = []
    for t in range(1, topics + 1):
        for d in range(judged):
            grade = rng.choices((0, 1, 2), (6, 3, 1))[0]
            lines.append(f"L{t:03d} 0 LD{t:03d}-{d:04d} {grade}")
    return "\n".join(lines) + "\n"


def judged_docs(text: str) -> dict[str, list[str]]:
    docs: dict[str, list[str]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 4:
            docs.setdefault(fields[0], []).append(fields[2])
    return docs


def small_inline(rng: random.Random) -> dict:
    """1 topic x 100 docs with random docids and scores, and inline qrels for it."""
    docs = [f"d{i}" for i in rng.sample(range(5000), 120)]
    run = {"q1": {d: round(rng.uniform(0, 100), 4) for d in docs[:100]}}
    judged = rng.sample(docs[:100], 15) + docs[100:105]  # 5 judged but not retrieved
    qrels = {"q1": {d: rng.choice((0, 0, 1, 2)) for d in judged}}
    return {"run": run, "qrels": qrels, "measures": MEASURES}


def topic_run(rng: random.Random, topic: str, judged: list[str], n: int = 100) -> dict:
    """``n`` docs for a stored-qrels topic: up to 30 judged ones, the rest unjudged."""
    docs = rng.sample(judged, min(30, len(judged)))
    docs += [f"U{topic}-{rng.randrange(10**6)}" for _ in range(n - len(docs))]
    return {d: round(rng.uniform(0, 100), 4) for d in dict.fromkeys(docs)}


def small_stored(rng: random.Random, stored: dict[str, dict[str, list[str]]]) -> dict:
    qrels_id = rng.choice(sorted(stored))
    topic = rng.choice(sorted(stored[qrels_id]))
    return {"run": {topic: topic_run(rng, topic, stored[qrels_id][topic])},
            "qrels_id": qrels_id, "measures": MEASURES}


def big_job(rng: random.Random, judged: dict[str, list[str]], qrels_text: str) -> dict:
    """50 topics x 100 docs; as a mapping or TREC text; stored qrels, or 1 in 4 inline."""
    run = {t: topic_run(rng, t, judged[t]) for t in sorted(judged)[:50]}
    if rng.random() < 0.5:
        run = "".join(f"{t} Q0 {d} {i + 1} {s} load\n" for t, docs in run.items()
                      for i, (d, s) in enumerate(sorted(docs.items(), key=lambda x: -x[1])))
    body: dict = {"run": run, "measures": MEASURES, "per_topic": True}
    if rng.random() < 0.25:
        body["qrels"] = qrels_text
    else:
        body["qrels_id"] = "load-50"
    return body


# ---------------------------------------------------------------- clients


class Client:
    """One keep-alive connection (reopened after a close or an error) and the tallies."""

    def __init__(self, port: int, timeout: float):
        self.port, self.timeout = port, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.stats = {k: {"lat": [], "4xx": 0, "5xx": 0, "errors": 0} for k, _ in KINDS}
        self.samples: list[str] = []  # the first few unexpected answers, to show

    def call(self, kind: str, method: str, path: str, body: dict | None = None,
             headers: dict | None = None) -> tuple[int, bytes, dict]:
        data = json.dumps(body).encode() if body is not None else None
        hdrs = {"Content-Type": "application/json"} if data is not None else {}
        hdrs.update(headers or {})
        t0 = time.perf_counter()
        try:
            self.conn.request(method, path, body=data, headers=hdrs)
            resp = self.conn.getresponse()
            payload = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self.stats[kind]["errors"] += 1
            self._sample(f"{method} {path}: {type(exc).__name__}: {exc}")
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            return 0, b"", {}
        self.stats[kind]["lat"].append(time.perf_counter() - t0)
        if resp.status >= 500:
            self.stats[kind]["5xx"] += 1
        elif resp.status >= 400:
            self.stats[kind]["4xx"] += 1
        if resp.status >= 400:
            self._sample(f"{method} {path}: {resp.status} {payload[:300]!r}")
        return resp.status, payload, dict(resp.getheaders())

    def _sample(self, text: str) -> None:
        if len(self.samples) < 5:
            self.samples.append(text)


def client_main(index: int, port: int, opts: dict, out) -> None:
    rng = random.Random(opts["seed"] * 1000 + index)
    stored, versions = opts["stored"], opts["versions"]
    client = Client(port, opts["timeout"])
    jobs: list[tuple[str, float]] = []  # (final status, end-to-end seconds)
    while time.monotonic() < opts["start"]:
        time.sleep(0.005)
    deadline = opts["start"] + opts["seconds"]
    while time.monotonic() < deadline:
        r = rng.random()
        if r < 0.70:
            if rng.random() < 0.25:
                client.call("eval_stored", "POST", "/v1/evaluations", small_stored(rng, stored))
            else:
                client.call("eval_inline", "POST", "/v1/evaluations", small_inline(rng))
        elif r < 0.90:
            if rng.random() < 0.25:
                client.call("qrels_list", "GET", f"/v1/qrels?limit={rng.choice((1, 10, 50))}")
            else:
                qrels_id = rng.choice(sorted(stored))
                ref = f"{qrels_id}@{versions[qrels_id]}" if rng.random() < 0.3 else qrels_id
                client.call("qrels_get", "GET", f"/v1/qrels/{ref}")
        else:
            jobs.append(follow_job(client, rng, opts, deadline))
    out.put({"stats": client.stats, "jobs": jobs, "samples": client.samples})


def follow_job(client: Client, rng: random.Random, opts: dict,
               deadline: float) -> tuple[str, float]:
    body = big_job(rng, opts["stored"]["load-50"], opts["qrels_text"])
    t0 = time.perf_counter()
    status, payload, headers = client.call("job_submit", "POST", "/v1/evaluations", body,
                                           {"Prefer": "respond-async"})
    if status != 202:
        return f"not accepted ({status or 'no answer'})", time.perf_counter() - t0
    location = headers.get("Location", "")
    state = json.loads(payload).get("status")
    give_up = deadline + opts["grace"]
    while state not in TERMINAL:
        if time.monotonic() > give_up:
            return "unfinished", time.perf_counter() - t0
        time.sleep(0.05)
        status, payload, _ = client.call("job_poll", "GET", location)
        if status == 200:
            state = json.loads(payload).get("status")
    return state, time.perf_counter() - t0


# ---------------------------------------------------------------- processes and memory


def memory(pid: int) -> dict | None:
    """RSS and peak RSS (VmHWM) from /proc/<pid>/status, PSS from smaps_rollup, in MB."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    fields = {line.split(":")[0]: int(line.split()[1]) / 1024 for line in status
              if line.startswith(("VmRSS:", "VmHWM:"))}
    pss = None
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024
    except OSError:
        pass
    if "VmRSS" not in fields:
        return None
    return {"pid": pid, "rss": fields["VmRSS"], "hwm": fields.get("VmHWM"), "pss": pss}


def scheduler_pids(redis_conn) -> set[int]:
    """RQ's scheduler (a process one worker forks) records its pid in Redis."""
    pids = set()
    for key in redis_conn.scan_iter("rq:scheduler:*"):
        if redis_conn.type(key) == b"hash":
            pid = redis_conn.hget(key, "pid")
            if pid and pid.isdigit():
                pids.add(int(pid))
    return pids


def sample(master: int, rq_workers: list[int], redis_pid: int, redis_conn) -> dict:
    """Every process by role -> its memory; RQ work horses alive now go in ``horses``."""
    procs: dict[str, int] = {"gunicorn master": master}
    for i, pid in enumerate(children(master), 1):
        procs[f"gunicorn worker {i}"] = pid
    schedulers = scheduler_pids(redis_conn)
    mem: dict[str, dict | None] = {}
    horses = []
    for i, pid in enumerate(rq_workers, 1):
        # a worker and its children read back to back: a work horse (forked per job) shares
        # the parent's pages while it lives, which moves PSS (not RSS) between them
        kids = children(pid)
        mem[f"rq worker {i}"] = memory(pid)
        for child in kids:
            if child in schedulers:
                mem[f"rq worker {i} scheduler"] = memory(child)
            else:
                horses.append((f"rq worker {i}", child, memory(child)))
    mem["redis-server"] = memory(redis_pid)
    mem.update((role, memory(pid)) for role, pid in procs.items())
    order = [*procs, *sorted(r for r in mem if r.startswith("rq ")), "redis-server"]
    info = redis_conn.info("memory")
    keys = list(redis_conn.scan_iter(count=1000))
    pipe = redis_conn.pipeline(transaction=False)
    for key in keys:
        pipe.ttl(key)
    persistent = sum(ttl == -1 for ttl in pipe.execute())
    return {"procs": {role: mem[role] for role in order}, "horses": horses,
            "redis": {"used_mb": info["used_memory"] / 2**20, "keys": len(keys),
                      "persistent": persistent}}


def wait_until(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not come up within {timeout:.0f} s")


def http_status(port: int, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


# ---------------------------------------------------------------- report


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted ``values``."""
    return values[max(0, min(len(values) - 1, math.ceil(p * len(values)) - 1))]


def ms(values: list[float], p: float) -> str:
    return f"{1000 * pct(values, p):9.1f}" if values else f"{'-':>9s}"


def report(results: list[dict], seconds: float, start: dict, end: dict,
           alive: dict[str, bool], result_ttl: str) -> bool:
    print(f"\n{'request type':40s}{'count':>8s}{'req/s':>8s}{'p50 ms':>9s}{'p99 ms':>9s}"
          f"{'4xx':>6s}{'5xx':>6s}{'err':>5s}")
    totals = {"lat": [], "4xx": 0, "5xx": 0, "errors": 0}
    for kind, label in KINDS:
        lat = sorted(x for r in results for x in r["stats"][kind]["lat"])
        row = {k: sum(r["stats"][kind][k] for r in results) for k in ("4xx", "5xx", "errors")}
        totals["lat"] += lat
        for k in row:
            totals[k] += row[k]
        print(f"{label:40s}{len(lat):8d}{len(lat) / seconds:8.1f}{ms(lat, .5)}{ms(lat, .99)}"
              f"{row['4xx']:6d}{row['5xx']:6d}{row['errors']:5d}")
    lat = sorted(totals["lat"])
    print(f"{'all requests':40s}{len(lat):8d}{len(lat) / seconds:8.1f}{ms(lat, .5)}"
          f"{ms(lat, .99)}{totals['4xx']:6d}{totals['5xx']:6d}{totals['errors']:5d}")

    jobs = [j for r in results for j in r["jobs"]]
    done = sorted(t for s, t in jobs if s == "finished")
    others: dict[str, int] = {}
    for s, _ in jobs:
        if s != "finished":
            others[s] = others.get(s, 0) + 1
    print(f"\nasync jobs (50 topics x 100 docs): {len(jobs)} submitted, {len(done)} finished"
          + "".join(f", {n} {s}" for s, n in sorted(others.items()))
          + f"; end-to-end (POST to finished) p50 {ms(done, .5).strip()} ms, "
          f"p99 {ms(done, .99).strip()} ms")
    samples = [s for r in results for s in r["samples"]]
    for s in samples[:5]:
        print(f"  e.g. {s}")

    print(f"\n{'process':26s}{'pid':>8s}{'RSS start':>10s}{'RSS end':>9s}{'growth':>8s}"
          f"{'peak':>7s}{'PSS start':>10s}{'PSS end':>9s}  verdict (MB; RSS growth <= "
          f"{GROWTH_LIMIT:.0%})")
    worst = (0.0, "")
    ok = True
    roles = list(start["procs"]) + [r for r in end["procs"] if r not in start["procs"]]
    for role in roles:
        a, b = start["procs"].get(role), end["procs"].get(role)
        if a is None or b is None or a["pid"] != b["pid"] or not alive.get(role, True):
            ok = False
            pid = (a or b or {}).get("pid", 0)
            what = "started after the first sample" if a is None else "exited or was replaced"
            print(f"{role:26s}{pid:8d}  {what}: FAIL")
            continue
        growth = b["rss"] / a["rss"] - 1
        if growth > worst[0] or not worst[1]:
            worst = (growth, role)
        passed = growth <= GROWTH_LIMIT
        ok &= passed
        pss = ["-" if x["pss"] is None else f"{x['pss']:.1f}" for x in (a, b)]
        print(f"{role:26s}{a['pid']:8d}{a['rss']:10.1f}{b['rss']:9.1f}{growth:+8.1%}"
              f"{b['hwm'] or 0:7.0f}{pss[0]:>10s}{pss[1]:>9s}  {'PASS' if passed else 'FAIL'}")
    for when, snap in (("start", start), ("end", end)):
        for parent, pid, horse in snap["horses"]:
            rss = f"{horse['rss']:.1f} MB RSS" if horse else "ended while sampled"
            print(f"  at {when}: {parent}'s work horse (pid {pid}, a job in progress): {rss}; "
                  "not a row of its own (its parent is)")
    print("  PASS/FAIL is on RSS; PSS splits pages shared with forked children (an RQ work "
          "horse, the scheduler), so it moves as they come and go")
    r0, r1 = start["redis"], end["redis"]
    grew = r1["used_mb"] - r0["used_mb"]
    per_job = f", {1024 * grew / len(jobs):.1f} KB a job" if grew > 0.5 and jobs else ""
    print(f"  redis data: used_memory {r0['used_mb']:.1f} -> {r1['used_mb']:.1f} MB{per_job}; "
          f"keys {r0['keys']} -> {r1['keys']}, of which without expiry {r0['persistent']} -> "
          f"{r1['persistent']}; a finished job's result is kept CRANFIELD_RESULT_TTL = "
          f"{result_ttl} s")

    zero_5xx = totals["5xx"] == 0
    jobs_ok = bool(jobs) and len(done) == len(jobs)
    verdict = zero_5xx and jobs_ok and ok
    print(f"\nverdict: zero 5xx: {'yes' if zero_5xx else 'NO'} ({totals['5xx']} of {len(lat)} "
          f"requests); jobs finished {len(done)}/{len(jobs)}; max RSS growth "
          f"{worst[0]:+.1%} ({worst[1]}); every process <= {GROWTH_LIMIT:.0%}: "
          f"{'yes' if ok else 'NO'} -> {'PASS' if verdict else 'FAIL'}")
    return verdict


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="load duration (60)")
    parser.add_argument("--clients", type=int, default=4, help="client processes (4)")
    parser.add_argument("--warmup", type=float, default=5.0,
                        help="seconds of load before the first memory sample (5)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--timeout", type=float, default=30.0, help="per request (30 s)")
    # Redis keeps every finished job's result for RESULT_TTL (1 day by default): over a 60 s
    # run that retention is growth by design, not a leak. A short TTL lets Redis reach its
    # steady state within the run, so its memory line measures what a leak would show.
    parser.add_argument("--result-ttl", type=int, default=10,
                        help="CRANFIELD_RESULT_TTL for the stack (default 10 s; 0: the "
                             "service's own default, 1 day, under which Redis grows by the "
                             "results it keeps)")
    parser.add_argument("--grace", type=float, default=15.0,
                        help="how long after the deadline a job accepted before it is "
                             "followed (15 s)")
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        print("needs redis-server on PATH")
        return 0
    warmup = min(args.warmup, args.seconds / 2)

    from redis import Redis

    tmp = tempfile.TemporaryDirectory(prefix="cranfield-load-")
    redis_port, api_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    procs: dict[str, subprocess.Popen] = {}
    try:
        procs["redis-server"] = subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", tmp.name], stdout=subprocess.DEVNULL)
        redis_conn = Redis(host="127.0.0.1", port=redis_port)
        wait_until(redis_conn.ping, "redis-server")
        env = dict(os.environ, REDIS_URL=redis_url, CRANFIELD_WORKERS="2",
                   CRANFIELD_ACCESS_LOG="/dev/null", CRANFIELD_LOG_LEVEL="warning",
                   PYTHONPATH=str(ROOT))
        if args.result_ttl:
            env["CRANFIELD_RESULT_TTL"] = str(args.result_ttl)
        result_ttl = env.get("CRANFIELD_RESULT_TTL", str(24 * 3600))
        # every process's output goes to a file of its own (the service logs each request)
        logs = [Path(tmp.name) / name for name in ("gunicorn.log", "rq-worker-1.log",
                                                  "rq-worker-2.log")]
        commands = {"gunicorn master": [sys.executable, "-m", "gunicorn", "-c",
                                        str(ROOT / "service" / "gunicorn.conf.py"), "--bind",
                                        f"127.0.0.1:{api_port}", "service.app:create_app()"],
                    **{f"rq worker {i}": [CRANFIELD, "worker", "--redis-url", redis_url]
                       for i in (1, 2)}}
        for (role, command), path in zip(commands.items(), logs, strict=True):
            with open(path, "wb") as log:
                procs[role] = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                                               stderr=subprocess.STDOUT)
        wait_until(lambda: http_status(api_port, "GET", "/readyz")[0] == 200, "gunicorn")
        wait_until(lambda: redis_conn.scard("rq:workers") >= 2, "2 RQ workers")
        wait_until(lambda: len(children(procs["gunicorn master"].pid)) == 2,
                   "2 gunicorn workers")

        qrels_texts = {"trec-test": (ROOT / "tests/data/trec_eval/qrels.test").read_text(),
                       "load-50": generated_qrels(args.seed)}
        versions = {}
        for qrels_id, text in qrels_texts.items():
            status, payload = http_status(api_port, "PUT", f"/v1/qrels/{qrels_id}",
                                          text.encode(), {"Content-Type": "text/plain"})
            if status not in (200, 201):
                raise RuntimeError(f"PUT /v1/qrels/{qrels_id}: {status} {payload[:300]!r}")
            versions[qrels_id] = json.loads(payload)["version"]

        opts = {"seed": args.seed, "seconds": args.seconds, "timeout": args.timeout,
                "grace": args.grace, "start": time.monotonic() + 1.0, "versions": versions,
                "stored": {k: judged_docs(t) for k, t in qrels_texts.items()},
                "qrels_text": qrels_texts["load-50"]}
        print(f"load: {args.seconds:.0f} s, {args.clients} keep-alive client processes "
              f"(seed {args.seed}), mix 70% sync evaluations (1x100, {len(MEASURES)} "
              "measures) / 20% qrels reads / 10% async jobs (50x100)")
        print("stack on loopback: gunicorn (service/gunicorn.conf.py, 2 worker processes x 4 "
              "threads), "
              f"2 `cranfield worker`, redis-server {redis_port}; {os.cpu_count()} cores "
              f"shared with the clients; load average before "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        out: mp.Queue = mp.Queue()
        clients = [mp.Process(target=client_main, args=(i, api_port, opts, out))
                   for i in range(args.clients)]
        for c in clients:
            c.start()
        pids = (procs["gunicorn master"].pid,
                [procs[f"rq worker {i}"].pid for i in (1, 2)], procs["redis-server"].pid)
        time.sleep(max(0.0, opts["start"] + warmup - time.monotonic()))
        first = sample(*pids, redis_conn)
        results = [out.get(timeout=args.seconds + args.grace + 4 * args.timeout + 60)
                   for _ in clients]
        for c in clients:
            c.join()
        last = sample(*pids, redis_conn)
        print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}; memory "
              f"sampled after {warmup:.0f} s of load and at the end")
        alive = {role: p.poll() is None for role, p in procs.items()}
        verdict = report(results, args.seconds, first, last, alive, result_ttl)
        for log in logs:
            bad = [line[:300] for line in log.read_text(errors="replace").splitlines()
                   if any(w in line for w in ("ERROR", "CRITICAL", "Traceback"))]
            if bad:
                print(f"  {log.name}: {len(bad)} error lines, e.g.", *bad[:3], sep="\n    ")
        return 0 if verdict else 1
    finally:
        for p in reversed(list(procs.values())):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
