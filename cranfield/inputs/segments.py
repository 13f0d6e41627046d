"""Segments and weights (issue #28): scores by segment of the topics and weighted means.

Topic metadata says, for each topic, the *segments* it belongs to (labels such as ``tail``,
``navigational``, ``lang=de``; zero or more) and its *weight* (its traffic; default 1). One
reader, :func:`read_topic_metadata`, for every way in (``cranfield eval --topic-metadata``,
``evaluate(topic_metadata=...)``, ``compare(topic_metadata=...)``, the API's
``options.topic_metadata`` and its multipart ``topic_metadata`` part, stored metadata):

- a mapping ``{topic: {"segments": [label, ...], "weight": w}}`` (both members optional;
  no other member), the JSON form;
- text, one line per topic: ``topic LABELS [WEIGHT]`` where LABELS is ``label[,label...]``
  or ``-`` for none, fields separated as in TREC text (:mod:`cranfield.inputs.grammar`: spaces or
  tabs; blank lines and lines whose first field starts with ``#`` skipped). Errors name the
  line.

A topic is an id of the grammar; a label is a non-empty string without whitespace, control
characters or commas, and not ``-`` (text's "no label"); a topic does not repeat a label.
A weight is a finite number >= 0 (in text the grammar's decimal: ``2``, ``0.5``, ``1e3``).
A topic given twice is an error naming both lines (or, in a mapping, cannot happen: JSON
objects with a key twice are refused by the body reader). Metadata with no topic is an
error (``empty-input``).

What it gives (:func:`cranfield.measures.aggregation.segment_aggregates`, which
:func:`cranfield.evaluate` calls):

- per segment: the evaluated topics carrying its label, and over them the summary trec_eval
  forms over all topics (``evaluate``'s own rule: means, ``num_*`` summed, ``gm_*``
  geometric, ``num_q`` the count, with ``-c`` every qrels topic of the segment, the
  missing ones scored as ``-c`` scores them); a label no evaluated topic carries is listed
  with ``topics`` 0 and an empty ``aggregate``;
- weighted, over all evaluated topics (a topic absent from the metadata weighs 1 and
  carries no label): a mean measure's ``sum(w_i x_i) / sum(w_i)`` (numpy's ``average``;
  NaN -- JSON null, text ``-nan`` -- when the weights sum to 0), a summed measure's
  ``sum(w_i x_i)`` (a weighted count: ``num_ret`` weighs each topic's documents by its
  weight), ``num_q`` the sum of the weights, ``gm_*`` ``exp(sum(w_i log max(x_i, 1e-5)) /
  sum(w_i))``; ``runid``/``relstring`` have none.

Micro aggregation (``aggregation="micro"``) is not combined with metadata (refused), nor
are the ``-R`` qrels formats. In comparisons
(:func:`cranfield.compare.comparison.compare_evaluations`) each segment is compared over its common
topics with the same tests, and its p-values are corrected over its own family (that segment's
measure x pair comparisons; :mod:`cranfield.compare.segment_comparison`).

This module holds the metadata and its reader. Room: inputs.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import InputError
from .grammar import WEIGHT_LIMIT, GrammarError, id_problem, parse_score
from .run_qrels import byte_key
from .trec_lines import content_lines

KIND = "topic_metadata"
#: the longest segment label (characters), in every way in: what a recorded result keeps
MAX_LABEL = 200


# --------------------------------------------------------------------------------------------
# The metadata and its reader
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopicMetadata:
    """Topic -> its segment labels (in the order given) and its weight."""

    labels: dict[str, tuple[str, ...]]
    weights: dict[str, float]
    source: str = field(default=KIND, compare=False)
    sha256: str = field(default="", compare=False)

    @property
    def topics(self) -> list[str]:
        return list(self.labels)

    @cached_property
    def _names(self) -> tuple[str, ...]:
        seen = {label for labels in self.labels.values() for label in labels}
        return tuple(sorted(seen, key=byte_key))

    @cached_property
    def _label_sets(self) -> dict[str, frozenset[str]]:
        return {t: frozenset(labels) for t, labels in self.labels.items()}

    def segment_names(self) -> list[str]:
        """Every label any topic carries, in byte (strcmp) order: the order segments are
        reported in."""
        return list(self._names)

    def weight(self, topic: str) -> float:
        """The topic's weight: 1 when the metadata does not name it."""
        return self.weights.get(topic, 1.0)

    def members(self, topics: list[str], label: str) -> np.ndarray:
        """Boolean mask over ``topics``: those carrying ``label``."""
        sets = self._label_sets
        return np.fromiter((label in sets.get(t, ()) for t in topics), bool, len(topics))

    def segment_rows(self, topics: list[str]) -> dict[str, np.ndarray]:
        """{label: the positions in ``topics`` (ascending) of the topics carrying it} for
        every label (byte order; a label no topic of ``topics`` carries: empty), in one pass
        over the topics and their labels: linear in topics + topic-label pairs."""
        rows: dict[str, list[int]] = {label: [] for label in self._names}
        for i, t in enumerate(topics):
            for label in self.labels.get(t, ()):
                rows[label].append(i)
        return {label: np.asarray(r, dtype=np.intp) for label, r in rows.items()}

    def weight_array(self, topics: list[str]) -> np.ndarray:
        return np.fromiter((self.weights.get(t, 1.0) for t in topics), np.float64, len(topics))

    def as_json(self) -> dict[str, dict[str, Any]]:
        """The JSON mapping (``options.topic_metadata``) of the same metadata."""
        return {t: {"segments": list(self.labels[t]), "weight": self.weights[t]}
                for t in self.labels}

    def as_text(self) -> str:
        """The text form (``topic labels weight`` lines, in the order given); reads back to
        the same metadata. Weights as Python's shortest repr (``1.0``, ``0.25``)."""
        return "".join(f"{t}\t{','.join(ls) if ls else '-'}\t{self.weights[t]!r}\n"
                       for t, ls in self.labels.items())

    def summary(self) -> dict[str, Any]:
        """What an evaluation's options record of it: digest and size, not the table."""
        return {"sha256": self.sha256, "topics": len(self.labels),
                "segments": len(self.segment_names())}

    def assignments(self) -> int:
        """Topic-label pairs: the work of the per-segment aggregates is proportional."""
        return sum(len(v) for v in self.labels.values())


