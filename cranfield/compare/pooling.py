"""Pooling: which documents to judge, the way TREC builds qrels.

The pool of a topic at depth k is the union over the submitted runs of each run's top k
documents (Voorhees & Harman 2005, "TREC: Experiment and Evaluation in Information
Retrieval", ch. 2). Documents are ranked as trec_eval ranks them (score descending, ties by
docno descending), so the pool matches what the evaluation later reads as "retrieved in the
top k".
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

import numpy as np

from ..errors import InputError
from ..inputs.io import read_qrels, read_run
from ..inputs.ranking import top_documents
from ..inputs.run_qrels import byte_key


def pool(runs: dict[str, Any] | list, depth: int, *, judged: Any = None,
         float32_scores: bool = True, max_work: int | None = None,
         budget_name: str = "MAX_POOL_WORK") -> dict:
    """The judging pool of ``runs`` at ``depth``.

    ``runs``: {name: run} or a list of runs (named by their runid, ``#2``… appended to
    repeats); each run is anything :func:`cranfield.read_run` accepts. Rule, per topic: the
    union of every run's first ``depth`` documents in trec_eval's order (score descending,
    ties broken by docno descending; ``float32_scores`` compares scores as float32 as
    trec_eval 9.0.8 does, else as doubles), minus the documents ``judged`` (qrels, anything
    :func:`cranfield.read_qrels` accepts) already judges for that topic. A qrels line with a
    negative grade means "pooled but not judged" (trec_eval's convention), so such documents
    stay in the pool. A run shorter than ``depth`` contributes all its documents.

    Returns ``{"depth", "runs": [names], "topics": {topic: [docids in code-point order]},
    "sizes": {topic: n}, "total", "already_judged": pool documents removed as judged,
    "contributed": {run: pool documents only that run retrieved in its top depth}}``.
    Topics appear in trec_eval's byte order, including those whose pool is empty after
    removing judged documents.

    ``max_work``: the most :func:`pool_work` (runs × topics × documents per topic) this pool
    may take, checked once the runs are read and before any is ranked: over it, a
    :class:`cranfield.measures.budget.BudgetError` naming ``budget_name`` and the factors (None: no
    bound, the library's default).
    """
    if isinstance(depth, bool) or not isinstance(depth, int | np.integer) or depth < 1:
        raise InputError("depth", f"must be an integer ≥ 1, got {depth!r}", field="depth")
    names, run_objs = _named_runs(runs)
    if max_work is not None:
        check_pool_work(pool_work(run_objs, int(depth)), max_work, budget_name)
    # the top documents of every run as flat columns: topic, docid, which run
    tops = [top_documents(r, int(depth), float32_scores=float32_scores) for r in run_objs]
    topics = sorted({t for top in tops for t in top}, key=byte_key)
    topic_code = {t: i for i, t in enumerate(topics)}
    counts = [len(docs) for top in tops for docs in top.values()]
    row_topic = np.repeat(np.array([topic_code[t] for top in tops for t in top],
                                   dtype=np.int64), counts)
    row_run = np.repeat(np.arange(len(tops)), [sum(len(d) for d in top.values())
                                               for top in tops])
    row_doc = np.fromiter(chain.from_iterable(chain.from_iterable(top.values() for top in tops)),
                          dtype=object, count=len(row_topic))
    judged_topic, judged_doc = _judged(judged, topic_code)
    # one integer code per distinct docid (pool and qrels alike), then one per (topic, docid)
    doc_names, doc_code = np.unique(np.concatenate([row_doc, judged_doc]), return_inverse=True)
    n_docs = max(len(doc_names), 1)
    key = row_topic * n_docs + doc_code[:len(row_doc)]
    judged_key = judged_topic * n_docs + doc_code[len(row_doc):]
    # a docid appears once per topic in a run, so a key's count is how many runs pooled it
    unique_key, first, n_runs = np.unique(key, return_index=True, return_counts=True)
    fresh = ~np.isin(unique_key, judged_key)
    pooled = unique_key[fresh]
    only_one = fresh & (n_runs == 1)
    contributed = np.bincount(row_run[first[only_one]], minlength=len(names))
    pool_topic = pooled // n_docs
    bounds = np.searchsorted(pool_topic, np.arange(len(topics) + 1))
    pool_docs = doc_names[pooled % n_docs].tolist()  # keys sort by topic, then docid
    by_topic = {t: pool_docs[bounds[i]:bounds[i + 1]] for i, t in enumerate(topics)}
    return {"depth": int(depth), "runs": names, "topics": by_topic,
            "sizes": {t: len(d) for t, d in by_topic.items()}, "total": int(len(pooled)),
            "already_judged": int(np.count_nonzero(~fresh)),
            "contributed": dict(zip(names, contributed.tolist(), strict=True))}


def pool_work(runs: list, depth: int) -> dict[str, int]:
    """What pooling ``runs`` (read runs) at ``depth`` costs, as its factors: ``runs``,
    ``topics`` (of every run together), ``documents`` per topic (``depth``, or fewer when no
    run's topic holds that many) and ``total``, their product: the most (topic, document)
    rows the pool ranks, sorts and unions."""
    topics: set[str] = set()
    longest = 0
    for run in runs:
        topics.update(run.topics)
        if len(run.topic_index):
            longest = max(longest, int(np.bincount(run.topic_index).max()))
    documents = min(int(depth), longest)
    return {"runs": len(runs), "topics": len(topics), "documents": documents,
            "total": len(runs) * len(topics) * documents}


def check_pool_work(work: dict[str, int], limit: int, budget_name: str = "MAX_POOL_WORK"
                    ) -> None:
    """:class:`cranfield.measures.budget.BudgetError` when ``work`` (:func:`pool_work`) is over
    ``limit``, naming the budget and the factors."""
    from ..measures.budget import BudgetError

    if work["total"] <= limit:
        return
    raise BudgetError(
        f"this pool is {work['runs']:,} runs × {work['topics']:,} topics × "
        f"{work['documents']:,} documents = {work['total']:,} rows, over {budget_name} "
        f"{limit:,}: pool fewer runs or topics, or a smaller depth",
        budget=budget_name, limit=limit, total=work["total"],
        factors={k: work[k] for k in ("runs", "topics", "documents")}, field="runs")


def format_pool(pool: dict) -> str:
    """The pool as a judging file: ``topic 0 docid`` lines (qrels without the grade column),
    topics in byte order, docids in byte order within a topic."""
    lines = [f"{topic} 0 {doc}\n"
             for topic in sorted(pool["topics"], key=byte_key)
             for doc in sorted(pool["topics"][topic], key=byte_key)]
    return "".join(lines)


def _named_runs(runs) -> tuple[list[str], list]:
    if isinstance(runs, Mapping):
        if not runs:
            raise InputError("runs", "no run to pool", field="runs")
        return [str(n) for n in runs], [read_run(r, name=str(n) if isinstance(r, Mapping)
                                                 else None) for n, r in runs.items()]
    run_objs = [read_run(r) for r in runs]
    if not run_objs:
        raise InputError("runs", "no run to pool", field="runs")
    names: list[str] = []
    for r in run_objs:  # runids may repeat: number the repeats
        name, n = r.runid, 1
        while name in names:
            n += 1
            name = f"{r.runid}#{n}"
        names.append(name)
    return names, run_objs


def _judged(judged, topic_code: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(topic code, docid) of the judged documents (grade ≥ 0) of the pooled topics."""
    if judged is None:
        return np.zeros(0, np.int64), np.zeros(0, dtype=object)
    qrels = read_qrels(judged)
    codes = np.array([topic_code.get(t, -1) for t in qrels.topics], dtype=np.int64)
    topic = codes[qrels.topic_index] if len(qrels.topics) else np.zeros(0, np.int64)
    keep = (topic >= 0) & (qrels.grades >= 0)
    return topic[keep], np.asarray(qrels.docids, dtype=object)[keep]
