"""Preferences and judgment groups against the real trec_eval binaries, on random cases
(issue #28).

Data: tests/data/trec_eval_prefs_random, made by its make_expected.py from a fixed seed:
69 random cases in -R prefs, -R qrels_prefs and -R qrels_jg (1-6 topics, 0-40 judged docs a
topic, one to three judgment groups with one or several sub-groups, rel levels 0..3 and a
few fractions or -1, ties in scores and ties only in float32, judged topics the run lacks and
run topics without judgments, comment lines, -q / -c / -M / -l / -J, measure lists and
parameters), each with the stdout of the unmodified trec_eval 9.0.8 and 10.0 binaries
(MANIFEST.md: builds, commands, what the binaries refused).

Every case goes through ``cranfield eval`` and through the library
(``cranfield.evaluate(..., qrels_format=...)`` then ``format_jg``), in the profile of each
binary, and must print that binary's bytes. Where 10.0 stops at a judged topic the run lacks
(exit 4, its stdout the topics before it), Cranfield prints those bytes first and then goes
on as 10.0 does on the judgments of the run's topics only (``.skip.out``): it skips the
topic, as 9.0.8 does (README: Semantics).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from binary_cases import PROFILES, make_expected

import cranfield
from cranfield.cli import main
from cranfield.reports.jg_text import format_jg

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval_prefs_random"
TABLE = json.loads((DATA / "cases.json").read_text())
MAKE_EXPECTED = make_expected(DATA)  # the script that made the cases and ran the binaries


NO_OVERLAP = None  # what _want gives where Cranfield refuses: no run topic is judged


def _want(row: dict, tag: str) -> tuple[str | None, str | None]:
    """(the bytes Cranfield must print in the profile of binary ``tag``, or NO_OVERLAP; the
    judgments text to give it in place of the case's file, or None: the file)."""
    done = row[tag]
    out = (DATA / "expected" / f"{row['case']}.{tag}.out").read_text()
    if done["status"] == 0:
        assert done["stderr"] == ""
        return out, None
    if row["v9.0.8"]["status"] == 7:  # no run topic judged: 9.0.8 stops, so does Cranfield
        assert row["v9.0.8"]["stderr"] == ("trec_eval: No queries with both results and "
                                           "relevance info\n")
        assert out == "" and done["status"] in (7, 4)  # 10.0: at the first judged topic
        return NO_OVERLAP, None
    if tag == "v10.0":  # 10.0 without -c stops at a judged topic the run lacks
        assert done["status"] == 4 and "not found in qrels" in done["stderr"], done
        assert "-c" not in row["flags"]
        skip = done["skip"]
        assert skip["status"] == 0 and skip["stderr"] == ""
        want = (DATA / "expected" / skip["file"]).read_text()
        assert want.startswith(out)  # what 10.0 printed before it stopped is the same
        return want, None
    # 9.0.8 has no comment lines: "Malformed line" (test_9_0_8_refuses_comment_lines);
    # the values: 9.0.8 on the same judgments without them
    assert done["status"] == 2 and "Malformed line" in done["stderr"], done
    assert out == ""
    plain = done["uncommented"]
    assert plain["status"] == 0 and plain["stderr"] == ""
    return ((DATA / "expected" / plain["file"]).read_text(),
            MAKE_EXPECTED.uncommented(_judgments(row).read_text()))


def _judgments(row: dict) -> Path:
    return DATA / "inputs" / f"{row['case']}.judgments"


def _run(row: dict) -> Path:
    return DATA / "inputs" / f"{row['case']}.run"


def _source(row: dict, text: str | None, tmp_path: Path) -> Path:
    if text is None:
        return _judgments(row)
    path = tmp_path / "judgments"
    path.write_text(text)
    return path


CASES = [pytest.param(row, tag, id=f"{row['case']}-{tag}") for row in TABLE for tag in PROFILES]


def test_the_table_is_what_the_script_makes():
    """The committed inputs are make_expected.py's cases (seed, flags), and cover what the
    differential is for."""
    made = MAKE_EXPECTED.make_cases()
    assert [c["case"] for c in made] == [r["case"] for r in TABLE]
    for case, row in zip(made, TABLE, strict=True):
        assert case["flags"] == row["flags"] and case["format"] == row["format"]
        assert (DATA / "inputs" / f"{row['case']}.judgments").read_text() == case["judgments"]
        assert (DATA / "inputs" / f"{row['case']}.run").read_text() == case["run"]
    assert {r["format"] for r in TABLE} == {"prefs", "qrels_prefs", "qrels_jg"}
    flags = [f for r in TABLE for f in r["flags"]]
    assert {"-q", "-c", "-M", "-l", "-J", "P_avgjg.5,10", "Rprec_mult_avgjg.0.5,0.25,2",
            "runid", "num_q"} <= set(flags)
    assert any(r["v10.0"]["status"] == 4 for r in TABLE)  # judged topics the run lacks
    assert any(r["v9.0.8"]["status"] == 2 for r in TABLE)  # comment lines
    assert any(r["v9.0.8"]["status"] == 7 for r in TABLE)  # no run topic judged


@pytest.mark.parametrize("row, tag", CASES)
def test_cli_prints_the_binary_s_bytes(capsys, tmp_path, row, tag):
    want, text = _want(row, tag)
    code = main(["eval", "--profile", PROFILES[tag], *row["flags"], "-R", row["format"],
                 str(_source(row, text, tmp_path)), str(_run(row))])
    out, err = capsys.readouterr()
    if want is NO_OVERLAP:
        assert (code, out) == (7, "") and "no topic has both" in err
        return
    assert code == 0, err
    assert out == want


def _library_options(flags: list[str]) -> tuple[list[str], dict, bool, bool]:
    """trec_eval's flags as evaluate()'s arguments: measures, options, -q, summary."""
    measures, options, per_topic = [], {}, False
    it = iter(flags)
    for flag in it:
        if flag == "-m":
            measures.append(next(it))
        elif flag == "-q":
            per_topic = True
        elif flag == "-c":
            options["complete_topics"] = True
        elif flag == "-M":
            options["depth"] = int(next(it))
        elif flag == "-l":
            options["relevance_level"] = int(next(it))
        elif flag == "-J":
            options["judged_only"] = True
        else:
            raise AssertionError(flag)
    return measures, options, per_topic, True


@pytest.mark.parametrize("row, tag", CASES)
def test_library_gives_the_binary_s_values(tmp_path, row, tag):
    want, text = _want(row, tag)
    measures, options, per_topic, summary = _library_options(row["flags"])
    if want is NO_OVERLAP:
        with pytest.raises(cranfield.EvaluationError, match="no topic has both"):
            cranfield.evaluate(_source(row, text, tmp_path), _run(row), measures,
                               qrels_format=row["format"], profile=PROFILES[tag], **options)
        return
    ev = cranfield.evaluate(_source(row, text, tmp_path), _run(row), measures,
                            qrels_format=row["format"], profile=PROFILES[tag], **options)
    assert format_jg(ev, per_topic=per_topic, summary=summary) == want


COMMENTED = [row for row in TABLE if row["v9.0.8"]["status"] == 2]
assert COMMENTED and all("uncommented" in row["v9.0.8"] for row in COMMENTED)


@pytest.mark.parametrize("row", COMMENTED, ids=[r["case"] for r in COMMENTED])
def test_9_0_8_refuses_comment_lines_10_skips_them(capsys, row):
    """trec_eval 9.0.8's readers of prefs, qrels_prefs and qrels_jg files have no comment
    lines: it stops at the first '#' line ("Malformed line N", exit 2) where 10.0 skips it.
    The 9.0.8 profile refuses it naming that line, on the command line and in the library;
    the 10.0 profile reads the file (test_cli_prints_the_binary_s_bytes holds its values)."""
    line = int(row["v9.0.8"]["stderr"].split("Malformed line ")[1].split()[0])
    text = _judgments(row).read_text().splitlines()
    assert text[line - 1].startswith("# comment")  # the line 9.0.8 names is the comment
    assert not any(x.startswith("#") for x in text[:line - 1])
    code = main(["eval", "--profile", "trec_eval-9.0.8", *row["flags"], "-R", row["format"],
                 str(_judgments(row)), str(_run(row))])
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    assert f":{line}: " in err and "comment" in err  # path:line: reason
    measures, options, _, _ = _library_options(row["flags"])
    with pytest.raises(cranfield.InputError) as caught:
        cranfield.evaluate(_judgments(row), _run(row), measures, qrels_format=row["format"],
                           profile="trec_eval-9.0.8", **options)
    assert caught.value.line == line
    ev = cranfield.evaluate(_judgments(row), _run(row), measures, qrels_format=row["format"],
                            profile="trec_eval-10", **options)
    assert ev.per_topic


TE = DATA.parent / "trec_eval"


@pytest.mark.parametrize("fmt, judgments, run, line", [
    ("prefs", "prefs.comment.test", "prefs.results.test", 1),
    ("qrels_jg", "qrels.comments.123", "results.test", 2)])
def test_upstream_comment_files_are_10_0_s(capsys, fmt, judgments, run, line):
    """trec_eval 10.0's quicktest reads prefs.comment.test and qrels.comments.123 (its
    out.test.prefs and out.test.qrels_jg: the conformance test); the 9.0.8 binary stops at
    their first comment line ("trec_eval.get_prefs: Malformed line 1", "get_qrels_jg:
    Malformed line 2", exit 2: MANIFEST.md), and so does its profile."""
    code = main(["eval", "--profile", "trec_eval-9.0.8", "-q", "-R", fmt, str(TE / judgments),
                 str(TE / run)])
    out, err = capsys.readouterr()
    assert code != 0 and out == ""
    assert f"{judgments}:{line}: trec_eval 9.0.8 reads no comment lines" in err


@pytest.mark.parametrize("fmt, judgments", [("prefs", "q1 A s d1 2\nq1 A s d2 1\n"),
                                            ("qrels_prefs", "q1 A d1 2\nq1 A d2 1\n"),
                                            ("qrels_jg", "q1 A d1 1\nq1 B d2 1\n")])
@pytest.mark.parametrize("flags", [[], ["-c"]], ids=["", "c"])
@pytest.mark.parametrize("profile", list(PROFILES.values()))
def test_no_judged_topic_in_the_run_is_refused(capsys, tmp_path, fmt, judgments, flags,
                                               profile):
    """No run topic judged: the 9.0.8 binary says "trec_eval: No queries with both results
    and relevance info" and exits 7, with or without -c, for every -R format (checked on
    these inputs); Cranfield too, as for ordinary qrels (it printed zeros before)."""
    q, r = tmp_path / "judgments", tmp_path / "run"
    q.write_text(judgments)
    r.write_text("q9 Q0 d1 1 3 r\n")
    code = main(["eval", "--profile", profile, *flags, "-R", fmt, str(q), str(r)])
    out, err = capsys.readouterr()
    assert (code, out) == (7, "")
    assert "no topic has both results and relevance judgments" in err
    with pytest.raises(cranfield.EvaluationError) as caught:
        cranfield.evaluate(q, r, qrels_format=fmt, profile=profile,
                           complete_topics=bool(flags))
    assert caught.value.code == "no-overlap"
