"""Large JSON bodies straight into columns, without a Python object per document.

A 7-million-score run sent as ``{"run": {topic: {docid: score}}}`` costs orjson about two
seconds to turn into dicts, floats and strings, five times what evaluating it costs. This
module reads such a body in one compiled pass (C: ``_jsonscan.c`` in the
``cranfield.inputs._mapscan`` extension, named by ``_json_kernels.py``; large mappings in pieces on
all cores): it walks the top-level object, and for ``run`` and ``qrels`` values shaped
``{string: {string: number}}`` copies the docids into an Arrow buffer and converts the numbers —
exactly when Clinger's fast path applies (at most 15 significant digits, a power of ten up to 22),
else by Arrow's correctly rounding parser — so every value is the double any conforming JSON parser
gives. Everything else in the body is handed to orjson with the big values replaced by a
placeholder, so the envelope is decoded and checked exactly as before.

The fast path is *sound, not complete*: it accepts only input it reads exactly as orjson
would, and answers ``None`` for anything else — escapes in a key, a docid or topic given twice,
a non-number score, a non-finite value, the extension or pyarrow missing, a malformed body —
and the caller decodes the body with :func:`loads`, which gives the precise error. Without the
extension (installed where no C compiler was found) every body takes that path: the same
answers, slower (tests/engine/test_json_scan_fallback.py holds both paths equal).

A key given twice in one object is never read "last wins" (what JSON readers do, silently):
:func:`loads` reads repeated keys as TREC text reads the same lines — a topic given twice in a
run or qrels mapping is one topic with the documents of both (as a topic on non-adjacent
lines), a docid twice in a topic is the refusal TREC text gets (``duplicate-docid`` for a run,
``duplicate-judgment`` for qrels, naming ``run.q1.d1``), and any other member given twice is
refused naming its path. Results never depend on which path ran (tests
compare both on every shape). One liberty: an integer score beyond 64 bits, which orjson
refuses, is read as the nearest double.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from array import array
from itertools import chain
from typing import Any

import numpy as np

from ..errors import InputError
from ..settings import SETTINGS
from . import grammar
from .run_qrels import Qrels, Run, in_strcmp_order

# Below this size orjson is faster than the compiled scan's fixed costs.
FAST_JSON_MIN_BYTES = SETTINGS.fast_json_min_bytes
# The members whose values may be read as columns, and what they become.
COLUMN_MEMBERS = ("run", "qrels")

_kernels: Any = None  # cranfield.inputs._json_kernels once imported; False without the extension


def _load_kernels():
    global _kernels
    if _kernels is None:
        try:
            from . import _json_kernels
        except ImportError:
            _kernels = False
        else:
            _kernels = _json_kernels
    return _kernels


def warm_up() -> bool:
    """Load the compiled kernels now and read a small body with them: whether the compiled
    scan is there (the C extension ``cranfield.inputs._mapscan``; nothing is compiled at run time,
    so this costs milliseconds)."""
    if not _load_kernels():
        return False
    decode_body(b'{"run": {"q": {"d": 1, "e": 0.5e1}}, "qrels": {"q": {"d": 1}}}', min_bytes=0)
    return True


def scan_module() -> str | None:
    """The module whose compiled scan reads large JSON bodies (``"cranfield.inputs._mapscan"``), or
    None where the extension was not built and every body is read by orjson."""
    return "cranfield.inputs._mapscan" if _load_kernels() else None


class Columns:
    """A ``run`` or ``qrels`` value read as columns, standing in for the mapping in the decoded
    body: ``value`` is the :class:`Run` or :class:`Qrels`, ``raw`` the JSON text as sent (a
    view into the body: what a queued job stores)."""

    __slots__ = ("value", "raw")

    def __init__(self, value, raw: memoryview):
        self.value, self.raw = value, raw

    def __len__(self) -> int:
        return len(self.value)


def decode_body(raw: bytes, *, min_bytes: int | None = None) -> dict | None:
    """The JSON object in ``raw`` with large ``run``/``qrels`` mappings as :class:`Columns`,
    or ``None`` when the fast path does not apply (the caller uses orjson)."""
    if len(raw) < (FAST_JSON_MIN_BYTES if min_bytes is None else min_bytes):
        return None
    kernels = _load_kernels()
    if not kernels:
        return None
    import orjson

    buf = np.frombuffer(raw, dtype=np.uint8)
    i = kernels.object_start(buf)
    if i < 0:
        return None
    columns: dict[str, Columns] = {}
    keys: list[bytes] = []
    pieces, last = [], 0
    while True:
        key_start, key_end, value_start = kernels.member_at(buf, i)
        if key_start < 0:
            return None
        key = raw[key_start:key_end]
        keys.append(key)
        name = key.decode("ascii", "replace")
        if name in COLUMN_MEMBERS and raw[value_start:value_start + 1] == b"{":
            value, value_end = _read_columns(kernels, buf, raw, value_start, name)
            if value is None:
                return None
            columns[name] = value
            pieces += [raw[last:value_start], b"0"]
            last = value_end
        else:
            value_end = kernels.value_end(buf, value_start)
            if value_end < 0:
                return None
        i, closed = kernels.after_value(buf, value_end)
        if i < 0:
            return None
        if closed:
            break
    if not columns or len(set(keys)) != len(keys):
        return None
    pieces.append(raw[last:])
    envelope = b"".join(pieces)
    try:
        body = orjson.loads(envelope)
    except orjson.JSONDecodeError:
        return None
    if _has_repeats_plain(envelope):
        return None  # a member given twice: loads() names it
    if not isinstance(body, dict) or any(body.get(k) != 0 for k in columns):
        return None
    body.update(columns)
    return body


def read_json_mapping(raw: bytes, kind: str, gains: str = "integer") -> Run | Qrels:
    """A JSON text holding one ``{topic: {docid: value}}`` mapping (what a queued job
    stores) as a :class:`Run` (``kind="run"``) or :class:`Qrels`, by the fast path when it
    applies, else by orjson and the mapping reader (which name what is wrong). Qrels
    declared to hold real gains (``gains="real"``) are read in Python
    (:func:`real_qrels_from_mapping`), never by the compiled scan, which reads integers."""
    from collections.abc import Mapping

    from .io import read_qrels, read_run

    kernels = _load_kernels() if len(raw) >= FAST_JSON_MIN_BYTES and gains != "real" \
        else None
    if kernels:
        buf = np.frombuffer(raw, dtype=np.uint8)
        start = int(kernels.skip_ws(buf, 0))
        value, end = _read_columns(kernels, buf, raw, start, kind)
        if value is not None and kernels.skip_ws(buf, end) == len(buf):
            return value.value
    import orjson

    try:
        mapping = loads(raw, root=kind)
    except orjson.JSONDecodeError as exc:
        raise InputError(kind, f"not valid JSON: {exc}") from None
    if not isinstance(mapping, Mapping):
        raise InputError(kind, "must be an object {topic: {docid: value}}", field=kind)
    if kind == "run":
        return read_run(mapping, name=kind)
    return read_qrels(mapping, name=kind, gains=gains)



# --------------------------------------------------------------------------------------------
# Keys given twice
# --------------------------------------------------------------------------------------------

class _Repeats(list):
    """The (key, value) pairs of a JSON object that holds a key twice, in order."""


def _pairs_hook(pairs: list) -> dict | _Repeats:
    mapping = dict(pairs)
    return mapping if len(mapping) == len(pairs) else _Repeats(pairs)


def _has_repeats_plain(raw: bytes | str) -> bool:
    """Whether some object in the (valid) JSON text ``raw`` holds a key twice, by the
    standard library's reader (which, unlike orjson, shows each object's pairs)."""
    found = False

    def hook(pairs):
        nonlocal found
        mapping = dict(pairs)
        if len(mapping) != len(pairs):
            found = True
        return mapping

    json.loads(raw, object_pairs_hook=hook)
    return found


# From this size the compiled repeated-key scan beats the standard library's reader (~8x at
# 1 MB, about orjson's own time; below, its fixed cost is more than the reader's)
SCAN_MIN_BYTES = 64 << 10


def _may_repeat(raw: bytes | str) -> bool:
    """Whether ``raw`` (valid JSON) may hold a key twice in an object: a large text by the
    compiled scan (one pass; it answers "maybe" for an escaped key), else by the standard
    library's reader."""
    kernels = _load_kernels() if len(raw) >= min(SCAN_MIN_BYTES, FAST_JSON_MIN_BYTES) \
        else None
    if kernels:
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        return int(kernels.repeated_keys(np.frombuffer(data, dtype=np.uint8))) != 0
    return _has_repeats_plain(raw)


