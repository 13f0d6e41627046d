"""Reading runs and qrels: ``read_run`` and ``read_qrels`` take any input (a path, TREC
text, a file object, a mapping, columns, a Parquet or Arrow IPC file told by its magic bytes)
to the reader that reads it.

TREC files are read by pyarrow's multi-threaded CSV reader when it is installed and the file
is regular (one delimiter between fields, six fields per run line, four per qrels line); any
irregularity — runs of spaces, extra trailing fields, a malformed line — sends the input to
the line-by-line reader, which accepts every layout trec_eval accepts and reports the exact
line and field of anything it cannot read. Both readers produce the same columns, so results
never depend on which one ran (:mod:`cranfield.inputs.trec_fast`,
:mod:`cranfield.inputs.trec_lines`).

Mappings (``{topic: {docid: score}}``) are flattened at C speed with ``itertools.chain``;
nothing loops in Python per document (:mod:`cranfield.inputs.mappings`).

Room: inputs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import InputError
from ..settings import SETTINGS
from .mappings import qrels_from_mapping, run_from_mapping
from .run_qrels import Qrels, Run
from .trec_fast import fast_qrels, fast_run, release_memory
from .trec_lines import build_qrels, slow_qrels_columns, slow_run
from .trec_source import Source, as_path, load_bytes, refuse_bom

# Below this size the line reader is faster than importing and starting pyarrow (settable so
# that tests can send small inputs through the columnar reader).
FAST_READER_MIN_BYTES = SETTINGS.fast_reader_min_bytes


def is_columns(source: Source) -> bool:
    """Columns (:func:`cranfield.inputs.columnar.is_table`), told apart from paths, text, bytes and
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
    :mod:`cranfield.inputs.columnar`), or a :class:`Run`. A path, bytes or binary file object
    holding a Parquet file or an Arrow IPC file or stream (told by its magic bytes, not its
    name) is read as those columns, with the service's checks and bounds
    (:func:`cranfield.inputs.columnar.read_file_bytes`).

    Following trec_eval, ``iter`` and ``rank`` are ignored, fields after the runid are
    ignored, blank lines and lines starting with ``#`` are skipped, and the runid is taken from
    the last line. Unlike trec_eval, a score that is not a finite number, a line with fewer
    than six fields and a docid repeated within a topic are errors naming the line.
    """
    if isinstance(source, Run):
        return source
    if isinstance(source, Mapping):
        return run_from_mapping(source, name or "run")
    if is_columns(source):  # columns: a pyarrow Table or RecordBatch, a pandas/polars frame
        from .columnar import run_from_table

        return run_from_table(source, name=name)
    path = as_path(source, name)
    if path is not None:
        label = name or path
        table = _table_file(path, label, "run")
        if table is not None:
            return table
        refuse_bom(path, label)
        run = None
        if os.path.getsize(path) >= FAST_READER_MIN_BYTES:
            run = fast_run(path, label)
            release_memory()  # (once the reader's locals are gone)
        return run if run is not None else slow_run(load_bytes(path, label, "run")[0], label)
    data, label = load_bytes(source, name, "run")
    table = _table_data(source, data, label, "run")
    if table is not None:
        return table
    refuse_bom(data, label)
    run = None
    if len(data) >= FAST_READER_MIN_BYTES:
        run = fast_run(data, label)
        release_memory()
    return run if run is not None else slow_run(bytes(data), label)


def read_qrels(source: Source, *, name: str | None = None, diversity: bool = False,
               gains: str = "integer") -> Qrels:
    """Read qrels: a path, TREC qrels text (``qid iter docno grade``; for ndeval's diversity
    qrels the second field is the subtopic), a file object, a ``{topic: {docid: grade}}``
    mapping, columns (``topic``, ``docid``, ``grade``, and ``iteration`` for subtopics; see
    :mod:`cranfield.inputs.columnar`), or a :class:`Qrels`. A Parquet or Arrow IPC file (a path,
    bytes, a binary file object) is read as those columns, told by its magic bytes.

    Lines must have exactly four fields; the grade must be an integer (trec_eval would read
    ``1.7`` as 1 and ``x`` as 0 without a word). Lines starting with ``#`` are comments. A docid
    judged twice for one topic is an error unless ``diversity`` is set.

    ``gains="real"`` declares real-valued gains (issue #31; :data:`grammar.GAINS`): grades are
    then finite decimal numbers (:func:`grammar.parse_real_gain`), read in Python (never by
    a compiled reader, which reads integers), and the Qrels says ``gains == "real"``. A
    :class:`Qrels` given as such keeps its own declaration unless ``gains="real"`` is asked.
    """
    if gains != "integer":
        return _real_qrels(source, name, diversity, gains)
    if isinstance(source, Qrels):
        return source
    if isinstance(source, Mapping):
        return qrels_from_mapping(source, name or "qrels")
    if is_columns(source):
        from .columnar import qrels_from_table

        return qrels_from_table(source, name=name, diversity=diversity)
    path = as_path(source, name)
    if path is not None:
        table = _table_file(path, name or path, "qrels", diversity)
        if table is not None:
            return table
        refuse_bom(path, name or path)
    if path is not None and os.path.getsize(path) >= FAST_READER_MIN_BYTES:
        qrels = fast_qrels(path, name or path, diversity)  # pyarrow reads the file
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
        qrels = fast_qrels(data, label, diversity)
        release_memory()
        if qrels is not None:
            return qrels
    qids, subtopics, docids, grades = slow_qrels_columns(bytes(data), label)
    return build_qrels(qids, docids, grades, subtopics, label, diversity, data=data)


def _real_qrels(source: Source, name: str | None, diversity: bool, gains: str) -> Qrels:
    """:func:`read_qrels` of qrels declared to hold real gains: every reader's Python path."""
    from . import grammar

    problem = grammar.gains_problem(gains)
    if problem:
        raise InputError(name or "qrels", problem, field="gains")
    if isinstance(source, Qrels):
        return source.with_real_gains()
    if isinstance(source, Mapping):
        from .real_gain_mapping import real_qrels_from_mapping

        return real_qrels_from_mapping(source, name or "qrels")
    if is_columns(source):
        from .columnar import qrels_from_table

        return qrels_from_table(source, name=name, diversity=diversity, gains="real")
    path = as_path(source, name)
    if path is not None:
        table = _table_file(path, name or path, "qrels", diversity, gains="real")
        if table is not None:
            return table
    data, label = load_bytes(source, name, "qrels")
    table = _table_data(source, data, label, "qrels", diversity, gains="real") \
        if path is None else None
    if table is not None:
        return table
    refuse_bom(data, label)
    qids, subtopics, docids, grades = slow_qrels_columns(bytes(data), label, gains="real")
    return build_qrels(qids, docids, grades, subtopics, label, diversity, data=data,
                       gains="real")


# The first bytes of an Arrow IPC file ("ARROW1"), an IPC stream (its continuation marker)
# and a Parquet file ("PAR1"): a file starting otherwise is TREC text, without reading on
_TABLE_MAGIC = (b"ARROW1", b"\xff\xff\xff\xff", b"PAR1")


def _table_file(path: str, label: str, kind: str, diversity: bool = False,
                gains: str = "integer"):
    """The run or qrels (``kind``) in the Arrow IPC or Parquet file at ``path``, told by its
    magic bytes (never its name) and read as the service reads the same bytes uploaded
    (:func:`cranfield.inputs.columnar.read_file_bytes`); None when the file is not one (text)."""
    try:
        with open(path, "rb") as fh:
            if not fh.read(8).startswith(_TABLE_MAGIC):
                return None
            fh.seek(0)
            data = fh.read()
    except OSError as exc:
        raise InputError(label, f"cannot read file: {exc.strerror}") from exc
    return _table_data(None, data, label, kind, diversity, gains)


def _table_data(source: Source, data, label: str, kind: str, diversity: bool = False,
                gains: str = "integer"):
    """The run or qrels held by ``data`` (the bytes of a path, bytes or a binary file
    object: never text given as a str) when its magic bytes make it an Arrow IPC or Parquet
    file; else None."""
    if isinstance(source, str) or not bytes(data[:8]).startswith(_TABLE_MAGIC):
        return None
    from .columnar import read_file_bytes
    from .table_bytes import sniff

    fmt = sniff(data)
    return read_file_bytes(data, kind, label, diversity, fmt, gains) if fmt is not None \
        else None
