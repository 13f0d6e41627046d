"""Docid hashing and key packing: 64-bit hashes of docid columns computed over their byte
buffers, (topic, docid) keys mixed from them, packed with row numbers and sorted, and the
rows of a run or qrels that may repeat a docid in a topic (found from those keys, or by the
compiled per-topic tables).

Room: inputs.
"""

from __future__ import annotations

import numpy as np

from .arrow_arrays import arrow_strings
from .run_qrels import Qrels, Run

try:  # the compiled mapping reader (cranfield/inputs/_mapscan.c); without it, the same in Python
    from . import _mapscan
except ImportError:  # pragma: no cover - an install without a C compiler
    _mapscan = None


_HASH_P = np.uint64(0x100000001B3)            # odd: invertible modulo 2**64
_HASH_P_INV = np.uint64(pow(0x100000001B3, -1, 2**64))


_powers_cache: list[np.ndarray] = []


def _hash_powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P^j and P^-j (mod 2**64) for j < n, computed once and reused."""
    if not _powers_cache or len(_powers_cache[0]) < n:
        size = max(n, 1 << 16)
        pw = np.full(size, _HASH_P, dtype=np.uint64)
        pw[0] = 1
        inv = np.full(size, _HASH_P_INV, dtype=np.uint64)
        inv[0] = 1
        _powers_cache[:] = [np.cumprod(pw), np.cumprod(inv)]
    return _powers_cache[0], _powers_cache[1]


def docid_hashes(docids) -> np.ndarray:
    """A 64-bit polynomial hash of each string of a pyarrow string array (or chunked array),
    computed over its byte buffer in numpy (no Python object per docid). Equal strings hash
    equal; callers verify equal hashes exactly, so a collision costs time, never
    correctness."""
    chunks = docids.chunks if hasattr(docids, "chunks") else [docids]
    out = np.empty(sum(len(c) for c in chunks), dtype=np.uint64)
    pos = 0
    for chunk in chunks:
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1,
                                offset=chunk.offset * 4).astype(np.int64)
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)
        step = 1 << 16
        for a in range(0, len(chunk), step):  # blocks of rows bound the temporary arrays
            b = min(a + step, len(chunk))
            lo, hi = offsets[a], offsets[b]
            n = int(hi - lo)
            powers, inverse = _hash_powers(n + 1)
            prefix = np.zeros(n + 1, dtype=np.uint64)
            np.cumsum(data[lo:hi] * powers[:n], out=prefix[1:])
            starts, ends = offsets[a:b] - lo, offsets[a + 1:b + 1] - lo
            # sum_j byte_j P^(start+j), rescaled by P^-start; plus the length, so that no
            # string hashes like its own prefix followed by NUL bytes
            out[pos + a:pos + b] = (prefix[ends] - prefix[starts]) * inverse[starts] + (
                ends - starts).astype(np.uint64)
        pos += len(chunk)
    return out


_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


def fnv1a_hashes(strings) -> np.ndarray:
    """FNV-1a (64-bit) of each string's UTF-8 bytes, vectorised across strings one byte
    position at a time (as many numpy passes as the longest string has bytes). Not
    :func:`docid_hashes`: this is the hash the JSON scan leaves on a run (``Run.docid_fnv``),
    so judged docids can be looked up among its rows."""
    import pyarrow as pa

    arr = arrow_strings(strings) if not isinstance(strings, pa.Array) else strings
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1,
                            offset=arr.offset * 4).astype(np.int64)
    data = np.frombuffer(arr.buffers()[2] or b"\0", dtype=np.uint8)
    lengths = np.diff(offsets)
    out = np.full(len(arr), _FNV_OFFSET, dtype=np.uint64)
    for j in range(int(lengths.max()) if len(lengths) else 0):
        live = np.flatnonzero(lengths > j)
        out[live] = (out[live] ^ data[offsets[live] + j].astype(np.uint64)) * _FNV_PRIME
    return out


_MIX_TOPIC = np.uint64(0x9E3779B97F4A7C15)
_MIX_KEY = np.uint64(0xBF58476D1CE4E5B9)


def topic_doc_keys(hashes: np.ndarray, topic_index: np.ndarray, *,
                   in_place: bool = False) -> np.ndarray:
    """A 64-bit key per (topic, docid hash): equal pairs give equal keys; the bits are mixed
    so that any top bits of a key serve as a hash of the pair (a new array, or ``hashes``
    overwritten)."""
    keys = hashes if in_place else hashes.copy()
    for a in range(0, len(keys), _BLOCK):  # in blocks: no temporary the size of the input
        part = keys[a:a + _BLOCK]
        part += topic_index[a:a + _BLOCK].astype(np.uint64) * _MIX_TOPIC
        part *= _MIX_KEY
        part ^= part >> np.uint64(29)
    return keys


_BLOCK = 1 << 18


def row_bits(n: int) -> int:
    """Bits that number ``n`` rows (at least 1)."""
    return max(1, int(n - 1).bit_length())


def packed_keys(keys: np.ndarray, rb: int) -> np.ndarray:
    """``keys`` sorted, each keeping its top ``64 - rb`` bits above its row number in the low
    ``rb`` bits: one in-place sort of one array gives both the order and the rows (an
    argsort costs twice as much and a second array). Consumes ``keys``."""
    keys >>= np.uint64(rb)
    keys <<= np.uint64(rb)
    for a in range(0, len(keys), _BLOCK):
        keys[a:a + _BLOCK] |= np.arange(a, min(a + _BLOCK, len(keys)), dtype=np.uint64)
    keys.sort()
    return keys


def shared_prefixes(packed: np.ndarray, rb: int) -> np.ndarray:
    """The key prefixes (``packed >> rb``) that more than one row holds, sorted, unique."""
    found = []
    limit = np.uint64(1) << np.uint64(rb)
    for a in range(0, len(packed) - 1, _BLOCK):  # in blocks: no full-size temporary
        b = min(a + _BLOCK, len(packed) - 1)
        same = (packed[a + 1:b + 1] ^ packed[a:b]) < limit
        if same.any():
            found.append(packed[a + 1:b + 1][same] >> np.uint64(rb))
    return np.unique(np.concatenate(found)) if found else np.zeros(0, np.uint64)


def rows_with_prefixes(packed: np.ndarray, rb: int, prefixes: np.ndarray) -> np.ndarray:
    """The rows (low ``rb`` bits) of ``packed`` whose prefix is one of ``prefixes``."""
    if not len(prefixes) or not len(packed):
        return np.zeros(0, np.int64)
    lo = packed.searchsorted(prefixes << np.uint64(rb))
    hi = packed.searchsorted(((prefixes + np.uint64(1)) << np.uint64(rb)) - np.uint64(1),
                             "right")
    idx = np.concatenate([np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist(),
                                                          strict=True)])
    return (packed[idx.astype(np.int64)] & ((np.uint64(1) << np.uint64(rb)) - np.uint64(1))
            ).astype(np.int64)


def run_packed_keys(run: Run, rb: int) -> tuple[np.ndarray, np.ndarray]:
    """The run's packed (topic, docid) keys with ``rb`` row bits and the prefixes rows share
    (computed once per rb; for more row bits than kept, from the kept keys: not hashed again)."""
    if run._packed is not None and run._packed[0] == rb:
        return run._packed[1], run._packed[2]
    if run._packed is not None and run._packed[0] < rb:
        # (each kept key holds its top 64 - kept rb bits: the top 64 - rb of them, re-packed)
        kept_rb, kept = run._packed[0], run._packed[1]
        packed = kept >> np.uint64(rb)
        packed <<= np.uint64(rb)
        row_mask = (np.uint64(1) << np.uint64(kept_rb)) - np.uint64(1)
        for a in range(0, len(packed), _BLOCK):
            packed[a:a + _BLOCK] |= kept[a:a + _BLOCK] & row_mask
        del kept
        packed.sort()
    else:
        keys = topic_doc_keys(docid_hashes(run.docids), run.topic_index, in_place=True)
        packed = packed_keys(keys, rb)
    shared = shared_prefixes(packed, rb)
    run._packed = (rb, packed, shared)
    return packed, shared


def run_hashes(run: Run) -> np.ndarray:
    """:func:`docid_hashes` of a run's docids (a pyarrow column), computed once."""
    if run._hashes is None or len(run._hashes) != len(run):
        run._hashes = docid_hashes(run.docids)
    return run._hashes


