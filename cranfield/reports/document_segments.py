"""An evaluation document's ``segments`` and ``weighted`` (topic metadata's summaries, a null
back to NaN) read back as :class:`~cranfield.evaluate.Evaluation`'s fields of those names:
shared by :mod:`cranfield.reports.result_document` (``evaluation_from_document``) and
:mod:`cranfield.reports.trec_format` (``document_evaluation``), below both. Room: reports."""

from __future__ import annotations

import math
from typing import Any


def segments_from_document(doc: dict) -> dict:
    """An evaluation document's ``segments`` and ``weighted`` (null back to NaN) as
    :class:`Evaluation`'s fields of those names (both None when it has none)."""
    if doc.get("segments") is None:
        return {"segments": None, "weighted": None}

    def value(v: Any) -> Any:
        return math.nan if v is None else v

    return {"segments": {label: {"topics": seg["topics"],
                                 "aggregate": {k: value(v) for k, v in
                                               seg["aggregate"].items()}}
                         for label, seg in doc["segments"].items()},
            "weighted": {k: value(v) for k, v in (doc.get("weighted") or {}).items()}}
