"""Matching a run against qrels: which judged documents the run retrieved, as (run topic,
score, qrels row, run row) of each, by whichever path suits how the run was read (a hash
table of the judged docids, hashed (topic, docid) keys joined topic by topic or by one sorted
search, or lookups in a mapping's dicts). :mod:`.ranking` ranks what this finds.
"""

from __future__ import annotations

from itertools import chain, repeat

import numpy as np

from .arrow_arrays import arrow_ints, numpy_of, take_rows
from .docid_keys import (
    fnv1a_hashes,
    packed_keys,
    qrels_hashes,
    row_bits,
    rows_with_prefixes,
    run_hashes,
    run_packed_keys,
    shared_prefixes,
    topic_blocks,
    topic_doc_keys,
)
from .run_qrels import Qrels, Run

try:  # compiled lookups and joins (cranfield/inputs/_mapscan.c); without it, numpy's
    from . import _mapscan
except ImportError:  # pragma: no cover - an install without a C compiler
    _mapscan = None


# A run with this many rows per distinct judged docid is matched through a hash bitmap first.
PREFILTER_ROWS_PER_JUDGED = 64


def match_judged(run: Run, qrels: Qrels, run_to_qrels: np.ndarray, blocks=None):
    """The judged documents the run retrieved: (run topic, score, qrels row) of each.

    From files the docid column is looked up in a hash table of the judged docids (pyarrow
    ``index_in``, in C); from mappings the qrels drive ``dict.get`` lookups into the run, a
    loop over judgments rather than over retrieved documents.
    """
    empty = np.zeros(0, np.int64)
    if len(qrels) == 0 or len(run) == 0:
        return empty, np.zeros(0, np.float64), empty, empty
    if run._origin is not None:
        return _match_mapping(run, qrels, run_to_qrels)
    if not isinstance(run.docids, np.ndarray) and run.docid_fnv is None and \
            row_bits(max(len(run), len(qrels))) <= MAX_ROW_BITS:
        if _mapscan is not None:
            found = _match_blocks(run, qrels, run_to_qrels, blocks)
            if found is not None:
                return found
        return _match_hashed(run, qrels, run_to_qrels)
    if isinstance(run.docids, np.ndarray):
        # read line by line (no pyarrow): that reader already costs a loop per line
        uniq, q_code = np.unique(qrels.docids.astype(str), return_inverse=True)
        lookup = {d: i for i, d in enumerate(uniq.tolist())}
        code = np.fromiter(map(lookup.get, run.docids.tolist(), [-1] * len(run)), np.int64,
                           len(run))
        cand = (code >= 0).nonzero()[0]
        code = code[cand]
        n_uniq = len(uniq)
    else:
        import pyarrow as pa
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(qrels.docids_arrow)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.unify_dictionaries().combine_chunks()
        q_code = numpy_of(encoded.indices, np.int32)
        n_uniq = len(encoded.dictionary)
        probe, pre = run.docids, None
        if run.docid_fnv is not None and len(run) > PREFILTER_ROWS_PER_JUDGED * n_uniq:
            # A bitmap of the judged docids' hashes rules out most rows with one gather;
            # only the survivors are compared as strings (equal strings hash equal).
            bits = 1 << int(min(30, max(16, (256 * n_uniq).bit_length())))
            judged = np.zeros(bits, dtype=bool)
            judged[fnv1a_hashes(encoded.dictionary) & np.uint64(bits - 1)] = True
            from ._json_kernels import hash_hits  # docid_fnv comes from these kernels

            pre = np.empty(len(run), dtype=np.int64)
            pre = pre[:hash_hits(run.docid_fnv, judged, pre)]
            probe = take_rows(run.docids, pre)
        # one hash table of the judged docids, probed by every run chunk
        found = pc.index_in(probe, value_set=encoded.dictionary)
        chunks = found.chunks if isinstance(found, pa.ChunkedArray) else [found]
        cands, codes, offset = [], [], 0
        for chunk in chunks:
            hit = numpy_of(pc.cast(chunk.is_valid(), pa.int8()), np.int8).nonzero()[0]
            cands.append(hit + offset)
            codes.append(numpy_of(chunk.take(arrow_ints(hit)), np.int32))
            offset += len(chunk)
        del found, chunks
        cand = np.concatenate(cands).astype(np.int64)
        code = np.concatenate(codes).astype(np.int64)
        if pre is not None:
            cand = pre[cand]
    q_key = qrels.topic_index.astype(np.int64) * n_uniq + q_code
    q_order = np.argsort(q_key, kind="stable")
    q_key_sorted = q_key[q_order]
    rq = run_to_qrels[run.topic_index[cand]]
    cand, code = cand[rq >= 0], code[rq >= 0]
    rq = rq[rq >= 0]
    key = rq * n_uniq + code
    pos = np.minimum(q_key_sorted.searchsorted(key), len(q_key_sorted) - 1)
    hit = q_key_sorted[pos] == key
    rows = cand[hit]
    return run.topic_index[rows].astype(np.int64), run.scores[rows], q_order[pos[hit]], rows


