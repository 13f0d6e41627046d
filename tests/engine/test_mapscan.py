"""The compiled mapping reader (cranfield/inputs/_mapscan.c) against the Python path it stands in
for: the same Run and Qrels, the same refusal (reason and field), the same numbers.

Each test reads the same input twice, once with ``_mapscan`` and once with it patched out of
every engine module importing it (tests/extension_off.py: the path an install without a C
compiler takes), and compares everything. Under CI the extension must be there, so the compiled
path is the one tested."""

from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest
from extension_off import without_extension
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cranfield
import cranfield.inputs.docid_keys
import cranfield.inputs.io
import cranfield.inputs.mappings
import cranfield.inputs.ranking
import cranfield.inputs.trec_fast
from cranfield import InputError

_mapscan = cranfield.inputs.mappings._mapscan
needs_ext = pytest.mark.skipif(_mapscan is None and os.environ.get("CI") != "true",
                               reason="cranfield.inputs._mapscan not built (no C compiler)")


def test_the_extension_is_built_under_ci():
    if os.environ.get("CI") == "true":
        assert _mapscan is not None, "make venv builds cranfield.inputs._mapscan: CI must test it"


def _python_path(monkeypatch):
    without_extension(monkeypatch)


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
@pytest.mark.parametrize("reader, values", [(cranfield.read_run, _scores),
                                           (cranfield.read_qrels, _grades)],
                         ids=["run", "qrels"])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mappings_read_the_same(reader, values, data):
    mapping = data.draw(_mapping(values))
    compiled = _read(reader, mapping)
    with pytest.MonkeyPatch.context() as mp:
        _python_path(mp)
        python = _read(reader, mapping)
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
    compiled = cranfield.evaluate(qrels, run, measures, profile=profile)
    _python_path(monkeypatch)
    python = cranfield.evaluate(qrels, run, measures, profile=profile)
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
    seg = cranfield.inputs.ranking.segmented_search
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


# ---- run files: the compiled line parser and the per-topic hash tables ---------------------

def _read_text(text, monkeypatch, compiled: bool, chunk: int | None = None):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
        if not compiled:
            without_extension(mp)
        if chunk is not None:
            mp.setattr(cranfield.inputs.trec_fast, "_PARSE_CHUNK", chunk)
        try:
            run = cranfield.read_run(text)
        except InputError as exc:
            return ("refused", str(exc), exc.field, exc.code, exc.line)
    return run


def _same_run(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert a == b
        return
    assert a.topics == b.topics and a.runid == b.runid
    assert np.array_equal(a.topic_index, b.topic_index)
    assert _docids(a) == _docids(b)
    assert a.scores.tobytes() == b.scores.tobytes()  # bit for bit (-0.0 too)


def _docids(run) -> list[str]:
    return run.docids.tolist() if isinstance(run.docids, np.ndarray) else \
        run.docids.to_pylist()


_SCORE_SPELLINGS = ["1", "-1", "0", "-0", "0.0", "-0.0", "2.5", "007", "0.000123", "1e5",
                    "1E5", "1e-5", "1e+5", "-3.25e2", "1.", ".5", "-.5", "+1", "1e", "e5",
                    "inf", "-inf", "nan", "0x1p3", "1_000", "1e400", "1e-400", "1.5.2",
                    "9007199254740993", "123456789012345678901234567890", "0.1e-22",
                    "4.9e-324", "1.7976931348623157e308", "12345678901234567e-5", "٣"]
_FIELD = st.sampled_from(["q1", "q2", "10", "2", "d", "d1", "d10", "x" * 20, "#c", "é",
                          "a\x7fb", "Q0", "s"])


@st.composite
def _run_texts(draw):
    """Run text whose lines are mostly plain, sometimes not (a score spelled oddly, a
    tab among spaces, a field too many or too few, an empty line, CRLF, a comment, a
    non-ASCII or control byte, a docid twice)."""
    delim = draw(st.sampled_from([" ", "\t"]))
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        topic = draw(st.sampled_from(["q1", "q2", "q10", "3", "#x"]))
        fields = [topic, "Q0", draw(_FIELD), str(draw(st.integers(0, 9))),
                  draw(st.one_of(st.sampled_from(_SCORE_SPELLINGS),
                                 st.floats(allow_nan=False, width=64).map(repr),
                                 st.decimals(allow_nan=False, allow_infinity=False,
                                             places=draw(st.integers(0, 20))).map(str))),
                  "run"]
        odd = draw(st.integers(0, 30))
        if odd == 0:
            fields.append("extra")
        elif odd == 1:
            fields.pop(3)
        line = delim.join(fields)
        if odd == 2:
            line = line.replace(delim, " \t", 1)
        elif odd == 3:
            line += "\r"
        elif odd == 4:
            line = ""
        lines.append(line)
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))


