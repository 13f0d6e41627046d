"""The compiled mapping reader (cranfield/_mapscan.c) against the Python path it stands in
for: the same Run and Qrels, the same refusal (reason and field), the same numbers.

Each test reads the same input twice, once with ``_mapscan`` and once with it patched out of
``cranfield.io`` and ``cranfield.ranking`` (the path an install without a C compiler takes),
and compares everything. Under CI the extension must be there, so the compiled path is the
one tested."""

from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cranfield
import cranfield.io
import cranfield.ranking
from cranfield import InputError

_mapscan = cranfield.io._mapscan
needs_ext = pytest.mark.skipif(_mapscan is None and os.environ.get("CI") != "true",
                               reason="cranfield._mapscan not built (no C compiler)")


def test_the_extension_is_built_under_ci():
    if os.environ.get("CI") == "true":
        assert _mapscan is not None, "make venv builds cranfield._mapscan: CI must test it"


def _python_path(monkeypatch):
    monkeypatch.setattr(cranfield.io, "_mapscan", None)
    monkeypatch.setattr(cranfield.ranking, "_mapscan", None)


def _read(reader, mapping):
    try:
        return reader(mapping)
    except InputError as exc:
        return ("refused", str(exc), exc.field, exc.code)


def _same(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
        return
    assert a.topics == b.topics
    assert np.array_equal(a.topic_index, b.topic_index)
    assert a.docids.tolist() == b.docids.tolist()
    values = ("scores", "grades")
    for name in values:
        if hasattr(a, name):
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and np.array_equal(x, y)
            assert x.flags.writeable and y.flags.writeable


# ids: mostly valid, sometimes empty, with whitespace or control characters, non-ASCII,
# lone surrogates; values: floats, ints (some beyond a double or int64), bools, numpy
# scalars, strings, NaN and infinities
_ids = st.one_of(
    st.sampled_from(["d1", "d2", "d10", "D", "doc-é", "Δ", "x" * 30, "q", "1", "10", "2"]),
    st.text(min_size=0, max_size=4),
    st.sampled_from(["", "a b", "a\tb", "a\x7f", "\udcff", "\x85x", "é\x00"]),
)
_scores = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70),
    st.sampled_from([0.0, -0.0, 1.5, 2**53 + 1, True, False, "1.0", None, np.float64(2.5),
                     np.float32(1.5), np.int64(3), np.bool_(True), 10**400]),
)
_grades = st.one_of(
    st.integers(-5, 5), st.integers(-2**65, 2**65),
    st.sampled_from([1.0, 2.5, -1.0, 2.0**53, 2.0**53 + 2, 2**53 + 1, float("nan"),
                     True, "2", np.int64(1), np.float64(3.0), 9.0e18, 2**63 - 1, -2**63]),
)


def _mapping(values):
    inner = st.dictionaries(_ids, values, max_size=6)
    return st.dictionaries(_ids, inner, max_size=5)


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=_mapping(_scores))
def test_runs_read_the_same(run):
    compiled = _read(cranfield.read_run, run)
    with pytest.MonkeyPatch.context() as mp:
        _python_path(mp)
        python = _read(cranfield.read_run, run)
    _same(compiled, python)


@needs_ext
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qrels=_mapping(_grades))
def test_qrels_read_the_same(qrels):
    compiled = _read(cranfield.read_qrels, qrels)
    with pytest.MonkeyPatch.context() as mp:
        _python_path(mp)
        python = _read(cranfield.read_qrels, qrels)
    _same(compiled, python)


def test_a_grade_beyond_two_to_the_53_is_read_exactly_beside_a_float_grade(monkeypatch):
    # the Python path once read {2**53 + 1, 1.0} through doubles: 2**53 + 1 became 2**53
    qrels = {"q": {"a": 2**53 + 1, "b": 1.0}}
    assert cranfield.read_qrels(qrels).grades.tolist() == [2**53 + 1, 1]
    _python_path(monkeypatch)
    assert cranfield.read_qrels(qrels).grades.tolist() == [2**53 + 1, 1]


