"""``cranfield compare`` and ``cranfield pool`` as commands, on trec_eval's test files.

results.test covers topics 301-303; results.trunc lacks 302. Per-topic AP (9.0.8) of
results.test: 0.0324, 0.4175, 0.0858; of results.trunc with -c: 0.0324, 0 (missing), 0.2723.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

import cranfield
from cranfield.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
QRELS, TEST, TRUNC = (str(DATA / n) for n in ("qrels.test", "results.test", "results.trunc"))


def cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def reversed_run(tmp_path) -> str:
    """results.test with every score negated: its ranking upside down, AP lower on all three
    topics (0.0157, 0.0361, 0.0121)."""
    lines = []
    for line in Path(TEST).read_text().splitlines():
        qid, q0, doc, rank, score, runid = line.split()
        lines.append(f"{qid} {q0} {doc} {rank} {-float(score)} reversed")
    path = tmp_path / "reversed.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_compare_json_carries_the_engine_numbers(capsys):
    code, out, err = cli(capsys, "compare", "--format", "json", "-c", "-m", "map", "-m", "P.10",
                         QRELS, TEST, TRUNC)
    assert code == 0, err
    doc = json.loads(out)
    # both stems are "results": the file names tell them apart
    assert [r["name"] for r in doc["runs"]] == ["results.test", "results.trunc"]
    assert doc["topics"] == ["301", "302", "303"]
    # 3 topics: the bootstrap's small-sample warning, after each run's input lint
    assert [w["code"] for w in doc["warnings"] if "run" not in w] == ["bootstrap-few-topics"]
    a = cranfield.evaluate(QRELS, TEST, ["map"], complete_topics=True).values["map"]
    b = cranfield.evaluate(QRELS, TRUNC, ["map"], complete_topics=True).values["map"]
    pair = [p for p in doc["pairs"] if p["measure"] == "map"][0]
    assert (pair["a"], pair["b"]) == ("results.test", "results.trunc")
    assert pair["mean_diff"] == pytest.approx(float(np.mean(b - a)))
    assert pair["t_test"]["p_value"] == pytest.approx(float(scipy.stats.ttest_rel(b, a).pvalue))
    assert (pair["wins"], pair["ties"], pair["losses"]) == (1, 1, 1)
    assert pair["randomization"]["exact"] and pair["randomization"]["n_permutations"] == 8
    assert doc["summary"]["map"]["results.test"]["aggregate"] == pytest.approx(0.1785, abs=5e-5)
    assert doc["options"]["complete_topics"] is True


def test_compare_text_names_topics_dropped_and_prints_the_table(capsys):
    code, out, _ = cli(capsys, "compare", "-m", "map", "--names", "full,trunc", "--seed", "3",
                       QRELS, TEST, TRUNC)
    assert code == 0
    assert "2 runs over 2 topics" in out and "lacks 1" in out
    lines = out.splitlines()
    assert any(line.split()[:2] == ["full", "0.0591"] for line in lines)  # mean over 301, 303
    (row,) = [line for line in lines if line.strip().startswith("trunc vs full")]
    assert "+0.0933" in row and row.split()[-1] == "1/1/0"


def test_gate_fails_with_exit_3_is_undecided_with_exit_5_and_passes_with_exit_0(
        capsys, reversed_run):
    # three topics, all worse: the smallest exact randomization p there is, 2/2^3 = 0.25, so
    # the gate's alpha must exceed it for any drop to count as significant
    code, out, _ = cli(capsys, "compare", "-m", "map", "--baseline", "results", "--gate",
                       "map:0.01@0.3", QRELS, TEST, reversed_run)
    assert code == 3  # was 1, the code of usage errors too
    assert "gate: FAIL" in out and "is significant (randomization p_adj 0.25 < 0.3)" in out
    assert "worst topics: 302 (-0.3814)" in out
    # at 0.05 the test cannot find any drop significant on 3 topics: undecided, not a pass
    # (this passed with exit 0 before)
    code, out, _ = cli(capsys, "compare", "-m", "map", "--gate", "map:0.01", QRELS, TEST,
                       reversed_run)
    assert code == 5 and "gate: UNDECIDED" in out
    assert "cannot reach p_adj < 0.05 on 3 topics (smallest attainable p_adj 0.25)" in out
    code, out, _ = cli(capsys, "compare", "-m", "map", "--gate", "map:60%@0.3", QRELS, TEST,
                       reversed_run)  # the mean drops 88% (0.1786 -> 0.0213): more than 60%
    assert code == 3
    code, out, _ = cli(capsys, "compare", "--format", "json", "--gate", "map:90%@0.3", QRELS,
                       TEST, reversed_run)
    assert code == 0 and json.loads(out)["gate"]["verdict"] == "pass"


def test_compare_usage_errors(capsys):
    code, _, err = cli(capsys, "compare", QRELS, TEST)
    assert code == 1 and "at least two runs" in err
    code, _, err = cli(capsys, "compare", "--baseline", "nope", QRELS, TEST, TRUNC)
    assert code == 1 and "'nope' is not one of the runs" in err
    code, _, err = cli(capsys, "compare", "--names", "x", QRELS, TEST, TRUNC)
    assert code == 1 and "2 distinct non-empty names" in err
    code, _, err = cli(capsys, "compare", "-m", "gm_map", QRELS, TEST, TRUNC)
    assert code == 1 and "no per-topic values to compare" in err
    with pytest.raises(SystemExit):
        main(["compare", "--gate", "map", QRELS, TEST, TRUNC])
    assert "expected MEASURE:MAX_DROP" in capsys.readouterr().err


def _top(path: str, k: int) -> set[tuple[str, str]]:
    """Oracle: each topic's first k documents, score descending then docno descending."""
    rows = [line.split() for line in Path(path).read_text().splitlines()]
    out = set()
    for topic in {r[0] for r in rows}:
        mine = sorted(((np.float32(r[4]), r[2]) for r in rows if r[0] == topic), reverse=True)
        out |= {(topic, doc) for _, doc in mine[:k]}
    return out


