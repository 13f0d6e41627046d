"""CI-native verdicts (issue #25): a comparison's gate as JUnit XML, Markdown, GitHub Actions
workflow commands and text (cranfield/compare/verdicts.py), read back the way CI servers read them
(xml.etree for JUnit, the table's cells for Markdown) and checked against the gate's own
numbers; and ``cranfield compare --gate --format junit|markdown``."""

from __future__ import annotations

import re
from xml.etree import ElementTree as ET

import pytest

from cranfield.cli import main
from cranfield.compare import verdicts
from cranfield.compare.comparison import compare

TOPICS = [f"t{i:02d}" for i in range(30)]
LOST = ["t01", "t03", "t07", "t11", "t13", "t17", "t19", "t23", "t26", "t29"]  # "a" third
QRELS = {t: {"a": 1, "b": 1} for t in TOPICS}
BASE = {t: {"a": 3.0, "b": 2.0, "c": 1.0} for t in TOPICS}
CAND = {t: ({"c": 3.0, "x": 2.0, "a": 1.0} if t in LOST else dict(BASE[t])) for t in TOPICS}


@pytest.fixture(scope="module")
def failed() -> dict:
    """base vs cand: map and P.5 fail (a drop on ten topics), recip_rank passes (allowed)."""
    return compare(QRELS, {"base": BASE, "cand": CAND}, ["map", "P.5", "recip_rank"],
                   baseline="base", gate=["map:0.01", "P.5:0.01", "recip_rank:0.5"])


@pytest.fixture(scope="module")
def undecided() -> dict:
    """Five topics: the exact randomization test can never reach 0.05 (2/2^5 > 0.05)."""
    few = TOPICS[:5]
    cand = {t: ({"c": 3.0, "x": 2.0, "a": 1.0} if i < 4 else dict(BASE[t]))
            for i, t in enumerate(few)}
    return compare({t: QRELS[t] for t in few},
                   {"base": {t: BASE[t] for t in few}, "cand": cand}, ["map"], baseline="base",
                   gate=["map:0.01"])


def _checks(doc: dict) -> dict:
    return {c["measure"]: c for c in doc["gate"]["checks"]}


def _pair(doc: dict, measure: str) -> dict:
    return next(p for p in doc["pairs"] if p["measure"] == measure)


def test_the_gate_under_test_is_what_the_fixtures_say(failed, undecided):
    assert failed["gate"]["verdict"] == "fail"
    assert {k: c["verdict"] for k, c in _checks(failed).items()} == {
        "map": "fail", "P_5": "fail", "recip_rank": "pass"}
    assert {t["topic"] for t in _checks(failed)["map"]["offending_topics"]} == set(LOST)
    assert undecided["gate"]["verdict"] == "undecided"


def test_junit_has_a_test_case_per_check_and_a_failure_naming_the_numbers(failed):
    suite = ET.fromstring(verdicts.junit(failed, "bm25").encode())
    assert suite.tag == "testsuite" and suite.get("name") == "cranfield gate"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "2", "0")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props == {"verdict": "fail", "correction": "holm", "ci_level": "0.95"}
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"map: cand vs base", "P_5: cand vs base",
                          "recip_rank: cand vs base"}
    assert {c.get("classname") for c in cases.values()} == {"cranfield.gate.bm25"}
    assert cases["recip_rank: cand vs base"].find("failure") is None
    checks = _checks(failed)
    for measure in ("map", "P_5"):
        check, pair = checks[measure], _pair(failed, measure)
        failure = cases[f"{measure}: cand vs base"].find("failure")
        assert failure.get("type") == "regression"
        message = failure.get("message")
        assert message.startswith(f"{measure} cand vs base: FAIL; drop {check['drop']:.4f} ")
        low, high = (float(x) for x in re.search(
            r"95% CI of the difference \[(-?[\d.]+), (-?[\d.]+)\]", message).groups())
        assert (low, high) == (round(pair["ci_low"], 4), round(pair["ci_high"], 4))
        assert high < 0  # the candidate is worse: the difference is negative
        p = float(re.search(r"p adjusted ([\d.e-]+) \(randomization", message).group(1))
        assert p == pytest.approx(check["p_adjusted"], rel=1e-3)
        worst = re.search(r"worst topics: (.*)$", message).group(1)
        named = re.findall(r"(t\d\d) \(−([\d.]+)\)", worst)
        assert [t for t, _ in named] == [t["topic"] for t in check["offending_topics"][:5]]
        assert {t for t, _ in named} <= set(LOST)
        assert all(float(d) == round(t["drop"], 4) for (_, d), t in zip(
            named, check["offending_topics"], strict=False))
        text = failure.text.splitlines()
        assert text[0] == check["reasons"][0]
        assert sorted(line.split()[0] for line in text[2:]) == LOST  # every offending topic


