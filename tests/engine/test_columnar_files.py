"""Parquet and Arrow IPC files read by the library and by ``cranfield eval`` (issue #26,
"columnar everywhere"): told by their magic bytes (never their names), as paths, bytes, binary
file objects and standard input, with the grammar, checks and bounds the service applies to
the same bytes uploaded (cranfield.inputs.columnar.read_file_bytes). The same data as TREC text,
Parquet, an Arrow file and an Arrow stream gives the same numbers and the same stdout; a
malformed file is the same InputError everywhere. (The API's side of the comparison:
tests/api/test_columnar_files_everywhere.py.)"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from columnar_tables import ipc_file, ipc_stream, parquet, qrels_table, run_table

import cranfield
from cranfield.cli import main
from cranfield.inputs import columnar, table_bounds, table_bytes

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
WEB = Path(__file__).resolve().parents[1] / "data" / "web2012"


ENCODERS = {"parquet": lambda t: parquet(t, row_group_size=700), "arrow-file": ipc_file,
            "arrow-stream": lambda t: ipc_stream(t, chunk=500),
            "arrow-stream-zstd": lambda t: ipc_stream(t, "zstd", chunk=500)}
CORRUPT = {  # what tests/api/test_columnar_uploads.py sends the API
    "arrow-file": b"ARROW1\0\0" + b"\x01" * 64,
    "arrow-stream": b"\xff\xff\xff\xff\x10\x00\x00\x00" + b"\x07" * 40,
    "parquet": b"PAR1\x15" + b"\x00" * 40 + b"PAR1",
}


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Each encoding of results.test and qrels.test written under a name that says nothing
    (and one under the wrong extension): the readers go by the bytes."""
    root = tmp_path_factory.mktemp("columnar")
    out = {"text": (DATA / "qrels.test", DATA / "results.test")}
    for name, enc in ENCODERS.items():
        q, r = root / f"qrels-{name}.txt", root / f"run-{name}.txt"
        q.write_bytes(enc(qrels_table()))
        r.write_bytes(enc(run_table()))
        out[name] = (q, r)
    return out


def numbers(ev) -> tuple:
    return ev.per_topic, ev.aggregate, ev.topics.as_dict()


@pytest.mark.parametrize("encoding", list(ENCODERS))
def test_library_reads_paths_bytes_and_binary_files_by_magic_bytes(files, encoding):
    text = cranfield.evaluate(qrels=str(DATA / "qrels.test"), run=str(DATA / "results.test"),
                              measures=["all_trec"])
    q, r = files[encoding]
    for qrels, run in ((str(q), str(r)), (q, r), (q.read_bytes(), r.read_bytes()),
                       (io.BytesIO(q.read_bytes()), io.BytesIO(r.read_bytes())),
                       (memoryview(q.read_bytes()), memoryview(r.read_bytes()))):
        ev = cranfield.evaluate(qrels=qrels, run=run, measures=["all_trec"])
        assert numbers(ev) == numbers(text)
        assert ev.runid == text.runid == "STANDARD"


def test_the_readers_give_the_text_readers_columns(files):
    text_run = cranfield.read_run(str(DATA / "results.test"))
    text_qrels = cranfield.read_qrels(str(DATA / "qrels.test"))
    for encoding in ENCODERS:
        q, r = files[encoding]
        run = cranfield.read_run(str(r))
        assert run.topics == text_run.topics and run.runid == text_run.runid
        assert np.array_equal(run.topic_index, text_run.topic_index)
        assert np.array_equal(run.scores, text_run.scores)
        assert run.docids_at(np.arange(len(run))).tolist() == \
            text_run.docids_at(np.arange(len(text_run))).tolist()
        qrels = cranfield.read_qrels(str(q))
        assert qrels.to_dict() == text_qrels.to_dict()


def test_cli_prints_the_same_bytes_for_every_encoding(files, capsys):
    outputs = {}
    for encoding, (q, r) in files.items():
        for fmt in ("trec", "csv", "jsonl"):
            code, out, err = cli(capsys, "eval", "-q", "--format", fmt, "-m", "all_trec", q, r)
            assert code == 0, err
            outputs[encoding, fmt] = out
    for fmt in ("trec", "csv", "jsonl"):
        assert {outputs[e, fmt] for e in files} == {outputs["text", fmt]}, fmt
    # and trec_eval's own: the default measures
    for encoding, (q, r) in files.items():
        code, out, _ = cli(capsys, "eval", q, r)
        assert code == 0
        assert out == (DATA / "v9.0.8" / "out.test").read_text(), encoding


