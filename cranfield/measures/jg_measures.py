"""trec_eval's judgment-group measures (``-R qrels_jg``): several assessors' judgments of one
topic (:class:`cranfield.inputs.judgment_files.JudgmentGroups`), and the evaluation loop they share
with the preference measures (:mod:`cranfield.measures.prefs_measures`): the topics walked, each
topic's ranking, the measures resolved, the budgets, the result (:class:`JgEvaluation`).

A ``qrels_jg`` file has lines ``qid jg docno rel``: the second field names a judgment group
(one assessor, one user) instead of trec_eval's ignored iteration column. Each group is a
complete set of judgments of the topic. The ``*_avgjg`` measures are the ordinary measures
computed once per group against the same ranking and then averaged over the topic's groups
(trec_eval ``m_map_avgjg.c``, ``m_P_avgjg.c``, ``m_Rprec_mult_avgjg.c``,
``form_res_rels_jg.c``). The summary is the mean over the evaluated topics, as for ``map``.

The measures are named through the registry (cranfield/measures/judgments.py). Held byte for
byte to both trec_eval binaries by tests/engine/test_prefs_differential.py (random cases: -q,
-c, -M, -l, -J, measure lists and parameters) besides trec_eval's own out.test.* files. Per
profile: 9.0.8 reads scores and rel_levels as C floats and has no comment lines in these
files; 10.0 -c scores a judged topic the run lacks on its bogus one-document ranking.

Room: measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..inputs.judgment_files import JudgmentGroups, read_qrels_jg
from ..inputs.run_qrels import byte_key
from .registry import DEFAULT_PROFILE, NICKNAMES, REGISTRY

__all__ = ["JgEvaluation", "evaluate_jg", "JG_MEASURES"]

# the registry's (cranfield/measures/judgments.py): P_avgjg's and Rprec_mult_avgjg's default
# cutoffs and multiples, and the measures of trec_eval's nickname qrels_jg in its order
P_CUTOFFS = REGISTRY["P_avgjg"].defaults
RPREC_MULTS = REGISTRY["Rprec_mult_avgjg"].defaults
JG_MEASURES = tuple(n for n in NICKNAMES["qrels_jg"](DEFAULT_PROFILE)
                    if REGISTRY[n].input == "qrels_jg")


BOGUS_DOCNO = "ceci_nest_pas_un_docno"  # trec_eval 10.0's one-document ranking under -c


def _bogus(profile: str, complete: bool) -> bool:
    """Whether a judged topic the run lacks is evaluated (trec_eval 10.0's -c, against a
    ranking of one unjudged document); 9.0.8's -c only counts it in the divisor."""
    from .registry import PROFILES

    return complete and PROFILES[profile].prints_topics_missing_from_run


def evaluated_topics(run, judged: dict, profile: str, complete: bool) -> list[str]:
    """The topics an evaluation walks, in strcmp order (for the budget, before any work)."""
    if _bogus(profile, complete):
        return sorted(judged, key=byte_key)
    return [t for t in run.topics if t in judged]


def refuse_comments(judgments, profile: str) -> None:
    """trec_eval 9.0.8's readers of prefs, qrels_prefs and qrels_jg files have no comment
    lines: a ``#`` line is a malformed line to them ("Malformed line", exit 2), where 10.0
    skips it. The 9.0.8 profile refuses it, naming the first."""
    from .registry import PROFILES

    if judgments.comment_lines and not PROFILES[profile].skips_judgment_comments:
        raise InputError(judgments.source, "trec_eval 9.0.8 reads no comment lines in "
                         "this format (10.0 skips them): remove the line or evaluate with "
                         "the trec_eval-10 profile", line=judgments.comment_lines[0])


def refuse_no_overlap(run, judged: dict, kind: str) -> None:
    """trec_eval (9.0.8, with or without -c) stops when no run topic is judged: "No queries
    with both results and relevance info" (exit 7); as for ordinary qrels."""
    from ..errors import EvaluationError

    if not any(t in judged for t in run.topics):
        raise EvaluationError("no topic has both results and relevance judgments (run "
                              f"topics: {len(run.topics)}, {kind} topics: {len(judged)})",
                              code="no-overlap")


