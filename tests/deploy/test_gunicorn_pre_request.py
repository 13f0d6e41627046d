"""service/gunicorn.conf.py's pre_request hook: a body declared longer than the API's limit
closes the connection after the answer. The declared length is read as HTTP writes it,
ASCII decimal digits only (issue #27): ``str.isdigit()`` also took fullwidth ``１``, Arabic-
Indic ``٣`` or superscript ``²``, and ``int()`` read them as a number the client never
wrote."""

from __future__ import annotations

import logging
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 1000


@pytest.fixture(scope="module")
def pre_request():
    settings = runpy.run_path(str(ROOT / "service" / "gunicorn.conf.py"))
    settings["_body_limit"][:] = [LIMIT]  # the hook's MAX_CONTENT_LENGTH, read once per worker
    return settings["pre_request"]


def closed(pre_request, length: str) -> bool:
    req = SimpleNamespace(method="POST", path="/v1/evaluations", must_close=False,
                          headers=[("HOST", "x"), ("CONTENT-LENGTH", length)])
    pre_request(SimpleNamespace(log=logging.getLogger("test")), req)
    return req.must_close


def test_an_ascii_length_past_the_limit_closes_the_connection(pre_request):
    assert closed(pre_request, str(LIMIT + 1))
    assert closed(pre_request, "0" + str(10 * LIMIT))
    assert not closed(pre_request, str(LIMIT))
    assert not closed(pre_request, "0")


@pytest.mark.parametrize("length", ["１００００", "٣٣٣٣", "۹۹۹۹", "२२२२", "𝟗𝟗𝟗𝟗", "²²²²",
                                    "1１１１", " 99999", "99999 ", "+99999", "9_9999"])
def test_a_length_in_other_digits_is_not_read_as_a_number(pre_request, length):
    """Not ASCII decimal: no number the hook reads (gunicorn's own reader refuses such a
    header with 400 before the hook)."""
    assert not closed(pre_request, length)
