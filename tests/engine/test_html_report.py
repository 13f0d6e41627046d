"""cranfield.reports.html_report: self-contained pages, parsed back with html.parser — balanced
markup, no external references, the charts and their data elements, escaping of hostile
text, significance marks exactly where adjusted p < alpha, "–" for missing values; the input
warnings right under the title (and the gate's verdict), one per-topic chart per measure with
non-overlapping topic labels and a named x axis, options as a request spells them."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

import cranfield
from cranfield.reports.html_charts import LABEL_PITCH, MAX_BARS
from cranfield.reports.html_page import PALETTE
from cranfield.reports.html_report import render_comparison, render_evaluation
from cranfield.reports.html_trend import VERDICT_STYLE, render_trend
from cranfield.reports.result_document import evaluation_document

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}
HOSTILE = "<script>alert(1)</script>"
AMP = 'a&b"'


class Page(HTMLParser):
    """Parses a page strictly: every non-void element closed in order. Keeps each element
    with its attributes, its enclosing chart and table cell, and all text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict]] = []
        self.elements: list[tuple[str, dict, str | None]] = []
        self.text: list[str] = []
        self.svg_titles: list[str] = []  # class of each chart with a <title> child
        self.rows: list[tuple[str, list[str]]] = []  # (table class, text of each cell)
        self.chart_texts: list[tuple[dict, dict, str]] = []  # (its chart, attrs, text)
        self.title = ""  # the page's <title>
        self.feed(text)
        self.close()
        assert not self.stack, f"unclosed: {[t for t, _ in self.stack]}"

    def chart(self) -> str | None:
        return next((a.get("class") for t, a in reversed(self.stack) if t == "svg"), None)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a, self.chart()))
        if tag == "title" and self.stack and self.stack[-1][0] == "svg":
            self.svg_titles.append(self.stack[-1][1].get("class"))
        if tag == "tr":
            table = next(a for t, a in reversed(self.stack) if t == "table")
            self.rows.append((table.get("class") or "", []))
        if tag in ("td", "th"):
            self.rows[-1][1].append("")
        if tag == "text" and self.chart():
            svg = next(a for t, a in reversed(self.stack) if t == "svg")
            self.chart_texts.append((svg, a, ""))
        if tag not in VOID:
            self.stack.append((tag, a))

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs), self.chart()))

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1][0] == tag, \
            f"</{tag}> closes {self.stack[-1][0] if self.stack else 'nothing'}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self.stack and self.stack[-1][0] == "text" and self.chart():
            chart, a, text = self.chart_texts[-1]
            self.chart_texts[-1] = (chart, a, text + data)
        if self.stack and self.stack[-1][0] == "title" and len(self.stack) > 1 \
                and self.stack[-2][0] == "head":
            self.title += data
        if any(t in ("td", "th") for t, _ in self.stack):
            self.rows[-1][1][-1] += data

    def charts(self, cls: str) -> list[dict]:
        return [a for t, a, _ in self.elements if t == "svg" and cls in a.get("class", "").split()]

    def inside(self, cls: str, tag: str) -> list[dict]:
        return [a for t, a, c in self.elements if t == tag and c and cls in c.split()]

    def index(self, tag: str, cls: str | None = None) -> int:
        """Where the first such element is in document order (-1: none)."""
        return next((i for i, (t, a, _) in enumerate(self.elements) if t == tag and (
            cls is None or cls in (a.get("class") or "").split())), -1)

    def labels(self, chart: dict) -> list[tuple[float, str]]:
        """(x, text) of the topic labels of this chart."""
        return [(float(re.match(r"translate\(([-\d.]+) ", a["transform"]).group(1)), text)
                for c, a, text in self.chart_texts if c is chart
                and a.get("class") == "tick-label"]

    def xlabels(self, cls: str) -> list[str]:
        """The x-axis label of each chart of this class."""
        return [t for c, a, t in self.chart_texts if cls in c["class"].split()
                and t.startswith("topics")]

    def table(self, cls: str) -> list[list[str]]:
        """Rows (header first) of the table with this class, by cell text."""
        return [cells for c, cells in self.rows if cls in c.split()]


def parse(text: str) -> Page:
    page = Page(text)
    assert text.startswith("<!DOCTYPE html>")
    for tag, a, _ in page.elements:
        for name in ("src", "href", "xlink:href", "action", "poster"):
            value = (a.get(name) or "").strip().lower()
            assert not value.startswith(("http:", "https:", "//", "ftp:")), (tag, a)
        assert not (tag == "link" and "stylesheet" in (a.get("rel") or "")), a
        assert not (tag == "script" and "src" in a), a
        assert tag not in ("img", "iframe", "object", "embed"), a
    assert "url(" not in text and "@import" not in text
    charts = page.charts("chart")
    for svg in charts:
        assert svg.get("viewbox"), svg
    assert page.svg_titles == [svg["class"] for svg in charts]
    return page


