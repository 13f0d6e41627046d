"""Issue 27, misread 2: TREC text starting with a UTF-8 byte-order mark.

trec_eval splits its fields on ASCII whitespace (its own character loop over the line), so the
mark EF BB BF stays glued to the first topic id: that topic then matches nothing in the
other file, silently. Cranfield refuses such a file on every way in, with one sentence naming
line 1, on the fast readers (C, CSV) and the line reader alike."""

from __future__ import annotations

import io

import pytest

from cranfield import InputError, read_qrels, read_run
from cranfield.inputs import io as cio

BOM = b"\xef\xbb\xbf"
REASON = "line 1 starts with a UTF-8 byte-order mark (EF BB BF): save the file without it"
RUN = b"q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq2 Q0 d1 1 1.0 r\n"
QRELS = b"q1 0 d1 1\nq2 0 d1 0\n"


def _ways(data: bytes, tmp_path):
    """The same bytes as each source the library reads: bytes, str, memoryview, a binary and
    a text file object, a path (str and PathLike)."""
    path = tmp_path / "input.txt"
    path.write_bytes(data)
    return {"bytes": data, "str": data.decode("utf-8"), "memoryview": memoryview(data),
            "binary file": io.BytesIO(data), "text file": io.StringIO(data.decode("utf-8")),
            "path": str(path), "pathlike": path}


@pytest.fixture(params=["line reader", "fast reader"])
def reader_path(request, monkeypatch):
    """Both TREC readers: the line reader, and the fast ones (the C scan / Arrow CSV), which
    run from FAST_READER_MIN_BYTES up."""
    if request.param == "fast reader":
        monkeypatch.setattr(cio, "FAST_READER_MIN_BYTES", 0)
    return request.param


@pytest.mark.parametrize("way", ["bytes", "str", "memoryview", "binary file", "text file",
                                 "path", "pathlike"])
@pytest.mark.parametrize("kind", ["run", "qrels"])
def test_bom_refused_every_way(kind, way, tmp_path, reader_path):
    reader = read_run if kind == "run" else read_qrels
    data = BOM + (RUN if kind == "run" else QRELS)
    with pytest.raises(InputError) as info:
        reader(_ways(data, tmp_path)[way], name=kind)
    err = info.value
    assert (err.reason, err.line, err.code, err.location) == \
        (REASON, 1, "invalid-input", f"{kind} line 1")
    # the same file without the mark reads, first topic id as written
    clean = reader(_ways(data[3:], tmp_path)[way], name=kind)
    assert clean.topics == ["q1", "q2"]


@pytest.mark.parametrize("kind", ["run", "qrels"])
def test_bom_only_at_the_start(kind, reader_path):
    """A mark later in the file is not at the start of the file: it is part of an id, as
    any other non-ASCII byte (the grammar reads ids as UTF-8)."""
    reader = read_run if kind == "run" else read_qrels
    body = RUN if kind == "run" else QRELS
    later = body + body.splitlines(keepends=True)[0].replace(b"q1", BOM + b"q9")
    read = reader(later, name=kind)
    assert "\ufeffq9" in read.topics


def test_diversity_qrels_refused_too():
    with pytest.raises(InputError) as info:
        read_qrels(BOM + b"q1 1 d1 1\nq1 2 d1 0\n", name="qrels", diversity=True)
    assert info.value.reason == REASON


def test_cli_names_the_line(tmp_path, capsys):
    from cranfield.cli import main

    run = tmp_path / "run.txt"
    qrels = tmp_path / "qrels.txt"
    run.write_bytes(BOM + RUN)
    qrels.write_bytes(QRELS)
    code = main(["eval", str(qrels), str(run)])
    assert code != 0
    assert REASON in capsys.readouterr().err


# ---- cranfield.measures.webtrack: ndeval's and gdeval's own readers, the same refusal ------------

ND_RUN = b"1 Q0 d1 1 2.0 r\n1 Q0 d2 2 1.0 r\n2 Q0 d1 1 1.0 r\n"
ND_QRELS = b"1 1 d1 1\n1 2 d2 1\n2 1 d1 1\n"
GD_QRELS = b"1 0 d1 2\n1 0 d2 1\n2 0 d1 1\n"


def _webtrack(measure: str):
    from cranfield.measures import webtrack

    if measure == "ndeval":
        return webtrack.ndeval, ND_QRELS
    return webtrack.gdeval, GD_QRELS


@pytest.mark.parametrize("text", [False, True], ids=["bytes", "str"])
@pytest.mark.parametrize("kind", ["run", "qrels"])
@pytest.mark.parametrize("measure", ["ndeval", "gdeval"])
def test_webtrack_readers_refuse_bom_the_same_way(measure, kind, text):
    """ndeval and gdeval read their files themselves (cranfield.measures.webtrack): a mark at the
    start was a different error there (its topic '\\ufeff1' not a number); now the one refusal."""
    evaluate, qrels = _webtrack(measure)
    files = {"run": ND_RUN, "qrels": qrels}
    files[kind] = BOM + files[kind]
    if text:
        files = {k: v.decode("utf-8") for k, v in files.items()}
    with pytest.raises(InputError) as info:
        evaluate(files["qrels"], files["run"])
    err = info.value
    assert (err.reason, err.line, err.code, err.location) == \
        (REASON, 1, "invalid-input", f"{kind} line 1")
    # without the mark both read, and topic 1 is evaluated
    clean = {k: (v[1:] if text else v[3:]) if k == kind else v for k, v in files.items()}
    assert list(evaluate(clean["qrels"], clean["run"]).per_topic) == ["1", "2"]


@pytest.mark.parametrize("measure", ["ndeval", "gdeval"])
def test_webtrack_cli_names_the_line(measure, tmp_path, capsys):
    from cranfield.cli import main

    _, qrels_bytes = _webtrack(measure)
    run = tmp_path / "run.txt"
    qrels = tmp_path / "qrels.txt"
    run.write_bytes(ND_RUN)
    qrels.write_bytes(BOM + qrels_bytes)
    assert main([measure, str(qrels), str(run)]) != 0
    assert REASON in capsys.readouterr().err
