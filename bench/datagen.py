"""Seeded, vectorised generator of realistic TREC run and qrels files for the benchmark.

Three scales mirror the workloads cranfield is meant for:

* ``S``: 50 topics x 1,000 docs, graded judgments (TREC ad hoc: grades 0..3, mostly 0,
  roughly 100-500 judged docs per topic, a few ``-1`` grades, docids like ``FT911-12345``).
* ``M``: 6,980 topics x 1,000 docs, binary judgments with only 1-2 relevant (and judged) docs
  per topic (MS MARCO passage dev: qids and docids are decimal integers, docids < 8.8M).
* ``L``: 43,000 topics x 100 docs, graded judgments (shallow pools, docids like ``D1234567``).

Every topic's run lists its docs in descending score order with ranks 1..n; scores have four
decimals and some exact ties. Relevant docs sit at random ranks, and some relevant docs are not
retrieved at all. Nothing loops in Python per line: columns are built as numpy byte-string
arrays and written in chunks, so the 7-million-line M run takes seconds.

Generated files are cached under ``bench/data/<scale>-seed<seed>-v<version>/`` and regenerated
only when missing. Run ``python bench/datagen.py --scales S,M,L`` to build them ahead of time.

The module also has untimed readers that turn those files into the nested mappings the
"from mappings" benchmark variants take (``{topic: {docid: score}}``, ``{topic: {docid: grade}}``).
"""

from __future__ import annotations

import sys

# Run as a script, this file's folder leads sys.path, where bench/queue.py and bench/http.py
# would shadow the standard library's queue and http for everything imported later (pyarrow,
# numba, redis...): drop that entry first.
if sys.path and sys.path[0] == __import__("os").path.dirname(__file__):
    sys.path.pop(0)

import argparse
import json
import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Bump when the generator's output changes, so stale cached files are not reused.
GENERATOR_VERSION = 1

#: Default cache directory (git-ignored).
DEFAULT_DATA_DIR = Path(__file__).resolve().parent / "data"

#: Default seed of every scale.
DEFAULT_SEED = 42

RUN_ID = b"bench"

#: Topics formatted and written per chunk, in lines; bounds the generator's memory.
_CHUNK_LINES = 1_000_000


@dataclass(frozen=True)
class Scale:
    """Shape and judgment model of one benchmark scale."""

    name: str
    description: str
    n_topics: int
    depth: int
    graded: bool
    #: Qids are distinct integers drawn from [qid_low, qid_high).
    qid_low: int
    qid_high: int
    #: Docids are distinct (per topic) integers drawn from [0, n_collection).
    n_collection: int
    #: How a docid integer is spelled: "int" (MS MARCO passages), "trec" (disks 4-5), "msdoc".
    docid_style: str
    #: Graded scales: every retrieved doc down to a per-topic pool depth drawn from this range
    #: is judged ...
    pool_depth: tuple[int, int] = (0, 0)
    #: ... plus deeper retrieved docs with this probability ...
    tail_judged: float = 0.0
    #: ... plus this many (range) judged docs that the run did not retrieve.
    extra_judged: tuple[int, int] = (0, 0)
    #: Probability that a judged retrieved doc at rank r is relevant:
    #: rel_floor + rel_top * exp(-r / rel_decay); judged non-retrieved docs: rel_unretrieved.
    rel_floor: float = 0.0
    rel_top: float = 0.0
    rel_decay: float = 1.0
    rel_unretrieved: float = 0.0
    #: Probability that a judged non-relevant doc carries grade -1 instead of 0.
    negative_grade: float = 0.0
    #: Binary scale: probability that a relevant doc is retrieved (at a log-uniform rank).
    rel_retrieved: float = 0.0


