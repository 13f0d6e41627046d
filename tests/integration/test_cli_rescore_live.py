"""Re-scoring and stability from the command line, walked as a user walks it (issue #31), with
real processes: gunicorn (2 web workers, runs cut into 2 shards) queueing on a private
redis-server, a ``cranfield worker``, the results in PostgreSQL at 127.0.0.1:5432 (a database
made and dropped here; failing under CI=true without it) and in a SQLite file, and real
``cranfield`` processes.

A team stores qrels v1 with the depth of its pool (``cranfield qrels put --pool-depth``),
records two nights of three systems with their runs kept (``cranfield eval --record ...
--keep-run``), judges deeper (v2: v1 and about 20% more judgments, ``--pool-depth`` 20), then
``cranfield rescore bm25 dense splade --qrels-id adhoc@V2 --wait``: the re-score's id, progress
lines on standard error, every item done (exit 0), each new result holding the library's
numbers for the kept run under v2. ``cranfield stability --measure map --from V1 --to V2``
prints GET /v1/stability's text/plain byte for byte; its JSON's Kendall tau is scipy's on the
means it lists, and each mean the library's on the night it pairs."""

from __future__ import annotations

import json
import os
import random
import subprocess
import urllib.request

import pytest
from scipy.stats import kendalltau
from servers import CRANFIELD, ROOT, running_gunicorn, running_worker

import cranfield
from cranfield.client import Client

SYSTEMS = {"bm25": 0.2, "dense": 0.5, "splade": 0.9}
TOPICS = [str(401 + t) for t in range(10)]
MEASURES = ["map", "P.5"]


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def database(request, results_postgres, tmp_path_factory):
    """The module's PostgreSQL database (None without a server: the test then requires it),
    or a SQLite file shared by gunicorn and the worker."""
    if request.param == "postgresql":
        return results_postgres
    return f"sqlite:///{tmp_path_factory.mktemp('rescore') / 'results.db'}"


@pytest.fixture(scope="module")
def api(redis_server, database):
    if database is None:
        yield None
        return
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_WORKERS": "2",
                           "CRANFIELD_DATABASE_URL": database, "CRANFIELD_SHARDS": "2",
                           "CRANFIELD_SHARD_MIN_BYTES": "1000"}) as url:
        yield url


@pytest.fixture(scope="module")
def worker(redis_server, database, api):  # after the API: it has migrated the database
    if database is None:
        yield None
        return
    with running_worker(redis_server.url, database) as proc:
        yield proc


