"""The JSON shapes of judgment groups and preferences (issue #28) are read by the same
readers as their text (cranfield.inputs.judgment_files.read_qrels_jg / read_prefs): the library
gives the same values from either, and refuses what the text refuses, naming the path instead of
the line."""

from __future__ import annotations

from pathlib import Path

import pytest

import cranfield
from cranfield.errors import InputError
from cranfield.inputs.judgment_files import read_prefs, read_qrels_jg

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


def shape(path: Path, fmt: str) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if fmt == "prefs":
            qid, jg, jsg, docno, level = fields
            out.setdefault(qid, {}).setdefault(jg, {}).setdefault(jsg, {})[docno] = \
                float(level)
        else:
            qid, jg, docno, rel = fields
            out.setdefault(qid, {}).setdefault(jg, {})[docno] = int(rel)
    return out


@pytest.mark.parametrize("fmt, qrels, run", [
    ("prefs", "prefs.test", "prefs.results.test"),
    ("qrels_prefs", "qrels.test", "results.test"),
    ("qrels_jg", "qrels.123", "results.test"),
])
def test_json_shape_evaluates_as_its_text(fmt, qrels, run):
    text = cranfield.evaluate(TE / qrels, TE / run, qrels_format=fmt,
                              profile="trec_eval-10")
    mapped = cranfield.evaluate(shape(TE / qrels, fmt), TE / run, qrels_format=fmt,
                                profile="trec_eval-10")
    assert mapped.per_topic == text.per_topic
    assert mapped.summary() == text.summary()
    assert len(text.per_topic) >= 3


@pytest.mark.parametrize("text, mapping, reason", [
    ("q1 g d1 x\n", {"q1": {"g": {"d1": "x"}}}, "is not an integer"),
    ("q1 g d1 1.5\n", {"q1": {"g": {"d1": 1.5}}}, "is not an integer"),
    ("# nothing\n", {}, "no judgments"),
])
def test_judgment_groups_refused_alike(text, mapping, reason):
    with pytest.raises(InputError, match=reason) as from_text:
        read_qrels_jg(text.encode(), name="qrels")
    with pytest.raises(InputError, match=reason) as from_json:
        read_qrels_jg(mapping, name="qrels")
    assert from_text.value.line == 1 or not mapping
    assert from_json.value.line is None


@pytest.mark.parametrize("mapping, path", [
    ({"q1": {"g": {"s": {"d1": True}}}}, "qrels.q1.g.s.d1"),
    ({"q1": {"g": {"s": {"d1": None}}}}, "qrels.q1.g.s.d1"),
    ({"q1": {"g": {"s": {}}}}, "qrels.q1.g.s"),
    ({"q1": {"g": {"s t": {"d1": 1}}}}, "qrels.q1.g.s t"),
    ({"q1": {"g": ["d1"]}}, "qrels.q1.g"),
])
def test_bad_preference_shapes_name_the_path(mapping, path):
    with pytest.raises(InputError) as caught:
        read_prefs(mapping, name="qrels")
    assert caught.value.location == path


def test_a_cycle_is_refused_from_either_shape():
    text = b"q1 g s1 a 2\nq1 g s1 b 1\nq1 g s2 b 2\nq1 g s2 a 1\n"
    mapping = {"q1": {"g": {"s1": {"a": 2, "b": 1}, "s2": {"b": 2, "a": 1}}}}
    run = "q1 Q0 a 1 2.0 r\nq1 Q0 b 2 1.0 r\n"
    messages = []
    for qrels in (read_prefs(text, name="qrels"), read_prefs(mapping, name="qrels")):
        with pytest.raises(InputError, match="inconsistent") as caught:
            cranfield.evaluate(qrels, run, qrels_format="prefs")
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
