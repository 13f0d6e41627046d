"""Issue #14, the engine's half: collection sizes that cannot be, micro-averaging with
complete_topics, nNRBP with -c, subtopic qrels under ordinary measures, empty inputs and the
bounds of evaluate()'s integer options. Each test checks the numbers or the exact error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import cranfield
from cranfield.webtrack import ndeval

WEB = Path(__file__).resolve().parents[1] / "data" / "web2012"


# ---- 5. nNRBP with -c: a qrels topic missing from the run -----------------------------------

DIV_QRELS = "1 1 d1 1\n1 2 d2 1\n2 1 e1 1\n3 1 f1 0\n"
DIV_RUN = "1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n"


def test_nnrbp_with_complete_topics_matches_ndeval_c():
    """ndeval -c prints no row for a qrels topic missing from the run and divides by all
    qrels topics: the topic adds 0, even with S = 0 (topic 3), where a run topic is NaN."""
    nd = ndeval(DIV_RUN, DIV_QRELS, complete=True, traditional=True)
    assert nd.amean["nNRBP"] == pytest.approx(1 / 3)
    ev = cranfield.evaluate(DIV_RUN, DIV_QRELS, ["nNRBP", "NRBP"], complete_topics=True)
    assert ev.aggregate["nNRBP"] == pytest.approx(nd.amean["nNRBP"])  # was NaN (null)
    assert ev.aggregate["NRBP"] == pytest.approx(nd.amean["NRBP"])
    # a run topic with S = 0 stays NaN, as ndeval prints it
    ev = cranfield.evaluate(DIV_RUN + "3 Q0 f1 1 1 r\n", DIV_QRELS, ["nNRBP"])
    assert math.isnan(ev.per_topic["3"]["nNRBP"]) and math.isnan(ev.aggregate["nNRBP"])


def test_nnrbp_with_complete_topics_on_the_web_track_data_matches_ndeval():
    qrels = cranfield.read_qrels(WEB / "qrels-for-ndeval.txt", diversity=True)
    text = (WEB / "runs" / "rm" / "results-cata-filtered.txt").read_text()
    run = "".join(line + "\n" for line in text.splitlines() if not line.startswith("151 "))
    nd = ndeval(run, (WEB / "qrels-for-ndeval.txt").read_bytes(), complete=True,
                traditional=True)
    ev = cranfield.evaluate(run, qrels, ["nNRBP", "alpha_nDCG@20"], complete_topics=True)
    assert ev.aggregate["nNRBP"] == pytest.approx(nd.amean["nNRBP"], abs=5e-7)
    assert ev.aggregate["alpha_nDCG@20"] == pytest.approx(nd.amean["alpha-nDCG@20"], abs=5e-7)
