"""POST /v1/evaluations: numbers, formats, and every class of bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d1": 1.0}}
QRELS = {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 1}}
PROBLEM = "application/problem+json"


def post(client, body, **kwargs):
    return client.post("/v1/evaluations", json=body, **kwargs)


def test_mapping_evaluation_returns_numbers_specs_and_provenance(client):
    resp = post(client, {"run": RUN, "qrels": QRELS, "measures": ["map", "P.2", "nDCG@10"]})
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    doc = resp.get_json()
    # q1: AP = (1/1 + 2/3)/2; q2: 0
    assert doc["per_topic"]["q1"]["map"] == pytest.approx((1 + 2 / 3) / 2)
    assert doc["per_topic"]["q2"]["map"] == 0.0
    assert doc["aggregate"]["map"] == pytest.approx((1 + 2 / 3) / 4)
    assert doc["per_topic"]["q1"]["P_2"] == 0.5
    keys = [m["key"] for m in doc["measures"]]
    assert keys == ["map", "P_2", "nDCG@10"]
    specs = {m["key"]: m["canonical"] for m in doc["measures"]}
    assert specs["nDCG@10"] == "ndcg_cut(k=10,discount=log2,profile=trec_eval-9.0.8)"
    assert doc["topics"] == {"evaluated": ["q1", "q2"], "run_only": [], "qrels_only": []}
    prov = doc["provenance"]
    assert prov["engine"] == "cranfield" and prov["profile"] == "trec_eval-9.0.8"
    assert len(prov["run_sha256"]) == 64 and prov["run_sha256"] != prov["qrels_sha256"]


def test_api_numbers_equal_the_cli_on_conformance_data(client, capsys):
    from cranfield.cli import main

    qrels, run = (DATA / "qrels.rel_level").read_text(), (DATA / "results.test").read_text()
    resp = post(client, {"run": run, "qrels": qrels, "measures": ["all_trec"],
                         "options": {"relevance_level": 2, "profile": "trec_eval-10"},
                         "per_topic": True},  # -q (text/plain is the summary by default)
                headers={"Accept": "text/plain"})
    assert resp.status_code == 200 and resp.mimetype == "text/plain"
    assert main(["eval", "-q", "-l2", "--profile", "10", "-m", "all_trec",
                 str(DATA / "qrels.rel_level"), str(DATA / "results.test")]) == 0
    assert resp.get_data(as_text=True) == capsys.readouterr().out
    doc = post(client, {"run": run, "qrels": qrels, "measures": ["all_trec"],
                        "options": {"relevance_level": 2, "profile": "trec_eval-10"}}).get_json()
    assert round(doc["aggregate"]["map"], 4) == 0.1667  # out.test.aql
    assert doc["aggregate"]["runid"] == "STANDARD"


def test_trec_text_run_matches_trec_eval_official_output(client):
    resp = post(client, {"run": (DATA / "results.test").read_text(),
                         "qrels": (DATA / "qrels.test").read_text(), "per_topic": False},
                headers={"Accept": "text/plain"})
    assert resp.get_data(as_text=True) == (DATA / "v9.0.8" / "out.test").read_text()


def test_multipart_upload_like_curl(client):
    data = {"run": (io.BytesIO((DATA / "results.test").read_bytes()), "run.txt"),
            "qrels": (io.BytesIO((DATA / "qrels.test").read_bytes()), "qrels.txt"),
            "measures": "map,P.5", "complete_topics": "true"}
    resp = client.post("/v1/evaluations", data=data, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    doc = resp.get_json()
    assert round(doc["aggregate"]["map"], 4) == 0.1785
    assert round(doc["aggregate"]["P_5"], 4) == 0.2667
    assert doc["provenance"]["options"]["complete_topics"] is True


def test_csv_format(client):
    resp = post(client, {"run": RUN, "qrels": QRELS, "measures": ["map"]},
                headers={"Accept": "text/csv"})
    assert resp.mimetype == "text/csv"
    assert resp.get_data(as_text=True).splitlines()[0] == "topic,map"


def test_warnings_lint_the_input(client):
    run = {"q1": {"a": 2.0, "b": 1.0, "c": 1.0}, "q3": {"x": 1.0}}
    qrels = {"q1": {"a": 1}, "q2": {"z": 1}}
    doc = post(client, {"run": run, "qrels": qrels, "measures": ["P.2"]}).get_json()
    codes = {w["code"]: w for w in doc["warnings"]}
    assert codes["topics-run-only"]["topics"] == ["q3"]
    assert codes["topics-qrels-only"]["topics"] == ["q2"]
    assert codes["tie-at-cutoff"]["cutoff"] == 2 and codes["tie-at-cutoff"]["topics"] == ["q1"]
    assert codes["unjudged-in-top-10"]["topics"] == ["q1"]


def test_ties_at_each_cutoff_are_linted_per_topic(client):
    """Each cutoff the measures use is checked on its own: q1 ties across rank 2 only, q2
    across rank 5 only, q3 (too short for either) at neither."""
    run = {"q1": {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0, "e": 0.5, "f": 0.1},
           "q2": {"a": 6.0, "b": 5.0, "c": 4.0, "d": 3.0, "e": 2.0, "f": 2.0},
           "q3": {"a": 1.0}}
    qrels = {t: {"a": 1} for t in run}
    doc = post(client, {"run": run, "qrels": qrels, "measures": ["P.2,5"]}).get_json()
    ties = {w["cutoff"]: w["topics"] for w in doc["warnings"] if w["code"] == "tie-at-cutoff"}
    assert ties == {2: ["q1"], 5: ["q2"]}


def test_server_timing_names_where_the_time_went(client):
    resp = post(client, {"run": RUN, "qrels": QRELS, "measures": ["map"]})
    spans = [part.split(";")[0] for part in resp.headers["Server-Timing"].split(", ")]
    assert spans == ["read", "decode", "validate", "evaluate", "render"]
    # the next request starts with no spans of this one's
    again = client.get("/healthz")
    assert "Server-Timing" not in again.headers


def test_details_give_relevant_ranks_and_unjudged_documents(client):
    doc = post(client, {"run": RUN, "qrels": QRELS, "measures": ["map"], "details": True,
                        "details_depth": 2}).get_json()
    assert doc["details"]["q1"] == {"relevant_ranks": [1, 3], "unjudged_in_top": ["d2"],
                                    "depth": 2}
    assert doc["details"]["q2"]["unjudged_in_top"] == ["d1"]


def test_latency_gives_efficiency_figures(client):
    latency = {"q1": 10.0, "q2": 30.0}
    doc = post(client, {"run": RUN, "qrels": QRELS, "measures": ["map"],
                        "latency_ms": latency}).get_json()
    eff = doc["efficiency"]
    assert eff["mean_ms"] == 20.0 and eff["p50_ms"] == 20.0
    assert eff["queries_per_second"] == 50.0


def test_per_topic_false_omits_topics(client):
    doc = post(client, {"run": RUN, "qrels": QRELS, "per_topic": False}).get_json()
    assert "per_topic" not in doc and "map" in doc["aggregate"]


@pytest.mark.parametrize("body, status, path, phrase", [
    ({"run": RUN}, 422, "qrels", "exactly one of qrels and qrels_id"),
    ({"run": RUN, "qrels": QRELS, "qrels_id": "x"}, 422, "qrels", "exactly one"),
    ({"run": RUN, "qrels_id": "no-such"}, 422, "qrels_id", "no qrels 'no-such'"),
    ({"run": RUN, "qrels": QRELS, "extra": 1}, 422, "extra", "Unknown field"),
    ({"run": RUN, "qrels": QRELS, "options": {"depth": -1}}, 422, "options.depth", "greater"),
    ({"run": RUN, "qrels": QRELS, "options": {"profile": "x"}}, 422, "options.profile",
     "Must be one of"),
    ({"run": RUN, "qrels": QRELS, "options": {"bogus": True}}, 422, "options.bogus",
     "Unknown field"),
    ({"run": RUN, "qrels": QRELS, "measures": ["map", 3]}, 422, "measures[1]", "Not a valid"),
    ({"run": RUN, "qrels": QRELS, "measures": ["map", "mapp"]}, 422, "measures[1]",
     "did you mean 'map'"),
    ({"run": RUN, "qrels": QRELS, "measures": []}, 422, "measures", "Length"),
    ({"run": RUN, "qrels": QRELS, "measures": ["map", ""]}, 422, "measures[1]",
     "Shorter than minimum length 1"),
    ({"run": RUN, "qrels": QRELS, "measures": "map"}, 422, "measures", "Not a valid list"),
    ({"run": RUN, "qrels": QRELS, "measures": ["map"] * 201}, 422, "measures",
     "Length must be between 1 and 200"),
    ({"run": RUN, "qrels": QRELS, "measures": [None, 7]}, 422, "measures[0]",
     "Field may not be null"),
    ({"run": RUN, "qrels": QRELS, "measures": [None, 7]}, 422, "measures[1]",
     "Not a valid string"),
    ({"run": {}, "qrels": QRELS}, 422, "run", "empty"),
    ({"run": "", "qrels": QRELS}, 422, "run", "empty"),
    ({"run": 5, "qrels": QRELS}, 422, "run", "must be an object"),
    ({"run": {"q1": {"d1": "high"}}, "qrels": QRELS}, 422, "run.q1.d1", "is not a number"),
    ({"run": {"q1": [1, 2]}, "qrels": QRELS}, 422, "run.q1", "must map docids"),
    ({"run": {"q1": {"d1": True}}, "qrels": QRELS}, 422, "run.q1.d1", "true is not a number"),
    ({"run": RUN, "qrels": {"q1": {"d1": False}}}, 422, "qrels.q1.d1", "false is not a number"),
    ({"run": RUN, "qrels": {"q1": {"d1": 1.5}}}, 422, "qrels.q1.d1", "not an integer"),
    ({"run": "q1 Q0 d1 1 1.0 r\nq1 Q0 d1 2 0.5 r\n", "qrels": QRELS}, 422, "run line 2",
     "appears twice"),
    ({"run": "q1 Q0 d1 1 abc r\n", "qrels": QRELS}, 422, "run line 1", "not a number"),
    ({"run": RUN, "qrels": "q1 0 d1 x\n"}, 422, "qrels line 1", "not an integer"),
    ({"run": RUN, "qrels": "q1 0 d1\n"}, 422, "qrels line 1", "expected 4 fields"),
    ({"run": {"zz": {"d1": 1.0}}, "qrels": QRELS}, 422, "run", "no topic has both"),
    ({"run": RUN, "qrels": QRELS, "latency_ms": {"q1": -1}}, 422, "latency_ms", ">= 0"),
])
def test_bad_input_is_a_problem_naming_the_field(client, body, status, path, phrase):
    resp = post(client, body)
    assert resp.status_code == status and resp.mimetype == PROBLEM
    problem = resp.get_json()
    assert problem["status"] == status and problem["title"] and problem["detail"]
    assert path in problem["errors"], problem
    assert any(phrase in sentence for sentence in problem["errors"][path]), problem


def test_malformed_json_is_400(client):
    resp = client.post("/v1/evaluations", data=b'{"run": ', content_type="application/json")
    assert resp.status_code == 400 and resp.mimetype == PROBLEM
    assert "body" in resp.get_json()["errors"]


def test_non_finite_json_numbers_are_rejected(client):
    body = b'{"run": {"q1": {"d1": NaN}}, "qrels": {"q1": {"d1": 1}}}'
    resp = client.post("/v1/evaluations", data=body, content_type="application/json")
    assert resp.status_code == 400 and resp.mimetype == PROBLEM


def test_wrong_content_type_is_415(client):
    resp = client.post("/v1/evaluations", data="x", content_type="text/plain")
    assert resp.status_code == 415 and resp.mimetype == PROBLEM


def test_unacceptable_accept_is_406(client):
    resp = post(client, {"run": RUN, "qrels": QRELS}, headers={"Accept": "image/png"})
    assert resp.status_code == 406 and resp.mimetype == PROBLEM


def test_body_over_the_limit_is_413(client):
    big = {"run": {"q": {f"d{i}": 1.0 for i in range(120_000)}}, "qrels": QRELS}
    resp = client.post("/v1/evaluations", data=json.dumps(big),
                       content_type="application/json")
    assert resp.status_code == 413 and resp.mimetype == PROBLEM


def test_too_many_documents_per_topic_is_413(client):
    run = {"q1": {f"d{i}": float(i) for i in range(2001)}}
    resp = post(client, {"run": run, "qrels": QRELS})
    assert resp.status_code == 413 and "run.q1" in resp.get_json()["errors"]
    assert "2001 documents" in resp.get_json()["detail"]
    # TREC text whose topics interleave: q2's 2001 lines come in blocks of one
    lines = [f"{t} Q0 d{i} 0 {i} r\n" for i in range(2001) for t in ("q2", "q1")][:-1]
    resp = post(client, {"run": "".join(lines), "qrels": QRELS})
    assert resp.status_code == 413 and "run.q2" in resp.get_json()["errors"]
    assert "2001 documents" in resp.get_json()["detail"]
    ok = post(client, {"run": "".join(lines[:3000]), "qrels": QRELS})
    assert ok.status_code == 200


def test_unknown_route_and_method_are_problems(client):
    resp = client.get("/v1/nothing", check=False)
    assert resp.status_code == 404 and resp.mimetype == PROBLEM
    resp = client.get("/v1/evaluations", check=False)
    assert resp.status_code == 405 and resp.mimetype == PROBLEM
    assert "POST" in resp.headers["Allow"]


def test_large_json_bodies_read_as_columns_answer_as_small_ones(client, monkeypatch, require):
    """The compiled reader of large bodies (here forced for every body) gives the same
    numbers, topics, lint and digests as orjson, and its errors are the same 4xx."""
    import cranfield.inputs.json_body
    import service.evaluation_request as evaluation_request
    from cranfield.inputs.io import read_run

    require(cranfield.inputs.json_body.warm_up(),
            "the C extension built (cranfield.inputs._mapscan)")
    run = read_run(DATA / "results.test").to_dict()
    qrels = {t: {d: g for d, g in docs.items()} for t, docs in
             cranfield.read_qrels(DATA / "qrels.test").to_dict().items()}
    body = {"run": run, "qrels": qrels, "measures": ["all_trec"], "details": True}
    small = post(client, body).get_json()
    monkeypatch.setattr(cranfield.inputs.json_body, "FAST_JSON_MIN_BYTES", 0)
    seen = []
    real = evaluation_request.decode_body
    monkeypatch.setattr(evaluation_request, "decode_body",
                        lambda raw: seen.append(real(raw)) or seen[-1])
    # keys in another order: the same content, the same digest
    shuffled = {"run": dict(reversed(list(run.items()))), "qrels": qrels,
                "measures": ["all_trec"], "details": True}
    large = post(client, shuffled).get_json()
    assert seen and seen[-1] is not None  # the fast path did read it
    assert large == small
    bad = post(client, {"run": {"q1": {"d1": 1, "d2": "x"}}, "qrels": qrels})
    assert seen[-1] is None and bad.status_code == 422 and bad.mimetype == PROBLEM
    assert "run.q1.d2" in bad.get_json()["errors"]


def test_micro_aggregation_option_and_new_measures_over_http(client):
    run = {"q1": {"d1": 3.0, "d2": 2.0}, "q2": {f"d{i}": float(-i) for i in range(8)}}
    qrels = {"q1": {"d1": 1}, "q2": {"d0": 1, "d9": 2}}
    body = {"run": run, "qrels": qrels, "measures": ["set_P", "nDCG(gain=exp)@5", "ERR@5"],
            "options": {"aggregation": "micro"}}
    doc = post(client, body).get_json()
    assert doc["aggregate"]["set_P"] == pytest.approx(2 / 10)  # pooled: 2 of 10 retrieved
    keys = {m["key"]: m for m in doc["measures"]}
    assert keys["set_P"]["aggregate"] == "micro"
    assert keys["nDCG(gain=exp)@5"]["canonical"].startswith("ndcg_gd(k=5,gain=exp,")
    # q2: d0 (grade 1) at rank 1; ideal 3 (grade 2) then 1: DCG 1 / (3 + 1/log2(3))
    import math
    assert doc["per_topic"]["q2"]["nDCG(gain=exp)@5"] == pytest.approx(
        1 / (3 + 1 / math.log2(3)))
    bad = post(client, dict(body, options={"aggregation": "median"}))
    assert bad.status_code == 422 and "options.aggregation" in bad.get_json()["errors"]
    bad = post(client, dict(body, measures=["nDCG(gain=cubic)@5"]))
    assert bad.status_code == 422 and "measures[0]" in bad.get_json()["errors"]


def test_precision_recall_curves_in_the_response(client):
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d1": 1.0}}
    qrels = {"q1": {"d1": 1, "d3": 2}, "q2": {"d9": 1}}
    doc = post(client, {"run": run, "qrels": qrels, "measures": ["map"], "curves": True}
               ).get_json()
    curves = doc["curves"]
    assert curves["per_topic"]["q1"]["recall"] == [0.5, 1.0]
    assert curves["per_topic"]["q1"]["precision"] == pytest.approx([1.0, 2 / 3])
    assert curves["per_topic"]["q2"]["interpolated_precision"] == [0.0] * 11
    # q1: 1.0 up to recall 0.5, then 2/3; q2: 0 -> the mean halves them
    assert curves["mean_interpolated_precision"] == pytest.approx(
        [0.5] * 6 + [1 / 3] * 5)
    no_topics = post(client, {"run": run, "qrels": qrels, "measures": ["map"],
                              "curves": True, "per_topic": False}).get_json()
    assert "per_topic" not in no_topics["curves"]
    assert "curves" not in post(client, {"run": run, "qrels": qrels}).get_json()


def test_diversity_measures_over_http(client):
    qrels = "1 1 a 1\n1 2 a 1\n1 2 b 1\n1 1 c 0\n"
    run = "1 Q0 b 1 3 r\n1 Q0 a 2 2 r\n1 Q0 c 3 1 r\n"
    doc = post(client, {"run": run, "qrels": qrels,
                        "measures": ["alpha_nDCG(alpha=0.5)@5", "P_IA@5", "MAP_IA"]}).get_json()
    import math
    assert doc["per_topic"]["1"]["alpha_nDCG(alpha=0.5)@5"] == pytest.approx(
        (1 + 1.5 / math.log2(3)) / (2 + 0.5 / math.log2(3)))
    assert doc["aggregate"]["MAP_IA"] == pytest.approx(0.75)
    spec = {m["key"]: m for m in doc["measures"]}["alpha_nDCG(alpha=0.5)@5"]
    assert spec["family"] == "diversity" and spec["canonical"].startswith(
        "alpha_nDCG(k=5,alpha=0.5")
    bad = post(client, {"run": run, "qrels": {"1": {"a": 1}}, "measures": ["alpha_nDCG@5"]})
    assert bad.status_code == 422 and bad.mimetype == PROBLEM
    listed = client.get("/v1/measures?family=diversity").get_json()["measures"]
    assert {m["name"] for m in listed} >= {"alpha_nDCG", "ERR_IA", "NRBP", "MAP_IA"}
