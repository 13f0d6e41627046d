"""Issue #19: ``cranfield eval`` imports nothing it does not use. pyarrow's ``pa.array`` and
``to_numpy`` import pandas (~0.3 s) to look at their argument; the engine reads Arrow
results through their buffers and builds Arrow strings from bytes instead. Proved in fresh
interpreters, through both readers (pyarrow's forced for small files) and for every input
shape: files, mappings, line-read qrels beside a pyarrow-read run, diversity qrels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RUN = "".join(f"q{t} Q0 d{i} {i} {10 - i % 7} sys\n" for t in range(30) for i in range(40))
QRELS = "".join(f"q{t} 0 d{i} {i % 3 - (i == 5)}\n" for t in range(30) for i in range(0, 60, 3))
QRELS_SUB = "".join(f"q{t} {1 + i % 2} d{i} {i % 2}\n" for t in range(30) for i in range(30))


def _modules_after(code: str, fast_min: str) -> list[str]:
    probe = (f"{code}\nimport json, sys\n"
             "print(json.dumps(sorted(m for m in ('pandas',) "
             "if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, env={"CRANFIELD_FAST_READER_MIN_BYTES": fast_min,
                                        "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("fast_min", ["0", str(1 << 40)])
@pytest.mark.parametrize("measures", [["map", "ndcg_cut.10", "P.10"], ["all_trec"]])
def test_cranfield_eval_imports_no_pandas(tmp_path, fast_min, measures):
    (tmp_path / "run").write_text(RUN)
    (tmp_path / "qrels").write_text(QRELS)
    args = [a for m in measures for a in ("-m", m)] + [str(tmp_path / "qrels"),
                                                        str(tmp_path / "run")]
    code = ("import sys, io, contextlib\nfrom cranfield.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert main(['eval', '-q', *{args!r}]) == 0")
    assert _modules_after(code, fast_min) == []


@pytest.mark.parametrize("fast_min", ["0", str(1 << 40)])
def test_library_paths_import_no_pandas(tmp_path, fast_min):
    (tmp_path / "run").write_text(RUN)
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "sub").write_text(QRELS_SUB)
    code = f"""
import cranfield
run = cranfield.read_run({str(tmp_path / 'run')!r})
qrels = cranfield.read_qrels({str(tmp_path / 'qrels')!r})
cranfield.evaluate(qrels, run, ["all_trec"]).per_topic
cranfield.evaluate(qrels.to_dict(), run.to_dict(), ["map", "P.5"]).per_topic
cranfield.evaluate(qrels.to_dict(), run, ["map", "ndcg"]).per_topic
sub = cranfield.read_qrels({str(tmp_path / 'sub')!r}, diversity=True)
cranfield.evaluate(sub, run, ["map"]).per_topic
cranfield.evaluate(sub, run, ["alpha_nDCG@20", "ERR_IA@20"]).per_topic
"""
    assert _modules_after(code, fast_min) == []
