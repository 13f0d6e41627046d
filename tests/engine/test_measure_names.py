"""Measure names: trec_eval's -m grammar and ir_measures-style names resolve to the same
registry entries, and every result carries a canonical, fully explicit name."""

from __future__ import annotations

import pytest

import cranfield
from cranfield import MeasureError, parse_measure

DATA = "tests/data/trec_eval"


@pytest.mark.parametrize("name, keys", [
    ("map", ["map"]),
    ("P.5,10", ["P_5", "P_10"]),
    ("P_5", ["P_5"]),
    ("ndcg_cut.10", ["ndcg_cut_10"]),
    ("ndcg_cut_10", ["ndcg_cut_10"]),
    ("set_F.0.25", ["set_F_0.25"]),
    ("ndcg.1=3,2=9", ["ndcg_1=3,2=9"]),
    ("iprec_at_recall..10,.5", ["iprec_at_recall_0.10", "iprec_at_recall_0.50"]),
    ("nDCG@10", ["nDCG@10"]),
    ("P(rel=2)@5", ["P(rel=2)@5"]),
    ("AP", ["AP"]),
    ("RR@10", ["RR@10"]),
    ("R@1000", ["R@1000"]),
    ("Judged@10", ["Judged@10"]),
])
def test_names_resolve_to_keys(name, keys):
    assert [i.key for i in parse_measure(name)] == keys


def test_trec_and_ir_names_give_identical_numbers():
    ev = cranfield.evaluate(f"{DATA}/qrels.rel_level", f"{DATA}/results.test",
                            ["ndcg_cut.10", "nDCG@10", "map", "AP", "map_cut.100", "AP@100",
                             "recall.1000", "R@1000", "P(rel=2)@5", "recip_rank", "RR"])
    for a, b in [("ndcg_cut_10", "nDCG@10"), ("map", "AP"), ("map_cut_100", "AP@100"),
                 ("recall_1000", "R@1000"), ("recip_rank", "RR")]:
        assert ev.aggregate[a] == ev.aggregate[b]
    strict = cranfield.evaluate(f"{DATA}/qrels.rel_level", f"{DATA}/results.test", ["P.5"],
                                relevance_level=2)
    assert ev.aggregate["P(rel=2)@5"] == strict.aggregate["P_5"]
    assert ev.measures["P(rel=2)@5"]["canonical"] == "P(k=5,rel=2,profile=trec_eval-9.0.8)"


def test_rr_at_k_cuts_off_and_judged_counts_judged_documents():
    run = {"q": {"a": 5.0, "b": 4.0, "c": 3.0}}
    qrels = {"q": {"c": 1, "a": 0}}
    ev = cranfield.evaluate(qrels, run, ["RR@2", "RR@3", "Judged@2", "Judged@10"])
    row = ev.per_topic["q"]
    assert row["RR@2"] == 0.0 and row["RR@3"] == pytest.approx(1 / 3)
    assert row["Judged@2"] == 0.5 and row["Judged@10"] == pytest.approx(2 / 3)


def test_canonical_names_make_every_parameter_explicit():
    ev = cranfield.evaluate(f"{DATA}/qrels.test", f"{DATA}/results.test",
                            ["ndcg.1=3,2=9", "set_F.0.25", "iprec_at_recall..5"],
                            profile="trec_eval-10", judged_only=True, depth=100)
    canon = {k: v["canonical"] for k, v in ev.measures.items()}
    assert canon["ndcg_1=3,2=9"] == ("ndcg(gain=grade,gain1=3,gain2=9,discount=log2,"
                                     "judged_only=true,depth=100,profile=trec_eval-10)")
    assert canon["set_F_0.25"] == ("set_F(beta_squared=0.25,rel=1,judged_only=true,depth=100,"
                                   "profile=trec_eval-10)")
    assert canon["iprec_at_recall_0.50"].startswith("iprec_at_recall(recall=0.5,rel=1,")


@pytest.mark.parametrize("name, suggestion", [
    ("mapp", "map"), ("ndcg_cutt.10", "ndcg_cut.10"), ("recal", "recall"),
    ("nDGC@10", "nDCG@10"),
])
def test_unknown_names_suggest_the_closest(name, suggestion):
    with pytest.raises(MeasureError) as info:
        parse_measure(name)
    assert suggestion.lower() in [s.lower() for s in info.value.suggestions]


@pytest.mark.parametrize("name, reason", [
    ("P.0", "positive"), ("P.x", "cannot read"), ("map.5", "takes no parameters"),
    ("ndcg.-1=2", "grades >= 0"), ("P@0", "positive"), ("nDCG(gain=foo)@10", "one of"),
    ("nDCG(foo=1)@10", "unknown"), ("BPM(max_rel=3)", "needs a cutoff"),
    ("BPM@10", "needs the parameter max_rel"), ("FDR@10", "takes no cutoff"),
    ("P", None), ("R", "needs a cutoff"),
])
def test_malformed_names_are_errors(name, reason):
    if reason is None:  # bare trec_eval P is fine: all default cutoffs
        assert len(parse_measure(name)) == 9
        return
    with pytest.raises(MeasureError, match=reason):
        parse_measure(name)


def test_every_explicit_parameter_string_counts_and_order_is_measures_c():
    """Issue #15: ``-m P.5 -m P.10`` evaluates both (trec_eval keeps only the first); a
    mention without parameters (a nickname's) gives way to explicit ones."""
    from cranfield.measures.names import resolve

    keys = [i.key for i in resolve(["P.5", "map", "P.10", "all_trec", "relstring.20"],
                                   "trec_eval-9.0.8")]
    assert keys.index("map") < keys.index("P_5") < keys.index("P_10")
    assert "P_15" not in keys and "relstring_20" in keys and "relstring" not in keys
