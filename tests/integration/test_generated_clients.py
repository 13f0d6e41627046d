"""Clients generated from openapi.yaml, as another team would make them, work against a live
service (issue #26): a Python client from openapi-python-client (the test extra pins it) and
TypeScript types from openapi-typescript used through openapi-fetch (tests/package.json pins
them; ``npm ci --prefix tests``), both with their default settings. Each client stores qrels,
evaluates JSON mappings and TREC text (JSON and multipart), records two results, pins the
first as its system's baseline, gates the second against it, reads the trend and evaluates
both runs in one batch (``POST /v1/evaluations/batch``, issue #30); the values must be those
the library computes here. The clients are generated into a temporary folder at test time,
never committed.

Without the tools the tests skip, saying which is missing; under CI=true they fail."""

from __future__ import annotations

import importlib
import json
import math
import os
import pkgutil
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from servers import (
    ROOT,
    RedisServer,
    require_redis_server,
    running_gunicorn,
    running_worker,
    wait_job,
)

import cranfield

SPEC = ROOT / "openapi.yaml"
TS_SOURCE = Path(__file__).resolve().parent / "generated" / "client.ts"
NODE_BIN = ROOT / "tests" / "node_modules" / ".bin"
MEASURES = ["map", "P.5", "ndcg_cut.10"]
PACKAGE = "cranfield_api"

# What openapi-python-client 0.29 cannot express, and says so while generating: a text/plain
# request body (PUT /v1/qrels/{id} takes the same qrels as JSON or multipart, PUT
# /v1/topic-metadata/{id} the same metadata as JSON) and the application/yaml answer of GET
# /openapi.yaml. Any other warning (a schema dropped, an operation without its body) is a
# contract generators cannot read.
KNOWN_WARNINGS = {"WARNING parsing PUT /v1/qrels/{qrels_id} within qrels.",
                  "WARNING parsing PUT /v1/topic-metadata/{metadata_id} within topic_metadata.",
                  "WARNING parsing GET /openapi.yaml within operations."}


def trec_mapping(text: str) -> dict:
    """{topic: {docid: number}} from TREC run (6 columns: score) or qrels (4: grade) text."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 6:
            out.setdefault(fields[0], {})[fields[2]] = float(fields[4])
        elif len(fields) == 4:
            out.setdefault(fields[0], {})[fields[2]] = int(fields[3])
    return out


def collection(topics: int = 30, docs: int = 40, seed: int = 26) -> tuple[str, str, str]:
    """(qrels, run, worse run) as TREC text: ``topics`` topics of ``docs`` judged documents
    (graded 0-2), a run that ranks most relevant documents high, and the same run with every
    topic's ranking reversed (its MAP far lower on every topic: a drop a gate must fail)."""
    rng = random.Random(seed)
    qrels, run, worse = [], [], []
    for t in range(1, topics + 1):
        grades = [rng.choice((0, 0, 0, 1, 2)) for _ in range(docs)]
        scores = [g + rng.random() * 1.5 for g in grades]
        order = sorted(range(docs), key=lambda d: -scores[d])
        for d, grade in enumerate(grades):
            qrels.append(f"t{t} 0 doc{t}-{d} {grade}")
        for rank, d in enumerate(order, 1):
            run.append(f"t{t} Q0 doc{t}-{d} {rank} {scores[d]:.6f} good")
            worse.append(f"t{t} Q0 doc{t}-{d} {rank} {-scores[d]:.6f} worse")
    return ("\n".join(qrels) + "\n", "\n".join(run) + "\n", "\n".join(worse) + "\n")


QRELS_TEXT, RUN_TEXT, WORSE_TEXT = collection()


def local(run_text: str) -> dict:
    """What the library says, here, with no service: the expected aggregates."""
    return cranfield.evaluate(qrels=QRELS_TEXT, run=run_text, measures=MEASURES).aggregate


