"""trec_eval's judgment groups (``-R qrels_jg``): several assessors' judgments of one topic.

A ``qrels_jg`` file has lines ``qid jg docno rel``: the second field names a judgment group
(one assessor, one user) instead of trec_eval's ignored iteration column. Each group is a
complete set of judgments of the topic. The ``*_avgjg`` measures are the ordinary measures
computed once per group against the same ranking and then averaged over the topic's groups
(trec_eval ``m_map_avgjg.c``, ``m_P_avgjg.c``, ``m_Rprec_mult_avgjg.c``,
``form_res_rels_jg.c``). The summary is the mean over the evaluated topics, as for ``map``.

Preference judgments (``-R prefs``, ``-R qrels_prefs``) and their fourteen ``prefs_*``
measures are below. The measures are named through the registry
(cranfield/measures/judgments.py). Held byte for byte to both trec_eval binaries by
tests/engine/test_prefs_differential.py (random cases: -q, -c, -M, -l, -J, measure lists
and parameters) besides trec_eval's own out.test.* files. Per profile: 9.0.8 reads scores
and rel_levels as C floats and has no comment lines in these files; 10.0 -c scores a judged
topic the run lacks on its bogus one-document ranking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError
from .io import byte_key
from .measures.registry import DEFAULT_PROFILE, NICKNAMES, REGISTRY

__all__ = ["JudgmentGroups", "read_qrels_jg", "evaluate_jg", "format_jg", "JG_MEASURES",
           "Preferences", "read_prefs", "evaluate_prefs", "PREFS_MEASURES"]

# the registry's (cranfield/measures/judgments.py): P_avgjg's and Rprec_mult_avgjg's default
# cutoffs and multiples, and the measures of trec_eval's nickname qrels_jg in its order
P_CUTOFFS = REGISTRY["P_avgjg"].defaults
RPREC_MULTS = REGISTRY["Rprec_mult_avgjg"].defaults
JG_MEASURES = tuple(n for n in NICKNAMES["qrels_jg"](DEFAULT_PROFILE)
                    if REGISTRY[n].input == "qrels_jg")


@dataclass
class JudgmentGroups:
    """``topics[qid][jg][docno] = rel``: every judgment group of every topic."""

    topics: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    source: str = "qrels_jg"
    # the lines skipped as comments (trec_eval 10.0 skips them; 9.0.8 refuses them:
    # _refuse_comments)
    comment_lines: list[int] = field(default_factory=list)


def _mapping_leaves(source: Mapping, label: str, levels: tuple[str, ...]) -> list[tuple]:
    """(key, ..., value) of each leaf of the JSON shape of a judgment file: nested mappings,
    one level per name in ``levels`` (``topic``, ``judgment group``, ...), the last mapping
    docnos to values. Each key is an id of the input grammar (what a text field can be);
    a level that is not a mapping, or is empty (no line of text could say it), is refused
    naming its path (``qrels.301.A``); no leaf at all is text's "no judgments"."""
    from .grammar import id_problem

    if not source:
        raise InputError(label, "no judgments")
    out: list[tuple] = []

    def walk(node: Any, keys: tuple[str, ...]) -> None:
        path = ".".join((label, *keys))
        depth = len(keys)
        if not isinstance(node, Mapping):
            raise InputError(label, f"must be an object of {levels[depth]}s", field=path)
        if not node:
            raise InputError(label, f"has no {levels[depth]}s (leave it out)", field=path)
        for key, value in node.items():
            problem = id_problem(key)
            if problem is not None:
                raise InputError(label, f"{levels[depth]} {key!r}: {problem}",
                                 field=f"{path}.{key}")
            if depth + 1 == len(levels):
                out.append((*keys, key, value))
            else:
                walk(value, (*keys, key))

    walk(source, ())
    return out


def _shown(value: Any) -> str:
    """A JSON value as JSON spells it (``true``, ``null``, ``"1"``, ``1.5``)."""
    import json

    return json.dumps(value) if value is None or isinstance(value, bool | str | float) \
        else repr(value) if isinstance(value, int) else type(value).__name__


