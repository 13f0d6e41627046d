"""``cranfield eval --server`` names no profile the user did not name (issue #31, review of
the cranfield profile, finding 2): the service settles it, so stored qrels put with real gains
run under ``cranfield`` through the command line as through the API and the Python client,
one run or several; a trec_eval ``--profile`` named beside them refuses a real grade as the
API does."""

from __future__ import annotations

import json

import pytest

import cranfield
from cranfield.cli import main

QRELS = "q1 0 a 2.5\nq1 0 b 0.5\nq1 0 c 0\nq2 0 x 3\nq2 0 y 1.5\n"
RUN = "q1 Q0 a 1 3.0 r\nq1 Q0 b 2 2.0 r\nq2 Q0 y 1 2 r\nq2 Q0 x 2 1 r\n"
RUN2 = "q1 Q0 b 1 3.0 r2\nq1 Q0 a 2 2.0 r2\nq2 Q0 x 1 2 r2\nq2 Q0 y 2 1 r2\n"
MEASURES = ["ndcg", "nDCG@2", "ERR@2"]


@pytest.fixture
def stored(client, served, tmp_path):
    put = client.put("/v1/qrels/llm", json={"qrels": QRELS, "gains": "real"})
    assert put.status_code in (200, 201), put.get_json()
    run, run2 = tmp_path / "run.txt", tmp_path / "run2.txt"
    run.write_text(RUN)
    run2.write_text(RUN2)
    return served, str(run), str(run2)


def _eval(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", "--format", "json", "--no-warnings",
                 *[a for m in MEASURES for a in ("-m", m)], *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_one_run_on_stored_real_qrels_runs_under_cranfield(stored, capsys):
    url, run, _ = stored
    expected = cranfield.evaluate(QRELS, RUN, MEASURES, gains="real")
    code, out, err = _eval(capsys, "--server", url, "--qrels-id", "llm", "x", run)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["provenance"]["options"]["profile"] == "cranfield"
    assert doc["provenance"]["options"]["gains"] == "real"
    for name in MEASURES:
        assert doc["aggregate"][name] == pytest.approx(expected.aggregate[name], rel=1e-12)
    # the Python client, and the flag, say the same
    from cranfield.client import Client

    assert Client(url).evaluate(run=RUN, qrels_id="llm", measures=MEASURES)["aggregate"] == \
        doc["aggregate"]
    code, flagged, err = _eval(capsys, "--server", url, "--qrels-id", "llm", "--real-gains",
                               "x", run)
    assert code == 0, err
    assert json.loads(flagged)["aggregate"] == doc["aggregate"]


def test_several_runs_on_stored_real_qrels_run_under_cranfield(stored, capsys):
    url, run, run2 = stored
    code, out, err = _eval(capsys, "--server", url, "--qrels-id", "llm", "x", run, run2)
    assert code == 0, err
    docs = json.loads(out)["evaluations"]
    assert [d["provenance"]["options"]["profile"] for d in docs] == ["cranfield"] * 2
    for doc, text in zip(docs, (RUN, RUN2), strict=True):
        expected = cranfield.evaluate(QRELS, text, MEASURES, gains="real")
        for name in MEASURES:
            assert doc["aggregate"][name] == pytest.approx(expected.aggregate[name],
                                                           rel=1e-12)


@pytest.mark.parametrize("several", [False, True], ids=["one-run", "several-runs"])
@pytest.mark.parametrize("profile", ["9", "10"])
def test_a_named_trec_eval_profile_refuses_a_real_grade(stored, capsys, profile, several):
    url, run, run2 = stored
    runs = [run, run2] if several else [run]
    code, out, err = _eval(capsys, "--server", url, "--qrels-id", "llm", "--profile", profile,
                           "x", *runs)
    assert code == 2 and out == ""
    assert "qrels.q1.a: grade 2.5 is not an integer" in err


def test_inline_qrels_without_a_declaration_stay_trec_eval_9(stored, capsys, tmp_path):
    """No profile sent and integer qrels: the service's default, as the local command's."""
    url, run, _ = stored
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 a 2\nq1 0 b 1\nq1 0 c 0\nq2 0 x 3\nq2 0 y 1\n")
    code, remote, err = _eval(capsys, "--server", url, str(qrels), run)
    assert code == 0, err
    code, local, err = _eval(capsys, str(qrels), run)
    assert code == 0, err
    remote_doc, local_doc = json.loads(remote), json.loads(local)
    assert remote_doc["provenance"]["options"]["profile"] == "trec_eval-9.0.8"
    assert remote_doc["aggregate"] == local_doc["aggregate"]
