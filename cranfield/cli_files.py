"""The files ``cranfield``'s local commands read: a path or standard input ('-'), a whole
file's bytes, and the per-topic side files (``-Z``, ``--topic-metadata``) read once.
Shared by :mod:`cranfield.cli`, :mod:`cranfield.cli_eval` and :mod:`cranfield.cli_compare`.
Room: the top (the command line)."""

from __future__ import annotations

import os
import sys

from .errors import InputError


def input_source(path: str) -> tuple:
    """A path, or standard input's bytes for '-' (as trec_eval 10 allows)."""
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    return path, path


def file_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    if os.path.isdir(path):
        raise InputError(path, "is a directory")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None


def zscores_file(path: str | None):
    """-Z FILE read once (cranfield.inputs.zscores), '-' from standard input."""
    if path is None:
        return None
    from .inputs.zscores import read_zscores

    return _side_file(path, read_zscores)


def topic_metadata_file(path: str | None):
    """--topic-metadata FILE read once (cranfield.inputs.segments), '-' from standard input."""
    if path is None:
        return None
    from .inputs.segments import read_topic_metadata

    return _side_file(path, read_topic_metadata)


def _side_file(path: str, reader):
    """A per-topic side file (-Z, --topic-metadata) read once by ``reader``: '-' from
    standard input (named <stdin>), else the file named (as a Path: never read as text)."""
    from pathlib import Path

    if path == "-":
        return reader(sys.stdin.buffer.read(), name="<stdin>")
    return reader(Path(path), name=path)
