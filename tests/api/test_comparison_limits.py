"""Issue #14: POST /v1/comparisons and /v1/pools hold every run and the qrels to MAX_TOPICS
and MAX_DOCS_PER_TOPIC as /v1/evaluations does (413 naming the field), and a synchronous
comparison to MAX_COMPARISON_WORK (422 naming the product and its figures). Small limits
through create_app(config); every response checked against openapi.yaml."""

from __future__ import annotations

import pytest
from conftest import ContractClient

from cranfield.compare.comparison_work import comparison_work
from service.app import create_app

PROBLEM = "application/problem+json"
TOPICS, DOCS = 4, 3  # the limits of these tests


def make_client(**config) -> ContractClient:
    return ContractClient(create_app({"TESTING": True, "MAX_TOPICS": TOPICS,
                                      "MAX_DOCS_PER_TOPIC": DOCS, **config}).test_client())


@pytest.fixture
def client():
    return make_client()


def run(n_topics: int = TOPICS, n_docs: int = DOCS, shift: float = 0.0) -> dict:
    """``n_topics`` topics, each with ``n_docs`` scored documents (d0 the best)."""
    return {f"q{t}": {f"d{d}": float(n_docs - d) + shift * ((t + d) % 2) for d in range(n_docs)}
            for t in range(n_topics)}


def qrels(n_topics: int = TOPICS) -> dict:
    return {f"q{t}": {"d0": 1, f"d{t % DOCS}": 1} for t in range(n_topics)}


def compare_body(*runs, **extra) -> dict:
    out = {"runs": [{"run": r} for r in runs], "qrels": qrels(), "measures": ["map"],
           "permutations": 100, "bootstrap_samples": 100}
    out.update(extra)
    return out


def assert_413(resp, field: str) -> None:
    assert resp.status_code == 413, resp.get_data(as_text=True)[:300]
    assert resp.mimetype == PROBLEM
    doc = resp.get_json()
    assert doc["status"] == 413 and doc["type"].endswith("/too-large")
    assert list(doc["errors"]) == [field], doc


# --------------------------------------------------------------------------------------------
# Comparisons: topics and documents per topic, at the boundary
# --------------------------------------------------------------------------------------------

def test_comparison_at_the_limits_passes(client):
    resp = client.post("/v1/comparisons", json=compare_body(run(), run(shift=0.5)))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    assert len(resp.get_json()["topics"]) == TOPICS


def test_comparison_run_over_max_topics_is_413(client):
    resp = client.post("/v1/comparisons", json=compare_body(run(), run(TOPICS + 1)))
    assert_413(resp, "runs[1].run")
    assert f"at most {TOPICS} topics" in resp.get_json()["errors"]["runs[1].run"][0]


def test_comparison_qrels_over_max_topics_is_413(client):
    body = compare_body(run(), run(), qrels=qrels(TOPICS + 1))
    assert_413(client.post("/v1/comparisons", json=body), "qrels")


def test_comparison_topic_over_max_docs_is_413(client):
    over = run()
    over["q2"] = {f"d{d}": float(-d) for d in range(DOCS + 1)}
    resp = client.post("/v1/comparisons", json=compare_body(run(), over))
    assert_413(resp, "runs[1].run.q2")
    assert "documents per topic" in resp.get_json()["errors"]["runs[1].run.q2"][0]


def test_comparison_trec_text_over_max_docs_is_413(client):
    text = "".join(f"q0 Q0 d{d} {d + 1} {10 - d} x\n" for d in range(DOCS + 1))
    resp = client.post("/v1/comparisons", json=compare_body(run(), text))
    assert_413(resp, "runs[1].run.q0")


def test_comparison_limits_come_from_the_configuration():
    client = make_client(MAX_TOPICS=TOPICS + 1, MAX_DOCS_PER_TOPIC=DOCS + 1)
    over = run(TOPICS + 1, DOCS + 1)
    resp = client.post("/v1/comparisons", json=compare_body(over, over, qrels=qrels(TOPICS + 1)))
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    doc = resp.get_json()
    assert doc["topics"] == [f"q{t}" for t in range(TOPICS + 1)]
    # AP 1 on every topic but q2, whose second relevant document (d2) is at rank 3: 5/6
    assert doc["summary"]["map"]["run1"]["aggregate"] == pytest.approx((TOPICS + 5 / 6)
                                                                       / (TOPICS + 1))


