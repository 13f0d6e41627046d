"""The compiled pieces around the mapping pass (issue #30) against the Python they stand in for.

- ``_mapscan.mapping_topics``: a {topic: {docid: value}} mapping's topics in strcmp order and
  its number of entries, exactly :func:`cranfield.inputs.mappings._checked_topics`' order and
  ``sum(map(len, ...))``; it declines (None) whatever the Python path must read or refuse,
  and the refusal is then word for word the one of an install without the extension.
- The id grammar of the compiled passes (eight bytes at a time) against
  :func:`cranfield.inputs.grammar.id_problem`, for every byte value at every position.
- ``_mapscan.topic_dicts`` (``Evaluation.per_topic``) against the dict comprehension it
  replaced, and an evaluation's per-topic values and topic sets with the extension on and off.
"""

from __future__ import annotations

import os
from collections import OrderedDict, defaultdict
from types import MappingProxyType

import pytest
from extension_off import without_extension
from hypothesis import given, settings
from hypothesis import strategies as st

import cranfield
from cranfield.errors import CranfieldError
from cranfield.inputs import grammar, mappings
from cranfield.inputs.run_qrels import byte_key

_mapscan = mappings._mapscan
needs_ext = pytest.mark.skipif(_mapscan is None and os.environ.get("CI") != "true",
                               reason="cranfield.inputs._mapscan not built (no C compiler)")
_EXAMPLES = 60 if os.environ.get("CI") == "true" else 150

# topic ids whose code point (= UTF-8 byte) order differs from naive orders: non-ASCII of
# every width, prefixes, digits
_ids = st.text(st.sampled_from(list("aAzZ09-_.") + ["é", "ÿ", "Δ", "中", "\U0001f600", "\xa0"]),
               min_size=1, max_size=12)


def _refusal(fn, *args):
    try:
        fn(*args)
    except CranfieldError as exc:
        return type(exc).__name__, str(exc), getattr(exc, "field", None)
    return None


@needs_ext
@settings(max_examples=_EXAMPLES, deadline=None)
@given(topics=st.dictionaries(_ids, st.dictionaries(_ids, st.floats(-3, 3), max_size=3),
                              max_size=12),
       how=st.sampled_from(["dict", "defaultdict", "ordered"]))
def test_mapping_topics_are_the_python_paths(topics, how):
    mapping = {"dict": dict, "defaultdict": lambda d: defaultdict(dict, d),
               "ordered": OrderedDict}[how](reversed(list(topics.items())))
    got = _mapscan.mapping_topics(mapping)
    assert got is not None
    assert got[0] == mappings._checked_topics(mapping, "run", "scores")
    assert got[0] == sorted(topics, key=byte_key)
    assert got[1] == sum(map(len, topics.values()))
    assert all(d is mapping[t] for t, d in zip(got[0], got[2], strict=True))


@needs_ext
@settings(max_examples=_EXAMPLES, deadline=None)
@given(data=st.dictionaries(_ids, st.dictionaries(_ids, st.integers(-2, 3), max_size=4),
                            max_size=6),
       how=st.sampled_from(["dict", "defaultdict", "ordered"]), grades=st.booleans())
def test_scan_and_rank_mapping_read_the_listed_dicts_as_the_mapping(data, how, grades):
    """The compiled passes given the topics' dicts (as mapping_topics lists them) read
    exactly what they read looking each topic up in the mapping."""
    import numpy as np

    wrap = {"dict": dict, "defaultdict": lambda d: defaultdict(int, d),
            "ordered": OrderedDict}[how]
    mapping = wrap({t: wrap(d) for t, d in data.items()})
    topics, rows, dicts = _mapscan.mapping_topics(mapping)
    by_lookup, listed = np.empty(rows, dtype=object), np.empty(rows, dtype=object)
    a = _mapscan.scan(mapping, topics, grades, by_lookup)
    b = _mapscan.scan(dicts, topics, grades, listed)
    assert a == b and by_lookup.tolist() == listed.tolist()
    qdocids = sorted({d for docs in data.values() for d in docs})
    bounds = _i64([0, len(qdocids)])
    to_qrels = _i64([0 if i % 2 == 0 else -1 for i in range(len(topics))])
    args = (topics, to_qrels, bounds, qdocids, False, _i64([1, 2]), 1 << 20)
    assert _mapscan.rank_mapping(mapping, *args) == _mapscan.rank_mapping(dicts, *args)
    assert _mapscan.rank_mapping(dicts[:-1], *args) is None if dicts else True


class _Str(str):
    pass


@needs_ext
@pytest.mark.parametrize("mapping", [
    {1: {"d": 1.0}},                                  # a topic id not a string
    {_Str("q"): {"d": 1.0}},                          # a str subclass: Python reads it
    {"": {"d": 1.0}}, {"q 1": {"d": 1.0}}, {"q\x7f": {"d": 1.0}}, {"q\udc80": {"d": 1.0}},
    {"q\t": {}}, {"q": [("d", 1.0)]}, {"q": MappingProxyType({"d": 1.0})},
    {"q": 1.0}, {"a": {"d": 1.0}, "q\n": {"d": 1.0}},
], ids=repr)
def test_mapping_topics_declines_what_python_reads_or_refuses(mapping, monkeypatch):
    assert _mapscan.mapping_topics(mapping) is None
    assert _mapscan.mapping_topics(MappingProxyType(mapping)) is None
    on = _refusal(cranfield.read_run, mapping)
    on_eval = _refusal(cranfield.evaluate, {"a": {"d": 1}}, mapping, ["map"])
    on_qrels = _refusal(cranfield.read_qrels, {t: {"d": 1} if isinstance(v, dict) else v
                                               for t, v in mapping.items()})
    without_extension(monkeypatch)
    assert _refusal(cranfield.read_run, mapping) == on
    assert _refusal(cranfield.evaluate, {"a": {"d": 1}}, mapping, ["map"]) == on_eval
    assert _refusal(cranfield.read_qrels, {t: {"d": 1} if isinstance(v, dict) else v
                                           for t, v in mapping.items()}) == on_qrels


