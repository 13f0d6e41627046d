"""The one compiled pass over a run mapping (cranfield/inputs/_rankpass.c, ``rank_mapping``)
against the paths it stands in for.

- ``rank_mapping`` itself: the ranks, labels and tie groups it gives equal those of
  :func:`cranfield.inputs.ranking.rank_run` over the same run read as columns (inside a tie
  group of one label, rank_run's ranks are a permutation: compared as sorted tuples), and it
  declines (None) what it must leave to Python.
- ``evaluate`` of a mapping (dict, defaultdict, OrderedDict, and Mappings the compiled
  passes do not read) equals ``evaluate`` of the same data as TREC text read by the line
  reader: per-topic values, the aggregate, topic sets, cutoff ties and the warnings, in both
  profiles, with depth, -J, -c and -l.
- Refusals word for word between the compiled mapping path and the Python one (the
  extension patched out, as an install without a C compiler runs).
"""

from __future__ import annotations

import os
import random
from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np
import pytest
from extension_off import without_extension
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cranfield
import cranfield.inputs.io
import cranfield.inputs.mappings
import cranfield.inputs.ranking
from cranfield.errors import CranfieldError
from cranfield.inputs.ranking import rank_run
from cranfield.reports.result_document import warnings_for

_mapscan = cranfield.inputs.mappings._mapscan
needs_ext = pytest.mark.skipif(_mapscan is None and os.environ.get("CI") != "true",
                               reason="cranfield.inputs._mapscan not built (no C compiler)")
_EXAMPLES = 60 if os.environ.get("CI") == "true" else 150


def _python_path(mp):
    without_extension(mp)


class UserMapping(Mapping):
    """A Mapping that is no dict: the compiled passes leave it to Python."""

    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def _shuffled_ordered(data, rnd):
    out = OrderedDict()
    keys = list(data)
    rnd.shuffle(keys)
    for k in keys:
        out[k] = data[k]
    if keys:
        out.move_to_end(keys[0])  # its order is no longer its dict's
    return out


def _wrap(data: dict, how: str, rnd: random.Random):
    """``data`` ({topic: {docid: value}}) in container ``how``, outer and inner."""
    if how == "dict":
        return {t: dict(d) for t, d in data.items()}
    if how == "defaultdict":
        out = defaultdict(dict)
        for t, d in data.items():
            inner = defaultdict(float)
            inner.update(d)
            out[t] = inner
        return out
    if how == "ordered":
        return _shuffled_ordered({t: _shuffled_ordered(d, rnd) for t, d in data.items()}, rnd)
    if how == "mixed":  # one container type outside, others inside
        return OrderedDict((t, defaultdict(int, d) if i % 2 else dict(d))
                           for i, (t, d) in enumerate(data.items()))
    if how == "proxy":
        return MappingProxyType({t: MappingProxyType(dict(d)) for t, d in data.items()})
    if how == "user":
        return UserMapping({t: UserMapping(d) for t, d in data.items()})
    raise AssertionError(how)


CONTAINERS = ["dict", "defaultdict", "ordered", "mixed", "proxy", "user"]

# ids: byte order matters for docno ties (é, Δ and a 4-byte character sort after ASCII)
_docids = st.sampled_from(["a", "b", "c", "d1", "d10", "d2", "D", "é", "Δ", "\U0001f600", "zz",
                           "doc-9", "10", "9"])
_topics = st.sampled_from(["q1", "q2", "q10", "Q", "é", "3"])
# scores tied exactly, or only as float32 (1.0 and 1.0 + 1e-9; 1e39 and 2e39 are inf as a
# C float), and +-0.0
_scores = st.one_of(st.sampled_from([1.0, 1.0 + 1e-9, 2.0, 2, 0.0, -0.0, -1.5, 1e39, 2e39,
                                     3.25, 7]),
                    st.floats(-4, 4, allow_nan=False).map(lambda x: round(x, 1)))
