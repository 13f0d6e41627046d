"""Qrels declaring real-valued gains (``gains="real"``, issue #31) from a ``{topic: {docid:
gain}}`` mapping, read in Python by the input grammar (never by the compiled mapping pass or
JSON scan, which read integer grades).

Room: inputs.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping

import numpy as np

from ..errors import InputError
from . import grammar
from .run_qrels import Qrels, byte_key


def real_qrels_from_mapping(qrels, label: str) -> Qrels:
    """Qrels declared to hold real gains (``gains="real"``, issue #31) from ``{topic: {docid:
    gain}}``, read in Python by the grammar (ids by :func:`grammar.id_problem`, gains by
    :func:`grammar.json_real_gain_problem`; an error names ``label.topic.docid``): topics in
    strcmp order, documents in the mapping's order."""
    for topic, docs in qrels.items():
        problem = grammar.id_problem(topic)
        if problem:
            what = "topic ids must be strings" if not isinstance(topic, str) else \
                f"topic id {topic!r}: {problem}"
            raise InputError(label, what, field=f"{label}.{topic}")
        if not isinstance(docs, Mapping):
            raise InputError(label, "must map docids to grades", field=f"{label}.{topic}")
    topics = sorted(qrels, key=byte_key)
    docids: list[str] = []
    gains = array("d")
    lengths = array("q")
    for topic in topics:
        docs = qrels[topic]
        for doc, value in docs.items():
            problem = grammar.id_problem(doc)
            if problem:
                raise InputError(label, f"docid {doc!r}: {problem}",
                                 field=f"{label}.{topic}.{doc}")
            value = value.item() if isinstance(value, np.generic) else value
            problem = grammar.json_real_gain_problem(value)
            if problem:
                raise InputError(label, problem, field=f"{label}.{topic}.{doc}")
            docids.append(doc)
            gains.append(float(value))
        lengths.append(len(docs))
    doc_array = np.empty(len(docids), dtype=object)
    doc_array[:] = docids
    topic_index = np.repeat(np.arange(len(topics), dtype=np.int32),
                            np.frombuffer(lengths, np.int64))
    out = Qrels(topics, topic_index, doc_array, np.frombuffer(gains, np.float64).copy(), None,
                label, gains="real")
    out.unique_judgments = True  # (a mapping holds a docid once per topic)
    return out
