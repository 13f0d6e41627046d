"""Errors the engine raises. Every one names what was wrong and where, so that the CLI and the
API can turn it into a message a person can act on (file, line, field, reason)."""

from __future__ import annotations

import difflib


class CranfieldError(Exception):
    """Base class of every error the engine raises on bad input or bad requests."""


class InputError(CranfieldError, ValueError):
    """A run or qrels input that cannot be read: names the source, line, field and reason.

    ``line`` is 1-based (``None`` when the input is a mapping); ``field`` is the column name
    (``qid``, ``docno``, ``score``, ``grade`` …) or, for mappings, the path (``run.q1.d3``).
    """

    def __init__(self, source: str, reason: str, *, line: int | None = None,
                 field: str | None = None):
        self.source = source
        self.line = line
        self.field = field
        self.reason = reason
        super().__init__(self.describe())

    @property
    def location(self) -> str:
        """``source line N`` / ``source`` / the mapping path: the key the API reports it under."""
        if self.line is not None:
            return f"{self.source} line {self.line}"
        return self.field if self.field and "." in self.field else self.source

    def describe(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        what = f"{self.field}: " if self.field and self.line is not None else ""
        if self.line is None and self.field:
            where = self.field
        return f"{where}: {what}{self.reason}"


class MeasureError(CranfieldError, ValueError):
    """An unknown or malformed measure name; carries the closest known names."""

    def __init__(self, name: str, reason: str, suggestions: list[str] | None = None):
        self.name = name
        self.reason = reason
        self.suggestions = suggestions or []
        msg = f"measure {name!r}: {reason}"
        if self.suggestions:
            msg += "; did you mean " + ", ".join(repr(s) for s in self.suggestions) + "?"
        super().__init__(msg)


class EvaluationError(CranfieldError, ValueError):
    """The inputs are readable but cannot be evaluated together (e.g. no topic in common).
    ``field`` names the input or option at fault (``run``, ``qrels``, ``options.depth``…),
    so that the API's problem document and a job's name the same place."""

    def __init__(self, message: str, *, field: str = "run"):
        super().__init__(message)
        self.field = field


def closest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    """The known names closest to ``name`` (case-insensitive), best first."""
    lowered = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]
