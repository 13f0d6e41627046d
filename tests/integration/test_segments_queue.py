"""Segments and weights (issue #28) queued on a real Redis with a real RQ worker: a run cut
into topic shards (any over 1 kB here), each shard evaluated with ``options.topic_metadata``
and combined, gives the synchronous answer's segments and weighted means, and its text is
the synchronous text (``segment=LABEL`` and ``weighted`` lines); a queued comparison gives
the synchronous per-segment tests."""

from __future__ import annotations

import urllib.request

import orjson
import pytest
from servers import DATA, call, running_gunicorn, text_of, wait_job

META = {"301": {"segments": ["tail", "lang=de"], "weight": 2}, "302": {"segments": ["tail"]},
        "303": {"segments": ["head"], "weight": 0.5}}
MEASURES = ["map", "P.5", "num_ret", "num_rel", "gm_map", "num_q"]


@pytest.fixture(scope="module")
def api(redis_server):
    with running_gunicorn({"REDIS_URL": redis_server.url, "CRANFIELD_SHARDS": "3",
                           "CRANFIELD_SHARD_MIN_BYTES": "1000"}) as url:
        yield url


@pytest.mark.parametrize("complete", [False, True])
def test_sharded_job_gives_the_synchronous_segments(api, worker, complete):
    run = "".join(line for line in (DATA / "results.test").read_text().splitlines(True)
                  if not (complete and line.split()[0] == "303"))  # -c: 303 missing
    body = {"run": run, "qrels": (DATA / "qrels.test").read_text(), "measures": MEASURES,
            "per_topic": True, "options": {"topic_metadata": META,
                                           "complete_topics": complete}}
    status, _, sync = call(api, "POST", "/v1/evaluations", body)
    assert status == 200, sync
    assert sync["segments"]["tail"]["topics"] == 2
    assert sync["weighted"]["num_q"] == 3.5
    status, headers, _ = call(api, "POST", "/v1/evaluations", body,
                              headers={"Prefer": "respond-async"})
    assert status == 202
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    result = done["result"]
    assert result["provenance"]["shards"] > 1  # it was cut, and combined
    assert result["segments"] == sync["segments"]
    assert result["weighted"] == sync["weighted"]
    assert result["aggregate"] == sync["aggregate"]
    req = urllib.request.Request(api + "/v1/evaluations", data=orjson.dumps(body),
                                 headers={"Content-Type": "application/json",
                                          "Accept": "text/plain"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        sync_text = resp.read()
    assert b"\tsegment=tail\t" in sync_text and b"\tweighted\t" in sync_text
    assert text_of(api, headers["Location"]) == sync_text


def test_queued_comparison_gives_the_synchronous_segment_tests(api, worker):
    run = (DATA / "results.test").read_text()
    other = "".join(line for line in run.splitlines(True) if line.split()[3] != "1")
    body = {"runs": [{"name": "a", "run": run}, {"name": "b", "run": other}],
            "qrels": (DATA / "qrels.test").read_text(), "measures": ["map", "P.5"],
            "tests": ["t", "randomization"], "baseline": "a",
            "options": {"topic_metadata": META}}
    status, _, sync = call(api, "POST", "/v1/comparisons", body)
    assert status == 200, sync
    status, headers, _ = call(api, "POST", "/v1/comparisons", body,
                              headers={"Prefer": "respond-async"})
    assert status == 202
    done = wait_job(api, headers["Location"])
    assert done["status"] == "finished", done
    assert done["result"]["segments"] == sync["segments"]
    assert done["result"]["weighted"] == sync["weighted"]
    assert sync["segments"]["tail"]["family"] == {"segment": "tail", "tests": 2,
                                                  "correction": "holm"}
