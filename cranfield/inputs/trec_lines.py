"""The line-by-line TREC reader: runs and qrels in every layout trec_eval accepts (any
whitespace, extra trailing fields, comments), by the input grammar, with errors naming the
exact line and field; qrels columns grouped by topic and checked for a docid judged twice;
and the lines of small side files (topic metadata, z-scores).

Room: inputs.
"""

from __future__ import annotations

import io
from array import array

import numpy as np

from ..errors import InputError
from . import grammar
from .arrow_arrays import object_array
from .run_qrels import Qrels, Run, in_strcmp_order


def _split_lines(data: bytes, label: str):
    """Yield (line number, fields) for every content line by the input grammar
    (:mod:`cranfield.inputs.grammar`: fields split on ASCII space and tab, no control characters);
    skips blank lines and ``#`` comments."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(label, "not valid UTF-8 text", line=line) from None
    if not grammar.plain_bytes(data):  # the slow search only to name the line
        bad = grammar.text_problem(text)
        raise InputError(label, bad[1], line=bad[0])
    split = str.split if text.isascii() else grammar.split_fields
    for lineno, line in enumerate(io.StringIO(text), start=1):
        fields = split(line)
        if not fields or fields[0].startswith("#"):
            continue
        yield lineno, fields


def content_lines(data: bytes, label: str):
    """Yield (line number, fields) for every content line of a small side file (topic
    metadata, z-scores) by the input grammar: UTF-8 text ("is not UTF-8 text" naming the
    line), no control character (:func:`grammar.text_problem`), fields split on ASCII space
    and tab only; blank lines and ``#`` comments skipped. Errors are :class:`InputError`
    naming ``label`` and the line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(label, "is not UTF-8 text", line=line) from None
    bad = grammar.text_problem(text)
    if bad is not None:
        raise InputError(label, bad[1], line=bad[0])
    for lineno, line in enumerate(text.split("\n"), 1):
        fields = grammar.split_fields(line)
        if not fields or fields[0].startswith("#"):
            continue
        yield lineno, fields


def _line_fields(data: bytes, line: int) -> list[str]:
    """The fields of line ``line`` (1-based) of valid TREC text: for error messages."""
    return grammar.split_fields(data.split(b"\n", line)[line - 1].decode("utf-8"))


def _parse_score(text: str, label: str, lineno: int) -> float:
    try:
        return grammar.parse_score(text)
    except grammar.GrammarError as exc:
        raise InputError(label, str(exc), line=lineno, field="score") from None


def _parse_grade(text: str, label: str, lineno: int) -> int:
    try:
        return grammar.parse_grade(text)
    except grammar.GrammarError as exc:
        raise InputError(label, str(exc), line=lineno, field="grade") from None


def slow_run(data: bytes, label: str) -> Run:
    """The line reader: any whitespace, extra fields, comments; exact errors. Topic codes and
    scores go into typed arrays, and duplicates are found afterwards by sorting hashes, so a
    large irregular file costs one str per docid, not a dict entry per line."""
    topic_code: dict[str, int] = {}
    codes = array("i")
    scores = array("d")
    docids: list[str] = []
    lines = array("q")
    runid = ""
    # float() reads the grammar's decimals, and also '_' separators and non-ASCII digits
    # (refused: the grammar's parser runs when the text holds either) and inf/nan (refused
    # below, for all scores at once)
    to_float = float if data.isascii() and b"_" not in data else grammar.parse_score
    for lineno, fields in _split_lines(data, label):
        if len(fields) < 6:
            raise InputError(label, f"expected at least 6 fields (qid iter docno rank score "
                             f"runid), found {len(fields)}", line=lineno)
        try:
            scores.append(to_float(fields[4]))
        except ValueError:
            _parse_score(fields[4], label, lineno)  # raises, naming the line
        codes.append(topic_code.setdefault(fields[0], len(topic_code)))
        docids.append(fields[2])
        lines.append(lineno)
        runid = fields[5]
    score_array = np.frombuffer(scores, np.float64)
    if not np.isfinite(score_array).all():
        line = int(lines[int(np.flatnonzero(~np.isfinite(score_array))[0])])
        _parse_score(_line_fields(data, line)[4], label, line)  # raises, naming the line
    topics, topic_index = in_strcmp_order(topic_code, np.frombuffer(codes, dtype=np.int32))
    doc_array = np.empty(len(docids), dtype=object)
    doc_array[:] = docids
    del docids
    _raise_on_duplicate(topics, topic_index, doc_array, np.frombuffer(lines, np.int64), label)
    return Run(topics, topic_index, doc_array, score_array.copy(), runid, label)


