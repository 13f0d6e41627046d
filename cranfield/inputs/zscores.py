"""trec_eval's ``-Z``: per-topic values as z-scores against a reference set of runs.

One reader for every interface (``cranfield eval -Z FILE``, ``evaluate(zscores=...)``, the
API's ``options.zscores``). The file has a line ``topic measure mean stddev`` per pair
(trec_eval's ``get_zscores.c``); the mapping is ``{topic: {measure: [mean, stddev]}}``.
Fields follow the project's TREC text grammar (:mod:`cranfield.inputs.grammar`: space/tab
separated, blank and ``#`` lines skipped); mean and stddev are decimals, or ``nan``/``inf``
as ``atof`` reads them (:func:`parse_number`).

What trec_eval does with it (``convert_zscores.c``, ``trec_eval.c``), and so
:func:`cranfield.measures.zscore_standardise.standardise`:

- every per-topic value of every measure is replaced, before the summary is formed, by
  ``(value - mean) / stddev`` with the pair looked up by the topic and the measure's
  printed name (``P_5``, ``iprec_at_recall_0.00``); ``stddev == 0`` gives 0 when the value
  equals the mean, else :data:`MISSING`; a pair (or a whole topic) absent from the file
  gives :data:`MISSING` (-1000000);
- the summary is then formed from the z-scores as usual: means averaged, ``num_*`` summed,
  ``gm_*`` the exp of the mean z-score of log(max(v, 1e-5)); ``num_q`` and, with ``-c``,
  ``num_rel`` are counts, not z-scores;
- 9.0.8 with ``-c`` never evaluates a qrels topic the run lacks, so its 0s are not converted
  (10.0 evaluates it, and converts).

Deliberate differences, where trec_eval's behaviour is accidental: its binary search over a
topic's measures reads one entry past the end, so a measure absent for topic A but first
(in strcmp order) among topic B's, the next topic in the file, takes B's mean and stddev;
here it is missing, as trec_eval's help says. A pair given twice (trec_eval takes either,
as qsort leaves them) and a negative stddev are refused, naming the lines, as is any line
that is not four fields or whose numbers are not numbers (trec_eval's ``atof`` reads
``abc`` as 0).

This module holds the table and its reader. Room: inputs.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from .grammar import GrammarError, id_problem, parse_score
from .trec_lines import content_lines
from .trec_source import load_bytes

MISSING = -1000000.0  # trec_eval.h MISSING_ZSCORE_VALUE


@dataclass(frozen=True)
class ZScores:
    """Means and standard deviations by topic and measure name."""

    table: dict[str, dict[str, tuple[float, float]]]
    source: str = "zscores"
    sha256: str = field(default="", compare=False)

    def z(self, topic: str, name: str, value: float) -> float:
        """``value`` of measure ``name`` on ``topic`` as trec_eval's z-score."""
        pair = self.table.get(topic, {}).get(name)
        if pair is None:
            return MISSING
        mean, stddev = pair
        if stddev:
            return (value - mean) / stddev
        return 0.0 if value == mean else MISSING

    def as_json(self) -> dict[str, dict[str, list[float]]]:
        """The JSON mapping (``options.zscores``) of the same pairs."""
        return {t: {m: [mean, sd] for m, (mean, sd) in ms.items()}
                for t, ms in self.table.items()}

    def summary(self) -> dict[str, Any]:
        """What an evaluation's options record of it: its digest and size, not the pairs."""
        return {"sha256": self.sha256, "topics": len(self.table),
                "pairs": sum(len(m) for m in self.table.values())}


def read_zscores(source: Any, *, name: str | None = None) -> ZScores:
    """A :class:`ZScores` from a path, text or bytes (``topic measure mean stddev`` lines),
    a mapping ``{topic: {measure: (mean, stddev)}}`` or a ZScores. Errors are
    :class:`InputError` naming the line (text) or the path (``zscores.301.map``)."""
    if isinstance(source, ZScores):
        return source
    if isinstance(source, Mapping):
        return _from_mapping(source, name or "zscores")
    # the readers' own loading: a path (a str naming a file, spaces and all), text, bytes or
    # a file object, with their messages for a missing or unreadable file
    data, label = load_bytes(source, name, "zscores")
    return _from_text(bytes(data), label)


