"""The parameters written in a measure name, read and checked: numbers as ASCII tokens
(:func:`ascii_int`, :func:`ascii_float`), trec_eval's parameter strings (``P.5,10``,
``ndcg.1=3,2=9``), ir_measures' ``key=value`` arguments (``RBP(p=0.8,rel=2)``, ``gains={0:0,1:1}``)
and the keyword measures' typed parameters, each checked against the ranges declared at
registration (:meth:`cranfield.measures.registry.Param.check`). :mod:`cranfield.measures.names`
resolves names with these. Room: measures.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import MeasureError
from .registry import REL, KwArgs, Measure

# how a boolean parameter may be written
TRUE = ("true", "True", "1")
FALSE = ("false", "False", "0")


# Numbers in measure names are ASCII, whole token (issue #27): trec_eval reads cutoffs with C's
# atol and floats with atof, so ``ndcg_cut.1e3`` is @1 and ``P.10abc`` @10, and Python's int()
# and float() take fullwidth digits (``P.５``), underscores (``1_0``), a '+' and surrounding
# spaces. Each of those is one input read silently as another: refused, naming the token.
_INT_TOKEN = re.compile(r"-?[0-9]+")
_FLOAT_TOKEN = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
                          r"|-?(?:inf|infinity|nan)", re.IGNORECASE)


class BadToken(ValueError):
    """A number that is not written as ASCII decimal, whole token."""

    def __init__(self, token: str, integer: bool):
        super().__init__(token)
        self.token, self.integer = token, integer

    def why(self, what: str) -> str:
        kind = ("an integer in ASCII decimal digits" if self.integer else
                "a number in ASCII (digits, '.', an exponent)")
        return f"cannot read {what}: it must be {kind}, whole token; got {self.token!r}"


def ascii_int(text: str) -> int:
    """``text`` as an integer when it is ASCII decimal (an optional '-', digits) and nothing
    else; :class:`ValueError` otherwise (no '+', space, '_', exponent, fullwidth digit)."""
    if not isinstance(text, str) or not _INT_TOKEN.fullmatch(text):
        raise BadToken(str(text), True)
    return int(text)


def ascii_float(text: str) -> float:
    """``text`` as a float when it is an ASCII number (``0.8``, ``.25``, ``1e-3``, ``-1``,
    ``inf``, ``nan``) and nothing else; :class:`ValueError` otherwise."""
    if not isinstance(text, str) or not _FLOAT_TOKEN.fullmatch(text):
        raise BadToken(str(text), False)
    return float(text)


def read_boolean(text: str) -> bool:
    """A boolean parameter as written (:data:`TRUE`, :data:`FALSE`); ValueError otherwise."""
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ValueError(text)


def read_number(text: str, what: str, name: str) -> float:
    """Parameter ``what`` of the measure ``name`` as an ASCII number; a MeasureError otherwise."""
    try:
        return ascii_float(text)
    except BadToken as bad:
        raise MeasureError(name, bad.why(f"parameter {what}")) from None


def gains_value(text: str, name: str) -> dict:
    """ir_measures' ``gains={grade: gain, ...}`` as trec_eval's ndcg gains."""
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise MeasureError(name, f"gains must be written {{grade: gain, ...}}, got {text!r}")
    out: dict[int, float] = {}
    for item in filter(None, (x.strip() for x in body[1:-1].split(","))):
        grade, sep, gain = item.partition(":")
        try:
            out[ascii_int(grade.strip())] = ascii_float(gain.strip())
        except ValueError:
            raise MeasureError(name, f"gains must map integer grades to numbers, got "
                                     f"{item!r}") from None
    return out


def split_args(text: str, name: str) -> dict[str, str]:
    """``key=value`` pairs separated by commas outside braces; quotes around a value are
    dropped (``dcg='exp-log2'``, ``gains={0:0,1:1}``)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    args: dict[str, str] = {}
    for item in items:
        if not item.strip():
            continue
        k, sep, v = item.partition("=")
        if not sep:
            raise MeasureError(name, f"expected key=value in parentheses, got {item!r}")
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        args[k.strip()] = v
    return args


def parse_value(measure: Measure, text: str, name: str) -> Any:
    """Parse trec_eval's parameter string for ``measure`` (the part after the first '.')."""
    items = [s for s in text.split(",")]
    try:
        if measure.kind == "cutoffs":
            return tuple(sorted({ascii_int(s) for s in items}))
        if measure.kind == "fcutoffs":
            return tuple(sorted({ascii_float(s) for s in items}))
        if measure.kind == "floats":
            return tuple(ascii_float(s) for s in items)
        if measure.kind == "float":
            return ascii_float(text)
        if measure.kind == "int":
            return ascii_int(text)
        if measure.kind in ("gains", "pair"):
            pairs = {}
            for item in items:
                k, sep, v = item.partition("=")
                if not sep:
                    raise MeasureError(name, f"expected key=value pairs, got {item!r}")
                if measure.kind == "gains":
                    pairs[ascii_int(k)] = ascii_float(v)
                else:
                    pairs[k] = ascii_float(v)
            return pairs
    except MeasureError:
        raise
    except BadToken as bad:
        what = f"parameter {measure.params[0].name} of {measure.name}" if measure.params \
            else f"a parameter of {measure.name}"
        raise MeasureError(name, bad.why(what)) from None
    except ValueError:
        raise MeasureError(name, f"cannot read parameters {text!r} for {measure.name} "
                           f"({measure.kind})") from None
    raise MeasureError(name, f"{measure.name} takes no parameters")


