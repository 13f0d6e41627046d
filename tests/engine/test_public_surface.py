"""The engine's public surface, and its independence from the service stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cranfield

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def test_public_names_are_pinned():
    assert set(cranfield.__all__) >= {
        "evaluate", "read_run", "read_qrels", "parse_measure", "REGISTRY", "Evaluation",
        "InputError", "MeasureError", "EvaluationError", "CranfieldError",
    }
    ev = cranfield.evaluate(str(DATA / "qrels.test"), str(DATA / "results.trunc"),
                            ["map", "P.5"], complete_topics=True)
    assert isinstance(ev, cranfield.Evaluation)
    assert set(ev.per_topic) == {"301", "303"}
    assert set(ev.per_topic["301"]) == {"map", "P_5"}
    assert set(ev.aggregate) == {"map", "P_5"}
    assert ev.topics.evaluated == ["301", "303"]
    assert ev.topics.qrels_only == ["302"] and ev.topics.run_only == []
    assert ev.measures["P_5"]["canonical"] == "P(k=5,rel=1,profile=trec_eval-9.0.8)"


def test_engine_imports_no_service_stack():
    """`import cranfield` and an evaluation load neither Flask, Redis, RQ, marshmallow nor
    (until a TREC file is read) pyarrow."""
    code = (
        "import sys, json, cranfield\n"
        "cranfield.evaluate({'q': {'a': 1}}, {'q': {'a': 1.0}}, ['map'])\n"
        "print(json.dumps(sorted(m for m in ('flask', 'redis', 'rq', 'marshmallow', "
        "'pyarrow', 'werkzeug') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == []


def test_engine_works_without_pyarrow_and_gives_identical_numbers():
    """Block pyarrow: the line-by-line reader and the mapping join must give the same bytes."""
    code = (
        "import sys\n"
        "sys.modules['pyarrow'] = None\n"
        "from cranfield.cli import main\n"
        f"sys.exit(main(['eval', '-q', '-c', '-m', 'all_trec', {str(DATA / 'qrels.test')!r}, "
        f"{str(DATA / 'results.trunc')!r}]))\n"
    )
    without = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert without.returncode == 0, without.stderr
    assert without.stdout == (DATA / "v9.0.8" / "out.test.aqc").read_text()


@pytest.mark.parametrize("name", sorted(cranfield.REGISTRY))
def test_every_measure_documents_formula_zero_rule_and_reference(name):
    m = cranfield.REGISTRY[name]
    assert m.summary, name
    assert m.section("Formula"), f"{name}: docstring lacks 'Formula:'"
    assert m.section("Reference"), f"{name}: docstring lacks 'Reference:'"
    assert m.family in {"set", "rank", "graded", "count", "info", "diversity"}


def test_mapping_and_file_inputs_agree():
    run = cranfield.read_run(DATA / "results.test")
    qrels = cranfield.read_qrels(DATA / "qrels.rel_level")
    from_files = cranfield.evaluate(qrels, run, ["all_trec"], relevance_level=2)
    from_maps = cranfield.evaluate(qrels.to_dict(), run.to_dict(), ["all_trec"],
                                   relevance_level=2)
    assert from_files.per_topic == from_maps.per_topic
    assert from_files.aggregate.keys() == from_maps.aggregate.keys()
    for key, value in from_files.aggregate.items():
        if key != "runid":
            assert value == from_maps.aggregate[key], key


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
@pytest.mark.parametrize("complete", [False, True])
@pytest.mark.parametrize("parts", [2, 3])
def test_shards_of_a_run_combine_to_the_unsharded_evaluation(profile, complete, parts):
    """Split a run at topic boundaries, evaluate each piece against its topics' qrels, add the
    missing topics (complete_topics) and combine: identical to one evaluation."""
    from cranfield.inputs.trec_source import split_trec_text
    from cranfield.shards import combine, evaluate_missing_topics

    text = b"".join(line + b"\n" for line in (DATA / "results.test").read_bytes().splitlines()
                    if line.split()[0] in (b"301", b"303"))  # 302 missing from the run
    qrels = cranfield.read_qrels(DATA / "qrels.test")
    opts = {"profile": profile, "complete_topics": complete}
    whole_run = cranfield.read_run(text)
    pieces = split_trec_text(text, parts)
    assert len(pieces) >= 2
    runs = [cranfield.read_run(p) for p in pieces]
    evs = [cranfield.evaluate(qrels.subset(r.topics), r, ["all_trec"], **opts) for r in runs]
    covered = {t for r in runs for t in r.topics}
    missing = [t for t in qrels.topics if t not in covered]
    if complete and missing:
        evs.append(evaluate_missing_topics(qrels, missing, ["all_trec"], **opts))
    combined = combine(evs, qrels, sorted(covered), runs[-1].runid)
    whole = cranfield.evaluate(qrels, whole_run, ["all_trec"], **opts)
    assert combined.per_topic == whole.per_topic
    assert combined.aggregate == whole.aggregate
    assert combined.topics == whole.topics


def test_evaluations_pickle_with_every_kind_of_measure():
    """Sharded jobs return evaluations through RQ (pickle): measures travel by registry name,
    whatever their functions are (lambdas included)."""
    import pickle

    run = {"q1": {"d1": 2.0, "d2": 1.0}}
    ev = cranfield.evaluate({"q1": {"d1": 1, "d2": 2}}, run,
                            ["all_trec", "nDCG(gain=exp)@10", "F(beta=2)", "GAP", "FDR"],
                            aggregation="micro")
    back = pickle.loads(pickle.dumps(ev))
    assert back.per_topic == ev.per_topic and back.aggregate == ev.aggregate
    assert back.instances[0].measure is cranfield.REGISTRY[ev.instances[0].measure.name]
    div = cranfield.evaluate("q1 1 d1 1\nq1 2 d2 1\n", run, ["alpha_nDCG@10", "NRBP"])
    assert pickle.loads(pickle.dumps(div)).per_topic == div.per_topic
