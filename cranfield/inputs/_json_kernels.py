"""Scanning kernels for :mod:`cranfield.inputs.json_body`, compiled in the C extension
(``cranfield/inputs/_jsonscan.c``, built into ``cranfield.inputs._mapscan`` by ``pip install``
wherever a C compiler is found): this module gives them their names.

Importing it raises ImportError where the extension was not built; :mod:`cranfield.inputs.json_body`
then reads every JSON body with orjson and the mapping readers, with the same answers (slower).
Every kernel reads a ``uint8`` view of the body (or the bytes) and answers with positions;
none builds a Python object per document, and the long ones release the GIL.
"""

from __future__ import annotations

import numpy as np

from ._mapscan import (  # ImportError without the extension: json_body falls back
    hash_hits,
    json_after_value,
    json_member_at,
    json_object_start,
    json_repeated_keys,
    json_scores,
    json_skip_ws,
    json_value_end,
)

__all__ = ["END", "STOPPED", "NOT_THIS_SHAPE", "ESCAPE", "DUPLICATE", "after_value",
           "capacity", "hash_hits", "member_at", "object_start", "repeated_keys", "scores",
           "skip_ws", "value_end"]

# scores() statuses: read to the mapping's closing brace; stopped at ``stop`` between two
# topics; not this shape (or invalid JSON, or declined); a key holds an escape; a docid twice
# in a topic.
END, STOPPED, NOT_THIS_SHAPE, ESCAPE, DUPLICATE = 0, 1, 2, 3, 4

#: skip_ws(buf, i): the first position from ``i`` that is not JSON whitespace.
skip_ws = json_skip_ws
#: value_end(buf, i): the end of the JSON value starting at ``i`` (only its extent: orjson
#: checks it), or -1.
value_end = json_value_end
#: member_at(buf, i): at ``i``, ``"key" :`` -> (key start, key end (inside the quotes), value
#: start), or (-1, -1, -1).
member_at = json_member_at
#: after_value(buf, i): after a member's value, (next member's position, False) after a
#: comma, (end, True) after the closing brace, (-1, False) otherwise.
after_value = json_after_value
#: object_start(buf): the position after the top-level ``{`` (-1 if the body is not an
#: object; -2 if it is empty).
object_start = json_object_start
# hash_hits(hashes, table, out): rows whose hash selects a set entry of the bool bitmap
# ``table`` (its length a power of two), written to ``out``; returns how many. A prefilter:
# equal strings hash equal, so no judged row is missed, and the caller compares the survivors
# as strings.


def repeated_keys(buf) -> int:
    """Whether some object in the JSON text ``buf`` may hold a key twice: 0 when none does;
    1 when two keys of one object have equal bytes (or equal 64-bit hashes) or a key holds an
    escape (``"d1"`` and ``"d\\u0031"`` are one key: the caller settles it by a full read);
    -1 if the text is not JSON."""
    return json_repeated_keys(buf)


def capacity(start: int, end: int) -> tuple[int, int]:
    """(rows, docid bytes) that :func:`scores` may write reading ``buf[start:end]``."""
    return (end - start) // 5 + 2, max(end - start, 1)


def scores(buf, i, stop, doc_bytes, doc_off, values, hashes, slow_rows, slow_span):
    """Read the members ``"topic": {"docid": number, ...}`` of a ``{topic: {docid: number}}``
    mapping from ``i`` (the first key's quote) to the mapping's closing brace, or, when
    ``stop >= 0``, up to the key that starts at ``stop`` (so that pieces of one mapping can be
    read at once; see :func:`cranfield.inputs.json_body._scan`).

    Writes docid bytes, docid end offsets (``doc_off[0] = 0``), values, each docid's FNV-1a
    hash, and the rows (with their text spans) whose number needs a correctly rounding
    parser into the arrays given, which the caller sizes with :func:`capacity`. Returns
    (status, end, topic key spans (k, 2), rows per topic, docid bytes used, rows, slow rows,
    whether any docid byte is not ASCII); ``end`` is the position after the closing brace
    (END) or ``stop`` (STOPPED), -1 otherwise."""
    status, end, spans, counts, used, rows, nslow, high = json_scores(
        buf, i, stop, doc_bytes, doc_off, values, hashes, slow_rows, slow_span)
    return (status, end, np.frombuffer(spans, dtype=np.int64).reshape(-1, 2),
            np.frombuffer(counts, dtype=np.int64), used, rows, nslow, high)
