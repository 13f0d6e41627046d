"""Each input limit alone at its boundary (issue #16): the limit passes, one over fails, and
the body that fails breaks only that limit.

- MAX_CONTENT_LENGTH: a valid body of exactly the limit is answered; one byte more is 413
  (the Content-Length check in service/request_body.py ``read_body``), on every route that
  reads a body. tests/api/test_evaluations.py's 413 body also breaks MAX_DOCS_PER_TOPIC, so
  it passed with the Content-Length check removed.
- MAX_TOPICS and MAX_DOCS_PER_TOPIC on POST /v1/evaluations (run as a mapping and as TREC
  text, qrels inline and stored). Comparisons and pools: tests/api/test_comparison_limits.py.

Every response is checked against openapi.yaml (ContractClient).
"""

from __future__ import annotations

import orjson
import pytest
from conftest import ContractClient

from service.app import create_app

PROBLEM = "application/problem+json"
TOPICS, DOCS = 4, 3  # MAX_TOPICS, MAX_DOCS_PER_TOPIC of the topic and document tests
BODY_LIMIT = 4096    # MAX_CONTENT_LENGTH of the body-size tests


def run(n_topics: int = TOPICS, n_docs: int = DOCS) -> dict:
    return {f"q{t}": {f"d{d}": float(n_docs - d) for d in range(n_docs)}
            for t in range(n_topics)}


def run_text(n_topics: int = TOPICS, n_docs: int = DOCS) -> str:
    return "".join(f"q{t} Q0 d{d} {d + 1} {n_docs - d} r\n"
                   for t in range(n_topics) for d in range(n_docs))


def qrels(n_topics: int = TOPICS) -> dict:
    return {f"q{t}": {"d0": 1, "d1": 0} for t in range(n_topics)}


def assert_413(resp, field: str, says: str) -> None:
    assert resp.status_code == 413, resp.get_data(as_text=True)[:300]
    assert resp.mimetype == PROBLEM
    doc = resp.get_json()
    assert doc["status"] == 413 and doc["type"].endswith("/too-large")
    assert list(doc["errors"]) == [field], doc
    assert says in doc["errors"][field][0], doc


# --------------------------------------------------------------------------------------------
# MAX_TOPICS and MAX_DOCS_PER_TOPIC on POST /v1/evaluations
# --------------------------------------------------------------------------------------------

@pytest.fixture
def limited():
    # the body limit far away: only the topic and document limits can be broken
    return ContractClient(create_app({"TESTING": True, "MAX_TOPICS": TOPICS,
                                      "MAX_DOCS_PER_TOPIC": DOCS}).test_client())


def evaluate(client, run_value, qrels_value=None, **extra):
    body = {"run": run_value, "measures": ["map", "num_q"], **extra}
    if qrels_value is not None:
        body["qrels"] = qrels_value
    return client.post("/v1/evaluations", json=body)


@pytest.mark.parametrize("as_text", [False, True], ids=["mapping", "trec_text"])
def test_evaluation_at_max_topics_and_max_docs_passes(limited, as_text):
    resp = evaluate(limited, run_text() if as_text else run(), qrels())
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    assert resp.get_json()["aggregate"]["num_q"] == TOPICS


@pytest.mark.parametrize("as_text", [False, True], ids=["mapping", "trec_text"])
def test_evaluation_run_one_topic_over_max_topics_is_413(limited, as_text):
    # TOPICS + 1 topics of DOCS documents each; the qrels within the limit
    over = run_text(TOPICS + 1) if as_text else run(TOPICS + 1)
    assert_413(evaluate(limited, over, qrels()), "run", f"at most {TOPICS} topics")


def test_evaluation_qrels_one_topic_over_max_topics_is_413(limited):
    assert_413(evaluate(limited, run(), qrels(TOPICS + 1)), "qrels", f"at most {TOPICS} topics")


@pytest.mark.parametrize("as_text", [False, True], ids=["mapping", "trec_text"])
def test_evaluation_topic_one_document_over_max_docs_is_413(limited, as_text):
    # TOPICS topics; q2 has DOCS + 1 documents, the others DOCS
    if as_text:
        over = run_text() + f"q2 Q0 d{DOCS} {DOCS + 1} 0 r\n"
    else:
        over = run()
        over["q2"][f"d{DOCS}"] = 0.0
    assert_413(evaluate(limited, over, qrels()), "run.q2",
               f"at most {DOCS} documents per topic")


