"""What a table of a run or qrels may hold, and how large it may be: the columns a ``run`` or
``qrels`` reads (:data:`RUN_COLUMNS`, :data:`QRELS_COLUMNS`) and the types read in them
(:func:`check_schema`, from a file's schema alone), and the bounds a file is held to before
anything is decompressed (rows, uncompressed bytes, the memory it will take once read:
:func:`over_bounds`, :func:`memory_estimate`, :func:`local_bounds`; decoded dictionary strings:
:func:`decoded_bound`). Used by the byte readers (:mod:`cranfield.inputs.table_bytes`,
:mod:`cranfield.inputs.parquet_reader`) and the column reader (:mod:`cranfield.inputs.columnar`).

Room: inputs.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..settings import SETTINGS
from .arrow_arrays import numpy_of as _numpy  # pyarrow's own to_numpy may import pandas

RUN_COLUMNS = ("topic", "docid", "score")
QRELS_COLUMNS = ("topic", "docid", "grade")
# judged qrels (issue #31: cranfield.judges.judged), a judge per judgment
JUDGED_COLUMNS = ("topic", "judge", "docid", "rel")

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
ROW_MEMORY = {"run": 96, "qrels": 288, "judged": 320}
# (judged, issue #31: rows read into Python lists and nested dicts by
# cranfield.judges.judged.read_judged, ~224 bytes a row at the peak by tracemalloc over 200k
# rows of 4 judges, besides the table's own bytes: 320 leaves a margin)


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
        if name in ("score", "grade", "rel"):
            if not _number_type(typ):
                what = "numbers" if name == "score" else "integers"
                raise column_error(label, name, f"must hold {what}, not {typ}")
        elif not _id_type(typ):
            raise column_error(label, name, f"must hold strings (ids), not {typ}")


def wanted_columns(names, kind: str) -> list[str]:
    """The columns of ``names`` a ``kind`` (``run``/``qrels``/``judged``) reads, in their
    order."""
    base = RUN_COLUMNS + ("runid",) if kind == "run" else JUDGED_COLUMNS \
        if kind == "judged" else QRELS_COLUMNS + ("iteration",)
    return [n for n in names if n in base]


# The shortest line of TREC text holding a row ("a 0 b 1 1 r\n", "a 0 b 1\n"): an upload may
# hold no more rows than max_bytes of text could (numbers and dictionary codes decode to a
# few bytes per row whatever their encoding: RLE cannot make a small file a large table).
_SHORTEST_LINE = {"run": 12, "qrels": 8, "judged": 8}


def memory_estimate(kind: str, rows: int, nbytes: int) -> int:
    """The bytes a table of ``kind`` will take once read and evaluated, from its metadata:
    ``rows`` x :data:`ROW_MEMORY` (the arrays the engine builds a row) + ``nbytes`` (its
    columns' uncompressed bytes)."""
    return rows * ROW_MEMORY.get(kind, ROW_MEMORY["qrels"]) + nbytes


def over_bounds(label: str, rows: int, nbytes: int, max_rows, max_bytes, kind: str,
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


def decoded_bound(table, label: str, max_bytes: int | None) -> None:
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


def local_bounds(kind: str) -> dict[str, int | None]:
    """The bounds a file of ``kind`` (``run``/``qrels``) read by the library or the CLI is
    held to (:data:`MAX_ROWS`, :data:`MAX_BYTES`): as the service's, qrels' rows are not
    limited."""
    return {"max_rows": MAX_ROWS if kind == "run" else None, "max_bytes": MAX_BYTES,
            "max_memory": MAX_MEMORY}


def column_error(label: str, column: str, reason: str, row: int | None = None) -> InputError:
    where = f" (row {row})" if row is not None else ""
    return InputError(label, f"column {column}{where}: {reason}", field=f"{label}.{column}")
