"""Compiled scanning kernels for :mod:`cranfield.json_body` (numba, cached on disk).

Imported only when a large JSON body arrives and numba is installed. Every kernel reads a
``uint8`` view of the body and answers with positions; none allocates Python objects.
Byte values: ``"`` 34, ``\\`` 92, ``{`` 123, ``}`` 125, ``[`` 91, ``]`` 93, ``:`` 58, ``,`` 44.
"""

from __future__ import annotations

import numpy as np
from numba import njit

jit = njit(cache=True, nogil=True, boundscheck=False)

# Exact powers of ten: any integer below 2**53 times or over one of these is rounded once,
# so the quotient or product is the correctly rounded value (Clinger's fast path).
_POW10 = np.array([10.0 ** k for k in range(23)])

# scores() statuses: read to the mapping's closing brace; stopped at ``stop`` between two
# topics; not this shape (or invalid JSON); a key holds an escape; a docid twice in a topic.
END, STOPPED, NOT_THIS_SHAPE, ESCAPE, DUPLICATE = 0, 1, 2, 3, 4


@jit
def skip_ws(buf, i):
    n = len(buf)
    while i < n:
        c = buf[i]
        if c != 32 and c != 10 and c != 13 and c != 9:
            break
        i += 1
    return i


@jit
def string_end(buf, i):
    """``buf[i]`` is an opening quote: the index after the closing quote, or -1 if the string
    is unterminated or holds a raw control character (both invalid JSON)."""
    n = len(buf)
    i += 1
    while i < n:
        c = buf[i]
        if c == 34:
            return i + 1
        if c == 92:
            i += 2
            continue
        if c < 32:
            return -1
        i += 1
    return -1


@jit
def value_end(buf, i):
    """The end of the JSON value starting at ``i`` (only its extent: orjson checks it)."""
    n = len(buf)
    if i >= n:
        return -1
    c = buf[i]
    if c == 34:
        return string_end(buf, i)
    if c == 123 or c == 91:
        depth = 0
        while i < n:
            c = buf[i]
            if c == 34:
                i = string_end(buf, i)
                if i < 0:
                    return -1
                continue
            if c == 123 or c == 91:
                depth += 1
            elif c == 125 or c == 93:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return -1
    while i < n:  # a number or a literal runs to the next delimiter
        c = buf[i]
        if c == 44 or c == 125 or c == 93 or c == 32 or c == 10 or c == 13 or c == 9:
            break
        i += 1
    return i


@jit
def member_at(buf, i):
    """At ``i``: ``"key" :`` -> (key start, key end (inside the quotes), value start), or
    (-1, -1, -1)."""
    i = skip_ws(buf, i)
    if i >= len(buf) or buf[i] != 34:
        return -1, -1, -1
    end = string_end(buf, i)
    if end < 0:
        return -1, -1, -1
    j = skip_ws(buf, end)
    if j >= len(buf) or buf[j] != 58:
        return -1, -1, -1
    return i + 1, end - 1, skip_ws(buf, j + 1)


@jit
def _grow(a, need):
    if need <= len(a):
        return a
    b = np.empty(max(need, 2 * len(a)), dtype=a.dtype)
    b[:len(a)] = a
    return b


@jit
def _number(buf, i, n):
    """A strict JSON number at ``i``: (end or -1, value, exact). ``exact`` is False when the
    value needs a correctly rounding parser (over 15 significant digits or a large
    exponent); the caller then parses the text."""
    neg = False
    if i < n and buf[i] == 45:
        neg = True
        i += 1
    if i >= n:
        return -1, 0.0, False
    # digits are accumulated without a bound: past 19 the significand wraps, but then
    # ``digits > 15`` sends the number to the full parser anyway
    sig = np.uint64(0)
    digits = 0
    exp10 = 0
    integer = True  # no fraction, no exponent: JSON readers give an int (so -0 is 0)
    if buf[i] == 48:
        i += 1
    elif 49 <= buf[i] <= 57:
        while i < n and 48 <= buf[i] <= 57:
            sig = sig * np.uint64(10) + np.uint64(buf[i] - 48)
            digits += 1
            i += 1
    else:
        return -1, 0.0, False
    if i < n and buf[i] == 46:
        integer = False
        i += 1
        start = i
        while i < n and 48 <= buf[i] <= 57:
            sig = sig * np.uint64(10) + np.uint64(buf[i] - 48)
            i += 1
        if i == start:
            return -1, 0.0, False
        digits += i - start  # leading zeros count too: a few more numbers go the long way
        exp10 -= i - start
    if i < n and (buf[i] == 101 or buf[i] == 69):
        integer = False
        i += 1
        eneg = False
        if i < n and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        start = i
        e = 0
        while i < n and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            i += 1
        if i == start:
            return -1, 0.0, False
        exp10 += -e if eneg else e
    if digits > 15 or sig >= np.uint64(1 << 53) or exp10 < -22 or exp10 > 22:
        return i, 0.0, False
    value = float(sig)
    if exp10 < 0:
        value /= _POW10[-exp10]
    else:
        value *= _POW10[exp10]
    if neg and integer and sig == 0:
        return i, 0.0, True  # the integer -0 is 0, as orjson reads it (-0.0 stays -0.0)
    return i, -value if neg else value, True


