"""A queued Arrow upload on a real Redis with a real RQ worker (issue #19): the API stores
the IPC stream as it came (``run_format`` ``arrow``), the worker reads it with the API's
reader, and the result is the synchronous one."""

from __future__ import annotations

import pytest
from servers import DATA, arrow_tables, running_gunicorn

from cranfield.client import Client


@pytest.fixture(scope="module")
def api(redis_server):
    with running_gunicorn({"REDIS_URL": redis_server.url}) as url:
        yield url


def test_queued_arrow_run_on_a_real_worker_equals_sync(api, worker):
    table, _ = arrow_tables()
    client = Client(api)
    measures = ["map", "P.10", "ndcg_cut.10", "runid"]
    sync = client.evaluate(DATA / "qrels.test", DATA / "results.test", measures=measures)
    queued = client.evaluate(DATA / "qrels.test", table, measures=measures,
                             prefer_async=True)
    assert queued["aggregate"] == sync["aggregate"]
    assert queued["per_topic"] == sync["per_topic"]
    same = client.evaluate(DATA / "qrels.test", table, measures=measures)
    assert queued["provenance"]["run_sha256"] == same["provenance"]["run_sha256"]
