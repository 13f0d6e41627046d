"""Judged qrels as Arrow IPC and Parquet uploads (issue #31), differential: the same judgments
put as judgment-group text, JSON rows, JSON columns, an Arrow IPC stream and file and a Parquet
file (a text/plain body or a multipart file part) store one version (the same sha256) whose
agreement document and text are identical, equal to the engine's on the text; the same faults
are refused in every form (422, nothing stored), naming the line (text) or the row and column;
an Arrow or Parquet upload is bounded from its metadata (MAX_JUDGED_JUDGMENTS rows,
MAX_CONTENT_LENGTH uncompressed: 413) before any row is read; the library reads the same
files (a path or bytes) to the same judgments."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from conftest import ContractClient
from judged_qrels import TEXT, rows

from cranfield.errors import InputError
from cranfield.judges.agreement_document import agreement_document, format_agreement
from cranfield.judges.judged import read_judged
from service.app import create_app

COLUMNS = ("topic", "judge", "docid", "rel")
AGREEMENT = "/v1/qrels/{}/agreement?resamples=200&seed=3"


def table(text: str = TEXT, **override) -> pa.Table:
    cols = {c: [r[c] for r in rows(text)] for c in COLUMNS}
    cols.update(override)
    return pa.table(cols)


def arrow_stream(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, t.schema) as writer:
        writer.write_table(t)
    return sink.getvalue().to_pybytes()


def arrow_file(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, t.schema) as writer:
        writer.write_table(t)
    return sink.getvalue().to_pybytes()


def parquet(t: pa.Table, **kw) -> bytes:
    out = io.BytesIO()
    pq.write_table(t, out, **kw)
    return out.getvalue()


def put_text_plain(client, qrels_id: str, data: bytes):
    return client.put(f"/v1/qrels/{qrels_id}?qrels_format=qrels_jg", data=data,
                      content_type="text/plain")


def put_multipart(client, qrels_id: str, data: bytes):
    return client.put(f"/v1/qrels/{qrels_id}", data={
        "qrels": (io.BytesIO(data), "judged.bin", "application/octet-stream"),
        "qrels_format": "qrels_jg"}, content_type="multipart/form-data")


def put_json(client, qrels_id: str, qrels):
    return client.put(f"/v1/qrels/{qrels_id}", json={"qrels": qrels, "qrels_format": "qrels_jg"})


def forms(t: pa.Table | None = None, text: str = TEXT, json_rows=None):
    """(name, put) of every form of the same judgments."""
    t = table(text) if t is None else t
    cols = {c: t.column(c).to_pylist() for c in COLUMNS}
    return [
        ("text/plain", lambda c, i: put_text_plain(c, i, text.encode())),
        ("json text", lambda c, i: put_json(c, i, text)),
        ("json rows", lambda c, i: put_json(c, i, rows(text) if json_rows is None
                                            else json_rows)),
        ("json columns", lambda c, i: put_json(c, i, cols)),
        ("arrow stream", lambda c, i: put_text_plain(c, i, arrow_stream(t))),
        ("arrow file", lambda c, i: put_multipart(c, i, arrow_file(t))),
        ("parquet", lambda c, i: put_text_plain(c, i, parquet(t))),
        ("parquet multipart", lambda c, i: put_multipart(c, i, parquet(
            t, compression="zstd", use_dictionary=True))),
    ]


def test_every_form_stores_one_version_with_one_agreement(client):
    expected = agreement_document(read_judged(TEXT), resamples=200, seed=3)
    versions, documents, texts = set(), [], set()
    for n, (name, put) in enumerate(forms()):
        resp = put(client, f"j{n}")
        assert resp.status_code == 201, (name, resp.get_json())
        meta = resp.get_json()
        assert meta["qrels_format"] == "qrels_jg" and meta["judgments"] == 13, name
        versions.add((meta["version"], meta["sha256"]))
        doc = client.get(AGREEMENT.format(f"j{n}")).get_json()
        documents.append({k: v for k, v in doc.items() if k != "qrels"})
        texts.add(client.get(AGREEMENT.format(f"j{n}"), headers={"Accept": "text/plain"})
                  .get_data(as_text=True))
    assert len(versions) == 1
    assert all(d == documents[0] for d in documents)
    assert {k: documents[0][k] for k in expected} == expected
    assert texts == {format_agreement(expected)}


def test_integer_and_dictionary_columns_are_the_same_judgments(client):
    first = put_json(client, "j", rows(TEXT.replace("301", "7").replace("302", "8")))
    ints = table(TEXT.replace("301", "7").replace("302", "8"))
    ints = ints.set_column(0, "topic", pa.array([int(x) for x in ints.column(0).to_pylist()],
                                                pa.int32()))
    ints = ints.set_column(1, "judge", ints.column(1).dictionary_encode())
    ints = ints.set_column(3, "rel", ints.column(3).cast(pa.float64()))
    ints = ints.append_column("notes", pa.array(["ignored"] * len(ints)))
    for data in (arrow_stream(ints), parquet(ints)):
        resp = put_text_plain(client, "k", data)
        assert resp.status_code in (200, 201), resp.get_json()
        assert resp.get_json()["sha256"] == first.get_json()["sha256"]


FAULTS = {
    # (text, the row (0-based) and column refused in the row and column forms)
    "a grade that is no integer": (TEXT.replace("302 llm d4 2", "302 llm d4 1.5"), "11", "rel"),
    "a document judged twice by one judge": (TEXT + "301 bob d2 1\n", "13", "docid"),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_form_refuses_the_same_fault(client, fault):
    text, row, column = FAULTS[fault]
    lines = text.splitlines()
    cols = {"topic": [], "judge": [], "docid": [], "rel": []}
    json_rows = []
    for line in lines:
        t, j, d, r = line.split()
        value = float(r) if "." in r else int(r)
        json_rows.append({"topic": t, "judge": j, "docid": d, "rel": value})
        for c, v in zip(COLUMNS, (t, j, d, value), strict=True):
            cols[c].append(v)
    t = pa.table(cols)
    for name, put in forms(t, text, json_rows):
        resp = put(client, "bad")
        problem = resp.get_json()
        assert resp.status_code == 422, (name, problem)
        if name in ("text/plain", "json text"):
            assert problem["detail"].startswith(f"qrels:{int(row) + 1}: "), (name, problem)
        else:
            assert f"qrels[{row}].{column}" in problem["errors"], (name, problem)
        assert client.get("/v1/qrels/bad").status_code == 404, name


@pytest.mark.parametrize(("override", "field", "words"), [
    ({"rel": pa.array(["1"] * 13)}, "qrels.rel", "must hold integers"),
    ({"docid": pa.array([None] + ["d"] * 12, pa.string())}, "qrels.docid", "null"),
    ({"rel": pa.array([None] + [1] * 12, pa.int64())}, "qrels.rel", "null"),
])
def test_column_faults_name_the_column(client, override, field, words):
    t = table(**override)
    for data in (arrow_stream(t), parquet(t)):
        resp = put_text_plain(client, "bad", data)
        assert resp.status_code == 422, resp.get_json()
        assert field in resp.get_json()["errors"] and words in resp.get_json()["detail"]
    missing = table().drop_columns(["judge"])
    resp = put_text_plain(client, "bad", parquet(missing))
    assert resp.status_code == 422 and "missing judge" in resp.get_json()["detail"]
    assert client.get("/v1/qrels/bad").status_code == 404


def test_prefs_still_refuse_tables(client):
    resp = client.put("/v1/qrels/p?qrels_format=prefs", data=parquet(table()),
                      content_type="text/plain")
    assert resp.status_code == 422 and "not an Arrow or Parquet file" in \
        resp.get_json()["detail"]


def test_tables_are_bounded_from_their_metadata_before_reading(monkeypatch):
    import cranfield.judges.judged as judged

    def never(*args, **kwargs):  # no row may be read: the metadata refuses the file first
        raise AssertionError("read a row")

    monkeypatch.setattr(judged, "_add", never)
    client = ContractClient(create_app({"TESTING": True, "MAX_JUDGED_JUDGMENTS": 12})
                            .test_client())
    for data in (arrow_stream(table()), parquet(table())):
        resp = put_text_plain(client, "big", data)
        assert resp.status_code == 413, resp.get_json()
        assert "13 rows exceed the limit of 12" in resp.get_json()["detail"]
        assert "qrels" in resp.get_json()["errors"]
    small = ContractClient(create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 4000})
                           .test_client())
    wide = table(docid=pa.array([f"d{i}" + "x" * 400 for i in range(13)]))
    data = parquet(wide, compression="zstd")
    assert len(data) < 4000
    resp = put_text_plain(small, "wide", data)
    assert resp.status_code == 413 and "uncompressed" in resp.get_json()["detail"]


def test_the_library_reads_the_same_files(tmp_path):
    groups = read_judged(TEXT)
    for name, data in (("a.arrow", arrow_file(table())), ("s.arrows", arrow_stream(table())),
                       ("p.parquet", parquet(table()))):
        path = tmp_path / name
        path.write_bytes(data)
        assert read_judged(path).topics == groups.topics
        assert read_judged(str(path)).topics == groups.topics
        assert read_judged(data).topics == groups.topics
    with pytest.raises(InputError, match="13 rows exceed the limit of 12"):
        read_judged(parquet(table()), max_judgments=12)


def test_a_multipart_judges_field_carries_the_provenance(client):
    judges = {"alice": {"kind": "person"}, "llm": {"kind": "model", "model": "m-1"}}
    resp = client.put("/v1/qrels/j", data={
        "qrels": (io.BytesIO(parquet(table())), "judged.parquet", "application/octet-stream"),
        "qrels_format": "qrels_jg", "judges": json.dumps(judges)},
        content_type="multipart/form-data")
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["judges"] == judges
    for bad, field in (("{", "judges"), ('{"carol": {"kind": "person"}}', "judges.carol"),
                       ('{"llm": {"kind": "robot"}}', "judges.llm.kind")):
        resp = client.put("/v1/qrels/k", data={
            "qrels": (io.BytesIO(TEXT.encode()), "judged.txt", "text/plain"),
            "qrels_format": "qrels_jg", "judges": bad}, content_type="multipart/form-data")
        assert resp.status_code == 422 and field in resp.get_json()["errors"], bad
    assert client.get("/v1/qrels/k").status_code == 404
