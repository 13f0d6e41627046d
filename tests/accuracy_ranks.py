"""The Accuracy@k comparison data of the library's and the service's tests
(tests/engine/test_compare_accuracy.py, tests/api/test_comparisons_accuracy.py; review R3
F1, F2, F3): each run's ranking per topic as a pattern of relevant (R) and not relevant (N)
documents, made into qrels and runs once, so both directories compare the same inputs
(tests/ is on sys.path, as for ``columnar_tables``)."""

from __future__ import annotations

# Accuracy@3 per topic (R relevant, N not; ranks 1..3):
#   t1  A R N N -> 1.0    B N R N -> 1 - 1/2 = 0.5
#   t2  A R R N -> 1.0    B N R R -> 1 - 2/2 = 0.0
#   t3  A N N N -> none   B R N N -> 1.0           (left out: A has no value)
#   t4  A N R N -> 0.5    B R N N -> 1.0
#   t5  A R N R -> 0.5    B R N R -> 0.5
# over t1 t2 t4 t5: d = B - A = -0.5 -1.0 +0.5 0 -> mean -0.25, wins/ties/losses 1/1/2;
# means A 0.75, B 0.5; aggregates (each run's own topics) A 0.75, B 0.6
RANKS = {"A": {"t1": "RNN", "t2": "RRN", "t3": "NNN", "t4": "NRN", "t5": "RNR"},
         "B": {"t1": "NRN", "t2": "NRR", "t3": "RNN", "t4": "RNN", "t5": "RNR"}}


def qrels_and_runs(ranks: dict[str, dict[str, str]]) -> tuple[dict, dict]:
    """(qrels, {run name: run}) of patterns ``{run: {topic: "RNN"}}``: each run's own
    documents, judged 1 (R) or 0 (N), scored 10, 9, 8... in the pattern's order."""
    qrels: dict = {}
    runs: dict = {}
    for name, topics in ranks.items():
        runs[name] = {}
        for t, pattern in topics.items():
            docs = {}
            for i, c in enumerate(pattern):
                doc = f"{name}{t}{c}{i}"
                qrels.setdefault(t, {})[doc] = 1 if c == "R" else 0
                docs[doc] = float(10 - i)
            runs[name][t] = docs
    return qrels, runs
