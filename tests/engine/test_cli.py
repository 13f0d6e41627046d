"""``cranfield eval`` as a command: formats, exit codes, messages."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cranfield.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_console_script_is_installed_and_matches_trec_eval():
    exe = Path(sys.executable).with_name("cranfield")
    done = subprocess.run([str(exe), "eval", str(DATA / "qrels.test"),
                           str(DATA / "results.test")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (DATA / "v9.0.8" / "out.test").read_text()


def test_json_and_csv_formats_carry_the_same_numbers(capsys):
    args = ["-q", "-m", "map", "-m", "P.5", str(DATA / "qrels.test"), str(DATA / "results.test")]
    code, text, _ = cli(capsys, "eval", "--format", "json", *args)
    assert code == 0
    doc = json.loads(text)
    assert round(doc["aggregate"]["map"], 4) == 0.1785
    assert set(doc["per_topic"]) == {"301", "302", "303"}
    # the API's shape (issue #15): measures a list of specs, options under provenance
    spec = next(m for m in doc["measures"] if m["key"] == "P_5")
    assert spec["canonical"] == "P(k=5,rel=1,profile=trec_eval-9.0.8)"
    code, text, _ = cli(capsys, "eval", "--format", "csv", *args)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["topic"] for r in rows] == ["301", "302", "303", "all"]
    assert round(float(rows[-1]["map"]), 4) == 0.1785


def test_n_suppresses_summary(capsys):
    code, text, _ = cli(capsys, "eval", "-q", "-n", "-m", "map", str(DATA / "qrels.test"),
                        str(DATA / "results.test"))
    assert code == 0 and "\tall\t" not in text and text.count("\n") == 3


@pytest.mark.parametrize("make, code, message", [
    (lambda d: (["-m", "mapp"], "q 0 a 1\n", "q Q0 a 1 1 r\n"), 1, "did you mean 'map'"),
    (lambda d: ([], "q 0 a 1\n", "q Q0 a 1 x r\n"), 2, "run:1: score: 'x' is not a number"),
    (lambda d: ([], "q 0 a 1.5\n", "q Q0 a 1 1 r\n"), 2, "qrels:1: grade"),
    (lambda d: ([], "q 0 a 1\n", "q Q0 a 1 1 r\nq Q0 a 2 0.5 r\n"), 4, "appears twice"),
    (lambda d: ([], "z 0 a 1\n", "q Q0 a 1 1 r\n"), 7, "no topic has both"),
])
def test_bad_input_gives_message_and_exit_code(tmp_path, capsys, make, code, message):
    flags, qrels, run = make(tmp_path)
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        got, out, err = cli(capsys, "eval", *flags, "qrels", "run")
    finally:
        os.chdir(cwd)
    assert got == code
    assert message in err and out == ""


def test_missing_file_exits_2(capsys, tmp_path):
    code, _, err = cli(capsys, "eval", str(tmp_path / "none"), str(DATA / "results.test"))
    assert code == 2 and "no such file" in err


def test_curves_micro_and_new_measures_from_the_command_line(capsys):
    import cranfield
    from cranfield.reports.curves import precision_recall

    qrels, run = str(DATA / "qrels.test"), str(DATA / "results.test")
    code, out, _ = cli(capsys, "eval", "--format", "json", "--curves", "-q", "-m", "map",
                       "-m", "IAP11", qrels, run)
    doc = json.loads(out)
    ev = cranfield.evaluate(qrels, run, ["map", "IAP11"])
    assert code == 0 and doc["curves"] == json.loads(json.dumps(precision_recall(ev)))
    assert doc["aggregate"]["IAP11"] == pytest.approx(
        sum(doc["curves"]["mean_interpolated_precision"]) / 11)
    code, out, _ = cli(capsys, "eval", "--micro", "-m", "set_P", "-m", "nDCG(gain=exp)@10",
                       qrels, run)
    micro = cranfield.evaluate(qrels, run, ["set_P"], aggregation="micro").aggregate["set_P"]
    assert code == 0 and f"set_P                 \tall\t{micro:.4f}" in out
    assert "nDCG(gain=exp)@10" in out


# ---- issue #14 -------------------------------------------------------------------------------

WEB = DATA.parent / "web2012"


def test_eval_reads_subtopic_qrels_for_diversity_measures(capsys):
    """A real subtopic qrels file judges a docid once per subtopic: ``cranfield eval`` used
    to refuse it ("judged twice") for alpha_nDCG@k and the rest; it must read it as ndeval
    does and print ndeval's means (-c -traditional is how TREC 2012 evaluated)."""
    qrels = str(WEB / "qrels-for-ndeval.txt")
    run = str(WEB / "runs" / "rm" / "results-cata-filtered.txt")
    code, out, err = cli(capsys, "eval", "-c", "--format", "json", "-m", "alpha_nDCG@20",
                         "-m", "ERR_IA@10", "-m", "nNRBP", qrels, run)
    assert code == 0, err
    rows = list(csv.DictReader((WEB / "expected" / "ndeval-4.5.c.traditional.rm.csv")
                               .read_text().splitlines()))
    amean = next(r for r in rows if r["topic"] == "amean")
    got = json.loads(out)["aggregate"]
    assert got["alpha_nDCG@20"] == pytest.approx(float(amean["alpha-nDCG@20"]), abs=5e-7)
    assert got["ERR_IA@10"] == pytest.approx(float(amean["ERR-IA@10"]), abs=5e-7)
    assert got["nNRBP"] == pytest.approx(float(amean["nNRBP"]), abs=5e-7)
    # ordinary measures still read qrels as trec_eval does: a docid twice is an error
    code, out, err = cli(capsys, "eval", "-m", "map", qrels, run)
    assert code == 4 and "is judged twice for topic" in err and out == ""


