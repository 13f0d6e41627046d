"""The peers' spellings mean the peers' values (issue #28).

ranx is not installed in the test venv: the inputs and expected values of the first tables
are those ranx's own test suite asserts (AmenRa/ranx, tests/unit/ranx/meta/evaluate_test.py
and tests/unit/ranx/metrics/rank_biased_precision_test.py; values, not code). ranx's ids are
integers and its run entries [id, score]; the scores are written here as ranx's order gives
them (descending by position). The ``-lN`` and graded-``rbp`` rows have no ranx-asserted
value: their expected numbers are computed by hand from ranx's definition (judgments below N
are dropped, the rest gain their grade; RBP weighs each rank by the grade), as shown.
"""

from __future__ import annotations

import math

import pytest

import cranfield
from cranfield.measures.names import parse_measure


def _qrels(*topics):
    return {f"q{i}": {str(d): g for d, g in t} for i, t in enumerate(topics)}


def _run(*topics):
    # ranx's run order is the order listed: descending scores keep it
    return {f"q{i}": {str(d): float(len(t) - j) for j, d in enumerate(t)}
            for i, t in enumerate(topics)}


# (measure, qrels, run, ranx's asserted value, where ranx asserts it)
EVAL_TEST = "tests/unit/ranx/meta/evaluate_test.py"
RBP_TEST = "tests/unit/ranx/metrics/rank_biased_precision_test.py"
RBP_QRELS = _qrels([(1, 1), (2, 1), (6, 1), (11, 1), (17, 1)])
RBP_RUN = _run(list(range(1, 21)))
CASES = [
    ("hits@5", _qrels([(1, 1), (4, 1), (5, 1), (6, 1)]), _run([1, 2, 3, 4, 5, 7]), 3,
     EVAL_TEST + "::test_hits_single"),
    ("hits@5", _qrels([(1, 1), (4, 1), (5, 1), (6, 1)], [(1, 1), (4, 1), (6, 1)]),
     _run([1, 2, 3, 4, 5, 7], [1, 2, 4, 3, 5, 7]), 2.5, EVAL_TEST + "::test_hits_parallel"),
    ("hit_rate@5", _qrels([(1, 1), (2, 1), (4, 1)]), _run([1, 2, 4, 3, 5, 7]), 1,
     EVAL_TEST + "::test_hit_rate_single"),
    ("hit_rate@5", _qrels([(9, 1), (6, 1), (8, 1)], [(1, 1), (2, 1), (4, 1)]),
     _run([1, 2, 3, 4, 5, 7], [1, 2, 4, 3, 5, 7]), 0.5, EVAL_TEST + "::test_hit_rate_parallel"),
    ("rbp.5", RBP_QRELS, RBP_RUN, 0.7661, RBP_TEST + "::test_rank_biased_precision"),
    ("rbp.8", RBP_QRELS, RBP_RUN, 0.4526, RBP_TEST + "::test_rank_biased_precision"),
    ("rbp.95", RBP_QRELS, RBP_RUN, 0.1881, RBP_TEST + "::test_rank_biased_precision"),
]
JARVELIN_QRELS = _qrels([(2, 5), (4, 4), (5, 3), (10, 2)])
IDCG = 5 / math.log2(2) + 4 / math.log2(3) + 3 / math.log2(4) + 2 / math.log2(5)
CASES += [
    ("ndcg@10", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]),
     (5 / math.log2(3) + 4 / math.log2(5) + 3 / math.log2(6)) / IDCG,
     EVAL_TEST + "::test_ndcg_jarvelin"),
    ("ndcg@10", JARVELIN_QRELS, _run([10, 5, 2, 4, 3]),
     (2 / math.log2(2) + 3 / math.log2(3) + 5 / math.log2(4) + 4 / math.log2(5)) / IDCG,
     EVAL_TEST + "::test_ndcg_jarvelin"),
]
# by hand, from ranx's definition of the -lN level (no ranx-asserted value)
CASES += [
    # -l4: only grades 5 and 4 count, each gaining its grade
    ("ndcg@10-l4", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]),
     (5 / math.log2(3) + 4 / math.log2(5)) / (5 / math.log2(2) + 4 / math.log2(3)), "hand"),
    ("hits@5-l4", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]), 2, "hand"),
    ("hit_rate@2-l5", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]), 1, "hand"),
    ("hit_rate@1-l5", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]), 0, "hand"),
    ("precision@5-l3", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]), 3 / 5, "hand"),
    ("hits", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]), 3, "hand"),
    # graded rbp: each rank weighed by the grade (0, 5, 0, 4, 3 at ranks 1..5)
    ("rbp.5", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]),
     0.5 * (5 * 0.5 + 4 * 0.5**3 + 3 * 0.5**4), "hand"),
    ("rbp.5-l4", JARVELIN_QRELS, _run([1, 2, 3, 4, 5]), 0.5 * (5 * 0.5 + 4 * 0.5**3), "hand"),
]


