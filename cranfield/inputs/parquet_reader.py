"""A Parquet file's table within bounds (:func:`read_parquet`): its schema checked, its row
groups counted, and its columns' uncompressed and decoded sizes bounded from the footer and the
page headers (read here in Python, in the Thrift compact protocol: :func:`_parquet_chunks`,
:func:`_thrift_struct`) before pyarrow decompresses anything. Called by
:func:`cranfield.inputs.table_bytes.read_table_bytes`.

Room: inputs.
"""

from __future__ import annotations

import struct

from ..errors import InputError
from .table_bounds import check_schema, decoded_bound, over_bounds, wanted_columns


def read_parquet(buf, kind, label, max_rows, max_bytes, max_memory, bounds_only=False):
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(buf)
    meta = pf.metadata
    check_schema(pf.schema_arrow, kind, label)
    if meta.num_row_groups > MAX_PARQUET_ROW_GROUPS:
        raise InputError(label, f"holds {meta.num_row_groups} row groups; at most "
                         f"{MAX_PARQUET_ROW_GROUPS} are read (write larger row groups)")
    wanted = wanted_columns(pf.schema_arrow.names, kind)
    # the column chunks' metadata comes from our own reading of the footer, never from
    # pyarrow's accessors: those throw C++ exceptions that abort the process on some
    # malformed footers (an unknown codec, a level histogram of the wrong size)
    chunks = _parquet_chunks(buf, meta) if max_bytes is not None or \
        max_memory is not None else []
    nbytes = sum(max(chunk["uncompressed"], 0) for group in chunks for chunk in group
                 if chunk["path"] in wanted)
    over_bounds(label, meta.num_rows, nbytes, max_rows, max_bytes, kind, max_memory)
    # topic, runid and iteration stay dictionaries (their decoded size is counted from the
    # codes by decoded_bound); docid (~7M distinct values at M: reading it as a dictionary
    # costs a second) and the numbers (strings there would be refused, once decoded) are
    # bounded from their page headers, or read as dictionaries when they cannot be
    ids = [c for c in wanted if c in ("topic", "runid", "iteration")]
    unbounded = _parquet_decoded_bound(buf, meta, chunks, [c for c in wanted if c not in ids],
                                       label, max_bytes)
    ids += unbounded
    if bounds_only:
        if unbounded:
            read = pq.ParquetFile(buf, metadata=meta, read_dictionary=unbounded)
            decoded_bound(read.read(columns=unbounded, use_threads=False), label, max_bytes)
        return None
    pf = pq.ParquetFile(buf, metadata=meta, read_dictionary=ids)
    return pf.read(columns=wanted, use_threads=False)


# a Parquet file's row groups, each read from the footer in Python (~0.14 ms a group) and
# by pyarrow (~0.1 ms): writers make groups of 64k-1M rows, so 10,000 groups hold billions
# of rows, and a file of one-row groups cannot cost more than a few seconds
MAX_PARQUET_ROW_GROUPS = 10_000

# parquet.thrift's enums, as the footer holds them
_PARQUET_TYPES = {0: "BOOLEAN", 1: "INT32", 2: "INT64", 3: "INT96", 4: "FLOAT", 5: "DOUBLE",
                  6: "BYTE_ARRAY", 7: "FIXED_LEN_BYTE_ARRAY"}
_PARQUET_CODEC_IDS = {0: "UNCOMPRESSED", 1: "SNAPPY", 2: "GZIP", 3: "LZO", 4: "BROTLI",
                      5: "LZ4", 6: "ZSTD", 7: "LZ4_RAW"}