def real_document(**req):
    ev = cranfield.evaluate(str(DATA / "qrels.test"), str(DATA / "results.test"))
    return evaluation_document(ev, {"per_topic": True, "curves": True, **req},
                               "ab" * 32, "cd" * 32, None)


def test_real_evaluation_page():
    doc = real_document()
    page = parse(render_evaluation(doc))
    text = "".join(page.text)
    assert "Evaluation of STANDARD" in text and "cranfield 0.1.0" in text
    assert "trec_eval-9.0.8" in text
    assert "abababababab…" in text and "ab" * 32 not in text  # digests shortened
    rows = page.table("measures")
    assert rows[0] == ["measure", "canonical", "value", "aggregate"]
    by_key = {r[0]: r for r in rows[1:]}
    assert len(by_key) == len(doc["measures"])
    assert by_key["map"][1:3] == ["map(rel=1,profile=trec_eval-9.0.8)", "0.1785"]
    assert by_key["num_ret"][2] == "1500" and by_key["runid"][2] == "STANDARD"
    assert "3 evaluated" in text
    (pr,) = page.charts("pr-curve")
    assert "pr-curve" in pr["class"]
    (line,) = page.inside("pr-curve", "polyline")
    assert line["data-run"] == "STANDARD" and line["stroke"] == PALETTE[0]
    assert len(line["points"].split()) == 11
    # one chart per measure with per-topic values, counts and the runid left out
    charted = [m["key"] for m in doc["measures"] if m["family"] not in ("count", "info")
               and any(math.isfinite(row.get(m["key"], math.nan))
                       for row in doc["per_topic"].values())]
    assert len(charted) >= 20 and "map" in charted and "P_10" in charted
    charts = page.charts("topic-bars")
    assert [c["data-measure"] for c in charts] == charted
    rects = page.inside("topic-bars", "rect")
    assert len(rects) == 3 * len(charted)
    for i, key in enumerate(charted):
        bars = rects[3 * i:3 * i + 3]
        assert sorted(r["data-topic"] for r in bars) == ["301", "302", "303"]
        values = [float(r["data-value"]) for r in bars]
        assert values == sorted(values, reverse=True)  # sorted descending
        assert values == pytest.approx(sorted((row[key] for row in doc["per_topic"].values()),
                                              reverse=True), abs=1e-5), key
        assert f"Per topic: {key}" in text
        assert [t for _, t in page.labels(charts[i])] == [r["data-topic"] for r in bars]
    assert page.xlabels("topic-bars") == [f"topics, sorted by {k}, highest first (3 topics)"
                                          for k in charted]


def test_evaluation_without_curves_or_per_topic_has_no_charts():
    ev = cranfield.evaluate(str(DATA / "qrels.test"), str(DATA / "results.test"), ["map"])
    doc = evaluation_document(ev, {"per_topic": False}, "x", "y", None)
    page = parse(render_evaluation(doc, title="Mine <b>"))
    assert not page.charts("chart")
    assert "Mine <b>" in "".join(page.text) and not any(t == "b" for t, _, _ in page.elements)


def test_hostile_topic_ids_and_run_names_are_escaped():
    run = {HOSTILE: {"d1": 2.0, "d2": 1.0}, AMP: {"d1": 1.0, "d3": 0.5}}
    qrels = {HOSTILE: {"d2": 1}, AMP: {"d1": 1}, "q'3": {"d9": 1}}
    ev = cranfield.evaluate(qrels, run, ["map", "P.5"])
    doc = evaluation_document(ev, {"per_topic": True, "curves": True}, "s", "t", None)
    doc["provenance"]["runid"] = AMP
    html = render_evaluation(doc)
    assert HOSTILE not in html and "<script" not in html.lower()
    page = parse(html)
    assert not any(t == "script" for t, _, _ in page.elements)
    assert {r["data-topic"] for r in page.inside("topic-bars", "rect")} == {HOSTILE, AMP}
    assert page.inside("pr-curve", "polyline")[0]["data-run"] == AMP
    text = "".join(page.text)
    assert HOSTILE in text and "q'3" in text  # shown as text (warnings: judged, not in run)