def loads(raw: bytes | str, *, root: str | None = None) -> Any:
    """The JSON text ``raw`` decoded as orjson decodes it (its errors, ``JSONDecodeError``,
    pass through), except where an object holds a key twice, which is read as TREC text reads
    the same lines (:class:`InputError` otherwise, naming the path):

    - in a run or qrels mapping (the value of a ``run`` or ``qrels`` member, or the whole text
      when ``root`` is ``"run"`` or ``"qrels"``), a topic given twice is one topic holding the
      documents of both, and a docid twice in a topic is refused as in TREC text
      (``duplicate-docid`` / ``duplicate-judgment``, field ``run.q1.d1``; a compared run's
      ``runs[2].run`` is named ``runs[2]``, as its other errors are);
    - any other member given twice is refused (``invalid-request``, naming its path).

    Costs one more read of the text: a compiled scan for large texts, and only when a key is
    given twice (or escaped) the standard library's reader."""
    import orjson

    body = orjson.loads(raw)
    if not _may_repeat(raw):
        return body
    del body  # (a large body is not held twice while it is read again)
    tree = json.loads(raw, object_pairs_hook=_pairs_hook)
    role = ("mapping", root, root) if root in COLUMN_MEMBERS else ("envelope", None, None)
    return _resolve(tree, "", role)


