"""Tables from bytes: an Apache Arrow IPC stream or file, or a Parquet file, told apart by
their magic bytes (:func:`sniff`; the content types the API takes: :data:`CONTENT_TYPES`) and
read within bounds (:func:`read_table_bytes`, :func:`check_table_bytes`): rows and uncompressed
bytes from the IPC messages' headers (:func:`_batch_header_bounds`) or the Parquet footer
(:mod:`cranfield.inputs.parquet_reader`) before anything is decompressed, then validated in full
(offsets, UTF-8) before a kernel reads them. The table read is made a run or qrels by
:mod:`cranfield.inputs.columnar`.

Room: inputs.
"""

from __future__ import annotations

import struct

from ..errors import InputError
from .parquet_reader import read_parquet
from .table_bounds import check_schema, decoded_bound, over_bounds, wanted_columns

ARROW_STREAM_TYPE = "application/vnd.apache.arrow.stream"
ARROW_FILE_TYPE = "application/vnd.apache.arrow.file"
PARQUET_TYPE = "application/vnd.apache.parquet"
CONTENT_TYPES = {ARROW_STREAM_TYPE: "arrow", ARROW_FILE_TYPE: "arrow", PARQUET_TYPE: "parquet"}


def sniff(data) -> str | None:
    """``"arrow"`` (an IPC stream or file), ``"parquet"``, or None (text, JSON...) by the
    first bytes."""
    head = bytes(data[:8])
    if head.startswith(b"ARROW1\0"):  # NUL: never in TREC text or JSON
        return "arrow"
    # after the magic a Parquet file has a page header (binary), TREC text a separator
    if head.startswith(b"PAR1") and len(data) >= 12 and head[4:5] not in b" \t" and \
            bytes(data[-4:]) == b"PAR1":
        return "parquet"
    if head[:4] == b"\xff\xff\xff\xff" and len(data) >= 8:  # not UTF-8: IPC continuation
        return "arrow"
    return None


def check_table_bytes(data, kind: str, label: str | None = None, *,
                      max_rows: int | None = None, max_bytes: int | None = None,
                      max_memory: int | None = None, fmt: str | None = None) -> None:
    """Only the bounds :func:`read_table_bytes` checks, from the metadata (what a queued
    upload is held to before it is stored): nothing is decompressed or materialised."""
    read_table_bytes(data, kind, label, max_rows=max_rows, max_bytes=max_bytes,
                     max_memory=max_memory, fmt=fmt, bounds_only=True)


def read_table_bytes(data, kind: str, label: str | None = None, *, max_rows: int | None = None,
                     max_bytes: int | None = None, max_memory: int | None = None,
                     fmt: str | None = None, bounds_only: bool = False):
    """The table held by Arrow IPC (stream or file) or Parquet bytes, only the columns a
    ``kind`` (``run``/``qrels``) reads. Before anything is decompressed: at most ``max_rows``
    rows, ``max_bytes`` uncompressed bytes and ``max_memory`` bytes of memory once read
    (estimated: :func:`cranfield.inputs.table_bounds.memory_estimate`) — an InputError with code
    ``too-large`` otherwise; then validated in full. A malformed file is an InputError naming
    the reason."""
    import pyarrow as pa

    label = label or kind
    fmt = fmt or sniff(data)
    buf = pa.py_buffer(data)
    limits = (max_rows, max_bytes, max_memory)
    try:
        if fmt == "parquet":
            table = read_parquet(buf, kind, label, *limits, bounds_only)
        elif fmt == "arrow":
            table = _read_ipc(buf, kind, label, *limits, bounds_only)
        else:
            raise InputError(label, "is neither an Arrow IPC stream or file nor a Parquet file")
        if table is not None:
            table.validate(full=True)
            decoded_bound(table, label, max_bytes)
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError, TypeError, IndexError, KeyError,
            struct.error) as exc:  # (KeyError: a reader's lookup of a column it lacks)
        what = "Parquet file" if fmt == "parquet" else "Arrow IPC data"
        raise InputError(label, f"malformed {what}: {_short(exc)}") from None
    return table


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


def _read_ipc(buf, kind, label, max_rows, max_bytes, max_memory, bounds_only=False):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    is_file = bytes(buf[:6]) == b"ARROW1"
    stream = buf.slice(8) if is_file else buf
    # the schema message only (a file's copy at its start): nothing else is read yet
    check_schema(ipc.open_stream(pa.BufferReader(stream)).schema, kind, label)
    rows = nbytes = 0
    for message in ipc.MessageReader.open_stream(pa.BufferReader(stream)):
        if message.type in ("record batch", "dictionary"):
            r, b = _batch_header_bounds(message)
            rows += r if message.type == "record batch" else 0
            nbytes += b
            over_bounds(label, rows, nbytes, max_rows, max_bytes, kind, max_memory)
    if bounds_only:
        return None
    if is_file:
        table = ipc.open_file(buf).read_all()
    else:
        table = ipc.open_stream(buf).read_all()
    return table.select(wanted_columns(table.column_names, kind))


def _batch_header_bounds(message) -> tuple[int, int]:
    """(rows, uncompressed body bytes) of a record batch or dictionary batch message, from
    its flatbuffer header (and, for a compressed body, each buffer's 8-byte uncompressed
    length prefix) without decompressing anything."""
    meta = memoryview(message.metadata).cast("B")
    body = message.body
    body = memoryview(body).cast("B") if body is not None else memoryview(b"")

    def table(pos):
        vt = pos - struct.unpack_from("<i", meta, pos)[0]
        vsize = struct.unpack_from("<H", meta, vt)[0]

        def field(i):
            at = 4 + 2 * i
            off = struct.unpack_from("<H", meta, vt + at)[0] if at < vsize else 0
            return pos + off if off else None
        return field

    def ref(at):  # an offset field: where it points
        return at + struct.unpack_from("<I", meta, at)[0]

    msg = table(struct.unpack_from("<I", meta, 0)[0])
    header = msg(2)
    if header is None:
        return 0, len(body)
    batch = table(ref(header))
    if message.type == "dictionary":
        data = batch(1)
        if data is None:
            return 0, len(body)
        batch = table(ref(data))
    length_at = batch(0)
    rows = struct.unpack_from("<q", meta, length_at)[0] if length_at is not None else 0
    compressed = batch(3) is not None
    buffers_at = batch(2)
    if not compressed or buffers_at is None:
        return rows, len(body)
    vec = ref(buffers_at)
    count = struct.unpack_from("<I", meta, vec)[0]
    total = 0
    for k in range(count):
        offset, length = struct.unpack_from("<qq", meta, vec + 4 + 16 * k)
        if length >= 8 and 0 <= offset and offset + 8 <= len(body):
            size = struct.unpack_from("<q", body, offset)[0]
            total += length - 8 if size < 0 else size
        else:
            total += max(length, 0)
    return rows, total
