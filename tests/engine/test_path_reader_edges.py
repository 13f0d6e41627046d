"""A run file read by path through pyarrow (in 1 MiB blocks) after the grammar's check of
its bytes: whatever a file holds and wherever in it — a control character, a CR not before
LF, a tab in a space-delimited file, CRLF line ends across pyarrow's block edges — the result
must be the line reader's: the same run, or the same error on the same line."""

from __future__ import annotations

import numpy as np
import pytest

import cranfield
import cranfield.inputs.io
from cranfield import InputError

LINES = 40_000  # about 1.3 MB: several of pyarrow's 1 MiB blocks


def _text(eol: bytes = b"\n") -> bytearray:
    return bytearray(b"".join(b"q%d Q0 doc%d %d %.3f sys%s" % (i // 1000, i, i % 1000,
                                                               1000 - i % 1000, eol)
                              for i in range(LINES)))


def _read(path, columnar: bool):
    saved = cranfield.inputs.io.FAST_READER_MIN_BYTES
    cranfield.inputs.io.FAST_READER_MIN_BYTES = 0 if columnar else 1 << 62
    try:
        return cranfield.read_run(path)
    except InputError as exc:
        return (exc.line, exc.field, str(exc))
    finally:
        cranfield.inputs.io.FAST_READER_MIN_BYTES = saved


def _same(path) -> None:
    fast, slow = _read(path, True), _read(path, False)
    if isinstance(slow, tuple):
        assert fast == slow
        return
    assert not isinstance(fast, tuple)
    assert fast.topics == slow.topics and fast.runid == slow.runid
    np.testing.assert_array_equal(fast.topic_index, slow.topic_index)
    np.testing.assert_array_equal(fast.scores, slow.scores)
    assert fast.docids_at(np.arange(len(fast))).tolist() == slow.docids.tolist()


@pytest.mark.parametrize("where", [5, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, -2])
@pytest.mark.parametrize("byte", [b"\x00", b"\x1f", b"\x7f", b"\r", b"\t", b"\x0b"])
def test_a_bad_byte_anywhere_gives_the_line_readers_answer(tmp_path, where, byte):
    text = _text()
    at = where if where >= 0 else len(text) + where
    if text[at:at + 1] in (b"\n", b" "):  # keep the line count: replace a letter
        at += 1
    text[at:at + 1] = byte
    path = tmp_path / "run.txt"
    path.write_bytes(bytes(text))
    _same(path)


def test_crlf_line_ends_across_blocks_are_read(tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes(bytes(_text(b"\r\n")))
    run = _read(path, True)
    assert not isinstance(run, tuple) and not isinstance(run.docids, np.ndarray)
    _same(path)


@pytest.mark.parametrize("shift", range(-3, 4))
def test_a_cr_at_a_block_edge_not_before_lf_is_refused(tmp_path, shift):
    text = _text()
    at = (1 << 20) + shift
    while text[at:at + 1] in (b"\n", b" ") or text[at + 1:at + 2] == b"\n":  # (not CRLF)
        at += 1
    text[at:at + 1] = b"\r"
    path = tmp_path / "run.txt"
    path.write_bytes(bytes(text))
    fast = _read(path, True)
    assert isinstance(fast, tuple) and "carriage return" in fast[2]
    _same(path)


def test_a_file_ending_in_a_lone_cr_is_refused(tmp_path):
    path = tmp_path / "run.txt"
    path.write_bytes(bytes(_text()) + b"q99 Q0 d 1 1.0 sys\r")
    _same(path)


def test_a_crlf_split_by_pyarrows_block_edge_is_read(tmp_path):
    """The CR the last byte of pyarrow's first 1 MiB block, its LF the first of the next."""
    text = bytes(_text(b"\r\n"))
    edge = (1 << 20) - 1
    cr = text.rfind(b"\r", 0, edge)  # the last CR before the edge: lengthen its line's docid
    start = text.rfind(b"\n", 0, cr) + 1
    line = text[start:cr].split(b" ")
    line[2] += b"x" * (edge - cr)
    text = text[:start] + b" ".join(line) + text[cr:]
    assert text[edge:edge + 2] == b"\r\n"
    path = tmp_path / "run.txt"
    path.write_bytes(text)
    run = _read(path, True)
    assert not isinstance(run, tuple) and not isinstance(run.docids, np.ndarray)
    _same(path)