def _path(parent: str, key) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def _resolve(node, path: str, role: tuple) -> Any:
    """``node`` (the standard reader's, with :class:`_Repeats` for objects holding a key
    twice) as plain values, repeated keys resolved by ``role``: (what the node is:
    "envelope", "mapping", "topic" or "other"; for a mapping or a topic, its kind ("run" or
    "qrels") and the label its errors use; for a topic, its id)."""
    what, kind, label, topic = role + (None,) * (4 - len(role))
    if isinstance(node, list) and not isinstance(node, _Repeats):
        return [_resolve(v, _path(path, i), ("other",)) for i, v in enumerate(node)]
    if not isinstance(node, dict | _Repeats):
        return node
    pairs = list(node) if isinstance(node, _Repeats) else list(node.items())
    if isinstance(node, _Repeats):
        if what == "mapping":
            pairs = _merge_topics(pairs, label)
        else:
            seen: set = set()
            key = next(k for k, _ in pairs if k in seen or seen.add(k))
            if what == "topic":
                raise _duplicate(kind, label, topic, key)
            raise InputError(_path(path, key), f"{key!r} is given twice in one JSON object "
                             "(a JSON reader keeps only one of them, silently): give it once",
                             field=_path(path, key), code="invalid-request")
    out = {}
    for key, value in pairs:
        if what == "mapping":
            child: tuple = ("topic", kind, label, key)
        elif what == "topic":
            child = ("other",)
        elif what in ("envelope", "other") and key in COLUMN_MEMBERS and \
                isinstance(value, dict | _Repeats):
            # the run or qrels of a request, or a compared run's (``runs[2].run``: its
            # errors say ``runs[2]``, as the mapping reader's do)
            child = ("mapping", key, path if key == "run" and path.endswith("]")
                     else _path(path, key))
        else:
            child = ("other",)
        out[key] = _resolve(value, _path(path, key), child)
    return out


def _merge_topics(pairs: list, label: str) -> list:
    """The pairs of a run or qrels mapping (named ``label``) with each topic given more than
    once as one topic holding the documents of all, in the order sent (TREC text's reading
    of a topic on non-adjacent lines); a docid then twice in it is a :class:`_Repeats` its
    reading refuses. A topic given twice, not both times as an object, is refused."""
    merged: dict = {}
    for key, value in pairs:
        if key not in merged:
            merged[key] = value
            continue
        first = merged[key]
        if not isinstance(first, dict | _Repeats) or not isinstance(value, dict | _Repeats):
            raise InputError(label, f"topic {key!r} is given twice, not both times as an "
                             "object {docid: value}", field=f"{label}.{key}")
        both = [*(first if isinstance(first, _Repeats) else first.items()),
                *(value if isinstance(value, _Repeats) else value.items())]
        merged[key] = _pairs_hook(both)
    return list(merged.items())