# Row numbers share a sorted key's 64 bits with a prefix of its hash (see
# docid_keys.packed_keys): up to 2^36 rows the prefix keeps 28 bits or more, enough that
# shared prefixes stay rare.
MAX_ROW_BITS = 36


def _match_hashed(run: Run, qrels: Qrels, run_to_qrels: np.ndarray):
    """:func:`match_judged` without a Python string per docid: (topic, docid) keys hashed from the
    docids' bytes on both sides, both sorted (the run's already were, when it was read),
    and joined by one search of the sorted qrels keys in the sorted run keys.

    Exact whatever the hash: a key prefix two rows of one side share (a collision, as the
    readers refuse a docid twice in a topic) sends every row holding it on either side to
    an exact match by (topic, docid) string; every other pair that shares a prefix is one
    row on each side and is kept only if its topics and docid bytes are equal (a prefix
    shared across sides by different docids is therefore no match, and an equal docid
    always gives an equal prefix). A hash collision costs time, never a number.
    """

    rb = row_bits(max(len(run), len(qrels)))
    low = (np.uint64(1) << np.uint64(rb)) - np.uint64(1)
    packed, run_shared = run_packed_keys(run, rb)
    q_rt = _qrels_to_run(qrels, run_to_qrels)[qrels.topic_index]  # (run topic of each row)
    if (q_rt >= 0).all():  # (every qrels topic in the run: no rows to leave out)
        q_rows = None
        q_keys = topic_doc_keys(qrels_hashes(qrels), q_rt)
    else:
        q_rows = (q_rt >= 0).nonzero()[0]
        q_keys = topic_doc_keys(qrels_hashes(qrels)[q_rows], q_rt[q_rows], in_place=True)
    q_packed = packed_keys(q_keys, rb)
    del q_keys

    pos = packed.searchsorted(q_packed & ~low)          # first run key with that prefix
    np.minimum(pos, len(packed) - 1, out=pos)
    probe = packed[pos]
    probe ^= q_packed
    hit = (probe <= low).nonzero()[0]
    del probe
    shared = np.union1d(run_shared, shared_prefixes(q_packed, rb))
    if len(shared):
        hit = hit[~np.isin(q_packed[hit] >> np.uint64(rb), shared)]
    r_row = (packed[pos[hit]] & low).astype(np.int64)
    q_row = (q_packed[hit] & low).astype(np.int64)
    if len(shared):  # the rows behind a shared prefix: matched by their strings
        sr = rows_with_prefixes(packed, rb, shared)
        sq = rows_with_prefixes(q_packed, rb, shared)
        if q_rows is not None:
            sq = q_rows[sq]
        where = dict(zip(zip(run.topic_index[sr].tolist(), run.docids_at(sr).tolist(),
                             strict=True), sr.tolist(), strict=True))
        found = [(where.get(key), q) for key, q in zip(
            zip(q_rt[sq].tolist(), qrels.docids_at(sq).tolist(), strict=True), sq.tolist(),
            strict=True)]
        found = [(r, q) for r, q in found if r is not None]
    else:
        found = []
    if q_rows is not None:
        q_row = q_rows[q_row]
    del packed, q_packed, pos, hit
    if found:  # (exact matches: verified again below with the others, at no cost to speak of)
        extra = np.asarray(found, dtype=np.int64)
        r_row = np.concatenate([r_row, extra[:, 0]])
        q_row = np.concatenate([q_row, extra[:, 1]])
    del found
    order = np.argsort(r_row, kind="stable")  # (a diversity docid: its qrels rows in order)
    r_row, q_row = r_row[order], q_row[order]
    del order
    r_row, q_row = _verified(run, qrels, q_rt, r_row, q_row)
    if len(run) >= KEEP_KEYS_MAX_ROWS:
        run._packed = None  # 8 bytes a row, through the evaluation's peak: rebuilt if needed
    return run.topic_index[r_row].astype(np.int64), run.scores[r_row], q_row, r_row


