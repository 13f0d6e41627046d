"""trec_eval's measures of judgment groups (``-R qrels_jg``) and of preference judgments
(``-R prefs``, ``-R qrels_prefs``), in ``measures.c`` order: registered here once, computed by
:mod:`cranfield.measures.jg_measures` and :mod:`cranfield.measures.prefs_measures` (which rank the
run and form the counts each measure reads, from the judgments
:mod:`cranfield.inputs.judgment_files` reads; the functions below take their value from those
counts).

Judgment groups: a topic judged by G groups (assessors, users), each a complete set of
judgments. Notation: for group g, R_g = #{documents g judges with grade >= l} (l: the
relevance level, trec_eval's -l), rel_g(i) = "g judges the document at rank i relevant",
N = num_ret. Each ``*_avgjg`` measure scores every group against the same ranking and takes
the mean over the topic's groups (one group: its value); the summary is the mean over the
evaluated topics.

Preferences: within one judgment sub-group a document with a higher rel_level is preferred
to one with a lower; a judgment group's sub-groups are transitively closed (cycles refused);
``-R qrels_prefs`` reads a qrels file as one sub-group per group. For group g, a preference
A > B is *ret* when A and B are both retrieved (fulfilled when A ranks above B), *imp* when
exactly one is (fulfilled when that one is A), *notoccur* when neither is (never fulfilled).
ful_g = ful_ret_g + ful_imp_g, poss_g = poss_ret_g + poss_imp_g + notoccur_g; a bare ful, poss
is the sum over the topic's groups. C[a][b] = the number of groups preferring a to b. A
document's rel_level > 0 is relevant (the relevance level does not apply).

Reference for all: NIST trec_eval 9.0.8 / 10.0 ``m_<name>.c``, ``form_res_rels_jg.c``,
``form_prefs_counts.c``.
"""

from __future__ import annotations

from collections.abc import Mapping

from .registry import Param, register
from .trec import RANK_CUTOFFS

RPREC_MULTIPLES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
_TREC_EVAL = {"spelling": "trec_eval"}  # trec_eval's measures, in no all_trec


def _prefs(name: str, **kw):
    """Register a preference measure: ``compute(values, _)`` is its entry among the values
    cranfield.measures.prefs_measures forms for one topic."""
    return register(name, family=kw.pop("family", "rank"), input="prefs", all_trec=(),
                    uses_rel_level=False, extra=_TREC_EVAL, **kw)


# ---- preference judgments (-R prefs, -R qrels_prefs) -------------------------------------------

@_prefs("prefs_num_prefs_poss", family="count", aggregate="sum", integer=True)
def prefs_num_prefs_poss(values: Mapping, _=None):
    """Number of preferences possible, whether the documents are retrieved or not.

    Formula: poss = Σ_g (poss_ret_g + poss_imp_g + notoccur_g). Summary: the sum over topics.
    Reference: trec_eval m_prefs_num_prefs_poss.c.
    """
    return values["prefs_num_prefs_poss"]


@_prefs("prefs_num_prefs_ful", family="count", aggregate="sum", integer=True)
def prefs_num_prefs_ful(values: Mapping, _=None):
    """Number of preferences fulfilled, implied ones (one document retrieved) included.

    Formula: ful = Σ_g (ful_ret_g + ful_imp_g). Summary: the sum over topics.
    Reference: trec_eval m_prefs_num_prefs_ful.c.
    """
    return values["prefs_num_prefs_ful"]


@_prefs("prefs_num_prefs_ful_ret", family="count", aggregate="sum", integer=True)
def prefs_num_prefs_ful_ret(values: Mapping, _=None):
    """Number of preferences fulfilled among retrieved documents (both retrieved).

    Formula: Σ_g ful_ret_g. Summary: the sum over topics.
    Reference: trec_eval m_prefs_num_prefs_ful_ret.c.
    """
    return values["prefs_num_prefs_ful_ret"]


@_prefs("prefs_simp")
def prefs_simp(values: Mapping, _=None):
    """Preferences fulfilled over preferences possible, every preference counting once.

    Formula: ful / poss; a preference neither of whose documents is retrieved counts as a
    failure.
    0/0: poss = 0 gives 0.
    Reference: trec_eval m_prefs_simp.c.
    """
    return values["prefs_simp"]