def test_pool_lines(capsys):
    code, out, _ = cli(capsys, "pool", "-k", "5", TEST, TRUNC)
    assert code == 0
    lines = out.splitlines()
    expected = _top(TEST, 5) | _top(TRUNC, 5)
    assert [tuple(line.split()) for line in lines] == [
        (t, "0", d) for t, d in sorted(expected)]
    # qrels-302.test judges topic 302 only: its five pooled documents go, 15 remain
    judged_file = str(DATA / "qrels-302.test")
    code, out, _ = cli(capsys, "pool", "-k", "5", "--format", "json", "--judged", judged_file,
                       TEST, TRUNC)
    doc = json.loads(out)
    judged = {(t, d) for t, _, d, _ in (line.split() for line in Path(judged_file).read_text()
                                         .splitlines())}
    assert doc["total"] == len(expected - judged) == 15
    assert doc["already_judged"] == len(expected & judged) == 5
    assert doc["sizes"] == {"301": 5, "302": 0, "303": 10}
    # results.trunc has no 302, and both runs share their top 5 of 301: what is left of each
    # run's own contribution is its top 5 of 303
    assert doc["contributed"] == {"results.test": 5, "results.trunc": 5}
    assert doc["runs"] == ["results.test", "results.trunc"]


def test_compare_html_is_the_report_page_of_the_same_numbers(capsys, reversed_run):
    """``--format html``: the report page the API serves as text/html, for a local file; its
    numbers are the JSON document's, and the gate's exit code is unchanged."""
    from cranfield.reports.html_report import render_comparison

    argv = ["compare", "-m", "map", "--seed", "7", "--gate", "map:0.01", QRELS, TEST,
            reversed_run]
    code_json, out_json, _ = cli(capsys, *argv[:1], "--format", "json", *argv[1:])
    code, page, err = cli(capsys, *argv[:1], "--format", "html", *argv[1:])
    # map drops on all 3 topics, too few for significance: undecided (exit 5) both ways
    assert code == code_json == 5, err
    assert page.startswith("<!DOCTYPE html>")
    assert "Cranfield comparison: results vs reversed" in page
    expected = render_comparison(json.loads(out_json),
                                 title="Cranfield comparison: results vs reversed")
    assert page == expected
    mean = json.loads(out_json)["summary"]["map"]["results"]["aggregate"]
    assert f"{mean:.4f}" in page
