"""cranfield.client.Client with stored topic metadata (issue #28), against gunicorn: a file
and the same mapping are one version; evaluations name it by ``topic_metadata_id`` (a JSON
body and a multipart upload alike), and their segments are the engine's; a comparison gated
on a segment; deletion."""

from __future__ import annotations

import pytest

import cranfield
from cranfield.client import ApiError, Client
from cranfield.inputs.segments import read_topic_metadata

QRELS = "".join(f"q{i} 0 r 1\n" for i in range(12))
METADATA = {f"q{i}": {"segments": ["tail" if i < 6 else "head"], "weight": 2 if i < 6 else 1}
            for i in range(12)}
BASE = "".join(f"q{i} Q0 r 1 3 base\nq{i} Q0 x 2 2 base\n" for i in range(12))
# the tail's relevant document falls to rank 2 (even topics) or 3 (odd): AP 1/2 or 1/3
CAND = "".join(f"q{i} Q0 x 1 3 cand\nq{i} Q0 r 2 2 cand\nq{i} Q0 y 3 1 cand\n" if i % 2 == 0
               and i < 6 else
               f"q{i} Q0 x 1 3 cand\nq{i} Q0 y 2 2 cand\nq{i} Q0 r 3 1 cand\n" if i < 6 else
               f"q{i} Q0 r 1 3 cand\nq{i} Q0 x 2 2 cand\n" for i in range(12))


def test_client_stores_names_and_gates_on_topic_metadata(live_server, tmp_path):
    api = Client(live_server)
    path = tmp_path / "traffic.txt"
    path.write_text("".join(f"{t}\t{','.join(e['segments'])}\t{e['weight']}\n"
                            for t, e in METADATA.items()))
    first = api.put_topic_metadata("traffic", path)
    engine = read_topic_metadata(METADATA)
    assert first["sha256"] == engine.sha256 and first["segments"] == {"head": 6, "tail": 6}
    assert api.put_topic_metadata("traffic", METADATA)["versions"] == [first["version"]]
    assert read_topic_metadata(api.topic_metadata(f"traffic@{first['version']}",
                                                  content=True)["topic_metadata"]) == engine
    expected = cranfield.evaluate(QRELS, CAND, ["map"], topic_metadata=METADATA)
    as_json = api.evaluate(QRELS, CAND, ["map"], topic_metadata_id="traffic")
    run = tmp_path / "cand.txt"
    run.write_text(CAND)
    as_upload = api.evaluate(QRELS, run, ["map"], topic_metadata_id="traffic")  # multipart
    for doc in (as_json, as_upload):
        assert doc["segments"] == expected.segments
        assert doc["weighted"] == expected.weighted
        assert doc["provenance"]["topic_metadata_version"] == f"traffic@{first['version']}"
    compared = api.compare(QRELS, [{"name": "base", "run": BASE}, {"name": "cand", "run": CAND}],
                           measures=["map"], baseline="base", tests=["t"],
                           gate=[{"measure": "map", "max_drop": 0.01, "test": "t",
                                  "segment": "tail"},
                                 {"measure": "map", "max_drop": 0.3, "test": "t"}],
                           topic_metadata_id="traffic")
    tail, whole = compared["gate"]["checks"]
    assert (tail["segment"], tail["verdict"], whole["verdict"]) == ("tail", "fail", "pass")
    # the tail: 1 -> (1/2 + 1/3)/2, far over 0.01; the whole: half that (the head is
    # unchanged), within its allowed 0.3
    assert tail["drop"] == pytest.approx(1 - 5 / 12, abs=1e-12)
    assert whole["drop"] == pytest.approx((1 - 5 / 12) / 2, abs=1e-12)
    for label in ("base", "cand"):
        api.evaluate(QRELS, BASE if label == "base" else CAND, ["map"],
                     topic_metadata_id="traffic", record={"system": "s", "label": label})
    trend = api.trend("s", "map", segment="tail")
    assert [p["mean"] for p in trend["points"]] == [1.0, expected.segments["tail"][
        "aggregate"]["map"]]
    assert api.trend("s", "map", weighted=True)["points"][1]["mean"] == expected.weighted["map"]
    api.delete_topic_metadata("traffic")
    with pytest.raises(ApiError) as gone:
        api.evaluate(QRELS, CAND, ["map"], topic_metadata_id="traffic")
    assert gone.value.status == 422