def test_missing_values_show_a_dash():
    doc = real_document()
    doc["aggregate"]["map"] = float("nan")
    doc["aggregate"]["P_5"] = None
    rows = {r[0]: r for r in parse(render_evaluation(doc)).table("measures")[1:]}
    assert rows["map"][2] == "–" and rows["P_5"][2] == "–"


def bar_doc(values: dict) -> dict:
    return {"measures": [{"key": "ndcg", "canonical": "nDCG", "family": "graded"}],
            "aggregate": {"ndcg": 0.5}, "per_topic": {t: {"ndcg": v} for t, v in values.items()}}


@pytest.mark.parametrize("values", [
    {"only": 0.25}, {f"t{i}": 0.0 for i in range(7)}, {f"t{i}": 0.4 for i in range(3)},
    {"a": -0.5, "b": 1e-12, "c": 0.5}, {"a": float("nan"), "b": None, "c": 0.1}])
def test_bar_chart_edge_cases(values):
    page = parse(render_evaluation(bar_doc(values)))
    rects = page.inside("topic-bars", "rect")
    drawn = [t for t, v in values.items() if v is not None and v == v]
    assert sorted(r["data-topic"] for r in rects) == sorted(drawn)
    for r in rects:
        for k in ("x", "y", "width", "height"):
            assert math.isfinite(float(r[k])) and float(r[k]) >= 0, r
    if len(drawn) < len(values):
        assert "without a value are not drawn" in "".join(page.text)


def test_thousands_of_topics_are_capped():
    values = {f"q{i:05d}": (i * 7919 % 1000) / 1000 for i in range(5000)}
    page = parse(render_evaluation(bar_doc(values)))
    rects = page.inside("topic-bars", "rect")
    assert len(rects) == MAX_BARS
    got = [float(r["data-value"]) for r in rects]
    assert got[0] == max(values.values()) and got[-1] == min(values.values())
    assert "5,000 topics: 2,000 bars drawn" in "".join(page.text)


def comparison_doc(per_topic: bool = True, baseline: str | None = "base") -> dict:
    """Three runs, two measures, five topics; hand-picked p-values so that exactly three
    cells are significant by the randomization test and one more by the t-test."""
    runs = ["base", AMP, HOSTILE]
    topics = ["t1", "t2", "t3", "t4", "t5"]
    scores = {"base": [0.2, 0.4, 0.1, 0.5, 0.3], AMP: [0.3, 0.5, 0.1, 0.4, 0.6],
              HOSTILE: [0.1, 0.4, 0.0, 0.5, 0.2]}

    def test_block(p, adj):
        return {"p_value": p, "p_adjusted": adj, "significant": adj < 0.05}

    def pair(m, a, b, diff, p_rand, p_t):
        return {"measure": m, "a": a, "b": b, "mean_diff": diff, "ci_low": diff - 0.1,
                "ci_high": diff + 0.1,
                "t_test": {"statistic": 1.0, "df": 4, **test_block(p_t / 2, p_t)},
                "randomization": {**test_block(p_rand / 2, p_rand), "n_permutations": 32,
                                  "seed": 0, "exact": True},
                "bootstrap": {**test_block(0.5, 0.9), "ci_low": -0.1, "ci_high": 0.1,
                              "n_samples": 1000, "seed": 0},
                "effect_size": {"cohens_dz": 0.8 if m == "map" else None},
                "wins": 3, "ties": 1, "losses": 1,
                "largest_losses": [{"topic": "t4", "a": 0.5, "b": 0.4, "diff": -0.1}]}

    pairs = [pair("map", "base", AMP, 0.08, 0.01, 0.02),            # ▲
             pair("map", "base", HOSTILE, -0.06, 0.2, 0.3),         # none
             pair("map", AMP, HOSTILE, -0.14, 0.001, 0.001),        # not against the baseline
             pair("P_10", "base", AMP, -0.03, 0.04, 0.5),           # ▼
             pair("P_10", HOSTILE, "base", 0.02, 0.00001, 0.01),    # base better: ▼ for HOSTILE
             pair("P_10", AMP, HOSTILE, 0.0, 0.5, 0.5)]
    summary = {m: {r: {"mean": sum(scores[r]) / 5 + (0.01 if m == "P_10" else 0),
                       "ci_low": 0.2012, "ci_high": 0.2850, "aggregate": 0.2431}
                   for r in runs} for m in ("map", "P_10")}
    summary["map"]["base"]["mean"] = 0.2431
    summary["P_10"][HOSTILE]["mean"] = float("nan")
    doc = {"runs": [{"name": r, "runid": f"id-{r}", "topics_evaluated": 5} for r in runs],
           "baseline": baseline,
           "measures": [{"key": "map", "canonical": "map(rel=1)", "family": "rank"},
                        {"key": "P_10", "canonical": "P(k=10)", "family": "rank"}],
           "topics": topics, "alpha": 0.05,
           "correction": {"method": "holm", "family_size": {"t": 6, "randomization": 6,
                                                           "bootstrap": 6}},
           "summary": summary, "pairs": pairs,
           "curves": {r: {"recall_levels": [i / 10 for i in range(11)],
                          "mean_interpolated_precision": [(1 - i / 10) * (0.5 + 0.1 * k)
                                                          for i in range(11)]}
                      for k, r in enumerate(runs)},
           "gate": {"verdict": "fail", "checks": [
               {"candidate": AMP, "measure": "P_10", "verdict": "fail",
                "reasons": ["P_10 dropped <significantly>"], "offending_topics": [HOSTILE]},
               {"candidate": HOSTILE, "baseline": "base", "measure": "map", "verdict": "pass",
                "reasons": [], "offending_topics": [{"topic": "t1", "baseline": 0.2,
                                                     "candidate": 0.1, "drop": 0.1}]}]},
           "warnings": [{"code": "few-topics", "message": "only 5 topics", "topics": topics}],
           "options": {}}
    if per_topic:
        doc["per_topic"] = {r: {t: {"map": s, "P_10": s} for t, s in zip(topics, scores[r],
                                                                        strict=True)}
                            for r in runs}
    return doc