def _jg_from_mapping(source: Mapping, label: str) -> JudgmentGroups:
    """Judgment groups from ``{qid: {jg: {docno: rel}}}``: the same judgments (and the same
    refusals, by path instead of line) as the text ``qid jg docno rel``. ``rel`` is a grade
    of the input grammar, as a plain qrels mapping's (:func:`cranfield.grammar.json_grade_problem`:
    an integer within int64, or a number with no fractional part up to 2^53)."""
    from .grammar import json_grade_problem

    jgs = JudgmentGroups(source=label)
    for qid, jg, docno, rel in _mapping_leaves(source, label,
                                               ("topic", "judgment group", "docno")):
        problem = json_grade_problem(rel)
        if problem is not None:
            raise InputError(label, "rel" + problem.removeprefix("grade"),
                             field=f"{label}.{qid}.{jg}.{docno}")
        jgs.topics.setdefault(qid, {}).setdefault(jg, {})[docno] = int(rel)
    return jgs


def _prefs_from_mapping(source: Mapping, label: str, qrels: bool) -> Preferences:
    """Preferences from ``{qid: {jg: {jsg: {docno: rel_level}}}}`` (``qrels``: the
    ``qrels_prefs`` shape ``{qid: {jg: {docno: rel}}}``, each jg one sub-group), as the text
    lines say them; ``rel_level`` a score of the input grammar (a finite JSON number)."""
    from .grammar import json_score_problem

    levels = ("topic", "judgment group", "docno") if qrels else \
        ("topic", "judgment group", "judgment sub-group", "docno")
    prefs = Preferences(source=label)
    for leaf in _mapping_leaves(source, label, levels):
        *keys, level = leaf
        qid, jg, jsg, docno = (keys[0], keys[1], "", keys[2]) if qrels else keys
        problem = json_score_problem(level)
        if problem is not None:
            problem = problem.removeprefix("score").replace(" not a number",
                                                             " not a finite number")
            raise InputError(label, f"rel_level{problem}" if problem.startswith(" ")
                             else f"rel_level {_shown(level)}{problem}",
                             field=".".join((label, *keys)))
        prefs.topics.setdefault(qid, []).append((jg, jsg, docno, float(level)))
    return prefs


def _lines(data: bytes | str, label: str):
    """(line number, fields) of each line by the input grammar (:mod:`cranfield.grammar`, as
    the plain qrels and run readers read): UTF-8 text, no control character but tab (and a
    CR before LF), fields split on ASCII space and tab only (a no-break space is part of an
    id). Blank lines are skipped; comment lines are yielded (the caller records them)."""
    from .grammar import split_fields, text_problem

    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(label, "not valid UTF-8 text",
                             line=data[: exc.start].count(b"\n") + 1) from None
    bad = text_problem(data)
    if bad is not None:
        raise InputError(label, bad[1], line=bad[0])
    for n, line in enumerate(data.split("\n"), start=1):
        fields = split_fields(line)
        if fields:
            yield n, fields


def read_qrels_jg(source: Any, *, name: str | None = None) -> JudgmentGroups:
    """Read ``qid jg docno rel`` lines (a path, bytes or text) by the input grammar
    (:func:`_lines`; ``rel`` a grade as a plain qrels file's: ASCII decimal within int64).
    As trec_eval 10.0: blank lines and lines whose first field starts with ``#`` are
    skipped. Refused, naming the line: a line with other than four fields, a ``rel`` that
    is not a grade, and a docno judged twice by one group of one topic (trec_eval's
    "duplicate docs")."""
    from .grammar import GrammarError, parse_grade

    if isinstance(source, Mapping):  # the JSON shape {qid: {jg: {docno: rel}}}
        return _jg_from_mapping(source, name or "qrels_jg")
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
        data = source
    elif isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        raise InputError(label, "a qrels_jg source must be a path, bytes or text")
    jgs = JudgmentGroups(source=label)
    for n, fields in _lines(data, label):
        if fields[0].startswith("#"):
            jgs.comment_lines.append(n)
            continue
        if len(fields) != 4:
            raise InputError(label, "a qrels_jg line has four fields (qid jg docno rel), "
                             f"found {len(fields)}", line=n)
        qid, jg, docno, rel = fields
        try:
            grade = parse_grade(rel)
        except GrammarError as exc:
            raise InputError(label, f"rel {exc}".replace("rel grade ", "rel "), line=n,
                             field="rel") from None
        group = jgs.topics.setdefault(qid, {}).setdefault(jg, {})
        if docno in group:
            raise InputError(label, f"docno {docno!r} is judged twice by judgment group "
                             f"{jg!r} of topic {qid!r}", line=n, field="docno")
        group[docno] = grade
    if not jgs.topics:
        raise InputError(label, "no judgments")
    return jgs


