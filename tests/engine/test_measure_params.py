"""Measure parameters are checked against the range each measure declares at registration
(issue #14): out of range, or a parameter the measure does not take, is a MeasureError naming
the measure, the parameter and the range, on every path (library, CLI, API). Every value in
range works, int64's extremes included."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cranfield
from cranfield import MeasureError
from cranfield.cli import main
from cranfield.inputs.grammar import WEIGHT_LIMIT
from cranfield.measures import REGISTRY
from cranfield.measures.names import resolve
from cranfield.measures.registry import INT64_MAX, INT64_MIN

M = INT64_MAX
QRELS = "1 0 d1 2\n1 0 d2 0\n1 0 d3 1\n1 0 d4 -1\n2 0 e1 1\n"
RUN = "1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n1 Q0 x 3 1 r\n1 Q0 d4 4 0.5 r\n2 Q0 e1 1 1 r\n"


@pytest.mark.parametrize("name, message", [
    # the three of the issue: RBP(p=2) gave a negative RBP, the other two were accepted
    ("RBP(p=2)", "measure 'RBP(p=2)': parameter p=2 of RBP is out of range: it must be a "
                 "finite number, p >= 0 and <= 1"),
    ("iprec_at_recall.-1", "measure 'iprec_at_recall.-1': parameter recall=-1 of "
                           "iprec_at_recall is out of range: it must be a finite number, "
                           "recall >= 0 and <= 1"),
    ("F(beta=nan)", "measure 'F(beta=nan)': parameter beta=nan of F is out of range: it must "
                    "be a finite number, beta >= 0 and <= 1e+100"),
    # the same checks on the other ways of writing parameters
    ("rbp.p=1.5", "parameter p=1.5 of rbp is out of range"),
    ("rbp_resid.p=-0.1", "parameter p=-0.1 of rbp_resid is out of range"),
    ("IPrec@1.5", "parameter recall=1.5 of iprec_at_recall is out of range"),
    ("iprec_at_recall_2.00", "parameter recall=2 of iprec_at_recall is out of range"),
    ("11pt_avg.0,0.5,2", "parameter recall=2 of 11pt_avg is out of range"),
    ("Rprec_mult.-0.5", "parameter multiple=-0.5 of Rprec_mult is out of range"),
    ("set_F.-1", "parameter beta_squared=-1 of set_F is out of range"),
    ("set_F.nan", "parameter beta_squared=nan of set_F is out of range"),
    ("SetF(beta=inf)", "parameter beta=inf of set_F is out of range"),
    ("SetF(beta=-2)", "parameter beta=-2 of set_F is out of range"),
    ("utility.1,nan,0,0", "parameter coefficients=nan of utility is out of range"),
    ("utility.1,-1,0,1e101", "parameter coefficients=1e+101 of utility is out of range"),
    ("ndcg.1=inf", "parameter gains[1]=inf of ndcg is out of range"),
    ("ndcg.-1=2", "parameter grade=-1 of ndcg is out of range: it must be grade=value pairs "
                  "with grades >= 0 and <= 9223372036854775807 and values >= -1e+100 and "
                  "<= 1e+100"),
    ("relstring.0", "parameter length=0 of relstring is out of range: it must be a positive "
                    "integer, length >= 1 and <= 9223372036854775807"),
    (f"P.{M + 1}", f"parameter k={M + 1} of P is out of range"),
    (f"P@{M + 1}", f"parameter k={M + 1} of P is out of range"),
    ("P_0", "parameter k=0 of P is out of range"),
    ("nDCG(b=1)@10", "parameter b=1 of ndcg_gd is out of range: it must be a finite number, "
                     "b >= 1.0000001"),
    ("ERR(max_grade=0)@10", "parameter max_grade=0 of ERR is out of range"),
    (f"Fallout(N={M + 1})", f"parameter N={M + 1} of Fallout is out of range"),
    ("alpha_nDCG(alpha=1.5)@10", "parameter alpha=1.5 of alpha_nDCG is out of range"),
    ("NRBP(beta=-1)", "parameter beta=-1 of NRBP is out of range"),
    ("alpha_nDCG@1000001", "parameter k=1000001 of alpha_nDCG is out of range: it must be a "
                           "positive integer, k >= 1 and <= 1000000"),
    (f"P(rel={M + 1})@5", f"parameter rel={M + 1} of P is out of range: it must be an "
                          f"integer, rel >= {INT64_MIN} and <= {M}"),
])
def test_out_of_range_parameters_are_refused(name, message):
    with pytest.raises(MeasureError) as info:
        resolve([name], "trec_eval-10")
    assert message in str(info.value)
    assert info.value.name == name


def test_rbp_p_2_no_longer_gives_a_negative_number_on_any_path(tmp_path, capsys):
    # before: RBP(p=2) evaluated to (1 - 2) * sum 2^(i-1) g_i < 0
    with pytest.raises(MeasureError, match=r"p=2 of RBP is out of range"):
        cranfield.evaluate(QRELS, RUN, ["RBP(p=2)"])
    (tmp_path / "q").write_text(QRELS)
    (tmp_path / "r").write_text(RUN)
    code = main(["eval", "-m", "RBP(p=2)", str(tmp_path / "q"), str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 1
    assert err == ("cranfield: measure 'RBP(p=2)': parameter p=2 of RBP is out of range: it "
                   "must be a finite number, p >= 0 and <= 1\n")


@pytest.mark.parametrize("name, message", [
    ("ERR(rel=2)@5", "measure 'ERR(rel=2)@5': ERR takes no parameter rel: it does not use a "
                     "relevance level"),
    ("SDCG(rel=2,max_rel=3)@10", "measure 'SDCG(rel=2,max_rel=3)@10': SDCG takes no "
                                 "parameter rel: it does not use a relevance level"),
    ("nDCG(rel=2)@10", "ndcg_cut takes no parameter rel"),
    ("nDCG(rel=2,gain=exp)@10", "ndcg_gd takes no parameter rel"),
    ("Compat(rel=1)", "Compat takes no parameter rel"),
    ("Judged(rel=1)@10", "Judged takes no parameter rel"),
    ("rbp.p=0.5,rel=2", "rbp has no parameter 'rel' (it takes p)"),
])
def test_rel_is_refused_by_measures_without_a_relevance_level(name, message):
    # before: accepted and silently ignored (ERR(rel=2)@5 equalled ERR@5)
    with pytest.raises(MeasureError) as info:
        cranfield.evaluate(QRELS, RUN, [name])
    assert message in str(info.value)


def test_rel_still_sets_the_level_of_measures_that_use_one():
    ev = cranfield.evaluate(QRELS, RUN, ["P(rel=0)@5", "P@5", "F(rel=2)", "F", "AP(rel=2)",
                                         "AP"])
    t1 = ev.per_topic["1"]  # retrieved: d1 (grade 2), d2 (0), x (not judged), d4 (-1)
    assert t1["P@5"] == pytest.approx(1 / 5)
    assert t1["P(rel=0)@5"] == pytest.approx(2 / 5)  # rel=0 was read as "no rel=" before
    assert t1["AP"] == pytest.approx(1 / 2) and t1["AP(rel=2)"] == pytest.approx(1.0)
    assert t1["F"] == pytest.approx(1 / 3) and t1["F(rel=2)"] == pytest.approx(2 / 5)
    assert ev.measures["P(rel=0)@5"]["canonical"] == "P(k=5,rel=0,profile=trec_eval-9.0.8)"


def test_every_declared_parameter_refuses_nan_and_values_past_int64():
    """Every parameter of every measure has a range: numbers must be finite, integers int64."""
    for measure in REGISTRY.values():
        for p in measure.params:
            if p.type in ("string", "enum"):
                continue
            bad = {0: math.nan} if p.key is not None else \
                (M + 1 if p.type.startswith("integer") else math.nan)
            with pytest.raises(MeasureError):
                p.check(bad, measure.name, measure.name)
            if p.type.startswith("integer"):
                assert INT64_MIN <= p.minimum <= p.maximum <= M, (measure.name, p.name)


def test_the_declared_ranges_are_what_get_v1_measures_shows(tmp_path):
    import service.app as service  # the service must import: no skip
    # results in a SQLite file of the test's own, never the repository's instance/
    client = service.create_app({"TESTING": True, "DATABASE_URL":
                                 f"sqlite:///{tmp_path / 'results.db'}"}).test_client()
    doc = client.get("/v1/measures").get_json()
    params = {m["name"]: {p["name"]: p for p in m["parameters"]} for m in doc["measures"]}
    assert (params["rbp"]["p"]["minimum"], params["rbp"]["p"]["maximum"]) == (0, 1)
    assert (params["P"]["k"]["minimum"], params["P"]["k"]["maximum"]) == (1, M)
    assert params["iprec_at_recall"]["recall"]["maximum"] == 1
    assert params["11pt_avg"]["recall"]["maximum"] == 1
    assert params["utility"]["coefficients"]["maximum"] == WEIGHT_LIMIT
    assert params["alpha_nDCG"]["k"]["maximum"] == 10 ** 6
    # and the API refuses an out-of-range parameter with the engine's message (422)
    resp = client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS,
                                                "measures": ["RBP(p=2)"]})
    assert resp.status_code == 422
    assert "parameter p=2 of RBP is out of range" in resp.get_json()["detail"]


def test_extreme_in_range_parameters_work_without_overflow():
    names = [f"P.{M}", f"recall.{M}", f"ndcg_cut.{M}", f"map_cut.{M}", f"relative_P.{M}",
             f"success.{M}", f"unj.{M}", f"relstring.{M}", "Rprec_mult.1e300",
             f"ndcg.{M}=1e100,0=-1e100", "rbp.p=1", "rbp_resid.p=1", "RBP(p=0)", f"RR@{M}",
             f"Judged@{M}", f"nDCG(gain=exp,discount=jk,b=1e300)@{M}", f"CG@{M}",
             f"ERR(max_grade={M})@{M}", f"F(beta=1e100)@{M}", f"Fallout(N={M})",
             f"Specificity(N={M})", f"NPV(N={M})", f"SetAccuracy(N={M})", f"AP(norm=min)@{M}",
             f"P(rel={M})@5", f"P(rel={INT64_MIN})@5", "utility.1e100,-1e100,1e100,-1e100",
             "set_F.1e300", "SetF(beta=1e100)"]
    for profile in ("trec_eval-9.0.8", "trec_eval-10"):
        ev = cranfield.evaluate(QRELS, RUN, names, profile=profile, collection_size=M)
        for key, v in ev.aggregate.items():
            assert isinstance(v, str) or math.isfinite(v), (profile, key, v)
    t1 = ev.per_topic["1"]  # retrieved: d1 (grade 2), d2 (0), x (not judged), d4 (-1)
    assert t1[f"P_{M}"] == 1 / float(M)
    assert t1[f"relstring_{M}"] == "20-."
    assert t1[f"P(rel={M})@5"] == 0.0 and t1[f"P(rel={INT64_MIN})@5"] == 3 / 5
    assert t1[f"recall_{M}"] == 0.5
    assert t1["rbp_p=1"] == 0.0 and t1["RBP(p=0)"] == 1.0  # p = 0: the top document's gain
    # a multiple past any rank: c clipped below 2^62 (no undefined cast), not garbage
    assert t1[next(k for k in t1 if k.startswith("Rprec_mult_"))] == 1 / 2.0 ** 62


def test_extreme_diversity_cutoff_and_weights_work():
    qrels = cranfield.read_qrels("1 1 d1 1\n1 2 d1 1\n1 1 d2 0\n1 3 d3 1\n", diversity=True)
    run = "1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n1 Q0 d3 3 1 r\n"
    names = ["alpha_nDCG(alpha=0)@1000000", "alpha_DCG(alpha=1)@1000000", "P_IA@1000000",
             "NRBP(alpha=0,beta=0)", "nNRBP(alpha=1,beta=1)", "alpha_nDCG@20"]
    ev = cranfield.evaluate(qrels, run, names, depth=M)
    t = ev.per_topic["1"]
    # three subtopics; the run covers 2 with d1 and the third with d3: the ideal is d1, d3
    assert t["P_IA@1000000"] == pytest.approx(3 / (1000000 * 3))
    assert t["NRBP(alpha=0,beta=0)"] == pytest.approx(2 / 3)  # only rank 1 counts: g = 2
    assert np.isfinite(t["alpha_nDCG(alpha=0)@1000000"])
    assert t["alpha_nDCG@20"] == cranfield.evaluate(qrels, run, ["alpha_nDCG@20"]
                                                    ).per_topic["1"]["alpha_nDCG@20"]
