"""The client's request bodies (:class:`cranfield.client.Client` sends them): a run or qrels
given as a path streamed from disk as a multipart file part (:class:`Part`,
:class:`MultipartBody`, read :data:`CHUNK` bytes at a time), a table as an Arrow IPC stream
part, a mapping or text as TREC text, and an evaluation's JSON fields as form fields. Room:
top (beside client)."""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from .inputs.io import is_columns  # (columns, told from paths and text without importing pyarrow)

CHUNK = 1 << 20  # a streamed file part is read and sent this many bytes at a time


def _names_a_file(value: str) -> bool:
    """Whether a str argument is a path rather than TREC text: one line that names an
    existing file or directory, or has fewer than 4 fields (a qrels line has 4, a run line 6;
    the engine's readers draw the same line)."""
    return "\n" not in value and bool(value.strip()) and (
        os.path.exists(value) or len(value.split()) < 4)


def text_or_mapping(value: Any) -> Any:
    """Mappings pass through; a path (a PathLike, or a str that :func:`_names_a_file`) is
    read, and a missing file or a directory is an :class:`~cranfield.errors.InputError`
    rather than text sent to the server; other strings are text."""
    if isinstance(value, Mapping):
        return value
    if isinstance(value, os.PathLike) or (isinstance(value, str) and _names_a_file(value)):
        from .errors import InputError

        path = os.fspath(value)
        if os.path.isdir(path):
            raise InputError(str(path), "is a directory")
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read()
        except FileNotFoundError:
            raise InputError(str(path), "no such file") from None
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def _arrow_stream(value: Any, kind: str, compression: str | None = "zstd") -> bytes:
    """A table (or, beside a table run, a qrels mapping) as an Arrow IPC stream holding the
    columns the API reads for ``kind``; its buffers zstd-compressed (M's run: 66 MB instead
    of 152, for ~0.1 s more to read on the server)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from .inputs.columnar import to_arrow
    from .inputs.table_bounds import wanted_columns

    if isinstance(value, Mapping):
        rows = [(t, d, v) for t, docs in value.items() for d, v in docs.items()]
        table = pa.table({"topic": [r[0] for r in rows], "docid": [r[1] for r in rows],
                          ("score" if kind == "run" else "grade"): [r[2] for r in rows]})
    else:
        table = to_arrow(value, kind)
    table = table.select(wanted_columns(table.column_names, kind))
    topic = table.column("topic") if "topic" in table.column_names else None
    if topic is not None and (pa.types.is_string(topic.type) or
                              pa.types.is_large_string(topic.type)):
        # a code per row, each topic's string once: a fifth smaller at M's shape
        table = table.set_column(table.column_names.index("topic"), "topic",
                                 topic.combine_chunks().dictionary_encode())
    sink = pa.BufferOutputStream()
    options = ipc.IpcWriteOptions(compression=compression)
    with ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


ARROW_STREAM = "application/vnd.apache.arrow.stream"
TEXT_PART = "text/plain; charset=utf-8"


class Part:
    """One file part of a multipart body: its bytes, or a file on disk streamed in
    :data:`CHUNK` pieces (``path``), as it was when the part was made: its size is the
    Content-Length sent, so a file that changes while it is sent (a run still being written)
    is an :class:`~cranfield.errors.InputError` before its last piece goes, rather than a
    body shorter than announced (the server waits for the rest) or a truncated run."""

    def __init__(self, name: str, filename: str, content_type: str, *, data: bytes = b"",
                 path: str | None = None):
        self.name, self.filename, self.content_type = name, filename, content_type
        self.data, self.path = data, path
        self._stat = os.stat(path) if path is not None else None

    @property
    def size(self) -> int:
        return self._stat.st_size if self._stat is not None else len(self.data)

    def chunks(self) -> Iterator[bytes]:
        if self.path is None:
            yield self.data
            return
        left = self.size
        with open(self.path, "rb") as fh:
            while True:
                block = fh.read(min(CHUNK, left))
                left -= len(block)
                if left == 0 or not block:
                    # the last piece is held back until the file is known to be as it was
                    now = os.fstat(fh.fileno())
                    if left or fh.read(1) or now.st_mtime_ns != self._stat.st_mtime_ns:
                        self._changed(now.st_size)
                    if block:
                        yield block
                    return
                yield block

    def _changed(self, size: int) -> None:
        from .errors import InputError

        raise InputError(self.path, f"changed while it was being sent ({self.size} bytes "
                         f"when the upload began, {size} now): send it once it is "
                         "completely written")


class MultipartBody:
    """A multipart/form-data body (RFC 7578) built from plain ``fields`` and file ``parts``,
    iterated in pieces (a file part straight from disk) with its exact ``length`` known
    before a byte is sent: urllib sends an iterable body with that Content-Length as it
    comes, so the client holds one piece of the run at a time."""

    def __init__(self, fields: list[tuple[str, Any]], parts: list[Part]):
        self.boundary = f"cranfield-{uuid.uuid4().hex}"
        self.fields, self.parts = fields, parts
        self.content_type = f"multipart/form-data; boundary={self.boundary}"

    def _heads(self) -> tuple[bytes, list[bytes], bytes]:
        b = self.boundary
        fields = b"".join(f'--{b}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                          f"{value}\r\n".encode() for name, value in self.fields)
        heads = [(f'--{b}\r\nContent-Disposition: form-data; name="{p.name}"; '
                  f'filename="{p.filename}"\r\nContent-Type: {p.content_type}\r\n\r\n')
                 .encode() for p in self.parts]
        return fields, heads, f"--{b}--\r\n".encode()

    @property
    def length(self) -> int:
        fields, heads, tail = self._heads()
        return (len(fields) + sum(len(h) + p.size + 2 for h, p in zip(heads, self.parts,
                                                                        strict=True))
                + len(tail))

    def __iter__(self) -> Iterator[bytes]:
        fields, heads, tail = self._heads()
        yield fields
        for head, part in zip(heads, self.parts, strict=True):
            yield head
            yield from part.chunks()
            yield b"\r\n"
        yield tail

    def read_all(self) -> bytes:
        """The whole body (for tests and small bodies)."""
        return b"".join(self)


def _multipart(fields: list[tuple[str, Any]], files: list[tuple[str, str, bytes, str]]
               ) -> tuple[bytes, str]:
    """(body, Content-Type) of multipart/form-data with plain ``fields`` and ``files``
    (name, filename, bytes, content type), whole (tests and benchmarks build bodies so)."""
    body = MultipartBody(fields, [Part(n, f, t, data=d) for n, f, d, t in files])
    return body.read_all(), body.content_type


def _form_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def topic_metadata_option(value: Any):
    """``options["topic_metadata"]`` read here, by the engine's one reader (its errors name
    the line before anything is sent): a path (a PathLike, or a str naming a file), text,
    bytes, the mapping or a :class:`~cranfield.inputs.segments.TopicMetadata`. Sent as the mapping
    in a JSON body, as its text in a multipart form: the same metadata, one digest."""
    from .inputs.segments import read_topic_metadata

    if isinstance(value, str) and _names_a_file(value):
        from pathlib import Path

        value = Path(value)
    elif isinstance(value, str):
        value = value.encode("utf-8")  # text, never a path on the service's side
    return read_topic_metadata(value)


def path_of(value: Any) -> str | None:
    """The path ``value`` names (a PathLike, or a str that :func:`_names_a_file`), checked
    to be a readable file (:class:`~cranfield.errors.InputError` otherwise), else None."""
    if not (isinstance(value, os.PathLike) or (isinstance(value, str) and _names_a_file(value))):
        return None
    from .errors import InputError

    path = os.fspath(value)
    if os.path.isdir(path):
        raise InputError(str(path), "is a directory")
    if not os.path.isfile(path):
        raise InputError(str(path), "no such file")
    if not os.access(path, os.R_OK):
        raise InputError(str(path), "cannot read: permission denied")
    return path


def _mapping_text(value: Mapping, kind: str) -> bytes:
    """A qrels mapping ({topic: {docid: grade}}) as TREC qrels text, or a run mapping
    ({topic: {docid: score}}) as TREC run text (ranks in the order given)."""
    if kind == "qrels":
        return "".join(f"{t} 0 {d} {int(g)}\n" for t, docs in value.items()
                       for d, g in docs.items()).encode()
    return "".join(f"{t} Q0 {d} {i + 1} {float(s)!r} run\n" for t, docs in value.items()
                   for i, (d, s) in enumerate(docs.items())).encode()


def file_part(name: str, value: Any) -> Part:
    """``value`` (a path, a table, a mapping, TREC text or bytes) as the file part ``name``."""
    if is_columns(value):
        return Part(name, f"{name}.arrows", ARROW_STREAM, data=_arrow_stream(value, name))
    path = path_of(value)
    if path is not None:
        return Part(name, os.path.basename(path) or name, TEXT_PART, path=path)
    if isinstance(value, Mapping):
        return Part(name, f"{name}.txt", TEXT_PART, data=_mapping_text(value, name))
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return Part(name, f"{name}.txt", TEXT_PART, data=data)


# trec_eval's list of parameters, ``P.5,10``: the same measures as ``P.5`` and ``P.10``
_PARAMETER_LIST = re.compile(r"([^,()\s]+)\.([^,()\s]+(?:,[^,()\s]+)+)")


def form_measures(measures: list[str] | None) -> list[str] | None:
    """``measures`` as multipart form fields can carry them: the service reads a form's
    ``measures`` as comma-separated names, so trec_eval's ``P.5,10`` goes as ``P.5`` and
    ``P.10`` (the same measures, resolved in the same order). None when a name has a comma
    no form field can carry (``nDCG(dcg=exp-log2,gains=…)``): the JSON body must."""
    if measures is None:
        return None
    out = []
    for name in measures:
        if "," not in name:
            out.append(name)
            continue
        found = _PARAMETER_LIST.fullmatch(name.strip())
        if found is None:
            return None
        out += [f"{found[1]}.{p}" for p in found[2].split(",")]
    return out


def form_fields(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """An evaluation's JSON fields as form fields (measures repeated, options one field each,
    ``record`` as JSON text)."""
    form: list[tuple[str, Any]] = ([("per_topic", _form_value(fields["per_topic"]))]
                                   if "per_topic" in fields else [])
    if "qrels_id" in fields:
        form.append(("qrels_id", fields["qrels_id"]))
    if "topic_metadata_id" in fields:
        form.append(("topic_metadata_id", fields["topic_metadata_id"]))
    form += [("measures", m) for m in fields.get("measures", ())]
    form += [(key, value.as_text() if key == "topic_metadata" else _form_value(value))
             for key, value in fields.get("options", {}).items() if value is not None]
    if fields.get("details"):
        form.append(("details", "true"))
    if "record" in fields:
        form.append(("record", json.dumps(fields["record"])))
    return form
