"""The qrels_jg and prefs text readers read by the project's one input grammar
(cranfield/inputs/grammar.py; review R1 F3, F4, F10): fields split on ASCII space and tab only,
control characters refused naming the line, a jg rel read as a plain qrels grade (ASCII
decimal within int64), a rel_level as a run's score; the JSON shapes give the same answer
or the same refusal."""

from __future__ import annotations

import re

import pytest

import cranfield
from cranfield.errors import InputError
from cranfield.inputs.judgment_files import read_prefs, read_qrels_jg

RUN = "q1 Q0 d\u00a01 1 3.0 r\nq1 Q0 d2 2 2.0 r\nq1 Q0 d\u20281 3 1.0 r\n"

# (id, qrels_jg text, its JSON shape, map_avgjg, prefs_num_prefs_ful of the same as prefs)
SAME = [
    ("no-break-space", "q1 g d\u00a01 1\nq1 g d2 0\n", {"q1": {"g": {"d\u00a01": 1, "d2": 0}}},
     1.0, 1),
    ("line-separator", "q1 g d\u20281 1\nq1 g d2 0\n", {"q1": {"g": {"d\u20281": 1, "d2": 0}}},
     1 / 3, 0),
]


@pytest.mark.parametrize("text, mapping, value, ful", [c[1:] for c in SAME],
                         ids=[c[0] for c in SAME])
def test_unicode_in_ids_is_part_of_the_id(text, mapping, value, ful):
    for judged in (text, text.encode(), mapping):
        ev = cranfield.evaluate(judged, RUN, ["map_avgjg"], qrels_format="qrels_jg")
        assert ev.per_topic["q1"]["map_avgjg"] == pytest.approx(value)
    prefs = text.replace("q1 g ", "q1 g s ")
    shape = {"q1": {"g": {"s": mapping["q1"]["g"]}}}
    for judged in (prefs, shape):
        ev = cranfield.evaluate(judged, RUN, ["prefs_num_prefs_ful"], qrels_format="prefs")
        assert ev.per_topic["q1"]["prefs_num_prefs_ful"] == ful


# (id, reader, text, line, reason): refused naming the line, as plain qrels refuse
REFUSED = [
    ("jg-control", "qrels_jg", "q1 g d1 1\nq1 g d\x012 1\n", 2, "control character U+0001"),
    ("jg-del", "qrels_jg", "q1 g d\x7f1 1\n", 1, "control character U+007F"),
    ("jg-underscore", "qrels_jg", "q1 g d1 1_0\n", 1, "not a plain decimal integer"),
    ("jg-arabic-digit", "qrels_jg", "q1 g d1 \u0661\n", 1, "not a plain decimal integer"),
    ("jg-huge", "qrels_jg", "q1 g d1 100000000000000000000000000000\n", 1,
     "outside the 64-bit integer range"),
    ("jg-not-utf8", "qrels_jg", b"q1 g d1 1\nq1 g d\xff 1\n", 2, "not valid UTF-8"),
    ("prefs-control", "prefs", "q1 g s d\x011 1\n", 1, "control character U+0001"),
    ("prefs-underscore", "prefs", "q1 g s d1 1_0\n", 1, "not a plain decimal number"),
    ("prefs-arabic-digit", "prefs", "q1 g s d1 \u0661\n", 1, "not a plain decimal number"),
    ("prefs-infinity", "prefs", "q1 g s d1 infinity\n", 1, "not a finite number"),
    ("qrels_prefs-underscore", "qrels_prefs", "q1 g d1 1_0\n", 1,
     "not a plain decimal number"),
]


@pytest.mark.parametrize("fmt, text, line, reason", [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_text_outside_the_grammar_is_refused_naming_the_line(fmt, text, line, reason):
    with pytest.raises(InputError) as caught:
        if fmt == "qrels_jg":
            read_qrels_jg(text, name="j")
        else:
            read_prefs(text, name="j", qrels=fmt == "qrels_prefs")
    assert caught.value.line == line and reason in str(caught.value)


@pytest.mark.parametrize("mapping, reason", [
    ({"q1": {"g": {"d\x011": 1}}}, "control character U+0001"),
    ({"q1": {"g": {"d1": 10 ** 30}}}, "outside the 64-bit integer range"),
    ({"q1": {"g": {"d1": 1e30}}}, "beyond 2^53"),
    ({"q1": {"g": {"d1": 1.5}}}, "rel 1.5 is not an integer"),
])
def test_json_shape_refuses_as_plain_qrels_mappings(mapping, reason):
    with pytest.raises(InputError, match=re.escape(reason)):
        read_qrels_jg(mapping, name="qrels")
    plain = {"q1": {"d1": mapping["q1"]["g"].get("d1", 1)}} if "d1" in mapping["q1"]["g"] \
        else {"q1": mapping["q1"]["g"]}
    with pytest.raises(InputError, match=re.escape(reason.removeprefix("rel 1.5 "))):
        cranfield.read_qrels(plain)


def test_json_integral_float_is_read_as_its_integer():
    jgs = read_qrels_jg({"q1": {"g": {"d1": 2.0}}}, name="qrels")
    assert jgs.topics == {"q1": {"g": {"d1": 2}}}
    assert type(jgs.topics["q1"]["g"]["d1"]) is int