def judged_topics(run, judged: dict, profile: str, depth: int | None,
                   ties_ascending: bool = False, complete: bool = False):
    """(topic, its judgments, its ranking) for each topic of ``run`` that ``judged`` has, in
    the run's (strcmp) order: the loop both judgment-group and preference evaluations make.
    With ``complete`` (-c) in trec_eval 10.0, every judged topic in strcmp order, one the
    run lacks ranked as 10.0 ranks it: the single unjudged document ``BOGUS_DOCNO``."""
    if _bogus(profile, complete):
        index = {topic: t for t, topic in enumerate(run.topics)}
        for topic in sorted(judged, key=byte_key):
            if topic not in index:
                yield topic, judged[topic], [BOGUS_DOCNO][:depth]
                continue
            yield topic, judged[topic], _ranking(
                run, np.flatnonzero(run.topic_index == index[topic]), profile, depth,
                ties_ascending=ties_ascending)
        return
    for t, topic in enumerate(run.topics):
        if topic in judged:
            yield topic, judged[topic], _ranking(run, np.flatnonzero(run.topic_index == t),
                                                 profile, depth,
                                                 ties_ascending=ties_ascending)


def _ranking(run, topic_row: np.ndarray, profile: str, depth: int | None,
             ties_ascending: bool = False) -> list[str]:
    """One topic's docnos in trec_eval's order: score descending, ties by docno descending
    (strcmp), or ascending for preferences (form_prefs_counts.c sorts its ties the other
    way round from form_res_rels.c); 9.0.8 keeps scores as float32."""
    docids = run.docids
    docs = [str(docids[i]) if not hasattr(docids, "to_pylist") else docids[int(i)].as_py()
            for i in topic_row]
    scores = run.scores[topic_row]
    if profile.endswith("9.0.8"):
        scores = scores.astype(np.float32)
    order = sorted(range(len(docs)), key=lambda i: byte_key(docs[i]),
                   reverse=not ties_ascending)
    order.sort(key=lambda i: -float(scores[i]))  # stable: the docno order stays for ties
    ranked = [docs[i] for i in order]
    seen = set()
    for d in ranked:
        if d in seen:
            raise InputError("run", f"docno {d!r} is retrieved twice for one topic")
        seen.add(d)
    return ranked if depth is None else ranked[:depth]


def _group_values(ranked: list[str], judged: dict[str, int], level: int,
                  cutoffs: tuple = P_CUTOFFS, mults: tuple = RPREC_MULTS) -> dict[str, float]:
    # form_res_rels_jg.c: a retrieved doc the group did not judge is RELVALUE_NONPOOL (-1),
    # one it judged below 0 RELVALUE_UNJUDGED (-2); num_rel and num_rel_ret count judged
    # grades >= 0 only. With -l >= 0 neither value is relevant; below 0 they differ from
    # the grades (review R1 F8, held to both binaries).
    values = [(-1 if g is None else -2 if g < 0 else g) for g in map(judged.get, ranked)]
    rels = [v >= level for v in values]
    num_rel = sum(1 for g in judged.values() if g >= 0 and g >= level)
    num_rel_ret = sum(1 for v in values if v >= 0 and v >= level)
    num_ret = len(ranked)
    out: dict[str, float] = {}
    # map: precision at each relevant retrieved doc, summed in rank order, over num_rel
    total, so_far = 0.0, 0
    for i, r in enumerate(rels):
        if r:
            so_far += 1
            total += so_far / (i + 1)
    out["map_avgjg"] = c_div(total, num_rel) if so_far else 0.0
    top = np.concatenate(([0], np.cumsum(rels, dtype=np.int64)))  # top[k]: rels in top k
    for c in cutoffs:  # missing docs past num_ret count as nonrelevant
        out[f"P_avgjg_{c}"] = int(top[min(c, num_ret)]) / c
    for m in mults:  # cutoff (long)(m*R + 0.9), as trec_eval (both versions)
        c = int(m * num_rel + 0.9)
        if c <= 0:
            value = 0.0
        elif c > num_ret:
            value = num_rel_ret / c
        else:  # m_Rprec_mult_avgjg.c counts down from num_rel_ret, stopping at 0
            left = num_rel_ret - int(top[num_ret] - top[c])
            value = left / c if left > 0 else 0.0
        out[f"Rprec_mult_avgjg_{m:3.2f}"] = value
    return out


