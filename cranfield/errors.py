"""Errors the engine raises. Every one names what was wrong and where, so that the CLI and the
API can turn it into a message a person can act on (file, line, field, reason)."""

from __future__ import annotations

from dataclasses import dataclass


class CranfieldError(Exception):
    """Base class of every error the engine raises on bad input or bad requests. ``code`` is
    stable (``duplicate-docid``, ``no-overlap``, …): the API's problem documents, the
    workers' failed jobs and the CLI's exit codes all follow it (:func:`error_report`),
    never the message's text."""

    code = "invalid-request"


class InputError(CranfieldError, ValueError):
    """A run or qrels input that cannot be read: names the source, line, field and reason.

    ``line`` is 1-based (``None`` when the input is a mapping); ``field`` is the column name
    (``qid``, ``docno``, ``score``, ``grade`` …) or, for mappings, the path (``run.q1.d3``).
    """

    code = "invalid-input"

    def __init__(self, source: str, reason: str, *, line: int | None = None,
                 field: str | None = None, code: str | None = None):
        if code is not None:
            self.code = code
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

    code = "unknown-measure"

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

    code = "cannot-evaluate"

    def __init__(self, message: str, *, field: str = "run", code: str | None = None):
        super().__init__(message)
        self.field = field
        if code is not None:
            self.code = code


#: code -> (HTTP status, problem title, CLI exit code). A code not listed here takes its
#: error class's entry (``invalid-input``, ``unknown-measure``, ``cannot-evaluate``).
ERROR_CODES: dict[str, tuple[int, str, int]] = {
    "invalid-request": (422, "Invalid request", 1),
    "invalid-input": (422, "Invalid input", 2),
    "duplicate-docid": (422, "Invalid input", 4),
    "duplicate-judgment": (422, "Invalid input", 4),
    "duplicate-rank": (422, "Invalid input", 4),
    "unknown-measure": (422, "Unknown measure", 1),
    "cannot-evaluate": (422, "Cannot evaluate", 1),
    "empty-input": (422, "Cannot evaluate", 2),
    "no-overlap": (422, "Cannot evaluate", 7),
    # an upload past a bound (rows, decoded bytes): 413 in the API, and in a queued job's
    # problem when only the worker's full read finds it (the same input, the same status)
    "too-large": (413, "Request Entity Too Large", 2),
}


@dataclass(frozen=True)
class ErrorReport:
    """An engine error as every interface reports it: ``code`` (stable), the HTTP ``status``
    and ``title`` of its problem document, ``detail`` (the message), ``errors`` (field or
    line -> reasons) and the CLI's ``exit_code``."""
    code: str
    status: int
    title: str
    detail: str
    errors: dict[str, list[str]]
    exit_code: int

    def problem(self) -> dict:
        """The RFC 9457 problem document's members (``type`` is the caller's base URL +
        the error class's kind, as :data:`PROBLEM_KINDS` names it)."""
        return {"status": self.status, "title": self.title, "detail": self.detail,
                "code": self.code, "errors": self.errors}


def error_report(exc: CranfieldError, field_prefix: str = "") -> ErrorReport:
    """The one mapping of an engine error to what the API, the workers and the CLI report:
    an input error under its line or field, an unknown measure under ``measures`` (or
    ``field_prefix``), anything else under the field it names."""
    code = getattr(exc, "code", CranfieldError.code)
    default = type(exc).code if type(exc).code in ERROR_CODES else CranfieldError.code
    status, title, exit_code = ERROR_CODES.get(code, ERROR_CODES[default])
    if isinstance(exc, InputError):
        errors = {exc.location: [exc.reason]}
    elif isinstance(exc, MeasureError):
        errors = {field_prefix or "measures": [str(exc)]}
    else:
        errors = {getattr(exc, "field", "run"): [str(exc)]}
    return ErrorReport(code, status, title, str(exc), errors, exit_code)


#: The problem ``type`` slug of each error class (RFC 9457 ``type`` = base URL + slug).
PROBLEM_KINDS = {InputError: "invalid-input", MeasureError: "unknown-measure",
                 EvaluationError: "cannot-evaluate"}


def problem_kind(exc: CranfieldError) -> str:
    """The ``type`` slug of ``exc``'s problem document."""
    for cls, kind in PROBLEM_KINDS.items():
        if isinstance(exc, cls):
            return kind
    return "invalid-request"


def closest(name: str, candidates: list[str], n: int = 3) -> list[str]:
    """The known names closest to ``name`` (case-insensitive), best first."""
    import difflib  # only when a name is unknown: not at every start-up (issue #30)

    lowered = {c.lower(): c for c in candidates}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]
