"""The input limits every endpoint that reads runs and qrels enforces (``MAX_TOPICS``,
``MAX_DOCS_PER_TOPIC``): one 413 problem per input, naming the field at fault (``run``,
``runs[1].run``, ``runs[1].run.<topic>``, ``qrels``, ``qrels_id``).

Flask-free: the limits come in as a mapping (the app's config, or any mapping with those
keys), so the checks can be called from anywhere a run has been read.
"""

from __future__ import annotations

from collections.abc import Mapping

import cranfield
from backend.limits import run_problem, topics_problem

from .problems import Problem


def _raise(problem: dict | None) -> None:
    if problem is not None:
        raise Problem(problem["status"], problem["title"], problem["detail"],
                      kind="too-large", errors=problem["errors"])


def check_topics(topics, label: str, limits: Mapping) -> None:
    """413 naming ``label`` when ``topics`` (a run's or qrels' topic list) are more than
    ``limits["MAX_TOPICS"]``."""
    _raise(topics_problem(topics, label, limits["MAX_TOPICS"]))


def check_run(run: cranfield.Run, label: str, limits: Mapping) -> None:
    """A run within ``MAX_TOPICS`` topics and ``MAX_DOCS_PER_TOPIC`` documents in each: else
    413 naming ``label`` (too many topics) or ``label.<topic>`` (the topic with the most
    documents, when it has too many). The words are :mod:`backend.limits`', which a queued
    job's failure uses too."""
    _raise(run_problem(run, label, limits["MAX_TOPICS"], limits["MAX_DOCS_PER_TOPIC"]))


def check_qrels(qrels: cranfield.Qrels, label: str, limits: Mapping) -> None:
    """Qrels within ``MAX_TOPICS`` topics (judgments per topic are not limited: a deep pool
    is not an attack), else 413 naming ``label``."""
    check_topics(qrels.topics, label, limits)
