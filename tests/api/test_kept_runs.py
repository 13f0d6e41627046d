"""Kept runs (issue #31): ``record.keep_run`` on POST /v1/evaluations (JSON, multipart, queued)
and a system's ``keep_runs`` setting keep the evaluated run once per tenant and content digest
(backend/kept_runs.py); ``GET /v1/results/{id}/run`` reads it back as canonical TREC text (read
back, the result's ``run_sha256``) or as the stored Parquet bytes; deleting the last result
naming a run deletes it. Every response is checked against openapi.yaml; each test runs on
SQLite and on PostgreSQL (conftest)."""

from __future__ import annotations

import hashlib
import io
import json
import struct
from pathlib import Path

import pytest
from conftest import ContractClient, finished_job
from sqlalchemy import func, select

import cranfield
from backend.kept_runs import CHUNK_BYTES, KeptRunChunk, KeptRuns, canonical_sha256
from backend.results import Result
from service.app import create_app
from service.auth import key_line

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = (DATA / "results.test").read_text()
QRELS = (DATA / "qrels.test").read_text()
RESULTS_ON_POSTGRES = True
MEASURES = ["map", "P.5", "ndcg_cut.10", "recall.1000", "runid"]
PARQUET = "application/vnd.apache.parquet"


def record(label: str, **extra) -> dict:
    return {"system": "bm25", "label": label, **extra}


def post_json(client, rec, run=RUN, headers=None):
    return client.post("/v1/evaluations", json={"run": run, "qrels": QRELS,
                                                "measures": MEASURES, "record": rec},
                       headers=headers or {})


def post_form(client, rec, run=RUN, headers=None):
    data = {"run": (io.BytesIO(run.encode() if isinstance(run, str) else run), "run.txt"),
            "qrels": (io.BytesIO(QRELS.encode()), "qrels.txt"),
            "measures": ",".join(MEASURES), "record": json.dumps(rec)}
    return client.post("/v1/evaluations", data=data, content_type="multipart/form-data",
                       headers=headers or {})


def digest_of(text: bytes) -> str:
    """The kept-run digest of a run's text, read back."""
    return canonical_sha256(cranfield.read_run(text))


def kept_counts(app) -> tuple[int, int]:
    """(kept runs, chunk rows) in the app's results database, every tenant's."""
    runs = KeptRuns(app.extensions["results"])
    return runs.count(), runs.count_chunks()


def references(app, digest: str) -> int:
    with app.extensions["results"].engine.connect() as connection:
        return connection.scalar(select(func.count()).select_from(Result)
                                 .where(Result.run_sha256 == digest))


def test_a_kept_run_reads_back_and_evaluates_to_the_same_numbers(app, client):
    resp = post_json(client, record("n1", keep_run=True))
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    digest = doc["recorded"]["run_sha256"]
    result_id = doc["recorded"]["id"]
    assert client.get(f"/v1/results/{result_id}").get_json()["run_sha256"] == digest

    text = client.get(f"/v1/results/{result_id}/run")
    assert text.status_code == 200 and text.mimetype == "text/plain"
    body = text.get_data()
    assert digest_of(body) == digest == text.headers["Cranfield-Run-Sha256"]
    # the same rows as sent (the canonical text reorders and re-spells, nothing else)
    assert cranfield.read_run(body).to_dict() == cranfield.read_run(RUN.encode()).to_dict()
    assert len(body.splitlines()) == len(RUN.splitlines())

    again = post_json(client, None, run=body.decode()).get_json()
    assert again["aggregate"] == doc["aggregate"]
    assert again["per_topic"] == doc["per_topic"]

    parquet = client.get(f"/v1/results/{result_id}/run", headers={"Accept": PARQUET})
    assert parquet.status_code == 200 and parquet.mimetype == PARQUET
    stored = b"".join(KeptRuns(app.extensions["results"]).parquet_chunks(None, digest))
    assert parquet.get_data() == stored  # the stored bytes, byte for byte
    assert int(parquet.headers["Content-Length"]) == len(stored)
    by_form = post_form(client, None, run=parquet.get_data()).get_json()
    assert by_form["aggregate"] == doc["aggregate"] and by_form["per_topic"] == doc["per_topic"]
    # the Python API reads the same run
    read = KeptRuns(app.extensions["results"]).read(None, digest)
    assert read.to_dict() == cranfield.read_run(RUN.encode()).to_dict()
    assert read.runid == cranfield.read_run(RUN.encode()).runid