_grades = st.integers(-1, 3)


@st.composite
def _pairs(draw):
    run = draw(st.dictionaries(_topics, st.dictionaries(_docids, _scores, max_size=9),
                               max_size=4))
    qrels = draw(st.dictionaries(_topics, st.dictionaries(_docids, _grades, max_size=8),
                                 max_size=4))
    # a topic on both sides, mostly, with overlapping documents
    if run and draw(st.booleans()):
        t = next(iter(run))
        qrels[t] = {d: draw(_grades) for d in list(run[t])[: draw(st.integers(0, 9))]} | \
            qrels.get(t, {})
    # (TREC text holds no topic without a line: empty topics are for the refusal tests)
    return ({t: d for t, d in run.items() if d}, {t: d for t, d in qrels.items() if d})


def _trec_text(run: dict, qrels: dict) -> tuple[str, str]:
    run_lines = [f"{t} Q0 {d} {r} {s!r} tag" for t, docs in run.items()
                 for r, (d, s) in enumerate(docs.items(), 1)]
    qrels_lines = [f"{t} 0 {d} {g}" for t, docs in qrels.items() for d, g in docs.items()]
    return "\n".join(run_lines) + "\n", "\n".join(qrels_lines) + "\n"


def _canon(values):
    """Values comparable with ==: NaN (a measure undefined for a topic) as a marker."""
    if isinstance(values, dict):
        return {k: _canon(v) for k, v in values.items()}
    if isinstance(values, float) and values != values:
        return "NaN"
    return values


def _outcome(qrels, run, measures, **options):
    try:
        ev = cranfield.evaluate(qrels, run, measures, **options)
    except CranfieldError as exc:
        return ("refused", type(exc).__name__, str(exc), getattr(exc, "field", None),
                getattr(exc, "code", None))
    sets = ev.topics
    return {"per_topic": _canon(ev.per_topic), "aggregate": _canon(ev.aggregate),
            "sets": (sets.evaluated, sets.run_only, sets.qrels_only),
            "ties": {k: v.tolist() for k, v in ev.cutoff_ties.items()},
            "warnings": warnings_for(ev, "cli")}


def _without_runid(outcome):
    """A mapping's runid is 'cranfield', the text's is its tag: the rest must be equal."""
    if isinstance(outcome, dict):
        outcome = dict(outcome)
        outcome["aggregate"] = {k: v for k, v in outcome["aggregate"].items() if k != "runid"}
        outcome["per_topic"] = {t: {k: v for k, v in m.items() if k != "runid"}
                                for t, m in outcome["per_topic"].items()}
    return outcome


MEASURES = [["map", "P.2", "ndcg_cut.3", "recip_rank", "num_rel_ret", "Rprec", "bpref"],
            ["all_trec", "ndcg_cut.3", "P.2"]]
OPTIONS = [{}, {"depth": 1}, {"depth": 3}, {"judged_only": True}, {"complete_topics": True},
           {"relevance_level": 2}, {"profile": "trec_eval-10"},
           {"profile": "trec_eval-10", "depth": 3, "judged_only": True,
            "complete_topics": True}]


def _line_reader(mp):
    mp.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 1 << 62)


# ---- evaluate(mapping) == evaluate(TREC text by the line reader) --------------------------


@needs_ext
@settings(max_examples=_EXAMPLES, deadline=None, derandomize=os.environ.get("CI") == "true",
          suppress_health_check=[HealthCheck.too_slow])
@given(pair=_pairs(), how=st.sampled_from(CONTAINERS), options=st.sampled_from(OPTIONS),
       measures=st.sampled_from(MEASURES), seed=st.integers(0, 2**16))
