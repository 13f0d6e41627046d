"""trec_eval's ranking of a topic's run, for the tests that hand an oracle (ir_measures,
ranx) Cranfield's ranking: one helper for every directory (tests/ is on sys.path, as for
``columnar_tables``). Its check against Cranfield's own ranks is
tests/engine/test_trec_order.py."""

from __future__ import annotations


def trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's ranking: score descending, ties by docno descending (strcmp's byte order:
    "d11" before "d1", a prefix after its extensions)."""
    return sorted(docs, key=lambda d: (docs[d], d.encode()), reverse=True)