def read_topic_metadata(source: Any, *, name: str | None = None,
                        max_topics: int | None = None,
                        max_segments: int | None = None) -> TopicMetadata:
    """A :class:`TopicMetadata` from a path, text, bytes or file object (``topic LABELS
    [WEIGHT]`` lines), a mapping ``{topic: {"segments": [...], "weight": w}}`` or a
    TopicMetadata. Errors are :class:`InputError` naming the line (text) or the path
    (``topic_metadata.q1.weight``; with ``name``, that prefix). ``max_topics``: more topics
    than this is an InputError (code ``too-large``): a mapping's before any topic is read,
    text's as the reading meets the topic over it (topics are counted, not lines: blank and
    comment lines do not count, so N topics pass or fail alike in either form);
    ``max_segments``: more distinct segment labels than this (or more on one topic) is one
    too, as soon as the reading meets the label over it."""
    if isinstance(source, TopicMetadata):
        _check_size(len(source.labels), max_topics, name or source.source)
        if max_segments is not None and len(source.segment_names()) > max_segments:
            _too_many_labels(len(source.segment_names()), max_segments, name or source.source)
        return source
    if isinstance(source, Mapping):
        label = name or KIND
        _check_size(len(source), max_topics, label)
        return _from_mapping(source, label, max_segments)
    from .trec_source import load_bytes, refuse_bom

    data, label = load_bytes(source, name, KIND)
    data = bytes(data)
    refuse_bom(data, label)  # as qrels and runs: the one sentence, line 1
    return _from_text(data, label, max_segments, max_topics)


