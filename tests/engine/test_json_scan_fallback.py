"""The JSON body read without the compiled accelerator (issue #29): where
``cranfield.inputs._mapscan`` was not built (no C compiler at install), every JSON body is read by
orjson and the mapping readers. That path is supported: each test here reads the same input with the
extension and with it patched away (tests/extension_off.py: ``json_body._kernels = False`` and
``_mapscan`` None in every engine module importing it, as an install without it has them) and
holds the answers equal — the same run and qrels, digests and measures, or the same refusal
(code, field, message)."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest
from extension_off import without_extension
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cranfield import InputError, evaluate, read_qrels, read_run
from cranfield.inputs import json_body
from cranfield.inputs.json_body import Columns, columns_sha256, decode_body, read_json_mapping

MEASURES = ["map", "P.5", "ndcg_cut.10", "recip_rank", "num_ret", "num_rel_ret"]


class _PythonPath:
    """A context in which the engine reads as an install without the extension does."""

    def __enter__(self):
        self.mp = pytest.MonkeyPatch()
        without_extension(self.mp)
        return self

    def __exit__(self, *exc):
        self.mp.undo()


def _read_request(raw: bytes):
    """What service/evaluation_request.py does with a JSON body: the compiled scan when it
    applies, else orjson (json_body.loads) and the mapping readers. Returns (run, qrels, which
    path read the run) or the refusal as (code, field, message)."""
    try:
        body = decode_body(raw, min_bytes=0)
        path = "scan"
        if body is None:
            body = json_body.loads(raw)
            path = "orjson"
        run, qrels = body["run"], body["qrels"]
        run = run.value if isinstance(run, Columns) else read_run(run, name="run")
        qrels = qrels.value if isinstance(qrels, Columns) else read_qrels(qrels, name="qrels")
        return run, qrels, path
    except InputError as exc:
        return (exc.code, exc.field, str(exc))


def _outcome(raw: bytes):
    """:func:`_read_request`'s answer, or ("not JSON", orjson's message)."""
    try:
        return _read_request(raw)
    except orjson.JSONDecodeError as exc:
        return ("not JSON", str(exc))


def _same(a, b) -> None:
    """Two Runs (or two Qrels) hold the same rows, in the same order within each topic."""
    assert a.topics == b.topics
    assert a.to_dict() == b.to_dict()
    assert columns_sha256(a) == columns_sha256(b)


docid = st.text(alphabet=st.characters(blacklist_categories=("Cs",), min_codepoint=32,
                                       blacklist_characters='\\"'), min_size=1, max_size=5)
tricky = st.sampled_from(["},", "a:b", "x y", "{", "é", "日本", "0", "-", "d\t"])
score = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(min_value=-10**17, max_value=10**17),
    st.floats(min_value=-1e3, max_value=1e3).map(lambda x: round(x, 3)),
)
runs = st.dictionaries(st.one_of(docid, tricky), st.dictionaries(
    st.one_of(docid, tricky), score, min_size=1, max_size=6), min_size=1, max_size=5)


@settings(max_examples=200, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(run=runs, spelled=st.sampled_from(["", "1.0e0", "01", "-0", "1e400", '"1"', "true"]))
def test_same_answers_with_and_without_the_extension(run, spelled):
    qrels = {t: {d: i % 3 for i, d in enumerate(docs)} for t, docs in run.items()}
    raw = orjson.dumps({"run": run, "qrels": qrels})
    if spelled:  # one score spelled another way (some of them not JSON, some refused)
        raw = raw.replace(b":" + orjson.dumps(next(iter(next(iter(run.values())).values()))),
                          b":" + spelled.encode(), 1)
    compiled = _outcome(raw)
    with _PythonPath():
        assert json_body.scan_module() is None
        assert decode_body(raw, min_bytes=0) is None  # nothing is read by the scan
        python = _outcome(raw)
    if len(compiled) == 3 and not isinstance(compiled[0], str):
        assert python[2] == "orjson"
        _same(compiled[0], python[0])
        _same(compiled[1], python[1])
        a = evaluate(compiled[1], compiled[0], MEASURES)
        with _PythonPath():
            b = evaluate(python[1], python[0], MEASURES)
        assert a.per_topic == b.per_topic and a.aggregate == b.aggregate
    else:
        assert compiled == python  # the same refusal: code, field and message


@pytest.mark.parametrize("raw", [
    b'{"run": {"q": {"d": 1, "d": 2}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1}, "q": {"e": 2}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1}, "q": {"d": 2}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d\\u00e9": 1, "d\xc3\xa9": 2}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": "1"}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d d": 1}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"": 1}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1}}, "qrels": {"q": {"d": 1.5}}}',
    b'{"run": {"q": {"d": 1}}, "qrels": {"q": {"d": 1, "d": 0}}}',
    b'{"run": {"q": {"d": 1}}, "qrels": {"q": {"d": 1}}, "qrels": {"q": {"d": 1}}}',
    b'{"run": {"q": {"d": 1e999}}, "qrels": {"q": {"d": 1}}}',
])
def test_same_answers_on_repeats_and_refusals(raw):
    """Keys given twice (a topic twice is one topic; a docid twice is refused), escapes,
    non-ids, non-numbers: the same run or the same refusal either way."""
    compiled = _outcome(raw)
    with _PythonPath():
        python = _outcome(raw)
    if isinstance(compiled[0], str):
        assert compiled == python  # code, field and message
    else:
        _same(compiled[0], python[0])
        _same(compiled[1], python[1])


def test_read_json_mapping_without_the_extension(monkeypatch):
    """What a queued job does with a stored mapping: the same Run and Qrels either way, and
    the same refusal."""
    monkeypatch.setattr(json_body, "FAST_JSON_MIN_BYTES", 0)
    run = {f"q{t}": {f"d{i}": math.ldexp(i, -3) - t for i in range(30)} for t in range(12)}
    raw_run, raw_qrels = orjson.dumps(run), b'{"q3": {"d1": 2}, "q1": {"x": -1, "d4": 0}}'
    fast_run, fast_qrels = read_json_mapping(raw_run, "run"), read_json_mapping(raw_qrels,
                                                                                 "qrels")
    # the scan read it where the extension is there: only it leaves hashes
    assert (fast_run.docid_fnv is not None) == (json_body.scan_module() is not None)
    with _PythonPath():
        slow_run = read_json_mapping(raw_run, "run")
        slow_qrels = read_json_mapping(raw_qrels, "qrels")
        assert slow_run.docid_fnv is None
        with pytest.raises(InputError) as slow_err:
            read_json_mapping(b'{"q": {"d": 1, "d": 2}}', "run")
    _same(fast_run, slow_run)
    _same(fast_qrels, slow_qrels)
    assert fast_qrels.grades.tolist() == slow_qrels.grades.tolist()
    with pytest.raises(InputError) as fast_err:
        read_json_mapping(b'{"q": {"d": 1, "d": 2}}', "run")
    assert (fast_err.value.code, fast_err.value.field, str(fast_err.value)) == \
        (slow_err.value.code, slow_err.value.field, str(slow_err.value))


def test_the_extension_reads_large_bodies_when_built(require):
    """With the extension (every install that had a C compiler; CI's), the scan is the
    compiled one and reads the body: a Columns value, with the docid hashes only it leaves."""
    require(json_body.scan_module() == "cranfield.inputs._mapscan",
            "cranfield.inputs._mapscan is built with its JSON scan (pip install with a C compiler)")
    raw = orjson.dumps({"run": {"q": {"d": 1.5, "e": 2}}, "qrels": {"q": {"d": 1}}})
    body = decode_body(raw, min_bytes=0)
    assert isinstance(body["run"], Columns) and isinstance(body["qrels"], Columns)
    assert body["run"].value.scores.tolist() == [1.5, 2.0]
    assert body["run"].value.docid_fnv.dtype == np.uint64
