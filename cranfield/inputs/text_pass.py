"""A run's TREC text read and ranked in one compiled pass against qrels indexed once
(``_mapscan.text_qrels`` / ``_mapscan.rank_text``, cranfield/inputs/_textpass.c): what
:func:`cranfield.evaluate_many` does with each run file, so that no Python code runs per line.

:func:`qrels_table` indexes the qrels once per call; :func:`pass_run` reads one run's bytes
and ranks its judged documents as trec_eval ranks them, giving a :class:`PassedRun` (the
run's topics, runid and length, and the ranked hits), which
:func:`cranfield.inputs.ranking.rank_run` turns into the same :class:`Ranked` as the
line reader's run gives. The pass accepts only what the line reader reads the same way
(plain ASCII text, six fields or more, plainly spelled finite scores, no docid twice in a
topic); for anything else it returns None and the caller reads the run with
:func:`cranfield.inputs.io.read_run`, which reads it or names its problem in its own words.

Room: inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from .run_qrels import Qrels
from .trec_source import as_path

try:  # the compiled pass (cranfield/inputs/_textpass.c); without it, read_run reads every run
    from . import _mapscan
except ImportError:  # pragma: no cover - an install without a C compiler
    _mapscan = None

# Larger runs go to read_run (its columnar readers stream them; the pass holds the file's
# bytes and a row table at once).
MAX_BYTES = 64 << 20
# The first bytes of an Arrow IPC file, an IPC stream and a Parquet file: read_run reads such
# a file as columns (cranfield.inputs.io), never as TREC text.
TABLE_MAGIC = (b"ARROW1", b"\xff\xff\xff\xff", b"PAR1")


@dataclass(eq=False)
class QrelsTable:
    """Qrels as the compiled pass looks them up (built once by :func:`qrels_table`)."""

    qrels: Qrels
    capsule: Any = field(repr=False)


@dataclass(eq=False)
class PassedRun:
    """A run read and ranked by the compiled pass: what an evaluation needs of it before
    ranking (its topics in strcmp order, runid and length) and the pass's hits against
    ``qrels`` (for ``float32`` scores and the cutoffs ``tie_cutoffs``).
    :func:`cranfield.inputs.ranking.rank_run` uses the hits when it ranks against the same
    qrels with the same options, and otherwise reads ``source`` (:meth:`columns`)."""

    topics: list[str]
    runid: str
    rows: int
    qrels: Qrels = field(repr=False)
    float32: bool
    tie_cutoffs: tuple[int, ...]
    num_ret: np.ndarray = field(repr=False)      # int64 per run topic
    hit_topic: np.ndarray = field(repr=False)    # int64 per hit: run topic
    hit_qrow: np.ndarray = field(repr=False)     # its qrels row
    hit_rank: np.ndarray = field(repr=False)
    hit_first: np.ndarray = field(repr=False)
    hit_last: np.ndarray = field(repr=False)
    cut_tied: np.ndarray = field(repr=False)     # bool[len(tie_cutoffs), len(topics)]
    source: Any = field(default=None, repr=False)
    reread: Callable[[Any], Any] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.rows

    def fits(self, qrels: Qrels, float32: bool, tie_cutoffs: tuple[int, ...]) -> bool:
        """Whether the hits answer a ranking against ``qrels`` with these options."""
        return self.same_rows(qrels) and float32 == self.float32 and \
            tuple(tie_cutoffs) == self.tie_cutoffs

    def same_rows(self, qrels: Qrels) -> bool:
        """Whether ``qrels`` has the rows the hits point at: the qrels ranked against, or
        qrels sharing their topics, topic column and docids (what real gains' coded qrels,
        :func:`cranfield.measures.real_gains.coded_qrels`, share; the pass reads no grade)."""
        mine = self.qrels
        return qrels is mine or (qrels.topics is mine.topics and
                                 qrels.topic_index is mine.topic_index and
                                 qrels.docids is mine.docids)

    def columns(self):
        """The run read as columns: ``reread(source)`` (:func:`pass_run`'s caller gives
        :func:`cranfield.inputs.io.read_run`, which this module does not import: io imports
        ranking, which imports this)."""
        return self.reread(self.source)


def qrels_table(qrels: Qrels) -> QrelsTable | None:
    """``qrels`` indexed for :func:`pass_run`, or None (no compiled pass, or ids it does not
    take: then every run is read by read_run)."""
    if _mapscan is None or not hasattr(_mapscan, "text_qrels"):
        return None
    docids = qrels.docids
    listed = docids.tolist() if isinstance(docids, np.ndarray) else list(docids)
    capsule = _mapscan.text_qrels(list(qrels.topics),
                                  np.ascontiguousarray(qrels.offsets, np.int64), listed)
    return QrelsTable(qrels, capsule) if capsule is not None else None


def run_bytes(run: Any) -> bytes | None:
    """The bytes the pass reads for ``run``: a file's (a PathLike, or a str naming a file,
    as read_run tells them) or bytes given as such (bytes, a bytearray, a memoryview: an
    upload cut from a request body); None for anything else (text, a file
    object, a mapping, columns), for a file it cannot read or past :data:`MAX_BYTES`, and
    for an Arrow or Parquet file (read_run reads those)."""
    if isinstance(run, memoryview) and (run.ndim != 1 or run.format not in ("B", "b", "c") or
                                        not run.c_contiguous):
        return None  # (bytes only: read_run reads anything else its own way)
    if isinstance(run, bytes | bytearray | memoryview):  # (a copy: the pass lets the GIL go)
        if len(run) > MAX_BYTES:
            return None
        data = bytes(run)
    else:
        try:
            path = as_path(run) if isinstance(run, str | os.PathLike) else None
            if path is None or os.path.getsize(path) > MAX_BYTES:
                return None
            with open(path, "rb") as fh:
                data = fh.read()
        except (OSError, ValueError, InputError):  # read_run names the problem
            return None
    if len(data) > MAX_BYTES or data[:8].startswith(TABLE_MAGIC):
        return None
    return data


def pass_run(table: QrelsTable, run: Any, *, float32: bool, tie_cutoffs: tuple[int, ...],
             tie_work: tuple[int, int],
             reread: Callable[[Any], Any] | None = None) -> PassedRun | None:
    """``run`` read and ranked against ``table``'s qrels in one compiled pass (a thread may
    run it: the pass lets the GIL go), or None where it declines (then read_run reads it).
    ``tie_work``: (per row, minimum) of the docid comparisons allowed in tie groups
    (:data:`cranfield.inputs.ranking.TIE_WORK_PER_ROW`, ``TIE_WORK_MIN``); ``reread``: what
    reads ``run`` as columns where the hits do not answer (:meth:`PassedRun.columns`)."""
    data = run_bytes(run)
    if data is None:
        return None
    ks = np.asarray(tie_cutoffs, dtype=np.int64)
    got = _mapscan.rank_text(table.capsule, data, float32, ks, *tie_work)
    if got is None:
        return None
    topics, num_ret, h_rt, h_qrow, h_rank, h_first, h_last, cut, runid, rows = got
    del data
    as64 = [np.frombuffer(b, np.int64) for b in (num_ret, h_rt, h_qrow, h_rank, h_first,
                                                  h_last)]
    cut_tied = np.frombuffer(cut, np.bool_).reshape(len(ks), len(topics))
    return PassedRun(topics, runid, rows, table.qrels, bool(float32), tuple(tie_cutoffs),
                     *as64, cut_tied, source=run, reread=reread)
