"""The input grammar: what a valid id, score and grade are, written once.

Every reader of runs and qrels — the line reader, the pyarrow reader, the JSON mapping
reader, the compiled JSON scan, multipart uploads, stored qrels — applies exactly these
rules, so an input means one thing whichever reader runs (``docs/inputs.md`` is the
description for users; the differential tests in ``tests/`` hold the readers to it).

TREC text
    A line is split into fields on ASCII space and tab only (as trec_eval does), never on
    other whitespace: a no-break space (U+00A0) is part of an id. A line ends at LF; a CR
    directly before the LF is tolerated. Any other ASCII control character (U+0000-U+001F
    but tab and LF, U+007F, a CR not before LF) anywhere in the text is an error naming the
    line. Blank lines and lines whose first field starts with ``#`` are skipped.

Ids (topic ids, docids)
    Non-empty, with no ASCII whitespace or control character (U+0000-U+0020, U+007F):
    in TREC text that holds by construction; a JSON key that breaks it is refused, naming
    its path. Any other Unicode character is an ordinary part of an id; ids are compared
    as UTF-8 byte strings (trec_eval's ``strcmp``).

Scores
    A finite decimal number in C's ``strtod`` grammar less its extensions: optional sign,
    ASCII digits with an optional decimal point, optional exponent (``1``, ``-2.5``,
    ``.5``, ``5.``, ``1e-3``, ``+1E+05``). Not ``inf``/``nan``, not hexadecimal, no ``_``
    digit separators, no non-ASCII digits; a value that overflows a double (``1e400``) is
    not finite and so refused; one that underflows reads as 0, as in C. In JSON a score is
    a JSON number (not a string, not ``true``/``false``).

Grades
    A decimal integer within int64 (−2^63 … 2^63−1): in text an optional sign and ASCII
    digits; in JSON an integer in that range, or a number with no fractional part up to
    2^53 in magnitude (``2.0``, ``1e2``: beyond 2^53 a double need not be the integer that
    was written, and JSON readers turn integer literals beyond 64 bits into doubles).
    A negative grade means "in the pool, not judged" (trec_eval's RELVALUE_UNJUDGED).

Real gains (issue #31)
    Only qrels that declare them (``gains="real"``: :data:`GAINS`; never inferred from a
    grade that happens to be ``1.5``) hold real-valued grades: in text a finite decimal number
    in the score grammar above (no ``inf``/``nan``, no hexadecimal, no ``_``), in JSON and
    in columns a finite number, of magnitude at most :data:`WEIGHT_LIMIT` (so that sums of
    gains over a topic stay finite). As for integer grades, a negative real grade means "in
    the pool, not judged" (trec_eval's RELVALUE_UNJUDGED): it is no gain and not relevant.
    Without the declaration a grade such as ``1.5`` is refused exactly as before.
"""

from __future__ import annotations

import math
import re

import numpy as np

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# the largest magnitude of a weight that is summed or multiplied (gains, utility's
# coefficients, F's beta): products with int64 counts and sums over a topic stay finite
WEIGHT_LIMIT = 1e100

# How qrels declare their grades (Qrels.gains, read_qrels' and evaluate's gains=): trec_eval's
# integer grades (the default), or real-valued gains (LLM labels, mean consensus grades)
GAINS = ("integer", "real")

# Characters an id may not hold: ASCII whitespace and control characters.
_ID_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")
# Control characters TREC text may not hold: all but tab and LF, and a CR not before LF.
_TEXT_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")


_FIELD_SEPARATOR = re.compile(r"[ \t\r\n]+")


