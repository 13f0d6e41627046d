"""trec_eval's judgment files read (``-R qrels_jg``, ``-R prefs``, ``-R qrels_prefs``), as
TREC text or their JSON shapes: :class:`JudgmentGroups` (``qid jg docno rel``: several
assessors' judgments of one topic, :func:`read_qrels_jg`) and :class:`Preferences`
(``qid jg jsg docno rel_level``, or a qrels file read as preferences: :func:`read_prefs`), by
the input grammar (:mod:`cranfield.inputs.grammar`). Their measures:
:mod:`cranfield.measures.jg_measures`, :mod:`cranfield.measures.prefs_measures`.

Room: inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError

__all__ = ["JudgmentGroups", "read_qrels_jg", "Preferences", "read_prefs"]


@dataclass
class JudgmentGroups:
    """``topics[qid][jg][docno] = rel``: every judgment group of every topic."""

    topics: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    source: str = "qrels_jg"
    # the lines skipped as comments (trec_eval 10.0 skips them; 9.0.8 refuses them:
    # _refuse_comments)
    comment_lines: list[int] = field(default_factory=list)


@dataclass
class Preferences:
    """``topics[qid]`` = list of (jg, jsg, docno, rel_level) in file order."""

    topics: dict[str, list[tuple[str, str, str, float]]] = field(default_factory=dict)
    source: str = "prefs"
    comment_lines: list[int] = field(default_factory=list)  # as JudgmentGroups'


def _mapping_leaves(source: Mapping, label: str, levels: tuple[str, ...]) -> list[tuple]:
    """(key, ..., value) of each leaf of the JSON shape of a judgment file: nested mappings,
    one level per name in ``levels`` (``topic``, ``judgment group``, ...), the last mapping
    docnos to values. Each key is an id of the input grammar (what a text field can be);
    a level that is not a mapping, or is empty (no line of text could say it), is refused
    naming its path (``qrels.301.A``); no leaf at all is text's "no judgments"."""
    from .grammar import id_problem

    if not source:
        raise InputError(label, "no judgments")
    out: list[tuple] = []

    def walk(node: Any, keys: tuple[str, ...]) -> None:
        path = ".".join((label, *keys))
        depth = len(keys)
        if not isinstance(node, Mapping):
            raise InputError(label, f"must be an object of {levels[depth]}s", field=path)
        if not node:
            raise InputError(label, f"has no {levels[depth]}s (leave it out)", field=path)
        for key, value in node.items():
            problem = id_problem(key)
            if problem is not None:
                raise InputError(label, f"{levels[depth]} {key!r}: {problem}",
                                 field=f"{path}.{key}")
            if depth + 1 == len(levels):
                out.append((*keys, key, value))
            else:
                walk(value, (*keys, key))

    walk(source, ())
    return out


def _shown(value: Any) -> str:
    """A JSON value as JSON spells it (``true``, ``null``, ``"1"``, ``1.5``)."""
    import json

    return json.dumps(value) if value is None or isinstance(value, bool | str | float) \
        else repr(value) if isinstance(value, int) else type(value).__name__


def _jg_from_mapping(source: Mapping, label: str) -> JudgmentGroups:
    """Judgment groups from ``{qid: {jg: {docno: rel}}}``: the same judgments (and the same
    refusals, by path instead of line) as the text ``qid jg docno rel``. ``rel`` is a grade
    of the input grammar, as a plain qrels mapping's
    (:func:`cranfield.inputs.grammar.json_grade_problem`: an integer within int64, or a number with
    no fractional part up to 2^53)."""
    from .grammar import json_grade_problem

    jgs = JudgmentGroups(source=label)
    for qid, jg, docno, rel in _mapping_leaves(source, label,
                                               ("topic", "judgment group", "docno")):
        problem = json_grade_problem(rel)
        if problem is not None:
            raise InputError(label, "rel" + problem.removeprefix("grade"),
                             field=f"{label}.{qid}.{jg}.{docno}")
        jgs.topics.setdefault(qid, {}).setdefault(jg, {})[docno] = int(rel)
    return jgs


def _prefs_from_mapping(source: Mapping, label: str, qrels: bool) -> Preferences:
    """Preferences from ``{qid: {jg: {jsg: {docno: rel_level}}}}`` (``qrels``: the
    ``qrels_prefs`` shape ``{qid: {jg: {docno: rel}}}``, each jg one sub-group), as the text
    lines say them; ``rel_level`` a score of the input grammar (a finite JSON number)."""
    from .grammar import json_score_problem

    levels = ("topic", "judgment group", "docno") if qrels else \
        ("topic", "judgment group", "judgment sub-group", "docno")
    prefs = Preferences(source=label)
    for leaf in _mapping_leaves(source, label, levels):
        *keys, level = leaf
        qid, jg, jsg, docno = (keys[0], keys[1], "", keys[2]) if qrels else keys
        problem = json_score_problem(level)
        if problem is not None:
            problem = problem.removeprefix("score").replace(" not a number",
                                                             " not a finite number")
            raise InputError(label, f"rel_level{problem}" if problem.startswith(" ")
                             else f"rel_level {_shown(level)}{problem}",
                             field=".".join((label, *keys)))
        prefs.topics.setdefault(qid, []).append((jg, jsg, docno, float(level)))
    return prefs


