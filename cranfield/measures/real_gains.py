"""Evaluating qrels that declare real-valued gains (``gains="real"``, issue #31): which measures
take them, and the ranking of a run against them.

Gain-based measures (:data:`AS_GAINS`: CG, DCG, nDCG and their cut and tie-averaged forms,
ERR, RBP...) use the gains as they are, with no rounding: their formulas are written over
grades and read a real gain where they read a grade. A measure that reads a relevance
threshold (``Measure.uses_rel_level``: P, recall, MAP, R-prec, bpref, recip_rank, success,
Rndcg...) needs it explicitly, as ir_measures' ``rel=`` (``P(rel=0.5)@10``): trec_eval's
``-l`` (an integer grade) is not a threshold on real gains, and is refused with a sentence
naming the measure. Measures that read no grade value (runid, num_q, num_ret, Judged, unj)
are unchanged. The rest (:data:`REFUSED`: relstring, the TREC Web track's and ndeval's
measures, GAP, Compat...) are defined over integer grades and are refused naming the measure.

A negative real grade means "in the pool, not judged", as a negative integer grade does
(trec_eval's RELVALUE_UNJUDGED): no gain, not relevant, counted as judged by Judged.

Ranking reads only whether two grades differ and whether a grade is negative: the run is
ranked against the qrels with each distinct non-negative gain replaced by its integer code
(its place among the distinct gains, negatives -1), so every ranking path, compiled or not,
sees integer grades; the gains go back in place of the codes afterwards (:func:`ranked_real`).

Room: measures.
"""

from __future__ import annotations

import numpy as np

from ..errors import EvaluationError, MeasureError
from ..inputs.ranking import UNJUDGED, Ranked
from ..inputs.run_qrels import Qrels

# Measures that use real gains as they are (their formulas read the grade as its gain)
AS_GAINS = frozenset({"G", "ndcg", "ndcg_rel", "ndcg_cut", "dcg", "ideal_dcg", "rbp",
                      "rbp_resid", "CG", "dcg_gd", "ndcg_gd", "ERR", "RBP", "ranx_rbp"})
# Measures that read no grade's value, only whether a document is judged
NO_GRADE = frozenset({"runid", "num_q", "num_ret", "Judged", "unj"})
# Defined over integer grades (string of digits, gain levels, graded-AP thresholds, the Web
# track's and ndeval's definitions): refused with real gains
REFUSED_FAMILIES = ("diversity",)


def measure_problem(inst) -> str | None:
    """Why the measure instance ``inst`` cannot be computed from real gains, or None."""
    m = inst.measure
    if m.name in AS_GAINS and _gain_map(inst):
        return (f"{m.name} with a gain map (grade=gain, gains=) maps integer grades to gains; "
                "with real gains a map would apply only where a gain equals a level exactly: "
                "the gains are used as they are, without a map")
    if m.name in AS_GAINS or m.name in NO_GRADE:
        return None
    if m.uses_rel_level and m.family not in REFUSED_FAMILIES and m.input == "qrels":
        if inst.rel_level is not None:
            return None
        example = _example(inst)
        if example is None:  # (trec_eval's own measures without an ir_measures spelling)
            return (f"{m.name} counts relevant documents: with real gains it needs an "
                    "explicit threshold, rel=, which only ir_measures' spellings take, and it "
                    "has none: it is not available with real gains")
        return (f"{m.name} counts relevant documents: with real gains it needs an explicit "
                f"threshold, given as rel= (e.g. {example}); trec_eval's relevance level "
                "(-l, relevance_level) is not one")
    return (f"{m.name} is defined over integer grades, not real gains (measures that use real "
            f"gains: {', '.join(sorted(AS_GAINS))}; binary measures with rel=)")


def _gain_map(inst) -> bool:
    """Whether ``inst`` maps grades to gains: trec_eval's ``ndcg.1=3,2=9`` (a measure of
    kind ``gains`` with levels) or ir_measures' ``nDCG(gains={...})``."""
    value = inst.value
    if inst.measure.kind == "gains":
        return bool(value)
    return isinstance(value, dict) and bool(value.get("gains"))


def _example(inst) -> str | None:
    """``inst`` spelt with ``rel=0.5`` (``P(rel=0.5)@10``), checked to name the same
    measure; None when no spelling of it takes ``rel=``."""
    from .names import parse_measure

    m = inst.measure
    cutoff = ""
    if m.kind in ("cutoffs", "fcutoffs") and inst.value is not None:
        cutoff = f"@{inst.value:g}" if m.kind == "fcutoffs" else f"@{inst.value}"
    elif m.kind == "kw" and isinstance(inst.value, dict) and inst.value.get("k") is not None:
        cutoff = f"@{inst.value['k']}"
    from .registry import REGISTRY

    # (its own names first; then every ir_measures name: AP@k spells map_cut, say)
    names = (m.ir_name, m.name, *m.aliases, *(o.ir_name for o in REGISTRY.values()))
    for name in dict.fromkeys(n for n in names if n):
        text = f"{name}(rel=0.5){cutoff}"
        try:
            if all(i.measure.name == m.name for i in parse_measure(text)):
                return text
        except MeasureError:
            continue
    return None


