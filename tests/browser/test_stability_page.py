"""The stability page (issue #31) in headless Chromium: four systems recorded under two qrels
versions, the worst under v1 the best under v2. The page the service answers (``GET
/v1/stability`` with ``Accept: text/html``) is opened in Chromium:

- the DOM after load: each statistic's row holds the JSON document's value, the slope chart
  draws one line per system from its rank under v1 to its rank under v2, the changed pairs'
  table names the flipped pairs the JSON names;
- the screenshot (kept as ``stability.png`` in the test's folder): the system that moved up
  is drawn in the "up" colour, those that moved down in the "down" colour, and the verdict
  sentence is there above the chart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import numpy as np
import pytest

from cranfield.reports.html_page import DOWN, UP

V1, V2 = "nightly@" + "a" * 16, "nightly@" + "b" * 16


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def _document(values: dict, version: str) -> dict:
    return {"measures": [{"key": "map"}],
            "aggregate": {"map": float(np.mean(list(values.values())))},
            "per_topic": {t: {"map": v} for t, v in values.items()},
            "provenance": {"qrels_version": version, "qrels_sha256": version[-1] * 64}}


@pytest.fixture
def stability(tmp_path, monkeypatch):
    """Four systems, s0 the worst under v1 and the best under v2; the JSON document and the
    page saved to a file."""
    from backend.results import migrate
    from service.app import create_app

    url = f"sqlite:///{tmp_path / 'results.db'}"
    migrate(url)
    monkeypatch.setenv("CRANFIELD_DATABASE_URL", url)
    app = create_app({"TESTING": True})
    store = app.extensions["results"]
    times = iter(datetime(2026, 11, 1, 6, tzinfo=UTC) + timedelta(hours=i) for i in range(99))
    store.clock = lambda: next(times)
    rng = np.random.default_rng(2)
    for i in range(4):
        base = {f"t{k:02d}": float(x) for k, x in enumerate(rng.random(30) * 0.2 + i * 0.1)}
        store.record(None, {"system": f"s{i}", "label": "v1"}, _document(base, V1))
        moved = {t: v + (0.5 if i == 0 else 0.0) for t, v in base.items()}
        store.record(None, {"system": f"s{i}", "label": "v2"}, _document(moved, V2))
    client = app.test_client()
    query = f"/v1/stability?measure=map&from={V1}&to={V2}&resamples=200"
    doc = client.get(query).get_json()
    resp = client.get(query, headers={"Accept": "text/html"})
    assert resp.status_code == 200 and resp.mimetype == "text/html"
    page = tmp_path / "stability.html"
    page.write_bytes(resp.get_data())
    return doc, page


class Dom(HTMLParser):
    """The statistics' rows, the slope chart's lines and the changed pairs' rows."""

    def __init__(self, dom: str):
        super().__init__(convert_charrefs=True)
        self.statistics: dict[str, dict] = {}
        self.lines: list[dict] = []
        self.changed: list[dict] = []
        self.verdict = ""
        self._in_verdict = False
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-statistic" in a:
            self.statistics[a["data-statistic"]] = a
        elif tag == "line" and "rank-line" in (a.get("class") or "").split():
            self.lines.append(a)
        elif tag == "tr" and "data-status" in a:
            self.changed.append(a)
        elif tag == "p" and a.get("class") == "verdict":
            self._in_verdict = True

    def handle_endtag(self, tag):
        if tag == "p":
            self._in_verdict = False

    def handle_data(self, data):
        if self._in_verdict:
            self.verdict += data


def test_the_dom_holds_the_documents_numbers(chromium, stability):
    doc, page = stability
    dom = Dom(chromium.dump_dom(page))
    for key, s in doc["statistics"].items():
        assert float(dom.statistics[key]["data-value"]) == pytest.approx(s["value"], abs=1e-12)
    assert {(line["data-system"], int(line["data-from"]), int(line["data-to"]))
            for line in dom.lines} == {(s["name"], s["from"]["rank"], s["to"]["rank"])
                                       for s in doc["systems"]}
    assert [(r["data-a"], r["data-b"], r["data-status"]) for r in dom.changed] == [
        (p["a"], p["b"], p["status"]) for p in doc["changed_pairs"]]
    assert ("s0", "s3", "flipped") in {(r["data-a"], r["data-b"], r["data-status"])
                                       for r in dom.changed}
    flipped = doc["pair_counts"]["flipped"]
    assert f"{flipped} flipped" in " ".join(dom.verdict.split())


def test_the_screenshot_draws_who_moved_in_colour(chromium, stability, tmp_path):
    doc, page = stability
    png = tmp_path / "stability.png"
    shot = chromium.screenshot(page, (1280, 1600), png=png)
    assert png.stat().st_size > 10_000
    px = shot.pixels.astype(int)

    def near(colour, tol=12) -> np.ndarray:
        return (np.abs(px - np.array(colour)).max(axis=-1) <= tol)

    up, down = near(rgb(UP)), near(rgb(DOWN))
    moved_up = [s for s in doc["systems"] if s["to"]["rank"] < s["from"]["rank"]]
    moved_down = [s for s in doc["systems"] if s["to"]["rank"] > s["from"]["rank"]]
    assert len(moved_up) == 1 and len(moved_down) == 3
    # one line up, three down: the down colour covers more of the chart than the up colour
    assert up.sum() > 100 and down.sum() > 2 * up.sum()
    # the up line climbs: its pixels on the left lie lower on the page than on the right
    rows, cols = np.nonzero(up)
    left, right = rows[cols < np.median(cols)], rows[cols >= np.median(cols)]
    assert left.mean() > right.mean() + 20