def test_cli_json_digests_a_table_by_its_content(files, capsys):
    """--format json's provenance: a Parquet/Arrow run digested by content, as the API digests
    the same upload (the same digest as the run sent as a JSON mapping), text as its bytes."""
    import json

    from cranfield.inputs.json_body import columns_sha256

    digests = set()
    for encoding in ENCODERS:
        q, r = files[encoding]
        code, out, err = cli(capsys, "eval", "--format", "json", "-m", "map", q, r)
        assert code == 0, err
        prov = json.loads(out)["provenance"]
        digests.add((prov["run_sha256"], prov["qrels_sha256"]))
    assert digests == {(columns_sha256(cranfield.read_run(str(DATA / "results.test"))),
                        columns_sha256(cranfield.read_qrels(str(DATA / "qrels.test"))))}


@pytest.mark.parametrize("encoding", ["parquet", "arrow-stream"])
def test_cli_reads_a_table_from_standard_input(files, capsys, monkeypatch, encoding):
    q, r = files[encoding]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(r.read_bytes())))
    code, out, err = cli(capsys, "eval", "-m", "map", "-m", "P.10", DATA / "qrels.test", "-")
    assert code == 0, err
    assert out == "map                   \tall\t0.1785\nP_10                  \tall\t0.3000\n"


def test_text_with_a_misleading_name_stays_text(tmp_path, capsys):
    named = tmp_path / "run.parquet"
    named.write_bytes((DATA / "results.test").read_bytes())
    code, out, _ = cli(capsys, "eval", DATA / "qrels.test", named)
    assert code == 0
    assert out == (DATA / "v9.0.8" / "out.test").read_text()
    # TREC text whose first topic is PAR1 is text too (a separator follows the magic)
    run = cranfield.read_run(b"PAR1 Q0 d1 1 1.0 r\nPAR1 Q0 d2 2 0.5 r\n")
    assert run.topics == ["PAR1"] and len(run) == 2


@pytest.mark.parametrize("kind", ["run", "qrels"])
@pytest.mark.parametrize("encoding", list(CORRUPT))
def test_a_malformed_file_is_one_input_error_everywhere(tmp_path, capsys, kind, encoding):
    bad = tmp_path / f"{kind}.bin"
    bad.write_bytes(CORRUPT[encoding])
    reader = cranfield.read_run if kind == "run" else cranfield.read_qrels
    with pytest.raises(cranfield.InputError) as path_err:
        reader(str(bad))
    with pytest.raises(cranfield.InputError) as bytes_err:
        reader(CORRUPT[encoding])
    # the service's reader of the same bytes (named as the API names the part)
    with pytest.raises(cranfield.InputError) as api_err:
        table_bytes.read_table_bytes(CORRUPT[encoding], kind, kind, max_rows=10, max_bytes=10**6)
    assert path_err.value.source == str(bad) and bytes_err.value.source == kind
    assert path_err.value.reason == bytes_err.value.reason == api_err.value.reason
    assert path_err.value.reason.startswith("malformed ")
    assert path_err.value.code == api_err.value.code == "invalid-input"
    args = (bad, DATA / "results.test") if kind == "qrels" else (DATA / "qrels.test", bad)
    code, out, err = cli(capsys, "eval", *args)
    assert (code, out) == (2, "")
    assert err == f"cranfield: {bad}: {api_err.value.reason}\n"