def test_a_run_is_kept_once_and_goes_with_its_last_result(app, client):
    a = post_json(client, record("n1", keep_run=True)).get_json()["recorded"]
    assert kept_counts(app)[0] == 1
    chunks = kept_counts(app)[1]
    assert chunks >= 1
    # the same run by multipart, and its lines in another order with scores spelled
    # otherwise: one digest, one copy
    b = post_form(client, record("n2", keep_run=True)).get_json()["recorded"]
    respelled = "".join(f"{t} Q0 {d} {r} {s}0 {runid}\n" for t, _, d, r, s, runid in
                        (line.split() for line in reversed(RUN.splitlines())))
    c = post_json(client, record("n3", keep_run=True), run=respelled).get_json()["recorded"]
    assert a["run_sha256"] == b["run_sha256"] == c["run_sha256"]
    assert kept_counts(app) == (1, chunks)
    assert references(app, a["run_sha256"]) == 3

    assert client.delete(f"/v1/results/{a['id']}").status_code == 204
    assert kept_counts(app) == (1, chunks)
    assert client.get(f"/v1/results/{b['id']}/run").status_code == 200
    assert client.delete(f"/v1/results/{b['id']}").status_code == 204
    assert kept_counts(app) == (1, chunks)
    assert client.delete(f"/v1/results/{c['id']}").status_code == 204
    assert kept_counts(app) == (0, 0)
    assert references(app, a["run_sha256"]) == 0


def test_another_run_is_another_copy(app, client):
    a = post_json(client, record("n1", keep_run=True)).get_json()["recorded"]
    # a mapping has no runid (cranfield's): its canonical text differs in the last field
    mapping = cranfield.read_run(RUN.encode()).to_dict()
    m = post_json(client, record("m", keep_run=True), run=mapping).get_json()["recorded"]
    assert m["run_sha256"] != a["run_sha256"] and kept_counts(app)[0] == 2
    text = client.get(f"/v1/results/{m['id']}/run").get_data().decode()
    assert text.splitlines()[0].endswith(" cranfield")
    client.delete(f"/v1/results/{m['id']}")
    other = RUN.replace(" 1.0", " 0.5", 1)
    b = post_json(client, record("n2", keep_run=True), run=other).get_json()["recorded"]
    assert a["run_sha256"] != b["run_sha256"]
    assert kept_counts(app)[0] == 2
    client.delete(f"/v1/results/{a['id']}")
    assert kept_counts(app)[0] == 1
    got = client.get(f"/v1/results/{b['id']}/run").get_data()
    assert digest_of(got) == b["run_sha256"]


def test_no_kept_run_is_a_404_naming_why(client):
    doc = post_json(client, record("n1")).get_json()
    assert "run_sha256" not in doc["recorded"]
    resp = client.get(f"/v1/results/{doc['recorded']['id']}/run")
    assert resp.status_code == 404 and resp.mimetype == "application/problem+json"
    problem = resp.get_json()
    assert problem["type"].endswith("no-kept-run") and "kept no run" in problem["detail"]
    missing = client.get(f"/v1/results/{'0' * 32}/run").get_json()
    assert missing["status"] == 404 and "no result" in missing["detail"]
    assert client.get("/v1/results/xyz/run").status_code == 422


BAD = ["yes", 1, [], {"a": 1}]


@pytest.mark.parametrize("value", BAD)
def test_a_bad_keep_run_is_a_422_naming_it(app, client, value):
    for post in (post_json, post_form):
        resp = post(client, record("n1", keep_run=value))
        assert resp.status_code == 422, resp.get_json()
        assert "record.keep_run" in resp.get_json()["errors"]
    assert kept_counts(app) == (0, 0)


