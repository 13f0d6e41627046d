"""Warnings survive (issue #25): each compared run's input lint — what ``cranfield eval``
warns of it (unjudged documents in the top 10, ties at cutoffs, judged topics missing…) —
travels into the comparison document, its text and its page, first, naming its run: evaluated
here, or read back from a recorded document (``evaluation_from_document`` keeps them)."""

from __future__ import annotations

import re

import pytest

import cranfield
from cranfield.compare.comparison import compare, compare_evaluations
from cranfield.compare.comparison_text import format_text
from cranfield.reports.html_report import render_comparison
from cranfield.reports.result_document import evaluation_document, evaluation_from_document

TOPICS = [f"t{i}" for i in range(1, 9)]
QRELS = {t: {"r": 1, "j": 0} for t in TOPICS}
# clean: every document of its top 10 judged
CLEAN = {t: {"r": 2.0, "j": 1.0} for t in TOPICS}
# holes: seven unjudged documents above the relevant one (7 of its 9 ranks, 77.8%)
HOLES = {t: {**{f"u{k}": 20.0 - k for k in range(7)}, "r": 2.0, "j": 1.0} for t in TOPICS}
# ties: the 10th and 11th documents share a score; and t8 is not in the run
TIED = {t: {**{f"d{k}": 30.0 - k for k in range(9)}, "r": 5.0, "j": 5.0}
        for t in TOPICS[:-1]}


def _lint(doc: dict, run: str) -> dict[str, dict]:
    return {w["code"]: w for w in doc["warnings"] if w.get("run") == run}


def _check(doc: dict) -> None:
    """The runs' lint in the comparison document: per run, named, first."""
    assert _lint(doc, "clean") == {}
    holes = _lint(doc, "holes")["unjudged-in-top-10"]
    assert holes["topics"] == sorted(TOPICS) and "(77.8% of those ranks)" in holes["message"]
    assert holes["message"].startswith("run 'holes': 8 topic(s) have unjudged documents")
    tied = _lint(doc, "tied")
    assert tied["tie-at-cutoff"]["cutoff"] == 10 and len(tied["tie-at-cutoff"]["topics"]) == 7
    assert tied["topics-qrels-only"]["topics"] == ["t8"]
    assert "unjudged-in-top-10" in tied  # d0..d8 are not judged either
    first_own = next((i for i, w in enumerate(doc["warnings"]) if "run" not in w),
                     len(doc["warnings"]))
    assert all("run" in w for w in doc["warnings"][:first_own])
    assert all("run" not in w for w in doc["warnings"][first_own:])


def _check_text_and_page(doc: dict) -> None:
    text = format_text(doc)
    for w in (w for w in doc["warnings"] if "run" in w):
        assert f"warning: {w['message']}\n" in text
    assert text.index("warning: run 'holes'") < text.index("\nmap  (")
    page = render_comparison(doc)
    assert "Warnings</h2>" in page and 'class="no-warnings"' not in page
    start = page.index('class="warn warn-box"')
    box = page[start:page.index("</div>", start)]
    for run, code in (("holes", "unjudged-in-top-10"), ("tied", "tie-at-cutoff"),
                      ("tied", "topics-qrels-only")):
        assert re.search(f'<li class="warn" data-run="{run}"><code>{code}</code> '
                         f"run &#x27;{run}&#x27;: ", box), (run, code)
    assert "(77.8% of those ranks)" in box
    # first on the page: right under the title (and a gate's verdict), before any table
    assert page.index('id="warnings"') < page.index("<table")


def test_runs_evaluated_here_carry_their_lint_into_the_comparison():
    doc = compare(QRELS, {"clean": CLEAN, "holes": HOLES, "tied": TIED}, ["map", "P.10"],
                  baseline="clean", tests=["t", "randomization"], gate="map:0.01")
    _check(doc)
    _check_text_and_page(doc)


def test_the_cli_spells_options_its_way_in_the_runs_lint():
    doc = compare(QRELS, {"clean": CLEAN, "holes": HOLES}, ["map"], tests=["t"],
                  interface="cli")
    assert "(-J drops them instead)" in _lint(doc, "holes")["unjudged-in-top-10"]["message"]


@pytest.mark.parametrize("interface", ["api", "cli"])
def test_evaluations_read_back_from_documents_keep_their_lint(interface):
    """As the service compares finished jobs and recorded results: from their documents."""
    evaluations = {}
    for name, run in (("clean", CLEAN), ("holes", HOLES), ("tied", TIED)):
        ev = cranfield.evaluate(QRELS, run, ["map", "P.10"])
        document = evaluation_document(ev, {"per_topic": True}, "r", "q", None)
        evaluations[name] = evaluation_from_document(document)
        assert evaluations[name].lint == document["warnings"]
    doc = compare_evaluations(evaluations, ["map", "P.10"], tests=["t"], interface=interface)
    _check(doc)
    _check_text_and_page(doc)
    spelled = "-J" if interface == "cli" else "options.judged_only"
    assert f"({spelled} drops them instead)" in \
        _lint(doc, "holes")["unjudged-in-top-10"]["message"]
