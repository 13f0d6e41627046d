"""``cranfield/inputs/ranking.py`` against a ranking written out here the slow, obvious way (issue
#16, ``make mutation``): sort each topic by score descending, ties by docno descending (byte
order), as trec_eval does, and read off the rank and qrels label of every judged document.

The engine never sorts whole topics: it finds each judged document's rank by binary searches
and compares docnos only inside tie groups. Every path it takes is driven here with the same
random inputs (few distinct scores, so ties are common; some scores differ only beyond
float32, which the 9.0.8 profile rounds to): runs read from mappings, from TREC text by the
line reader and by the columnar (pyarrow) reader, from chunked Arrow columns with FNV hashes
(the hash-bitmap prefilter), rows in score order, shuffled inside a topic, topics interleaved
or in blocks out of order; the score search by global integer keys and by segmented binary
search; depth (-M), judged_only (-J), complete_topics (-c), and the tie-at-cutoff flags.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (loaded once, see hash_hits below)
import pytest

import cranfield
import cranfield.inputs.io
import cranfield.inputs.matching as matching
import cranfield.inputs.ranking as ranking
from cranfield.inputs._json_kernels import hash_hits
from cranfield.inputs.docid_keys import fnv1a_hashes
from cranfield.inputs.io import read_qrels, read_run
from cranfield.inputs.ranking import (
    UNJUDGED,
    rank_run,
    segmented_search,
    top_documents,
    topic_blocks,
    within_topic_index,
)
from cranfield.inputs.run_qrels import Run

TIE_KS = (1, 2, 3, 5, 10)

# Loaded (and the numba kernel compiled) when this module is imported, which mutmut does once
# before it forks a process per mutant; otherwise every mutant's process would pay for it.
hash_hits(np.zeros(1, np.uint64), np.zeros(2, dtype=bool), np.empty(1, np.int64))
_saved, cranfield.inputs.io.FAST_READER_MIN_BYTES = cranfield.inputs.io.FAST_READER_MIN_BYTES, 0
try:  # the columnar reader's first use, likewise
    read_run("t Q0 d 0 1.0 r\n")
finally:
    cranfield.inputs.io.FAST_READER_MIN_BYTES = _saved


# --------------------------------------------------------------------------------------------
# the reference: trec_eval's ranking spelled out
# --------------------------------------------------------------------------------------------

def ordered(docs: dict, float32: bool) -> list[tuple[str, float]]:
    """A topic's (docid, score) in trec_eval's order: score descending, docno descending."""
    def key(item):
        score = float(np.float32(item[1])) if float32 else item[1]
        return score, item[0].encode()
    return sorted(docs.items(), key=key, reverse=True)


def reference(run: dict, qrels: dict, *, float32: bool, depth=None, judged_only=False,
              complete=False) -> dict:
    qtopics = sorted(qrels, key=str.encode)
    topics = qtopics if complete else [t for t in qtopics if t in run]
    num_ret, hits, ties, q = [], [], {k: [] for k in TIE_KS}, []
    for ti, t in enumerate(topics):
        docs = ordered(run.get(t, {}), float32)
        scores = [float(np.float32(s)) if float32 else s for _, s in docs]
        for k in TIE_KS:
            ties[k].append(len(scores) > k and scores[k - 1] == scores[k])
        if depth is not None:
            docs = docs[:depth]
        mine = []
        for rank, (d, _) in enumerate(docs, 1):
            if d in qrels[t]:
                grade = qrels[t][d]
                mine.append((ti, rank, grade if grade >= 0 else UNJUDGED))
        n = len(docs)
        if judged_only:
            mine = [(ti, i, lab) for i, (_, _, lab) in
                    enumerate((h for h in mine if h[2] >= 0), 1)]
            n = len(mine)
        hits += mine
        num_ret.append(n)
        q += [(ti, g) for g in qrels[t].values()]
    return {"topics": topics, "num_ret": num_ret, "hits": hits, "ties": ties,
            "in_run": [t in run for t in topics], "q": Counter(q)}


def observed(r) -> dict:
    # the documented column types (ranking.Ranked): int64, in_run bool
    for name in ("num_ret", "hit_topic", "hit_rank", "hit_label", "q_topic", "q_grade"):
        assert getattr(r, name).dtype == np.int64, name
    assert r.in_run.dtype == bool
    assert all(v.dtype == bool for v in r.cutoff_ties.values())
    return {"topics": list(r.topics), "num_ret": r.num_ret.tolist(),
            "hits": list(zip(r.hit_topic.tolist(), r.hit_rank.tolist(), r.hit_label.tolist(),
                             strict=True)),
            "ties": {k: [bool(x) for x in v] for k, v in r.cutoff_ties.items()},
            "in_run": r.in_run.tolist(),
            "q": Counter(zip(r.q_topic.tolist(), r.q_grade.tolist(), strict=True))}


# --------------------------------------------------------------------------------------------
# random inputs and the ways to read them
# --------------------------------------------------------------------------------------------

def random_case(seed: int) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    n_topics = 1 if seed % 4 == 0 else int(rng.integers(2, 6))
    run, qrels = {}, {}
    for _ in range(n_topics):
        topic = f"q{int(rng.integers(0, 12))}"
        n = int(rng.integers(1, 30))
        docs = rng.choice(40, size=n, replace=False)
        # 3 distinct scores at most, some 1e-9 apart (equal in float32)
        scores = rng.integers(0, 3, n) + np.where(rng.random(n) < 0.3, 1e-9, 0.0)
        if rng.random() < 0.9 or not run:
            run[topic] = {f"d{d:02d}": float(s) for d, s in zip(docs, scores, strict=True)}
        if rng.random() < 0.85 or topic not in qrels and not qrels:
            judged = rng.choice(40, size=int(rng.integers(1, 25)), replace=False)
            qrels[topic] = {f"d{d:02d}": int(rng.choice([-1, 0, 0, 1, 1, 2, 3]))
                            for d in judged}
    extra = f"q{int(rng.integers(12, 15))}"  # a qrels topic the run does not have
    if seed % 3 == 0:
        qrels[extra] = {"d01": 1, "d02": 0}
    if not set(run) & set(qrels):
        first = next(iter(run))
        qrels[first] = {"d00": 1}
    return run, qrels


def as_text(run: dict, layout: str, rng) -> str:
    rows = [(t, d, s) for t, docs in run.items() for d, s in docs.items()]
    if layout == "sorted":        # topic by topic, scores descending
        rows.sort(key=lambda r: (r[0], -r[2]))
    elif layout == "shuffled":    # each topic's rows together, in no score order
        rows.sort(key=lambda r: r[0])
        rows = [r for t in dict.fromkeys(r[0] for r in rows)
                for r in rng.permutation(np.array([x for x in rows if x[0] == t],
                                                  dtype=object)).tolist()]
    elif layout == "blocks":      # topics in blocks, in reverse order
        rows.sort(key=lambda r: (r[0], -r[2]), reverse=False)
        rows = [r for t in sorted({r[0] for r in rows}, reverse=True) for r in rows
                if r[0] == t]
    elif layout == "interleaved":  # rows of every topic mixed
        rows = [rows[i] for i in rng.permutation(len(rows))]
    return "".join(f"{t} Q0 {d} 0 {float(s)!r} run\n" for t, d, s in rows)


def arrow_run(run: dict, layout: str, rng, chunks: int = 3) -> Run:
    """A Run as the JSON reader leaves it: a chunked Arrow docid column with FNV-1a hashes."""
    base = read_run(as_text(run, layout, rng))
    docids = [str(d) for d in base.docids_at(np.arange(len(base)))]
    cuts = np.linspace(0, len(docids), chunks + 1).astype(int)
    column = pa.chunked_array([pa.array(docids[a:b], pa.string())
                               for a, b in zip(cuts[:-1], cuts[1:], strict=True)], pa.string())
    if chunks == 1:  # one piece: the JSON reader leaves a plain array, not a chunked one
        column = pa.array(docids, pa.string())
    return Run(base.topics, base.topic_index, column, base.scores, base.runid, "run",
               docid_fnv=fnv1a_hashes(docids))


READERS = ["mapping", "line", "columnar", "arrow-fnv"]
LAYOUTS = ["sorted", "shuffled", "blocks", "interleaved"]


def read(kind: str, run: dict, layout: str, rng, monkeypatch) -> Run:
    if kind == "mapping":
        return read_run(run)
    if kind.startswith("arrow"):
        monkeypatch.setattr(matching, "PREFILTER_ROWS_PER_JUDGED", 0)  # always prefilter
        return arrow_run(run, layout, rng, chunks=1 if kind == "arrow-plain" else 3)
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0 if kind == "columnar"
                        else 1 << 62)
    if kind == "columnar":  # a run this long would be prefiltered if it had FNV hashes: it
        monkeypatch.setattr(matching, "PREFILTER_ROWS_PER_JUDGED", 0)  # has none
    return read_run(as_text(run, layout, rng))


COMBOS = [("mapping", "sorted")] + [(r, lay) for r in READERS[1:] for lay in LAYOUTS] + [
    ("arrow-plain", "sorted"), ("arrow-plain", "interleaved")]
OPTIONS = ({}, {"depth": 4}, {"judged_only": True}, {"complete": True},
           {"depth": 7, "judged_only": True, "complete": True})


@pytest.mark.parametrize("combo", range(len(COMBOS)),
                         ids=[f"{r}-{lay}" for r, lay in COMBOS])
@pytest.mark.parametrize("seed", range(6))
def test_rank_run_matches_the_reference(seed, combo, monkeypatch):
    reader, layout = COMBOS[combo]
    # the two score searches, the two float widths and the options take turns
    global_keys = (seed + combo) % 2 == 0
    monkeypatch.setattr(ranking, "GLOBAL_KEYS_MAX_ROWS", 1 << 62 if global_keys else 0)
    run, qrels = random_case(seed)
    rng = np.random.default_rng(1000 + seed)
    r = read(reader, run, layout, rng, monkeypatch)
    q = read_qrels(qrels)
    for i in range(3):
        float32 = (seed + combo + i) % 2 == 0
        options = OPTIONS[(seed + combo + i) % len(OPTIONS)]
        want = reference(run, qrels, float32=float32, **options)
        got = observed(rank_run(r, q, float32_scores=float32, depth=options.get("depth"),
                                judged_only=options.get("judged_only", False),
                                complete_topics=options.get("complete", False),
                                tie_cutoffs=TIE_KS))
        assert got == want, (float32, options)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("depth", [1, 3, 10])
def test_top_documents_are_trec_eval_order(seed, depth):
    run, _ = random_case(seed)
    rng = np.random.default_rng(seed)
    for r in (read_run(run), read_run(as_text(run, "interleaved", rng))):
        for float32 in (True, False):
            want = {t: [d for d, _ in ordered(run[t], float32)][:depth]
                    for t in sorted(run, key=str.encode)}
            got = top_documents(r, depth, float32_scores=float32)
            assert got == want
            assert list(got) == list(want)


# --------------------------------------------------------------------------------------------
# hand-made examples
# --------------------------------------------------------------------------------------------

def test_ties_are_broken_by_docno_descending():
    # all four score 1.0: trec_eval's order is d4, d3, d2, d1 (docno descending), so the
    # relevant d1 is at rank 4 and the non-relevant d3 at 2; P@1 = 0 (d4 is not judged),
    # P@4 = 1/4, recip_rank = 1/4, relstring = "-0-1"
    run = {"t": {"d1": 1.0, "d2": 1.0, "d3": 1.0, "d4": 1.0}}
    qrels = {"t": {"d1": 1, "d3": 0}}
    for reader in (read_run(run), read_run("t Q0 d1 0 1.0 r\nt Q0 d2 0 1.0 r\n"
                                           "t Q0 d3 0 1.0 r\nt Q0 d4 0 1.0 r\n")):
        r = rank_run(reader, read_qrels(qrels), float32_scores=False)
        assert list(zip(r.hit_rank.tolist(), r.hit_label.tolist(), strict=True)) == \
            [(2, 0), (4, 1)]
        ev = cranfield.evaluate(qrels, reader, ["P.1,4", "recip_rank", "relstring"])
        row = ev.per_topic["t"]
        assert (row["P_1"], row["P_4"], row["recip_rank"], row["relstring"]) == \
            (0.0, 0.25, 0.25, "-0-1")


def test_a_tie_in_float32_only_is_a_tie_for_9_0_8_and_not_for_10():
    # 0.100000001 < 0.100000002 < 0.100000003 in float64 but one float32 value:
    # trec_eval 10 ranks c, a, b (by score); 9.0.8 ties them and ranks c, b, a (docno).
    run = {"10": {"a": 0.100000002, "b": 0.100000001, "c": 0.100000003}}
    qrels = {"10": {"a": 1, "b": 0, "c": 0}}
    q = read_qrels(qrels)
    r10 = rank_run(read_run(run), q, float32_scores=False)
    r9 = rank_run(read_run(run), q, float32_scores=True)
    assert dict(zip(r10.hit_rank.tolist(), r10.hit_label.tolist(), strict=True)) == \
        {1: 0, 2: 1, 3: 0}
    assert dict(zip(r9.hit_rank.tolist(), r9.hit_label.tolist(), strict=True)) == \
        {1: 0, 2: 0, 3: 1}
    assert cranfield.evaluate(qrels, run, ["recip_rank"], profile="trec_eval-10"
                              ).per_topic["10"]["recip_rank"] == 0.5
    assert cranfield.evaluate(qrels, run, ["recip_rank"], profile="trec_eval-9.0.8"
                              ).per_topic["10"]["recip_rank"] == pytest.approx(1 / 3)


def test_scores_beyond_float32_become_infinite_for_9_0_8():
    # 1e39 and 2e39 are both +inf in float32: tied, so docno decides (b before a) for 9.0.8;
    # -1e39 is -inf, below every finite score
    run = {"t": {"a": 2e39, "b": 1e39, "c": -1e39, "d": 0.0}}
    q = read_qrels({"t": {"a": 1, "b": 0, "c": 2, "d": 0}})
    r9 = rank_run(read_run(run), q, float32_scores=True)
    r10 = rank_run(read_run(run), q, float32_scores=False)
    assert dict(zip(r9.hit_rank.tolist(), r9.hit_label.tolist(), strict=True)) == \
        {1: 0, 2: 1, 3: 0, 4: 2}
    assert dict(zip(r10.hit_rank.tolist(), r10.hit_label.tolist(), strict=True)) == \
        {1: 1, 2: 0, 3: 0, 4: 2}


def test_depth_and_judged_only_by_hand():
    # order: a(5) b(4) x(3, not in qrels) c(2, pooled unjudged: grade -1) d(1)
    run = {"t": {"a": 5.0, "b": 4.0, "x": 3.0, "c": 2.0, "d": 1.0}}
    q = read_qrels({"t": {"a": 0, "b": 1, "c": -1, "d": 2, "e": 1}})
    r = read_run(run)
    full = rank_run(r, q, float32_scores=False)
    assert full.num_ret.tolist() == [5]
    assert list(zip(full.hit_rank.tolist(), full.hit_label.tolist(), strict=True)) == \
        [(1, 0), (2, 1), (4, UNJUDGED), (5, 2)]
    cut = rank_run(r, q, float32_scores=False, depth=3)  # -M3: a b x
    assert cut.num_ret.tolist() == [3]
    assert list(zip(cut.hit_rank.tolist(), cut.hit_label.tolist(), strict=True)) == \
        [(1, 0), (2, 1)]
    judged = rank_run(r, q, float32_scores=False, judged_only=True)  # -J: a b d
    assert judged.num_ret.tolist() == [3]
    assert list(zip(judged.hit_rank.tolist(), judged.hit_label.tolist(), strict=True)) == \
        [(1, 0), (2, 1), (3, 2)]
    # q rows: every qrels row of the topic, grades as read (-1 kept)
    assert sorted(full.q_grade.tolist()) == [-1, 0, 1, 1, 2]


def test_complete_topics_adds_the_qrels_topics_the_run_lacks():
    run = {"b": {"x": 1.0}}
    q = read_qrels({"a": {"x": 1}, "b": {"x": 1}, "c": {"y": 0}})
    plain = rank_run(read_run(run), q, float32_scores=False)
    assert plain.topics == ["b"] and plain.in_run.tolist() == [True]
    assert plain.q_topic.tolist() == [0]
    full = rank_run(read_run(run), q, float32_scores=False, complete_topics=True,
                    tie_cutoffs=(1,))
    assert full.topics == ["a", "b", "c"]
    assert full.in_run.tolist() == [False, True, False]
    assert full.num_ret.tolist() == [0, 1, 0]
    assert full.hit_topic.tolist() == [1] and full.hit_rank.tolist() == [1]
    assert sorted(full.q_topic.tolist()) == [0, 1, 2]
    assert full.cutoff_ties[1].tolist() == [False, False, False]


def test_run_topics_without_qrels_are_not_evaluated():
    run = {"a": {"x": 2.0, "y": 1.0}, "z": {"x": 5.0}}
    q = read_qrels({"a": {"y": 1}})
    r = rank_run(read_run(run), q, float32_scores=False, tie_cutoffs=(1,))
    assert r.topics == ["a"] and r.num_ret.tolist() == [2]
    assert r.hit_rank.tolist() == [2] and r.hit_label.tolist() == [1]
    assert r.cutoff_ties[1].tolist() == [False]


def test_tie_at_cutoff_by_hand():
    # scores 3 2 2 1: a tie straddles k = 2 (2nd and 3rd are equal), not k = 1 or 3; k = 4
    # is the whole list (nothing after it)
    run = {"t": {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0}, "u": {"a": 1.0}}
    q = read_qrels({"t": {"a": 1}, "u": {"a": 1}})
    r = rank_run(read_run(run), q, float32_scores=False, tie_cutoffs=(1, 2, 3, 4))
    assert {k: v.tolist() for k, v in r.cutoff_ties.items()} == \
        {1: [False, False], 2: [True, False], 3: [False, False], 4: [False, False]}


def test_an_empty_qrels_topic_list_or_run_matches_nothing():
    q = read_qrels({"t": {"a": 1}})
    r = rank_run(read_run({"t": {"b": 1.0}}), q, float32_scores=False)
    assert r.hit_rank.tolist() == [] and r.num_ret.tolist() == [1]


# --------------------------------------------------------------------------------------------
# the helpers, table-driven
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tix, n, lo, hi", [
    ([], 2, [0, 0], [0, 0]),
    ([0, 0, 1], 2, [0, 2], [2, 3]),
    ([0, 0, 2], 3, [0, 2, 2], [2, 2, 3]),          # topic 1 has no rows
    ([1, 1, 0, 0, 0], 2, [2, 0], [5, 2]),          # blocks out of order
    ([2, 0, 1], 3, [1, 2, 0], [2, 3, 1]),
    ([1, 0], 3, [1, 0, 0], [2, 1, 0]),
    ([0], 1, [0], [1]),
    ([0, 1, 0], 2, None, None),                    # topic 0 in two blocks
    ([1, 0, 0, 1], 2, None, None),
])
def test_topic_blocks(tix, n, lo, hi):
    got_lo, got_hi = topic_blocks(np.asarray(tix, dtype=np.int64), n)
    if lo is None:
        assert got_lo is None and got_hi is None
    else:
        assert got_lo.tolist() == lo and got_hi.tolist() == hi


@pytest.mark.parametrize("topic, n, want", [
    ([], 1, []),
    ([0, 0, 0], 1, [0, 1, 2]),
    ([0, 1, 1, 3, 3, 3], 4, [0, 0, 1, 0, 1, 2]),
    ([2, 2], 3, [0, 1]),
])
def test_within_topic_index(topic, n, want):
    assert within_topic_index(np.asarray(topic, dtype=np.int64), n).tolist() == want


@pytest.mark.parametrize("values, lo, hi, limit, want", [
    # first index in [lo, hi) whose value is not < limit (values ascending in each range)
    ([1, 3, 5, 7], [0], [4], [4], [2]),
    ([1, 3, 5, 7], [0], [4], [0], [0]),
    ([1, 3, 5, 7], [0], [4], [9], [4]),
    ([1, 3, 5, 7], [1], [3], [9], [3]),           # stops at hi
    ([1, 3, 5, 7], [2], [2], [0], [2]),           # empty range: lo
    ([5, 6, 1, 2, 3], [0, 2], [2, 5], [6, 3], [1, 4]),
    ([1, 1, 1, 1, 1, 1, 1, 2], [0], [8], [2], [7]),
])
def test_segmented_search(values, lo, hi, limit, want):
    limit = np.asarray(limit)
    got = segmented_search(np.asarray(values), np.asarray(lo), np.asarray(hi),
                           lambda v, i: v < limit[i])
    assert got.tolist() == want
    assert np.asarray(lo).tolist() == list(lo)  # the bounds given are not changed


def test_top_documents_keeps_a_tie_at_the_depth_boundary():
    # topic a: x and y tie at 1.0; trec_eval's order is y, x (docno descending), so the top 1
    # is y even though x comes first in the input. Topic b's 5.0 must not be mistaken for
    # a's depth-th score.
    text = "a Q0 x 0 1.0 r\na Q0 y 0 1.0 r\nb Q0 z 0 5.0 r\n"
    for run in (read_run(text), read_run({"a": {"x": 1.0, "y": 1.0}, "b": {"z": 5.0}})):
        assert top_documents(run, 1, float32_scores=False) == {"a": ["y"], "b": ["z"]}
        assert top_documents(run, 2, float32_scores=True) == {"a": ["y", "x"], "b": ["z"]}


@pytest.mark.parametrize("depth", [1, 2, 5])
def test_top_documents_of_a_one_row_run(depth):
    assert top_documents(read_run({"a": {"x": 1.0}}), depth, float32_scores=False) == \
        {"a": ["x"]}


@pytest.mark.parametrize("reader", READERS + ["arrow-plain"])
def test_a_qrels_topic_missing_from_the_run_between_two_that_are_there(reader, monkeypatch):
    # qrels topics a, b, c; the run has a and c: b's judgments must not shift c's
    run = {"a": {"d": 1.0, "e": 2.0}, "c": {"d": 2.0, "e": 1.0, "f": 0.5}}
    qrels = {"a": {"d": 1}, "b": {"x": 1, "y": 0, "z": 2}, "c": {"e": 1, "f": 2}}
    r = read(reader, run, "sorted", np.random.default_rng(0), monkeypatch)
    for complete in (False, True):
        got = observed(rank_run(r, read_qrels(qrels), float32_scores=False,
                                complete_topics=complete, tie_cutoffs=TIE_KS))
        assert got == reference(run, qrels, float32=False, complete=complete)
    # by hand, without -c: a: d at rank 2 (grade 1); c: e at rank 2 (1), f at rank 3 (2)
    plain = rank_run(r, read_qrels(qrels), float32_scores=False)
    assert list(zip(plain.hit_topic.tolist(), plain.hit_rank.tolist(),
                    plain.hit_label.tolist(), strict=True)) == [(0, 2, 1), (1, 2, 1), (1, 3, 2)]


def test_two_tie_groups_of_judged_documents_with_one_label_each():
    # a, b tie at 3 (both grade 1); c, d tie at 2 (both grade 0); e (not judged) at 1.
    # Ranks 1-2 carry grade 1 and ranks 3-4 grade 0, whatever the order inside each group.
    run = {"t": {"a": 3.0, "b": 3.0, "c": 2.0, "d": 2.0, "e": 1.0},
           "u": {"x": 1.0, "y": 1.0, "z": 0.5}}
    qrels = {"t": {"a": 1, "b": 1, "c": 0, "d": 0}, "u": {"x": 2, "y": 2, "z": 2}}
    for r in (read_run(run), read_run("".join(f"{t} Q0 {d} 0 {s} r\n" for t, docs in
                                              run.items() for d, s in docs.items()))):
        got = rank_run(r, read_qrels(qrels), float32_scores=False)
        assert list(zip(got.hit_topic.tolist(), got.hit_rank.tolist(), got.hit_label.tolist(),
                        strict=True)) == [(0, 1, 1), (0, 2, 1), (0, 3, 0), (0, 4, 0),
                                          (1, 1, 2), (1, 2, 2), (1, 3, 2)]


def test_one_judged_topic_after_a_topic_without_qrels():
    # run topic "a" (one row, no qrels) comes first, so "b"'s rows start at row 1 and end at
    # the last row; b: y 3 (grade 0), x 2 (1), z 1 (2): ranks 1, 2, 3. (Searching the whole
    # array, a's 0.5 included, as if b were the only topic, would put y at rank 0.)
    text = "a Q0 q 0 0.5 r\nb Q0 x 0 2.0 r\nb Q0 y 0 3.0 r\nb Q0 z 0 1.0 r\n"
    qrels = {"b": {"x": 1, "y": 0, "z": 2}}
    for r in (read_run(text), read_run({"a": {"q": 0.5}, "b": {"y": 3.0, "x": 2.0, "z": 1.0}})):
        for search in (0, 1 << 62):
            ranking.GLOBAL_KEYS_MAX_ROWS, saved = search, ranking.GLOBAL_KEYS_MAX_ROWS
            try:
                got = rank_run(r, read_qrels(qrels), float32_scores=False)
            finally:
                ranking.GLOBAL_KEYS_MAX_ROWS = saved
            assert got.topics == ["b"]
            assert list(zip(got.hit_rank.tolist(), got.hit_label.tolist(), strict=True)) == \
                [(1, 0), (2, 1), (3, 2)]


@pytest.mark.parametrize("text, ranks", [
    # two rows of one topic, the higher score second: b is rank 1
    ("t Q0 a 0 1.0 r\nt Q0 b 0 2.0 r\n", [(1, 2), (2, 1)]),
    # topics alternating row by row (no two rows of a topic adjacent, none rising next to
    # its own topic): t's rows b 2.0, a 1.0 and u's rows x 5.0, y 4.0
    ("t Q0 b 0 2.0 r\nu Q0 x 0 5.0 r\nt Q0 a 0 1.0 r\nu Q0 y 0 4.0 r\n",
     [(1, 2), (2, 1), (1, 0), (2, 0)]),
])
def test_rows_out_of_order_by_hand(text, ranks):
    qrels = read_qrels({"t": {"a": 1, "b": 2}, "u": {"x": 0, "y": 0}})
    for reader_min in (0, 1 << 62):
        saved = cranfield.inputs.io.FAST_READER_MIN_BYTES
        cranfield.inputs.io.FAST_READER_MIN_BYTES = reader_min
        try:
            run = read_run(text)
        finally:
            cranfield.inputs.io.FAST_READER_MIN_BYTES = saved
        got = rank_run(run, qrels, float32_scores=False)
        assert list(zip(got.hit_rank.tolist(), got.hit_label.tolist(), strict=True)) == ranks


@pytest.mark.parametrize("scores, want", [
    # the last topic (the only one) has exactly k + 1 rows: compare its k-th and (k+1)-th
    ([3.0, 2.0, 1.0, 1.0], {1: False, 2: False, 3: True, 4: False}),
    ([3.0, 3.0, 1.0, 0.0], {1: True, 2: False, 3: False, 4: False}),
    ([1.0, 1.0], {1: True, 2: False, 3: False, 4: False}),        # two rows in all
    ([2.0, 1.0], {1: False, 2: False, 3: False, 4: False}),
    ([1.0], {1: False, 2: False, 3: False, 4: False}),
])
def test_tie_at_cutoff_at_the_end_of_the_run(scores, want):
    run = read_run({"t": {f"d{i}": s for i, s in enumerate(scores)}})
    r = rank_run(run, read_qrels({"t": {"d0": 1}}), float32_scores=False,
                 tie_cutoffs=(1, 2, 3, 4))
    assert {k: v.tolist() for k, v in r.cutoff_ties.items()} == {k: [v] for k, v in want.items()}
    assert all(v.dtype == bool for v in r.cutoff_ties.values())


def test_no_tie_cutoffs_asked_gives_an_empty_dict():
    r = rank_run(read_run({"t": {"a": 1.0}}), read_qrels({"t": {"a": 1}}),
                 float32_scores=False)
    assert r.cutoff_ties == {}


def test_a_run_topic_with_no_rows():
    # a Run whose topic has no rows (the early return of the matching): nothing retrieved
    run = Run(["t"], np.zeros(0, np.int64), np.zeros(0, dtype=object), np.zeros(0))
    qrels = {"t": {"a": 1, "b": 0}}
    got = observed(rank_run(run, read_qrels(qrels), float32_scores=False, tie_cutoffs=TIE_KS))
    want = reference({"t": {}}, qrels, float32=False)
    assert got == want
    assert got["num_ret"] == [0] and got["hits"] == []


@pytest.mark.parametrize("reader", READERS)
def test_a_docid_judged_only_in_another_topic(reader, monkeypatch):
    # z is judged in topic a only; the run retrieves z in topic b (the last qrels topic):
    # not a judged document there. (Its (topic, docid) key lies past every qrels key.)
    run = {"b": {"z": 2.0, "m": 1.0}}
    qrels = {"a": {"z": 1}, "b": {"m": 1}}
    r = read(reader, run, "sorted", np.random.default_rng(0), monkeypatch)
    got = rank_run(r, read_qrels(qrels), float32_scores=False)
    assert got.topics == ["b"]
    assert list(zip(got.hit_rank.tolist(), got.hit_label.tolist(), strict=True)) == [(2, 1)]


@pytest.mark.parametrize("tix, n", [([], 2), ([0, 0, 1], 2), ([1, 1, 0], 2)])
def test_topic_blocks_are_int64(tix, n):
    lo, hi = topic_blocks(np.asarray(tix, dtype=np.int64), n)
    assert lo.dtype == np.int64 and hi.dtype == np.int64


def test_an_index_in_answer_in_several_chunks(monkeypatch):
    # pyarrow may answer index_in over a chunked column in several chunks (the one installed
    # here concatenates them): the matching must offset each chunk's rows. Re-chunk the real
    # answer like the probe to take that path.
    real = pyarrow.compute.index_in

    def chunked_like_probe(values, value_set):
        found = real(values, value_set=value_set)
        if not isinstance(values, pa.ChunkedArray):
            return found
        flat = found.combine_chunks() if isinstance(found, pa.ChunkedArray) else found
        bounds = np.cumsum([0] + [len(c) for c in values.chunks])
        return pa.chunked_array([flat[a:b] for a, b in zip(bounds[:-1], bounds[1:],
                                                           strict=True)], flat.type)
    monkeypatch.setattr(pyarrow.compute, "index_in", chunked_like_probe)
    for seed in range(4):
        run, qrels = random_case(seed)
        r = read("arrow-fnv", run, "interleaved", np.random.default_rng(seed), monkeypatch)
        got = observed(rank_run(r, read_qrels(qrels), float32_scores=False,
                                tie_cutoffs=TIE_KS))
        assert got == reference(run, qrels, float32=False)


def test_which_score_search_runs(monkeypatch):
    # score_positions: a run of at most GLOBAL_KEYS_MAX_ROWS rows is searched by one sort of
    # global integer keys, a longer one by the segmented binary search (ranking.py: "below
    # this many rows, one global sort ... beats a vectorised binary search"). Two topics, no
    # tied scores (so the docno tie-break does not search either); one and several judged.
    calls = []
    real = ranking.segmented_search

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(ranking, "segmented_search", spy)
    if ranking._mapscan is not None:  # the compiled search stands in for segmented_search

        class CountedSearches:
            def __getattr__(self, name):
                return getattr(real_ext, name)

            def positions(self, *args):
                calls.append(1)
                return real_ext.positions(*args)
        real_ext = ranking._mapscan
        monkeypatch.setattr(ranking, "_mapscan", CountedSearches())
    run = read_run({"a": {"x": 3.0, "y": 2.0, "z": 1.0}, "b": {"x": 5.0, "w": 4.0}})
    for qrels in ({"a": {"y": 1}, "b": {"x": 1}}, {"a": {"y": 1, "z": 0}, "b": {"w": 1}},
                  {"a": {"y": 1}}):
        q = read_qrels(qrels)
        for limit, searched in ((len(run), False), (len(run) - 1, True), (0, True),
                                (1 << 62, False)):
            monkeypatch.setattr(ranking, "GLOBAL_KEYS_MAX_ROWS", limit)
            calls.clear()
            got = rank_run(run, q, float32_scores=False)
            assert bool(calls) == searched, (qrels, limit)
            assert observed(got) == {**reference({"a": {"x": 3.0, "y": 2.0, "z": 1.0},
                                                  "b": {"x": 5.0, "w": 4.0}}, qrels,
                                                 float32=False), "ties": {}}
