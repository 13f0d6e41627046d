"""The layers' import rules (issue #17), proved in fresh interpreters: the engine
(``cranfield``) loads no Flask, Redis or RQ and none of the other packages; ``cranfield eval``
neither; the worker loads no Flask; ``backend`` (the Flask-free middle) no Flask, ``service``
or ``worker``. And statically (``ast``): no file under ``service/`` imports ``worker``, none
under ``cranfield/`` imports ``service``, ``worker``, ``backend``, Flask, Redis or RQ."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import cranfield

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "trec_eval"

WEB = ("flask", "werkzeug", "marshmallow")
QUEUE = ("redis", "rq")
PACKAGES = ("service", "worker", "backend")
NOT_IN_ENGINE = (*WEB, *QUEUE, *PACKAGES)
NOT_IN_WORKER = (*WEB, "service")
NOT_IN_BACKEND = (*WEB, "service", "worker")

ENGINE_MODULES = sorted(m.name for m in pkgutil.walk_packages(cranfield.__path__, "cranfield."))


def loaded_after(code: str, forbidden: tuple[str, ...]) -> list[str]:
    """Runs CODE in a fresh interpreter (the repository's root as its directory) and returns
    the FORBIDDEN top-level packages then in ``sys.modules``."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps(sorted({{m.partition('.')[0] for m in sys.modules}} & "
             f"set({list(forbidden)!r}))))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_engine_modules_are_found():
    assert {"cranfield.cli", "cranfield.evaluate", "cranfield.measures.trec"} <= set(
        ENGINE_MODULES)


def test_importing_the_engine_loads_no_web_queue_or_other_package():
    assert loaded_after("import cranfield", NOT_IN_ENGINE) == []


@pytest.mark.parametrize("module", ENGINE_MODULES)
def test_no_engine_module_loads_web_queue_or_other_package(module):
    assert loaded_after(f"import {module}", NOT_IN_ENGINE) == []


def test_cranfield_eval_loads_no_web_queue_or_other_package():
    code = (
        "import contextlib, io\n"
        "from cranfield.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['eval', {str(DATA / 'qrels.test')!r}, {str(DATA / 'results.test')!r}])\n"
        "assert code == 0, code\n"
    )
    assert loaded_after(code, NOT_IN_ENGINE) == []


@pytest.mark.parametrize("module", ["worker.jobs", "worker.cli", "worker.commands"])
def test_worker_loads_no_flask_or_service(module):
    assert loaded_after(f"import {module}", NOT_IN_WORKER) == []


def _backend_modules() -> list:
    if not (ROOT / "backend" / "__init__.py").exists():
        return [pytest.param(None, marks=pytest.mark.skip(
            reason="no backend/ package yet (issue #17 moves the shared middle there)"))]
    return ["backend", *sorted(f"backend.{m.name}" for m in
                               pkgutil.iter_modules([str(ROOT / "backend")]))]


@pytest.mark.parametrize("module", _backend_modules())
def test_backend_loads_no_flask_service_or_worker(module):
    assert loaded_after(f"import {module}", NOT_IN_BACKEND) == []


def imported_packages(path: Path) -> set[str]:
    """The top-level names PATH imports (absolute imports; relative ones stay inside its
    package), wherever in the file (lazy imports in functions count)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names


def offenders(package: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = sorted(imported_packages(path) & set(forbidden))
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    return found


def test_imported_packages_sees_lazy_and_dotted_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os.path\nfrom . import x\n"
                      "def f():\n    from worker.cli import run_worker\n    import rq\n")
    assert imported_packages(source) == {"os", "worker", "rq"}


def test_no_service_file_imports_worker():
    assert offenders("service", ("worker",)) == {}


def test_no_engine_file_imports_service_worker_backend_flask_redis_or_rq():
    assert offenders("cranfield", ("service", "worker", "backend", "flask", "redis", "rq")) == {}


def test_no_worker_file_imports_service():
    assert offenders("worker", ("service", "flask", "werkzeug", "marshmallow")) == {}


def test_no_backend_file_imports_service_worker_or_flask():
    assert offenders("backend", ("service", "worker", "flask", "werkzeug", "marshmallow")) == {}


def test_no_package_imports_another_packages_private_names():
    """``from cranfield.inputs.io import _helper`` in backend/, service/ or worker/ is a private
    helper leaking across a layer: the engine makes it public, or the caller does without."""
    import ast

    found = []
    for package in ("backend", "service", "worker"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{a.name}"
                              for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []
