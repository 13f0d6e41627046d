"""trec_eval's judgment groups (``-R qrels_jg``): several assessors' judgments of one topic.

A ``qrels_jg`` file has lines ``qid jg docno rel``: the second field names a judgment group
(one assessor, one user) instead of trec_eval's ignored iteration column. Each group is a
complete set of judgments of the topic. The ``*_avgjg`` measures are the ordinary measures
computed once per group against the same ranking and then averaged over the topic's groups
(trec_eval ``m_map_avgjg.c``, ``m_P_avgjg.c``, ``m_Rprec_mult_avgjg.c``,
``form_res_rels_jg.c``). The summary is the mean over the evaluated topics, as for ``map``.

Not yet here (issue #28): ``-R prefs`` and ``-R qrels_prefs`` (preference judgments) and
their ``prefs_*`` measures; ``-c`` and ``-J`` with judgment groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError, MeasureError

__all__ = ["JudgmentGroups", "read_qrels_jg", "evaluate_jg", "format_jg", "JG_MEASURES"]

P_CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RPREC_MULTS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
# the measures trec_eval's nickname "qrels_jg" names, in the order it prints them
JG_MEASURES = ("map_avgjg", "P_avgjg", "Rprec_mult_avgjg")


@dataclass
class JudgmentGroups:
    """``topics[qid][jg][docno] = rel``: every judgment group of every topic."""

    topics: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    source: str = "qrels_jg"


def _key(s: str) -> bytes:
    """trec_eval's strcmp order: the UTF-8 bytes."""
    return s.encode("utf-8", "surrogateescape")


