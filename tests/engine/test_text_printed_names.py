"""trec_eval's text prints trec_eval's names (issue #26): a measure trec_eval has, asked for
in ir_measures' or ranx's spelling, prints the line ``trec_eval -m <its trec_eval name>``
prints, byte for byte, in trec_eval's order; a measure named two ways prints once; measures
trec_eval lacks keep their key and come last. The JSON keeps the keys as asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cranfield
from cranfield.reports.trec_format import document_evaluation, format_json, format_trec

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"

# (spelling, what trec_eval is asked for to print the same text)
SAME_AS_TREC = [
    ("nDCG@10", "ndcg_cut.10"), ("NDCG@10", "ndcg_cut.10"), ("ndcg@10", "ndcg_cut.10"),
    ("nDCG", "ndcg"), ("AP", "map"), ("MAP", "map"), ("AP@100", "map_cut.100"),
    ("map@100", "map_cut.100"), ("GMAP", "gm_map"), ("P@5", "P.5"), ("Precision@5", "P.5"),
    ("precision@5", "P.5"), ("R@1000", "recall.1000"), ("recall@1000", "recall.1000"),
    ("RR", "recip_rank"), ("MRR", "recip_rank"), ("mrr", "recip_rank"), ("RPrec", "Rprec"),
    ("r-precision", "Rprec"), ("Bpref", "bpref"), ("IPrec@0.1", "iprec_at_recall.0.1"),
    ("Success@5", "success.5"), ("NumQ", "num_q"), ("NumRet", "num_ret"),
    ("NumRel", "num_rel"), ("NumRelRet", "num_rel_ret"), ("SetP", "set_P"),
    ("SetRelP", "set_relative_P"), ("SetP(relative=true)", "set_relative_P"),
    ("SetR", "set_recall"), ("SetAP", "set_map"), ("SetF", "set_F"),
    ("SetF(beta=0.5)", "set_F.0.5"), ("nDCG(gains={0:0,1:1,2:3})", "ndcg.0=0,1=1,2=3"),
]
# measures trec_eval lacks (or cannot say: a per-measure relevance level): their key
KEPT = ["ERR@20", "RR@10", "P(rel=2)@5", "NumRet(rel=1)", "DCG", "Judged@10",
        "nDCG(dcg=exp-log2)@10"]


@pytest.fixture(scope="module")
def inputs():
    return {"qrels": cranfield.read_qrels((DATA / "qrels.rel_level").read_bytes(), name="q"),
            "run": cranfield.read_run((DATA / "results.test").read_bytes(), name="r")}


def text(inputs, measures, per_topic=True, **options) -> str:
    return format_trec(cranfield.evaluate(measures=measures, **inputs, **options),
                       per_topic=per_topic)


@pytest.mark.parametrize(("spelling", "trec"), SAME_AS_TREC)
def test_a_trec_eval_measure_prints_as_trec_eval_prints_it(inputs, spelling, trec):
    expected = text(inputs, [trec])
    assert "\tall\t" in expected  # the summary (and, for most, a line per topic)
    assert text(inputs, [spelling]) == expected


@pytest.mark.parametrize("spelling", KEPT)
def test_a_measure_trec_eval_lacks_keeps_its_key(inputs, spelling):
    lines = text(inputs, [spelling]).splitlines()
    assert [line.split("\t")[0].rstrip() for line in lines] == [spelling] * len(lines)


def test_named_two_ways_prints_once_in_trec_eval_order_and_the_rest_after(inputs):
    asked = ["ERR@20", "nDCG@10", "P@5", "RR@10", "map", "ndcg_cut.10", "Precision@5",
             "recip_rank", "AP"]
    got = text(inputs, asked, per_topic=False)
    assert got == (text(inputs, ["map", "recip_rank", "P.5", "ndcg_cut.10"], per_topic=False)
                   + text(inputs, ["ERR@20", "RR@10"], per_topic=False))
    assert got == ("map                   \tall\t0.1774\n"
                   "recip_rank            \tall\t0.4064\n"
                   "P_5                   \tall\t0.2667\n"
                   "ndcg_cut_10           \tall\t0.2656\n"
                   "ERR@20                \tall\t0.2205\n"
                   "RR@10                 \tall\t0.3889\n")
    # per topic: each topic's lines in the same order, then the summary
    lines = text(inputs, asked).splitlines()
    assert [line.split("\t")[:2] for line in lines[:6]] == [
        [name.ljust(22), "301"] for name in ("map", "recip_rank", "P_5", "ndcg_cut_10",
                                             "ERR@20", "RR@10")]
    assert len(lines) == 4 * 6


def test_ir_measures_names_print_trec_eval_s_own_bytes(inputs):
    """trec_eval 9.0.8's output (-q -l2, all_trec) cut to four measures is what the text of
    their ir_measures names is."""
    names = {"map", "recip_rank", "P_5", "ndcg_cut_10"}
    trec_eval = "".join(line for line in (DATA / "v9.0.8" / "out.test.aql").read_text()
                        .splitlines(keepends=True) if line.split()[0] in names)
    assert trec_eval.count("\n") == 16
    assert text(inputs, ["nDCG@10", "RR", "P@5", "AP"], relevance_level=2) == trec_eval


def test_options_change_the_numbers_not_the_names(inputs):
    for options in ({"relevance_level": 2}, {"depth": 50}, {"judged_only": True},
                    {"profile": "trec_eval-10"}):
        assert text(inputs, ["nDCG@10", "P@5", "AP"], **options) == \
            text(inputs, ["ndcg_cut.10", "P.5", "map"], **options), options


def test_the_json_keeps_the_keys_as_asked(inputs):
    ev = cranfield.evaluate(measures=["nDCG@10", "map"], **inputs)
    doc = json.loads(format_json(ev, "0" * 64, "1" * 64))
    assert [m["key"] for m in doc["measures"]] == ["map", "nDCG@10"]
    assert set(doc["aggregate"]) == {"map", "nDCG@10"}


@pytest.mark.parametrize("per_topic", [True, False])
def test_a_document_read_back_prints_the_same_text(inputs, per_topic):
    """What a finished job renders (GET /v1/jobs/{id} as text/plain) from its document."""
    ev = cranfield.evaluate(measures=["ERR@20", "nDCG@10", "P@5", "ndcg_cut.10", "map",
                                      "relstring", "runid"], **inputs)
    doc = json.loads(format_json(ev, "0" * 64, "1" * 64, per_topic=per_topic))
    assert format_trec(document_evaluation(doc), per_topic=per_topic) == \
        format_trec(ev, per_topic=per_topic)
