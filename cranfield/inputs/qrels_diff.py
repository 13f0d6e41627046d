"""Two versions of relevance judgments compared (issue #31): per topic, the judgments added,
removed and regraded, with counts per topic and overall, and the topics added and removed.

A judgment is keyed by (topic, docid) in plain qrels; by (topic, subtopic, docid) in ndeval's
subtopic qrels (``diversity``: a docid is judged once per subtopic); by (topic, judgment
group, docid) in trec_eval's judgment groups (``-R qrels_jg``: each group is one assessor's
judgments, so a judgment added by one judge is an added judgment even when another judged
the document). Preferences (``prefs``, ``qrels_prefs``) are refused: a preference is a
relation between documents, not a grade one can call regraded. Two versions of different
kinds are refused too.

Order is trec_eval's: topics, groups and docids compared as ``strcmp`` compares them (the
bytes of their UTF-8 encoding). The work is in columns: every (topic, group, docid) key of
both versions becomes one int64 whose order is that order (the distinct docids and groups
ranked once by Arrow's byte-order sort), the two sorted key columns are matched by numpy, and
only the changed judgments become Python objects.

Room: inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from .run_qrels import Qrels, byte_key

__all__ = ["KINDS", "diff_qrels", "judgment_columns"]

#: the kinds of judgments a diff compares, and what names a judgment's group in each
KINDS = {"qrels": None, "subtopics": "subtopic", "qrels_jg": "jg"}
_REFUSED = {"prefs": "preference judgments", "qrels_prefs": "qrels read as preferences"}


def _strings(values) -> Any:
    """``values`` (a pyarrow string array or chunked array, or strs) as one pyarrow array of
    type ``string``."""
    import pyarrow as pa

    from .arrow_arrays import arrow_strings

    if isinstance(values, pa.ChunkedArray):
        chunks = [c.cast(pa.string()) for c in values.chunks]
        return pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())
    if isinstance(values, pa.Array):
        return values.cast(pa.string())
    return arrow_strings(values)


def judgment_columns(judgments: Any, kind: str = "qrels") -> tuple[list[str], np.ndarray,
                                                                      Any, Any, np.ndarray]:
    """(topics, each judgment's topic index, its group or None, its docid, its grade) of
    ``judgments``: a :class:`Qrels` (``kind`` ``qrels``; ``subtopics``: the subtopic column
    is the group), or judgment groups (:class:`cranfield.inputs.judgment_files.JudgmentGroups`,
    ``kind`` ``qrels_jg``: the judgment group is). Groups and docids are pyarrow string
    arrays."""
    if kind in _REFUSED:
        raise InputError("qrels", f"a diff compares graded judgments; {_REFUSED[kind]} "
                         f"({kind}) have no grade to compare")
    if kind not in KINDS:
        raise InputError("qrels", f"unknown kind of judgments {kind!r} (one of "
                         f"{', '.join(KINDS)})")
    if kind == "qrels_jg":
        nested = getattr(judgments, "topics", None)
        if not isinstance(nested, dict):
            raise InputError("qrels", "judgment groups expected (qid jg docno rel)")
        topics = list(nested)
        rows = [(i, jg, d, rel) for i, t in enumerate(topics)
                for jg, docs in nested[t].items() for d, rel in docs.items()]
        index = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        return (topics, index, _strings([r[1] for r in rows]), _strings([r[2] for r in rows]),
                np.asarray([r[3] for r in rows]))
    if not isinstance(judgments, Qrels):
        raise InputError("qrels", "qrels expected (qid 0 docno grade)")
    groups = None
    if kind == "subtopics" and judgments.subtopics is not None:
        groups = _strings([str(s) for s in judgments.subtopics.tolist()])
    return (list(judgments.topics), np.asarray(judgments.topic_index, dtype=np.int64), groups,
            _strings(judgments.docids_arrow), np.asarray(judgments.grades))


def _byte_ranks(old, new) -> tuple[np.ndarray, np.ndarray, Any]:
    """Each string of ``old`` and of ``new`` (pyarrow string arrays) as the rank of its value
    among the distinct values of both in byte order, and those values (by rank)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(pa.concat_arrays([old, new]))
    order = pc.array_sort_indices(encoded.dictionary)  # (strings: byte order, strcmp's)
    rank = np.empty(len(encoded.dictionary), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(rank))
    codes = rank[np.asarray(encoded.indices, dtype=np.int64)]
    return codes[:len(old)], codes[len(old):], encoded.dictionary.take(order)


def _keys(tix_old, tix_new, n_topics, groups, docids):
    """The int64 key of each judgment of both versions, ordered as (topic, group, docid) are
    in byte order, and how to read one back: (keys old, keys new, decode)."""
    g_old, g_new, g_values = (_byte_ranks(*groups) if groups[0] is not None else
                              (np.zeros(len(tix_old), np.int64),
                               np.zeros(len(tix_new), np.int64), None))
    d_old, d_new, d_values = _byte_ranks(*docids)
    n_groups = max(len(g_values) if g_values is not None else 1, 1)
    # (topic, group) pairs numbered densely, then × docids: fits in int64 for any input
    # a process can hold (pairs and docids are each at most the judgments of both versions)
    pairs = np.concatenate([tix_old * n_groups + g_old, tix_new * n_groups + g_new])
    distinct, pair_code = np.unique(pairs, return_inverse=True)
    n_docs = max(len(d_values), 1)
    keys = pair_code.astype(np.int64) * n_docs + np.concatenate([d_old, d_new])

    def decode(key: np.ndarray) -> tuple[np.ndarray, list | None, list]:
        pair = distinct[key // n_docs]
        groups_of = (g_values.take(pair % n_groups).to_pylist() if g_values is not None
                     else None)
        return pair // n_groups, groups_of, d_values.take(key % n_docs).to_pylist()

    return keys[:len(tix_old)], keys[len(tix_old):], decode


def _sorted_unique(keys: np.ndarray, grades: np.ndarray, which: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    keys, grades = keys[order], grades[order]
    if len(keys) > 1 and (keys[1:] == keys[:-1]).any():
        raise InputError("qrels", f"{which}: a document judged twice under one key")
    return keys, grades


def diff_qrels(old: Any, new: Any, kind: str = "qrels") -> dict:
    """The diff of two versions of judgments of one ``kind`` (see :func:`judgment_columns`).

    Returns ``{"kind", "totals": {"added", "removed", "regraded", "unchanged", "judgments_from",
    "judgments_to", "topics_from", "topics_to", "topics_added", "topics_removed",
    "topics_changed", "topics_unchanged"}, "topics_added": [...], "topics_removed": [...],
    "topics": [{"topic", "status", "counts": {"added", "removed", "regraded", "unchanged"},
    "added": [{"docid", "grade"}], "removed": [{"docid", "grade"}], "regraded": [{"docid",
    "from", "to"}]}]}``: ``topics`` lists only the topics with a change, ``status`` ``added``
    (only in ``new``), ``removed`` (only in ``old``) or ``changed``; judgments in a group-keyed
    kind carry their ``subtopic`` or ``jg`` before the docid. A grade compares by value, so an
    integer grade and the same real gain are the same grade. A topic in both versions counts
    as changed or unchanged, one in either alone as added or removed."""
    t_old, tix_old, grp_old, doc_old, gr_old = judgment_columns(old, kind)
    t_new, tix_new, grp_new, doc_new, gr_new = judgment_columns(new, kind)
    topics = sorted(set(t_old) | set(t_new), key=byte_key)
    code = {t: i for i, t in enumerate(topics)}
    tix_old = np.asarray([code[t] for t in t_old], np.int64)[tix_old] if len(tix_old) else \
        tix_old
    tix_new = np.asarray([code[t] for t in t_new], np.int64)[tix_new] if len(tix_new) else \
        tix_new
    k_old, k_new, decode = _keys(tix_old, tix_new, len(topics),
                                 (grp_old, grp_new) if grp_old is not None else (None, None),
                                 (doc_old, doc_new))
    k_old, gr_old = _sorted_unique(k_old, gr_old, "from")
    k_new, gr_new = _sorted_unique(k_new, gr_new, "to")
    _, at_old, at_new = np.intersect1d(k_old, k_new, assume_unique=True, return_indices=True)
    kept_old = np.zeros(len(k_old), bool)
    kept_old[at_old] = True
    kept_new = np.zeros(len(k_new), bool)
    kept_new[at_new] = True
    changed = gr_old[at_old] != gr_new[at_new]
    group = KINDS[kind]
    per_topic: dict[int, dict] = {}

    def collect(label: str, keys: np.ndarray, **grades: np.ndarray) -> None:
        tix, groups_of, docids = decode(keys)
        values = {name: g.tolist() for name, g in grades.items()}
        for i, (t, docid) in enumerate(zip(tix.tolist(), docids, strict=True)):
            lists = per_topic.get(t)
            if lists is None:
                lists = per_topic[t] = {"added": [], "removed": [], "regraded": []}
            item = {group: groups_of[i]} if group else {}
            item["docid"] = docid
            for name, vals in values.items():
                item[name] = vals[i]
            lists[label].append(item)

    collect("added", k_new[~kept_new], grade=gr_new[~kept_new])
    collect("removed", k_old[~kept_old], grade=gr_old[~kept_old])
    collect("regraded", k_old[at_old[changed]], **{"from": gr_old[at_old[changed]],
                                                   "to": gr_new[at_new[changed]]})
    in_old = np.bincount(tix_old, minlength=len(topics))
    topics_from, topics_to = set(t_old), set(t_new)
    out_topics = []
    for t in sorted(per_topic):
        lists, name = per_topic[t], topics[t]
        n_add, n_rem, n_reg = (len(lists["added"]), len(lists["removed"]),
                               len(lists["regraded"]))
        status = ("added" if name not in topics_from else
                  "removed" if name not in topics_to else "changed")
        out_topics.append({"topic": name, "status": status,
                           "counts": {"added": n_add, "removed": n_rem, "regraded": n_reg,
                                      "unchanged": int(in_old[t]) - n_rem - n_reg}, **lists})
    n_reg = int(changed.sum())
    n_changed = sum(1 for t in out_topics if t["status"] == "changed")
    totals = {"added": int((~kept_new).sum()), "removed": int((~kept_old).sum()),
              "regraded": n_reg, "unchanged": len(at_old) - n_reg,
              "judgments_from": len(k_old), "judgments_to": len(k_new),
              "topics_from": len(topics_from), "topics_to": len(topics_to),
              "topics_added": len(topics_to - topics_from),
              "topics_removed": len(topics_from - topics_to),
              "topics_changed": n_changed,
              "topics_unchanged": len(topics_from & topics_to) - n_changed}
    return {"kind": kind, "totals": totals,
            "topics_added": sorted(topics_to - topics_from, key=byte_key),
            "topics_removed": sorted(topics_from - topics_to, key=byte_key),
            "topics": out_topics}
