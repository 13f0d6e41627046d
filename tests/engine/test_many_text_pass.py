"""The compiled text pass of ``evaluate_many`` (cranfield/inputs/_textpass.c, ``rank_text``;
cranfield/inputs/text_pass.py) against the line reader it stands in for (issue #30).

- Differential: ``evaluate_many`` over run files equals ``evaluate`` of each file read by the
  line reader (per-topic values, aggregates, topic sets, cutoff ties, warnings), and equals
  ``evaluate_many`` with the pass switched off, on generated runs (ties exact and as float32,
  docno tie-breaks, unjudged and unretrieved documents, topics on one side only, comments,
  blank lines, tabs, runs of spaces, CRLF, extra fields, no final newline, scores in every
  spelling), in both profiles, with depth, -J, -c and -l.
- Refusals word for word (bad score, too few fields, a docid twice in a topic, a control
  character, non-ASCII, a swapped file...): the pass declines them (None) and the error
  is the one the line reader raises.
- The pass takes what it should (plain text is not left to the line reader), results come in
  the runs' order from its threads, and the extension off gives the same answers.
"""

from __future__ import annotations

import importlib
import os
import random

import numpy as np
import pytest
from extension_off import without_extension
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cranfield
import cranfield.inputs.io
from cranfield.errors import CranfieldError
from cranfield.inputs import text_pass
from cranfield.inputs.io import read_qrels, read_run
from cranfield.inputs.ranking import TIE_WORK_MIN, TIE_WORK_PER_ROW, rank_run
from cranfield.measures import PROFILES
from cranfield.reports.result_document import warnings_for

MANY = importlib.import_module("cranfield.evaluate_many")  # (not the function of that name)
needs_ext = pytest.mark.skipif(text_pass._mapscan is None and os.environ.get("CI") != "true",
                               reason="cranfield.inputs._mapscan not built (no C compiler)")
_EXAMPLES = 60 if os.environ.get("CI") == "true" else 120

# docids whose byte order decides docno tie-breaks ("D" < "a", "10" < "9", "d1" < "d10")
DOCIDS = ["a", "b", "c", "d1", "d10", "d2", "D", "zz", "doc-9", "10", "9", "x.y", "A_1"]
TOPICS = ["q1", "q2", "q10", "Q", "3", "301"]
# spellings the pass reads itself, ones it leaves to plain_score (over 17 digits, a large
# exponent), ones equal only as float32 (1 and 1.000000001; 1e39 and 2e39 are inf in a C float)
SCORES = ["1", "1.0", "1.000000001", "2", "2.5", "-0", "0.0", "-1.5", "1e39", "2e39", "3.25",
          "7", ".5", "-.5", "1e-3", "1E+2", "0.123456789012345678901", "12345678901234567890",
          "1e-400", "2.5e22", "4.4e-23"]
GRADES = [-1, 0, 1, 2, 3]
MEASURES = [["map", "P.2", "ndcg_cut.3", "recip_rank", "num_rel_ret", "Rprec", "bpref"],
            ["all_trec", "ndcg_cut.3", "P.2"],
            ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]]
OPTIONS = [{}, {"depth": 1}, {"depth": 3}, {"judged_only": True}, {"complete_topics": True},
           {"relevance_level": 2}, {"profile": "trec_eval-10"},
           {"profile": "trec_eval-10", "depth": 3, "judged_only": True,
            "complete_topics": True}]


def run_text(rnd: random.Random, *, plain: bool = True) -> bytes:
    """A run's TREC text: a few topics (each in one block, or interleaved), their documents
    with scores from SCORES, in the layouts the line reader reads (``plain``: only those the
    pass reads too)."""
    lines = []
    for topic in rnd.sample(TOPICS, rnd.randint(1, 4)):
        docs = rnd.sample(DOCIDS, rnd.randint(1, 9))
        scored = [(d, rnd.choice(SCORES)) for d in docs]
        if rnd.random() < 0.5:  # a run written best first (the pass then searches)
            scored.sort(key=lambda p: -float(p[1]))
        for rank, (doc, score) in enumerate(scored, 1):
            sep = [" ", "\t", "  ", " \t "][rnd.randrange(4)] if rnd.random() < 0.3 else " "
            fields = [topic, "Q0", doc, str(rank), score, "tag" + str(rnd.randrange(2))]
            if rnd.random() < 0.1:
                fields.append("extra")
            lines.append((" " if rnd.random() < 0.05 else "") + sep.join(fields))
    if rnd.random() < 0.3:
        rnd.shuffle(lines)  # a topic's lines apart
    for _ in range(rnd.randint(0, 2)):
        lines.insert(rnd.randrange(len(lines) + 1),
                     rnd.choice(["", "# a comment", "#x y z", "   ", "\t"]))
    end = "\r\n" if rnd.random() < 0.2 else "\n"
    text = end.join(lines) + (end if rnd.random() < 0.8 else "")
    if not plain:
        text = _spoiled(rnd, text)
    return text.encode("utf-8")


