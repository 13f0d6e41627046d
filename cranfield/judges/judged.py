"""Qrels with a judge per judgment, read in three forms by one grammar, and seen per topic as
a judges x documents matrix.

The forms: trec_eval's judgment-group text ``qid jg docno rel`` (the group naming the judge)
and its JSON shape ``{qid: {jg: {docno: rel}}}``, both read by
:func:`cranfield.inputs.judgment_files.read_qrels_jg`; JSON rows
``[{"topic", "judge", "docid", "rel"}, ...]``; and columns (``topic``, ``judge``, ``docid``,
``rel``: a mapping of equal-length lists or arrays, a pyarrow table, or an Arrow IPC or
Parquet file, as a path or bytes, bounded from its metadata before it is read). Every form
gives the
same :class:`~cranfield.inputs.judgment_files.JudgmentGroups` for the same judgments, and is
refused for the same faults (an id the grammar refuses, a grade that is not one, a document
judged twice by one judge of one topic, no judgments), named by line, row or column.

Room: judges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..inputs.judgment_files import JudgmentGroups, read_qrels_jg

__all__ = ["COLUMNS", "TopicJudgments", "read_judged", "topic_judgments", "judges_of",
           "grade_scale", "count_judgments"]

#: the columns (and row keys) of the JSON rows and columnar forms
COLUMNS = ("topic", "judge", "docid", "rel")


@dataclass
class TopicJudgments:
    """One topic's judgments: ``values[j, i]`` the grade judge ``judges[j]`` gave document
    ``docids[i]`` (NaN: not judged by that judge); documents in byte order."""

    topic: str
    judges: list[str]
    docids: list[str]
    values: np.ndarray


def _is_columns(source: Any) -> bool:
    if type(source).__module__.startswith("pyarrow") and hasattr(source, "column_names"):
        return True
    return isinstance(source, Mapping) and set(source) == set(COLUMNS) and all(
        isinstance(v, list | tuple | np.ndarray) for v in source.values())


def _columns(source: Any, label: str) -> dict[str, list]:
    """The four columns as lists, all of one length (refused naming the column otherwise)."""
    if hasattr(source, "column_names"):
        names = list(source.column_names)
        missing = [c for c in COLUMNS if c not in names]
        extra = [c for c in names if c not in COLUMNS]
        if missing or extra:
            raise InputError(label, f"judged columns are {', '.join(COLUMNS)}" +
                             (f"; missing {', '.join(missing)}" if missing else "") +
                             (f"; unknown {', '.join(extra)}" if extra else ""),
                             field=(missing or extra)[0])
        source = {c: source.column(c).to_pylist() for c in COLUMNS}
    out = {}
    for c in COLUMNS:
        value = source[c]
        out[c] = value.tolist() if isinstance(value, np.ndarray) else list(value)
    lengths = {len(v) for v in out.values()}
    if len(lengths) != 1:
        raise InputError(label, "the judged columns differ in length: " + ", ".join(
            f"{c} {len(out[c])}" for c in COLUMNS), field="rel")
    return out


def _add(groups: JudgmentGroups, label: str, where: str, topic, judge, docid, rel) -> None:
    """One judgment by the grammar: ids as an id field is read, ``rel`` a grade as a JSON
    grade is read (an integer within int64), a second judgment of one document by one judge
    of one topic refused; ``where`` names the row (``label[3].docid``)."""
    from ..inputs.grammar import id_problem, json_grade_problem

    for key, value in (("topic", topic), ("judge", judge), ("docid", docid)):
        problem = id_problem(value)
        if problem is not None:
            raise InputError(label, f"{key} {value!r}: {problem}", field=f"{where}.{key}")
    problem = json_grade_problem(rel)
    if problem is not None:
        raise InputError(label, "rel" + problem.removeprefix("grade"), field=f"{where}.rel")
    group = groups.topics.setdefault(topic, {}).setdefault(judge, {})
    if docid in group:
        raise InputError(label, f"docid {docid!r} is judged twice by judge {judge!r} of "
                         f"topic {topic!r}", field=f"{where}.docid")
    group[docid] = int(rel)


def read_judged(source: Any, *, name: str | None = None,
                max_judgments: int | None = None) -> JudgmentGroups:
    """Judged qrels from any of the forms (module docstring): text, bytes or a path and the
    nested mapping by :func:`read_qrels_jg`; a list of row objects; columns. Refused beyond
    ``max_judgments`` rows (counted before any is read, for rows and columns)."""
    label = name or "qrels"
    if isinstance(source, JudgmentGroups):
        return source
    source = _table_file(source, label, max_judgments)  # Arrow IPC or Parquet: columns
    if _is_columns(source):
        cols = _columns(source, label)
        n = len(cols["rel"])
        _bound(n, max_judgments, label)
        groups = JudgmentGroups(source=label)
        for i, row in enumerate(zip(*(cols[c] for c in COLUMNS), strict=True)):
            _add(groups, label, f"{label}[{i}]", *row)
    elif isinstance(source, Sequence) and not isinstance(source, str | bytes | bytearray):
        _bound(len(source), max_judgments, label)
        groups = JudgmentGroups(source=label)
        for i, row in enumerate(source):
            where = f"{label}[{i}]"
            if not isinstance(row, Mapping) or set(row) != set(COLUMNS):
                raise InputError(label, "a judged row is an object with exactly the keys "
                                 f"{', '.join(COLUMNS)}", field=where)
            _add(groups, label, where, *(row[c] for c in COLUMNS))
    else:
        groups = read_qrels_jg(source, name=label)
        _bound(count_judgments(groups), max_judgments, label)
        return groups
    if not groups.topics:
        raise InputError(label, "no judgments")
    return groups


def _table_file(source: Any, label: str, max_judgments: int | None) -> Any:
    """``source``'s columns when it is an Arrow IPC or Parquet file (a path or bytes, told
    by its magic bytes, never its name), read as the service reads the same bytes
    (:func:`cranfield.inputs.columnar.read_judged_bytes`, within
    :func:`cranfield.inputs.table_bounds.local_bounds` and ``max_judgments`` rows, both from
    the metadata before anything is read); else ``source`` itself."""
    from ..inputs.table_bytes import sniff

    data = source
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
        try:
            with open(source, "rb") as fh:
                if not fh.read(8).startswith(_TABLE_MAGIC):
                    return source
                fh.seek(0)
                data = fh.read()
        except OSError:  # (the text reader says it, naming the file)
            return source
    elif not isinstance(source, bytes | bytearray | memoryview):
        return source
    fmt = sniff(data)
    if fmt is None:
        return source
    from ..inputs.columnar import read_judged_bytes
    from ..inputs.table_bounds import local_bounds

    return read_judged_bytes(data, label, fmt=fmt, **{**local_bounds("judged"),
                                                      "max_rows": max_judgments})


# the first bytes of an Arrow IPC file, an IPC stream and a Parquet file
_TABLE_MAGIC = (b"ARROW1", b"\xff\xff\xff\xff", b"PAR1")


def _bound(n: int, limit: int | None, label: str) -> None:
    if limit is not None and n > limit:
        raise InputError(label, f"{n} judgments, more than the {limit} allowed")


def count_judgments(groups: JudgmentGroups) -> int:
    """How many judgments (topic, judge, docid) the groups hold."""
    return sum(len(docs) for judges in groups.topics.values() for docs in judges.values())


def judges_of(groups: JudgmentGroups) -> list[str]:
    """Every judge of every topic, in byte order."""
    return sorted({j for judges in groups.topics.values() for j in judges},
                  key=lambda s: s.encode("utf-8", "surrogateescape"))


def grade_scale(groups: JudgmentGroups) -> np.ndarray:
    """The grades any judge gave, sorted: the categories of the statistics (a kappa's
    weights are distances of positions on this scale). A negative grade is no grade: it
    marks a document pooled but not judged (trec_eval's RELVALUE_UNJUDGED), so it is not
    a category."""
    return np.unique(np.fromiter((g for judges in groups.topics.values()
                                  for docs in judges.values() for g in docs.values()
                                  if g >= 0), dtype=float))


def topic_judgments(groups: JudgmentGroups, judges: list[str] | None = None
                    ) -> list[TopicJudgments]:
    """Each topic (in byte order) as a judges x documents matrix over ``judges`` (default:
    every judge of the qrels, :func:`judges_of`; a judge absent from a topic is a row of
    NaN there). A negative grade (pooled, not judged: :func:`grade_scale`) is a NaN, as no
    judgment is, and a document no judge gave a grade of 0 or more is not a column."""
    judges = judges_of(groups) if judges is None else judges
    out = []
    for topic in sorted(groups.topics, key=lambda s: s.encode("utf-8", "surrogateescape")):
        by_judge = groups.topics[topic]
        docids = sorted({d for docs in by_judge.values() for d, g in docs.items() if g >= 0},
                        key=lambda s: s.encode("utf-8", "surrogateescape"))
        where = {d: i for i, d in enumerate(docids)}
        values = np.full((len(judges), len(docids)), np.nan)
        for j, judge in enumerate(judges):
            for d, g in by_judge.get(judge, {}).items():
                if g >= 0:
                    values[j, where[d]] = g
        out.append(TopicJudgments(topic, list(judges), docids, values))
    return out
