"""Judgment groups and preferences (trec_eval -R qrels_jg, prefs, qrels_prefs;
cranfield.inputs.judgment_files, jg_measures, prefs_measures): the readers' refusals and small
examples computed by hand."""

from __future__ import annotations

import pytest

from cranfield.cli import main
from cranfield.errors import InputError, MeasureError
from cranfield.inputs.judgment_files import read_prefs, read_qrels_jg
from cranfield.measures.jg_measures import evaluate_jg
from cranfield.measures.prefs_measures import evaluate_prefs
from cranfield.reports.jg_text import format_jg

# topic q: group A judges d1, d3 relevant (R=2); group B judges only d2 relevant (R=1) and
# d9, which is not retrieved
QRELS = """q A d1 1
q A d2 0
q A d3 1
# a comment line
q B d2 1
q B d9 0
x A d1 1
"""
RUN = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}


def test_hand_computed_example():
    ev = evaluate_jg(read_qrels_jg(QRELS), RUN)
    v = ev.per_topic["q"]
    assert list(ev.per_topic) == ["q"]  # topic x is not in the run: not evaluated
    # A: relevant at ranks 1 and 3 -> (1/1 + 2/3) / 2 = 5/6; B: rank 2 -> (1/2) / 1
    assert v["map_avgjg"] == pytest.approx((5 / 6 + 1 / 2) / 2)
    # P@5: A has 2 relevant in the top 5, B 1: (2/5 + 1/5) / 2
    assert v["P_avgjg_5"] == pytest.approx(0.3)
    # Rprec_mult 1.00: cutoff (long)(R + 0.9) = R; A: 1 relevant in the top 2 -> 1/2;
    # B: 0 in the top 1 -> 0
    assert v["Rprec_mult_avgjg_1.00"] == pytest.approx(0.25)
    # 0.20: A's cutoff (long)(0.4 + 0.9) = 1 -> 1/1; B's (long)(0.2 + 0.9) = 1 -> 0
    assert v["Rprec_mult_avgjg_0.20"] == pytest.approx(0.5)
    text = format_jg(ev, per_topic=True)
    assert text.splitlines()[0] == "map_avgjg             \tq\t0.6667"
    assert "num_q                 \tall\t1\n" in text


def test_one_group_is_not_divided_and_rel_level_applies():
    ev = evaluate_jg("q A d1 2\nq A d2 1\n", RUN, ["map_avgjg"], relevance_level=2)
    assert ev.names == ["map_avgjg"] and ev.per_topic["q"]["map_avgjg"] == 1.0


@pytest.mark.parametrize("text, line, words", [
    ("q A d1 1\nq A d1\n", 2, "four fields"),
    ("q A d1 1 extra\n", 1, "four fields"),
    ("q A d1 one\n", 1, "not an integer"),
    ("q A d1 1\nq B d1 1\nq A d1 0\n", 3, "judged twice"),
])
def test_reader_refuses_naming_the_line(text, line, words):
    with pytest.raises(InputError) as err:
        read_qrels_jg(text, name="jg.txt")
    assert err.value.line == line and words in str(err.value)
    assert str(err.value).startswith(f"jg.txt:{line}:")


def test_empty_and_unknown_measure_refused():
    with pytest.raises(InputError, match="no judgments"):
        read_qrels_jg("# nothing\n\n")
    with pytest.raises(MeasureError, match="judgment groups"):
        evaluate_jg(QRELS, RUN, ["map"])


def test_cli_refuses_what_it_cannot_do(tmp_path, capsys):
    q, r = tmp_path / "q", tmp_path / "r"
    q.write_text(QRELS)
    r.write_text("q Q0 d1 1 3 run\nq Q0 d2 2 2 run\n")
    assert main(["eval", "-R", "prefs", "-J", str(q), str(r)]) == 2
    assert "does not take -J" in capsys.readouterr().err
    assert main(["eval", "-R", "prefs", "-l", "2", str(q), str(r)]) == 2
    assert "does not take -l" in capsys.readouterr().err
    # QRELS has a comment line: 10.0's (9.0.8 refuses it: test_prefs_differential)
    assert main(["eval", "--profile", "trec_eval-10", "-R", "qrels_jg", "-m", "map_avgjg",
                 str(q), str(r)]) == 0
    out = capsys.readouterr().out
    # this run lacks d3: A gets (1/1) / 2, B (1/2) / 1, mean 0.5; runid and num_q are
    # printed when measured (the nickname qrels_jg names them, -m map_avgjg does not)
    assert out == "map_avgjg             \tall\t0.5000\n"
    assert main(["eval", "--profile", "trec_eval-10", "-R", "qrels_jg", "-m", "num_q",
                 "-m", "map_avgjg", str(q), str(r)]) == 0
    assert capsys.readouterr().out == ("num_q                 \tall\t1\n"
                                       "map_avgjg             \tall\t0.5000\n")


# --- preferences (-R prefs, -R qrels_prefs) ---

# one judgment group, one sub-group: d1 (2) > d2 (1) > d3 (0). The run ranks d2 above d1 and
# leaves d3 out, so d1>d2 fails among retrieved docs, and d1>d3, d2>d3 are fulfilled implied
PREFS = "q u s d1 2\nq u s d2 1\n# comment\nq u s d3 0\n"
PREFS_RUN = {"q": {"d2": 2.0, "d1": 1.0}}


