"""cranfield.inputs.columnar (issue #19): a run and qrels given as Arrow columns (a pyarrow Table,
IPC stream / file or Parquet bytes, a pandas or polars DataFrame) are read to the same Run
and Qrels, and evaluate to the same numbers, as the same data in TREC text or as mappings;
what one form refuses, every form refuses, with the same code."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import cranfield
from cranfield.errors import InputError
from cranfield.inputs import columnar, docid_keys, parquet_reader, table_bytes

MEASURES = ["map", "P.10", "ndcg_cut.10", "recip_rank", "recall.100", "bpref", "num_ret",
            "num_rel_ret", "Rprec", "runid"]


def make_data(seed: int = 7, topics: int = 40, depth: int = 120):
    rng = np.random.default_rng(seed)
    run_rows, qrels_rows = [], []
    for t in rng.permutation(topics).tolist():  # topics out of order, ids of mixed lengths
        topic = f"{t * 37 % 101}"
        docs = rng.choice(5000, size=depth, replace=False)
        scores = np.round(rng.normal(size=depth), 2)  # ties
        for d, s in zip(docs.tolist(), scores.tolist(), strict=True):
            run_rows.append((topic, f"D{d}", s))
        judged = rng.choice(5000, size=60, replace=False)
        for d in judged.tolist():
            qrels_rows.append((topic, f"D{d}", int(rng.choice([-1, 0, 0, 1, 2]))))
    return run_rows, qrels_rows


RUN, QRELS = make_data()


def text_run(rows) -> bytes:
    return "".join(f"{t} Q0 {d} {i} {s!r} sys\n" for i, (t, d, s) in enumerate(rows)).encode()


def text_qrels(rows) -> bytes:
    return "".join(f"{t} 0 {d} {g}\n" for t, d, g in rows).encode()


def mapping(rows) -> dict:
    out: dict = {}
    for t, d, v in rows:
        out.setdefault(t, {})[d] = v
    return out


def run_table(rows) -> pa.Table:
    return pa.table({"topic": [r[0] for r in rows], "docid": [r[1] for r in rows],
                     "score": pa.array([r[2] for r in rows], pa.float64()),
                     "runid": ["sys"] * len(rows)})


def qrels_table(rows) -> pa.Table:
    return pa.table({"topic": [r[0] for r in rows], "docid": [r[1] for r in rows],
                     "grade": pa.array([r[2] for r in rows], pa.int64())})


def stream(table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as w:
        w.write_table(table, max_chunksize=777)
    return sink.getvalue().to_pybytes()


def arrow_file(table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema, options=ipc.IpcWriteOptions(compression="lz4")) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def parquet(table, **options) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **{"row_group_size": 1000, **options})
    return sink.getvalue()


def forms():
    """(name, run as read, qrels as read) for every form of the same data."""
    out = [
        ("text", cranfield.read_run(text_run(RUN)), cranfield.read_qrels(text_qrels(QRELS))),
        ("mapping", cranfield.read_run(mapping(RUN)), cranfield.read_qrels(mapping(QRELS))),
        ("table", columnar.run_from_table(run_table(RUN)),
         columnar.qrels_from_table(qrels_table(QRELS))),
        ("batch", columnar.run_from_table(run_table(RUN).to_batches()[0]),
         columnar.qrels_from_table(qrels_table(QRELS).combine_chunks().to_batches()[0])),
        ("ipc stream", columnar.read_run_bytes(stream(run_table(RUN))),
         columnar.read_qrels_bytes(stream(qrels_table(QRELS)))),
        ("ipc file", columnar.read_run_bytes(arrow_file(run_table(RUN))),
         columnar.read_qrels_bytes(arrow_file(qrels_table(QRELS)))),
        ("parquet", columnar.read_run_bytes(parquet(run_table(RUN))),
         columnar.read_qrels_bytes(parquet(qrels_table(QRELS)))),
    ]
    try:
        out.append(("pandas", columnar.run_from_table(run_table(RUN).to_pandas()),
                    columnar.qrels_from_table(qrels_table(QRELS).to_pandas())))
    except ImportError:
        pass
    try:
        import polars as pl

        out.append(("polars", columnar.run_from_table(pl.from_arrow(run_table(RUN))),
                    columnar.qrels_from_table(pl.from_arrow(qrels_table(QRELS)))))
    except ImportError:
        pass
    return out


FORMS = forms()


@pytest.mark.parametrize("name, run, qrels", FORMS[1:], ids=[f[0] for f in FORMS[1:]])
def test_every_form_gives_the_text_numbers(name, run, qrels):
    _, text_run_obj, text_qrels_obj = FORMS[0]
    ref = cranfield.evaluate(text_qrels_obj, text_run_obj, MEASURES)
    ev = cranfield.evaluate(qrels, run, MEASURES)
    assert ev.aggregate == {**ref.aggregate, "runid": ev.aggregate["runid"]}
    assert ev.per_topic == {t: {**v, "runid": ev.per_topic[t].get("runid")} if "runid" in v
                            else v for t, v in ref.per_topic.items()}
    assert run.topics == text_run_obj.topics
    assert run.to_dict() == text_run_obj.to_dict()
    assert qrels.to_dict() == text_qrels_obj.to_dict()
    if name != "mapping":  # rows as given (a mapping is grouped by topic)
        assert np.array_equal(run.topic_index, text_run_obj.topic_index)
        assert np.array_equal(run.scores, text_run_obj.scores)
        assert run.runid == "sys"
        assert np.array_equal(qrels.topic_index, text_qrels_obj.topic_index)
        assert qrels.docids.tolist() == text_qrels_obj.docids.tolist()


def test_table_digest_equals_mapping_digest():
    from cranfield.inputs.json_body import columns_sha256, mapping_sha256

    table_run = columnar.run_from_table(run_table(RUN))
    assert columns_sha256(table_run) == mapping_sha256(mapping(RUN))
    table_qrels = columnar.qrels_from_table(qrels_table(QRELS))
    assert columns_sha256(table_qrels) == columns_sha256(cranfield.read_qrels(mapping(QRELS)))


def test_other_column_types_read_as_the_same_data():
    base = run_table(RUN)
    variants = pa.table({
        "topic": pa.array([int(r[0]) for r in RUN], pa.int32()),       # integer ids
        "docid": base.column("docid").cast(pa.large_string()),
        "score": base.column("score"),
    })
    dict_enc = pa.table({"topic": base.column("topic").dictionary_encode(),
                         "docid": base.column("docid"), "score": base.column("score")})
    ref = cranfield.evaluate(mapping(QRELS), columnar.run_from_table(base), ["map", "P.10"])
    for table in (variants, dict_enc):
        ev = cranfield.evaluate(mapping(QRELS), columnar.run_from_table(table), ["map", "P.10"])
        assert ev.aggregate == {**ref.aggregate}
    grades = qrels_table(QRELS)
    as_float = grades.set_column(2, "grade", grades.column("grade").cast(pa.float64()))
    assert columnar.qrels_from_table(as_float).to_dict() == \
        columnar.qrels_from_table(grades).to_dict()


def refusal(kind: str, rows):
    """The InputError each form raises for the same bad rows (or None where it reads)."""
    out = {}
    text = text_run(rows) if kind == "run" else text_qrels(rows)
    table = run_table(rows) if kind == "run" else qrels_table(rows)
    readers = {
        "text": lambda: (cranfield.read_run if kind == "run" else cranfield.read_qrels)(text),
        "mapping": lambda: (cranfield.read_run if kind == "run" else cranfield.read_qrels)(
            mapping(rows)),
        "table": lambda: (columnar.run_from_table if kind == "run" else
                          columnar.qrels_from_table)(table),
    }
    for name, encode in (("ipc stream", stream), ("ipc file", arrow_file), ("parquet", parquet)):
        readers[name] = lambda encode=encode: (columnar.read_run_bytes if kind == "run" else
                                               columnar.read_qrels_bytes)(encode(table))
    for name, read in readers.items():
        try:
            read()
        except InputError as exc:
            out[name] = exc
        else:
            out[name] = None
    return out


@pytest.mark.parametrize("kind, rows, words", [
    ("run", [("1", "a\u00a0b", 1.0)], None),                       # NBSP: part of an id
    ("run", [("1", "a", 1.0), ("1", "a", 2.0)], "appears twice"),
    ("qrels", [("1", "a", 1), ("1", "a", 0)], "judged twice"),
])
def test_forms_agree_on_what_they_read_and_refuse(kind, rows, words):
    found = refusal(kind, rows)
    if words is None:
        assert all(v is None for v in found.values()), found
        return
    codes = {k: v.code for k, v in found.items() if k != "mapping"}  # a dict cannot repeat
    assert set(codes.values()) == {found["text"].code}, found
    for name in ("table", "ipc stream", "ipc file", "parquet"):
        assert words in str(found[name])


@pytest.mark.parametrize("table, field, words", [
    ({"topic": ["1"], "docid": ["a"]}, "run.score", "missing column score"),
    ({"topic": ["1"], "docid": ["a"], "score": ["1"]}, "run.score", "must hold numbers"),
    ({"topic": ["1"], "docid": ["a"], "score": [True]}, "run.score", "must hold numbers"),
    ({"topic": [1.5], "docid": ["a"], "score": [1.0]}, "run.topic", "must hold strings"),
    ({"topic": ["1", "1"], "docid": ["a", "b"], "score": [1.0, float("inf")]}, "run.score",
     "row 1"),
    ({"topic": ["1", "1"], "docid": ["a", None], "score": [1.0, 2.0]}, "run.docid", "null"),
    ({"topic": ["1", "1"], "docid": ["a", ""], "score": [1.0, 2.0]}, "run.docid", "empty"),
    ({"topic": ["1", "1"], "docid": ["a", "b\tc"], "score": [1.0, 2.0]}, "run.docid",
     "a tab"),
    ({"topic": ["1 2"], "docid": ["a"], "score": [1.0]}, "run.topic", "a space"),
    ({"topic": ["1"], "docid": ["a"], "score": [1.0], "runid": ["x y"]}, "run.runid",
     "a space"),
])
def test_bad_run_columns_are_refused(table, field, words):
    with pytest.raises(InputError) as err:
        columnar.run_from_table(pa.table(table))
    assert err.value.field == field and words in str(err.value)


@pytest.mark.parametrize("grades, words", [
    (pa.array([1.5]), "not an integer"),
    (pa.array([2.0**60]), "2^53"),
    (pa.array([2**64 - 1], pa.uint64()), "64-bit"),
    (pa.array([None], pa.int64()), "null"),
    (pa.array(["1"]), "must hold integers"),
])
def test_bad_grades_are_refused(grades, words):
    with pytest.raises(InputError) as err:
        columnar.qrels_from_table(pa.table({"topic": ["1"], "docid": ["a"], "grade": grades}))
    assert err.value.field == "qrels.grade" and words in str(err.value)


def test_nan_scores_from_pandas_are_refused(require):
    try:
        import pandas as pd
    except ImportError:
        pd = None
    require(pd is not None, "pandas is installed (the test extra)")
    frame = pd.DataFrame({"topic": ["1", "1"], "docid": ["a", "b"], "score": [1.0, None]})
    with pytest.raises(InputError) as err:
        columnar.run_from_table(frame)
    assert err.value.field == "run.score"


def test_diversity_qrels_keep_subtopics():
    table = pa.table({"topic": ["1", "1"], "iteration": ["1", "2"], "docid": ["a", "a"],
                      "grade": [1, 1]})
    with pytest.raises(InputError):
        columnar.qrels_from_table(table)
    qrels = columnar.qrels_from_table(table, diversity=True)
    text = cranfield.read_qrels(b"1 1 a 1\n1 2 a 1\n", diversity=True)
    assert qrels.subtopics.tolist() == text.subtopics.tolist()


def test_bounds_are_checked_from_the_metadata():
    data = stream(run_table(RUN))
    with pytest.raises(InputError) as err:
        table_bytes.check_table_bytes(data, "run", max_rows=len(RUN) - 1)
    assert err.value.code == "too-large"
    table_bytes.check_table_bytes(data, "run", max_rows=len(RUN))
    with pytest.raises(InputError) as err:
        table_bytes.read_table_bytes(parquet(run_table(RUN)), "run", max_bytes=1000)
    assert err.value.code == "too-large"


def test_detection_by_magic_bytes():
    assert table_bytes.sniff(stream(run_table(RUN))) == "arrow"
    assert table_bytes.sniff(arrow_file(run_table(RUN))) == "arrow"
    assert table_bytes.sniff(parquet(run_table(RUN))) == "parquet"
    assert table_bytes.sniff(b"PAR1 Q0 d 1 1.0 PAR1") is None  # a topic called PAR1
    assert table_bytes.sniff(text_run(RUN)) is None
    assert table_bytes.sniff(b'{"run": {}}') is None


def test_is_table_imports_nothing():
    assert not columnar.is_table({"q": {"d": 1.0}})
    assert not columnar.is_table("q Q0 d 1 1.0 r")
    assert columnar.is_table(run_table(RUN))


def test_evaluate_takes_tables_and_frames():
    ref = cranfield.evaluate(text_qrels(QRELS), text_run(RUN), MEASURES)
    for _name, run, qrels in [("table", run_table(RUN), qrels_table(QRELS))]:
        ev = cranfield.evaluate(qrels, run, MEASURES)
        assert ev.aggregate == ref.aggregate and ev.per_topic == ref.per_topic


def test_dictionary_topics_with_repeated_and_unused_values():
    """A dictionary may repeat a value or hold unused ones (nothing in Arrow forbids it):
    topics are by value, and only topics with rows count."""
    chunk1 = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int8()),
                                            pa.array(["2", "2", "zz-unused"]))
    chunk2 = pa.DictionaryArray.from_arrays(pa.array([1, 1], pa.int32()),
                                            pa.array(["unused", "10"]))
    topic = pa.chunked_array([chunk1, chunk2.cast(chunk1.type)])
    table = pa.table({"topic": topic, "docid": ["a", "b", "c", "a", "b"],
                      "score": [1.0, 2.0, 3.0, 4.0, 5.0]})
    run = columnar.run_from_table(table)
    text = cranfield.read_run(b"2 Q0 a 1 1.0 r\n2 Q0 b 1 2.0 r\n2 Q0 c 1 3.0 r\n"
                              b"10 Q0 a 1 4.0 r\n10 Q0 b 1 5.0 r\n")
    assert run.topics == text.topics == ["10", "2"]
    assert np.array_equal(run.topic_index, text.topic_index)
    bad = pa.table({"topic": pa.DictionaryArray.from_arrays(pa.array([0, 0]),
                                                            pa.array(["1 2"])),
                    "docid": ["a", "b"], "score": [1.0, 2.0]})
    with pytest.raises(InputError, match="a space"):
        columnar.run_from_table(bad)


@pytest.mark.parametrize("engine_keys", [True, False])
@pytest.mark.parametrize("collide", [False, True])
def test_duplicates_found_exactly_by_either_key_path(monkeypatch, engine_keys, collide):
    """By the engine's per-topic tables (compiled) or by its sorted keys; with every docid
    hashing alike, only true duplicates are refused."""
    if not engine_keys:
        monkeypatch.setattr(docid_keys, "_mapscan", None)
    if collide:
        const = lambda docids: np.zeros(len(docids), np.uint64)  # noqa: E731
        monkeypatch.setattr(docid_keys, "docid_hashes", const)
    table = run_table(RUN)
    columnar.run_from_table(table)  # no duplicate: read
    rows = RUN[:50] + [(RUN[10][0], RUN[10][1], 9.0)] + RUN[50:60]
    with pytest.raises(InputError) as err:
        columnar.run_from_table(run_table(rows))
    assert err.value.code == "duplicate-docid" and "(rows 10 and 50)" in str(err.value)
    columnar.qrels_from_table(qrels_table(QRELS))  # qrels: by the sorted keys either way
    rows = QRELS[:50] + [(QRELS[10][0], QRELS[10][1], 1)] + QRELS[50:60]
    with pytest.raises(InputError) as err:
        columnar.qrels_from_table(qrels_table(rows))
    assert err.value.code == "duplicate-judgment" and "(rows 10 and 50)" in str(err.value)


@pytest.mark.parametrize("column", ["docid", "score"])
@pytest.mark.parametrize("scan_all", [True, False], ids=["dictionary-page", "as-dictionary"])
@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
def test_a_parquet_string_bomb_is_bounded_before_decoding(monkeypatch, column, scan_all,
                                                          page_version):
    # one 50 kB string over 400 rows of a plain string column (Parquet dictionary-encodes it,
    # pyarrow reads it back as strings): a few kB of file, 20 MB decoded. Refused from the
    # page headers and the dictionary page — or, when that cannot be scanned here, from the
    # codes read as a dictionary — by the bounds alone (a queued upload) and by the reader;
    # a score column of strings too (it would be refused only once decoded)
    if not scan_all:
        monkeypatch.setattr(parquet_reader, "_MAX_SCANNED", 0)
    n = 400
    columns = {"topic": ["1"] * n, "docid": [f"d{i}" for i in range(n)],
               "score": np.arange(n, dtype=float)}
    columns[column] = ["d" * 50_000] * n
    data = parquet(pa.table(columns), row_group_size=100, data_page_version=page_version)
    assert len(data) < 100_000
    for read in (table_bytes.check_table_bytes, table_bytes.read_table_bytes):
        if column == "score":  # (issue 27) refused from the schema: nothing read at all
            with pytest.raises(InputError, match="column score: must hold numbers, not "
                               "string") as got:
                read(data, "run", max_bytes=5_000_000)
            assert got.value.code == "invalid-input"
            continue
        with pytest.raises(InputError, match=f"{column}'s strings (may )?decode to more than"
                           ) as got:
            read(data, "run", max_bytes=5_000_000)
        assert got.value.code == "too-large"


def test_parquet_docids_are_read_as_strings_within_the_bound():
    # distinct docids past the 1 MB dictionary page (the writer falls back to plain pages):
    # bounded from the pages, still read as strings, the same run as the table's
    n = 120_000
    table = pa.table({"topic": [str(i // 1000) for i in range(n)],
                      "docid": [f"clueweb12-{i:010d}" for i in range(n)],
                      "score": np.linspace(1, 0, n)})
    data = parquet(table, row_group_size=50_000)
    got = table_bytes.read_table_bytes(data, "run", max_bytes=64 * 1024 * 1024)
    assert got.schema.field("docid").type == pa.string()
    table_bytes.check_table_bytes(data, "run", max_bytes=6_000_000)  # ~4.3 MB uncompressed
    run = columnar.read_run_bytes(data, max_bytes=64 * 1024 * 1024)
    assert run.docids.to_pylist() == table.column("docid").to_pylist()


def test_a_page_header_claiming_a_huge_list_is_refused_at_once():
    # field 1, a list (type 9) of 2^40 booleans: refused from the count, not looped over
    header = bytes([0x19, 0xF1]) + bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x20]) + b"\0"
    with pytest.raises(ValueError, match="longer than the file"):
        parquet_reader._thrift_struct(memoryview(header), 0)


@pytest.mark.parametrize("groups, max_bytes", [(1, 500_000), (3, 2_000_000)])
def test_dictionary_pages_claiming_more_than_the_bound_are_not_decompressed(
        monkeypatch, groups, max_bytes):
    # each row group's docid dictionary page header says it decompresses to ~1 MB (the
    # footer's sizes stay small): one page over the bound, or three pages over it together,
    # are refused from their headers before pyarrow's codec allocates that much
    n = 1000 * groups
    table = pa.table({"topic": ["1"] * n, "docid": [f"doc-{i:016d}" for i in range(n)],
                      "score": np.arange(n, dtype=float)})
    data = bytearray(parquet(table, compression="gzip"))
    meta = pq.ParquetFile(pa.py_buffer(bytes(data))).metadata
    for group in parquet_reader._parquet_chunks(pa.py_buffer(bytes(data)), meta):
        at = group[1]["dictionary_page_offset"]
        assert group[1]["path"] == "docid" and data[at:at + 3] == b"\x15\x04\x15"  # type 2
        assert data[at + 3] & 0x80 and data[at + 4] & 0x80 and not data[at + 5] & 0x80
        data[at + 3:at + 6] = b"\xfe\xff\x7f"  # its size: zigzag 2^21 - 2, 1,048,575 bytes
    claimed = []
    codec = pa.Codec

    class Counted:
        def __init__(self, name):
            self.codec = codec(name)

        def decompress(self, page, decompressed_size):
            claimed.append(decompressed_size)
            return self.codec.decompress(page, decompressed_size=decompressed_size)

    monkeypatch.setattr(pa, "Codec", Counted)
    for read in (table_bytes.check_table_bytes, table_bytes.read_table_bytes):
        claimed.clear()
        with pytest.raises(InputError, match="docid's strings may decode to more than") as got:
            read(bytes(data), "run", max_bytes=max_bytes)
        assert got.value.code == "too-large" and sum(claimed) <= max_bytes


def test_page_headers_are_walked_over_no_more_bytes_than_the_file_holds(monkeypatch):
    # a footer whose row groups all point at the same column chunk (here: the one real group
    # given 50 times) would have its page headers walked 50 times; past the file's size the
    # column is read as a dictionary instead, and bounded from its codes
    n = 2000
    table = pa.table({"topic": ["1"] * n, "docid": [f"doc-{i:016d}" for i in range(n)],
                      "score": np.arange(n, dtype=float)})
    data = parquet(table, row_group_size=n, compression="none")
    real = parquet_reader._parquet_chunks
    monkeypatch.setattr(parquet_reader, "_parquet_chunks", lambda buf, meta: real(buf, meta) * 50)
    walked = []
    bound = parquet_reader._byte_array_bound
    monkeypatch.setattr(parquet_reader, "_byte_array_bound",
                        lambda buf, chunk, limit: walked.append(chunk["compressed"]) or
                        bound(buf, chunk, limit))
    table_bytes.check_table_bytes(data, "run", max_bytes=10**8)
    assert 0 < sum(walked) <= len(data)
    got = table_bytes.read_table_bytes(data, "run", max_bytes=10**8)
    assert got.column("docid").to_pylist() == table.column("docid").to_pylist()