def _raise_on_duplicate(topics, topic_index, docids, lines, label) -> None:
    """Raise naming both lines if a docid repeats within a topic (hash, sort, verify)."""
    if len(docids) < 2:
        return
    keys = np.fromiter(map(hash, docids), np.int64, len(docids)) * 1000003 + topic_index
    order = np.argsort(keys, kind="stable")
    same = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    hits = []
    for i in same.tolist():  # rows sharing a hash: usually none, else the duplicates
        a, b = order[i], order[i + 1]
        if topic_index[a] == topic_index[b] and docids[a] == docids[b]:
            hits.append((max(lines[a], lines[b]), min(lines[a], lines[b]), a))
    if hits:
        line, first, row = min(hits)
        raise InputError(label, f"docid {docids[row]!r} appears twice in topic "
                         f"{topics[topic_index[row]]!r} (first on line {first})", line=int(line),
                         field="docno", code="duplicate-docid")


def slow_qrels_columns(data: bytes, label: str, gains: str = "integer") -> list:
    """(qids, subtopics, docids, grades) of qrels text; with ``gains="real"`` (declared,
    issue #31) grades are real gains by :func:`grammar.parse_real_gain` (float64)."""
    if gains == "real":
        return _real_qrels_columns(data, label)
    qids: list[str] = []
    subtopics: list[str] = []
    docids: list[str] = []
    grades: list[int] = []
    # int() reads the grammar's integers, and also '_' separators and non-ASCII digits (the
    # grammar's parser runs when the text holds either) and any size (checked below)
    to_int = int if data.isascii() and b"_" not in data else grammar.parse_grade
    for lineno, fields in _split_lines(data, label):
        if len(fields) != 4:
            raise InputError(label, f"expected 4 fields (qid iter docno grade), found "
                             f"{len(fields)}", line=lineno)
        try:
            grades.append(to_int(fields[3]))
        except ValueError:
            _parse_grade(fields[3], label, lineno)  # raises, naming the line
        qids.append(fields[0])
        subtopics.append(fields[1])
        docids.append(fields[2])
    try:
        grade_array = np.asarray(grades, dtype=np.int64)
    except OverflowError:  # beyond int64: name the first such line
        for lineno, fields in _split_lines(data, label):
            _parse_grade(fields[3], label, lineno)
        raise
    return [qids, subtopics, docids, grade_array]


def _real_qrels_columns(data: bytes, label: str) -> list:
    """:func:`slow_qrels_columns` for qrels declared to hold real gains."""
    qids: list[str] = []
    subtopics: list[str] = []
    docids: list[str] = []
    grades = array("d")
    for lineno, fields in _split_lines(data, label):
        if len(fields) != 4:
            raise InputError(label, f"expected 4 fields (qid iter docno grade), found "
                             f"{len(fields)}", line=lineno)
        try:
            grades.append(grammar.parse_real_gain(fields[3]))
        except grammar.GrammarError as exc:
            raise InputError(label, str(exc), line=lineno, field="grade") from None
        qids.append(fields[0])
        subtopics.append(fields[1])
        docids.append(fields[2])
    return [qids, subtopics, docids, np.frombuffer(grades, np.float64).copy()]


def build_qrels(qids, docids, grades, subtopics, label, diversity, data=None,
                gains: str = "integer") -> Qrels:
    """Qrels from parsed columns: grouped by topic (topics in strcmp order, rows within a
    topic in file order) and checked for a docid judged twice in one topic. ``gains``:
    what the grades are (``"real"``: float64 real gains, declared)."""
    qids = object_array(qids)
    docids = object_array(docids)
    first_seen: dict[str, int] = {}
    codes = np.fromiter((first_seen.setdefault(q, len(first_seen)) for q in qids.tolist()),
                        np.int32, len(qids))
    topics, topic_index = in_strcmp_order(first_seen, codes)
    order = np.argsort(topic_index, kind="stable")
    topic_index, docids, grades = topic_index[order], docids[order], np.asarray(grades)[order]
    subs = object_array(subtopics)[order] if subtopics is not None else None
    if not diversity and len(docids) > 1:
        keys = np.fromiter(map(hash, docids.tolist()), np.int64, len(docids)) * 1000003 + \
            topic_index
        srt = np.argsort(keys, kind="stable")
        for i in np.flatnonzero(keys[srt][1:] == keys[srt][:-1]).tolist():
            x, y = srt[i], srt[i + 1]
            if topic_index[x] == topic_index[y] and docids[x] == docids[y]:
                topic, doc = topics[topic_index[x]], docids[x]
                where = _find_line(data, topic, doc, occurrence=2) if data is not None else None
                raise InputError(label, f"docid {doc!r} is judged twice for topic {topic!r}",
                                 line=where, field="docno" if where else
                                 f"{label}.{topic}.{doc}", code="duplicate-judgment")
    out = Qrels(topics, topic_index, docids,
                grades.astype(np.float64 if gains == "real" else np.int64), subs, label,
                gains=gains)
    out.unique_judgments = not diversity
    return out


def _find_line(data: bytes, topic: str, doc: str, occurrence: int) -> int | None:
    count = 0
    for lineno, fields in _split_lines(bytes(data), "qrels"):
        if len(fields) >= 3 and fields[0] == topic and fields[2] == doc:
            count += 1
            if count == occurrence:
                return lineno
    return None
