"""Reading runs and qrels: every layout trec_eval accepts, and a precise error (file, line,
field, reason) for everything it would silently misread."""

from __future__ import annotations

import math

import numpy as np
import pytest

import cranfield
import cranfield.inputs.io
from cranfield import InputError

RUN = "q1 Q0 d1 1 3.0 sys\nq1 Q0 d2 2 2.0 sys\nq2 Q0 d1 1 5.0 sys\n"
QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d1 2\n"


def big_run(bad_line: str | None = None, at: int = 500) -> str:
    """A regular run of 1000 lines (so the columnar reader takes it), optionally with one
    bad line at 1-based line ``at``."""
    lines = [f"q{t} Q0 doc{i} {i} {100 - i / 10:.1f} sys" for t in range(2) for i in range(500)]
    if bad_line is not None:
        lines[at - 1] = bad_line
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True)
def columnar_reader_for_small_inputs(monkeypatch):
    """These inputs are small; make the columnar reader take them as it takes large ones."""
    monkeypatch.setattr(cranfield.inputs.io, "FAST_READER_MIN_BYTES", 0)


def test_fast_and_line_readers_agree(tmp_path):
    text = big_run()
    fast = cranfield.read_run(text)
    assert not isinstance(fast.docids, np.ndarray)  # went through the columnar reader
    messy = text.replace(" Q0 ", "\tQ0   ").replace(" sys", "  sys extra fields")
    slow = cranfield.read_run(messy)
    assert isinstance(slow.docids, np.ndarray)
    assert fast.to_dict() == slow.to_dict()
    assert fast.runid == "sys" and slow.runid == "sys"
    path = tmp_path / "run.txt"
    path.write_text(text.replace(" ", "\t"))
    assert cranfield.read_run(path).to_dict() == fast.to_dict()


@pytest.mark.parametrize("bad, field, reason", [
    ("q1 Q0 doc499 499 abc sys", "score", "'abc' is not a number"),
    ("q1 Q0 doc499 499 nan sys", "score", "'nan' is not a finite number"),
    ("q1 Q0 doc499 499 inf sys", "score", "'inf' is not a finite number"),
    ("q1 Q0 doc499 499", None, "expected at least 6 fields"),
    ("q0 Q0 doc3 499 1.0 sys", "docno", "docid 'doc3' appears twice in topic 'q0' (first on "
     "line 4)"),
])
def test_run_errors_name_line_field_and_reason(bad, field, reason):
    with pytest.raises(InputError) as info:
        cranfield.read_run(big_run(bad, at=500), name="run.txt")
    err = info.value
    assert (err.source, err.line, err.field) == ("run.txt", 500, field)
    assert reason in err.reason
    assert str(err).startswith("run.txt:500: ")


@pytest.mark.parametrize("bad, field, reason", [
    ("q1 0 d9 1.7", "grade", "'1.7' is not an integer grade"),
    ("q1 0 d9 x", "grade", "'x' is not an integer grade"),
    ("q1 0 d9 1 extra", None, "expected 4 fields"),
    ("q1 0 d1 1", "docno", "docid 'd1' is judged twice for topic 'q1'"),
])
def test_qrels_errors_name_line_field_and_reason(bad, field, reason):
    with pytest.raises(InputError) as info:
        cranfield.read_qrels(QRELS + bad + "\n", name="qrels.txt")
    err = info.value
    assert (err.line, err.field) == (4, field)
    assert reason in err.reason


def test_mapping_errors_name_the_path():
    with pytest.raises(InputError) as info:
        cranfield.evaluate({"q1": {"d1": 1}}, {"q1": {"d1": 1.0, "d3": math.inf}})
    assert info.value.location == "run.q1.d3"
    with pytest.raises(InputError) as info:
        cranfield.evaluate({"q1": {"d1": 1.5}}, {"q1": {"d1": 1.0}})
    assert info.value.location == "qrels.q1.d1"


def test_comments_blank_lines_and_crlf_are_read_like_trec_eval():
    text = "# a comment line\n\n" + RUN.replace("\n", "\r\n") + "   \n"
    assert cranfield.read_run(text).to_dict() == cranfield.read_run(RUN).to_dict()
    assert cranfield.read_qrels("# c\n" + QRELS).to_dict() == cranfield.read_qrels(
        QRELS).to_dict()