@_prefs("prefs_pair")
def prefs_pair(values: Mapping, _=None):
    """Mean over document pairs of the fraction of the preferences on the pair fulfilled.

    Formula: over the pairs {a, b} some group orders, a ranked before b (the retrieved in
    rank order, then the unretrieved judged documents): C[a][b] / (C[a][b] + C[b][a]) when a
    is retrieved, 0 when neither is; the mean over those pairs.
    0/0: no pair gives 0.
    Reference: trec_eval m_prefs_pair.c.
    """
    return values["prefs_pair"]


@_prefs("prefs_avgjg")
def prefs_avgjg(values: Mapping, _=None):
    """Preferences fulfilled over possible within each judgment group, averaged over groups.

    Formula: (1/G) Σ_g ful_g / poss_g: every group (user) weighs the same, however many
    preferences it states.
    0/0: a group with poss_g = 0 adds 0 (and still counts in G); a sum of 0 gives 0.
    Reference: trec_eval m_prefs_avgjg.c.
    """
    return values["prefs_avgjg"]


@_prefs("prefs_avgjg_Rnonrel")
def prefs_avgjg_Rnonrel(values: Mapping, _=None):
    """prefs_avgjg with each group's nonrelevant documents (rel_level 0) set to R in number.

    Formula: per group, with R relevant (rel_level > 0) and N nonrelevant judged documents:
    R >= N: (ful_g + R_ret·(R-N)) / (poss_g + R·(R-N)) (R_ret: the relevant retrieved);
    R < N: ful / poss recounted with only the first R nonrelevant documents in rank order,
    as trec_eval's recalculate() does; then (1/G) Σ_g. Akin to bpref for one group of two
    classes.
    0/0: a group's x/0 is C's (0/0 NaN: a NaN sum gives 0); a sum of 0 gives 0.
    Reference: trec_eval m_prefs_avgjg_Rnonrel.c.
    """
    return values["prefs_avgjg_Rnonrel"]


@_prefs("prefs_simp_ret")
def prefs_simp_ret(values: Mapping, _=None):
    """prefs_simp among retrieved documents: a preference counts only when both are retrieved.

    Formula: Σ_g ful_ret_g / Σ_g poss_ret_g.
    0/0: no preference between retrieved documents gives 0.
    Reference: trec_eval m_prefs_simp_ret.c.
    """
    return values["prefs_simp_ret"]


@_prefs("prefs_pair_ret")
def prefs_pair_ret(values: Mapping, _=None):
    """prefs_pair over the pairs of two retrieved documents.

    Formula: over the pairs {a, b} of retrieved documents some group orders, a ranked above
    b: the mean of C[a][b] / (C[a][b] + C[b][a]).
    0/0: no pair gives 0.
    Reference: trec_eval m_prefs_pair_ret.c.
    """
    return values["prefs_pair_ret"]


@_prefs("prefs_avgjg_ret")
def prefs_avgjg_ret(values: Mapping, _=None):
    """prefs_avgjg among retrieved documents: both documents of a preference retrieved.

    Formula: (1/G) Σ_g ful_ret_g / poss_ret_g.
    0/0: a group with poss_ret_g = 0 adds 0 (and still counts in G); a sum of 0 gives 0.
    Reference: trec_eval m_prefs_avgjg_ret.c.
    """
    return values["prefs_avgjg_ret"]


@_prefs("prefs_avgjg_Rnonrel_ret")
def prefs_avgjg_Rnonrel_ret(values: Mapping, _=None):
    """prefs_avgjg_Rnonrel among retrieved documents.

    Formula: per group, with R relevant and N nonrelevant retrieved documents: R >= N:
    (ful_ret_g + R·(R-N)) / (poss_ret_g + R_g·(R-N)) (R_g: all the group's relevant);
    R < N: recounted with only the first R nonrelevant retrieved documents, as trec_eval's
    recalculate() does; then (1/G) Σ_g.
    0/0: a group's x/0 is C's (0/0 NaN: a NaN sum gives 0); a sum of 0 gives 0.
    Reference: trec_eval m_prefs_avgjg_Rnonrel_ret.c.
    """
    return values["prefs_avgjg_Rnonrel_ret"]