def test_a_systems_default_keeps_runs(app, client):
    assert client.get("/v1/systems/bm25/settings").status_code == 404
    put = client.put("/v1/systems/bm25/settings", json={"keep_runs": True})
    assert put.status_code == 200 and put.get_json() == {"system": "bm25", "keep_runs": True}
    assert client.get("/v1/systems/bm25/settings").get_json()["keep_runs"] is True
    kept = post_json(client, record("n1")).get_json()["recorded"]
    assert "run_sha256" in kept and kept_counts(app)[0] == 1
    not_kept = post_json(client, record("n2", keep_run=False)).get_json()["recorded"]
    assert "run_sha256" not in not_kept
    assert client.get(f"/v1/results/{not_kept['id']}/run").status_code == 404
    # another system keeps none by default
    other = post_json(client, {"system": "dense", "label": "n1"}).get_json()["recorded"]
    assert "run_sha256" not in other
    bad = client.put("/v1/systems/bm25/settings", json={"keep_runs": "yes"})
    assert bad.status_code == 422 and "keep_runs" in bad.get_json()["errors"]
    unknown = client.put("/v1/systems/bm25/settings", json={"keep_runs": True, "x": 1})
    assert unknown.status_code == 422 and "x" in unknown.get_json()["errors"]
    client.put("/v1/systems/bm25/settings", json={"keep_runs": False})
    assert "run_sha256" not in post_json(client, record("n3")).get_json()["recorded"]