def _parquet_chunks(buf, meta) -> list[list[dict]]:
    """Each row group's column chunks, in the schema's column order, as {path, type, codec,
    num_values, uncompressed, compressed, data_page_offset, dictionary_page_offset} read
    from the file's footer (FileMetaData in the Thrift compact protocol). A footer that does
    not hold what the schema says is a ValueError (a malformed file)."""
    data = memoryview(buf).cast("B")
    if len(data) < 12:
        raise ValueError("no Parquet footer")
    size = struct.unpack_from("<I", data, len(data) - 8)[0]
    start = len(data) - 8 - size
    if bytes(data[-4:]) != b"PAR1" or start < 4:
        raise ValueError("no Parquet footer (an encrypted file is not read)")
    try:
        footer, _ = _thrift_struct(data[:len(data) - 8], start, whole=True)
    except (IndexError, RecursionError) as exc:
        raise ValueError(f"unreadable Parquet footer ({type(exc).__name__})") from None
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    groups = footer.get(4)
    if not isinstance(groups, list) or len(groups) != meta.num_row_groups:
        raise ValueError("the footer's row groups differ from its metadata")
    out = []
    for group in groups:
        columns = group.get(1) if isinstance(group, dict) else None
        if not isinstance(columns, list) or len(columns) != len(paths):
            raise ValueError("a row group's column chunks differ from the schema")
        chunks = []
        for path, column in zip(paths, columns, strict=True):
            cm = column.get(3) if isinstance(column, dict) else None
            if not isinstance(cm, dict):
                raise ValueError(f"column {path}: a chunk without its metadata")
            ints = {f: cm.get(f) for f in (1, 4, 5, 6, 7, 9)}
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in ints.values()):
                raise ValueError(f"column {path}: a chunk's metadata lacks a required field")
            held = cm.get(3)
            if not isinstance(held, list) or ".".join(
                    bytes(p).decode("utf-8", "replace") for p in held
                    if isinstance(p, (bytes, memoryview))) != path:
                raise ValueError(f"column {path}: a chunk names another column")
            dictionary = cm.get(11)
            chunks.append({
                "path": path, "type": _PARQUET_TYPES.get(ints[1]),
                "codec": _PARQUET_CODEC_IDS.get(ints[4]), "num_values": ints[5],
                "uncompressed": ints[6], "compressed": ints[7], "data_page_offset": ints[9],
                "dictionary_page_offset": dictionary if isinstance(dictionary, int)
                and not isinstance(dictionary, bool) and dictionary > 0 else None})
        out.append(chunks)
    return out


# Parquet column codecs pyarrow decompresses as the file holds them (the footer's LZ4 is
# mostly raw blocks too; a legacy Hadoop-framed LZ4 page fails to decompress so: then, as
# for any other codec, the column is read as a dictionary instead)
_PARQUET_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd",
                   "LZ4_RAW": "lz4_raw", "LZ4": "lz4_raw"}
# dictionary values scanned in Python per upload (pyarrow's defaults write at most 1 MB of
# dictionary per column chunk: some 50k docids)
_MAX_SCANNED = 1 << 22


def _parquet_decoded_bound(buf, meta, chunks: list[list[dict]], columns: list[str], label: str,
                           max_bytes: int | None) -> list[str]:
    """Too large when the Parquet ``columns`` may decode to more than ``max_bytes`` together,
    from their page headers: a chunk's plain pages decode to at most their uncompressed size,
    its dictionary-coded byte-array pages to at most their values times the longest value of
    the dictionary page (one long docid repeated by every row is a few bytes in the file and
    any size decoded), fixed-width values to their width. Only dictionary pages are
    decompressed. Returns the columns that cannot be bounded here (to be read as
    dictionaries, bounded by :func:`decoded_bound`): a nested column, an unknown codec, an
    unreadable page header, too many dictionary values to scan, chunks claiming more bytes
    than the file holds (overlapping chunks would have their headers walked again and again:
    10,000 row groups times the file)."""
    if max_bytes is None:
        return []
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    unbounded = [name for name in columns if name not in paths]
    total = scanned = walked = unpacked = 0
    for name in (c for c in columns if c in paths):
        column = paths.index(name)
        width = meta.schema.column(column).length  # of a FIXED_LEN_BYTE_ARRAY
        counted = 0
        for group in chunks:
            chunk = group[column]
            if chunk["type"] == "BYTE_ARRAY":
                walked += max(chunk["compressed"], 0)
                got = _byte_array_bound(buf, chunk, max_bytes - unpacked) \
                    if walked <= buf.size else None
                scanned += got[1] if got is not None else 0
                unpacked += got[2] if got is not None else 0
                if got is None or scanned > _MAX_SCANNED:  # pyarrow counts it instead
                    unbounded.append(name)
                    counted = 0
                    break
                counted += got[0]
            else:  # numbers: a few bytes a row; fixed-width bytes: their width a row
                counted += max(chunk["uncompressed"], 0) + max(chunk["num_values"], 0) * max(
                    width if chunk["type"] == "FIXED_LEN_BYTE_ARRAY" else 0, 0)
            if total + counted > max_bytes or unpacked > max_bytes:
                raise InputError(label, f"column {name}'s strings may decode to more than "
                                 f"{max_bytes} bytes", code="too-large")
        total += counted
    return unbounded


