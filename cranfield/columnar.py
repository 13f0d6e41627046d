"""Runs and qrels from columns: a pyarrow Table or RecordBatch, a pandas or polars DataFrame,
any object exporting an Arrow C stream (``__arrow_c_stream__``), or the bytes of an Apache
Arrow IPC stream / file or a Parquet file: what the API takes as an upload, and what
:func:`cranfield.read_run` / :func:`cranfield.read_qrels` (so the library and the CLI) find
in a path, bytes or binary file object by its magic bytes (:func:`read_file_bytes`: the
same reader, within :func:`local_bounds`).

A run has the columns ``topic``, ``docid``, ``score`` (and optionally ``runid``, as trec_eval's
sixth field: the last row's is the run's; ``iteration`` and ``rank`` are ignored, as trec_eval
ignores them); qrels have ``topic``, ``docid``, ``grade`` (and optionally ``iteration``, the
subtopic for diversity qrels). Ids are strings (or integers, read as their decimal spelling)
held to the input grammar (:mod:`cranfield.grammar`): non-empty, no ASCII whitespace or
control character. Scores are finite numbers, grades integers within int64 (or floats with
no fraction up to 2^53, as in JSON); a null is refused, as a missing field is in text. A docid
twice in a topic is refused as in TREC text (``duplicate-docid``, or ``duplicate-judgment``
for qrels unless ``diversity``). The :class:`Run` and :class:`Qrels` built are those the text
and mapping readers build for the same data, so every reader gives the same numbers.

pandas and polars are never imported here: a frame is recognised by its type's module and
converted through its own ``to_arrow``/``__arrow_c_stream__``. Bytes from outside
(:func:`read_table_bytes`) are bounded before anything is decompressed — rows and
uncompressed bytes from the IPC messages' headers or the Parquet footer — and validated in
full (offsets, UTF-8) before a kernel reads them.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from . import grammar
from . import io as _io
from .errors import InputError
from .io import Qrels, Run, in_strcmp_order
from .io import numpy_of as _numpy  # pyarrow's own to_numpy may import pandas
from .settings import SETTINGS

RUN_COLUMNS = ("topic", "docid", "score")
QRELS_COLUMNS = ("topic", "docid", "grade")
ARROW_STREAM_TYPE = "application/vnd.apache.arrow.stream"
ARROW_FILE_TYPE = "application/vnd.apache.arrow.file"
PARQUET_TYPE = "application/vnd.apache.parquet"
CONTENT_TYPES = {ARROW_STREAM_TYPE: "arrow", ARROW_FILE_TYPE: "arrow", PARQUET_TYPE: "parquet"}

# The bounds of a file the library or the CLI reads (a path, bytes, a binary file object):
# a run's rows and any file's uncompressed bytes, None for none. Their defaults are the
# service's (MAX_TOPICS x MAX_DOCS_PER_TOPIC, MAX_CONTENT_LENGTH), so that a file is taken
# or refused alike everywhere (cranfield.settings: CRANFIELD_TABLE_MAX_ROWS / _BYTES).
MAX_ROWS = SETTINGS.table_max_rows
MAX_BYTES = SETTINGS.table_max_bytes
# ... and the memory it will take once read (CRANFIELD_TABLE_MAX_MEMORY, the service's
# TABLE_MAX_MEMORY): estimated from the metadata as rows x ROW_MEMORY + uncompressed bytes
MAX_MEMORY = SETTINGS.table_max_memory
# The bytes a row costs the engine at its peak, measured (peak RSS over rows, 2M-5M row
# Parquet files read and evaluated): a run's topic codes, docid offsets and hashes, scores,
# orders and ranks (~96); qrels keep each docid as a Python string too (~280)
ROW_MEMORY = {"run": 96, "qrels": 288}


# --------------------------------------------------------------------------------------------
# What is a table
# --------------------------------------------------------------------------------------------

def is_table(obj: Any) -> bool:
    """Whether ``obj`` is columns this module reads: a pyarrow Table or RecordBatch, a pandas
    or polars DataFrame, or an object exporting an Arrow C stream. Never imports pyarrow,
    pandas or polars to decide."""
    module = type(obj).__module__ or ""
    if module.split(".")[0] in ("pyarrow", "pandas", "polars"):
        return hasattr(obj, "column_names") or hasattr(obj, "columns")
    return hasattr(obj, "__arrow_c_stream__")


def to_arrow(obj: Any, label: str):
    """``obj`` (see :func:`is_table`) as a pyarrow Table."""
    import pyarrow as pa

    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    module = (type(obj).__module__ or "").split(".")[0]
    try:
        if module == "pandas":
            return pa.Table.from_pandas(obj, preserve_index=False)
        if module == "polars" and hasattr(obj, "to_arrow"):
            return obj.to_arrow()
        if hasattr(obj, "__arrow_c_stream__"):
            return pa.table(obj)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise InputError(label, f"cannot be read as Arrow columns: {exc}") from None
    raise InputError(label, f"cannot read columns from {type(obj).__name__}")


# --------------------------------------------------------------------------------------------
# Bytes: Arrow IPC (stream or file) and Parquet
# --------------------------------------------------------------------------------------------

def sniff(data) -> str | None:
    """``"arrow"`` (an IPC stream or file), ``"parquet"``, or None (text, JSON...) by the
    first bytes."""
    head = bytes(data[:8])
    if head.startswith(b"ARROW1\0"):  # NUL: never in TREC text or JSON
        return "arrow"
    # after the magic a Parquet file has a page header (binary), TREC text a separator
    if head.startswith(b"PAR1") and len(data) >= 12 and head[4:5] not in b" \t" and \
            bytes(data[-4:]) == b"PAR1":
        return "parquet"
    if head[:4] == b"\xff\xff\xff\xff" and len(data) >= 8:  # not UTF-8: IPC continuation
        return "arrow"
    return None


def check_table_bytes(data, kind: str, label: str | None = None, *,
                      max_rows: int | None = None, max_bytes: int | None = None,
                      max_memory: int | None = None, fmt: str | None = None) -> None:
    """Only the bounds :func:`read_table_bytes` checks, from the metadata (what a queued
    upload is held to before it is stored): nothing is decompressed or materialised."""
    read_table_bytes(data, kind, label, max_rows=max_rows, max_bytes=max_bytes,
                     max_memory=max_memory, fmt=fmt, bounds_only=True)


def read_table_bytes(data, kind: str, label: str | None = None, *, max_rows: int | None = None,
                     max_bytes: int | None = None, max_memory: int | None = None,
                     fmt: str | None = None, bounds_only: bool = False):
    """The table held by Arrow IPC (stream or file) or Parquet bytes, only the columns a
    ``kind`` (``run``/``qrels``) reads. Before anything is decompressed: at most ``max_rows``
    rows, ``max_bytes`` uncompressed bytes and ``max_memory`` bytes of memory once read
    (estimated: :func:`memory_estimate`) — an InputError with code ``too-large``
    otherwise; then validated in full. A malformed file is an InputError naming the
    reason."""
    import pyarrow as pa

    label = label or kind
    fmt = fmt or sniff(data)
    buf = pa.py_buffer(data)
    limits = (max_rows, max_bytes, max_memory)
    try:
        if fmt == "parquet":
            table = _read_parquet(buf, kind, label, *limits, bounds_only)
        elif fmt == "arrow":
            table = _read_ipc(buf, kind, label, *limits, bounds_only)
        else:
            raise InputError(label, "is neither an Arrow IPC stream or file nor a Parquet file")
        if table is not None:
            table.validate(full=True)
            _decoded_bound(table, label, max_bytes)
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError,
            struct.error) as exc:  # (KeyError: a reader's lookup of a column it lacks)
        what = "Parquet file" if fmt == "parquet" else "Arrow IPC data"
        raise InputError(label, f"malformed {what}: {_short(exc)}") from None
    return table


def _id_type(typ) -> bool:
    """Whether an id column (topic, docid, runid, iteration) of type ``typ`` is read: strings
    of any width, integers (their decimal spelling), or a dictionary of those."""
    import pyarrow as pa

    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or \
        getattr(pa.types, "is_string_view", lambda t: False)(typ) or pa.types.is_integer(typ)


def _number_type(typ) -> bool:
    """Whether a score or grade column of type ``typ`` is read: integers, floats, or a
    dictionary of those."""
    import pyarrow as pa

    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    return pa.types.is_integer(typ) or pa.types.is_floating(typ)


def check_schema(schema, kind: str, label: str) -> None:
    """Refuse, from a file's schema alone (before any column is read, bounded or decoded),
    a column of ``kind`` whose type is not read: nested (list, struct, map, union),
    binary, extension, temporal, decimal... The same words as the table reader's, for an
    Arrow IPC stream, file or Parquet file alike (a Parquet reader would otherwise read
    some of these as something else, e.g. an extension type's storage, or fail on a nested
    column's leaf paths)."""
    for name in wanted_columns(schema.names, kind):
        typ = schema.field(name).type
        if name in ("score", "grade"):
            if not _number_type(typ):
                what = "numbers" if name == "score" else "integers"
                raise _column_error(label, name, f"must hold {what}, not {typ}")
        elif not _id_type(typ):
            raise _column_error(label, name, f"must hold strings (ids), not {typ}")


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


def wanted_columns(names, kind: str) -> list[str]:
    """The columns of ``names`` a ``kind`` (``run``/``qrels``) reads, in their order."""
    base = RUN_COLUMNS + ("runid",) if kind == "run" else QRELS_COLUMNS + ("iteration",)
    return [n for n in names if n in base]


# The shortest line of TREC text holding a row ("a 0 b 1 1 r\n", "a 0 b 1\n"): an upload may
# hold no more rows than max_bytes of text could (numbers and dictionary codes decode to a
# few bytes per row whatever their encoding: RLE cannot make a small file a large table).
_SHORTEST_LINE = {"run": 12, "qrels": 8}


def memory_estimate(kind: str, rows: int, nbytes: int) -> int:
    """The bytes a table of ``kind`` will take once read and evaluated, from its metadata:
    ``rows`` x :data:`ROW_MEMORY` (the arrays the engine builds a row) + ``nbytes`` (its
    columns' uncompressed bytes)."""
    return rows * ROW_MEMORY.get(kind, ROW_MEMORY["qrels"]) + nbytes


def _over(label: str, rows: int, nbytes: int, max_rows, max_bytes, kind: str,
          max_memory=None) -> None:
    if max_memory is not None and memory_estimate(kind, rows, nbytes) > max_memory:
        per_row = ROW_MEMORY.get(kind, ROW_MEMORY["qrels"])
        raise InputError(label, f"would take an estimated {memory_estimate(kind, rows, nbytes)}"
                         f" bytes of memory once read ({rows} rows x {per_row} bytes a row + "
                         f"{nbytes} bytes uncompressed), over the table memory budget of "
                         f"{max_memory} bytes (CRANFIELD_TABLE_MAX_MEMORY)", code="too-large")
    if max_rows is not None and rows > max_rows:
        raise InputError(label, f"{rows} rows exceed the limit of {max_rows}", code="too-large")
    lines = max_bytes // _SHORTEST_LINE.get(kind, 8) if max_bytes is not None else None
    if lines is not None and rows > lines:
        raise InputError(label, f"{rows} rows exceed what {max_bytes} bytes of TREC text could "
                         f"hold ({lines} lines)", code="too-large")
    if max_bytes is not None and nbytes > max_bytes:
        raise InputError(label, f"{nbytes} bytes uncompressed exceed the limit of {max_bytes}",
                         code="too-large")


def _read_parquet(buf, kind, label, max_rows, max_bytes, max_memory, bounds_only=False):
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(buf)
    meta = pf.metadata
    check_schema(pf.schema_arrow, kind, label)
    if meta.num_row_groups > MAX_PARQUET_ROW_GROUPS:
        raise InputError(label, f"holds {meta.num_row_groups} row groups; at most "
                         f"{MAX_PARQUET_ROW_GROUPS} are read (write larger row groups)")
    wanted = wanted_columns(pf.schema_arrow.names, kind)
    # the column chunks' metadata comes from our own reading of the footer, never from
    # pyarrow's accessors: those throw C++ exceptions that abort the process on some
    # malformed footers (an unknown codec, a level histogram of the wrong size)
    chunks = _parquet_chunks(buf, meta) if max_bytes is not None or \
        max_memory is not None else []
    nbytes = sum(max(chunk["uncompressed"], 0) for group in chunks for chunk in group
                 if chunk["path"] in wanted)
    _over(label, meta.num_rows, nbytes, max_rows, max_bytes, kind, max_memory)
    # topic, runid and iteration stay dictionaries (their decoded size is counted from the
    # codes by _decoded_bound); docid (~7M distinct values at M: reading it as a dictionary
    # costs a second) and the numbers (strings there would be refused, once decoded) are
    # bounded from their page headers, or read as dictionaries when they cannot be
    ids = [c for c in wanted if c in ("topic", "runid", "iteration")]
    unbounded = _parquet_decoded_bound(buf, meta, chunks, [c for c in wanted if c not in ids],
                                       label, max_bytes)
    ids += unbounded
    if bounds_only:
        if unbounded:
            read = pq.ParquetFile(buf, metadata=meta, read_dictionary=unbounded)
            _decoded_bound(read.read(columns=unbounded, use_threads=False), label, max_bytes)
        return None
    pf = pq.ParquetFile(buf, metadata=meta, read_dictionary=ids)
    return pf.read(columns=wanted, use_threads=False)


# a Parquet file's row groups, each read from the footer in Python (~0.14 ms a group) and
# by pyarrow (~0.1 ms): writers make groups of 64k-1M rows, so 10,000 groups hold billions
# of rows, and a file of one-row groups cannot cost more than a few seconds
MAX_PARQUET_ROW_GROUPS = 10_000

# parquet.thrift's enums, as the footer holds them
_PARQUET_TYPES = {0: "BOOLEAN", 1: "INT32", 2: "INT64", 3: "INT96", 4: "FLOAT", 5: "DOUBLE",
                  6: "BYTE_ARRAY", 7: "FIXED_LEN_BYTE_ARRAY"}
_PARQUET_CODEC_IDS = {0: "UNCOMPRESSED", 1: "SNAPPY", 2: "GZIP", 3: "LZO", 4: "BROTLI",
                      5: "LZ4", 6: "ZSTD", 7: "LZ4_RAW"}


def _parquet_chunks(buf, meta) -> list[list[dict]]:
    """Each row group's column chunks, in the schema's column order, as {path, type, codec,
    num_values, uncompressed, compressed, data_page_offset, dictionary_page_offset} read
    from the file's footer (FileMetaData in the Thrift compact protocol). A footer that does
    not hold what the schema says is a ValueError (a malformed file)."""
    data = memoryview(buf).cast("B")
    if len(data) < 12:
        raise ValueError("no Parquet footer")
    size = struct.unpack_from("<I", data, len(data) - 8)[0]
    start = len(data) - 8 - size
    if bytes(data[-4:]) != b"PAR1" or start < 4:
        raise ValueError("no Parquet footer (an encrypted file is not read)")
    try:
        footer, _ = _thrift_struct(data[:len(data) - 8], start, whole=True)
    except (IndexError, RecursionError) as exc:
        raise ValueError(f"unreadable Parquet footer ({type(exc).__name__})") from None
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    groups = footer.get(4)
    if not isinstance(groups, list) or len(groups) != meta.num_row_groups:
        raise ValueError("the footer's row groups differ from its metadata")
    out = []
    for group in groups:
        columns = group.get(1) if isinstance(group, dict) else None
        if not isinstance(columns, list) or len(columns) != len(paths):
            raise ValueError("a row group's column chunks differ from the schema")
        chunks = []
        for path, column in zip(paths, columns, strict=True):
            cm = column.get(3) if isinstance(column, dict) else None
            if not isinstance(cm, dict):
                raise ValueError(f"column {path}: a chunk without its metadata")
            ints = {f: cm.get(f) for f in (1, 4, 5, 6, 7, 9)}
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in ints.values()):
                raise ValueError(f"column {path}: a chunk's metadata lacks a required field")
            held = cm.get(3)
            if not isinstance(held, list) or ".".join(
                    bytes(p).decode("utf-8", "replace") for p in held
                    if isinstance(p, (bytes, memoryview))) != path:
                raise ValueError(f"column {path}: a chunk names another column")
            dictionary = cm.get(11)
            chunks.append({
                "path": path, "type": _PARQUET_TYPES.get(ints[1]),
                "codec": _PARQUET_CODEC_IDS.get(ints[4]), "num_values": ints[5],
                "uncompressed": ints[6], "compressed": ints[7], "data_page_offset": ints[9],
                "dictionary_page_offset": dictionary if isinstance(dictionary, int)
                and not isinstance(dictionary, bool) and dictionary > 0 else None})
        out.append(chunks)
    return out


