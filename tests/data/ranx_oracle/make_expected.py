"""Write qrels.txt, run.txt and expected.json: ranx's own values for ranx's spellings
(issue #28), read by tests/engine/test_ranx_oracle_values.py.

ranx is not a test dependency (it pulls numba): this script is run by hand in a scratch
environment, and what it wrote is committed with its provenance (expected.json's
``provenance``: ranx, numba, numpy and Python versions, the seed and the command).

    python3 -m venv /tmp/ranxvenv && /tmp/ranxvenv/bin/pip install ranx==0.3.21
    /tmp/ranxvenv/bin/python tests/data/ranx_oracle/make_expected.py

Data (numpy default_rng(SEED)): TOPICS topics, graded qrels 0..3, runs of 1 to 60 documents
whose scores are drawn from 8 values (ties), unjudged documents retrieved, judged ones not
retrieved, a topic with no relevant document and one whose retrieved documents are all
relevant.

Ties. Cranfield ranks tied scores as trec_eval does (docno descending); ranx's order within
a tie is its sort's (numba argsort of hashed ids: it changes with PYTHONHASHSEED). ranx is
therefore given each topic's documents with distinct scores (n - rank) in Cranfield's order
(``ranx_order`` in expected.json, which the test checks against run.txt), so both rank
alike and the numbers differ only if the measures do.

Where ranx has no number. ranx's bpref divides by zero for a topic without a judged
non-relevant document at the level (NaN) and for one without a relevant document (its
parallel loop then stops: that topic and the topics after it get 0); bpref's entries are
computed over the topics with both (their ``topics``), and the test evaluates Cranfield on
the same topics.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 28
TOPICS = 16
CUTOFFS = (1, 3, 5, 10, 30)
LEVELS = ("", "-l0", "-l1", "-l2", "-l3")
# ranx's metrics that take @k (ranx: k = 0 or none is the whole ranking)
AT_K = ("hits", "hit_rate", "precision", "recall", "f1", "mrr", "map", "ndcg", "dcg",
        "ndcg_burges", "dcg_burges")
# without @k, as ranx means them (recall: only with -lN, bare ``recall`` is trec_eval's)
BARE = ("hits", "hit_rate", "precision", "f1", "mrr", "map", "ndcg", "dcg", "ndcg_burges",
        "dcg_burges", "r-precision", "rbp.5", "rbp.8", "rbp.95", "rbp@9")
BARE_LEVEL_ONLY = ("recall",)
NEEDS_DEFINED = ("bpref",)


def generate():
    rng = np.random.default_rng(SEED)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for i in range(TOPICS):
        t = f"{i + 1:03d}"
        pool = [f"D{j:03d}" for j in range(int(rng.integers(6, 90)))]
        judged = rng.choice(pool, size=int(rng.integers(2, len(pool) + 1)), replace=False)
        if i == 2:  # nothing relevant
            grades = np.zeros(len(judged), dtype=int)
        else:
            grades = rng.choice([0, 0, 0, 1, 1, 2, 3], size=len(judged))
        qrels[t] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
        depth = int(rng.integers(1, min(60, len(pool)) + 1))
        if i == 3:  # every retrieved document relevant
            docs = [d for d, g in qrels[t].items() if g > 0][:depth] or [str(judged[0])]
        else:
            docs = [str(d) for d in rng.choice(pool, size=depth, replace=False)]
        run[t] = {d: float(rng.integers(1, 9)) / 4 for d in docs}
    return qrels, run


def trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's ranking: score descending, ties by docno descending (strcmp's byte order:
    "d11" before "d1", a prefix after its extensions)."""
    return sorted(docs, key=lambda d: (docs[d], d.encode()), reverse=True)


def spellings() -> list[str]:
    out = [f"{m}@{k}{lv}" for m in AT_K for k in CUTOFFS for lv in LEVELS]
    out += [f"{m}{lv}" for m in BARE for lv in LEVELS]
    out += [f"{m}{lv}" for m in BARE_LEVEL_ONLY for lv in LEVELS if lv]
    return out


def main() -> None:
    from importlib.metadata import version

    import numba
    import ranx
    from ranx import Qrels, Run, evaluate

    qrels, run = generate()
    order = {t: trec_order(docs) for t, docs in run.items()}
    with open(HERE / "qrels.txt", "w", encoding="ascii") as f:
        for t, docs in qrels.items():
            for d, g in docs.items():
                f.write(f"{t} 0 {d} {g}\n")
    with open(HERE / "run.txt", "w", encoding="ascii") as f:
        for t, docs in run.items():
            for rank, d in enumerate(order[t], 1):
                f.write(f"{t} Q0 {d} {rank} {docs[d]:g} ranxoracle\n")

    def ranx_eval(topics: list[str], names: list[str]) -> dict:
        q = Qrels({t: qrels[t] for t in topics})
        r = Run({t: {d: float(len(order[t]) - i) for i, d in enumerate(order[t])}
                 for t in topics})
        means = evaluate(q, r, names, threads=1)
        means = means if isinstance(means, dict) else {names[0]: means}
        return {n: {"mean": float(means[n]),
                    "per_topic": {t: float(r.scores[n][t]) for t in topics}} for n in names}

    topics = sorted(qrels)
    values = ranx_eval(topics, spellings())
    for name in NEEDS_DEFINED:
        for lv in LEVELS:
            level = int(lv[2:]) if lv else 1
            defined = [t for t in topics
                       if any(g >= level for g in qrels[t].values())
                       and any(g < level for g in qrels[t].values())]
            if not defined:  # -l0: no grade below 0, so no judged non-relevant document
                continue
            entry = ranx_eval(defined, [name + lv])[name + lv]
            entry["topics"] = defined
            values[name + lv] = entry
    for n, v in values.items():
        assert all(np.isfinite(x) for x in v["per_topic"].values()), n
    doc = {
        "provenance": {
            "tool": "ranx", "ranx": version("ranx"), "numba": numba.__version__,
            "numpy": np.__version__, "python": platform.python_version(), "seed": SEED,
            "command": "python tests/data/ranx_oracle/make_expected.py",
            "ranx_module": Path(ranx.__file__).parent.name,
            "ties": "ranx is given ranx_order (trec_eval's order of run.txt) as distinct "
                    "scores n - rank",
        },
        "ranx_order": order,
        "values": values,
    }
    with open(HERE / "expected.json", "w", encoding="ascii") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(values)} spellings, {len(topics)} topics -> {HERE / 'expected.json'}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
