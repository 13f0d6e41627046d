"""Mappings (``{topic: {docid: score}}`` runs, ``{topic: {docid: grade}}`` qrels) read into
columns: flattened at C speed (``itertools.chain``, or the compiled ``_mapscan.scan`` in one
pass), ids and values checked by the input grammar, a problem named by its path. A run
mapping evaluated as such is only checked here (:func:`mapped_run`: its topics); the compiled
``rank_mapping`` then checks, looks up and ranks it in one pass
(:func:`cranfield.inputs.ranking.rank_run`), and :meth:`MappedRun.columns` reads it as
columns wherever that pass declines.

Room: inputs.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from ..errors import InputError
from . import grammar
from .run_qrels import Qrels, Run, byte_key

try:  # the compiled mapping reader (cranfield/inputs/_mapscan.c); without it, the same in Python
    from . import _mapscan
except ImportError:  # pragma: no cover - an install without a C compiler
    _mapscan = None

# The mapping types the compiled passes read, outer and inner (exactly: a subclass, or any
# other Mapping, takes the Python path, which reads every Mapping the same way).
COMPILED_MAPPING_TYPES = (dict, defaultdict, OrderedDict)


def accepted_mapping(mapping: Any) -> bool:
    """Whether the compiled passes may read ``mapping`` (its outer type: they check the
    inner dicts' types themselves, and decline any other)."""
    return _mapscan is not None and type(mapping) in COMPILED_MAPPING_TYPES


@dataclass(eq=False)
class MappedRun:
    """A run mapping whose topics are checked (in strcmp order) but whose documents are not
    read yet: what an evaluation needs of a run before ranking it (its topics, runid and
    length). :func:`cranfield.inputs.ranking.rank_run` ranks it in one compiled pass, or
    reads it through :meth:`columns` (the Run :func:`run_from_mapping` gives, which names
    any problem)."""

    topics: list[str]
    runid: str
    source: str
    rows: int
    mapping: Any = field(repr=False)  # the run as given
    # its topics' dicts in ``topics``' order, when the compiled pass listed them (the
    # compiled passes then read these instead of looking each topic up); None: not listed
    dicts: list | None = field(default=None, repr=False)
    _columns: Run | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.rows

    def columns(self) -> Run:
        if self._columns is None:
            self._columns = run_from_mapping(self.mapping, self.source)
        return self._columns


def mapped_run(run: Any, label: str = "run") -> MappedRun | None:
    """``run`` as a :class:`MappedRun` when the compiled pass may rank it (a dict,
    defaultdict or OrderedDict), else None. Its topic ids are checked as
    :func:`run_from_mapping` checks them first (the same refusal)."""
    if not accepted_mapping(run):
        return None
    topics, rows, dicts = _topics_and_rows(run, label, "scores")
    return MappedRun(topics, label if label != "run" else "cranfield", label, rows, run, dicts)


def run_from_mapping(run: Mapping, label: str) -> Run:
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
    """(topics, docids, values, lengths) of a dict, defaultdict or OrderedDict mapping read
    by the compiled pass (``_mapscan.scan``), or None when it is not there or declines: it
    accepts only what the Python path reads the same way, and that path reads the rest and
    names any problem. The topic ids are checked here first, as the Python path checks them."""
    if not accepted_mapping(mapping):
        return None
    topics, rows, dicts = _topics_and_rows(mapping, label, what)
    docids = np.empty(rows, dtype=object)
    got = _mapscan.scan(mapping if dicts is None else dicts, topics, what == "grades", docids)
    if got is None:
        return None
    values, lengths = got
    return (topics, docids, np.frombuffer(values, np.int64 if what == "grades" else
                                          np.float64), np.frombuffer(lengths, np.int64))


def _topics_and_rows(mapping: Mapping, label: str, what: str
                     ) -> tuple[list[str], int, list | None]:
    """(:func:`_checked_topics`, the number of (topic, docid) entries, the topics' dicts in
    that order or None) of a mapping the compiled passes read: one compiled pass
    (``_mapscan.mapping_topics``: the grammar, the inner types, the sort) when it accepts
    every topic, else the Python one, which names any problem (and lists no dicts)."""
    got = _mapscan.mapping_topics(mapping)
    if got is not None:
        return got
    return _checked_topics(mapping, label, what), sum(map(len, mapping.values())), None


def per_topic_dicts(topics: list[str], rows: list[int], keys: list[str],
                    columns: list[list]) -> dict[str, dict[str, Any]]:
    """``{topics[r]: {key: column[r] for key, column in zip(keys, columns)} for r in
    rows}``: an evaluation's per-topic values as pytrec_eval's dicts (built in C when the
    extension is there: no Python frame per topic)."""
    if _mapscan is not None:
        return _mapscan.topic_dicts(topics if type(topics) is list else list(topics), rows,
                                    keys, columns)
    return {topics[r]: {k: col[r] for k, col in zip(keys, columns, strict=True)}
            for r in rows}


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


def qrels_from_mapping(qrels: Mapping, label: str) -> Qrels:
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
    """:func:`qrels_from_mapping`'s columns (topics, docids, grades, lengths) read in
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