@dataclass
class JgEvaluation:
    runid: str
    per_topic: dict[str, dict[str, float]]
    names: list[str]
    counts: frozenset = frozenset()  # summed, not averaged, and printed as integers
    # the summary's runid and num_q lines: trec_eval prints them when they are measured
    # (its nicknames all_prefs, prefs and qrels_jg name them; -m prefs_simp alone does not)
    header: tuple[str, ...] = ("runid", "num_q")
    # the topics averaged over when not len(per_topic): 9.0.8's -c, every judged topic
    num_q: int | None = None

    def summary(self) -> dict[str, float]:
        n = len(self.per_topic) if self.num_q is None else self.num_q
        sums = dict.fromkeys(self.names, 0.0)
        for values in self.per_topic.values():  # summed in topic order, as trec_eval
            for k in self.names:
                sums[k] += values[k]
        return {k: (s if k in self.counts else s / n if n else 0.0) for k, s in sums.items()}


HEADER = ("runid", "num_q")


def resolved_measures(measures, qrels_format: str, profile: str):
    """(the instances ``measures`` name, which of runid and num_q the summary prints) for
    judgments read as ``qrels_format``, resolved by the registry (cranfield.measures.names.resolve)
    as every evaluation's measures are: trec_eval's -m grammar with parameters
    (``P_avgjg.5,10``, ``Rprec_mult_avgjg.0.50``) and printed names, the nicknames
    (qrels_jg, all_prefs, prefs: trec_eval's lists, runid and num_q included), trec_eval's
    table order; none named: the format's nickname. A measure of other judgments is a
    MeasureError naming the format it needs."""
    from .names import resolve

    names = [measures] if isinstance(measures, str) else measures
    instances = resolve(names or None, profile, qrels_format)
    header = tuple(i.key for i in instances if i.measure.input == "any")
    return [i for i in instances if i.measure.input != "any"], header


def _names(measures: list[str] | None, profile: str = DEFAULT_PROFILE) -> list[str]:
    """The keys (trec_eval's printed names) of the judgment-group measures named."""
    return [i.key for i in resolved_measures(measures, "qrels_jg", profile)[0]]


def check_budget(names: list[str], topics: int, work: list[int], what: str) -> None:
    """Budgets before work (:mod:`cranfield.measures.budget`; none outside a budget's context, as
    for every evaluation): the values, measures × the topics evaluated; then the work
    those topics make (``work``: one count per topic,
    :func:`cranfield.measures.prefs_measures._prefs_work` or :func:`_jg_work`), held to the same
    values budget."""
    from .budget import BudgetError, check_values, current_budget

    check_values(len(names), topics)
    budget = current_budget()
    if budget is None or budget.max_values is None:
        return
    cells = sum(work)
    if cells > budget.max_values:
        raise BudgetError(
            f"the {what} of the {topics:,} topics evaluated make {cells:,} "
            f"{_WORK[what][0]} (the most in one topic {max(work):,}), over "
            f"{budget.values_name} {budget.max_values:,}: {_WORK[what][1]}",
            budget=budget.values_name, limit=budget.max_values, total=cells,
            factors={_WORK[what][2]: cells}, field="qrels")


_WORK = {  # what: (the unit, said; the advice; the factor's name)
    "preferences": ("document pairs (per topic the larger of its judged documents squared "
                    "and the sum over its judgment groups of their lines squared, plus "
                    "their documents cubed for a group of several sub-groups: its "
                    "transitive closure)",
                    "evaluate fewer topics, judgment groups or judged documents",
                    "document_pairs"),
    "judgment groups": ("group values (each topic's judgment groups × (its ranking's "
                        "length + the measure instances))",
                        "evaluate fewer topics, judgment groups or measures, or a shorter "
                        "ranking (-M)", "group_values"),
}