def tool(path: Path | None, what: str, require) -> str:
    require(path is not None and Path(path).exists(),
            f"{what} (pip install -e '.[test]'; npm ci --prefix tests: make test does both)")
    return str(path)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """gunicorn queueing on a private redis-server, with a worker, both recording in one
    SQLite file of this module's: the base URL."""
    require_redis_server()
    redis = RedisServer()
    redis.start()
    database = f"sqlite:///{tmp_path_factory.mktemp('generated-clients')}/results.db"
    try:
        with running_gunicorn({"REDIS_URL": redis.url, "CRANFIELD_DATABASE_URL": database}) \
                as url, running_worker(redis.url, database):
            yield url
    finally:
        redis.stop()


def test_python_client_from_openapi_python_client(service, tmp_path, require):
    generator = tool(shutil.which("openapi-python-client", path=str(Path(sys.executable).parent)),
                     "openapi-python-client", require)
    done = subprocess.run(
        [generator, "generate", "--path", str(SPEC), "--output-path", str(tmp_path / PACKAGE),
         "--meta", "none"], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}"))
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert {line for line in said.splitlines() if line.startswith("WARNING")} == \
        KNOWN_WARNINGS, said
    assert "Unable to process schema" not in said, said
    sys.path.insert(0, str(tmp_path))
    try:
        values = _python_client_story(service)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
            del sys.modules[name]
    _check(values, "py")


def _python_client_story(base: str) -> dict:
    """The story told with the generated Python client: what it answered."""
    api = importlib.import_module(PACKAGE)
    m = importlib.import_module(PACKAGE + ".models")
    # every operation's module imports (0.29 wrote modules that raised NameError: Unset)
    operations = importlib.import_module(PACKAGE + ".api")
    modules = [info.name for info in pkgutil.walk_packages(operations.__path__,
                                                          operations.__name__ + ".")]
    for name in modules:
        importlib.import_module(name)
    contract = yaml.safe_load(SPEC.read_text())
    operation_ids = [op["operationId"] for path in contract["paths"].values()
                     for op in path.values() if isinstance(op, dict) and "operationId" in op]
    assert len([n for n in modules if n.count(".") == 3]) == len(operation_ids), modules
    ops = {name: importlib.import_module(f"{PACKAGE}.api.{group}.{name}") for group, name in (
        ("qrels", "put_qrels"), ("evaluations", "create_evaluation"),
        ("evaluations", "get_job"), ("results", "pin_baseline"),
        ("comparisons", "create_comparison"), ("results", "get_trend"),
        ("topic_metadata", "put_topic_metadata"),
        ("evaluations", "create_evaluation_batch"))}
    with api.Client(base_url=base, raise_on_unexpected_status=True, timeout=120) as client:
        return _python_story(client, m, ops, base)


