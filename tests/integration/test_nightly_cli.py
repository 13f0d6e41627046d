"""The nightly job with nothing but ``cranfield`` (issue #25), on real parts: gunicorn, a
``cranfield worker`` on a private Redis, and the results database (a SQLite file, then a
PostgreSQL database).

The story is told by the command line alone (subprocesses of ``.venv/bin/cranfield``): the
team's qrels are stored once (``cranfield qrels put``); three nights of a 100 MB TREC run
follow, each queued and cut into shards; nights 1 and 2 are recorded with ``cranfield eval
--server … --record``, night 1 is pinned (``cranfield baseline``), and night 3, which lost
its top ten documents on a known set of topics, is gated (``cranfield gate``): exit 3, a JUnit
report and a Markdown summary naming what fell. ``cranfield trend … -o page.html`` saves the
trend page.

The test itself only checks: it reads the service's ``/metrics`` (one upload per night) and
the results database (queued, sharded, pinned, gated), and measures each upload's peak
resident memory from ``/proc`` and ``wait4`` (under twice the run's size: the run is streamed,
never read whole). No time is asserted.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from servers import (
    CRANFIELD,
    RedisServer,
    postgres_database,
    require_redis_server,
    running_gunicorn,
    running_worker,
)

import cranfield

# -- the run: 500 topics x 5,000 documents, one fixed-width line of 40 bytes each ----------
TOPICS = 500
DEPTH = 5000
WIDTH = 40                      # "q0001 Q0 d0000000001 0001 5000 nightrun\n"
RUN_BYTES = TOPICS * DEPTH * WIDTH   # 100,000,000
DOCID = slice(9, 20)            # the docid's columns in a line
SYSTEM = "search"
#: night 3 lost its top ten documents (swapped with ranks 4001-4010, unjudged) on these
REGRESSED = ("q0007", "q0042", "q0077", "q0123", "q0168", "q0222", "q0256", "q0301",
             "q0333", "q0389", "q0444", "q0499")
#: night 2 swaps its first two documents on these: a few lines differ, nothing to gate
SLIPPED = ("q0010", "q0200", "q0400")
MEASURES = ("map", "ndcg_cut.10", "recip_rank")
GATES = ("ndcg_cut.10:0.002", "map:0.002", "recip_rank:0.5")   # the last one passes
TIMEOUT = 900   # seconds a command may take on a loaded 2-core machine (a backstop only)


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """Each value as ``width`` ASCII digits, zero-padded: uint8 (len(values), width)."""
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (48 + (values[:, None] // powers) % 10).astype(np.uint8)


@dataclass
class Nights:
    runs: list[Path]        # night 1, 2, 3
    qrels: Path
    regressed_drop: dict    # measure key -> expected mean drop night 1 -> night 3


def _swap_docids(lines: np.ndarray, topic: int, ranks_a, ranks_b) -> None:
    a = topic * DEPTH + np.asarray(ranks_a) - 1
    b = topic * DEPTH + np.asarray(ranks_b) - 1
    lines[a, DOCID], lines[b, DOCID] = lines[b, DOCID].copy(), lines[a, DOCID].copy()


def _mapping(lines: np.ndarray, topics) -> dict:
    """The run's lines of ``topics`` as {topic: {docid: score}} (for the local check)."""
    out = {}
    for name in topics:
        t = int(name[1:]) - 1
        block = lines[t * DEPTH:(t + 1) * DEPTH]
        out[name] = {bytes(row[DOCID]).decode(): float(DEPTH - r)
                     for r, row in enumerate(block)}
    return out


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> Nights:
    """The three nights' run files and the qrels, generated once (seed 25): night 1 ranks a
    topic's relevant documents in its top 30 (one in the top 3), night 2 differs from it in
    six lines, night 3 in 240 (the top ten of each REGRESSED topic)."""
    rng = np.random.default_rng(25)
    folder = tmp_path_factory.mktemp("nightly-runs")
    n = TOPICS * DEPTH
    topic = np.repeat(np.arange(TOPICS, dtype=np.int64), DEPTH)
    rank = np.tile(np.arange(1, DEPTH + 1, dtype=np.int64), TOPICS)
    order = rng.permuted(np.tile(np.arange(DEPTH, dtype=np.int64), (TOPICS, 1)), axis=1)
    lines = np.empty((n, WIDTH), np.uint8)
    lines[:] = np.frombuffer(b"q0000 Q0 d0000000000 0000 0000 nightrun\n", np.uint8)
    lines[:, 1:5] = _digits(topic + 1, 4)
    lines[:, 10:20] = _digits(topic * DEPTH + order.ravel(), 10)
    lines[:, 21:25] = _digits(rank, 4)
    lines[:, 26:30] = _digits(DEPTH + 1 - rank, 4)   # scores fall with rank: no ties

    # the judgments: 3-11 relevant documents in the top 30 (one at rank 1-3), 20 judged
    # non-relevant at ranks 31-300, 2 relevant deep (ranks 301-3000)
    qrels = []
    for t in range(TOPICS):
        ranks = [int(rng.integers(1, 4))]
        ranks += rng.choice(np.setdiff1d(np.arange(1, 31), ranks), int(rng.integers(2, 11)),
                            replace=False).tolist()
        grades = [int(g) for g in rng.integers(1, 3, len(ranks))]
        deep = rng.choice(np.arange(301, 3001), 2, replace=False).tolist()
        nonrel = rng.choice(np.arange(31, 301), 20, replace=False).tolist()
        for r, g in [*zip(ranks, grades, strict=True), *((r, 1) for r in deep),
                     *((r, 0) for r in nonrel)]:
            docid = bytes(lines[t * DEPTH + r - 1, DOCID]).decode()
            qrels.append(f"q{t + 1:04d} 0 {docid} {g}\n")
    qrels_path = folder / "qrels.txt"
    qrels_path.write_text("".join(qrels))

    paths = [folder / f"night-{i}.txt" for i in (1, 2, 3)]
    lines.tofile(paths[0])
    before = _local(lines, qrels_path)
    for name in SLIPPED:
        _swap_docids(lines, int(name[1:]) - 1, [1], [2])
    lines.tofile(paths[1])
    for name in SLIPPED:  # undo: night 3 is night 1 with the regression only
        _swap_docids(lines, int(name[1:]) - 1, [1], [2])
    for name in REGRESSED:
        _swap_docids(lines, int(name[1:]) - 1, range(1, 11), range(4001, 4011))
    lines.tofile(paths[2])
    after = _local(lines, qrels_path)
    del lines
    assert all(p.stat().st_size == RUN_BYTES for p in paths)
    # every other topic is the same on nights 1 and 3: the mean drop is theirs over all
    drop = {key: sum(before[t][key] - after[t][key] for t in REGRESSED) / TOPICS
            for key in ("map", "ndcg_cut_10", "recip_rank")}
    assert drop["ndcg_cut_10"] > 0.005 and drop["map"] > 0.005 and drop["recip_rank"] < 0.5
    return Nights(paths, qrels_path, drop)


