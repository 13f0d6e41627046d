"""Judgment groups (trec_eval -R qrels_jg, cranfield.prefs): the reader's refusals and a
small example computed by hand."""

from __future__ import annotations

import pytest

from cranfield.cli import main
from cranfield.errors import InputError, MeasureError
from cranfield.prefs import evaluate_jg, format_jg, read_qrels_jg

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
    assert main(["eval", "-R", "qrels_jg", "-c", str(q), str(r)]) == 2
    assert "does not take -c" in capsys.readouterr().err
    assert main(["eval", "-R", "prefs", str(q), str(r)]) == 2
    assert main(["eval", "-R", "qrels_jg", "-m", "map_avgjg", str(q), str(r)]) == 0
    out = capsys.readouterr().out
    # this run lacks d3: A gets (1/1) / 2, B (1/2) / 1, mean 0.5
    assert out == ("runid                 \tall\trun\nnum_q                 \tall\t1\n"
                   "map_avgjg             \tall\t0.5000\n")