def marks(page: Page) -> dict:
    rows = page.table("summary")
    assert rows[0] == ["run", "map", "P_10"]
    return {r[0].removesuffix(" (baseline)").removesuffix(" (reference)"):
            [c.rsplit(" ", 1)[-1] if c[-1] in "▲▼" else "" for c in r[1:]] for r in rows[1:]}


def test_comparison_page():
    html = render_comparison(comparison_doc())
    assert HOSTILE not in html and "<script" not in html.lower()
    page = parse(html)
    text = "".join(page.text)
    assert marks(page) == {"base": ["", ""], AMP: ["▲", "▼"], HOSTILE: ["", "▼"]}
    rows = {r[0]: r for r in page.table("summary")[1:]}
    assert rows["base (baseline)"][1] == "0.2431 [0.2012, 0.2850]"
    assert rows[HOSTILE][2] == "– [0.2012, 0.2850] ▼"  # NaN mean
    assert "randomization test, holm correction over 6 comparisons" in text
    assert "α = 0.05;" in text
    (gate,) = [a for t, a, _ in page.elements if t == "div" and "gate" in a.get("class", "")]
    assert "gate-fail" in gate["class"] and "Gate: FAIL" in text
    assert "P_10 dropped <significantly>" in text
    checks = page.table("gate-checks")
    assert checks[1][-1] == HOSTILE and checks[2][1] == "base" and checks[2][-1] == "t1 (0.1000)"
    pairs = page.table("pairs")
    assert pairs[0][:4] == ["measure", "a", "b", "mean diff b − a [CI]"]
    assert "randomization test: p (adjusted)" in pairs[0]
    assert "Wilcoxon signed-rank test: p (adjusted)" not in pairs[0]  # absent from the doc
    first = dict(zip(pairs[0], pairs[1], strict=True))
    assert first["mean diff b − a [CI]"] == "0.0800 [-0.0200, 0.1800]"
    assert first["randomization test: p (adjusted)"] == "0.0050 (0.0100)"
    assert first["d_z"] == "0.8000" and first["W/T/L"] == "3/1/1"
    assert first["largest losses"] == "t4 (-0.1000)"
    assert dict(zip(pairs[0], pairs[4], strict=True))["d_z"] == "–"
    p10 = dict(zip(pairs[0], pairs[5], strict=True))
    assert p10["randomization test: p (adjusted)"] == "<0.0001 (<0.0001)"
    lines = page.inside("pr-curve", "polyline")
    assert [ln["data-run"] for ln in lines] == ["base", AMP, HOSTILE]
    assert [ln["stroke"] for ln in lines] == list(PALETTE[:3])
    # per-topic differences for every measure, one chart per other run
    diffs = page.charts("topic-diff")
    assert [(d["data-measure"], d["data-run"]) for d in diffs] == [
        ("map", AMP), ("map", HOSTILE), ("P_10", AMP), ("P_10", HOSTILE)]
    rects = page.inside("topic-diff", "rect")
    assert len(rects) == 20
    doc = comparison_doc()
    for i, d in enumerate(diffs):
        m, run = d["data-measure"], d["data-run"]
        per = doc["per_topic"]
        want = sorted(((t, per[run][t][m] - per["base"][t][m]) for t in doc["topics"]),
                      key=lambda tv: -tv[1])
        got = [(r["data-topic"], float(r["data-value"])) for r in rects[5 * i:5 * i + 5]]
        assert [v for _, v in got] == pytest.approx([v for _, v in want]), (m, run)
        assert sorted(t for t, _ in got) == doc["topics"]
        assert [t for _, t in page.labels(d)] == [t for t, _ in got]  # 5 bars: all labelled
    assert page.xlabels("topic-diff") == [
        f"topics, sorted by {m} difference {r} − base, largest gain first (5 topics)"
        for m, r in (("map", AMP), ("map", HOSTILE), ("P_10", AMP), ("P_10", HOSTILE))]
    amp = [(r["data-topic"], float(r["data-value"]), r["fill"]) for r in rects[:5]]
    assert amp == [("t5", pytest.approx(0.3), "#009E73"), ("t1", pytest.approx(0.1), "#009E73"),
                   ("t2", pytest.approx(0.1), "#009E73"), ("t3", 0.0, "#999999"),
                   ("t4", pytest.approx(-0.1), "#D55E00")]
    assert any(a.get("class") == "zero" for t, a, c in page.elements
               if t == "line" and c and "topic-diff" in c)


