"""Comparisons of qrels declaring real-valued gains (issue #31): ``compare(..., gains="real")``
and ``cranfield compare --real-gains`` evaluate every run as ``cranfield.evaluate(...,
gains="real")`` does (per-run means and per-topic values equal its numbers), the paired tests
are those of its per-topic values (scipy's paired t-test, the exact sign-flip test by hand),
the command line's JSON is the library's document, and the refusals are evaluate's: a
trec_eval profile named beside the declaration refuses a grade that is not an integer word
for word as without it, and a binary measure without rel= is refused naming it."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy import stats

import cranfield
from cranfield.cli import main
from cranfield.compare.comparison import compare
from cranfield.errors import EvaluationError, InputError, MeasureError

TOPICS = [f"q{i}" for i in range(1, 11)]
MEASURES = ["ndcg", "nDCG@5", "DCG@3", "ERR@5", "P(rel=0.5)@5", "AP(rel=1)"]


def _data():
    """(qrels text of real gains, {name: run text}): ten topics, three runs whose rankings
    differ from topic to topic (so every paired difference column varies)."""
    rng = np.random.default_rng(3101)
    qrels, runs = [], {"bm25": [], "dense": [], "mixed": []}
    for topic in TOPICS:
        docs = [f"{topic}d{i}" for i in range(12)]
        gains = np.round(rng.uniform(0, 3, len(docs)), 3)
        gains[rng.random(len(docs)) < 0.35] = 0.0
        gains[2] = -1.0  # in the pool, not judged
        qrels += [f"{topic} 0 {d} {g:g}" for d, g in zip(docs, gains.tolist(), strict=True)]
        for name, lines in runs.items():
            ranked = list(rng.permutation(docs + [f"{topic}u{i}" for i in range(3)]))
            lines += [f"{topic} Q0 {d} {r + 1} {30 - r} {name}" for r, d in enumerate(ranked)]
    return ("\n".join(qrels) + "\n",
            {name: "\n".join(lines) + "\n" for name, lines in runs.items()})


QRELS, RUNS = _data()


@pytest.fixture(scope="module")
def evaluations() -> dict[str, cranfield.Evaluation]:
    return {name: cranfield.evaluate(QRELS, run, MEASURES, gains="real")
            for name, run in RUNS.items()}


@pytest.fixture(scope="module")
def doc() -> dict:
    return compare(QRELS, RUNS, MEASURES, gains="real", per_topic=True)


def test_the_qrels_hold_real_gains():
    grades = [line.split()[3] for line in QRELS.splitlines()]
    assert "0" in grades and "-1" in grades and any("." in g for g in grades)
    with pytest.raises(InputError, match="is not an integer grade"):
        compare(QRELS, RUNS, MEASURES)  # undeclared: refused as ever


def test_per_run_means_and_values_are_evaluates(doc, evaluations):
    assert doc["options"]["profile"] == "cranfield" and doc["options"]["gains"] == "real"
    assert sorted(doc["topics"]) == sorted(TOPICS)  # (trec_eval's order: q10 after q1)
    assert [m["key"] for m in doc["measures"]] == MEASURES
    for name, ev in evaluations.items():
        assert ev.options["profile"] == "cranfield"
        for measure in MEASURES:
            summary = doc["summary"][measure][name]
            assert summary["mean"] == pytest.approx(ev.aggregate[measure], rel=1e-12,
                                                    abs=1e-15), (name, measure)
            assert summary["aggregate"] == ev.aggregate[measure], (name, measure)
            for topic in TOPICS:
                assert doc["per_topic"][name][topic][measure] == \
                    ev.per_topic[topic][measure], (name, topic, measure)
    # the numbers are real gains': the means are not those of any integer reading
    assert 0 < doc["summary"]["ndcg"]["bm25"]["mean"] < 1
    assert doc["summary"]["DCG@3"]["dense"]["mean"] != \
        round(doc["summary"]["DCG@3"]["dense"]["mean"])


def test_paired_tests_are_those_of_evaluates_per_topic_values(doc, evaluations):
    pairs = {(p["measure"], p["a"], p["b"]): p for p in doc["pairs"]}
    assert len(pairs) == len(MEASURES) * 3
    for (a, b), measure in itertools.product(itertools.combinations(RUNS, 2), MEASURES):
        pair = pairs[(measure, a, b)]
        x = np.array([evaluations[a].per_topic[t][measure] for t in TOPICS])
        y = np.array([evaluations[b].per_topic[t][measure] for t in TOPICS])
        d = y - x
        assert pair["mean_diff"] == pytest.approx(d.mean(), rel=1e-12, abs=1e-15)
        if not d.any():  # (no difference: nothing to test against scipy)
            continue
        want = stats.ttest_rel(y, x)
        assert pair["t_test"]["statistic"] == pytest.approx(want.statistic, rel=1e-9)
        assert pair["t_test"]["p_value"] == pytest.approx(want.pvalue, rel=1e-9)
        # 10 topics: the exact sign-flip test over all 2^10 sign vectors, by hand
        signs = np.array(list(itertools.product((1, -1), repeat=len(d))))
        sums = np.abs(signs @ d)
        tol = 1e-10 * np.abs(d).sum()
        assert pair["randomization"]["exact"] is True
        assert pair["randomization"]["p_value"] == pytest.approx(
            np.mean(sums >= abs(d.sum()) - tol), rel=1e-12)
        assert (pair["wins"], pair["losses"]) == (int((d > 0).sum()), int((d < 0).sum()))


def test_a_qrels_declaring_real_gains_is_compared_under_cranfield(doc):
    qrels = cranfield.read_qrels(QRELS, gains="real")
    again = compare(qrels, RUNS, MEASURES, per_topic=True)
    assert again["options"]["profile"] == "cranfield"
    assert again["summary"] == doc["summary"] and again["pairs"] == doc["pairs"]
    named = compare(QRELS, RUNS, MEASURES, gains="real", profile="cranfield", per_topic=True)
    assert named == doc


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_a_trec_eval_profile_refuses_a_real_grade_as_without_the_declaration(profile):
    with pytest.raises(InputError) as today:
        compare(QRELS, RUNS, ["ndcg"], profile=profile)
    with pytest.raises(InputError) as declared:
        compare(QRELS, RUNS, ["ndcg"], profile=profile, gains="real")
    with pytest.raises(InputError) as evaluated:
        cranfield.evaluate(QRELS, RUNS["bm25"], ["ndcg"], profile=profile, gains="real")
    assert str(declared.value) == str(today.value) == str(evaluated.value)
    line, grade = next((i, text.split()[3]) for i, text in
                       enumerate(QRELS.splitlines(), start=1) if "." in text.split()[3])
    assert str(today.value) == f"qrels:{line}: grade: '{grade}' is not an integer grade"
    assert (declared.value.code, declared.value.line, declared.value.field) == \
        (today.value.code, today.value.line, today.value.field)
    # a Qrels already read with real gains: refused as a mapping's grade is, as evaluate does
    qrels = cranfield.read_qrels(QRELS, gains="real")
    with pytest.raises(InputError) as of_qrels:
        compare(qrels, RUNS, ["ndcg"], profile=profile, gains="real")
    with pytest.raises(InputError) as by_evaluate:
        cranfield.evaluate(qrels, RUNS["bm25"], ["ndcg"], profile=profile)
    assert str(of_qrels.value) == str(by_evaluate.value)
    assert "is not an integer" in str(of_qrels.value)


@pytest.mark.parametrize("name", ["P.5", "map", "recip_rank", "P@10"])
def test_a_binary_measure_without_rel_is_refused_naming_it(name):
    with pytest.raises(MeasureError) as refused:
        compare(QRELS, RUNS, ["ndcg", name], gains="real")
    with pytest.raises(MeasureError) as evaluated:
        cranfield.evaluate(QRELS, RUNS["bm25"], ["ndcg", name], gains="real")
    assert str(refused.value) == str(evaluated.value)
    assert "rel=" in str(refused.value) and refused.value.name in str(refused.value)
    # the default measures (map, P.10, ...) count relevant documents: refused likewise
    with pytest.raises(MeasureError, match="rel="):
        compare(QRELS, RUNS, gains="real")


def test_options_refused_as_evaluate_refuses_them():
    with pytest.raises(EvaluationError) as refused:
        compare(QRELS, RUNS, ["ndcg"], gains="float")
    with pytest.raises(EvaluationError) as evaluated:
        cranfield.evaluate(QRELS, RUNS["bm25"], ["ndcg"], gains="float")
    assert str(refused.value) == str(evaluated.value)
    with pytest.raises(EvaluationError) as refused:
        compare(QRELS, RUNS, ["ndcg"], gains="real", relevance_level=2)
    with pytest.raises(EvaluationError) as evaluated:
        cranfield.evaluate(QRELS, RUNS["bm25"], ["ndcg"], gains="real", relevance_level=2)
    assert str(refused.value) == str(evaluated.value)
    with pytest.raises(TypeError, match="gains"):  # still named among the options
        compare(QRELS, RUNS, ["ndcg"], aggregation="micro")


@pytest.fixture
def files(tmp_path) -> tuple[str, list[str]]:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS)
    runs = []
    for name, text in RUNS.items():
        path = tmp_path / f"{name}.txt"
        path.write_text(text)
        runs.append(str(path))
    return str(qrels), runs


def _measure_args(measures) -> list[str]:
    return [a for m in measures for a in ("-m", m)]


def test_the_command_line_prints_the_librarys_document(files, capsys):
    qrels, runs = files
    assert main(["compare", "--real-gains", "--format", "json", *_measure_args(MEASURES),
                 qrels, *runs]) == 0
    printed = json.loads(capsys.readouterr().out)
    library = compare(qrels, dict(zip(RUNS, runs, strict=True)), MEASURES, gains="real",
                      interface="cli")
    assert printed == json.loads(json.dumps(library))
    assert printed["options"]["profile"] == "cranfield"
    # naming cranfield's profile: the same document
    assert main(["compare", "--real-gains", "--profile", "cranfield", "--format", "json",
                 *_measure_args(MEASURES), qrels, *runs]) == 0
    assert json.loads(capsys.readouterr().out) == printed
    # the text output's means are the library's too
    assert main(["compare", "--real-gains", *_measure_args(["ndcg"]), qrels, *runs]) == 0
    assert f"{library['summary']['ndcg']['bm25']['mean']:.4f}" in capsys.readouterr().out


@pytest.mark.parametrize("profile", ["trec_eval-9.0.8", "trec_eval-10"])
def test_the_command_line_refuses_as_eval_does(files, capsys, profile):
    qrels, runs = files
    assert main(["eval", "--profile", profile, "-m", "ndcg", qrels, runs[0]]) == 2
    by_eval = capsys.readouterr().err
    assert "is not an integer grade" in by_eval
    for flags in ([], ["--real-gains"]):
        assert main(["compare", "--profile", profile, *flags, "-m", "ndcg", qrels,
                     *runs]) == 2
        assert capsys.readouterr().err == by_eval, flags
    # without --real-gains and no profile: refused as ever
    assert main(["compare", "-m", "ndcg", qrels, *runs]) == 2
    assert "is not an integer grade" in capsys.readouterr().err


def test_the_command_line_refuses_a_binary_measure_naming_it(files, capsys):
    qrels, runs = files
    code = main(["eval", "--real-gains", "-m", "ndcg", "-m", "P.5", qrels, runs[0]])
    by_eval = capsys.readouterr().err
    assert code != 0 and "P_5" in by_eval and "rel=" in by_eval
    assert main(["compare", "--real-gains", "-m", "ndcg", "-m", "P.5", qrels,
                 *runs]) == code
    assert capsys.readouterr().err == by_eval
    assert main(["compare", "--real-gains", qrels, *runs]) == code  # default measures: map
    err = capsys.readouterr().err
    assert "'map'" in err and "rel=" in err


def test_the_help_says_it(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    out = capsys.readouterr().out
    assert "--real-gains" in out and "cranfield with --real-gains" in " ".join(out.split())