def _duplicate(kind: str, label: str, topic: str, docid: str) -> InputError:
    """The refusal TREC text gets for a docid twice in a topic (its words and code), naming
    the mapping's path."""
    field = f"{label}.{topic}.{docid}"
    if kind == "qrels":
        return InputError(label, f"docid {docid!r} is judged twice for topic {topic!r}",
                          field=field, code="duplicate-judgment")
    return InputError(label, f"docid {docid!r} appears twice in topic {topic!r}",
                      field=field, code="duplicate-docid")


# Mappings at least this big are read in pieces on all cores (the kernels release the GIL).
PARALLEL_MIN_BYTES = 8 << 20
_pool: Any = None


def _thread_pool():
    global _pool
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor

        _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                   thread_name_prefix="cranfield-json")
    return _pool


def _scan(kernels, buf, raw: bytes, start: int) -> list | None:
    """The kernel results for the mapping whose ``{`` is at ``start``, in order, or None.

    Large mappings are cut where ``},"`` suggests a topic boundary and the pieces are read at
    once; piece k counts only if piece k-1 stopped exactly at its start (so the cut was a real
    boundary, found by reading everything before it). Any other outcome is settled by one
    sequential read, whose verdict is the answer."""
    i = int(kernels.skip_ws(buf, start + 1))
    if i >= len(buf) or buf[i] != 34:
        return None  # {} or not a mapping of members: the slow path says what
    parts = int(min(os.cpu_count() or 1, 8, max(1, (len(buf) - i) // PARALLEL_MIN_BYTES)))
    cuts: list[int] = []
    for k in range(1, parts):
        at = raw.find(b'},"', i + (len(buf) - i) * k // parts)
        if at >= 0 and (not cuts or at + 2 > cuts[-1]):
            cuts.append(at + 2)
    pieces = None
    if cuts:
        results = list(_thread_pool().map(lambda span: _scores(kernels, buf, *span),
                                 zip([i, *cuts], [*cuts, -1], strict=True)))
        pieces = []
        for result in results:
            pieces.append(result)
            if result[0] != kernels.STOPPED:
                break
        if pieces[-1][0] != kernels.END:
            pieces = None
    if pieces is None:
        pieces = [_scores(kernels, buf, i, -1)]
    return pieces if pieces[-1][0] == kernels.END else None


def _scores(kernels, buf, start: int, stop: int) -> tuple:
    """One kernel read into arrays allocated here (by numpy, so with huge pages), as
    (status, end, topic spans, rows per topic, docid bytes, docid offsets, values, slow rows,
    slow spans, docid hashes, any non-ASCII byte)."""
    rows, nbytes = kernels.capacity(start, len(buf) if stop < 0 else stop)
    doc_bytes = np.empty(nbytes, dtype=np.uint8)
    doc_off = np.empty(rows + 1, dtype=np.int32)
    values = np.empty(rows, dtype=np.float64)
    hashes = np.empty(rows, dtype=np.uint64)
    slow_rows = np.empty(rows, dtype=np.int64)
    slow_span = np.empty((rows, 2), dtype=np.int64)
    status, end, spans, counts, used, n, nslow, high = kernels.scores(
        buf, start, stop, doc_bytes, doc_off, values, hashes, slow_rows, slow_span)
    return (status, end, spans, counts, doc_bytes[:used], doc_off[:n + 1], values[:n],
            slow_rows[:nslow], slow_span[:nslow], hashes[:n], high)


def _read_columns(kernels, buf, raw: bytes, start: int, name: str):
    """(Columns, end of the mapping) or (None, -1)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pieces = _scan(kernels, buf, raw, start)
    if pieces is None:
        return None, -1
    end = int(pieces[-1][1])
    try:
        topics_seen = [raw[a:b].decode("utf-8") for piece in pieces
                       for a, b in piece[2].tolist()]
        chunks = []
        for piece in pieces:
            doc_bytes, doc_off = piece[4], piece[5]
            chunk = pa.StringArray.from_buffers(len(doc_off) - 1, pa.py_buffer(doc_off),
                                                pa.py_buffer(doc_bytes))
            if piece[10]:  # a byte >= 128: the docids must be UTF-8, as orjson requires
                chunk.validate(full=True)
            chunks.append(chunk)
        docids = pa.chunked_array(chunks, pa.string()) if len(chunks) > 1 else chunks[0]
        values = np.concatenate([piece[6] for piece in pieces]) if len(pieces) > 1 \
            else pieces[0][6]
        first_row = np.cumsum([0] + [len(piece[6]) for piece in pieces])
        slow_rows = np.concatenate([piece[7] + first_row[k] for k, piece in enumerate(pieces)])
        if len(slow_rows):  # numbers the kernel could not round exactly: Arrow's parser
            texts = pa.array([raw[a:b] for piece in pieces for a, b in piece[8].tolist()],
                             pa.string())
            values[slow_rows] = pc.cast(texts, pa.float64()).to_numpy()
    except (UnicodeDecodeError, pa.ArrowInvalid):
        return None, -1
    if not np.isfinite(values).all() or not _ids_by_grammar(topics_seen, pieces):
        return None, -1  # the slow path names what is wrong
    first_seen = {t: i for i, t in enumerate(topics_seen)}
    if len(first_seen) != len(topics_seen):
        return None, -1  # a topic twice: JSON keeps the last, as the slow path does
    counts = np.concatenate([piece[3] for piece in pieces])
    # each topic's position in strcmp order, repeated over its rows (one pass over the rows)
    topics, order_of_seen = in_strcmp_order(first_seen, np.arange(len(topics_seen),
                                                                   dtype=np.int32))
    topic_index = np.repeat(order_of_seen, counts)
    if name == "run":
        hashes = np.concatenate([piece[9] for piece in pieces]) if len(pieces) > 1 \
            else pieces[0][9]
        value: Run | Qrels = Run(topics, topic_index, docids, values, "cranfield", "run",
                                 docid_fnv=hashes)
    else:
        if not ((values == np.round(values)).all() and (np.abs(values) < 2.0**53).all()):
            return None, -1  # the slow path names the grade that is not one, or reads a
            # grade beyond 2**53 exactly
        order = np.argsort(topic_index, kind="stable")  # qrels rows are grouped by topic
        value = Qrels(topics, topic_index[order], np.asarray(
            docids.take(pa.array(order)).to_numpy(zero_copy_only=False), dtype=object),
            values[order].astype(np.int64), None, "qrels")
    return Columns(value, memoryview(raw)[start:end]), end


def _ids_by_grammar(topics: list[str], pieces: list) -> bool:
    """Whether every topic id and docid is an id by the input grammar (non-empty, no ASCII
    whitespace or control character): numpy passes over the docid bytes and lengths."""
    if grammar.bad_id(topics) is not None:
        return False
    for piece in pieces:
        doc_bytes, doc_off = piece[4], piece[5]
        if len(doc_off) > 1 and int(np.diff(doc_off).min()) == 0:
            return False
        if not grammar.id_bytes_ok(doc_bytes):
            return False
    return True


# Digests of mappings: SHA-256 over the SHA-256 of four parts, so that the parts (tens of MB
# each for a large run) are hashed at once on several cores (hashlib releases the GIL).
_DIGEST_TAG = b"cranfield-columns-2\n"
_PARALLEL_DIGEST_BYTES = 8 << 20


def _header(topics: list[str], counts) -> bytes:
    header = bytearray()
    for topic, count in zip(topics, counts, strict=True):
        encoded = topic.encode("utf-8", "surrogateescape")
        header += len(encoded).to_bytes(8, "little") + encoded + int(count).to_bytes(8, "little")
    return bytes(header)


def _part_digest(buffers) -> bytes:
    digest = hashlib.sha256()
    for buffer in buffers:
        digest.update(buffer)
    return digest.digest()


def _combine(parts: list[list]) -> str:
    """SHA-256 of the tag and the SHA-256 of each part (a part: a list of buffers)."""
    size = sum(memoryview(b).nbytes for part in parts for b in part)
    if size >= _PARALLEL_DIGEST_BYTES:
        digests = list(_thread_pool().map(_part_digest, parts))
    else:
        digests = [_part_digest(part) for part in parts]
    return hashlib.sha256(_DIGEST_TAG + b"".join(digests)).hexdigest()


def mapping_sha256(mapping) -> str:
    """:func:`columns_sha256` of a ``{topic: {docid: value}}`` mapping, computed from the
    mapping itself (for small mappings: a few Python operations per document beat a few
    dozen numpy calls per input)."""
    topics = sorted(mapping, key=lambda t: t.encode("utf-8", "surrogateescape"))
    docs = [mapping[t] for t in topics]
    ids = list(chain.from_iterable(docs))
    text = "".join(ids)
    if text.isascii():  # the usual case: one encode, and a str's length is its byte count
        data = text.encode("ascii")
        lengths = array("i", map(len, ids))
    else:
        encoded = [d.encode("utf-8", "surrogateescape") for d in ids]
        data = b"".join(encoded)
        lengths = array("i", map(len, encoded))
    values = array("d", chain.from_iterable(d.values() for d in docs))
    if sys.byteorder != "little":
        lengths.byteswap()
        values.byteswap()
    header = _header(topics, [len(d) for d in docs])
    # the arrays are hashed as buffers: no copies
    return _combine([[header], [lengths], [data], [values]])


def columns_sha256(value: Run | Qrels) -> str:
    """SHA-256 of a mapping's content, the same however it was decoded and in whatever order
    its topics came. With topics in byte order and the rows of each topic as sent, four parts:
    the header (for each topic: the length of its UTF-8 bytes, the bytes, its row count; as
    little-endian int64s), the docid lengths (int32), the docid bytes, the values (float64);
    the digest is SHA-256 of ``cranfield-columns-2\\n`` followed by the four parts' SHA-256s.
    """
    from .ranking import topic_blocks

    ti = value.topic_index
    values = np.asarray(value.scores if isinstance(value, Run) else value.grades, dtype="<f8")
    docids = value.docids
    lo, hi = topic_blocks(ti, len(value.topics))
    if lo is None:  # a topic in pieces: group its rows
        order = np.argsort(ti, kind="stable")
        ti, values = ti[order], values[order]
        docids = docids[order] if isinstance(docids, np.ndarray) else docids.take(order)
        lo, hi = topic_blocks(ti, len(value.topics))
    header = _header(value.topics, (hi - lo).tolist())
    filled = hi > lo
    spans = list(zip(lo[filled].tolist(), hi[filled].tolist(), strict=True))  # topic order
    in_order = bool((np.diff(lo[filled]) > 0).all())
    if isinstance(docids, np.ndarray):  # str objects (a mapping read by orjson)
        if not in_order:
            rows = np.concatenate([np.arange(a, b) for a, b in spans])
            docids, values = docids[rows], values[rows]
        encoded = [d.encode("utf-8", "surrogateescape") for d in docids.tolist()]
        lengths = np.fromiter(map(len, encoded), "<i4", len(encoded))
        return _combine([[header], [lengths.tobytes()], [b"".join(encoded)],
                         [values.tobytes()]])
    import pyarrow as pa

    chunks = docids.chunks if isinstance(docids, pa.ChunkedArray) else [docids]
    if not in_order and len(chunks) > 1:
        chunks = [pa.concat_arrays(chunks)]
    length_parts, data_parts = [], []
    for chunk in chunks:
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1,
                                offset=chunk.offset * 4)
        lengths = np.diff(offsets).astype("<i4", copy=False)
        data = memoryview(chunk.buffers()[2] or b"")
        if in_order:
            length_parts.append(lengths)
            data_parts.append(data[offsets[0]:offsets[-1]])
        else:  # one chunk: its topic blocks in topic order
            length_parts += [lengths[a:b] for a, b in spans]
            data_parts += [data[offsets[a]:offsets[b]] for a, b in spans]
    value_parts = [values] if in_order else [values[a:b] for a, b in spans]
    return _combine([[header], length_parts, data_parts, value_parts])
