"""The input grammar (cranfield/inputs/grammar.py) function by function: the exact messages users
see (the API returns them verbatim under the input's line or path), and each boundary —
int64 for grades, 2^53 for JSON float grades, 40 characters for a quoted JSON string, a CR
at the very end of the bytes, a bad character on the first line after a leading LF.

Written against the survivors of ``make mutation`` on cranfield/inputs/grammar.py (issue #16);
docs/mutation.md lists the mutants that stay alive and why each is equivalent."""

from __future__ import annotations

import pytest

import cranfield
from cranfield import InputError
from cranfield.inputs import grammar
from cranfield.inputs.grammar import INT64_MAX, INT64_MIN, GrammarError

TEXT_TAIL = ("is not allowed in TREC text (fields are separated by spaces or tabs, lines end "
             "with LF or CRLF)")


# --- ids --------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, message", [
    (5, "ids must be strings"),
    (None, "ids must be strings"),
    ("", "an id may not be empty"),
    ("a b", "an id may not contain a space"),
    ("a\tb", "an id may not contain a tab"),
    ("a\nb", "an id may not contain a line feed"),
    ("a\rb", "an id may not contain a carriage return"),
    ("a\x00b", "an id may not contain the control character U+0000"),
    ("\x1f", "an id may not contain the control character U+001F"),
    ("a\x7f", "an id may not contain the control character U+007F"),
])
def test_an_invalid_id_is_named_word_for_word(value, message):
    assert grammar.id_problem(value) == message


@pytest.mark.parametrize("value", ["q1", "d\u00e9", "\u00a0x", "a\u2028b", "\udc80", "!~"])
def test_any_other_character_is_part_of_an_id(value):
    assert grammar.id_problem(value) is None


def test_bad_id_names_the_index_and_reason_of_the_first_invalid_id():
    assert grammar.bad_id(["a", "b c", ""]) == (1, "an id may not contain a space")
    assert grammar.bad_id(["a", "", "b c"]) == (1, "an id may not be empty")
    assert grammar.bad_id(["a", "b", "c\r"]) == (2, "an id may not contain a carriage return")
    assert grammar.bad_id(iter(["a", "\x7f"])) == (1, "an id may not contain the control "
                                                      "character U+007F")


@pytest.mark.parametrize("ids", [["a", 1], [1, "a"], ["a", None], ["a", b"b"]])
def test_bad_id_refuses_a_non_string_id_without_raising(ids):
    """The fast path's join fails with a TypeError on a non-string: that is not an error of
    bad_id, only a reason to look id by id."""
    k = next(i for i, v in enumerate(ids) if not isinstance(v, str))
    assert grammar.bad_id(ids) == (k, "ids must be strings")


@pytest.mark.parametrize("ids", [
    [], ["q1"], ["q1", "d\u00e9", "\u00a0x", "\U0001f600"],
    ["\udc80", "a\udcff"],  # lone surrogates: a JSON "\udc80" escape, or undecodable bytes
    ["!", "~", "\x80", "\u00ff"],  # the ends of the allowed ranges
])
def test_bad_id_accepts_valid_ids_on_the_fast_path(ids, monkeypatch):
    """Valid ids are decided by one join, encode and translate: no per-id check runs (the
    docstring's promise; a regex per id is ~40 times slower), and an id holding a lone
    surrogate is valid, not a UnicodeEncodeError."""
    def per_id_check(value):
        raise AssertionError(f"per-id check ran on {value!r}")
    monkeypatch.setattr(grammar, "id_problem", per_id_check)
    assert grammar.bad_id(ids) is None


def test_an_invalid_id_beside_a_lone_surrogate_is_still_found():
    assert grammar.bad_id(["\udc80", ""]) == (1, "an id may not be empty")
    assert grammar.bad_id(["\udc80", "x y"]) == (1, "an id may not contain a space")


# --- TREC text --------------------------------------------------------------------------------

@pytest.mark.parametrize("text, line, name", [
    ("a\x01b\n", 1, "the control character U+0001"),
    ("\n\x01", 2, "the control character U+0001"),  # a leading LF counts
    ("\n\n\n\x7f", 4, "the control character U+007F"),
    ("q1 Q0 d1 1 1 s\r\nq1\x0bx\n", 2, "the control character U+000B"),
    ("a\rb\n", 1, "a carriage return"),
    ("a\n\rb", 2, "a carriage return"),
    ("a\nb\r", 2, "a carriage return"),
])
def test_text_problem_names_the_line_and_the_character_word_for_word(text, line, name):
    assert grammar.text_problem(text) == (line, f"{name} {TEXT_TAIL}")


@pytest.mark.parametrize("text", ["", "a b\tc\n", "a\r\nb\r\n", "\u00a0\u2028\n"])
def test_text_problem_accepts_tabs_lf_and_crlf(text):
    assert grammar.text_problem(text) is None


def test_the_reader_reports_the_text_problem_verbatim():
    with pytest.raises(InputError) as err:
        cranfield.read_run(b"q1 Q0 d1 1 1 s\nq1 Q0 d2 2 1 s\rx\n")
    assert err.value.line == 2
    assert err.value.reason == f"a carriage return {TEXT_TAIL}"