def _from_text(data: bytes, label: str) -> ZScores:
    table: dict[str, dict[str, tuple[float, float]]] = {}
    where: dict[tuple[str, str], int] = {}
    for lineno, fields in content_lines(data, label):
        if len(fields) != 4:
            raise InputError(label, f"has {len(fields)} fields; a z-scores line is "
                             "'topic measure mean stddev'", line=lineno)
        topic, measure, mean_text, sd_text = fields
        try:
            mean = parse_number(mean_text)
            stddev = parse_number(sd_text)
        except GrammarError as exc:
            raise InputError(label, str(exc), line=lineno,
                             field="mean" if _bad(mean_text) else "stddev") from None
        _add(table, where, topic, measure, mean, stddev, label, lineno)
    if not table:
        raise InputError(label, "holds no z-scores (the file is empty or only comments)",
                         code="empty-input")
    return ZScores(table, label, hashlib.sha256(data).hexdigest())


_NON_FINITE = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}


def parse_number(text: str) -> float:
    """A mean or stddev: the grammar's finite decimal
    (:func:`cranfield.inputs.grammar.parse_score`), or ``nan``/``inf``/``infinity`` with an optional
    sign in any case, which trec_eval's ``atof`` reads and its own test file holds
    (``set_F nan nan`` in 9.0.8's)."""
    sign, body = (text[0], text[1:]) if text[:1] in "+-" else ("", text)
    special = _NON_FINITE.get(body.lower())
    if special is not None:
        return -special if sign == "-" else special
    return parse_score(text)


def _bad(text: str) -> bool:
    try:
        parse_number(text)
    except GrammarError:
        return True
    return False


def _add(table, where, topic, measure, mean, stddev, label, lineno) -> None:
    if stddev < 0:
        raise InputError(label, f"stddev {stddev!r} is negative", line=lineno, field="stddev")
    prev = where.get((topic, measure))
    if prev is not None:
        raise InputError(label, f"topic {topic!r} measure {measure!r} is given twice (lines "
                         f"{prev} and {lineno})", line=lineno)
    where[(topic, measure)] = lineno
    table.setdefault(topic, {})[measure] = (mean, stddev)


def _from_mapping(mapping: Mapping, label: str) -> ZScores:
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for topic, measures in mapping.items():
        path = f"{label}.{topic}"
        problem = id_problem(topic)
        if problem is not None:
            raise InputError(label, f"topic {problem}", field=path)
        if not isinstance(measures, Mapping) or not measures:
            raise InputError(label, "must be a non-empty object {measure: [mean, stddev]}",
                             field=path)
        row: dict[str, tuple[float, float]] = {}
        for measure, pair in measures.items():
            mpath = f"{path}.{measure}"
            problem = id_problem(measure)
            if problem is not None:
                raise InputError(label, f"measure {problem}", field=mpath)
            if not isinstance(pair, list | tuple) or len(pair) != 2 or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) for v in pair):
                raise InputError(label, "must be [mean, stddev], two numbers", field=mpath)
            mean, stddev = float(pair[0]), float(pair[1])
            if stddev < 0:
                raise InputError(label, f"stddev {stddev!r} is negative", field=mpath)
            row[measure] = (mean, stddev)
        table[str(topic)] = row
    if not table:
        raise InputError(label, "holds no z-scores", field=label, code="empty-input")
    canon = "".join(f"{t} {m} {mean!r} {sd!r}\n" for t in sorted(table)
                    for m, (mean, sd) in sorted(table[t].items()))
    return ZScores(table, label, hashlib.sha256(canon.encode()).hexdigest())