def test_a_mapping_evaluates_as_its_trec_text(pair, how, options, measures, seed):
    run, qrels = pair
    run_text, qrels_text = _trec_text(run, qrels)
    with pytest.MonkeyPatch.context() as mp:
        _line_reader(mp)
        text = _outcome(qrels_text, run_text, measures, **options)
    rnd = random.Random(seed)
    mapped = _outcome(_wrap(qrels, how, rnd), _wrap(run, how, rnd), measures, **options)
    if isinstance(text, tuple) or isinstance(mapped, tuple):
        # the same refusal by kind (the texts name a line, the mappings a path)
        assert isinstance(text, tuple) and isinstance(mapped, tuple)
        assert (text[1], text[4]) == (mapped[1], mapped[4])
        return
    assert _without_runid(mapped) == _without_runid(text)


@needs_ext
@pytest.mark.parametrize("how", CONTAINERS)
def test_the_tie_averaged_gain_and_large_ties_agree(how):
    """ties=average nDCG reads each hit's tie group; many documents tied, some judged."""
    rnd = random.Random(7)
    run = {f"q{t}": {f"d{i}": float(rnd.choice([1, 2, 3])) for i in range(60)}
           for t in range(5)}
    qrels = {f"q{t}": {f"d{i}": rnd.choice([0, 1, 2]) for i in rnd.sample(range(80), 25)}
             for t in range(5)}
    run_text, qrels_text = _trec_text(run, qrels)
    measures = ["ndcg_cut.10(ties=average)", "map", "P.5", "ndcg"]
    with pytest.MonkeyPatch.context() as mp:
        _line_reader(mp)
        text = _outcome(qrels_text, run_text, measures)
    assert _without_runid(_outcome(_wrap(qrels, how, rnd), _wrap(run, how, rnd),
                                   measures)) == _without_runid(text)


# ---- refusals: the compiled mapping path and the Python one, word for word ----------------

_BAD_IDS = ["a b", "a\tb", "a\nb", "a\x01", "", "\udcff"]
_BAD_SCORES = [True, "1.0", None, float("nan"), float("inf"), -float("inf"), 10**400,
               np.float64(1.5), np.int64(2), np.float32(np.inf)]
_BAD_GRADES = [1.5, 1e19, "1", None, True, 2**64, float("nan")]


def _refusal_cases():
    good_run = {"q1": {"d1": 1.0, "d2": 0.5}, "q2": {"d3": 2}}
    good_qrels = {"q1": {"d1": 1, "d9": 0}, "q2": {"d3": 2}}
    cases = []
    for bad in _BAD_IDS:
        cases.append(({"q1": {bad: 1.0}, "q2": {"d3": 2}}, good_qrels))
        cases.append(({bad: {"d1": 1.0}}, good_qrels))
        cases.append((good_run, {"q1": {bad: 1}}))
    for bad in _BAD_SCORES:
        cases.append(({"q1": {"d1": 1.0, "d2": bad}, "q2": {"d3": 2}}, good_qrels))
    for bad in _BAD_GRADES:
        cases.append((good_run, {"q1": {"d1": bad}}))
    cases.append(({1: {"d1": 1.0}}, good_qrels))                       # a non-str topic
    cases.append(({"q1": [("d1", 1.0)]}, good_qrels))                  # an inner non-mapping
    cases.append((good_run, {"q1": 3}))
    cases.append(({"q1": {"d1": float("nan")}}, {"q1": {"d1": 1.5}}))  # both bad: the run's
    cases.append(({"x": {"d1": 1.0}}, good_qrels))                     # no overlap
    cases.append(({}, good_qrels))                                     # an empty run
    cases.append(({"q1": {}}, good_qrels))
    cases.append((good_run, {}))                                       # empty qrels
    cases.append(({"q1": {"d1": 2**53 + 1, "d2": 1.0}}, {"q1": {"d1": 2**53 + 1, "d2": 1.0}}))
    return cases


