"""The docstring sections GET /v1/measures and `cranfield measures` show (review R1 F5): a
Formula wrapped onto a line that starts with a variable and a colon (``b: the mean``) is
not cut there; every shown Formula is its whole paragraph; the 0/0 rules say when."""

from __future__ import annotations

import re

import pytest

from cranfield.measures.registry import REGISTRY
from cranfield.reports.measure_docs import describe

HEADINGS = r"(?=\n\s*\n|\n\s*0/0:|\n\s*[A-Z][A-Za-z]*:|\Z)"


@pytest.mark.parametrize("name, key, expected", [
    ("prefs_pair_ret", "formula", "over the pairs {a, b} of retrieved documents some group "
     "orders, a ranked above b: the mean of C[a][b] / (C[a][b] + C[b][a])."),
    ("prefs_simp_imp", "zero_rule", "no preference with a retrieved document "
     "(Σ_g (poss_ret_g + poss_imp_g) = 0) gives 0."),
])
def test_shown_sections(name, key, expected):
    assert describe(REGISTRY[name])[key] == expected


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_formula_is_its_whole_paragraph(name):
    doc = "\n" + (REGISTRY[name].doc or "")
    found = re.search(r"\n\s*Formula:(.*?)" + HEADINGS, doc, re.S)
    if found is None:
        pytest.skip("no Formula section")
    assert REGISTRY[name].section("Formula") == " ".join(found.group(1).split())