def _lines(data: bytes | str, label: str):
    """(line number, fields) of each line by the input grammar (:mod:`cranfield.inputs.grammar`, as
    the plain qrels and run readers read): UTF-8 text, no control character but tab (and a
    CR before LF), fields split on ASCII space and tab only (a no-break space is part of an
    id). Blank lines are skipped; comment lines are yielded (the caller records them)."""
    from .grammar import split_fields, text_problem

    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(label, "not valid UTF-8 text",
                             line=data[: exc.start].count(b"\n") + 1) from None
    bad = text_problem(data)
    if bad is not None:
        raise InputError(label, bad[1], line=bad[0])
    for n, line in enumerate(data.split("\n"), start=1):
        fields = split_fields(line)
        if fields:
            yield n, fields


def read_qrels_jg(source: Any, *, name: str | None = None) -> JudgmentGroups:
    """Read ``qid jg docno rel`` lines (a path, bytes or text) by the input grammar
    (:func:`_lines`; ``rel`` a grade as a plain qrels file's: ASCII decimal within int64).
    As trec_eval 10.0: blank lines and lines whose first field starts with ``#`` are
    skipped. Refused, naming the line: a line with other than four fields, a ``rel`` that
    is not a grade, and a docno judged twice by one group of one topic (trec_eval's
    "duplicate docs")."""
    from .grammar import GrammarError, parse_grade

    if isinstance(source, Mapping):  # the JSON shape {qid: {jg: {docno: rel}}}
        return _jg_from_mapping(source, name or "qrels_jg")
    label = name or (str(source) if isinstance(source, Path) else "qrels_jg")
    if isinstance(source, Path):
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise InputError(label, f"cannot read: {exc.strerror}") from None
    elif isinstance(source, str) and "\n" not in source:  # one line of text: a path
        label = name or source
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise InputError(label, f"cannot read: {exc.strerror}") from None
    elif isinstance(source, str):
        data = source
    elif isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        raise InputError(label, "a qrels_jg source must be a path, bytes or text")
    jgs = JudgmentGroups(source=label)
    for n, fields in _lines(data, label):
        if fields[0].startswith("#"):
            jgs.comment_lines.append(n)
            continue
        if len(fields) != 4:
            raise InputError(label, "a qrels_jg line has four fields (qid jg docno rel), "
                             f"found {len(fields)}", line=n)
        qid, jg, docno, rel = fields
        try:
            grade = parse_grade(rel)
        except GrammarError as exc:
            raise InputError(label, f"rel {exc}".replace("rel grade ", "rel "), line=n,
                             field="rel") from None
        group = jgs.topics.setdefault(qid, {}).setdefault(jg, {})
        if docno in group:
            raise InputError(label, f"docno {docno!r} is judged twice by judgment group "
                             f"{jg!r} of topic {qid!r}", line=n, field="docno")
        group[docno] = grade
    if not jgs.topics:
        raise InputError(label, "no judgments")
    return jgs


def _read_bytes(source: Any, name: str | None, kind: str) -> tuple[str, bytes | str]:
    label = name or (str(source) if isinstance(source, Path) else kind)
    if isinstance(source, (Path, str)) and (isinstance(source, Path) or "\n" not in source):
        label = name or str(source)
        try:
            return label, Path(source).read_bytes()
        except OSError as exc:
            raise InputError(label, f"cannot read: {exc.strerror}") from None
    if isinstance(source, str):
        return label, source
    if isinstance(source, (bytes, bytearray)):
        return label, bytes(source)
    raise InputError(label, f"a {kind} source must be a path, bytes or text")


def read_prefs(source: Any, *, name: str | None = None, qrels: bool = False) -> Preferences:
    """Read ``qid jg jsg docno rel_level`` lines (``qrels=True``: ``qid jg docno rel``, as
    trec_eval's ``-R qrels_prefs``) by the input grammar (:func:`_lines`; ``rel_level`` a
    score as a run's: an ASCII decimal, finite). Blank lines and lines starting with ``#``
    are skipped. Refused, naming the line: a wrong number of fields, a rel_level that is
    not a score."""
    from .grammar import GrammarError, parse_score

    if isinstance(source, Mapping):  # {qid: {jg: {jsg: {docno: rel_level}}}} (qrels: no jsg)
        return _prefs_from_mapping(source, name or ("qrels_prefs" if qrels else "prefs"),
                                   qrels)
    label, text = _read_bytes(source, name, "qrels_prefs" if qrels else "prefs")
    width = 4 if qrels else 5
    prefs = Preferences(source=label)
    for n, fields in _lines(text, label):
        if fields[0].startswith("#"):
            prefs.comment_lines.append(n)
            continue
        if len(fields) != width:
            grammar = "qid jg docno rel" if qrels else "qid jg jsg docno rel_level"
            raise InputError(label, f"a {'qrels_prefs' if qrels else 'prefs'} line has "
                             f"{width} fields ({grammar}), found {len(fields)}", line=n)
        if qrels:
            qid, jg, docno, rel = fields
            jsg = ""
        else:
            qid, jg, jsg, docno, rel = fields
        try:
            level = parse_score(rel)
        except GrammarError as exc:
            said = str(exc).replace(" not a number", " not a finite number")
            raise InputError(label, f"rel_level {said}", line=n, field="rel_level") from None
        prefs.topics.setdefault(qid, []).append((jg, jsg, docno, level))
    if not prefs.topics:
        raise InputError(label, "no judgments")
    return prefs