def qrels_hashes(qrels: Qrels) -> np.ndarray:
    """:func:`docid_hashes` of the qrels' docids, in row order (computed once)."""
    if qrels._hashes is None or len(qrels._hashes) != len(qrels):
        qrels._hashes = docid_hashes(qrels.docids_arrow)
    return qrels._hashes


def topic_blocks(tix: np.ndarray, n_topics: int):
    """(start, end) of each topic's rows if every topic's rows are contiguous, else
    (None, None). Blocks may come in any topic order; a topic with no rows gets (0, 0)."""
    if len(tix) == 0:
        return np.zeros(n_topics, np.int64), np.zeros(n_topics, np.int64)
    if tix[0] <= tix[-1] and (len(tix) < 2 or (tix[1:] >= tix[:-1]).all()):
        # topics in index order (every mapping, most files): one search gives every block
        # (for values of tix's own dtype: an int64 query would cast all of tix, 7M rows)
        bounds = tix.searchsorted(np.arange(n_topics + 1, dtype=tix.dtype))
        return bounds[:-1], bounds[1:]
    lo = np.zeros(n_topics, np.int64)
    hi = np.zeros(n_topics, np.int64)
    change = (tix[1:] != tix[:-1]).nonzero()[0] + 1
    starts = np.concatenate(([0], change)).astype(np.int64)
    heads = tix[starts]
    if len(np.unique(heads)) != len(heads):  # some topic's rows come in several blocks
        return None, None
    lo[heads] = starts
    hi[heads] = np.concatenate((change, [len(tix)]))
    return lo, hi


def duplicate_suspects(run: Run | Qrels) -> np.ndarray:
    """The rows (ascending) of a run or qrels that may repeat a docid in their topic: those
    whose docid hash another row of the topic shares. For a run, with the compiled tables
    (cranfield/inputs/_mapscan.c) and each topic's rows in one block, a table per topic (~15 ns a
    row, where one sort of all the keys costs ~60); else, and for qrels, the sorted (topic,
    docid) keys (a run keeps them for matching, qrels their hashes). Equal hashes are only
    suspects: callers compare their strings."""
    if len(run) < 2:
        return np.zeros(0, np.int64)
    if isinstance(run, Qrels):
        rb = row_bits(len(run))
        packed = packed_keys(topic_doc_keys(qrels_hashes(run), run.topic_index), rb)
        return np.sort(rows_with_prefixes(packed, rb, shared_prefixes(packed, rb)))
    if _mapscan is not None and not isinstance(run.docids, np.ndarray):
        lo, hi = topic_blocks(run.topic_index, len(run.topics))
        found = None if lo is None else _mapscan.block_duplicates(run_hashes(run), lo, hi)
        if found is not None:  # (None: hashes that cluster on purpose; the sort is safe)
            return np.sort(np.frombuffer(found, np.int64))
    rb = row_bits(len(run))
    packed, shared = run_packed_keys(run, rb)
    return np.sort(np.asarray(rows_with_prefixes(packed, rb, shared), dtype=np.int64))
