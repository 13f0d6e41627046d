"""Kept runs with real processes (issue #31): gunicorn (2 web workers) and a ``cranfield
worker`` on a private Redis, recording in PostgreSQL (127.0.0.1:5432, a database made and
dropped here; failing under CI=true without it) and in a SQLite file both processes share.

The same run is recorded with ``keep_run`` synchronously, queued and sharded (the worker's
combine step reads the pieces back), and by ``cranfield eval --record --keep-run``: one kept
run, counted in the database itself. ``GET /v1/results/{id}/run`` streams the canonical text
(read back, the digest; evaluated again, the recorded numbers) and the stored
Parquet bytes (equal to the chunk rows, concatenated); a run of 300,000 lines spans several
chunks of at most 1 MiB. Deleting the results one by one keeps the run until the last goes,
then its rows and chunks are gone."""

from __future__ import annotations

import os
import random
import subprocess
import urllib.request

import pytest
from servers import BODY, CRANFIELD, ROOT, call, running_gunicorn, running_worker, wait_job
from sqlalchemy import create_engine, text

import cranfield
from backend.kept_runs import canonical_sha256

PARQUET = "application/vnd.apache.parquet"
MEASURES = ["map", "P.10", "ndcg_cut.10", "num_ret", "runid"]


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def database(request, results_postgres, tmp_path_factory):
    """The module's PostgreSQL database (None without a server: the tests then require it),
    or a SQLite file."""
    if request.param == "postgresql":
        return results_postgres
    return f"sqlite:///{tmp_path_factory.mktemp('kept') / 'results.db'}"


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


def sql(database: str, query: str, **params):
    engine = create_engine(database)
    try:
        with engine.connect() as connection:
            return connection.execute(text(query), params).all()
    finally:
        engine.dispose()


def counts(database: str) -> tuple[int, int]:
    """(kept runs, chunk rows), read from the database itself."""
    return (sql(database, "SELECT count(*) FROM kept_runs")[0][0],
            sql(database, "SELECT count(*) FROM kept_run_chunks")[0][0])


def get(api: str, path: str, accept: str = "text/plain") -> tuple[int, dict, bytes]:
    req = urllib.request.Request(api + path, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def record(label: str) -> dict:
    return {"system": "bm25", "label": label, "keep_run": True}


def queued(api: str, body: dict) -> dict:
    status, headers, job = call(api, "POST", "/v1/evaluations", body,
                                {"Prefer": "respond-async"})
    assert status == 202, job
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    return done["result"]


def test_one_kept_run_for_every_way_in_and_gone_with_its_last_result(api, worker, database,
                                                                     require):
    require(database is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    body = {"run": BODY["run"], "qrels": BODY["qrels"], "measures": MEASURES}
    status, _, sync = call(api, "POST", "/v1/evaluations", {**body, "record": record("sync")})
    assert status == 200, sync
    digest = sync["recorded"]["run_sha256"]
    sharded = queued(api, {**body, "record": record("sharded")})
    assert sharded["provenance"]["shards"] == 2  # the combine step kept the whole run
    assert sharded["recorded"]["run_sha256"] == digest
    assert sharded["aggregate"] == sync["aggregate"]

    qrels = ROOT / "tests" / "data" / "trec_eval" / "qrels.test"
    run = ROOT / "tests" / "data" / "trec_eval" / "results.test"
    cli = subprocess.run([CRANFIELD, "eval", "--server", api, "--record",
                          "system=bm25,label=cli", "--keep-run", "-m", "map", str(qrels),
                          str(run)], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ), timeout=300)
    assert cli.returncode == 0, cli.stderr
    cli_id = cli.stderr.split("recorded as ")[1].split()[0].strip(".")
    status, _, summary = call(api, "GET", f"/v1/results/{cli_id}")
    assert status == 200 and summary["run_sha256"] == digest

    ids = [sync["recorded"]["id"], sharded["recorded"]["id"], cli_id]
    assert counts(database)[0] == 1
    chunks = counts(database)[1]
    assert sql(database, "SELECT count(*) FROM results WHERE run_sha256 = :d",
               d=digest)[0][0] == 3

    status, headers, text_body = get(api, f"/v1/results/{ids[1]}/run")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert canonical_sha256(cranfield.read_run(text_body)) == digest
    status, _, again = call(api, "POST", "/v1/evaluations",
                            {**body, "run": text_body.decode()})
    assert status == 200 and again["aggregate"] == sync["aggregate"]
    assert again["per_topic"] == sync["per_topic"]

    status, headers, stored = get(api, f"/v1/results/{ids[0]}/run", PARQUET)
    assert status == 200 and headers["Content-Type"] == PARQUET
    rows = sql(database, "SELECT c.data FROM kept_run_chunks c JOIN kept_runs r "
                         "ON r.pk = c.run_pk WHERE r.sha256 = :d ORDER BY c.seq", d=digest)
    assert stored == b"".join(bytes(r[0]) for r in rows)
    assert cranfield.read_run(stored).to_dict() == cranfield.read_run(
        BODY["run"].encode()).to_dict()

    for i, result_id in enumerate(ids):
        assert call(api, "DELETE", f"/v1/results/{result_id}")[0] == 204
        assert counts(database) == ((1, chunks) if i < 2 else (0, 0))
    status, _, problem = call(api, "GET", f"/v1/results/{ids[0]}/run")
    assert status == 404 and "no result" in problem["detail"]


def test_a_large_run_spans_bounded_chunks(api, worker, database, require):
    require(database is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    rng = random.Random(31)
    topics = [f"t{i:03d}" for i in range(300)]
    lines, qrels = [], []
    for topic in topics:
        for rank in range(1000):
            doc = f"{rng.getrandbits(64):016x}"
            lines.append(f"{topic} Q0 {doc} {rank + 1} {rng.random():.6f} big\n")
            if rank % 97 == 0:
                qrels.append(f"{topic} 0 {doc} {rng.randint(0, 2)}\n")
    run_text = "".join(lines)
    body = {"run": run_text, "qrels": "".join(qrels), "measures": ["map", "ndcg_cut.10"],
            "record": record("large")}
    status, _, doc = call(api, "POST", "/v1/evaluations", body)
    assert status == 200, doc
    digest = doc["recorded"]["run_sha256"]
    (n_chunks, n_bytes, n_rows), = sql(database, "SELECT n_chunks, n_bytes, n_rows FROM "
                                                 "kept_runs WHERE sha256 = :d", d=digest)
    sizes = [r[0] for r in sql(database, "SELECT length(c.data) FROM kept_run_chunks c JOIN "
                                         "kept_runs r ON r.pk = c.run_pk WHERE r.sha256 = :d",
                               d=digest)]
    assert n_rows == 300_000 and n_chunks == len(sizes) >= 2
    assert max(sizes) == 1 << 20 and sum(sizes) == n_bytes
    status, _, body_text = get(api, f"/v1/results/{doc['recorded']['id']}/run")
    assert status == 200
    assert canonical_sha256(cranfield.read_run(body_text)) == digest
    assert len(body_text.splitlines()) == 300_000
    assert cranfield.read_run(body_text).to_dict() == cranfield.read_run(
        run_text.encode()).to_dict()
    assert call(api, "DELETE", f"/v1/results/{doc['recorded']['id']}")[0] == 204
    assert counts(database) == (0, 0)
