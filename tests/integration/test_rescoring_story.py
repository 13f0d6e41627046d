"""Judgments that change (issue #31), the story on real parts, on PostgreSQL and on SQLite:
gunicorn, a private redis-server, an RQ worker (``cranfield worker``) and headless Chromium.

Five nights of one system are recorded with their runs kept, under the team's qrels v1. A v2
adds 20% more judgments. All five nights are re-scored under v2 — queued while no worker runs,
then Redis restarts empty: the re-score's progress, kept in the database, still answers, and
asking for it queues again the jobs Redis lost; a worker then re-scores all five, each
night's kept run cut into two shards as a large queued evaluation's run is. Each new result
keeps its night's time and equals average precision computed here by its definition on the
same run and v2; the trend JSON has a series per version and the boundary, and the
trend page, opened in Chromium, draws both lines (their colours on the screenshot) and the
labelled boundary right of the last night.
"""

from __future__ import annotations

import os
import random
import sys
import urllib.request

import numpy as np
import pytest
from ap_by_definition import mean_ap
from servers import (
    JOB_TIMEOUT,
    ROOT,
    RedisServer,
    call,
    postgres_database,
    require_redis_server,
    running_gunicorn,
    running_worker,
    wait_until,
)

sys.path.insert(0, str(ROOT / "tests" / "browser"))
from browser_tools import CHROMIUM, Chromium  # noqa: E402

from cranfield.reports.html_trend import SERIES_COLOURS  # noqa: E402

TOPICS = [f"t{i:02d}" for i in range(1, 31)]
DOCS = [f"d{i:02d}" for i in range(60)]
NIGHTS = 5


def _judgments() -> tuple[dict, dict]:
    """v1: 10 judged documents a topic (4 relevant); v2: v1 and 2 more a topic (20% more
    judgments), one of them relevant."""
    rng = random.Random(31)
    v1, v2 = {}, {}
    for t in TOPICS:
        judged = rng.sample(DOCS, 12)
        v1[t] = {d: int(i < 4) for i, d in enumerate(judged[:10])}
        v2[t] = dict(v1[t], **{judged[10]: 1, judged[11]: 0})
    assert sum(map(len, v2.values())) == round(1.2 * sum(map(len, v1.values())))
    return v1, v2


def _run(night: int) -> dict:
    rng = random.Random(night)
    return {t: {d: round(rng.random(), 6) for d in rng.sample(DOCS, 25)} for t in TOPICS}


@pytest.fixture(params=["postgresql", "sqlite"])
def database(request, tmp_path, require):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.db'}"
        return
    with postgres_database("cranfield_rescoring_") as url:
        require(url is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
        yield url


@pytest.fixture
def redis(require):
    require_redis_server()
    server = RedisServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def chromium(tmp_path, require):
    require(os.access(CHROMIUM, os.X_OK),
            f"{CHROMIUM} (make system-deps; or apt-get install -y chromium)")
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    return Chromium(CHROMIUM, profile)


def _progress(api: str, rescore_id: str) -> dict:
    status, _, doc = call(api, "GET", f"/v1/rescores/{rescore_id}")
    assert status == 200, doc
    return doc


def _colour_share(image, hex_colour: str) -> int:
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], np.uint8)
    return int(np.all(image.pixels == rgb, axis=-1).sum())