def test_comparison_marks_follow_the_chosen_test():
    page = parse(render_comparison(comparison_doc(), test="t_test"))
    assert marks(page) == {"base": ["", ""], AMP: ["▲", ""], HOSTILE: ["", "▼"]}
    assert "paired t-test" in "".join(page.text)


def test_comparison_without_baseline_marks_against_the_first_run():
    page = parse(render_comparison(comparison_doc(baseline=None)))
    assert page.table("summary")[1][0] == "base (reference)"
    assert marks(page) == {"base": ["", ""], AMP: ["▲", "▼"], HOSTILE: ["", "▼"]}


def test_comparison_without_per_topic_says_so():
    page = parse(render_comparison(comparison_doc(per_topic=False)))
    assert not page.charts("topic-diff")
    assert "No per-topic values" in "".join(page.text)


def test_minimal_comparison_document():
    page = parse(render_comparison({"runs": [{"name": "x"}, {"name": "y"}], "measures": []}))
    assert "Comparison: x vs y" in "".join(page.text)
    assert not page.charts("chart")


def warned_document() -> dict:
    """A real evaluation with both coverage warnings: topic b only in the run, c judged but
    missing from it."""
    run = {"a": {"d1": 2.0, "d2": 1.0}, "b": {"d1": 1.0}}
    qrels = {"a": {"d2": 1}, "c": {"d9": 1}}
    ev = cranfield.evaluate(qrels, run, ["map", "P.5"])
    return evaluation_document(ev, {"per_topic": True, "curves": True}, "s", "t", None)


def order(page: Page, *marks: tuple[str, str | None]) -> list[int]:
    """Where each (tag, class) first is, counted from the page's <h1> (-1: absent)."""
    h1 = page.index("h1")
    return [i - h1 if i >= 0 else -1 for i in (page.index(tag, cls) for tag, cls in marks)]


@pytest.mark.parametrize("warned", [True, False])
def test_evaluation_warnings_come_right_after_the_title(warned):
    doc = warned_document() if warned else real_document()
    page = parse(render_evaluation(doc))
    h1, box, prov, measures, pr = order(page, ("h1", None), ("div", "warn-box"), ("dl", "prov"),
                                        ("table", "measures"), ("svg", "pr-curve"))
    warnings = next(i for i, (t, a, _) in enumerate(page.elements)
                    if t == "h2" and a.get("id") == "warnings") - page.index("h1")
    assert h1 == 0 < warnings == 1 < prov < measures < pr
    text = "".join(page.text)
    if warned:
        assert warnings < box < prov
        assert "warn" in page.elements[page.index("h1") + box][1]["class"].split()
        start = page.index("h1")
        items = [a for t, a, _ in page.elements[start + box:start + prov] if t == "li"]
        assert len(items) == len(doc["warnings"]) == 3
        assert all(a.get("class") == "warn" for a in items)
        assert text.index("topics-run-only") < text.index("topics-qrels-only") \
            < text.index("Provenance")
        assert "(topics: b)" in text and "(topics: c)" in text
    else:
        assert box == -1 and order(page, ("p", "no-warnings")) == [warnings + 1]
        assert text.index("None.") < text.index("Provenance")