def capacity(start: int, end: int) -> tuple[int, int]:
    """(rows, docid bytes) that :func:`scores` may write reading ``buf[start:end]``."""
    return (end - start) // 5 + 2, max(end - start, 1)


@jit
def scores(buf, i, stop, doc_bytes, doc_off, values, hashes, slow_rows, slow_span):
    """Read the members ``"topic": {"docid": number, ...}`` of a ``{topic: {docid: number}}``
    mapping from ``i`` (the first key's quote) to the mapping's closing brace, or, when
    ``stop >= 0``, up to the key that starts at ``stop`` (so that pieces of one mapping can be
    read at once; see :func:`cranfield.json_body._scan`).

    Writes docid bytes, docid end offsets (``doc_off[0] = 0``), values, each docid's FNV-1a
    hash, and the rows (with their text spans) whose number needs a correctly rounding
    parser into the arrays given, which the caller sizes with :func:`capacity` (numpy's
    allocations get huge pages; numba's would fault in every 4 KiB page). Returns (status,
    end, topic key spans (k, 2), rows per topic, docid bytes used, rows, slow rows, whether
    any docid byte is not ASCII); ``end`` is the position after the closing brace (END) or
    ``stop`` (STOPPED)."""
    # Nothing is read as part of an entry at or past n, and an entry takes at least five bytes
    # (``"":0,``): so capacity() bounds every write and the per-document loop never grows an
    # array.
    n = len(buf) if stop < 0 else stop
    topic_span = np.empty((256, 2), dtype=np.int64)
    counts = np.empty(256, dtype=np.int64)
    table = np.full(1 << 11, -1, dtype=np.int64)   # open addressing, one topic at a time
    stamp = np.full(1 << 11, -1, dtype=np.int64)
    doc_off[0] = 0
    rows = 0
    dpos = 0
    k = 0
    nslow = 0
    high = 0  # OR of the docid bytes: >= 128 if any is not ASCII (UTF-8 to be checked)
    status = NOT_THIS_SHAPE
    ok = True
    while ok:
        ok = False
        # "topic" : {
        if i >= n or buf[i] != 34:
            break
        kend = string_end(buf, i)
        if kend < 0:
            break
        escaped = False
        for j in range(i + 1, kend - 1):
            if buf[j] == 92:
                escaped = True
        if escaped:
            status = ESCAPE
            break
        if k == len(counts):
            grown = np.empty((2 * k, 2), dtype=np.int64)
            grown[:k] = topic_span
            topic_span = grown
            counts = _grow(counts, 2 * k)
        topic_span[k, 0] = i + 1
        topic_span[k, 1] = kend - 1
        i = skip_ws(buf, kend)
        if i >= n or buf[i] != 58:
            break
        i = skip_ws(buf, i + 1)
        if i >= n or buf[i] != 123:
            break
        i = skip_ws(buf, i + 1)
        first = rows
        good = True
        if i < n and buf[i] == 125:
            i += 1
        else:
            while True:
                good = False
                # "docid" : number
                if i >= n or buf[i] != 34:
                    break
                i += 1
                h = np.uint64(14695981039346656037)
                bad = False
                while i < n:
                    c = buf[i]
                    if c == 34:
                        break
                    if c == 92 or c < 32:
                        bad = True
                        break
                    high |= c
                    doc_bytes[dpos] = c
                    dpos += 1
                    h = (h ^ np.uint64(c)) * np.uint64(1099511628211)
                    i += 1
                if bad or i >= n:
                    if bad and buf[i] == 92:
                        status = ESCAPE
                    break
                doc_off[rows + 1] = dpos
                hashes[rows] = h
                i = skip_ws(buf, i + 1)
                if i >= n or buf[i] != 58:
                    break
                i = skip_ws(buf, i + 1)
                start = i
                i, value, exact = _number(buf, i, n)
                if i < 0:
                    break
                values[rows] = value
                if not exact:
                    slow_rows[nslow] = rows
                    slow_span[nslow, 0] = start
                    slow_span[nslow, 1] = i
                    nslow += 1
                rows += 1
                i = skip_ws(buf, i)
                if i < n and buf[i] == 44:
                    i = skip_ws(buf, i + 1)
                    continue
                if i < n and buf[i] == 125:
                    i += 1
                    good = True
                break
        if not good:
            break
        counts[k] = rows - first
        # a docid twice in this topic: a hash table stamped with the topic number
        size = len(table)
        while size < 2 * (rows - first):
            size *= 2
        if size != len(table):
            table = np.full(size, -1, dtype=np.int64)
            stamp = np.full(size, -1, dtype=np.int64)
        mask = np.uint64(size - 1)
        duplicate = False
        for r in range(first, rows):
            hr = hashes[r]
            slot = np.int64(hr & mask)
            while stamp[slot] == k:
                other = table[slot]
                if hashes[other] == hr:
                    a0, a1 = doc_off[other], doc_off[other + 1]
                    b0, b1 = doc_off[r], doc_off[r + 1]
                    if a1 - a0 == b1 - b0:
                        same = True
                        for j in range(a1 - a0):
                            if doc_bytes[a0 + j] != doc_bytes[b0 + j]:
                                same = False
                                break
                        if same:
                            duplicate = True
                            break
                slot = (slot + 1) & np.int64(size - 1)
            if duplicate:
                break
            stamp[slot] = k
            table[slot] = r
        if duplicate:
            status = DUPLICATE
            break
        k += 1
        i = skip_ws(buf, i)
        if i < n and buf[i] == 44:
            i = skip_ws(buf, i + 1)
            if i == stop:
                return STOPPED, i, topic_span[:k], counts[:k], dpos, rows, nslow, high >= 128
            ok = stop < 0 or i < stop
            continue
        if i < n and buf[i] == 125:
            return END, i + 1, topic_span[:k], counts[:k], dpos, rows, nslow, high >= 128
        break
    return status, -1, topic_span[:0], counts[:0], 0, 0, 0, False


