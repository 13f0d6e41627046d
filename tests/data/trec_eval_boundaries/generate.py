"""Make the qrels and run of tests/data/trec_eval_boundaries (kept for provenance; the test
reads the committed .gz files, not this script).

Why: trec_eval's summary is the per-topic values added in a double, topic after topic, then
divided by the topic count, and printed "%6.4f". When the exact mean sits on a rounding
boundary (x.xxxx5) the double lands a few ulps to one side or the other, and which side
depends on the order of the additions: a pairwise or exact sum can print the other last
digit. So the data are designed for exact means on such boundaries, for as many measures as
possible, over 1,000 to 8,000 topics.

How: a menu of topic shapes (relevant ranks, judged non-relevant and unjudged documents,
grades, retrieved count) is drawn with a seeded random.Random. Each shape's per-topic value
of every all_trec measure is read from cranfield (both profiles) and kept as an exact
fraction where it is one (small denominators: P_k, recall_k, map, recip_rank, iprec...;
ndcg and the like are irrational and just come along). The topics are then built in blocks:
the first 1,000, then up to 2,000, 3,000, 4,000, 5,000, 6,000 and 8,000; each block's shapes
are chosen by a seeded local search so that the exact mean over the prefix ending with that
block is on a boundary (20000 * sum / T an odd integer) for as many measures as it can.
Topic ids are random digit strings of varying length, so trec_eval's order (strcmp) is not
the order of generation, nor numeric order. The run lists topics in a shuffled order.

Usage (from the repository root): .venv/bin/python tests/data/trec_eval_boundaries/generate.py
"""

from __future__ import annotations

import gzip
import random
from fractions import Fraction
from pathlib import Path

import cranfield

SEED = 20261127
PREFIXES = (1000, 2000, 3000, 4000, 5000, 6000, 8000)
SHAPES = 90
STEPS = 6000  # local-search moves per block
PROFILES = ("trec_eval-9.0.8", "trec_eval-10")
OUT = Path(__file__).resolve().parent


def draw_shape(rng: random.Random) -> dict:
    """One topic's shape: its ranking (a label per rank) and the qrels not retrieved."""
    n = rng.choice([1, 2, 3, 4, 5, 5, 6, 8, 10, 10, 10, 12, 15, 20, 25])
    ranking = ["nonpool"] * n
    rel_ranks = [r for r in (1, 2, 4, 5, 10) if r <= n and rng.random() < 0.35]
    rel_ranks += [r for r in range(1, n + 1) if r not in rel_ranks and rng.random() < 0.08]
    for r in rel_ranks:
        ranking[r - 1] = rng.choice([1, 1, 1, 2, 3])
    for r in range(1, n + 1):
        if ranking[r - 1] == "nonpool":
            x = rng.random()
            if x < 0.3:
                ranking[r - 1] = 0
            elif x < 0.36:
                ranking[r - 1] = -1  # in the pool, unjudged
    unretrieved_rel = rng.choice([0, 0, 0, 1, 1, 2, 3, 5, 8])
    if not rel_ranks and unretrieved_rel == 0 and rng.random() < 0.7:
        unretrieved_rel = 1
    unretrieved = [rng.choice([1, 1, 2, 3]) for _ in range(unretrieved_rel)]
    unretrieved += [0] * rng.choice([0, 0, 1, 2, 4])
    return {"ranking": ranking, "unretrieved": unretrieved}


def topic_lines(qid: str, shape: dict, runid: str) -> tuple[list[str], list[str]]:
    qrels, run = [], []
    n = len(shape["ranking"])
    for rank, label in enumerate(shape["ranking"], 1):
        doc = f"d{rank}"
        # distinct scores, descending; written with 4 decimals (exact in neither float32
        # nor double, the same order in both)
        run.append(f"{qid} Q0 {doc} {rank} {n - rank + 1 + 0.125 * (rank % 3):.4f} {runid}")
        if label != "nonpool":
            qrels.append(f"{qid} 0 {doc} {label}")
    for i, grade in enumerate(shape["unretrieved"]):
        qrels.append(f"{qid} 0 u{i} {grade}")
    return qrels, run


