"""Re-scoring throughput (issue #31): runs re-scored per minute per worker at M scale.

Starts a private redis-server, the API under gunicorn (REDIS_URL and a results database set)
and ``cranfield worker`` processes, all on loopback, as ``bench/queue.py`` does. Then:

1. stored qrels ``bench`` v1 (the M qrels of ``bench/datagen.py``: 6,980 topics) are put;
2. ``--results`` (default 8) nights of system ``bench`` are recorded with their runs kept
   (``record: {keep_run: true}``): each the M run (6.98M lines, 247 MB of TREC text) under
   its own runid, so each night keeps a run of its own (a kept run is stored once by digest),
   uploaded as multipart and queued (one at a time, 2 workers; timed, printed);
3. ``--repeat`` pairs, 1 and 2 workers alternating (so a busy machine's drift hits both
   alike): a new qrels version is put (v1 plus 20% more judgments, drawn from the run's own
   lines, half of them relevant: a version no night was re-scored under), ``POST
   /v1/systems/bench/rescore`` with it, and the time from its 202 until ``GET
   /v1/rescores/{id}`` says every item is done (polled every 0.1 s) is measured. Beside it,
   as the anchor in the same round and with the same workers, one plain evaluation of the
   same run (``POST /v1/evaluations`` queued, not recorded, under v1): its time from sending
   and from its 202 to the job's end.

Printed: per worker count, the median time of a re-score of all nights, the runs per minute
per worker (nights ÷ minutes ÷ workers), the seconds per run, the anchor's times and the
ratio of a run's re-score to one plain evaluation (what re-scoring a kept run costs beside
evaluating the uploaded run: reading it back from the database as columns, cut by topic into
SHARDS Arrow pieces, recording a new result); the machine's cores (on 2 cores, 2 workers can at
most double 1 worker's rate, and share the cores with the API, Redis, the database and
everything else running) and the load average at each round. Checked, outside the timed
windows: every re-score ends with all nights done (none failed or skipped), each new result
links the night it re-scores, and the last re-score's first new result's aggregate equals
an in-process ``cranfield.evaluate`` of the run under that version's qrels.

The results database is PostgreSQL on 127.0.0.1:5432 (a database with a random name, made
here and dropped ``WITH (FORCE)`` at the end), or with ``--sqlite`` a temporary SQLite
file. Nothing is asserted about speed; everything is stopped at the end.

    python bench/rescoring.py                          # needs bench/data/M-* (datagen.py)
    python bench/rescoring.py --results 3 --repeat 1   # a smoke check (a few minutes)
"""

from __future__ import annotations

import sys

if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    # keep bench/http.py and bench/queue.py from shadowing the standard library's http and
    # queue; the repository's root takes the entry instead
    sys.path[0] = __import__("os").path.dirname(sys.path[0])

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from bench.datagen import cached_dataset  # noqa: E402
from bench.queue import free_port, get_json, wait_http  # noqa: E402

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CRANFIELD = str(Path(sys.executable).with_name("cranfield"))
MEASURES = ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]
SYSTEM = "bench"
QRELS_ID = "bench"
PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
POLL = 0.1  # seconds between two looks at a job's or a re-score's progress


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------

def request(method: str, url: str, body: bytes | None = None, content_type: str | None = None,
            headers: dict | None = None) -> tuple[int, dict, dict]:
    """(status, headers, JSON body) of one request; an HTTP error's problem is raised."""
    headers = dict(headers or {})
    if content_type:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {url}: {exc.code} {exc.read()[:500]!r}") from None


def multipart(run: bytes, fields: list[tuple[str, str]]) -> tuple[bytes, str]:
    """A multipart/form-data body: the run as a file part, then plain fields, as `curl -F
    run=@run.txt -F name=value` sends them."""
    boundary = f"cranfield-bench-{uuid.uuid4().hex}"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="run"; filename="run.txt"'
             f'\r\nContent-Type: text/plain\r\n\r\n'.encode() + run + b"\r\n"]
    for name, value in fields:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"'
                     f'\r\n\r\n{value}\r\n'.encode())
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def evaluation_body(run: bytes, qrels_ref: str, record: dict | None) -> tuple[bytes, str]:
    fields = [("qrels_id", qrels_ref)] + [("measures", m) for m in MEASURES]
    if record is not None:
        fields.append(("record", json.dumps(record)))
    return multipart(run, fields)