def test_hash_in_a_docid_is_not_a_comment():
    run = cranfield.read_run("q1 Q0 msmarco_v2.1_doc_00_8#4_1 1 1.0 s\n")
    assert run.to_dict() == {"q1": {"msmarco_v2.1_doc_00_8#4_1": 1.0}}


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        cranfield.read_run(str(tmp_path / "nope.txt"))


def test_topic_ids_are_opaque_strings():
    ev = cranfield.evaluate("1 0 a 1\n", "01 Q0 a 1 1.0 s\n1 Q0 a 1 1.0 s\n", ["num_ret"])
    assert ev.topics.evaluated == ["1"] and ev.topics.run_only == ["01"]


def test_no_common_topic_is_an_evaluation_error():
    with pytest.raises(cranfield.EvaluationError, match="no topic has both"):
        cranfield.evaluate("q9 0 d1 1\n", RUN)


def test_diversity_qrels_keep_subtopics_and_allow_a_docid_per_subtopic():
    text = "151 1 d1 1\n151 2 d1 1\n151 2 d2 0\n"
    qrels = cranfield.read_qrels(text, diversity=True)
    assert qrels.subtopics.tolist() == ["1", "2", "2"]
    assert qrels.docids.tolist() == ["d1", "d1", "d2"]
    with pytest.raises(InputError, match="judged twice"):
        cranfield.read_qrels(text)


def test_line_reader_names_the_first_repeat_of_a_docid():
    text = "q Q0 a 1 3 r\nq Q0 b 2 2 r\nq  Q0  a 3 1 r\nq Q0 a 4 0 r\n"
    with pytest.raises(InputError) as info:
        cranfield.read_run(text)
    assert info.value.line == 3 and "(first on line 1)" in info.value.reason


def test_a_mapping_topic_with_no_documents_is_evaluated_as_empty():
    """Found by schemathesis: an empty {docid: score} dict used to break topic grouping."""
    run = {"q2": {}, "q1": {"d1": 1.0, "d3": 3.0}}
    ev = cranfield.evaluate({"q1": {"d1": 1, "d3": 2}, "q2": {"x": 1}}, run,
                            ["map", "num_ret"])
    assert ev.per_topic["q2"] == {"num_ret": 0, "map": 0.0}
    assert ev.per_topic["q1"] == {"num_ret": 2, "map": 1.0}
    assert ev.aggregate["map"] == 0.5
    # an empty topic id is not an id (docs/inputs.md), with or without documents
    with pytest.raises(cranfield.InputError, match="may not be empty") as err:
        cranfield.evaluate({"q1": {"d1": 1}}, dict(run, **{"": {}}), ["map"])
    assert err.value.field == "run."


@pytest.mark.parametrize("seed", range(20))
def test_both_score_searches_agree(seed):
    """The global-key search used for small runs and the segmented binary search used for
    large ones give the same positions (ties, float32 ties, topics in any block order)."""
    from cranfield.inputs.ranking import score_positions

    rng = np.random.default_rng(seed)
    n_topics = int(rng.integers(1, 6))
    sizes = rng.integers(1, 40, n_topics)
    blocks = []
    for t in rng.permutation(n_topics):
        values = rng.choice([0.1, 0.100000001, 0.5, 1.0, 2.0, -3.0], size=sizes[t])
        blocks.append((t, np.sort(values.astype(np.float32))[::-1]))
    tix = np.concatenate([np.full(len(v), t) for t, v in blocks]).astype(np.int32)
    scores = np.concatenate([v for _, v in blocks])
    starts = np.cumsum([0] + [len(v) for _, v in blocks])
    lo_of = {t: starts[i] for i, (t, _) in enumerate(blocks)}
    hi_of = {t: starts[i + 1] for i, (t, _) in enumerate(blocks)}
    rows = rng.integers(0, len(scores), 30)
    lo = np.array([lo_of[t] for t in tix[rows]])
    hi = np.array([hi_of[t] for t in tix[rows]])
    a = score_positions(scores, tix, lo, hi, scores[rows], global_keys=True)
    b = score_positions(scores, tix, lo, hi, scores[rows], global_keys=False)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
