"""Hostile bodies through the test client (issue #14): chunked bodies past the limit are
413 and store nothing."""

from __future__ import annotations

import io

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
