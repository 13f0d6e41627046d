"""Names everywhere (issue #25): a measure asked of recorded results — a system's trend, the
comparison of two recorded results, a comparison naming ``result_id`` runs — is found by any
spelling the registry resolves (``ndcg_cut.10``, ``nDCG@10``, ``ndcg_cut_10``), whichever
it was recorded under; a name the registry does not know is 422 with suggestions, and a
known measure no result has is a problem naming the measures recorded, never an empty 200.
Every response is checked against openapi.yaml (the contract client)."""

from __future__ import annotations

import math

import numpy as np
import pytest

SPELLINGS = ["ndcg_cut.10", "nDCG@10", "ndcg_cut_10", "NDCG@10", "ndcg@10", " ndcg_cut.10 "]
TOPICS = [f"t{i}" for i in range(1, 13)]
QRELS = {t: {"r1": 2, "r2": 1} for t in TOPICS}
RESULTS_ON_POSTGRES = True  # every test here runs on SQLite and on PostgreSQL (conftest)


def _run(night: int) -> dict:
    """A ranking whose nDCG@10 falls night after night on a few topics (r1 pushed down)."""
    run = {}
    for i, t in enumerate(TOPICS):
        low = i < 3 * night  # the topics where r1 sank
        run[t] = {"r1": 1.0 if low else 9.0, "r2": 8.0, **{f"x{k}": 7.0 - k for k in range(6)}}
    return run


def _record(client, night: int, system: str, measures: list[str]) -> dict:
    resp = client.post("/v1/evaluations", json={
        "run": _run(night), "qrels": QRELS, "measures": measures,
        "record": {"system": system, "label": f"night-{night}"}})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


@pytest.fixture
def nights(client):
    """Three nights of ``search`` recorded with ``ndcg_cut.10`` (key ndcg_cut_10) and map,
    the first pinned; two of ``other`` recorded with ``nDCG@10`` (key nDCG@10)."""
    docs = [_record(client, n, "search", ["ndcg_cut.10", "map"]) for n in (0, 1, 2)]
    assert client.put("/v1/systems/search/baseline",
                      json={"result_id": docs[0]["recorded"]["id"]}).status_code == 200
    others = [_record(client, n, "other", ["nDCG@10"]) for n in (0, 2)]
    return docs, others


def _problem(resp, status: int) -> dict:
    assert resp.status_code == status, resp.get_data(as_text=True)
    assert resp.mimetype == "application/problem+json"
    return resp.get_json()


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_the_trend_answers_every_spelling_with_the_same_points(client, nights, spelling):
    docs, _ = nights
    trend = client.get("/v1/systems/search/trend", query_string={"measure": spelling})
    assert trend.status_code == 200, trend.get_json()
    trend = trend.get_json()
    assert trend["measure"] == "ndcg_cut_10"  # as recorded
    assert [p["id"] for p in trend["points"]] == [d["recorded"]["id"] for d in docs]
    assert trend["total"] == 3
    for point, doc in zip(trend["points"], docs, strict=True):
        values = np.array([row["ndcg_cut_10"] for row in doc["per_topic"].values()])
        assert point["n_topics"] == len(TOPICS)
        assert math.isclose(point["mean"], values.mean(), rel_tol=1e-12)
        assert math.isclose(point["mean"], doc["aggregate"]["ndcg_cut_10"], rel_tol=1e-12)
    means = [p["mean"] for p in trend["points"]]
    assert means[0] > means[1] > means[2]  # the nights fall: real values, not zeros
    assert trend["baseline"] == docs[0]["recorded"]["id"]
    assert trend["baseline_point"]["id"] == docs[0]["recorded"]["id"]
    assert trend["baseline_point"]["mean"] == means[0]
    # identical, point for point, to the recorded key's answer
    exact = client.get("/v1/systems/search/trend?measure=ndcg_cut_10").get_json()
    assert trend == exact


@pytest.mark.parametrize("spelling", ["ndcg_cut.10", "ndcg_cut_10", "nDCG@10"])
def test_a_system_recorded_under_the_ir_measures_name_is_found_by_the_trec_eval_one(
        client, nights, spelling):
    _, others = nights
    trend = client.get("/v1/systems/other/trend", query_string={"measure": spelling}).get_json()
    assert trend["measure"] == "nDCG@10"
    assert [p["id"] for p in trend["points"]] == [d["recorded"]["id"] for d in others]
    assert [p["mean"] for p in trend["points"]] == [
        pytest.approx(d["aggregate"]["nDCG@10"], rel=1e-12) for d in others]


