"""The textbook worked examples (docs: worked_examples.md, from the course material) that
trec_eval's measures cover: AP and MAP, P@k and R@k, reciprocal rank.

Each ranking is written as the ranks of its relevant documents; the run scores rank ``i``
above rank ``i + 1`` and the qrels hold exactly the relevant documents (plus unretrieved
relevant ones where R exceeds what the ranking finds).
"""

from __future__ import annotations

import pytest

import cranfield


def topic(relevant_ranks: list[int], depth: int, num_rel: int | None = None):
    """(run, qrels) for one topic: ``depth`` ranked docs, relevant at ``relevant_ranks``, and
    ``num_rel`` relevant documents in all (the rest never retrieved)."""
    run = {f"d{r:03d}": float(1000 - r) for r in range(1, depth + 1)}
    qrels = {f"d{r:03d}": 1 for r in relevant_ranks}
    for extra in range(len(relevant_ranks), num_rel or len(relevant_ranks)):
        qrels[f"unretrieved{extra}"] = 1
    return run, qrels


def evaluate_topics(topics: dict, measures):
    run = {t: r for t, (r, _) in topics.items()}
    qrels = {t: q for t, (_, q) in topics.items()}
    return cranfield.evaluate(qrels, run, measures)


AP_EXAMPLES = [  # name, relevant ranks, depth, R, AP
    ("A_system1_topic1", [1, 3, 4, 5, 6, 10], 10, 6, 0.7750),
    ("B_system2_topic1", [2, 5, 6, 7, 9, 10], 10, 6, 0.5212),
    ("C_system1_topic2", [1, 6, 10], 10, 3, 0.5444),
    ("D_system2_topic2", [2, 5, 7], 10, 3, 0.4429),
    ("twenty_ranks_R10", [1, 3, 4, 5, 6, 7, 9, 11, 14, 20], 20, 10, 0.7555),
    ("twenty_ranks_perfect", list(range(1, 11)), 20, 10, 1.0000),
    ("twenty_ranks_worst_finding_all", list(range(11, 21)), 20, 10, 0.3312),
    ("twenty_ranks_swap_2_3", [1, 2, 4, 5, 6, 7, 9, 11, 14, 20], 20, 10, 0.7888),
    ("twenty_ranks_swap_8_9", [1, 3, 4, 5, 6, 7, 8, 11, 14, 20], 20, 10, 0.7652),
]


@pytest.mark.parametrize("name, ranks, depth, R, expected", AP_EXAMPLES,
                         ids=[e[0] for e in AP_EXAMPLES])
def test_average_precision_worked_example(name, ranks, depth, R, expected):
    ev = evaluate_topics({"t": topic(ranks, depth, R)}, ["map"])
    assert round(ev.per_topic["t"]["map"], 4) == expected


@pytest.mark.parametrize("system, rankings, expected", [
    ("system_1", {"t1": ([1, 3, 4, 5, 6, 10], 6), "t2": ([1, 6, 10], 3)}, 0.6597),
    ("system_2", {"t1": ([2, 5, 6, 7, 9, 10], 6), "t2": ([2, 5, 7], 3)}, 0.4820),
])
def test_mean_average_precision_worked_example(system, rankings, expected):
    ev = evaluate_topics({t: topic(r, 10, n) for t, (r, n) in rankings.items()}, ["map"])
    assert round(ev.aggregate["map"], 4) == expected


P_AT_K = [1.0, 0.5, 0.67, 0.75, 0.80, 0.83, 0.86, 0.75, 0.78, 0.70]
R_AT_K = [0.05, 0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.30, 0.35, 0.35]


@pytest.mark.parametrize("k", range(1, 11))
def test_precision_and_recall_at_k_worked_example(k):
    ev = evaluate_topics({"t": topic([1, 3, 4, 5, 6, 7, 9], 10, 20)},
                         [f"P.{k}", f"recall.{k}", f"P@{k}", f"R@{k}"])
    row = ev.per_topic["t"]
    assert round(row[f"P_{k}"], 2) == P_AT_K[k - 1]
    assert round(row[f"recall_{k}"], 2) == R_AT_K[k - 1]
    assert row[f"P@{k}"] == row[f"P_{k}"] and row[f"R@{k}"] == row[f"recall_{k}"]


@pytest.mark.parametrize("name, first_relevant, expected", [
    ("first_relevant_at_1_2_4", [1, 2, 4], 0.5833),
    ("first_relevant_at_2_each", [2, 2, 2], 0.5000),
])
def test_mean_reciprocal_rank_worked_example(name, first_relevant, expected):
    topics = {f"t{i}": topic([r], 10) for i, r in enumerate(first_relevant)}
    ev = evaluate_topics(topics, ["recip_rank", "RR"])
    assert round(ev.aggregate["recip_rank"], 4) == expected
    assert ev.aggregate["RR"] == ev.aggregate["recip_rank"]


def test_reciprocal_rank_is_zero_without_a_relevant_document_worked_example():
    run = {"t": {"a": 3.0, "b": 2.0}}
    ev = cranfield.evaluate({"t": {"a": 0, "zz": 1}}, run, ["recip_rank"])
    assert ev.per_topic["t"]["recip_rank"] == 0.0
