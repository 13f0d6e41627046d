"""GET /v1/stability never answers 500 for what the results can be while it reads them
(issue #31): a chosen result deleted before its values are read is chosen again (a 503
asking to retry when that keeps happening), a column that cannot be decoded leaves its
system out with a warning, and the route's code is loaded with the app, so a server runs
the code it started with (a lazily imported backend/stability.py read at the first request,
changed since the start, answered a 500). SQLite and PostgreSQL; every response checked
against openapi.yaml (the contract client)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from scipy import stats as scipy_stats
from sqlalchemy import select, update

RESULTS_ON_POSTGRES = True  # every test here runs on SQLite and on PostgreSQL (conftest)
V1, V2 = "q@" + "1" * 16, "q@" + "2" * 16
TOPICS = [f"t{k}" for k in range(10)]


def document(values: dict, version: str) -> dict:
    return {"measures": [{"key": "map"}],
            "aggregate": {"map": float(np.mean(list(values.values())))},
            "per_topic": {t: {"map": v} for t, v in values.items()},
            "provenance": {"qrels_version": version, "qrels_sha256": version[-1] * 64}}


@pytest.fixture
def store(app):
    """The app's results, recorded one day apart."""
    times = iter(datetime(2026, 11, 1, 6, tzinfo=UTC) + timedelta(days=i) for i in range(100))
    app.extensions["results"].clock = lambda: next(times)
    return app.extensions["results"]


def seed(store, n=3) -> tuple[dict, dict]:
    """n systems, one result under each version: ({(system, version): values},
    {(system, version): result id})."""
    rng = np.random.default_rng(7)
    values, ids = {}, {}
    for i in range(n):
        for version in (V1, V2):
            v = {t: float(x) for t, x in zip(TOPICS, rng.random(10) * 0.3 + 0.2 * i,
                                              strict=True)}
            ids[f"s{i}", version] = store.record(None, {"system": f"s{i}", "label": version[-1]},
                                                 document(v, version))["id"]
            values[f"s{i}", version] = v
    return values, ids


def url(**more) -> str:
    return (f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=50"
            + "".join(f"&{k}={v}" for k, v in more.items()))


def means(values: dict, systems: list[str], version: str) -> list[float]:
    return [float(np.mean([values[s, version][t] for t in TOPICS])) for s in systems]


def test_a_result_deleted_after_it_was_chosen_is_chosen_again(client, store, monkeypatch):
    """s0's latest result under v2 is deleted between the choice and the reading of the
    values (a concurrent DELETE): the document chooses again and pairs s0's earlier v2
    result (a 500 before: NotFound from per_topic)."""
    from backend import stability as gather

    values, ids = seed(store)
    earlier_v2 = ids["s0", V2]
    newest = store.record(None, {"system": "s0", "label": "late"},
                          document(dict.fromkeys(TOPICS, 0.95), V2))
    real, calls = gather.topic_bound, []

    def racing(results, chosen):
        calls.append([c.to_id for c in chosen])
        if len(calls) == 1:
            assert chosen[0].to_id == newest["id"]
            assert results.delete(None, newest["id"])
        return real(results, chosen)

    monkeypatch.setattr(gather, "topic_bound", racing)
    resp = client.get(url())
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert len(calls) == 2 and calls[1][0] == earlier_v2
    s0 = doc["systems"][0]
    assert (s0["name"], s0["to"]["result_id"]) == ("s0", earlier_v2)
    names = ["s0", "s1", "s2"]
    before, after = means(values, names, V1), means(values, names, V2)
    assert [s["to"]["mean"] for s in doc["systems"]] == pytest.approx(after, abs=1e-12)
    assert doc["statistics"]["kendall_tau"]["value"] == pytest.approx(
        scipy_stats.kendalltau(before, after).statistic, abs=1e-12)


def test_results_deleted_at_every_choice_are_a_503_to_retry(client, store, monkeypatch):
    """Chosen results deleted each time, CHOICE_ATTEMPTS times: 503 with Retry-After, the
    document not made from a stale choice (a 500 before)."""
    from backend import stability as gather
    from service import stability as route

    attempts = getattr(route, "CHOICE_ATTEMPTS", 3)
    seed(store)
    for k in range(attempts):
        store.record(None, {"system": "s0", "label": f"late-{k}"},
                     document(dict.fromkeys(TOPICS, 0.5), V2))
    real, deleted = gather.topic_bound, []

    def racing(results, chosen):
        deleted.append(chosen[0].to_id)
        assert results.delete(None, chosen[0].to_id)
        return real(results, chosen)

    monkeypatch.setattr(gather, "topic_bound", racing)
    resp = client.get(url())
    assert resp.status_code == 503, resp.get_json()
    assert resp.mimetype == "application/problem+json"
    assert resp.headers["Retry-After"] == "1"
    assert f"{attempts} times" in resp.get_json()["detail"]
    assert len(deleted) == len(set(deleted)) == attempts