def check_value(measure: Measure, value: Any, name: str) -> Any:
    """``value`` as parsed for ``measure``'s kind (a cutoff, a tuple, a mapping, ...), checked
    against the ranges its parameters declare at registration (:meth:`Param.check`); a
    :class:`MeasureError` naming the measure, the parameter and the range otherwise. Every
    way of writing a measure ends here (or in :func:`kw_value` for keyword measures)."""
    if value is None or not measure.params:
        return value
    first = measure.params[0]
    if measure.kind in ("cutoffs", "fcutoffs", "floats"):
        for v in value if isinstance(value, tuple) else (value,):
            first.check(v, measure.name, name)
    elif measure.kind in ("float", "int", "gains"):
        first.check(value, measure.name, name)
    elif measure.kind == "pair":
        by_name = {p.name: p for p in measure.params}
        for key, v in dict(value).items():
            if key not in by_name:
                raise MeasureError(name, f"{measure.name} has no parameter {key!r} (it takes "
                                         f"{', '.join(by_name)})")
            by_name[key].check(v, measure.name, name)
    return value


def read_rel_level(measure: Measure, args: dict[str, str], name: str) -> int | float | None:
    """ir_measures' ``rel=`` (popped from ``args``), checked: only a measure that reads the
    relevance level takes it, and it is an integer in the relevance level's range, or a
    finite decimal number (``rel=0.5``: a threshold on real gains, issue #31, which an
    evaluation of integer grades refuses: cranfield.measures.real_gains)."""
    if "rel" not in args or any(p.name == "rel" for p in measure.params):
        return None  # none given, or the measure's own parameter (RBP, diversity)
    text = args.pop("rel")
    if not measure.uses_rel_level:
        raise MeasureError(name, f"{measure.name} takes no parameter rel: it does not use a "
                                 "relevance level")
    try:
        level = ascii_int(text)
    except BadToken as bad:
        real = _real_threshold(text)
        if real is not None:
            return real
        raise MeasureError(name, bad.why(f"parameter rel of {measure.name}")) from None
    return REL.check(level, measure.name, name)


def _real_threshold(text: str) -> float | None:
    """``rel=`` written as a finite decimal number that is not an integer token (``0.5``,
    ``2.5e-1``), or None."""
    try:
        value = ascii_float(text)
    except BadToken:
        return None
    return value if value == value and abs(value) != float("inf") else None


def kw_value(measure: Measure, args: dict[str, str], k: str | None, name: str) -> KwArgs:
    """Typed, checked keyword parameters (defaults filled in) for a ``kw`` measure."""
    out = KwArgs()
    given = dict(args)
    if k is not None:
        given["k"] = k
    for p in measure.params:
        if p.name not in given:
            if p.required or (p.name == "k" and "required" in p.description):
                need = "a cutoff (@k)" if p.name == "k" else f"the parameter {p.name}"
                raise MeasureError(name, f"{measure.ir_name} needs {need}")
            out[p.name] = p.default
            continue
        text = given.pop(p.name)
        try:
            value: Any = (ascii_int(text) if p.type == "integer" else ascii_float(text)
                          if p.type == "number" else read_boolean(text)
                          if p.type == "boolean" else gains_value(text, name)
                          if p.type.startswith("mapping") else text)
        except BadToken as bad:
            raise MeasureError(name, bad.why(f"parameter {p.name} of {measure.name}")) \
                from None
        except ValueError:
            what = {"integer": "an integer", "number": "a number",
                    "boolean": "true or false"}.get(p.type, p.type)
            raise MeasureError(name, f"{p.name} must be {what}, got {text!r}") from None
        out[p.name] = p.check(value, measure.name, name)
        if isinstance(value, dict):  # kept hashable, as a sorted tuple of pairs
            out[p.name] = tuple(sorted(value.items()))
    if given:
        what = "takes no cutoff" if set(given) == {"k"} else \
            f"has no parameter(s) {sorted(given)}"
        raise MeasureError(name, f"{measure.ir_name} {what}")
    check = measure.extra.get("check")
    why = check(out) if check else None
    if why:
        raise MeasureError(name, why)
    return out


def param_named(measure: Measure, name: str):
    """``measure``'s parameter called ``name``."""
    return next(p for p in measure.params if p.name == name)