class GrammarError(ValueError):
    """A value that breaks the grammar; the message says why (callers add where)."""


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid id, or None."""
    if not isinstance(value, str):
        return "ids must be strings"
    if not value:
        return "an id may not be empty"
    bad = _ID_FORBIDDEN.search(value)
    if bad is not None:
        return f"an id may not contain {_char_name(bad.group())}"
    try:  # (text read from bytes holds only the surrogates that stand for bytes)
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        return f"an id may not contain a lone surrogate (U+{ord(value[exc.start]):04X})"
    return None


# Every byte an id may hold (UTF-8 puts no byte below 0x80 inside a multi-byte character).
_ID_BYTES = bytes(range(33, 127)) + bytes(range(128, 256))


def bad_id(ids) -> tuple[int, str] | None:
    """(index, reason) of the first invalid id in ``ids``, or None. When all are valid: one
    join, one encode and one ``bytes.translate`` (a regex search over the joined ids takes
    ~40 times as long)."""
    ids = ids if isinstance(ids, list) else list(ids)
    if "" not in ids:
        try:
            joined = "".join(ids).encode("utf-8", "surrogateescape")
        except (TypeError, UnicodeEncodeError):  # not all strings, a lone surrogate: below
            joined = None
        if joined is not None and not joined.translate(None, _ID_BYTES):
            return None
    for k, value in enumerate(ids):
        problem = id_problem(value)
        if problem:
            return k, problem
    return None


def id_bytes_ok(data: np.ndarray) -> bool:
    """Whether the concatenated UTF-8 bytes of ids (a uint8 array, as the compiled JSON scan
    leaves them) hold only bytes an id may hold (:data:`_ID_BYTES`: no byte up to 0x20, no
    0x7F)."""
    return not (np.count_nonzero(data <= 0x20) or np.count_nonzero(data == 0x7F))


def text_problem(text: str) -> tuple[int, str] | None:
    """(line number, reason) of the first forbidden control character in TREC text, or None."""
    bad = _TEXT_FORBIDDEN.search(text)
    if bad is None:
        return None
    return text.count("\n", 0, bad.start()) + 1, f"{_char_name(bad.group()[0])} is not " \
        "allowed in TREC text (fields are separated by spaces or tabs, lines end with LF " \
        "or CRLF)"


# Every byte but the ASCII control characters and DEL: deleting these from a text leaves its
# control characters (bytes.translate: ~0.4 ms per MB, where a regex search takes ~17).
_NOT_CONTROL = bytes(range(32, 127)) + bytes(range(128, 256))


def plain_bytes(data: bytes, tab: bool = True) -> bool:
    """Whether raw TREC bytes hold no control character :func:`text_problem` refuses (with
    ``tab=False``, no tab either): deletes every other byte in one C pass and looks at what
    is left; a CR is then checked to stand before an LF in ``data`` itself."""
    controls = data.translate(None, _NOT_CONTROL)
    if controls.translate(None, b"\t\n\r" if tab else b"\n\r"):
        return False
    if b"\r" in controls:
        arr = np.frombuffer(data, dtype=np.uint8)
        at = np.flatnonzero(arr == 13)
        return bool(at[-1] + 1 < len(arr) and (arr[at + 1] == 10).all())
    return True


def split_fields(line: str) -> list[str]:
    """The fields of one line (its CRLF or LF included or not): split on ASCII space and
    tab only. Control characters other than tab were refused for the whole text before
    (:func:`text_problem`), so for an ASCII line ``str.split`` is the same split; for
    others it is not (it splits on U+00A0, U+2028...)."""
    if line.isascii():
        return line.split()
    return [f for f in _FIELD_SEPARATOR.split(line) if f]


def parse_score(text: str) -> float:
    """A score as TREC text spells it (see the module docstring)."""
    # float() accepts exactly the grammar's decimals plus: '_' separators, non-ASCII digits
    # and inf/nan spellings; the checks below take those out.
    try:
        value = float(text)
    except ValueError:
        raise GrammarError(f"{text!r} is not a number") from None
    if not text.isascii() or "_" in text:
        raise GrammarError(f"{text!r} is not a plain decimal number")
    if not math.isfinite(value):
        raise GrammarError(f"{text!r} is not a finite number")
    return value


def parse_grade(text: str) -> int:
    """A grade as TREC text spells it: a decimal integer within int64."""
    if not text.isascii() or "_" in text:
        raise GrammarError(f"{text!r} is not a plain decimal integer grade")
    try:
        value = int(text, 10)
    except ValueError:
        raise GrammarError(f"{text!r} is not an integer grade") from None
    if not INT64_MIN <= value <= INT64_MAX:
        raise GrammarError(f"grade {text} is outside the 64-bit integer range")
    return value


def parse_real_gain(text: str) -> float:
    """A real-valued gain as TREC text spells it (qrels declared ``gains="real"``): a finite
    decimal number in the score grammar, at most :data:`WEIGHT_LIMIT` in magnitude."""
    try:
        value = float(text)
    except ValueError:
        raise GrammarError(f"{text!r} is not a real gain: not a number") from None
    if not text.isascii() or "_" in text:
        raise GrammarError(f"{text!r} is not a real gain: not a plain decimal number")
    problem = _real_gain_range(value)
    if problem:
        raise GrammarError(f"{text!r} is not a real gain: {problem}")
    return value


def json_real_gain_problem(value: object) -> str | None:
    """Why a JSON (or column) value is not a real-valued gain, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return f"grade {_json_repr(value)} is not a number (a real gain)"
    try:
        number = float(value)
    except OverflowError:
        return "grade is too large for a real gain"
    problem = _real_gain_range(number)
    return f"grade {value!r} is not a real gain: {problem}" if problem else None


def _real_gain_range(value: float) -> str | None:
    if not math.isfinite(value):
        return "not a finite number"
    if abs(value) > WEIGHT_LIMIT:
        return f"its magnitude is above {WEIGHT_LIMIT:g}"
    return None


def gains_problem(gains: object) -> str | None:
    """Why ``gains`` is not a declaration of :data:`GAINS`, or None."""
    if gains in GAINS:
        return None
    return f"gains must be one of {', '.join(repr(g) for g in GAINS)}, not {gains!r}"


def json_score_problem(value: object) -> str | None:
    """Why a JSON value is not a score, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"score {_json_repr(value)} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"score {value!r} is not a finite number"
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return "score is too large for a double"
    return None


def json_grade_problem(value: object) -> str | None:
    """Why a JSON value is not a grade, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"grade {_json_repr(value)} is not an integer"
    if isinstance(value, float):
        if not value.is_integer():
            return f"grade {value!r} is not an integer"
        if abs(value) > 2.0**53:  # beyond 2**53 a double is not the integer that was written
            return f"grade {value!r} is a number beyond 2^53: write it as an integer"
        value = int(value)
    if not INT64_MIN <= value <= INT64_MAX:
        return f"grade {value} is outside the 64-bit integer range"
    return None


def _json_repr(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return '"' + value + '"' if len(value) < 40 else f'"{value[:37]}..."'
    if value is None:
        return "null"
    return type(value).__name__ if isinstance(value, list | dict) else repr(value)


def _char_name(ch: str) -> str:
    names = {" ": "a space", "\t": "a tab", "\n": "a line feed", "\r": "a carriage return"}
    return names.get(ch, f"the control character U+{ord(ch):04X}")
