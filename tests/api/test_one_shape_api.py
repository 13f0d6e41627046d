"""Issue #15 at the API: ``POST /v1/evaluations`` and ``cranfield eval --format json`` give
one document for the same files (the CLI's warnings name ``-c`` where the API's name
``options.complete_topics``), and the curves are labelled and averaged over the table's
topics. Every response is checked against openapi.yaml by the client."""

from __future__ import annotations

import json

import pytest

from cranfield.cli import main
from cranfield.reports.result_document import warnings_for_interface

QRELS = "q1 0 dA 1\nq1 0 dB 0\nq1 0 dC 1\nq1 0 dX 1\nq2 0 y 1\n"
RUN = "q1 Q0 dA 1 3.0 r\nq1 Q0 dB 2 2.0 r\nq1 Q0 dC 3 1.0 r\n"
MEASURES = ["map", "P.5", "IAP11", "num_q"]


def cli_document(capsys, tmp_path, *flags) -> dict:
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    code = main(["eval", "--format", "json", *flags, *sum((["-m", m] for m in MEASURES), []),
                 str(tmp_path / "qrels"), str(tmp_path / "run")])
    assert code == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("complete", [False, True])
def test_the_api_and_the_cli_give_one_document(client, capsys, tmp_path, complete):
    resp = client.post("/v1/evaluations", json={
        "run": RUN, "qrels": QRELS, "measures": MEASURES, "curves": True,
        "options": {"complete_topics": complete}})
    assert resp.status_code == 200
    api = resp.get_json()
    cli = cli_document(capsys, tmp_path, "-q", "--curves", *(["-c"] if complete else []))
    assert isinstance(api["measures"], list) and isinstance(cli["measures"], list)
    # the same document but for how the warnings spell the option
    assert {k: v for k, v in cli.items() if k != "warnings"} == \
        {k: v for k, v in api.items() if k != "warnings"}
    assert cli["warnings"] == warnings_for_interface(api["warnings"], "cli")
    (w_api,) = [w for w in api["warnings"] if w["code"] == "topics-qrels-only"]
    (w_cli,) = [w for w in cli["warnings"] if w["code"] == "topics-qrels-only"]
    assert w_api["option"] == w_cli["option"] == "complete_topics"
    assert "options.complete_topics" in w_api["message"] and "-c" not in w_api["message"]
    assert "-c" in w_cli["message"] and "complete_topics" not in w_cli["message"]
    # the curve averages the table's topics and says which interpolation it is
    curves = api["curves"]
    assert curves["topics_averaged"] == api["aggregate"]["num_q"] == (2 if complete else 1)
    assert api["aggregate"]["IAP11"] == pytest.approx(
        sum(curves["mean_interpolated_precision"]) / 11)
    assert curves["interpolation"] == "textbook" and "iprec_at_recall" in curves["note"]


def test_the_report_page_labels_the_curve(client):
    resp = client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS, "measures": MEASURES},
                       headers={"Accept": "text/html"})
    page = resp.get_data(as_text=True)
    assert resp.status_code == 200
    assert "Not trec_eval's <code>iprec_at_recall</code>" in page
    assert "options.complete_topics counts them as 0" in page