# what the line reader refuses (or reads its own way) and the pass must decline: a line's
# fields spoiled
SPOILS = [
    lambda f: f[:4] + ["x"] + f[5:],             # not a number
    lambda f: f[:4] + ["inf"] + f[5:],
    lambda f: f[:4] + ["nan"] + f[5:],
    lambda f: f[:4] + ["1e400"] + f[5:],         # overflows a double
    lambda f: f[:4] + ["1_0"] + f[5:],
    lambda f: f[:4] + ["0x1p3"] + f[5:],
    lambda f: f[:4] + ["+1.5"] + f[5:],          # read by the line reader, not by the pass
    lambda f: f[:4] + ["5."] + f[5:],            # likewise
    lambda f: f[:5],                             # five fields
    lambda f: f[:2] + ["Qé"] + f[3:],           # non-ASCII docid (read by the line reader)
    lambda f: f[:5] + ["tàg"],                  # non-ASCII runid
    lambda f: f[:2] + [f[2] + "\x0b"] + f[3:],  # a control character
    lambda f: f[:5] + [f[5] + "\r"],            # a CR not before LF
]


def _spoiled(rnd: random.Random, text: str) -> str:
    lines = text.split("\n")
    content = [i for i, ln in enumerate(lines) if ln.split() and not ln.lstrip().startswith("#")]
    i = rnd.choice(content)
    fields = lines[i].split()
    if rnd.random() < 0.15:  # a docid twice in a topic
        lines.insert(i, " ".join(fields))
    else:
        lines[i] = " ".join(rnd.choice(SPOILS)(fields))
    return "\n".join(lines)


def qrels_text(rnd: random.Random, run: bytes) -> bytes:
    """Qrels sharing some of the run's topics and documents, with topics of their own."""
    lines = []
    fields = [ln.split() for ln in run.decode().splitlines()]
    run_docs: dict[str, list[str]] = {}
    for f in fields:
        if len(f) >= 6 and not f[0].startswith("#"):
            run_docs.setdefault(f[0], []).append(f[2])
    topics = list(run_docs) + rnd.sample(TOPICS, rnd.randint(0, 2))
    for topic in dict.fromkeys(topics):
        if rnd.random() < 0.2:
            continue  # a run topic without judgments
        pool = list(dict.fromkeys(run_docs.get(topic, []) + rnd.sample(DOCIDS, 3)))
        for doc in rnd.sample(pool, rnd.randint(1, len(pool))):
            lines.append(f"{topic} 0 {doc} {rnd.choice(GRADES)}")
    if not lines:
        lines.append("q1 0 a 1")
    return ("\n".join(lines) + "\n").encode()


def _canon(values):
    if isinstance(values, dict):
        return {k: _canon(v) for k, v in values.items()}
    if isinstance(values, float) and values != values:
        return "NaN"
    return values


def _described(ev) -> dict:
    sets = ev.topics
    return {"per_topic": _canon(ev.per_topic), "aggregate": _canon(ev.aggregate),
            "sets": (sets.evaluated, sets.run_only, sets.qrels_only), "runid": ev.runid,
            "ties": {k: v.tolist() for k, v in ev.cutoff_ties.items()},
            "warnings": warnings_for(ev, "cli")}


def _refused(exc: CranfieldError) -> tuple:
    return ("refused", type(exc).__name__, str(exc), getattr(exc, "field", None),
            getattr(exc, "code", None), getattr(exc, "line", None))


def one_by_one(qrels, runs: dict, measures, **options) -> list:
    """evaluate of each run, read by the line reader (the reference)."""
    out = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 1 << 62)
        for name, run in runs.items():
            try:
                out.append((name, _described(cranfield.evaluate(qrels, run, measures,
                                                                **options))))
            except CranfieldError as exc:
                out.append((name, _refused(exc)))
                break
    return out


