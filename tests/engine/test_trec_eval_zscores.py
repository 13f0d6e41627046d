"""trec_eval's -Z: z-scores from a file of per-topic means and standard deviations.

The byte-for-byte runs of NIST's out.test.aqZ (both versions) are in
test_trec_eval_conformance.py's table; here: the library equals the CLI for every shape of
z-scores, the rules trec_eval applies (convert_zscores.c) on a hand-computed example, and
malformed files refused naming the line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import cranfield
from cranfield.cli import main
from cranfield.inputs.zscores import MISSING, read_zscores
from cranfield.reports.trec_format import format_trec

TE = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
V9, V10 = "trec_eval-9.0.8", "trec_eval-10"
VERSIONS = [(V9, TE / "v9.0.8"), (V10, TE)]


def cli(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def mapping_of(path: Path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        t, m, mean, sd = line.split()
        out.setdefault(t, {})[m] = (float(mean), float(sd))
    return out


@pytest.mark.parametrize("profile, folder", VERSIONS, ids=["9.0.8", "10"])
@pytest.mark.parametrize("shape", ["path", "text", "bytes", "mapping", "ZScores"])
def test_library_equals_cli_and_upstream(capsys, profile, folder, shape):
    zfile = folder / "zscores_file"
    given = {"path": zfile, "text": zfile.read_text(), "bytes": zfile.read_bytes(),
             "mapping": mapping_of(zfile), "ZScores": read_zscores(zfile)}[shape]
    ev = cranfield.evaluate(TE / "qrels.test", TE / "results.test", ["all_trec"],
                            profile=profile, zscores=given)
    text = format_trec(ev, per_topic=True)
    code, out, err = cli(capsys, ["eval", "--profile", profile, "-q", "-m", "all_trec",
                                  "-Z", str(zfile), str(TE / "qrels.test"),
                                  str(TE / "results.test")])
    assert code == 0, err
    assert text == out == (folder / "out.test.aqZ").read_text()
    assert ev.options["zscores"]["topics"] == 3
    # the numbers themselves: map on 301 is (AP - mean) / stddev, printed -0.5746 in 10.0
    if profile == V10:
        assert ev.per_topic["301"]["map"] == pytest.approx(-0.5746, abs=5e-5)
        assert ev.aggregate["num_q"] == 3


QRELS = "1 0 a 1\n1 0 b 0\n2 0 c 1\n2 0 d 1\n3 0 e 1\n"
RUN = "1 Q0 a 1 3 r\n1 Q0 b 2 2 r\n2 Q0 x 1 3 r\n2 Q0 c 2 2 r\n"


def test_hand_computed_rules():
    """map: topic 1 AP 1, topic 2 AP 0.25. Topic 1: (1 - 0.5) / 0.25 = 2; topic 2 has no
    map pair: -1000000. num_ret: topic 1 stddev 0 and value = mean -> 0; topic 2 stddev 0,
    value 2 != 3 -> -1000000. gm_map: z of log(max(AP, 1e-5)); the summary exp(mean z).
    num_q stays the count."""
    z = ("1 map 0.5 0.25\n1 num_ret 2 0\n2 num_ret 3 0\n"
         f"1 gm_map 0 1\n2 gm_map {math.log(0.25)} 2\n")
    ev = cranfield.evaluate(QRELS, RUN, ["map", "num_ret", "gm_map", "num_q"], zscores=z)
    assert ev.per_topic["1"]["map"] == 2.0
    assert ev.per_topic["2"]["map"] == MISSING
    assert ev.per_topic["1"]["num_ret"] == 0.0
    assert ev.per_topic["2"]["num_ret"] == MISSING
    assert ev.aggregate["map"] == (2.0 + MISSING) / 2
    assert ev.aggregate["num_ret"] == MISSING  # num_* summed, not averaged
    assert ev.aggregate["gm_map"] == pytest.approx(math.exp((0.0 + 0.0) / 2))
    assert ev.aggregate["num_q"] == 2
    text = format_trec(ev, per_topic=True)
    assert "Znum_ret               \t1\t0.0000\n" in text
    assert "Znum_q                 \tall\t2.0000\n" in text
    assert "Zmap                   \t2\t-1000000.0000\n" in text


@pytest.mark.parametrize("profile", [V9, V10])
def test_complete_topics(profile):
    """-c: topic 3 is in the qrels only. 9.0.8 never evaluates it, so it adds 0 (not a
    z-score) and is not printed; 10.0 evaluates it (AP 0) and converts it."""
    z = "1 map 0.5 0.25\n2 map 0.25 1\n3 map 0.5 0.5\n"
    ev = cranfield.evaluate(QRELS, RUN, ["map"], zscores=z, complete_topics=True,
                            profile=profile)
    third = 0.0 if profile == V9 else (0.0 - 0.5) / 0.5
    assert ev.aggregate["map"] == pytest.approx((2.0 + 0.0 + third) / 3)
    assert ("3" in ev.per_topic) == (profile == V10)


def test_a_topic_missing_from_the_file_is_missing_everywhere():
    ev = cranfield.evaluate(QRELS, RUN, ["P_1", "recall_1"], zscores="1 P_1 0 1\n")
    assert ev.per_topic["2"] == {"P_1": MISSING, "recall_1": MISSING}
    assert ev.per_topic["1"] == {"P_1": 1.0, "recall_1": MISSING}


@pytest.mark.parametrize("text, line, words", [
    ("1 map 0.5 0.1\n1 P_5 0.5\n", 2, "3 fields"),
    ("1 map 0.5 0.1 extra\n", 1, "5 fields"),
    ("1 map 0.5 0.1\n\n1 P_5 abc 0.1\n", 3, "'abc' is not a number"),
    ("1 map 0.5 -0.1\n", 1, "negative"),
    ("# comment\n1 map 0.5 0.1\n2 map 1 1\n1 map 0.4 0.1\n", 4, "lines 2 and 4"),
    ("1 map 0.5 0x1p3\n", 1, "not"),
    ("1 map 0.5\x0b 0.1\n", 1, "not allowed"),
])
def test_malformed_files_are_refused_naming_the_line(capsys, tmp_path, text, line, words):
    path = tmp_path / "z.txt"
    path.write_text(text)
    code, out, err = cli(capsys, ["eval", "-Z", str(path), str(TE / "qrels.test"),
                                  str(TE / "results.test")])
    assert code == 2 and out == ""
    assert f"{path}:{line}:" in err and words in err
    with pytest.raises(cranfield.InputError) as exc:
        read_zscores(text)
    assert exc.value.line == line


def test_empty_and_unreadable(capsys, tmp_path):
    (tmp_path / "e").write_text("# nothing\n\n")
    code, _, err = cli(capsys, ["eval", "-Z", str(tmp_path / "e"), str(TE / "qrels.test"),
                                str(TE / "results.test")])
    assert code == 2 and "holds no z-scores" in err
    code, _, err = cli(capsys, ["eval", "-Z", str(tmp_path / "nope"), str(TE / "qrels.test"),
                                str(TE / "results.test")])
    assert code == 2 and "cannot read" in err


@pytest.mark.parametrize("mapping, field", [
    ({"1": {"map": [0.5]}}, "zscores.1.map"),
    ({"1": {"map": [0.5, "x"]}}, "zscores.1.map"),
    ({"1": {"map": [0.5, True]}}, "zscores.1.map"),
    ({"1": {"map": [0.5, -1]}}, "zscores.1.map"),
    ({"1": []}, "zscores.1"),
    ({"1 2": {"map": [0, 1]}}, "zscores.1 2"),
])
def test_malformed_mappings_name_the_path(mapping, field):
    with pytest.raises(cranfield.InputError) as exc:
        cranfield.evaluate(QRELS, RUN, ["map"], zscores=mapping)
    assert exc.value.field == field


def test_micro_aggregation_is_refused():
    with pytest.raises(cranfield.EvaluationError) as exc:
        cranfield.evaluate(QRELS, RUN, ["set_P"], zscores="1 set_P 0 1\n",
                           aggregation="micro")
    assert exc.value.field == "options.zscores"


def test_zscores_are_not_sent_to_a_service(capsys):
    code, out, err = cli(capsys, ["eval", "--server", "http://127.0.0.1:9", "-Z",
                                  str(TE / "zscores_file"), str(TE / "qrels.test"),
                                  str(TE / "results.test")])
    assert code == 1 and out == "" and "-Z is evaluated locally only" in err


def test_pairs_are_looked_up_by_the_name_trec_eval_prints():
    """nDCG@10 is printed ndcg_cut_10, and the file names it so (as for trec_eval)."""
    raw = cranfield.evaluate(QRELS, RUN, ["nDCG@10"]).per_topic
    ev = cranfield.evaluate(QRELS, RUN, ["nDCG@10"],
                            zscores="1 ndcg_cut_10 0.5 2\n2 ndcg_cut_10 0 1\n")
    assert ev.per_topic["1"]["nDCG@10"] == (raw["1"]["nDCG@10"] - 0.5) / 2
    assert ev.per_topic["2"]["nDCG@10"] == raw["2"]["nDCG@10"]
    assert format_trec(ev).startswith("Zndcg_cut_10           \tall\t")


def test_a_str_naming_a_file_with_spaces_is_read_as_the_file(tmp_path):
    """A path given as a str is the file it names, spaces and all (found in review: the
    str was read as z-score text, 'mean: scores is not a number')."""
    spaced = tmp_path / "my z scores file.txt"
    spaced.write_bytes((TE / "zscores_file").read_bytes())
    got, want = read_zscores(str(spaced)), read_zscores(TE / "zscores_file")
    assert got.table == want.table and got.source == str(spaced)


# Accuracy@1 per topic (review R3 F9, F5): a -> 1.0 (relevant at rank 1), b and c -> no value
# (no relevant document in the top 1); P_1 per topic: 1, 0, 0
ACC_QRELS = {"a": {"d1": 1, "d3": 1}, "b": {"d1": 1, "d9": 1}, "c": {"d1": 1}}
ACC_RUN = {"a": {"d1": 3.0, "d2": 2.0}, "b": {"d2": 3.0, "d3": 2.0},
           "c": {"d2": 3.0, "d1": 2.0}}


@pytest.mark.parametrize("z, per_topic, summary", [
    # pairs for a and c: a -> (1 - 0.5) / 0.2 = 2.5; b (no pair) and c (no value) have none
    ("a Accuracy@1 0.5 0.2\nc Accuracy@1 0.5 0.2\n", {"a": 2.5, "b": None, "c": None}, 2.5),
    # a pair for every topic: still only a has a value
    ("a Accuracy@1 0.5 0.2\nb Accuracy@1 0.5 0.2\nc Accuracy@1 0.5 0.2\n",
     {"a": 2.5, "b": None, "c": None}, 2.5),
    # no pair for the one topic with a value: trec_eval's MISSING there, and only there
    ("b Accuracy@1 0.5 0.2\n", {"a": MISSING, "b": None, "c": None}, MISSING),
])
def test_a_topic_without_a_value_keeps_none_under_z(z, per_topic, summary):
    ev = cranfield.evaluate(ACC_QRELS, ACC_RUN, ["Accuracy@1"], zscores=z)
    got = {t: (None if math.isnan(row["Accuracy@1"]) else row["Accuracy@1"])
           for t, row in ev.per_topic.items()}
    assert got == per_topic
    assert ev.aggregate["Accuracy@1"] == pytest.approx(summary)


def test_no_value_prints_one_way_with_and_without_z():
    """trec_eval's text prints a 0/0 NaN with glibc's %6.4f as ``  -nan`` (the sign bit of the
    x86 default NaN); an Accuracy topic without a value prints the same under -Z."""
    plain = format_trec(cranfield.evaluate(ACC_QRELS, ACC_RUN, ["Accuracy@1"]), per_topic=True)
    zed = format_trec(cranfield.evaluate(ACC_QRELS, ACC_RUN, ["Accuracy@1"],
                                         zscores="a Accuracy@1 0.5 0.2\nc Accuracy@1 0.5 0.2\n"),
                      per_topic=True)
    name = "%-22s" % "Accuracy@1"
    for topic in ("b", "c"):
        assert f"{name}\t{topic}\t  -nan\n" in plain
        assert f"Z{name}\t{topic}\t  -nan\n" in zed
    assert f"Z{name}\tall\t2.5000\n" in zed
    assert "   nan" not in zed
