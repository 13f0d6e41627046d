"""Comparisons by segment (topic metadata, :mod:`cranfield.inputs.segments`): the mask of each
segment's topics (:func:`segment_masks`) and a comparison document as one segment sees it
(:func:`segment_document`, what the gate judges a segment by). Room: compare."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..inputs.segments import TopicMetadata


def segment_masks(md: TopicMetadata, topics: list[str]) -> dict[str, np.ndarray]:
    """{label: boolean mask over ``topics``} for every label of the metadata (built from
    :meth:`TopicMetadata.segment_rows`: one pass over the topics' labels)."""
    out = {}
    for label, rows in md.segment_rows(topics).items():
        mask = np.zeros(len(topics), bool)
        mask[rows] = True
        out[label] = mask
    return out


def segment_document(document: dict, label: str) -> dict:
    """A comparison document as seen by one segment: the document with that segment's
    ``topics``, ``summary``, ``pairs``, ``correction`` and ``warnings`` in place of the
    overall ones (runs, measures, options, alpha and ci unchanged), so that
    :func:`cranfield.compare.gate.gate_results` and :func:`cranfield.compare.gate.gate` judge the
    segment as they judge a whole comparison. ``per_topic`` (when present) is kept: it covers the
    segment's topics. KeyError if the document has no such segment."""
    seg = document["segments"][label]
    view = {k: v for k, v in document.items() if k not in ("segments", "weighted", "gate")}
    view.update({"topics": seg["topics"], "summary": seg["summary"], "pairs": seg["pairs"],
                 "correction": seg["correction"], "warnings": seg.get("warnings", []),
                 "segment": label})
    return view
