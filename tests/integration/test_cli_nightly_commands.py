"""The nightly commands (issue #25) and the Python Client they are built on, against a live
service: gunicorn and a ``cranfield worker`` on a private Redis, recording in a SQLite file
of this module, with runs over 20 kB queued and cut into two shards. Compared with a second,
embedded gunicorn (``live_server``) that answers the same runs synchronously.

Checked by value: the text of a queued evaluation equals a synchronous one's byte for byte
(trec and csv), every evaluation is one ``POST /v1/evaluations`` on ``/metrics``, recorded ids
and versions are the service's, ``gate`` exits 6 / 0 / 3 / 5 with the verdicts and reports
the service kept, ``trend`` saves the service's page, and the Client's progress callback sees
a queued job's stage and topics."""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from servers import CRANFIELD, DATA, ROOT, running_gunicorn, running_worker

from cranfield.client import ApiError, Client

TOPICS = [f"q{i:03d}" for i in range(40)]
LOST = TOPICS[3::4]            # ten topics where tonight's run loses its relevant documents
DOCS = 400                     # per topic: runs of ~650 kB, over the 20 kB async threshold
SYSTEM = "nightly-cmds"


@dataclass
class Ran:
    code: int
    out: str
    err: str


def cli(*args: str, env: dict | None = None, stdin: bytes | None = None) -> Ran:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("CRANFIELD_SERVER", "CRANFIELD_API_KEY", "GITHUB_",
                                    "CI_PIPELINE", "CI_COMMIT"))}
    done = subprocess.run([CRANFIELD, *args], capture_output=True, cwd=ROOT, timeout=300,
                          env={**environ, **(env or {})}, input=stdin)
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def uploads(url: str) -> float:
    """POST /v1/evaluations answered so far (the service's /metrics, every process)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sum(s.value for family in text_string_to_metric_families(text)
               for s in family.samples if s.name == "cranfield_http_requests_total"
               and s.labels.get("route") == "/v1/evaluations"
               and s.labels.get("method") == "POST")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """qrels (two relevant documents per topic), a run that finds them first, and the same
    run having lost them to rank 300 on ten topics."""
    folder = tmp_path_factory.mktemp("nightly-cmds")
    qrels = "".join(f"{t} 0 d{t}-{i} 1\n" for t in TOPICS for i in (0, 1))

    def run(lost: list[str], tag: str) -> str:
        lines = []
        for t in TOPICS:
            docs = [f"d{t}-{i}" for i in range(DOCS)]
            if t in lost:
                docs = docs[2:300] + docs[:2] + docs[300:]
            lines += [f"{t} Q0 {d} {r + 1} {DOCS - r} {tag}\n" for r, d in enumerate(docs)]
        return "".join(lines)

    paths = {"qrels": folder / "qrels.txt", "good": folder / "good.txt",
             "bad": folder / "bad.txt"}
    paths["qrels"].write_text(qrels)
    paths["good"].write_text(run([], "good"))
    paths["bad"].write_text(run(LOST, "bad"))
    return paths


@pytest.fixture(scope="module")
def service(redis_server, tmp_path_factory):
    """(gunicorn URL, SQLite URL): runs over 20 kB queued and cut into two shards, a worker
    recording in the same database."""
    database = f"sqlite:///{tmp_path_factory.mktemp('results')}/results.db"
    env = {"REDIS_URL": redis_server.url, "CRANFIELD_DATABASE_URL": database,
           "CRANFIELD_WORKERS": "2", "CRANFIELD_ASYNC_THRESHOLD_BYTES": "20000",
           "CRANFIELD_SHARDS": "2", "CRANFIELD_SHARD_MIN_BYTES": "1000"}
    with running_gunicorn(env) as url, running_worker(redis_server.url, database):
        yield url


@pytest.fixture(scope="module")
def qrels_id(service, files) -> str:
    put = cli("qrels", "put", "nightly-cmds", str(files["qrels"]), "--server", service)
    assert put.code == 0, put.err
    return put.out.strip()


def test_qrels_put_prints_the_version_and_list_shows_it(service, files, qrels_id):
    assert re.fullmatch(r"nightly-cmds@[0-9a-f]{16}", qrels_id)
    version = qrels_id.split("@")[1]
    assert Client(service).qrels("nightly-cmds")["version"] == version
    again = cli("qrels", "put", "nightly-cmds", str(files["qrels"]), "--server", service,
                "--format", "json")
    assert again.code == 0 and json.loads(again.out)["version"] == version
    stale = cli("qrels", "put", "nightly-cmds", str(DATA / "qrels.test"), "--server", service,
                "--if-match", "0" * 16)
    assert stale.code == 2 and "HTTP 412" in stale.err
    listed = cli("qrels", "list", "--server", service, "--format", "json")
    items = {q["id"]: q for q in json.loads(listed.out)["items"]}
    assert items["nightly-cmds"]["version"] == version
    assert items["nightly-cmds"]["judgments"] == 2 * len(TOPICS)
    table = cli("qrels", "list", "--server", service)
    assert any(line.split()[:4] == ["nightly-cmds", version, str(len(TOPICS)),
                                    str(2 * len(TOPICS))] for line in table.out.splitlines())


@pytest.mark.parametrize("fmt, flags", [("trec", ["-q", "-m", "all_trec"]),
                                        ("trec", []), ("csv", ["-q", "-m", "map",
                                                               "-m", "P.5,10"])])
def test_a_queued_eval_prints_what_a_sync_eval_prints_after_one_upload(
        service, live_server, fmt, flags):
    run, qrels = str(DATA / "results.test"), str(DATA / "qrels.test")
    sync = cli("eval", "--server", live_server, "--format", fmt, *flags, qrels, run)
    before = uploads(service)
    queued = cli("eval", "--server", service, "--format", fmt, *flags, qrels, run)
    assert uploads(service) - before == 1
    assert sync.code == queued.code == 0, queued.err
    assert queued.out == sync.out
    local = cli("eval", "--format", fmt, *flags, qrels, run)
    assert queued.out == local.out
    job = Client(service).evaluate(qrels, run, measures=["map"], wait=False)
    assert job["status"] in ("queued", "started")  # it was queued indeed


def test_record_gate_baseline_and_trend(service, files, qrels_id, tmp_path):
    measures = ["-m", "map", "-m", "ndcg_cut.10"]
    gates = ["--gate", "map:0.01", "--gate", "ndcg_cut.10:0.01"]

    # night 1: recorded through eval, as JSON and as text
    before = uploads(service)
    night1 = cli("eval", "--server", service, "--qrels-id", qrels_id, *measures, "--record",
                 f"system={SYSTEM},label=night-1,commit=c1", "-", str(files["good"]))
    assert night1.code == 0, night1.err
    assert uploads(service) - before == 1
    night1_id = re.fullmatch(rf"cranfield: recorded as ([0-9a-f]{{32}}) \({SYSTEM}, "
                             r"night-1\)\n", night1.err).group(1)
    result = Client(service).result(night1_id)
    assert (result["label"], result["commit"], result["qrels_version"]) == (
        "night-1", "c1", qrels_id)
    summary = {f[0]: f[2] for f in map(str.split, night1.out.splitlines()) if f[1] == "all"}
    assert float(summary["map"]) == pytest.approx(result["aggregate"]["map"], abs=5e-5) == 1.0

    # night 2 gated before any baseline: recorded, not gated, told how to pin (exit 6)
    before = uploads(service)
    night2 = cli("gate", SYSTEM, str(files["good"]), "--qrels-id", qrels_id, *measures,
                 *gates, "--label", "night-2", "--server", service)
    assert night2.code == 6, night2.err
    assert uploads(service) - before == 1
    night2_id = re.search(r"recorded as ([0-9a-f]{32})", night2.err).group(1)
    assert f"cranfield baseline {SYSTEM} {night2_id}" in night2.err
    shown = cli("baseline", SYSTEM, "--server", service)
    assert shown.code == 6 and "no baseline pinned" in shown.err

    pin = cli("baseline", SYSTEM, night1_id, "--server", service, "--format", "json")
    assert pin.code == 0 and json.loads(pin.out)["id"] == night1_id
    shown = cli("baseline", SYSTEM, "--server", service)
    assert shown.code == 0
    assert shown.out.splitlines()[1].split()[:4] == [SYSTEM, night1_id, "night-1", "c1"]

    # night 3: as good as night 1 (exit 0); night 4: lost ten topics (exit 3)
    passed = cli("gate", SYSTEM, str(files["good"]), "--qrels-id", qrels_id, *measures,
                 *gates, "--label", "night-3", "--server", service, "--format", "markdown")
    assert passed.code == 0, passed.err
    assert passed.out.startswith(f"### Cranfield gate for {SYSTEM}: PASS")
    junit, markdown, step = tmp_path / "gate.xml", tmp_path / "gate.md", tmp_path / "step.md"
    before = uploads(service)
    failed = cli("gate", SYSTEM, "-", "--qrels-id", qrels_id, *measures, *gates,
                 "--format", "json", "--junit", str(junit), "--markdown", str(markdown),
                 "--server", service, stdin=files["bad"].read_bytes(),
                 env={"GITHUB_ACTIONS": "true", "GITHUB_RUN_NUMBER": "4",
                      "GITHUB_SHA": "c4", "GITHUB_STEP_SUMMARY": str(step)})
    assert failed.code == 3, failed.err
    assert uploads(service) - before == 1
    night4_id = re.search(rf"recorded as ([0-9a-f]{{32}}) \({SYSTEM}, ci-4\)",
                          failed.err).group(1)
    out_json, _, annotations = failed.out.partition("\n::")
    doc = json.loads(out_json)
    checks = {c["measure"]: c for c in doc["gate"]["checks"]}
    assert {k: c["verdict"] for k, c in checks.items()} == {"map": "fail",
                                                             "ndcg_cut_10": "fail"}
    for check in checks.values():
        assert {t["topic"] for t in check["offending_topics"]} == set(LOST)
        assert (check["candidate"], check["baseline"]) == (f"{SYSTEM}@ci-4",
                                                           f"{SYSTEM}@night-1")
    assert doc["gate"]["recorded"] == [{"result_id": night4_id, "verdict": "fail"}]
    assert Client(service).result(night4_id)["commit"] == "c4"
    errors = ("::" + annotations).splitlines()
    assert [e.split("::")[1] for e in errors] == [
        f"error title=Cranfield gate failed%3A {m}%3A {SYSTEM}@ci-4 vs {SYSTEM}@night-1"
        for m in ("map", "ndcg_cut_10")]
    suite = ET.parse(junit).getroot()
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == (
        "cranfield gate", "2", "2")
    for case in suite.findall("testcase"):
        measure = case.get("name").split(":")[0]
        message = case.find("failure").get("message")
        assert case.get("classname") == f"cranfield.gate.{SYSTEM}"
        assert f"drop {checks[measure]['drop']:.4f}" in message
        assert set(re.findall(r"q\d{3}", message)) <= set(LOST)
    text = markdown.read_text()
    assert step.read_text() == text + "\n"
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| ")]
    assert [(r[0].strip(), r[-1].strip()) for r in rows[1:3]] == [("map", "fail"),
                                                                   ("ndcg_cut_10", "fail")]

    # the verdicts are the service's: on the trend, and through the Client
    api = Client(service)
    trend = api.trend(SYSTEM, "ndcg_cut_10")
    assert [(p["label"], (p.get("gate") or {}).get("verdict")) for p in trend["points"]] == [
        ("night-1", None), ("night-2", None), ("night-3", "pass"), ("ci-4", "fail")]
    page = tmp_path / "trend.html"
    saved = cli("trend", SYSTEM, "--measure", "ndcg_cut.10", "-o", str(page), "--server",
                service)
    assert saved.code == 0, saved.err
    html = page.read_text()
    assert "<svg" in html and all(label in html for label in ("night-1", "night-3", "ci-4"))
    table = cli("trend", SYSTEM, "--measure", "map", "--server", service)
    labels = [line.split()[1] for line in table.out.splitlines()[1:]]
    assert labels == ["night-1", "night-2", "night-3", "ci-4"]
    history = cli("history", SYSTEM, "--server", service, "--format", "json")
    assert [r["id"] for r in json.loads(history.out)["items"]][0] == night4_id

    # the Client's own gate, of night 4 against the pinned night 1: the same verdict
    again = api.gate(SYSTEM, night4_id, ["map"], ["map:0.01"], name="again")
    assert again["gate"]["verdict"] == "fail"
    assert api.baseline(SYSTEM)["id"] == night1_id
    assert api.pin_baseline(SYSTEM, latest=True)["id"] == night4_id
    # a run of other topics than the qrels': recorded nothing, exit 7 (sharded as it is)
    other = cli("gate", SYSTEM, str(DATA / "results.test"), "--qrels-id", qrels_id,
                "--gate", "map:0.01", "--server", service)
    assert other.code == 7, other.err
    assert "no topic has both results and relevance judgments" in other.err


def test_gate_exit_5_when_the_test_cannot_decide(service):
    api = Client(service)
    api.put_qrels("few-topics", DATA / "qrels.test")
    first = cli("gate", "few", str(DATA / "results.test"), "--qrels-id", "few-topics",
                "--gate", "map:0.001", "--label", "n1", "--server", service, "--pin-if-none")
    assert first.code == 0, first.err
    assert "had no baseline pinned: pinned" in first.err
    worse = "".join(line for i, line in enumerate(
        (DATA / "results.test").read_text().splitlines(keepends=True)) if i % 3)
    second = cli("gate", "few", "-", "--qrels-id", "few-topics", "--gate", "map:0.001",
                 "--label", "n2", "--server", service, stdin=worse.encode())
    assert second.code == 5, (second.out, second.err)
    assert second.out.startswith("gate: UNDECIDED\n")


def test_the_client_reports_progress_and_raises_one_error_type(service, files, qrels_id):
    api = Client(service)
    states: list[dict] = []
    doc = api.evaluate(run=files["good"], qrels_id=qrels_id, measures=["map"],
                       progress=states.append)
    assert doc["aggregate"]["map"] == 1.0
    assert states and states[-1]["status"] == "finished"
    final = states[-1]["progress"]
    assert final["stage"] == "done"
    assert final["topics_done"] == final["topics_total"] == len(TOPICS)
    assert final["shards_done"] == final["shards_total"] == 2
    assert all(s["progress"]["stage"] in ("queued", "reading", "evaluating", "combining",
                                          "recording", "done") for s in states)
    text = api.evaluate(run=files["good"], qrels_id=qrels_id, measures=["map"], per_topic=False,
                        accept="text/plain")
    assert text == "map                   \tall\t1.0000\n" and text.job is not None

    job = api.job(api.evaluate(run=files["good"], qrels_id=qrels_id, wait=False)["id"])
    assert set(job["progress"]) >= {"stage", "topics_done", "topics_total"}
    # a run sent as a mapping is one job on one worker (no shards): its topics too
    unsharded: list[dict] = []
    mapping = {t: {f"d{t}-0": 2.0, f"d{t}-1": 1.0} for t in TOPICS[:7]}
    doc = api.evaluate(run=mapping, qrels_id=qrels_id, measures=["map"], prefer_async=True,
                       progress=unsharded.append)
    assert doc["provenance"].get("shards") is None and doc["aggregate"]["map"] == 1.0
    assert unsharded[-1]["progress"] == {"stage": "done", "topics_done": 7,
                                         "topics_total": 7}
    first = {"run": files["good"].read_text(), "name": "good"}
    second = {"run": files["bad"].read_text(), "name": "bad"}
    compared = []
    comparison = api.compare(runs=[first, second], qrels_id=qrels_id, measures=["map"],
                             baseline="good", prefer_async=True, progress=compared.append,
                             permutations=1000, bootstrap_samples=1000)
    assert comparison["summary"]
    assert compared[-1]["progress"] == {"stage": "done", "topics_done": 0,
                                        "topics_total": None, "runs_done": 2, "runs_total": 2}
    with pytest.raises(ApiError) as info:
        api.evaluate(run=files["good"], qrels_id="no-such-qrels", measures=["map"])
    assert info.value.status == 422 and info.value.kind == "unknown-qrels"
    with pytest.raises(ApiError) as info:
        api.baseline("no-such-system")
    assert info.value.status == 404 and info.value.problem["status"] == 404
