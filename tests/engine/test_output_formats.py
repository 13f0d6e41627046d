"""Issue #26's outputs for the field's tools: ``cranfield eval --format jsonl`` line for line
as ir_measures' own ``--output_format jsonl`` (ir_measures 0.4.3 run as a test-time oracle on
tests/data/trec_eval), and ``Evaluation.to_arrow()`` / ``to_pandas()`` holding exactly
``ev.per_topic`` and ``ev.aggregate`` (pandas optional: never imported by the engine)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import cranfield
from cranfield.cli import main
from cranfield.reports.jsonl import format_jsonl

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
PAIRS = [("qrels.test", "results.test"), ("qrels-302.test", "results-302.test")]
# ir_measures' names (pytrec_eval computes them: the same doubles as Cranfield's); NumQ has
# no per-topic value in trec_eval (num_q), so it is compared as an aggregate only
IR_MEASURES = ["nDCG@10", "P@5", "AP", "R@100", "RR", "nDCG", "Rprec", "Bpref", "NumRet",
               "Success@10", "SetP", "IPrec@0.5", "NumRel", "nDCG@20", "AP@100", "P@10"]


def ir_measures_lines(qrels: Path, run: Path, measures: list[str], *flags: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "ir_measures", str(qrels), str(run),
                           " ".join(measures), "--output_format", "jsonl", *flags],
                          capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def cranfield_lines(capsys, qrels: Path, run: Path, measures: list[str], *flags: str):
    code = main(["eval", "--format", "jsonl", *flags, *[a for m in measures for a in ("-m", m)],
                 str(qrels), str(run)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out.splitlines()


@pytest.mark.parametrize("qrels, run", PAIRS)
def test_jsonl_summary_is_ir_measures_lines(capsys, qrels, run):
    measures = IR_MEASURES + ["NumQ"]
    theirs = ir_measures_lines(DATA / qrels, DATA / run, measures)
    ours = cranfield_lines(capsys, DATA / qrels, DATA / run, measures)
    assert len(ours) == len(measures)
    assert sorted(ours) == sorted(theirs)
    assert all(list(json.loads(line)) == ["measure", "value"] for line in ours)


@pytest.mark.parametrize("qrels, run", PAIRS)
@pytest.mark.parametrize("flags", [("-q",), ("-q", "-n")], ids=["q", "qn"])
def test_jsonl_per_topic_is_ir_measures_lines(capsys, qrels, run, flags):
    theirs = ir_measures_lines(DATA / qrels, DATA / run, IR_MEASURES, *flags)
    ours = cranfield_lines(capsys, DATA / qrels, DATA / run, IR_MEASURES, *flags)
    assert sorted(ours) == sorted(theirs)
    # the blocks as ir_measures has them: each topic's lines, topics in order, then 'all'
    topics = [json.loads(line)["query_id"] for line in ours]
    blocks = [t for i, t in enumerate(topics) if i == 0 or topics[i - 1] != t]
    expected = sorted(set(topics) - {"all"}) + (["all"] if "-n" not in flags else [])
    assert blocks == expected
    assert all(list(json.loads(line)) == ["query_id", "measure", "value"] for line in ours)


def test_jsonl_carries_the_trec_formats_numbers(capsys):
    """Every measure of trec_eval's default set, text ones included: the values the trec text
    prints (to its 4 places), counts as floats, runid and relstring as strings."""
    qrels, run = DATA / "qrels.test", DATA / "results.test"
    assert main(["eval", "-q", "-m", "all_trec", str(qrels), str(run)]) == 0
    text = capsys.readouterr().out.splitlines()
    lines = cranfield_lines(capsys, qrels, run, ["all_trec"], "-q")
    ev = cranfield.evaluate(qrels=str(qrels), run=str(run), measures=["all_trec"])
    assert len(lines) == len(text)
    for line in map(json.loads, lines):
        topic, key, value = line["query_id"], line["measure"], line["value"]
        want = ev.aggregate[key] if topic == "all" else ev.per_topic[topic][key]
        if isinstance(want, str):
            assert value == want
        else:
            assert isinstance(value, float) and value == float(want)


def test_jsonl_without_q_and_with_n_is_empty_as_trec_eval(capsys):
    assert cranfield_lines(capsys, DATA / "qrels.test", DATA / "results.test", ["map"],
                           "-n") == []


def test_jsonl_nan_is_null():
    ev = cranfield.evaluate(qrels=str(DATA / "qrels.test"), run=str(DATA / "results.test"),
                            measures=["map"])
    ev.aggregate["map"] = math.nan
    assert format_jsonl(ev) == '{"measure": "map", "value": null}\n'


def test_jsonl_from_a_service_document_prints_alike():
    """``eval --server --format jsonl`` prints the service's JSON document through
    document_evaluation: the same lines as the local evaluation."""
    from cranfield.reports.trec_format import document_evaluation, format_json

    ev = cranfield.evaluate(qrels=str(DATA / "qrels.test"), run=str(DATA / "results.test"),
                            measures=["all_trec"])
    doc = json.loads(format_json(ev, "0" * 64, "0" * 64, per_topic=True))
    for per_topic in (False, True):
        assert format_jsonl(document_evaluation(doc), per_topic=per_topic) == \
            format_jsonl(ev, per_topic=per_topic)


# ---- Evaluation.to_arrow / to_pandas ------------------------------------------------------------

@pytest.fixture(scope="module")
def ev():
    return cranfield.evaluate(qrels=str(DATA / "qrels.test"), run=str(DATA / "results.test"),
                              measures=["all_trec", "nDCG@10"])


def test_to_arrow_is_per_topic_then_aggregate(ev):
    table = ev.to_arrow()
    assert table.schema == pa.schema([("query_id", pa.string()), ("measure", pa.string()),
                                      ("value", pa.float64())])
    rows = table.to_pylist()
    per_topic = [r for r in rows if r["query_id"] != "all"]
    summary = [r for r in rows if r["query_id"] == "all"]
    assert rows == per_topic + summary
    text = {"runid", "relstring"}
    want = [(t, k, float(v)) for t, row in ev.per_topic.items() for k, v in row.items()
            if k not in text]
    assert [(r["query_id"], r["measure"], r["value"]) for r in per_topic] == want
    assert [(r["measure"], r["value"]) for r in summary] == [
        (k, float(v)) for k, v in ev.aggregate.items() if k not in text]
    assert "num_q" in {r["measure"] for r in summary}  # summary-only measures: there only
    assert "num_q" not in {r["measure"] for r in per_topic}
    assert ev.to_arrow(summary=False).to_pylist() == per_topic
    assert ev.to_arrow(per_topic=False).to_pylist() == summary


def test_to_pandas_pivots_to_the_per_topic_table(ev):
    pd = pytest.importorskip("pandas")  # the test extra installs it: present in CI
    frame = ev.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == ["query_id", "measure", "value"]
    wide = frame.pivot(index="query_id", columns="measure", values="value")
    for topic, row in ev.per_topic.items():
        for key, value in row.items():
            if not isinstance(value, str):
                assert wide.loc[topic, key] == float(value)
    assert wide.loc["all", "map"] == ev.aggregate["map"]
    assert wide.loc["all", "nDCG@10"] == ev.aggregate["nDCG@10"]


def test_to_arrow_keeps_nan():
    ev = cranfield.evaluate(qrels=str(DATA / "qrels.test"), run=str(DATA / "results.test"),
                            measures=["map"])
    ev.aggregate["map"] = math.nan
    assert np.isnan(ev.to_arrow(per_topic=False).column("value").to_numpy()).all()


def test_to_pandas_without_pandas_says_how(ev, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match=r"needs pandas.*pip install pandas.*to_arrow"):
        ev.to_pandas()


def test_the_engine_does_not_import_pandas(tmp_path):
    """Reading a Parquet file, evaluating, to_arrow and the JSON Lines never import pandas
    (pyarrow's Parquet writer does: the file is written here, not there)."""
    import pyarrow.parquet as pq

    path = tmp_path / "run"
    pq.write_table(pa.table({"topic": ["301"], "docid": ["d"], "score": [1.0]}), path)
    code = (
        "import sys, cranfield, cranfield.reports.jsonl\n"
        f"ev = cranfield.evaluate(qrels={str(DATA / 'qrels.test')!r}, run={str(path)!r}, "
        "measures=['map'])\n"
        "ev.to_arrow(); cranfield.reports.jsonl.format_jsonl(ev, per_topic=True)\n"
        "print('pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False\n"


# each alone: ir_measures evaluating Accuracy beside another measure fills in a default for
# the topic (its Accuracy evaluated alone leaves it out, the meaning Cranfield takes)
@pytest.mark.parametrize("measures", [["Accuracy@2"], ["Accuracy"]])
def test_jsonl_has_no_line_for_a_topic_without_an_accuracy_value(capsys, tmp_path, measures):
    """Topic 2 has no relevant document in the top 2: ir_measures prints no Accuracy@2 line
    for it (review R3 F8), and neither does Cranfield (not a ``"value": null`` line)."""
    qrels = tmp_path / "qrels.txt"
    run = tmp_path / "run.txt"
    qrels.write_text("1 0 d1 1\n1 0 d2 0\n1 0 d3 1\n2 0 d1 1\n2 0 d9 1\n3 0 d1 1\n3 0 d2 0\n")
    run.write_text("1 Q0 d2 1 3.0 A\n1 Q0 d1 2 2.0 A\n2 Q0 d2 1 3.0 A\n2 Q0 d3 2 2.0 A\n"
                   "3 Q0 d2 1 3.0 A\n3 Q0 d1 2 2.0 A\n")
    theirs = ir_measures_lines(qrels, run, measures, "-q")
    ours = cranfield_lines(capsys, qrels, run, measures, "-q")
    assert sorted(ours) == sorted(theirs)
    assert not any(json.loads(line)["value"] is None for line in ours)
    assert {json.loads(line)["query_id"] for line in ours
            if json.loads(line)["measure"].startswith("Accuracy")} == {"1", "3", "all"}