def many(qrels, runs: dict, measures, **options) -> list:
    """evaluate_many's answers, run by run, up to the first refusal."""
    out = []
    try:
        for name, ev in MANY.iter_evaluations(qrels, runs, measures, **options):
            out.append((name, _described(ev)))
    except CranfieldError as exc:
        out.append((getattr(exc, "run", None), _refused(exc)))
    return out


def pass_off(mp) -> None:
    """evaluate_many without the text pass (every run read by read_run), line reader."""
    mp.setattr(MANY, "qrels_table", lambda qrels: None)
    mp.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 1 << 62)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("many_text_pass")


def _files(folder, texts: list[bytes], prefix: str = "r") -> dict:
    paths = {}
    for i, text in enumerate(texts):
        path = folder / f"{prefix}{i}.txt"
        path.write_bytes(text)
        paths[f"{prefix}{i}"] = str(path)
    return paths


def _passed(qrels_path, run, measures, **options):
    """The PassedRun the pass makes of ``run`` under evaluate_many's plan, or None."""
    plan = MANY.plan_evaluation(measures, **options)
    table = text_pass.qrels_table(read_qrels(qrels_path))
    cutoffs = sorted({int(i.value) for i in plan.instances if i.measure.kind == "cutoffs"})
    return text_pass.pass_run(table, run,
                              float32=PROFILES[plan.options["profile"]].float32_scores,
                              tie_cutoffs=tuple(k for k in cutoffs if k <= 1000),
                              tie_work=(TIE_WORK_PER_ROW, TIE_WORK_MIN), reread=read_run)


# ---- evaluations equal ------------------------------------------------------------------


@needs_ext
@settings(max_examples=_EXAMPLES, deadline=None, derandomize=os.environ.get("CI") == "true",
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), options=st.sampled_from(OPTIONS),
       measures=st.sampled_from(MEASURES), spoil=st.integers(0, 9))
def test_evaluate_many_over_files_equals_the_line_reader(folder, seed, options, measures,
                                                           spoil):
    rnd = random.Random(seed)
    texts = [run_text(rnd, plain=spoil != 0 or i != 1) for i in range(3)]
    qrels = folder / "qrels.txt"
    qrels.write_bytes(qrels_text(rnd, texts[0]))
    runs = _files(folder, texts)
    reference = one_by_one(str(qrels), runs, measures, **options)
    got = many(str(qrels), runs, measures, **options)
    with pytest.MonkeyPatch.context() as mp:
        pass_off(mp)
        off = many(str(qrels), runs, measures, **options)
    assert got == off
    assert [r for _, r in got] == [r for _, r in reference]


@needs_ext
def test_plain_text_is_taken_by_the_pass_and_ranked_as_the_line_reader_ranks(folder):
    """Seeded tables: the pass reads every plain text itself (else the differential above
    would only test read_run), and rank_run of its PassedRun equals rank_run of the Run the
    line reader reads (ranks, labels, tie groups, lengths, cutoff ties)."""
    rnd = random.Random(30)
    taken = 0
    for _ in range(150):
        text = run_text(rnd)
        qrels = folder / "q.txt"
        qrels.write_bytes(qrels_text(rnd, text))
        path = folder / "r.txt"
        path.write_bytes(text)
        options = rnd.choice(OPTIONS)
        measures = rnd.choice(MEASURES)
        passed = _passed(str(qrels), str(path), measures, **options)
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 1 << 62)
                read = read_run(str(path))
        except CranfieldError:
            assert passed is None  # (a docid drawn twice in a topic)
            continue
        assert passed is not None, text
        taken += 1
        assert passed.topics == read.topics and passed.runid == read.runid
        assert len(passed) == len(read)
        q = passed.qrels
        float32 = passed.float32
        for depth, judged_only, complete in [(None, False, False), (2, False, True),
                                             (None, True, False)]:
            kw = dict(float32_scores=float32, depth=depth, judged_only=judged_only,
                      complete_topics=complete, tie_cutoffs=passed.tie_cutoffs)
            a, b = rank_run(passed, q, **kw), rank_run(read, q, **kw)
            assert a.topics == b.topics
            for name in ("num_ret", "in_run", "q_topic", "q_grade", "hit_topic", "hit_rank",
                         "hit_label", "hit_tie_first", "hit_tie_last"):
                x, y = getattr(a, name), getattr(b, name)
                if name == "hit_label":  # (one label's tie group: any order of its members)
                    key = np.lexsort((a.hit_label, a.hit_tie_first, a.hit_topic))
                    x = x[key]
                    y = y[np.lexsort((b.hit_label, b.hit_tie_first, b.hit_topic))]
                assert np.array_equal(x, y), name
            assert {k: v.tolist() for k, v in a.cutoff_ties.items()} == \
                {k: v.tolist() for k, v in b.cutoff_ties.items()}
    assert taken > 100


