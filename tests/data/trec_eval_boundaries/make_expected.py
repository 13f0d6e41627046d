"""Write expected/ from the real trec_eval binaries (kept for provenance; see
tests/data/PROVENANCE.md for the builds).

Usage: python make_expected.py TREC_EVAL_9_0_8 TREC_EVAL_10_0

Cases (CASES below; the test reads the same table from cases.txt):
- ``T<n>``: the qrels of the first n topics of topics.txt, the whole run, ``-m all_trec``;
- ``T<n>.q``: the same with ``-q`` (only the sha256 of its bytes is kept: megabytes);
- ``c5000``: all 8,000 topics' qrels, the run's lines of the first 5,000 topics only,
  ``-c -m all_trec`` (9.0.8 divides by 8,000 what it summed over 5,000; 10.0 adds the
  missing topics' bogus-ranking values in their place).
"""

from __future__ import annotations

import gzip
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREFIXES = (1000, 2000, 3000, 4000, 5000, 6000, 8000)
HASHED = (1000, 8000)  # -q outputs kept as sha256


def inputs(tmp: Path) -> dict[str, tuple[list[str], Path, Path]]:
    """case -> (flags, qrels path, run path)"""
    topics = (HERE / "topics.txt").read_text().split()
    qrels = gzip.decompress((HERE / "qrels.gz").read_bytes()).decode().splitlines(True)
    run = gzip.decompress((HERE / "run.gz").read_bytes()).decode().splitlines(True)
    full_run = tmp / "run"
    full_run.write_text("".join(run))
    cases = {}
    for n in PREFIXES:
        keep = set(topics[:n])
        path = tmp / f"qrels.{n}"
        path.write_text("".join(x for x in qrels if x.split(" ", 1)[0] in keep))
        cases[f"T{n}"] = (["-m", "all_trec"], path, full_run)
        if n in HASHED:
            cases[f"T{n}.q"] = (["-q", "-m", "all_trec"], path, full_run)
    keep = set(topics[:5000])
    part = tmp / "run.5000"
    part.write_text("".join(x for x in run if x.split(" ", 1)[0] in keep))
    cases["c5000"] = (["-c", "-m", "all_trec"], tmp / f"qrels.{PREFIXES[-1]}", part)
    return cases


def main(v9: str, v10: str) -> None:
    out = HERE / "expected"
    out.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for case, (flags, qrels, run) in inputs(Path(tmp)).items():
            for tag, binary in (("v9.0.8", v9), ("v10.0", v10)):
                done = subprocess.run([binary, *flags, str(qrels), str(run)], check=True,
                                      capture_output=True)
                name = f"{case}.{tag}"
                if case.endswith(".q"):
                    digest = hashlib.sha256(done.stdout).hexdigest()
                    (out / f"{name}.sha256").write_text(f"{digest}\n")
                else:
                    (out / f"{name}.out").write_bytes(done.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:3])
