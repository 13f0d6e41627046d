"""The budget before work for judgment groups and preferences (review R1 F1, F2): what is
charged is the work the evaluation does — per topic the summed preference matrix (judged
docs squared), per judgment group its pairs (its lines squared) and, for a group of several
sub-groups, its transitive closure (its docs cubed), the larger of the two per topic; for
judgment groups, each group's walk of the ranking and its measure instances. Each case is
within the old charge (judged docs squared, or instances × topics) and over the new one."""

from __future__ import annotations

import pytest

import cranfield
from cranfield.measures.budget import BudgetError, evaluation_budget


def _prefs_closure():  # a 60-doc group of one sub-group, 5 tiny groups of two sub-groups
    lines = [f"q1 big s d{i} {i % 2}" for i in range(60)]
    for g in range(5):
        lines += [f"q1 g{g} {s} d{2 * g + k} {2 - k}" for s in "ab" for k in (0, 1)]
    return "\n".join(lines) + "\n"


def _prefs_shared():  # 3 groups of one sub-group judging the same 40 docs
    return "".join(f"q1 g{g} s d{i} {i % 3}\n" for g in range(3) for i in range(40))


RUN40 = "".join(f"q1 Q0 d{i} {i + 1} {100 - i} r\n" for i in range(40))
RUN10 = "".join(f"q1 Q0 d{i} {i + 1} {100 - i} r\n" for i in range(10))

CASES = [
    # (id, judgments, format, run, measures, limit, total charged)
    ("prefs-closure", _prefs_closure(), "prefs", RUN40, ["prefs_simp"], 3700,
     60 * 60 + 5 * (4 * 4 + 2 ** 3)),
    ("prefs-shared-docs", _prefs_shared(), "prefs", RUN40, ["prefs_simp"], 4000,
     3 * 40 * 40),
    ("jg-many-groups", "".join(f"q1 g{g} d{g % 40} 1\n" for g in range(100)), "qrels_jg",
     RUN40, ["map_avgjg"], 4000, 100 * (40 + 1)),
    ("jg-many-instances", "".join(f"q1 g{g} d{g} 1\n" for g in range(10)), "qrels_jg",
     RUN10, ["P_avgjg." + ",".join(str(k) for k in range(1, 401))], 4000,
     10 * (10 + 400)),
]


@pytest.mark.parametrize("judgments, fmt, run, measures, limit, total",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_work_over_the_budget_is_refused_before_work(judgments, fmt, run, measures, limit,
                                                     total):
    with evaluation_budget(max_values=limit), pytest.raises(BudgetError) as caught:
        cranfield.evaluate(judgments, run, measures, qrels_format=fmt)
    err = caught.value
    assert (err.budget, err.limit, err.total, err.field) == \
        ("MAX_EVALUATION_VALUES", limit, total, "qrels")
    # the same work within a budget of its size is done
    with evaluation_budget(max_values=total):
        cranfield.evaluate(judgments, run, measures, qrels_format=fmt)


def test_a_group_of_several_sub_groups_is_computed_over_its_own_docs():
    """The closure is over the group's documents: many tiny groups beside a large one are
    cheap and give the same values as each alone says (prefs_avgjg: mean of the groups)."""
    tiny = "".join(f"q1 t{g} {s} d{2 * g + k} {2 - k}\n" for g in range(3) for s in "ab"
                   for k in (0, 1))
    ev = cranfield.evaluate(tiny, RUN40, ["prefs_avgjg", "prefs_num_prefs_ful"],
                            qrels_format="prefs")
    # each group prefers d(2g) to d(2g+1), ranked above it: fulfilled, 2 sub-groups alike
    # make one preference of the closure
    assert ev.per_topic["q1"]["prefs_avgjg"] == 1.0
    assert ev.per_topic["q1"]["prefs_num_prefs_ful"] == 3
