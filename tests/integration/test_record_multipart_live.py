"""``record`` in a multipart/form-data ``POST /v1/evaluations`` on the real thing (issue #18):
the API under gunicorn and a real RQ worker (`cranfield worker`) on a private Redis, both on
a PostgreSQL database this module creates and drops (127.0.0.1:5432, user postgres; skipped
without the server, failing under CI=true). The same evaluation sent as JSON and as a form,
synchronously, queued whole and queued in shards (the combine step records), is recorded as
the same result. (The API's side with the embedded queue: tests/api/test_record_multipart.py.)"""

from __future__ import annotations

import json
import uuid

import pytest
from servers import (
    BODY,
    call,
    wait_job,
)

MEASURES = ["map", "P.10", "ndcg_cut.10"]


@pytest.fixture(scope="module")
def api(results_api):  # conftest: gunicorn on this module's PostgreSQL and Redis
    return results_api


@pytest.fixture
def worker(results_worker):
    return results_worker


def _form(record: dict) -> tuple[bytes, str]:
    """(body, Content-Type) of the evaluation as a form: run and qrels files, measures and
    the record as fields."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value, filename in (("run", BODY["run"], "run.txt"),
                                  ("qrels", BODY["qrels"], "qrels.txt"),
                                  ("measures", ",".join(MEASURES), None),
                                  ("record", json.dumps(record), None)):
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"'
                                                     if filename else "")
        parts.append(f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n{value}\r\n")
    body = ("".join(parts) + f"--{boundary}--\r\n").encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _evaluate(api, record: dict, form: bool, headers: dict | None = None) -> dict:
    if form:
        body, content_type = _form(record)
    else:
        body, content_type = {"run": BODY["run"], "qrels": BODY["qrels"],
                              "measures": MEASURES, "record": record}, None
    status, resp_headers, doc = call(api, "POST", "/v1/evaluations", body, headers,
                                     content_type)
    if status == 202:
        done = wait_job(api, resp_headers["Location"])
        assert done["status"] == "finished", done
        return done["result"]
    assert status == 200, doc
    return doc


def _stored(api, doc: dict) -> dict:
    status, _, got = call(api, "GET", f"/v1/results/{doc['recorded']['id']}")
    assert status == 200, got
    return {k: v for k, v in got.items() if k not in ("id", "created_at")}


@pytest.mark.parametrize("how", ["sync", "queued"])
def test_json_and_form_record_the_same_result(api, worker, how, require):
    require(api is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    headers = {"Prefer": "respond-async"} if how == "queued" else {}
    record = {"system": f"form-{how}", "label": "n1", "commit": "abc", "tags": ["ci"]}
    by_json = _evaluate(api, record, form=False, headers=headers)
    by_form = _evaluate(api, record, form=True, headers=headers)
    if how == "queued":  # the TREC run is cut in two: the combine step recorded it
        assert by_json["provenance"]["shards"] == by_form["provenance"]["shards"] == 2
    assert by_form["recorded"]["system"] == f"form-{how}"
    a, b = _stored(api, by_json), _stored(api, by_form)
    assert a["document"]["per_topic"] == b["document"]["per_topic"]
    assert a["aggregate"] == b["aggregate"] == by_form["aggregate"]
    assert a["document"]["provenance"]["run_sha256"] == b["document"]["provenance"]["run_sha256"]
    assert a == b
    status, _, page = call(api, "GET", f"/v1/systems/form-{how}/results")
    assert page["total"] == 2


def test_a_form_with_a_bad_record_is_refused_before_queueing(api, worker, require):
    require(api is not None, "PostgreSQL on 127.0.0.1:5432 (user postgres, trust)")
    body, content_type = _form({"system": "bm25"})
    status, _, problem = call(api, "POST", "/v1/evaluations", body,
                              {"Prefer": "respond-async"}, content_type)
    assert status == 422 and "record.label" in problem["errors"], problem
    body, content_type = _form({"system": "bm25", "label": "x"})
    body = body.replace(b'{"system": "bm25", "label": "x"}', b"system=bm25,label=x")
    status, _, problem = call(api, "POST", "/v1/evaluations", body,
                              {"Prefer": "respond-async"}, content_type)
    assert status == 422 and list(problem["errors"]) == ["record"], problem
