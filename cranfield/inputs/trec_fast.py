"""The fast TREC readers: regular runs and qrels (one delimiter between fields, six fields
per run line, four per qrels line) read by the compiled run reader (``_mapscan.parse_run``)
or pyarrow's multi-threaded CSV reader, into the same columns as the line reader; anything
irregular returns None and goes to the line reader (:mod:`cranfield.inputs.trec_lines`), which names
the line. Also gives the reads' memory back to the OS.

Room: inputs.
"""

from __future__ import annotations

import os
import sys
from array import array

import numpy as np

from ..errors import InputError
from ..settings import SETTINGS
from . import grammar
from .arrow_arrays import arrow_ints, numpy_of
from .docid_keys import duplicate_suspects
from .run_qrels import Qrels, Run, in_strcmp_order
from .trec_lines import build_qrels, slow_qrels_columns, slow_run
from .trec_source import load_bytes

try:  # the compiled mapping reader (cranfield/inputs/_mapscan.c); without it, the same in Python
    from . import _mapscan
except ImportError:  # pragma: no cover - an install without a C compiler
    _mapscan = None

# Multi-threaded parsing is faster on an idle machine but holds ~15% more memory in flight.
_THREADS = SETTINGS.read_threads


def _head(data: bytes | str) -> bytes:
    if isinstance(data, str):
        with open(data, "rb") as fh:
            return fh.read(65536)
    return bytes(data[:65536])


def _last_line(data: bytes | str) -> bytes:
    if isinstance(data, str):
        with open(data, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 65536))
            tail = fh.read()
    else:
        tail = bytes(data[-65536:])
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    return lines[-1] if lines else b""


def _delimiter(data: bytes | str, ncols: int) -> str | None:
    """The single delimiter of a regular file, judged from its first line (None: irregular,
    or a comment first: leave it to the line reader)."""
    head = _head(data).split(b"\n", 1)[0].rstrip(b"\r")
    if head.startswith(b"#") or not head.strip():
        return None
    if b"\t" in head and b" " not in head:
        delim = "\t"
    elif b" " in head and b"\t" not in head:
        delim = " "
    else:
        return None
    return delim if len(head.split(delim.encode())) == ncols else None


def _plain_bytes(data: bytes | memoryview | str, delim: str) -> bool:
    """Whether the columnar reader splits ``data`` (bytes, or a path) as the input grammar
    does: no control character but LF, CR before LF and the delimiter, and not the other
    field separator either (a tab inside a space-delimited file is a separator to the
    grammar, part of a field to pyarrow). In 4 MiB chunks (a CR ending one must be followed
    by the LF starting the next)."""
    step = 4 << 20

    def chunks():
        if isinstance(data, str):
            with open(data, "rb") as fh:
                while block := fh.read(step):
                    yield block
        elif isinstance(data, bytes) and len(data) <= step:
            yield data
        else:
            view = memoryview(data)
            for start in range(0, len(view), step):
                yield bytes(view[start:start + step])

    carry_cr = False  # the previous chunk ended with CR
    for block in chunks():
        if carry_cr and not block.startswith(b"\n"):
            return False
        carry_cr = block.endswith(b"\r")
        if not grammar.plain_bytes(block[:-1] if carry_cr else block, tab=delim == "\t"):
            return False
        if delim == "\t" and b" " in block:
            return False
    return not carry_cr


def _csv_options(csv, ncols: int, delim: str, column_types: dict) -> dict:
    """pyarrow CSV options for whitespace-delimited TREC columns ``c0..c{ncols-1}``: no
    quoting or escaping, only ``column_types``' columns materialised, none nullable."""
    return {
        # 1 MiB blocks: a little slower than large ones, and far less memory in flight
        "read_options": csv.ReadOptions(column_names=[f"c{i}" for i in range(ncols)],
                                        block_size=1 << 20, use_threads=_THREADS),
        "parse_options": csv.ParseOptions(delimiter=delim, quote_char=False,
                                          double_quote=False, escape_char=False,
                                          newlines_in_values=False, ignore_empty_lines=True),
        "convert_options": csv.ConvertOptions(column_types=column_types,
                                              include_columns=sorted(column_types),
                                              strings_can_be_null=False,
                                              quoted_strings_can_be_null=False, check_utf8=True),
    }