# Parquet column codecs pyarrow decompresses as the file holds them (the footer's LZ4 is
# mostly raw blocks too; a legacy Hadoop-framed LZ4 page fails to decompress so: then, as
# for any other codec, the column is read as a dictionary instead)
_PARQUET_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd",
                   "LZ4_RAW": "lz4_raw", "LZ4": "lz4_raw"}
# dictionary values scanned in Python per upload (pyarrow's defaults write at most 1 MB of
# dictionary per column chunk: some 50k docids)
_MAX_SCANNED = 1 << 22


def _parquet_decoded_bound(buf, meta, chunks: list[list[dict]], columns: list[str], label: str,
                           max_bytes: int | None) -> list[str]:
    """Too large when the Parquet ``columns`` may decode to more than ``max_bytes`` together,
    from their page headers: a chunk's plain pages decode to at most their uncompressed size,
    its dictionary-coded byte-array pages to at most their values times the longest value of
    the dictionary page (one long docid repeated by every row is a few bytes in the file and
    any size decoded), fixed-width values to their width. Only dictionary pages are
    decompressed. Returns the columns that cannot be bounded here (to be read as
    dictionaries, bounded by :func:`_decoded_bound`): a nested column, an unknown codec, an
    unreadable page header, too many dictionary values to scan, chunks claiming more bytes
    than the file holds (overlapping chunks would have their headers walked again and again:
    10,000 row groups times the file)."""
    if max_bytes is None:
        return []
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    unbounded = [name for name in columns if name not in paths]
    total = scanned = walked = unpacked = 0
    for name in (c for c in columns if c in paths):
        column = paths.index(name)
        width = meta.schema.column(column).length  # of a FIXED_LEN_BYTE_ARRAY
        counted = 0
        for group in chunks:
            chunk = group[column]
            if chunk["type"] == "BYTE_ARRAY":
                walked += max(chunk["compressed"], 0)
                got = _byte_array_bound(buf, chunk, max_bytes - unpacked) \
                    if walked <= buf.size else None
                scanned += got[1] if got is not None else 0
                unpacked += got[2] if got is not None else 0
                if got is None or scanned > _MAX_SCANNED:  # pyarrow counts it instead
                    unbounded.append(name)
                    counted = 0
                    break
                counted += got[0]
            else:  # numbers: a few bytes a row; fixed-width bytes: their width a row
                counted += max(chunk["uncompressed"], 0) + max(chunk["num_values"], 0) * max(
                    width if chunk["type"] == "FIXED_LEN_BYTE_ARRAY" else 0, 0)
            if total + counted > max_bytes or unpacked > max_bytes:
                raise InputError(label, f"column {name}'s strings may decode to more than "
                                 f"{max_bytes} bytes", code="too-large")
        total += counted
    return unbounded


