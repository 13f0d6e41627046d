"""Arrow <-> numpy without pyarrow's pandas shim (``to_numpy`` and ``pa.array`` import
pandas: ~0.4 s): primitive columns viewed as numpy, numpy and str lists as Arrow arrays,
rows taken from (chunked) string columns.

Room: inputs.
"""

from __future__ import annotations

import numpy as np


def numpy_of(arr, dtype) -> np.ndarray:
    """The values of a primitive pyarrow array (or chunked array) without nulls as numpy,
    viewing its buffer (a chunked array's chunks are concatenated)."""
    dtype = np.dtype(dtype)
    if hasattr(arr, "chunks"):
        parts = [numpy_of(c, dtype) for c in arr.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype)
    if len(arr) == 0:
        return np.zeros(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr),
                         offset=arr.offset * dtype.itemsize)


def arrow_ints(values: np.ndarray):
    """An int64 numpy array as a pyarrow array (zero copy; the buffer keeps it alive)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def arrow_strings(values):
    """A pyarrow string array of Python strs (a list or object array), built from their UTF-8
    bytes (``pa.array`` would import pandas, ~0.3 s, to look at a list)."""
    import pyarrow as pa

    values = values.tolist() if isinstance(values, np.ndarray) else list(values)
    try:
        encoded = [v.encode("utf-8") for v in values]
    except (UnicodeEncodeError, AttributeError):
        return pa.array(values, pa.string())  # (raises as it always did)
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    if lengths.sum() >= 2**31:
        return pa.array(values, pa.string())
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(lengths)
    return pa.Array.from_buffers(pa.string(), len(encoded),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def take_rows(docids, rows: np.ndarray):
    """``docids.take(rows)`` (a pyarrow array or chunked array); a chunked array is taken
    chunk by chunk for sorted ``rows`` (Arrow's take over chunks would first concatenate
    them), else through one concatenated index."""
    import pyarrow as pa

    rows = np.asarray(rows, dtype=np.int64)
    if not isinstance(docids, pa.ChunkedArray):
        return docids.take(arrow_ints(rows))
    if docids.num_chunks == 1:
        return docids.chunk(0).take(arrow_ints(rows))
    if len(rows) > 1 and not (rows[1:] >= rows[:-1]).all():
        order = np.argsort(rows, kind="stable")
        taken = take_rows(docids, rows[order])
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return taken.take(arrow_ints(inverse))
    bounds = np.cumsum([0] + [len(c) for c in docids.chunks])
    cut = rows.searchsorted(bounds)
    parts = [chunk.take(arrow_ints(rows[cut[k]:cut[k + 1]] - bounds[k]))
             for k, chunk in enumerate(docids.chunks) if cut[k + 1] > cut[k]]
    return pa.concat_arrays(parts) if parts else docids.chunk(0).slice(0, 0)


def object_array(values) -> np.ndarray:
    """A numpy object array of str from a pyarrow string array or chunked array, or a list
    (an object array is returned as it is)."""
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    if hasattr(values, "to_pylist"):
        values = values.to_pylist()
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out
