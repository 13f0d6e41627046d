"""Issue #15, "The CLI and the API say the same things", in the engine and the CLI: one
evaluation document (``measures`` a list, as the API's), warnings that name the option the
way the interface showing them spells it, and curves averaged over the table's topics and
labelled as the textbook interpolation (not trec_eval's ``iprec_at_recall``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cranfield
from cranfield.cli import main
from cranfield.reports.curves import precision_recall
from cranfield.reports.result_document import (
    evaluation_document,
    option_name,
    warnings_for,
    warnings_for_interface,
)

# q1: relevant at ranks 1 and 3 of R = 3 (dX never retrieved); q2 is judged but not in the run
QRELS = "q1 0 dA 1\nq1 0 dB 0\nq1 0 dC 1\nq1 0 dX 1\nq2 0 y 1\n"
RUN = "q1 Q0 dA 1 3.0 r\nq1 Q0 dB 2 2.0 r\nq1 Q0 dC 3 1.0 r\n"
# q1's textbook 11-point curve: precision 1 up to recall 1/3, 2/3 up to recall 2/3, then 0
Q1_CURVE = [1, 1, 1, 1, 2 / 3, 2 / 3, 2 / 3, 0, 0, 0, 0]


def cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def files(tmp_path):
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    return str(tmp_path / "qrels"), str(tmp_path / "run")


# ---- one JSON shape --------------------------------------------------------------------------

@pytest.mark.parametrize("flags", [[], ["-q"], ["-q", "--curves"], ["-c", "-q", "--curves"]])
def test_the_cli_json_is_the_api_document(capsys, files, flags):
    """``cranfield eval --format json`` printed ``measures`` as a dict keyed by measure (and
    ``options``/``runid`` at the top); the API answers with a list of specs and both under
    ``provenance``. Now the CLI prints the API's document, built by the same function."""
    import hashlib

    qrels, run = files
    code, out, err = cli(capsys, "eval", "--format", "json", "-m", "map", "-m", "P.5",
                         "-m", "IAP11", *flags, qrels, run)
    assert code == 0 and err == ""
    doc = json.loads(out)
    ev = cranfield.evaluate(qrels, run, ["map", "P.5", "IAP11"], complete_topics="-c" in flags)
    digest = {p: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in files}
    want = evaluation_document(ev, {"per_topic": "-q" in flags, "curves": "--curves" in flags},
                               digest[run], digest[qrels], None, interface="cli")
    assert doc == json.loads(json.dumps(want))
    assert isinstance(doc["measures"], list) and doc["measures"][0]["key"] == "map"
    assert set(doc) == {"measures", "aggregate", "topics", "warnings", "provenance"} | (
        {"per_topic"} if "-q" in flags else set()) | ({"curves"} if "--curves" in flags
                                                       else set())
    assert doc["provenance"]["options"]["complete_topics"] is ("-c" in flags)
    assert doc["provenance"]["run_sha256"] == digest[run]


def test_the_cli_json_reads_standard_input_and_digests_it(capsys, files, monkeypatch):
    import hashlib
    import io
    import sys

    qrels, _ = files
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(RUN.encode())))
    code, out, _ = cli(capsys, "eval", "--format", "json", "-m", "map", qrels, "-")
    doc = json.loads(out)
    assert code == 0 and doc["provenance"]["run_sha256"] == hashlib.sha256(
        RUN.encode()).hexdigest()
    assert doc["aggregate"]["map"] == pytest.approx((1 + 2 / 3) / 3)


# ---- warnings name the option as the interface spells it -------------------------------------

def test_option_names_per_interface():
    assert option_name("complete_topics", "cli") == "-c"
    assert option_name("complete_topics", "api") == "options.complete_topics"
    assert option_name("relevance_level", "cli") == "-l"
    assert option_name("judged_only", "cli") == "-J"
    with pytest.raises(ValueError):
        option_name("complete_topics", "gui")


@pytest.mark.parametrize("complete", [False, True])
def test_a_warning_names_complete_topics_as_each_interface_does(files, complete):
    qrels, run = files
    ev = cranfield.evaluate(qrels, run, ["map"], complete_topics=complete)
    api = {w["code"]: w for w in warnings_for(ev, "api")}
    cli_ = {w["code"]: w for w in warnings_for(ev, "cli")}
    assert api.keys() == cli_.keys()
    w_api, w_cli = api["topics-qrels-only"], cli_["topics-qrels-only"]
    assert w_api["option"] == w_cli["option"] == "complete_topics"
    assert w_api["topics"] == w_cli["topics"] == ["q2"]
    if complete:
        assert w_api["message"].endswith("(counted as 0: options.complete_topics)")
        assert w_cli["message"].endswith("(counted as 0: -c)")
    else:
        assert "not evaluated; options.complete_topics counts them as 0" in w_api["message"]
        assert "not evaluated; -c counts them as 0" in w_cli["message"]
    assert "-c" not in w_api["message"] and "complete_topics" not in w_cli["message"]
    # a service's document shown by the CLI (--server) gets the CLI's spelling
    assert warnings_for_interface(warnings_for(ev, "api"), "cli") == warnings_for(ev, "cli")