def test_comparison_warnings_follow_the_gate_verdict():
    page = parse(render_comparison(comparison_doc(), subtitle="Cranfield job 1234"))
    h1, sub, gate, box, checks, runs, summary, pairs, diff = order(
        page, ("h1", None), ("p", "subtitle"), ("div", "gate"), ("div", "warn-box"),
        ("table", "gate-checks"), ("table", "runs"), ("table", "summary"), ("table", "pairs"),
        ("svg", "topic-diff"))
    assert h1 == 0 and sub == 1 and gate == 2
    assert gate < box < checks < runs < summary < pairs < diff
    assert "few-topics" in "".join(t for t in page.text)
    # no gate: the warnings come straight after the title
    doc = comparison_doc()
    del doc["gate"]
    doc["warnings"] = []
    page = parse(render_comparison(doc))
    assert order(page, ("h2", None), ("p", "no-warnings")) == [1, 2]
    assert page.index("div", "warn-box") == -1 and page.index("table", "gate-checks") == -1


@pytest.mark.parametrize("families, values, charted", [
    # counts and info are left out when something else has per-topic values ...
    ({"num_rel": "count", "map": "rank", "P_5": "rank"}, {}, ["map", "P_5"]),
    # ... and charted when there is nothing else
    ({"num_rel": "count", "num_ret": "count"}, {}, ["num_rel", "num_ret"]),
    # a measure without a finite value anywhere gets no chart
    ({"map": "rank", "P_5": "rank"}, {"map": math.nan}, ["P_5"]),
    # a measure the per-topic rows do not hold gets none either
    ({"map": "rank", "Rprec": "rank", "ndcg": "graded"}, {"Rprec": None}, ["map", "ndcg"]),
])
def test_one_chart_per_measure(families, values, charted):
    topics = ["t1", "t2", "t3", "t4"]
    doc = {"measures": [{"key": k, "family": f} for k, f in families.items()],
           "aggregate": {},
           "per_topic": {t: {k: values.get(k, (i + 1) / (j + 5)) for j, k in enumerate(families)
                             if values.get(k, 0) is not None} for i, t in enumerate(topics)}}
    page = parse(render_evaluation(doc))
    charts = page.charts("topic-bars")
    assert [c["data-measure"] for c in charts] == charted
    rects = page.inside("topic-bars", "rect")
    assert len(rects) == 4 * len(charted)
    for i, key in enumerate(charted):
        got = {r["data-topic"]: float(r["data-value"]) for r in rects[4 * i:4 * i + 4]}
        assert got == pytest.approx({t: doc["per_topic"][t][key] for t in topics}, abs=1e-5)


@pytest.mark.parametrize("n, labelled", [
    (1, 1), (3, 3), (40, 40), (41, 41), (43, 22), (60, 30), (100, 34), (5000, 42)])
def test_topic_labels_never_overlap(n, labelled):
    values = {f"topic-{i:05d}-long-name": (i * 7919 % 1000) / 1000 for i in range(n)}
    page = parse(render_evaluation(bar_doc(values)))
    (chart,) = page.charts("topic-bars")
    rects = page.inside("topic-bars", "rect")
    labels = page.labels(chart)
    assert len(labels) == labelled
    centres = [(float(r["x"]) + float(r["width"]) / 2, r["data-topic"]) for r in rects]
    for x, text in labels:  # under its bar, cut to 14 characters
        (topic,) = [t for cx, t in centres if abs(cx - x) <= 0.06]
        assert text == topic[:13] + "…"
    assert labels[0][1] == rects[0]["data-topic"][:13] + "…"  # first and last always
    assert labels[-1][1] == rects[-1]["data-topic"][:13] + "…"
    gaps = [b - a for (a, _), (b, _) in zip(labels, labels[1:], strict=False)]
    assert all(g >= LABEL_PITCH - 0.15 for g in gaps), min(gaps)
    # every bar keeps its tooltip (besides the chart's own title)
    assert sum(1 for t, _, c in page.elements if t == "title" and c and "topic-bars" in c) \
        == len(rects) + 1
    assert page.xlabels("topic-bars") == [f"topics, sorted by ndcg, highest first ({n:,} "
                                          f"topic{'s' * (n != 1)})"]