def _check_size(n: int, max_topics: int | None, label: str, **where) -> None:
    if max_topics is not None and n > max_topics:
        said = f"{n:,} topics" if not where else f"more than {max_topics:,} topics"
        raise InputError(label, f"{said}, over the limit of {max_topics:,} topics",
                         code="too-large", **(where or {"field": label}))


def _too_many_labels(n: int, max_segments: int, label: str, **where) -> None:
    raise InputError(label, f"more than {max_segments:,} distinct segment labels (at least "
                     f"{n:,}): at most {max_segments:,} segments", code="too-large",
                     **({"field": label} if not where else where))


def label_problem(label: object) -> str | None:
    """Why ``label`` is not a segment label, or None: the one rule of a label in metadata, a
    gate's ``@segment=`` and a trend's ``?segment=``: a string of at most MAX_LABEL
    characters, an id of the grammar (no ASCII space or control), no Unicode control,
    format or space character (C1, NEL, U+2028, U+200E...), no comma, not ``-``."""
    if not isinstance(label, str):
        return "a segment label must be a string"
    if len(label) > MAX_LABEL:
        return f"a segment label of {len(label):,} characters; at most {MAX_LABEL}"
    problem = id_problem(label)
    if problem is not None:
        return "a segment label " + problem.removeprefix("an id ").removeprefix("ids ")
    if not label.isascii():  # beyond the id rule: no Unicode control, format or space
        for ch in label:     # (C1, NEL, U+2028/9 break lines in text and CSV output)
            if unicodedata.category(ch) in _NOT_IN_LABEL or ch.isspace():
                return (f"a segment label may not contain U+{ord(ch):04X} "
                        f"({unicodedata.name(ch, 'a control character')}): no control, "
                        "format or space character")
    if "," in label:
        return f"segment label {label!r} contains a comma (labels are separated by commas)"
    if label == "-":
        return "'-' is not a segment label (in text it stands for no label)"
    return None