@_prefs("prefs_simp_imp")
def prefs_simp_imp(values: Mapping, _=None):
    """prefs_simp ignoring the preferences neither of whose documents is retrieved.

    Formula: Σ_g (ful_ret_g + ful_imp_g) / Σ_g (poss_ret_g + poss_imp_g).
    0/0: no preference with a retrieved document (Σ_g (poss_ret_g + poss_imp_g) = 0)
    gives 0.
    Reference: trec_eval m_prefs_simp_imp.c.
    """
    return values["prefs_simp_imp"]


@_prefs("prefs_pair_imp")
def prefs_pair_imp(values: Mapping, _=None):
    """prefs_pair over the pairs with at least one retrieved document.

    Formula: over the pairs {a, b} some group orders, a retrieved and ranked before b: the
    mean of C[a][b] / (C[a][b] + C[b][a]).
    0/0: no pair gives 0.
    Reference: trec_eval m_prefs_pair_imp.c.
    """
    return values["prefs_pair_imp"]


@_prefs("prefs_avgjg_imp")
def prefs_avgjg_imp(values: Mapping, _=None):
    """prefs_avgjg ignoring the preferences neither of whose documents is retrieved.

    Formula: (1/G) Σ_g (ful_ret_g + ful_imp_g) / (poss_ret_g + poss_imp_g).
    0/0: a group with no such preference adds 0 (and still counts in G); a sum of 0 gives 0.
    Reference: trec_eval m_prefs_avgjg_imp.c.
    """
    return values["prefs_avgjg_imp"]


# ---- judgment groups (-R qrels_jg) ----------------------------------------------------------
# compute(values, value): the value for one judgment group, among those
# cranfield.measures.jg_measures forms for it (keyed by the names trec_eval prints);
# cranfield.measures.jg_measures averages them over the groups

@register("map_avgjg", family="rank", input="qrels_jg", all_trec=(), extra=_TREC_EVAL)
def map_avgjg(values: Mapping, _=None):
    """Average precision averaged over the topic's judgment groups.

    Formula: (1/G) Σ_g (1/R_g) Σ_{i <= N : rel_g(i)} #{j <= i : rel_g(j)} / i, each group
    scored as map against the same ranking.
    0/0: a group with no relevant document retrieved (R_g = 0 included) scores 0.
    Reference: trec_eval m_map_avgjg.c.
    """
    return values["map_avgjg"]


@register("P_avgjg", family="rank", kind="cutoffs", defaults=RANK_CUTOFFS, input="qrels_jg",
          params=(Param("k", "integer list", list(RANK_CUTOFFS), "rank cutoffs", minimum=1),),
          all_trec=(), extra=_TREC_EVAL)
def P_avgjg(values: Mapping, k: int):
    """Precision at rank k averaged over the topic's judgment groups.

    Formula: (1/G) Σ_g #{i <= k : rel_g(i)} / k; ranks past N count as nonrelevant.
    0/0: never (k >= 1).
    Reference: trec_eval m_P_avgjg.c.
    """
    return values[f"P_avgjg_{k}"]


@register("Rprec_mult_avgjg", family="rank", kind="fcutoffs", defaults=RPREC_MULTIPLES,
          input="qrels_jg", params=(Param("multiple", "float list", list(RPREC_MULTIPLES),
                                          "multiples of R", minimum=0),),
          all_trec=(), extra=_TREC_EVAL)
def Rprec_mult_avgjg(values: Mapping, m: float):
    """Precision at a multiple of each judgment group's R, averaged over the groups.

    Formula: (1/G) Σ_g #{i <= c_g : rel_g(i)} / c_g with c_g = (long)(m · R_g + 0.9) (both
    profiles); ranks past N count as nonrelevant.
    0/0: c_g = 0 gives 0.
    Reference: trec_eval m_Rprec_mult_avgjg.c.
    """
    return values[f"Rprec_mult_avgjg_{m:3.2f}"]
