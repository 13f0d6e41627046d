"""Reading runs and qrels into columnar form.

TREC files are read by pyarrow's multi-threaded CSV reader when it is installed and the file
is regular (one delimiter between fields, six fields per run line, four per qrels line); any
irregularity — runs of spaces, extra trailing fields, a malformed line — sends the input to
the line-by-line reader, which accepts every layout trec_eval accepts and reports the exact
line and field of anything it cannot read. Both readers produce the same columns, so results
never depend on which one ran.

Mappings (``{topic: {docid: score}}``) are flattened at C speed with ``itertools.chain``;
nothing loops in Python per document.
"""

from __future__ import annotations

import io
import os
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from . import grammar
from .errors import InputError
from .settings import SETTINGS

try:  # the compiled mapping reader (cranfield/_mapscan.c); without it, the same in Python
    from . import _mapscan
except ImportError:  # pragma: no cover - an install without a C compiler
    _mapscan = None

Source = Any  # a path (str | os.PathLike), TREC text (str / bytes), a file object, or a mapping

# Below this size the line reader is faster than importing and starting pyarrow (settable so
# that tests can send small inputs through the columnar reader).
FAST_READER_MIN_BYTES = SETTINGS.fast_reader_min_bytes
# Multi-threaded parsing is faster on an idle machine but holds ~15% more memory in flight.
_THREADS = SETTINGS.read_threads


# --------------------------------------------------------------------------------------------
# Columnar containers
# --------------------------------------------------------------------------------------------

@dataclass(eq=False)
class Run:
    """A run as columns: one row per retrieved document.

    ``topics`` holds the distinct topic ids in byte order (trec_eval's ``strcmp`` order);
    ``topic_index[i]`` says which one row ``i`` belongs to. ``docids`` is a pyarrow string
    array (file input) or a numpy object array (mapping input). Scores are float64 as read;
    the 9.0.8 profile rounds them to float32 at ranking time.
    """

    topics: list[str]
    topic_index: np.ndarray
    docids: Any
    scores: np.ndarray
    runid: str = "cranfield"
    source: str = "run"
    _origin: Any = field(default=None, repr=False)
    # FNV-1a (64-bit) of each docid's UTF-8 bytes, when a reader computed it for free: lets
    # matching against qrels skip the rows that cannot be judged (see ranking._match)
    docid_fnv: np.ndarray | None = field(default=None, repr=False)
    # (rb, packed, shared): the run's (topic, docid) keys sorted, each holding a key's top
    # 64 - rb bits above its row number (see packed_keys), and the prefixes rows share,
    # when computed (see run_packed_keys)
    _packed: Any = field(default=None, repr=False)
    # docid_hashes(docids), when computed (see run_hashes)
    _hashes: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.scores)

    def docids_at(self, rows: np.ndarray) -> np.ndarray:
        """The docids of ``rows`` as a numpy array of str (gathered, not copied wholesale)."""
        rows = np.asarray(rows, dtype=np.int64)
        if isinstance(self.docids, np.ndarray):
            return self.docids[rows]
        return object_array(take_rows(self.docids, rows))

    def to_dict(self) -> dict[str, dict[str, float]]:
        """The run as ``{topic: {docid: score}}`` (for tests and small inputs)."""
        out: dict[str, dict[str, float]] = {t: {} for t in self.topics}
        docids = self.docids_at(np.arange(len(self)))
        for t, d, s in zip(self.topic_index.tolist(), docids.tolist(), self.scores.tolist(),
                           strict=True):
            out[self.topics[t]][d] = s
        return out