@pytest.mark.parametrize("qrels, run, message", [
    ("", "q Q0 a 1 1 r\n", "the qrels hold no judgments (the file is empty or only comments)"),
    ("# only a comment\n", "q Q0 a 1 1 r\n",
     "the qrels hold no judgments (the file is empty or only comments)"),
    ("q 0 a 1\n", "", "the run holds no results (the file is empty or only comments)"),
    ("q 0 a 1\n", "# c\n\n", "the run holds no results (the file is empty or only comments)"),
])
def test_empty_input_files_give_one_line_and_exit_2(tmp_path, capsys, qrels, run, message):
    # before: an IndexError traceback for empty qrels
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    for command in (["eval"], ["eval", "-c", "-m", "alpha_nDCG@5"], ["compare"]):
        files = [str(tmp_path / "qrels"), str(tmp_path / "run")]
        if command == ["compare"]:
            files.append(str(tmp_path / "run"))
        code, out, err = cli(capsys, *command, *files)
        assert (code, out, err) == (2, "", f"cranfield: {message}\n"), command


@pytest.mark.parametrize("flags, message", [
    (["-M", str(2 ** 63)], f"depth must be an integer from 0 to {2 ** 63 - 1}, got {2 ** 63}"),
    (["-l", "1" * 40], f"relevance_level must be an integer from {-2 ** 63} to {2 ** 63 - 1}, "
                       f"got {'1' * 40}"),
    (["-N", "1", "-m", "NPV"], "collection_size 1 is less than topic 'q''s 1 retrieved + 1 "
                               "relevant not retrieved = 2 documents"),
])
def test_option_and_collection_size_errors_are_one_line(tmp_path, capsys, flags, message):
    (tmp_path / "qrels").write_text("q 0 a 1\nq 0 b 1\n")
    (tmp_path / "run").write_text("q Q0 a 1 1 r\n")
    code, out, err = cli(capsys, "eval", *flags, str(tmp_path / "qrels"), str(tmp_path / "run"))
    assert (code, out, err) == (1, "", f"cranfield: {message}\n")
