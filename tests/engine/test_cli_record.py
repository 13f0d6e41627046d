"""``cranfield eval --server URL --record …``: the record argument's grammar, and that a
record needs a service (the service's side: tests/api/test_results_api.py and
tests/integration/test_results_cli.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cranfield.cli import _record_arg, main

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"


@pytest.mark.parametrize("text, record", [
    ("system=bm25,label=nightly-1", {"system": "bm25", "label": "nightly-1"}),
    ("label=n, system=bm25 ,commit=abc123", {"label": "n", "system": "bm25",
                                             "commit": "abc123"}),
    ("system=s,label=l,tags=prod;night ; x", {"system": "s", "label": "l",
                                              "tags": ["prod", "night", "x"]}),
])
def test_record_argument(text, record):
    assert _record_arg(text) == record


@pytest.mark.parametrize("text, message", [
    ("system=s", "needs label"),
    ("label=l", "needs system"),
    ("", "give KEY=VALUE pairs"),
    ("system=s,label=l,owner=me", "'owner=me': give KEY=VALUE pairs, KEY one of system, label, "
                                  "commit, tags"),
    ("system=s,label=", "give KEY=VALUE pairs"),
    ("system=s,system=t,label=l", "system given twice"),
])
def test_bad_record_arguments_say_why(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(")):
        _record_arg(text)


def test_record_needs_a_server(capsys):
    code = main(["eval", "--record", "system=s,label=l", str(DATA / "qrels.test"),
                 str(DATA / "results.test")])
    assert code == 2
    assert capsys.readouterr().err == ("cranfield: --record needs --server (results are kept "
                                       "by the service)\n")


def test_history_cannot_reach_a_service(capsys):
    code = main(["history", "bm25", "--server", "http://127.0.0.1:9"])
    assert code == 2
    assert capsys.readouterr().err.startswith("cranfield: cannot reach http://127.0.0.1:9")