def test_five_nights_rescored_under_new_judgments(database, redis, chromium, tmp_path):
    v1_qrels, v2_qrels = _judgments()
    # a kept run's TREC text (about 22 kB here) is re-scored in two shards, as a queued
    # evaluation of that size is
    env = {"REDIS_URL": redis.url, "CRANFIELD_DATABASE_URL": database,
           "CRANFIELD_SHARDS": "2", "CRANFIELD_SHARD_MIN_BYTES": "1000"}
    with running_gunicorn(env) as api:
        status, _, v1 = call(api, "PUT", "/v1/qrels/team", {"qrels": v1_qrels})
        assert status in (200, 201), v1
        v1_ref = f"team@{v1['version']}"
        nights = []
        for n in range(NIGHTS):
            status, _, doc = call(api, "POST", "/v1/evaluations", {
                "run": _run(n), "qrels_id": "team", "measures": ["map", "P.10"],
                "record": {"system": "search", "label": f"night-{n + 1}",
                           "commit": f"c{n + 1}", "keep_run": True}})
            assert status == 200, doc
            assert doc["provenance"]["qrels_version"] == v1_ref
            assert doc["aggregate"]["map"] == pytest.approx(mean_ap(_run(n), v1_qrels),
                                                            abs=1e-12)
            nights.append(doc["recorded"]["id"])
        status, _, v2 = call(api, "PUT", "/v1/qrels/team", {"qrels": v2_qrels})
        assert status in (200, 201) and v2["version"] != v1["version"], v2
        v2_ref = f"team@{v2['version']}"

        # queued while no worker runs; then Redis restarts empty
        status, headers, queued = call(api, "POST", "/v1/systems/search/rescore",
                                       {"qrels_id": v2_ref})
        assert status == 202, queued
        assert (queued["total"], queued["queued"], queued["skipped"]) == (NIGHTS, NIGHTS, 0)
        location = headers["Location"]
        assert location.endswith(f"/v1/rescores/{queued['id']}")
        redis.stop()
        redis.start()  # the same port, nothing kept
        after = _progress(api, queued["id"])  # from the database; the lost jobs queued again
        assert (after["total"], after["queued"], after["done"]) == (NIGHTS, NIGHTS, 0)
        import redis as redis_client

        assert redis_client.Redis.from_url(redis.url).llen("rq:queue:cranfield") == NIGHTS

        with running_worker(redis.url, database):
            done = wait_until(lambda: (lambda d: d if d["state"] == "finished" else None)(
                _progress(api, queued["id"])), JOB_TIMEOUT, "the re-score to finish")
        assert (done["done"], done["failed"], done["skipped"]) == (NIGHTS, 0, 0), done
        from rq.job import Job

        connection = redis_client.Redis.from_url(redis.url)
        for position in range(NIGHTS):  # each night's job cut its run in two shards
            new_id = done["items"][position]["new_result_id"]
            job = Job.fetch(f"rescore-{queued['id']}-{position}", connection=connection)
            assert job.return_value() == {"shards": 2}
            # the combine step exists only for a run cut into shards, and recorded the result
            combined = Job.fetch(f"rescore-{queued['id']}-{position}-combine",
                                 connection=connection)
            assert combined.return_value() == {"result_id": new_id}
            # each ran once since Redis restarted: the polls meanwhile queued nothing again
            # (RQ keeps a result per run of a job id; a poll while the combine step was
            # ready_to_enqueue once queued the job again: tests/integration/
            # test_rescore_recovery_race.py)
            assert (len(job.results()), len(combined.results())) == (1, 1)
        rescored = {i["result_id"]: i["new_result_id"] for i in done["items"]}
        assert list(rescored) == nights
        for n, original_id in enumerate(nights):
            _, _, original = call(api, "GET", f"/v1/results/{original_id}")
            _, _, new = call(api, "GET", f"/v1/results/{rescored[original_id]}")
            assert new["created_at"] == original["created_at"]
            assert (new["label"], new["commit"]) == (f"night-{n + 1}", f"c{n + 1}")
            assert new["qrels_version"] == v2_ref
            assert new["document"]["provenance"]["rescores"] == original_id
            assert new["aggregate"]["map"] == pytest.approx(mean_ap(_run(n), v2_qrels),
                                                            abs=1e-12)
            assert abs(new["aggregate"]["map"] - original["aggregate"]["map"]) > 1e-6
        # asked again: nothing new
        status, _, again = call(api, "POST", "/v1/systems/search/rescore",
                                {"qrels_id": v2_ref})
        assert status == 202 and (again["state"], again["done"]) == ("finished", NIGHTS)
        assert again["new_result_ids"] == done["new_result_ids"]
        _, _, listed = call(api, "GET", "/v1/systems/search/results")
        assert listed["total"] == 2 * NIGHTS

        # the trend: a series per version, the boundary after the last night
        status, _, trend = call(api, "GET", "/v1/systems/search/trend?measure=map")
        assert status == 200, trend
        assert [s["qrels_version"] for s in trend["series"]] == [v1_ref, v2_ref]
        old, new_series = trend["series"]
        assert [p["id"] for p in old["points"]] == nights
        assert [p["rescores"] for p in new_series["points"]] == nights
        assert [p["mean"] for p in new_series["points"]] == pytest.approx(
            [mean_ap(_run(n), v2_qrels) for n in range(NIGHTS)], abs=1e-12)
        [boundary] = trend["boundaries"]
        assert (boundary["after"], boundary["before"]) == (nights[-1], None)
        assert (boundary["from"]["qrels_version"], boundary["to"]["qrels_version"]) == \
            (v1_ref, v2_ref)

        # the page, in Chromium
        request = urllib.request.Request(api + "/v1/systems/search/trend?measure=map",
                                         headers={"Accept": "text/html"})
        with urllib.request.urlopen(request, timeout=60) as resp:
            page = resp.read().decode()
    path = tmp_path / "trend.html"
    path.write_text(page)
    dom = chromium.dump_dom(path)
    assert dom.count('class="line series"') == 2
    assert f'data-qrels-version="{v1_ref}"' in dom and f'data-qrels-version="{v2_ref}"' in dom
    assert dom.count('class="boundary"') == 1
    assert f"qrels {v1_ref} → {v2_ref}" in dom
    # the boundary is right of the last night's points, within the chart
    import re

    last_x = max(float(x) for x in re.findall(r'<circle cx="([0-9.]+)"', dom))
    (boundary_x,) = {float(x) for x in re.findall(r'class="boundary" x1="([0-9.]+)"', dom)}
    assert last_x < boundary_x <= 760
    image = chromium.screenshot(path, (1000, 900), tmp_path / "trend.png")
    # both lines drawn in their colours (dozens of pixels each, not a legend swatch alone)
    assert _colour_share(image, SERIES_COLOURS[0]) > 400
    assert _colour_share(image, SERIES_COLOURS[1]) > 400