# --------------------------------------------------------------------------------------------
# Pools: the same limits
# --------------------------------------------------------------------------------------------

def test_pool_at_the_limits_passes(client):
    resp = client.post("/v1/pools", json={"runs": [{"run": run()}, {"run": run()}], "depth": 2})
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]
    doc = resp.get_json()  # the top two of each topic (d0, d1), once however many runs
    assert doc["topics"] == {f"q{t}": ["d0", "d1"] for t in range(TOPICS)}
    assert doc["total"] == 2 * TOPICS


def test_pool_run_over_max_topics_is_413(client):
    resp = client.post("/v1/pools", json={"runs": [{"run": run()}, {"run": run(TOPICS + 1)}],
                                          "depth": 2})
    assert_413(resp, "runs[1].run")


def test_pool_topic_over_max_docs_is_413(client):
    over = run()
    over["q3"] = {f"d{d}": float(-d) for d in range(DOCS + 1)}
    resp = client.post("/v1/pools", json={"runs": [{"run": over}], "depth": 1})
    assert_413(resp, "runs[0].run.q3")


def test_pool_judged_qrels_over_max_topics_are_413(client):
    # stored qrels are held to MAX_TOPICS when stored (issue 27): the same 413
    assert_413(client.put("/v1/qrels/wide", json={"qrels": qrels(TOPICS + 1)}), "qrels")
    # ... and a pool reading qrels stored under a larger MAX_TOPICS (since lowered) is 413
    client.client.application.config.update(MAX_TOPICS=TOPICS + 1)
    assert client.put("/v1/qrels/wide", json={"qrels": qrels(TOPICS + 1)}).status_code == 201
    client.client.application.config.update(MAX_TOPICS=TOPICS)
    resp = client.post("/v1/pools", json={"runs": [{"run": run()}], "depth": 1,
                                          "qrels_id": "wide"})
    assert_413(resp, "qrels_id")


# --------------------------------------------------------------------------------------------
# The work budget
# --------------------------------------------------------------------------------------------

def work_of(body: dict, topics: int = TOPICS) -> int:
    """The work of a body of compare_body's shape (all pairs, its measures and tests)."""
    runs = len(body["runs"])
    tests = body.get("tests", ["t", "randomization", "bootstrap"])
    return comparison_work(runs * (runs - 1) // 2, len(body["measures"]), topics, tests,
                           body["permutations"], body["bootstrap_samples"]).total


def test_comparison_at_the_budget_passes_and_one_unit_over_is_422():
    body = compare_body(run(), run(shift=0.5), run(shift=0.25), measures=["map", "P.2"],
                        permutations=500, bootstrap_samples=300)
    work = work_of(body)  # 3 pairs × 2 measures over 4 topics (exact: 16 sign vectors) + 300
    assert work == (16 + 300) * (6 * 4 + 200 * 4 + 400 * 6) + 40_000 * 6 * 4
    resp = make_client(MAX_COMPARISON_WORK=work).post("/v1/comparisons", json=body)
    assert resp.status_code == 200, resp.get_data(as_text=True)[:300]

    resp = make_client(MAX_COMPARISON_WORK=work - 1).post("/v1/comparisons", json=body)
    assert resp.status_code == 422 and resp.mimetype == PROBLEM
    doc = resp.get_json()
    assert doc["type"].endswith("/work-over-budget")
    assert list(doc["errors"]) == ["work"]
    assert "MAX_COMPARISON_WORK" in doc["errors"]["work"][0]
    assert doc["work"] == {"pairs": 3, "measures": 2, "columns": 6, "topics": 4,
                           "permutations": 16, "bootstrap_samples": 300, "wilcoxon": False,
                           "resamples": 316, "total": work, "budget": work - 1,
                           "formula": doc["work"]["formula"]}
    # the detail names the product and its figures, and the way out
    for figure in ("3 pairs × 2 measures = 6 columns", "4 topics", "316 resamples",
                   f"{work:,}", f"{work - 1:,}", "Prefer: respond-async"):
        assert figure in doc["detail"], figure