def _byte_array_bound(buf, chunk, budget: int) -> tuple[int, int, int] | None:
    """(at most how many bytes a byte-array column chunk decodes to, how many dictionary
    values were scanned, the bytes its dictionary pages hold) from its page headers: a plain
    page at most its uncompressed size, a dictionary-coded page its values times the longest
    value of the dictionary page (the only page decompressed, and only while the dictionary
    pages' sizes stay within ``budget``: past it, the walk stops there with the third value
    over ``budget``). None when the chunk cannot be read here."""
    import pyarrow as pa

    codec = _PARQUET_CODECS.get(chunk["codec"])
    if chunk["codec"] != "UNCOMPRESSED" and codec is None:
        return None
    data = memoryview(buf).cast("B")
    pos = chunk["dictionary_page_offset"] or chunk["data_page_offset"]
    end = pos + chunk["compressed"]
    if pos < 0 or end > len(data):
        return None
    longest, total, scanned, unpacked = None, 0, 0, 0
    try:
        while pos < end:
            header, pos = _thrift_struct(data, pos)
            kind, size, raw = header.get(1), header.get(2, -1), header.get(3, -1)
            if min(size, raw) < 0 or pos + raw > len(data):
                return None
            if kind == 2:  # the dictionary page: PLAIN, a 4-byte length before each value
                unpacked += size
                if unpacked > budget:  # (decompressing allocates what the header claims)
                    break
                page = data[pos:pos + raw]
                if codec is not None:
                    page = memoryview(pa.Codec(codec).decompress(page, decompressed_size=size))
                page = page.cast("B")
                at, longest = 0, longest or 0
                while at + 4 <= len(page) and scanned <= _MAX_SCANNED:
                    n = struct.unpack_from("<I", page, at)[0]
                    longest = max(longest, n)
                    at += 4 + n
                    scanned += 1
            elif kind in (0, 3):  # a data page (v1: header field 5, v2: field 8)
                sub = header.get(5 if kind == 0 else 8)
                sub = sub if isinstance(sub, dict) else {}
                values, encoding = sub.get(1, 0), sub.get(2 if kind == 0 else 4)
                if encoding in (2, 8):  # PLAIN_DICTIONARY, RLE_DICTIONARY
                    if longest is None or not isinstance(values, int) or values < 0:
                        return None
                    total += values * longest
                else:
                    total += size
            pos += raw
    except (pa.ArrowException, IndexError, ValueError, TypeError, RecursionError,
            struct.error):
        return None
    return total, scanned, unpacked


