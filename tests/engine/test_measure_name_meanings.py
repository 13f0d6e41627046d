"""Issue #15, measure names: ir_measures' names mean ir_measures' numbers (hand-worked cases;
the per-topic oracle comparison is test_ir_measures_oracle.py), ranx's spellings resolve,
suggestions name what the user most likely meant, repeating a measure with other parameters
evaluates all of them (also through compare and the CLI), and ``cranfield measures`` prints
the registry with the documents of GET /v1/measures."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import cranfield
from cranfield import MeasureError, parse_measure
from cranfield.cli import main
from cranfield.measures.names import resolve, suggest

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS, TEST, TRUNC = (str(DATA / n) for n in ("qrels.test", "results.test", "results.trunc"))


def one(run, qrels, name, **options):
    ev = cranfield.evaluate({"q": qrels}, {"q": run}, [name], **options)
    return ev.per_topic["q"][ev.instances[0].key]


def ranked(grades):
    """A one-topic run whose documents are ranked in this order, with these grades (None: not
    in the qrels)."""
    run = {f"d{i:02d}": float(100 - i) for i in range(len(grades))}
    qrels = {f"d{i:02d}": g for i, g in enumerate(grades) if g is not None}
    return run, qrels


# ---- the numbers the issue names ------------------------------------------------------------

def test_err_at_k_is_gdevals_on_binary_qrels():
    """Binary qrels: R = (2^1 - 1)/2^4 = 1/16 for every relevant document (gdeval's g_max 4),
    not 1/2 (the topic's own highest grade, 1, which Cranfield used before)."""
    run, qrels = ranked([1, 0, 1])
    expected = 1 / 16 + (15 / 16) * (1 / 16) / 3
    assert one(run, qrels, "ERR@20") == pytest.approx(expected, abs=1e-15)
    assert one(run, qrels, "ERR") == pytest.approx(expected, abs=1e-15)
    assert one(run, qrels, "ERR(topic_max=true)@20") == pytest.approx(0.5 + 0.25 / 3,
                                                                       abs=1e-15)


def test_judged_counts_a_negative_grade_as_judged():
    run, qrels = ranked([1, -2, None, -1, 0])
    assert one(run, qrels, "Judged@5") == pytest.approx(4 / 5)
    assert one(run, qrels, "Judged") == pytest.approx(4 / 5)
    assert one(run, qrels, "Judged@2") == 1.0
    # trec_eval 10's unj keeps trec_eval's meaning: -2 and -1 are unjudged there
    ev = cranfield.evaluate({"q": qrels}, {"q": run}, ["unj.5"], profile="trec_eval-10")
    assert ev.per_topic["q"]["unj_5"] == pytest.approx(3 / 5)


def test_rbp_is_ir_measures_rbp_and_rbp_stays_trec_evals():
    run, qrels = ranked([1, 0, 2])
    horizon = 1 - 0.8 ** 1000
    assert one(run, qrels, "RBP(rel=1)") == pytest.approx(0.2 * (1 + 0.8 ** 2) / horizon)
    assert one(run, qrels, "RBP(rel=2)") == pytest.approx(0.2 * 0.8 ** 2 / horizon)
    # graded: grade / the topic's largest grade
    assert one(run, qrels, "RBP") == pytest.approx(0.2 * (0.5 + 0.8 ** 2) / horizon)
    assert one(run, qrels, "RBP@2") == pytest.approx(0.2 * 0.5 / horizon)
    ev = cranfield.evaluate({"q": qrels}, {"q": run}, ["rbp"], profile="trec_eval-10")
    assert ev.per_topic["q"]["rbp"] == pytest.approx(0.1 * (0.5 + 0.9 ** 2))


def test_accuracy_is_ir_measures_and_set_accuracy_the_contingency_table():
    """Relevant at ranks 1 and 3 of 4: non-relevant above them 0 and 1, of 2 non-relevant:
    1 - (0 + 1) / (2 * 2) = 0.75."""
    run, qrels = ranked([1, 0, 1, None])
    assert one(run, qrels, "Accuracy") == pytest.approx(0.75)
    assert one(run, qrels, "Accuracy@3") == pytest.approx(1 - 1 / 2)
    assert one(run, qrels, "SetAccuracy(N=10)") == pytest.approx((2 + 6) / 10)


def test_set_f_beta_is_trec_evals_parameter_as_in_ir_measures():
    run, qrels = ranked([1, 0, None, None, 1])
    qrels.update({"x1": 1, "x2": 1})  # R = 4, P = 2/5, R' = 1/2
    p, r = 2 / 5, 1 / 2
    assert one(run, qrels, "SetF(beta=2)") == pytest.approx(3 * p * r / (2 * p + r))
    assert one(run, qrels, "SetF(beta=2)") == one(run, qrels, "set_F.2")
    assert one(run, qrels, "F(beta=2)") == one(run, qrels, "set_F.4")


# ---- ir_measures' names and ranx's spellings --------------------------------------------------

@pytest.mark.parametrize("name, same_as", [
    ("AP_IA", "MAP_IA"), ("BPref", "Bpref"), ("RPrec", "Rprec"), ("Precision@5", "P@5"),
    ("Recall@100", "R@100"), ("SetAP", "set_map"), ("SetRelP", "set_relative_P"),
    ("SetP(relative=True)", "set_relative_P"), ("NumRet(rel=1)", "num_rel_ret"),
    ("StRecall@10", "strec@10"), ("α_nDCG@20", "alpha_nDCG@20"),
    ("nDCG(dcg='exp-log2')@10", "nDCG(gain=exp)@10"), ("nDCG(dcg=log2)@10", "ndcg_cut.10"),
    ("nDCG(gains={1:3,2:9})", "ndcg.1=3,2=9"), ("MAP", "map"), ("MRR@10", "RR@10"),
    ("P(judged_only=False)@5", "P.5"),
    # ranx
    ("ndcg@10", "nDCG@10"), ("ndcg_burges@10", "nDCG(gain=exp)@10"), ("dcg@5", "DCG@5"),
    ("dcg_burges@5", "DCG(gain=exp)@5"), ("map@100", "AP@100"), ("mrr", "recip_rank"),
    ("mrr@10", "RR@10"), ("recall@100", "recall.100"), ("precision@5", "P.5"),
    ("precision", "set_P"), ("hit_rate@5", "success.5"), ("f1@10", "F@10"), ("f1", "F"),
    ("r-precision", "Rprec"), ("r_precision", "Rprec"),
    # ranx's hits is a mean over topics (num_rel_ret sums) and its rbp weighs by the grade
    # (issue #28): ranx's own measures, tested in test_peer_spellings.py
    ("hits", "hits"), ("rbp.95", "ranx_rbp(p=0.95,rel=1)"), ("precision@5-l2", "P(rel=2)@5"),
])
def test_names_resolve_to_the_measure_they_mean(name, same_as):
    (ours,) = parse_measure(name)
    (theirs,) = parse_measure(same_as)
    assert (ours.measure, ours.value, ours.level(1)) == \
        (theirs.measure, theirs.value, theirs.level(1))
    assert ours.key == name.replace(" ", "")


@pytest.mark.parametrize("name", ["map", "recall", "ndcg", "dcg", "bpref", "rbp"])
def test_a_ranx_spelling_that_is_a_trec_eval_name_keeps_trec_evals_meaning(name):
    assert {i.measure.name for i in parse_measure(name)} == {name}


def test_ranx_and_ir_measures_spellings_give_the_same_numbers():
    names = ["nDCG@10", "ndcg@10", "AP@100", "map@100", "R@1000", "recall@1000", "RR",
             "mrr", "Success@5", "hit_rate@5", "P@5", "precision@5", "Rprec", "r-precision"]
    ev = cranfield.evaluate(QRELS, TEST, names)
    for a, b in zip(names[::2], names[1::2], strict=True):
        assert ev.aggregate[a] == ev.aggregate[b], (a, b)


def test_judged_only_true_is_refused_with_the_evaluation_option_named():
    with pytest.raises(MeasureError, match="judged_only is an option of the whole evaluation"):
        parse_measure("P(judged_only=True)@5")


@pytest.mark.parametrize("typed, meant", [
    ("ndcg_cut10", "ndcg_cut.10"), ("ndgc@10", "nDCG@10"), ("recal@100", "R@100"),
    ("NDGC@10", "NDCG@10"), ("mapp", "map"), ("Judge@10", "Judged@10"),
    ("precison@5", "Precision@5"), ("map_cut10", "map_cut.10"), ("iprec@0.5", "IPrec@0.5"),
])
def test_the_first_suggestion_is_the_name_most_likely_meant(typed, meant):
    with pytest.raises(MeasureError) as info:
        parse_measure(typed)
    assert info.value.suggestions[0] == meant
    assert suggest(typed)[0] == meant


def test_every_suggestion_resolves():
    for typed in ["ndcg_cut10", "mapp", "P@", "recal", "ERR_IA@", "xyz@10", "Sucess@5"]:
        assert suggest(typed), typed  # something is suggested, and each suggestion resolves
        for s in suggest(typed):
            parse_measure(s)


# ---- repeating a measure with other parameters -------------------------------------------------

def test_repeating_a_measure_with_other_parameters_evaluates_all_of_them():
    keys = [i.key for i in resolve(["P.10", "P.5", "set_F.0.5", "set_F.2", "ndcg.1=3",
                                    "ndcg.2=9"], "trec_eval-9.0.8")]
    assert keys == ["P_5", "P_10", "ndcg_1=3", "ndcg_2=9", "set_F_0.5", "set_F_2"]
    assert [i.key for i in resolve(["P", "P.5"], "trec_eval-9.0.8")] == ["P_5"]
    assert [i.key for i in resolve(["P.5", "P_5", "P.5,10"], "trec_eval-9.0.8")] == \
        ["P_5", "P_10"]
    ev = cranfield.evaluate(QRELS, TEST, ["P.10", "P.5"])
    assert set(ev.aggregate) == {"P_5", "P_10"}


def test_compare_with_a_repeated_family_and_a_gate_on_another_parameter():
    from cranfield.compare.comparison import compare
    from cranfield.compare.gate import parse_gate

    runs = {"test": TEST, "trunc": TRUNC}
    doc = compare(QRELS, runs, ["P.10", "P.5"], complete_topics=True, n_permutations=100,
                  n_samples=100)
    assert [m["key"] for m in doc["measures"]] == ["P_10", "P_5"]
    doc = compare(QRELS, runs, ["P.20"], gate=[parse_gate("P.10:0.5")], complete_topics=True,
                  n_permutations=100, n_samples=100)
    # the gate's verdict on 3 topics is the statistics' business; here: P_10 was evaluated
    # and gated (before: "measure 'P_10' was not evaluated")
    assert {m["key"] for m in doc["measures"]} == {"P_20", "P_10"}
    assert "verdict" in doc["gate"]


def test_cli_compare_with_a_repeated_family(capsys):
    code = main(["compare", "--format", "json", "-c", "-m", "P.10", "-m", "P.5", "--gate",
                 "P.20:0.5", QRELS, TEST, TRUNC])
    out = capsys.readouterr()
    assert "not evaluated" not in out.err and out.out, (code, out.err)
    assert [m["key"] for m in json.loads(out.out)["measures"]] == ["P_10", "P_5", "P_20"]


# ---- cranfield measures ---------------------------------------------------------------------

def test_cranfield_measures_lists_the_registry(capsys):
    assert main(["measures"]) == 0
    out = capsys.readouterr().out
    for name in ("map", "ndcg_cut", "BPM", "Compat", "alpha_nDCG", "SetAccuracy"):
        assert any(line.split()[0] == name for line in out.splitlines() if line.strip())
    assert main(["measures", "--family", "diversity"]) == 0
    families = {line.split()[1] for line in capsys.readouterr().out.splitlines()
                if line.strip() and not line.startswith("`")}
    assert families == {"diversity"}


def test_cranfield_measures_name_describes_what_a_name_stands_for(capsys):
    assert main(["measures", "ndcg@10"]) == 0
    out = capsys.readouterr().out
    assert "ndcg_cut(k=10,discount=log2,profile=trec_eval-9.0.8)" in out
    assert "Järvelin" in out and "0/0:" in out and "IDCG@k = 0 gives 0" in out
    assert main(["measures", "recal@100"]) == 1
    assert "did you mean 'R@100'" in capsys.readouterr().err
    assert main(["measures", "--family", "set", "P@5"]) == 1


def test_cranfield_measures_json_is_get_v1_measures(tmp_path):
    import service.app as service  # the service must import: no skip
    # results in a SQLite file of the test's own, never the repository's instance/
    client = service.create_app({"TESTING": True, "DATABASE_URL":
                                 f"sqlite:///{tmp_path / 'results.db'}"}).test_client()
    import contextlib
    import io

    for argv, path in [(["measures", "--format", "json"], "/v1/measures"),
                       (["measures", "--format", "json", "--family", "graded"],
                        "/v1/measures?family=graded"),
                       (["measures", "--format", "json", "nDCG(dcg=exp-log2)@20"],
                        "/v1/measures/nDCG(dcg=exp-log2)@20")]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(argv) == 0
        assert json.loads(buf.getvalue()) == client.get(path).get_json(), argv


def test_every_registered_measure_documents_its_formula_zero_rule_and_reference():
    for name, m in cranfield.REGISTRY.items():
        if m.family in ("info", "count") or not m.per_topic:
            continue
        assert m.section("Formula") and m.section("Reference"), name
        assert "0/0:" not in m.section("Formula"), name
    for name in ("BPM", "SDCG", "NERR8", "NERR9", "NERR10", "NERR11", "INST", "INSQ",
                 "Compat", "Accuracy", "SetAccuracy", "RBP", "Judged", "ERR"):
        assert cranfield.REGISTRY[name].section("0/0"), name


def test_cwl_measures_refuse_inconsistent_gain_ranges():
    with pytest.raises(MeasureError, match=r"min_rel \(3\) must be less than max_rel \(3\)"):
        parse_measure("INST(min_rel=3,max_rel=3)")
    with pytest.raises(MeasureError, match="needs the parameter max_rel"):
        parse_measure("INSQ")


def test_diversity_without_a_cutoff_needs_a_positive_alpha():
    with pytest.raises(MeasureError, match="alpha must be > 0"):
        parse_measure("ERR_IA(alpha=0)")
    assert parse_measure("ERR_IA(alpha=0)@10")
    assert math.isfinite(parse_measure("alpha_DCG(alpha=0.01)")[0].value["alpha"])
