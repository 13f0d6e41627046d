"""Property tests: cranfield's per-topic values against pytrec_eval (trec_eval 9.x in C).

pytrec_eval (package ``pytrec-eval-terrier``, a test-only dependency) embeds the trec_eval
9.x C code, so for the ``trec_eval-9.0.8`` profile it is an oracle for every per-topic value
of every measure it offers. Hypothesis generates runs and qrels with the awkward cases:
exact score ties, near-ties that are distinct doubles but equal as float32 (9.0.8 ranks by a
C ``float``), grades -2..4 (negative = pooled but unjudged), retrieved docs with no judgment,
judged docs never retrieved, topics with no relevant (or no judged) document, topics on one
side only, and docids whose byte order differs from their numeric order ("d10" < "d9"),
because ties are broken by docno descending.

Known pytrec_eval artefacts, which are not cranfield's to reproduce:
- per-topic ``gm_map``/``gm_bpref`` are log values, and ``runid``/``num_q``/``relstring``
  come back as a meaningless 0.0: trec_eval prints no per-topic line for the first four,
  and ``relstring`` is checked here against a reference ranking instead;
- a topic whose qrels dict is empty is dropped by pytrec_eval, so none is generated;
- an empty ranking gives nan for ``iprec_at_recall``/``11pt_avg`` (as trec_eval's ``-nan``),
  so no empty run dict is generated; with ``judged_only`` an empty ranking can still arise,
  and then nan must match nan.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

import cranfield

PROFILE = "trec_eval-9.0.8"
TOLERANCE = 1e-12
MEASURES = sorted(pytrec_eval.supported_measures)

# trec_eval prints no per-topic line for these; pytrec_eval returns junk for them.
NO_PER_TOPIC_LINE = frozenset({"runid", "num_q", "gm_map", "gm_bpref"})
# pytrec_eval returns 0.0 for relstring; it is checked against reference_relstring().
NOT_FROM_ORACLE = NO_PER_TOPIC_LINE | {"relstring"}
INT_VALUED = frozenset({"num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"})

ORACLE_SETTINGS = settings(max_examples=500, deadline=None, derandomize=True, database=None)
EXTRA_SETTINGS = settings(max_examples=250, deadline=None, derandomize=True, database=None)

# ---------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------

# "d0".."d89" sort byte-wise, not numerically ("d10" < "d9"), plus prefixes ("d1" < "d10"),
# a leading zero, upper case (sorts before lower case) and non-ASCII (UTF-8 byte order).
DOC_POOL = [f"d{i}" for i in range(90)] + ["d05", "D5", "D50", "a", "z", "Z", "é1", "日本"]
# Topic ids are opaque strings: "01" and "1" are different topics.
TOPIC_POOL = ["1", "2", "10", "01", "q9", "é"]

# Exact ties: a handful of values drawn many times.
TIE_SCORES = [0.0, 1.0, 2.0, 0.5, -1.0, 3.0]
# Distinct doubles whose float32 values tie, or straddle a float32 rounding boundary.
NEAR_TIE_SCORES = [
    0.1,
    0.100000001,
    0.100000002,
    0.100000003,  # these four are one float32
    0.10000001,  # the next float32 up
    1.0,
    1.0 + 2.0**-25,
    1.0 - 2.0**-26,  # float32 1.0
    1.0 + 2.0**-24,  # exactly half-way: rounds to even, float32 1.0
    1.0 + 2.0**-24 + 2.0**-40,  # just past half-way: the next float32 up
    1.0 + 2.0**-23,  # the next float32 up
    16777216.0,
    16777217.0,  # float32 16777216
    16777218.0,
    0.0,
    -0.0,
    1e-46,  # float32 0.0
    1e-40,  # a float32 subnormal, not 0
    -2.5,
    -2.5 - 2.0**-30,  # float32 -2.5
]
ANY_SCORE = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
SCORE_REGIMES = [
    st.sampled_from(TIE_SCORES[:2]),  # nearly everything tied
    st.sampled_from(TIE_SCORES),
    st.sampled_from(NEAR_TIE_SCORES),
    st.one_of(st.sampled_from(NEAR_TIE_SCORES), st.sampled_from(TIE_SCORES), ANY_SCORE),
    ANY_SCORE,
]
GRADE_SETS = [
    (-2, -1, 0, 1, 2, 3, 4),  # everything (listed thrice: drawn more often)
    (-2, -1, 0, 1, 2, 3, 4),
    (-2, -1, 0, 1, 2, 3, 4),
    (0, 1, 2),
    (-1, 0),  # judged non-relevant (and unjudged) only: num_rel = 0
    (-2, -1),  # pooled but unjudged only (plus one unretrieved grade 0, see below)
    (1, 2, 3, 4),  # relevant only: no judged non-relevant for bpref
    (-2, 0, 1),
    (0, 3, 10, 12),  # grades above 9: '>' in relstring, large gains
]


@st.composite
def run_and_qrels(draw) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, int]]]:
    """A run and qrels with at least one topic on both sides; no empty per-topic dict."""
    topics = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=4, unique=True))
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for i, topic in enumerate(topics):
        side = "both" if i == 0 else draw(st.sampled_from(["both", "both", "run", "qrels"]))
        grade = st.sampled_from(draw(st.sampled_from(GRADE_SETS)))
        retrieved: list[str] = []
        if side in ("both", "run"):
            # Short lists (shorter than most cutoffs) and long ones, up to 60 docs.
            size = draw(st.sampled_from([1, 3, 6, 12, 25, 40, 51])) + draw(st.integers(0, 9))
            retrieved = draw(
                st.lists(st.sampled_from(DOC_POOL), min_size=size, max_size=size, unique=True)
            )
            score = draw(st.sampled_from(SCORE_REGIMES))
            scores = draw(st.lists(score, min_size=len(retrieved), max_size=len(retrieved)))
            run[topic] = dict(zip(retrieved, scores, strict=True))
        if side in ("both", "qrels"):
            judged: dict[str, int] = {}
            # Judge some of the retrieved docs (the others are not in the qrels at all) ...
            tenths_judged = draw(st.sampled_from([2, 5, 8, 10]))
            for doc in retrieved:
                if draw(st.integers(0, 9)) < tenths_judged:
                    judged[doc] = draw(grade)
            # ... and some that were never retrieved.
            unretrieved = [d for d in DOC_POOL if d not in run.get(topic, {})]
            extra = draw(st.lists(st.sampled_from(unretrieved), max_size=15, unique=True))
            for doc in extra:
                judged[doc] = draw(grade)
            if not judged:
                doc = retrieved[0] if retrieved and draw(st.booleans()) else unretrieved[0]
                judged[doc] = draw(grade)
            if max(judged.values()) < 0:
                # Only negative grades: trec_eval 9.x's form_res_rels sizes rel_levels by
                # max grade + 1 = 0, which fails ("Can't calculate measure") or reuses the
                # previous topic's buffer, and pytrec_eval segfaults. Keep one grade >= 0.
                judged[next(d for d in unretrieved if d not in judged)] = 0
            qrels[topic] = judged
    return run, qrels


# ---------------------------------------------------------------------------------------------
# Oracle and reference helpers
# ---------------------------------------------------------------------------------------------


def oracle(run, qrels, relevance_level, judged_only=False):
    """pytrec_eval's per-topic values (a fresh evaluator: its C code caches per query)."""
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, MEASURES, relevance_level=relevance_level, judged_docs_only_flag=judged_only
    )
    return evaluator.evaluate(run)