def _thrift_struct(data, pos: int, whole: bool = False) -> tuple[dict, int]:
    """A Thrift compact struct at ``pos`` (a Parquet PageHeader) as {field id: value} for its
    integer and struct fields (the rest skipped), and where it ends. ``whole`` keeps lists
    (as Python lists), binary values (as memoryviews) and booleans too (a FileMetaData)."""
    def varint():
        nonlocal pos
        out = shift = 0
        while True:
            b = data[pos]
            pos += 1
            out |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return out

    def zigzag():
        z = varint()
        return (z >> 1) ^ -(z & 1)

    def value(kind, in_list=0):
        nonlocal pos
        if kind in (1, 2):  # a field's boolean lives in its header (a list's: a byte)
            if in_list:
                pos += 1
                return bool(data[pos - 1] == 1) if whole else None
            return kind == 1 if whole else None
        elif kind == 3:
            pos += 1
        elif kind in (4, 5, 6):
            return zigzag()
        elif kind == 7:
            pos += 8
        elif kind == 8:
            n = varint()
            if n > len(data) - pos:
                raise IndexError("a Thrift binary longer than the file")
            pos += n
            return data[pos - n:pos] if whole else None
        elif kind in (9, 10):
            head = data[pos]
            pos += 1
            n = head >> 4 if head >> 4 != 15 else varint()
            if n > len(data) - pos:  # each element takes a byte at least
                raise ValueError("a Thrift list longer than the file")
            if whole:
                return [value(head & 0x0F, 1) for _ in range(n)]
            for _ in range(n):
                value(head & 0x0F, 1)
        elif kind == 12:
            return fields()
        else:
            raise ValueError(f"Thrift type {kind}")
        return None

    def fields():
        nonlocal pos
        out, field = {}, 0
        while True:
            head = data[pos]
            pos += 1
            if head == 0:
                return out
            field = field + (head >> 4) if head >> 4 else zigzag()
            got = value(head & 0x0F)
            if got is not None:
                out[field] = got

    return fields(), pos


