"""System packages are installed by an explicit, announced step (issue #29): ``make
system-deps`` installs Chromium and nginx for the tests that need them and says what and why;
``.ci/run`` runs it before ``make test``, and the README names it; ``make test`` installs no
system package.

What make would run is read from make itself (``make -n -B``: every recipe of the target and
of all it depends on, printed, nothing executed), not from a reading of the Makefile."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# a command that installs or unpacks a system package, or runs as another user
SYSTEM = re.compile(r"\b(apt-get|apt|dpkg|sudo|SUDO)\b")


def dry_run(target: str, require) -> list[str]:
    """The commands ``make TARGET`` would run in a tree where everything is out of date."""
    make = shutil.which("make")
    require(make is not None, "make")
    out = subprocess.run([make, "-n", "-B", target], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_make_test_installs_no_system_package(require):
    commands = dry_run("test", require)
    # the dry run reaches the whole tree: the installs, the lint and the tests themselves
    assert any("pip install" in c and ".[test]" in c for c in commands), commands
    assert any("ruff check" in c for c in commands), commands
    assert any(c.endswith("-m pytest -q") for c in commands), commands
    offending = [c for c in commands if SYSTEM.search(c)]
    assert offending == [], "make test installs system packages; make system-deps does that"


def test_make_system_deps_installs_chromium_and_nginx_and_says_why(require):
    commands = dry_run("system-deps", require)
    text = "\n".join(commands)
    assert "apt-get install -y -q chromium" in text
    assert "apt-get download -q nginx" in text and "dpkg -x" in text
    announced = [c for c in commands if c.startswith("echo \"system-deps: ")]
    assert [a.split()[2] for a in announced] == ["chromium", "nginx,"], announced
    chromium, nginx = announced
    # why: the tests that need each, which exist
    assert "tests/browser" in chromium and (ROOT / "tests" / "browser").is_dir()
    assert "test_nightly_story" in chromium
    assert (ROOT / "tests" / "integration" / "test_nightly_story.py").is_file()
    assert "tests/integration/test_slow_clients.py" in nginx
    assert (ROOT / "tests" / "integration" / "test_slow_clients.py").is_file()
    # it fails when it cannot install, rather than leaving the tests to skip
    assert text.count("exit 1") == 2


def _commands(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_ci_runs_system_deps_then_make_test_and_fails_on_any_failure():
    run = ROOT / ".ci" / "run"
    assert os.access(run, os.X_OK)
    commands = _commands(run)
    assert commands[0] == "set -euo pipefail"
    assert commands[-2:] == ["make system-deps", "make test"]
    assert "export CI=true" in commands


def test_the_readme_names_system_deps_where_it_says_how_to_test():
    readme = (ROOT / "README.md").read_text()
    start = readme.split("\n## Start\n", 1)[1].split("\n## ", 1)[0]
    assert "make test" in start and "make system-deps" in start
    assert "`make test` installs no system package" in start
    assert "(`.ci/run`) runs `make system-deps`, then `make test`" in " ".join(start.split())