# ---- refusals equal ---------------------------------------------------------------------

REFUSED = {
    "bad score": b"q1 Q0 a 1 x tag\n",
    "infinite score": b"q1 Q0 a 1 inf tag\n",
    "nan score": b"q1 Q0 a 1 nan tag\n",
    "overflowing score": b"q1 Q0 a 1 1e400 tag\n",
    "underscore": b"q1 Q0 a 1 1_0 tag\n",
    "too few fields": b"q1 Q0 a 1 2.0 tag\nq1 Q0 b 2 1.0\n",
    "duplicate docno": b"q1 Q0 a 1 2.0 tag\nq2 Q0 a 1 2.0 tag\nq1 Q0 a 3 1.0 tag\n",
    "control character": b"q1 Q0 a 1 2.0 tag\nq1 Q0 b\x0c 2 1.0 tag\n",
    "lone CR": b"q1 Q0 a 1 2.0 tag\rq1 Q0 b 2 1.0 tag\n",
    "CR at the end": b"q1 Q0 a 1 2.0 tag\r",
    "not UTF-8": b"q1 Q0 a\xff 1 2.0 tag\n",
    "BOM": b"\xef\xbb\xbfq1 Q0 a 1 2.0 tag\n",
    "only comments": b"# nothing\n\n",
    "empty": b"",
    "qrels as the run": b"q1 0 a 1\nq1 0 b 0\n",
    "Parquet magic": b"PAR1 Q0 a 1 2.0 tag\n",
}


@needs_ext
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_are_the_line_readers_word_for_word(folder, case):
    qrels = folder / "qrels_r.txt"
    qrels.write_bytes(b"q1 0 a 1\nq1 0 b 0\nq2 0 a 1\n")
    good = folder / "good.txt"
    good.write_bytes(b"q1 Q0 a 1 2.0 tag\nq1 Q0 b 2 1.0 tag\n")
    bad = folder / "bad.txt"
    bad.write_bytes(REFUSED[case])
    runs = {"good": str(good), "bad": str(bad), "after": str(good)}
    assert _passed(str(qrels), str(bad), ["map"]) is None
    got = many(str(qrels), runs, ["map", "P.10"])
    with pytest.MonkeyPatch.context() as mp:
        pass_off(mp)
        off = many(str(qrels), runs, ["map", "P.10"])
    assert got == off
    assert [name for name, _ in got] == ["good", "bad"] and got[1][1][0] == "refused"
    reference = one_by_one(str(qrels), {"bad": str(bad)}, ["map", "P.10"])
    assert got[1][1] == reference[0][1]


@needs_ext
def test_a_swapped_file_is_refused_before_any_run_as_without_the_pass(folder):
    qrels = folder / "qrels_s.txt"
    qrels.write_bytes(b"q1 0 a 1\n")
    run = folder / "run_s.txt"
    run.write_bytes(b"q1 Q0 a 1 2.0 tag\n")
    got = many(str(run), {"x": str(qrels)}, ["map"])
    with pytest.MonkeyPatch.context() as mp:
        pass_off(mp)
        assert many(str(run), {"x": str(qrels)}, ["map"]) == got
    assert got[0][1][0] == "refused"


# ---- order, threads, what the pass leaves alone, the extension off ----------------------


@needs_ext
def test_many_runs_come_in_order_with_the_pass_and_without_it(folder):
    rnd = random.Random(7)
    texts = [run_text(rnd, plain=i % 5 != 3) for i in range(24)]
    qrels = folder / "qrels_o.txt"
    qrels.write_bytes(qrels_text(rnd, b"".join(t if t.endswith(b"\n") else t + b"\n"
                                               for t in texts)))
    runs = _files(folder, texts, "o")
    got = many(str(qrels), runs, MEASURES[2])
    with pytest.MonkeyPatch.context() as mp:
        pass_off(mp)
        assert many(str(qrels), runs, MEASURES[2]) == got
    assert [name for name, _ in got] == list(runs)[:len(got)]
    assert got == one_by_one(str(qrels), runs, MEASURES[2])