class Qrels:
    """Relevance judgments as columns sorted by (topic, docid).

    ``grades`` are integers; a negative grade means "in the pool but not judged" (trec_eval's
    ``RELVALUE_UNJUDGED``). ``subtopics`` keeps the second column, which trec_eval ignores and
    ndeval reads as the subtopic number; with ``diversity=False`` a docid may appear once per
    topic, as trec_eval requires.

    ``docids`` may be given as a numpy object array or as a pyarrow string array (the TREC
    reader keeps its column); either way ``docids`` reads as a numpy object array, built on
    first use, so that evaluating never turns a judged docid into a Python string unless a
    measure needs to compare it (see :func:`cranfield.ranking._match`).
    """

    def __init__(self, topics: list[str], topic_index: np.ndarray, docids: Any,
                 grades: np.ndarray, subtopics: Any = None, source: str = "qrels") -> None:
        self.topics = topics
        self.topic_index = topic_index
        self._docids = docids
        self.grades = grades
        self._subtopics = subtopics
        self.source = source
        # True when a reader proved each (topic, docid) to appear once (text read with
        # diversity=False): evaluate() then need not look for subtopic rows to merge
        self.unique_judgments = False
        self._hashes: np.ndarray | None = None  # docid_hashes of the docids, when computed
        self._arrow = None  # the docids as a pyarrow string array, once known

    def __setstate__(self, state: dict) -> None:
        # (a Qrels pickled when it was a dataclass kept docids and subtopics by name)
        state = dict(state)
        for name in ("docids", "subtopics"):
            if name in state:
                state["_" + name] = state.pop(name)
        state.setdefault("unique_judgments", False)
        state.setdefault("_hashes", None)
        state.setdefault("_arrow", None)
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return (f"Qrels(topics={len(self.topics)}, judgments={len(self)}, "
                f"source={self.source!r})")

    def __len__(self) -> int:
        return len(self.grades)

    @property
    def docids(self) -> np.ndarray:
        """The docids as a numpy object array of str (built from the Arrow column once)."""
        if not isinstance(self._docids, np.ndarray):
            self._arrow = self._docids  # (kept: matching reads the column, not the strs)
            self._docids = object_array(self._docids)
        return self._docids

    @docids.setter
    def docids(self, value) -> None:
        self._docids = value
        self._arrow = None
        self._hashes = None

    @property
    def docids_arrow(self):
        """The docids as a pyarrow string array (the reader's column, or built once)."""
        if not isinstance(self._docids, np.ndarray):
            return self._docids
        if self._arrow is None:
            self._arrow = arrow_strings(self._docids)
        return self._arrow

    def docids_at(self, rows: np.ndarray) -> np.ndarray:
        """The docids of ``rows`` as a numpy object array of str (gathered, not copied)."""
        rows = np.asarray(rows, dtype=np.int64)
        if isinstance(self._docids, np.ndarray):
            return self._docids[rows]
        return object_array(take_rows(self._docids, rows))

    @property
    def subtopics(self) -> np.ndarray | None:
        if self._subtopics is not None and not isinstance(self._subtopics, np.ndarray):
            values, codes = self._subtopics  # (distinct values, a code per row)
            self._subtopics = np.asarray(values, dtype=object)[codes] if len(codes) else \
                np.zeros(0, dtype=object)
        return self._subtopics

    @subtopics.setter
    def subtopics(self, value) -> None:
        self._subtopics = value

    @property
    def offsets(self) -> np.ndarray:
        """Start of each topic's rows, with a final end sentinel (length ``len(topics)+1``)."""
        tix = self.topic_index  # (searched for its own dtype: no cast of the whole column)
        return tix.searchsorted(np.arange(len(self.topics) + 1, dtype=tix.dtype))

    def subset(self, topics) -> Qrels:
        """The judgments of ``topics`` only (topics not in these qrels are ignored)."""
        wanted = set(topics)
        keep_topics = [t for t in self.topics if t in wanted]
        codes = np.asarray(_index_of(keep_topics, self.topics), dtype=np.int64)
        remap = np.full(len(self.topics), -1, dtype=np.int64)
        remap[codes] = np.arange(len(codes))
        rows = np.flatnonzero(remap[self.topic_index] >= 0)
        out = Qrels(keep_topics, remap[self.topic_index[rows]].astype(np.int32),
                    self.docids_at(rows), self.grades[rows],
                    self.subtopics[rows] if self.subtopics is not None else None,
                    self.source)
        out.unique_judgments = self.unique_judgments
        return out

    def to_dict(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {t: {} for t in self.topics}
        for t, d, g in zip(self.topic_index.tolist(), self.docids.tolist(),
                           self.grades.tolist(), strict=True):
            out[self.topics[t]][d] = g
        return out


# --------------------------------------------------------------------------------------------
# Arrow <-> numpy without pyarrow's pandas shim (to_numpy and pa.array import pandas: ~0.4 s)
# --------------------------------------------------------------------------------------------

def numpy_of(arr, dtype) -> np.ndarray:
    """The values of a primitive pyarrow array (or chunked array) without nulls as numpy,
    viewing its buffer (a chunked array's chunks are concatenated)."""
    dtype = np.dtype(dtype)
    if hasattr(arr, "chunks"):
        parts = [numpy_of(c, dtype) for c in arr.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)
    if len(arr) == 0:
        return np.zeros(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr),
                         offset=arr.offset * dtype.itemsize)


def arrow_ints(values: np.ndarray):
    """An int64 numpy array as a pyarrow array (zero copy; the buffer keeps it alive)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def arrow_strings(values):
    """A pyarrow string array of Python strs (a list or object array), built from their UTF-8
    bytes (``pa.array`` would import pandas, ~0.3 s, to look at a list)."""
    import pyarrow as pa

    values = values.tolist() if isinstance(values, np.ndarray) else list(values)
    try:
        encoded = [v.encode("utf-8") for v in values]
    except (UnicodeEncodeError, AttributeError):
        return pa.array(values, pa.string())  # (raises as it always did)
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    if lengths.sum() >= 2**31:
        return pa.array(values, pa.string())
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(lengths)
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def take_rows(docids, rows: np.ndarray):
    """``docids.take(rows)`` (a pyarrow array or chunked array); a chunked array is taken
    chunk by chunk for sorted ``rows`` (Arrow's take over chunks would first concatenate
    them), else through one concatenated index."""
    import pyarrow as pa

    rows = np.asarray(rows, dtype=np.int64)
    if not isinstance(docids, pa.ChunkedArray):
        return docids.take(arrow_ints(rows))
    if docids.num_chunks == 1:
        return docids.chunk(0).take(arrow_ints(rows))
    if len(rows) > 1 and not (rows[1:] >= rows[:-1]).all():
        order = np.argsort(rows, kind="stable")
        taken = take_rows(docids, rows[order])
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return taken.take(arrow_ints(inverse))
    bounds = np.cumsum([0] + [len(c) for c in docids.chunks])
    cut = rows.searchsorted(bounds)
    parts = [chunk.take(arrow_ints(rows[cut[k]:cut[k + 1]] - bounds[k]))
             for k, chunk in enumerate(docids.chunks) if cut[k + 1] > cut[k]]
    return pa.concat_arrays(parts) if parts else docids.chunk(0).slice(0, 0)


def object_array(values) -> np.ndarray:
    """A numpy object array of str from a pyarrow string array or chunked array, or a list
    (an object array is returned as it is)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    if hasattr(values, "to_pylist"):
        values = values.to_pylist()
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