def test_an_unreadable_column_leaves_its_system_out(client, store):
    """s3's v2 column holds 3 values for its 10 topics: s3 is left out with a warning naming
    it and its result; the statistics are those of s0-s2 (a 500 before: ValueError)."""
    from backend.results import Result, ResultValues

    values, ids = seed(store, n=4)
    bad = ids["s3", V2]
    with store.sessions.begin() as session:
        pk = session.scalar(select(Result.pk).where(Result.id == bad))
        session.execute(update(ResultValues).where(ResultValues.result_pk == pk)
                        .values(data=np.array([0.1, 0.2, 0.3]).tobytes()))
    resp = client.get(url())
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    names = ["s0", "s1", "s2"]
    assert [s["name"] for s in doc["systems"]] == names and doc["n_topics"] == 10
    before, after = means(values, names, V1), means(values, names, V2)
    assert [s["from"]["mean"] for s in doc["systems"]] == pytest.approx(before, abs=1e-12)
    assert doc["statistics"]["kendall_tau"]["value"] == pytest.approx(
        scipy_stats.kendalltau(before, after).statistic, abs=1e-12)
    warning = [w for w in doc["warnings"] if w["code"] == "values-unreadable"]
    assert len(warning) == 1 and "system s3 left out" in warning[0]["message"]
    assert bad in warning[0]["message"] and "3 values for 10 topics" in warning[0]["message"]
    text = client.get(url(), headers={"Accept": "text/plain"})
    assert text.status_code == 200 and "warning: system s3 left out" in text.get_data(True)
    page = client.get(url(), headers={"Accept": "text/html"})
    assert page.status_code == 200 and "system s3 left out" in page.get_data(True)


def test_the_route_loads_its_code_with_the_app(results_database):
    """create_app imports everything GET /v1/stability runs: none of it is read from the
    files at the first request, which may be after they changed (before: backend.stability,
    cranfield.compare.stability, the text and the page were imported by the view)."""
    wanted = ["backend.stability", "cranfield.compare.stability",
              "cranfield.compare.stability_text", "cranfield.reports.html_stability"]
    code = ("import sys; from service.app import create_app; create_app({'TESTING': True}); "
            f"print([m for m in {wanted!r} if m not in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, CRANFIELD_DATABASE_URL=results_database),
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_nan_and_none_values_leave_their_topics_out(client, store):
    """A re-score's NaN (a 0/0 measure) and None per-topic values: those topics are left
    out for every system, the means and τ_b over the others."""
    values, ids = seed(store)
    odd = document(values["s1", V2], V2)  # s1's latest under v2: t0 NaN, t1 None
    odd["per_topic"]["t0"]["map"], odd["per_topic"]["t1"]["map"] = float("nan"), None
    store.record(None, {"system": "s1", "label": "later"}, odd)
    doc = client.get(url()).get_json()
    kept = TOPICS[2:]
    assert doc["n_topics"] == 8 and doc["topics_left_out"] == {"count": 2,
                                                               "topics": ["t0", "t1"]}
    names = ["s0", "s1", "s2"]
    before = [float(np.mean([values[s, V1][t] for t in kept])) for s in names]
    after = [float(np.mean([values[s, V2][t] for t in kept])) for s in names]
    assert [s["from"]["mean"] for s in doc["systems"]] == pytest.approx(before, abs=1e-12)
    assert [s["to"]["mean"] for s in doc["systems"]] == pytest.approx(after, abs=1e-12)
    assert doc["statistics"]["kendall_tau"]["value"] == pytest.approx(
        scipy_stats.kendalltau(before, after).statistic, abs=1e-12)


def test_a_rescore_whose_original_was_deleted_is_paired_with_the_latest(client, store):
    """s0's night-1 result is deleted after it was re-scored under v2: its re-score has no
    night under v1 left, so s0 pairs by latest (its v1 result) with that re-score."""
    values, ids = seed(store, n=2)
    night = store.record(None, {"system": "s0", "label": "night-1"},
                         document(dict.fromkeys(TOPICS, 0.7), V1))
    again = store.record(None, {"system": "s0", "label": "night-1"},
                         document(dict.fromkeys(TOPICS, 0.6), V2), rescores=night["id"])
    paired = client.get(url()).get_json()["systems"][0]
    assert (paired["paired_by"], paired["from"]["result_id"]) == ("night", night["id"])
    assert store.delete(None, night["id"])
    s0 = client.get(url()).get_json()["systems"][0]
    assert s0["paired_by"] == "latest"
    assert (s0["from"]["result_id"], s0["to"]["result_id"]) == (ids["s0", V1], again["id"])
    assert s0["from"]["mean"] == pytest.approx(np.mean(list(values["s0", V1].values())))
    assert s0["to"]["mean"] == pytest.approx(0.6)


@pytest.mark.parametrize("name,text", [("alpha", ".00000000000000001"),
                                       ("alpha", ".99999999999999999"),
                                       ("level", ".99999999999999999")])
def test_an_alpha_whose_level_is_1_is_a_400_naming_it(client, store, name, text):
    """alpha = 1e-17 passed the check 0 < alpha < 1, and the pairs' tests at level 1 - alpha
    = 1.0 (in a double) raised: a 500. Now a 400 naming alpha, as a fraction that is 1.0 in
    a double; a level or persistence of 1e-17 is still taken (their complements are not
    used as levels), and alpha = 2e-16 too."""
    seed(store)
    resp = client.get(url(**{name: text}))
    assert resp.status_code == 400, resp.get_json()
    assert list(resp.get_json()["errors"]) == [name]
    ok = client.get(url(alpha=".0000000000000002", level=".00000000000000001",
                        persistence=".00000000000000001"))
    assert ok.status_code == 200, ok.get_json()
    doc = ok.get_json()
    assert (doc["pairs_tested"]["alpha"], doc["bootstrap"]["level"], doc["persistence"]) == (
        2e-16, 1e-17, 1e-17)