def ranking_9_0_8(ranked: dict[str, float]) -> list[str]:
    """trec_eval 9.0.8's order: float32 score descending, then docno descending (bytes)."""
    return sorted(
        ranked, key=lambda doc: (float(np.float32(ranked[doc])), doc.encode()), reverse=True
    )


def truncate_run(run, depth):
    """What trec_eval -M depth keeps: the top `depth` docs of each topic after sorting."""
    return {t: {d: docs[d] for d in ranking_9_0_8(docs)[:depth]} for t, docs in run.items()}


def reference_relstring(ranked, judged, judged_only=False, depth=None) -> str:
    """relstring: grade digit, '>' above 9, '-' nonpool, '.' pooled-unjudged; top 10."""
    labels = []
    for doc in ranking_9_0_8(ranked)[:depth]:
        grade = judged.get(doc)
        if grade is None:
            labels.append("-")
        elif grade < 0:
            labels.append(".")
        else:
            labels.append(str(grade) if grade <= 9 else ">")
    if judged_only:
        labels = [c for c in labels if c not in "-."]
    return "".join(labels[:10])


def values_equal(key: str, got, expected: float) -> bool:
    if key in INT_VALUED or key == "num_q":
        return got == expected and float(got).is_integer()
    if math.isnan(expected):
        return isinstance(got, float | np.floating) and math.isnan(got)
    return abs(got - expected) <= TOLERANCE


