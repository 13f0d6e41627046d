"""The chunked-body limit counts the running total (issue #27, "a bound no test holds").

A body sent without a Content-Length (chunked) is read by ``buffer_chunked_body``
(service/request_body.py) until the server ends it or ``MAX_CONTENT_LENGTH`` is passed. These
tests give the app a WSGI input that counts every byte taken, so they hold *how much* was read
before the 413, not only that a 413 came: reading must stop within one read of the limit. A
limit checked on each read instead of on the total still answers 413, but only after taking
the whole body (every read is small): these tests fail then."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from werkzeug.test import EnvironBuilder

from service.app import create_app
from service.request_body import CHUNK

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "trec_eval"


class CountingInput:
    """A server's input stream for a chunked body: ends the stream itself (as gunicorn does,
    ``wsgi.input_terminated``), each read hands over at most ``step`` bytes (what arrived in
    one chunk; ``step=None``: all that was asked for, as gunicorn's reader does), and
    ``taken`` counts every byte the app took."""

    def __init__(self, body: bytes, step: int | None):
        self._body = io.BytesIO(body)
        self.step = step
        self.taken = 0
        self.reads = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = len(self._body.getbuffer())
        if self.step is not None:
            size = min(size, self.step)
        data = self._body.read(size)
        self.taken += len(data)
        self.reads += 1
        return data

    def readline(self, size: int = -1) -> bytes:  # the WSGI input interface; never used here
        data = self._body.readline(size)
        self.taken += len(data)
        return data


def post_chunked(app, path: str, body: bytes, step: int | None,
                 content_type: str = "application/json"):
    """POST ``body`` to ``path`` as a chunked upload through ``app`` as a WSGI callable:
    returns (status, headers, response body, the input stream)."""
    environ = EnvironBuilder(path=path, method="POST",
                             headers={"Content-Type": content_type,
                                      "Transfer-Encoding": "chunked"}).get_environ()
    environ.pop("CONTENT_LENGTH", None)
    stream = CountingInput(body, step)
    environ["wsgi.input"] = stream
    environ["wsgi.input_terminated"] = True
    answer: dict = {}

    def start_response(status, headers, exc_info=None):
        answer["status"], answer["headers"] = int(status.split()[0]), dict(headers)

    chunks = app(environ, start_response)
    try:
        payload = b"".join(chunks)
    finally:
        getattr(chunks, "close", lambda: None)()
    return answer["status"], answer["headers"], payload, stream


def small_evaluation() -> bytes:
    return orjson.dumps({"run": (DATA / "results.test").read_text(),
                         "qrels": (DATA / "qrels.test").read_text(), "measures": ["map"]})


@pytest.mark.parametrize("step", [1, 4096, 65_537])
def test_small_reads_stop_within_one_read_past_the_limit(step):
    limit = 200_000
    app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": limit})
    body = b" " * (40 * limit)  # far past the limit: a per-read check would take all of it
    status, headers, payload, stream = post_chunked(app, "/v1/evaluations", body, step)
    assert status == 413
    problem = orjson.loads(payload)
    assert problem["status"] == 413 and f"{limit} bytes" in problem["detail"]
    # the read that crossed the limit is the last one: more than the limit was needed to
    # know, at most one read more was taken
    assert limit < stream.taken <= limit + step
    assert stream.taken < len(body) // 10


def test_full_reads_stop_at_the_read_that_passes_the_limit():
    """A reader that fills every read (gunicorn's, for chunked bodies): reads of ``CHUNK``
    bytes, the limit a little over three of them; the fourth read passes it and is the
    last."""
    limit = 3 * CHUNK + 5
    app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": limit})
    body = b" " * (12 * CHUNK)
    status, _, payload, stream = post_chunked(app, "/v1/evaluations", body, None)
    assert status == 413, payload[:300]
    assert stream.taken == 4 * CHUNK  # limit < 4 × CHUNK <= limit + CHUNK
    assert stream.reads == 4


@pytest.mark.parametrize("step", [1000, None])
def test_a_body_of_exactly_the_limit_is_read_whole_and_evaluated(step):
    """The limit is inclusive: a chunked evaluation padded to exactly ``MAX_CONTENT_LENGTH``
    bytes is read to its end (every byte, once) and answered."""
    body = small_evaluation()
    limit = len(body) + 3000
    body = body + b" " * (limit - len(body))  # trailing whitespace: the same JSON
    app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": limit})
    status, _, payload, stream = post_chunked(app, "/v1/evaluations", body, step)
    assert status == 200, payload[:300]
    assert stream.taken == limit
    assert round(orjson.loads(payload)["aggregate"]["map"], 4) == 0.1785  # out.test


def test_one_byte_past_the_limit_is_refused_after_reading_it():
    body = small_evaluation()
    limit = len(body) - 1
    app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": limit})
    status, _, _, stream = post_chunked(app, "/v1/evaluations", body, 512)
    assert status == 413
    assert stream.taken == len(body)  # the last read brought the byte past the limit