@needs_ext
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_run_texts())
def test_run_text_reads_the_same_compiled_or_not(text):
    compiled = _read_text(text, None, compiled=True)
    python = _read_text(text, None, compiled=False)
    _same_run(compiled, python)
    if not isinstance(compiled, tuple):  # pieces of one line each: the same run
        _same_run(_read_text(text, None, compiled=True, chunk=1), compiled)


@needs_ext
@settings(max_examples=2000, deadline=None)
@given(mantissa=st.integers(0, 10**20), point=st.integers(0, 22), exp=st.integers(-30, 30),
       negative=st.booleans(), with_exp=st.booleans())
def test_plain_scores_are_read_as_correctly_rounded_doubles(mantissa, point, exp, negative,
                                                            with_exp):
    digits = str(mantissa)
    if point and point < len(digits):
        digits = digits[:-point] + "." + digits[-point:]
    spelled = ("-" if negative else "") + digits + (f"e{exp}" if with_exp else "")
    got = _mapscan.parse_run(f"q Q0 d 1 {spelled} r\n".encode(), ord(" "), {})
    assert got is not None
    assert np.frombuffer(got[3], np.float64)[0] == float(spelled)
    assert np.signbit(np.frombuffer(got[3], np.float64)[0]) == np.signbit(float(spelled))


@needs_ext
def test_the_line_parser_declines_what_it_does_not_read():
    def parse(line):
        return _mapscan.parse_run(line.encode("utf-8"), ord(" "), {})
    assert parse("q Q0 d 1 2.5 r\n") is not None
    for line in ["q Q0 d 1 inf r\n", "q Q0 d 1 1e400 r\n", "q Q0 d 1 +1 r\n",
                 "q Q0 d 1 1. r\n", "q Q0 d 1 2 r x\n", "q Q0 d 1 2\n", "q  Q0 d 1 2 r\n",
                 "q Q0 d 1 2 r\r\n", "#q Q0 d 1 2 r\n", "q Q0 dé 1 2 r\n", "q\tQ0 d 1 2 r\n",
                 "q Q0 d\x7f 1 2 r\n"]:
        assert parse(line) is None, line
    codes = {"q": 0}
    got = _mapscan.parse_run(b"p Q0 a 1 2 r\n\nq Q0 b 1 3 r\np Q0 c 1 4 r", ord(" "), codes)
    assert codes == {"q": 0, "p": 1}
    assert np.frombuffer(got[0], np.int32).tolist() == [1, 0, 1]
    assert np.frombuffer(got[1], np.int32).tolist() == [0, 1, 2, 3]
    assert bytes(got[2]) == b"abc"


@needs_ext
@pytest.mark.parametrize("source_kind", ["bytes", "memoryview", "path"])
def test_a_large_run_reads_the_same_in_pieces(source_kind, tmp_path, monkeypatch):
    """(A memoryview is how the API hands an upload's part over: cut without a copy.)"""
    rnd = random.Random(3)
    lines = [f"q{t} Q0 doc{rnd.randrange(10**6)}-{i} {i} {rnd.random():.6f} run"
             for t in range(40) for i in range(300)]
    text = "\n".join(lines) + "\n"
    source = text.encode()
    if source_kind == "memoryview":
        source = memoryview(b"x" + source)[1:]
    elif source_kind == "path":
        source = tmp_path / "run.txt"
        source.write_bytes(text.encode())
        source = str(source)
    whole = _read_text(source, monkeypatch, compiled=True)
    for chunk in (1, 100, 4096, 65536):
        pieces = _read_text(source, monkeypatch, compiled=True, chunk=chunk)
        _same_run(pieces, whole)
        assert len(pieces.docids.chunks) > 1  # read in pieces indeed
    _same_run(whole, _read_text(source, monkeypatch, compiled=False))