def read_qrels_jg(source: Any, *, name: str | None = None) -> JudgmentGroups:
    """Read ``qid jg docno rel`` lines (a path, bytes or text). As trec_eval 10.0: blank
    lines and lines whose first field starts with ``#`` are skipped; fields are separated by
    whitespace. Refused, naming the line: a line with other than four fields, a ``rel`` that
    is not an integer, and a docno judged twice by one group of one topic (trec_eval's
    "duplicate docs")."""
    label = name or (str(source) if isinstance(source, Path) else "qrels_jg")
    if isinstance(source, Path):
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise InputError(label, f"cannot read: {exc.strerror}") from None
    elif isinstance(source, str) and "\n" not in source:  # one line of text: a path
        label = name or source
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise InputError(label, f"cannot read: {exc.strerror}") from None
    elif isinstance(source, str):
        data = source.encode("utf-8")
    elif isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        raise InputError(label, "a qrels_jg source must be a path, bytes or text")
    text = data.decode("utf-8", "surrogateescape")
    jgs = JudgmentGroups(source=label)
    for n, line in enumerate(text.split("\n"), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 4:
            raise InputError(label, "a qrels_jg line has four fields (qid jg docno rel), "
                             f"found {len(fields)}", line=n)
        qid, jg, docno, rel = fields
        try:
            grade = int(rel)
        except ValueError:
            raise InputError(label, f"rel {rel!r} is not an integer", line=n,
                             field="rel") from None
        group = jgs.topics.setdefault(qid, {}).setdefault(jg, {})
        if docno in group:
            raise InputError(label, f"docno {docno!r} is judged twice by judgment group "
                             f"{jg!r} of topic {qid!r}", line=n, field="docno")
        group[docno] = grade
    if not jgs.topics:
        raise InputError(label, "no judgments")
    return jgs


def _ranking(run, topic_row: np.ndarray, profile: str, depth: int | None) -> list[str]:
    """One topic's docnos in trec_eval's order: score descending, ties by docno descending
    (strcmp); 9.0.8 keeps scores as float32."""
    docids = run.docids
    docs = [str(docids[i]) if not hasattr(docids, "to_pylist") else docids[int(i)].as_py()
            for i in topic_row]
    scores = run.scores[topic_row]
    if profile.endswith("9.0.8"):
        scores = scores.astype(np.float32)
    order = sorted(range(len(docs)), key=lambda i: _key(docs[i]), reverse=True)
    order.sort(key=lambda i: -float(scores[i]))  # stable: the docno order stays for ties
    ranked = [docs[i] for i in order]
    seen = set()
    for d in ranked:
        if d in seen:
            raise InputError("run", f"docno {d!r} is retrieved twice for one topic")
        seen.add(d)
    return ranked if depth is None else ranked[:depth]


def _group_values(ranked: list[str], judged: dict[str, int], level: int) -> dict[str, float]:
    rels = [judged.get(d, -2) >= level for d in ranked]  # -2: not in the pool
    num_rel = sum(1 for g in judged.values() if g >= level)
    num_ret = len(ranked)
    out: dict[str, float] = {}
    # map: precision at each relevant retrieved doc, summed in rank order, over num_rel
    total, so_far = 0.0, 0
    for i, r in enumerate(rels):
        if r:
            so_far += 1
            total += so_far / (i + 1)
    out["map_avgjg"] = total / num_rel if so_far else 0.0
    top = np.concatenate(([0], np.cumsum(rels, dtype=np.int64)))  # top[k]: rels in top k
    for c in P_CUTOFFS:  # missing docs past num_ret count as nonrelevant
        out[f"P_avgjg_{c}"] = int(top[min(c, num_ret)]) / c
    for m in RPREC_MULTS:  # cutoff (long)(m*R + 0.9), as trec_eval (both versions)
        c = int(m * num_rel + 0.9)
        out[f"Rprec_mult_avgjg_{m:3.2f}"] = int(top[min(c, num_ret)]) / c if c > 0 else 0.0
    return out


@dataclass
class JgEvaluation:
    runid: str
    per_topic: dict[str, dict[str, float]]
    names: list[str]

    def summary(self) -> dict[str, float]:
        n = len(self.per_topic)
        sums = dict.fromkeys(self.names, 0.0)
        for values in self.per_topic.values():  # summed in topic order, as trec_eval
            for k in self.names:
                sums[k] += values[k]
        return {k: (s / n if n else 0.0) for k, s in sums.items()}


def _names(measures: list[str] | None) -> list[str]:
    wanted: list[str] = []
    for spec in measures or ["qrels_jg"]:
        for m in spec.split(","):
            m = m.strip()
            if m == "qrels_jg":
                wanted.extend(JG_MEASURES)
            elif m in JG_MEASURES:
                wanted.append(m)
            else:
                raise MeasureError(m, "is not computed from judgment groups (-R qrels_jg)",
                                   list(("qrels_jg",) + JG_MEASURES))
    names: list[str] = []
    for m in JG_MEASURES:  # trec_eval prints measures in its own table order
        if m in wanted:
            names.extend(["map_avgjg"] if m == "map_avgjg" else
                         [f"P_avgjg_{c}" for c in P_CUTOFFS] if m == "P_avgjg" else
                         [f"Rprec_mult_avgjg_{x:3.2f}" for x in RPREC_MULTS])
    return names


def evaluate_jg(qrels: Any, run: Any, measures: list[str] | None = None, *,
                relevance_level: int = 1, depth: int | None = None,
                profile: str = "trec_eval-10") -> JgEvaluation:
    """Evaluate ``run`` against judgment groups (``qrels``: a :class:`JudgmentGroups` or what
    :func:`read_qrels_jg` reads). Topics are those of the run that the qrels judge, in
    strcmp order; each ``*_avgjg`` value is the mean over the topic's groups (the sum when
    there is one group), each group scored as trec_eval's ``map``, ``P`` and ``Rprec_mult``
    (0/0 gives 0)."""
    from .io import read_run

    if not isinstance(qrels, JudgmentGroups):
        qrels = read_qrels_jg(qrels)
    run = read_run(run)
    names = _names(measures)
    per_topic: dict[str, dict[str, float]] = {}
    for t, topic in enumerate(run.topics):
        groups = qrels.topics.get(topic)
        if groups is None:
            continue
        ranked = _ranking(run, np.flatnonzero(run.topic_index == t), profile, depth)
        sums = dict.fromkeys(names, 0.0)
        for jg in sorted(groups, key=_key):
            values = _group_values(ranked, groups[jg], relevance_level)
            for k in names:
                sums[k] += values[k]
        if len(groups) > 1:
            sums = {k: v / len(groups) for k, v in sums.items()}
        per_topic[topic] = sums
    return JgEvaluation(runid=run.runid, per_topic=per_topic, names=names)


def format_jg(ev: JgEvaluation, per_topic: bool = False, summary: bool = True) -> str:
    """trec_eval's text: ``%-22s\\t%s\\t%.4f`` lines, topics first, then runid, num_q and
    the means."""
    lines = []
    if per_topic:
        for topic, values in ev.per_topic.items():
            lines += [f"{k:<22}\t{topic}\t{values[k]:.4f}" for k in ev.names]
    if summary:
        lines.append(f"{'runid':<22}\tall\t{ev.runid}")
        lines.append(f"{'num_q':<22}\tall\t{len(ev.per_topic)}")
        lines += [f"{k:<22}\tall\t{v:.4f}" for k, v in ev.summary().items()]
    return "".join(line + "\n" for line in lines)