def _jg_work(groups: int, ranked: int, instances: int) -> int:
    """The values one topic's judgment groups make: each group walks the ranking and then
    computes every measure instance."""
    return groups * (ranked + instances)


def _ranking_lengths(run, depth: int | None) -> dict[str, int]:
    """Each run topic's ranking length (after ``depth``), counted before any ranking is made."""
    counts = np.bincount(np.asarray(run.topic_index, dtype=np.int64),
                         minlength=len(run.topics))
    return {t: int(counts[k]) if depth is None else min(int(counts[k]), depth)
            for k, t in enumerate(run.topics)}


def evaluate_jg(qrels: Any, run: Any, measures: list[str] | None = None, *,
                relevance_level: int = 1, depth: int | None = None,
                profile: str = "trec_eval-10", complete_topics: bool = False,
                judged_only: bool = False, require_overlap: bool = True) -> JgEvaluation:
    """Evaluate ``run`` against judgment groups (``qrels``: a :class:`JudgmentGroups` or what
    :func:`read_qrels_jg` reads). Topics are those of the run that the qrels judge, in
    strcmp order; each ``*_avgjg`` value is the mean over the topic's groups (the sum when
    there is one group), each group scored as trec_eval's ``map``, ``P`` and ``Rprec_mult``
    (0/0 gives 0). ``complete_topics`` (-c): the mean is over every judged topic (10.0 also
    prints the ones the run lacks, scored on its one-document bogus ranking: 0);
    ``judged_only`` (-J): each group's ranking keeps the documents that group judged (rel
    >= 0), in rank order, after ``depth`` (form_res_rels_jg.c). No run topic judged is an
    EvaluationError (``no-overlap``) unless ``require_overlap`` is False."""
    from ..inputs.io import read_run

    if not isinstance(qrels, JudgmentGroups):
        qrels = read_qrels_jg(qrels)
    refuse_comments(qrels, profile)
    run = read_run(run)
    instances, header = resolved_measures(measures, "qrels_jg", profile)
    names = [i.key for i in instances]
    cutoffs = tuple(i.value for i in instances if i.measure.name == "P_avgjg")
    mults = tuple(i.value for i in instances if i.measure.name == "Rprec_mult_avgjg")
    if require_overlap:
        refuse_no_overlap(run, qrels.topics, "qrels_jg")
    evaluated = evaluated_topics(run, qrels.topics, profile, complete_topics)
    lengths = _ranking_lengths(run, depth)
    check_budget(names, len(evaluated),
                 [_jg_work(len(qrels.topics[t]), lengths.get(t, 1), len(names))
                  for t in evaluated], "judgment groups")
    per_topic: dict[str, dict[str, float]] = {}
    for topic, groups, ranked in judged_topics(run, qrels.topics, profile, depth,
                                               complete=complete_topics):
        sums = dict.fromkeys(names, 0.0)
        for jg in sorted(groups, key=byte_key):
            judged = groups[jg]
            mine = [d for d in ranked if judged.get(d, -1) >= 0] if judged_only else ranked
            values = _group_values(mine, judged, relevance_level, cutoffs, mults)
            for i in instances:  # each measure's registry entry reads its value
                sums[i.key] += i.measure.compute(values, i.value)
        if len(groups) > 1:
            sums = {k: v / len(groups) for k, v in sums.items()}
        per_topic[topic] = sums
    return JgEvaluation(runid=run.runid, per_topic=per_topic, names=names,
                        header=header,
                        num_q=len(qrels.topics) if complete_topics else None)


def c_div(a: float, b: float) -> float:
    """C's double division: x/0 is inf or nan, never an exception."""
    if b:
        return a / b
    return float("nan") if a == 0 else float("inf") * (1 if a > 0 else -1)
