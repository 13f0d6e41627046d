"""A trend point's mean is the evaluation's aggregate, last digit included (issue #27).

Aggregates are summed as trec_eval sums (cranfield.measures.aggregation.trec_mean: each topic in
turn, in a double, in strcmp topic order). A trend point's mean is kept when the result is recorded,
from its per-topic values: numpy's pairwise sum made it 14.900000000000002 / 2000 on the seen
case (P_10 on 0.00745, printed 0.0075) beside the evaluation's 14.899999999999963 / 2000
(0.0074, trec_eval's digit). Now both are the same double, on SQLite and PostgreSQL; the CI
is the Student-t interval it was."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ContractClient
from scipy import stats

from backend.results import encode_per_topic
from service.app import create_app

RESULTS_ON_POSTGRES = True  # each test on SQLite and on PostgreSQL (conftest)

TOPICS = [f"t{i:04d}" for i in range(2000)]
# the seen case: 149 of 2,000 topics with their one retrieved document relevant
QRELS = "".join(f"{t} 0 d1 {int(i < 149)}\n" for i, t in enumerate(TOPICS))
RUN = "".join(f"{t} Q0 d1 1 1.0 seen\n" for t in TOPICS)
TREC_EVAL_MEAN = 14.899999999999963 / 2000  # trec_eval 9.0.8 and 10.0 print 0.0074


@pytest.fixture
def client():
    app = create_app({"TESTING": True, "MAX_CONTENT_LENGTH": 2_000_000, "MAX_TOPICS": 5000,
                      "MAX_DOCS_PER_TOPIC": 2000})
    return ContractClient(app.test_client())


def test_the_case_is_a_boundary():
    """numpy's pairwise mean of these values prints the other digit: the test below would
    pass with it otherwise."""
    values = np.array([0.1] * 149 + [0.0] * 1851)
    assert "%.4f" % (values.sum() / 2000) == "0.0075"
    assert "%.4f" % TREC_EVAL_MEAN == "0.0074"


def test_seen_trend_mean_is_the_evaluation_aggregate(client):
    resp = client.post("/v1/evaluations", json={
        "run": RUN, "qrels": QRELS, "measures": ["P.10", "map"],
        "record": {"system": "seen", "label": "one"}})
    assert resp.status_code == 200, resp.get_json()
    doc = resp.get_json()
    assert doc["aggregate"]["P_10"] == TREC_EVAL_MEAN
    for measure in ("P_10", "map"):
        trend = client.get(f"/v1/systems/seen/trend?measure={measure}").get_json()
        (point,) = trend["points"]
        assert point["n_topics"] == 2000
        assert point["mean"] == doc["aggregate"][measure], measure  # bit for bit
        # the CI as before: mean ± t · s / sqrt(n)
        values = np.array([row[measure] for row in doc["per_topic"].values()])
        half = stats.t.ppf(0.975, 1999) * values.std(ddof=1) / math.sqrt(2000)
        assert math.isclose(point["ci_low"], values.mean() - half, rel_tol=1e-9)
        assert math.isclose(point["ci_high"], values.mean() + half, rel_tol=1e-9)
    assert "%.4f" % client.get("/v1/systems/seen/trend?measure=P_10").get_json()[
        "points"][0]["mean"] == "0.0074"


def test_stored_mean_is_summed_in_strcmp_topic_order(results_database):
    """Per-topic values handed over in another order (a client's own per_topic, topic ids
    in numeric order) are stored as given and their mean summed in trec_eval's order
    (strcmp: "10" before "9"): the same double whatever the order given."""
    rng = np.random.default_rng(27)
    numeric = [str(i) for i in range(1, 2001)]  # 1, 2, ..., 10, ...: not strcmp order
    values = dict(zip(numeric, rng.random(2000).tolist(), strict=True))
    strcmp = sorted(numeric, key=str.encode)
    in_turn = float(np.add.accumulate([values[t] for t in strcmp])[-1]) / 2000
    # the order given and numpy's pairwise sum are other doubles: the order is what counts
    assert float(np.add.accumulate(list(values.values()))[-1]) / 2000 != in_turn
    assert float(np.array(list(values.values())).sum()) / 2000 != in_turn
    given_orders = {"numeric": values, "strcmp": {t: values[t] for t in strcmp},
                    "reversed": dict(reversed(values.items()))}
    for name, given in given_orders.items():
        topics, (row,) = encode_per_topic({t: {"m": v} for t, v in given.items()})
        assert topics == list(given), name  # stored in the order given
        assert (row["n"], row["mean"]) == (2000, in_turn), name


def test_a_constant_column_has_its_mean_as_its_ci(results_database):
    topics, (row,) = encode_per_topic({f"q{i}": {"m": 0.1} for i in range(10)})
    assert row["mean"] == row["ci_low"] == row["ci_high"] == float(
        np.add.accumulate([0.1] * 10)[-1]) / 10