def _local(lines: np.ndarray, qrels_path: Path) -> dict:
    """Night's per-topic values on the REGRESSED topics, by the engine, in this process."""
    qrels = {}
    for line in qrels_path.read_text().splitlines():
        t, _, d, g = line.split()
        if t in REGRESSED:
            qrels.setdefault(t, {})[d] = int(g)
    ev = cranfield.evaluate(qrels, _mapping(lines, REGRESSED), list(MEASURES))
    return ev.per_topic


# -- the command line, measured ------------------------------------------------------------

@dataclass
class Ran:
    args: tuple
    returncode: int
    stdout: str
    stderr: str
    peak_rss: int       # bytes: the larger of /proc's VmHWM (polled) and wait4's ru_maxrss


#: Spawns ``argv[1:]``, polls its /proc/<pid>/status VmHWM every 20 ms until it exits, reaps
#: it with wait4 and writes "VmHWM-bytes ru_maxrss-bytes" to $MEASURE_TO; exits with its
#: status. A child's ru_maxrss counts the image it was spawned from (the kernel folds the
#: parent's high-water mark in at exec), so the spawner is this small interpreter (-I -S:
#: ~10 MB), not pytest, which holds hundreds of MB and would be counted instead.
MEASURE = """
import os, sys, time
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
hwm = 0
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    hwm = max(hwm, int(line.split()[1]) * 1024)
    except OSError:
        pass
    time.sleep(0.02)
with open(os.environ["MEASURE_TO"], "w") as fh:
    fh.write(f"{hwm} {usage.ru_maxrss * 1024}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def cli(*args: str, cwd: Path, env: dict) -> Ran:
    """``cranfield ARGS`` as a child process, its peak resident memory measured from /proc
    (VmHWM, polled) and wait4 (ru_maxrss, a peak between two polls included)."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "rss"
        done = subprocess.run([sys.executable, "-I", "-S", "-c", MEASURE, CRANFIELD, *args],
                              cwd=cwd, env={**env, "MEASURE_TO": str(report)},
                              capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=TIMEOUT)
        hwm, maxrss = map(int, report.read_text().split())
    assert hwm > 0, "VmHWM was never read"
    return Ran(args, done.returncode, done.stdout, done.stderr, max(hwm, maxrss))


