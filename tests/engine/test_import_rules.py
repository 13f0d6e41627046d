"""The layers' import rules (issue #17), proved in fresh interpreters: the engine
(``cranfield``) loads no Flask, Redis or RQ and none of the other packages; ``cranfield eval``
neither; the worker loads no Flask; ``backend`` (the Flask-free middle) no Flask, ``service``
or ``worker``. And statically (``ast``): no file under ``service/`` imports ``worker``, none
under ``cranfield/`` imports ``service``, ``worker``, ``backend``, Flask, Redis or RQ.

Inside the engine (issue #29): its rooms (``cranfield.inputs``, ``measures``, ``reports``,
``compare``, and the modules at the top) import only the rooms below them, with every
import statement counted (lazy ones in functions too); no import circle; nothing below the
root imports the root; no module over 600 lines; ``cranfield.__all__`` is the public API,
and ``import cranfield`` loads no comparison or report."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
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
    helper leaking across a layer: the engine makes it public, or the caller does without.
    So is ``from .results import _helper`` between two modules of one package (review R31)."""
    import ast

    found = []
    for package in ("backend", "service", "worker"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.level or node.module):
                    found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{a.name}"
                              for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


# ---- the engine's rooms (issue #29) ------------------------------------------------------------
#
# cranfield/ is four rooms (subpackages) and a few modules at the top. Each room may import
# the rooms below it, never one above; nothing forms an import circle; nothing below the root
# imports the root (cranfield/__init__.py imports them). Every cranfield-internal import
# statement counts, at module level or inside a function.

#: the rooms, and what each may import besides itself, bottom up (the top's modules in three
#: groups: "core" below everything, "evaluation" = evaluate and its pieces, "interfaces" the
#: command line and the client, above everything). A comparison document holds its runs'
#: input lint and curves (reports); the reports render documents, never import comparisons.
ALLOWED = {
    "core": set(),
    "inputs": {"core"},
    "measures": {"core", "inputs"},
    "evaluation": {"core", "inputs", "measures"},
    "reports": {"core", "inputs", "measures", "evaluation"},
    "compare": {"core", "inputs", "measures", "evaluation", "reports"},
    "interfaces": {"core", "inputs", "measures", "evaluation", "reports", "compare", "judges"},
    # many judges (issue #31): judged qrels, agreement and consensus read judgment groups
    "judges": {"core", "inputs"},
}
PACKAGES = ("inputs", "measures", "compare", "reports", "judges")
#: the modules at the top, by group (a new module at the top needs a line here)
TOP = {
    "version": "core", "errors": "core", "settings": "core", "lazy": "core",
    "evaluate": "evaluation", "evaluate_checks": "evaluation", "shards": "evaluation",
    "evaluate_many": "evaluation",
    "cli": "interfaces", "cli_eval": "interfaces", "cli_compare": "interfaces",
    "cli_files": "interfaces", "remote_cli": "interfaces", "remote_eval": "interfaces",
    "remote_nightly": "interfaces", "remote_parsers": "interfaces", "client": "interfaces",
    "client_body": "interfaces", "cli_qrels_diff": "interfaces", "cli_judges": "interfaces",
    "cli_history_ops": "interfaces", "client_history": "interfaces",
}
MAX_LINES = 600
#: the compiled modules (no .py file; a build may be absent from a checkout)
COMPILED = ("_mapscan",)


def engine_modules(engine: Path) -> dict[str, Path]:
    """Dotted name -> file of every module of the package at ENGINE (``__init__.py`` names
    its package)."""
    found = {}
    for path in sorted(engine.rglob("*.py")):
        parts = list(path.relative_to(engine.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def engine_imports(engine: Path) -> list[tuple[str, str, int]]:
    """(importer, imported module, line) for every import statement of the package at ENGINE
    naming one of its modules, wherever in the file. ``from . import x`` imports module
    ``x`` when there is one, else (a name defined in ``__init__.py``) the package; a compiled
    module (no .py file) is named as written. ``from .b import _x`` of a private name that is
    no module is an import of ``b``, an edge like any other."""
    root = engine.name
    modules = engine_modules(engine)

    def compiled(name: str) -> bool:
        """A compiled module: private, with its C source beside it or known by name."""
        last = name.rpartition(".")[2]
        source = engine.parent.joinpath(*name.split(".")).with_suffix(".c")
        return last.startswith("_") and (last in COMPILED or source.exists())

    def known(name: str) -> str:
        while name not in modules and "." in name:
            if compiled(name):
                return name
            name = name.rpartition(".")[0]
        return name

    found = []
    for importer, path in modules.items():
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found += [(importer, known(a.name), node.lineno) for a in node.names
                          if a.name.partition(".")[0] == root]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1])
                    full = f"{base}.{node.module}" if node.module else base
                elif (node.module or "").partition(".")[0] == root:
                    full = node.module
                else:
                    continue
                for a in node.names:
                    sub = f"{full}.{a.name}"
                    found.append((importer, sub if sub in modules or compiled(sub)
                                  else known(full), node.lineno))
    return found


