"""Issue 27, misread 1: a key given twice in a JSON object is read as TREC text reads the same
lines, never "last wins" (what JSON readers do, silently).

- a docid twice in a topic of a run or qrels: the refusal TREC text gets for the same lines
  (``duplicate-docid`` / ``duplicate-judgment``, the same sentence), naming ``run.q1.d1``;
- a topic given twice: one topic holding the documents of both, as a topic on non-adjacent
  lines of TREC text is (so a docid in both is the refusal above);
- any other member given twice (``measures``, ``options.depth``): refused, naming its path.

Every way JSON is read agrees: the compiled reader (``decode_body``, ``read_json_mapping``,
the compiled repeated-key scan for large texts) and the plain one (orjson + the standard
library's reader); the differential tests hold them to one answer."""

from __future__ import annotations

import json
import re

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cranfield import InputError, read_qrels, read_run
from cranfield.inputs import json_body
from cranfield.inputs.json_body import decode_body, loads, read_json_mapping

pytestmark = pytest.mark.requires(json_body.warm_up(),
                                  reason="the compiled JSON kernels load (json_body.warm_up())")


@pytest.fixture(params=["plain", "compiled"])
def reader(request, monkeypatch):
    """Both readers: orjson + the standard library's reader, or the compiled scans (from 0
    bytes up, as they run on large bodies)."""
    monkeypatch.setattr(json_body, "FAST_JSON_MIN_BYTES",
                        0 if request.param == "compiled" else 1 << 40)
    return request.param


def _outcome(fn, *args, **kwargs):
    """(code, location, reason) of the refusal, or ("ok", value)."""
    try:
        return ("ok", fn(*args, **kwargs))
    except InputError as exc:
        return (exc.code, exc.location, exc.reason)


def _body(raw: bytes):
    """What the service reads from a body: the compiled reader's columns, or loads()."""
    body = decode_body(raw, min_bytes=0) if json_body.FAST_JSON_MIN_BYTES == 0 else None
    if body is None:
        body = loads(raw)
    return {k: (v.value.to_dict() if isinstance(v, json_body.Columns) else v)
            for k, v in body.items()}


REFUSED = [
    # the case: last wins read 9.0
    (b'{"run": {"q1": {"d1": 0.1, "d1": 9.0}}, "qrels": {"q1": {"d1": 1}}}',
     ("duplicate-docid", "run.q1.d1", "docid 'd1' appears twice in topic 'q1'")),
    (b'{"run": {"q1": {"d1": 1}}, "qrels": {"q1": {"d1": 1, "d2": 0, "d1": 0}}}',
     ("duplicate-judgment", "qrels.q1.d1", "docid 'd1' is judged twice for topic 'q1'")),
    # a topic given twice holding the same docid: TREC text's two lines of one topic
    (b'{"run": {"q1": {"d1": 1}, "q2": {"d1": 1}, "q1": {"d1": 2}}}',
     ("duplicate-docid", "run.q1.d1", "docid 'd1' appears twice in topic 'q1'")),
    (b'{"qrels": {"q1": {"d1": 1}, "q1": {"d2": 0, "d1": 1}}}',
     ("duplicate-judgment", "qrels.q1.d1", "docid 'd1' is judged twice for topic 'q1'")),
    # a docid spelled with an escape is the same key
    (b'{"run": {"q1": {"d1": 1, "d\\u0031": 2}}}',
     ("duplicate-docid", "run.q1.d1", "docid 'd1' appears twice in topic 'q1'")),
    # a compared run is named as its other errors name it
    (b'{"runs": [{"name": "a", "run": {"q": {"d": 1}}}, {"name": "b", "run": '
     b'{"q": {"d": 1, "d": 2}}}], "qrels": {"q": {"d": 1}}}',
     ("duplicate-docid", "runs[1].q.d", "docid 'd' appears twice in topic 'q'")),
    # a topic named like a member is a topic
    (b'{"run": {"run": {"d": 1, "d": 2}}}',
     ("duplicate-docid", "run.run.d", "docid 'd' appears twice in topic 'run'")),
    # members of the request
    (b'{"run": {"q": {"d": 1}}, "measures": ["map"], "measures": ["P_5"]}',
     ("invalid-request", "measures", "'measures' is given twice in one JSON object (a JSON "
      "reader keeps only one of them, silently): give it once")),
    (b'{"run": {"q": {"d": 1}}, "run": {"q": {"e": 1}}}',
     ("invalid-request", "run", "'run' is given twice in one JSON object (a JSON reader "
      "keeps only one of them, silently): give it once")),
    (b'{"r\\u0075n": {"q": {"x": 5}}, "run": {"q": {"d": 1}}}',
     ("invalid-request", "run", "'run' is given twice in one JSON object (a JSON reader "
      "keeps only one of them, silently): give it once")),
    (b'{"options": {"depth": 1, "depth": 2}, "run": {"q": {"d": 1}}}',
     ("invalid-request", "options.depth", "'depth' is given twice in one JSON object (a "
      "JSON reader keeps only one of them, silently): give it once")),
    (b'{"record": [{"a": 1, "a": 1}]}',
     ("invalid-request", "record[0].a", "'a' is given twice in one JSON object (a JSON "
      "reader keeps only one of them, silently): give it once")),
    (b'{"run": {"q": {"d": 1}, "q": 5}}',
     ("invalid-input", "run.q", "topic 'q' is given twice, not both times as an object "
      "{docid: value}")),
]


