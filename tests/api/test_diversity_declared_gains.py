"""Diversity measures over stored qrels put with real gains answer as the same judgments sent
inline with ``options.gains: "real"`` (issue #31, review of the cranfield profile, finding 3):
under a trec_eval profile the integer evaluation's value; under ``cranfield`` (named, or
settled by the declaration) the same 422 naming the measure."""

from __future__ import annotations

import pytest

import cranfield

QRELS = "q1 0 a 1\nq1 0 b 1\nq2 0 x 1\n"
RUN = "q1 Q0 a 1 3.0 r\nq1 Q0 b 2 2.0 r\nq2 Q0 y 1 2 r\nq2 Q0 x 2 1 r\n"
MEASURES = ["alpha_nDCG@10"]


@pytest.mark.parametrize("options", [{}, {"profile": "cranfield"},
                                     {"profile": "trec_eval-9.0.8"},
                                     {"profile": "trec_eval-10"}],
                         ids=["none-named", "cranfield", "9.0.8", "10"])
def test_stored_and_inline_declarations_answer_alike(client, options):
    put = client.put("/v1/qrels/llm", json={"qrels": QRELS, "gains": "real"})
    assert put.status_code in (200, 201), put.get_json()
    stored = client.post("/v1/evaluations", json={"run": RUN, "qrels_id": "llm",
                                                   "measures": MEASURES, "options": options})
    inline = client.post("/v1/evaluations", json={"run": RUN, "qrels": QRELS,
                                                   "measures": MEASURES,
                                                   "options": {**options, "gains": "real"}})
    if options.get("profile", "cranfield") == "cranfield":
        assert stored.status_code == inline.status_code == 422
        assert stored.get_json() == inline.get_json()
        assert stored.get_json()["errors"] == {"measures[0]": [stored.get_json()["detail"]]}
        assert "alpha_nDCG is defined over integer grades" in stored.get_json()["detail"]
        return
    assert stored.status_code == inline.status_code == 200, stored.get_json()
    expected = cranfield.evaluate(cranfield.read_qrels(QRELS, diversity=True), RUN, MEASURES,
                                  profile=options["profile"]).aggregate
    assert stored.get_json()["aggregate"] == inline.get_json()["aggregate"] == expected