def exact(x: float) -> Fraction | None:
    f = Fraction(x).limit_denominator(100000)
    return f if float(f) == x else None


def shape_values(shapes: list[dict]) -> list[dict[tuple[str, str], Fraction]]:
    """Per shape, {(profile, measure): exact per-topic value} for the mean measures whose
    value is a small fraction."""
    qrels, run = [], []
    ids = [f"s{i:03d}" for i in range(len(shapes))]
    for qid, shape in zip(ids, shapes, strict=True):
        q, r = topic_lines(qid, shape, "menu")
        qrels += q
        run += r
    out: list[dict] = [{} for _ in shapes]
    for profile in PROFILES:
        ev = cranfield.evaluate("\n".join(qrels) + "\n", "\n".join(run) + "\n", "all_trec",
                                profile=profile)
        where = {t: i for i, t in enumerate(ev.topic_order)}
        for inst in ev.instances:
            if ev.measures[inst.key]["aggregate"] != "mean":
                continue
            values = ev.values[inst.key]
            for i, qid in enumerate(ids):
                if qid not in where:
                    continue
                f = exact(float(values[where[qid]]))
                if f is not None:
                    out[i][(profile, inst.key)] = f
    return out


def on_boundary(total: Fraction, topics: int) -> bool:
    x = total * 20000 / topics
    return x.denominator == 1 and x.numerator % 2 == 1


def main() -> None:
    rng = random.Random(SEED)
    shapes = [draw_shape(rng) for _ in range(SHAPES)]
    values = shape_values(shapes)
    # a shape without a relevant document is skipped by no one but has no qrels line if
    # nothing of it is judged: every shape must have one, or the topic is not evaluated
    usable = [i for i, s in enumerate(shapes)
              if any(x != "nonpool" for x in s["ranking"]) or s["unretrieved"]]
    keys = sorted({k for v in values for k in v})
    designable = [k for k in keys if all(k in values[i] for i in usable)]
    totals = {k: Fraction(0) for k in designable}
    chosen: list[int] = []
    start = 0
    for end in PREFIXES:
        block = [rng.choice(usable) for _ in range(end - start)]
        for s in block:
            for k in designable:
                totals[k] += values[s][k]

        def hits(end: int = end) -> int:
            return sum(on_boundary(totals[k], end) for k in designable)

        best = hits()
        for _ in range(STEPS):
            j = rng.randrange(len(block))
            old, new = block[j], rng.choice(usable)
            for k in designable:
                totals[k] += values[new][k] - values[old][k]
            h = hits()
            if h >= best:
                block[j], best = new, h
            else:
                for k in designable:
                    totals[k] -= values[new][k] - values[old][k]
        print(f"topics {end}: {best} of {len(designable)} (profile, measure) means on a "
              "boundary")
        chosen += block
        start = end
    ids: list[str] = []
    seen = set()
    while len(ids) < len(chosen):
        qid = str(rng.randrange(1, 10 ** rng.choice([3, 4, 5, 6])))
        if qid not in seen:
            seen.add(qid)
            ids.append(qid)
    qrels_lines, run_blocks = [], []
    for qid, s in zip(ids, chosen, strict=True):
        q, r = topic_lines(qid, shapes[s], "boundaries")
        qrels_lines += q
        run_blocks.append(r)
    rng.shuffle(run_blocks)
    write(OUT / "qrels.gz", qrels_lines)
    write(OUT / "run.gz", [line for b in run_blocks for line in b])
    write(OUT / "topics.txt", ids)


def write(path: Path, lines: list[str]) -> None:
    data = ("\n".join(lines) + "\n").encode()
    # mtime 0: the same bytes on every run
    with gzip.GzipFile(path, "wb", mtime=0) if path.suffix == ".gz" else open(path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main()