@pytest.mark.parametrize("raw,expected", REFUSED)
def test_refused_naming_the_path(raw, expected, reader):
    assert _outcome(_body, raw) == expected


MERGED = [
    (b'{"run": {"q1": {"d1": 0.5}, "q2": {"d1": 1}, "q1": {"d2": 0.25}}}',
     {"run": {"q1": {"d1": 0.5, "d2": 0.25}, "q2": {"d1": 1.0}}}),
    (b'{"qrels": {"q1": {"d1": 1}, "q1": {"d2": 0}}, "run": {"q1": {"d2": 1.5}}}',
     {"qrels": {"q1": {"d1": 1, "d2": 0}}, "run": {"q1": {"d2": 1.5}}}),
    (b'{"run": {"q1": {}, "q1": {"d": 1}}}', {"run": {"q1": {"d": 1.0}}}),
]


@pytest.mark.parametrize("raw,expected", MERGED)
def test_topic_given_twice_is_one_topic(raw, expected, reader):
    body = _body(raw)
    assert set(body) == set(expected)
    for kind, mapping in expected.items():
        read = read_run if kind == "run" else read_qrels
        assert read(body[kind], name=kind).to_dict() == read(mapping, name=kind).to_dict()


def test_without_repeats_loads_is_orjson():
    raw = b'{"run": {"q": {"d": 1, "e": -0, "f": 1e300}}, "m": [{"a": [1, {"b": 2}]}]}'
    assert loads(raw) == orjson.loads(raw)
    with pytest.raises(orjson.JSONDecodeError):
        loads(b'{"a": 1,}')
    with pytest.raises(orjson.JSONDecodeError):  # orjson's refusals stand (the standard
        loads(b'{"a": NaN, "a": 1}')            # library would read NaN)


@pytest.mark.parametrize("kind", ["run", "qrels"])
def test_stored_mapping_of_a_queued_job(kind, reader):
    raw = b'{"q1": {"d1": 1, "d1": 2}}'
    got = _outcome(read_json_mapping, raw, kind)
    code = "duplicate-docid" if kind == "run" else "duplicate-judgment"
    assert got[:2] == (code, f"{kind}.q1.d1")
    merged = read_json_mapping(b'{"q1": {"d1": 1}, "q2": {"d": 1}, "q1": {"d2": 2}}', kind)
    assert merged.to_dict() == {"q1": {"d1": 1, "d2": 2}, "q2": {"d": 1}}


