"""The CI files of docs/ci/ (issue #25), executed as scripts against a live service.

Each file is parsed as its CI server would read it; the steps that call ``cranfield`` (a
GitHub Actions job's ``run:`` steps, a GitLab CI job's ``before_script:``/``script:`` lines)
run in bash, in the order written, with the environment the CI server would give them: the
file's own ``env:``/``variables:`` (its ``${{ vars.* }}`` and ``${{ secrets.* }}`` filled in
from the repository's settings, here the live service's URL and an API key), the CI's own
variables (GITHUB_ACTIONS, GITHUB_SHA, GITHUB_RUN_NUMBER, GITHUB_STEP_SUMMARY, GITHUB_ENV;
GITLAB_CI, CI_COMMIT_SHA, CI_PIPELINE_IID), in a working directory holding the qrels and run
files the workflow names. Actions (``uses:``) such as checkout and the artefact upload are
not run; the step that runs the team's engine is replaced by the run file put in place.

Three nights per file: the first pins itself as the baseline (``--pin-if-none``), the second
is the same run (pass), the third lost its top ten documents on a known set of topics: the
gate step exits 3, the JUnit report and the Markdown (GitHub: in the job summary, with an
``::error`` annotation per failed check) name what fell. Each file runs under a tenant of its
own (its API key), so both use the same system name on one service.
"""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from servers import CRANFIELD, ROOT, call, running_gunicorn

from service.auth import key_line

CI_FILES = ROOT / "docs" / "ci"
#: a command line calling cranfield (not ``pip install cranfield``)
CALLS_CRANFIELD = re.compile(r"(?:^|[\s;&|(])cranfield\s+(?:qrels|eval|gate|baseline|trend|"
                             r"history|compare)\b", re.M)
SETTING = re.compile(r"\$\{\{\s*(vars|secrets)\.(\w+)\s*\}\}")
KEYS = {"github": "gh-nightly-key", "gitlab": "gl-nightly-key"}

TOPICS = [f"T{i:02d}" for i in range(1, 41)]
REGRESSED = {"T03", "T05", "T09", "T12", "T14", "T18", "T22", "T25", "T27", "T31", "T36", "T40"}
TOPIC = re.compile(r"\bT\d\d\b")


def _run_text(regressed: set[str]) -> str:
    """40 topics of 100 documents; a topic in ``regressed`` has its top ten moved last."""
    lines = []
    for topic in TOPICS:
        docs = [f"D{topic}-{i:03d}" for i in range(100)]
        if topic in regressed:
            docs = docs[10:] + docs[:10]
        lines += [f"{topic} Q0 {d} {r + 1} {100 - r}.0 nightly\n" for r, d in enumerate(docs)]
    return "".join(lines)