@needs_ext
def test_what_the_compiled_pass_declines_it_leaves_to_python():
    docids = np.empty(1, dtype=object)
    assert _mapscan.scan({"q": {"d": True}}, ["q"], False, docids) is None
    assert _mapscan.scan({"q": {"d": math.inf}}, ["q"], False, docids) is None
    assert _mapscan.scan({"q": {"d d": 1.0}}, ["q"], False, docids) is None
    assert _mapscan.scan({"q": {"d": 1.5}}, ["q"], True, docids) is None
    assert _mapscan.scan({"q": {"d": 2**64}}, ["q"], True, docids) is None
    assert _mapscan.scan({"q": {"d": np.int64(1)}}, ["q"], False, docids) is None
    values, lengths = _mapscan.scan({"q": {"d": 2}}, ["q"], False, docids)
    assert np.frombuffer(values).tolist() == [2.0] and docids.tolist() == ["d"]
    with pytest.raises(ValueError, match="object array"):
        _mapscan.scan({"q": {"d": 2}}, ["q"], False, np.empty(2, dtype=object))


def _evaluation_pair(seed: int):
    rnd = random.Random(seed)
    vocab = ["d", "d1", "d10", "doc-é", "Δ", "x" * 20, "a", "b", "c"] + \
        [f"n{i}" for i in range(40)]
    run, qrels = {}, {}
    for t in range(12):
        docs = rnd.sample(vocab, rnd.randint(1, 30))
        run[f"t{t}"] = {d: rnd.choice([1.0, 2.0, 2.5, 3, rnd.random(), 1e39]) for d in docs}
    for t in range(3, 15):
        qrels[f"t{t}"] = {d: rnd.choice([-1, 0, 0, 1, 2, 3])
                          for d in rnd.sample(vocab, rnd.randint(1, 25))}
    return run, qrels


@needs_ext
@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_evaluations_give_the_same_numbers(seed, profile, monkeypatch):
    """lookup (judged docids' scores) and positions (their places in the scores) too: ties,
    scores beyond a C float (the 9.0.8 profile reads them as float32), topics on one side."""
    run, qrels = _evaluation_pair(seed)
    measures = ["all_trec", "ndcg_cut.3", "P.2", "success.1"]
    compiled = cranfield.evaluate(run, qrels, measures, profile=profile)
    _python_path(monkeypatch)
    python = cranfield.evaluate(run, qrels, measures, profile=profile)
    assert compiled.per_topic == python.per_topic
    assert compiled.aggregate == python.aggregate


@needs_ext
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_positions_are_the_segmented_searches(dtype):
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 40, 200)
    scores = np.concatenate([np.sort(rng.integers(0, 6, n).astype(dtype))[::-1]
                             for n in lengths]).astype(dtype)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    lo = np.repeat(starts, 3)
    hi = np.repeat(starts + lengths, 3)
    query = rng.integers(-1, 7, len(lo)).astype(dtype)
    first, second = (np.frombuffer(b, np.int64) for b in _mapscan.positions(
        scores, lo.astype(np.int64), hi.astype(np.int64), query))
    seg = cranfield.ranking.segmented_search
    want_first = seg(scores, lo, hi, lambda v, i: query[i] < v)
    want_second = seg(scores, want_first, hi, lambda v, i: query[i] <= v)
    assert first.tolist() == want_first.tolist()
    assert second.tolist() == want_second.tolist()
    with pytest.raises(ValueError, match="out of range"):
        _mapscan.positions(scores, np.array([0]), np.array([len(scores) + 1]),
                           query[:1])


@needs_ext
def test_lookup_is_dict_get_with_nan_for_missing():
    run = {"a": {"x": 1.0, "y": 2}, "b": {}}
    got = np.frombuffer(_mapscan.lookup(run, ["a", "b", "c"], [0, 3, 4, 5],
                                        ["x", "z", "y", "x", "x"]))
    assert got[0] == 1.0 and got[2] == 2.0 and np.isnan(got[[1, 3, 4]]).all()
    assert _mapscan.lookup({"a": ["x"]}, ["a"], [0, 1], ["x"]) is None  # not a dict