def _fast_columns(data: bytes | str, ncols: int, types: dict[int, str]) -> list | None:
    """Parse regular whitespace-delimited data (bytes, or a path) with pyarrow; ``None``
    means "use the line-by-line reader" (pyarrow missing, irregular layout, a value that does
    not convert, a comment line...).

    Every row must have exactly ``ncols`` fields separated by one delimiter. Columns not in
    ``types`` are not materialised; those in it must be non-empty, so a doubled delimiter
    (which would shift the fields after it) cannot go unnoticed in any column that is read or
    that precedes one that is read. Returns numpy arrays for ``int``/``float`` columns,
    pyarrow arrays for ``str`` and dictionary arrays for ``dict`` columns, in column order.
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyarrow import csv
    except ImportError:  # the engine works without pyarrow, only slower
        return None
    delim = _delimiter(data, ncols)
    if delim is None or not _plain_bytes(data, delim):
        return None
    type_map = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(),
                "dict": pa.dictionary(pa.int32(), pa.string())}
    names = [f"c{i}" for i in range(ncols)]
    try:
        table = csv.read_csv(data if isinstance(data, str) else pa.BufferReader(data),
                             **_csv_options(csv, ncols, delim, {
                                 names[i]: type_map[t] for i, t in types.items()}),
                             memory_pool=pa.system_memory_pool())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeError):
        return None
    out = []
    for i in sorted(types):
        col = table.column(names[i])
        kind = types[i]
        if kind in ("int", "float"):
            if col.null_count:
                return None
            arr = numpy_of(col, np.int64 if kind == "int" else np.float64)
            if kind == "float" and not np.isfinite(arr).all():
                return None
            out.append(arr)
            continue
        if kind == "dict":  # small: one dictionary, one index array
            col = col.unify_dictionaries()
            col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        values = col.dictionary if kind == "dict" else col
        if len(values) and pc.min(pc.utf8_length(values)).as_py() == 0:
            return None  # an empty field: two delimiters in a row
        out.append(col)  # "str" columns stay chunked: concatenating would copy them
    del table, col
    release_memory()  # parse buffers: give them back to the OS
    # Comment lines ('#' first) have the same field count by chance: the slow path skips them.
    first = out[0]
    first_values = first.dictionary if isinstance(first, pa.DictionaryArray) else first
    if pc.any(pc.starts_with(first_values, "#")).as_py():
        return None
    return out


def _grades_by_grammar(column) -> np.ndarray | None:
    """A grade column read as dictionary strings, as int64 by the grammar's integer rule (a
    qrels file has few distinct grades: each spelling is parsed once); None if one is not
    a grade (the line reader then names its line). pyarrow's own int64 parser is not used:
    it reads ``0x10`` as 16."""
    try:
        values = np.asarray([grammar.parse_grade(t) for t in column.dictionary.to_pylist()],
                            dtype=np.int64)
    except grammar.GrammarError:
        return None
    return values[numpy_of(column.indices, np.int32)] if len(values) else \
        np.zeros(len(column), np.int64)


def warm_up_columnar_reader() -> Run | None:
    """Read a small run through the columnar reader once (importing pyarrow and paying its
    first read), so that a process forked afterwards — an RQ work horse — starts warm.
    Returns the run read (``None`` without pyarrow)."""
    text = b"".join(b"q%d Q0 d%d %d %f warm\n" % (t, i, i, 1 / (i + 1))
                    for t in range(3) for i in range(50))
    return fast_run(text, "warm-up")


def fast_run(data: bytes | str, label: str) -> Run | None:
    """Stream a regular run through pyarrow's CSV reader batch by batch, keeping only the
    docid strings (as Arrow chunks), a topic code and a score per line; ``None`` sends the
    input to the line reader (see :func:`_fast_columns` for what counts as regular)."""
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyarrow import csv
    except ImportError:
        return None
    delim = _delimiter(data, 6)
    last = _last_line(data).split()
    if delim is None or len(last) < 6:
        return None
    if _mapscan is not None:
        compiled = _compiled_run(data, delim)
        if compiled is not None:
            return _columns_run(*compiled, last, data, label)
    if not _plain_bytes(data, delim):
        return None
    dict32 = pa.dictionary(pa.int32(), pa.string())
    topic_ids: dict[str, int] = {}
    # typed arrays grow in place (realloc): no list of batches concatenated at twice the size
    codes = array("i")
    docids: list = []
    scores = array("d")
    try:
        # iter (c1) is read only to prove the fields line up: it must not be empty
        reader = csv.open_csv(data if isinstance(data, str) else pa.BufferReader(data),
                              **_csv_options(csv, 6, delim, {"c0": dict32, "c1": dict32,
                                                             "c2": pa.string(),
                                                             "c4": pa.float64()}),
                              memory_pool=pa.system_memory_pool())
        for batch in reader:
            qid, it, docno, score = batch.columns
            if score.null_count or _has_empty(pc, qid.dictionary) or _has_empty(pc, it.dictionary) \
                    or _has_empty(pc, docno):
                return None
            local = qid.dictionary.to_pylist()
            if any(t.startswith("#") for t in local):
                return None  # a comment line with six fields: the line reader skips it
            remap = np.asarray([topic_ids.setdefault(t, len(topic_ids)) for t in local],
                               dtype=np.int32)
            codes.frombytes(memoryview(remap[numpy_of(qid.indices, np.int32)]).cast("B"))
            values = numpy_of(score, np.float64)
            if not np.isfinite(values).all():
                return None
            scores.frombytes(memoryview(values).cast("B"))
            docids.append(docno)
            del batch, qid, it, score, values
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeError):
        return None
    topics, topic_index = in_strcmp_order(topic_ids, np.frombuffer(codes, np.int32))
    del codes  # (gone before the duplicate check: peak memory)
    return _columns_run(topics, topic_index, docids, scores, last, data, label)


# the compiled run reader's pieces: whole lines, about this many bytes each
_PARSE_CHUNK = 16 << 20


def _compiled_run(data: bytes | str, delim: str):
    """(topics, topic index, docid chunks, scores) of a run whose every line
    is of the plainest kind (``_mapscan.parse_run``: printable ASCII, six fields split by
    ``delim``, a plain decimal score), read in pieces of whole lines; None when a line is
    not (then pyarrow's reader reads it, and the line reader after it). What it accepts it
    reads as pyarrow's reader does (tests/engine/test_mapscan.py holds them equal)."""
    import pyarrow as pa

    topic_ids: dict[str, int] = {}
    codes, scores, docids = array("i"), array("d"), []

    def pieces():
        if isinstance(data, str):
            with open(data, "rb") as fh:
                carry = b""
                while block := fh.read(_PARSE_CHUNK):
                    block = carry + block
                    cut = block.rfind(b"\n") + 1
                    if cut:
                        yield memoryview(block)[:cut]
                    carry = block[cut:]
                if carry:
                    yield carry
        else:
            view = memoryview(data).cast("B")
            start = 0
            while start < len(view):
                stop = min(start + _PARSE_CHUNK, len(view))
                while stop < len(view) and view[stop - 1] != 10:  # on to a line's end
                    cut = bytes(view[stop:stop + 65536]).find(b"\n")
                    stop = min(stop + cut + 1 if cut >= 0 else stop + 65536, len(view))
                yield view[start:stop]
                start = stop

    for piece in pieces():
        got = _mapscan.parse_run(piece, ord(delim), topic_ids)
        if got is None:
            return None
        piece_codes, offsets, chars, piece_scores = got
        n = len(piece_codes) // 4
        codes.frombytes(piece_codes)
        scores.frombytes(piece_scores)
        docids.append(pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets),
                                                             pa.py_buffer(chars)]))
    topics, topic_index = in_strcmp_order(topic_ids, np.frombuffer(codes, np.int32))
    del codes  # (gone before the duplicate check: peak memory)
    return topics, topic_index, docids, scores