def _byte_array_bound(buf, chunk, budget: int) -> tuple[int, int, int] | None:
    """(at most how many bytes a byte-array column chunk decodes to, how many dictionary
    values were scanned, the bytes its dictionary pages hold) from its page headers: a plain
    page at most its uncompressed size, a dictionary-coded page its values times the longest
    value of the dictionary page (the only page decompressed, and only while the dictionary
    pages' sizes stay within ``budget``: past it, the walk stops there with the third value
    over ``budget``). None when the chunk cannot be read here."""
    import pyarrow as pa

    codec = _PARQUET_CODECS.get(chunk["codec"])
    if chunk["codec"] != "UNCOMPRESSED" and codec is None:
        return None
    data = memoryview(buf).cast("B")
    pos = chunk["dictionary_page_offset"] or chunk["data_page_offset"]
    end = pos + chunk["compressed"]
    if pos < 0 or end > len(data):
        return None
    longest, total, scanned, unpacked = None, 0, 0, 0
    try:
        while pos < end:
            header, pos = _thrift_struct(data, pos)
            kind, size, raw = header.get(1), header.get(2, -1), header.get(3, -1)
            if min(size, raw) < 0 or pos + raw > len(data):
                return None
            if kind == 2:  # the dictionary page: PLAIN, a 4-byte length before each value
                unpacked += size
                if unpacked > budget:  # (decompressing allocates what the header claims)
                    break
                page = data[pos:pos + raw]
                if codec is not None:
                    page = memoryview(pa.Codec(codec).decompress(page, decompressed_size=size))
                page = page.cast("B")
                at, longest = 0, longest or 0
                while at + 4 <= len(page) and scanned <= _MAX_SCANNED:
                    n = struct.unpack_from("<I", page, at)[0]
                    longest = max(longest, n)
                    at += 4 + n
                    scanned += 1
            elif kind in (0, 3):  # a data page (v1: header field 5, v2: field 8)
                sub = header.get(5 if kind == 0 else 8)
                sub = sub if isinstance(sub, dict) else {}
                values, encoding = sub.get(1, 0), sub.get(2 if kind == 0 else 4)
                if encoding in (2, 8):  # PLAIN_DICTIONARY, RLE_DICTIONARY
                    if longest is None or not isinstance(values, int) or values < 0:
                        return None
                    total += values * longest
                else:
                    total += size
            pos += raw
    except (pa.ArrowException, IndexError, ValueError, TypeError, RecursionError,
            struct.error):
        return None
    return total, scanned, unpacked


def _thrift_struct(data, pos: int, whole: bool = False) -> tuple[dict, int]:
    """A Thrift compact struct at ``pos`` (a Parquet PageHeader) as {field id: value} for its
    integer and struct fields (the rest skipped), and where it ends. ``whole`` keeps lists
    (as Python lists), binary values (as memoryviews) and booleans too (a FileMetaData)."""
    def varint():
        nonlocal pos
        out = shift = 0
        while True:
            b = data[pos]
            pos += 1
            out |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return out

    def zigzag():
        z = varint()
        return (z >> 1) ^ -(z & 1)

    def value(kind, in_list=0):
        nonlocal pos
        if kind in (1, 2):  # a field's boolean lives in its header (a list's: a byte)
            if in_list:
                pos += 1
                return bool(data[pos - 1] == 1) if whole else None
            return kind == 1 if whole else None
        elif kind == 3:
            pos += 1
        elif kind in (4, 5, 6):
            return zigzag()
        elif kind == 7:
            pos += 8
        elif kind == 8:
            n = varint()
            if n > len(data) - pos:
                raise IndexError("a Thrift binary longer than the file")
            pos += n
            return data[pos - n:pos] if whole else None
        elif kind in (9, 10):
            head = data[pos]
            pos += 1
            n = head >> 4 if head >> 4 != 15 else varint()
            if n > len(data) - pos:  # each element takes a byte at least
                raise ValueError("a Thrift list longer than the file")
            if whole:
                return [value(head & 0x0F, 1) for _ in range(n)]
            for _ in range(n):
                value(head & 0x0F, 1)
        elif kind == 12:
            return fields()
        else:
            raise ValueError(f"Thrift type {kind}")
        return None

    def fields():
        nonlocal pos
        out, field = {}, 0
        while True:
            head = data[pos]
            pos += 1
            if head == 0:
                return out
            field = field + (head >> 4) if head >> 4 else zigzag()
            got = value(head & 0x0F)
            if got is not None:
                out[field] = got

    return fields(), pos
