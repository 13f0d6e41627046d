"""``cranfield eval --server URL QRELS RUN RUN`` against a live gunicorn (issue #30): the
command, run as a user runs it (a real process), sends the runs in one
``POST /v1/evaluations/batch`` and prints, byte for byte, what the local
``cranfield eval QRELS RUN RUN`` prints for the same files: trec blocks with their runid
lines, csv's run column, jsonl's run key. A bad run is refused by the service and the command
exits as the local one does, naming the same run."""

from __future__ import annotations

import subprocess

import pytest
from servers import CRANFIELD, DATA, ROOT

RUNS = [str(DATA / "results.test"), str(DATA / "results.trunc")]
QRELS = str(DATA / "qrels.test")


def cranfield(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([CRANFIELD, *argv], capture_output=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("options", [["-m", "map", "-m", "P.5", "-q"],
                                     ["-m", "ndcg_cut.10", "-m", "recip_rank"],
                                     ["--format", "csv", "-m", "map", "-m", "bpref", "-q"],
                                     ["--format", "jsonl", "-m", "map", "-m", "P.10"]])
def test_eval_server_many_runs_prints_what_local_prints(live_server, options):
    local = cranfield("eval", *options, QRELS, *RUNS)
    remote = cranfield("eval", "--server", live_server, *options, QRELS, *RUNS)
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout == local.stdout
    # both runs are there, in order, with their own numbers
    text = local.stdout.decode()
    first, second = text.find("results.test"), text.find("results.trunc")
    if "--format" not in options:  # trec blocks are named by runid, not file
        assert text.count("\tall\t") >= 4
    else:
        assert 0 <= first < second


def test_eval_server_many_runs_numbers_equal_single_runs(live_server):
    """Each run's block equals what ``cranfield eval QRELS RUN`` prints for it alone."""
    both = cranfield("eval", "--server", live_server, "-m", "map", "-m", "P.5", QRELS, *RUNS)
    assert both.returncode == 0, both.stderr
    singles = b"".join(cranfield("eval", "-m", "runid", "-m", "map", "-m", "P.5", QRELS,
                                 run).stdout for run in RUNS)
    assert both.stdout == singles


def test_eval_server_many_runs_refuses_a_bad_run_as_locally(live_server, tmp_path):
    bad = tmp_path / "bad.run"
    bad.write_text("1 Q0 doc1 1 notascore tag\n")
    local = cranfield("eval", "-m", "map", QRELS, RUNS[0], str(bad))
    remote = cranfield("eval", "--server", live_server, "-m", "map", QRELS, RUNS[0], str(bad))
    assert local.returncode != 0 and remote.returncode != 0
    said_locally = local.stderr.decode().removeprefix("cranfield: ").strip()
    assert said_locally == f"{bad}:1: score: 'notascore' is not a number"
    # the service's sentence, with its runs[1].run said as the file the user named
    assert remote.stderr.decode().startswith(f"cranfield: HTTP 422: {said_locally}")
    assert "runs[1]" not in remote.stderr.decode()
