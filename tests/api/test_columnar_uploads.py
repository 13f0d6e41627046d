"""Runs and qrels uploaded as Arrow IPC streams / files or Parquet files (issue #19): the same
numbers as the same data sent as TREC text or JSON, refusals as application/problem+json
naming the part (never a 500), limits from the metadata, and a queued Arrow upload."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from columnar_tables import ipc_file, ipc_stream, parquet, qrels_table, run_table
from conftest import finished_job

import cranfield

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
MEASURES = ["map", "P.10", "ndcg_cut.10", "recip_rank", "num_rel_ret", "runid"]


ENCODERS = {"arrow-stream": ipc_stream, "arrow-file": ipc_file, "parquet": parquet,
            "arrow-zstd": lambda t: ipc_stream(t, "zstd")}
TYPES = {"arrow-stream": "application/vnd.apache.arrow.stream",
         "arrow-file": "application/vnd.apache.arrow.file",
         "parquet": "application/vnd.apache.parquet",
         "arrow-zstd": "application/vnd.apache.arrow.stream"}


def form(run, qrels, *, content_type=None, qrels_type=None, measures=MEASURES):
    data = {"run": (io.BytesIO(run), "run.bin", content_type or "application/octet-stream"),
            "measures": ",".join(measures)}
    data["qrels"] = (io.BytesIO(qrels), "qrels.bin", qrels_type or "text/plain")
    return data


@pytest.fixture(scope="module")
def reference():
    return {"run": (DATA / "results.test").read_bytes(),
            "qrels": (DATA / "qrels.test").read_bytes()}


def evaluate_text(client, reference) -> dict:
    resp = client.post("/v1/evaluations", data=form(reference["run"], reference["qrels"]),
                       content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


@pytest.mark.parametrize("encoding", list(ENCODERS))
@pytest.mark.parametrize("declared", [True, False])
def test_arrow_and_parquet_parts_give_the_text_numbers(client, reference, encoding, declared):
    text = evaluate_text(client, reference)
    enc = ENCODERS[encoding]
    resp = client.post("/v1/evaluations", data=form(
        enc(run_table()), enc(qrels_table()),
        content_type=TYPES[encoding] if declared else None,
        qrels_type=TYPES[encoding] if declared else "application/octet-stream"),
        content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert doc["aggregate"] == text["aggregate"]
    assert doc["per_topic"] == text["per_topic"]
    assert doc["topics"] == text["topics"]


def test_arrow_run_and_json_run_have_one_digest(client, reference):
    run = cranfield.read_run(str(DATA / "results.test"))
    body = {"run": run.to_dict(), "qrels": reference["qrels"].decode(), "measures": ["map"]}
    as_json = client.post("/v1/evaluations", json=body).get_json()
    as_arrow = client.post("/v1/evaluations", data=form(ipc_stream(run_table()),
                                                        reference["qrels"], measures=["map"]),
                           content_type="multipart/form-data").get_json()
    assert as_arrow["aggregate"]["map"] == as_json["aggregate"]["map"]
    assert as_arrow["provenance"]["run_sha256"] == as_json["provenance"]["run_sha256"]


def problem(resp, status=422) -> dict:
    assert resp.status_code == status, resp.get_data(as_text=True)
    assert resp.mimetype == "application/problem+json"
    return resp.get_json()


def post(client, run: bytes, qrels: bytes, *, content_type=None, qrels_type=None, headers=None):
    """The form as raw bytes (werkzeug's test client would spool a large one to a file)."""
    from cranfield.client_body import _multipart

    body, ctype = _multipart([("measures", ",".join(MEASURES))], [
        ("run", "run.bin", run, content_type or "application/octet-stream"),
        ("qrels", "qrels.bin", qrels, qrels_type or "text/plain")])
    return client.post("/v1/evaluations", data=body, content_type=ctype, headers=headers or {})


@pytest.mark.parametrize("table, field, words", [
    (pa.table({"topic": ["1"], "docid": ["d"]}), "run.score", "missing column score"),
    (pa.table({"topic": ["1"], "docid": ["d"], "score": ["1.0"]}), "run.score",
     "must hold numbers"),
    (pa.table({"topic": ["1"], "docid": [1.5], "score": [1.0]}), "run.docid",
     "must hold strings"),
    (pa.table({"topic": ["1", "1"], "docid": ["a", "b"], "score": [1.0, float("nan")]}),
     "run.score", "not a finite number"),
    (pa.table({"topic": ["1", "1"], "docid": ["a", "b"], "score": [1.0, None]}),
     "run.score", "null"),
    (pa.table({"topic": ["1", "1"], "docid": ["a", "b c"], "score": [1.0, 2.0]}),
     "run.docid", "may not contain a space"),
    (pa.table({"topic": ["1", ""], "docid": ["a", "b"], "score": [1.0, 2.0]}),
     "run.topic", "may not be empty"),
])
def test_bad_run_tables_are_refused_naming_the_part(client, reference, table, field, words):
    doc = problem(post(client, ipc_stream(table), reference["qrels"]))
    assert field in doc["errors"], doc
    assert words in " ".join(doc["errors"][field]), doc


def test_duplicate_docid_is_refused_as_in_text(client, reference):
    table = pa.table({"topic": ["1", "1"], "docid": ["a", "a"], "score": [1.0, 2.0]})
    doc = problem(post(client, parquet(table), reference["qrels"]))
    text = problem(post(client, b"1 Q0 a 1 1.0 r\n1 Q0 a 2 2.0 r\n", reference["qrels"]))
    assert doc["code"] == text["code"] == "duplicate-docid"


@pytest.mark.parametrize("garbage", [
    b"ARROW1\0\0" + b"\x01" * 64,
    b"\xff\xff\xff\xff\x10\x00\x00\x00" + b"\x07" * 40,
    b"PAR1\x15" + b"\x00" * 40 + b"PAR1",
], ids=["arrow-file", "arrow-stream", "parquet"])
def test_malformed_files_are_4xx_naming_the_part(client, reference, garbage):
    doc = problem(post(client, garbage, reference["qrels"]))
    assert "run" in doc["errors"], doc
    assert "malformed" in doc["detail"]


def test_truncated_stream_is_4xx(client, reference):
    data = ipc_stream(run_table())
    doc = problem(post(client, data[: len(data) // 2], reference["qrels"]))
    assert "run" in doc["errors"]


def test_declared_type_must_match_the_bytes(client, reference):
    doc = problem(post(client, reference["run"], reference["qrels"],
                       content_type="application/vnd.apache.parquet"))
    assert "run" in doc["errors"] and "Parquet" in doc["detail"]


def test_row_limit_from_the_metadata(app, client, reference):
    app.config.update(MAX_TOPICS=2, MAX_DOCS_PER_TOPIC=3)  # at most 6 rows
    table = pa.table({"topic": ["1"] * 7, "docid": [f"d{i}" for i in range(7)],
                      "score": [1.0] * 7})
    for enc in (ipc_stream, parquet):
        doc = problem(post(client, enc(table), reference["qrels"]), 413)
        assert "7 rows exceed the limit of 6" in doc["errors"]["run"][0]


def test_topic_and_per_topic_limits(app, client, reference):
    app.config.update(MAX_TOPICS=2, MAX_DOCS_PER_TOPIC=4)
    three_topics = pa.table({"topic": ["1", "2", "3"], "docid": ["a", "a", "a"],
                             "score": [1.0] * 3})
    doc = problem(post(client, ipc_stream(three_topics), reference["qrels"]), 413)
    assert "run" in doc["errors"]
    deep = pa.table({"topic": ["1"] * 5 + ["2"], "docid": list("abcdef"), "score": [1.0] * 6})
    doc = problem(post(client, ipc_stream(deep), reference["qrels"]), 413)
    assert "run.1" in doc["errors"]


def test_compressed_size_bound_before_decompressing(app, client, reference):
    # 150k rows of one (dictionary-encoded) docid compress to little; uncompressed (2.4 MB)
    # they are over the byte bound (MAX_CONTENT_LENGTH: 2 MB in these tests), though not
    # more rows than 2 MB of text could hold
    n = 150_000
    table = pa.table({"topic": pa.array(["1"] * n).dictionary_encode(),
                      "docid": pa.array(["d" * 20] * n).dictionary_encode(),
                      "score": np.zeros(n)})
    data = ipc_stream(table, "zstd", chunk=None)
    assert len(data) < 100_000
    app.config.update(MAX_TOPICS=10, MAX_DOCS_PER_TOPIC=1_000_000)
    doc = problem(post(client, data, reference["qrels"]), 413)
    assert "bytes uncompressed exceed" in doc["errors"]["run"][0]


def test_queued_arrow_upload_equals_sync(client, reference):
    text = evaluate_text(client, reference)
    resp = client.post("/v1/evaluations", data=form(ipc_stream(run_table()),
                                                    parquet(qrels_table())),
                       content_type="multipart/form-data", headers={"Prefer": "respond-async"})
    assert resp.status_code == 202
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert job["result"]["aggregate"] == text["aggregate"]
    assert job["result"]["per_topic"] == text["per_topic"]


def test_queued_arrow_upload_over_the_bounds_is_refused_before_queueing(app, client,
                                                                        reference):
    app.config.update(MAX_TOPICS=2, MAX_DOCS_PER_TOPIC=3)
    table = pa.table({"topic": ["1"] * 7, "docid": [f"d{i}" for i in range(7)],
                      "score": [1.0] * 7})
    resp = client.post(
        "/v1/evaluations", data=form(ipc_stream(table), reference["qrels"]),
        content_type="multipart/form-data", headers={"Prefer": "respond-async"})
    assert problem(resp, 413)["errors"]["run"]


def test_comparison_takes_arrow_runs(client, reference):
    runs = [(io.BytesIO(ipc_stream(run_table())), "a.arrow", "application/octet-stream"),
            (io.BytesIO(reference["run"]), "b.txt", "text/plain")]
    resp = client.post("/v1/comparisons", data={"runs": runs, "qrels": (
        io.BytesIO(parquet(qrels_table())), "q.parquet", "application/vnd.apache.parquet"),
        "measures": "map"}, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert doc["summary"]["map"]["a"]["mean"] == doc["summary"]["map"]["b"]["mean"]


@pytest.mark.parametrize("encoder", [ipc_stream, parquet], ids=["arrow", "parquet"])
def test_a_dictionary_bomb_is_refused_before_decoding(app, client, reference, encoder):
    # one 100 kB docid repeated by 100 rows: a few hundred kB in the file, 10 MB decoded
    # (over MAX_CONTENT_LENGTH, 2 MB here): refused from the codes, nothing decoded
    n = 100
    docid = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)),
                                           pa.array(["d" * 100_000]))
    table = pa.table({"topic": ["1"] * n, "docid": docid, "score": np.arange(n, dtype=float)})
    data = encoder(table)
    assert len(data) < 1_000_000
    doc = problem(post(client, data, reference["qrels"]), 413)
    assert "decode to more than" in doc["errors"]["run"][0]


@pytest.mark.parametrize("compression", ["snappy", "zstd", "none"])
@pytest.mark.parametrize("queued", [False, True], ids=["sync", "queued"])
def test_a_parquet_docid_bomb_is_refused_before_decoding(client, reference, compression,
                                                          queued):
    # a plain string docid column: Parquet dictionary-encodes it and pyarrow reads it back as
    # strings, so one 100 kB docid repeated by 100 rows (a few kB in the file, 10 MB decoded;
    # MAX_CONTENT_LENGTH is 2 MB here) is bounded from the dictionary page, nothing decoded
    n = 100
    table = pa.table({"topic": ["1"] * n, "docid": ["d" * 100_000] * n,
                      "score": np.arange(n, dtype=float)})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression)
    data = sink.getvalue()
    assert len(data) < 200_000
    assert not pq.read_table(io.BytesIO(data)).schema.field("docid").type.equals(
        pa.dictionary(pa.int32(), pa.string()))  # pyarrow alone would decode it
    resp = client.post("/v1/evaluations", data=form(data, reference["qrels"]),
                       content_type="multipart/form-data",
                       headers={"Prefer": "respond-async"} if queued else {})
    assert "decode to more than" in problem(resp, 413)["errors"]["run"][0]


def test_more_rows_than_text_could_hold_are_refused(app, client, reference):
    # 200k rows of one score (RLE: a few kB of Parquet) exceed what 2 MB of TREC text holds
    n = 200_000
    table = pa.table({"topic": pa.array(["1"] * n).dictionary_encode(),
                      "docid": pa.array(["d"] * n).dictionary_encode(), "score": np.zeros(n)})
    app.config.update(MAX_TOPICS=10, MAX_DOCS_PER_TOPIC=1_000_000)
    doc = problem(post(client, parquet(table), reference["qrels"]), 413)
    assert "bytes of TREC text could hold" in doc["errors"]["run"][0]


def test_queued_comparison_takes_arrow_runs(client, reference):
    def body():
        runs = [(io.BytesIO(ipc_stream(run_table(), "zstd")), "a.arrows",
                 "application/vnd.apache.arrow.stream"),
                (io.BytesIO(reference["run"]), "b.txt", "text/plain")]
        return {"runs": runs, "qrels": (io.BytesIO(parquet(qrels_table())), "q.parquet",
                                        "application/octet-stream"), "measures": "map"}

    sync = client.post("/v1/comparisons", data=body(), content_type="multipart/form-data")
    assert sync.status_code == 200, sync.get_json()
    resp = client.post("/v1/comparisons", data=body(), content_type="multipart/form-data",
                       headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_json()
    job = finished_job(client, resp.headers["Location"])
    assert job["status"] == "finished", job
    assert job["result"]["summary"] == sync.get_json()["summary"]


def test_large_bodies_cut_by_the_fast_parser_keep_the_part_types(app, client, reference):
    # over 1 MiB: service.multipart cuts the body (not werkzeug); the declared types still count
    n = 40_000
    table = pa.table({"topic": [str(301 + i % 30) for i in range(n)],
                      "docid": [f"doc-{i:08d}" for i in range(n)],
                      "score": np.linspace(0, 1, n)})
    data = ipc_stream(table, chunk=None)
    assert len(data) > 1 << 20
    resp = post(client, data, reference["qrels"],
                content_type="application/vnd.apache.arrow.stream")
    assert resp.status_code == 200, resp.get_json()
    text = "".join(f"{301 + i % 30} Q0 doc-{i:08d} 1 1.0 r\n" for i in range(n)).encode()
    doc = problem(post(client, text, reference["qrels"],
                       content_type="application/vnd.apache.arrow.stream"))
    assert "run" in doc["errors"] and "Arrow" in doc["detail"]
