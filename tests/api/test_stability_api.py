"""GET /v1/stability (issue #31): do the conclusions hold between two qrels versions? Real
evaluations recorded under two stored qrels versions give τ_b equal to scipy's kendalltau,
τ_AP and RBO_ext equal to by-hand implementations of their papers, and the pairs' statuses
equal to scipy's paired t-test with Holm's correction, on the per-topic values the results
recorded; text and HTML answers; the pairing of results (the same night through the re-score
link, else the latest); refusals naming the parameter; the work budget; tenant isolation.
Every response is checked against openapi.yaml (the contract client)."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from conftest import ContractClient
from scipy import stats as scipy_stats

from cranfield.compare.stats import correct_p_values
from service.app import create_app
from service.auth import key_line

RESULTS_ON_POSTGRES = True  # every test here runs on SQLite and on PostgreSQL (conftest)
V1, V2 = "q@" + "1" * 16, "q@" + "2" * 16


def tau_ap_by_hand(truth, estimate) -> float:
    """Yilmaz et al. 2008, eq. 1 (equal scores in system order)."""
    t = sorted(range(len(truth)), key=lambda i: (-truth[i], i))
    e = sorted(range(len(estimate)), key=lambda i: (-estimate[i], i))
    total = sum(sum(1 for o in e[:i] if o in t[:t.index(e[i])]) / i for i in range(1, len(e)))
    return 2 / (len(e) - 1) * total - 1


def rbo_ext_by_hand(x, y, p=0.9) -> float:
    """Webber et al. 2010, eq. 32, two full rankings of the same k items."""
    s = sorted(range(len(x)), key=lambda i: (-x[i], i))
    t = sorted(range(len(y)), key=lambda i: (-y[i], i))
    k = len(s)
    xd = [len(set(s[:d]) & set(t[:d])) for d in range(1, k + 1)]
    return xd[-1] / k * p**k + (1 - p) / p * sum(xd[d - 1] / d * p**d for d in range(1, k + 1))


# -- real evaluations under two stored qrels versions -----------------------------------------

def runs_and_qrels(seed=3, n_runs=5, n_topics=12, n_docs=15):
    rng = np.random.default_rng(seed)
    topics = [f"t{i}" for i in range(n_topics)]
    docs = [f"d{j}" for j in range(n_docs)]
    runs = {f"sys{r}": {t: {d: float(rng.random()) for d in docs} for t in topics}
            for r in range(n_runs)}
    v1 = {t: {d: int(rng.random() < 0.3) for d in docs[:6]} for t in topics}
    v2 = {t: {**v1[t], **{d: int(rng.random() < 0.5) for d in docs[6:]}} for t in topics}
    return runs, v1, v2


def test_stability_of_recorded_evaluations_equals_the_oracles(client):
    runs, v1, v2 = runs_and_qrels()
    first = client.put("/v1/qrels/nightly", json={"qrels": v1}).get_json()["version"]
    second = client.put("/v1/qrels/nightly", json={"qrels": v2},
                        headers={"If-Match": first}).get_json()["version"]
    ids = {}
    for version in (first, second):
        for name, run in runs.items():
            doc = client.post("/v1/evaluations", json={
                "run": run, "qrels_id": f"nightly@{version}", "measures": ["map", "P.5"],
                "record": {"system": name, "label": version[:6]}}).get_json()
            assert doc["provenance"]["qrels_version"] == f"nightly@{version}"
            ids[name, version] = doc["recorded"]["id"]
    url = (f"/v1/stability?measure=map&from=nightly@{first}&to=nightly@{second}"
           "&resamples=200&seed=4")
    resp = client.get(url)
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    names = sorted(runs)
    assert [s["name"] for s in doc["systems"]] == names
    # the oracle: each result's recorded per-topic values, read back
    values = {}
    for (name, version), rid in ids.items():
        per_topic = client.get(f"/v1/results/{rid}").get_json()["document"]["per_topic"]
        values[name, version] = [per_topic[t]["map"] for t in sorted(per_topic)]
    a = np.array([values[n, first] for n in names])
    b = np.array([values[n, second] for n in names])
    ma, mb = list(a.mean(axis=1)), list(b.mean(axis=1))
    st = doc["statistics"]
    assert doc["n_topics"] == 12 and doc["n_systems"] == 5
    assert st["kendall_tau"]["value"] == pytest.approx(
        scipy_stats.kendalltau(ma, mb).statistic, abs=1e-12)
    assert st["tau_ap"]["value"] == pytest.approx(tau_ap_by_hand(ma, mb), abs=1e-12)
    assert st["rbo"]["value"] == pytest.approx(rbo_ext_by_hand(ma, mb), abs=1e-12)
    for s, m_a, m_b in zip(doc["systems"], ma, mb, strict=True):
        assert s["from"]["mean"] == pytest.approx(m_a) and s["to"]["mean"] == pytest.approx(m_b)
        assert s["paired_by"] == "latest"
        assert s["from"]["result_id"] == ids[s["name"], first]
    for key in st:
        if st[key]["value"] is not None:
            assert st[key]["ci_low"] <= st[key]["value"] <= st[key]["ci_high"]
    pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]
    sig = {}
    for side, m in (("from", a), ("to", b)):
        p = np.array([scipy_stats.ttest_rel(m[j], m[i]).pvalue for i, j in pairs])
        sig[side] = correct_p_values(np.nan_to_num(p, nan=1.0), "holm") < 0.05
    for k, (i, j) in enumerate(pairs):
        pair = doc["pairs"][k]
        assert (pair["a"], pair["b"]) == (names[i], names[j])
        assert pair["from"]["significant"] == sig["from"][k]
        assert pair["to"]["significant"] == sig["to"][k]
    assert doc["changed_pairs"] == [p for p in doc["pairs"]
                                    if p["status"] in ("appeared", "vanished", "flipped")]
    # the same seed, the same document; as text and as a page
    assert client.get(url).get_json() == doc
    text = client.get(url, headers={"Accept": "text/plain"})
    assert text.status_code == 200 and text.mimetype == "text/plain"
    assert f"Stability of map from nightly@{first} to nightly@{second}" in text.get_data(True)
    assert f"{st['kendall_tau']['value']:.4f}" in text.get_data(True)
    page = client.get(url, headers={"Accept": "text/html"})
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert 'data-statistic="tau_ap"' in page.get_data(True)


# -- recorded directly: pairing, refusals, budgets, tenants ----------------------------------

def document(values: dict, version: str, measure: str = "map") -> dict:
    return {"measures": [{"key": measure}],
            "aggregate": {measure: float(np.mean(list(values.values())))},
            "per_topic": {t: {measure: v} for t, v in values.items()},
            "provenance": {"qrels_version": version, "qrels_sha256": version[-1] * 64}}


@pytest.fixture
def nights(app):
    """The store's clock: one day later at each recording."""
    times = iter(datetime(2026, 11, 1, 6, tzinfo=UTC) + timedelta(days=i) for i in range(100))
    app.extensions["results"].clock = lambda: next(times)
    return app.extensions["results"]