def _verified(run: Run, qrels: Qrels, q_rt: np.ndarray, r_row: np.ndarray,
              q_row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The candidate (run row, qrels row) pairs whose topics are the same and whose docids
    are equal byte for byte (compared in blocks, in Arrow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    same = run.topic_index[r_row] == q_rt[q_row]
    q_docids = qrels.docids_arrow
    for a in range(0, len(r_row), VERIFY_BLOCK):  # docid bytes compared, block by block
        b = min(a + VERIFY_BLOCK, len(r_row))
        equal = pc.equal(take_rows(run.docids, r_row[a:b]),
                         q_docids.take(arrow_ints(q_row[a:b])))
        if not pc.all(equal).as_py():
            same[a:b] &= numpy_of(pc.cast(equal, pa.int8()), np.int8).astype(bool)
        del equal
    if not same.all():
        r_row, q_row = r_row[same], q_row[same]
    return r_row, q_row


def _match_blocks(run: Run, qrels: Qrels, run_to_qrels: np.ndarray, blocks=None):
    """:func:`_match_hashed` topic by topic, when each of the run's topics is one block of
    rows (else None): the compiled ``block_join`` pairs each qrels topic's rows with the run
    rows of its topic whose docid hash is equal, in a table small enough to stay in cache
    (no sort of all the run's keys), and every pair is then compared as strings. Exact
    whatever the hash: an equal docid always hashes equal, and an equal hash is only a
    candidate. ``blocks``: the run's :func:`topic_blocks`, when the caller has them."""
    lo, hi = blocks if blocks is not None else topic_blocks(run.topic_index, len(run.topics))
    if lo is None:
        return None
    qrels_to_run = _qrels_to_run(qrels, run_to_qrels)
    in_run = (qrels_to_run >= 0).nonzero()[0]
    # each qrels topic's block of run rows ((0, 0): not in the run)
    run_lo = np.zeros(len(qrels.topics), np.int64)
    run_hi = np.zeros(len(qrels.topics), np.int64)
    run_lo[in_run], run_hi[in_run] = lo[qrels_to_run[in_run]], hi[qrels_to_run[in_run]]
    offsets = qrels.offsets.astype(np.int64)
    # qrels topics in the order of their run blocks: the pairs come out by run row
    order = in_run[np.argsort(run_lo[in_run], kind="stable")]
    pairs = _mapscan.block_join(run_hashes(run), run_lo, run_hi, qrels_hashes(qrels),
                                offsets[:-1].copy(), offsets[1:].copy(), order)
    if pairs is None:  # hashes that collide or cluster on purpose: the sorted keys are safe
        return None
    r_row, q_row = (np.frombuffer(rows, np.int64) for rows in pairs)
    r_row, q_row = _verified(run, qrels, qrels_to_run[qrels.topic_index], r_row, q_row)
    if len(run) >= KEEP_KEYS_MAX_ROWS:
        run._hashes = None  # 8 bytes a row, through the evaluation's peak: hashed again
    return run.topic_index[r_row].astype(np.int64), run.scores[r_row], q_row, r_row


# Matched pairs whose docid bytes are compared at once (bounds Arrow's temporaries).
VERIFY_BLOCK = 1 << 18
# A run this long drops its sorted keys once matched (they would stay resident through the
# evaluation's peak); a shorter one keeps them for the next evaluation.
KEEP_KEYS_MAX_ROWS = 1 << 20


def _match_mapping(run: Run, qrels: Qrels, run_to_qrels: np.ndarray):
    """Look each judged docid up in the run's dict for its topic (one ``map`` per topic)."""
    origin = run._origin
    bounds = qrels.offsets.tolist()
    docids = qrels.docids.tolist()
    # a run's scores are finite (checked when it was read), so NaN can mark "not retrieved"
    # and the lookups land straight in a float array
    got = None
    if _mapscan is not None and isinstance(origin, dict):  # the same lookups, compiled
        got = _mapscan.lookup(origin, list(qrels.topics), bounds, docids)
        got = None if got is None else np.frombuffer(got, np.float64)
    if got is None:
        missing = repeat(np.nan)
        got = np.fromiter(chain.from_iterable(
            map(docs.get, docids[bounds[q]:bounds[q + 1]], missing) if docs
            else repeat(np.nan, bounds[q + 1] - bounds[q])
            for q, docs in enumerate(map(origin.get, qrels.topics))), np.float64,
            len(docids))
    rows = (~np.isnan(got)).nonzero()[0]
    return _qrels_to_run(qrels, run_to_qrels)[qrels.topic_index[rows]], got[rows], rows, None


def _qrels_to_run(qrels: Qrels, run_to_qrels: np.ndarray) -> np.ndarray:
    """The run topic of each qrels topic: ``run_to_qrels`` inverted (-1: not in the run)."""
    qrels_to_run = np.full(len(qrels.topics), -1, dtype=np.int64)
    judged = (run_to_qrels >= 0).nonzero()[0]
    qrels_to_run[run_to_qrels[judged]] = judged
    return qrels_to_run
