"""Issue 27: every columnar type is refused or read the same in Parquet and in Arrow IPC
(stream and file), through the library's reader and the API (multipart, sync and queued),
with a 422 naming the part and the column, never a 500 (a Parquet run whose docid column was
``list<string>`` was a 500 at submission, sync and queued, where Arrow IPC gave 422)."""

from __future__ import annotations

import io
import re

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from conftest import finished_job

import cranfield
from cranfield import InputError


class _Label(pa.ExtensionType):
    """An extension type over strings (registered: pyarrow reads it back as itself)."""

    def __init__(self):
        super().__init__(pa.string(), "cranfield.test.label")

    def __arrow_ext_serialize__(self):
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type, serialized):
        return cls()


try:
    pa.register_extension_type(_Label())
except pa.ArrowKeyError:  # registered by an earlier import of this module
    pass

STRINGS = ["a", "b", "c"]
# (name, the column's values); READ: types read as their strings, the rest refused
TYPES = {
    "string": pa.array(STRINGS),
    "large_string": pa.array(STRINGS, pa.large_string()),
    "string_view": pa.array(STRINGS, pa.string_view()),
    "dictionary<string>": pa.array(STRINGS).dictionary_encode(),
    "dictionary<large_string>": pa.array(STRINGS, pa.large_string()).dictionary_encode(),
    "int64": pa.array([1, 2, 3]),
    "dictionary<int64>": pa.array([1, 2, 3]).dictionary_encode(),
    "binary": pa.array([b"a", b"b", b"c"]),
    "large_binary": pa.array([b"a", b"b", b"c"], pa.large_binary()),
    "fixed_size_binary": pa.array([b"a", b"b", b"c"], pa.binary(1)),
    "list<string>": pa.array([[s] for s in STRINGS]),
    "large_list<string>": pa.array([[s] for s in STRINGS], pa.large_list(pa.string())),
    "fixed_size_list<string>": pa.array([[s] for s in STRINGS], pa.list_(pa.string(), 1)),
    "list_view<string>": pa.array([[s] for s in STRINGS], pa.list_view(pa.string())),
    "struct": pa.array([{"x": s} for s in STRINGS]),
    "map": pa.array([[("k", s)] for s in STRINGS], pa.map_(pa.string(), pa.string())),
    "sparse_union": pa.UnionArray.from_sparse(pa.array([0, 0, 0], pa.int8()),
                                              [pa.array(STRINGS)]),
    "dense_union": pa.UnionArray.from_dense(pa.array([0, 0, 0], pa.int8()),
                                            pa.array([0, 1, 2], pa.int32()),
                                            [pa.array(STRINGS)]),
    "extension": pa.ExtensionArray.from_storage(_Label(), pa.array(STRINGS)),
    "run_end_encoded": pa.RunEndEncodedArray.from_arrays([1, 2, 3], pa.array(STRINGS)),
    "bool": pa.array([True, False, True]),
    "float64": pa.array([1.0, 2.0, 3.0]),
    "date32": pa.array([1, 2, 3], pa.date32()),
    "decimal128": pa.array([1, 2, 3], pa.decimal128(5, 0)),
    "null": pa.nulls(3),
}
ID_TYPES_READ = {"string", "large_string", "string_view", "dictionary<string>",
                 "dictionary<large_string>", "int64", "dictionary<int64>"}
NUMBER_TYPES_READ = {"int64", "dictionary<int64>", "float64"}


def _table(kind: str, column: str, values) -> pa.Table:
    cols = {"topic": pa.array(["q1"] * 3), "docid": pa.array(["d1", "d2", "d3"]),
            "score" if kind == "run" else "grade": pa.array([3, 2, 1])}
    cols[column] = values
    return pa.table(cols)


def _encode(table: pa.Table, fmt: str) -> bytes | None:
    """The table as a Parquet file, an Arrow IPC stream or file; None when the format cannot
    hold its types (Parquet has no union or run-end encoding)."""
    if fmt == "parquet":
        sink = io.BytesIO()
        try:
            pq.write_table(table, sink)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            return None
        return sink.getvalue()
    sink = pa.BufferOutputStream()
    writer = ipc.new_stream(sink, table.schema) if fmt == "arrow-stream" else \
        ipc.new_file(sink, table.schema)
    with writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


