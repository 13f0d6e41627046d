"""A newcomer's first mistakes get a sentence, not a traceback (issue #17): arguments given
the wrong way round, a directory for a file, a missing file handed to the client."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import cranfield
from cranfield.cli import main
from cranfield.client import Client
from cranfield.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS, RUN = str(DATA / "qrels.test"), str(DATA / "results.test")


def cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_swapped_arguments_say_qrels_come_first(capsys):
    code, out, err = cli(capsys, "eval", RUN, QRELS)
    assert code == 2 and out == ""
    assert err == (f"cranfield: {RUN}: looks like a run file; trec_eval takes QRELS first "
                   "(cranfield eval QRELS RUN)\n")


def test_swapped_arguments_from_the_console_script():
    exe = Path(sys.executable).with_name("cranfield")
    done = subprocess.run([str(exe), "eval", "-m", "map", RUN, QRELS], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "looks like a run file; trec_eval takes QRELS first" in done.stderr


def test_swapped_is_said_only_when_the_files_are_clearly_swapped(capsys, tmp_path):
    # a run file given for both: reading fails, but RUN is not qrels-shaped
    code, _, err = cli(capsys, "eval", RUN, RUN)
    assert code == 2 and "looks like a run file" not in err
    assert "expected 4 fields (qid iter docno grade), found 6" in err
    # qrels given for both: the usual field-count message
    code, _, err = cli(capsys, "eval", QRELS, QRELS)
    assert code == 2 and "looks like a run file" not in err
    assert "expected at least 6 fields" in err
    # a malformed run with the right order: the line's own error, not a swap
    bad = tmp_path / "bad.run"
    bad.write_text("301 Q0 d1 1 x r\n")
    code, _, err = cli(capsys, "eval", QRELS, str(bad))
    assert code == 2 and err == f"cranfield: {bad}:1: score: " + err.split(": score: ")[1]
    assert "looks like a run file" not in err


def test_right_order_still_evaluates(capsys):
    code, out, _ = cli(capsys, "eval", "-m", "map", QRELS, RUN)
    assert code == 0 and out.startswith("map")


@pytest.mark.parametrize("which", ["qrels", "run"])
def test_a_directory_is_a_directory(capsys, tmp_path, which):
    args = [str(tmp_path), RUN] if which == "qrels" else [QRELS, str(tmp_path)]
    code, out, err = cli(capsys, "eval", *args)
    assert (code, out, err) == (2, "", f"cranfield: {tmp_path}: is a directory\n")


@pytest.mark.parametrize("command", ["ndeval", "gdeval"])
def test_a_directory_is_a_directory_for_the_web_track_tools(capsys, tmp_path, command):
    code, out, err = cli(capsys, command, str(tmp_path), RUN)
    assert (code, out, err) == (2, "", f"cranfield: {tmp_path}: is a directory\n")


def test_compare_and_pool_say_is_a_directory(capsys, tmp_path):
    code, _, err = cli(capsys, "compare", QRELS, RUN, str(tmp_path))
    assert (code, err) == (2, f"cranfield: {tmp_path}: is a directory\n")
    code, _, err = cli(capsys, "pool", "-k", "5", RUN, str(tmp_path))
    assert code == 2 and err.endswith(f"{tmp_path}: is a directory\n")


def test_the_library_readers_say_is_a_directory(tmp_path):
    for read in (cranfield.read_run, cranfield.read_qrels):
        with pytest.raises(InputError, match=r": is a directory$"):
            read(str(tmp_path))
        with pytest.raises(InputError, match=r": is a directory$"):
            read(tmp_path)  # a PathLike
    # one-line TREC text is still text
    assert cranfield.read_qrels("301 0 d1 1").to_dict() == {"301": {"d1": 1}}


def test_client_refuses_a_missing_file_before_sending(tmp_path):
    api = Client("http://127.0.0.1:9")  # nothing listens: no request may be made
    missing = tmp_path / "missing.txt"
    with pytest.raises(InputError) as exc:
        api.evaluate("301 0 d1 1\n", str(missing))
    assert str(exc.value) == f"{missing}: no such file"
    with pytest.raises(InputError, match=r"missing\.txt: no such file$"):
        api.evaluate("301 0 d1 1\n", "missing.txt")
    with pytest.raises(InputError, match=r"missing\.txt: no such file$"):
        api.evaluate("301 0 d1 1\n", missing)  # a PathLike
    with pytest.raises(InputError, match=r"qrels\.txt: no such file$"):
        api.evaluate("qrels.txt", "301 Q0 d1 1 1.0 r\n")
    with pytest.raises(InputError, match=r": is a directory$"):
        api.put_qrels("q", str(tmp_path))


def test_client_reads_files_and_keeps_text(tmp_path, monkeypatch):
    from cranfield import client_body

    sent = []
    monkeypatch.setattr(Client, "request", lambda self, method, path, body=None, **kw:
                        sent.append(body) or (200, {}, b"{}"))
    copy = tmp_path / "run.txt"
    shutil.copy(RUN, copy)
    Client("http://x").evaluate("301 0 d1 1", str(copy))
    body = sent[-1].read_all()  # a path goes as a file part, streamed from disk
    assert Path(RUN).read_bytes() in body
    assert b'name="qrels"; filename="qrels.txt"' in body
    assert b"\r\n\r\n301 0 d1 1\r\n" in body  # one line of 4 fields: TREC text
    assert len(body) == sent[-1].length
    Client("http://x").evaluate("301 0 d1 1", "301 Q0 d1 1 1.0 r\n")
    assert sent[-1]["run"] == "301 Q0 d1 1 1.0 r\n"  # two texts: a JSON body
    assert sent[-1]["qrels"] == "301 0 d1 1"
    assert client_body.text_or_mapping("301 Q0 d1 1 1.0 r") == "301 Q0 d1 1 1.0 r"