def room_of(module: str) -> str | None:
    """The room of a dotted module name (None: the package root; "?" a module at the top
    missing from TOP)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    if parts[1] in PACKAGES:
        return parts[1]
    return TOP.get(parts[1], "?")


def room_violations(engine: Path) -> list[str]:
    found = []
    for importer, imported, line in engine_imports(engine):
        mine, theirs = room_of(importer), room_of(imported)
        if mine is None or theirs is None or mine == theirs:
            continue  # the root (its own test below) or within a room
        if mine == "?" or theirs == "?" or theirs not in ALLOWED[mine]:
            found.append(f"{importer}:{line} ({mine}) imports {imported} ({theirs})")
    return found


def import_circles(engine: Path) -> list[list[str]]:
    """The strongly connected components (more than one module, or a module importing
    itself) of the module graph; a package's ``__init__`` importing its own modules is not
    an edge (it imports them to export their names, after they are loaded)."""
    graph: dict[str, set[str]] = {m: set() for m in engine_modules(engine)}
    for importer, imported, _ in engine_imports(engine):
        if imported.startswith(importer + ".") and engine_modules(engine)[importer].name == \
                "__init__.py":
            continue
        graph.setdefault(importer, set()).add(imported)
        graph.setdefault(imported, set())
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def root_importers(engine: Path) -> list[str]:
    """Modules below the root importing the root: ``import cranfield``, ``from cranfield
    import X`` or ``from .. import X`` for an X that is not a module."""
    return [f"{importer}:{line}" for importer, imported, line in engine_imports(engine)
            if imported == engine.name and importer != engine.name]


def long_modules(engine: Path, limit: int = MAX_LINES) -> dict[str, int]:
    return {str(p.relative_to(engine.parent)): n for p in sorted(engine.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > limit}


def room_docstring_problems(engine: Path) -> list[str]:
    """Each room is a package whose docstring says what it holds and, in a paragraph
    ``May import: ...``, exactly the rooms ALLOWED lets it import."""
    found = []
    for room in PACKAGES:
        init = engine / room / "__init__.py"
        if not init.exists():
            found.append(f"{room}: not a package")
            continue
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        said = [p for p in doc.split("\n\n") if p.startswith("May import:")]
        if len(doc.split()) < 12:
            found.append(f"{room}: its docstring does not say what it holds")
        if len(said) != 1:
            found.append(f"{room}: no (or more than one) 'May import:' paragraph")
            continue
        named = set(re.findall(r"\b(core|inputs|measures|evaluation|compare|reports|"
                               r"interfaces)\b", said[0].partition(":")[2]))
        if named != ALLOWED[room]:
            found.append(f"{room}: says it may import {sorted(named)}, the rules say "
                         f"{sorted(ALLOWED[room])}")
    return found


ENGINE = ROOT / "cranfield"


def test_every_room_is_a_package_saying_what_it_holds_and_may_import():
    assert room_docstring_problems(ENGINE) == []


def test_every_module_is_in_a_room():
    assert [m for m in engine_modules(ENGINE) if room_of(m) == "?"] == []


def test_rooms_import_only_the_rooms_below_them():
    assert room_violations(ENGINE) == []


def test_no_import_circle():
    assert import_circles(ENGINE) == []


def test_nothing_below_the_root_imports_the_root():
    assert root_importers(ENGINE) == []


def test_no_module_over_the_line_bound():
    assert long_modules(ENGINE) == {}


def test_the_rules_see_violations(tmp_path):
    """Each rule above fails on a package breaking it (a copy of the rules' shape)."""
    eng = tmp_path / "cranfield"
    files = {
        "__init__.py": '"""root"""\nfrom .evaluate import evaluate\n',
        "errors.py": "",
        "evaluate.py": "from .measures import x\ndef evaluate():\n"
                       "    from .compare.text import y\n",          # evaluation -> compare
        "stray.py": "",                                                # not in TOP
        "inputs/__init__.py": '"""Runs.\n\nMay import: core."""\n',    # says too little
        "inputs/io.py": "from .. import __version__\nfrom .._mapscan import scan\n",  # root
        "measures/__init__.py": '"""The measures, by name, with their registry and what they'
                                " compute from a ranked run.\n\nMay import: core, inputs.\"\"\"\n",
        "measures/a.py": "def f():\n    from . import b\n",
        "measures/b.py": "from .a import f\n",                          # circle a <-> b
        "measures/c.py": "from .d import _g\n",                        # circle c <-> d, by a
        "measures/d.py": "from .c import h\n",                         # private name
        "compare/__init__.py": '"""Comparisons of several runs over topics, with their '
                               'statistics and gates.\n\nMay import: core."""\n',  # wrong list
        "reports/__init__.py": "",                                     # no docstring
        "judges/__init__.py": '"""Judged qrels, the agreement of their judges and their '
                              'consensus.\n\nMay import: core, inputs."""\n',
        "compare/text.py": "import cranfield\n" + "x = 1\n" * 700,     # root, too long
    }
    for name, text in files.items():
        (eng / name).parent.mkdir(parents=True, exist_ok=True)
        (eng / name).write_text(text)
    assert room_violations(eng) == [
        "cranfield.evaluate:3 (evaluation) imports cranfield.compare.text (compare)",
        "cranfield.inputs.io:2 (inputs) imports cranfield._mapscan (?)"]
    assert [m for m in engine_modules(eng) if room_of(m) == "?"] == ["cranfield.stray"]
    assert import_circles(eng) == [["cranfield.measures.a", "cranfield.measures.b"],
                                   ["cranfield.measures.c", "cranfield.measures.d"]]
    assert root_importers(eng) == ["cranfield.compare.text:1", "cranfield.inputs.io:1"]
    assert long_modules(eng) == {"cranfield/compare/text.py": 701}
    assert room_docstring_problems(eng) == [
        "inputs: its docstring does not say what it holds",
        "compare: says it may import ['core'], the rules say "
        "['core', 'evaluation', 'inputs', 'measures', 'reports']",
        "reports: its docstring does not say what it holds",
        "reports: no (or more than one) 'May import:' paragraph"]


# ---- the public API ----------------------------------------------------------------------------

PUBLIC = ["CranfieldError", "Evaluation", "EvaluationError", "InputError", "Instance", "Measure",
          "MeasureError", "PROFILES", "Qrels", "REGISTRY", "Run", "TopicSets", "evaluate",
          "evaluate_many", "parse_measure", "read_qrels", "read_run", "__version__"]


def test_the_public_api_is_the_roots_all_and_every_name_resolves():
    assert sorted(cranfield.__all__) == sorted(PUBLIC)
    probe = ("import cranfield\n"
             "missing = [n for n in cranfield.__all__ if not hasattr(cranfield, n)]\n"
             "from cranfield import *\n"
             "import json; print(json.dumps(missing))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_every_room_exports_names_that_resolve():
    for room in PACKAGES:
        package = importlib.import_module(f"cranfield.{room}")
        for name in getattr(package, "__all__", ()):
            assert getattr(package, name) is not None, f"cranfield.{room}.{name}"


def test_importing_the_root_leaves_comparisons_and_reports_unloaded():
    """``import cranfield`` (so ``cranfield eval``) loads neither the comparisons (scipy) nor
    the reports; ``cranfield.compare`` loads on first use."""
    loaded = loaded_after("import cranfield", ("scipy",))
    probe = ("import cranfield, sys\n"
             "print(sorted(m for m in sys.modules if m.startswith(('cranfield.compare', "
             "'cranfield.reports'))))\n"
             "cranfield.compare\nprint('cranfield.compare' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (loaded, out.stdout.splitlines()) == ([], ["[]", "True"])