FORMATS = ("parquet", "arrow-stream", "arrow-file")


def _outcome(kind: str, data: bytes):
    reader = cranfield.read_run if kind == "run" else cranfield.read_qrels
    try:
        return ("read", reader(data, name=kind).to_dict())
    except InputError as exc:
        return ("refused", exc.code, exc.location, exc.reason)


def _cases():
    for kind in ("run", "qrels"):
        for column in ("topic", "docid", "score" if kind == "run" else "grade"):
            for name in TYPES:
                yield pytest.param(kind, column, name, id=f"{kind}-{column}-{name}")


@pytest.mark.parametrize("kind,column,name", list(_cases()))
def test_every_type_is_read_or_refused_alike(kind, column, name):
    table = _table(kind, column, TYPES[name])
    outcomes = {fmt: _outcome(kind, data) for fmt in FORMATS
                if (data := _encode(table, fmt)) is not None}
    assert "arrow-stream" in outcomes and "arrow-file" in outcomes
    numbers = column in ("score", "grade")
    read = name in (NUMBER_TYPES_READ if numbers else ID_TYPES_READ)
    if numbers and name == "float64" and kind == "qrels":
        read = True  # floats with no fraction are grades, as in JSON
    for fmt, got in outcomes.items():
        if read:
            assert got[0] == "read", (fmt, got)
        else:
            assert got[0] == "refused", (fmt, got)
            _, code, location, reason = got
            what = ("numbers" if column == "score" else "integers") if numbers \
                else "strings (ids)"
            assert (code, location) == ("invalid-input", f"{kind}.{column}"), (fmt, got)
            assert reason.startswith(f"column {column}: must hold {what}, not "), (fmt, got)
    # one reading: every format that holds the type gives the same topics, docids, values
    reads = [got[1] for got in outcomes.values() if got[0] == "read"]
    assert all(r == reads[0] for r in reads)
    if read and column != "topic":  # (the topic column varies the topics' names)
        expected = {"run": {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}},
                    "qrels": {"q1": {"d1": 3, "d2": 2, "d3": 1}}}[kind]
        if numbers:  # the values of the type: 1, 2, 3
            expected = {"q1": dict(zip(["d1", "d2", "d3"], [1, 2, 3], strict=True))}
        if column == "docid":
            names = ["1", "2", "3"] if "int" in name else STRINGS
            expected = {"q1": dict(zip(names, expected["q1"].values(), strict=True))}
        assert reads[0] == expected


# -- through the API -------------------------------------------------------------------------

RUN_TEXT = b"q1 Q0 d1 1 3 r\nq1 Q0 d2 2 2 r\n"
QRELS_TEXT = b"q1 0 d1 1\n"
TYPES_HEADER = {"parquet": "application/vnd.apache.parquet",
                "arrow-stream": "application/vnd.apache.arrow.stream",
                "arrow-file": "application/vnd.apache.arrow.file"}


def _post(client, kind: str, data: bytes, fmt: str, queued: bool = False):
    parts = {"run": (io.BytesIO(RUN_TEXT), "run.txt", "text/plain"),
             "qrels": (io.BytesIO(QRELS_TEXT), "qrels.txt", "text/plain")}
    parts[kind] = (io.BytesIO(data), f"{kind}.bin", TYPES_HEADER[fmt])
    return client.post("/v1/evaluations", data={**parts, "measures": "P_5"},
                       content_type="multipart/form-data",
                       headers={"Prefer": "respond-async"} if queued else {})


def _problem(client, resp) -> dict:
    """The problem of a refused request, or of the job it queued (the same document)."""
    if resp.status_code == 202:
        job = finished_job(client, resp.headers["Location"])
        assert job["status"] == "failed", job
        return job["problem"]
    assert resp.status_code in (413, 422), resp.get_data(as_text=True)
    return resp.get_json()


