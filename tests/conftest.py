"""Shared by every test directory: requirements that skip locally and fail under CI=true.

A part of the product that cannot be loaded (the compiled JSON kernels, a service the tests
need) must not turn its tests into quiet skips where the suite is meant to prove everything
works. Two ways to state such a requirement, neither needing an import (each test directory
has its own ``conftest`` module):

- a marker, for a module or a test::

      pytestmark = pytest.mark.requires(json_body.warm_up(), reason="the JSON kernels load")

- the ``require`` fixture, for a check made while the test runs::

      def test_x(require):
          require(shutil.which("perl") is not None, "perl is installed")

When the condition is false the test is skipped, or, with CI=true, fails naming the reason.
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def require(condition: object, reason: str) -> None:
    """Go on if ``condition`` holds; else skip, or fail under CI=true (``reason`` says what
    is required)."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"required under CI=true: {reason}", pytrace=False)
    pytest.skip(f"requirement not met: {reason}")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "requires(condition, reason): skip when the condition is false, and fail "
        "under CI=true (a part of the product that must be tested there)")


def pytest_runtest_setup(item):
    for mark in item.iter_markers(name="requires"):
        if mark.args:
            condition = mark.args[0]
        elif "condition" in mark.kwargs:
            condition = mark.kwargs["condition"]
        else:
            raise TypeError(f"{item.nodeid}: requires() needs a condition")
        require(condition, mark.kwargs.get("reason", "(no reason given)"))


@pytest.fixture(name="require")
def require_fixture():
    """:func:`require`, for checks made inside a test."""
    return require


@pytest.fixture
def redis_conn(redis_server):
    """A client of the module's private ``redis_server`` (tests/api's and tests/integration's
    conftest give one), emptied for the test and closed after it (its pooled sockets, before
    the server goes)."""
    from backend.store import redis_client

    conn = redis_client(redis_server.url)
    conn.flushall()
    yield conn
    conn.close()
