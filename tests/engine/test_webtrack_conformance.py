"""ndeval 4.5 and gdeval 1.3 on the TREC 2012 Web track runs: every CSV, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from cranfield.measures.webtrack import gdeval, ndeval

WEB = Path(__file__).resolve().parents[1] / "data" / "web2012"
RUNS = ("ql", "rm")


def _run(name: str) -> bytes:
    return (WEB / "runs" / name / "results-cata-filtered.txt").read_bytes()


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("setting, kwargs", [
    ("traditional", {"traditional": True}),
    ("rankorder", {}),
    ("traditional.alpha0.25.beta0.8", {"traditional": True, "alpha": 0.25, "beta": 0.8}),
])
def test_ndeval_csv(run, setting, kwargs):
    expected = (WEB / "expected" / f"ndeval-4.5.c.{setting}.{run}.csv").read_text()
    got = ndeval((WEB / "qrels-for-ndeval.txt").read_bytes(), _run(run), complete=True,
                 **kwargs).csv()
    assert got == expected


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("k", [10, 20])
def test_gdeval_csv(run, k):
    expected = (WEB / "expected" / f"gdeval-1.3.c.k{k}.{run}.csv").read_text()
    got = gdeval((WEB / "qrels.adhoc.txt").read_bytes(), _run(run), k=k, complete=True).csv()
    assert got == expected


def test_cli_prints_the_tools_csv(capsys):
    from cranfield.cli import main

    qrels = str(WEB / "qrels-for-ndeval.txt")
    rm = str(WEB / "runs/rm/results-cata-filtered.txt")
    assert main(["ndeval", "-c", "-traditional", qrels, rm]) == 0
    expected = (WEB / "expected/ndeval-4.5.c.traditional.rm.csv").read_text()
    assert capsys.readouterr().out == expected
    assert main(["gdeval", "-c", "-k", "10", str(WEB / "qrels.adhoc.txt"),
                 str(WEB / "runs/ql/results-cata-filtered.txt")]) == 0
    assert capsys.readouterr().out == (WEB / "expected/gdeval-1.3.c.k10.ql.csv").read_text()
    assert main(["ndeval", qrels, str(WEB / "missing.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_ndeval_edge_cases_by_hand():
    """One topic, two subtopics, alpha = 0.5: hand-worked values; an S = 0 topic gives NaN
    nNRBP (as ndeval's 0/0) and zeros elsewhere; a run topic without qrels gives zeros."""
    qrels = "1 1 a 1\n1 2 a 1\n1 2 b 1\n1 1 c 0\n2 1 x 0\n"
    run = "1 Q0 b 1 3 r\n1 Q0 a 2 2 r\n1 Q0 c 3 1 r\n2 Q0 x 1 1 r\n3 Q0 z 1 1 r\n"
    import math

    res = ndeval(qrels, run, complete=True)
    row = res.per_topic["1"]
    # g(1) = 1 (b: subtopic 2 first seen); g(2) = 1 (subtopic 1) + 0.5 (subtopic 2 seen once)
    dcg_run = 1 + 1.5 / math.log2(3)
    # greedy ideal: a (gain 2) then b (gain 0.5) then c (0)
    dcg_ideal = 2 + 0.5 / math.log2(3)
    assert row["alpha-nDCG@5"] == pytest.approx(dcg_run / dcg_ideal)
    assert row["P-IA@5"] == pytest.approx(3 / (5 * 2))
    assert row["strec@5"] == 1.0
    # MAP-IA: subtopic 1 (a at rank 2): 1/2; subtopic 2 (b at 1, a at 2): (1 + 1)/2
    assert row["MAP-IA"] == pytest.approx((0.5 + 1.0) / 2)
    assert math.isnan(res.per_topic["2"]["nNRBP"]) and res.per_topic["2"]["MAP-IA"] == 0.0
    assert res.per_topic["3"] == dict.fromkeys(res.columns, 0.0)
    assert math.isnan(res.amean["nNRBP"])  # propagates, as in ndeval
    assert res.amean["MAP-IA"] == pytest.approx(0.75 / 2)  # -c: two qrels topics
    assert "-nan" in res.csv()


def test_gdeval_edge_cases_by_hand():
    qrels = "1 0 a 4\n1 0 b 1\n1 0 c -2\n2 0 x 0\n"
    run = "1 Q0 c 1 3 r\n1 Q0 a 2 2 r\n1 Q0 b 3 2 r\n2 Q0 x 1 1 r\n"
    res = gdeval(qrels, run, k=20, complete=True)
    import math

    assert list(res.per_topic) == ["1"]  # topic 2 has no positive judgment: not "seen"
    # order c, then the score-2 tie broken by docno descending: b (1) before a (4)
    dcg = 0 + 1 / math.log2(3) + 15 / math.log2(4)
    assert res.per_topic["1"]["ndcg@20"] == pytest.approx(dcg / (15 + 1 / math.log2(3)))
    r1, r2 = 1 / 16, 15 / 16  # R = (2^g - 1) / 16 for b (g=1) at rank 2, a (g=4) at 3
    assert res.per_topic["1"]["err@20"] == pytest.approx(r1 / 2 + (1 - r1) * r2 / 3)
    from cranfield import InputError
    with pytest.raises(InputError, match="exceeds 4"):
        gdeval("1 0 a 5\n", run)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("k", [10, 20])
def test_registry_measures_equal_gdeval_on_its_topics(run, k):
    """gdeval's nDCG@k is nDCG(gain=exp)@k and its ERR@k is ERR(max_grade=4)@k, on the topics
    gdeval reports (those with a positive judgment): the engine's measures agree with every
    row of the tool's CSV to its printed precision."""
    import cranfield

    rows = (WEB / "expected" / f"gdeval-1.3.c.k{k}.{run}.csv").read_text().splitlines()[1:-1]
    ev = cranfield.evaluate(WEB / "qrels.adhoc.txt",
                            WEB / "runs" / run / "results-cata-filtered.txt",
                            [f"nDCG(gain=exp)@{k}", f"ERR(max_grade=4)@{k}"])
    assert len(rows) == 50
    for line in rows:
        _, topic, ndcg, err = line.split(",")
        got = ev.per_topic[topic]
        assert f"{got[f'nDCG(gain=exp)@{k}']:.5f}" == ndcg, topic
        assert f"{got[f'ERR(max_grade=4)@{k}']:.5f}" == err, topic


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("alpha, beta, setting", [
    (0.5, 0.5, "traditional"), (0.25, 0.8, "traditional.alpha0.25.beta0.8")])
def test_registry_diversity_measures_equal_ndeval(run, alpha, beta, setting):
    """The registry's diversity measures, evaluated like any measure (trec_eval's ranking =
    ndeval -traditional), equal every per-topic value and the mean of ndeval -c."""
    import math

    import cranfield

    lines = (WEB / "expected" / f"ndeval-4.5.c.{setting}.{run}.csv").read_text().splitlines()
    header = lines[0].split(",")
    a = f"(alpha={alpha:g})"
    ab = f"(alpha={alpha:g},beta={beta:g})"
    names = {f"alpha_nDCG{a}@{k}": f"alpha-nDCG@{k}" for k in (5, 10, 20)}
    names.update({f"alpha_DCG{a}@20": "alpha-DCG@20", f"ERR_IA{a}@20": "ERR-IA@20",
                  f"nERR_IA{a}@10": "nERR-IA@10", "P_IA@5": "P-IA@5", "strec@20": "strec@20",
                  f"NRBP{ab}": "NRBP", f"nNRBP{ab}": "nNRBP", "MAP_IA": "MAP-IA"})
    ev = cranfield.evaluate(WEB / "qrels-for-ndeval.txt",
                            WEB / "runs" / run / "results-cata-filtered.txt", list(names),
                            complete_topics=True)
    for line in lines[1:]:
        row = dict(zip(header, line.split(","), strict=True))
        got = ev.aggregate if row["topic"] == "amean" else ev.per_topic[row["topic"]]
        for key, column in names.items():
            if key in ("P_IA@5", "strec@20", "MAP_IA") and alpha != 0.5:
                continue  # alpha-free: checked once
            value = got[key]
            assert not math.isnan(value) and f"{value:.6f}" == row[column], (row["topic"], key)


def test_diversity_measures_need_subtopic_qrels_and_their_own_evaluation():
    import cranfield

    run = {"1": {"a": 2.0, "b": 1.0}}
    with pytest.raises(cranfield.InputError, match="subtopic qrels"):
        cranfield.evaluate({"1": {"a": 1}}, run, ["alpha_nDCG@10"])
    with pytest.raises(cranfield.MeasureError, match="together with diversity"):
        cranfield.evaluate("1 1 a 1\n", run, ["alpha_nDCG@10", "map"])
    ev = cranfield.evaluate("1 1 a 1\n1 2 b 1\n", run, ["alpha_nDCG@10", "runid", "num_q"])
    assert ev.aggregate["num_q"] == 1 and ev.per_topic["1"]["alpha_nDCG@10"] == 1.0
