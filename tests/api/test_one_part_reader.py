"""One reader of uploaded parts (service.evaluation_request.file_parts) for evaluations and
comparisons: the same mislabelled part gets the same refusal on both routes, and the same
unlabelled Arrow part the same reading."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import cranfield

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUN = (DATA / "results.test").read_bytes()
QRELS = (DATA / "qrels.test").read_bytes()
PARQUET = "application/vnd.apache.parquet"
ARROW = "application/vnd.apache.arrow.stream"


def part(data: bytes, name: str, content_type: str):
    return (io.BytesIO(data), name, content_type)


def evaluation(client, run_type, qrels_type):
    return client.post("/v1/evaluations", content_type="multipart/form-data", data={
        "run": part(RUN, "run.txt", run_type), "qrels": part(QRELS, "qrels.txt", qrels_type),
        "measures": "map"})


def comparison(client, run_type, qrels_type):
    return client.post("/v1/comparisons", content_type="multipart/form-data", data={
        "runs": [part(RUN, "a.txt", run_type), part(RUN, "b.txt", "text/plain")],
        "qrels": part(QRELS, "qrels.txt", qrels_type), "measures": "map"})


@pytest.mark.parametrize("declared, what", [(PARQUET, "a Parquet file"),
                                            (ARROW, "an Arrow IPC stream or file")])
@pytest.mark.parametrize("which", ["run", "qrels"])
def test_a_mislabelled_part_is_the_same_refusal_on_both_routes(client, declared, what, which):
    types = {"run_type": "text/plain", "qrels_type": "text/plain", f"{which}_type": declared}
    answers = {"evaluation": evaluation(client, **types), "comparison": comparison(client, **types)}
    fields = {"evaluation": which, "comparison": "runs[0]" if which == "run" else "qrels"}
    for route, resp in answers.items():
        assert resp.status_code == 422, (route, resp.get_json())
        doc = resp.get_json()
        field = fields[route]
        assert doc["errors"] == {field: [f"not {what} (no magic bytes)"]}, (route, doc)
        assert doc["detail"] == (f"{field}: the part's Content-Type is {declared}, but its "
                                 f"bytes are not {what}"), (route, doc)


def test_a_text_part_labelled_as_text_is_read_on_both_routes(client):
    """Read as the engine reads the same text: trec_eval's map on its own test files."""
    expected = cranfield.evaluate(QRELS, RUN, ["map"])
    assert round(expected.aggregate["map"], 4) == 0.1785  # out.test's map
    ev = evaluation(client, "text/plain", "text/plain")
    assert ev.status_code == 200, ev.get_json()
    assert ev.get_json()["aggregate"]["map"] == pytest.approx(expected.aggregate["map"], abs=1e-12)
    cmp = comparison(client, "text/plain", "text/plain")
    assert cmp.status_code == 200, cmp.get_json()
    for name in ("a", "b"):
        assert cmp.get_json()["summary"]["map"][name]["aggregate"] == \
            pytest.approx(expected.aggregate["map"], abs=1e-12)


def test_an_arrow_run_over_the_row_limit_is_413_sync_and_queued_on_both_routes(app, client):
    import pyarrow as pa
    import pyarrow.ipc as ipc

    app.config.update(MAX_TOPICS=3, MAX_DOCS_PER_TOPIC=2)  # at most 6 rows (the qrels: 3 topics)
    table = pa.table({"topic": ["1"] * 7, "docid": [f"d{i}" for i in range(7)],
                      "score": [1.0] * 7})
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data = sink.getvalue().to_pybytes()
    for headers in ({}, {"Prefer": "respond-async"}):
        resp = client.post("/v1/evaluations", content_type="multipart/form-data", headers=headers,
                           data={"run": part(data, "run.arrows", ARROW),
                                 "qrels": part(QRELS, "qrels.txt", "text/plain"),
                                 "measures": "map"})
        assert resp.status_code == 413, (headers, resp.get_json())
        assert "7 rows exceed the limit of 6" in resp.get_json()["errors"]["run"][0]
        resp = client.post("/v1/comparisons", content_type="multipart/form-data", headers=headers,
                           data={"runs": [part(data, "a.arrows", ARROW),
                                          part(RUN, "b.txt", "text/plain")],
                                 "qrels": part(QRELS, "qrels.txt", "text/plain"),
                                 "measures": "map"})
        assert resp.status_code == 413, (headers, resp.get_json())
        assert "7 rows exceed the limit of 6" in resp.get_json()["errors"]["runs[0]"][0]