def queued_evaluation(api: str, body: bytes, content_type: str, timeout: float) -> dict:
    """POST a queued evaluation and wait for its job: ``{"sent", "accepted", "ended"}``
    (perf_counter seconds) and ``result``, the job's document."""
    sent = time.perf_counter()
    _, headers, _ = request("POST", api + "/v1/evaluations", body, content_type,
                            {"Prefer": "respond-async"})
    accepted = time.perf_counter()
    location = api + headers["Location"]
    deadline = time.monotonic() + timeout
    while True:
        state = get_json(location)
        if state["status"] in ("finished", "failed", "canceled"):
            ended = time.perf_counter()
            if state["status"] != "finished" or "problem" in (state.get("result") or {}):
                raise RuntimeError(f"job ended {state['status']}: "
                                   f"{state.get('problem') or state.get('result')}")
            return {"sent": sent, "accepted": accepted, "ended": ended,
                    "result": state.get("result") or {}, "id": headers["Location"].rsplit(
                        "/", 1)[-1]}
        if time.monotonic() > deadline:
            raise TimeoutError(f"the evaluation did not finish in {timeout} s")
        time.sleep(POLL)


def rescore(api: str, qrels_ref: str, timeout: float) -> dict:
    """POST /v1/systems/bench/rescore and wait until no item is queued: the 202's latency,
    the seconds from the 202 to all done, and the last progress document."""
    sent = time.perf_counter()
    status, headers, doc = request("POST", f"{api}/v1/systems/{SYSTEM}/rescore",
                                   json.dumps({"qrels_id": qrels_ref}).encode(),
                                   "application/json")
    accepted = time.perf_counter()
    if status != 202:
        raise RuntimeError(f"expected 202, got {status}: {doc}")
    location = api + headers["Location"]
    deadline = time.monotonic() + timeout
    while doc["state"] != "finished":
        if time.monotonic() > deadline:
            raise TimeoutError(f"the re-score did not finish in {timeout} s: {doc}")
        time.sleep(POLL)
        doc = get_json(location)
    return {"accept": accepted - sent, "seconds": time.perf_counter() - accepted, "doc": doc}


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def night_run(text: bytes, night: int) -> bytes:
    """The M run under runid ``night-NN``: the same lines, another kept run (the runid is
    part of a kept run's digest)."""
    return text.replace(b" bench\n", b" night-%02d\n" % night)


def next_version(v1: bytes, run: bytes, seed: int) -> bytes:
    """v1's judgments plus 20% more: documents of seeded random lines of the run (a uniform
    sample of its lines, read at random byte offsets), half of them relevant; a judgment v1
    has already is left as v1 has it."""
    judged = {tuple(line.split()[::2][:2]) for line in v1.splitlines() if line.strip()}
    want = len(judged) // 5
    rng = np.random.default_rng((31, seed))
    added: dict[tuple[bytes, bytes], int] = {}
    while len(added) < want:
        for offset in rng.integers(0, len(run) - 1, size=want):
            start = run.rfind(b"\n", 0, int(offset)) + 1
            topic, _, docid = run[start:run.find(b"\n", start)].split()[:3]
            if (topic, docid) not in judged and (topic, docid) not in added:
                added[(topic, docid)] = int(rng.random() < 0.5)
            if len(added) == want:
                break
    return v1 + b"".join(b"%s 0 %s %d\n" % (t, d, g) for (t, d), g in added.items())


def put_qrels(api: str, text: bytes) -> str:
    _, _, doc = request("PUT", f"{api}/v1/qrels/{QRELS_ID}", text, "text/plain")
    return f"{QRELS_ID}@{doc['version']}"


# --------------------------------------------------------------------------------------------
# The bench
# --------------------------------------------------------------------------------------------