def test_other_options_are_named_per_interface_too(tmp_path):
    qrels = "q1 0 dA 1\nq1 0 dB 0\nq2 0 x 1\n"
    run = "q1 Q0 dA 1 2 r\nq1 Q0 dZ 2 1 r\nq2 Q0 x 1 1 r\n"
    ev = cranfield.evaluate(qrels, run, ["map"], relevance_level=2)
    by = {i: {w["code"]: w for w in warnings_for(ev, i)} for i in ("api", "cli")}
    assert "(grade >= 2, -l)" in by["cli"]["topics-without-relevant"]["message"]
    assert "(grade >= 2, options.relevance_level)" in by["api"]["topics-without-relevant"][
        "message"]
    assert "(-J drops them instead)" in by["cli"]["unjudged-in-top-10"]["message"]
    assert "(options.judged_only drops them instead)" in by["api"]["unjudged-in-top-10"][
        "message"]
    assert by["api"]["unjudged-in-top-10"]["option"] == "judged_only"


def test_the_cli_prints_warnings_with_its_flags_on_stderr(capsys, files):
    qrels, run = files
    code, out, err = cli(capsys, "eval", "-m", "map", qrels, run)
    assert code == 0 and out.startswith("map")
    assert ("cranfield: warning: 1 judged topic(s) are missing from the run (not evaluated; "
            "-c counts them as 0) (topics: q2)") in err.splitlines()
    assert "complete_topics" not in err
    code, out, err = cli(capsys, "eval", "-c", "--format", "csv", "-m", "map", qrels, run)
    assert "(counted as 0: -c)" in err
    code, out2, err = cli(capsys, "eval", "--no-warnings", "-m", "map", qrels, run)
    assert err == "" and out2.startswith("map")
    code, out, err = cli(capsys, "eval", "--format", "json", "-m", "map", qrels, run)
    assert err == ""  # the warnings are in the document
    assert "-c counts them as 0" in json.loads(out)["warnings"][0]["message"]


# ---- curves: the table's topics, and labelled --------------------------------------------------

@pytest.mark.parametrize("complete, topics", [(False, 1), (True, 2)])
def test_the_curve_averages_the_topics_the_table_averages(files, complete, topics):
    """Without -c the table averages q1 (the run's topic), with -c q1 and q2 (q2 scoring 0);
    the mean curve averages the same topics, so IAP11 is the mean of its 11 points."""
    qrels, run = files
    ev = cranfield.evaluate(qrels, run, ["IAP11", "num_q"], complete_topics=complete)
    curve = precision_recall(ev)
    assert curve["topics_averaged"] == ev.aggregate["num_q"] == topics
    assert curve["mean_interpolated_precision"] == pytest.approx(
        [v / topics for v in Q1_CURVE])
    assert ev.aggregate["IAP11"] == pytest.approx(6 / 11 / topics)
    assert ev.aggregate["IAP11"] == pytest.approx(sum(curve["mean_interpolated_precision"]) / 11)
    assert set(curve["per_topic"]) == ({"q1", "q2"} if complete else {"q1"})


def test_the_curve_can_average_a_comparisons_common_topics():
    """A comparison's tables average the topics every run has; each run's curve averaged its
    own topics. Run a has q1 and q2, run b only q1: the table compares q1, where a's old
    curve averaged q1 and q2 (values halved where q2 scores 0)."""
    qrels = "q1 0 d1 1\nq1 0 d2 1\nq2 0 e1 1\n"
    a = "q1 Q0 d1 1 2 a\nq1 Q0 x 2 1 a\nq2 Q0 z 1 1 a\n"
    ev = cranfield.evaluate(qrels, a, ["IAP11"])
    own = precision_recall(ev, per_topic=False)
    common = precision_recall(ev, per_topic=False, topics=["q1"])
    # q1: d1 at rank 1 (recall 1/2, precision 1), d2 never retrieved
    assert common["mean_interpolated_precision"] == pytest.approx([1] * 6 + [0] * 5)
    assert own["mean_interpolated_precision"] == pytest.approx([0.5] * 6 + [0] * 5)
    assert (common["topics_averaged"], own["topics_averaged"]) == (1, 2)
    with pytest.raises(ValueError, match="not averaged"):
        precision_recall(ev, topics=["q3"])