@needs_ext
@pytest.mark.parametrize("how", ["dict", "defaultdict", "ordered"])
@pytest.mark.parametrize("case", range(len(_refusal_cases())))
def test_refusals_are_word_for_word_those_of_the_python_path(case, how):
    run, qrels = _refusal_cases()[case]
    rnd = random.Random(case)

    def wrapped(data):
        if not all(isinstance(v, dict) for v in data.values()):
            return data  # (an inner non-mapping: as given)
        return _wrap(data, how, rnd)

    compiled = _outcome(wrapped(qrels), wrapped(run), ["map", "P.5"])
    with pytest.MonkeyPatch.context() as mp:
        _python_path(mp)
        python = _outcome(wrapped(qrels), wrapped(run), ["map", "P.5"])
    assert compiled == python


@needs_ext
def test_a_budget_refusal_names_the_runs_bad_value_first(monkeypatch):
    """The run is read whole before any budget or overlap check today: a bad value in it is
    named even when the evaluation would also be refused for its size."""
    run = {"q1": {"d1": float("nan")}}
    got = _outcome({"x": {"d1": 1}}, run, ["map"])
    _python_path(monkeypatch)
    assert got == _outcome({"x": {"d1": 1}}, run, ["map"])
    assert got[0] == "refused" and "finite" in got[2]


# ---- rank_mapping itself -------------------------------------------------------------------


def _call(run, qrels, *, float32=True, ks=(), cap=1 << 30):
    qrels_obj = cranfield.read_qrels(qrels)
    topics = sorted(run, key=lambda t: t.encode())
    qpos = {t: i for i, t in enumerate(qrels_obj.topics)}
    rq = np.asarray([qpos.get(t, -1) for t in topics], dtype=np.int64)
    return _mapscan.rank_mapping(run, topics, rq, qrels_obj.offsets.astype(np.int64),
                                 qrels_obj.docids.tolist(), float32,
                                 np.asarray(ks, dtype=np.int64), cap), qrels_obj, topics


@needs_ext
@settings(max_examples=_EXAMPLES * 2, deadline=None,
          derandomize=os.environ.get("CI") == "true",
          suppress_health_check=[HealthCheck.too_slow])
@given(pair=_pairs(), float32=st.booleans())
def test_rank_mapping_ranks_as_rank_run(pair, float32):
    run, qrels = pair
    if not qrels:
        return
    got, qrels_obj, topics = _call(run, qrels, float32=float32, ks=(1, 2, 3))
    assert got is not None
    num_ret, h_rt, h_qrow, h_rank, h_first, h_last, cut = (
        np.frombuffer(b, np.uint8 if i == 6 else np.int64) for i, b in enumerate(got))
    with pytest.MonkeyPatch.context() as mp:
        _python_path(mp)
        ranked = rank_run(cranfield.read_run(run), qrels_obj, float32_scores=float32,
                          tie_cutoffs=(1, 2, 3))
    grades = qrels_obj.grades[h_qrow]
    labels = np.where(grades < 0, -2, grades)
    names = [topics[i] for i in h_rt]
    mine = sorted(zip(names, h_rank.tolist(), labels.tolist(), strict=True))
    theirs = sorted(zip([ranked.topics[i] for i in ranked.hit_topic], ranked.hit_rank.tolist(),
                        ranked.hit_label.tolist(), strict=True))
    assert mine == theirs
    assert sorted(zip(names, h_first.tolist(), h_last.tolist(), labels.tolist(), strict=True)) \
        == sorted(zip([ranked.topics[i] for i in ranked.hit_topic],
                      ranked.hit_tie_first.tolist(), ranked.hit_tie_last.tolist(),
                      ranked.hit_label.tolist(), strict=True))
    # by topic, then rank
    order = np.lexsort((h_rank, h_rt))
    assert (order == np.arange(len(order))).all()
    evaluated = {t: i for i, t in enumerate(ranked.topics)}
    for i, t in enumerate(topics):
        if t in evaluated:
            assert num_ret[i] == ranked.num_ret[evaluated[t]]
            for c, k in enumerate((1, 2, 3)):
                assert bool(cut[c * len(topics) + i]) == ranked.cutoff_ties[k][evaluated[t]]


