"""The Run/Qrels model: a run and relevance judgments held as columns (one row per retrieved
or judged document), and the topic order every reader gives them (trec_eval's ``strcmp``
order of the ids' UTF-8 bytes).

Room: inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arrow_arrays import arrow_strings, object_array, take_rows


@dataclass(eq=False)
class Run:
    """A run as columns: one row per retrieved document.

    ``topics`` holds the distinct topic ids in byte order (trec_eval's ``strcmp`` order);
    ``topic_index[i]`` says which one row ``i`` belongs to. ``docids`` is a pyarrow string
    array (file input) or a numpy object array (mapping input). Scores are float64 as read;
    the 9.0.8 profile rounds them to float32 at ranking time.
    """

    topics: list[str]
    topic_index: np.ndarray
    docids: Any
    scores: np.ndarray
    runid: str = "cranfield"
    source: str = "run"
    _origin: Any = field(default=None, repr=False)
    # FNV-1a (64-bit) of each docid's UTF-8 bytes, when a reader computed it for free: lets
    # matching against qrels skip the rows that cannot be judged (see matching.match_judged)
    docid_fnv: np.ndarray | None = field(default=None, repr=False)
    # (rb, packed, shared): the run's (topic, docid) keys sorted, each holding a key's top
    # 64 - rb bits above its row number (see packed_keys), and the prefixes rows share,
    # when computed (see run_packed_keys)
    _packed: Any = field(default=None, repr=False)
    # docid_hashes(docids), when computed (see run_hashes)
    _hashes: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.scores)

    def docids_at(self, rows: np.ndarray) -> np.ndarray:
        """The docids of ``rows`` as a numpy array of str (gathered, not copied wholesale)."""
        rows = np.asarray(rows, dtype=np.int64)
        if isinstance(self.docids, np.ndarray):
            return self.docids[rows]
        return object_array(take_rows(self.docids, rows))

    def to_dict(self) -> dict[str, dict[str, float]]:
        """The run as ``{topic: {docid: score}}`` (for tests and small inputs)."""
        out: dict[str, dict[str, float]] = {t: {} for t in self.topics}
        docids = self.docids_at(np.arange(len(self)))
        for t, d, s in zip(self.topic_index.tolist(), docids.tolist(), self.scores.tolist(),
                           strict=True):
            out[self.topics[t]][d] = s
        return out


class Qrels:
    """Relevance judgments as columns sorted by (topic, docid).

    ``grades`` are integers; a negative grade means "in the pool but not judged" (trec_eval's
    ``RELVALUE_UNJUDGED``). ``subtopics`` keeps the second column, which trec_eval ignores and
    ndeval reads as the subtopic number; with ``diversity=False`` a docid may appear once per
    topic, as trec_eval requires.

    ``docids`` may be given as a numpy object array or as a pyarrow string array (the TREC
    reader keeps its column); either way ``docids`` reads as a numpy object array, built on
    first use, so that evaluating never turns a judged docid into a Python string unless a
    measure needs to compare it (see :func:`cranfield.inputs.matching.match_judged`).

    ``gains`` declares what the grades are (:data:`cranfield.inputs.grammar.GAINS`):
    ``"integer"`` (trec_eval's grades, int64: the default) or ``"real"`` (real-valued gains,
    float64, such as LLM labels or a mean consensus: gain-based measures use them as they
    are, binary measures need ``rel=``; see docs/measures.md). Real gains are only ever
    declared, never inferred from the values; a reader asked for ``gains="real"`` reads
    grades by :func:`cranfield.inputs.grammar.parse_real_gain`. Building one directly:
    ``Qrels(topics, topic_index, docids, grades_float64, gains="real")``.
    """

    def __init__(self, topics: list[str], topic_index: np.ndarray, docids: Any,
                 grades: np.ndarray, subtopics: Any = None, source: str = "qrels", *,
                 gains: str = "integer") -> None:
        if gains not in ("integer", "real"):
            raise ValueError(f"gains must be 'integer' or 'real', not {gains!r}")
        self.topics = topics
        self.topic_index = topic_index
        self._docids = docids
        self.gains = gains
        self.grades = np.asarray(grades, dtype=np.float64) if gains == "real" else grades
        self._subtopics = subtopics
        self.source = source
        # True when a reader proved each (topic, docid) to appear once (text read with
        # diversity=False): evaluate() then need not look for subtopic rows to merge
        self.unique_judgments = False
        self._hashes: np.ndarray | None = None  # docid_hashes of the docids, when computed
        self._arrow = None  # the docids as a pyarrow string array, once known

    def __setstate__(self, state: dict) -> None:
        # (a Qrels pickled when it was a dataclass kept docids and subtopics by name)
        state = dict(state)
        for name in ("docids", "subtopics"):
            if name in state:
                state["_" + name] = state.pop(name)
        state.setdefault("unique_judgments", False)
        state.setdefault("_hashes", None)
        state.setdefault("_arrow", None)
        state.setdefault("gains", "integer")
        self.__dict__.update(state)

    def __repr__(self) -> str:
        real = ", gains='real'" if self.gains == "real" else ""
        return (f"Qrels(topics={len(self.topics)}, judgments={len(self)}, "
                f"source={self.source!r}{real})")

    def __len__(self) -> int:
        return len(self.grades)

    @property
    def docids(self) -> np.ndarray:
        """The docids as a numpy object array of str (built from the Arrow column once)."""
        if not isinstance(self._docids, np.ndarray):
            self._arrow = self._docids  # (kept: matching reads the column, not the strs)
            self._docids = object_array(self._docids)
        return self._docids

    @docids.setter
    def docids(self, value) -> None:
        self._docids = value
        self._arrow = None
        self._hashes = None

    @property
    def docids_arrow(self):
        """The docids as a pyarrow string array (the reader's column, or built once)."""
        if not isinstance(self._docids, np.ndarray):
            return self._docids
        if self._arrow is None:
            self._arrow = arrow_strings(self._docids)
        return self._arrow

    def docids_at(self, rows: np.ndarray) -> np.ndarray:
        """The docids of ``rows`` as a numpy object array of str (gathered, not copied)."""
        rows = np.asarray(rows, dtype=np.int64)
        if isinstance(self._docids, np.ndarray):
            return self._docids[rows]
        return object_array(take_rows(self._docids, rows))

    @property
    def subtopics(self) -> np.ndarray | None:
        if self._subtopics is not None and not isinstance(self._subtopics, np.ndarray):
            values, codes = self._subtopics  # (distinct values, a code per row)
            self._subtopics = np.asarray(values, dtype=object)[codes] if len(codes) else \
                np.zeros(0, dtype=object)
        return self._subtopics

    @subtopics.setter
    def subtopics(self, value) -> None:
        self._subtopics = value

    @property
    def offsets(self) -> np.ndarray:
        """Start of each topic's rows, with a final end sentinel (length ``len(topics)+1``)."""
        tix = self.topic_index  # (searched for its own dtype: no cast of the whole column)
        return tix.searchsorted(np.arange(len(self.topics) + 1, dtype=tix.dtype))

    def subset(self, topics) -> Qrels:
        """The judgments of ``topics`` only (topics not in these qrels are ignored)."""
        wanted = set(topics)
        keep_topics = [t for t in self.topics if t in wanted]
        codes = np.asarray(_index_of(keep_topics, self.topics), dtype=np.int64)
        remap = np.full(len(self.topics), -1, dtype=np.int64)
        remap[codes] = np.arange(len(codes))
        rows = np.flatnonzero(remap[self.topic_index] >= 0)
        out = Qrels(keep_topics, remap[self.topic_index[rows]].astype(np.int32),
                    self.docids_at(rows), self.grades[rows],
                    self.subtopics[rows] if self.subtopics is not None else None,
                    self.source, gains=self.gains)
        out.unique_judgments = self.unique_judgments
        return out

    def with_real_gains(self) -> Qrels:
        """These judgments declared to hold real gains (``gains="real"``): ``self`` when they
        do, else a copy whose grades are float64 (integers are real gains as they are)."""
        if self.gains == "real":
            return self
        out = Qrels(self.topics, self.topic_index, self._docids, self.grades, self._subtopics,
                    self.source, gains="real")
        out.unique_judgments = self.unique_judgments
        return out

    def with_integer_grades(self) -> Qrels:
        """These judgments read as trec_eval reads grades (a trec_eval profile's evaluation of
        qrels declaring real gains): ``self`` when they are integers already, else a copy
        with int64 grades, the first grade that is not an integer refused as a mapping's is
        (:func:`cranfield.inputs.grammar.json_grade_problem`, naming topic and docid)."""
        if self.gains != "real":
            return self
        from ..errors import InputError
        from .grammar import json_grade_problem

        grades = self.grades
        bad = ~np.isfinite(grades) | (np.abs(grades) > 2.0 ** 53)
        bad[~bad] = grades[~bad] != np.trunc(grades[~bad])
        for row in np.flatnonzero(bad)[:1].tolist():
            topic = self.topics[int(self.topic_index[row])]
            path = f"{self.source}.{topic}.{self.docids_at(np.array([row]))[0]}"
            raise InputError(self.source, json_grade_problem(float(grades[row])), field=path)
        out = Qrels(self.topics, self.topic_index, self._docids, grades.astype(np.int64),
                    self._subtopics, self.source)
        out.unique_judgments = self.unique_judgments
        return out

    @property
    def real_gains(self) -> bool:
        """Whether these qrels declare real-valued gains (``gains == "real"``)."""
        return self.gains == "real"

    def to_dict(self) -> dict[str, dict[str, int | float]]:
        out: dict[str, dict[str, int | float]] = {t: {} for t in self.topics}
        for t, d, g in zip(self.topic_index.tolist(), self.docids.tolist(),
                           self.grades.tolist(), strict=True):
            out[self.topics[t]][d] = g
        return out


def byte_key(s: str) -> bytes:
    """trec_eval compares ids with strcmp: byte order of the UTF-8 encoding."""
    return s.encode("utf-8", "surrogateescape")


def in_strcmp_order(first_seen: dict[str, int], codes: np.ndarray
                     ) -> tuple[list[str], np.ndarray]:
    """Topics numbered in the order first seen, renumbered in trec_eval's strcmp order:
    (the sorted topics, each row's code in that order)."""
    topics = sorted(first_seen, key=byte_key)
    remap = np.empty(len(topics), dtype=np.int32)
    remap[[first_seen[t] for t in topics]] = np.arange(len(topics), dtype=np.int32)
    return topics, remap[codes] if len(codes) else np.zeros(0, np.int32)


def _index_of(names: list[str], topics: list[str]) -> list[int]:
    where = {t: i for i, t in enumerate(topics)}
    return [where[n] for n in names]