def _read_ipc(buf, kind, label, max_rows, max_bytes, max_memory, bounds_only=False):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    is_file = bytes(buf[:6]) == b"ARROW1"
    stream = buf.slice(8) if is_file else buf
    # the schema message only (a file's copy at its start): nothing else is read yet
    check_schema(ipc.open_stream(pa.BufferReader(stream)).schema, kind, label)
    rows = nbytes = 0
    for message in ipc.MessageReader.open_stream(pa.BufferReader(stream)):
        if message.type in ("record batch", "dictionary"):
            r, b = _batch_header_bounds(message)
            rows += r if message.type == "record batch" else 0
            nbytes += b
            _over(label, rows, nbytes, max_rows, max_bytes, kind, max_memory)
    if bounds_only:
        return None
    if is_file:
        table = ipc.open_file(buf).read_all()
    else:
        table = ipc.open_stream(buf).read_all()
    return table.select(wanted_columns(table.column_names, kind))


def _decoded_bound(table, label: str, max_bytes: int | None) -> None:
    """Too large when the table's dictionary-encoded string columns would decode to more than
    ``max_bytes`` (one long dictionary value repeated by every row is a few bytes in the file
    and any size decoded): sums the lengths each row's code points at, decoding nothing."""
    import pyarrow as pa

    if max_bytes is None:
        return
    total = 0
    for name in table.column_names:
        col = table.column(name)
        if not pa.types.is_dictionary(col.type):
            continue
        for chunk in col.chunks:
            values = chunk.dictionary
            if pa.types.is_string(values.type) or pa.types.is_binary(values.type):
                width = np.int32
            elif pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type):
                width = np.int64
            else:
                continue
            size = np.dtype(width).itemsize
            offsets = np.frombuffer(values.buffers()[1], dtype=width, count=len(values) + 1,
                                    offset=values.offset * size)
            lengths = np.diff(offsets).astype(np.int64)
            indices = chunk.indices if chunk.null_count == 0 else chunk.indices.fill_null(0)
            idx = _numpy(indices.cast(pa.int64()), np.int64)
            if len(idx) and len(lengths):
                total += int(lengths[np.clip(idx, 0, len(lengths) - 1)].sum())
            if total > max_bytes:
                raise InputError(label, f"column {name}'s strings decode to more than "
                                 f"{max_bytes} bytes", code="too-large")


