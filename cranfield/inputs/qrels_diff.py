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
bytes of their UTF-8 encoding). The work is linear in the judgments (one hash of each
(topic, group, docid) key per version) plus the sort of the changed keys only.

Room: inputs.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .run_qrels import Qrels, byte_key

__all__ = ["KINDS", "diff_qrels", "judgment_keys"]

#: the kinds of judgments a diff compares, and what names a judgment's group in each
KINDS = {"qrels": None, "subtopics": "subtopic", "qrels_jg": "jg"}
_REFUSED = {"prefs": "preference judgments", "qrels_prefs": "qrels read as preferences"}


def judgment_keys(judgments: Any, kind: str = "qrels") -> dict[tuple[str, str, str], Any]:
    """``{(topic, group, docid): grade}`` of ``judgments``: a :class:`Qrels` (``kind``
    ``qrels``: group ``""``; ``subtopics``: the subtopic column), or judgment groups
    (:class:`cranfield.inputs.judgment_files.JudgmentGroups`, ``kind`` ``qrels_jg``)."""
    if kind in _REFUSED:
        raise InputError("qrels", f"a diff compares graded judgments; {_REFUSED[kind]} "
                         f"({kind}) have no grade to compare")
    if kind not in KINDS:
        raise InputError("qrels", f"unknown kind of judgments {kind!r} (one of "
                         f"{', '.join(KINDS)})")
    if kind == "qrels_jg":
        topics = getattr(judgments, "topics", None)
        if not isinstance(topics, dict):
            raise InputError("qrels", "judgment groups expected (qid jg docno rel)")
        return {(t, jg, d): rel for t, groups in topics.items()
                for jg, docs in groups.items() for d, rel in docs.items()}
    if not isinstance(judgments, Qrels):
        raise InputError("qrels", "qrels expected (qid 0 docno grade)")
    names = judgments.topics
    topic_of = [names[i] for i in judgments.topic_index.tolist()]
    if kind == "subtopics" and judgments.subtopics is not None:
        groups = [str(s) for s in judgments.subtopics.tolist()]
    else:
        groups = [""] * len(judgments)
    # (C-level loops: zip and dict build the mapping without a Python step per judgment)
    return dict(zip(zip(topic_of, groups, judgments.docids.tolist(), strict=True),
                    judgments.grades.tolist(), strict=True))


def _topics_of(keys) -> set[str]:
    return {k[0] for k in keys}


def diff_qrels(old: Any, new: Any, kind: str = "qrels") -> dict:
    """The diff of two versions of judgments of one ``kind`` (see :func:`judgment_keys`).

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
    before, after = judgment_keys(old, kind), judgment_keys(new, kind)
    added = after.keys() - before.keys()
    removed = before.keys() - after.keys()
    regraded = {k for k in before.keys() & after.keys() if before[k] != after[k]}
    topics_from, topics_to = _topics_of(before), _topics_of(after)
    group = KINDS[kind]
    per_topic: dict[str, dict] = {}

    def entry(topic: str) -> dict:
        found = per_topic.get(topic)
        if found is None:
            found = per_topic[topic] = {"added": [], "removed": [], "regraded": []}
        return found

    def sort_key(key: tuple[str, str, str]) -> tuple[bytes, bytes]:
        return byte_key(key[1]), byte_key(key[2])

    def judgment(key: tuple[str, str, str], **grades) -> dict:
        out = {group: key[1]} if group else {}
        out["docid"] = key[2]
        out.update(grades)
        return out

    for key in sorted(added, key=sort_key):
        entry(key[0])["added"].append(judgment(key, grade=after[key]))
    for key in sorted(removed, key=sort_key):
        entry(key[0])["removed"].append(judgment(key, grade=before[key]))
    for key in sorted(regraded, key=sort_key):
        entry(key[0])["regraded"].append(judgment(key, **{"from": before[key],
                                                         "to": after[key]}))
    in_old = _counts(before)
    topics = []
    for topic in sorted(per_topic, key=byte_key):
        lists = per_topic[topic]
        n_add, n_rem, n_reg = (len(lists["added"]), len(lists["removed"]),
                               len(lists["regraded"]))
        status = ("added" if topic not in topics_from else
                  "removed" if topic not in topics_to else "changed")
        unchanged = in_old.get(topic, 0) - n_rem - n_reg
        topics.append({"topic": topic, "status": status,
                       "counts": {"added": n_add, "removed": n_rem, "regraded": n_reg,
                                  "unchanged": unchanged}, **lists})
    n_reg = len(regraded)
    n_changed = sum(1 for t in topics if t["status"] == "changed")
    totals = {"added": len(added), "removed": len(removed), "regraded": n_reg,
              "unchanged": len(before) - len(removed) - n_reg,
              "judgments_from": len(before), "judgments_to": len(after),
              "topics_from": len(topics_from), "topics_to": len(topics_to),
              "topics_added": len(topics_to - topics_from),
              "topics_removed": len(topics_from - topics_to),
              "topics_changed": n_changed,
              "topics_unchanged": len(topics_from & topics_to) - n_changed}
    return {"kind": kind, "totals": totals,
            "topics_added": sorted(topics_to - topics_from, key=byte_key),
            "topics_removed": sorted(topics_from - topics_to, key=byte_key),
            "topics": topics}


def _counts(judgments: dict) -> dict[str, int]:
    """Judgments per topic."""
    out: dict[str, int] = {}
    for key in judgments:
        out[key[0]] = out.get(key[0], 0) + 1
    return out
