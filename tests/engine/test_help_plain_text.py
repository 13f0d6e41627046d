"""What a terminal shows is plain text (issue #26's small items): no argparse escape (``%%``)
left in a help or description, no RST inline literal (````x````) in a measure's description
as ``cranfield measures`` prints it."""

from __future__ import annotations

import argparse

import pytest

from cranfield.cli import build_parser
from cranfield.reports import measure_docs


def _every_parser() -> list[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser(commands=True)
    found = [("cranfield", parser)]
    for action in parser._actions:  # the subcommands' parsers
        if isinstance(action, argparse._SubParsersAction):
            found += [(f"cranfield {name}", sub) for name, sub in action.choices.items()]
    return found


@pytest.mark.parametrize("name, parser", _every_parser(), ids=lambda x: str(x))
def test_help_has_no_escapes_left(name, parser):
    text = parser.format_help()
    assert "%%" not in text and "``" not in text, name


def test_the_history_help_says_95_percent_once():
    (history,) = [p for n, p in _every_parser() if n == "cranfield history"]
    assert "mean and 95% CI per result" in history.format_help()


def test_measure_descriptions_print_as_plain_text():
    doc = measure_docs.measures_document(None)
    assert any("``" in d["summary"] for d in doc["measures"])  # the docstrings do use RST
    listing = measure_docs.format_list(doc)
    assert "``" not in listing and "ERR@k is gdeval's ERR@k" in listing
    for d in doc["measures"]:
        assert "``" not in measure_docs.format_measure(d), d["name"]


@pytest.mark.parametrize("text, plain", [
    ("``ERR@k`` is gdeval's", "ERR@k is gdeval's"),
    ("binary with ``rel=``, graded", "binary with rel=, graded"),
    ("no literal here", "no literal here"),
    ("a lone `` stays", "a lone `` stays"),
])
def test_plain(text, plain):
    assert measure_docs.plain(text) == plain