def _batch_header_bounds(message) -> tuple[int, int]:
    """(rows, uncompressed body bytes) of a record batch or dictionary batch message, from
    its flatbuffer header (and, for a compressed body, each buffer's 8-byte uncompressed
    length prefix) without decompressing anything."""
    meta = memoryview(message.metadata).cast("B")
    body = message.body
    body = memoryview(body).cast("B") if body is not None else memoryview(b"")

    def table(pos):
        vt = pos - struct.unpack_from("<i", meta, pos)[0]
        vsize = struct.unpack_from("<H", meta, vt)[0]

        def field(i):
            at = 4 + 2 * i
            off = struct.unpack_from("<H", meta, vt + at)[0] if at < vsize else 0
            return pos + off if off else None
        return field

    def ref(at):  # an offset field: where it points
        return at + struct.unpack_from("<I", meta, at)[0]

    msg = table(struct.unpack_from("<I", meta, 0)[0])
    header = msg(2)
    if header is None:
        return 0, len(body)
    batch = table(ref(header))
    if message.type == "dictionary":
        data = batch(1)
        if data is None:
            return 0, len(body)
        batch = table(ref(data))
    length_at = batch(0)
    rows = struct.unpack_from("<q", meta, length_at)[0] if length_at is not None else 0
    compressed = batch(3) is not None
    buffers_at = batch(2)
    if not compressed or buffers_at is None:
        return rows, len(body)
    vec = ref(buffers_at)
    count = struct.unpack_from("<I", meta, vec)[0]
    total = 0
    for k in range(count):
        offset, length = struct.unpack_from("<qq", meta, vec + 4 + 16 * k)
        if length >= 8 and 0 <= offset and offset + 8 <= len(body):
            size = struct.unpack_from("<q", body, offset)[0]
            total += length - 8 if size < 0 else size
        else:
            total += max(length, 0)
    return rows, total


def local_bounds(kind: str) -> dict[str, int | None]:
    """The bounds a file of ``kind`` (``run``/``qrels``) read by the library or the CLI is
    held to (:data:`MAX_ROWS`, :data:`MAX_BYTES`): as the service's, qrels' rows are not
    limited."""
    return {"max_rows": MAX_ROWS if kind == "run" else None, "max_bytes": MAX_BYTES,
            "max_memory": MAX_MEMORY}


def read_file_bytes(data, kind: str, label: str, diversity: bool = False,
                    fmt: str | None = None) -> Run | Qrels:
    """A run or qrels (``kind``) from the bytes of an Arrow IPC or Parquet file that the
    library or the CLI was given (a path, bytes, a binary file object), read as the service
    reads an upload of the same bytes: within :func:`local_bounds`, errors naming
    ``label``."""
    if kind == "run":
        return read_run_bytes(data, label, fmt=fmt, **local_bounds(kind))
    return read_qrels_bytes(data, label, diversity, fmt=fmt, **local_bounds(kind))


def read_run_bytes(data, label: str = "run", *, check=None, **bounds) -> Run:
    """A run from Arrow IPC or Parquet bytes (``bounds``: see :func:`read_table_bytes`;
    ``check``: see :func:`run_from_table`)."""
    return run_from_table(read_table_bytes(data, "run", label, **bounds), name=label,
                          check=check)


def read_qrels_bytes(data, label: str = "qrels", diversity: bool = False, *, check=None,
                     **bounds) -> Qrels:
    """Qrels from Arrow IPC or Parquet bytes (``bounds``: see :func:`read_table_bytes`;
    ``check``: see :func:`run_from_table`)."""
    return qrels_from_table(read_table_bytes(data, "qrels", label, **bounds), name=label,
                            diversity=diversity, check=check)


# --------------------------------------------------------------------------------------------
# Columns into Run and Qrels
# --------------------------------------------------------------------------------------------

def run_from_table(obj: Any, *, name: str | None = None, check=None) -> Run:
    """A :class:`Run` from columns ``topic``, ``docid``, ``score`` (see the module
    docstring): topics in strcmp order, rows as given, docids as an Arrow string array.
    ``check(topics, topic_index)``, if given, runs once the topics are known and before
    the docids and scores are converted (a service's limits)."""
    label = name or "run"
    table, topics, topic_index, docids = _topics_and_docids(obj, label, RUN_COLUMNS, check)
    scores = _scores(table.column("score"), label)
    runid = "cranfield" if label == "run" else label
    if "runid" in table.column_names and len(table):
        runid = _runid(table.column("runid"), label)
    run = Run(topics, topic_index, docids, scores, runid, label)
    _refuse_duplicates(run, label, "docid {doc!r} appears twice in topic {topic!r}",
                       "duplicate-docid")
    return run


