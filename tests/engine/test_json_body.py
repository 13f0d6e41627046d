"""The compiled JSON reader (cranfield.inputs.json_body) against orjson: it must read every body it
accepts exactly as orjson + the mapping readers do, and decline (None) everything else."""

from __future__ import annotations

import json

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cranfield import InputError, evaluate, read_qrels, read_run
from cranfield.inputs import grammar, json_body
from cranfield.inputs.json_body import (
    Columns,
    columns_sha256,
    decode_body,
    mapping_sha256,
    read_json_mapping,
)

# the compiled kernels must load (the C extension built, cranfield.inputs._mapscan):
# skipped locally without them, a failure under CI=true (tests/conftest.py)
pytestmark = pytest.mark.requires(json_body.warm_up(),
                                  reason="the compiled JSON kernels load (json_body.warm_up())")

MEASURES = ["map", "P.5", "ndcg_cut.10", "recip_rank", "num_ret"]


def _same_run(fast, mapping) -> None:
    slow = read_run(mapping, name="run")
    assert fast.topics == slow.topics
    assert fast.to_dict() == slow.to_dict()
    for t in fast.topics:  # row order within a topic is the order sent
        rows_f = np.flatnonzero(fast.topic_index == fast.topics.index(t))
        rows_s = np.flatnonzero(slow.topic_index == slow.topics.index(t))
        assert fast.docids_at(rows_f).tolist() == slow.docids_at(rows_s).tolist()
        assert fast.scores[rows_f].tobytes() == slow.scores[rows_s].tobytes()
    assert columns_sha256(fast) == columns_sha256(slow) == mapping_sha256(mapping)


docid = st.text(alphabet=st.characters(blacklist_categories=("Cs",), min_codepoint=32,
                                       blacklist_characters='\\"'), min_size=1, max_size=6)
tricky = st.sampled_from(["},", "}, ", "a:b", "x y", "{", "}", ",", "é", "日本", "0", "01", "-"])
score = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(min_value=-10**15, max_value=10**15),
    st.floats(min_value=-1e6, max_value=1e6).map(lambda x: round(x, 4)),
)
runs = st.dictionaries(st.one_of(docid, tricky), st.dictionaries(
    st.one_of(docid, tricky), score, max_size=8), min_size=1, max_size=6)


@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(run=runs, indent=st.booleans(), pieces=st.booleans())
def test_fast_path_reads_what_orjson_reads(run, indent, pieces, monkeypatch_module):
    monkeypatch_module.setattr(json_body, "PARALLEL_MIN_BYTES", 16 if pieces else 8 << 20)
    qrels = {t: {d: int(i % 3) for i, d in enumerate(docs)} for t, docs in run.items()}
    text = json.dumps({"run": run, "qrels": qrels, "measures": MEASURES},
                      indent=2 if indent else None, ensure_ascii=False).encode()
    body = decode_body(text, min_bytes=0)
    ids = list(run) + [d for docs in run.values() for d in docs]
    if grammar.bad_id(ids) is not None:  # "x y": not an id; the slow path says which
        assert body is None, text
        with pytest.raises(InputError, match="an id may not"):
            read_run(run, name="run")
        return
    if any(not docs for docs in run.values()) and body is None:
        return  # empty topics are left to the slow path's messages
    assert body is not None, text
    assert isinstance(body["run"], Columns) and body["measures"] == MEASURES
    _same_run(body["run"].value, run)
    slow_q = read_qrels(qrels, name="qrels")
    fast_q = body["qrels"].value
    assert fast_q.topics == slow_q.topics and fast_q.to_dict() == slow_q.to_dict()
    assert columns_sha256(fast_q) == columns_sha256(slow_q) == mapping_sha256(qrels)
    if any(run.values()):
        a = evaluate(fast_q, body["run"].value, MEASURES)
        b = evaluate(qrels, run, MEASURES)
        assert a.per_topic == b.per_topic and a.aggregate == b.aggregate


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.mark.parametrize("number", [
    "0",
    "-0", "-0.0", "-0e0",  # the integer -0 is 0 to orjson; -0.0 and -0e0 keep their sign
    "7", "-12", "1.5", "0.1", "2.5e3", "2.5E-3", "1e22", "1e-22", "1e23",
    "0.30000000000000004", "123456789012345678", "1.7976931348623157e308", "5e-324",
    "9007199254740993", "0.1234567890123456789", "1.0000000000000002", "-1.5e+2",
])
def test_numbers_round_exactly_as_orjson(number):
    raw = f'{{"run": {{"q": {{"d": {number}, "e": 1}}}}, "qrels": {{"q": {{"d": 1}}}}}}'
    body = decode_body(raw.encode(), min_bytes=0)
    expected = float(orjson.loads(raw)["run"]["q"]["d"])
    assert body is not None
    got = body["run"].value.scores[0]
    assert got == expected
    assert np.signbit(got) == np.signbit(expected)
    assert columns_sha256(body["run"].value) == mapping_sha256(orjson.loads(raw)["run"])