@needs_ext
def test_the_id_grammar_eight_bytes_at_a_time():
    """Each byte value at each position of ids of 1 to 19 characters (the word loop and its
    tail), as topic ids and as docids (rank_mapping's check)."""
    for length in range(1, 20):
        for position in range(length):
            for byte in range(256):
                chars = ["x"] * length
                chars[position] = chr(byte)
                ident = "".join(chars)
                ok = grammar.id_problem(ident) is None
                assert (_mapscan.mapping_topics({ident: {}}) is not None) == ok, \
                    (length, position, byte)
                ranked = _mapscan.rank_mapping(
                    {"q": {ident: 1.0}}, ["q"], _i64([0]), _i64([0, 1]), [ident], False,
                    _i64([]), 1 << 20)
                assert (ranked is not None) == ok, (length, position, byte)


def _i64(values):
    import numpy as np

    return np.asarray(values, dtype=np.int64)


@needs_ext
@settings(max_examples=_EXAMPLES, deadline=None)
@given(n_topics=st.integers(0, 6), keys=st.lists(_ids, max_size=4, unique=True),
       data=st.data())
def test_topic_dicts_are_the_dict_comprehension(n_topics, keys, data):
    topics = [f"t{i}" for i in range(n_topics)]
    columns = [data.draw(st.lists(st.one_of(st.floats(allow_nan=False), st.integers(), st.text()),
                                  min_size=n_topics, max_size=n_topics)) for _ in keys]
    rows = data.draw(st.lists(st.integers(0, max(n_topics - 1, 0)), max_size=n_topics)) \
        if n_topics else []
    expected = {topics[r]: {k: col[r] for k, col in zip(keys, columns, strict=True)}
                for r in rows}
    got = _mapscan.topic_dicts(topics, rows, keys, columns)
    assert got == expected
    assert list(got) == list(expected)
    assert [list(v) for v in got.values()] == [list(v) for v in expected.values()]


@needs_ext
@pytest.mark.parametrize("args", [
    (["t"], [1], ["k"], [[1.0]]),        # a row past the topics
    (["t"], [-1], ["k"], [[1.0]]),
    (["t"], [0], ["k"], [[]]),           # a column shorter than the topics
    (["t"], [0], ["k", "j"], [[1.0]]),   # a column missing
])
def test_topic_dicts_refuses_what_does_not_fit(args):
    with pytest.raises(ValueError):
        _mapscan.topic_dicts(*args)


RUN = {"q2": {"a": 2.0, "b": 1.0, "c": 1.0}, "q1": {"x": 0.5, "é": 0.5, "y": 0.25},
       "only-run": {"z": 1.0}, "q\u0394": {"a": 3.0}}
QRELS = {"q1": {"x": 1, "é": 2, "w": 1}, "q2": {"b": 1, "c": 0}, "only-qrels": {"k": 1},
         "q\u0394": {"a": 1}}


@pytest.mark.parametrize("options", [{}, {"complete_topics": True}, {"judged_only": True}])
@pytest.mark.parametrize("same_topics", [False, True])
def test_per_topic_and_topic_sets_with_and_without_the_extension(options, same_topics,
                                                                 monkeypatch):
    run, qrels = dict(RUN), dict(QRELS)
    if same_topics:
        run.pop("only-run")
        qrels.pop("only-qrels")
    measures = ["map", "P.2", "ndcg_cut.3", "num_ret", "runid", "relstring", "num_q"]

    def outcome():
        ev = cranfield.evaluate(qrels, run, measures, **options)
        sets = ev.topics
        return (ev.per_topic, list(ev.per_topic), ev.aggregate,
                (sets.evaluated, sets.run_only, sets.qrels_only))

    on = outcome()
    without_extension(monkeypatch)
    assert outcome() == on
    if same_topics:
        assert on[3][1:] == ([], [])
    else:
        assert on[3][1] == ["only-run"] and on[3][2] == ["only-qrels"]


@needs_ext
def test_rank_mapping_leaves_a_docid_judged_twice_in_a_topic_to_python():
    """Ranks are distinct within a topic: qrels rows naming one docid twice (never from a
    reader, which refuses or merges them) would give two hits one rank; the pass declines."""
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    args = (["q"], _i64([0]), _i64([0, 3]), ["b", "c", "b"], False, _i64([]), 1 << 20)
    assert _mapscan.rank_mapping(run, *args) is None
    got = _mapscan.rank_mapping(run, ["q"], _i64([0]), _i64([0, 2]), ["c", "b"], False,
                                _i64([1]), 1 << 20)
    import numpy as np

    qrow, rank = (np.frombuffer(b, np.int64).tolist() for b in got[2:4])
    assert (qrow, rank) == ([1, 0], [2, 3])