def check_measures(instances) -> None:
    """Raise :class:`MeasureError` naming the first instance that real gains cannot give."""
    for inst in instances:
        problem = measure_problem(inst)
        if problem:
            raise MeasureError(inst.key, problem)


def check_thresholds(instances) -> None:
    """Integer grades: refuse a ``rel=`` that is not an integer (a threshold on real gains,
    which only qrels declaring ``gains="real"`` have)."""
    for inst in instances:
        level = inst.rel_level
        if isinstance(level, float):
            raise MeasureError(inst.key, f"rel={level:g} is a threshold on real gains: declare "
                                         "real gains (gains='real', --real-gains) or give an "
                                         "integer grade")


def refuse_real_diversity(qrels, instances, gains: str | None) -> None:
    """A :class:`Qrels` declaring real gains evaluated under a profile that reads them
    (``gains``, the plan's, not ``"integer"``): the measures refused before anything is
    read, as :func:`cranfield.evaluate_checks.plan_evaluation` refuses them for an inline
    declaration (the same MeasureError naming the first measure real gains cannot give;
    ndeval's measures are defined over integer grades)."""
    if gains != "integer" and isinstance(qrels, Qrels) and qrels.gains == "real":
        check_measures(instances)


def subtopic_grades(qrels: Qrels, instances, gains: str | None) -> Qrels:
    """Subtopic qrels (read with ``diversity``) as diversity measures read them. Under a
    trec_eval profile (``gains`` ``"integer"``) a Qrels declaring real gains is read as
    trec_eval reads grades: an integer-valued gain is its integer, one that is not an integer
    is refused as a mapping's grade is (:meth:`Qrels.with_integer_grades`). Under a profile
    that reads real gains the measures are refused (:func:`refuse_real_diversity`)."""
    if qrels.gains != "real":
        return qrels
    if gains != "integer":
        check_measures(instances)  # (raises: ndeval's measures are refused)
    return qrels.with_integer_grades()


def coded_qrels(qrels: Qrels) -> tuple[Qrels, np.ndarray]:
    """(``qrels`` with each non-negative gain replaced by its code, the distinct gains in
    code order): what ranking reads, and how to read the gains back."""
    grades = qrels.grades
    values, codes = np.unique(np.where(grades >= 0, grades, -1.0), return_inverse=True)
    negative = values < 0
    codes = codes.reshape(-1).astype(np.int64) - int(negative.sum())  # negatives: -1
    out = Qrels(qrels.topics, qrels.topic_index, qrels.docids, codes, None, qrels.source)
    out.unique_judgments = True  # (judged_qrels gave one judgment per document)
    return out, values[~negative]


def ranked_real(ranked: Ranked, gains: np.ndarray) -> Ranked:
    """``ranked`` (against :func:`coded_qrels`) with the real gains in place of the codes:
    hit labels (``UNJUDGED`` stays) and qrels grades (a negative gain reads -1.0)."""
    hl = ranked.hit_label
    label = np.full(len(hl), float(UNJUDGED))
    judged = hl >= 0
    label[judged] = gains[hl[judged]]
    qg = ranked.q_grade
    grade = np.full(len(qg), -1.0)
    grade[qg >= 0] = gains[qg[qg >= 0]]
    return Ranked(ranked.topics, ranked.num_ret, ranked.hit_topic, ranked.hit_rank, label,
                  ranked.q_topic, grade, ranked.in_run, ranked.cutoff_ties,
                  ranked.hit_tie_first, ranked.hit_tie_last)


def check(instances, qrels: Qrels, options: dict) -> tuple[Qrels, np.ndarray] | None:
    """What an evaluation of ``qrels`` needs: None for integer grades (a ``rel=`` that is not
    an integer refused); for real gains, the measures checked, ``options["gains"] = "real"``
    and (:func:`coded_qrels`' qrels, the gains) to rank against."""
    if qrels.gains != "real":
        check_thresholds(instances)
        return None
    if options.get("relevance_level", 1) != 1:  # (read by no measure: said, not ignored)
        raise EvaluationError("relevance_level (-l) is an integer grade, not a threshold on "
                              "real gains: give each measure that counts relevant documents "
                              "its rel= (P(rel=0.5)@10)", field="options.relevance_level")
    check_measures(instances)
    options["gains"] = "real"
    return coded_qrels(qrels)