SCALES: dict[str, Scale] = {
    "S": Scale(
        name="S",
        description="50 topics x 1,000 docs, graded (TREC ad hoc)",
        n_topics=50,
        depth=1000,
        graded=True,
        qid_low=401,
        qid_high=451,
        n_collection=528_155,
        docid_style="trec",
        pool_depth=(30, 150),
        tail_judged=0.05,
        extra_judged=(40, 300),
        rel_floor=0.03,
        rel_top=0.45,
        rel_decay=60.0,
        rel_unretrieved=0.08,
        negative_grade=0.03,
    ),
    "M": Scale(
        name="M",
        description="6,980 topics x 1,000 docs, binary, 1-2 judged relevant (MS MARCO dev)",
        n_topics=6980,
        depth=1000,
        graded=False,
        qid_low=2,
        qid_high=1_102_433,
        n_collection=8_841_823,
        docid_style="int",
        rel_retrieved=0.85,
    ),
    "L": Scale(
        name="L",
        description="43,000 topics x 100 docs, graded (shallow pools)",
        n_topics=43_000,
        depth=100,
        graded=True,
        qid_low=1,
        qid_high=5_000_000,
        n_collection=3_213_835,
        docid_style="msdoc",
        pool_depth=(5, 30),
        tail_judged=0.02,
        extra_judged=(0, 20),
        rel_floor=0.05,
        rel_top=0.45,
        rel_decay=8.0,
        rel_unretrieved=0.10,
        negative_grade=0.02,
    ),
}

_TREC_PREFIXES = np.array(
    [b"FBIS3-", b"FBIS4-", b"FT911-", b"FT921-", b"FT934-", b"LA010189-", b"LA123190-"]
)


@dataclass(frozen=True)
class Dataset:
    """Paths and shape of one generated (cached) dataset."""

    scale: Scale
    seed: int
    run_path: Path
    qrels_path: Path
    meta: dict

    @property
    def run_bytes(self) -> int:
        """Size of the run file in bytes."""
        return self.run_path.stat().st_size


def dataset_dir(scale: Scale, seed: int, data_dir: Path = DEFAULT_DATA_DIR) -> Path:
    """Cache directory of one scale and seed."""
    return Path(data_dir) / f"{scale.name}-seed{seed}-v{GENERATOR_VERSION}"


def _complete(directory: Path) -> bool:
    """Generated in full: meta.json is written last, after the run and the qrels."""
    return all((directory / name).exists() for name in ("run.txt", "qrels.txt", "meta.json"))


def cached_dataset(
    scale_name: str, seed: int = DEFAULT_SEED, data_dir: Path = DEFAULT_DATA_DIR
) -> Path | None:
    """The cache directory of ``scale_name`` and ``seed`` if it was generated in full, else
    None (for scripts that use the data and leave generating it to this one)."""
    directory = dataset_dir(SCALES[scale_name], seed, data_dir)
    return directory if _complete(directory) else None


def ensure_dataset(
    scale_name: str, seed: int = DEFAULT_SEED, data_dir: Path = DEFAULT_DATA_DIR
) -> Dataset:
    """Return the cached dataset of ``scale_name`` and ``seed``, generating it if missing."""
    scale = SCALES[scale_name]
    directory = dataset_dir(scale, seed, data_dir)
    run_path = directory / "run.txt"
    qrels_path = directory / "qrels.txt"
    meta_path = directory / "meta.json"
    if not _complete(directory):
        directory.mkdir(parents=True, exist_ok=True)
        meta = generate(scale, seed, run_path, qrels_path)
        _atomic_write_bytes(meta_path, json.dumps(meta, indent=2).encode() + b"\n")
    meta = json.loads(meta_path.read_text())
    return Dataset(scale, seed, run_path, qrels_path, meta)


def ensure_mapping_pickles(dataset: Dataset) -> tuple[Path, Path]:
    """Pickled ``{topic: {docid: score}}`` and ``{topic: {docid: grade}}`` of a dataset.

    The "from mappings" benchmark workers load these (untimed): unpickling is several times
    faster than parsing the text files, and it imports neither numpy nor pyarrow, so the
    workers' peak memory holds only the mappings and the tool under test.
    """
    paths = []
    for source, reader in (
        (dataset.run_path, read_run_mapping),
        (dataset.qrels_path, read_qrels_mapping),
    ):
        target = source.with_suffix(".pickle")
        if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
            tmp = target.with_suffix(".pickle-tmp")
            with open(tmp, "wb") as handle:
                pickler = pickle.Pickler(handle, protocol=pickle.HIGHEST_PROTOCOL)
                pickler.fast = True  # no memo: the mappings share no objects
                pickler.dump(reader(source))
            os.replace(tmp, target)
        paths.append(target)
    return paths[0], paths[1]


