"""A qrels diff as text: what ``GET /v1/qrels/{id}/diff`` answers as ``text/plain`` and
``cranfield qrels diff`` prints, byte for byte, from one diff document (the engine's
:func:`cranfield.inputs.qrels_diff.diff_qrels` with its two sides, :func:`diff_document`).

Room: reports.
"""

from __future__ import annotations

from typing import Any

from ..inputs.qrels_diff import KINDS

__all__ = ["diff_document", "format_diff", "side", "POOL_DEPTH_UNKNOWN"]

#: why a side's pool depth is unknown: a stored version put without one, a local file
POOL_DEPTH_UNKNOWN = {
    "stored": "not recorded: the version was stored without pool_depth",
    "file": "not recorded: a qrels file carries no pool depth",
}


def side(ref: str, judgments: int, topics: int, *, version: str | None = None,
         sha256: str | None = None, pool_depth: int | None = None,
         unknown: str = "stored") -> dict:
    """One version of a diff: its reference (``ID@VERSION`` or a file's name), its version
    and digest when stored, its size, and the pool depth it covers (None with the reason,
    ``pool_depth_note``, when it is not known: :data:`POOL_DEPTH_UNKNOWN`)."""
    return {"ref": ref, "version": version, "sha256": sha256, "topics": topics,
            "judgments": judgments, "pool_depth": pool_depth,
            "pool_depth_note": None if pool_depth is not None else POOL_DEPTH_UNKNOWN[unknown]}


def diff_document(diff: dict, old: dict, new: dict, offset: int = 0,
                  limit: int | None = None, next_link: str | None = None) -> dict:
    """The diff (:func:`~cranfield.inputs.qrels_diff.diff_qrels`) with its two sides
    (:func:`side`) and the page of its changed topics from ``offset`` (``limit``: all when
    None); ``total`` counts the changed topics, ``next`` links the next page (None on the
    last)."""
    topics = diff["topics"]
    limit = len(topics) if limit is None else limit
    return {"from": old, "to": new, "kind": diff["kind"], "totals": diff["totals"],
            "topics_added": diff["topics_added"], "topics_removed": diff["topics_removed"],
            "offset": offset, "limit": limit, "total": len(topics), "next": next_link,
            "topics": topics[offset:offset + limit]}


def _grade(value: Any) -> str:
    return str(value)


def _side_line(label: str, s: dict) -> str:
    depth = (f"pool depth {s['pool_depth']}" if s["pool_depth"] is not None
             else f"pool depth unknown ({s['pool_depth_note']})")
    return (f"{label:<6}{s['ref']}  topics {s['topics']}  judgments {s['judgments']}  "
            f"{depth}\n")


def format_diff(doc: dict) -> str:
    """The text of a diff document (:func:`diff_document`): a header (the two sides, the
    totals, the topics added and removed), then each changed topic of the page with its
    counts and one line per judgment: ``+`` added (its grade), ``-`` removed (its grade),
    ``~`` regraded (old ``->`` new); a group-keyed kind writes the subtopic or judgment group
    before the docid. A page short of the whole ends with a line saying which topics it shows
    and the next page's link."""
    group = KINDS.get(doc["kind"])
    t = doc["totals"]
    lines = [f"qrels diff ({doc['kind']})\n", _side_line("from", doc["from"]),
             _side_line("to", doc["to"]),
             f"judgments  added {t['added']}  removed {t['removed']}  regraded {t['regraded']}"
             f"  unchanged {t['unchanged']}\n",
             f"topics  added {t['topics_added']}  removed {t['topics_removed']}  changed "
             f"{t['topics_changed']}  unchanged {t['topics_unchanged']}\n"]
    if doc["topics_added"]:
        lines.append("topics added: " + " ".join(doc["topics_added"]) + "\n")
    if doc["topics_removed"]:
        lines.append("topics removed: " + " ".join(doc["topics_removed"]) + "\n")
    for topic in doc["topics"]:
        c = topic["counts"]
        lines.append(f"\ntopic {topic['topic']}  {topic['status']}  added {c['added']}  "
                     f"removed {c['removed']}  regraded {c['regraded']}  "
                     f"unchanged {c['unchanged']}\n")

        def key(j: dict) -> str:
            return f"{j[group]} {j['docid']}" if group else j["docid"]

        lines += [f"+ {key(j)} {_grade(j['grade'])}\n" for j in topic["added"]]
        lines += [f"- {key(j)} {_grade(j['grade'])}\n" for j in topic["removed"]]
        lines += [f"~ {key(j)} {_grade(j['from'])} -> {_grade(j['to'])}\n"
                  for j in topic["regraded"]]
    shown = len(doc["topics"])
    if doc["offset"] or shown < doc["total"]:
        first = doc["offset"] + 1 if shown else doc["offset"]
        lines.append(f"\n(changed topics {first}-{doc['offset'] + shown} of {doc['total']}"
                     + (f"; next page: {doc['next']})\n" if doc["next"] else ")\n"))
    return "".join(lines)