def test_prefs_hand_computed():
    v = evaluate_prefs(read_prefs(PREFS), PREFS_RUN).per_topic["q"]
    assert (v["prefs_num_prefs_poss"], v["prefs_num_prefs_ful"],
            v["prefs_num_prefs_ful_ret"]) == (3, 2, 0)
    assert v["prefs_simp"] == pytest.approx(2 / 3)
    assert v["prefs_simp_ret"] == 0.0 and v["prefs_avgjg_ret"] == 0.0
    assert v["prefs_simp_imp"] == pytest.approx(2 / 3)
    # pairs (d2,d1) 0/1, (d2,d3) 1/1, (d1,d3) 1/1
    assert v["prefs_pair"] == pytest.approx(2 / 3) and v["prefs_pair_ret"] == 0.0
    assert v["prefs_avgjg"] == pytest.approx(2 / 3)
    # R = 2 relevant (rel_level > 0) >= N = 1 nonrelevant: R*(R-N) fulfilled prefs are
    # added to the retrieved relevant docs: (2 + 2*1) / (3 + 2*1)
    assert v["prefs_avgjg_Rnonrel"] == pytest.approx(0.8)


def test_qrels_prefs_reads_the_second_field_as_the_group():
    ev = evaluate_prefs("q 0 d1 1\nq 0 d2 0\nq 0 d3 1\n", {"q": {"d1": 2.0, "d2": 1.0}},
                        ["prefs_simp", "prefs_num_prefs_poss"], qrels=True)
    # prefs d1>d2 (fulfilled), d3>d2 (d3 not retrieved: failed implied)
    assert ev.names == ["prefs_num_prefs_poss", "prefs_simp"]
    assert ev.per_topic["q"] == {"prefs_num_prefs_poss": 2, "prefs_simp": 0.5}
    text = format_jg(ev)
    assert "prefs_num_prefs_poss  \tall\t2\n" in text
    assert "prefs_simp            \tall\t0.5000\n" in text


def test_cyclic_preferences_in_one_group_refused():
    # sub-group a says d1 > d2, sub-group b d2 > d1: one group cannot hold both
    cyc = "q u a d1 2\nq u a d2 1\nq u b d2 2\nq u b d1 1\n"
    with pytest.raises(InputError, match="cyclic"):
        evaluate_prefs(cyc, PREFS_RUN)
    # a doc nonrelevant (0) in one sub-group and relevant in another is refused too
    with pytest.raises(InputError, match="both 0 and non-0"):
        evaluate_prefs("q u a d1 1\nq u a d2 0\nq u b d2 1\nq u b d1 0\n", PREFS_RUN)


@pytest.mark.parametrize("text, qrels, line, words", [
    ("q u s d1 2\nq u s d2\n", False, 2, "5 fields"),
    ("q u d1 2\n", True, None, None),
    ("q u s d1 2\n", True, 1, "4 fields"),
    ("q u s d1 high\n", False, 1, "not a finite number"),
    ("q u s d1 nan\n", False, 1, "not a finite number"),
])
def test_prefs_reader_refuses_naming_the_line(text, qrels, line, words):
    if line is None:
        assert read_prefs(text, qrels=qrels).topics == {"q": [("u", "", "d1", 2.0)]}
        return
    with pytest.raises(InputError) as err:
        read_prefs(text, name="p.txt", qrels=qrels)
    assert err.value.line == line and words in str(err.value)


def test_prefs_unknown_measure_refused():
    with pytest.raises(MeasureError):
        evaluate_prefs(PREFS, PREFS_RUN, ["map_avgjg"])


def test_set_nickname_is_trec_evals_set_names(capsys):
    """-m set: trec_eval's set_names; every line equals the line out.test.a prints."""
    from pathlib import Path

    te = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
    assert main(["eval", "-m", "set", str(te / "qrels.test"), str(te / "results.test")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0].strip() for line in lines] == [
        "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P",
        "set_relative_P", "set_recall", "set_map", "set_F"]
    want = set((te / "out.test.a").read_text().splitlines())
    assert all(line in want for line in lines)


def test_library_evaluate_takes_qrels_format():
    """cranfield.evaluate(qrels, run, qrels_format=...) gives the bytes the CLI prints."""
    from pathlib import Path

    import cranfield
    from cranfield.errors import EvaluationError

    te = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
    ev = cranfield.evaluate(te / "qrels.test", te / "results.test", "all_prefs",
                            qrels_format="qrels_prefs", profile="trec_eval-10")
    assert format_jg(ev, per_topic=True) == (te / "out.test.qrels_prefs").read_text()
    ev = cranfield.evaluate(str(te / "qrels.123"), str(te / "results.test"),
                            qrels_format="qrels_jg")
    assert format_jg(ev, per_topic=True) == (te / "out.test.qrels_jg").read_text()
    with pytest.raises(EvaluationError, match="judged_only"):
        cranfield.evaluate(PREFS, RUN, qrels_format="prefs", judged_only=True)
    with pytest.raises(EvaluationError, match="qrels_format"):
        cranfield.evaluate(QRELS, RUN, qrels_format="trec")
