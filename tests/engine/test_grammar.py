"""The input grammar (cranfield/inputs/grammar.py, docs/inputs.md), table-driven: each reader —
the line reader, the columnar (pyarrow) reader, the mapping reader — reads a valid input the
same way and refuses an invalid one naming its line or path."""

from __future__ import annotations

import numpy as np
import pytest

import cranfield
import cranfield.inputs.io
import cranfield.inputs.trec_fast
import cranfield.inputs.trec_lines
from cranfield import InputError, read_qrels, read_run
from cranfield.inputs import grammar


@pytest.fixture(params=["line reader", "columnar reader"])
def reader(request, monkeypatch):
    """Both TREC readers: the columnar one forced for any size."""
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES",
                        0 if request.param == "columnar reader" else 1 << 62)
    return request.param


# --- scores -----------------------------------------------------------------------------------

@pytest.mark.parametrize("spelling, value", [
    ("1", 1.0), ("-2.5", -2.5), (".5", 0.5), ("5.", 5.0), ("1e-3", 0.001),
    ("+1E+05", 1e5), ("00012", 12.0), ("1e-400", 0.0), ("-0", -0.0),
])
def test_a_score_in_cs_decimal_grammar_is_read(spelling, value, reader):
    run = read_run(f"q1 Q0 d1 1 {spelling} sys\nq1 Q0 d2 2 0 sys\n".encode())
    assert run.to_dict()["q1"]["d1"] == value


@pytest.mark.parametrize("spelling", ["1_5", "1e400", "-1e400", "inf", "-inf", "nan",
                                      "Infinity", "\uff13", "\u0663", "0x10", "1d5", "1,5"])
def test_a_score_outside_the_grammar_is_refused_naming_the_line(spelling, reader):
    text = f"q1 Q0 d1 1 0.5 sys\nq1 Q0 d2 2 {spelling} sys\n".encode()
    with pytest.raises(InputError) as err:
        read_run(text)
    assert err.value.line == 2 and err.value.field == "score"


# --- grades -----------------------------------------------------------------------------------

@pytest.mark.parametrize("spelling, value", [
    ("0", 0), ("2", 2), ("-1", -1), ("+3", 3),
    ("9223372036854775807", 2**63 - 1), ("-9223372036854775808", -(2**63)),
])
def test_a_decimal_int64_grade_is_read_exactly(spelling, value, reader):
    qrels = read_qrels(f"q1 0 d0 1\nq1 0 d1 {spelling}\n".encode())
    assert qrels.to_dict()["q1"]["d1"] == value


@pytest.mark.parametrize("spelling", ["9223372036854775808", "-9223372036854775809",
                                      "1" + "0" * 40, "1_0", "1.5", "1e2", "0x10", "\uff11",
                                      "\u0661", "x"])
def test_a_grade_outside_the_grammar_is_refused_naming_the_line(spelling, reader):
    """``0x10`` was 16 on the columnar path; beyond int64 was an OverflowError (a 500)."""
    with pytest.raises(InputError) as err:
        read_qrels(f"q1 0 d0 1\nq1 0 d1 {spelling}\n".encode())
    assert err.value.line == 2 and err.value.field == "grade"


# --- fields and lines -------------------------------------------------------------------------

def test_a_no_break_space_is_part_of_an_id_on_every_reader(reader):
    """The line reader split on U+00A0 (docid 'd', a wrong answer), pyarrow did not."""
    run = read_run("q1 Q0 d\u00a0x 1 2.0 sys\nq1 Q0 e 2 1.0 sys\n".encode())
    assert run.to_dict() == {"q1": {"d\u00a0x": 2.0, "e": 1.0}}
    ev = cranfield.evaluate({"q1": {"d\u00a0x": 1}}, run, ["map", "num_rel_ret"])
    assert ev.aggregate["map"] == 1.0 and ev.aggregate["num_rel_ret"] == 1


def test_crlf_lines_read_like_lf_lines(reader):
    lf = read_run(b"q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\n").to_dict()
    assert read_run(b"q1 Q0 d1 1 2.0 sys\r\nq1 Q0 d2 2 1.0 sys\r\n").to_dict() == lf
    q = read_qrels(b"q1 0 d1 1\r\nq1 0 d2 2\r\n")
    assert q.to_dict() == {"q1": {"d1": 1, "d2": 2}}


