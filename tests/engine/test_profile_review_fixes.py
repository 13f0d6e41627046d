"""The review of the ``cranfield`` profile (issue #31, notes review_profile.md), engine and
command line side. One rule everywhere: qrels that declare real gains run under ``cranfield``
when no profile is named; under a named trec_eval profile the declaration changes nothing.

- diversity measures follow it too, for a declaring :class:`Qrels` as for an inline
  declaration (finding 3): under a trec_eval profile the grades are read as integers (the
  integer evaluation's values; a non-integer refused as a mapping's grade is), under
  ``cranfield`` the measures are refused exactly as the inline declaration refuses them;
- ``-R`` (qrels_format) beside the declaration under a trec_eval profile is the evaluation
  without it; under ``cranfield`` it is refused as before (finding 5);
- ``all_trec`` under ``cranfield`` is trec_eval 10's, byte for byte (finding 6).

The remote command line (finding 2) needs a live service: tests/api/test_cli_remote_profile.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import cranfield
from cranfield.cli import main
from cranfield.errors import EvaluationError, InputError, MeasureError

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
TREC_PROFILES = ["trec_eval-9.0.8", "trec_eval-10"]

RUN = "q1 Q0 a 1 3.0 r\nq1 Q0 b 2 2.0 r\nq2 Q0 y 1 2 r\nq2 Q0 x 2 1 r\n"
# subtopic qrels (ndeval's: the second field is the subtopic): integer-valued, and one
# grade that is not an integer
DQ = "q1 1 a 1\nq1 2 a 1\nq1 1 b 1\nq2 1 x 1\n"
DQR = DQ.replace("q1 1 a 1", "q1 1 a 1.5", 1)
DIVERSITY = ["alpha_nDCG@10", "NRBP"]


def _refusal(call) -> tuple:
    """What a refusal says: its type, text, code and field (word for word)."""
    with pytest.raises((MeasureError, InputError, EvaluationError)) as err:
        call()
    e = err.value
    return type(e), str(e), e.code, getattr(e, "field", None)


# ---- finding 3: diversity measures ------------------------------------------------------------

@pytest.mark.parametrize("profile", TREC_PROFILES)
def test_diversity_under_a_trec_eval_profile_reads_a_declaring_qrels_as_integers(profile):
    expected = cranfield.evaluate(DQ, RUN, DIVERSITY, profile=profile)
    assert 0 < expected.aggregate["alpha_nDCG@10"] < 1
    inline = cranfield.evaluate(DQ, RUN, DIVERSITY, gains="real", profile=profile)
    declaring = cranfield.read_qrels(DQ, diversity=True, gains="real")
    assert declaring.gains == "real"
    of_qrels = cranfield.evaluate(declaring, RUN, DIVERSITY, profile=profile)
    many = cranfield.evaluate_many(declaring, {"a": RUN, "b": RUN}, DIVERSITY,
                                   profile=profile)
    for ev in (inline, of_qrels, many["a"], many["b"]):
        assert ev.aggregate == expected.aggregate
        assert ev.per_topic == expected.per_topic
        assert ev.options == expected.options and "gains" not in ev.options


@pytest.mark.parametrize("profile", TREC_PROFILES)
def test_diversity_under_a_trec_eval_profile_refuses_a_real_grade_as_a_mapping(profile):
    declaring = cranfield.read_qrels(DQR, diversity=True, gains="real")
    for call in (lambda: cranfield.evaluate(declaring, RUN, DIVERSITY, profile=profile),
                 lambda: cranfield.evaluate_many(declaring, {"a": RUN}, DIVERSITY,
                                                 profile=profile)):
        kind, text, code, _ = _refusal(call)
        assert (kind, text, code) == (InputError, "qrels.q1.a: grade 1.5 is not an integer",
                                      "invalid-input")
    # the same judgments as text, declared inline: today's text refusal
    kind, text, code, field = _refusal(
        lambda: cranfield.evaluate(DQR, RUN, DIVERSITY, gains="real", profile=profile))
    assert (kind, text, code, field) == \
        (InputError, "qrels:1: grade: '1.5' is not an integer grade", "invalid-input", "grade")


@pytest.mark.parametrize("profile", [None, "cranfield"])
@pytest.mark.parametrize("measures", [DIVERSITY, ["runid", "alpha_nDCG@10"],
                                      ["P@10", "alpha_nDCG@10"]])
def test_diversity_under_cranfield_is_refused_as_the_inline_declaration_is(profile, measures):
    """Under ``cranfield``, a Qrels declaring real gains (read so, or stored so) refuses the
    diversity measures with the inline declaration's refusal (the measure named), in the
    library and evaluate_many alike."""
    named = {} if profile is None else {"profile": profile}
    inline = _refusal(lambda: cranfield.evaluate(DQ, RUN, measures, gains="real", **named))
    assert inline[0] is MeasureError and inline[2] == "unknown-measure"
    declaring = cranfield.read_qrels(DQ, diversity=True, gains="real")
    for call in (lambda: cranfield.evaluate(declaring, RUN, measures, **named),
                 lambda: cranfield.evaluate_many(declaring, {"a": RUN}, measures, **named),
                 lambda: cranfield.evaluate_many(DQ, {"a": RUN}, measures, gains="real",
                                                 **named)):
        assert _refusal(call) == inline


def test_diversity_refusal_text_under_cranfield():
    kind, text, code, _ = _refusal(lambda: cranfield.evaluate(
        cranfield.read_qrels(DQ, diversity=True, gains="real"), RUN, ["alpha_nDCG@10"],
        profile="cranfield"))
    assert kind is MeasureError and code == "unknown-measure"
    assert text.startswith("measure 'alpha_nDCG@10': alpha_nDCG is defined over integer "
                           "grades, not real gains")


# ---- finding 5: -R beside the declaration -----------------------------------------------------

QRELS_TEST, RESULTS_TEST = str(TE / "qrels.test"), str(TE / "results.test")


@pytest.mark.parametrize("profile", TREC_PROFILES)
@pytest.mark.parametrize("rel_format", ["qrels_jg", "qrels_prefs"])
def test_rel_format_under_a_trec_eval_profile_ignores_the_declaration(profile, rel_format,
                                                                      capsys):
    plain = cranfield.evaluate(QRELS_TEST, RESULTS_TEST, None, qrels_format=rel_format,
                               profile=profile)
    declared = cranfield.evaluate(QRELS_TEST, RESULTS_TEST, None, qrels_format=rel_format,
                                  gains="real", profile=profile)
    assert declared.summary() == plain.summary() and declared.per_topic == plain.per_topic
    assert main(["eval", "--profile", profile, "-q", "-R", rel_format, QRELS_TEST,
                 RESULTS_TEST]) == 0
    without = capsys.readouterr()
    assert main(["eval", "--profile", profile, "--real-gains", "-q", "-R", rel_format,
                 QRELS_TEST, RESULTS_TEST]) == 0
    with_flag = capsys.readouterr()
    assert with_flag.out == without.out and with_flag.out.count("\n") > 10
    assert with_flag.err == without.err


@pytest.mark.parametrize("profile", [None, "cranfield"])
def test_rel_format_under_cranfield_refuses_the_declaration_as_before(profile, capsys):
    named = {} if profile is None else {"profile": profile}
    with pytest.raises(EvaluationError) as err:
        cranfield.evaluate(QRELS_TEST, RESULTS_TEST, None, qrels_format="qrels_jg",
                           gains="real", **named)
    assert str(err.value) == ("qrels_format 'qrels_jg' does not take gains='real': real gains "
                              "are read from plain qrels")
    assert err.value.field == "options.gains"
    flags = [] if profile is None else ["--profile", profile]
    assert main(["eval", *flags, "--real-gains", "-R", "qrels_jg", QRELS_TEST,
                 RESULTS_TEST]) == 2
    captured = capsys.readouterr()
    assert captured.err == "cranfield: -R qrels_jg does not take --real-gains\n"
    assert captured.out == ""


@pytest.mark.parametrize("profile", ["9", "10"])
def test_relevance_level_beside_the_declaration_under_a_trec_eval_profile(profile, capsys,
                                                                          tmp_path):
    """docs/cli.md: ``-l`` is refused beside --real-gains under cranfield only."""
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q1 0 a 2\nq1 0 b 1\nq1 0 c 0\nq2 0 x 3\nq2 0 y 1\n")
    run.write_text(RUN)
    args = ["-l", "2", "-m", "map", "-m", "P.1", str(qrels), str(run)]
    assert main(["eval", "--profile", profile, *args]) == 0
    without = capsys.readouterr().out
    assert main(["eval", "--profile", profile, "--real-gains", *args]) == 0
    assert capsys.readouterr().out == without
    assert main(["eval", "--real-gains", "-l", "2", "-m", "AP(rel=1)", str(qrels),
                 str(run)]) == 1
    assert "relevance_level (-l) is an integer grade" in capsys.readouterr().err


# ---- finding 6: all_trec under cranfield ------------------------------------------------------

def test_all_trec_under_cranfield_is_trec_eval_10s_byte_for_byte(capsys):
    outs = {}
    for profile in ("trec_eval-10", "cranfield", "trec_eval-9.0.8"):
        assert main(["eval", "--profile", profile, "-m", "all_trec", QRELS_TEST,
                     RESULTS_TEST]) == 0
        outs[profile] = capsys.readouterr().out
    assert outs["cranfield"] == outs["trec_eval-10"]
    assert outs["cranfield"].count("\n") == 99
    assert outs["trec_eval-9.0.8"].count("\n") == 94
    printed = {line.split()[0] for line in outs["cranfield"].splitlines()}
    assert {"rbp", "rbp_resid", "unj_5", "unj_10", "unj_20"} <= printed


def test_all_trec_membership_follows_the_profile_flag():
    from cranfield.measures import PROFILES
    from cranfield.measures.registry import NICKNAMES, REGISTRY
    from cranfield.reports.measure_docs import describe

    for name in PROFILES:
        assert NICKNAMES["all_trec"](name) == NICKNAMES["all_trec"](
            "trec_eval-10" if PROFILES[name].all_trec_has_10_measures else "trec_eval-9.0.8")
    for name in ("rbp", "rbp_resid", "unj"):
        assert REGISTRY[name].all_trec == ("trec_eval-10", "cranfield")
        assert describe(REGISTRY[name])["in_all_trec"] == ["trec_eval-10",
                                                                   "cranfield"]
    assert describe(REGISTRY["map"])["in_all_trec"] == list(PROFILES)