def _python_story(client, m, ops: dict, base: str) -> dict:
    system, qrels_id = "py-sys", "py-sys-qrels"

    def sync(op: str, **kwargs):
        answer = ops[op].sync_detailed(client=client, **kwargs)
        assert 200 <= answer.status_code < 300, (op, answer.status_code, answer.content)
        return answer.parsed

    stored_json = sync("put_qrels", qrels_id=qrels_id, body=m.QrelsPutBody(
        qrels=m.QrelsMapping.from_dict(trec_mapping(QRELS_TEXT))))
    stored_text = sync("put_qrels", qrels_id=qrels_id + "-text",
                       body=m.QrelsForm(qrels=QRELS_TEXT))
    by_mapping = sync("create_evaluation", body=m.EvaluationRequest(
        run=m.RunMapping.from_dict(trec_mapping(RUN_TEXT)),
        qrels=m.QrelsMapping.from_dict(trec_mapping(QRELS_TEXT))))
    one = sync("create_evaluation", body=m.EvaluationRequest(
        run=RUN_TEXT, qrels_id=qrels_id, measures=MEASURES,
        record=m.Record(system=system, label="one")))
    two = sync("create_evaluation", body=m.EvaluationForm(
        run=WORSE_TEXT, qrels_id=qrels_id + "-text", measures=",".join(MEASURES),
        record=m.Record(system=system, label="two")))
    pinned = sync("pin_baseline", name=system,
                  body=m.PinBaselineRequest(result_id=one.recorded.id))
    comparison = sync("create_comparison", body=m.ComparisonRequest(
        runs=[m.ComparisonRunInput(result_id=two.recorded.id)], qrels_id=qrels_id,
        measures=["map"], baseline=m.SystemRef(system=system),
        gate=m.GateSpec(measure="map", max_drop=0.01, test=m.TestName.T)))
    trend = sync("get_trend", name=system, measure="map")
    # segments (issue #28): metadata stored through the client, an evaluation naming it
    topics = sorted(trec_mapping(QRELS_TEXT))
    metadata = {t: {"segments": ["head" if i % 2 else "tail"], "weight": i + 1}
                for i, t in enumerate(topics)}
    stored_metadata = sync("put_topic_metadata", metadata_id="py-segments",
                           body=m.TopicMetadataPutBody(
                               topic_metadata=m.TopicMetadataMapping.from_dict(metadata)))
    segmented = sync("create_evaluation", body=m.EvaluationRequest(
        run=RUN_TEXT, qrels_id=qrels_id, measures=MEASURES, topic_metadata_id="py-segments"))
    expected = cranfield.evaluate(QRELS_TEXT, RUN_TEXT, MEASURES, topic_metadata=metadata)
    assert stored_metadata.topics == len(topics)
    got = segmented.segments.to_dict()
    assert sorted(got) == sorted(expected.segments) == ["head", "tail"]
    for label, seg in expected.segments.items():
        assert got[label]["topics"] == seg["topics"]
        for key in ("map", "P_5", "ndcg_cut_10"):
            assert math.isclose(got[label]["aggregate"][key], seg["aggregate"][key],
                                rel_tol=1e-12), (label, key)
    for key in ("map", "P_5", "ndcg_cut_10"):
        assert math.isclose(segmented.weighted.to_dict()[key], expected.weighted[key],
                            rel_tol=1e-12), key
    queued = sync("create_evaluation", prefer="respond-async",
                  body=m.EvaluationRequest(run=RUN_TEXT, qrels_id=qrels_id,
                                           measures=MEASURES))
    assert isinstance(queued, m.Job), queued
    wait_job(base, f"/v1/jobs/{queued.id}")  # the suite's one wait for a job's end
    job = sync("get_job", job_id=queued.id)  # then read through the generated client
    assert isinstance(job.result, m.Evaluation), job
    batch = sync("create_evaluation_batch", body=m.BatchEvaluationRequest(
        runs=[m.BatchRunInput(name="good", run=RUN_TEXT),
              m.BatchRunInput(name="worse", run=WORSE_TEXT)],
        qrels_id=qrels_id, measures=MEASURES))
    return {
        "stored_json": {"judgments": stored_json.judgments, "topics": stored_json.topics},
        "stored_text": {"judgments": stored_text.judgments, "topics": stored_text.topics},
        "mapping_aggregate": by_mapping.aggregate.to_dict(),
        "one": {"id": one.recorded.id, "aggregate": one.aggregate.to_dict()},
        "two": {"id": two.recorded.id, "aggregate": two.aggregate.to_dict()},
        "pinned": pinned.id,
        "gate": {"verdict": comparison.gate.verdict.value, "baseline": comparison.baseline,
                 "drop": comparison.gate.checks[0].drop},
        "trend": [{"id": p.id, "mean": p.mean,
                   "verdict": p.gate.verdict.value if isinstance(p.gate, m.TrendGate) else None}
                  for p in trend.points],
        "trend_baseline": trend.baseline,
        "queued": {"status": job.status.value, "aggregate": job.result.aggregate.to_dict()},
        "batch": [{"name": e.name, "aggregate": e.aggregate.to_dict()}
                  for e in batch.evaluations],
    }


