"""The qrels diff (issue #31): cranfield.inputs.qrels_diff.diff_qrels on tables of two
versions, each case's expected values written out; the text of
cranfield.reports.qrels_diff_text; ``cranfield qrels diff OLD NEW`` on two files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cranfield
from cranfield.errors import InputError
from cranfield.inputs.judgment_files import read_qrels_jg
from cranfield.inputs.qrels_diff import diff_qrels
from cranfield.reports.qrels_diff_text import diff_document, format_diff, side

ROOT = Path(__file__).resolve().parents[2]


def q(text: str, diversity: bool = False):
    return cranfield.read_qrels(text, diversity=diversity)


def changes(doc: dict) -> dict:
    """{topic: (status, added, removed, regraded)} with judgments as tuples."""
    def row(j: dict, *names: str) -> tuple:
        return tuple(j[n] for n in names)

    out = {}
    for t in doc["topics"]:
        group = [k for k in ("subtopic", "jg") if any(k in j for j in
                                                       t["added"] + t["removed"] + t["regraded"])]
        names = (*group, "docid")
        out[t["topic"]] = (t["status"],
                           [row(j, *names, "grade") for j in t["added"]],
                           [row(j, *names, "grade") for j in t["removed"]],
                           [row(j, *names, "from", "to") for j in t["regraded"]])
    return out


CASES = [
    pytest.param("1 0 a 1\n1 0 b 0\n", "1 0 a 1\n1 0 b 0\n", {},
                 {"added": 0, "removed": 0, "regraded": 0, "unchanged": 2, "topics_changed": 0,
                  "topics_unchanged": 1}, id="same"),
    pytest.param("1 0 a 1\n1 0 b 0\n1 0 c 2\n2 0 x 1\n",
                 "1 0 a 1\n1 0 b 1\n1 0 d 0\n3 0 y 2\n3 0 z 0\n",
                 {"1": ("changed", [("d", 0)], [("c", 2)], [("b", 0, 1)]),
                  "2": ("removed", [], [("x", 1)], []),
                  "3": ("added", [("y", 2), ("z", 0)], [], [])},
                 {"added": 3, "removed": 2, "regraded": 1, "unchanged": 1,
                  "judgments_from": 4, "judgments_to": 5, "topics_from": 2, "topics_to": 2,
                  "topics_added": 1, "topics_removed": 1, "topics_changed": 1,
                  "topics_unchanged": 0}, id="added-removed-regraded"),
    # pooled but unjudged (-1) to judged is a regrade; 0 -> 0 is not
    pytest.param("5 0 a -1\n5 0 b 0\n", "5 0 a 2\n5 0 b 0\n",
                 {"5": ("changed", [], [], [("a", -1, 2)])},
                 {"regraded": 1, "unchanged": 1}, id="unjudged-to-judged"),
    # trec_eval's order: strcmp of the UTF-8 bytes ("10" < "9", "B" < "a", "z" < "é")
    pytest.param("9 0 a 1\n", "9 0 a 1\n10 0 é 1\n10 0 z 1\n10 0 B 0\n10 0 a 0\n",
                 {"10": ("added", [("B", 0), ("a", 0), ("z", 1), ("é", 1)], [], [])},
                 {"added": 4, "topics_added": 1, "topics_unchanged": 1}, id="strcmp-order"),
]


@pytest.mark.parametrize(("old", "new", "expected", "totals"), CASES)
def test_diff_of_plain_qrels(old, new, expected, totals):
    doc = diff_qrels(q(old), q(new))
    assert doc["kind"] == "qrels"
    assert changes(doc) == expected
    assert list(changes(doc)) == [t["topic"] for t in doc["topics"]]
    assert {k: doc["totals"][k] for k in totals} == totals
    added = sorted((t["topic"] for t in doc["topics"] if t["status"] == "added"),
                   key=lambda s: s.encode())
    assert doc["topics_added"] == added


def test_counts_per_topic_add_up():
    old = "1 0 a 1\n1 0 b 0\n1 0 c 2\n1 0 e 1\n"
    new = "1 0 a 1\n1 0 b 1\n1 0 d 0\n1 0 e 1\n"
    doc = diff_qrels(q(old), q(new))
    assert doc["topics"][0]["counts"] == {"added": 1, "removed": 1, "regraded": 1,
                                          "unchanged": 2}


def test_diff_of_subtopic_qrels_keys_on_the_subtopic():
    old = q("1 1 a 1\n1 2 a 0\n", diversity=True)
    new = q("1 1 a 1\n1 2 a 1\n1 3 a 1\n", diversity=True)
    doc = diff_qrels(old, new, "subtopics")
    assert changes(doc) == {"1": ("changed", [("3", "a", 1)], [], [("2", "a", 0, 1)])}
    assert doc["totals"]["unchanged"] == 1


def test_diff_of_judgment_groups_keys_on_the_group():
    old = read_qrels_jg("1 A a 1\n1 A b 0\n1 B a 1\n")
    new = read_qrels_jg("1 A a 1\n1 A b 2\n1 B a 1\n1 C a 0\n2 A x 1\n")
    doc = diff_qrels(old, new, "qrels_jg")
    assert changes(doc) == {"1": ("changed", [("C", "a", 0)], [], [("A", "b", 0, 2)]),
                            "2": ("added", [("A", "x", 1)], [], [])}
    text = format_diff(diff_document(doc, side("o", 3, 1, unknown="file"),
                                     side("n", 5, 2, unknown="file")))
    assert "\n+ C a 0\n~ A b 0 -> 2\n" in text and "\n+ A x 1\n" in text


@pytest.mark.parametrize(("kind", "message"), [
    ("prefs", r"preference judgments \(prefs\) have no grade"),
    ("qrels_prefs", "have no grade to compare"),
    ("nonsense", "unknown kind of judgments"),
])
def test_refused_kinds(kind, message):
    with pytest.raises(InputError, match=message):
        diff_qrels(q("1 0 a 1\n"), q("1 0 a 1\n"), kind)


def test_judgment_groups_given_as_plain_qrels_are_refused():
    with pytest.raises(InputError, match="judgment groups expected"):
        diff_qrels(q("1 0 a 1\n"), q("1 0 a 1\n"), "qrels_jg")
    with pytest.raises(InputError, match="qrels expected"):
        diff_qrels(read_qrels_jg("1 A a 1\n"), q("1 0 a 1\n"))


def test_text_of_a_diff():
    doc = diff_qrels(q("1 0 a 1\n1 0 b 0\n2 0 x 1\n"), q("1 0 a 2\n1 0 c 1\n3 0 y 0\n"))
    text = format_diff(diff_document(doc, side("q@1111", 3, 2, version="1111", pool_depth=20),
                                     side("q@2222", 3, 2, version="2222")))
    assert text == (
        "qrels diff (qrels)\n"
        "from  q@1111  topics 2  judgments 3  pool depth 20\n"
        "to    q@2222  topics 2  judgments 3  pool depth unknown (not recorded: the version "
        "was stored without pool_depth)\n"
        "judgments  added 2  removed 2  regraded 1  unchanged 0\n"
        "topics  added 1  removed 1  changed 1  unchanged 0\n"
        "topics added: 3\n"
        "topics removed: 2\n"
        "\ntopic 1  changed  added 1  removed 1  regraded 1  unchanged 0\n"
        "+ c 1\n- b 0\n~ a 1 -> 2\n"
        "\ntopic 2  removed  added 0  removed 1  regraded 0  unchanged 0\n- x 1\n"
        "\ntopic 3  added  added 1  removed 0  regraded 0  unchanged 0\n+ y 0\n")
    page = format_diff(diff_document(doc, side("a", 3, 2), side("b", 3, 2), 1, 1, "/next"))
    assert "topic 1 " not in page and "\ntopic 2  removed" in page and "topic 3 " not in page
    assert page.endswith("\n(changed topics 2-2 of 3; next page: /next)\n")


def test_the_work_is_linear_in_the_judgments_not_quadratic():
    """A diff of 20,000 judgments where every one changes: the lists hold each once."""
    old = q("".join(f"{t} 0 d{i} 1\n" for t in range(20) for i in range(1000)))
    new = q("".join(f"{t} 0 d{i} {2 if i % 2 else 1}\n" for t in range(20) for i in range(500,
                                                                                       1500)))
    t = diff_qrels(old, new)["totals"]
    assert (t["added"], t["removed"], t["regraded"], t["unchanged"]) == (10000, 10000, 5000,
                                                                         5000)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cranfield.cli", "qrels", "diff", *args],
                          capture_output=True, text=True, cwd=cwd)


def test_cli_on_two_files_prints_the_formatted_diff(tmp_path):
    (tmp_path / "old").write_text("1 0 a 1\n1 0 b 0\n2 0 x 1\n")
    (tmp_path / "new").write_text("1 0 a 2\n1 0 c 1\n3 0 y 0\n")
    out = cli("old", "new", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = diff_qrels(q("1 0 a 1\n1 0 b 0\n2 0 x 1\n"), q("1 0 a 2\n1 0 c 1\n3 0 y 0\n"))
    assert out.stdout == format_diff(diff_document(doc, side("old", 3, 2, unknown="file"),
                                                   side("new", 3, 2, unknown="file")))
    as_json = json.loads(cli("old", "new", "--format", "json", cwd=tmp_path).stdout)
    assert as_json["totals"]["regraded"] == 1 and as_json["from"]["pool_depth"] is None
    assert as_json["from"]["pool_depth_note"] == "not recorded: a qrels file carries no pool depth"


def test_cli_refusals(tmp_path):
    (tmp_path / "old").write_text("1 0 a 1\n")
    missing = cli("old", "nope", cwd=tmp_path)
    assert missing.returncode == 2 and "nope" in missing.stderr
    mixed = cli("old", "old", "--from", "0" * 16, cwd=tmp_path)
    assert mixed.returncode == 1 and "--from and --to" in mixed.stderr
    prefs = cli("old", "old", "-R", "prefs", cwd=tmp_path)
    assert prefs.returncode == 2  # argparse: not a choice
    no_server = subprocess.run([sys.executable, "-m", "cranfield.cli", "qrels", "diff", "q"],
                               capture_output=True, text=True, cwd=tmp_path,
                               env={"PATH": "/usr/bin:/bin"})
    assert no_server.returncode == 1 and "--server" in no_server.stderr


def oracle(old: dict, new: dict) -> dict:
    """{topic: (added, removed, regraded)} by dicts and sorted byte keys: the diff's meaning
    written plainly (old, new: {(topic, group, docid): grade})."""
    out: dict = {}
    for key in sorted(old.keys() | new.keys(), key=lambda k: tuple(s.encode() for s in k)):
        lists = out.setdefault(key[0], ([], [], []))
        if key not in old:
            lists[0].append((*key[1:], new[key]))
        elif key not in new:
            lists[1].append((*key[1:], old[key]))
        elif old[key] != new[key]:
            lists[2].append((*key[1:], old[key], new[key]))
    return {t: v for t, v in out.items() if any(v)}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["qrels", "qrels_jg"])
def test_random_versions_equal_the_plain_oracle(seed, kind):
    import random

    rng = random.Random(seed)
    words = ["a", "B", "é", "z", "10", "9", "ab", "Ä", "d-1", "d_2", "日本", "x.y"]

    def version() -> dict:
        return {(rng.choice(words[:6]), rng.choice(["A", "b", "C"]) if kind == "qrels_jg"
                 else "", rng.choice(words)): rng.choice([-1, 0, 1, 2, 3])
                for _ in range(rng.randrange(1, 60))}

    old, new = version(), version()

    def read(v: dict):
        if kind == "qrels_jg":
            return read_qrels_jg("".join(f"{t} {g} {d} {r}\n" for (t, g, d), r in v.items()))
        return q("".join(f"{t} 0 {d} {r}\n" for (t, _, d), r in v.items()))

    doc = diff_qrels(read(old), read(new), kind)
    got = {}
    for t in doc["topics"]:
        names = ("jg", "docid") if kind == "qrels_jg" else ("docid",)
        got[t["topic"]] = ([(*(j[n] for n in names), j["grade"]) for j in t["added"]],
                           [(*(j[n] for n in names), j["grade"]) for j in t["removed"]],
                           [(*(j[n] for n in names), j["from"], j["to"]) for j in t["regraded"]])
    strip = (lambda rows: rows) if kind == "qrels_jg" else \
        (lambda rows: [r[1:] for r in rows])  # the oracle's group "" of plain qrels
    expected = {t: tuple(strip(rows) for rows in v) for t, v in oracle(old, new).items()}
    assert got == expected
    assert list(got) == sorted(got, key=str.encode)
    t = doc["totals"]
    assert t["added"] + t["unchanged"] + t["regraded"] == len(new)
    assert t["removed"] + t["unchanged"] + t["regraded"] == len(old)