# -- the same lines as TREC text ---------------------------------------------------------------

pair_lists = st.lists(st.tuples(st.sampled_from(["q1", "q2", "q3"]), st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)), min_size=1,
    max_size=4)),
    min_size=1, max_size=4)


def _json_text(pairs, kind) -> bytes:
    """The pairs as JSON text, keys repeated as given (no JSON writer repeats a key)."""
    topics = ", ".join(f'"{t}": {{' + ", ".join(f'"{d}": {v}' for d, v in docs) + "}"
                       for t, docs in pairs)
    return f'{{"{kind}": {{{topics}}}}}'.encode()


def _trec_text(pairs, kind) -> bytes:
    if kind == "run":
        return "".join(f"{t} Q0 {d} 1 {v} r\n" for t, docs in pairs for d, v in docs).encode()
    return "".join(f"{t} 0 {d} {v}\n" for t, docs in pairs for d, v in docs).encode()


@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pairs=pair_lists, kind=st.sampled_from(["run", "qrels"]),
       compiled=st.booleans())
def test_json_reads_as_trec_text_reads_the_same_lines(pairs, kind, compiled, monkeypatch):
    """Each (topic, docid, value) a line of TREC text, or a member of JSON: both give the same
    topics and documents, or the same refusal (code and sentence)."""
    monkeypatch.setattr(json_body, "FAST_JSON_MIN_BYTES", 0 if compiled else 1 << 40)
    reader = read_run if kind == "run" else read_qrels
    text = _trec_text(pairs, kind)
    if not text:
        return
    want = _outcome(reader, text, name=kind)
    got = _outcome(lambda: reader(_body(_json_text(pairs, kind))[kind], name=kind))
    if want[0] == "ok":
        assert got[0] == "ok", got
        assert got[1].to_dict() == want[1].to_dict()
    else:  # the same code and sentence (TREC text's adds where the first line was); with
        # several docids twice, each reader may name another of them
        assert got[0] == want[0]
        pattern = re.compile(r"docid '(\w)' (?:appears twice in|is judged twice for) topic "
                             r"'(\w+)'")
        named_json, named_text = pattern.fullmatch(got[2]), pattern.match(want[2])
        assert named_json and named_text
        def template(m):
            return m[0].replace(f"'{m[1]}'", "'_'").replace(f"'{m[2]}'", "'_'")

        assert template(named_json) == template(named_text)
        assert want[2][named_text.end():] in ("", f" (first on line {want[2][-2]})")
        doc, topic = named_json[1], named_json[2]
        assert sum(d == doc for t, docs in pairs if t == topic for d, _ in docs) > 1
        assert got[1] == f"{kind}.{topic}.{doc}"


# -- the compiled scan against the standard library ---------------------------------------------

keys = st.sampled_from(["a", "b", "ab", "a\\u0062", "\\u0061", "é", ""])
values = st.recursive(st.integers(0, 2).map(str) | st.just('"a"'),
                      lambda inner: st.lists(inner, max_size=3).map(
                          lambda xs: "[" + ", ".join(map(str, xs)) + "]")
                      | st.lists(st.tuples(keys, inner), max_size=4).map(
                          lambda kv: "{" + ", ".join(f'"{k}": {v}' for k, v in kv) + "}"),
                      max_leaves=12)


@settings(max_examples=500, derandomize=True, deadline=None)
@given(text=values)
def test_compiled_scan_finds_every_repeat(text):
    raw = text.encode()
    scan = int(json_body._load_kernels().repeated_keys(np.frombuffer(raw, np.uint8)))
    plain = json_body._has_repeats_plain(raw)
    if plain:
        assert scan == 1
    elif scan == 1:  # "maybe": only for an escaped key, which the plain reader settles
        assert b"\\" in raw
    else:
        assert scan == 0
    json.loads(raw)  # (the texts are JSON)
