"""Runs and qrels as Arrow tables and their file encodings, for the columnar tests of every
directory (tests/engine, tests/api): one way to make the bytes a test uploads or reads, so
that the library's and the service's tests compare the same files."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

import cranfield

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"


def run_table(path: Path = DATA / "results.test", runid: bool = True) -> pa.Table:
    """The run at ``path`` as columns topic, docid, score (and runid)."""
    run = cranfield.read_run(str(path))
    cols = {"topic": [run.topics[i] for i in run.topic_index.tolist()],
            "docid": run.docids_at(np.arange(len(run))).tolist(), "score": run.scores}
    if runid:
        cols["runid"] = [run.runid] * len(run)
    return pa.table(cols)


def qrels_table(path: Path = DATA / "qrels.test", diversity: bool = False) -> pa.Table:
    """The qrels at ``path`` as columns topic, docid, grade (and iteration: the subtopic)."""
    q = cranfield.read_qrels(str(path), diversity=diversity)
    cols = {"topic": [q.topics[i] for i in q.topic_index.tolist()],
            "docid": q.docids.tolist(), "grade": q.grades}
    if diversity:
        cols["iteration"] = q.subtopics.tolist()
    return pa.table(cols)


def parquet(table: pa.Table, row_group_size: int | None = None) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue()


def ipc_file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def ipc_stream(table: pa.Table, compression=None, chunk: int = 1000) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema,
                        options=ipc.IpcWriteOptions(compression=compression)) as w:
        w.write_table(table, max_chunksize=chunk)
    return sink.getvalue().to_pybytes()
