"""Do the conclusions hold? (issue #31) on real parts, on PostgreSQL and on SQLite: gunicorn,
a private redis-server and an RQ worker (``cranfield worker``).

Four systems record two nights each with their runs kept, under the team's qrels v1. A v2
judges more documents: ones system "fresh" ranks first and "classic" never retrieves, so
their significant difference flips. Every night is re-scored under v2 by a worker
(``POST /v1/rescores``); then ``GET /v1/stability?from=v1&to=v2`` pairs each system's newest
night with its re-scoring (``paired_by: night``) and gives Kendall's τ_b equal to scipy's
``kendalltau``, τ_AP and RBO_ext equal to implementations written here from their papers,
and the flipped pair, equal to scipy's paired t-test with Holm's correction, all on the
systems' mean average precision computed here by its definition from the same runs and
qrels; the text and the page say the same.
"""

from __future__ import annotations

import random
import urllib.request

import numpy as np
import pytest
from scipy import stats as scipy_stats
from servers import (
    JOB_TIMEOUT,
    RedisServer,
    call,
    postgres_database,
    require_redis_server,
    running_gunicorn,
    running_worker,
    wait_until,
)

TOPICS = [f"t{i:02d}" for i in range(1, 26)]
SYSTEMS = ("classic", "fresh", "mixed", "noisy")
NIGHTS = 2


def _judgments() -> tuple[dict, dict]:
    """v1: per topic o1-o3 relevant, 7 non-relevant; v2 adds n1-n3 relevant."""
    v1 = {t: {**{f"o{i}": 1 for i in (1, 2, 3)}, **{f"x{i}": 0 for i in range(7)}}
          for t in TOPICS}
    v2 = {t: {**v1[t], **{f"n{i}": 1 for i in (1, 2, 3)}} for t in TOPICS}
    return v1, v2


def _run(system: str, night: int) -> dict:
    """classic: the o's near the top, never an n; fresh: the n's first, the o's deep;
    mixed and noisy: both, at random depths. 30 documents a topic, no tied scores."""
    rng = random.Random(f"{system}-{night}")
    run = {}
    for t in TOPICS:
        junk = [f"j{i}" for i in range(40)]
        rng.shuffle(junk)
        if system == "classic":
            top = ["o1", "o2", "o3"]
            rng.shuffle(top)
            order = top[:rng.randint(1, 3)] + junk[:4]
            order += [d for d in top if d not in order] + junk[4:]
        elif system == "fresh":
            order = ["n1", "n2", "n3"][:rng.randint(2, 3)] + junk[:rng.randint(3, 12)]
            order += [d for d in ("n1", "n2", "n3") if d not in order] + ["o1", "o2", "o3"]
            order += junk[12:]
        else:
            order = ["o1", "o2", "o3", "n1", "n2", "n3"] + junk
            rng.shuffle(order)
        order = list(dict.fromkeys(order))[:30]
        run[t] = {d: round(100.0 - i - rng.random() / 2, 6) for i, d in enumerate(order)}
    return run


def average_precision(run: dict, qrels: dict) -> float:
    """Mean over the relevant documents of the precision at each one's rank (0 if not
    retrieved), documents by score descending."""
    relevant = {d for d, g in qrels.items() if g > 0}
    hits, total = 0, 0.0
    for rank, doc in enumerate(sorted(run, key=lambda d: -run[d]), 1):
        if doc in relevant:
            hits += 1
            total += hits / rank
    return total / len(relevant)


def tau_ap_by_hand(truth, estimate) -> float:
    """Yilmaz, Aslam & Robertson 2008, eq. 1."""
    t = sorted(range(len(truth)), key=lambda i: -truth[i])
    e = sorted(range(len(estimate)), key=lambda i: -estimate[i])
    total = sum(sum(1 for o in e[:i] if o in t[:t.index(e[i])]) / i for i in range(1, len(e)))
    return 2 / (len(e) - 1) * total - 1


def rbo_ext_by_hand(x, y, p=0.9) -> float:
    """Webber, Moffat & Zobel 2010, eq. 32, two full rankings of the same k items."""
    s = sorted(range(len(x)), key=lambda i: -x[i])
    t = sorted(range(len(y)), key=lambda i: -y[i])
    k = len(s)
    xd = [len(set(s[:d]) & set(t[:d])) for d in range(1, k + 1)]
    return xd[-1] / k * p**k + (1 - p) / p * sum(xd[d - 1] / d * p**d for d in range(1, k + 1))


