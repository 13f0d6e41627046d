"""The measures of judgment groups and preferences are registry measures (issue #28): each
registered once with its input, parameters and documentation; their nicknames are the
registry's and expand to exactly trec_eval's lists (measures.c); their parameters are read
by the one measure grammar (``P_avgjg.5,10``, ``Rprec_mult_avgjg.0.50``) and print as
trec_eval prints them; a measure named with judgments of another kind is one refusal,
naming the format, in the library and the CLI.

Expected text below was printed by trec_eval 9.0.8 built unmodified from its sources
(``make``, gcc 12) on the files of tests/data/trec_eval (upstream's test/ folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

import cranfield
from cranfield.cli import main
from cranfield.errors import MeasureError
from cranfield.measures import NICKNAMES, REGISTRY
from cranfield.measures.jg_measures import evaluate_jg
from cranfield.measures.names import parse_measure, resolve
from cranfield.measures.prefs_measures import evaluate_prefs
from cranfield.reports.jg_text import format_jg

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"

# trec_eval's measures.c, verbatim: prefs_names, prefs_off_name, qrels_jg_names
TREC_EVAL_NICKNAMES = {
    "all_prefs": ["runid", "num_q", "prefs_num_prefs_poss", "prefs_num_prefs_ful",
                  "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg",
                  "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
                  "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp",
                  "prefs_pair_imp", "prefs_avgjg_imp"],
    "prefs": ["runid", "num_q", "prefs_num_prefs_poss", "prefs_num_prefs_ful",
              "prefs_num_prefs_ful_ret", "prefs_simp", "prefs_pair", "prefs_avgjg"],
    "qrels_jg": ["runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"],
}
P_CUTS = [5, 10, 15, 20, 30, 100, 200, 500, 1000]
MULTS = [0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0]
COUNTS = ("prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret")

# name -> (input, kind, aggregate, integer, uses_rel_level, parameter (name, default) or None)
TABLE = {
    **{n: ("prefs", "none", "sum" if n in COUNTS else "mean", n in COUNTS, False, None)
       for n in TREC_EVAL_NICKNAMES["all_prefs"][2:]},
    "map_avgjg": ("qrels_jg", "none", "mean", False, True, None),
    "P_avgjg": ("qrels_jg", "cutoffs", "mean", False, True, ("k", P_CUTS)),
    "Rprec_mult_avgjg": ("qrels_jg", "fcutoffs", "mean", False, True, ("multiple", MULTS)),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_each_is_registered_once_with_its_input_and_parameters(name):
    m = REGISTRY[name]
    want_input, kind, aggregate, integer, rel, param = TABLE[name]
    assert (m.input, m.kind, m.aggregate, m.integer, m.uses_rel_level) == \
        (want_input, kind, aggregate, integer, rel)
    assert [(p.name, p.default) for p in m.params] == ([param] if param else [])
    assert m.all_trec == ()  # trec_eval's all_trec does not name them
    assert m.summary and m.section("Formula") and m.section("Reference").startswith(
        f"trec_eval m_{name}.c")
    if m.family != "count":
        assert m.section("0/0"), name
    # in trec_eval's print order: the order of measures.c
    order = [n for n in TABLE]
    assert sorted(order, key=lambda n: REGISTRY[n].order) == order


@pytest.mark.parametrize("nickname, fmt", [("all_prefs", "prefs"), ("prefs", "qrels_prefs"),
                                           ("qrels_jg", "qrels_jg")])
def test_nicknames_are_trec_evals_lists(nickname, fmt):
    assert NICKNAMES[nickname]("trec_eval-9.0.8") == TREC_EVAL_NICKNAMES[nickname]
    assert NICKNAMES[nickname]("trec_eval-10") == TREC_EVAL_NICKNAMES[nickname]
    keys = [i.key for i in resolve([nickname], "trec_eval-10", fmt)]
    want = [k for n in TREC_EVAL_NICKNAMES[nickname] for k in (
        [f"P_avgjg_{c}" for c in P_CUTS] if n == "P_avgjg" else
        [f"Rprec_mult_avgjg_{x:3.2f}" for x in MULTS] if n == "Rprec_mult_avgjg" else [n])]
    assert keys == want
    # trec_eval's all_trec names none of them
    for profile in ("trec_eval-9.0.8", "trec_eval-10"):
        assert not set(NICKNAMES["all_trec"](profile)) & set(TABLE)


@pytest.mark.parametrize("written, keys", [
    ("P_avgjg.5,10", ["P_avgjg_5", "P_avgjg_10"]),
    ("P_avgjg.10,5", ["P_avgjg_5", "P_avgjg_10"]),  # sorted, as trec_eval prints them
    ("P_avgjg_7", ["P_avgjg_7"]),  # the printed form reads back
    ("Rprec_mult_avgjg.0.50", ["Rprec_mult_avgjg_0.50"]),
    ("Rprec_mult_avgjg.0.5,0.25,2", ["Rprec_mult_avgjg_0.25", "Rprec_mult_avgjg_0.50",
                                     "Rprec_mult_avgjg_2.00"]),
    ("Rprec_mult_avgjg_1.20", ["Rprec_mult_avgjg_1.20"]),
    ("map_avgjg", ["map_avgjg"]),
    ("prefs_avgjg_Rnonrel_ret", ["prefs_avgjg_Rnonrel_ret"]),
])
def test_parameters_are_read_by_the_measure_grammar(written, keys):
    assert [i.key for i in parse_measure(written)] == keys


@pytest.mark.parametrize("written, words", [
    ("P_avgjg.0", "parameter k=0 of P_avgjg is out of range"),
    ("P_avgjg.5x", "whole token"),
    ("Rprec_mult_avgjg.-1", "parameter multiple=-1 of Rprec_mult_avgjg is out of range"),
    ("map_avgjg.5", "map_avgjg takes no parameters"),
    ("prefs_simp.1", "prefs_simp takes no parameters"),
])
def test_bad_parameters_are_refused_naming_them(written, words):
    with pytest.raises(MeasureError, match=words):
        parse_measure(written)


# trec_eval 9.0.8: -q -R qrels_jg -m P_avgjg.10,5 -m Rprec_mult_avgjg.0.5,0.25,2 -m num_q
# qrels.123 results.test
JG_PARAMS = """\
P_avgjg_5             \t301\t0.0667
P_avgjg_10            \t301\t0.1667
Rprec_mult_avgjg_0.25 \t301\t0.1854
Rprec_mult_avgjg_0.50 \t301\t0.1716
Rprec_mult_avgjg_2.00 \t301\t0.0734
P_avgjg_5             \t302\t0.6667
P_avgjg_10            \t302\t0.5667
Rprec_mult_avgjg_0.25 \t302\t0.6040
Rprec_mult_avgjg_0.50 \t302\t0.5070
Rprec_mult_avgjg_2.00 \t302\t0.2148
P_avgjg_5             \t303\t0.0000
P_avgjg_10            \t303\t0.0000
Rprec_mult_avgjg_0.25 \t303\t0.0000
Rprec_mult_avgjg_0.50 \t303\t0.0000
Rprec_mult_avgjg_2.00 \t303\t0.0000
num_q                 \tall\t3
P_avgjg_5             \tall\t0.2444
P_avgjg_10            \tall\t0.2444
Rprec_mult_avgjg_0.25 \tall\t0.2631
Rprec_mult_avgjg_0.50 \tall\t0.2262
Rprec_mult_avgjg_2.00 \tall\t0.0961
"""
JG_FLAGS = ["-m", "P_avgjg.10,5", "-m", "Rprec_mult_avgjg.0.5,0.25,2", "-m", "num_q"]


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_jg_parameters_give_trec_evals_bytes(capsys, profile):
    args = ["eval", "--profile", profile, "-q", "-R", "qrels_jg", *JG_FLAGS,
            str(TE / "qrels.123"), str(TE / "results.test")]
    assert main(args) == 0
    assert capsys.readouterr().out == JG_PARAMS
    ev = cranfield.evaluate(TE / "qrels.123", TE / "results.test", JG_FLAGS[1::2],
                            qrels_format="qrels_jg", profile=profile)
    assert format_jg(ev, per_topic=True) == JG_PARAMS
    # the defaults' lines are the nickname's: P_avgjg_5 here is out.test.qrels_jg's
    full = (TE / "out.test.qrels_jg").read_text().splitlines(keepends=True)
    assert [line for line in full if line.startswith(("P_avgjg_5 ", "P_avgjg_10 "))] == \
        [line for line in JG_PARAMS.splitlines(keepends=True)
         if line.startswith(("P_avgjg_5 ", "P_avgjg_10 "))]


def test_runid_and_num_q_print_only_when_named():
    """trec_eval 9.0.8: -R prefs -m prefs_simp prints one line; -m runid adds runid."""
    ev = evaluate_prefs(TE / "prefs.test", TE / "prefs.results.test", ["prefs_simp"])
    assert format_jg(ev) == "prefs_simp            \tall\t0.3881\n"
    ev = evaluate_prefs(TE / "prefs.test", TE / "prefs.results.test",
                        ["prefs_simp", "runid"])
    assert format_jg(ev) == ("runid                 \tall\tSTANDARD\n"
                             "prefs_simp            \tall\t0.3881\n")
    ev = evaluate_jg(TE / "qrels.123", TE / "results.test", ["map_avgjg"])
    assert format_jg(ev) == "map_avgjg             \tall\t0.1130\n"


# a measure named with judgments of another kind: (qrels_format, measures, refused name,
# the format the refusal names)
WRONG_INPUT = [
    ("qrels", ["map_avgjg"], "map_avgjg", "-R qrels_jg (qrels_format='qrels_jg')"),
    ("qrels", ["map", "P_avgjg.5"], "P_avgjg.5", "-R qrels_jg"),
    ("qrels", ["qrels_jg"], "qrels_jg", "-R qrels_jg"),
    ("qrels", ["all_prefs"], "all_prefs", "-R prefs or -R qrels_prefs"),
    ("qrels", ["prefs_simp"], "prefs_simp", "-R prefs or -R qrels_prefs"),
    ("qrels_jg", ["map"], "map", "-R qrels (qrels_format='qrels', the default)"),
    ("qrels_jg", ["prefs_simp"], "prefs_simp", "-R prefs or -R qrels_prefs"),
    ("qrels_jg", ["official"], "official", "-R qrels"),
    ("prefs", ["map_avgjg"], "map_avgjg", "-R qrels_jg"),
    ("prefs", ["nDCG@10"], "nDCG@10", "-R qrels"),
    ("qrels_prefs", ["all_trec"], "all_trec", "-R qrels"),
]


@pytest.mark.parametrize("fmt, measures, name, needs", WRONG_INPUT)
def test_a_measure_of_another_input_is_one_refusal_everywhere(tmp_path, capsys, fmt,
                                                              measures, name, needs):
    judgments = {"qrels": "qrels.test", "qrels_jg": "qrels.123", "prefs": "prefs.test",
                 "qrels_prefs": "qrels.test"}[fmt]
    run = "prefs.results.test" if fmt == "prefs" else "results.test"
    with pytest.raises(MeasureError) as err:
        resolve(measures, "trec_eval-10", fmt)
    message = str(err.value)
    assert err.value.name == name and needs in message and f"(-R {fmt})" in message
    with pytest.raises(MeasureError) as lib:
        cranfield.evaluate(TE / judgments, TE / run, measures, qrels_format=fmt)
    assert str(lib.value) == message
    args = ["eval", "-R", fmt] + [a for m in measures for a in ("-m", m)]
    assert main([*args, str(TE / judgments), str(TE / run)]) != 0
    assert message in capsys.readouterr().err
