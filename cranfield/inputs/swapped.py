"""Swapped arguments, told from bad inputs (issue #26).

``cranfield.evaluate``, ``cranfield.compare.compare``, the Web track's ``ndeval``/``gdeval`` and
the client's ``evaluate``/``compare`` take the qrels first, then the run(s), as trec_eval,
ranx, pytrec_eval and ir_measures do. Code written for the old order (run first) must fail with
a sentence naming the fix, not with a reader's complaint about the fields of the wrong file,
and never be evaluated the wrong way round.

Only a cheap look is taken, never a parse: an object's type, a mapping's first entry, the first
content line of TREC text (at most 64 KiB of a file is read). An input is refused only when it
clearly is the other kind and its partner is not the same kind as it (two runs are not a swap:
they keep the reader's own error).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from numbers import Integral, Real
from typing import Any

from ..errors import InputError
from .trec_source import path_candidate

HEAD = 65536  # bytes of a file or text looked at for its first content line

RUN, QRELS, FLOATS = "run", "qrels", "floats"


def kind_of(source: Any) -> tuple[str, str] | None:
    """``(kind, what)`` when ``source`` clearly is a run (``run``) or qrels (``qrels``), or is
    a mapping of integral float values (``floats``: a run's scores, or qrels written as
    floats); ``what`` says how it was told. None when it cannot be told cheaply."""
    from .run_qrels import Qrels, Run

    if isinstance(source, Run):
        return RUN, "a cranfield.Run"
    if isinstance(source, Qrels):
        return QRELS, "a cranfield.Qrels"
    try:
        if isinstance(source, Mapping):
            return _mapping_kind(source)
        if isinstance(source, str | bytes | bytearray | memoryview | os.PathLike):
            return _text_kind(source)
        from .io import is_columns

        if is_columns(source):
            return _columns_kind(source)
    except (OSError, ValueError, TypeError, AttributeError, LookupError):
        pass  # the reader says what is wrong with it
    return None


def _mapping_kind(mapping: Mapping) -> tuple[str, str] | None:
    for topic, docs in mapping.items():
        if not isinstance(docs, Mapping):
            return None
        for doc, value in docs.items():
            where = f"{{{topic!r}: {{{doc!r}: {value!r}}}}}"
            if isinstance(value, bool):
                return None
            if isinstance(value, Integral):
                return QRELS, f"its first entry {where} is an integer"
            if isinstance(value, Real):
                if float(value).is_integer():
                    return FLOATS, f"its first entry {where} is a float"
                return RUN, f"its first entry {where} is a score, not a grade"
            return None
    return None


def _text_kind(source) -> tuple[str, str] | None:
    if isinstance(source, bytes | bytearray | memoryview):
        head = bytes(source[:HEAD])
    else:
        path = _path_of(source)
        if path is not None:
            with open(path, "rb") as fh:
                head = fh.read(HEAD)
        elif isinstance(source, str):
            head = source[:HEAD].encode("utf-8", "replace")
        else:
            return None
    lines = head.split(b"\n")
    if len(head) == HEAD:
        lines = lines[:-1]  # (cut short)
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        if len(fields) >= 6 and _is_number(fields[4]):
            return RUN, f"its line {number} has {len(fields)} fields"
        if len(fields) == 4 and _is_integer(fields[3]):
            return QRELS, f"its line {number} has 4 fields"
        return None
    return None


def _path_of(source) -> str | None:
    """The file ``source`` names (a PathLike, or a one-line str naming a file), as the readers
    tell paths from text; None for text (a directory is the reader's to refuse)."""
    path = path_candidate(source)
    return path if path is not None and os.path.isfile(path) else None


def _columns_kind(table) -> tuple[str, str] | None:
    names = getattr(table, "column_names", None)
    if names is None:
        names = getattr(table, "columns", ())
    names = {str(n) for n in names}
    if "score" in names and "grade" not in names:
        return RUN, "its columns have a score"
    if "grade" in names and "score" not in names:
        return QRELS, "its columns have a grade"
    return None


def _is_number(text: bytes) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_integer(text: bytes) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def swap_reasons(qrels: Any, run: Any) -> list[str]:
    """Why ``qrels`` and ``run`` look given the wrong way round (empty: they do not)."""
    q, r = kind_of(qrels), kind_of(run)
    qk, rk = (q[0] if q else None), (r[0] if r else None)
    # A mapping of integer values may be a run with integer scores, and one of integral
    # floats qrels written as floats (as pandas gives grades): two such mappings are honest
    # either way round (the API, whose fields have names, evaluates the same pair), so only a
    # fractional score among the qrels tells a mapping swap. Text and objects tell alone
    # (neither reader could read them as they are given).
    strong_qrels = rk == QRELS and not isinstance(run, Mapping)
    swapped = (qk == RUN and rk not in (RUN, FLOATS)) or (strong_qrels and qk in (None, FLOATS))
    if not swapped:
        return []
    reasons = []
    if qk in (RUN, FLOATS):
        reasons.append(_got(q[1], "a run", "as qrels"))
    if rk == QRELS:
        reasons.append(_got(r[1], "qrels", "as the run"))
    return reasons


def _got(what: str, noun: str, role: str) -> str:
    """``got a cranfield.Run as qrels`` / ``got a run as qrels: its line 1 has 6 fields``."""
    if what.startswith("its "):
        return f"got {noun} {role}: {what}"
    return f"got {what} {role}"


def refuse_swapped(qrels: Any, run: Any, call: str = "cranfield.evaluate",
                   form: str = "evaluate(qrels, run, ...)") -> None:
    """An :class:`InputError` when ``qrels`` and ``run`` look swapped, naming the order
    ``call`` takes (``form``)."""
    reasons = swap_reasons(qrels, run)
    if reasons:
        raise InputError("qrels" if " as qrels" in reasons[0] else "run",
                         swapped_message(call, form, "; ".join(reasons)))


def swapped_message(call: str, form: str, reasons: str, runs: str = "run") -> str:
    return (f"the arguments look swapped: {call} takes the qrels first, then the {runs} — "
            f"{form} ({reasons})")


def looks_like_runs(value: Any) -> bool:
    """Whether ``value`` is compare()'s ``runs``: a mapping {name: run} whose first run is a
    Run, a path or TREC text, columns, or a {topic: {docid: score}} mapping."""
    from .io import is_columns
    from .run_qrels import Run

    if not isinstance(value, Mapping):
        return False
    for first in value.values():
        if isinstance(first, Run | str | bytes | bytearray | memoryview | os.PathLike):
            return True
        if isinstance(first, Mapping):
            return any(isinstance(docs, Mapping) for docs in first.values())
        try:
            return is_columns(first)
        except Exception:  # noqa: BLE001 (a look only: the reader reports what is wrong)
            return False
    return False


def refuse_swapped_runs(qrels: Any, runs: Any, call: str = "cranfield.compare.compare",
                        form: str = "compare(qrels, runs, ...)") -> None:
    """An :class:`InputError` when ``qrels`` is a mapping of runs and ``runs`` is not."""
    if looks_like_runs(qrels) and not looks_like_runs(runs):
        raise InputError("qrels", swapped_message(
            call, form, "got the runs {name: run} as qrels", runs="runs"))


def check_order(method: str, qrels: Any, run: Any, qrels_id: str | None) -> None:
    """The client's ``evaluate``/``compare`` (``method``): a TypeError naming the call when
    the run(s) are missing (``client.evaluate(run, qrels_id=...)``, written for the old order,
    gives the run as qrels), an InputError when the qrels and the run look swapped."""
    runs = "runs" if method == "compare" else "run"
    form = f"{method}(qrels, {runs}, ...)"
    if run is None:
        if qrels is not None and qrels_id is not None:
            raise TypeError(f"Client.{method} takes the qrels first, then the {runs}: with "
                            f"qrels_id, give the {runs} by keyword — "
                            f"{method}({runs}=..., qrels_id=...)")
        raise TypeError(f"Client.{method}() needs the {runs}: {form} or "
                        f"{method}({runs}=..., qrels_id=...)")
    if method == "evaluate" and qrels_id is None:
        refuse_swapped(qrels, run, "Client.evaluate", form)
