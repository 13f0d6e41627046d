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
    assert sorted(KIND_OF_FUNCTION.values()) == ["combine", "comparison", "evaluation",
                                                 "shard"]
    assert all(path.startswith("worker.jobs.") for path in KIND_OF_FUNCTION)