@pytest.mark.parametrize("text, line", [
    (b"q1 Q0 d1 1 2.0 sys\nq1 Q0 d\x0b2 2 1.0 sys\n", 2),   # vertical tab
    (b"q1 Q0 d1 1 2.0 sys\rq1 Q0 d2 2 1.0 sys\n", 1),       # a lone CR
    (b"q1 Q0 d1 1 2.0 sys\nq1 Q0 d\x002 2 1.0 sys\n", 2),   # NUL
    (b"q1 Q0 d1 1 2.0 sys\nq1 Q0 d2 2 1.0 sys\x7f\n", 2),   # DEL
    (b"q1 Q0 d1 1 2.0 sys\nq1 Q0 d\x1c2 2 1.0 sys\n", 2),   # a separator str.split splits on
])
def test_control_characters_are_refused_naming_the_line(text, line, reader):
    with pytest.raises(InputError, match="not allowed in TREC text") as err:
        read_run(text)
    assert err.value.line == line


def test_a_tab_in_a_space_separated_file_is_a_separator_on_every_reader(reader):
    """pyarrow (delimiter ' ') kept 'd\\t1' as one docid; the grammar splits there, so the
    line has 7 fields and the score is the 5th: the same reading on both paths."""
    text = b"q1 Q0 a 1 2.0 sys\nq1 Q0 d\t1 2 1.0 sys\n"
    assert read_run(text).to_dict() == {"q1": {"a": 2.0, "d": 2.0}}


def test_both_readers_agree_on_large_regular_files_with_unicode():
    rng = np.random.default_rng(1)
    lines = [f"q{t} Q0 d\u00a0{i}é {i} {rng.normal():.6g} sys\n" for t in range(5)
             for i in range(200)]
    text = "".join(lines).encode()
    slow = cranfield.inputs.trec_lines.slow_run(text, "run")
    fast = cranfield.inputs.trec_fast.fast_run(text, "run")
    assert fast is not None and fast.to_dict() == slow.to_dict()


# --- mappings ---------------------------------------------------------------------------------

@pytest.mark.parametrize("docid, reason", [
    ("d 1", "may not contain a space"), ("dA 5\nq1 0 dB", "may not contain a space"),
    ("a\nb", "may not contain a line feed"), ("a\tb", "may not contain a tab"),
    ("", "may not be empty"), ("x\x01", r"U\+0001"),
])
def test_a_mapping_id_outside_the_grammar_is_refused_naming_its_path(docid, reason):
    for read, value in ((read_run, 1.0), (read_qrels, 1)):
        with pytest.raises(InputError, match=reason) as err:
            read({"q1": {"ok": value, docid: value}}, name="qrels")
        assert err.value.field == f"qrels.q1.{docid}"
    with pytest.raises(InputError, match=reason):
        read_run({docid: {"d": 1.0}})


@pytest.mark.parametrize("grade", [10**19, 2**63, 1e19, -(2**63) - 1, 9.3e18, 2.0**53 + 2,
                                   -(2.0**63), 1.5, "1", True, None, float("nan")])
def test_a_json_grade_that_is_not_an_int64_is_refused(grade):
    """1e19 and 2**63 became INT64_MIN (unjudged): map 0.5 instead of an error."""
    with pytest.raises(InputError) as err:
        read_qrels({"q1": {"d1": 1, "d2": grade}})
    assert err.value.field == "qrels.q1.d2"


@pytest.mark.parametrize("grade, exact", [(2**63 - 1, 2**63 - 1), (-(2**63), -(2**63)),
                                          (2**60 + 1, 2**60 + 1), (2.0, 2), (1e2, 100),
                                          (2.0**53, 2**53), (np.int64(7), 7)])
def test_a_json_grade_in_range_is_read_exactly(grade, exact):
    assert read_qrels({"q1": {"d1": grade}}).to_dict() == {"q1": {"d1": exact}}


@pytest.mark.parametrize("score", ["3.0", "x", None, True, [1], float("inf"), 10**400])
def test_a_json_score_that_is_not_a_finite_number_is_refused(score):
    """"3.0" was read as 3.0 by numpy on one path and a 500 on another."""
    with pytest.raises(InputError) as err:
        read_run({"q1": {"d1": 1.0, "d2": score}})
    assert err.value.field == "run.q1.d2"


def test_grammar_module_rules_directly():
    assert grammar.split_fields("a\u00a0b c\td\r\n") == ["a\u00a0b", "c", "d"]
    assert grammar.split_fields("a b\n") == ["a", "b"]
    assert grammar.text_problem("a b\r\nc d\n") is None
    assert grammar.text_problem("a b\nc\x0cd\n")[0] == 2
    assert grammar.id_problem("d\u00a0") is None and grammar.id_problem("d ") is not None
    assert grammar.json_grade_problem(2**63 - 1) is None
    assert grammar.json_grade_problem(2**63) is not None
    assert grammar.json_score_problem(10**400) is not None
