"""Many judges, walked as a user walks it (issue #31), with real processes: gunicorn (2 web
workers) on a private Redis, its results database (stored qrels, their judges' provenance and
the consensus recipe) in PostgreSQL at 127.0.0.1:5432 (a database made and dropped here;
failing under CI=true without it).

A team has judged qrels from one person and two models, as a Parquet file (topic, judge,
docid, rel) and as judgment-group text. The Parquet file is put with each judge's
provenance (Client.put_qrels, a multipart part beside the judges field), the text by
``cranfield qrels put -R qrels_jg``: one version. ``cranfield qrels agreement ID --server``
prints what the engine computes on the same file (and the route's text/plain; the JSON's
values equal the engine's document); ``cranfield qrels consensus ID --method majority``
stores a new version whose metadata holds the recipe (method, judges, tie, source version,
the models' names and prompt digests); ``cranfield eval --qrels-id ID@VERSION`` against it
prints the numbers the library computes on the same consensus of the same file."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import urllib.request

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from servers import CRANFIELD, ROOT, running_gunicorn

import cranfield
from cranfield.client import Client
from cranfield.judges.agreement_document import agreement_document, format_agreement
from cranfield.judges.consensus import consensus
from cranfield.judges.judged import read_judged

JUDGES = {"nist-7": {"kind": "person", "notes": "NIST assessor, second pass"},
          "umbrela": {"kind": "model", "model": "gpt-4o-2024-08-06",
                      "prompt_digest": "sha256:5f1d0c9e", "notes": "UMBRELA prompt"},
          "llama": {"kind": "model", "model": "llama-3.1-70b-instruct",
                    "prompt_digest": "sha256:0b7e2a41"}}
MEASURES = ["map", "P.5", "ndcg_cut.10", "recip_rank", "num_rel", "num_rel_ret"]


@pytest.fixture(scope="module")
def api(redis_server, results_postgres):
    if results_postgres is None:
        yield None
        return
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_WORKERS": "2",
                           "CRANFIELD_DATABASE_URL": results_postgres}) as url:
        yield url


def judged_files(folder) -> tuple:
    """(the judgment-group text file, the Parquet file, a run file): 8 topics, 15 documents
    each; the person judges all, each model most, grades 0..3 near the person's."""
    rng = random.Random(31)
    rows, run = [], []
    for t in range(8):
        topic = str(401 + t)
        for d in range(15):
            docid = f"doc-{t}-{d:02d}"
            truth = rng.choice((0, 0, 0, 1, 1, 2, 3))
            for judge in JUDGES:
                if judge != "nist-7" and rng.random() < 0.15:
                    continue  # a judgment the model did not make
                grade = truth if judge == "nist-7" else max(0, min(3, truth + rng.choice(
                    (-1, 0, 0, 0, 1))))
                rows.append((topic, judge, docid, grade))
            run.append(f"{topic} Q0 {docid} 0 {rng.random() * 10:.6f} bm25")
        run += [f"{topic} Q0 unjudged-{t}-{k} 0 {rng.random() * 10:.6f} bm25" for k in range(5)]
    text = folder / "judged.txt"
    text.write_text("".join(f"{t} {j} {d} {g}\n" for t, j, d, g in rows))
    table = folder / "judged.parquet"
    pq.write_table(pa.table({"topic": [r[0] for r in rows], "judge": [r[1] for r in rows],
                             "docid": [r[2] for r in rows],
                             "rel": pa.array([r[3] for r in rows], pa.int8())}),
                   table, compression="zstd")
    run_file = folder / "run.txt"
    run_file.write_text("\n".join(run) + "\n")
    return text, table, run_file


def cli(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRANFIELD_")}
    return subprocess.run([CRANFIELD, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def text_plain(api: str, path: str) -> str:
    req = urllib.request.Request(api + path, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.read().decode()


def test_judged_qrels_agreement_consensus_and_evaluation(api, require, tmp_path):
    require(api is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    text, table, run = judged_files(tmp_path)
    client = Client(api)
    put = client.put_qrels("rag", str(table), qrels_format="qrels_jg", judges=JUDGES)
    assert put["qrels_format"] == "qrels_jg" and put["judges"] == JUDGES
    groups = read_judged(text)
    assert put["judgments"] == sum(len(d) for j in groups.topics.values() for d in j.values())
    same = cli("qrels", "put", "rag", str(text), "-R", "qrels_jg", "--server", api)
    assert same.returncode == 0, same.stderr
    assert same.stdout.strip() == f"rag@{put['version']}"  # the text is the same version

    # the agreement: the CLI's text is the engine's on the file, and the route's
    expected = agreement_document(groups, resamples=500, seed=11)
    shown = cli("qrels", "agreement", "rag", "--resamples", "500", "--seed", "11",
                "--server", api)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == format_agreement(expected)
    assert shown.stdout == text_plain(api, "/v1/qrels/rag/agreement?resamples=500&seed=11")
    local = cli("qrels", "agreement", str(table), "--resamples", "500", "--seed", "11")
    assert (local.returncode, local.stdout) == (0, shown.stdout)
    doc = json.loads(cli("qrels", "agreement", "rag", "--resamples", "500", "--seed", "11",
                         "--format", "json", "--server", api).stdout)
    assert {k: doc[k] for k in expected} == expected
    assert doc["provenance"] == JUDGES and doc["qrels"]["version"] == put["version"]
    pair = {tuple(p["judges"]): p for p in doc["overall"]["cohen"]}
    assert set(pair) == {("llama", "nist-7"), ("llama", "umbrela"), ("nist-7", "umbrela")}
    assert 0 < pair[("nist-7", "umbrela")]["kappa_quadratic"] <= 1

    # the consensus: a new version whose metadata holds the recipe
    made = cli("qrels", "consensus", "rag", "--method", "majority", "--server", api)
    assert made.returncode == 0, made.stderr
    ref = made.stdout.strip()
    assert re.fullmatch(r"rag@\S+", ref) and ref != f"rag@{put['version']}"
    meta = client.qrels(ref)
    assert meta["qrels_format"] == "qrels" and meta["versions"][0] == put["version"]
    assert meta["consensus"] == {
        "method": "majority", "judges": sorted(JUDGES), "tie": "lower", "gains": "integer",
        "source": {"id": "rag", "version": put["version"], "sha256": put["sha256"]},
        "provenance": JUDGES}
    derived, recipe = consensus(groups, "majority")
    assert meta["judgments"] == len(derived)
    assert {k: meta["consensus"][k] for k in recipe} == recipe  # the engine's own recipe

    # an evaluation against the consensus version: the library's numbers on the same qrels
    measures = [a for m in MEASURES for a in ("-m", m)]
    done = cli("eval", "--server", api, "--qrels-id", ref, *measures, "-", str(run))
    assert done.returncode == 0, done.stderr
    served = {f[0]: float(f[2]) for f in map(str.split, done.stdout.splitlines())
              if len(f) == 3 and f[1] == "all" and f[0] != "runid"}
    library = cranfield.evaluate(derived, run.read_text(), MEASURES).aggregate
    assert set(served) == {k for k in library if k != "runid"}
    for name, value in served.items():
        assert value == pytest.approx(float(library[name]), abs=5e-5), name
    assert served["num_rel"] == float(sum(1 for j in derived_judgments(derived) if j > 0))


def derived_judgments(qrels) -> list:
    """Every grade of the consensus qrels (the library's Qrels)."""
    return [float(g) for g in qrels.grades]