@pytest.mark.parametrize("name, qrels, run, expected, source", CASES,
                         ids=[f"{c[0]}:{c[4].rsplit('::', 1)[-1]}" for c in CASES])
def test_a_ranx_spelling_gives_ranxs_value(name, qrels, run, expected, source):
    got = cranfield.evaluate(qrels, run, [name]).aggregate[name]
    if source.startswith(RBP_TEST):
        assert round(got, 4) == expected  # ranx asserts 4 digits
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_trec_evals_own_names_keep_summing():
    qrels = _qrels([(1, 1), (4, 1), (5, 1), (6, 1)], [(1, 1), (4, 1), (6, 1)])
    run = _run([1, 2, 3, 4, 5, 7], [1, 2, 4, 3, 5, 7])
    ev = cranfield.evaluate(qrels, run, ["num_rel_ret", "NumRelRet", "hits", "hits@5"])
    assert ev.aggregate["num_rel_ret"] == 5 and ev.aggregate["NumRelRet"] == 5
    assert ev.aggregate["hits"] == 2.5 and ev.aggregate["hits@5"] == 2.5


def test_a_level_suffix_is_the_rel_parameter():
    (a,) = parse_measure("precision@5-l2")
    (b,) = parse_measure("P(rel=2)@5")
    assert (a.measure, a.value, a.rel_level) == (b.measure, b.value, b.rel_level)
    assert a.key == "precision@5-l2"


def test_a_level_suffix_on_a_name_that_is_not_ranxs_is_refused():
    with pytest.raises(cranfield.MeasureError):
        parse_measure("P@5-l2")


def test_cranfield_measures_says_which_tools_meaning_each_spelling_takes():
    from cranfield.measures import REGISTRY
    from cranfield.reports.measure_docs import describe, format_measure

    def tools(name):
        return {s["name"]: s["tool"] for s in describe(REGISTRY[name])["spellings"]}

    assert tools("num_rel_ret") == {"num_rel_ret": "trec_eval", "NumRelRet": "ir_measures"}
    assert tools("hits") == {"hits": "ranx", "hits@k": "ranx", "hits-l<N>": "ranx",
                             "hits@k-l<N>": "ranx"}
    assert tools("success") == {"success": "trec_eval", "Success": "ir_measures",
                                "hit_rate": "ranx", "hit_rate@k": "ranx",
                                "hit_rate-l<N>": "ranx", "hit_rate@k-l<N>": "ranx"}
    assert tools("ranx_rbp") == {"ranx_rbp": "ranx", "rbp.<p>": "ranx", "rbp@<p>": "ranx",
                                 "rbp.<p>-l<N>": "ranx", "rbp@<p>-l<N>": "ranx"}
    # ir_measures' name and ir_measures' mean (a topic with no relevant document in the top
    # k has no value and is left out): tests/engine/test_accuracy_ir_measures_mean.py
    assert tools("Accuracy") == {"Accuracy": "ir_measures"}
    # the spellings are the registry name (first) and its aliases, each once
    for m in REGISTRY.values():
        d = describe(m)
        names = [s["name"] for s in d["spellings"]]
        assert names[0] == m.name and len(set(names)) == len(names), m.name
        assert set(names) == {m.name, *d["aliases"]}, m.name
    assert "names:      hits (ranx), hits-l<N> (ranx), hits@k (ranx), hits@k-l<N> (ranx)" in \
        format_measure(describe(REGISTRY["hits"]))


@pytest.mark.parametrize("measures, printed", [
    (["hit_rate"], ["hit_rate"]),
    (["hit_rate", "success"], ["success_1", "success_5", "success_10", "hit_rate"]),
    (["hit_rate@5", "hit_rate"], ["success_5", "hit_rate"]),
    (["hit_rate-l1"], ["hit_rate-l1"]),
])
def test_bare_hit_rate_prints_its_key_in_trec_text(measures, printed):
    """Bare hit_rate (success at any rank) prints as its JSON key, not under the sentinel
    cutoff that stands for "any rank" (success_9223372036854775807; review R3 F4)."""
    from cranfield.reports.trec_format import format_trec

    qrels = _qrels([(1, 1), (2, 1)], [(9, 1)])
    run = _run([3, 1, 2], [4, 5])
    ev = cranfield.evaluate(qrels, run, measures)
    lines = format_trec(ev).splitlines()
    assert [line.split("\t")[0].rstrip() for line in lines] == printed
    assert "9223372036854775807" not in format_trec(ev, per_topic=True)
    assert ev.aggregate["hit_rate" if "hit_rate" in measures else measures[0]] == 0.5