class Workers:
    """``cranfield worker`` processes on the bench's Redis and database."""

    def __init__(self, redis_url: str, env: dict, procs: list[subprocess.Popen]):
        self.redis_url, self.env, self.procs = redis_url, env, procs
        self.running: list[subprocess.Popen] = []

    def scale(self, n: int) -> None:
        """Exactly ``n`` workers running (new ones given time to register and wait on the
        queue; a stopped one is idle, so its warm shutdown is immediate)."""
        while len(self.running) > n:
            proc = self.running.pop()
            proc.terminate()
            proc.wait(timeout=60)
            self.procs.remove(proc)
        started = False
        while len(self.running) < n:
            proc = subprocess.Popen([CRANFIELD, "worker", "--redis-url", self.redis_url],
                                    cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            self.running.append(proc)
            self.procs.append(proc)
            started = True
        if started:
            time.sleep(2.0)


def record_nights(api: str, text: bytes, n: int, v1_ref: str, timeout: float) -> list[float]:
    seconds = []
    for night in range(n):
        body, content_type = evaluation_body(night_run(text, night), v1_ref, {
            "system": SYSTEM, "label": f"night {night}", "commit": f"c{night:04d}",
            "tags": ["nightly"], "keep_run": True})
        job = queued_evaluation(api, body, content_type, timeout)
        recorded = job["result"].get("recorded") or {}
        if not recorded.get("run_sha256"):
            raise RuntimeError(f"night {night}: recorded without its run kept: {recorded}")
        seconds.append(job["ended"] - job["sent"])
        print(f"  night {night}: recorded with its run kept in {seconds[-1]:.1f} s "
              f"(202 after {job['accepted'] - job['sent']:.1f} s); {load()}", flush=True)
    return seconds


def busy(conn, jobs: dict[str, list[str]]) -> dict[str, float]:
    """Seconds RQ's jobs of each kind ran (started_at to ended_at, summed), by kind."""
    from rq.job import Job

    out = {}
    for kind, ids in jobs.items():
        found = [j for j in Job.fetch_many(ids, connection=conn) if j is not None]
        out[kind] = sum((j.ended_at - j.started_at).total_seconds() for j in found
                        if j.started_at and j.ended_at)
    return out


def rescore_busy(conn, doc: dict, shards: int) -> dict[str, float]:
    """Worker seconds a re-score's jobs took, per run: ``prepare`` (the re-score job: the
    kept run read back as columns and cut by topic, the Arrow pieces stored and queued; or
    the whole re-score when the run is not cut), ``shards``, ``combine`` (merge and record)."""
    ids = [f"rescore-{doc['id']}-{p}" for p in range(doc["total"])]
    out = busy(conn, {"prepare": ids,
                      "shards": [f"{i}-shard-{k}" for i in ids for k in range(shards)],
                      "combine": [f"{i}-combine" for i in ids]})
    return {k: v / max(1, doc["total"]) for k, v in out.items()}


def evaluation_busy(conn, job_id: str) -> dict[str, float]:
    """Worker seconds a queued evaluation's jobs took: ``shards`` and ``combine`` (its
    job id is the combine step's; a job not cut is all ``combine``)."""
    from rq.job import Job

    combine = Job.fetch(job_id, connection=conn)
    return busy(conn, {"shards": list(combine.meta.get("shards") or []),
                       "combine": [job_id]})


def check_rescore(doc: dict, n: int) -> None:
    if (doc["done"], doc["failed"], doc["skipped"], doc["queued"]) != (n, 0, 0, 0):
        raise RuntimeError(f"re-score ended {doc['done']} done, {doc['failed']} failed, "
                           f"{doc['skipped']} skipped of {n}: "
                           f"{[i.get('reason') for i in doc['items'] if i.get('reason')]}")


def check_values(api: str, doc: dict, run_path: Path, qrels: bytes) -> str:
    """The re-score's first new result against an in-process evaluation of the run under the
    same qrels, and its link to the night it re-scores."""
    import cranfield

    item = doc["items"][0]
    new = get_json(f"{api}/v1/results/{item['new_result_id']}")
    if new["document"]["provenance"].get("rescores") != item["result_id"]:
        raise RuntimeError("the new result does not name the result it re-scores")
    if new["qrels_version"] != doc["qrels_id"]:
        raise RuntimeError(f"new result under {new['qrels_version']}, not {doc['qrels_id']}")
    ev = cranfield.evaluate(cranfield.read_qrels(qrels), cranfield.read_run(str(run_path)),
                            MEASURES)
    got, want = new["aggregate"], dict(ev.aggregate)
    worst = max(abs(got[k] - want[k]) for k in want)
    if set(got) != set(want) or worst > 1e-12:
        raise RuntimeError(f"re-scored aggregate {got} != in-process {want}")
    return (f"{'bit-identical' if got == want else f'within {worst:.1e}'} to an in-process "
            f"cranfield.evaluate of the run under {doc['qrels_id']}")


def bench(args, data: Path, database: str) -> None:
    cores = os.cpu_count() or 1
    text = (data / "run.txt").read_bytes()
    v1 = (data / "qrels.txt").read_bytes()
    redis_port, api_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    procs: list[subprocess.Popen] = []
    env = dict(os.environ, REDIS_URL=redis_url, CRANFIELD_DATABASE_URL=database,
               CRANFIELD_WORKERS="2", CRANFIELD_LOG_LEVEL="warning",
               CRANFIELD_SHARDS=str(args.shards))
    try:
        procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--save", "",
                                       "--appendonly", "no"], stdout=subprocess.DEVNULL))
        procs.append(subprocess.Popen([sys.executable, "-m", "gunicorn", "-c",
                                       str(ROOT / "service" / "gunicorn.conf.py"), "--bind",
                                       f"127.0.0.1:{api_port}", "service.app:create_app()"],
                                      cwd=ROOT, env=env, stdout=subprocess.DEVNULL))
        api = f"http://127.0.0.1:{api_port}"
        wait_http(api + "/readyz", timeout=120)
        workers = Workers(redis_url, env, procs)
        from redis import Redis

        conn = Redis.from_url(redis_url)
        v1_ref = put_qrels(api, v1)
        n, lines, judgments = args.results, text.count(b"\n"), v1.count(b"\n")
        print(f"M run: {len(text) / 2**20:.0f} MB of TREC text ({lines:,} lines), "
              f"{len(MEASURES)} measures; qrels {v1_ref}: {judgments:,} judgments; "
              f"{n} nights; SHARDS={args.shards}; results database "
              f"{database.split(':', 1)[0]}; {cores} cores; {load()} (1/5 min)")
        workers.scale(2)
        recording = record_nights(api, text, n, v1_ref, args.timeout)
        print(f"recorded {n} nights (2 workers): median {statistics.median(recording):.1f} s "
              "a night, upload to its job's end")

        rounds: dict[int, list[dict]] = {1: [], 2: []}
        anchor_run = evaluation_body(night_run(text, 0), v1_ref, None)
        version, last = 0, None
        print(f"{'round':>5s} {'workers':>7s} {'re-score s':>10s} {'runs/min/w':>10s} "
              f"{'s/run':>6s} {'202 s':>6s} {'eval s':>7s} {'after 202':>9s} {'ratio':>6s}  "
              "qrels, load (1/5 min) at the round's end")
        for r in range(args.repeat):
            for w in ((1, 2) if r % 2 == 0 else (2, 1)):
                workers.scale(w)
                job = queued_evaluation(api, *anchor_run, args.timeout)
                version += 1
                v_text = next_version(v1, text, version)
                ref = put_qrels(api, v_text)
                out = rescore(api, ref, args.timeout)
                check_rescore(out["doc"], n)
                last = (out["doc"], v_text)
                row = {"seconds": out["seconds"], "accept": out["accept"],
                       "eval": job["ended"] - job["sent"],
                       "eval_queued": job["ended"] - job["accepted"]}
                row["per_run"] = row["seconds"] / n
                row["rate"] = n / (row["seconds"] / 60) / w
                row["ratio"] = row["per_run"] / row["eval_queued"]
                row["busy"] = rescore_busy(conn, out["doc"], args.shards)
                row["eval_busy"] = evaluation_busy(conn, job["id"])
                rounds[w].append(row)
                print(f"{r + 1:>5d} {w:>7d} {row['seconds']:10.1f} {row['rate']:10.2f} "
                      f"{row['per_run']:6.1f} {row['accept']:6.2f} {row['eval']:7.1f} "
                      f"{row['eval_queued']:9.1f} {row['ratio']:6.2f}  {ref}, {load()}",
                      flush=True)
        med = statistics.median
        print(f"\nmedians of {args.repeat} round(s), {n} kept M runs re-scored a round; "
              f"{cores} cores (2 workers can at most double 1 worker's rate: min(2, "
              f"{cores}) = {min(2, cores)}x, less what the API, Redis and the database take)")
        print(f"{'workers':>7s} {'re-score s':>10s} {'runs/min/worker':>15s} {'s per run':>9s} "
              f"{'eval s (sent)':>13s} {'eval s (202)':>12s} {'re-score/eval':>13s}")
        for w in (1, 2):
            xs = rounds[w]
            print(f"{w:>7d} {med([x['seconds'] for x in xs]):10.1f} "
                  f"{med([x['rate'] for x in xs]):15.2f} {med([x['per_run'] for x in xs]):9.1f} "
                  f"{med([x['eval'] for x in xs]):13.1f} "
                  f"{med([x['eval_queued'] for x in xs]):12.1f} "
                  f"{med([x['ratio'] for x in xs]):13.2f}")
        every = rounds[1] + rounds[2]
        prep, shard, comb = (med([x["busy"][k] for x in every])
                             for k in ("prepare", "shards", "combine"))
        e_shard, e_comb = (med([x["eval_busy"][k] for x in every])
                           for k in ("shards", "combine"))
        print(f"worker seconds per run (RQ's started_at to ended_at, median of all rounds): "
              f"re-score {prep + shard + comb:.1f} s = prepare {prep:.1f} (the kept run read "
              f"back from the database as columns and cut by topic into {args.shards} Arrow "
              f"pieces, stored and queued) + shards {shard:.1f} + combine and record "
              f"{comb:.1f}; plain evaluation {e_shard + e_comb:.1f} s = shards {e_shard:.1f} "
              f"+ combine {e_comb:.1f} (its upload, read and cut by the API, not in it)")
        total = {w: med([x["seconds"] for x in rounds[w]]) for w in (1, 2)}
        print(f"2 workers vs 1: {total[1] / total[2]:.2f}x faster a re-score (ideal "
              f"{min(2, cores)}x on {cores} cores); re-score/eval: one run's share of a "
              "re-score's time over one plain evaluation's time from its 202 (the queue's "
              "work alone), with the same workers")
        print(f"checked: every re-score ended with {n} of {n} nights done (none failed or "
              f"skipped); {check_values(api, last[0], data / 'run.txt', last[1])}; {load()}")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=int, default=8,
                        help="nights recorded with their runs kept (default 8)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds, each a re-score with 1 and with 2 workers (default 3)")
    parser.add_argument("--shards", type=int, default=4, help="the service's SHARDS")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="the longest wait for one job or re-score, seconds")
    parser.add_argument("--sqlite", action="store_true",
                        help="a temporary SQLite file as the results database (default: a "
                             "PostgreSQL database made on 127.0.0.1:5432 and dropped)")
    args = parser.parse_args()
    if args.results < 1 or args.repeat < 1:
        parser.error("need --results >= 1 and --repeat >= 1")
    data = cached_dataset("M")
    if data is None or shutil.which("redis-server") is None:
        print("needs bench/data/M-* (python bench/datagen.py --scales M) and redis-server")
        return 0
    print(f"re-scoring benchmark (issue #31): {args.results} nights x the M run, "
          f"{args.repeat} round(s) of 1 and 2 workers; python {sys.version.split()[0]}")
    if args.sqlite:
        with tempfile.TemporaryDirectory(prefix="cranfield-rescoring-") as folder:
            bench(args, data, f"sqlite:///{folder}/results.db")
        return 0
    import psycopg

    name = f"cranfield_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        bench(args, data, PG_URL.format(name=name))
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