@pytest.mark.parametrize("data, tab, plain", [
    (b"", True, True),
    (b"a b\n", True, True),
    (b"a\tb\n", True, True),
    (b"a\tb\n", False, False),
    (b"a b\n", False, True),
    (b"a\r\n", True, True),
    (b"a\r\nb\r\n", False, True),
    (b"\r\n", True, True),
    (b"a\r", True, False),  # a CR as the last byte: nothing follows it
    (b"a\r", False, False),
    (b"\r", True, False),
    (b"a\r\nb\r", True, False),
    (b"a\rb\n", True, False),
    (b"a\r\rb\n", True, False),
    (b"a\x01\n", True, False),
    (b"a\x7f\n", True, False),
    (b"a\x00\n", False, False),
    (b"\xc2\xa0\xe2\x80\xa8\n", True, True),  # U+00A0, U+2028: not control bytes
])
def test_plain_bytes_at_each_boundary(data, tab, plain):
    assert grammar.plain_bytes(data, tab=tab) is plain
    assert plain is (grammar.text_problem(data.decode()) is None
                     and (tab or b"\t" not in data))


# --- scores -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("x", "'x' is not a number"),
    ("1,5", "'1,5' is not a number"),
    ("1_0", "'1_0' is not a plain decimal number"),
    ("\u0663", "'\u0663' is not a plain decimal number"),
    ("inf", "'inf' is not a finite number"),
    ("1e400", "'1e400' is not a finite number"),
])
def test_a_refused_score_is_named_word_for_word(text, message):
    with pytest.raises(GrammarError) as err:
        grammar.parse_score(text)
    assert str(err.value) == message


# --- grades -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("10", 10), ("0", 0), ("-1", -1), ("+7", 7), ("0010", 10), ("99", 99),
    (str(INT64_MAX), INT64_MAX), (str(INT64_MIN), INT64_MIN),
])
def test_parse_grade_reads_decimal_int64_exactly(text, value):
    assert grammar.parse_grade(text) == value


@pytest.mark.parametrize("text, message", [
    ("1_0", "'1_0' is not a plain decimal integer grade"),
    ("\u0661", "'\u0661' is not a plain decimal integer grade"),
    ("a", "'a' is not an integer grade"),  # a digit in base 11
    ("1.5", "'1.5' is not an integer grade"),
    ("0x10", "'0x10' is not an integer grade"),
    (str(INT64_MAX + 1), f"grade {INT64_MAX + 1} is outside the 64-bit integer range"),
    (str(INT64_MIN - 1), f"grade {INT64_MIN - 1} is outside the 64-bit integer range"),
])
def test_a_refused_grade_is_named_word_for_word(text, message):
    with pytest.raises(GrammarError) as err:
        grammar.parse_grade(text)
    assert str(err.value) == message


# --- JSON values ------------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [
    ("1", '"1"'),
    ("x" * 39, '"' + "x" * 39 + '"'),  # 39 characters: shown whole
    ("x" * 40, '"' + "x" * 37 + '..."'),  # 40: cut to 37 and an ellipsis
    ("abcdefghij" * 5, '"abcdefghijabcdefghijabcdefghijabcdefg..."'),
    (True, "true"),
    (False, "false"),
    (None, "null"),
    ([1.0], "list"),
    ({"a": 1}, "dict"),
    (b"1", "b'1'"),  # not a JSON value: shown as Python shows it
])
def test_a_json_value_that_is_not_a_number_is_shown_as_json(value, shown):
    assert grammar.json_score_problem(value) == f"score {shown} is not a number"
    assert grammar.json_grade_problem(value) == f"grade {shown} is not an integer"


@pytest.mark.parametrize("value", [0, 1, -2.5, 1e308, 10**308, 5e-324, -0.0])
def test_a_finite_json_number_is_a_score(value):
    assert grammar.json_score_problem(value) is None


@pytest.mark.parametrize("value, message", [
    (float("nan"), "score nan is not a finite number"),
    (float("-inf"), "score -inf is not a finite number"),
    (10**400, "score is too large for a double"),
    (-(10**400), "score is too large for a double"),
])
def test_a_json_score_that_is_not_finite_is_named_word_for_word(value, message):
    assert grammar.json_score_problem(value) == message


@pytest.mark.parametrize("value", [
    0, 2, -1, INT64_MAX, INT64_MIN,
    2.0, -3.0, 200.0, 1e2, 2.0**53, -(2.0**53),
])
def test_an_integral_json_number_is_a_grade(value):
    assert grammar.json_grade_problem(value) is None


@pytest.mark.parametrize("value, message", [
    (1.5, "grade 1.5 is not an integer"),
    (2.0**53 + 2, "grade 9007199254740994.0 is a number beyond 2^53: write it as an integer"),
    (-(2.0**53) - 2, "grade -9007199254740994.0 is a number beyond 2^53: write it as an "
                     "integer"),
    (INT64_MAX + 1, f"grade {INT64_MAX + 1} is outside the 64-bit integer range"),
    (INT64_MIN - 1, f"grade {INT64_MIN - 1} is outside the 64-bit integer range"),
])
def test_a_json_grade_outside_the_grammar_is_named_word_for_word(value, message):
    assert grammar.json_grade_problem(value) == message


@pytest.mark.parametrize("ids, ok", [
    ([b"d1", b"doc-2"], True),
    ([b"!", b"~", b"\x80\xff"], True),   # 0x21, 0x7E and UTF-8 continuation bytes are allowed
    ([b"a b"], False),                   # 0x20: a space splits a TREC line
    ([b"\x1f"], False),
    ([b"\x00"], False),
    ([b"a\x7f"], False),                 # DEL, and only DEL among the high bytes
    ([b"ok", b"\x7f", b" "], False),     # both kinds at once
])
def test_id_bytes_ok_is_the_json_scans_id_check(ids, ok):
    """grammar.id_bytes_ok: the compiled JSON scan's check of the ids' concatenated bytes,
    the same rule as bad_id (no byte up to 0x20, no 0x7F)."""
    import numpy as np

    data = np.frombuffer(b"".join(ids), dtype=np.uint8)
    assert grammar.id_bytes_ok(data) is ok
    assert (grammar.bad_id([i.decode("utf-8", "surrogateescape") for i in ids]) is None) is ok
