"""cranfield.client.Client sends a pyarrow Table or a pandas/polars DataFrame as an Arrow IPC
stream part (issue #19), against gunicorn: the numbers of the same run sent as TREC text."""

from __future__ import annotations

import pyarrow as pa
import pytest
from servers import DATA, arrow_tables

from cranfield.client import ApiError, Client

MEASURES = ["map", "P.5", "ndcg_cut.10", "runid"]


def frames():
    run_t, qrels_t = arrow_tables()
    out = {"pyarrow": (run_t, qrels_t)}
    try:
        out["pandas"] = (run_t.to_pandas(), qrels_t.to_pandas())
    except ImportError:
        pass
    try:
        import polars as pl

        out["polars"] = (pl.from_arrow(run_t), pl.from_arrow(qrels_t))
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("kind", ["pyarrow", "pandas", "polars"])
def test_client_sends_frames_as_arrow(live_server, kind, require):
    available = frames()
    require(kind in available, f"{kind} is installed (the test extra)")
    run, qrels = available[kind]
    api = Client(live_server)
    text = api.evaluate(DATA / "qrels.test", DATA / "results.test", measures=MEASURES)
    doc = api.evaluate(qrels, run, measures=MEASURES, options={"relevance_level": 1})
    assert doc["aggregate"] == text["aggregate"]
    assert doc["per_topic"] == text["per_topic"]
    # a table run beside qrels as a path, and queued
    queued = api.evaluate(DATA / "qrels.test", run, measures=MEASURES, prefer_async=True)
    assert queued["aggregate"] == text["aggregate"]


def test_client_table_refusal_is_an_api_error(live_server):
    api = Client(live_server)
    bad = pa.table({"topic": ["1"], "docid": ["a b"], "score": [1.0]})
    with pytest.raises(ApiError) as err:
        api.evaluate(DATA / "qrels.test", bad, measures=["map"])
    assert err.value.status == 422 and "run.docid" in err.value.problem["errors"]