def describe(run, qrels, **options) -> str:
    return f"options={options!r}\nrun={run!r}\nqrels={qrels!r}"


def check_against_oracle(
    run, qrels, relevance_level, *, judged_only=False, depth=None, measures=None
):
    """Evaluate with cranfield and compare every per-topic value with pytrec_eval."""
    oracle_run = run if depth is None else truncate_run(run, depth)
    expected = oracle(oracle_run, qrels, relevance_level, judged_only)
    evaluation = cranfield.evaluate(
        qrels,
        run,
        MEASURES if measures is None else measures,
        profile=PROFILE,
        relevance_level=relevance_level,
        judged_only=judged_only,
        depth=depth,
    )
    context = describe(
        run, qrels, relevance_level=relevance_level, judged_only=judged_only, depth=depth
    )
    evaluated = list(evaluation.topics.evaluated)
    assert len(evaluated) == len(set(evaluated)), context
    assert set(evaluated) == set(expected), context
    assert set(evaluation.per_topic) == set(expected), context

    mismatches = []
    for topic, oracle_values in expected.items():
        got = evaluation.per_topic[topic]
        oracle_keys = set(oracle_values) - NO_PER_TOPIC_LINE
        if measures is None:
            assert set(got) == oracle_keys, (topic, set(got) ^ oracle_keys, context)
        else:
            assert oracle_keys <= set(got), (topic, oracle_keys - set(got), context)
        for key, value in oracle_values.items():
            if key in NOT_FROM_ORACLE:
                continue
            if not values_equal(key, got[key], value):
                mismatches.append(f"topic {topic!r} {key}: cranfield {got[key]!r}, oracle {value}")
        want = reference_relstring(run[topic], qrels[topic], judged_only, depth)
        if got["relstring"] not in (want, f"'{want}'"):
            mismatches.append(f"topic {topic!r} relstring: {got['relstring']!r}, want {want!r}")
    assert not mismatches, "\n".join(mismatches) + "\n" + context
    return evaluation, expected


def check_aggregate(evaluation, expected):
    """The 'all' line: sums for num_*, exp(mean log) for gm_*, else the mean over topics."""
    mismatches = []
    keys = set().union(*(values.keys() for values in expected.values())) - {"runid", "relstring"}
    for key in sorted(keys):
        want = pytrec_eval.compute_aggregated_measure(key, [v[key] for v in expected.values()])
        got = evaluation.aggregate[key]
        if not values_equal(key, got, want):
            mismatches.append(f"all {key}: cranfield {got!r}, oracle {want!r}")
    assert not mismatches, "\n".join(mismatches)


# ---------------------------------------------------------------------------------------------
# Property tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("relevance_level", [1, 2])
@ORACLE_SETTINGS
@given(data=run_and_qrels(), all_trec=st.booleans())
def test_per_topic_values_match_pytrec_eval(data, all_trec, relevance_level):
    run, qrels = data
    evaluation, expected = check_against_oracle(
        run, qrels, relevance_level, measures=["all_trec"] if all_trec else None
    )
    check_aggregate(evaluation, expected)


@pytest.mark.parametrize("relevance_level", [1, 2])
@EXTRA_SETTINGS
@given(
    data=run_and_qrels(),
    judged_only=st.booleans(),
    depth=st.one_of(st.none(), st.integers(min_value=1, max_value=70)),
)
def test_judged_only_and_depth_match_pytrec_eval(data, judged_only, depth, relevance_level):
    """-J via pytrec_eval's own flag; -M via truncating the run after the 9.0.8 sort."""
    run, qrels = data
    evaluation, expected = check_against_oracle(
        run, qrels, relevance_level, judged_only=judged_only, depth=depth
    )
    check_aggregate(evaluation, expected)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(data=run_and_qrels(), cutoff=st.sampled_from([5, 10, 15, 20, 30]))