@pytest.mark.parametrize("as_text", [False, True], ids=["mapping", "trec_text"])
def test_evaluation_single_topic_run_of_max_docs_plus_one_is_413(limited, as_text):
    # the whole run is DOCS + 1 lines: no shortcut on the run's length may let it through
    over = run_text(1, DOCS + 1) if as_text else run(1, DOCS + 1)
    assert_413(evaluate(limited, over, qrels()), "run.q0", f"at most {DOCS} documents per topic")
    at = run_text(1, DOCS) if as_text else run(1, DOCS)
    assert evaluate(limited, at, qrels()).status_code == 200


def test_evaluation_stored_qrels_at_and_over_max_topics(limited):
    """Stored qrels are held to MAX_TOPICS when an evaluation uses them."""
    assert limited.put("/v1/qrels/at", json={"qrels": qrels()}).status_code == 201
    resp = evaluate(limited, run(), qrels_id="at")
    assert resp.status_code == 200 and resp.get_json()["aggregate"]["num_q"] == TOPICS
    stored = limited.put("/v1/qrels/over", json={"qrels": qrels(TOPICS + 1)})
    if stored.status_code == 413:  # refused when stored: fine too
        assert_413(stored, "qrels", f"at most {TOPICS} topics")
        return
    assert stored.status_code == 201
    resp = evaluate(limited, run(), qrels_id="over")
    assert resp.status_code == 413, resp.get_data(as_text=True)[:300]
    # the field is "qrels" on evaluations ("qrels_id" on comparisons and pools)
    (field,) = resp.get_json()["errors"]
    assert field in ("qrels", "qrels_id")
    assert f"at most {TOPICS} topics" in resp.get_json()["errors"][field][0]


# --------------------------------------------------------------------------------------------
# MAX_CONTENT_LENGTH: exactly the limit passes, one byte more is 413
# --------------------------------------------------------------------------------------------

@pytest.fixture
def small_body():
    # topics and documents far under their limits: only the body size can be broken
    return ContractClient(create_app({"TESTING": True, "MAX_CONTENT_LENGTH": BODY_LIMIT})
                          .test_client())


def padded(body: dict, size: int) -> bytes:
    """``body`` as JSON padded with trailing spaces (insignificant in JSON) to ``size``
    bytes."""
    data = orjson.dumps(body)
    assert len(data) < size
    return data + b" " * (size - len(data))


SMALL_RUN = run(2, 3)
BODIES = {
    "POST /v1/evaluations": {"run": SMALL_RUN, "qrels": qrels(2), "measures": ["map"]},
    "PUT /v1/qrels/sized": {"qrels": qrels(2)},
    "POST /v1/comparisons": {"runs": [{"run": SMALL_RUN}, {"run": run(2, 2)}],
                             "qrels": qrels(2), "measures": ["map"], "permutations": 100,
                             "bootstrap_samples": 100},
    "POST /v1/pools": {"runs": [{"run": SMALL_RUN}, {"run": run(2, 2)}], "depth": 2},
}


@pytest.mark.parametrize("route", list(BODIES))
def test_a_body_of_exactly_max_content_length_is_read(small_body, route):
    method, path = route.split()
    data = padded(BODIES[route], BODY_LIMIT)
    assert len(data) == BODY_LIMIT
    resp = small_body.open(path, method=method, data=data, content_type="application/json")
    assert resp.status_code in (200, 201), resp.get_data(as_text=True)[:300]


@pytest.mark.parametrize("route", list(BODIES))
def test_a_body_one_byte_over_max_content_length_is_413(small_body, route):
    method, path = route.split()
    data = padded(BODIES[route], BODY_LIMIT + 1)
    assert len(data) == BODY_LIMIT + 1
    resp = small_body.open(path, method=method, data=data, content_type="application/json")
    assert resp.status_code == 413, resp.get_data(as_text=True)[:300]
    assert resp.mimetype == PROBLEM
    doc = resp.get_json()
    assert doc["status"] == 413 and f"limit of {BODY_LIMIT} bytes" in doc["detail"], doc
    if method == "PUT":  # nothing stored
        assert small_body.get(path).status_code == 404
