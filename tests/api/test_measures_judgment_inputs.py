"""GET /v1/measures lists the measures of judgment groups and preferences from the one
registry, with the judgments each is computed from (``input``, ``qrels_formats``); their
nicknames and parameters resolve as trec_eval prints them; a measure of another input is
a 422 naming it, with the engine's words. Every response is checked against openapi.yaml
(the contract client)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cranfield

P_CUTS = [5, 10, 15, 20, 30, 100, 200, 500, 1000]
MULTS = [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
PREFS = ["prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret",
         "prefs_simp", "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret",
         "prefs_pair_ret", "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp",
         "prefs_pair_imp", "prefs_avgjg_imp"]

# name -> (input, qrels_formats, aggregate, parameters as (name, default))
TABLE = {
    **{n: ("prefs", ["prefs", "qrels_prefs"], "sum" if "_num_" in n else "mean", [])
       for n in PREFS},
    "map_avgjg": ("qrels_jg", ["qrels_jg"], "mean", []),
    "P_avgjg": ("qrels_jg", ["qrels_jg"], "mean", [("k", P_CUTS)]),
    "Rprec_mult_avgjg": ("qrels_jg", ["qrels_jg"], "mean", [("multiple", MULTS)]),
    "map": ("qrels", ["qrels"], "mean", []),
    "runid": ("any", ["qrels", "qrels_jg", "prefs", "qrels_prefs"], "runid", []),
    "num_q": ("any", ["qrels", "qrels_jg", "prefs", "qrels_prefs"], "num_q", []),
}


@pytest.fixture
def listed(client):
    resp = client.get("/v1/measures")
    assert resp.status_code == 200
    return {m["name"]: m for m in resp.get_json()["measures"]}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_the_list_shows_each_measures_input(listed, name):
    m = listed[name]
    input_, formats, aggregate, params = TABLE[name]
    assert (m["input"], m["qrels_formats"], m["aggregate"]) == (input_, formats, aggregate)
    assert [(p["name"], p["default"]) for p in m["parameters"]] == params
    assert m["reference"] and m["formula"]
    if input_ in ("prefs", "qrels_jg"):
        assert m["in_all_trec"] == [] and m["reference"].startswith(f"trec_eval m_{name}.c")
        assert m["spellings"] == [{"name": name, "tool": "trec_eval"}]


def test_every_listed_measure_has_an_input(listed):
    assert {m["input"] for m in listed.values()} == {"qrels", "qrels_jg", "prefs", "any"}
    assert [n for n, m in listed.items() if m["input"] in ("prefs", "qrels_jg")] == \
        PREFS + ["map_avgjg", "P_avgjg", "Rprec_mult_avgjg"]
    assert list(listed) == sorted(cranfield.REGISTRY, key=lambda n: cranfield.REGISTRY[n].order)


@pytest.mark.parametrize("name, keys", [
    ("qrels_jg", ["runid", "num_q", "map_avgjg", *[f"P_avgjg_{c}" for c in P_CUTS],
                  *[f"Rprec_mult_avgjg_{x:3.2f}" for x in MULTS]]),
    ("all_prefs", ["runid", "num_q", *PREFS]),
    ("prefs", ["runid", "num_q", *PREFS[:6]]),
    ("P_avgjg.5,10", ["P_avgjg_5", "P_avgjg_10"]),
    ("P_avgjg_20", ["P_avgjg_20"]),
    ("Rprec_mult_avgjg.0.50", ["Rprec_mult_avgjg_0.50"]),
    ("Rprec_mult_avgjg.2,0.25", ["Rprec_mult_avgjg_0.25", "Rprec_mult_avgjg_2.00"]),
])
def test_nicknames_and_parameters_resolve_as_trec_eval_prints_them(client, name, keys):
    resp = client.get(f"/v1/measures/{name}", query_string={"profile": "trec_eval-10"})
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert [i["key"] for i in doc["instances"]] == keys
    inputs = {m["name"]: m["input"] for m in doc["measures"]}
    assert set(inputs.values()) <= {"any", "prefs", "qrels_jg"}


def test_canonical_names_carry_the_parameter(client):
    doc = client.get("/v1/measures/P_avgjg.5").get_json()
    assert doc["instances"] == [{"key": "P_avgjg_5", "measure": "P_avgjg",
                                 "canonical": "P_avgjg(k=5,rel=1,profile=trec_eval-9.0.8)"}]
    doc = client.get("/v1/measures/Rprec_mult_avgjg.0.5").get_json()
    assert doc["instances"][0]["canonical"] == \
        "Rprec_mult_avgjg(multiple=0.5,rel=1,profile=trec_eval-9.0.8)"


@pytest.mark.parametrize("measures, index, needs", [
    (["map", "map_avgjg"], 1, "map_avgjg is computed from judgment groups: give them with "
                              "-R qrels_jg (qrels_format='qrels_jg'), not relevance "
                              "judgments (-R qrels)"),
    (["qrels_jg"], 0, "map_avgjg is computed from judgment groups"),
    (["P_avgjg.5,10"], 0, "P_avgjg is computed from judgment groups"),
    (["P", "all_prefs"], 1, "prefs_num_prefs_poss is computed from preference judgments: "
                            "give them with -R prefs or -R qrels_prefs (qrels_format='prefs' "
                            "or qrels_format='qrels_prefs'), not relevance judgments "
                            "(-R qrels)"),
])
def test_a_measure_of_other_judgments_is_422_naming_it(client, measures, index, needs):
    resp = client.post("/v1/evaluations", json={
        "run": {"q1": {"d1": 2.0, "d2": 1.0}}, "qrels": {"q1": {"d1": 1}},
        "measures": measures})
    assert resp.status_code == 422 and resp.mimetype == "application/problem+json"
    errors = resp.get_json()["errors"]
    assert list(errors) == [f"measures[{index}]"]
    assert needs in errors[f"measures[{index}]"][0]
    # the engine's own words, as the library and the CLI say them
    with pytest.raises(cranfield.MeasureError) as err:
        cranfield.evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 2.0, "d2": 1.0}}, measures)
    assert err.value.reason in errors[f"measures[{index}]"][0]


TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
# trec_eval 9.0.8 (built from its sources): -R qrels_jg -m P_avgjg.10,5
# -m Rprec_mult_avgjg.0.5,0.25,2 qrels.123 results.test, the summary lines
JG_ALL = {"P_avgjg_5": "0.2444", "P_avgjg_10": "0.2444", "Rprec_mult_avgjg_0.25": "0.2631",
          "Rprec_mult_avgjg_0.50": "0.2262", "Rprec_mult_avgjg_2.00": "0.0961"}


def test_parameters_of_judgment_group_measures_through_the_api(client):
    resp = client.post("/v1/evaluations", json={
        "run": (TE / "results.test").read_text(), "qrels": (TE / "qrels.123").read_text(),
        "measures": ["P_avgjg.10,5", "Rprec_mult_avgjg.0.5,0.25,2"],
        "options": {"qrels_format": "qrels_jg"}})
    assert resp.status_code == 200, resp.get_json()
    aggregate = resp.get_json()["aggregate"]
    assert list(aggregate) == list(JG_ALL)  # no runid / num_q: not named
    assert {k: f"{v:.4f}" for k, v in aggregate.items()} == JG_ALL


@pytest.mark.parametrize("fmt, measures, index, needs", [
    ("qrels_jg", ["map"], 0, "map is computed from relevance judgments: give them with "
                             "-R qrels (qrels_format='qrels', the default), not judgment "
                             "groups (-R qrels_jg)"),
    ("qrels_jg", ["map_avgjg", "prefs_simp"], 1, "prefs_simp is computed from preference "
                                                 "judgments"),
    ("prefs", ["P_avgjg.5"], 0, "P_avgjg is computed from judgment groups: give them with "
                                "-R qrels_jg (qrels_format='qrels_jg'), not preference "
                                "judgments (-R prefs)"),
    ("qrels_prefs", ["prefs", "nDCG@10"], 1, "ndcg_cut is computed from relevance "
                                             "judgments"),
])
def test_a_measure_of_other_judgments_than_qrels_format_is_422(client, fmt, measures, index,
                                                                needs):
    qrels = (TE / {"qrels_jg": "qrels.123", "prefs": "prefs.test",
                   "qrels_prefs": "qrels.test"}[fmt]).read_text()
    resp = client.post("/v1/evaluations", json={
        "run": (TE / "results.test").read_text(), "qrels": qrels, "measures": measures,
        "options": {"qrels_format": fmt}})
    assert resp.status_code == 422 and resp.mimetype == "application/problem+json"
    errors = resp.get_json()["errors"]
    assert list(errors) == [f"measures[{index}]"] and needs in errors[f"measures[{index}]"][0]
    with pytest.raises(cranfield.MeasureError) as err:  # the library's words
        cranfield.evaluate(qrels, (TE / "results.test").read_text(), measures,
                           qrels_format=fmt)
    assert err.value.reason in errors[f"measures[{index}]"][0]