def qrels_from_table(obj: Any, *, name: str | None = None, diversity: bool = False,
                     check=None) -> Qrels:
    """:class:`Qrels` from columns ``topic``, ``docid``, ``grade`` (and ``iteration``, the
    subtopic): rows grouped by topic in strcmp order, in the order given within a topic.
    ``check`` as for :func:`run_from_table`."""
    label = name or "qrels"
    table, topics, topic_index, docids = _topics_and_docids(obj, label, QRELS_COLUMNS, check)
    grades = _grades(table.column("grade"), label)
    subs = None
    if "iteration" in table.column_names:
        subs = _id_column(table.column("iteration"), label, "iteration")
    order = np.argsort(topic_index, kind="stable")
    qrels = Qrels(topics, topic_index[order], docids.take(_io.arrow_ints(order)), grades[order],
                  _io.object_array(subs)[order] if subs is not None else None, label)
    if not diversity:
        _refuse_duplicates(qrels, label, "docid {doc!r} is judged twice for topic {topic!r}",
                           "duplicate-judgment", rows=order)
        qrels.unique_judgments = True  # proved just now, as the text reader proves it
    return qrels


def _topics_and_docids(obj: Any, label: str, required: tuple[str, ...], check):
    """(the table, its topics in strcmp order, each row's topic code, the docid column as one
    Arrow string array): the topics coded and ``check`` run before the docids are read."""
    table = _columns(obj, label, required)
    topics, topic_index = _topic_codes(table.column("topic"), label)
    if check is not None:
        check(topics, topic_index)
    return table, topics, topic_index, _id_column(table.column("docid"), label, "docid")


def _columns(obj: Any, label: str, required: tuple[str, ...]):
    import pyarrow as pa

    table = obj if isinstance(obj, pa.Table) else to_arrow(obj, label)
    missing = [c for c in required if c not in table.column_names]
    if missing:
        found = ", ".join(table.column_names) or "none"
        raise InputError(label, f"missing column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)} (needs {', '.join(required)}; found {found})",
                         field=f"{label}.{missing[0]}")
    names = list(table.column_names)
    twice = sorted({n for n in names if names.count(n) > 1 and n in required + ("runid",
                                                                               "iteration")})
    if twice:
        raise InputError(label, f"column {twice[0]} appears twice", field=f"{label}.{twice[0]}")
    return table


def _column_error(label: str, column: str, reason: str, row: int | None = None) -> InputError:
    where = f" (row {row})" if row is not None else ""
    return InputError(label, f"column {column}{where}: {reason}", field=f"{label}.{column}")


def _nulls(col, label: str, column: str) -> None:
    if col.null_count:
        import pyarrow.compute as pc

        row = int(pc.index(pc.is_null(col), True).as_py())
        raise _column_error(label, column, "a null value (every row needs one)", row)


