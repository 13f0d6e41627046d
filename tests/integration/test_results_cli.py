"""``cranfield eval --server URL --record …`` and ``cranfield history`` against gunicorn:
three nights recorded from the command line, listed newest first, and a measure's trend
whose means are the local evaluations' numbers."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from servers import CRANFIELD, DATA, ROOT

import cranfield


def cranfield_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CRANFIELD, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """results.test, then two copies whose rankings lose a little each night (the last
    document of each topic moved to the top)."""
    lines = (DATA / "results.test").read_text().splitlines()
    paths = [DATA / "results.test"]
    for night in (1, 2):
        by_topic: dict[str, list[list[str]]] = {}
        for line in lines:
            fields = line.split()
            by_topic.setdefault(fields[0], []).append(fields)
        out = []
        for rows in by_topic.values():
            rows = rows[-night:] + rows[:-night]
            out += [f"{r[0]} Q0 {r[2]} {i + 1} {1000 - i} night{night}"
                    for i, r in enumerate(rows)]
        path = tmp_path_factory.mktemp("nights") / f"night{night}.txt"
        path.write_text("\n".join(out) + "\n")
        paths.append(path)
    return paths


def test_record_three_nights_and_read_the_history(live_server, nights):
    qrels = str(DATA / "qrels.test")
    for i, run in enumerate(nights):
        done = cranfield_cli("eval", "--server", live_server, "-m", "map", "--record",
                             f"system=cli-nightly,label=night-{i},tags=ci;night",
                             qrels, str(run))
        assert done.returncode == 0, done.stderr
        local = cranfield_cli("eval", "-m", "map", qrels, str(run))
        assert done.stdout == local.stdout  # trec_eval's text, as without --record
    listed = cranfield_cli("history", "cli-nightly", "--server", live_server, "--format",
                           "json")
    assert listed.returncode == 0, listed.stderr
    page = json.loads(listed.stdout)
    assert [r["label"] for r in page["items"]] == ["night-2", "night-1", "night-0"]
    assert all(r["tags"] == ["ci", "night"] for r in page["items"])

    trend = cranfield_cli("history", "cli-nightly", "--server", live_server, "--measure",
                          "map", "--format", "json")
    assert trend.returncode == 0, trend.stderr
    points = json.loads(trend.stdout)["points"]
    expected = [cranfield.evaluate(qrels, str(run), ["map"]).aggregate["map"]
                for run in nights]
    assert [p["label"] for p in points] == ["night-0", "night-1", "night-2"]
    assert [p["mean"] for p in points] == pytest.approx(expected, abs=1e-12)
    assert expected[0] > expected[2]  # the nights do get worse

    table = cranfield_cli("history", "cli-nightly", "--server", live_server, "--measure",
                          "map")
    assert table.returncode == 0, table.stderr
    rows = table.stdout.splitlines()
    # the qrels each point was scored under (issue #31): inline qrels, by their digest
    assert rows[0].split()[:4] == ["recorded", "label", "qrels", "map"]
    assert [r.split()[1] for r in rows[1:]] == ["night-0", "night-1", "night-2"]
    digest = hashlib.sha256(Path(qrels).read_bytes()).hexdigest()[:12]
    assert {r.split()[2] for r in rows[1:]} == {f"sha256:{digest}"}
    assert rows[1].split()[3] == f"{expected[0]:.4f}"


def test_history_of_an_unknown_system_is_a_clear_error(live_server):
    done = cranfield_cli("history", "no-such-system", "--server", live_server)
    assert done.returncode == 6  # not found (the nightly CLI's exit codes)
    assert done.stderr.startswith("cranfield: ") and "no-such-system" in done.stderr


def test_history_shows_gate_verdicts_the_baseline_and_windows(live_server, nights):
    from servers import call

    qrels = str(DATA / "qrels.test")
    for i, run in enumerate(nights):
        done = cranfield_cli("eval", "--server", live_server, "-m", "map", "--record",
                             f"system=cli-gated,label=night-{i}", qrels, str(run))
        assert done.returncode == 0, done.stderr
    listed = json.loads(cranfield_cli("history", "cli-gated", "--server", live_server,
                                      "--format", "json").stdout)["items"]
    ids = {r["label"]: r["id"] for r in listed}
    status, _, _ = call(live_server, "PUT", "/v1/systems/cli-gated/baseline",
                        {"result_id": ids["night-0"]})
    assert status == 200
    status, _, doc = call(live_server, "POST", "/v1/comparisons", {
        "runs": [{"result_id": ids["night-2"]}], "measures": ["map"],
        "baseline": {"system": "cli-gated"}, "gate": "map:0"})
    assert status == 200, doc
    verdict = doc["gate"]["verdict"]
    table = cranfield_cli("history", "cli-gated", "--server", live_server, "--measure", "map")
    assert table.returncode == 0, table.stderr
    head, *rows = table.stdout.splitlines()
    assert head.split()[7:10] == ["gate", "baseline", "id"]  # after "95% CI" and topics
    cells = {r.split()[1]: r.split() for r in rows}  # an empty baseline cell: no word
    assert cells["night-0"][7:9] == ["-", "*"] and cells["night-1"][7:9] == ["-", ids["night-1"]]
    assert cells["night-2"][7:9] == [verdict, ids["night-2"]]
    newest = cranfield_cli("history", "cli-gated", "--server", live_server, "--measure", "map",
                           "--limit", "2", "--format", "json")
    assert [p["label"] for p in json.loads(newest.stdout)["points"]] == ["night-1", "night-2"]
    since = listed[1]["created_at"]  # night-1's time: it and night-2
    window = cranfield_cli("history", "cli-gated", "--server", live_server, "--since", since,
                           "--format", "json")
    assert [r["label"] for r in json.loads(window.stdout)["items"]] == ["night-2", "night-1"]