def _uploads(url: str) -> float:
    """POST /v1/evaluations answered so far, over every status (the service's /metrics)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == "cranfield_http_requests_total"
               and sample.labels.get("route") == "/v1/evaluations"
               and sample.labels.get("method") == "POST")


# -- the services --------------------------------------------------------------------------

@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path, require):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/results.db"
        return
    with postgres_database("cranfield_nightly_cli_") as url:
        require(url is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
        yield url


@pytest.fixture
def service(database, monkeypatch):
    """gunicorn and one ``cranfield worker`` on a private Redis, both recording in
    ``database``; a run of 1 MB or more is queued and cut into two shards."""
    require_redis_server()
    redis = RedisServer()
    redis.start()
    try:
        # the worker inherits this process's environment; gunicorn gets it explicitly
        shards = {"CRANFIELD_SHARDS": "2", "CRANFIELD_SHARD_MIN_BYTES": "1000000",
                  "CRANFIELD_ASYNC_THRESHOLD_BYTES": "1000000"}
        for key, value in shards.items():
            monkeypatch.setenv(key, value)
        with running_gunicorn({"REDIS_URL": redis.url, "CRANFIELD_WORKERS": "2",
                               "CRANFIELD_DATABASE_URL": database, **shards}) as url, \
                running_worker(redis.url, database):
            yield url
    finally:
        redis.stop()


def _cli_env() -> dict:
    """The environment of a developer's shell, not a CI's: no annotations, no CI labels."""
    env = dict(os.environ)
    for key in [k for k in env if k.startswith(("GITHUB_", "CI_", "CRANFIELD_"))] + ["CI"]:
        env.pop(key, None)
    return env


def _rows(database: str, sql: str, **params) -> list:
    from sqlalchemy import create_engine, text

    engine = create_engine(database)
    try:
        with engine.connect() as connection:
            return connection.execute(text(sql), params).all()
    finally:
        engine.dispose()


# -- the story -----------------------------------------------------------------------------

def test_the_nightly_job_with_the_cranfield_command_alone(service, database, nights,
                                                          tmp_path):
    env = _cli_env()
    work = tmp_path / "ci"
    work.mkdir()

    def run(*args: str) -> Ran:
        return cli(*args, cwd=work, env=env)

    # the team's judgments, stored once
    put = run("qrels", "put", "nightly", str(nights.qrels), "--server", service)
    assert put.returncode == 0, put.stderr
    qrels_id = put.stdout.strip()
    assert re.fullmatch(r"nightly@\S+", qrels_id), put.stdout
    again = run("qrels", "put", "nightly", str(nights.qrels), "--server", service)
    assert (again.returncode, again.stdout.strip()) == (0, qrels_id)  # unchanged: same version

    measures = [arg for m in MEASURES for arg in ("-m", m)]
    recorded = {}
    peaks = {}
    for night in (1, 2):
        before = _uploads(service)
        done = run("eval", "--server", service, "--qrels-id", qrels_id, *measures,
                   "--record", f"system={SYSTEM},label=night-{night},commit=c0ffee{night}",
                   "-", str(nights.runs[night - 1]))
        assert done.returncode == 0, done.stderr
        found = re.search(rf"recorded as (\S+) \({SYSTEM}, night-{night}\)", done.stderr)
        assert found, done.stderr
        recorded[night] = found.group(1)
        assert "\r" not in done.stderr   # no progress bar when stderr is not a terminal
        assert _uploads(service) - before == 1        # one upload, never re-sent
        summary = {f[0]: f[2] for f in map(str.split, done.stdout.splitlines())
                   if len(f) == 3 and f[1] == "all"}    # trec_eval's text, as asked
        assert {"map", "ndcg_cut_10", "recip_rank"} <= summary.keys(), done.stdout
        assert 0 < float(summary["ndcg_cut_10"]) < 1
        peaks[f"night-{night}"] = done.peak_rss

    pin = run("baseline", SYSTEM, recorded[1], "--server", service, "--format", "json")
    assert pin.returncode == 0, pin.stderr
    assert json.loads(pin.stdout)["id"] == recorded[1]
    shown = run("baseline", SYSTEM, "--server", service)
    assert shown.returncode == 0 and recorded[1] in shown.stdout, shown.stderr

    # night 3: evaluated, recorded and gated in one command
    junit, markdown = work / "cranfield-gate.xml", work / "cranfield-gate.md"
    before = _uploads(service)
    gate = run("gate", SYSTEM, str(nights.runs[2]), "--server", service, "--qrels-id",
               qrels_id, *measures, *[arg for g in GATES for arg in ("--gate", g)],
               "--label", "night-3", "--commit", "c0ffee3", "--format", "json",
               "--junit", str(junit), "--markdown", str(markdown))
    assert gate.returncode == 3, (gate.stdout, gate.stderr)
    assert _uploads(service) - before == 1
    peaks["night-3"] = gate.peak_rss
    found = re.search(rf"recorded as (\S+) \({SYSTEM}, night-3\)", gate.stderr)
    assert found, gate.stderr
    recorded[3] = found.group(1)

    verdict = json.loads(gate.stdout)
    verdict = verdict.get("gate", verdict)
    assert verdict["verdict"] == "fail"
    checks = {c["measure"]: c for c in verdict["checks"]}
    assert {k: c["verdict"] for k, c in checks.items()} == {
        "ndcg_cut_10": "fail", "map": "fail", "recip_rank": "pass"}
    for key in ("ndcg_cut_10", "map"):
        assert checks[key]["drop"] == pytest.approx(nights.regressed_drop[key], abs=1e-9)
        assert {t["topic"] for t in checks[key]["offending_topics"]} == set(REGRESSED)

    # the JUnit report, read back as a CI server reads it
    suite = ET.parse(junit).getroot()
    if suite.tag == "testsuites":
        (suite,) = suite
    assert suite.tag == "testsuite" and suite.get("name") == "cranfield gate"
    cases = suite.findall("testcase")
    assert len(cases) == 3 and int(suite.get("tests")) == 3
    assert int(suite.get("failures")) == 2
    failed = {}
    for case in cases:
        assert case.get("classname") == f"cranfield.gate.{SYSTEM}"
        failure = case.find("failure")
        key = next(k for k in checks if k.split("_")[0] in case.get("name").lower())
        assert (failure is not None) == (key != "recip_rank"), ET.tostring(case)
        if failure is not None:
            failed[key] = " ".join(filter(None, [failure.get("message"), failure.text]))
    for key, message in failed.items():
        check = checks[key]
        assert key.split("_")[0] in message.lower()                  # the measure
        numbers = [float(x) for x in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", message)]
        assert any(abs(abs(x) - check["drop"]) < 5e-4 for x in numbers), message  # the drop
        assert re.search(r"\bp\b", message), message                 # the p-value
        worst = set(re.findall(r"q\d{4}", message))
        assert worst and worst <= set(REGRESSED), message            # the topics that fell

    # the Markdown summary: a FAIL row per failed check
    text = markdown.read_text()
    assert "FAIL" in text.split("\n|")[0]  # the overall verdict heads it
    rows = [line for line in text.splitlines() if line.startswith("|")]
    fails = [r for r in rows if "FAIL" in r.upper().split("|")[-2]]
    assert len(fails) == 2, text
    assert any("ndcg" in r.lower() for r in fails) and any("map" in r for r in fails)
    assert set(re.findall(r"q\d{4}", text)) <= set(REGRESSED)

    # the trend page, saved
    page = work / "page.html"
    trend = run("trend", SYSTEM, "--measure", "ndcg_cut.10", "-o", str(page), "--server",
                service)
    assert trend.returncode == 0, trend.stderr
    html = page.read_text()
    assert len(html) > 5000 and "<svg" in html
    assert all(f"night-{i}" in html for i in (1, 2, 3)) and "FAIL" in html
    table = run("trend", SYSTEM, "--measure", "map", "--server", service)
    assert table.returncode == 0, table.stderr
    assert all(f"night-{i}" in table.stdout for i in (1, 2, 3)), table.stdout

    # what the results database keeps: three results of queued, sharded jobs, the first
    # pinned, the third gated FAIL
    rows = _rows(database, "SELECT r.id, r.label, r.\"commit\", r.qrels_version, r.job_id, "
                 "r.document FROM results r JOIN systems s ON s.pk = r.system_pk "
                 "WHERE s.name = :name ORDER BY r.pk", name=SYSTEM)
    assert [tuple(r[:4]) for r in rows] == [
        (recorded[i], f"night-{i}", f"c0ffee{i}", qrels_id) for i in (1, 2, 3)]
    for row in rows:
        assert row[4] is not None                             # recorded by a queued job
        document = json.loads(zlib.decompress(row[5]))
        assert document["provenance"]["shards"] == 2          # cut into two shards
    assert _rows(database, "SELECT r.id FROM baselines b JOIN results r ON r.pk = b.result_pk"
                 ) == [(recorded[1],)]
    assert [v[0] for v in _rows(database, "SELECT g.verdict FROM gate_verdicts g JOIN results "
                                "r ON r.pk = g.result_pk WHERE r.id = :id", id=recorded[3])
            ] == ["fail"]

    for night, peak in peaks.items():
        print(f"{night}: CLI peak RSS {peak / 1e6:.1f} MB for a {RUN_BYTES / 1e6:.0f} MB run "
              f"({database.split(':')[0]})")
        assert peak < 2 * RUN_BYTES, f"{night}: {peak} bytes"