@pytest.mark.parametrize("post", [post_json, post_form])
def test_a_queued_evaluation_keeps_its_run(app, client, post):
    sync = post_json(client, record("sync", keep_run=True)).get_json()["recorded"]
    resp = post(client, record("queued", keep_run=True), headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    recorded = job["result"]["recorded"]
    assert recorded["run_sha256"] == sync["run_sha256"]
    assert kept_counts(app)[0] == 1
    body = client.get(f"/v1/results/{recorded['id']}/run").get_data()
    assert digest_of(body) == recorded["run_sha256"]


def test_a_sharded_queued_evaluation_keeps_the_whole_run(app, client):
    app.config["SHARDS"] = 3
    app.config["SHARD_MIN_BYTES"] = 1
    sync = post_json(client, record("sync", keep_run=True)).get_json()["recorded"]
    resp = post_json(client, record("queued", keep_run=True),
                     headers={"Prefer": "respond-async"})
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert job["result"]["recorded"]["run_sha256"] == sync["run_sha256"]
    assert kept_counts(app)[0] == 1


def test_chunks_are_bounded_and_read_back_in_order(app):
    """A run cut in many small chunks (the chunk size lowered) reads back the same."""
    store = app.extensions["results"]
    run = cranfield.read_run(RUN.encode())
    small = KeptRuns(store, chunk_bytes=512)
    digest = small.keep("t", run)
    info = small.info("t", digest)
    assert info["chunks"] == -(-info["bytes"] // 512) > 3
    with store.engine.connect() as connection:
        sizes = connection.execute(select(func.length(KeptRunChunk.data))).scalars().all()
    assert max(sizes) <= 512
    assert small.read("t", digest).to_dict() == run.to_dict()
    text = b"".join(small.trec_chunks("t", digest))
    assert digest_of(text) == digest
    assert KeptRuns(store).keep("t", run) == digest and small.count("t") == 1
    # the default size: another tenant's copy in chunks of CHUNK_BYTES, the same file
    default = KeptRuns(store)
    assert default.keep("u", run) == digest
    whole = default.info("u", digest)
    assert whole["chunks"] == -(-whole["bytes"] // CHUNK_BYTES) and whole["bytes"] == info["bytes"]
    assert b"".join(default.parquet_chunks("u", digest)) == \
        b"".join(small.parquet_chunks("t", digest))


def reference_rows(run) -> list[tuple[str, str, float]]:
    """The rows in canonical order, by its definition: topics' bytes ascending, score
    descending, docid's bytes descending."""
    rows = [(t, d, s) for t, docs in run.to_dict().items() for d, s in docs.items()]
    rows.sort(key=lambda r: r[1].encode(), reverse=True)
    rows.sort(key=lambda r: (r[0].encode(), -r[2]))
    return rows


def reference_digest(run) -> str:
    """The digest by its definition: runid and a newline, then topic, tab, docid, tab and the
    score's 8 big-endian bytes per row."""
    digest = hashlib.sha256(run.runid.encode() + b"\n")
    for t, d, s in reference_rows(run):
        digest.update(t.encode() + b"\t" + d.encode() + b"\t" + struct.pack(">d", s + 0.0))
    return digest.hexdigest()


def reference_text(run) -> bytes:
    """The canonical TREC text by its definition (backend/kept_runs.py), one row at a time:
    topics' bytes ascending, score descending, docid's bytes descending; rank from 1 within
    the topic; repr of the score; the runid."""
    out, last, rank = [], None, 0
    for t, d, s in reference_rows(run):
        rank = rank + 1 if t == last else 1
        last = t
        out.append(f"{t} Q0 {d} {rank} {s + 0.0!r} {run.runid}\n")
    return "".join(out).encode()


@pytest.mark.parametrize("batch_rows", [7, 1000, 1 << 17])
def test_the_canonical_text_is_its_definition_across_batches(app, monkeypatch, batch_rows):
    """Batches of 7 rows cut topics anywhere: ranks go on across them, and the text, the
    digest and the run read back are those of the definition, whatever the batch size."""
    import backend.kept_runs as kept_runs

    monkeypatch.setattr(kept_runs, "BATCH_ROWS", batch_rows)
    text = RUN.replace(" 2.129133", " 2.12913300", 1) + "999 Q0 zz 1 -0.0 STANDARD\n"
    run = cranfield.read_run(text.encode())
    expected = reference_text(run)
    runs = KeptRuns(app.extensions["results"])
    digest = runs.keep(None, run)
    assert digest == reference_digest(run) == kept_runs.canonical_sha256(run)
    assert digest_of(expected) == digest
    assert b"".join(runs.trec_chunks(None, digest)) == expected
    back = runs.read(None, digest)
    assert back.to_dict() == run.to_dict() and back.topics == run.topics
    assert back.runid == "STANDARD"
    # the Run read back (its docids a chunk per row group) evaluates as the one kept
    qrels = cranfield.read_qrels(QRELS.encode())
    measures = ["map", "ndcg_cut.10", "P.5", "recip_rank", "runid"]
    again = cranfield.evaluate(qrels, back, measures)
    first = cranfield.evaluate(qrels, cranfield.read_run(text.encode()), measures)
    assert again.aggregate == first.aggregate and again.per_topic == first.per_topic
    assert KeptRuns(app.extensions["results"]).info(None, digest)["rows"] == len(run)


KEYS = {"write-a": ("write", "team-a"), "write-b": ("write", "team-b")}


def test_another_tenant_never_sees_a_kept_run(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("\n".join(key_line(k, role, tenant, k)
                              for k, (role, tenant) in KEYS.items()))
    app = create_app({"TESTING": True, "API_KEYS_FILE": str(path)})
    client = ContractClient(app.test_client())
    a, b = ({"Authorization": f"Bearer {k}"} for k in ("write-a", "write-b"))
    mine = post_json(client, record("n1", keep_run=True), headers=a).get_json()["recorded"]
    assert client.get(f"/v1/results/{mine['id']}/run", headers=a).status_code == 200
    for accept in ("text/plain", PARQUET):
        other = client.get(f"/v1/results/{mine['id']}/run",
                           headers={**b, "Accept": accept})
        assert other.status_code == 404
    assert client.get("/v1/systems/bm25/settings", headers=b).status_code == 404
    runs = KeptRuns(app.extensions["results"])
    assert runs.info("team-b", mine["run_sha256"]) is None
    with pytest.raises(Exception, match="no kept run"):
        runs.read("team-b", mine["run_sha256"])
    # team-b keeps the same run: its own copy, deleted with its own result only
    theirs = post_json(client, record("n1", keep_run=True), headers=b).get_json()["recorded"]
    assert theirs["run_sha256"] == mine["run_sha256"]
    assert runs.count("team-a") == runs.count("team-b") == 1
    client.delete(f"/v1/results/{theirs['id']}", headers=b)
    assert runs.count("team-b") == 0 and runs.count("team-a") == 1
    assert client.get(f"/v1/results/{mine['id']}/run", headers=a).status_code == 200


def test_keep_run_on_the_command_line_needs_record(capsys):
    from cranfield.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--keep-run", str(DATA / "qrels.test"), str(DATA / "results.test")])
    assert exit_.value.code == 2
    assert "--keep-run needs --record" in capsys.readouterr().err