# --------------------------------------------------------------------------------------------
# Public readers
# --------------------------------------------------------------------------------------------

def is_columns(source: Source) -> bool:
    """Columns (:func:`cranfield.columnar.is_table`), told apart from paths, text, bytes and
    file objects without importing pyarrow, pandas or polars for them."""
    if isinstance(source, str | bytes | bytearray | memoryview | os.PathLike) or \
            hasattr(source, "read"):
        return False
    from .columnar import is_table

    return is_table(source)


def read_run(source: Source, *, name: str | None = None) -> Run:
    """Read a run: a path, TREC run text (``qid iter docno rank score runid [...]``), a binary
    or text file object, a ``{topic: {docid: score}}`` mapping, columns (a pyarrow Table or
    RecordBatch, a pandas or polars DataFrame: ``topic``, ``docid``, ``score``; see
    :mod:`cranfield.columnar`), or a :class:`Run`. A path, bytes or binary file object
    holding a Parquet file or an Arrow IPC file or stream (told by its magic bytes, not its
    name) is read as those columns, with the service's checks and bounds
    (:func:`cranfield.columnar.read_file_bytes`).

    Following trec_eval, ``iter`` and ``rank`` are ignored, fields after the runid are
    ignored, blank lines and lines starting with ``#`` are skipped, and the runid is taken from
    the last line. Unlike trec_eval, a score that is not a finite number, a line with fewer
    than six fields and a docid repeated within a topic are errors naming the line.
    """
    if isinstance(source, Run):
        return source
    if isinstance(source, Mapping):
        return _run_from_mapping(source, name or "run")
    if is_columns(source):  # columns: a pyarrow Table or RecordBatch, a pandas/polars frame
        from .columnar import run_from_table

        return run_from_table(source, name=name)
    path = _as_path(source, name)
    if path is not None:
        label = name or path
        table = _table_file(path, label, "run")
        if table is not None:
            return table
        refuse_bom(path, label)
        run = None
        if os.path.getsize(path) >= FAST_READER_MIN_BYTES:
            run = _fast_run(path, label)
            release_memory()  # (once the reader's locals are gone)
        return run if run is not None else _slow_run(load_bytes(path, label, "run")[0], label)
    data, label = load_bytes(source, name, "run")
    table = _table_data(source, data, label, "run")
    if table is not None:
        return table
    refuse_bom(data, label)
    run = None
    if len(data) >= FAST_READER_MIN_BYTES:
        run = _fast_run(data, label)
        release_memory()
    return run if run is not None else _slow_run(bytes(data), label)


def read_qrels(source: Source, *, name: str | None = None, diversity: bool = False) -> Qrels:
    """Read qrels: a path, TREC qrels text (``qid iter docno grade``; for ndeval's diversity
    qrels the second field is the subtopic), a file object, a ``{topic: {docid: grade}}``
    mapping, columns (``topic``, ``docid``, ``grade``, and ``iteration`` for subtopics; see
    :mod:`cranfield.columnar`), or a :class:`Qrels`. A Parquet or Arrow IPC file (a path,
    bytes, a binary file object) is read as those columns, told by its magic bytes.

    Lines must have exactly four fields; the grade must be an integer (trec_eval would read
    ``1.7`` as 1 and ``x`` as 0 without a word). Lines starting with ``#`` are comments. A docid
    judged twice for one topic is an error unless ``diversity`` is set.
    """
    if isinstance(source, Qrels):
        return source
    if isinstance(source, Mapping):
        return _qrels_from_mapping(source, name or "qrels")
    if is_columns(source):
        from .columnar import qrels_from_table

        return qrels_from_table(source, name=name, diversity=diversity)
    path = _as_path(source, name)
    if path is not None:
        table = _table_file(path, name or path, "qrels", diversity)
        if table is not None:
            return table
        refuse_bom(path, name or path)
    if path is not None and os.path.getsize(path) >= FAST_READER_MIN_BYTES:
        qrels = _fast_qrels(path, name or path, diversity)  # pyarrow reads the file
        release_memory()  # (once the reader's locals are gone)
        if qrels is not None:
            return qrels
    data, label = load_bytes(source, name, "qrels")
    table = _table_data(source, data, label, "qrels", diversity) if path is None else None
    if table is not None:
        return table
    if path is None:
        refuse_bom(data, label)
    if path is None and len(data) >= FAST_READER_MIN_BYTES:
        qrels = _fast_qrels(data, label, diversity)
        release_memory()
        if qrels is not None:
            return qrels
    qids, subtopics, docids, grades = _slow_qrels_columns(bytes(data), label)
    return _build_qrels(qids, docids, grades, subtopics, label, diversity, data=data)


# --------------------------------------------------------------------------------------------
# Input plumbing
# --------------------------------------------------------------------------------------------

# The first bytes of an Arrow IPC file ("ARROW1"), an IPC stream (its continuation marker)
# and a Parquet file ("PAR1"): a file starting otherwise is TREC text, without reading on
_TABLE_MAGIC = (b"ARROW1", b"\xff\xff\xff\xff", b"PAR1")


