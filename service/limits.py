"""The input limits every endpoint that reads runs and qrels enforces (``MAX_TOPICS``,
``MAX_DOCS_PER_TOPIC``): one 413 problem per input, naming the field at fault (``run``,
``runs[1].run``, ``runs[1].run.<topic>``, ``qrels``, ``qrels_id``).

Flask-free: the limits come in as a mapping (the app's config, or any mapping with those
keys), so the checks can be called from anywhere a run has been read.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

import cranfield
from cranfield.ranking import topic_blocks

from .problems import Problem


def check_topics(topics, label: str, limits: Mapping) -> None:
    """413 naming ``label`` when ``topics`` (a run's or qrels' topic list) are more than
    ``limits["MAX_TOPICS"]``."""
    limit = limits["MAX_TOPICS"]
    if len(topics) > limit:
        raise Problem(413, "Too many topics", f"{label}: {len(topics)} topics exceed the limit "
                      f"of {limit}", kind="too-large",
                      errors={label: [f"at most {limit} topics"]})


def check_run(run: cranfield.Run, label: str, limits: Mapping) -> None:
    """A run within ``MAX_TOPICS`` topics and ``MAX_DOCS_PER_TOPIC`` documents in each: else
    413 naming ``label`` (too many topics) or ``label.<topic>`` (the topic with the most
    documents, when it has too many)."""
    check_topics(run.topics, label, limits)
    limit = limits["MAX_DOCS_PER_TOPIC"]
    if len(run) <= limit:  # no topic can have more
        return
    lo, hi = topic_blocks(run.topic_index, len(run.topics))
    per_topic = hi - lo if lo is not None else \
        np.bincount(run.topic_index, minlength=len(run.topics))  # scattered rows
    worst = int(per_topic.argmax())
    count = int(per_topic[worst])
    if count > limit:
        raise Problem(413, "Too many documents", f"{label}: topic {run.topics[worst]!r} has "
                      f"{count} documents; the limit is {limit}", kind="too-large",
                      errors={f"{label}.{run.topics[worst]}": [
                          f"at most {limit} documents per topic"]})


def check_qrels(qrels: cranfield.Qrels, label: str, limits: Mapping) -> None:
    """Qrels within ``MAX_TOPICS`` topics (judgments per topic are not limited: a deep pool
    is not an attack), else 413 naming ``label``."""
    check_topics(qrels.topics, label, limits)
