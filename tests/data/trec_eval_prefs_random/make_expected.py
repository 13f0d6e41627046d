"""Random preference and judgment-group cases, and the real trec_eval binaries' outputs on them
(issue #28: a randomized differential for -R prefs, -R qrels_prefs and -R qrels_jg).

Usage (from anywhere): python make_expected.py path/to/v9.0.8/trec_eval path/to/v10.0/trec_eval

It draws CASES cases from random.Random(SEED) (the same cases every time), writes each one's
judgments and run under inputs/, runs both binaries on every case and writes
expected/<case>.<version>.out (their stdout, byte for byte) and cases.json (the table the
test reads: format, flags, and each binary's exit status and stderr). Where trec_eval 10.0
stops at a judged topic the run lacks (without -c it exits 4, "result qid '<q>' not found in
qrels", after printing the topics before it), the script also runs 10.0 on the judgments of
the run's topics only and keeps that as expected/<case>.v10.0.skip.out: Cranfield's
trec_eval-10 profile skips such a topic, as 9.0.8 does (a deliberate difference, README:
Semantics). tests/engine/test_prefs_differential.py holds Cranfield to these bytes; see
MANIFEST.md beside this file for the builds and the exact commands.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261128
CASES = 60
PARAM_CASES = 9  # drawn after the others (which stay as they were)
VERSIONS = ("v9.0.8", "v10.0")
FORMATS = ("prefs", "qrels_prefs", "qrels_jg")

# flags per format, drawn per case (-q is added to most; -R <format> always)
PREFS_FLAGS = [["-m", "all_prefs"], ["-m", "all_prefs"], ["-m", "all_prefs"], ["-m", "prefs"],
               ["-c", "-m", "all_prefs"], ["-M", "5", "-m", "all_prefs"],
               ["-m", "prefs_simp", "-m", "prefs_pair_imp", "-m", "prefs_avgjg_Rnonrel_ret"],
               ["-M", "12", "-c", "-m", "all_prefs"], ["-m", "runid", "-m", "prefs_simp"],
               ["-c", "-m", "num_q", "-m", "prefs_avgjg", "-m", "prefs_num_prefs_ful"]]
JG_FLAGS = [["-m", "qrels_jg"], ["-m", "qrels_jg"], ["-m", "qrels_jg"],
            ["-l", "2", "-m", "qrels_jg"],
            ["-c", "-m", "qrels_jg"], ["-M", "7", "-m", "qrels_jg"],
            ["-m", "map_avgjg", "-m", "Rprec_mult_avgjg"], ["-c", "-l", "3", "-M", "9",
                                                            "-m", "qrels_jg"],
            ["-J", "-m", "qrels_jg"], ["-J", "-c", "-M", "6", "-m", "qrels_jg"],
            ["-m", "num_q", "-m", "P_avgjg"]]
# measure parameters (both binaries take them; Cranfield since 9b3d42c)
JG_PARAM_FLAGS = [["-m", "P_avgjg.5,10", "-m", "map_avgjg"], ["-m", "P_avgjg.1,3,100,2"],
                  ["-m", "Rprec_mult_avgjg.0.5,0.25,2", "-m", "num_q"],
                  ["-c", "-m", "qrels_jg", "-m", "P_avgjg.7"],
                  ["-J", "-m", "Rprec_mult_avgjg.1.5", "-m", "P_avgjg.4"]]


def _topic_ids(rng: random.Random, n: int) -> list[str]:
    """Ids whose strcmp order is not their numeric order (10 < 2, q10 < q2)."""
    pool = ["1", "2", "10", "3", "q1", "q10", "q2", "301", "30", "A.1", "a"]
    return rng.sample(pool, n)


def _docnos(rng: random.Random, n: int) -> list[str]:
    style = rng.choice(["d", "FR", "mixed"])
    out = set()
    while len(out) < n:
        k = rng.randrange(60)
        if style == "d" or (style == "mixed" and rng.random() < 0.5):
            out.add(f"d{k}")
        else:
            out.add(f"FR94-{k:03d}")
    return sorted(out)


def _level(rng: random.Random, fmt: str) -> str:
    """A rel_level as written: 0..3, a few fractions for prefs (atof), a few -1 for jg."""
    if fmt == "qrels_jg":
        return str(rng.choice([0, 0, 1, 1, 2, 3, -1] if rng.random() < 0.1 else [0, 0, 1, 1, 2, 3]))
    x = rng.choice([0, 0, 1, 1, 2, 3])
    if rng.random() < 0.1:  # 2 and 2.00000001 are one level as floats (9.0.8), two as doubles
        return rng.choice(["0.5", "1.5", "2.25", "1.0", "2.00000001", "0.99999999"])
    return str(x)


def _judgments(rng: random.Random, fmt: str, topic: str, docs: list[str]) -> list[str]:
    """One topic's lines. prefs: 1-3 groups, each with one sub-group (equivalence classes)
    or several (a preference graph: each sub-group ranks a subset of the group's docs by one
    latent level, so the group is consistent, and a doc has one level across sub-groups)."""
    lines = []
    groups = rng.choice([1, 1, 2, 2, 3])
    for g in range(groups):
        if groups == 1:
            jg = rng.choice(["A", "B", "jg1", "0", "1", "z"])
        else:
            jg = ["B", "A", "u2", "u10"][g]
        mine = rng.sample(docs, rng.randint(1, len(docs))) if docs else []
        single = rng.random() < 0.1  # a group with a single level: no preference
        latent = {d: ("1" if single else _level(rng, fmt)) for d in mine}
        if fmt == "prefs" and len(mine) > 2 and rng.random() < 0.4:
            for s in range(rng.randint(2, 3)):
                jsg = f"s{s}"
                for d in rng.sample(mine, rng.randint(1, len(mine))):
                    lines.append(f"{topic} {jg} {jsg} {d} {latent[d]}")
        else:
            jsg = rng.choice(["0", "x"])
            for d in mine:
                lines.append(f"{topic} {jg} {jsg} {d} {latent[d]}" if fmt == "prefs"
                             else f"{topic} {jg} {d} {latent[d]}")
    return lines


def _run(rng: random.Random, topic: str, docs: list[str], runid: str) -> list[str]:
    """Some judged docs, some never judged, scores with ties (some only in float32)."""
    unjudged = [f"x{k}" for k in range(rng.randint(0, 8))]
    cand = rng.sample(docs, rng.randint(0, len(docs))) + unjudged
    rng.shuffle(cand)
    cand = cand[:40]
    style = rng.choice(["ties", "distinct", "float32"])
    out = []
    for i, d in enumerate(cand):
        if style == "ties":
            score = str(rng.choice([1, 2, 2, 3, 5]))
        elif style == "distinct":
            score = f"{len(cand) - i + rng.random():.6f}"
        else:  # equal as float32, different as double
            score = rng.choice(["0.3", "0.30000001", "0.30000002", "7", "7.0000001"])
        out.append(f"{topic} Q0 {d} {i + 1} {score} {runid}")
    return out


def make_cases() -> list[dict]:
    rng = random.Random(SEED)
    cases = []
    for i in range(CASES + PARAM_CASES):
        # the first CASES cycle through the formats; then qrels_jg with measure parameters
        fmt = FORMATS[i % 3] if i < CASES else "qrels_jg"
        name = f"c{i:02d}.{fmt}"
        choices = (JG_FLAGS if fmt == "qrels_jg" else PREFS_FLAGS) if i < CASES else \
            JG_PARAM_FLAGS
        flags = list(rng.choice(choices))
        if rng.random() < 0.85:
            flags = ["-q", *flags]
        topics = _topic_ids(rng, rng.randint(1, 6))
        judgments, run = [], []
        runid = f"rand{i}"
        # most cases: the run has every judged topic (trec_eval 10.0 stops otherwise); -c
        # cases and every fourth case lack some
        keep = 0.6 if "-c" in flags or i % 4 == 0 else 0.95
        for k, topic in enumerate(topics):
            # a few tiny topics: one judged doc (no pair), two
            n = rng.choice([1, 2]) if rng.random() < 0.15 else rng.randint(1 if k == 0 else 0, 40)
            docs = _docnos(rng, n)
            if docs:
                judgments += _judgments(rng, fmt, topic, docs)
            if rng.random() < keep or not run and k == len(topics) - 1:
                run += _run(rng, topic, docs, runid)
        if not run:
            run = [f"zz Q0 d1 1 1 {runid}"]
        if rng.random() < 0.3:  # a run topic that has no judgments
            run += _run(rng, "q99", _docnos(rng, 3), runid)
        rng.shuffle(judgments)
        if fmt != "qrels_jg":
            rng.shuffle(run)
        if len(judgments) > 2 and rng.random() < 0.15:
            # comment lines, each at column 0 before a judgment (10.0 skips such a line;
            # 9.0.8 has no comments: "Malformed line"). Not two in a row nor last: 10.0
            # skips only one line, and one at the end makes it read past its buffer.
            at = sorted(rng.sample(range(len(judgments)), rng.randint(1, 2)))
            for k in reversed(at):
                judgments.insert(k, f"# comment {k}")
        cases.append({"case": name, "format": fmt, "flags": flags,
                      "judgments": "".join(x + "\n" for x in judgments),
                      "run": "".join(x + "\n" for x in run)})
    return cases


def uncommented(judgments: str) -> str:
    """The judgments without their comment lines."""
    return "".join(x + "\n" for x in judgments.splitlines() if not x.startswith("#"))


def command(binary: str, case: dict, judgments: Path, run: Path) -> list[str]:
    return [binary, *case["flags"], "-R", case["format"], str(judgments), str(run)]


def main(v9: str, v10: str) -> None:
    inputs, expected = HERE / "inputs", HERE / "expected"
    inputs.mkdir(exist_ok=True)
    expected.mkdir(exist_ok=True)
    table = []
    for case in make_cases():
        name = case["case"]
        judgments, run = inputs / f"{name}.judgments", inputs / f"{name}.run"
        judgments.write_text(case["judgments"])
        run.write_text(case["run"])
        row = {"case": name, "format": case["format"], "flags": case["flags"]}
        for tag, binary in zip(VERSIONS, (v9, v10), strict=True):
            done = subprocess.run(command(binary, case, judgments.relative_to(HERE),
                                          run.relative_to(HERE)),
                                  capture_output=True, cwd=HERE)
            (expected / f"{name}.{tag}.out").write_bytes(done.stdout)
            row[tag] = {"status": done.returncode, "stderr": done.stderr.decode()}
        if row["v9.0.8"]["status"] == 2 and "Malformed line" in row["v9.0.8"]["stderr"]:
            # the comment lines refused: the same judgments without them
            part = HERE / "uncommented.tmp"
            part.write_text(uncommented(case["judgments"]))
            done = subprocess.run(command(v9, case, part.relative_to(HERE),
                                          run.relative_to(HERE)),
                                  capture_output=True, cwd=HERE)
            part.unlink()
            (expected / f"{name}.v9.0.8.uncommented.out").write_bytes(done.stdout)
            row["v9.0.8"]["uncommented"] = {"file": f"{name}.v9.0.8.uncommented.out",
                                            "status": done.returncode,
                                            "stderr": done.stderr.decode()}
        if row["v10.0"]["status"] == 4 and "not found in qrels" in row["v10.0"]["stderr"] \
                and row["v9.0.8"]["status"] != 7:  # 7: no run topic judged, nothing to skip
            ran = {line.split()[0] for line in case["run"].splitlines()}
            part = HERE / "skip.tmp"
            part.write_text("".join(x + "\n" for x in case["judgments"].splitlines()
                                    if x.split()[0] in ran and not x.startswith("#")))
            done = subprocess.run(command(v10, case, part.relative_to(HERE),
                                          run.relative_to(HERE)),
                                  capture_output=True, cwd=HERE)
            part.unlink()
            (expected / f"{name}.v10.0.skip.out").write_bytes(done.stdout)
            row["v10.0"]["skip"] = {"file": f"{name}.v10.0.skip.out",
                                    "status": done.returncode, "stderr": done.stderr.decode()}
        table.append(row)
    (HERE / "cases.json").write_text(json.dumps(table, indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