@pytest.mark.parametrize("options, shown", [
    ({"relevance_level": 1, "judged_only": False, "depth": None},
     ['"relevance_level": 1', '"judged_only": false', '"depth": null']),
    ({"complete_topics": True, "collection_size": 0, "aggregation": "macro"},
     ['"complete_topics": true', '"collection_size": 0', '"aggregation": "macro"']),
    ({"profile": "trec_eval-9.0.8", "depth": 100},
     ['"profile": "trec_eval-9.0.8"', '"depth": 100']),
])
def test_options_are_spelled_as_in_a_request(options, shown):
    doc = real_document()
    doc["provenance"]["options"] = options
    page = parse(render_evaluation(doc))
    codes = [t for t, a, _ in page.elements if t == "code" and a.get("class") == "option"]
    assert len(codes) == len(options)
    text = "".join(page.text)
    text = text[text.index("options"):text.index("Topics")].strip()
    assert text == "options" + ", ".join(shown)
    assert "=" not in text and "True" not in text and "False" not in text and "None" not in text


def test_real_options_are_the_request_fields():
    """The provenance's option keys are the API's request option names: a request's
    ``options`` object with the values the page shows loads to the same options."""
    from service.schemas import OptionsSchema

    doc = real_document(**{})
    opts = doc["provenance"]["options"]
    page = parse(render_evaluation(doc))
    shown = [t for t in "".join(page.text).split("options", 1)[1].split("Topics")[0]
             .split(", ")]
    request = json.loads("{" + ", ".join(shown) + "}")
    assert OptionsSchema().load(request) == opts


def test_subtitle_and_titles_name_the_runs():
    doc = real_document()
    page = parse(render_evaluation(doc, subtitle="Cranfield job abc"))
    assert page.title == "Evaluation of STANDARD"
    assert order(page, ("p", "subtitle")) == [1]
    assert "Cranfield job abc" in "".join(page.text)
    page = parse(render_comparison(comparison_doc(), subtitle="Cranfield job abc"))
    assert page.title == f"Comparison: base vs {AMP} vs {HOSTILE}"
    assert parse(render_comparison(comparison_doc(), title="T")).title == "T"
    assert parse(render_comparison(comparison_doc())).index("p", "subtitle") == -1


# -- the trend page (issue #18) -----------------------------------------------------------------

def _point(i, mean, verdict=None, *, day=None, low=None, high=None, topics=(), label=None):
    gate = None if verdict is None else {
        "verdict": verdict, "checked_at": "2026-11-24T07:00:00.000000Z", "baseline": "b" * 32,
        "checks": [{"measure": "map", "verdict": verdict,
                    "offending_topics": [{"topic": t, "drop": 0.5} for t in topics]}]}
    return {"id": f"{i:032x}", "label": label or f"night-{i}", "commit": None,
            "created_at": f"2026-11-{day or 10 + i:02d}T06:00:00.000000Z", "mean": mean,
            "n_topics": 30, "ci_low": low, "ci_high": high, "gate": gate}


def _link(point, previous):
    return f"/r/{point['id']}" + ("" if previous is None else f"?with={previous['id']}")


def _trend(points, baseline_point=None, total=None):
    return {"system": "bm25", "measure": "map", "baseline": None if baseline_point is None
            else baseline_point["id"], "baseline_point": baseline_point, "points": points,
            "total": len(points) if total is None else total, "limit": 1000}


def _circles(page: Page) -> list[dict]:
    return [a for t, a, c in page.elements if t == "circle" and c and "trend" in c.split()]


@pytest.mark.parametrize("verdicts", [
    [None, "pass", "fail"], ["fail", "undecided", None, "pass"], [None], ["pass"] * 5])
def test_trend_points_are_drawn_coloured_by_verdict_and_linked_to_the_previous(verdicts):
    points = [_point(i, 0.5 + 0.05 * i, v, low=0.4 + 0.05 * i, high=0.6 + 0.05 * i)
              for i, v in enumerate(verdicts)]
    page = Page(render_trend(_trend(points), _link))
    assert len(page.charts("trend")) == 1
    circles = _circles(page)
    assert [c["data-id"] for c in circles] == [p["id"] for p in points]
    assert [c["data-verdict"] for c in circles] == [v or "none" for v in verdicts]
    assert [c["fill"] for c in circles] == [VERDICT_STYLE[v][0] for v in verdicts]
    assert [float(c["data-mean"]) for c in circles] == [p["mean"] for p in points]
    # each point leads to its comparison with the one before it; the first to itself
    anchors = [a["href"] for t, a, c in page.elements if t == "a" and a.get("class") == "point"]
    assert anchors == [_link(p, points[i - 1] if i else None) for i, p in enumerate(points)]
    # a higher mean is drawn higher (smaller y), left to right in recorded order
    ys = [float(c["cy"]) for c in circles]
    xs = [float(c["cx"]) for c in circles]
    assert ys == sorted(ys, reverse=True) and xs == sorted(xs)
    assert len(page.inside("trend", "line")) >= len(points)  # CIs (and the axes)
    # the table: newest first, one row per point
    rows = [cells for cls, cells in page.rows if cls == "trend"][1:]
    assert [r[0] for r in rows] == [p["label"] for p in reversed(points)]


