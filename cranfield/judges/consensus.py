"""Consensus qrels from many judges: one grade per (topic, document) from the grades its
judges gave, by a stated method, with the recipe that made it.

Methods: ``majority`` (the grade most judges gave; a tie goes to the lower of the tied grades,
so a split vote never raises a document's relevance), ``max`` (the highest grade: any judge
calling it relevant suffices), ``mean`` (the mean of the grades: a real-valued gain, so the
qrels declare ``gains="real"``), ``judge`` (one judge's judgments as they are: the documents
that judge judged). ``judges`` narrows the judges consulted (default: all).

A negative grade marks a document pooled but not judged (trec_eval's RELVALUE_UNJUDGED):
it is no vote. A document's consensus is of the grades of 0 or more its judges gave; one
that only negative grades touch stays in the consensus, pooled and unjudged (the highest of
its negative grades).

Room: judges.
"""

from __future__ import annotations

from collections import Counter

from ..errors import InputError
from ..inputs.judgment_files import JudgmentGroups
from .judged import judges_of

__all__ = ["CONSENSUS_METHODS", "TIE_RULE", "consensus", "consensus_grades", "majority_grade"]

CONSENSUS_METHODS = ("majority", "max", "mean", "judge")
#: majority's tie rule, as the recipe states it
TIE_RULE = "lower"


def majority_grade(grades: list[int]) -> int:
    """The grade most of ``grades`` are; a tie between grades goes to the lowest of them."""
    counts = Counter(grades)
    top = max(counts.values())
    return min(g for g, c in counts.items() if c == top)


def _mean(grades: list[int]) -> float:
    return sum(grades) / len(grades)


def consensus_grades(groups: JudgmentGroups, method: str, judges: list[str] | None = None
                     ) -> tuple[dict[str, dict[str, int | float]], dict]:
    """(``{topic: {docid: grade}}``, recipe) of the consensus of ``groups`` by ``method``
    (:data:`CONSENSUS_METHODS`) over ``judges`` (``judge``: exactly one). The recipe
    (``method``, ``judges``, ``tie`` for majority, ``gains``) is what a stored version keeps
    as its provenance. Refused (InputError naming ``method`` or ``judges``): an unknown method
    or judge, ``judge`` without exactly one judge, a consensus with no judgment left."""
    known = judges_of(groups)
    if method not in CONSENSUS_METHODS:
        raise InputError("consensus", f"method must be one of {', '.join(CONSENSUS_METHODS)}, "
                         f"not {method!r}", field="method")
    if judges is not None:
        unknown = [j for j in judges if j not in known]
        if unknown:
            raise InputError("consensus", f"no judge {unknown[0]!r} in these qrels (judges: "
                             f"{', '.join(known[:20])})", field="judges")
        if len(set(judges)) != len(judges) or not judges:
            raise InputError("consensus", "judges must name each judge once, at least one",
                             field="judges")
    used = sorted(set(judges), key=known.index) if judges is not None else known
    if method == "judge" and len(used) != 1:
        raise InputError("consensus", "method judge takes exactly one judge (judges: "
                         "[name])", field="judges")
    out: dict[str, dict[str, int | float]] = {}
    for topic, by_judge in groups.topics.items():
        per_doc: dict[str, list[int]] = {}
        for judge in used:
            for docid, grade in by_judge.get(judge, {}).items():
                per_doc.setdefault(docid, []).append(grade)
        if not per_doc:
            continue
        if method == "max" or method == "judge":
            out[topic] = {d: max(g) for d, g in per_doc.items()}
            continue
        rule = majority_grade if method == "majority" else _mean
        out[topic] = {d: rule(judged) if (judged := [x for x in g if x >= 0]) else max(g)
                      for d, g in per_doc.items()}
    if not out:
        raise InputError("consensus", "the judges chosen judged nothing", field="judges")
    recipe = {"method": method, "judges": used,
              "gains": "real" if method == "mean" else "integer"}
    if method == "majority":
        recipe["tie"] = TIE_RULE
    return out, recipe


def consensus(groups: JudgmentGroups, method: str, judges: list[str] | None = None,
              name: str = "consensus"):
    """(:class:`cranfield.inputs.run_qrels.Qrels`, recipe) of the consensus
    (:func:`consensus_grades`), read by the qrels reader as any ``{topic: {docid: grade}}``
    mapping; a mean consensus is read declaring ``gains="real"``."""
    from ..inputs.io import read_qrels

    grades, recipe = consensus_grades(groups, method, judges)
    if recipe["gains"] == "real":
        return read_qrels(grades, name=name, gains="real"), recipe
    return read_qrels(grades, name=name), recipe