class _Str(str):
    pass


class _Dict(dict):
    pass


@needs_ext
def test_rank_mapping_declines_what_python_must_read():
    qrels = {"q": {"d": 1}}

    def declines(run, **kw):
        return _call(run, qrels, **kw)[0] is None

    assert not declines({"q": {"d": 1.0, "e": 2}})
    assert not declines(defaultdict(dict, {"q": OrderedDict({"d": 1.0})}))
    assert declines(_Dict({"q": {"d": 1.0}}))                 # a dict subclass, outer
    assert declines({"q": _Dict({"d": 1.0})})                 # ... and inner
    assert declines({"q": MappingProxyType({"d": 1.0})})
    assert declines({"q": {_Str("d"): 1.0}})                  # a str subclass key
    assert declines({"q": {"d": np.float64(1.0)}})            # numpy scalars
    assert declines({"q": {"d": np.int64(1)}})
    assert declines({"q": {"d": True}})
    assert declines({"q": {"d": float("nan")}})
    assert declines({"q": {"d": 10**400}})
    assert declines({"q": {"d d": 1.0}})
    assert declines({"q": {"\udcff": 1.0}})
    # tie work past the cap: every score equal, every docid judged
    tied = {"q": {f"d{i}": 1.0 for i in range(50)}}
    tied_qrels = {"q": {f"d{i}": i % 2 for i in range(50)}}
    assert _call(tied, tied_qrels, cap=100)[0] is None
    assert _call(tied, tied_qrels, cap=1 << 20)[0] is not None


@needs_ext
def test_a_key_whose_hash_mutates_the_mapping_is_left_to_python():
    class Sneaky(str):
        def __hash__(self):
            run["q"]["zz"] = 5.0
            return str.__hash__(self)

    run = {"q": {"d": 1.0}}
    run["q"][Sneaky("e")] = 2.0
    got, _, _ = _call(run, {"q": {"d": 1, "e": 0}})
    assert got is None


@needs_ext
def test_pytrec_eval_parsed_inputs_evaluate_as_their_files():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    data = os.path.join(os.path.dirname(__file__), "..", "data", "trec_eval")
    qrels_path, run_path = os.path.join(data, "qrels.test"), os.path.join(data, "results.test")
    with open(qrels_path) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(run_path) as f:
        run = pytrec_eval.parse_run(f)
    assert type(run) is defaultdict and type(qrels) is defaultdict
    for options in ({}, {"profile": "trec_eval-10"}, {"judged_only": True, "depth": 50}):
        from_files = _outcome(qrels_path, run_path, ["all_trec"], **options)
        from_maps = _outcome(qrels, run, ["all_trec"], **options)
        assert _without_runid(from_maps) == _without_runid(from_files)


@needs_ext
@pytest.mark.parametrize("how", ["dict", "defaultdict", "ordered", "mixed"])
def test_an_accepted_mapping_is_ranked_without_columns(how, monkeypatch):
    """dict, defaultdict and OrderedDict runs take the one pass: no Run is built."""
    def no_columns(*args):
        raise AssertionError("the run was read as columns")

    run = {"q1": {"a": 1.0, "b": 2.0, "c": 2.0}, "q2": {"x": 1}}
    qrels = {"q1": {"a": 1, "c": 1, "z": 0}, "q3": {"x": 1}}
    expected = _outcome(qrels, run, ["map", "P.2", "num_ret"])
    monkeypatch.setattr(cranfield.inputs.mappings, "run_from_mapping", no_columns)
    assert _outcome(_wrap(qrels, how, random.Random(1)), _wrap(run, how, random.Random(1)),
                    ["map", "P.2", "num_ret"]) == expected
