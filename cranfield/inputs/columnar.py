"""Runs and qrels from columns: a pyarrow Table or RecordBatch, a pandas or polars DataFrame,
any object exporting an Arrow C stream (``__arrow_c_stream__``), or the bytes of an Apache
Arrow IPC stream / file or a Parquet file: what the API takes as an upload, and what
:func:`cranfield.read_run` / :func:`cranfield.read_qrels` (so the library and the CLI) find
in a path, bytes or binary file object by its magic bytes (:func:`read_file_bytes`: the
same reader, within :func:`cranfield.inputs.table_bounds.local_bounds`).

A run has the columns ``topic``, ``docid``, ``score`` (and optionally ``runid``, as trec_eval's
sixth field: the last row's is the run's; ``iteration`` and ``rank`` are ignored, as trec_eval
ignores them); qrels have ``topic``, ``docid``, ``grade`` (and optionally ``iteration``, the
subtopic for diversity qrels). Ids are strings (or integers, read as their decimal spelling)
held to the input grammar (:mod:`cranfield.inputs.grammar`): non-empty, no ASCII whitespace or
control character. Scores are finite numbers, grades integers within int64 (or floats with
no fraction up to 2^53, as in JSON); a null is refused, as a missing field is in text. A docid
twice in a topic is refused as in TREC text (``duplicate-docid``, or ``duplicate-judgment``
for qrels unless ``diversity``). The :class:`Run` and :class:`Qrels` built are those the text
and mapping readers build for the same data, so every reader gives the same numbers.

pandas and polars are never imported here: a frame is recognised by its type's module and
converted through its own ``to_arrow``/``__arrow_c_stream__``. Bytes from outside are read
by :func:`cranfield.inputs.table_bytes.read_table_bytes`: bounded before anything is decompressed —
rows and uncompressed bytes from the IPC messages' headers or the Parquet footer — and
validated in full (offsets, UTF-8) before a kernel reads them.

Room: inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from . import grammar
from .arrow_arrays import arrow_ints, object_array
from .arrow_arrays import numpy_of as _numpy  # pyarrow's own to_numpy may import pandas
from .docid_keys import duplicate_suspects
from .run_qrels import Qrels, Run, in_strcmp_order
from .table_bounds import QRELS_COLUMNS, RUN_COLUMNS, column_error, local_bounds
from .table_bytes import read_table_bytes

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


def read_file_bytes(data, kind: str, label: str, diversity: bool = False,
                    fmt: str | None = None, gains: str = "integer") -> Run | Qrels:
    """A run or qrels (``kind``) from the bytes of an Arrow IPC or Parquet file that the
    library or the CLI was given (a path, bytes, a binary file object), read as the service
    reads an upload of the same bytes: within :func:`cranfield.inputs.table_bounds.local_bounds`,
    errors naming ``label``."""
    if kind == "run":
        return read_run_bytes(data, label, fmt=fmt, **local_bounds(kind))
    return read_qrels_bytes(data, label, diversity, fmt=fmt, gains=gains, **local_bounds(kind))


def read_run_bytes(data, label: str = "run", *, check=None, **bounds) -> Run:
    """A run from Arrow IPC or Parquet bytes (``bounds``: see
    :func:`cranfield.inputs.table_bytes.read_table_bytes`; ``check``: see
    :func:`run_from_table`)."""
    return run_from_table(read_table_bytes(data, "run", label, **bounds), name=label,
                          check=check)


def read_qrels_bytes(data, label: str = "qrels", diversity: bool = False, *, check=None,
                     gains: str = "integer", **bounds) -> Qrels:
    """Qrels from Arrow IPC or Parquet bytes (``bounds``: see
    :func:`cranfield.inputs.table_bytes.read_table_bytes`; ``check``: see
    :func:`run_from_table`; ``gains``: see :func:`qrels_from_table`)."""
    return qrels_from_table(read_table_bytes(data, "qrels", label, **bounds), name=label,
                            diversity=diversity, check=check, gains=gains)


def read_judged_bytes(data, label: str = "qrels", *, fmt: str | None = None, **bounds):
    """The columns of judged qrels (issue #31: ``topic``, ``judge``, ``docid``, ``rel``, read
    into judgments by :func:`cranfield.judges.judged.read_judged`) held by Arrow IPC or
    Parquet bytes, as a pyarrow Table: bounded from the metadata before anything is read
    (:func:`cranfield.inputs.table_bytes.read_table_bytes`, kind ``judged``: ``bounds``' rows,
    uncompressed bytes, memory) and the schema checked as any table's; ids as text (integers
    by their decimal spelling, dictionaries decoded), a null refused naming its column and
    row. Other columns are not read; a missing one is refused by the judged reader."""
    import pyarrow as pa

    table = read_table_bytes(data, "judged", label, fmt=fmt, **bounds)
    columns = {}
    for name in table.column_names:
        col = table.column(name)
        if name == "rel":
            if pa.types.is_dictionary(col.type):
                col = col.cast(col.type.value_type)
            _nulls(col, label, name)
        else:
            col = _as_strings(col, label, name)
        columns[name] = col
    return pa.table(columns)


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
                     check=None, gains: str = "integer") -> Qrels:
    """:class:`Qrels` from columns ``topic``, ``docid``, ``grade`` (and ``iteration``, the
    subtopic): rows grouped by topic in strcmp order, in the order given within a topic.
    ``check`` as for :func:`run_from_table`. With ``gains="real"`` (declared, issue #31) the
    grade column may hold real gains (a float column, or integers), read as float64 by
    :func:`cranfield.inputs.grammar.json_real_gain_problem`."""
    label = name or "qrels"
    table, topics, topic_index, docids = _topics_and_docids(obj, label, QRELS_COLUMNS, check)
    grades = (_real_gains(table.column("grade"), label) if gains == "real"
              else _grades(table.column("grade"), label))
    subs = None
    if "iteration" in table.column_names:
        subs = _id_column(table.column("iteration"), label, "iteration")
    order = np.argsort(topic_index, kind="stable")
    qrels = Qrels(topics, topic_index[order], docids.take(arrow_ints(order)), grades[order],
                  object_array(subs)[order] if subs is not None else None, label, gains=gains)
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


def _nulls(col, label: str, column: str) -> None:
    if col.null_count:
        import pyarrow.compute as pc

        row = int(pc.index(pc.is_null(col), True).as_py())
        raise column_error(label, column, "a null value (every row needs one)", row)


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
        raise column_error(label, column, f"must hold strings (ids), not {typ}")
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
            raise column_error(label, column, f"{value!r}: {grammar.id_problem(value)}", row)
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
                raise column_error(label, "topic", "a dictionary index out of range")
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
        raise column_error(label, "topic", f"{names[bad[0]]!r}: {bad[1]}", row)
    return in_strcmp_order({t: i for i, t in enumerate(names)}, codes)


def _numbers(col, label: str, column: str):
    import pyarrow as pa

    typ = col.type
    if pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
        typ = typ.value_type
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
        kind = "numbers" if column == "score" else "integers"
        raise column_error(label, column, f"must hold {kind}, not {typ}")
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
        raise column_error(label, "score", grammar.json_score_problem(float(values[row])), row)
    return values.copy() if not values.flags.writeable else values


def _grades(col, label: str) -> np.ndarray:
    import pyarrow as pa

    arr, typ = _numbers(col, label, "grade")
    if pa.types.is_floating(typ):
        raw = _numpy(arr.cast(pa.float64()), np.float64)
        bad = np.flatnonzero(~np.isfinite(raw) | (raw != np.round(raw)) | (np.abs(raw) > 2.0**53))
        if len(bad):
            row = int(bad[0])
            raise column_error(label, "grade", grammar.json_grade_problem(float(raw[row])) or
                                f"{raw[row]!r} is not an integer", row)
        return raw.astype(np.int64)
    if pa.types.is_unsigned_integer(typ):
        raw = _numpy(arr.cast(pa.uint64()), np.uint64)
        bad = np.flatnonzero(raw > np.uint64(grammar.INT64_MAX))
        if len(bad):
            row = int(bad[0])
            raise column_error(label, "grade", grammar.json_grade_problem(int(raw[row])), row)
        return raw.astype(np.int64)
    return _numpy(arr.cast(pa.int64()), np.int64).copy()


def _real_gains(col, label: str) -> np.ndarray:
    """A grade column of real-valued gains (qrels declared ``gains="real"``) as float64:
    integers and floats alike, each a finite number within the grammar's bound."""
    import pyarrow as pa

    arr, typ = _numbers(col, label, "grade")
    if pa.types.is_unsigned_integer(typ):
        values = _numpy(arr.cast(pa.uint64()), np.uint64).astype(np.float64)
    elif pa.types.is_integer(typ):
        values = _numpy(arr.cast(pa.int64()), np.int64).astype(np.float64)
    else:
        values = _numpy(arr.cast(pa.float64()), np.float64).copy()
    bad = np.flatnonzero(~np.isfinite(values) | (np.abs(values) > grammar.WEIGHT_LIMIT))
    if len(bad):
        row = int(bad[0])
        raise column_error(label, "grade", grammar.json_real_gain_problem(float(values[row])),
                           row)
    return values


def _runid(col, label: str) -> str:
    arr = _as_strings(col, label, "runid")
    value = arr[len(arr) - 1].as_py()
    problem = grammar.id_problem(value)
    if problem:
        raise column_error(label, "runid", f"{value!r}: {problem}", len(arr) - 1)
    return value


def _refuse_duplicates(value, label: str, message: str, code: str,
                       rows: np.ndarray | None = None) -> None:
    """Refuse a docid twice within a topic, naming the rows of the table (``rows``: the
    table row of each of ``value``'s rows, when they were reordered). The rows whose hashed
    (topic, docid) keys are shared are found as the text readers find them
    (:func:`cranfield.inputs.docid_keys.duplicate_suspects`, whose keys or hashes are kept for
    matching); only those are compared exactly."""
    suspects = duplicate_suspects(value)
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