@pytest.mark.parametrize("raw", [
    # not JSON: orjson rejects, so the fast path must decline
    b'{"run": {"q": {"d": 01}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1.}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": .5}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": +1}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1,}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1}},}',
    b'{"run": {"q": {"d": 1} "r": {"d": 1}}}',
    b'{"run": {"q": {"d": NaN}}}',
    b'{"run": {"q": {"d": Infinity}}}',
    b'{"run": {"q": {"d\x01": 1}}}',
    b'{"run": {"q": {"d": 1}}, "qrels": {"q": {"d": 1}}',
    b'{"run": {"q": {"d": 1}}, "qrels": {"q": {"d": 1}}} x',
    b'{"run": {"q": {"\xff": 1}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1}}, "measures": [1,]}',
    b'{"run": {"q": {"d": 1e999}}, "qrels": {"q": {"d": 1}}}',
    # JSON, but not for the fast path: the slow path keeps orjson's meaning or its message
    b'{"run": {"q": {"d": 1, "d": 2}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1}, "q": {"e": 2}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d\\u00e9": 1}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": "1"}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": true}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": [1]}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1}}, "run": {"q": {"d": 2}}}',
    b'{"run": {"q": {"d": 1}}, "qrels": {"q": {"d": 1.5}}}',
    b'[{"run": {"q": {"d": 1}}}]',
])
def test_declines_what_it_cannot_read_exactly(raw):
    assert decode_body(raw, min_bytes=0) is None


def test_escaped_member_names_are_one_member_given_twice():
    # issue 27: no longer JSON's last wins; the fast path declines and loads() refuses
    raw = b'{"r\\u0075n": {"q": {"x": 5}}, "run": {"q": {"d": 1}}, "qrels": {"q": {"d": 1}}}'
    assert decode_body(raw, min_bytes=0) is None
    with pytest.raises(InputError, match="'run' is given twice"):
        json_body.loads(raw)


def test_pieces_cut_inside_a_string_are_discarded(monkeypatch):
    """A docid ending in ``},`` puts ``},"`` in the text and lures the cutter; only reads
    that meet at their cuts count, and the sequential read settles the rest."""
    monkeypatch.setattr(json_body, "PARALLEL_MIN_BYTES", 8)
    run = {f"q{t}": {f"a{i}}},": float(i) for i in range(40)} for t in range(5)}
    raw = orjson.dumps({"run": run, "qrels": {"q1": {"a3},": 1}}})
    assert b'},"' in raw
    body = decode_body(raw, min_bytes=0)
    assert body is not None
    _same_run(body["run"].value, run)


def test_digest_ignores_key_order_and_number_spelling():
    a = decode_body(b'{"run": {"b": {"x": 1.50}, "a": {"y": 2, "z": 3e0}}}', min_bytes=0)
    b = decode_body(b'{"run": {"a": {"y": 2.0, "z": 3}, "b": {"x": 1.5}}}', min_bytes=0)
    c = decode_body(b'{"run": {"a": {"z": 3, "y": 2}, "b": {"x": 1.5}}}', min_bytes=0)
    assert columns_sha256(a["run"].value) == columns_sha256(b["run"].value)
    # the order of documents within a topic is part of what was sent
    assert columns_sha256(a["run"].value) != columns_sha256(c["run"].value)


def test_read_json_mapping_matches_mapping_reader(monkeypatch):
    monkeypatch.setattr(json_body, "FAST_JSON_MIN_BYTES", 0)
    run = {"q2": {"d1": 0.5, "d2": 1.25}, "q1": {"d3": 3.0}}
    fast = read_json_mapping(orjson.dumps(run), "run")
    _same_run(fast, run)
    qrels = read_json_mapping(b'{"q1": {"d3": 2}, "q0": {"x": -1}}', "qrels")
    assert qrels.topics == ["q0", "q1"] and qrels.grades.tolist() == [-1, 2]
    with pytest.raises(Exception, match="not valid JSON"):
        read_json_mapping(b'{"q1": {"d3": }', "run")


def test_kernel_docid_hashes_are_fnv1a_and_matching_uses_them(monkeypatch):
    """The per-row hashes the scan leaves on a run equal docid_keys.fnv1a_hashes, and matching with
    the bitmap prefilter finds exactly the judged documents."""
    from cranfield.inputs import matching
    from cranfield.inputs.docid_keys import fnv1a_hashes

    run = {f"q{t}": {f"doc-{t * 7 + i}é" if i % 5 == 0 else f"d{i}": float(i % 13)
                     for i in range(300)} for t in range(4)}
    qrels = {f"q{t}": {f"d{i}": i % 3 for i in range(0, 300, 11)} | {"d0": 1, "zz": 2}
             for t in range(4)}
    body = decode_body(orjson.dumps({"run": run, "qrels": qrels}), min_bytes=0)
    fast = body["run"].value
    assert fast.docid_fnv is not None
    assert (fast.docid_fnv == fnv1a_hashes(fast.docids)).all()
    calls = []
    monkeypatch.setattr(matching, "PREFILTER_ROWS_PER_JUDGED", 0)
    monkeypatch.setattr(matching, "fnv1a_hashes", lambda s: calls.append(1) or fnv1a_hashes(s))
    a = evaluate(qrels, fast, ["all_trec"])
    b = evaluate(qrels, run, ["all_trec"])
    assert a.per_topic == b.per_topic and a.aggregate == b.aggregate
    assert calls  # the prefilter ran