def _as_strings(col, label: str, column: str):
    """A string column as one ``pa.string()`` array (integers by their decimal spelling;
    dictionary-encoded strings decoded)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = typ.value_type
    if pa.types.is_integer(typ):
        col = pc.cast(col, pa.string())
    elif pa.types.is_string(typ) or pa.types.is_large_string(typ) or \
            getattr(pa.types, "is_string_view", lambda t: False)(typ):
        if not pa.types.is_string(typ):
            col = col.cast(pa.string())
    else:
        raise _column_error(label, column, f"must hold strings (ids), not {typ}")
    _nulls(col, label, column)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _id_column(col, label: str, column: str):
    """An id column as one Arrow string array, every id by the grammar."""
    arr = _as_strings(col, label, column)
    if len(arr):
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=len(arr) + 1,
                                offset=arr.offset * 4)
        data = np.frombuffer(arr.buffers()[2] or b"", dtype=np.uint8)[offsets[0]:offsets[-1]]
        if not grammar.id_bytes_ok(data) or not np.diff(offsets).all():
            lengths = np.diff(offsets)
            empty = np.flatnonzero(lengths == 0)
            bad_byte = (data <= 0x20) | (data == 0x7F)
            first_bad = np.flatnonzero(bad_byte)
            rows = list(empty[:1])
            if len(first_bad):
                rows.append(int(np.searchsorted(offsets - offsets[0], first_bad[0],
                                                side="right") - 1))
            row = int(min(rows))
            value = arr[row].as_py()
            raise _column_error(label, column, f"{value!r}: {grammar.id_problem(value)}", row)
    return arr


def _topic_codes(col, label: str) -> tuple[list[str], np.ndarray]:
    """(the distinct topics in strcmp order, each row's topic code). A dictionary-encoded
    column (what ``Client`` sends) is read through its dictionaries, which may repeat a
    value or hold unused ones: codes are by value, and only topics with rows count."""
    import pyarrow as pa

    if pa.types.is_dictionary(col.type) and (pa.types.is_string(col.type.value_type) or
                                             pa.types.is_large_string(col.type.value_type)):
        _nulls(col, label, "topic")
        first_seen: dict[str, int] = {}
        parts = []
        last_dictionary, remap = None, None
        for chunk in (col.chunks if isinstance(col, pa.ChunkedArray) else [col]):
            # the batches of a stream usually share one dictionary: mapped once
            if last_dictionary is None or not chunk.dictionary.equals(last_dictionary):
                last_dictionary = chunk.dictionary
                local = _as_strings(last_dictionary, label, "topic").to_pylist()
                remap = np.asarray([first_seen.setdefault(t, len(first_seen)) for t in local],
                                   dtype=np.int32)
            idx = _numpy(chunk.indices.cast(pa.int64()), np.int64)
            if len(idx) and (idx.min() < 0 or idx.max() >= len(remap)):
                raise _column_error(label, "topic", "a dictionary index out of range")
            parts.append(remap[idx])
        codes = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        names = list(first_seen)
        used = np.bincount(codes, minlength=len(names)) > 0
        if not used.all():
            renumber = np.cumsum(used, dtype=np.int32) - 1
            codes = renumber[codes]
            names = [n for n, u in zip(names, used.tolist(), strict=True) if u]
    else:
        arr = _as_strings(col, label, "topic")
        encoded = arr.dictionary_encode()
        names = encoded.dictionary.to_pylist()
        codes = _numpy(encoded.indices, np.int32)
    bad = grammar.bad_id(names)
    if bad is not None:
        row = int(np.flatnonzero(codes == bad[0])[0])
        raise _column_error(label, "topic", f"{names[bad[0]]!r}: {bad[1]}", row)
    return in_strcmp_order({t: i for i, t in enumerate(names)}, codes)


def _numbers(col, label: str, column: str):
    import pyarrow as pa

    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = typ.value_type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        kind = "numbers" if column == "score" else "integers"
        raise _column_error(label, column, f"must hold {kind}, not {typ}")
    _nulls(col, label, column)
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return arr, typ


def _scores(col, label: str) -> np.ndarray:
    import pyarrow as pa

    arr, typ = _numbers(col, label, "score")
    if pa.types.is_float64(typ):
        values = _numpy(arr, np.float64)
    elif pa.types.is_floating(typ):
        values = _numpy(arr.cast(pa.float64()), np.float64)
    elif pa.types.is_unsigned_integer(typ):  # the nearest double, as the JSON reader gives
        values = _numpy(arr.cast(pa.uint64()), np.uint64).astype(np.float64)
    else:
        values = _numpy(arr.cast(pa.int64()), np.int64).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if len(bad):
        row = int(bad[0])
        raise _column_error(label, "score", grammar.json_score_problem(float(values[row])), row)
    return values.copy() if not values.flags.writeable else values


def _grades(col, label: str) -> np.ndarray:
    import pyarrow as pa

    arr, typ = _numbers(col, label, "grade")
    if pa.types.is_floating(typ):
        raw = _numpy(arr.cast(pa.float64()), np.float64)
        bad = np.flatnonzero(~np.isfinite(raw) | (raw != np.round(raw)) | (np.abs(raw) > 2.0**53))
        if len(bad):
            row = int(bad[0])
            raise _column_error(label, "grade", grammar.json_grade_problem(float(raw[row])) or
                                f"{raw[row]!r} is not an integer", row)
        return raw.astype(np.int64)
    if pa.types.is_unsigned_integer(typ):
        raw = _numpy(arr.cast(pa.uint64()), np.uint64)
        bad = np.flatnonzero(raw > np.uint64(grammar.INT64_MAX))
        if len(bad):
            row = int(bad[0])
            raise _column_error(label, "grade", grammar.json_grade_problem(int(raw[row])), row)
        return raw.astype(np.int64)
    return _numpy(arr.cast(pa.int64()), np.int64).copy()


def _runid(col, label: str) -> str:
    arr = _as_strings(col, label, "runid")
    value = arr[len(arr) - 1].as_py()
    problem = grammar.id_problem(value)
    if problem:
        raise _column_error(label, "runid", f"{value!r}: {problem}", len(arr) - 1)
    return value


def _refuse_duplicates(value, label: str, message: str, code: str,
                       rows: np.ndarray | None = None) -> None:
    """Refuse a docid twice within a topic, naming the rows of the table (``rows``: the
    table row of each of ``value``'s rows, when they were reordered). The rows whose hashed
    (topic, docid) keys are shared are found as the text readers find them
    (:func:`cranfield.io.duplicate_suspects`, whose keys or hashes are kept for matching);
    only those are compared exactly."""
    suspects = _io.duplicate_suspects(value)
    if len(suspects):
        _name_duplicate(value, label, message, code, rows, suspects)


def _name_duplicate(value, label, message, code, rows, suspects) -> None:
    """Compare the ``suspects`` rows (sharing a key) exactly; raise naming the first
    duplicate's two table rows, if one is."""
    first: dict = {}
    hits = []
    names = value.docids_at(suspects).tolist()
    for row, doc in zip(suspects.tolist(), names, strict=True):
        key = (int(value.topic_index[row]), doc)
        table_row = int(rows[row]) if rows is not None else row
        if key in first:
            hits.append((max(table_row, first[key]), min(table_row, first[key]), row, doc))
        else:
            first[key] = table_row
    if hits:
        second, first_row, row, doc = min(hits)
        topic = value.topics[value.topic_index[row]]
        raise InputError(label, message.format(doc=doc, topic=topic) +
                         f" (rows {first_row} and {second})", field=f"{label}.docid", code=code)