BOGUS_DOCNO = "ceci_nest_pas_un_docno"  # trec_eval 10.0's one-document ranking under -c


def _bogus(profile: str, complete: bool) -> bool:
    """Whether a judged topic the run lacks is evaluated (trec_eval 10.0's -c, against a
    ranking of one unjudged document); 9.0.8's -c only counts it in the divisor."""
    from .measures.registry import PROFILES

    return complete and PROFILES[profile].prints_topics_missing_from_run


def _evaluated(run, judged: dict, profile: str, complete: bool) -> list[str]:
    """The topics an evaluation walks, in strcmp order (for the budget, before any work)."""
    if _bogus(profile, complete):
        return sorted(judged, key=byte_key)
    return [t for t in run.topics if t in judged]


def _refuse_comments(judgments, profile: str) -> None:
    """trec_eval 9.0.8's readers of prefs, qrels_prefs and qrels_jg files have no comment
    lines: a ``#`` line is a malformed line to them ("Malformed line", exit 2), where 10.0
    skips it. The 9.0.8 profile refuses it, naming the first."""
    from .measures.registry import PROFILES

    if judgments.comment_lines and not PROFILES[profile].skips_judgment_comments:
        raise InputError(judgments.source, "trec_eval 9.0.8 reads no comment lines in "
                         "this format (10.0 skips them): remove the line or evaluate with "
                         "the trec_eval-10 profile", line=judgments.comment_lines[0])


def _require_overlap(run, judged: dict, kind: str) -> None:
    """trec_eval (9.0.8, with or without -c) stops when no run topic is judged: "No queries
    with both results and relevance info" (exit 7); as for ordinary qrels."""
    from .errors import EvaluationError

    if not any(t in judged for t in run.topics):
        raise EvaluationError("no topic has both results and relevance judgments (run "
                              f"topics: {len(run.topics)}, {kind} topics: {len(judged)})",
                              code="no-overlap")