# A UTF-8 byte-order mark. trec_eval splits fields on ASCII whitespace, so a file saved with
# one has the mark glued to its first topic id, which then matches nothing, without a word.
# Every way TREC text comes in (path, bytes, str, file object, upload, queued job) is refused
# here, before any reader (the C and CSV fast paths included) sees it: one answer for the file.
UTF8_BOM = b"\xef\xbb\xbf"
BOM_REASON = ("line 1 starts with a UTF-8 byte-order mark (EF BB BF): save the file "
              "without it")


def refuse_bom(data, label: str) -> None:
    """Refuse TREC text (bytes, or the path of a file) that starts with a UTF-8 BOM. Public:
    every reader of TREC text (cranfield.webtrack's too) refuses it with this one sentence."""
    if isinstance(data, str):
        try:
            with open(data, "rb") as fh:
                head = fh.read(3)
        except OSError as exc:
            raise InputError(label, f"cannot read file: {exc.strerror}") from exc
    else:
        head = bytes(data[:3])
    if head == UTF8_BOM:
        raise InputError(label, BOM_REASON, line=1)


def _table_file(path: str, label: str, kind: str, diversity: bool = False):
    """The run or qrels (``kind``) in the Arrow IPC or Parquet file at ``path``, told by its
    magic bytes (never its name) and read as the service reads the same bytes uploaded
    (:func:`cranfield.columnar.read_file_bytes`); None when the file is not one (text)."""
    try:
        with open(path, "rb") as fh:
            if not fh.read(8).startswith(_TABLE_MAGIC):
                return None
            fh.seek(0)
            data = fh.read()
    except OSError as exc:
        raise InputError(label, f"cannot read file: {exc.strerror}") from exc
    return _table_data(None, data, label, kind, diversity)


def _table_data(source: Source, data, label: str, kind: str, diversity: bool = False):
    """The run or qrels held by ``data`` (the bytes of a path, bytes or a binary file
    object: never text given as a str) when its magic bytes make it an Arrow IPC or Parquet
    file; else None."""
    if isinstance(source, str) or not bytes(data[:8]).startswith(_TABLE_MAGIC):
        return None
    from .columnar import read_file_bytes
    from .table_bytes import sniff

    fmt = sniff(data)
    return read_file_bytes(data, kind, label, diversity, fmt) if fmt is not None else None


def path_candidate(source) -> str | None:
    """The path ``source`` could name: any PathLike, or a one-line str short enough to be a
    path; None for what can only be text (or bytes, a mapping, a table)."""
    if isinstance(source, os.PathLike):
        return os.fspath(source)
    if isinstance(source, str) and "\n" not in source and len(source) < 4096:
        return source
    return None


def _as_path(source: Source, name: str | None = None) -> str | None:
    """The file path ``source`` names: any PathLike, or a one-line str naming an existing
    file (anything else is TREC text). A directory is an error, not text."""
    path = path_candidate(source)
    if path is None:
        return None
    if os.path.isdir(path):
        raise InputError(name or path, "is a directory")
    return path if isinstance(source, os.PathLike) or os.path.isfile(path) else None


def first_line_fields(source: Source) -> int | None:
    """How many whitespace-separated fields the first line of a TREC file (a path, or bytes)
    has, blank lines and ``#`` comments skipped; None when it has no such line or cannot be
    read. Tells a run (6 fields or more) from qrels (4) for a message, never for parsing."""
    try:
        if isinstance(source, bytes | bytearray | memoryview):
            head = bytes(source[:65536])
        else:
            with open(source, "rb") as fh:
                head = fh.read(65536)
    except (OSError, TypeError, ValueError):
        return None
    lines = head.splitlines()[:-1] if len(head) == 65536 else head.splitlines()
    for line in lines:
        fields = line.split()
        if fields and not fields[0].startswith(b"#"):
            return len(fields)
    return None