def test_reference_ranking_agrees_with_pytrec_eval(data, cutoff):
    """Self-check of the oracle side: cutting each topic to its top `cutoff` docs by
    ranking_9_0_8() leaves pytrec_eval's @cutoff values unchanged, so the reference order
    used for relstring and depth is trec_eval's order."""
    run, qrels = data
    full = oracle(run, qrels, 1)
    cut = oracle(truncate_run(run, cutoff), qrels, 1)
    assert set(full) == set(cut)
    keys = [f"{m}_{cutoff}" for m in ("P", "recall", "relative_P", "map_cut", "ndcg_cut")]
    keys += [f"success_{cutoff}"] if cutoff in (5, 10) else []
    for topic in full:
        for key in keys:
            assert full[topic][key] == cut[topic][key], (topic, key, describe(run, qrels))


# ---------------------------------------------------------------------------------------------
# Deterministic cases
# ---------------------------------------------------------------------------------------------


def test_float32_near_tie_breaks_by_docno_descending():
    # edge_cases topic 10: distinct doubles, one float32, so docno descending decides: c, b, a.
    # (10.0 would rank by double: c, a, b, with relstring '010' and recip_rank 0.5.)
    run = {"10": {"a": 0.100000002, "b": 0.100000001, "c": 0.100000003}}
    qrels = {"10": {"a": 1, "b": 0, "c": 0, "e": 1}}
    evaluation, _ = check_against_oracle(run, qrels, 1)
    values = evaluation.per_topic["10"]
    assert values["relstring"] in ("001", "'001'")
    assert values["recip_rank"] == pytest.approx(1 / 3, abs=TOLERANCE)
    assert values["map"] == pytest.approx(1 / 6, abs=TOLERANCE)
    assert values["num_ret"] == 3 and values["num_rel"] == 2 and values["num_rel_ret"] == 1


def test_all_scores_equal_rank_by_docno_descending():
    # One score for every doc: the order is docno descending byte-wise, d9 d8 ... d2 d10 d1.
    docs = [f"d{i}" for i in range(1, 11)]
    run = {"7": dict.fromkeys(docs, 4.25)}
    qrels = {"7": {"d10": 2, "d1": 1, "d9": 0, "d5": -1, "d11": 3}}
    for relevance_level in (1, 2):
        evaluation, _ = check_against_oracle(run, qrels, relevance_level)
        check_aggregate(evaluation, oracle(run, qrels, relevance_level))
    values = evaluation.per_topic["7"]  # relevance_level 2: relevant = d10 (rank 9), d11
    assert values["relstring"] in ("0---.---21", "'0---.---21'")
    assert values["recip_rank"] == pytest.approx(1 / 9, abs=TOLERANCE)
    assert values["num_rel"] == 2 and values["num_rel_ret"] == 1


def test_topics_on_one_side_only_are_not_evaluated():
    run = {"1": {"x": 1.0, "y": 0.5}, "run_only": {"x": 1.0}}
    qrels = {"1": {"y": 1}, "qrels_only": {"x": 1}, "01": {"x": 0}}
    evaluation, expected = check_against_oracle(run, qrels, 1)
    assert set(evaluation.topics.evaluated) == {"1"} == set(expected)
    check_aggregate(evaluation, expected)


def test_only_unjudged_and_nonrelevant_judgments():
    # Topic "a": every retrieved judged doc is pooled-unjudged, the one grade 0 is never
    # retrieved (a qrels topic with only negative grades is undefined in trec_eval 9.x, see
    # run_and_qrels); topic "b": only grade 0.
    run = {"a": {"d1": 2.0, "d2": 2.0, "d3": 1.0}, "b": {"d1": 1.0, "d2": 1.0}}
    qrels = {"a": {"d1": -1, "d3": -2, "d4": 0}, "b": {"d2": 0, "d9": 0}}
    evaluation, expected = check_against_oracle(run, qrels, 1)
    assert evaluation.per_topic["a"]["relstring"] in ("-..", "'-..'")
    assert evaluation.per_topic["b"]["num_rel"] == 0
    check_aggregate(evaluation, expected)
