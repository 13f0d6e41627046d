"""trec_eval's last digit on means that sit on a rounding boundary (issue #27).

trec_eval adds each topic's value into a double, topic after topic in strcmp order of the
topic ids, divides by the topic count and prints "%6.4f". Where the exact mean is x.xxxx5 the
double lands a few ulps to one side, and which side depends on the order of the additions:
numpy's pairwise sum printed 0.0075 where trec_eval prints 0.0074. The data
(tests/data/trec_eval_boundaries, made by its generate.py; expected outputs from the
unmodified trec_eval 9.0.8 and 10.0 binaries by make_expected.py, see
tests/data/PROVENANCE.md) hold 1,000 to 8,000 topics whose means of many all_trec measures
are exactly on such boundaries. Cranfield's bytes must be the binaries' bytes, in both
profiles, summary and -q, whole run at once and combined from shards.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from binary_cases import PROFILES, make_expected

import cranfield
from cranfield.cli import main
from cranfield.reports.trec_format import format_trec
from cranfield.shards import combine

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval_boundaries"
EXPECTED = DATA / "expected"
MAKE_EXPECTED = make_expected(DATA)  # the script that ran the binaries on these cases
PREFIXES = MAKE_EXPECTED.PREFIXES


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, tuple[list[str], Path, Path]]:
    """case -> (flags, qrels, run): the very files make_expected.py gave the binaries."""
    return MAKE_EXPECTED.inputs(tmp_path_factory.mktemp("boundaries"))


def cli(capsys, profile: str, flags: list[str], qrels: Path, run: Path) -> str:
    code = main(["eval", "--profile", profile, *flags, str(qrels), str(run)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def differing(got: str, want: str) -> list[tuple[str, str]]:
    """(got, want) line pairs that differ, for a readable failure."""
    return [(g, w) for g, w in zip(got.splitlines(), want.splitlines(), strict=False)
            if g != w]


SUMMARY_CASES = [pytest.param(case, tag, id=f"{case}-{tag}")
                 for case in [f"T{n}" for n in PREFIXES] + ["c5000"] for tag in PROFILES]


@pytest.mark.parametrize("case, tag", SUMMARY_CASES)
def test_summary_is_trec_eval_s_bytes(capsys, inputs, case, tag):
    flags, qrels, run = inputs[case]
    got = cli(capsys, PROFILES[tag], flags, qrels, run)
    want = (EXPECTED / f"{case}.{tag}.out").read_text()
    assert not differing(got, want)
    assert got == want


@pytest.mark.parametrize("n", MAKE_EXPECTED.HASHED)
@pytest.mark.parametrize("tag", list(PROFILES))
def test_per_topic_output_is_trec_eval_s_bytes(capsys, inputs, n, tag):
    """-q: every per-topic line and then the summary (kept as the sha256 of the binary's
    output: several megabytes); the summary lines are the ones the test above holds."""
    flags, qrels, run = inputs[f"T{n}.q"]
    got = cli(capsys, PROFILES[tag], flags, qrels, run)
    summary = (EXPECTED / f"T{n}.{tag}.out").read_text()
    assert got.endswith(summary)
    want = (EXPECTED / f"T{n}.q.{tag}.sha256").read_text().strip()
    assert hashlib.sha256(got.encode()).hexdigest() == want


@pytest.mark.parametrize("tag", list(PROFILES))
def test_shards_combined_print_the_same_bytes(inputs, tag):
    """The sharded path (evaluate each shard, then combine) sums in the same order as one
    evaluation, whatever order the shards come in."""
    _, qrels, run = inputs["T8000"]
    profile = PROFILES[tag]
    qrels_obj = cranfield.read_qrels(qrels)
    lines = run.read_text().splitlines(True)
    topics = sorted({x.split(" ", 1)[0] for x in lines})
    shard_of = {t: i % 3 for i, t in enumerate(topics)}  # interleaved: no shard is a range
    texts = ["".join(x for x in lines if shard_of[x.split(" ", 1)[0]] == i) for i in range(3)]
    parts = []
    for text in reversed(texts):  # as the worker does: each shard against its topics' qrels
        shard = cranfield.read_run(text)
        parts.append(cranfield.evaluate(qrels_obj.subset(shard.topics), shard, "all_trec",
                                        profile=profile, require_overlap=False))
    whole = combine(parts, qrels_obj, topics, "boundaries")
    assert format_trec(whole) == (EXPECTED / f"T8000.{tag}.out").read_text()


@pytest.mark.parametrize("profile", list(PROFILES.values()))
def test_seen_p10_on_0_00745_prints_0_0074(profile):
    """The case seen (issue #27): 2,000 topics, 149 of them with their one retrieved
    document relevant, so P_10 is 0.1 on 149 topics and the mean exactly 0.00745. trec_eval
    9.0.8 and 10.0 both print 0.0074 (the sum of 149 tenths added in turn is
    14.899999999999963); numpy's pairwise sum made it 14.900000000000002 and printed 0.0075.
    (Both binaries' output, P_10/map/recip_rank: 0.0074/0.0745/0.0745.)"""
    topics = [f"t{i:04d}" for i in range(2000)]
    qrels = "".join(f"{t} 0 d1 {int(i < 149)}\n" for i, t in enumerate(topics))
    run = "".join(f"{t} Q0 d1 1 1.0 seen\n" for t in topics)
    ev = cranfield.evaluate(qrels, run, ["P.10", "map", "recip_rank"], profile=profile)
    assert format_trec(ev) == ("map                   \tall\t0.0745\n"
                               "recip_rank            \tall\t0.0745\n"
                               "P_10                  \tall\t0.0074\n")
    assert ev.aggregate["P_10"] == 14.899999999999963 / 2000


def test_a_comparison_s_mean_is_the_digit_trec_eval_prints():
    """A comparison's per-run mean over the common topics is summed as trec_eval sums: on
    the seen case it equals the run's trec_eval aggregate, bit for bit (pairwise: 0.0075)."""
    from cranfield.compare.comparison import compare

    topics = [f"t{i:04d}" for i in range(2000)]
    qrels = "".join(f"{t} 0 d1 {int(i < 149)}\n" for i, t in enumerate(topics))
    runs = {name: "".join(f"{t} Q0 d1 1 1.0 {name}\n" for t in topics) for name in "ab"}
    doc = compare(qrels, runs, ["P.10"])
    for name in "ab":
        s = doc["summary"]["P_10"][name]
        assert s["mean"] == s["aggregate"] == 14.899999999999963 / 2000
        assert "%.4f" % s["mean"] == "0.0074"
