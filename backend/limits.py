"""The input limits (MAX_TOPICS, MAX_DOCS_PER_TOPIC) as problems, Flask-free: one wording for
the API's 413 (``service.limits`` raises it) and a queued job's failure (``backend.tasks``),
so a run over a limit gets the same problem whether it is answered here or in a worker."""

from __future__ import annotations

import numpy as np

import cranfield
from cranfield.inputs.ranking import topic_blocks


def topics_problem(topics, label: str, max_topics: int | None) -> dict | None:
    """The 413 problem naming ``label`` when ``topics`` (a run's or qrels' topic list) are
    more than ``max_topics`` (None: no limit), else None."""
    if max_topics is None or len(topics) <= max_topics:
        return None
    return {"status": 413, "title": "Too many topics",
            "detail": f"{label}: {len(topics)} topics exceed the limit of {max_topics}",
            "errors": {label: [f"at most {max_topics} topics"]}}


def run_problem(run: cranfield.Run, label: str, max_topics: int | None,
                max_docs: int | None) -> dict | None:
    """The 413 problem for a run over ``max_topics`` topics (naming ``label``) or with a
    topic over ``max_docs`` documents (naming ``label.<topic>``, the topic with the most),
    else None (None limits: none)."""
    problem = topics_problem(run.topics, label, max_topics)
    if problem is not None or max_docs is None or len(run) <= max_docs:  # no topic can
        return problem
    lo, hi = topic_blocks(run.topic_index, len(run.topics))
    per_topic = hi - lo if lo is not None else \
        np.bincount(run.topic_index, minlength=len(run.topics))  # scattered rows
    worst = int(per_topic.argmax())
    count = int(per_topic[worst])
    if count <= max_docs:
        return None
    return {"status": 413, "title": "Too many documents",
            "detail": f"{label}: topic {run.topics[worst]!r} has {count} documents; the limit "
                      f"is {max_docs}",
            "errors": {f"{label}.{run.topics[worst]}": [
                f"at most {max_docs} documents per topic"]}}
