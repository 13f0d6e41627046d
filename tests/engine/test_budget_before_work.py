"""Budgets before work (issue #27), in the engine: ``cranfield.measures.budget.evaluation_budget``
holds the evaluations of its context to measure instances (before any input is read) and instances ×
topics (before any run is ranked); ``pool(max_work=)`` holds a pool to runs × topics ×
documents before any run is ranked. Outside a budget (the library, the CLI): no limit."""

from __future__ import annotations

import importlib

import pytest

import cranfield
import cranfield.compare.pooling
from cranfield.compare.pooling import pool, pool_work
from cranfield.measures.budget import BudgetError, evaluation_budget

QRELS = "".join(f"q{t} 0 d0 1\nq{t} 0 d1 0\n" for t in range(10))
RUN = "".join(f"q{t} Q0 d{d} {d + 1} {10 - d} r\n" for t in range(10) for d in range(5))


# the module (cranfield.evaluate is also the function the package exports)
EVALUATE = importlib.import_module("cranfield.evaluate")


def cutoffs(n: int) -> str:
    return "P." + ",".join(map(str, range(1, n + 1)))


def test_no_budget_outside_a_context():
    ev = cranfield.evaluate(QRELS, RUN, [cutoffs(5000)])
    assert len(ev.instances) == 5000


def test_instances_are_refused_before_any_input_is_read(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("an input was read")

    monkeypatch.setattr(EVALUATE, "read_run", never)
    with evaluation_budget(max_instances=100), pytest.raises(BudgetError) as info:
        cranfield.evaluate(QRELS, RUN, [cutoffs(101)])
    assert (info.value.budget, info.value.limit, info.value.total) == \
        ("MAX_MEASURE_INSTANCES", 100, 101)
    assert info.value.field == "measures"


def test_values_are_refused_before_any_run_is_ranked(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the run was ranked")

    monkeypatch.setattr(EVALUATE, "rank_run", never)
    with evaluation_budget(max_values=99), pytest.raises(BudgetError) as info:
        cranfield.evaluate(QRELS, RUN, [cutoffs(10)])
    assert info.value.factors == {"instances": 10, "topics": 10}
    assert str(info.value).startswith("measures expand to 10 instances × 10 topics = 100 "
                                      "values, over MAX_EVALUATION_VALUES 99")


def test_at_the_budget_the_evaluation_is_unchanged():
    with evaluation_budget(max_instances=10, max_values=100):
        inside = cranfield.evaluate(QRELS, RUN, [cutoffs(10)]).aggregate
    assert inside == cranfield.evaluate(QRELS, RUN, [cutoffs(10)]).aggregate


def test_the_budget_is_the_contexts_own():
    with evaluation_budget(max_values=1):
        pass
    assert cranfield.evaluate(QRELS, RUN, ["map"]).aggregate["map"] == 1.0


def test_a_pool_over_max_work_is_refused_before_any_run_is_ranked(monkeypatch):
    runs = {"a": RUN, "b": RUN.replace(" r\n", " s\n")}

    def never(*args, **kwargs):
        raise AssertionError("a run was ranked")

    work = pool_work([cranfield.read_run(r) for r in runs.values()], 3)
    assert work == {"runs": 2, "topics": 10, "documents": 3, "total": 60}
    assert pool_work([cranfield.read_run(RUN)], 50)["documents"] == 5  # the longest topic
    monkeypatch.setattr(cranfield.compare.pooling, "top_documents", never)
    with pytest.raises(BudgetError) as info:
        pool(runs, 3, max_work=59)
    assert info.value.factors == {"runs": 2, "topics": 10, "documents": 3}
    assert str(info.value).startswith("this pool is 2 runs × 10 topics × 3 documents = 60 "
                                      "rows, over MAX_POOL_WORK 59")
    monkeypatch.undo()
    assert pool(runs, 3, max_work=60) == pool(runs, 3)
