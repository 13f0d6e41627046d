"""The engine's one compiled accelerator (issue #29): the C extension ``cranfield.inputs._mapscan``
(cranfield/inputs/_mapscan.c and cranfield/inputs/_jsonscan.c) is what reads large JSON bodies,
plain TREC lines and mappings; numba is gone. Checked here: pyproject builds it from both sources
and nothing pulls numba in; the image's build stage compiles what pyproject lists; the sources
compile with a C compiler into a module whose JSON scan works; and this virtualenv loads the
extension and reads JSON bodies with it. (Its absence is the tested Python path:
tests/engine/test_json_scan_fallback.py.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SOURCES = ["cranfield/inputs/_mapscan.c", "cranfield/inputs/_jsonscan.c",
           "cranfield/inputs/_rankpass.c", "cranfield/inputs/_textpass.c"]


def _names(requirements) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_pyproject_builds_the_one_accelerator_from_both_sources():
    ext = {e["name"]: e for e in PYPROJECT["tool"]["setuptools"]["ext-modules"]}
    assert list(ext) == ["cranfield.inputs._mapscan"], "one compiled extension"
    assert sorted(ext["cranfield.inputs._mapscan"]["sources"]) == sorted(SOURCES)
    # optional: an install without a C compiler goes on, and the engine takes its Python paths
    assert ext["cranfield.inputs._mapscan"]["optional"] is True
    for source in SOURCES:
        assert (ROOT / source).is_file(), source


def test_numba_is_no_dependency():
    project = PYPROJECT["project"]
    every = _names(project["dependencies"])
    for extra, requirements in project["optional-dependencies"].items():
        if extra != "bench":  # (ranx, a benchmark's comparison, brings its own numba)
            every |= _names(requirements)
    assert not {"numba", "llvmlite"} & every
    pins = _names(line for line in (ROOT / "constraints.txt").read_text().splitlines()
                  if line and not line.startswith("#"))
    assert not {"numba", "llvmlite"} & pins, "constraints.txt still pins numba"


def test_dockerfile_builds_every_source_and_checks_the_json_scan():
    """The build stage (the one that installs gcc) has the sources when it installs the
    project and imports the module after; the runtime stage reads a body with the scan."""
    text = (ROOT / "Dockerfile").read_text()
    stages = re.split(r"(?m)^FROM ", text)[1:]
    builder = next(s for s in stages if re.search(r"apt-get install[^\n]*\bgcc\b", s))
    copy = builder.index("COPY cranfield/ cranfield/")
    install = builder.index("pip install --no-cache-dir --no-deps --editable .")
    assert copy < install < builder.index("import cranfield.inputs._mapscan", install)
    runtime = stages[-1]
    assert "COPY --from=builder /app /app" in runtime
    assert re.search(r"import cranfield\.inputs\._mapscan;.*assert warm_up\(\)", runtime)
    assert "NUMBA" not in text


def test_sources_compile_into_a_module_whose_json_scan_reads(tmp_path, require):
    """What pip does where a C compiler is found, done by hand: both sources into one shared
    object, imported in a fresh interpreter, its JSON scan reading a mapping."""
    cc = shutil.which("cc") or shutil.which("gcc")
    require(cc, "a C compiler (cc or gcc) to build cranfield.inputs._mapscan")
    target = tmp_path / f"_mapscan{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run([cc, "-O2", "-shared", "-fPIC", "-Wall", "-Werror",
                    f"-I{sysconfig.get_paths()['include']}", *(str(ROOT / s) for s in SOURCES),
                    "-o", str(target)], check=True, capture_output=True)
    probe = (
        "import numpy as np, _mapscan as m\n"
        "raw = b'{\"q1\": {\"d1\": 1.5, \"d2\": -2}, \"q2\": {\"d1\": 1e400}}'\n"
        "buf = np.frombuffer(raw, np.uint8)\n"
        "n = 12\n"
        "out = [np.empty(64, np.uint8), np.empty(n + 1, np.int32), np.empty(n),\n"
        "       np.empty(n, np.uint64), np.empty(n, np.int64), np.empty((n, 2), np.int64)]\n"
        "status, end, spans, counts, used, rows, nslow, high = m.json_scores(buf, 1, -1, *out)\n"
        "print(status, end, np.frombuffer(counts, np.int64).tolist(), used, rows, nslow,\n"
        "      out[2][:2].tolist(), raw[out[5][0][0]:out[5][0][1]].decode(), high)\n"
    )
    got = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, check=True,
                         capture_output=True, text=True).stdout.split()
    # END, after the closing brace; 2 + 1 rows; "d1d2d1"; the out-of-range number left to
    # the correctly rounding parser (json_body then declines it: not finite)
    assert got == ["0", str(len(b'{"q1": {"d1": 1.5, "d2": -2}, "q2": {"d1": 1e400}}')),
                   "[2,", "1]", "6", "3", "1", "[1.5,", "-2.0]", "1e400", "False"]


def test_this_environment_loads_the_extension_and_reads_json_with_it(require):
    """In the installed environment (make venv: pip install -e builds the extension in
    place), the JSON scan is the extension's: json_body says so, a body is read into Columns,
    and numba is not imported."""
    probe = (
        "import sys, orjson\n"
        "from cranfield.inputs import json_body\n"
        "raw = orjson.dumps({'run': {'q': {'d': 2.5}}, 'qrels': {'q': {'d': 1}}})\n"
        "body = json_body.decode_body(raw, min_bytes=0)\n"
        "print(json_body.scan_module(), type(body['run']).__name__ if body else None,\n"
        "      body['run'].value.scores.tolist() if body else None,\n"
        "      'cranfield.inputs._mapscan' in sys.modules, 'numba' in sys.modules)\n"
    )
    got = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.split()
    require(got[0] != "None", "cranfield.inputs._mapscan is built (pip install with a C compiler)")
    assert got == ["cranfield.inputs._mapscan", "Columns", "[2.5]", "True", "False"]