def test_junit_without_a_system_names_the_candidate(failed):
    suite = ET.fromstring(verdicts.junit(failed).encode())
    assert {c.get("classname") for c in suite.iter("testcase")} == {"cranfield.gate.cand"}


def test_an_undecided_check_is_a_failure_of_type_undecided(undecided):
    suite = ET.fromstring(verdicts.junit(undecided, "s").encode())
    [case] = suite.findall("testcase")
    failure = case.find("failure")
    assert failure.get("type") == "undecided"
    assert failure.get("message").startswith("map cand vs base: UNDECIDED; drop ")
    assert suite.get("failures") == "1"


def _table(markdown: str) -> list[list[str]]:
    """The first table's rows as cells (its head first, the separator dropped)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return [rows[0], *rows[2:]]


def test_markdown_heads_with_the_verdict_and_tabulates_every_check(failed):
    text = verdicts.markdown(failed, "bm25")
    assert text.splitlines()[0] == "### Cranfield gate for bm25: FAIL"
    assert "`cand` vs baseline `base`" in text
    head, *rows = _table(text)
    assert head == ["measure", "baseline mean", "candidate mean", "drop",
                    "95% CI of the difference", "p (adjusted)", "verdict"]
    checks = _checks(failed)
    assert [r[0] for r in rows] == ["map", "P_5", "recip_rank"]
    for row in rows:
        check, pair = checks[row[0]], _pair(failed, row[0])
        assert row[1] == f"{check['mean_baseline']:.4f}"
        assert row[2] == f"{check['mean_candidate']:.4f}"
        assert row[3] == f"{check['drop']:.4f}"
        assert row[4] == f"[{pair['ci_low']:.4f}, {pair['ci_high']:.4f}]"
        assert float(row[5]) == pytest.approx(check["p_adjusted"], rel=1e-3)
        assert row[6] == check["verdict"]
    # the worst topics of each failed check, under it
    sections = text.split("**map: cand vs base: FAIL**")[1]
    worst = re.findall(r"^\| (t\d\d) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", sections, re.M)
    assert {t for t, *_ in worst} == set(LOST)
    assert "**recip_rank" not in text  # a passing check has no section


def test_a_relative_gate_shows_the_relative_drop():
    doc = compare(QRELS, {"base": BASE, "cand": CAND}, ["map"], baseline="base",
                  gate=["map:2%"])
    [row] = _table(verdicts.markdown(doc))[1:]
    check = doc["gate"]["checks"][0]
    assert row[3] == f"{check['drop']:.4f} ({check['relative_drop']:.1%})"


def test_github_annotations_an_error_per_failed_check(failed, undecided):
    lines = verdicts.github_annotations(failed).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::error title=Cranfield gate failed%3A map%3A cand vs base::"
                               "map cand vs base: FAIL; drop ")
    assert lines[1].startswith("::error title=Cranfield gate failed%3A P_5%3A cand vs base::")
    assert all("%0A" not in line and "\n" not in line for line in lines)
    [warning] = verdicts.github_annotations(undecided).splitlines()
    assert warning.startswith("::warning title=Cranfield gate undecided%3A map")


def test_text_says_the_verdict_then_each_check(failed):
    lines = verdicts.text(failed).splitlines()
    assert lines[0] == "gate: FAIL"
    assert [line.split()[0] for line in lines[1:]] == ["map", "P_5", "recip_rank"]
    assert "recip_rank cand vs base: PASS" in lines[3]


def test_no_gate_renders_as_no_verdict():
    doc = compare(QRELS, {"base": BASE, "cand": CAND}, ["map"], baseline="base")
    assert verdicts.verdict(doc) is None
    assert ET.fromstring(verdicts.junit(doc).encode()).get("tests") == "0"


@pytest.mark.parametrize("fmt", ["junit", "markdown"])
def test_compare_gate_writes_junit_and_markdown(tmp_path, capsys, fmt):
    def trec(run: dict) -> str:
        return "".join(f"{t} Q0 {d} {i + 1} {s} r\n" for t, docs in run.items()
                       for i, (d, s) in enumerate(docs.items()))

    (tmp_path / "qrels").write_text("".join(f"{t} 0 {d} {g}\n" for t, docs in QRELS.items()
                                            for d, g in docs.items()))
    (tmp_path / "base.txt").write_text(trec(BASE))
    (tmp_path / "cand.txt").write_text(trec(CAND))
    code = main(["compare", str(tmp_path / "qrels"), str(tmp_path / "base.txt"),
                 str(tmp_path / "cand.txt"), "-m", "map", "--gate", "map:0.01",
                 "--format", fmt])
    out = capsys.readouterr().out
    assert code == 3
    if fmt == "junit":
        [case] = ET.fromstring(out.encode()).findall("testcase")
        assert case.get("name") == "map: cand vs base"
        assert case.find("failure").get("type") == "regression"
    else:
        assert out.startswith("### Cranfield gate: FAIL")
        assert _table(out)[1][0] == "map" and _table(out)[1][-1] == "fail"


def test_compare_junit_needs_a_gate(tmp_path, capsys):
    (tmp_path / "q").write_text("t 0 a 1\n")
    (tmp_path / "r1").write_text("t Q0 a 1 1 r\n")
    (tmp_path / "r2").write_text("t Q0 a 1 1 r\n")
    code = main(["compare", str(tmp_path / "q"), str(tmp_path / "r1"), str(tmp_path / "r2"),
                 "--format", "junit"])
    assert code == 1
    assert capsys.readouterr().err == ("cranfield: --format junit renders a gate's verdict: "
                                       "give --gate\n")


# names and topic ids as a run file or a record may spell them: markup in every format
HOSTILE_BASE, HOSTILE_CAND = 'base <b>&"\'|\\', "cand `x` [link](https://e.example) *b*"
HOSTILE_TOPICS = {t: f"{t}\\|<img/src=x>" if i % 2 else f"{t}&amp;" for i, t in
                  enumerate(TOPICS)}


@pytest.fixture(scope="module")
def hostile() -> dict:
    def renamed(run):
        return {HOSTILE_TOPICS[t]: docs for t, docs in run.items()}

    return compare(renamed(QRELS),
                   {HOSTILE_BASE: renamed(BASE), HOSTILE_CAND: renamed(CAND)}, ["map"],
                   baseline=HOSTILE_BASE, gate=["map:0.01"])


def _gfm_cells(line: str) -> list[str]:
    """A table row's cells as GitHub's Markdown splits them (cmark-gfm: a cell is escaped
    characters or anything but a pipe), backslash escapes then undone."""
    cells = re.findall(r"((?:\\.|[^|\\])*)\|", line.strip()[1:])
    return [re.sub(r"\\(.)", r"\1", c).strip() for c in cells]


def test_junit_of_hostile_names_is_well_formed_xml_saying_them(hostile):
    suite = ET.fromstring(verdicts.junit(hostile, 'sys <&">').encode())
    [case] = suite.findall("testcase")
    assert case.get("classname") == 'cranfield.gate.sys <&">'
    assert case.get("name") == f"map: {HOSTILE_CAND} vs {HOSTILE_BASE}"
    failure = case.find("failure").text
    assert f"{TOPICS[1]}\\|<img/src=x>" in failure  # said as it is
    assert "t26&amp; " in failure  # not read as the entity


def test_markdown_of_hostile_names_keeps_the_table_and_renders_no_markup(hostile):
    text = verdicts.markdown(hostile, "sys <b>")
    rows = [_gfm_cells(line) for line in text.splitlines() if line.startswith("|")]
    assert all(len(r) == len(rows[0]) for r in rows[:3]), rows
    topics = rows[5:]  # the offending topics' table: topic, baseline, candidate, drop
    assert topics and all(len(r) == 4 for r in topics), topics
    assert {r[0] for r in topics} <= set(HOSTILE_TOPICS.values())
    # no raw HTML, link or emphasis a renderer would act on: each is backslash-escaped or
    # inside a code span
    outside_code = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)
    for markup in ("<b>", "<img", "](", "*b*"):
        assert markup not in outside_code.replace("\\<", "").replace("\\]", "").replace(
            "\\*", ""), markup


def test_junit_of_a_run_named_with_control_characters_is_still_xml():
    """``cranfield compare --gate --format junit`` names runs by their files: a file name
    may hold characters XML 1.0 cannot carry (an ESC); the report stays readable, the
    character replaced."""
    doc = compare(QRELS, {"base": BASE, "cand\x1b[1m": CAND}, ["map"], baseline="base",
                  gate=["map:0.01"])
    suite = ET.fromstring(verdicts.junit(doc, "sys").encode())
    [case] = suite.findall("testcase")
    assert case.get("name") == "map: cand\ufffd[1m vs base"
    assert "cand\ufffd[1m" in case.find("failure").get("message")