def ensure_many_runs(scale_name: str = "S", n: int = 150, seed: int = DEFAULT_SEED,
                     data_dir: Path = DEFAULT_DATA_DIR, noise: float = 0.5
                     ) -> tuple[Path, list[Path]]:
    """``n`` runs against one dataset's qrels (issue #30's evaluate_many case): run ``r``
    scores each of the dataset's retrieved documents as its run does plus seeded N(0, noise)
    noise, lists each topic by descending score with ranks 1..depth, runid ``r<r>``. Cached
    under ``many-<scale>-n<n>-seed<seed>-v<version>/``; returns the qrels and the runs."""
    dataset = ensure_dataset(scale_name, seed, data_dir)
    directory = Path(data_dir) / f"many-{scale_name}-n{n}-seed{seed}-v{GENERATOR_VERSION}"
    paths = [directory / f"run{r:03d}.txt" for r in range(n)]
    if not (directory / "meta.json").exists():
        directory.mkdir(parents=True, exist_ok=True)
        fields = np.array(dataset.run_path.read_bytes().split()).reshape(-1, 6)
        qids, docids = fields[:, 0], fields[:, 2]
        base = np.rint(fields[:, 4].astype(np.float64) * 10_000).astype(np.int64)
        new_topic = np.r_[True, qids[1:] != qids[:-1]]
        topic_of = np.cumsum(new_topic) - 1  # the run file lists each topic's rows together
        ranks = (np.arange(qids.size) - np.flatnonzero(new_topic)[topic_of] + 1).astype("S")
        rng = np.random.default_rng([seed, ord(scale_name), n])
        for r, path in enumerate(paths):
            units = base + np.rint(rng.normal(0.0, noise * 10_000, base.size)).astype(np.int64)
            units = np.maximum(units, 1)
            order = np.lexsort((-units, topic_of))  # topic by topic, by descending score
            lines = _join_columns(qids[order], b" Q0 ", docids[order], b" ", ranks, b" ",
                                  _score_strings(units[order]), b" r%03d" % r)
            with open(path.with_suffix(".tmp"), "wb") as handle:
                _write_lines(handle, lines)
            os.replace(path.with_suffix(".tmp"), path)
        meta = {"scale": scale_name, "runs": n, "seed": seed, "noise": noise,
                "run_lines": int(qids.size), "qrels": str(dataset.qrels_path)}
        _atomic_write_bytes(directory / "meta.json", json.dumps(meta).encode() + b"\n")
    return dataset.qrels_path, paths


# --------------------------------------------------------------------------- generation


def generate(scale: Scale, seed: int, run_path: Path, qrels_path: Path) -> dict:
    """Generate the run and qrels files of ``scale``; return a summary (written as meta.json)."""
    started = time.perf_counter()
    rng = np.random.default_rng([seed, ord(scale.name)])
    n_topics, depth = scale.n_topics, scale.depth

    qid_ints = np.sort(_distinct_rows(rng, 1, n_topics, scale.qid_low, scale.qid_high)[0])
    qids = qid_ints.astype("S")

    n_extra = scale.extra_judged[1] if scale.graded else 2
    doc_ints = _distinct_rows(rng, n_topics, depth + n_extra, 0, scale.n_collection)
    score_units = _scores(rng, n_topics, depth)

    if scale.graded:
        judged_rows, judged_cols, grades = _graded_judgments(rng, scale, n_extra)
    else:
        judged_rows, judged_cols, grades = _binary_judgments(rng, scale, doc_ints)

    _write_run(run_path, qids, doc_ints[:, :depth], score_units, scale.docid_style)
    _write_qrels(
        qrels_path,
        qids[judged_rows],
        _docid_strings(doc_ints[judged_rows, judged_cols], scale.docid_style),
        judged_rows,
        grades,
    )

    retrieved = judged_cols < depth
    relevant = grades > 0
    judged_per_topic = np.bincount(judged_rows, minlength=n_topics)
    return {
        "scale": scale.name,
        "description": scale.description,
        "seed": seed,
        "generator_version": GENERATOR_VERSION,
        "topics": n_topics,
        "docs_per_topic": depth,
        "run_lines": n_topics * depth,
        "run_bytes": run_path.stat().st_size,
        "qrels_lines": int(grades.size),
        "qrels_bytes": qrels_path.stat().st_size,
        "judged_per_topic_min": int(judged_per_topic.min()),
        "judged_per_topic_max": int(judged_per_topic.max()),
        "relevant": int(relevant.sum()),
        "relevant_retrieved": int((relevant & retrieved).sum()),
        "grade_counts": dict(
            zip(*(column.tolist() for column in np.unique(grades, return_counts=True)), strict=True)
        ),
        "generation_seconds": round(time.perf_counter() - started, 2),
    }


