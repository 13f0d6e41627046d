"""``cranfield qrels agreement`` and ``cranfield qrels consensus`` (issue #31), and
Client.agreement / Client.consensus, against the app on a loopback port: the CLI's text is
the route's text/plain byte for byte (a stored id with --server, and a file here, text or
Parquet, for the same judgments and options); consensus prints ID@VERSION of the version the
route stores, its recipe in the metadata; errors are exit codes."""

from __future__ import annotations

import contextlib
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from judged_qrels import TEXT

from cranfield.cli import main
from cranfield.client import ApiError, Client

JUDGES = {"alice": {"kind": "person", "notes": "NIST assessor"},
          "bob": {"kind": "person"},
          "llm": {"kind": "model", "model": "umbrela-gpt-4o", "prompt_digest": "sha256:ab12"}}
PLAIN = "text/plain"


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    monkeypatch.delenv("CRANFIELD_SERVER", raising=False)
    monkeypatch.delenv("CRANFIELD_API_KEY", raising=False)


def cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def parquet_file(path) -> None:
    rows = [line.split() for line in TEXT.splitlines()]
    pq.write_table(pa.table({"topic": [r[0] for r in rows], "judge": [r[1] for r in rows],
                             "docid": [r[2] for r in rows],
                             "rel": [int(r[3]) for r in rows]}), path)


def test_agreement_text_is_the_routes_byte_for_byte(client, served, tmp_path):
    text_file, table_file = tmp_path / "jg.txt", tmp_path / "jg.parquet"
    text_file.write_text(TEXT)
    parquet_file(table_file)
    c = Client(served)
    meta = c.put_qrels("j", str(table_file), qrels_format="qrels_jg", judges=JUDGES)
    assert meta["judges"] == JUDGES and meta["judgments"] == 13
    assert c.put_qrels("k", TEXT, qrels_format="qrels_jg")["sha256"] == meta["sha256"]
    for query, args in (("", []), ("?resamples=300&seed=7&level=0.9",
                                    ["--resamples", "300", "--seed", "7", "--level", "0.9"]),
                        ("?resamples=0&per_topic=false", ["--resamples", "0",
                                                          "--no-per-topic"])):
        route = client.get(f"/v1/qrels/j/agreement{query}", headers={"Accept": PLAIN})
        assert route.status_code == 200
        expected = route.get_data(as_text=True)
        for target in (["j", "--server", served], [f"j@{meta['version']}", "--server", served],
                       [str(text_file)], [str(table_file)]):
            code, out, err = cli("qrels", "agreement", *target, *args)
            assert (code, err) == (0, ""), target
            assert out == expected, target
    doc = c.agreement("j", resamples=100, seed=2)
    assert doc == client.get("/v1/qrels/j/agreement?resamples=100&seed=2").get_json()
    assert doc["provenance"] == JUDGES
    assert c.agreement("j", resamples=100, seed=2, accept=PLAIN) == client.get(
        "/v1/qrels/j/agreement?resamples=100&seed=2", headers={"Accept": PLAIN}
    ).get_data(as_text=True)
    code, out, _ = cli("qrels", "agreement", str(text_file), "--resamples", "100", "--seed", "2",
                       "--format", "json")
    local = json.loads(out)
    assert code == 0 and {k: doc[k] for k in local} == local


def test_consensus_prints_the_stored_version(client, served):
    c = Client(served)
    source = c.put_qrels("j", TEXT, qrels_format="qrels_jg", judges=JUDGES)
    code, out, err = cli("qrels", "consensus", "j", "--method", "majority", "--server", served)
    assert (code, err) == (0, ""), err
    latest = client.get("/v1/qrels/j").get_json()
    assert out == f"j@{latest['version']}\n"
    recipe = latest["consensus"]
    assert recipe["method"] == "majority" and recipe["source"]["version"] == source["version"]
    assert recipe["provenance"] == JUDGES
    assert latest["judgments_per_grade"] == {"0": 2, "1": 2, "2": 1}
    code, out, _ = cli("qrels", "consensus", f"j@{source['version']}", "--method", "judge",
                       "--judge", "llm", "--target", "llm-only", "--format", "json",
                       "--server", served)
    meta = json.loads(out)
    assert code == 0 and meta["id"] == "llm-only" and meta["judgments"] == 4
    assert meta["consensus"]["provenance"] == {"llm": JUDGES["llm"]}
    mean = c.consensus(f"j@{source['version']}", "mean", judges=["alice", "bob"], target="m")
    assert mean["gains"] == "real" and mean["consensus"]["judges"] == ["alice", "bob"]


def test_errors_are_exit_codes(client, served, tmp_path):
    c = Client(served)
    c.put_qrels("plain", "1 0 d 1\n")
    assert cli("qrels", "agreement", "nope", "--server", served)[0] == 6
    code, _, err = cli("qrels", "agreement", "plain", "--server", served)
    assert code == 2 and "qrels_jg" in err
    assert cli("qrels", "consensus", "nope", "--method", "max", "--server", served)[0] == 6
    assert cli("qrels", "consensus", "x", "--method", "judge", "--server", served)[0] == 1
    bad = tmp_path / "bad.txt"
    bad.write_text("301 alice d1 x\n")
    code, _, err = cli("qrels", "agreement", str(bad))
    assert code == 2 and "bad.txt:1" in err
    with pytest.raises(ApiError) as info:
        c.consensus("plain", "max")
    assert info.value.status == 422