def _texts_with(seed: int, scattered: bool, duplicate: bool) -> tuple[str, str]:
    rnd = random.Random(seed)
    vocab = ["d", "d1", "d10", "doc-é", "x" * 30, "a", "b"] + [f"n{i}" for i in range(30)]
    run_lines = []
    for t in range(8):
        docs = rnd.sample(vocab, rnd.randint(1, 20))
        if duplicate and t == 5:
            docs.append(docs[0])
        run_lines += [f"t{t} Q0 {d} {r} {rnd.choice([1, 2, 2.5, rnd.random()])} s"
                      for r, d in enumerate(docs)]
    if scattered:
        rnd.shuffle(run_lines)
    qrels_lines = [f"t{t} {sub} {d} {rnd.choice([0, 1, 2])}" for t in range(2, 10)
                   for d in rnd.sample(vocab, rnd.randint(1, 15))
                   for sub in (0, 1)[:rnd.choice([1, 2])]]
    return "\n".join(run_lines) + "\n", "\n".join(qrels_lines) + "\n"


@needs_ext
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("scattered", [False, True])
@pytest.mark.parametrize("hashing", ["real", "constant"])
def test_topic_tables_equal_the_sorted_keys(seed, scattered, hashing, monkeypatch):
    """block_duplicates and block_join (a run's topics in blocks) against the sorted keys,
    also when every docid hashes alike (each pair then compared as strings), with qrels
    that judge a docid twice in a topic (two subtopics) and a docid twice in the run."""
    if hashing == "constant":
        monkeypatch.setattr(cranfield.inputs.docid_keys, "docid_hashes",
                            lambda docids: np.full(len(docids), 7, dtype=np.uint64))
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
    for duplicate in (False, True):
        run_text, qrels_text = _texts_with(seed, scattered, duplicate)
        adhoc_text = "".join(line + "\n" for line in qrels_text.splitlines()
                             if line.split()[1] == "0")
        answers = []
        for compiled in (True, False):
            with pytest.MonkeyPatch.context() as mp:
                if not compiled:
                    without_extension(mp)
                try:
                    run = cranfield.read_run(run_text)
                    ev = cranfield.evaluate(cranfield.read_qrels(adhoc_text), run,
                                            ["all_trec", "P.2", "ndcg_cut.3"])
                    # subtopic qrels: one docid on several rows of a topic
                    div = cranfield.evaluate(cranfield.read_qrels(qrels_text,
                                                                       diversity=True), run,
                                             ["alpha_nDCG@5", "P_IA@3", "strec@5"])
                    answers.append((ev.per_topic, ev.aggregate, div.per_topic, div.aggregate))
                except InputError as exc:
                    answers.append(("refused", str(exc), exc.line, exc.code))
        assert answers[0] == answers[1]
        assert (answers[0][0] == "refused") == duplicate


@pytest.mark.parametrize("compiled", [True, False])
def test_qrels_read_from_a_mapping_are_not_searched_for_repeats_again(compiled, monkeypatch):
    """A dict holds each docid once per topic: qrels read from one are marked so, and an
    evaluation of them (read once, evaluated again and again) skips the search for a docid
    judged twice, which cost 1 s of a 1.5 s evaluation at L."""
    import cranfield.measures.diversity as diversity

    if not compiled:
        _python_path(monkeypatch)
    qrels = cranfield.read_qrels({"q1": {"a": 1, "b": 0}, "q2": {"a": 2}})
    run = cranfield.read_run({"q1": {"a": 1.0, "b": 2.0}, "q2": {"c": 1.0, "a": 0.5}})
    assert qrels.unique_judgments
    want = cranfield.evaluate(qrels, run, ["map", "ndcg", "P.1"]).per_topic

    def searched(*args):
        raise AssertionError("searched for repeats again")
    monkeypatch.setattr(diversity, "docid_codes", searched)
    assert cranfield.evaluate(qrels, run, ["map", "ndcg", "P.1"]).per_topic == want
    assert want["q1"]["map"] == pytest.approx(0.5) and want["q2"]["P_1"] == 0.0


# ---- hostile arguments (a review of _mapscan.c found these) -------------------------------