def test_trend_baseline_line_at_the_baseline_mean_and_the_drop_below_it():
    points = [_point(0, 0.8), _point(1, 0.78, "pass"), _point(2, 0.6, "fail",
                                                              topics=["t3", "t7"])]
    page = Page(render_trend(_trend(points, baseline_point=points[0]), _link))
    (line,) = [a for t, a, c in page.elements if t == "line" and a.get("class") == "baseline"]
    # the baseline's own point is drawn as the baseline: a diamond on its line (issue #25)
    (mark,) = [a for t, a, c in page.elements if t == "path" and a.get("class") == "baseline-mark"]
    assert mark["data-id"] == points[0]["id"] and mark["data-baseline"] == "true"
    centre = float(re.search(r"L[\d.]+ ([\d.]+)L", mark["d"]).group(1))
    circles = _circles(page)
    assert [c["data-id"] for c in circles] == [points[1]["id"], points[2]["id"]]
    assert float(line["y1"]) == float(line["y2"]) == pytest.approx(centre, abs=0.06)
    assert float(circles[1]["cy"]) > float(line["y1"])  # the failing night is under it
    # the latest verdict with its topics is the first thing under the title
    text = "".join(page.text)
    assert "Latest gate (night-2): FAIL" in text
    assert "offending topics: t3 (−0.5000), t7 (−0.5000)" in text
    assert page.index("div", "latest") < page.index("svg")
    # a pass names no offending topics; a fail does
    rows = {r[0]: r for cls, r in page.rows if cls == "trend"}
    assert rows["night-1"][5] == "pass" and rows["night-2"][5] == "fail (t3, t7)"
    # a baseline outside the window still draws its line
    page = Page(render_trend(_trend(points[1:], baseline_point=points[0], total=3), _link))
    assert [a for t, a, c in page.elements if t == "line" and a.get("class") == "baseline"]
    assert "the newest 2 of 3 recorded result(s)" in "".join(page.text)


def test_trend_without_points_or_means_and_hostile_labels():
    page = Page(render_trend(_trend([]), _link))
    assert page.charts("trend") == [] and "No recorded result" in "".join(page.text)
    points = [_point(0, None, label=HOSTILE), _point(1, 0.5, "fail", label=AMP)]
    out = render_trend(_trend(points), _link)
    assert "<script" not in out and HOSTILE in "".join(Page(out).text)
    page = Page(out)
    assert [c["data-id"] for c in _circles(page)] == [points[1]["id"]]  # no mean: no mark
    rows = {r[0]: r for cls, r in page.rows if cls == "trend"}
    assert rows[HOSTILE][3].startswith("–")


@pytest.mark.parametrize("labels, times, ticks", [
    # distinct labels name the points (issue #25: not one clock time four times)
    (["night-1", "night-2", "night-3"], ["2026-11-10T06:00:00"] * 3,
     ["night-1", "night-2", "night-3"]),
    # one label for all: the day, else the time of day (to the second if need be)
    (["nightly"] * 3, ["2026-11-10T06:00:00", "2026-11-11T06:00:00", "2026-11-12T06:00:00"],
     ["2026-11-10", "2026-11-11", "2026-11-12"]),
    (["nightly"] * 3, ["2026-11-10T06:00:00", "2026-11-10T07:00:00", "2026-11-10T08:30:00"],
     ["11-10 06:00", "11-10 07:00", "11-10 08:30"]),
    (["nightly"] * 4, [f"2026-11-10T06:00:0{i}" for i in range(4)],
     [f"11-10 06:00:0{i}" for i in range(4)]),
    # long labels cut in the middle, still distinct
    ([f"nightly-build-2026-11-2{i}-commit-{c}9f3e" for i, c in enumerate("abc")],
     ["2026-11-10T06:00:00"] * 3,
     ["nightly-b…it-a9f3e", "nightly-b…it-b9f3e", "nightly-b…it-c9f3e"])])
def test_trend_x_labels_are_distinct_labels_days_or_times(labels, times, ticks):
    points = [dict(_point(i, 0.5), label=label, created_at=f"{t}.000000Z")
              for i, (label, t) in enumerate(zip(labels, times, strict=True))]
    page = Page(render_trend(_trend(points), _link))
    found = [t for c, a, t in page.chart_texts if "trend" in c["class"].split()
             and a.get("class") == "x-label"]
    assert found == ticks
