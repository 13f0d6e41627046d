"""The client's streamed upload (cranfield/client_body.py ``Part``/``MultipartBody``): the
Content-Length it announces is what it sends, byte for byte, or the upload stops with an
InputError naming the file before its last piece goes. A run still being written when the
nightly job starts must not become a body shorter than announced (the server waits for the
rest until a timeout), one longer (the excess is read as the next request) or a truncated
run evaluated as if it were whole."""

from __future__ import annotations

import os

import pytest

from cranfield import client_body
from cranfield.client_body import MultipartBody, Part
from cranfield.errors import InputError

LINE = b"q1 Q0 d1 1 1.5 run\n"


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(client_body, "CHUNK", len(LINE) * 4)


def _body(path) -> MultipartBody:
    return MultipartBody([("per_topic", "true")], [Part("run", "run.txt", "text/plain",
                                                        path=str(path))])


def _send(body: MultipartBody, after_first_piece=None) -> bytes:
    """The bytes the body yields, ``after_first_piece()`` run once a piece of the file has
    gone (as a writer appending to the run meanwhile would)."""
    sent, pieces = [], 0
    for piece in body:
        sent.append(piece)
        if piece.startswith(b"q1") and pieces == 0 and after_first_piece is not None:
            after_first_piece()
        pieces += piece.startswith(b"q1")
    return b"".join(sent)


def test_an_unchanged_file_is_sent_as_announced(tmp_path, small_chunks):
    run = tmp_path / "run.txt"
    run.write_bytes(LINE * 50)
    body = _body(run)
    sent = _send(body)
    assert len(sent) == body.length and sent.count(LINE) == 50


def test_an_empty_file_is_sent_as_announced(tmp_path):
    run = tmp_path / "run.txt"
    run.write_bytes(b"")
    body = _body(run)
    assert len(_send(body)) == body.length


@pytest.mark.parametrize("change", ["grows", "shrinks", "rewritten"])
def test_a_file_that_changes_while_it_is_sent_stops_the_upload(tmp_path, small_chunks,
                                                              change):
    run = tmp_path / "run.txt"
    run.write_bytes(LINE * 50)
    body = _body(run)
    announced = body.length

    def meanwhile():
        if change == "grows":
            with open(run, "ab") as fh:
                fh.write(LINE * 10)
        elif change == "shrinks":
            os.truncate(run, len(LINE) * 20)
        else:  # the same size, other bytes, a later time
            run.write_bytes(LINE.replace(b"1.5", b"2.5") * 50)
            st = os.stat(run)
            os.utime(run, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))

    with pytest.raises(InputError) as caught:
        sent = _send(body, meanwhile)
        assert len(sent) == announced  # (what went out before the fix, for the record)
    assert str(run) in str(caught.value) and "changed while it was being sent" in str(
        caught.value)


def test_qrels_put_streams_a_part_with_its_size(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"q1 0 d1 1\n" * 3)
    part = Part("qrels", "qrels.txt", "text/plain", path=str(qrels))
    assert part.size == 30 and b"".join(part.chunks()) == qrels.read_bytes()
