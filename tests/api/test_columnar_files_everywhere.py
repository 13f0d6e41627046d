"""Columnar everywhere (issue #26): the same run and qrels as TREC text, Parquet, an Arrow IPC
file and an Arrow IPC stream give the same numbers from the library (paths), the same bytes
on ``cranfield eval``'s standard output (the command, run as a process) and from the API
(multipart parts, ``Accept: text/plain`` and JSON); a corrupt Parquet file is refused with
one sentence by all three: the library's InputError, the command's message (exit code 2, as
for any malformed input) and the API's 422 problem naming the part. The readers are one:
cranfield.inputs.table_bytes.read_table_bytes behind the service's uploads and the library's
files."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from columnar_tables import ipc_file as arrow_file
from columnar_tables import ipc_stream as arrow_stream
from columnar_tables import parquet, qrels_table, run_table

import cranfield

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
CRANFIELD = str(Path(sys.executable).with_name("cranfield"))
MEASURES = ["map", "P.10", "ndcg_cut.10", "recip_rank", "num_rel_ret", "Rprec", "bpref"]
CORRUPT_PARQUET = b"PAR1\x15" + b"\x00" * 40 + b"PAR1"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """(qrels, run) per encoding, named alike (.bin): the bytes tell them apart."""
    root = tmp_path_factory.mktemp("everywhere")
    out = {"text": (DATA / "qrels.test", DATA / "results.test")}
    for name, enc in (("parquet", parquet), ("arrow-file", arrow_file),
                      ("arrow-stream", arrow_stream)):
        q, r = root / f"qrels-{name}.bin", root / f"run-{name}.bin"
        q.write_bytes(enc(qrels_table()))
        r.write_bytes(enc(run_table()))
        out[name] = (q, r)
    return out


def command(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([CRANFIELD, "eval", *map(str, argv)], capture_output=True,
                          text=True, timeout=120)


def post(client, qrels: bytes, run: bytes, *, per_topic: bool, accept: str):
    data = {"run": (io.BytesIO(run), "run.bin", "application/octet-stream"),
            "qrels": (io.BytesIO(qrels), "qrels.bin", "application/octet-stream"),
            "measures": ",".join(MEASURES), "per_topic": str(per_topic).lower()}
    return client.post("/v1/evaluations", data=data, content_type="multipart/form-data",
                       headers={"Accept": accept})


def test_one_run_four_encodings_three_interfaces(client, files):
    flags = [a for m in MEASURES for a in ("-m", m)]
    stdout, library, api_json = {}, {}, {}
    for encoding, (q, r) in files.items():
        done = command("-q", *flags, q, r)
        assert done.returncode == 0, done.stderr
        stdout[encoding] = done.stdout
        ev = cranfield.evaluate(qrels=str(q), run=str(r), measures=MEASURES)
        library[encoding] = (ev.per_topic, ev.aggregate, ev.runid)
        resp = post(client, q.read_bytes(), r.read_bytes(), per_topic=True,
                    accept="text/plain")
        assert resp.status_code == 200, resp.get_data(as_text=True)
        assert resp.get_data(as_text=True) == done.stdout, encoding
        resp = post(client, q.read_bytes(), r.read_bytes(), per_topic=True,
                    accept="application/json")
        assert resp.status_code == 200, resp.get_json()
        doc = resp.get_json()
        api_json[encoding] = (doc["per_topic"], doc["aggregate"])
    assert len(set(stdout.values())) == 1
    assert all(v == library["text"] for v in library.values())
    assert all(v == api_json["text"] for v in api_json.values())
    per_topic, aggregate, runid = library["text"]
    assert api_json["text"] == (per_topic, aggregate)
    assert runid == "STANDARD" and aggregate["num_rel_ret"] == 131


def test_a_corrupt_parquet_is_one_sentence_everywhere(client, files, tmp_path):
    bad = tmp_path / "run.bin"
    bad.write_bytes(CORRUPT_PARQUET)
    with pytest.raises(cranfield.InputError) as exc:
        cranfield.evaluate(qrels=str(DATA / "qrels.test"), run=str(bad), measures=MEASURES)
    sentence = exc.value.reason
    assert sentence.startswith("malformed Parquet file: ")
    assert exc.value.source == str(bad) and exc.value.code == "invalid-input"

    done = command(DATA / "qrels.test", bad)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"cranfield: {bad}: {sentence}\n"

    resp = post(client, (DATA / "qrels.test").read_bytes(), CORRUPT_PARQUET, per_topic=False,
                accept="application/json")
    assert resp.status_code == 422 and resp.mimetype == "application/problem+json"
    doc = resp.get_json()
    assert doc["code"] == "invalid-input"
    assert doc["errors"] == {"run": [sentence]}
    assert doc["detail"] == f"run: {sentence}"


def test_eval_on_a_service_prints_the_same_jsonl(served, files, capsys):
    """``cranfield eval --server URL --format jsonl`` (a Parquet run streamed to a service
    answering on a loopback port) prints the lines the local command prints."""
    from cranfield.cli import main

    q, r = files["parquet"]
    flags = ["--format", "jsonl", *[a for m in MEASURES for a in ("-m", m)]]
    for extra in ([], ["-q"], ["-q", "-n"]):
        assert main(["eval", *flags, *extra, str(q), str(r)]) == 0
        local = capsys.readouterr().out
        assert main(["eval", "--server", served, *flags, *extra, str(q), str(r)]) == 0
        remote = capsys.readouterr().out
        assert remote == local and local
