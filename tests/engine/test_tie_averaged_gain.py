"""DCG/nDCG(ties=average): tied scores averaged over all their orders (McSherry & Najork 2008),
checked against scikit-learn's dcg_score/ndcg_score with ignore_ties=False (a test-time
oracle, never the engine).

sklearn ranks every document it is given; Cranfield's DCG ranks the run and its nDCG's ideal
sorts every judged grade of the topic, retrieved or not. The two agree when every judged
document is retrieved, so the generated runs retrieve all of a topic's judged documents (and
some unjudged ones, which sklearn sees with grade 0)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import cranfield

sklearn_metrics = pytest.importorskip("sklearn.metrics")

KS = (None, 1, 3, 10)


def name(base: str, k: int | None, ties: str = "average") -> str:
    return f"{base}(ties={ties})" + ("" if k is None else f"@{k}")


def keys(ev, names: list[str]) -> list[str]:
    """The result keys of ``names``, in the order given (trec_eval names print first)."""
    assert {i.key for i in ev.instances} == set(names)
    return list(names)


def tied_topics(seed: int, topics: int = 12, ties: bool = True):
    """Seeded (qrels, run, oracle arrays): per topic 2-40 documents, grades 0-3 on most of
    them (the rest unjudged), scores from a few values (exact in float32) so that ties are
    many; without ``ties``, every score distinct."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for t in range(topics):
        n = int(rng.integers(2, 41))
        docs = [f"D{t}-{i:03d}" for i in rng.permutation(n)]
        if ties:
            scores = rng.integers(0, max(2, n // 4), n) * 0.25 + 1.0
        else:
            scores = rng.permutation(n) * 0.5 + 1.0
        grades = rng.integers(0, 4, n)
        if t == 0:
            grades[:] = 0  # a topic without a relevant document: 0/0 gives 0 in both
        judged = rng.random(n) < 0.8
        judged[0] = True
        topic = f"q{t:02d}"
        qrels[topic] = {d: int(g) for d, g, j in zip(docs, grades, judged, strict=True) if j}
        run[topic] = {d: float(s) for d, s in zip(docs, scores, strict=True)}
        y_true = np.where(judged, grades, 0).astype(np.float64)
        arrays[topic] = (y_true, scores)
    return qrels, run, arrays


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("k", KS)
def test_tie_averaged_dcg_and_ndcg_equal_sklearn(seed, k):
    qrels, run, arrays = tied_topics(seed)
    assert any(len(set(s)) < len(s) for _, s in arrays.values())  # the data has ties
    names = [name("DCG", k), name("nDCG", k)]
    ev = cranfield.evaluate(qrels, run, names)
    dcg_key, ndcg_key = keys(ev, names)
    for topic, (y_true, y_score) in arrays.items():
        want_dcg = sklearn_metrics.dcg_score([y_true], [y_score], k=k, ignore_ties=False)
        want_ndcg = sklearn_metrics.ndcg_score([y_true], [y_score], k=k, ignore_ties=False)
        got = ev.per_topic[topic]
        assert got[dcg_key] == pytest.approx(want_dcg, abs=1e-12, rel=0), (topic, k)
        assert got[ndcg_key] == pytest.approx(want_ndcg, abs=1e-12, rel=0), (topic, k)


@pytest.mark.parametrize("k", KS)
def test_ties_change_the_value_and_trec_eval_breaks_them(k):
    """The default (ties=trec_eval) is trec_eval's docno tie-break, not the average: on tied
    data the two differ somewhere, and the default equals ties=trec_eval spelled out."""
    qrels, run, _ = tied_topics(7)
    names = [name("DCG", k), name("DCG", k, "trec_eval"),
             "DCG(gain=linear)" + ("" if k is None else f"@{k}")]
    ev = cranfield.evaluate(qrels, run, names)
    avg, te, default = keys(ev, names)
    rows = ev.per_topic.values()
    assert all(r[te] == r[default] for r in rows)
    assert any(abs(r[avg] - r[te]) > 1e-9 for r in rows)


@pytest.mark.parametrize("k", KS)
def test_without_ties_average_equals_the_default(k):
    qrels, run, arrays = tied_topics(11, ties=False)
    assert all(len(set(s)) == len(s) for _, s in arrays.values())
    at = "" if k is None else f"@{k}"
    trec_ndcg = "ndcg" if k is None else f"ndcg_cut_{k}"
    names = [name("DCG", k), f"DCG(gain=linear){at}", name("nDCG", k),
             f"nDCG(gain=linear){at}", trec_ndcg]
    ev = cranfield.evaluate(qrels, run, names)
    dcg_avg, dcg, ndcg_avg, ndcg, trec = keys(ev, names)
    for topic, (y_true, y_score) in arrays.items():
        row = ev.per_topic[topic]
        assert row[dcg_avg] == pytest.approx(row[dcg], abs=1e-12, rel=0)
        assert row[ndcg_avg] == pytest.approx(row[ndcg], abs=1e-12, rel=0)
        assert row[ndcg_avg] == pytest.approx(row[trec], abs=1e-4, rel=0)  # trec_eval's 4 places
        assert row[dcg_avg] == pytest.approx(
            sklearn_metrics.dcg_score([y_true], [y_score], k=k), abs=1e-12, rel=0)


def test_a_hand_computed_tie_group():
    """Ranks 1..3 tied (grades 2, 0, unjudged), rank 4 grade 1: at k = 2 the group's
    documents each take the mean of the discounts 1, 1/log2(3), 0; rank 4 is past k."""
    qrels = {"t": {"a": 2, "b": 0, "d": 1}}
    run = {"t": {"a": 5.0, "b": 5.0, "c": 5.0, "d": 1.0}}
    mean = (1 + 1 / np.log2(3) + 0) / 3
    names = ["DCG(ties=average)@2", "nDCG(ties=average)@2", "DCG(ties=average)"]
    ev = cranfield.evaluate(qrels, run, names)
    at2, n2, full = (ev.per_topic["t"][key] for key in keys(ev, names))
    assert at2 == pytest.approx(2 * mean, abs=1e-15)
    assert n2 == pytest.approx(2 * mean / (2 + 1 / np.log2(3)), abs=1e-15)
    assert full == pytest.approx(2 * (1 + 1 / np.log2(3) + 0.5) / 3 + 1 / np.log2(5),
                                 abs=1e-15)


def test_judged_only_and_depth_regroup_the_ties():
    """-J drops the unjudged member of the group (it spans ranks 1..2 after); a depth cutting
    the group keeps the members trec_eval ranks first (docno descending: c, b) at ranks 1..2."""
    qrels = {"t": {"a": 2, "b": 0, "d": 1}}
    run = {"t": {"a": 5.0, "b": 5.0, "c": 5.0, "d": 1.0}}
    ev = cranfield.evaluate(qrels, run, ["DCG(ties=average)"], judged_only=True)
    (key,) = (i.key for i in ev.instances)
    assert ev.per_topic["t"][key] == pytest.approx(
        2 * (1 + 1 / np.log2(3)) / 2 + 1 / np.log2(4), abs=1e-15)
    ev = cranfield.evaluate(qrels, run, ["DCG(ties=average)"], depth=2)
    assert ev.per_topic["t"][key] == 0.0  # a is third by docno: cut, b gains 0
    ev = cranfield.evaluate(qrels, run, ["DCG(ties=average)"], depth=3)
    assert ev.per_topic["t"][key] == pytest.approx(2 * (1 + 1 / np.log2(3) + 0.5) / 3,
                                                   abs=1e-15)


def test_ties_are_judged_on_the_profiles_scores():
    """9.0.8 reads scores as float32: 0.1 and 0.1 + 1e-12 tie there (as in trec_eval) but not
    in trec_eval-10, which reads doubles."""
    qrels = {"t": {"a": 0, "b": 3}}
    run = {"t": {"a": 0.1 + 1e-12, "b": 0.1}}
    y_true = [[0.0, 3.0]]
    for profile, scores in (("trec_eval-9.0.8", np.float32([0.1 + 1e-12, 0.1])),
                            ("trec_eval-10", np.float64([0.1 + 1e-12, 0.1]))):
        ev = cranfield.evaluate(qrels, run, ["nDCG(ties=average)"], profile=profile)
        (key,) = (i.key for i in ev.instances)
        want = sklearn_metrics.ndcg_score(y_true, [scores.astype(np.float64)],
                                          ignore_ties=False)
        assert ev.per_topic["t"][key] == pytest.approx(want, abs=1e-12, rel=0), profile
    assert want < 1.0  # (trec_eval-10: b is second, untied)


def test_bad_ties_value_is_refused():
    with pytest.raises(cranfield.MeasureError, match="ties"):
        cranfield.evaluate({"t": {"a": 1}}, {"t": {"a": 1.0}}, ["nDCG(ties=random)@10"])


def test_cranfield_measures_documents_the_parameter():
    code = "import sys; from cranfield.cli import main; sys.exit(main(sys.argv[1:]))"
    out = subprocess.run([sys.executable, "-c", code, "measures", "nDCG(ties=average)@10"],
                         capture_output=True, text=True, check=True).stdout
    for needle in ("ties", "average", "trec_eval", "McSherry & Najork 2008", "0/0",
                   "ignore_ties=False"):
        assert needle in out, needle