def _distinct_rows(
    rng: np.random.Generator, n_rows: int, n_cols: int, low: int, high: int
) -> np.ndarray:
    """Random int64 matrix whose values are distinct within each row, drawn from [low, high)."""
    if n_cols > high - low:
        raise ValueError("range too small for distinct values")
    values = rng.integers(low, high, size=(n_rows, n_cols), dtype=np.int64)
    while True:
        order = np.argsort(values, axis=1, kind="stable")
        ordered = np.take_along_axis(values, order, axis=1)
        repeated_sorted = np.zeros(ordered.shape, dtype=bool)
        repeated_sorted[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
        if not repeated_sorted.any():
            return values
        repeated = np.zeros_like(repeated_sorted)
        np.put_along_axis(repeated, order, repeated_sorted, axis=1)
        values[repeated] = rng.integers(low, high, size=int(repeated.sum()), dtype=np.int64)


def _scores(rng: np.random.Generator, n_topics: int, depth: int) -> np.ndarray:
    """Descending scores in units of 1e-4 (int64), with some exact ties, all positive."""
    top = rng.uniform(8.0, 30.0, size=(n_topics, 1))
    gaps = rng.exponential(1.0, size=(n_topics, depth)) * (0.6 * top / depth)
    gaps[:, 0] = 0.0
    gaps[rng.random((n_topics, depth)) < 0.03] = 0.0  # exact ties
    units = np.rint((top - np.cumsum(gaps, axis=1)) * 10_000).astype(np.int64)
    return np.maximum(units, 1)


def _graded_judgments(
    rng: np.random.Generator, scale: Scale, n_extra: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Judged (topic row, doc column, grade) triples of a graded scale."""
    n_topics, depth = scale.n_topics, scale.depth
    ranks = np.arange(1, depth + 1)

    pool = rng.integers(scale.pool_depth[0], scale.pool_depth[1] + 1, size=(n_topics, 1))
    judged_retrieved = (ranks <= pool) | (rng.random((n_topics, depth)) < scale.tail_judged)
    n_unretrieved = rng.integers(scale.extra_judged[0], scale.extra_judged[1] + 1, size=n_topics)
    judged_unretrieved = np.arange(n_extra) < n_unretrieved[:, None]
    judged = np.concatenate([judged_retrieved, judged_unretrieved], axis=1)

    p_relevant = np.concatenate(
        [
            np.broadcast_to(
                scale.rel_floor + scale.rel_top * np.exp(-ranks / scale.rel_decay),
                (n_topics, depth),
            ),
            np.full((n_topics, n_extra), scale.rel_unretrieved),
        ],
        axis=1,
    )
    relevant = judged & (rng.random(judged.shape) < p_relevant)
    # Every topic gets at least one relevant doc: its best-ranked judged doc.
    no_relevant = ~relevant.any(axis=1)
    relevant[no_relevant, 0] = True
    judged[no_relevant, 0] = True

    grades = np.where(
        relevant,
        rng.choice(np.array([1, 2, 3]), size=judged.shape, p=[0.55, 0.30, 0.15]),
        np.where(rng.random(judged.shape) < scale.negative_grade, -1, 0),
    )
    rows, cols = np.nonzero(judged)
    return rows, cols, grades[rows, cols]


def _binary_judgments(
    rng: np.random.Generator, scale: Scale, doc_ints: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Judged (topic row, doc column, grade) triples of the binary scale: 1-2 relevant each.

    A retrieved relevant doc takes a log-uniform rank in 1..depth (a third land in the top 10);
    an unretrieved one uses one of the two spare columns past ``depth``. ``doc_ints`` is
    rearranged in place so that the relevant docs sit at their ranks.
    """
    n_topics, depth = scale.n_topics, scale.depth
    n_relevant = np.where(rng.random(n_topics) < 0.9, 1, 2)
    slot = np.arange(2)[None, :] < n_relevant[:, None]  # (topic, k): k-th relevant doc exists
    retrieved = slot & (rng.random((n_topics, 2)) < scale.rel_retrieved)
    ranks = np.floor(np.exp(rng.uniform(0.0, np.log(depth), size=(n_topics, 2)))).astype(np.int64)
    ranks = np.clip(ranks, 1, depth)
    # Two relevant docs of one topic must not share a rank.
    clash = retrieved[:, 0] & retrieved[:, 1] & (ranks[:, 0] == ranks[:, 1])
    ranks[clash, 1] = np.where(ranks[clash, 0] < depth, ranks[clash, 0] + 1, depth - 1)

    cols = np.where(retrieved, ranks - 1, depth + np.arange(2)[None, :])
    # The relevant docs are the spare columns' docids; swap them into their ranked positions.
    rows_r, k_r = np.nonzero(retrieved)
    spare_cols = depth + k_r
    target_cols = cols[rows_r, k_r]
    spare = doc_ints[rows_r, spare_cols].copy()
    doc_ints[rows_r, spare_cols] = doc_ints[rows_r, target_cols]
    doc_ints[rows_r, target_cols] = spare

    rows, ks = np.nonzero(slot)
    return rows, cols[rows, ks], np.ones(rows.size, dtype=np.int64)


# --------------------------------------------------------------------------- formatting


def _docid_strings(doc_ints: np.ndarray, style: str) -> np.ndarray:
    """Spell docid integers as byte strings in the scale's style."""
    if style == "int":
        return doc_ints.astype("S")
    if style == "msdoc":
        return np.char.add(b"D", doc_ints.astype("S"))
    if style == "trec":
        prefixes = _TREC_PREFIXES[doc_ints % _TREC_PREFIXES.size]
        numbers = (doc_ints // _TREC_PREFIXES.size + 1).astype("S")
        return np.char.add(prefixes, numbers)
    raise ValueError(f"unknown docid style {style!r}")


def _score_strings(units: np.ndarray) -> np.ndarray:
    """Format scores given in units of 1e-4 as ``12.3456``."""
    whole = (units // 10_000).astype("S")
    fraction = np.char.zfill((units % 10_000).astype("S"), 4)
    return np.char.add(np.char.add(whole, b"."), fraction)


def _join_columns(*columns: np.ndarray | bytes) -> np.ndarray:
    """Concatenate byte-string columns (or constant byte strings) element-wise."""
    line = columns[0]
    for column in columns[1:]:
        line = np.char.add(line, column)
    return line


def _write_lines(handle, lines: np.ndarray) -> None:
    handle.write(b"\n".join(lines.tolist()))
    handle.write(b"\n")


def _write_run(
    path: Path, qids: np.ndarray, doc_ints: np.ndarray, score_units: np.ndarray, style: str
) -> None:
    """Write ``qid Q0 docid rank score runid`` lines, topic by topic, in chunks."""
    n_topics, depth = doc_ints.shape
    rank_strings = np.arange(1, depth + 1).astype("S")
    topics_per_chunk = max(1, _CHUNK_LINES // depth)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as handle:
        for start in range(0, n_topics, topics_per_chunk):
            stop = min(start + topics_per_chunk, n_topics)
            lines = _join_columns(
                np.repeat(qids[start:stop], depth),
                b" Q0 ",
                _docid_strings(doc_ints[start:stop].ravel(), style),
                b" ",
                np.tile(rank_strings, stop - start),
                b" ",
                _score_strings(score_units[start:stop].ravel()),
                b" " + RUN_ID,
            )
            _write_lines(handle, lines)
    os.replace(tmp, path)


def _write_qrels(
    path: Path, qids: np.ndarray, docids: np.ndarray, rows: np.ndarray, grades: np.ndarray
) -> None:
    """Write ``qid 0 docid grade`` lines, by topic and then docid (as qrels usually are)."""
    order = np.lexsort((docids, rows))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as handle:
        for start in range(0, order.size, _CHUNK_LINES):
            part = order[start : start + _CHUNK_LINES]
            lines = _join_columns(qids[part], b" 0 ", docids[part], b" ", grades[part].astype("S"))
            _write_lines(handle, lines)
    os.replace(tmp, path)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- readers


def read_run_mapping(path: Path) -> dict[str, dict[str, float]]:
    """Read a run file into ``{topic: {docid: score}}`` (untimed benchmark set-up)."""
    return _read_mapping(path, ["qid", "q0", "docid", "rank", "score", "runid"], "score", float)


def read_qrels_mapping(path: Path) -> dict[str, dict[str, int]]:
    """Read a qrels file into ``{topic: {docid: grade}}`` (untimed benchmark set-up)."""
    return _read_mapping(path, ["qid", "iter", "docid", "grade"], "grade", int)


def _read_mapping(path: Path, column_names: list[str], value_column: str, cast) -> dict:
    """Nested mapping from a single-space-separated TREC file, streamed in batches.

    Uses pyarrow's CSV reader when available (seconds for the M run, with memory bounded to
    the mapping plus one batch); otherwise a plain line-by-line reader.
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv
    except ImportError:
        return _read_mapping_plain(path, column_names.index(value_column), cast)

    value_type = pa.float64() if cast is float else pa.int64()
    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=column_names, block_size=32 << 20),
        parse_options=pacsv.ParseOptions(delimiter=" ", quote_char=False),
        convert_options=pacsv.ConvertOptions(
            column_types={"qid": pa.string(), "docid": pa.string(), value_column: value_type},
            include_columns=["qid", "docid", value_column],
        ),
    )
    mapping: dict = {}
    for batch in reader:
        if batch.num_rows == 0:
            continue
        qid_column = batch.column(0)
        changes = pc.not_equal(qid_column.slice(1), qid_column.slice(0, batch.num_rows - 1))
        starts = [0, *(np.flatnonzero(changes.to_numpy(zero_copy_only=False)) + 1).tolist()]
        stops = [*starts[1:], batch.num_rows]
        qids = qid_column.take(pa.array(starts)).to_pylist()
        docids = batch.column(1).to_pylist()
        values = batch.column(2).to_numpy().tolist()
        for qid, start, stop in zip(qids, starts, stops, strict=True):
            topic = mapping.get(qid)
            if topic is None:
                topic = mapping[qid] = {}
            topic.update(zip(docids[start:stop], values[start:stop], strict=True))
    return mapping


def _read_mapping_plain(path: Path, value_index: int, cast) -> dict:
    mapping: dict = {}
    with open(path) as handle:
        for line in handle:
            fields = line.split()
            if fields:
                mapping.setdefault(fields[0], {})[fields[2]] = cast(fields[value_index])
    return mapping


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """Generate (or find cached) datasets and print their summaries."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="S,M,L", help="comma-separated: S,M,L")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    args = parser.parse_args(argv)
    for name in [s.strip().upper() for s in args.scales.split(",") if s.strip()]:
        dataset = ensure_dataset(name, args.seed, args.data_dir)
        size_mb = dataset.run_bytes / 1e6
        print(f"{name}: {dataset.run_path} ({size_mb:.1f} MB), {dataset.qrels_path}")
        print("   " + json.dumps(dataset.meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