_NOT_IN_LABEL = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def weight_problem(value: object) -> str | None:
    """Why ``value`` (a JSON value, or any real number: numpy's too; not a bool) is not a
    weight, or None: a finite number from 0 to WEIGHT_LIMIT (1e100, as gains and utility's
    coefficients: weighted sums over any number of topics stay finite)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        return f"a weight must be a number, got {type(value).__name__}"
    try:
        w = float(value)
    except (OverflowError, ValueError, TypeError):
        return "a weight must be a finite number"
    return _range_problem(w, repr(value))


def _range_problem(w: float, shown: str) -> str | None:
    if not math.isfinite(w):
        return "a weight must be a finite number"
    if w < 0:
        return f"a weight must be >= 0, got {shown}"
    if w > WEIGHT_LIMIT:
        return (f"a weight must be at most {WEIGHT_LIMIT:.0e} (so that weighted sums stay "
                f"finite), got {shown}")
    return None


def _labels(items, where, distinct: set[str], max_segments: int | None,
            too_many) -> tuple[str, ...]:
    """The labels of one topic, checked (linear: a set finds a repeat); ``where(reason)``
    raises the located error. Each new label joins ``distinct``; past ``max_segments`` of
    them, ``too_many(n)`` raises."""
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        problem = label_problem(item)
        if problem is not None:
            where(problem)
        if item in seen:
            where(f"segment label {item!r} is given twice")
        seen.add(item)
        out.append(item)
        if item not in distinct:
            distinct.add(item)
            if max_segments is not None and len(distinct) > max_segments:
                too_many(len(distinct))
    return tuple(out)


def _from_text(data: bytes, label: str, max_segments: int | None = None,
               max_topics: int | None = None) -> TopicMetadata:
    labels: dict[str, tuple[str, ...]] = {}
    weights: dict[str, float] = {}
    where_given: dict[str, int] = {}
    distinct: set[str] = set()
    for lineno, fields in content_lines(data, label):

        def fail(reason: str, column: str | None = None, lineno=lineno):
            raise InputError(label, reason, line=lineno, field=column)

        if len(fields) not in (2, 3):
            fail(f"has {len(fields)} fields; a topic metadata line is 'topic "
                 "label[,label...] [weight]' ('-' for no label)")
        topic = fields[0]
        _check_size(len(where_given) + 1, max_topics, label, line=lineno)
        if topic in where_given:
            fail(f"topic {topic!r} is given twice (lines {where_given[topic]} and {lineno})",
                 "topic")
        where_given[topic] = lineno
        raw = fields[1]
        items = [] if raw == "-" else raw.split(",")
        labels[topic] = _labels(items, lambda r: fail(r, "segments"), distinct, max_segments,
                                lambda n, lineno=lineno: _too_many_labels(
                                    n, max_segments, label, line=lineno, field="segments"))
        weight = 1.0
        if len(fields) == 3:
            try:
                weight = parse_score(fields[2])
            except GrammarError as exc:
                fail(f"weight {exc}", "weight")
            problem = _range_problem(weight, fields[2])
            if problem is not None:
                fail(problem, "weight")
        weights[topic] = float(weight) + 0.0  # -0 is 0: one content, one digest
    if not labels:
        raise InputError(label, "holds no topics (the file is empty or only comments)",
                         code="empty-input")
    return TopicMetadata(labels, weights, label, _digest(labels, weights))


_MEMBERS = ("segments", "weight")


def _from_mapping(mapping: Mapping, label: str,
                  max_segments: int | None = None) -> TopicMetadata:
    labels: dict[str, tuple[str, ...]] = {}
    weights: dict[str, float] = {}
    distinct: set[str] = set()
    for topic, entry in mapping.items():
        path = f"{label}.{topic}"
        problem = id_problem(topic)
        if problem is not None:
            raise InputError(label, f"topic {problem}", field=path)
        if topic.startswith("#"):  # one grammar: text cannot hold it (as_text reads back)
            raise InputError(label, f"topic {topic!r} starts with '#', which the text form "
                             "reads as a comment line: a topic may not", field=path)
        if not isinstance(entry, Mapping):
            raise InputError(label, 'must be an object {"segments": [label, ...], '
                             '"weight": number}', field=path)
        unknown = [k for k in entry if k not in _MEMBERS]
        if unknown:
            raise InputError(label, f"unknown member {unknown[0]!r} (a topic has "
                             "'segments' and 'weight')", field=f"{path}.{unknown[0]}")
        segs = entry.get("segments", [])
        if not isinstance(segs, list | tuple):
            raise InputError(label, "must be a list of segment labels",
                             field=f"{path}.segments")

        def fail(reason: str, path=path):
            raise InputError(label, reason, field=f"{path}.segments")

        labels[str(topic)] = _labels(segs, fail, distinct, max_segments,
                                     lambda n, path=path: _too_many_labels(
                                         n, max_segments, label, field=f"{path}.segments"))
        weight = entry.get("weight", 1.0)
        problem = weight_problem(weight)
        if problem is not None:
            raise InputError(label, problem, field=f"{path}.weight")
        weights[str(topic)] = float(weight) + 0.0  # -0 is 0: one content, one digest
    if not labels:
        raise InputError(label, "holds no topics", field=label, code="empty-input")
    return TopicMetadata(labels, weights, label, _digest(labels, weights))


def _digest(labels: dict[str, tuple[str, ...]], weights: dict[str, float]) -> str:
    """sha256 of the canonical text (topics in byte order, labels sorted, weight repr): the
    same metadata has one digest whichever form it came in."""
    canon = "".join(f"{t}\t{','.join(sorted(labels[t], key=byte_key)) or '-'}\t{weights[t]!r}\n"
                    for t in sorted(labels, key=byte_key))
    return hashlib.sha256(canon.encode("utf-8", "surrogateescape")).hexdigest()