def split_trec_text(data: bytes | memoryview, parts: int) -> list[memoryview]:
    """Cut TREC run text into about ``parts`` pieces of similar size, only where the topic id
    changes from one line to the next (so a run that lists each topic's lines together gives
    pieces with disjoint topics; callers check). Looks only at the lines near each cut: at
    each target offset, the nearer end of the topic block found there."""
    size = len(data)

    def find_newline(pos: int) -> int:  # in small windows: ``data`` may be a memoryview
        while pos < size:
            at = bytes(data[pos:pos + 4096]).find(b"\n")
            if at >= 0:
                return pos + at
            pos += 4096
        return -1

    def rfind_newline(end: int) -> int:
        while end > 0:
            start = max(0, end - 4096)
            at = bytes(data[start:end]).rfind(b"\n")
            if at >= 0:
                return start + at
            end = start
        return -1

    def line_at(start: int) -> tuple[int, bytes]:
        end = find_newline(start)
        end = size if end < 0 else end + 1
        fields = bytes(data[start:end]).split()
        return end, fields[0] if fields else b""

    cuts = [0]
    for k in range(1, parts):
        pos = size * k // parts
        first = rfind_newline(pos) + 1  # start of the line holding pos
        _, qid = line_at(first)
        back = first
        while back > cuts[-1]:
            prev = rfind_newline(back - 1) + 1
            if line_at(prev)[1] != qid:
                break
            back = prev
        ahead = first
        while ahead < size and line_at(ahead)[1] == qid:
            ahead = line_at(ahead)[0]
        choices = [c for c in (back, ahead) if cuts[-1] < c < size]
        if choices:
            cuts.append(min(choices, key=lambda c: abs(c - pos)))
    cuts.append(size)
    view = memoryview(data)  # pieces are views: cutting copies nothing
    return [view[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def load_bytes(source: Source, name: str | None, kind: str) -> tuple[bytes, str]:
    """Return the raw bytes of a path, text or file object, and a label for messages. A
    memoryview (an upload cut from a request body) stays a view: copying hundreds of MB costs
    more than reading them; the line reader, which needs bytes, copies it."""
    if isinstance(source, memoryview):
        return source, name or kind
    if isinstance(source, bytes | bytearray):
        return bytes(source), name or kind
    path = _as_path(source, name)
    if path is not None:
        try:
            with open(path, "rb") as fh:
                return fh.read(), name or path
        except OSError as exc:
            raise InputError(name or path, f"cannot read file: {exc.strerror}") from exc
    if isinstance(source, str):
        if "\n" not in source and source.strip() and len(source.split()) < 4:
            raise InputError(name or source, "no such file")
        return source.encode("utf-8"), name or kind
    if hasattr(source, "read"):
        data = source.read()
        if isinstance(data, str):
            data = data.encode("utf-8")
        return bytes(data), name or getattr(source, "name", None) or kind
    raise InputError(name or kind, f"cannot read a {kind} from {type(source).__name__}")


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


def _split_lines(data: bytes, label: str):
    """Yield (line number, fields) for every content line by the input grammar
    (:mod:`cranfield.grammar`: fields split on ASCII space and tab, no control characters);
    skips blank lines and ``#`` comments."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(label, "not valid UTF-8 text", line=line) from None
    if not grammar.plain_bytes(data):  # the slow search only to name the line
        bad = grammar.text_problem(text)
        raise InputError(label, bad[1], line=bad[0])
    split = str.split if text.isascii() else grammar.split_fields
    for lineno, line in enumerate(io.StringIO(text), start=1):
        fields = split(line)
        if not fields or fields[0].startswith("#"):
            continue
        yield lineno, fields


def content_lines(data: bytes, label: str):
    """Yield (line number, fields) for every content line of a small side file (topic
    metadata, z-scores) by the input grammar: UTF-8 text ("is not UTF-8 text" naming the
    line), no control character (:func:`grammar.text_problem`), fields split on ASCII space
    and tab only; blank lines and ``#`` comments skipped. Errors are :class:`InputError`
    naming ``label`` and the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(label, "is not UTF-8 text", line=line) from None
    bad = grammar.text_problem(text)
    if bad is not None:
        raise InputError(label, bad[1], line=bad[0])
    for lineno, line in enumerate(text.split("\n"), 1):
        fields = grammar.split_fields(line)
        if not fields or fields[0].startswith("#"):
            continue
        yield lineno, fields


def _line_fields(data: bytes, line: int) -> list[str]:
    """The fields of line ``line`` (1-based) of valid TREC text: for error messages."""
    return grammar.split_fields(data.split(b"\n", line)[line - 1].decode("utf-8"))


def _parse_score(text: str, label: str, lineno: int) -> float:
    try:
        return grammar.parse_score(text)
    except grammar.GrammarError as exc:
        raise InputError(label, str(exc), line=lineno, field="score") from None


def _parse_grade(text: str, label: str, lineno: int) -> int:
    try:
        return grammar.parse_grade(text)
    except grammar.GrammarError as exc:
        raise InputError(label, str(exc), line=lineno, field="grade") from None


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------

def warm_up_columnar_reader() -> Run | None:
    """Read a small run through the columnar reader once (importing pyarrow and paying its
    first read), so that a process forked afterwards — an RQ work horse — starts warm.
    Returns the run read (``None`` without pyarrow)."""
    text = b"".join(b"q%d Q0 d%d %d %f warm\n" % (t, i, i, 1 / (i + 1))
                    for t in range(3) for i in range(50))
    return _fast_run(text, "warm-up")


def _fast_run(data: bytes | str, label: str) -> Run | None:
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
    return _columns_run(topic_ids, codes, docids, scores, last, data, label)


# the compiled run reader's pieces: whole lines, about this many bytes each
_PARSE_CHUNK = 16 << 20


def _compiled_run(data: bytes | str, delim: str):
    """(topic codes by first sight, codes, docid chunks, scores) of a run whose every line
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
    return topic_ids, codes, docids, scores


def _columns_run(topic_ids: dict[str, int], codes, docids: list, scores, last: list,
                 data: bytes | str, label: str) -> Run:
    """The Run of columns a fast reader made (topic codes in first-seen order, docid
    chunks, scores), refused if a docid repeats in a topic (the line reader then names the
    lines)."""
    import pyarrow as pa

    topics, topic_index = in_strcmp_order(topic_ids, np.frombuffer(codes, np.int32))
    del codes
    score_array = np.frombuffer(scores, np.float64)
    run = Run(topics, topic_index, pa.chunked_array(docids, pa.string()), score_array,
              last[5].decode("utf-8", "replace"), label)
    if _has_duplicates(run):
        raw = data if isinstance(data, bytes) else load_bytes(data, label, "run")[0]
        _slow_run(bytes(raw), label)  # raises, naming the lines of the duplicate
        raise InputError(label, "a docid appears twice in one topic", field="docno",
                         code="duplicate-docid")
    return run


def release_memory() -> None:
    """Give the memory freed by a read back to the OS. The CSV readers allocate from the
    system allocator (``malloc``: pyarrow's default pool keeps what it freed), whose free
    pages ``malloc_trim`` returns (glibc; elsewhere only Arrow's pool is asked): without
    it the parse buffers of one read stay resident through the evaluation that follows,
    half as much again as the columns it kept."""
    import pyarrow as pa

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


def _slow_run(data: bytes, label: str) -> Run:
    """The line reader: any whitespace, extra fields, comments; exact errors. Topic codes and
    scores go into typed arrays, and duplicates are found afterwards by sorting hashes, so a
    large irregular file costs one str per docid, not a dict entry per line."""
    topic_code: dict[str, int] = {}
    codes = array("i")
    scores = array("d")
    docids: list[str] = []
    lines = array("q")
    runid = ""
    # float() reads the grammar's decimals, and also '_' separators and non-ASCII digits
    # (refused: the grammar's parser runs when the text holds either) and inf/nan (refused
    # below, for all scores at once)
    to_float = float if data.isascii() and b"_" not in data else grammar.parse_score
    for lineno, fields in _split_lines(data, label):
        if len(fields) < 6:
            raise InputError(label, f"expected at least 6 fields (qid iter docno rank score "
                             f"runid), found {len(fields)}", line=lineno)
        try:
            scores.append(to_float(fields[4]))
        except ValueError:
            _parse_score(fields[4], label, lineno)  # raises, naming the line
        codes.append(topic_code.setdefault(fields[0], len(topic_code)))
        docids.append(fields[2])
        lines.append(lineno)
        runid = fields[5]
    score_array = np.frombuffer(scores, np.float64)
    if not np.isfinite(score_array).all():
        line = int(lines[int(np.flatnonzero(~np.isfinite(score_array))[0])])
        _parse_score(_line_fields(data, line)[4], label, line)  # raises, naming the line
    topics, topic_index = in_strcmp_order(topic_code, np.frombuffer(codes, dtype=np.int32))
    doc_array = np.empty(len(docids), dtype=object)
    doc_array[:] = docids
    del docids
    _raise_on_duplicate(topics, topic_index, doc_array, np.frombuffer(lines, np.int64), label)
    return Run(topics, topic_index, doc_array, score_array.copy(), runid, label)


def _raise_on_duplicate(topics, topic_index, docids, lines, label) -> None:
    """Raise naming both lines if a docid repeats within a topic (hash, sort, verify)."""
    if len(docids) < 2:
        return
    keys = np.fromiter(map(hash, docids), np.int64, len(docids)) * 1000003 + topic_index
    order = np.argsort(keys, kind="stable")
    same = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    hits = []
    for i in same.tolist():  # rows sharing a hash: usually none, else the duplicates
        a, b = order[i], order[i + 1]
        if topic_index[a] == topic_index[b] and docids[a] == docids[b]:
            hits.append((max(lines[a], lines[b]), min(lines[a], lines[b]), a))
    if hits:
        line, first, row = min(hits)
        raise InputError(label, f"docid {docids[row]!r} appears twice in topic "
                         f"{topics[topic_index[row]]!r} (first on line {first})", line=int(line),
                         field="docno", code="duplicate-docid")


def _run_from_mapping(run: Mapping, label: str) -> Run:
    """Flatten ``{topic: {docid: score}}`` without a Python loop per document; ids and
    scores by the input grammar (one compiled pass when all are valid: :func:`_scanned`)."""
    scanned = _scanned(run, label, "scores")
    if scanned is not None:
        topics, docids, scores, lengths = scanned
    else:
        topics, ids = _mapping_topics(run, label, "scores")
        lengths = np.fromiter((len(run[t]) for t in topics), np.int64, len(topics))
        values = list(chain.from_iterable(run[t].values() for t in topics))  # one pass
        _check_mapping_values(run, topics, label, grammar.json_score_problem, values)
        try:
            scores = np.fromiter(values, np.float64, len(ids))
        except OverflowError:  # an int beyond a double: the per-value check names it
            _raise_bad_value(run, topics, label, grammar.json_score_problem)
        del values
        if not np.isfinite(scores).all():
            _raise_bad_value(run, topics, label, grammar.json_score_problem)
        docids = np.empty(len(ids), dtype=object)
        docids[:] = ids  # the list the grammar checked: no second pass over the dicts
        del ids
    topic_index = np.repeat(np.arange(len(topics), dtype=np.int32), lengths)
    return Run(list(topics), topic_index, docids, scores, label if label != "run" else
               "cranfield", label, _origin=run)


def _scanned(mapping: Mapping, label: str, what: str):
    """(topics, docids, values, lengths) of a plain ``dict`` mapping read by the compiled
    pass (``_mapscan.scan``), or None when it is not there or declines: it accepts only what
    the Python path reads the same way, and that path reads the rest and names any problem.
    The topic ids are checked here first, as the Python path checks them."""
    if _mapscan is None or type(mapping) is not dict:
        return None
    topics = _checked_topics(mapping, label, what)
    docids = np.empty(sum(map(len, mapping.values())), dtype=object)
    got = _mapscan.scan(mapping, topics, what == "grades", docids)
    if got is None:
        return None
    values, lengths = got
    return (topics, docids, np.frombuffer(values, np.int64 if what == "grades" else
                                          np.float64), np.frombuffer(lengths, np.int64))


def _mapping_topics(mapping: Mapping, label: str, what: str) -> tuple[list[str], list]:
    """The topics of ``{topic: {docid: value}}`` in strcmp order, every topic id and docid
    checked by the grammar (the error names the path), and the docids in that order (one
    list, built once for the check and reused)."""
    topics = _checked_topics(mapping, label, what)
    ids = list(chain.from_iterable(mapping[t] for t in topics))
    if grammar.bad_id(ids) is not None:
        for t in topics:
            bad = grammar.bad_id(mapping[t])
            if bad is not None:
                doc = list(mapping[t])[bad[0]]
                raise InputError(label, f"docid {doc!r}: {bad[1]}", field=f"{label}.{t}.{doc}")
    return topics, ids


def _checked_topics(mapping: Mapping, label: str, what: str) -> list[str]:
    """The topic ids of ``{topic: {docid: value}}``, checked by the grammar, in strcmp
    order."""
    for topic, docs in mapping.items():
        if not isinstance(topic, str):
            raise InputError(label, "topic ids must be strings", field=f"{label}.{topic}")
        if type(docs) is not dict and not isinstance(docs, Mapping):  # (dict: no ABC check)
            raise InputError(label, f"must map docids to {what}", field=f"{label}.{topic}")
    bad = grammar.bad_id(mapping)
    if bad is not None:
        topic = list(mapping)[bad[0]]
        raise InputError(label, f"topic id {topic!r}: {bad[1]}", field=f"{label}.{topic}")
    if "".join(mapping).isascii():  # ASCII: code point order is byte order
        return sorted(mapping)
    return sorted(mapping, key=byte_key)


_NUMBER_TYPES = (int, float, np.integer, np.floating)


def _check_mapping_values(mapping: Mapping, topics: list[str], label: str, problem,
                          values: list | None = None) -> None:
    """Every value a number (not a bool, not a string: numpy would read ``"3.0"`` as 3.0):
    one pass over the value types in C (over ``values`` when given: the values in topic
    order); the per-value search runs only when one is not."""
    types = set(map(type, values if values is not None else
                    chain.from_iterable(mapping[t].values() for t in topics)))
    if any(not issubclass(t, _NUMBER_TYPES) or issubclass(t, bool | np.bool_) for t in types):
        _raise_bad_value(mapping, topics, label, problem)


def _raise_bad_value(mapping: Mapping, topics: list[str], label: str, problem,
                     always: bool = True) -> None:
    """Raise naming the first value ``problem`` refuses (if none does: a general error, or
    nothing when not ``always``)."""
    for t in topics:
        for d, v in mapping[t].items():
            reason = problem(v.item() if isinstance(v, np.generic) else v)
            if reason:
                raise InputError(label, reason, field=f"{label}.{t}.{d}")
    if always:
        raise InputError(label, "values must be finite numbers")


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
    (cranfield/_mapscan.c) and each topic's rows in one block, a table per topic (~15 ns a
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


# --------------------------------------------------------------------------------------------
# Qrels
# --------------------------------------------------------------------------------------------

def _fast_qrels(data: bytes | memoryview | str, label: str, diversity: bool) -> Qrels | None:
    """Qrels through pyarrow's CSV reader, kept as columns: topic ids and subtopics as
    dictionaries (one Python str per distinct value), docids as one Arrow string array,
    grades by the grammar per distinct spelling. Rows grouped by topic as
    :func:`_build_qrels` groups them (stable: file order within a topic); a docid judged
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
            qids, subtopics, names, values = _slow_qrels_columns(bytes(data), label)
            _build_qrels(qids, names, values, subtopics, label, diversity, data=data)  # raises
            raise InputError(label, "a docid is judged twice for one topic", field="docno",
                             code="duplicate-judgment")
        qrels.unique_judgments = True
    return qrels


def qrels_hashes(qrels: Qrels) -> np.ndarray:
    """:func:`docid_hashes` of the qrels' docids, in row order (computed once)."""
    if qrels._hashes is None or len(qrels._hashes) != len(qrels):
        qrels._hashes = docid_hashes(qrels.docids_arrow)
    return qrels._hashes


def _slow_qrels_columns(data: bytes, label: str) -> list:
    qids: list[str] = []
    subtopics: list[str] = []
    docids: list[str] = []
    grades: list[int] = []
    # int() reads the grammar's integers, and also '_' separators and non-ASCII digits (the
    # grammar's parser runs when the text holds either) and any size (checked below)
    to_int = int if data.isascii() and b"_" not in data else grammar.parse_grade
    for lineno, fields in _split_lines(data, label):
        if len(fields) != 4:
            raise InputError(label, f"expected 4 fields (qid iter docno grade), found "
                             f"{len(fields)}", line=lineno)
        try:
            grades.append(to_int(fields[3]))
        except ValueError:
            _parse_grade(fields[3], label, lineno)  # raises, naming the line
        qids.append(fields[0])
        subtopics.append(fields[1])
        docids.append(fields[2])
    try:
        grade_array = np.asarray(grades, dtype=np.int64)
    except OverflowError:  # beyond int64: name the first such line
        for lineno, fields in _split_lines(data, label):
            _parse_grade(fields[3], label, lineno)
        raise
    return [qids, subtopics, docids, grade_array]


def _qrels_from_mapping(qrels: Mapping, label: str) -> Qrels:
    """Flatten ``{topic: {docid: grade}}`` topic by topic (already grouped; a dict cannot
    hold a docid twice), ids and grades by the input grammar: a grade is an integer, or a
    float with no fraction, within int64 — exactly, not through a double."""
    scanned = _scanned(qrels, label, "grades")
    if scanned is None:
        topics, docids, grades, lengths = _python_qrels_columns(qrels, label)
    else:
        topics, docids, grades, lengths = scanned
    topic_index = np.repeat(np.arange(len(topics), dtype=np.int32), lengths)
    out = Qrels(topics, topic_index, docids, grades, None, label)
    out.unique_judgments = True  # (a dict cannot hold a docid twice: evaluations need not look)
    return out


def _python_qrels_columns(qrels: Mapping, label: str):
    """:func:`_qrels_from_mapping`'s columns (topics, docids, grades, lengths) read in
    Python: the path of any mapping the compiled pass declines, which names its problem."""
    topics, ids = _mapping_topics(qrels, label, "grades")
    lengths = np.fromiter((len(qrels[t]) for t in topics), np.int64, len(topics))
    total = int(lengths.sum())
    docids = np.empty(total, dtype=object)
    docids[:] = ids
    del ids
    listed = list(chain.from_iterable(qrels[t].values() for t in topics))
    _check_mapping_values(qrels, topics, label, grammar.json_grade_problem, listed)

    def values():
        return iter(listed)

    grades = None
    try:
        if all(issubclass(t, int | np.integer) for t in set(map(type, values()))):
            grades = np.fromiter(values(), np.int64, total)  # OverflowError beyond int64
        else:
            raw = np.fromiter(values(), np.float64, total)
            # below 2**53 a double is exact: an int above it (2**53 + 1 beside a float
            # grade) would round, so it is read value by value below
            if (np.abs(raw) < 2.0**53).all() and (raw == np.round(raw)).all():
                grades = raw.astype(np.int64)
    except OverflowError:
        pass
    if grades is None:  # a grade that is not one, or beyond 2**53: value by value
        _raise_bad_value(qrels, topics, label, grammar.json_grade_problem, always=False)
        grades = np.fromiter((int(g) for g in values()), np.int64, total)
    return topics, docids, grades, lengths


def _build_qrels(qids, docids, grades, subtopics, label, diversity, data=None) -> Qrels:
    """Qrels from parsed columns: grouped by topic (topics in strcmp order, rows within a
    topic in file order) and checked for a docid judged twice in one topic."""
    qids = object_array(qids)
    docids = object_array(docids)
    first_seen: dict[str, int] = {}
    codes = np.fromiter((first_seen.setdefault(q, len(first_seen)) for q in qids.tolist()),
                        np.int32, len(qids))
    topics, topic_index = in_strcmp_order(first_seen, codes)
    order = np.argsort(topic_index, kind="stable")
    topic_index, docids, grades = topic_index[order], docids[order], np.asarray(grades)[order]
    subs = object_array(subtopics)[order] if subtopics is not None else None
    if not diversity and len(docids) > 1:
        keys = np.fromiter(map(hash, docids.tolist()), np.int64, len(docids)) * 1000003 + \
            topic_index
        srt = np.argsort(keys, kind="stable")
        for i in np.flatnonzero(keys[srt][1:] == keys[srt][:-1]).tolist():
            x, y = srt[i], srt[i + 1]
            if topic_index[x] == topic_index[y] and docids[x] == docids[y]:
                topic, doc = topics[topic_index[x]], docids[x]
                where = _find_line(data, topic, doc, occurrence=2) if data is not None else None
                raise InputError(label, f"docid {doc!r} is judged twice for topic {topic!r}",
                                 line=where, field="docno" if where else
                                 f"{label}.{topic}.{doc}", code="duplicate-judgment")
    out = Qrels(topics, topic_index, docids, grades.astype(np.int64), subs, label)
    out.unique_judgments = not diversity
    return out


def _find_line(data: bytes, topic: str, doc: str, occurrence: int) -> int | None:
    count = 0
    for lineno, fields in _split_lines(bytes(data), "qrels"):
        if len(fields) >= 3 and fields[0] == topic and fields[2] == doc:
            count += 1
            if count == occurrence:
                return lineno
    return None


def byte_key(s: str) -> bytes:
    """trec_eval compares ids with strcmp: byte order of the UTF-8 encoding."""
    return s.encode("utf-8", "surrogateescape")


def in_strcmp_order(first_seen: dict[str, int], codes: np.ndarray
                     ) -> tuple[list[str], np.ndarray]:
    """Topics numbered in the order first seen, renumbered in trec_eval's strcmp order:
    (the sorted topics, each row's code in that order)."""
    topics = sorted(first_seen, key=byte_key)
    remap = np.empty(len(topics), dtype=np.int32)
    remap[[first_seen[t] for t in topics]] = np.arange(len(topics), dtype=np.int32)
    return topics, remap[codes] if len(codes) else np.zeros(0, np.int32)


def _index_of(names: list[str], topics: list[str]) -> list[int]:
    where = {t: i for i, t in enumerate(topics)}
    return [where[n] for n in names]