def test_a_comparisons_curves_average_its_common_topics():
    from cranfield.compare.comparison import compare

    qrels = "q1 0 d1 1\nq1 0 d2 1\nq2 0 e1 1\n"
    runs = {"a": "q1 Q0 d1 1 2 a\nq1 Q0 x 2 1 a\nq2 Q0 z 1 1 a\n",
            "b": "q1 Q0 d2 1 2 b\nq1 Q0 d1 2 1 b\n"}
    doc = compare(qrels, runs, ["map"], curves=True)
    assert doc["topics"] == ["q1"]
    assert doc["curves"]["a"]["topics_averaged"] == 1
    assert doc["curves"]["a"]["mean_interpolated_precision"] == pytest.approx(
        [1] * 6 + [0] * 5)


def test_the_curve_is_labelled_not_iprec_at_recall(files):
    """trec_eval 10 rounds recall 0.4 of R = 3 to lround(1.2) = 1 relevant document, so its
    iprec_at_recall_0.40 is 1.0 where the textbook curve (recall >= 1.2 documents) has 2/3:
    the document says which one the curve is."""
    qrels, run = files
    ev = cranfield.evaluate(qrels, run, ["iprec_at_recall"], profile="trec_eval-10")
    curve = precision_recall(ev)
    assert ev.aggregate["iprec_at_recall_0.40"] == pytest.approx(1.0)
    assert curve["mean_interpolated_precision"][4] == pytest.approx(2 / 3)
    assert curve["interpolation"] == "textbook"
    assert "not trec_eval's iprec_at_recall" in curve["note"]


def test_the_report_pages_label_the_curves(files):
    from cranfield.reports.html_report import render_evaluation

    qrels, run = files
    ev = cranfield.evaluate(qrels, run, ["map"])
    page = render_evaluation(evaluation_document(ev, {"per_topic": True, "curves": True},
                                                 "0" * 64, "0" * 64, None))
    assert "the topics the measures above average" in page
    assert "Not trec_eval's <code>iprec_at_recall</code>" in page


def test_a_comparisons_warning_names_the_option_as_its_interface_spells_it():
    from cranfield.compare.comparison import compare

    qrels = "q1 0 d1 1\nq2 0 e1 1\n"
    runs = {"a": "q1 Q0 d1 1 2 a\nq2 Q0 e1 1 1 a\n", "b": "q1 Q0 d1 1 2 b\n"}
    for interface, spelled in (("api", "options.complete_topics"), ("cli", "-c")):
        doc = compare(qrels, runs, ["map"], interface=interface)
        (warning,) = [w for w in doc["warnings"] if w["code"] == "topics-not-in-all-runs"]
        assert warning["option"] == "complete_topics" and f"use {spelled} " in warning["message"]
        assert warning["topics"] == ["q2"]


@pytest.mark.parametrize("labels, names", [
    (["runs/ql.txt", "runs/rm.txt"], ["ql", "rm"]),
    (["a/ql.txt", "b/ql.run"], ["ql.txt", "ql.run"]),
    (["a/ql.txt", "b/ql.txt"], ["a/ql", "b/ql"]),
    (["-", "ql"], ["stdin", "ql"]),
    ([None, "x.txt", ""], ["run1", "x", "run3"]),
])
def test_runs_are_named_by_one_rule(labels, names):
    from cranfield.compare.comparison import run_names

    assert run_names(labels) == names


def test_the_cli_spells_the_tests_as_the_api_does(tmp_path, capsys):
    import json

    from cranfield import cli

    (tmp_path / "q").write_text("q1 0 d1 1\nq2 0 e1 1\nq3 0 f1 1\n")
    (tmp_path / "a.txt").write_text("q1 Q0 d1 1 2 a\nq2 Q0 x 1 1 a\nq3 Q0 f1 1 1 a\n")
    (tmp_path / "b.txt").write_text("q1 Q0 x 1 2 b\nq2 Q0 e1 1 1 b\nq3 Q0 f1 1 1 b\n")
    args = ["compare", "--format", "json", "-m", "map", str(tmp_path / "q"),
            str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    assert cli.main([*args[:1], "--tests", "t,wilcoxon", *args[1:]]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["options"]["tests"] == ["t", "wilcoxon"]
    assert [r["name"] for r in doc["runs"]] == ["a", "b"]
    assert cli.main([*args[:1], "--wilcoxon", *args[1:]]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["options"]["tests"] == ["t", "randomization", "bootstrap", "wilcoxon"]