def cli(*args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRANFIELD_")}
    return subprocess.run([CRANFIELD, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=600)


def text_plain(api: str, path: str) -> str:
    req = urllib.request.Request(api + path, headers={"Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return resp.read().decode()


def files(folder) -> tuple:
    """(v1, v2, {system: [night run files]}): 10 topics of 30 documents; v1 judges the first
    10 of each, v2 two more (20% more judgments); a system's scores lean on v2's grades by
    its skill."""
    rng = random.Random(31)
    v1, v2 = [], []
    grades = {}
    for t in TOPICS:
        for k in range(12):
            grades[(t, f"d{t}-{k:02d}")] = rng.choice((0, 0, 1, 2))
            (v1 if k < 10 else v2).append(f"{t} 0 d{t}-{k:02d} {grades[(t, f'd{t}-{k:02d}')]}")
    v2 = v1 + v2
    paths = {}
    for name, lines in (("v1", v1), ("v2", v2)):
        paths[name] = folder / f"{name}.txt"
        paths[name].write_text("\n".join(lines) + "\n")
    runs: dict[str, list] = {}
    for system, skill in SYSTEMS.items():
        for night in range(2):
            lines = [f"{t} Q0 d{t}-{k:02d} 0 {rng.random() + skill * grades.get((t, f'd{t}-{k:02d}'), 0):.6f} {system}"  # noqa: E501
                     for t in TOPICS for k in range(30)]
            path = folder / f"{system}-{night}.txt"
            path.write_text("\n".join(lines) + "\n")
            runs.setdefault(system, []).append(path)
    return paths["v1"], paths["v2"], runs


def test_rescore_and_stability_from_the_command_line(api, worker, database, require,
                                                      tmp_path):
    require(database is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    # (the stored qrels live in the module's one Redis: an id of each database's own)
    qrels_id = "adhoc-sqlite" if database.startswith("sqlite") else "adhoc-pg"
    v1_file, v2_file, runs = files(tmp_path)
    put = cli("qrels", "put", qrels_id, v1_file, "--pool-depth", 10, "--server", api)
    assert put.returncode == 0, put.stderr
    v1 = put.stdout.strip()
    originals = {}
    for system, paths in runs.items():
        for night, path in enumerate(paths):
            done = cli("eval", "--server", api, "--qrels-id", qrels_id, "--record",
                       f"system={system},label=night-{night}", "--keep-run",
                       *[a for m in MEASURES for a in ("-m", m)], "-", path)
            assert done.returncode == 0, done.stderr
            originals[done.stderr.split("recorded as ")[1].split()[0]] = (system, path)
    put = cli("qrels", "put", qrels_id, v2_file, "--pool-depth", 20, "--server", api)
    assert put.returncode == 0, put.stderr
    v2 = put.stdout.strip()
    assert v2 != v1
    diff = json.loads(cli("qrels", "diff", qrels_id, "--format", "json", "--server", api).stdout)
    assert (diff["from"]["pool_depth"], diff["to"]["pool_depth"]) == (10, 20)
    assert diff["totals"]["added"] == 2 * len(TOPICS)

    # the re-score, followed to its end
    rescored = cli("rescore", *SYSTEMS, "--qrels-id", v2, "--wait", "--server", api)
    assert rescored.returncode == 0, rescored.stderr
    lines = rescored.stdout.splitlines()
    rescore_id = lines[0]
    progress = rescored.stderr.splitlines()
    assert progress and all(p.startswith(f"cranfield: rescore {rescore_id}: ")
                            for p in progress)
    assert progress[-1].endswith("finished, 6 of 6 done, 0 failed, 0 skipped, 0 queued")
    rows = [line.split() for line in lines[2:]]
    assert sorted(r[0] for r in rows) == sorted(originals)
    client = Client(api)
    status = client.rescore_status(rescore_id)
    assert status["state"] == "finished" and status["systems"] == list(SYSTEMS)
    for original_id, system, state, new_id in rows:
        assert (system, state) == (originals[original_id][0], "done")
        new = client.result(new_id)
        assert new["qrels_version"] == v2
        assert new["document"]["provenance"]["rescores"] == original_id
        library = cranfield.evaluate(str(v2_file), str(originals[original_id][1]),
                                     MEASURES).aggregate
        for key in ("map", "P_5"):
            assert new["aggregate"][key] == pytest.approx(float(library[key]), abs=1e-12)
    # again: done at once with the same new results (the Python client, one system)
    again = client.rescore("bm25", v2, wait=True, timeout=300)
    assert again["done"] == 2 and set(again["new_result_ids"]) <= {r[3] for r in rows}

    # do the conclusions hold? the route's text, byte for byte
    query = f"/v1/stability?measure=map&from={v1}&to={v2}"
    shown = cli("stability", "--measure", "map", "--from", v1, "--to", v2, "--server", api)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == text_plain(api, query)
    doc = json.loads(cli("stability", "--measure", "map", "--from", v1, "--to", v2,
                         "--format", "json", "--server", api).stdout)
    assert sorted(s["name"] for s in doc["systems"]) == sorted(SYSTEMS)
    before = [s["from"]["mean"] for s in doc["systems"]]
    after = [s["to"]["mean"] for s in doc["systems"]]
    tau = doc["statistics"]["kendall_tau"]
    assert tau["value"] == pytest.approx(kendalltau(before, after).statistic, abs=1e-12)
    by_id = {new: orig for orig, _, _, new in rows}
    for side in doc["systems"]:
        assert side["paired_by"] == "night"
        assert by_id[side["to"]["result_id"]] == side["from"]["result_id"]
        path = originals[side["from"]["result_id"]][1]
        for qrels, mean in ((v1_file, side["from"]["mean"]), (v2_file, side["to"]["mean"])):
            library = cranfield.evaluate(str(qrels), str(path), ["map"]).aggregate["map"]
            assert mean == pytest.approx(float(library), abs=1e-12)
    page = tmp_path / "stability.html"
    saved = cli("stability", "--measure", "map", "--from", v1, "--to", v2, "-o", page,
                "--server", api)
    assert saved.returncode == 0 and saved.stdout == shown.stdout
    assert page.read_text().lstrip().lower().startswith("<!doctype html")