@needs_ext
def test_pairs_of_hashes_that_collide_on_purpose_go_to_the_sorting_path(monkeypatch):
    """A docid hash is public: equal 64-bit hashes of different docids can be made. A topic of
    300 run and 300 judged docids that all hash alike would give 90,000 candidate pairs:
    block_join declines past 8 a row and the sorted keys match them by string instead."""
    same = np.full(300, 7, dtype=np.uint64)
    lo, hi = np.array([0], np.int64), np.array([300], np.int64)
    assert _mapscan.block_join(same, lo, hi, same, lo, hi, np.array([0], np.int64)) is None
    assert len(np.frombuffer(_mapscan.block_duplicates(same, lo, hi), np.int64)) == 300
    run_text = "".join(f"q Q0 d{i} {i} {1000 - i} s\n" for i in range(300))
    qrels_text = "".join(f"q 0 d{i * 2} {i % 3}\n" for i in range(300))
    monkeypatch.setattr(cranfield.inputs.docid_keys, "docid_hashes",
                        lambda docids: np.full(len(docids), 7, dtype=np.uint64))
    got = _read_text(run_text, monkeypatch, compiled=True)
    want = _read_text(run_text, monkeypatch, compiled=False)
    measures = ["map", "ndcg", "P.10", "num_rel_ret"]
    assert cranfield.evaluate(qrels_text, got, measures).aggregate == \
        cranfield.evaluate(qrels_text, want, measures).aggregate


@needs_ext
def test_a_docid_whose_hash_changes_the_lists_cannot_pull_them_away():
    victims = []

    class Rude(str):
        def __hash__(self):
            for victim in victims:
                victim.clear()
            return str.__hash__(self)

        def __eq__(self, other):
            return str.__eq__(self, other)

    docids, topics, bounds = [Rude("a"), "b", Rude("c")], [Rude("q")], [0, 3]
    victims += [docids, topics, bounds]
    got = np.frombuffer(_mapscan.lookup({"q": {"a": 1.0, "b": 2.0}}, topics, bounds, docids))
    assert got[:2].tolist() == [1.0, 2.0] and np.isnan(got[2])


@needs_ext
def test_scan_fills_only_a_fresh_docid_array():
    used = np.array([object()], dtype=object)
    with pytest.raises(ValueError, match="fresh"):
        _mapscan.scan({"q": {"d": 1.0}}, ["q"], False, used)
    with pytest.raises(ValueError, match="space or a tab"):
        _mapscan.parse_run(b"q Q0 d 1 2 r\n", 0xFF, {})


@pytest.mark.parametrize("docid, refused", [("\ud800", True), ("x\udfff", True),
                                            ("\udcff", False), ("d\udc80", False)])
def test_surrogates_in_mapping_ids_read_alike(docid, refused, monkeypatch):
    """A lone surrogate cannot be encoded: refused as an id by both paths (the Python path
    raised UnicodeEncodeError, the compiled one read it). The surrogates that stand for bytes
    (U+DC80..U+DCFF, as text read from bytes holds them) are read by both."""
    answers = []
    for compiled in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            if not compiled:
                _python_path(mp)
            answers.append(_read(cranfield.read_run, {"q": {docid: 1.0, "e": 2.0}}))
            answers.append(_read(cranfield.read_qrels, {"q": {docid: 1}}))
    for a in answers:
        assert isinstance(a, tuple) == refused
        if refused:
            assert "lone surrogate" in a[1] and a[3] == "invalid-input"
    _same(answers[0], answers[2])
    _same(answers[1], answers[3])


def test_number_subclasses_read_alike(monkeypatch):
    """An int subclass converts through its own __float__/__index__ on the Python path:
    the compiled pass leaves it to that path (it read the raw value)."""
    class Odd(int):
        def __float__(self):
            return 99.0

        def __index__(self):
            return 77

    run = {"q": {"a": Odd(1), "b": 2.5}}
    qrels = {"q": {"a": 1, "b": 0}}
    compiled = cranfield.read_run(run)
    got = cranfield.evaluate(qrels, run, ["map", "recip_rank"]).aggregate
    _python_path(monkeypatch)
    python = cranfield.read_run(run)
    assert compiled.scores.tolist() == python.scores.tolist() == [99.0, 2.5]
    assert cranfield.evaluate(qrels, run, ["map", "recip_rank"]).aggregate == got
    assert got["recip_rank"] == 1.0  # a (99.0) ranks first