def holm_significant(p: list[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down procedure, written out."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, stopped = [False] * len(p), False
    for rank, i in enumerate(order):
        if not stopped and p[i] <= alpha / (len(p) - rank):
            out[i] = True
        else:
            stopped = True
    return out


@pytest.fixture(params=["postgresql", "sqlite"])
def database(request, tmp_path, require):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'results.db'}"
        return
    with postgres_database("cranfield_stability_") as url:
        require(url is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
        yield url


@pytest.fixture
def redis(require):
    require_redis_server()
    server = RedisServer()
    server.start()
    yield server
    server.stop()


def test_conclusions_between_two_judgments(database, redis):
    v1_qrels, v2_qrels = _judgments()
    env = {"REDIS_URL": redis.url, "CRANFIELD_DATABASE_URL": database}
    with running_gunicorn(env) as api:
        status, _, v1 = call(api, "PUT", "/v1/qrels/team", {"qrels": v1_qrels})
        assert status in (200, 201), v1
        v1_ref = f"team@{v1['version']}"
        for night in range(NIGHTS):
            for system in SYSTEMS:
                status, _, doc = call(api, "POST", "/v1/evaluations", {
                    "run": _run(system, night), "qrels_id": "team", "measures": ["map"],
                    "record": {"system": system, "label": f"night-{night + 1}",
                               "keep_run": True}})
                assert status == 200, doc
        status, _, v2 = call(api, "PUT", "/v1/qrels/team", {"qrels": v2_qrels})
        assert status in (200, 201), v2
        v2_ref = f"team@{v2['version']}"
        status, _, queued = call(api, "POST", "/v1/rescores",
                                 {"qrels_id": v2_ref, "systems": list(SYSTEMS)})
        assert status == 202, queued
        with running_worker(redis.url, database):
            done = wait_until(lambda: (lambda d: d if d["state"] == "finished" else None)(
                call(api, "GET", f"/v1/rescores/{queued['id']}")[2]), JOB_TIMEOUT,
                "the re-score to finish")
        assert (done["done"], done["failed"]) == (NIGHTS * len(SYSTEMS), 0), done

        query = f"/v1/stability?measure=map&from={v1_ref}&to={v2_ref}&resamples=500&seed=7"
        status, _, doc = call(api, "GET", query)
        assert status == 200, doc
        texts = {}
        for accept in ("text/plain", "text/html"):
            request = urllib.request.Request(api + query, headers={"Accept": accept})
            with urllib.request.urlopen(request, timeout=60) as resp:
                texts[accept] = resp.read().decode()

    # the oracle: AP by its definition on the newest night's runs, under v1 and under v2
    night = NIGHTS - 1
    ap = {(s, v): [average_precision(_run(s, night)[t], q[t]) for t in TOPICS]
          for s in SYSTEMS for v, q in (("v1", v1_qrels), ("v2", v2_qrels))}
    mean_v1 = [float(np.mean(ap[s, "v1"])) for s in SYSTEMS]
    mean_v2 = [float(np.mean(ap[s, "v2"])) for s in SYSTEMS]
    assert [s["name"] for s in doc["systems"]] == list(SYSTEMS)
    for s, m1, m2 in zip(doc["systems"], mean_v1, mean_v2, strict=True):
        assert s["paired_by"] == "night"
        assert s["from"]["created_at"] == s["to"]["created_at"]
        assert (s["from"]["mean"], s["to"]["mean"]) == pytest.approx((m1, m2), abs=1e-12)
    st = doc["statistics"]
    assert doc["n_topics"] == len(TOPICS)
    assert st["kendall_tau"]["value"] == pytest.approx(
        scipy_stats.kendalltau(mean_v1, mean_v2).statistic, abs=1e-12)
    assert st["tau_ap"]["value"] == pytest.approx(tau_ap_by_hand(mean_v1, mean_v2), abs=1e-12)
    assert st["rbo"]["value"] == pytest.approx(rbo_ext_by_hand(mean_v1, mean_v2), abs=1e-12)
    for s in st.values():
        assert s["ci_low"] <= s["value"] <= s["ci_high"]
    # the pairs: scipy's paired t-test, Holm's correction written out, under each version
    pairs = [(i, j) for i in range(len(SYSTEMS)) for j in range(i + 1, len(SYSTEMS))]
    status_of = {}
    sig = {}
    for v in ("v1", "v2"):
        p = [scipy_stats.ttest_rel(ap[SYSTEMS[j], v], ap[SYSTEMS[i], v]).pvalue
             for i, j in pairs]
        sig[v] = holm_significant(p)
    for k, (i, j) in enumerate(pairs):
        d1 = np.mean(np.subtract(ap[SYSTEMS[j], "v1"], ap[SYSTEMS[i], "v1"]))
        d2 = np.mean(np.subtract(ap[SYSTEMS[j], "v2"], ap[SYSTEMS[i], "v2"]))
        a, b = sig["v1"][k], sig["v2"][k]
        status_of[SYSTEMS[i], SYSTEMS[j]] = (
            ("held" if d1 * d2 > 0 else "flipped") if a and b else
            "vanished" if a else "appeared" if b else "none")
    assert {(p["a"], p["b"]): p["status"] for p in doc["pairs"]} == status_of
    assert status_of["classic", "fresh"] == "flipped"
    assert ("classic", "fresh", "flipped") in {(p["a"], p["b"], p["status"])
                                               for p in doc["changed_pairs"]}
    assert f"{st['tau_ap']['value']:.4f}" in texts["text/plain"]
    assert "flipped   fresh - classic" in texts["text/plain"]
    assert 'data-status="flipped" data-a="classic" data-b="fresh"' in texts["text/html"]
