"""Hostile bodies through the test client (issue #14): chunked bodies past the limit are
413 and store nothing; a multipart boundary that cannot be used is 400 naming the
Content-Type, whatever the body's size; a job slot is taken atomically."""

from __future__ import annotations

import io
import threading

import pytest
from conftest import ContractClient

from service.app import create_app

LIMIT = 100_000
# 10,000 judgments, ~129 kB: over the limit, so a cut body would keep ~7,700 of them
QRELS = b"".join(b"%d 0 doc%d %d\n" % (t, d, d % 2) for t in range(10) for d in range(1000))
RUN = b"".join(b"%d Q0 doc%d %d %d.0 r\n" % (t, d, d, 1000 - d)
               for t in range(10) for d in range(1000))


@pytest.fixture
def small():
    return ContractClient(create_app({"TESTING": True, "MAX_CONTENT_LENGTH": LIMIT})
                          .test_client())


def chunked(client, method: str, path: str, body: bytes, content_type: str):
    """``body`` as a chunked upload: no Content-Length, a stream the server ends itself
    (gunicorn sets ``wsgi.input_terminated``; the test client does not)."""
    return client.open(path, method=method, input_stream=io.BytesIO(body),
                       environ_overrides={"wsgi.input_terminated": True},
                       headers={"Content-Type": content_type, "Transfer-Encoding": "chunked"})


def multipart(fields: dict[str, bytes], boundary: bytes = b"hostile-boundary") -> bytes:
    parts = [b"--" + boundary + b'\r\nContent-Disposition: form-data; name="%s"; '
             b'filename="%s.txt"\r\n\r\n' % (name.encode(), name.encode()) + value + b"\r\n"
             for name, value in fields.items()]
    return b"".join(parts) + b"--" + boundary + b"--\r\n"


def assert_too_large(resp):
    assert resp.status_code == 413, resp.get_data()[:300]
    assert resp.mimetype == "application/problem+json"
    assert resp.get_json()["status"] == 413


def test_chunked_qrels_over_the_limit_are_413_and_not_stored(small):
    assert len(QRELS) > LIMIT
    assert_too_large(chunked(small, "PUT", "/v1/qrels/cut", QRELS, "text/plain"))
    assert small.get("/v1/qrels/cut").status_code == 404
    json_body = b'{"qrels": "' + QRELS.replace(b"\n", b"\\n") + b'"}'
    assert_too_large(chunked(small, "PUT", "/v1/qrels/cut", json_body, "application/json"))
    assert small.get("/v1/qrels/cut").status_code == 404
    # under the limit, a chunked body is read whole: every judgment stored
    half = b"".join(QRELS.splitlines(keepends=True)[:5000])
    resp = chunked(small, "PUT", "/v1/qrels/cut", half, "text/plain")
    assert resp.status_code == 201 and resp.get_json()["judgments"] == 5000


@pytest.mark.parametrize("path, body", [
    ("/v1/evaluations", {"run": RUN.decode(), "qrels": QRELS.decode()}),
    ("/v1/comparisons", {"runs": [{"run": RUN.decode()}, {"run": RUN.decode()}],
                         "qrels": QRELS.decode()}),
    ("/v1/pools", {"runs": [{"run": RUN.decode()}, {"run": RUN.decode()}], "depth": 10}),
])
def test_chunked_json_over_the_limit_is_413(small, path, body):
    import orjson

    assert_too_large(chunked(small, "POST", path, orjson.dumps(body), "application/json"))


def test_chunked_multipart_over_the_limit_is_413(small):
    body = multipart({"run": RUN, "qrels": QRELS})
    assert_too_large(chunked(small, "POST", "/v1/evaluations", body,
                             "multipart/form-data; boundary=hostile-boundary"))
    body = multipart({"qrels": QRELS})
    assert_too_large(chunked(small, "PUT", "/v1/qrels/cut", body,
                             "multipart/form-data; boundary=hostile-boundary"))
    assert small.get("/v1/qrels/cut").status_code == 404


@pytest.mark.parametrize("padding", [0, 1 << 20], ids=["small", "1MiB"])
def test_a_non_ascii_rfc2231_boundary_is_400_naming_the_content_type(client, padding):
    """``boundary*=utf-8''%E2%82%AC`` decodes to '€': werkzeug (small bodies) cannot use
    it and service.multipart (bodies of 1 MiB or more) could not encode it (a 500). Both
    sizes: 400 naming the Content-Type."""
    euro = "€".encode()
    body = multipart({"run": RUN + b" " * padding, "qrels": QRELS}, boundary=euro)
    resp = client.post("/v1/evaluations", data=body,
                       headers={"Content-Type": "multipart/form-data; "
                                                "boundary*=utf-8''%E2%82%AC"})
    assert resp.status_code == 400, resp.get_data()[:300]
    problem = resp.get_json()
    assert resp.mimetype == "application/problem+json"
    assert list(problem["errors"]) == ["Content-Type"]
    assert "boundary" in problem["errors"]["Content-Type"][0]


@pytest.mark.parametrize("content_type", ["multipart/form-data",
                                          'multipart/form-data; boundary=""'])
def test_a_missing_boundary_is_400_naming_the_content_type(client, content_type):
    resp = client.put("/v1/qrels/no-boundary", data=multipart({"qrels": QRELS}),
                      headers={"Content-Type": content_type})
    assert resp.status_code == 400
    assert list(resp.get_json()["errors"]) == ["Content-Type"]


@pytest.mark.parametrize("padding", [0, 1 << 20], ids=["small", "1MiB"])
def test_an_ascii_rfc2231_boundary_still_works_at_both_sizes(client, padding):
    body = multipart({"run": RUN + b" " * padding, "qrels": QRELS}, boundary=b"abc")
    resp = client.post("/v1/evaluations", data=body,
                       headers={"Content-Type": "multipart/form-data; boundary*=utf-8''abc"})
    assert resp.status_code == 200, resp.get_data()[:300]
    assert resp.get_json()["aggregate"]["num_q"] == 10


def test_the_embedded_job_cap_holds_under_concurrent_reservations():
    """The embedded backend counts and takes a job slot in one step: 40 threads asking for
    one of 7 slots get exactly 7; a slot given back is free again."""
    backend = create_app({"TESTING": True}).extensions["cranfield"]
    barrier = threading.Barrier(40)
    got: list[str | None] = []

    def reserve():
        barrier.wait()
        got.append(backend.reserve_job("t", 7)[0])

    threads = [threading.Thread(target=reserve) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    taken = [j for j in got if j is not None]
    assert len(taken) == 7 and backend.active_jobs("t") == 7
    backend.release_job(taken[0], "t")
    assert backend.active_jobs("t") == 6 and backend.reserve_job("t", 7)[0] is not None
    assert backend.reserve_job("other", 7)[0] is not None  # per tenant


def test_a_refused_submission_gives_its_job_slot_back():
    """A submission that fails after its slot was taken (here: unknown stored qrels, 422)
    leaves the slot free: the cap of 1 still admits the next job."""
    app = create_app({"TESTING": True, "MAX_QUEUED_JOBS": 1})
    http = ContractClient(app.test_client())
    async_ = {"Prefer": "respond-async"}
    bad = http.post("/v1/evaluations", json={"run": RUN.decode(), "qrels_id": "nope"},
                    headers=async_)
    assert bad.status_code == 422
    assert app.extensions["cranfield"].active_jobs(None) == 0