def test_the_trend_page_names_the_pinned_baseline_for_every_spelling(client, nights):
    docs, _ = nights
    for spelling in SPELLINGS:
        page = client.get("/v1/systems/search/trend", query_string={"measure": spelling},
                          headers={"Accept": "text/html"}).get_data(as_text=True)
        assert "none pinned" not in page
        assert "Baseline: night-0" in page
        assert f'data-id="{docs[0]["recorded"]["id"]}"' in page


def test_an_unknown_measure_is_422_with_suggestions(client, nights):
    body = _problem(client.get("/v1/systems/search/trend?measure=ndgc@10"), 422)
    assert "nDCG@10" in body["suggestions"]
    assert "ndgc@10" in body["detail"] and "measure" in body["errors"]
    # a name standing for several measures is not one trend
    body = _problem(client.get("/v1/systems/search/trend?measure=P.5,10"), 422)
    assert "2 measures" in body["detail"] and "measure" in body["errors"]


def test_a_measure_the_system_was_not_recorded_with_is_404_naming_those_it_was(client, nights):
    for spelling in ("P.5", "P@5", "recall.100"):
        body = _problem(client.get("/v1/systems/search/trend",
                                   query_string={"measure": spelling}), 404)
        assert body["recorded_measures"] == ["map", "ndcg_cut_10"]
        assert "map, ndcg_cut_10" in body["detail"] and spelling in body["detail"]
        assert body["errors"]["measure"] == [body["detail"]]
    # the other system has only nDCG@10: map is not there
    body = _problem(client.get("/v1/systems/other/trend?measure=AP"), 404)
    assert body["recorded_measures"] == ["nDCG@10"]


@pytest.mark.parametrize("spelling", SPELLINGS[:5])
def test_the_comparison_of_two_recorded_results_takes_every_spelling(client, nights, spelling):
    docs, _ = nights
    a, b = (d["recorded"]["id"] for d in docs[:2])
    got = client.get(f"/v1/results/{b}/comparison",
                     query_string={"with": a, "measures": spelling}).get_json()
    want = client.get(f"/v1/results/{b}/comparison",
                      query_string={"with": a, "measures": "ndcg_cut_10"}).get_json()
    assert [p["mean_diff"] for p in got["pairs"]] == [p["mean_diff"] for p in want["pairs"]]
    drop = docs[1]["aggregate"]["ndcg_cut_10"] - docs[0]["aggregate"]["ndcg_cut_10"]
    assert got["pairs"][0]["mean_diff"] == pytest.approx(drop, rel=1e-12)
    posted = client.post("/v1/comparisons", json={
        "runs": [{"result_id": a}, {"result_id": b}], "measures": [spelling]}).get_json()
    assert [p["mean_diff"] for p in posted["pairs"]] == [p["mean_diff"] for p in want["pairs"]]


def test_results_recorded_under_two_spellings_compare_on_their_common_measure(client, nights):
    docs, others = nights
    # by default: the measures both hold, whatever they were recorded under
    got = client.get(f"/v1/results/{others[1]['recorded']['id']}/comparison",
                     query_string={"with": docs[0]["recorded"]["id"]}).get_json()
    (measure,) = got["measures"]  # named as the baseline recorded it
    assert measure["key"] == "ndcg_cut_10" and measure["canonical"].startswith("ndcg_cut(k=10,")
    drop = others[1]["aggregate"]["nDCG@10"] - docs[0]["aggregate"]["ndcg_cut_10"]
    assert got["pairs"][0]["mean_diff"] == pytest.approx(drop, rel=1e-12)


def test_comparisons_by_ids_refuse_unknown_and_unrecorded_measures_by_name(client, nights):
    docs, _ = nights
    a, b = (d["recorded"]["id"] for d in docs[:2])
    body = _problem(client.get(f"/v1/results/{b}/comparison",
                               query_string={"with": a, "measures": "ndgc@10"}), 422)
    assert "nDCG@10" in body["suggestions"] and "measures" in body["errors"]
    body = _problem(client.post("/v1/comparisons", json={
        "runs": [{"result_id": a}, {"result_id": b}], "measures": ["ndgc@10"]}), 422)
    assert "nDCG@10" in body["suggestions"] and "measures" in body["errors"]
    body = _problem(client.post("/v1/comparisons", json={
        "runs": [{"result_id": a}, {"result_id": b}], "measures": ["P.5"]}), 422)
    (message,) = body["errors"]["runs[0].result_id"]
    assert "P.5" in message and "ndcg_cut_10" in message and "map" in message