def test_a_truncated_file_is_refused(files, capsys):
    data = files["parquet"][1].read_bytes()
    with pytest.raises(cranfield.InputError, match="malformed Parquet file"):
        cranfield.read_run(data[: len(data) // 2] + b"PAR1")
    data = files["arrow-stream"][1].read_bytes()
    with pytest.raises(cranfield.InputError, match="run: malformed Arrow IPC data"):
        cranfield.read_run(data[: len(data) // 2])


@pytest.mark.parametrize("table, words", [
    (pa.table({"topic": ["1"], "docid": ["d"]}), "missing column score"),
    (pa.table({"topic": ["1"], "docid": ["d"], "score": ["1.0"]}), "must hold numbers"),
    (pa.table({"topic": ["1", "1"], "docid": ["a", "b c"], "score": [1.0, 2.0]}),
     "may not contain a space"),
    (pa.table({"topic": ["1", "1"], "docid": ["a", "b"], "score": [1.0, float("nan")]}),
     "not a finite number"),
])
def test_the_grammar_is_the_services(tmp_path, capsys, table, words):
    path = tmp_path / "run"
    path.write_bytes(parquet(table))
    with pytest.raises(cranfield.InputError) as local:
        cranfield.read_run(str(path), name="run")
    with pytest.raises(cranfield.InputError) as service:
        columnar.read_run_bytes(path.read_bytes(), "run", max_rows=10, max_bytes=10**6)
    assert str(local.value) == str(service.value)
    assert words in local.value.reason
    code, _, err = cli(capsys, "eval", DATA / "qrels.test", path)
    assert code == 2 and words in err


def test_a_duplicate_docid_has_the_texts_code_and_exit(tmp_path, capsys):
    path = tmp_path / "run"
    path.write_bytes(ipc_file(pa.table({"topic": ["1", "1"], "docid": ["a", "a"],
                                        "score": [1.0, 2.0]})))
    with pytest.raises(cranfield.InputError) as exc:
        cranfield.read_run(path)
    assert exc.value.code == "duplicate-docid"
    code, _, err = cli(capsys, "eval", DATA / "qrels.test", path)
    assert code == 4 and "appears twice" in err


def test_the_bounds_are_the_services(tmp_path, capsys, monkeypatch):
    """Rows and uncompressed bytes from the metadata, before anything is decompressed: the
    same sentences as the API's 413 (tests/api/test_columnar_uploads.py), exit code 2."""
    assert table_bounds.local_bounds("run") == {"max_rows": 100_000 * 10_000,
                                            "max_bytes": 512 * 1024 * 1024,
                                            "max_memory": None}  # unless set
    assert table_bounds.local_bounds("qrels")["max_rows"] is None  # as the service's
    monkeypatch.setattr(table_bounds, "MAX_ROWS", 6)
    seven = pa.table({"topic": ["1"] * 7, "docid": [f"d{i}" for i in range(7)],
                      "score": [1.0] * 7})
    path = tmp_path / "seven"
    for enc in (ipc_stream, parquet):
        path.write_bytes(enc(seven))
        with pytest.raises(cranfield.InputError) as exc:
            cranfield.read_run(path)
        assert exc.value.code == "too-large"
        assert exc.value.reason == "7 rows exceed the limit of 6"
        code, _, err = cli(capsys, "eval", DATA / "qrels.test", path)
        assert code == 2 and err == f"cranfield: {path}: 7 rows exceed the limit of 6\n"
    monkeypatch.setattr(table_bounds, "MAX_ROWS", None)
    monkeypatch.setattr(table_bounds, "MAX_BYTES", 2_000_000)
    # one 100 kB docid repeated by 100 rows: a few kB of Parquet, 10 MB decoded
    n = 100
    bomb = pa.table({"topic": ["1"] * n, "docid": ["d" * 100_000] * n,
                     "score": np.arange(n, dtype=float)})
    path.write_bytes(parquet(bomb))
    assert path.stat().st_size < 200_000
    with pytest.raises(cranfield.InputError, match="decode to more than") as exc:
        cranfield.read_run(path)
    assert exc.value.code == "too-large"
    monkeypatch.setattr(table_bounds, "MAX_BYTES", None)  # 0 in the environment: no bound
    with pytest.raises(cranfield.InputError) as exc:  # read in full: the next check speaks
        cranfield.read_run(path)
    assert exc.value.code == "duplicate-docid"


def test_settings_read_the_bounds():
    from cranfield.settings import Settings

    got = Settings.from_environ({"CRANFIELD_TABLE_MAX_ROWS": "6",
                                 "CRANFIELD_TABLE_MAX_BYTES": "0"})
    assert (got.table_max_rows, got.table_max_bytes) == (6, None)
    with pytest.raises(ValueError, match="CRANFIELD_TABLE_MAX_BYTES"):
        Settings.from_environ({"CRANFIELD_TABLE_MAX_BYTES": "lots"})
    with pytest.raises(ValueError, match="CRANFIELD_TABLE_MAX_ROWS"):
        Settings.from_environ({"CRANFIELD_TABLE_MAX_ROWS": "-1"})


def test_diversity_qrels_with_their_subtopic_column(tmp_path, capsys):
    """Subtopic qrels (``iteration`` the subtopic) as Parquet and Arrow: the diversity
    measures' values and printout equal the text's."""
    qrels_text = WEB / "qrels-for-ndeval.txt"
    run_text = WEB / "runs" / "ql" / "results-cata-filtered.txt"
    measures = ["alpha_nDCG@20", "ERR_IA@20", "runid", "num_q"]
    reference = cranfield.evaluate(qrels=str(qrels_text), run=str(run_text),
                                   measures=measures)
    table = qrels_table(qrels_text, diversity=True)
    assert set(table.column_names) == {"topic", "docid", "grade", "iteration"}
    args = [x for m in measures for x in ("-m", m)]
    _, expected, _ = cli(capsys, "eval", "-q", *args, qrels_text, run_text)
    for enc in (parquet, ipc_file, ipc_stream):
        path = tmp_path / "subtopics"
        path.write_bytes(enc(table))
        ev = cranfield.evaluate(qrels=path, run=str(run_text), measures=measures)
        assert numbers(ev) == numbers(reference)
        code, out, err = cli(capsys, "eval", "-q", *args, path, run_text)
        assert code == 0, err
        assert out == expected
