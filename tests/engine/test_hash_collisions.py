"""Issue #19's fast paths against the old ones: qrels read as columns and docids matched by
hashed (topic, docid) keys must give exactly the numbers of the line reader and of string
matching, whatever the hash does. The hash is patched to collide (a constant, a few buckets,
one docid made to hash as another) and every value must stay the same; a collision may cost
time, never a number."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from extension_off import without_extension

import cranfield
import cranfield.inputs.docid_keys
import cranfield.inputs.io
from cranfield import InputError

REAL_HASHES = cranfield.inputs.docid_keys.docid_hashes
MEASURES = ["all_trec", "ndcg_cut.3", "P.2", "recall.4", "success.1"]


def _texts(seed: int) -> tuple[str, str]:
    """A run and qrels with score ties, docids of varied lengths (some non-ASCII, some
    prefixes of others), negative grades, topics on one side only, judged docids the run
    misses and run topics listed out of strcmp order (for odd seeds, qrels topics the run
    lacks too)."""
    rnd = random.Random(seed)
    vocab = ["d", "d1", "d10", "d100", "doc-é", "doc-ée", "x" * 40, "Δ", "a1", "a2", "b",
             "c" * 9, "zz", "q", "d2", "d3", "d20"] + [f"n{i}" for i in range(30)]
    run_lines, qrels_lines = [], []
    topics = [f"t{i}" for i in range(12)]
    for t in reversed(topics[:10]):
        docs = rnd.sample(vocab, rnd.randint(1, 25))
        for rank, d in enumerate(docs):
            score = rnd.choice([1.0, 2.0, 2.5, 3.0, rnd.random()])
            run_lines.append(f"{t} Q0 {d} {rank} {score} sys")
    for t in topics[2:] if seed % 2 else topics[2:10]:  # odd seeds: qrels-only topics
        for d in rnd.sample(vocab, rnd.randint(1, 20)):
            qrels_lines.append(f"{t} 0 {d} {rnd.choice([-1, 0, 0, 1, 2, 3])}")
    rnd.shuffle(qrels_lines)
    return "\n".join(run_lines) + "\n", "\n".join(qrels_lines) + "\n"


def _evaluate(run_text: str, qrels_text: str, columnar: bool, profile: str):
    saved = cranfield.inputs.io.FAST_READER_MIN_BYTES
    cranfield.inputs.io.FAST_READER_MIN_BYTES = 0 if columnar else 1 << 62
    try:
        run = cranfield.read_run(run_text)
        qrels = cranfield.read_qrels(qrels_text)
    finally:
        cranfield.inputs.io.FAST_READER_MIN_BYTES = saved
    assert isinstance(run.docids, np.ndarray) != columnar
    return cranfield.evaluate(qrels, run, MEASURES, profile=profile)


def _same(a, b) -> None:
    assert a.topic_order == b.topic_order
    assert a.aggregate == b.aggregate or all(
        a.aggregate[k] == b.aggregate[k] or (a.aggregate[k] != a.aggregate[k]
                                             and b.aggregate[k] != b.aggregate[k])
        for k in a.aggregate)
    assert a.values.keys() == b.values.keys()
    for key in a.values:
        x, y = a.values[key], b.values[key]
        if x.dtype == object:
            assert x.tolist() == y.tolist(), key
        else:
            np.testing.assert_array_equal(x, y, err_msg=key)


def _constant(docids):
    return np.full(len(docids), 7, dtype=np.uint64)


def _four_buckets(docids):
    return REAL_HASHES(docids) & np.uint64(3)


def _by_length(docids):
    chunks = docids.chunks if hasattr(docids, "chunks") else [docids]
    return np.concatenate([np.diff(np.frombuffer(c.buffers()[1], np.int32, len(c) + 1,
                                                 c.offset * 4)).astype(np.uint64)
                           for c in chunks]) if chunks else np.zeros(0, np.uint64)


def _d1_as_d10(docids):
    """Every docid its own hash but d10, which hashes as d1 (a collision across sides when
    one holds d1 and the other d10)."""
    out = REAL_HASHES(docids).copy()
    names = np.asarray(docids.to_pylist(), dtype=object)
    out[names == "d10"] = REAL_HASHES(pa.array(["d1"]))[0]
    return out


HASHES = {"real": REAL_HASHES, "constant": _constant, "four buckets": _four_buckets,
          "by length": _by_length, "d10 as d1": _d1_as_d10}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("hashing", list(HASHES))
@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_hashed_matching_equals_the_line_readers_whatever_the_hash(seed, hashing, profile,
                                                                    monkeypatch):
    run_text, qrels_text = _texts(seed)
    reference = _evaluate(run_text, qrels_text, columnar=False, profile=profile)
    monkeypatch.setattr(cranfield.inputs.docid_keys, "docid_hashes", HASHES[hashing])
    _same(_evaluate(run_text, qrels_text, columnar=True, profile=profile), reference)


def test_a_collision_across_sides_is_no_match(monkeypatch):
    """The run retrieves d1, the qrels judge d10 (relevant) and not d1: with d10 hashing as
    d1 the keys agree, the bytes do not, and the run has found nothing relevant."""
    monkeypatch.setattr(cranfield.inputs.docid_keys, "docid_hashes", _d1_as_d10)
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
    run = cranfield.read_run("q1 Q0 d1 1 2.0 s\nq1 Q0 d2 2 1.0 s\n")
    qrels = cranfield.read_qrels("q1 0 d10 1\nq1 0 d2 0\n")
    ev = cranfield.evaluate(qrels, run, ["num_rel_ret", "num_rel", "map"])
    assert ev.aggregate == {"num_rel_ret": 0, "num_rel": 1, "map": 0.0}
    qrels = cranfield.read_qrels("q1 0 d10 1\nq1 0 d1 2\n")  # both, on one side: shared key
    ev = cranfield.evaluate(qrels, run, ["num_rel_ret", "num_rel", "ndcg"])
    assert ev.aggregate["num_rel_ret"] == 1 and ev.aggregate["num_rel"] == 2


@pytest.mark.parametrize("hashing", ["real", "constant", "four buckets"])
def test_duplicates_are_found_and_only_they(hashing, monkeypatch):
    monkeypatch.setattr(cranfield.inputs.docid_keys, "docid_hashes", HASHES[hashing])
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
    run = "q1 Q0 a 1 3 s\nq1 Q0 b 2 2 s\nq2 Q0 a 1 1 s\nq1 Q0 c 3 1 s\n"
    assert cranfield.read_run(run).to_dict() == {"q1": {"a": 3.0, "b": 2.0, "c": 1.0},
                                                 "q2": {"a": 1.0}}
    with pytest.raises(InputError) as info:
        cranfield.read_run(run + "q1 Q0 b 4 0 s\n", name="r")
    assert (info.value.line, info.value.code) == (5, "duplicate-docid")
    qrels = "q1 0 a 1\nq1 0 b 0\nq2 0 a 2\n"
    assert cranfield.read_qrels(qrels).to_dict() == {"q1": {"a": 1, "b": 0}, "q2": {"a": 2}}
    with pytest.raises(InputError) as info:
        cranfield.read_qrels(qrels + "q1 0 b 1\n", name="q")
    assert (info.value.line, info.value.code) == (4, "duplicate-judgment")
    # subtopic qrels may repeat a docid in a topic
    assert len(cranfield.read_qrels(qrels + "q1 2 b 1\n", diversity=True)) == 4


@pytest.mark.parametrize("seed", range(6))
def test_columnar_qrels_equal_the_line_readers(seed, monkeypatch):
    _, text = _texts(seed)
    text = text.replace(" 0 ", " 3 ", 4)  # a few other subtopic numbers
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 1 << 62)
    slow = cranfield.read_qrels(text)
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
    fast = cranfield.read_qrels(text)
    assert isinstance(slow.docids, np.ndarray) and fast.unique_judgments
    assert fast.topics == slow.topics
    np.testing.assert_array_equal(fast.topic_index, slow.topic_index)
    np.testing.assert_array_equal(fast.grades, slow.grades)
    assert fast.docids.tolist() == slow.docids.tolist()
    assert fast.subtopics.tolist() == slow.subtopics.tolist()
    assert fast.docids_at(np.array([2, 0])).tolist() == slow.docids[[2, 0]].tolist()


@pytest.mark.parametrize("seed", range(20))
def test_tie_groups_equal_the_score_search(seed):
    """The judged rows' tie groups read off the sorted run (files) equal the vectorised
    search for their scores (mappings), ties within and across topics, float32 or not."""
    from cranfield.inputs.ranking import score_positions, tie_groups, topic_blocks

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 40, size=rng.integers(1, 30))
    order = rng.permutation(len(sizes))  # topic blocks in any order
    tix = np.repeat(order, sizes).astype(np.int32)
    scores = np.concatenate([-np.sort(-rng.choice([1.0, 2.0, 2.5, rng.random()], n))
                             for n in sizes])
    if seed % 2:
        scores = scores.astype(np.float32)
    lo, hi = topic_blocks(tix, len(sizes))
    pos = np.sort(rng.choice(len(scores), size=min(len(scores), 25), replace=False))
    for global_keys in (True, False):
        want = score_positions(scores, tix, lo[tix[pos]], hi[tix[pos]], scores[pos],
                               global_keys=global_keys)
        got = tie_groups(scores, tix, pos, lo[tix[pos]], hi[tix[pos]])
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_columnar_qrels_match_the_same_after_their_docids_are_read_or_replaced(monkeypatch):
    """Reading ``docids`` (the Arrow column turned into strs) keeps the column matching
    uses; replacing them (same length) forgets it and the hashes of the old ones."""
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
    run = cranfield.read_run("q1 Q0 a 1 3 s\nq1 Q0 b 2 2 s\nq1 Q0 c 3 1 s\n")
    qrels = cranfield.read_qrels("q1 0 a 1\nq1 0 z 1\n")
    first = cranfield.evaluate(qrels, run, ["num_rel_ret", "map"]).aggregate
    assert qrels.docids.tolist() == ["a", "z"]
    assert cranfield.evaluate(qrels, run, ["num_rel_ret", "map"]).aggregate == first
    qrels.docids = np.asarray(["b", "c"], dtype=object)
    assert cranfield.evaluate(qrels, run, ["num_rel_ret"]).aggregate == {"num_rel_ret": 2}


def _evaluate_mixed(run_text: str, qrels_text: str, columnar_run: bool, profile: str):
    """The run through one reader and the qrels through the other (a run file read as
    columns matched against qrels read line by line, and the reverse)."""
    saved = cranfield.inputs.io.FAST_READER_MIN_BYTES
    try:
        cranfield.inputs.io.FAST_READER_MIN_BYTES = 0 if columnar_run else 1 << 62
        run = cranfield.read_run(run_text)
        cranfield.inputs.io.FAST_READER_MIN_BYTES = 1 << 62 if columnar_run else 0
        qrels = cranfield.read_qrels(qrels_text)
    finally:
        cranfield.inputs.io.FAST_READER_MIN_BYTES = saved
    assert isinstance(run.docids, np.ndarray) != columnar_run
    return cranfield.evaluate(qrels, run, MEASURES, profile=profile)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("hashing", ["real", "constant", "d10 as d1"])
@pytest.mark.parametrize("columnar_run", [True, False])
def test_one_side_read_as_columns_equals_the_line_readers(seed, hashing, columnar_run,
                                                          monkeypatch):
    run_text, qrels_text = _texts(seed)
    reference = _evaluate(run_text, qrels_text, columnar=False, profile="trec_eval-9.0.8")
    monkeypatch.setattr(cranfield.inputs.docid_keys, "docid_hashes", HASHES[hashing])
    _same(_evaluate_mixed(run_text, qrels_text, columnar_run, "trec_eval-9.0.8"), reference)


@pytest.mark.parametrize("more_bits", [1, 5])
def test_run_keys_repacked_for_more_row_bits_equal_keys_hashed_again(more_bits, monkeypatch):
    """Qrels with more rows than the run widen the row field of the keys the reader kept:
    re-packed from those keys, they equal the keys hashed from the docids anew."""
    from cranfield.inputs.docid_keys import row_bits, run_packed_keys

    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)
    # the sorted keys, not the tables
    without_extension(monkeypatch)
    text = _texts(3)[0]
    kept = cranfield.read_run(text)
    rb = row_bits(len(kept))
    assert kept._packed is not None and kept._packed[0] == rb
    fresh = cranfield.read_run(text)
    fresh._packed = None
    for a, b in zip(run_packed_keys(kept, rb + more_bits), run_packed_keys(fresh, rb + more_bits),
                    strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("hashing", ["real", "constant", "d10 as d1"])
def test_a_run_shorter_than_its_qrels_equals_the_line_readers(seed, hashing, monkeypatch):
    """Fewer run rows than judgments: the keys the run reader kept are re-packed for the
    wider row field before matching (the other tests' runs are the longer side)."""
    run_text, qrels_text = _texts(seed)
    run_text = "".join(run_text.splitlines(keepends=True)[:len(qrels_text.splitlines()) // 3])
    run = cranfield.read_run(run_text)
    assert cranfield.inputs.docid_keys.row_bits(len(run)) < cranfield.inputs.docid_keys.row_bits(
        len(cranfield.read_qrels(qrels_text)))
    reference = _evaluate(run_text, qrels_text, columnar=False, profile="trec_eval-9.0.8")
    monkeypatch.setattr(cranfield.inputs.docid_keys, "docid_hashes", HASHES[hashing])
    _same(_evaluate(run_text, qrels_text, columnar=True, profile="trec_eval-9.0.8"), reference)
