"""Where TREC text comes from: a path, bytes, a str or a file object read to bytes with a
label for messages, text told from paths, the UTF-8 byte-order mark refused for every way text
comes in, the first line's field count, and run text cut at topic boundaries into pieces.

Room: inputs.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InputError

Source = Any  # a path (str | os.PathLike), TREC text (str / bytes), a file object, or a mapping


# A UTF-8 byte-order mark. trec_eval splits fields on ASCII whitespace, so a file saved with
# one has the mark glued to its first topic id, which then matches nothing, without a word.
# Every way TREC text comes in (path, bytes, str, file object, upload, queued job) is refused
# here, before any reader (the C and CSV fast paths included) sees it: one answer for the file.
UTF8_BOM = b"\xef\xbb\xbf"
BOM_REASON = ("line 1 starts with a UTF-8 byte-order mark (EF BB BF): save the file "
              "without it")


def refuse_bom(data, label: str) -> None:
    """Refuse TREC text (bytes, or the path of a file) that starts with a UTF-8 BOM. Public:
    every reader of TREC text (cranfield.measures.webtrack's too) refuses it with this one
    sentence."""
    if isinstance(data, str):
        try:
            with open(data, "rb") as fh:
                head = fh.read(3)
        except OSError as exc:
            raise InputError(label, f"cannot read file: {exc.strerror}") from exc
    else:
        head = bytes(data[:3])
    if head == UTF8_BOM:
        raise InputError(label, BOM_REASON, line=1)


def path_candidate(source) -> str | None:
    """The path ``source`` could name: any PathLike, or a one-line str short enough to be a
    path; None for what can only be text (or bytes, a mapping, a table)."""
    if isinstance(source, os.PathLike):
        return os.fspath(source)
    if isinstance(source, str) and "\n" not in source and len(source) < 4096:
        return source
    return None


def as_path(source: Source, name: str | None = None) -> str | None:
    """The file path ``source`` names: any PathLike, or a one-line str naming an existing
    file (anything else is TREC text). A directory is an error, not text."""
    path = path_candidate(source)
    if path is None:
        return None
    if os.path.isdir(path):
        raise InputError(name or path, "is a directory")
    return path if isinstance(source, os.PathLike) or os.path.isfile(path) else None


def first_line_fields(source: Source) -> int | None:
    """How many whitespace-separated fields the first line of a TREC file (a path, or bytes)
    has, blank lines and ``#`` comments skipped; None when it has no such line or cannot be
    read. Tells a run (6 fields or more) from qrels (4) for a message, never for parsing."""
    try:
        if isinstance(source, bytes | bytearray | memoryview):
            head = bytes(source[:65536])
        else:
            with open(source, "rb") as fh:
                head = fh.read(65536)
    except (OSError, TypeError, ValueError):
        return None
    lines = head.splitlines()[:-1] if len(head) == 65536 else head.splitlines()
    for line in lines:
        fields = line.split()
        if fields and not fields[0].startswith(b"#"):
            return len(fields)
    return None


def split_trec_text(data: bytes | memoryview, parts: int) -> list[memoryview]:
    """Cut TREC run text into about ``parts`` pieces of similar size, only where the topic id
    changes from one line to the next (so a run that lists each topic's lines together gives
    pieces with disjoint topics; callers check). Looks only at the lines near each cut: at
    each target offset, the nearer end of the topic block found there."""
    size = len(data)

    def find_newline(pos: int) -> int:  # in small windows: ``data`` may be a memoryview
        while pos < size:
            at = bytes(data[pos:pos + 4096]).find(b"\n")
            if at >= 0:
                return pos + at
            pos += 4096
        return -1

    def rfind_newline(end: int) -> int:
        while end > 0:
            start = max(0, end - 4096)
            at = bytes(data[start:end]).rfind(b"\n")
            if at >= 0:
                return start + at
            end = start
        return -1

    def line_at(start: int) -> tuple[int, bytes]:
        end = find_newline(start)
        end = size if end < 0 else end + 1
        fields = bytes(data[start:end]).split()
        return end, fields[0] if fields else b""

    cuts = [0]
    for k in range(1, parts):
        pos = size * k // parts
        first = rfind_newline(pos) + 1  # start of the line holding pos
        _, qid = line_at(first)
        back = first
        while back > cuts[-1]:
            prev = rfind_newline(back - 1) + 1
            if line_at(prev)[1] != qid:
                break
            back = prev
        ahead = first
        while ahead < size and line_at(ahead)[1] == qid:
            ahead = line_at(ahead)[0]
        choices = [c for c in (back, ahead) if cuts[-1] < c < size]
        if choices:
            cuts.append(min(choices, key=lambda c: abs(c - pos)))
    cuts.append(size)
    view = memoryview(data)  # pieces are views: cutting copies nothing
    return [view[a:b] for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def load_bytes(source: Source, name: str | None, kind: str) -> tuple[bytes, str]:
    """Return the raw bytes of a path, text or file object, and a label for messages. A
    memoryview (an upload cut from a request body) stays a view: copying hundreds of MB costs
    more than reading them; the line reader, which needs bytes, copies it."""
    if isinstance(source, memoryview):
        return source, name or kind
    if isinstance(source, bytes | bytearray):
        return bytes(source), name or kind
    path = as_path(source, name)
    if path is not None:
        try:
            with open(path, "rb") as fh:
                return fh.read(), name or path
        except OSError as exc:
            raise InputError(name or path, f"cannot read file: {exc.strerror}") from exc
    if isinstance(source, str):
        if "\n" not in source and source.strip() and len(source.split()) < 4:
            raise InputError(name or source, "no such file")
        return source.encode("utf-8"), name or kind
    if hasattr(source, "read"):
        data = source.read()
        if isinstance(data, str):
            data = data.encode("utf-8")
        return bytes(data), name or getattr(source, "name", None) or kind
    raise InputError(name or kind, f"cannot read a {kind} from {type(source).__name__}")