def _judged_topics(run, judged: dict, profile: str, depth: int | None,
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
    out["map_avgjg"] = _div(total, num_rel) if so_far else 0.0
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


def _resolved(measures, qrels_format: str, profile: str):
    """(the instances ``measures`` name, which of runid and num_q the summary prints) for
    judgments read as ``qrels_format``, resolved by the registry (cranfield.names.resolve)
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
    return [i.key for i in _resolved(measures, "qrels_jg", profile)[0]]


def _check_budget(names: list[str], topics: int, work: list[int], what: str) -> None:
    """Budgets before work (:mod:`cranfield.budget`; none outside a budget's context, as
    for every evaluation): the values, measures × the topics evaluated; then the work
    those topics make (``work``: one count per topic, :func:`_prefs_work` or
    :func:`_jg_work`), held to the same values budget."""
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


def _prefs_work(items) -> int:
    """The cells one topic's preferences make: the larger of the summed matrix CA over its
    judged docs (nj² cells, filled from the groups' pairs) and the groups' work: per group
    its pairs (at most its judgment lines squared) and, for a group of several sub-groups,
    its own matrix's transitive closure (its docs cubed)."""
    docs: set = set()
    groups: dict[str, list] = {}
    for jg, jsg, d, _ in items:
        docs.add(d)
        g = groups.setdefault(jg, [0, set(), set()])
        g[0] += 1
        g[1].add(jsg)
        g[2].add(d)
    work = sum(lines * lines + (len(gdocs) ** 3 if len(jsgs) > 1 else 0)
               for lines, jsgs, gdocs in groups.values())
    return max(len(docs) ** 2, work)


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
    from .io import read_run

    if not isinstance(qrels, JudgmentGroups):
        qrels = read_qrels_jg(qrels)
    _refuse_comments(qrels, profile)
    run = read_run(run)
    instances, header = _resolved(measures, "qrels_jg", profile)
    names = [i.key for i in instances]
    cutoffs = tuple(i.value for i in instances if i.measure.name == "P_avgjg")
    mults = tuple(i.value for i in instances if i.measure.name == "Rprec_mult_avgjg")
    if require_overlap:
        _require_overlap(run, qrels.topics, "qrels_jg")
    evaluated = _evaluated(run, qrels.topics, profile, complete_topics)
    lengths = _ranking_lengths(run, depth)
    _check_budget(names, len(evaluated),
                  [_jg_work(len(qrels.topics[t]), lengths.get(t, 1), len(names))
                   for t in evaluated], "judgment groups")
    per_topic: dict[str, dict[str, float]] = {}
    for topic, groups, ranked in _judged_topics(run, qrels.topics, profile, depth,
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


def _num(ev: JgEvaluation, name: str, value: float) -> str:
    return str(int(value)) if name in ev.counts else f"{value:6.4f}"  # C's %6.4f: "   inf"


def format_jg(ev: JgEvaluation, per_topic: bool = False, summary: bool = True) -> str:
    """trec_eval's text: ``%-22s\\t%s\\t%.4f`` lines, topics first, then runid, num_q and
    the means."""
    lines = []
    if per_topic:
        for topic, values in ev.per_topic.items():
            lines += [f"{k:<22}\t{topic}\t{_num(ev, k, values[k])}" for k in ev.names]
    if summary:
        if "runid" in ev.header:
            lines.append(f"{'runid':<22}\tall\t{ev.runid}")
        if "num_q" in ev.header:
            num_q = len(ev.per_topic) if ev.num_q is None else ev.num_q
            lines.append(f"{'num_q':<22}\tall\t{num_q}")
        lines += [f"{k:<22}\tall\t{_num(ev, k, v)}" for k, v in ev.summary().items()]
    return "".join(line + "\n" for line in lines)


# --- preference judgments: -R prefs and -R qrels_prefs -------------------------------------
#
# A prefs line is ``qid jg jsg docno rel_level``: within one judgment sub-group (jsg) a doc
# with a higher rel_level is preferred to one with a lower; a judgment group (jg) is one
# consistent information need. A qrels file read with -R qrels_prefs is ``qid jg docno rel``:
# each jg one sub-group. Semantics follow trec_eval's form_prefs_counts.c and m_prefs_*.c,
# including the quirks of its R-nonrel recalculation (documented at _recalc).

# the registry's: the measures of trec_eval's nickname all_prefs, in its order, and the
# counts among them (summed over topics in the summary, printed as integers)
PREFS_MEASURES = tuple(n for n in NICKNAMES["all_prefs"](DEFAULT_PROFILE)
                       if REGISTRY[n].input == "prefs")
PREFS_COUNTS = tuple(n for n in PREFS_MEASURES if REGISTRY[n].aggregate == "sum")


@dataclass
class Preferences:
    """``topics[qid]`` = list of (jg, jsg, docno, rel_level) in file order."""

    topics: dict[str, list[tuple[str, str, str, float]]] = field(default_factory=dict)
    source: str = "prefs"
    comment_lines: list[int] = field(default_factory=list)  # as JudgmentGroups'


def _read_bytes(source: Any, name: str | None, kind: str) -> tuple[str, bytes | str]:
    label = name or (str(source) if isinstance(source, Path) else kind)
    if isinstance(source, (Path, str)) and (isinstance(source, Path) or "\n" not in source):
        label = name or str(source)
        try:
            return label, Path(source).read_bytes()
        except OSError as exc:
            raise InputError(label, f"cannot read: {exc.strerror}") from None
    if isinstance(source, str):
        return label, source
    if isinstance(source, (bytes, bytearray)):
        return label, bytes(source)
    raise InputError(label, f"a {kind} source must be a path, bytes or text")


def read_prefs(source: Any, *, name: str | None = None, qrels: bool = False) -> Preferences:
    """Read ``qid jg jsg docno rel_level`` lines (``qrels=True``: ``qid jg docno rel``, as
    trec_eval's ``-R qrels_prefs``) by the input grammar (:func:`_lines`; ``rel_level`` a
    score as a run's: an ASCII decimal, finite). Blank lines and lines starting with ``#``
    are skipped. Refused, naming the line: a wrong number of fields, a rel_level that is
    not a score."""
    from .grammar import GrammarError, parse_score

    if isinstance(source, Mapping):  # {qid: {jg: {jsg: {docno: rel_level}}}} (qrels: no jsg)
        return _prefs_from_mapping(source, name or ("qrels_prefs" if qrels else "prefs"),
                                   qrels)
    label, text = _read_bytes(source, name, "qrels_prefs" if qrels else "prefs")
    width = 4 if qrels else 5
    prefs = Preferences(source=label)
    for n, fields in _lines(text, label):
        if fields[0].startswith("#"):
            prefs.comment_lines.append(n)
            continue
        if len(fields) != width:
            grammar = "qid jg docno rel" if qrels else "qid jg jsg docno rel_level"
            raise InputError(label, f"a {'qrels_prefs' if qrels else 'prefs'} line has "
                             f"{width} fields ({grammar}), found {len(fields)}", line=n)
        if qrels:
            qid, jg, docno, rel = fields
            jsg = ""
        else:
            qid, jg, jsg, docno, rel = fields
        try:
            level = parse_score(rel)
        except GrammarError as exc:
            said = str(exc).replace(" not a number", " not a finite number")
            raise InputError(label, f"rel_level {said}", line=n, field="rel_level") from None
        prefs.topics.setdefault(qid, []).append((jg, jsg, docno, level))
    if not prefs.topics:
        raise InputError(label, "no judgments")
    return prefs


@dataclass
class _Group:
    """One judgment group's counts (trec_eval's JG)."""

    ecs: list[tuple[float, list[int]]] | None  # single sub-group: (rel_level, docid ranks)
    pa: np.ndarray | None  # several sub-groups: transitive preference matrix
    rel: np.ndarray | None  # with pa: each doc's rel_level (the group's docs, rank order)
    ranks: np.ndarray | None = None  # with pa: the topic-wide docid rank of each of them
    ful_ret: int = 0
    poss_ret: int = 0
    ful_imp: int = 0
    poss_imp: int = 0
    notoccur: int = 0
    num_rel: int = 0
    num_rel_ret: int = 0
    num_nonrel: int = 0
    num_nonrel_ret: int = 0


def _closure(m: np.ndarray) -> np.ndarray:
    """Transitive closure of a preference relation (Warshall)."""
    m = m.copy()
    for k in range(len(m)):
        m |= np.outer(m[:, k], m[k, :])
    return m


def _topic_groups(items, ranked: list[str], label: str, topic: str):
    """Docid ranks (retrieved judged docs 0..NJR-1 in rank order, then the others in docno
    order), the judgment groups and the counts matrix CA (summed preference matrices)."""
    judged = {d for _, _, d, _ in items}
    ret = [d for d in ranked if d in judged]
    njr = len(ret)
    rank = {d: i for i, d in enumerate(ret)}
    for d in sorted(judged - set(rank), key=byte_key):
        rank[d] = len(rank)
    nj = len(rank)
    ca = np.zeros((nj, nj), dtype=np.int64)
    by_jg: dict[str, list] = {}
    for jg, jsg, d, level in items:
        by_jg.setdefault(jg, []).append((jsg, level, rank[d], d))
    groups = []
    for jg in sorted(by_jg, key=byte_key):
        rows = sorted(by_jg[jg], key=lambda r: (byte_key(r[0]), -r[1], r[2]))
        jsgs = {r[0] for r in rows}
        if len(jsgs) == 1:
            ecs: list[tuple[float, list[int]]] = []
            for _, level, r, _ in rows:
                if not ecs or ecs[-1][0] != level:
                    ecs.append((level, []))
                ecs[-1][1].append(r)
            if len({r for _, rs in ecs for r in rs}) < sum(len(rs) for _, rs in ecs) and \
                    any(set(r1) & set(r2) for i, (_, r1) in enumerate(ecs)
                        for _, r2 in ecs[i + 1:]):
                raise InputError(label, f"topic {topic!r}: a docno has two rel_levels "
                                 f"in judgment group {jg!r}")
            a, b = [], []  # each doc of a class is preferred to each doc of a later class
            for i, (_, r1) in enumerate(ecs[:-1]):
                rest = np.array([r for _, r2 in ecs[i + 1:] for r in r2], dtype=np.int64)
                a.append(np.repeat(np.array(r1, dtype=np.int64), len(rest)))
                b.append(np.tile(rest, len(r1)))
            g = _Group(ecs=ecs, pa=None, rel=None)
            for level, ranks in ecs:
                n_ret = sum(1 for r in ranks if r < njr)
                if level > 0.0:
                    g.num_rel += len(ranks)
                    g.num_rel_ret += n_ret
                else:
                    g.num_nonrel += len(ranks)
                    g.num_nonrel_ret += n_ret
            pa_ = np.concatenate(a) if a else np.zeros(0, dtype=np.int64)
            pb = np.concatenate(b) if b else np.zeros(0, dtype=np.int64)
            np.add.at(ca, (pa_, pb), 1)
        else:  # the group's own documents only (its ranks ascending): n_g, not nj, squared
            ranks = np.array(sorted({r[2] for r in rows}), dtype=np.int64)
            local = {int(r): k for k, r in enumerate(ranks)}
            rel = np.full(len(ranks), -1.0)
            m = np.zeros((len(ranks), len(ranks)), dtype=bool)
            for _, level, r, d in rows:
                k = local[r]
                if (rel[k] > 0.0 and level == 0.0) or (rel[k] == 0.0 and level > 0.0):
                    raise InputError(label, f"topic {topic!r}: doc {d!r} has both 0 and "
                                     f"non-0 rel_level in judgment group {jg!r}")
                rel[k] = level
            for jsg in jsgs:  # within a sub-group a higher rel_level is preferred
                sub = [(level, local[r]) for s_, level, r, _ in rows if s_ == jsg]
                lv = np.array([x[0] for x in sub])
                ks = np.array([x[1] for x in sub], dtype=np.int64)
                ii, jj = np.nonzero(lv[:, None] > lv[None, :])
                m[ks[ii], ks[jj]] = True
            m = _closure(m)
            if np.any(m & m.T):
                raise InputError(label, f"topic {topic!r}: judgment group {jg!r} has "
                                 "inconsistent (cyclic) preferences")
            np.fill_diagonal(m, False)
            g = _Group(ecs=None, pa=m, rel=rel, ranks=ranks)
            ret_ = ranks < njr
            g.num_rel_ret = int(np.sum(rel[ret_] > 0.0))
            g.num_nonrel_ret = int(np.sum(rel[ret_] == 0.0))
            g.num_rel = int(np.sum(rel > 0.0))
            g.num_nonrel = int(np.sum(rel == 0.0))
            la, lb = np.nonzero(m)
            pa_, pb = ranks[la], ranks[lb]
            ca[np.ix_(ranks, ranks)] += m
        ra, rb = pa_ < njr, pb < njr
        g.ful_ret = int(np.sum(ra & rb & (pa_ < pb)))
        g.poss_ret = int(np.sum(ra & rb))
        g.ful_imp = int(np.sum(ra & ~rb))
        g.poss_imp = g.ful_imp + int(np.sum(~ra & rb))
        g.notoccur = int(np.sum(~ra & ~rb))
        groups.append(g)
    return njr, nj, groups, ca


def _recalc(g: _Group, njr: int, ret_only: bool) -> tuple[int, int]:
    """trec_eval's recalculation for prefs_avgjg_Rnonrel(_ret) when a group has more
    nonrelevant docs than relevant: only the first R nonrelevant docs (rank order) count.
    Reproduced as trec_eval does it: with ECs, the "nonrelevant" class is the last EC (lowest
    rel_level) cut to its first R docs, prefs among the other ECs skip the last EC, and every
    EC (the last included) is compared with the cut class; a pair counts as fulfilled when
    the first doc is retrieved and ranked above the second."""
    ful = poss = 0
    if g.ecs is not None:
        cut_n = g.num_rel_ret if ret_only else g.num_rel
        last = g.ecs[-1][1][:cut_n]

        def lead(ranks):  # ret_only stops at the first unretrieved (ranks ascend)
            if not ret_only:
                return ranks
            out = []
            for r in ranks:
                if r >= njr:
                    break
                out.append(r)
            return out
        n = len(g.ecs)
        for i in range(n):
            for j in range(i + 1, n - 1):
                for p1 in lead(g.ecs[i][1]):
                    for p2 in lead(g.ecs[j][1]):
                        if p1 < p2 and (ret_only or p1 < njr):
                            ful += 1
                        else:
                            poss += 1
        for i in range(n):
            for p1 in lead(g.ecs[i][1]):
                for p2 in lead(last):
                    if p1 < p2 and (ret_only or p1 < njr):
                        ful += 1
                    else:
                        poss += 1
        return ful, poss + ful
    rel, a, ranks = g.rel, g.pa, g.ranks  # the group's docs in rank order
    limit = njr if ret_only else int(ranks[-1]) + 1 if len(ranks) else 0
    seen, fdn = 0, limit
    for k in range(len(rel)):
        if ranks[k] >= limit:
            break
        if rel[k] == 0.0:
            seen += 1
            if seen == g.num_rel + 1:
                fdn = int(ranks[k])
                break
    keep = ~((ranks >= fdn) & (rel == 0.0))
    sub = a & np.outer(keep, keep)
    r_ = ranks < njr
    upper = np.triu(np.ones_like(sub), 1)
    ful = int(np.sum(sub[np.ix_(r_, r_)] & upper[np.ix_(r_, r_)]))
    poss = int(np.sum(sub[np.ix_(r_, r_)] & ~upper[np.ix_(r_, r_)]))
    if not ret_only:
        ful += int(np.sum(sub[np.ix_(r_, ~r_)]))
        poss += int(np.sum(sub[np.ix_(~r_, r_)])) + int(np.sum(sub[np.ix_(~r_, ~r_)]))
    return ful, poss + ful


def _div(a: float, b: float) -> float:
    """C's double division: x/0 is inf or nan, never an exception."""
    if b:
        return a / b
    return float("nan") if a == 0 else float("inf") * (1 if a > 0 else -1)


def _pair(ca: np.ndarray, njr: int, nj: int, areas: str) -> float:
    total, pairs = 0.0, 0
    blocks = [(slice(0, njr), slice(0, njr), True)]
    if areas != "ret":
        blocks.append((slice(0, njr), slice(njr, nj), False))
    for rows, cols, upper in blocks:
        c, t = ca[rows, cols], ca[cols, rows].T
        mask = (c > 0) | (t > 0)
        if upper:
            mask &= np.triu(np.ones_like(mask), 1)
        idx = np.nonzero(mask)  # row-major: trec_eval's loop order
        num, den = c[idx], c[idx] + t[idx]
        for x, y in zip(num.tolist(), den.tolist(), strict=True):
            total += x / y
        pairs += len(num)
    if areas == "all":
        c = ca[njr:, njr:]
        pairs += int(np.sum(np.triu((c > 0) | (c.T > 0), 1)))
    return total / pairs if pairs else 0.0


def _prefs_values(njr: int, nj: int, groups: list[_Group], ca: np.ndarray) -> dict:
    v: dict[str, float] = {}
    ful_ret = sum(g.ful_ret for g in groups)
    ful_imp = sum(g.ful_imp for g in groups)
    poss_ret = sum(g.poss_ret for g in groups)
    poss_imp = sum(g.poss_imp for g in groups)
    notoccur = sum(g.notoccur for g in groups)
    v["prefs_num_prefs_poss"] = poss_ret + poss_imp + notoccur
    v["prefs_num_prefs_ful"] = ful_ret + ful_imp
    v["prefs_num_prefs_ful_ret"] = ful_ret

    def ratio(f, p):
        return f / p if p else 0.0

    def avg(terms):  # trec_eval: summed over groups with poss > 0, 0 unless sum > 0
        s = 0.0
        for f, p in terms:
            if p:
                s += f / p
        return s / len(groups) if s > 0.0 else 0.0

    def rnonrel(ret_only: bool) -> float:
        s = 0.0
        for g in groups:
            R, N = (g.num_rel_ret, g.num_nonrel_ret) if ret_only else (g.num_rel, g.num_nonrel)
            if R >= N:
                if ret_only:
                    f, p = g.ful_ret, g.poss_ret
                else:
                    f, p = g.ful_ret + g.ful_imp, g.poss_ret + g.poss_imp + g.notoccur
                f += g.num_rel_ret * (R - N)
                p += g.num_rel * (R - N)
            else:
                f, p = _recalc(g, njr, ret_only)
            s += _div(f, p)
        return s / len(groups) if s > 0.0 else 0.0

    all_poss = poss_ret + poss_imp + notoccur
    v["prefs_simp"] = ratio(ful_ret + ful_imp, all_poss)
    v["prefs_pair"] = _pair(ca, njr, nj, "all")
    v["prefs_avgjg"] = avg((g.ful_ret + g.ful_imp, g.poss_ret + g.poss_imp + g.notoccur)
                           for g in groups)
    v["prefs_avgjg_Rnonrel"] = rnonrel(False)
    v["prefs_simp_ret"] = ratio(ful_ret, poss_ret)
    v["prefs_pair_ret"] = _pair(ca, njr, nj, "ret")
    v["prefs_avgjg_ret"] = avg((g.ful_ret, g.poss_ret) for g in groups)
    v["prefs_avgjg_Rnonrel_ret"] = rnonrel(True)
    v["prefs_simp_imp"] = ratio(ful_ret + ful_imp, poss_ret + poss_imp)
    v["prefs_pair_imp"] = _pair(ca, njr, nj, "imp")
    v["prefs_avgjg_imp"] = avg((g.ful_ret + g.ful_imp, g.poss_ret + g.poss_imp)
                               for g in groups)
    return v


def _prefs_names(measures: list[str] | None, profile: str = DEFAULT_PROFILE) -> list[str]:
    """The keys of the preference measures named."""
    return [i.key for i in _resolved(measures, "prefs", profile)[0]]


def evaluate_prefs(prefs: Any, run: Any, measures: list[str] | None = None, *,
                   depth: int | None = None, profile: str = "trec_eval-10",
                   qrels: bool = False, complete_topics: bool = False,
                   require_overlap: bool = True) -> JgEvaluation:
    """Evaluate ``run`` against preference judgments (a :class:`Preferences` or what
    :func:`read_prefs` reads; ``qrels=True`` reads a qrels file as trec_eval's
    ``-R qrels_prefs``). Topics: those of the run that have preferences, in strcmp order.
    The three ``prefs_num_*`` counts are summed in the summary; the ratios are averaged,
    a 0/0 ratio giving 0. ``complete_topics`` (-c): the ratios' mean is over every topic
    with preferences (10.0 also evaluates the ones the run lacks, on its one-document bogus
    ranking, and adds their counts). No run topic judged is an EvaluationError
    (``no-overlap``) unless ``require_overlap`` is False."""
    from .io import read_run
    from .measures.registry import PROFILES

    if not isinstance(prefs, Preferences):
        prefs = read_prefs(prefs, qrels=qrels)
    _refuse_comments(prefs, profile)
    run = read_run(run)
    instances, header = _resolved(measures, "qrels_prefs" if qrels else "prefs", profile)
    names = [i.key for i in instances]
    if require_overlap:
        _require_overlap(run, prefs.topics, "qrels_prefs" if qrels else "prefs")
    as_float = PROFILES[profile].float32_scores  # its sims and rel_levels alike
    evaluated = _evaluated(run, prefs.topics, profile, complete_topics)
    _check_budget(names, len(evaluated), [_prefs_work(prefs.topics[t]) for t in evaluated],
                  "preferences")
    per_topic: dict[str, dict[str, float]] = {}
    for topic, items, ranked in _judged_topics(run, prefs.topics, profile, depth,
                                               ties_ascending=True, complete=complete_topics):
        if as_float:  # 9.0.8 reads rel_level into a C float: 2 and 2.00000001 are one level
            items = [(jg, jsg, d, float(np.float32(level))) for jg, jsg, d, level in items]
        njr, nj, groups, ca = _topic_groups(items, ranked, prefs.source, topic)
        values = _prefs_values(njr, nj, groups, ca)
        per_topic[topic] = {i.key: i.measure.compute(values, i.value) for i in instances}
    return JgEvaluation(runid=run.runid, per_topic=per_topic, names=names,
                        counts=frozenset(i.key for i in instances
                                         if i.measure.aggregate == "sum"),
                        header=header,
                        num_q=len(prefs.topics) if complete_topics else None)
