"""trec_eval's preference measures (``-R prefs``, ``-R qrels_prefs``): the fourteen
``prefs_*`` measures of preference judgments (:class:`cranfield.inputs.judgment_files.Preferences`),
evaluated by :func:`evaluate_prefs` in the loop the judgment-group measures use
(:mod:`cranfield.measures.jg_measures`).

A prefs line is ``qid jg jsg docno rel_level``: within one judgment sub-group (jsg) a doc
with a higher rel_level is preferred to one with a lower; a judgment group (jg) is one
consistent information need. A qrels file read with -R qrels_prefs is ``qid jg docno rel``:
each jg one sub-group. Semantics follow trec_eval's form_prefs_counts.c and m_prefs_*.c,
including the quirks of its R-nonrel recalculation (documented at _recalc). The measures are
named through the registry (cranfield/measures/judgments.py); held byte for byte to both
trec_eval binaries by tests/engine/test_prefs_differential.py.

Room: measures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..inputs.judgment_files import Preferences, read_prefs
from ..inputs.run_qrels import byte_key
from .jg_measures import (
    JgEvaluation,
    c_div,
    check_budget,
    evaluated_topics,
    judged_topics,
    refuse_comments,
    refuse_no_overlap,
    resolved_measures,
)
from .registry import DEFAULT_PROFILE, NICKNAMES, REGISTRY

__all__ = ["evaluate_prefs", "PREFS_MEASURES"]

# the registry's: the measures of trec_eval's nickname all_prefs, in its order, and the
# counts among them (summed over topics in the summary, printed as integers)
PREFS_MEASURES = tuple(n for n in NICKNAMES["all_prefs"](DEFAULT_PROFILE)
                       if REGISTRY[n].input == "prefs")
PREFS_COUNTS = tuple(n for n in PREFS_MEASURES if REGISTRY[n].aggregate == "sum")


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
            s += c_div(f, p)
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
    return [i.key for i in resolved_measures(measures, "prefs", profile)[0]]


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
    from ..inputs.io import read_run
    from .registry import PROFILES

    if not isinstance(prefs, Preferences):
        prefs = read_prefs(prefs, qrels=qrels)
    refuse_comments(prefs, profile)
    run = read_run(run)
    instances, header = resolved_measures(measures, "qrels_prefs" if qrels else "prefs", profile)
    names = [i.key for i in instances]
    if require_overlap:
        refuse_no_overlap(run, prefs.topics, "qrels_prefs" if qrels else "prefs")
    as_float = PROFILES[profile].float32_scores  # its sims and rel_levels alike
    evaluated = evaluated_topics(run, prefs.topics, profile, complete_topics)
    check_budget(names, len(evaluated), [_prefs_work(prefs.topics[t]) for t in evaluated],
                 "preferences")
    per_topic: dict[str, dict[str, float]] = {}
    for topic, items, ranked in judged_topics(run, prefs.topics, profile, depth,
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