@jit
def after_value(buf, i):
    """After a member's value: (next member's position, False) after a comma, (end, True)
    after the closing brace, (-1, False) otherwise."""
    i = skip_ws(buf, i)
    if i < len(buf) and buf[i] == 44:
        return i + 1, False
    if i < len(buf) and buf[i] == 125:
        return i + 1, True
    return -1, False


@jit
def object_start(buf):
    """Position after the top-level ``{`` (-1 if the body is not an object; -2 if empty)."""
    i = skip_ws(buf, 0)
    if i >= len(buf) or buf[i] != 123:
        return -1
    j = skip_ws(buf, i + 1)
    if j < len(buf) and buf[j] == 125:
        return -2
    return i + 1


@jit
def hash_hits(hashes, table, out):
    """Rows whose hash selects a set entry of the bitmap ``table`` (its length a power of
    two), written to ``out``; returns how many. A prefilter: equal strings hash equal, so no
    judged row is missed, and the caller compares the survivors as strings."""
    mask = np.uint64(len(table) - 1)
    k = 0
    for r in range(len(hashes)):
        if table[np.int64(hashes[r] & mask)]:
            out[k] = r
            k += 1
    return k


@jit
def repeated_keys(buf):
    """Whether some object in the JSON text ``buf`` may hold a key twice: 0 when none does;
    1 when two keys of one object have equal bytes (or equal 64-bit hashes) or a key holds an
    escape (``"d1"`` and ``"d\\u0031"`` are one key: the caller settles it by a full read);
    -1 if the text is not JSON. One pass; the keys of the objects still open are kept on a
    stack, and an object's are compared (sorted hashes) when it closes."""
    n = len(buf)
    hashes = np.empty(1 << 16, dtype=np.uint64)
    nkeys = 0
    # per open container: its first key (-1: an array); orjson refuses nesting past 1024
    base = np.empty(1100, dtype=np.int64)
    depth = 0
    i = 0
    while i < n:
        c = buf[i]
        if c == 34:
            end = string_end(buf, i)
            if end < 0:
                return -1
            j = skip_ws(buf, end)
            if depth > 0 and base[depth - 1] >= 0 and j < n and buf[j] == 58:
                h = np.uint64(14695981039346656037)
                for k in range(i + 1, end - 1):
                    b = buf[k]
                    if b == 92:
                        return 1
                    h = (h ^ np.uint64(b)) * np.uint64(1099511628211)
                if nkeys == len(hashes):  # (a call per key would cost 4 times the scan)
                    hashes = _grow(hashes, nkeys + 1)
                hashes[nkeys] = h
                nkeys += 1
                i = j + 1
            else:
                i = end
            continue
        if c == 123 or c == 91:
            if depth == len(base):
                return 1  # deeper than any text orjson reads: the caller settles it
            base[depth] = nkeys if c == 123 else -1
            depth += 1
        elif c == 125 or c == 93:
            if depth == 0:
                return -1
            depth -= 1
            first = base[depth]
            if first >= 0:
                if nkeys - first > 1:
                    keys = np.sort(hashes[first:nkeys])
                    for k in range(1, len(keys)):
                        if keys[k] == keys[k - 1]:
                            return 1
                nkeys = first
        i += 1
    return 0 if depth == 0 else -1