def test_a_system_recorded_under_two_spellings_has_one_trend(client):
    """A team that switched from ``nDCG@10`` to ``ndcg_cut.10``: one line, every night."""
    docs = [_record(client, 0, "mixed", ["nDCG@10"]), _record(client, 1, "mixed", ["ndcg_cut.10"]),
            _record(client, 2, "mixed", ["nDCG@10"])]
    for spelling in ("ndcg_cut.10", "nDCG@10", "ndcg_cut_10"):
        trend = client.get("/v1/systems/mixed/trend", query_string={"measure": spelling}
                           ).get_json()
        assert [p["id"] for p in trend["points"]] == [d["recorded"]["id"] for d in docs]
        assert trend["total"] == 3
        assert [p["mean"] for p in trend["points"]] == [pytest.approx(
            next(iter(v for k, v in d["aggregate"].items() if "10" in k)), rel=1e-12)
            for d in docs]
        newest = client.get("/v1/systems/mixed/trend", query_string={
            "measure": spelling, "limit": 2}).get_json()
        assert [p["id"] for p in newest["points"]] == [d["recorded"]["id"] for d in docs[1:]]


def test_the_results_filter_by_measure_takes_every_spelling(client, nights):
    docs, others = nights
    _record(client, 1, "other", ["map"])  # one night of "other" without nDCG@10
    newest_first = [d["recorded"]["id"] for d in reversed(others)]
    for spelling in ("ndcg_cut.10", "nDCG@10", "ndcg_cut_10"):
        listed = client.get("/v1/systems/other/results",
                            query_string={"measure": spelling}).get_json()
        assert [r["id"] for r in listed["items"]] == newest_first and listed["total"] == 2
        page = client.get("/v1/systems/other/results",
                          query_string={"measure": spelling, "limit": 1}).get_json()
        assert [r["id"] for r in page["items"]] == newest_first[:1] and page["total"] == 2
        assert "measure=" in page["next"]
    assert client.get("/v1/systems/other/results").get_json()["total"] == 3
    body = _problem(client.get("/v1/systems/other/results?measure=ndgc@10"), 422)
    assert "nDCG@10" in body["suggestions"]
    body = _problem(client.get("/v1/systems/search/results?measure=P.5"), 404)
    assert body["recorded_measures"] == ["map", "ndcg_cut_10"]


def test_the_results_filter_by_measure_reads_one_page_not_every_result(client, nights,
                                                                        monkeypatch):
    """A system with years of nightly results: the filter asks the database for the page
    (and a count), never for every summary of the system to filter in memory."""
    from backend.results import ResultStore

    docs, _ = nights
    _record(client, 3, "search", ["map"])  # the newest without nDCG@10: filtered out
    asked = []
    results = ResultStore.results

    def spy(self, *args, **kwargs):
        asked.append(kwargs.get("limit"))
        return results(self, *args, **kwargs)

    monkeypatch.setattr(ResultStore, "results", spy)
    page = client.get("/v1/systems/search/results",
                      query_string={"measure": "nDCG@10", "limit": 1, "offset": 1}).get_json()
    assert [r["id"] for r in page["items"]] == [docs[1]["recorded"]["id"]]
    assert page["total"] == 3
    assert asked == [1]


@pytest.mark.parametrize("measure", ["set_F.0.5", "utility.1,-1,0,0", "ndcg.0=0,1=1,2=3",
                                     "relstring.5"])
def test_a_measure_whose_key_the_registry_cannot_read_back_has_a_trend(client, measure):
    """trec_eval prints some parameterised measures as keys no spelling resolves
    (``set_F_0.5``, ``utility_1,-1,0,0``): asked by that key, or as they were asked when
    recorded, the trend and the results filter find them (not 422 'unknown measure' for a
    key the system lists, nor 404 'not recorded')."""
    doc = _record(client, 0, "params", [measure])
    [key] = [m["key"] for m in doc["measures"]]
    for asked in (key, measure):
        trend = client.get("/v1/systems/params/trend", query_string={"measure": asked})
        assert trend.status_code == 200, (asked, trend.get_json())
        trend = trend.get_json()
        assert trend["measure"] == key
        assert [p["id"] for p in trend["points"]] == [doc["recorded"]["id"]]
        listed = client.get("/v1/systems/params/results",
                            query_string={"measure": asked}).get_json()
        assert listed["total"] == 1, (asked, listed)
