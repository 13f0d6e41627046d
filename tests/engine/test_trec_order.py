"""The shared helper tests/trec_order.py, which the oracle tests (ir_measures, ranx) use to
hand their oracle Cranfield's ranking."""

from __future__ import annotations

from trec_order import trec_order

import cranfield


def test_trec_order_is_cranfields_ranking_on_docnos_that_prefix_each_other():
    """The helper that hands the oracle Cranfield's ranking is trec_eval's order (strcmp
    descending on ties: "d11" before "d1"), checked against Cranfield's own ranks."""
    docs = {"d1": 3.0, "d11": 3.0, "d10": 3.0, "d2": 2.0, "d": 3.0, "e": 1.0}
    assert trec_order(docs) == ["d11", "d10", "d1", "d", "d2", "e"]
    qrels = {f"q{i}": {d: 1} for i, d in enumerate(docs)}
    run = {f"q{i}": docs for i in range(len(docs))}
    ev = cranfield.evaluate(qrels, run, ["recip_rank"])
    rank = {d: round(1 / ev.per_topic[f"q{i}"]["recip_rank"]) for i, d in enumerate(docs)}
    assert sorted(docs, key=rank.__getitem__) == trec_order(docs)
