"""evaluate_many and its compiled passes after review R30 (issue #30): with bad qrels and a bad
first run, the run's error as evaluate raises it; the text pass's hits used (counted: no run
file read again), with real gains too; a failing pass falls back to read_run; the compiled
functions keep their own bounds (rank_mapping's outputs sized for what it writes, rank_text
reads bytes only, text_qrels declines a docid judged twice in a topic)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import cranfield
from cranfield.errors import CranfieldError, InputError

_mapscan = pytest.importorskip("cranfield.inputs._mapscan")
MANY = importlib.import_module("cranfield.evaluate_many")  # (not the function of that name)

QRELS = "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq2 0 a 1\nq2 0 d 3\n"
RUNS = ["q1 Q0 a 1 3.5 r1\nq1 Q0 c 2 2 r1\nq1 Q0 x 3 2 r1\nq2 Q0 d 1 1.25 r1\n",
        "q1 Q0 b 1 9 r2\nq1 Q0 a 2 1 r2\nq2 Q0 a 1 4 r2\nq2 Q0 d 2 4 r2\n",
        "q2 Q0 d 1 0.5 r3\nq2 Q0 zz 2 0.25 r3\nq1 Q0 c 1 7 r3\n"]
MEASURES = ["map", "P.2", "ndcg_cut.3", "recip_rank", "num_rel_ret"]


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _files(tmp_path, texts: list[str], prefix: str = "r") -> list[str]:
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"{prefix}{i}.txt"
        path.write_text(text)
        paths.append(str(path))
    return paths


def _values(ev) -> tuple:
    return ev.runid, ev.aggregate, ev.per_topic


def _refusal(call) -> tuple:
    with pytest.raises(CranfieldError) as got:
        call()
    exc = got.value
    return type(exc).__name__, getattr(exc, "source", None), getattr(exc, "line", None), \
        getattr(exc, "field", None)


# -- finding 1: bad qrels and a bad first run ------------------------------------------------

@pytest.mark.parametrize("measures", [["map"], ["alpha_nDCG@5"]])
def test_with_both_inputs_bad_the_run_is_named_as_evaluate_names_it(tmp_path, measures):
    """qrels and the first run both bad: evaluate raises the run's error (qrels_before_run;
    diversity reads the run first); evaluate_many raises the same, for a file and for bytes
    (named by the run's name), not the qrels'."""
    q, r = _files(tmp_path, ["q1 0 a x\n", "q1 Q0 a 1 zz tag\n"])
    one = _refusal(lambda: cranfield.evaluate(q, r, measures))
    assert one[:3] == ("InputError", r, 1)
    assert _refusal(lambda: cranfield.evaluate_many(q, [r, r], measures)) == one
    with pytest.raises(InputError) as got:
        cranfield.evaluate_many(q, {"bm25": b"q1 Q0 a 1 zz tag\n"}, measures)
    assert (got.value.source, got.value.line, got.value.run) == ("bm25", 1, "bm25")
    # a good first run: the qrels' error, as evaluate's
    good = _files(tmp_path, [RUNS[0]], "g")[0]
    refused = _refusal(lambda: cranfield.evaluate(q, good, measures))
    assert refused[:3] == ("InputError", q, 1)
    assert _refusal(lambda: cranfield.evaluate_many(q, [good, r], measures)) == refused


# -- findings 3 and 4: the pass's hits are used ----------------------------------------------

@pytest.fixture()
def reads(monkeypatch):
    """Every read_run call evaluate_many makes (the reads of declined runs, and the rereads
    of runs whose hits do not answer the ranking), by the run given."""
    calls = []
    real = MANY.read_run

    def counted(run, *args, **kwargs):
        calls.append(run)
        return real(run, *args, **kwargs)

    monkeypatch.setattr(MANY, "read_run", counted)
    return calls


@pytest.mark.parametrize("gains", [None, "real"])
def test_plain_run_files_are_read_once_by_the_pass_and_never_again(tmp_path, reads, gains):
    """Run files the pass takes are never read by read_run (its hits rank them), with
    integer grades and with real gains (ranked against coded qrels sharing the rows); a run
    the pass declines (a '+1' score) is read once. Values equal evaluate's."""
    qrels = QRELS if gains is None else QRELS.replace(" 2\n", " 1.5\n")
    q = _files(tmp_path, [qrels], "q")[0]
    runs = _files(tmp_path, RUNS)
    options = {} if gains is None else {"gains": gains}
    measures = MEASURES if gains is None else ["nDCG@3", "P(rel=0.5)@2", "AP(rel=0.5)"]
    got = cranfield.evaluate_many(q, runs, measures, **options)
    assert reads == []
    assert [_values(ev) for ev in got.values()] == \
        [_values(cranfield.evaluate(q, r, measures, **options)) for r in runs]
    declined = _files(tmp_path, [RUNS[1].replace(" 9 ", " +9 ")], "d")[0]
    got = cranfield.evaluate_many(q, [runs[0], declined, runs[2]], measures, **options)
    assert reads == [declined]
    assert _values(got["d0"]) == _values(cranfield.evaluate(q, declined, measures, **options))


# -- finding 6: a pass that fails --------------------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2])
def test_a_pass_that_fails_falls_back_to_read_run(tmp_path, monkeypatch, reads, threads):
    """An exception in the pass (MemoryError for its tables) is a decline: read_run reads the
    run, so the evaluations equal evaluate's, and a bad run's error names it."""
    real = MANY.pass_run

    def failing(table, run, **kwargs):
        if run.endswith("r1.txt"):
            raise MemoryError
        return real(table, run, **kwargs)

    monkeypatch.setattr(MANY, "pass_run", failing)
    monkeypatch.setattr(MANY, "PASS_THREADS", threads)
    q = _files(tmp_path, [QRELS], "q")[0]
    runs = _files(tmp_path, RUNS)
    got = cranfield.evaluate_many(q, runs, MEASURES)
    assert reads == [runs[1]]
    assert [_values(ev) for ev in got.values()] == \
        [_values(cranfield.evaluate(q, r, MEASURES)) for r in runs]
    (tmp_path / "r1.txt").write_text("q1 Q0 a 1 zz r\n")
    with pytest.raises(InputError) as exc:
        cranfield.evaluate_many(q, runs, MEASURES)
    assert (exc.value.source, exc.value.line, exc.value.run) == (runs[1], 1, "r1")


# -- findings 2, 5, 7: the compiled functions' own bounds --------------------------------------

def test_rank_mapping_sizes_its_outputs_for_two_run_topics_on_one_qrels_topic():
    """The outputs held a hit per qrels row, which run_to_qrels naming one qrels topic from
    two run topics overran (ASan: heap-buffer-overflow WRITE in rank_mapping); they hold a
    hit per qrels row of each run topic's qrels topic, and each topic's hits are its own."""
    run = {"q1": {"a": 1.0, "b": 2.0, "c": 0.5}, "q2": {"b": 1.0, "a": 2.0},
           "q3": {"a": 3.0, "c": 4.0}}
    qdocids = ["a", "b", "c"]

    def hits(topics, to_qrels):
        got = _mapscan.rank_mapping({t: run[t] for t in topics}, topics, _i64(to_qrels),
                                    _i64([0, 3]), qdocids, False, _i64([1]), 1 << 20)
        return [np.frombuffer(b, np.int64).tolist() for b in got[1:6]]

    together = hits(["q1", "q2", "q3"], [0, 0, 0])
    assert together[0] == [0, 0, 0, 1, 1, 2, 2]  # (run topic of each hit: 7 hits, 3 rows)
    apart = [hits([t], [0]) for t in ("q1", "q2", "q3")]
    assert together[1:] == [sum((a[j] for a in apart), []) for j in range(1, 5)]


@pytest.mark.parametrize("make", [bytearray, lambda b: memoryview(bytearray(b)),
                                  memoryview])
def test_rank_text_reads_bytes_only(make):
    """rank_text scans its data without the GIL: a buffer another thread could change
    (bytearray, a writable memoryview) or any buffer but bytes is a TypeError."""
    table = _mapscan.text_qrels(["q"], _i64([0, 1]), ["b"])
    text = b"q Q0 b 1 1 r\n"
    assert _mapscan.rank_text(table, text, False, _i64([]), 16, 1 << 20) is not None
    with pytest.raises(TypeError, match="bytes"):
        _mapscan.rank_text(table, make(text), False, _i64([]), 16, 1 << 20)


def test_text_qrels_leaves_a_docid_judged_twice_in_a_topic_to_python():
    """As rank_mapping: qrels rows naming one docid twice in a topic (never from a reader)
    would give two hits one rank; the table is declined. Twice across topics is fine."""
    assert _mapscan.text_qrels(["q"], _i64([0, 3]), ["b", "c", "b"]) is None
    many = [f"d{i}" for i in range(500)]
    assert _mapscan.text_qrels(["q"], _i64([0, 501]), many + ["d321"]) is None
    assert _mapscan.text_qrels(["p", "q"], _i64([0, 2, 4]), ["b", "c", "b", "c"]) is not None
    assert _mapscan.text_qrels(["q"], _i64([0, 500]), many) is not None