API_TYPES = ["list<string>", "large_list<string>", "struct", "map", "extension", "binary",
             "sparse_union", "dense_union", "run_end_encoded"]


NOT_IN_PARQUET = {"sparse_union", "dense_union", "run_end_encoded"}


@pytest.mark.parametrize("kind,name,fmt", [
    (kind, name, fmt) for kind in ("run", "qrels") for name in API_TYPES for fmt in FORMATS
    if not (fmt == "parquet" and name in NOT_IN_PARQUET)])
def test_api_refuses_naming_the_part_and_column(client, kind, name, fmt):
    data = _encode(_table(kind, "docid", TYPES[name]), fmt)
    resp = _post(client, kind, data, fmt)
    assert resp.status_code == 422, resp.get_data(as_text=True)
    doc = resp.get_json()
    [(field, [reason])] = doc["errors"].items()
    assert field == f"{kind}.docid"
    assert reason.startswith("column docid: must hold strings (ids), not ")


@pytest.mark.parametrize("queued", [False, True], ids=["sync", "queued"])
def test_seen_parquet_list_docid_is_422_not_500(client, queued):
    """The probe's request: a Parquet run whose docid column is list<string>."""
    data = _encode(_table("run", "docid", TYPES["list<string>"]), "parquet")
    doc = _problem(client, _post(client, "run", data, "parquet", queued=queued))
    assert doc["status"] == 422
    assert doc["errors"] == {"run.docid": [
        "column docid: must hold strings (ids), not list<element: string>"]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_api_reads_dictionary_strings_as_strings(client, fmt):
    """dictionary<string> is read as its strings, in every format, as the text is."""
    table = pa.table({"topic": pa.array(["q1", "q1"]).dictionary_encode(),
                      "docid": pa.array(["d1", "d2"]).dictionary_encode(),
                      "score": pa.array([3.0, 2.0])})
    resp = _post(client, "run", _encode(table, fmt), fmt)
    assert resp.status_code == 200, resp.get_json()
    text = client.post("/v1/evaluations", data={
        "run": (io.BytesIO(RUN_TEXT), "run.txt"), "qrels": (io.BytesIO(QRELS_TEXT), "q.txt"),
        "measures": "P_5"}, content_type="multipart/form-data")
    assert resp.get_json()["aggregate"] == text.get_json()["aggregate"]
    assert resp.get_json()["aggregate"]["P_5"] == pytest.approx(0.2)


# -- bounded by the memory they will take (issue 27: a 16.7 MB zstd Parquet run of 20M rows
# took gunicorn 359 -> 1,515 MB; the row bound, 44.7M rows, was far above what memory allows)

def _many_rows(rows: int, fmt: str, group: int = 1_000_000) -> bytes:
    """A run of ``rows`` rows that compresses to little (one topic, one docid, zero scores,
    dictionary-coded), written a group at a time (the test never holds the whole table)."""
    chunk = pa.table({"topic": pa.DictionaryArray.from_arrays(
        pa.array([0] * min(group, rows), pa.int32()), pa.array(["q1"])),
        "docid": pa.DictionaryArray.from_arrays(pa.array([0] * min(group, rows), pa.int32()),
                                                pa.array(["d1"])),
        "score": pa.array([0.0] * min(group, rows))})
    sink = io.BytesIO() if fmt == "parquet" else pa.BufferOutputStream()
    writer = pq.ParquetWriter(sink, chunk.schema, compression="zstd") if fmt == "parquet" \
        else ipc.new_stream(sink, chunk.schema,
                            options=ipc.IpcWriteOptions(compression="zstd"))
    with writer:
        for start in range(0, rows, group):
            writer.write_table(chunk.slice(0, min(group, rows - start)))
    return sink.getvalue() if fmt == "parquet" else sink.getvalue().to_pybytes()


def test_seen_20m_row_parquet_is_refused_by_the_default_budget(client):
    """The probe's file: 20M rows (here one docid: a few hundred kB of zstd Parquet) are
    within the service's row and byte bounds, and refused from the metadata by its memory
    budget (TABLE_MAX_MEMORY, 1 GiB by default). The library and the CLI have no memory
    bound unless CRANFIELD_TABLE_MAX_MEMORY is set: they read what the same data as TREC
    text would be read, as trec_eval does."""
    from backend.config import APP_DEFAULTS
    from cranfield.inputs import table_bounds

    data = _many_rows(20_000_000, "parquet")
    assert len(data) < 20_000_000
    assert APP_DEFAULTS["TABLE_MAX_MEMORY"] == 1 << 30
    assert table_bounds.local_bounds("run")["max_memory"] is None
    resp = _post(client, "run", data, "parquet")
    assert resp.status_code == 413, resp.get_data(as_text=True)
    [(field, [reason])] = resp.get_json()["errors"].items()
    assert field == "run"
    assert reason.startswith("would take an estimated 1920")
    assert "(20000000 rows x 96 bytes a row + " in reason
    assert reason.endswith("over the table memory budget of 1073741824 bytes "
                           "(CRANFIELD_TABLE_MAX_MEMORY)")


@pytest.mark.parametrize("fmt", ["parquet", "arrow-stream"])
@pytest.mark.parametrize("queued", [False, True], ids=["sync", "queued"])
def test_api_memory_budget_from_the_metadata(app, client, fmt, queued):
    """100,000 rows (96 bytes a row: 9.6 MB estimated) under a 5 MB budget: 413 naming the
    budget and its factors, before anything is decompressed; under a 50 MB budget, read."""
    data = _many_rows(100_000, fmt, group=50_000)
    app.config.update(TABLE_MAX_MEMORY=5_000_000, MAX_TOPICS=10, MAX_DOCS_PER_TOPIC=1_000_000)
    resp = _post(client, "run", data, fmt, queued=queued)
    assert resp.status_code == 413, resp.get_data(as_text=True)
    doc = resp.get_json()
    [(field, [reason])] = doc["errors"].items()
    assert field == "run"
    # the estimate and its factors (an IPC stream stops at the first batch past the budget:
    # rows counted so far)
    got = re.fullmatch(r"would take an estimated (\d+) bytes of memory once read \((\d+) "
                       r"rows x 96 bytes a row \+ (\d+) bytes uncompressed\), over the table "
                       r"memory budget of 5000000 bytes \(CRANFIELD_TABLE_MAX_MEMORY\)", reason)
    assert got, reason
    estimate, rows, uncompressed = map(int, got.groups())
    assert estimate == rows * 96 + uncompressed > 5_000_000
    assert rows == (100_000 if fmt == "parquet" else 50_000)
    app.config.update(TABLE_MAX_MEMORY=50_000_000)
    assert _post(client, "run", data, fmt).status_code == 422  # read: (a docid 100,000 times)


def test_queued_job_fails_fast_with_the_same_problem():
    """A job whose stored Arrow run is over the budget stamped on it fails from the metadata
    with the same sentence (whatever path stored it)."""
    from backend.contract import ComparisonJob
    from backend.store import MemoryStore
    from backend.tasks import run_comparison
    from cranfield.inputs import columnar

    data = _many_rows(100_000, "arrow-stream", group=50_000)
    with pytest.raises(InputError) as sync:
        columnar.read_run_bytes(data, "runs[0]", max_memory=5_000_000)
    store = MemoryStore()
    store.put_blob("run-a", data, 60)
    store.put_blob("run-b", b"q1 Q0 d1 1 1.0 b\n", 60)
    job = ComparisonJob(measures=["map"], options={"profile": "trec_eval-10"},
                        runs=[{"name": "a", "run_key": "run-a", "run_format": "arrow"},
                              {"name": "b", "run_key": "run-b", "run_format": "trec"}],
                        table_bounds={"max_rows": None, "max_bytes": None,
                                      "max_memory": 5_000_000})
    problem = run_comparison(store, job, lambda job_id: None)["problem"]
    assert problem["status"] == 413
    assert problem["errors"] == {"runs[0]": [sync.value.reason]}