def test_typescript_client_from_openapi_typescript_and_openapi_fetch(service, tmp_path,
                                                                     require):
    node = tool(shutil.which("node"), "node (v20 or later)", require)
    generator = tool(NODE_BIN / "openapi-typescript", "openapi-typescript", require)
    tsc = tool(NODE_BIN / "tsc", "typescript", require)
    tool(ROOT / "tests" / "node_modules" / "openapi-fetch" / "package.json", "openapi-fetch",
         require)
    (tmp_path / "node_modules").symlink_to(ROOT / "tests" / "node_modules")
    (tmp_path / "package.json").write_text('{"type": "module"}\n')
    shutil.copy(TS_SOURCE, tmp_path / "client.ts")
    (tmp_path / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"target": "ES2022", "module": "NodeNext",
                            "moduleResolution": "NodeNext", "strict": True,
                            "noEmitOnError": True, "skipLibCheck": True, "types": ["node"],
                            "lib": ["ES2022", "DOM"], "outDir": "out"},
        "files": ["client.ts"]}))
    made = subprocess.run([generator, str(SPEC), "-o", str(tmp_path / "api.d.ts")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert made.returncode == 0 and "warn" not in (made.stdout + made.stderr).lower(), \
        made.stdout + made.stderr
    # a type error (a member the contract makes required, a body it does not accept) fails
    checked = subprocess.run([tsc, "-p", str(tmp_path / "tsconfig.json")],
                             capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    inputs = tmp_path / "input.json"
    inputs.write_text(json.dumps({
        "qrels_text": QRELS_TEXT, "run_text": RUN_TEXT, "worse_text": WORSE_TEXT,
        "qrels_map": trec_mapping(QRELS_TEXT), "run_map": trec_mapping(RUN_TEXT),
        "measures": MEASURES}))
    ran = subprocess.run([node, str(tmp_path / "out" / "client.js"), service, str(inputs),
                          "ts-sys"], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    _check(json.loads(ran.stdout), "ts")


def _check(values: dict, who: str) -> None:
    """The story's answers, value for value, against the library run here."""
    judged = cranfield.read_qrels(QRELS_TEXT)
    assert values["stored_json"] == values["stored_text"] == {
        "judgments": len(judged), "topics": len(judged.topics)}
    good, bad = local(RUN_TEXT), local(WORSE_TEXT)
    official = cranfield.evaluate(qrels=QRELS_TEXT, run=RUN_TEXT).aggregate
    assert values["mapping_aggregate"]["map"] == official["map"]
    assert values["mapping_aggregate"]["P_5"] == official["P_5"]
    for key in ("map", "P_5", "ndcg_cut_10"):
        assert values["one"]["aggregate"][key] == good[key], (who, key)
        assert values["two"]["aggregate"][key] == bad[key], (who, key)
        assert values["queued"]["aggregate"][key] == good[key], (who, key)
    assert values["queued"]["status"] == "finished"
    # the batch: one evaluation per run, in the request's order, each the run's own numbers
    assert [e["name"] for e in values["batch"]] == ["good", "worse"]
    for key in ("map", "P_5", "ndcg_cut_10"):
        assert values["batch"][0]["aggregate"][key] == good[key], (who, "batch", key)
        assert values["batch"][1]["aggregate"][key] == bad[key], (who, "batch", key)
    assert good["map"] - bad["map"] > 0.1  # so the gate has a drop to find
    assert values["pinned"] == values["one"]["id"] == values["trend_baseline"]
    assert values["gate"]["verdict"] == "fail"
    assert values["gate"]["baseline"] == f"{who}-sys@one"
    assert math.isclose(values["gate"]["drop"], good["map"] - bad["map"], abs_tol=1e-12)
    # the trend: one point per recorded result, oldest first, each the mean of its per-topic
    # values (every topic's map is finite here: the aggregate), the gated one marked
    assert [p["id"] for p in values["trend"]] == [values["one"]["id"], values["two"]["id"]]
    assert [p["verdict"] for p in values["trend"]] == [None, "fail"]
    for point, expected in zip(values["trend"], (good["map"], bad["map"]), strict=True):
        assert math.isclose(point["mean"], expected, rel_tol=1e-12), (who, point)
