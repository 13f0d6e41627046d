"""Issue #30: ``cranfield`` starts with only what the command uses. Proved in fresh
interpreters by what is loaded, never by a time (``bench/startup.py`` times it):
``import cranfield`` and ``import cranfield.cli`` load no numpy; ``cranfield eval`` loads
none of the service commands, comparisons, other output formats, the measure documentation
or the modules only they need (json, tempfile, difflib); a command that multiplies no
matrices starts numpy with one OpenBLAS thread unless the environment says otherwise, and
``compare`` (whose statistics do multiply) keeps OpenBLAS's default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "trec_eval"

EVAL = ("import contextlib, io\n"
        "from cranfield.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['eval', {str(DATA / 'qrels.test')!r}, "
        f"{str(DATA / 'results.test')!r}]) == 0\n")

# loaded by ``cranfield eval`` before issue #30, used only by other commands or on errors
NOT_IN_EVAL = (
    "cranfield.remote_nightly", "cranfield.remote_eval", "cranfield.client",
    "cranfield.cli_compare", "cranfield.compare", "cranfield.reports.measure_docs",
    "cranfield.reports.jsonl", "json", "tempfile", "difflib",
)


def _after(code: str, env: dict | None = None) -> dict:
    """Runs CODE in a fresh interpreter; returns its loaded modules and its
    OPENBLAS_NUM_THREADS."""
    probe = (f"{code}\nimport os, sys\nloaded = sorted(sys.modules)\n"
             "import json\n"  # after the list is taken: json is one of the modules asked about
             "print(json.dumps({'modules': loaded, "
             "'blas': os.environ.get('OPENBLAS_NUM_THREADS')}))\n")
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, env={**base, **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))


@pytest.mark.parametrize("code", ["import cranfield", "import cranfield.cli",
                                  "from cranfield.cli import main, build_parser"])
def test_importing_the_root_or_the_command_line_loads_no_numpy(code):
    assert _loaded(_after(code)["modules"], ("numpy", "cranfield.evaluate")) == []


def test_cranfield_eval_loads_only_what_it_uses():
    after = _after(EVAL)
    assert _loaded(after["modules"], NOT_IN_EVAL) == []
    assert "numpy" in after["modules"]  # the engine did run
    assert after["blas"] == "1"


def test_the_root_still_resolves_every_name_lazily():
    # importing the module cranfield.evaluate first (cranfield eval does) leaves the name
    # cranfield.evaluate to the function, as the root's eager import did
    after = _after("import cranfield.evaluate\n"
                   "assert callable(cranfield.evaluate)\n"
                   "ev = cranfield.evaluate({'q1': {'d2': 1}}, {'q1': {'d1': 2.0, 'd2': 1.0}}, "
                   "['map'])\n"
                   "assert ev.aggregate['map'] == 0.5\n"
                   "assert set(cranfield.__all__) <= set(dir(cranfield))\n"
                   "from cranfield import *\n"
                   "assert Qrels is cranfield.inputs.run_qrels.Qrels\n")
    assert "numpy" in after["modules"]


@pytest.mark.parametrize("argv, env, blas", [
    (["eval", "--help"], {}, "1"),
    (["measures", "--help"], {}, "1"),
    (["eval", "--help"], {"OPENBLAS_NUM_THREADS": "2"}, "2"),  # the user's setting stays
    (["compare", "--help"], {}, None),  # its statistics multiply matrices
    (["--help"], {}, None),
])
def test_one_blas_thread_for_the_commands_without_matrix_products(argv, env, blas):
    code = ("import contextlib, io\nfrom cranfield.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass\n")
    assert _after(code, env)["blas"] == blas
