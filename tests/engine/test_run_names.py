"""Names of runs (issue #25): default run names are unique and telling — the file name's stem,
and where stems collide the shortest path suffix that tells the runs apart (``a/results-cata``
and ``b/results-cata``, not ``results-cata.txt`` and ``results-cata.txt#2``) — in the CLI's
compare and pool, and for files uploaded to the API (one rule:
cranfield.compare.comparison.run_names)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cranfield.cli import main
from cranfield.compare.comparison import run_names

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


@pytest.mark.parametrize("labels, names", [
    # the stem, when it is the run's alone
    (["runs/ql.txt", "runs/rm.txt"], ["ql", "rm"]),
    (["ql"], ["ql"]),
    # stems collide, file names do not: the file names
    (["a/ql.txt", "b/ql.run"], ["ql.txt", "ql.run"]),
    (["results.test", "results.trunc"], ["results.test", "results.trunc"]),
    # file names collide: as many folders as tell them apart, without the extension
    (["a/results-cata.txt", "b/results-cata.txt"], ["a/results-cata", "b/results-cata"]),
    (["/home/ci/night-1/results-cata.txt", "/home/ci/night-2/results-cata.txt"],
     ["night-1/results-cata", "night-2/results-cata"]),
    (["x/a/r.txt", "y/a/r.txt", "b/r.txt"], ["x/a/r", "y/a/r", "b/r"]),
    (["a/x/r.txt", "b/x/r.txt", "a/y/r.txt"], ["a/x/r", "b/x/r", "y/r"]),
    (["../a/r.txt", "../b/r.txt"], ["a/r", "b/r"]),
    (["./a/r.txt", "b/r.txt"], ["a/r", "b/r"]),
    # a shorter path is told apart by its own whole path
    (["ql.txt", "a/ql.txt"], ["ql", "a/ql"]),
    (["a/r", "b/a/r"], ["a/r", "b/a/r"]),
    # the extension is kept only where it is what tells them apart
    (["a/r.txt", "a/r.tsv", "b/r.txt"], ["a/r.txt", "r.tsv", "b/r"]),
    # runs that collide leave the others alone
    (["a/r.txt", "b/r.txt", "c/ql.txt"], ["a/r", "b/r", "ql"]),
    # nothing tells them apart (the same path twice): numbered in order
    (["a/ql.txt", "a/ql.txt"], ["a/ql.txt", "a/ql.txt#2"]),
    (["r.txt", "r.txt", "r.txt"], ["r.txt", "r.txt#2", "r.txt#3"]),
    # stdin and unnamed runs
    (["-", "ql"], ["stdin", "ql"]),
    (["-", "stdin.txt"], ["stdin", "stdin.txt"]),
    ([None, "x.txt", ""], ["run1", "x", "run3"]),
])
def test_default_run_names_are_unique_and_telling(labels, names):
    got = run_names(labels)
    assert got == names
    assert len(set(got)) == len(got)


def test_many_colliding_names_stay_linear_and_unique():
    labels = [f"night-{i}/results-cata.txt" for i in range(2000)]
    got = run_names(labels)
    assert got[:2] == ["night-0/results-cata", "night-1/results-cata"]
    assert len(set(got)) == 2000


def _two_folders(tmp_path: Path) -> list[str]:
    paths = []
    for folder, source in (("a", "results.test"), ("b", "results.trunc")):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "results-cata.txt"
        path.write_text((DATA / source).read_text())
        paths.append(str(path))
    return paths


def test_cli_compare_names_runs_by_their_folders_in_every_table(tmp_path, capsys):
    runs = _two_folders(tmp_path)
    qrels = str(DATA / "qrels.test")
    assert main(["compare", "--format", "json", "-m", "map", qrels, *runs]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in doc["runs"]] == ["a/results-cata", "b/results-cata"]
    assert doc["pairs"][0]["a"] == "a/results-cata" and doc["pairs"][0]["b"] == "b/results-cata"
    assert main(["compare", "-m", "map", qrels, *runs]) == 0
    text = capsys.readouterr().out
    assert "b/results-cata vs a/results-cata" in text and "#2" not in text
    assert main(["compare", "--format", "html", "-m", "map", qrels, *runs]) == 0
    html = capsys.readouterr().out
    assert "<title>Cranfield comparison: a/results-cata vs b/results-cata</title>" in html
    assert "#2" not in html


def test_uploaded_files_are_named_by_the_same_rule(tmp_path):
    from service.app import create_app

    client = create_app({"TESTING": True}).test_client()
    runs = _two_folders(tmp_path)
    resp = client.post("/v1/comparisons", data={
        "runs": [(io.BytesIO(Path(p).read_bytes()), f"{Path(p).parent.name}/results-cata.txt")
                 for p in runs],
        "qrels": (io.BytesIO((DATA / "qrels.test").read_bytes()), "qrels.txt"),
        "measures": "map"}, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    assert [r["name"] for r in resp.get_json()["runs"]] == ["a/results-cata", "b/results-cata"]
