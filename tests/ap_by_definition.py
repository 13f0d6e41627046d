"""Average precision by its definition, the oracle the re-scoring tests check recorded
numbers against (issue #31): per topic, the mean over the relevant documents (grade > 0) of
the precision at each one's rank, 0 for one not retrieved; ranked by score descending (the
tests' runs have no ties)."""

from __future__ import annotations


def average_precision(run: dict, qrels: dict) -> float:
    """AP of one topic: ``run`` {docid: score}, ``qrels`` {docid: grade}."""
    ranked = sorted(run, key=lambda d: -run[d])
    relevant = {d for d, g in qrels.items() if g > 0}
    hits, total = 0, 0.0
    for rank, doc in enumerate(ranked, 1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


def mean_ap(run: dict, qrels: dict) -> float:
    """MAP over the topics of ``qrels`` ({topic: {docid: grade}}; ``run`` likewise)."""
    return sum(average_precision(run[t], qrels[t]) for t in qrels) / len(qrels)
