"""backend/contract.py: a job spec is built and read in one place; on the queue it is a plain
dict with its kind and version, and a spec this code cannot read is refused (SpecError),
never misread."""

from __future__ import annotations

import pytest

from backend.contract import (
    KIND_OF_FUNCTION,
    SPEC_VERSION,
    CombineJob,
    ComparisonJob,
    EvaluationJob,
    Job,
    QrelsInput,
    ShardJob,
    SpecError,
)

EVALUATION = EvaluationJob(measures=["map"], options={"profile": "trec_eval-10"},
                           qrels=QrelsInput(ref="q@abc"), run_key="run-1", run_format="trec",
                           tenant="t1", request_id="r1", latency_ms={"q1": 3.0})


@pytest.mark.parametrize("spec", [
    EVALUATION,
    ShardJob(measures=["P.5"], options={}, qrels=QrelsInput(key="k", sha256="s"), shard=3),
    CombineJob(measures=["map"], options={}, shard_ids=["a", "b"], shard_keys=["x", "y"],
               run_sha256="d"),
    ComparisonJob(measures=None, options={}, runs=[{"name": "a", "evaluation_id": "e"}],
                  tests=["t", "wilcoxon"], gate=[{"measure": "map", "max_drop": 0.01}]),
])
def test_a_spec_survives_the_queue(spec):
    wire = spec.to_wire()
    assert wire["kind"] == spec.kind and wire["version"] == SPEC_VERSION
    assert type(spec).from_wire(wire) == spec
    assert Job.from_wire(wire) == spec  # the base class reads any kind


def test_the_wire_form_is_plain_data():
    import json

    wire = EVALUATION.to_wire()
    assert json.loads(json.dumps(wire)) == wire
    assert wire["qrels"] == {"ref": "q@abc", "key": None, "format": "trec", "sha256": None}


@pytest.mark.parametrize("change, message", [
    ({"version": 1}, "job spec version 1: this worker reads version"),
    ({"version": None}, "job spec version None"),
    ({"kind": "nonsense"}, "unknown job kind 'nonsense'"),
    ({"kind": "shard"}, "unknown job kind 'shard'"),  # an evaluation's entry point
    ({"surprise": 1}, "unknown fields ['surprise']"),
])
def test_a_spec_this_code_cannot_read_is_refused(change, message):
    wire = dict(EVALUATION.to_wire(), **change)
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        EvaluationJob.from_wire(wire)


def test_a_missing_required_field_is_refused():
    wire = EVALUATION.to_wire()
    del wire["measures"]
    with pytest.raises(SpecError, match="job spec of kind 'evaluation'"):
        EvaluationJob.from_wire(wire)
    with pytest.raises(SpecError, match="a mapping"):
        EvaluationJob.from_wire(["not", "a", "dict"])


def test_comparison_settings_are_the_compare_keywords():
    spec = ComparisonJob(measures=["map"], options={}, baseline="b", n_permutations=7)
    settings = spec.compare_settings()
    assert settings["baseline"] == "b" and settings["n_permutations"] == 7
    assert set(settings) == set(ComparisonJob.COMPARE_SETTINGS)
    assert EVALUATION.document_settings() == {"per_topic": True, "latency_ms": {"q1": 3.0},
                                              "curves": False}


def test_every_entry_point_has_a_kind():
    assert sorted(KIND_OF_FUNCTION.values()) == ["batch", "combine", "comparison", "evaluation",
                                                 "pool", "shard"]
    assert all(path.startswith("worker.jobs.") for path in KIND_OF_FUNCTION)


def test_the_queue_stamps_the_apps_table_bounds():
    """A submitted job carries the app's bounds of an Arrow or Parquet input, which the job's
    reader checks (whatever path stored the input)."""
    from backend.contract import table_bounds
    from backend.queue import MemoryBackend

    config = {"MAX_TOPICS": 3, "MAX_DOCS_PER_TOPIC": 5, "MAX_CONTENT_LENGTH": 1000,
              "RESULT_TTL": 60}
    assert table_bounds(config) == {"max_rows": 15, "max_bytes": 1000, "max_memory": None}
    backend = MemoryBackend(config)
    seen = []
    backend._run = lambda job_id, spec: seen.append(spec)
    spec = ComparisonJob(measures=["map"], options={}, runs=[])
    backend.submit(spec)
    backend._pool.shutdown(wait=True)
    assert seen[0].table_bounds == {"max_rows": 15, "max_bytes": 1000, "max_memory": None}
    assert spec.table_bounds is None  # the caller's spec is left as it was


def test_a_queued_arrow_run_over_the_bounds_is_refused_before_it_is_read():
    """A comparison's inline Arrow run is read by the job within the spec's bounds (too many
    rows: refused from the metadata, naming the run), and its blob is dropped all the same."""
    import pyarrow as pa  # a dependency of the engine
    from pyarrow import ipc

    from backend.store import MemoryStore, NotFound
    from backend.tasks import run_comparison

    table = pa.table({"topic": ["q1"] * 20, "docid": [f"d{i}" for i in range(20)],
                      "score": [float(-i) for i in range(20)]})
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    store = MemoryStore()
    store.put_blob("run-a", sink.getvalue().to_pybytes(), 60)
    store.put_blob("run-b", b"q1 Q0 d1 1 1.0 b\n", 60)
    job = ComparisonJob(measures=["map"], options={"profile": "trec_eval-10"},
                        runs=[{"name": "a", "run_key": "run-a", "run_format": "arrow"},
                              {"name": "b", "run_key": "run-b", "run_format": "trec"}],
                        table_bounds={"max_rows": 10, "max_bytes": 10_000})
    outcome = run_comparison(store, job, lambda job_id: None)
    problem = outcome["problem"]
    assert "runs[0]" in problem["detail"] and "exceed the limit of 10" in problem["detail"]
    for key in ("run-a", "run-b"):
        with pytest.raises(NotFound):  # dropped
            store.get_blob(key)


@pytest.mark.parametrize("timeout,result_ttl,queued_ttl,shard_ttl", [
    (600, 86400, 3600, 86400),   # the defaults' kind: RESULT_TTL outlives the wait already
    (600, 60, 300, 300 + 3 * 600),  # a short RESULT_TTL: the shard's result outlives the wait
    (30, 0, 10, 10 + 3 * 30),
])
def test_job_options_keep_a_shards_result_past_its_siblings_attempts(timeout, result_ttl,
                                                                    queued_ttl, shard_ttl):
    """One definition of every queued job's RQ options (an evaluation's, a shard's, a
    re-score's): a shard's result is kept until the combine step that reads it can no
    longer be waiting — its siblings' wait in the queue and their three attempts."""
    from backend.contract import JOB_ATTEMPTS, job_options

    common, shard = job_options(timeout, result_ttl, queued_ttl)
    assert JOB_ATTEMPTS == 3 and common["retry"].max == JOB_ATTEMPTS - 1 == shard["retry"].max
    assert (common["timeout"], common["result_ttl"], common["failure_ttl"], common["ttl"]) == \
        (timeout, result_ttl, result_ttl, queued_ttl)
    assert shard["result_ttl"] == shard_ttl
    assert {k: v for k, v in shard.items() if k not in ("result_ttl", "retry")} == \
        {k: v for k, v in common.items() if k not in ("result_ttl", "retry")}