def _qrels_text() -> str:
    """Per topic: relevant documents at ranks 1, 3, 6 and 9 (grades 2, 1, 1, 2) and one at
    rank 40; ranks 20-29 judged non-relevant."""
    lines = []
    for topic in TOPICS:
        for rank, grade in [(1, 2), (3, 1), (6, 1), (9, 2), (40, 1), *((r, 0) for r in
                                                                       range(20, 30))]:
            lines.append(f"{topic} 0 D{topic}-{rank - 1:03d} {grade}\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def service():
    """gunicorn with API keys on (one tenant per CI file), results in its own SQLite file."""
    keys = ";".join(key_line(key, "write", tenant, tenant) for tenant, key in KEYS.items())
    with running_gunicorn({"CRANFIELD_API_KEYS": keys}) as url:
        yield url


def _filled(env: dict, settings: dict) -> dict:
    """A CI file's env with ``${{ vars.X }}``/``${{ secrets.X }}`` replaced by ``settings``;
    any other expression would reach the shell unexpanded: refused."""
    out = {}
    for key, value in (env or {}).items():
        value = SETTING.sub(lambda m: settings[m.group(2)], str(value))
        assert "${{" not in value, f"{key}: an expression the test cannot give: {value}"
        out[str(key)] = value
    return out


def _base_env(extra: dict) -> dict:
    """This machine's environment without anything CI- or Cranfield-specific, the project's
    .venv first on PATH (as `pip install` puts cranfield on a runner's PATH)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "CI_", "GITLAB_", "CRANFIELD_", "RUNNER_"))
           and k != "CI"}
    env["PATH"] = f"{Path(CRANFIELD).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


@dataclass
class Night:
    exit_status: int = 0
    failed_step: str | None = None
    stdout: str = ""
    stderr: str = ""
    summary: str = ""
    ran: list[str] = field(default_factory=list)


def _prepare(work: Path, env: dict, regressed: set[str]) -> None:
    """The working directory a checkout and the engine's step leave: the qrels file and
    tonight's run where the workflow's env names them."""
    qrels = work / env["QRELS_FILE"]
    qrels.parent.mkdir(parents=True, exist_ok=True)
    qrels.write_text(_qrels_text())
    (work / env["RUN_FILE"]).write_text(_run_text(regressed))


def _bash(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    # the shell GitHub's `run:` uses (bash --noprofile --norc -eo pipefail {0}), and the
    # options GitLab's runner sets: the script stops at the first failing command
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


# -- GitHub Actions ------------------------------------------------------------------------

def _github_job() -> tuple[dict, dict]:
    doc = yaml.safe_load((CI_FILES / "github-actions.yml").read_text())
    assert doc[True]["schedule"], "a nightly schedule"   # YAML 1.1 reads `on:` as True
    (job,) = doc["jobs"].values()
    return doc, job


def _github_night(service: str, work: Path, number: int, regressed: set[str]) -> Night:
    doc, job = _github_job()
    settings = {"CRANFIELD_SERVER": service, "CRANFIELD_API_KEY": KEYS["github"]}
    github_env = work / f"github-env-{number}"
    env = _base_env({"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(work),
                     "GITHUB_SHA": f"{number:x}" * 40, "GITHUB_RUN_NUMBER": str(number),
                     "GITHUB_RUN_ID": str(9000 + number), "GITHUB_ENV": str(github_env),
                     "GITHUB_EVENT_NAME": "schedule"})
    env.update(_filled(doc.get("env"), settings))
    env.update(_filled(job.get("env"), settings))
    _prepare(work, env, regressed)
    night = Night()
    for i, step in enumerate(job["steps"]):
        if "uses" in step or not CALLS_CRANFIELD.search(step.get("run", "")):
            continue  # an action (checkout, setup-python, upload-artifact), pip, the engine
        summary = work / f"summary-{number}-{i}.md"
        summary.touch()
        github_env.touch()
        step_env = {**env, **_filled(step.get("env"), settings),
                    "GITHUB_STEP_SUMMARY": str(summary)}
        done = _bash(step["run"], work, step_env)
        night.ran.append(step.get("name", ""))
        night.stdout += done.stdout
        night.stderr += done.stderr
        night.summary += summary.read_text()
        # what a step appended to $GITHUB_ENV is in the environment of the steps after it
        for line in github_env.read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                env[key] = value
        if done.returncode != 0:
            night.exit_status, night.failed_step = done.returncode, step.get("name")
            break
    return night


# -- GitLab CI -----------------------------------------------------------------------------

def _gitlab_job() -> tuple[dict, dict]:
    doc = yaml.safe_load((CI_FILES / "gitlab-ci.yml").read_text())
    (job,) = [v for v in doc.values() if isinstance(v, dict) and "script" in v]
    return doc, job


def _gitlab_night(service: str, work: Path, number: int, regressed: set[str]) -> Night:
    doc, job = _gitlab_job()
    # project CI/CD variables, then the file's own (GitLab's precedence puts the project's
    # first; the file here names neither)
    env = _base_env({"CI": "true", "GITLAB_CI": "true", "CI_PROJECT_DIR": str(work),
                     "CI_COMMIT_SHA": f"{number:x}" * 40, "CI_PIPELINE_IID": str(number),
                     "CI_PIPELINE_SOURCE": "schedule",
                     "CRANFIELD_SERVER": service, "CRANFIELD_API_KEY": KEYS["gitlab"]})
    env.update({k: str(v) for k, v in (doc.get("variables") or {}).items()})
    env.update({k: str(v) for k, v in (job.get("variables") or {}).items()})
    _prepare(work, env, regressed)
    # one shell for the job's lines, as the runner has: a variable set by one line (QRELS) is
    # there for the next
    lines = [line for line in [*job.get("before_script", []), *job["script"]]
             if CALLS_CRANFIELD.search(line)]
    done = _bash("\n".join(lines), work, env)
    return Night(done.returncode, "script" if done.returncode else None, done.stdout,
                 done.stderr, "", lines)


# -- the checks, the same for both ---------------------------------------------------------

def _gate_line(commands: list[str]) -> str:
    (gate,) = [c for c in commands if re.search(r"\bcranfield\s+gate\b", c)]
    return gate


def _outputs(gate: str) -> tuple[str, str]:
    junit = re.search(r"--junit\s+(\S+)", gate).group(1)
    markdown = re.search(r"--markdown\s+(\S+)", gate).group(1)
    return junit, markdown


def _check_failed_night(night: Night, work: Path, gate: str) -> tuple[str, str]:
    assert night.exit_status == 3, (night.failed_step, night.stdout, night.stderr)
    junit, markdown = _outputs(gate)
    suite = ET.parse(work / junit).getroot()
    if suite.tag == "testsuites":
        (suite,) = suite
    assert suite.get("name") == "cranfield gate"
    gated = re.findall(r"--gate\s+([^\s:]+):", gate)
    cases = suite.findall("testcase")
    assert len(cases) == len(gated) == 2
    for case in cases:
        failure = case.find("failure")
        assert failure is not None and failure.get("type") != "undecided", ET.tostring(case)
        message = " ".join(filter(None, [failure.get("message"), failure.text]))
        named = set(TOPIC.findall(message))
        assert named and named <= REGRESSED, message       # the topics that fell
        assert re.search(r"\bp\b", message), message
    text = (work / markdown).read_text()
    assert "FAIL" in text and set(TOPIC.findall(text)) <= REGRESSED
    return junit, markdown


def _recorded(service: str, tenant: str, system: str) -> list[dict]:
    status, _, page = call(service, "GET", f"/v1/systems/{system}/results",
                           headers={"Authorization": f"Bearer {KEYS[tenant]}"})
    assert status == 200, page
    return page["items"]


def test_the_github_actions_workflow(service, tmp_path):
    doc, job = _github_job()
    runs = [s.get("run", "") for s in job["steps"]]
    assert all("${{" not in r for r in runs), "expressions in a script: pass them by env"
    gate = _gate_line(runs)
    junit, markdown = _outputs(gate)
    uploaded = [s for s in job["steps"] if str(s.get("uses", "")).startswith(
        "actions/upload-artifact")]
    assert uploaded and uploaded[0]["if"] == "always()"
    assert {junit, markdown} <= set(uploaded[0]["with"]["path"].split())

    first = _github_night(service, tmp_path, 1, set())
    assert (first.exit_status, first.failed_step) == (0, None), (first.stdout, first.stderr)
    assert first.ran == ["Store the qrels", "Evaluate, record and gate tonight's run"]
    second = _github_night(service, tmp_path, 2, set())
    assert second.exit_status == 0, (second.stdout, second.stderr)
    assert "::error" not in second.stdout and "PASS" in second.summary
    third = _github_night(service, tmp_path, 3, REGRESSED)
    assert third.failed_step == "Evaluate, record and gate tonight's run"
    _check_failed_night(third, tmp_path, gate)
    # annotations: one ::error per failed check, naming its measure
    errors = [line for line in third.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 2, third.stdout
    assert any("ndcg" in e for e in errors) and any("map" in e for e in errors)
    assert "FAIL" in third.summary and "|" in third.summary  # the table, in the job summary

    system = doc["env"]["SYSTEM"]
    history = _recorded(service, "github", system)
    assert [r["commit"] for r in history] == [f"{n:x}" * 40 for n in (3, 2, 1)]
    assert all(str(n) in r["label"] for n, r in zip((3, 2, 1), history, strict=True))
    status, _, pinned = call(service, "GET", f"/v1/systems/{system}/baseline",
                             headers={"Authorization": f"Bearer {KEYS['github']}"})
    assert status == 200 and pinned["id"] == history[-1]["id"]


def test_the_gitlab_ci_job(service, tmp_path):
    doc, job = _gitlab_job()
    gate = _gate_line(job["script"])
    junit, markdown = _outputs(gate)
    assert job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == junit
    assert {junit, markdown} <= set(job["artifacts"]["paths"])

    first = _gitlab_night(service, tmp_path, 1, set())
    assert first.exit_status == 0, (first.stdout, first.stderr)
    assert len(first.ran) == 2  # qrels put, gate (not pip, not the engine)
    second = _gitlab_night(service, tmp_path, 2, set())
    assert second.exit_status == 0, (second.stdout, second.stderr)
    third = _gitlab_night(service, tmp_path, 3, REGRESSED)
    _check_failed_night(third, tmp_path, gate)
    assert "::error" not in third.stdout  # GitHub's annotations only under GitHub Actions

    system = job["variables"]["SYSTEM"]
    history = _recorded(service, "gitlab", system)
    assert [r["commit"] for r in history] == [f"{n:x}" * 40 for n in (3, 2, 1)]
    assert all(str(n) in r["label"] for n, r in zip((3, 2, 1), history, strict=True))