@needs_ext
def test_inputs_the_pass_leaves_to_read_run(folder):
    """Text given as a str, a file object or a mapping are not passed (read as before);
    bytes and a memoryview are; the answers are evaluate's."""
    qrels = b"q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n"
    text = b"q1 Q0 a 1 2.0 tag\nq1 Q0 b 2 1.0 tag\nq2 Q0 c 1 3 tag\n"
    table = text_pass.qrels_table(read_qrels(qrels))
    for run in (text.decode(), {"q1": {"a": 2.0}}, __import__("io").BytesIO(text)):
        assert text_pass.pass_run(table, run, float32=True, tie_cutoffs=(),
                                  tie_work=(16, 1 << 20)) is None
    assert text_pass.pass_run(table, text, float32=True, tie_cutoffs=(),
                              tie_work=(16, 1 << 20)) is not None
    assert text_pass.pass_run(table, memoryview(text), float32=True, tie_cutoffs=(),
                              tie_work=(16, 1 << 20)) is not None
    runs = {"text": text.decode(), "bytes": text, "view": memoryview(bytearray(text)),
            "mapping": {"q1": {"a": 2.0, "b": 1.0}}}
    assert many(qrels, runs, MEASURES[0]) == one_by_one(qrels, runs, MEASURES[0])


def test_the_extension_off_gives_the_same_evaluations(folder, monkeypatch):
    rnd = random.Random(11)
    texts = [run_text(rnd) for _ in range(6)]
    qrels = folder / "qrels_x.txt"
    qrels.write_bytes(qrels_text(rnd, texts[0]))
    runs = _files(folder, texts, "x")
    on = many(str(qrels), runs, MEASURES[1])
    without_extension(monkeypatch)
    assert text_pass.qrels_table(read_qrels(str(qrels))) is None
    assert many(str(qrels), runs, MEASURES[1]) == on


@needs_ext
def test_a_passed_run_ranked_with_other_options_is_read_again(folder):
    """rank_run uses the pass's hits only for its qrels, profile and cutoffs; otherwise the
    run is read (reread) and ranked as columns, with the same answer."""
    rnd = random.Random(5)
    text = run_text(rnd)
    qrels = folder / "q_other.txt"
    qrels.write_bytes(qrels_text(rnd, text))
    path = folder / "r_other.txt"
    path.write_bytes(text)
    passed = _passed(str(qrels), str(path), MEASURES[0])
    assert passed is not None
    read = read_run(str(path))
    calls = []

    def reread(source):
        calls.append(source)
        return read_run(source)

    passed.reread = reread
    for q, float32, cuts in [(read_qrels(str(qrels)), True, passed.tie_cutoffs),
                             (passed.qrels, not passed.float32, passed.tie_cutoffs),
                             (passed.qrels, passed.float32, (1, 2))]:
        a = rank_run(passed, q, float32_scores=float32, tie_cutoffs=cuts)
        b = rank_run(read, q, float32_scores=float32, tie_cutoffs=cuts)
        assert np.array_equal(a.hit_rank, b.hit_rank) and np.array_equal(a.num_ret, b.num_ret)
    assert calls == [str(path)] * 3


@needs_ext
def test_real_valued_gains_evaluate_as_without_the_pass(folder):
    """Qrels declared as real gains (issue #31): the pass ranks against them as against any
    qrels, and the evaluations equal those without it."""
    rnd = random.Random(312)
    texts = [run_text(rnd) for _ in range(4)]
    lines = qrels_text(rnd, b"\n".join(texts)).decode().splitlines()
    real = "\n".join(f"{t} {i} {d} {float(g) * 0.75}" for t, i, d, g in
                     (ln.split() for ln in lines)) + "\n"
    qrels = folder / "qrels_real.txt"
    qrels.write_text(real)
    runs = _files(folder, texts, "g")
    measures = ["nDCG@3", "P(rel=0.5)@2", "AP(rel=0.5)", "ndcg_cut.5"]
    got = many(str(qrels), runs, measures, gains="real")
    with pytest.MonkeyPatch.context() as mp:
        pass_off(mp)
        assert many(str(qrels), runs, measures, gains="real") == got
    assert got == one_by_one(str(qrels), runs, measures, gains="real")
    assert any(isinstance(r, dict) for _, r in got)


def test_the_pass_knows_the_table_files_read_run_knows():
    """A file starting with Arrow's or Parquet's magic bytes is read_run's to read as columns
    (the pass's copy of the magic bytes is io's)."""
    assert text_pass.TABLE_MAGIC == cranfield.inputs.io._TABLE_MAGIC