def _columns_run(topics: list[str], topic_index: np.ndarray, docids: list, scores,
                 last: list, data: bytes | str, label: str) -> Run:
    """The Run of columns a fast reader made (topics in strcmp order, each row's topic,
    docid chunks, scores), refused if a docid repeats in a topic (the line reader then names
    the lines)."""
    import pyarrow as pa

    score_array = np.frombuffer(scores, np.float64)
    run = Run(topics, topic_index, pa.chunked_array(docids, pa.string()), score_array,
              last[5].decode("utf-8", "replace"), label)
    if _has_duplicates(run):
        raw = data if isinstance(data, bytes) else load_bytes(data, label, "run")[0]
        slow_run(bytes(raw), label)  # raises, naming the lines of the duplicate
        raise InputError(label, "a docid appears twice in one topic", field="docno",
                         code="duplicate-docid")
    return run


def release_memory() -> None:
    """Give the memory freed by a read back to the OS. The CSV readers allocate from the
    system allocator (``malloc``: pyarrow's default pool keeps what it freed), whose free
    pages ``malloc_trim`` returns (glibc; elsewhere only Arrow's pool is asked): without
    it the parse buffers of one read stay resident through the evaluation that follows,
    half as much again as the columns it kept."""
    pa = sys.modules.get("pyarrow")  # (not imported: no Arrow pool has anything to give)
    if pa is not None:
        pa.default_memory_pool().release_unused()
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = ctypes.CDLL(None).malloc_trim
        except (ImportError, OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM = None


def _has_empty(pc, values) -> bool:
    """True if a string array holds an empty string (two delimiters in a row)."""
    return len(values) > 0 and pc.min(pc.utf8_length(values)).as_py() == 0


def _has_duplicates(rows: Run | Qrels) -> bool:
    """True if some docid occurs twice within one topic of a run or qrels: the rows whose
    hashed (topic, docid) keys are shared (:func:`duplicate_suspects`) are compared
    exactly."""
    suspects = duplicate_suspects(rows)
    if not len(suspects):
        return False
    pairs = list(zip(rows.topic_index[suspects].tolist(), rows.docids_at(suspects).tolist(),
                     strict=True))
    return len(set(pairs)) < len(pairs)


def fast_qrels(data: bytes | memoryview | str, label: str, diversity: bool) -> Qrels | None:
    """Qrels through pyarrow's CSV reader, kept as columns: topic ids and subtopics as
    dictionaries (one Python str per distinct value), docids as one Arrow string array,
    grades by the grammar per distinct spelling. Rows grouped by topic as
    :func:`build_qrels` groups them (stable: file order within a topic); a docid judged
    twice in a topic is found by sorting hashed keys and comparing the rows that share
    one. ``None``: the line reader reads it (irregular text, a value the grammar refuses)."""
    cols = _fast_columns(data, 4, {0: "dict", 1: "dict", 2: "str", 3: "dict"})
    if cols is None:
        return None
    qid, sub, docids, grade = cols
    del cols  # (each column goes as soon as it is used: peak memory)
    grades = _grades_by_grammar(grade)
    del grade
    if grades is None:
        return None
    local = qid.dictionary.to_pylist()
    topics, topic_index = in_strcmp_order({t: i for i, t in enumerate(local)},
                                          numpy_of(qid.indices, np.int32))
    del qid
    sub_values, sub_codes = sub.dictionary.to_pylist(), numpy_of(sub.indices, np.int32)
    del sub
    if len(topic_index) > 1 and not (topic_index[1:] >= topic_index[:-1]).all():
        order = np.argsort(topic_index, kind="stable")
        topic_index, grades, sub_codes = topic_index[order], grades[order], sub_codes[order]
        docids = docids.take(arrow_ints(order))  # (chunk by chunk, still chunked)
        del order
    qrels = Qrels(topics, topic_index, docids, grades.astype(np.int64, copy=False),
                  (sub_values, sub_codes), label)
    del docids
    if not diversity:
        if _has_duplicates(qrels):
            if isinstance(data, str):
                data = load_bytes(data, label, "qrels")[0]
            qids, subtopics, names, values = slow_qrels_columns(bytes(data), label)
            build_qrels(qids, names, values, subtopics, label, diversity, data=data)  # raises
            raise InputError(label, "a docid is judged twice for one topic", field="docno",
                             code="duplicate-judgment")
        qrels.unique_judgments = True
    return qrels