def test_the_issue_comparison_is_refused_before_any_resampling():
    """10 runs × 30 topics with 10^6 permutations and 10^6 bootstrap samples (inside the
    schema) took 27 CPU-s and 4 GB in one worker; under the default budget it is a 422,
    answered at once."""
    client = ContractClient(create_app({"TESTING": True}).test_client())
    runs = [run(30, 3, shift=i / 10) for i in range(10)]
    body = {"runs": [{"run": r} for r in runs], "qrels": qrels(30), "measures": ["map"],
            "permutations": 1_000_000, "bootstrap_samples": 1_000_000}
    resp = client.post("/v1/comparisons", json=body)
    assert resp.status_code == 422, resp.get_data(as_text=True)[:300]
    work = resp.get_json()["work"]
    assert (work["pairs"], work["topics"], work["resamples"]) == (45, 30, 2_000_000)
    assert work["total"] > work["budget"] == 40_000_000_000


def test_wilcoxon_counts_in_the_work():
    body = compare_body(run(), run(shift=0.5), tests=["t", "wilcoxon"])
    work = work_of(body)
    assert work == 40_000 * (1 * 4 + 200 * 4 + 400 * 1) + 40_000 * 1 * 4
    assert make_client(MAX_COMPARISON_WORK=work).post(
        "/v1/comparisons", json=body).status_code == 200
    assert make_client(MAX_COMPARISON_WORK=work - 1).post(
        "/v1/comparisons", json=body).status_code == 422


def test_an_async_comparison_over_the_budget_is_queued():
    """The budget guards the web worker: asked for with Prefer: respond-async, an
    over-budget comparison is accepted as a job (JOB_TIMEOUT bounds it)."""
    client = make_client(MAX_COMPARISON_WORK=1)
    resp = client.post("/v1/comparisons", json=compare_body(run(), run(shift=0.5)),
                       headers={"Prefer": "respond-async"})
    assert resp.status_code == 202, resp.get_data(as_text=True)[:300]


def test_the_budget_is_a_positive_integer_setting(monkeypatch):
    from service.app import ConfigError

    monkeypatch.setenv("CRANFIELD_MAX_COMPARISON_WORK", "12345")
    assert create_app({"TESTING": True}).config["MAX_COMPARISON_WORK"] == 12345
    monkeypatch.setenv("CRANFIELD_MAX_COMPARISON_WORK", "lots")
    with pytest.raises(ConfigError, match="CRANFIELD_MAX_COMPARISON_WORK must be an integer"):
        create_app({"TESTING": True})


# --------------------------------------------------------------------------------------------
# Issue #25's run names: too many uploaded runs are refused before they are named
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path, most", [("/v1/comparisons", 50), ("/v1/pools", 200)])
def test_more_run_files_than_allowed_are_refused_before_they_are_named(client, monkeypatch,
                                                                       path, most):
    """Naming runs compares each file name with the others (shortest telling path): a form
    of a thousand same-named deep paths cost minutes of CPU before the schema refused it.
    Refused first, naming ``runs``, with the schema's words."""
    import io

    import service.comparisons as comparisons

    named = []
    monkeypatch.setattr(comparisons, "run_names",
                        lambda labels: named.append(len(labels)) or list(labels))
    deep = "/".join(["a"] * 40) + "/run.txt"
    text = "q0 Q0 d0 1 1.0 r\n"
    data = {"runs": [(io.BytesIO(text.encode()), deep) for _ in range(most + 1)],
            "qrels": (io.BytesIO(b"q0 0 d0 1\n"), "qrels.txt"), "depth": "5"}
    resp = client.post(path, data=data, content_type="multipart/form-data")
    assert resp.status_code == 422, resp.get_data(as_text=True)[:300]
    assert resp.mimetype == PROBLEM
    assert resp.get_json()["errors"] == {"runs": [f"Length must be between 1 and {most}."]}
    assert named == []
