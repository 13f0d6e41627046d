"""bench/http_stages.py calls the service's own request functions stage by stage: if one of
them is renamed or changes shape, the benchmark must fail here rather than measure an error
page. Each stage does its work (a bad body fails at the stage that checks it)."""

from __future__ import annotations

import orjson
import pytest

from bench.http import small_body
from bench.http_ceiling import BODY
from bench.http_stages import STAGES, create_app, in_process


@pytest.fixture(scope="module")
def stages_client():
    return create_app().test_client()


@pytest.mark.parametrize("stage", ["bare", "validate", "inputs", "evaluate"])
def test_each_stage_answers_the_constant_body(stages_client, stage):
    assert f"/stages/{stage}" in dict(STAGES)  # the bench loads these routes
    resp = stages_client.post(f"/stages/{stage}", data=small_body(),
                              content_type="application/json")
    assert resp.status_code == 200
    assert resp.data == BODY


@pytest.mark.parametrize(("stage", "status"), [("bare", 200), ("validate", 422),
                                               ("inputs", 422), ("evaluate", 422)])
def test_stages_do_their_work(stages_client, stage, status):
    # an unknown measure passes the schema and the readers, and the engine rejects it
    body = orjson.loads(small_body())
    bad_schema = dict(body, surplus=1)
    bad_run = dict(body, run={"q1": {"d1": "high"}})
    bad_measure = dict(body, measures=["no_such_measure"])
    sent = {"bare": bad_schema, "validate": bad_schema, "inputs": bad_run,
            "evaluate": bad_measure}[stage]
    resp = stages_client.post(f"/stages/{stage}", json=sent)
    assert resp.status_code == status, resp.data
    if stage == "inputs":  # the schema alone lets the bad run through
        assert stages_client.post("/stages/validate", json=sent).status_code == 200


def test_the_api_itself_answers_on_the_stages_server(stages_client):
    resp = stages_client.post("/v1/evaluations", data=small_body(),
                              content_type="application/json")
    assert resp.status_code == 200
    assert set(resp.json["aggregate"]) >= {"map", "P_10", "recip_rank"}


def test_in_process_timing_refuses_an_error_page():
    app = create_app()
    assert in_process(app, "/stages/bare", small_body(), seconds=0.01) > 0
    with pytest.raises(RuntimeError, match="404"):
        in_process(app, "/stages/nothing", small_body(), seconds=0.01)