def seed_systems(store, tenant=None, n=4, topics=10, shift=0.0):
    rng = np.random.default_rng(1)
    for i in range(n):
        base = {f"t{k}": float(x) for k, x in enumerate(rng.random(topics) * 0.2 + i * 0.1)}
        store.record(tenant, {"system": f"s{i}", "label": "v1"}, document(base, V1))
        moved = {t: v + (shift if i == 0 else 0.0) for t, v in base.items()}
        store.record(tenant, {"system": f"s{i}", "label": "v2"}, document(moved, V2))


def test_a_flipped_pair_and_its_text(client, nights):
    seed_systems(nights, shift=0.5)  # s0, the worst under v1, the best under v2
    doc = client.get(f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=50").get_json()
    assert [s["to"]["rank"] for s in doc["systems"]][0] == 1
    assert doc["systems"][0]["from"]["rank"] == 4
    flipped = {(p["a"], p["b"]) for p in doc["changed_pairs"] if p["status"] == "flipped"}
    assert ("s0", "s3") in flipped
    assert doc["systems_left_out"] == {"from_only": [], "to_only": []}


def test_topics_left_out_and_systems_under_one_version(client, nights):
    seed_systems(nights)
    nights.record(None, {"system": "only-v1", "label": "x"}, document({"t0": 0.5}, V1))
    nights.record(None, {"system": "s0", "label": "v2b"},
                  document({f"t{k}": 0.1 for k in range(1, 10)}, V2))  # s0's latest lacks t0
    doc = client.get(f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=20").get_json()
    assert doc["systems_left_out"]["from_only"] == ["only-v1"]
    assert doc["topics_left_out"] == {"count": 1, "topics": ["t0"]}
    assert doc["n_topics"] == 9


@pytest.mark.skipif("rescores" not in inspect.signature(
    __import__("backend.results", fromlist=["ResultStore"]).ResultStore.record).parameters,
    reason="the re-score link (migration 0007) is not in this tree")
def test_results_of_the_same_night_are_paired(client, nights):
    """A result re-scored under v2 names the v1 result it re-scores: that night is paired,
    not the system's latest result under v1."""
    seed_systems(nights, n=2)
    old = nights.record(None, {"system": "s0", "label": "night-1"},
                        document({f"t{k}": 0.9 for k in range(10)}, V1))
    nights.record(None, {"system": "s0", "label": "night-2"},
                  document({f"t{k}": 0.2 for k in range(10)}, V1))  # newer, not re-scored
    again = nights.record(None, {"system": "s0", "label": "night-1"},
                          document({f"t{k}": 0.8 for k in range(10)}, V2),
                          rescores=old["id"])
    doc = client.get(f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=20").get_json()
    s0 = doc["systems"][0]
    assert s0["paired_by"] == "night"
    assert (s0["from"]["result_id"], s0["to"]["result_id"]) == (old["id"], again["id"])
    assert doc["systems"][1]["paired_by"] == "latest"


@pytest.mark.parametrize("query,status,field", [
    (f"from={V1}&to={V2}", 400, "measure"),
    (f"measure=map&to={V2}", 400, "from"),
    (f"measure=map&from=q&to={V2}", 400, "from"),
    (f"measure=map&from={V1}&to=q@xyz", 400, "to"),
    (f"measure=map&from={V1}&to={V1}", 422, "to"),
    (f"measure=map&from={V1}&to={V2}&test=z", 400, "test"),
    (f"measure=map&from={V1}&to={V2}&correction=fdr", 400, "correction"),
    (f"measure=map&from={V1}&to={V2}&alpha=1.5", 400, "alpha"),
    (f"measure=map&from={V1}&to={V2}&alpha=nan", 400, "alpha"),
    (f"measure=map&from={V1}&to={V2}&persistence=1", 400, "persistence"),
    (f"measure=map&from={V1}&to={V2}&resamples=0", 400, "resamples"),
    (f"measure=map&from=q@{'3' * 16}&to={V2}", 404, "from"),
    (f"measure=map&from={V1}&to=q@{'3' * 16}", 404, "to"),
    (f"measure=nosuch&from={V1}&to={V2}", 422, "measure"),
    (f"measure=P.10&from={V1}&to={V2}", 404, "measure"),
])
def test_refusals_name_the_parameter(client, nights, query, status, field):
    seed_systems(nights, n=2)
    resp = client.get(f"/v1/stability?{query}")
    assert resp.status_code == status, resp.get_json()
    assert resp.mimetype == "application/problem+json"
    assert list(resp.get_json()["errors"]) == [field]


def test_no_system_under_both_versions_is_404_naming_to(client, nights):
    nights.record(None, {"system": "a", "label": "x"}, document({"t0": 0.5}, V1))
    nights.record(None, {"system": "b", "label": "x"}, document({"t0": 0.5}, V2))
    resp = client.get(f"/v1/stability?measure=map&from={V1}&to={V2}")
    assert resp.status_code == 404 and list(resp.get_json()["errors"]) == ["to"]
    assert "under q@1111111111111111 only: a" in resp.get_json()["detail"]


def test_the_work_budget_is_checked_before_the_values_are_read(results_database, monkeypatch):
    app = create_app({"TESTING": True, "MAX_STABILITY_WORK": 10_000_000_000})
    seed_systems(app.extensions["results"])
    client = ContractClient(app.test_client())
    read = []
    monkeypatch.setattr(type(app.extensions["results"]), "per_topic",
                        lambda *a, **k: read.append(a) or {})
    resp = client.get(f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=100000")
    assert resp.status_code == 422 and list(resp.get_json()["errors"]) == ["work"]
    assert resp.get_json()["work"]["resamples"] == 100000
    assert read == []


def test_the_budget_counts_every_value_read_not_the_fewest(results_database):
    """One system with 1 topic under both versions, three with 2,000: the matrices have 1
    topic, but all 12,002 recorded values are decoded, and the budget counts them (review R31
    finding 7; it counted 2 x 4 x 1 = 8)."""
    from service.stability import WORK_PER_VALUE

    app = create_app({"TESTING": True, "MAX_STABILITY_WORK": 150_000_000})
    store = app.extensions["results"]
    for i in range(4):
        values = {f"t{k}": 0.1 * i + k * 1e-5 for k in range(1 if i == 0 else 2000)}
        store.record(None, {"system": f"s{i}", "label": "v1"}, document(values, V1))
        store.record(None, {"system": f"s{i}", "label": "v2"}, document(values, V2))
    client = ContractClient(app.test_client())
    resp = client.get(f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=20")
    assert resp.status_code == 422, resp.get_json()
    assert list(resp.get_json()["errors"]) == ["work"]
    assert f"{WORK_PER_VALUE:,} × 12,002 per-topic values" in resp.get_json()["detail"]
    app.config["MAX_STABILITY_WORK"] = 400_000_000  # within it: one topic kept, as before
    doc = client.get(f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=20").get_json()
    assert doc["n_topics"] == 1 and doc["topics_left_out"]["count"] == 1999


KEYS = {"write-a": ("write", "team-a"), "write-b": ("write", "team-b")}


def test_another_tenants_results_are_not_found(results_database):
    lines = ";".join(key_line(k, role, tenant, k) for k, (role, tenant) in KEYS.items())
    app = create_app({"TESTING": True, "API_KEYS": lines})
    seed_systems(app.extensions["results"], tenant="team-a")
    client = ContractClient(app.test_client())
    url = f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=20"
    ok = client.get(url, headers={"Authorization": "Bearer write-a"})
    assert ok.status_code == 200 and ok.get_json()["n_systems"] == 4
    for accept in ("application/json", "text/plain", "text/html"):
        resp = client.get(url, headers={"Authorization": "Bearer write-b", "Accept": accept})
        assert resp.status_code == 404 and list(resp.get_json()["errors"]) == ["from"]
