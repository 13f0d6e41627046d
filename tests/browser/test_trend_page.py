"""The trend page reads at a glance (issue #25), in headless Chromium: a system's four nights
recorded through the API within the same minute, the first pinned, each later one gated
against it, the last failing on six topics. The page the service answers
(``GET /v1/systems/{name}/trend`` with ``Accept: text/html``, the measure asked as ``AP``)
is opened in Chromium:

- the DOM after load: the x axis names each night by its label (four distinct labels, not
  one clock time four times), the FAIL box names the measure, the drop with its CI (the
  gate's own numbers) and the offending topics, the baseline's own point is a diamond and
  is in the legend;
- the screenshot (kept as ``trend.png`` in the test's folder): under the x axis four
  separate label regions, one under each point, no two alike; the baseline's diamond on the
  baseline's dashes, left of the passing marks, the failing mark below and right of them; the
  FAIL box above the chart.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest
from scipy import ndimage

from cranfield.reports.html_page import DOWN, UP
from cranfield.reports.html_trend import BASELINE_COLOUR

TOPICS = [f"t{i:02d}" for i in range(1, 31)]
QRELS = {t: {"rel": 1} for t in TOPICS}
WORSE = {1: set(), 2: {"t05"}, 3: {"t14"}, 4: {"t03", "t08", "t11", "t17", "t23", "t29"}}
FAIL_BOX = (0xFB, 0xE7, 0xDC)  # .latest-fail's background


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


def _run(worse_on: set[str]) -> dict:
    return {t: ({"rel": 1.0, "other": 2.0} if t in worse_on else {"rel": 2.0, "other": 1.0})
            for t in TOPICS}


@pytest.fixture
def trend(tmp_path, monkeypatch):
    """Four nights recorded, the first pinned, nights 2-4 gated against it; the trend
    document (JSON), the page (saved to a file) and the failing gate's check."""
    from backend.results import migrate
    from service.app import create_app

    url = f"sqlite:///{tmp_path / 'results.db'}"
    migrate(url)
    monkeypatch.setenv("CRANFIELD_DATABASE_URL", url)
    client = create_app({"TESTING": True}).test_client()
    ids = []
    for night, worse in WORSE.items():
        resp = client.post("/v1/evaluations", json={
            "run": _run(worse), "qrels": QRELS, "measures": ["map", "P.1"],
            "record": {"system": "search", "label": f"night-{night}", "commit": f"c{night}"}})
        assert resp.status_code == 200, resp.get_json()
        ids.append(resp.get_json()["recorded"]["id"])
    assert client.put("/v1/systems/search/baseline",
                      json={"result_id": ids[0]}).status_code == 200
    for rid in ids[1:]:
        gated = client.post("/v1/comparisons", json={
            "runs": [{"result_id": rid}], "measures": ["map"], "baseline": {"system": "search"},
            "gate": "map:0.05"}).get_json()
    (check,) = gated["gate"]["checks"]
    assert gated["gate"]["verdict"] == "fail" and {t["topic"] for t in check[
        "offending_topics"]} == WORSE[4]
    doc = client.get("/v1/systems/search/trend?measure=AP").get_json()
    assert [(p["gate"] or {}).get("verdict") for p in doc["points"]] == [
        None, "pass", "pass", "fail"]
    # recorded within moments: one clock time for all four (what the axis used to show)
    assert len({p["created_at"][11:16] for p in doc["points"]}) <= 2
    resp = client.get("/v1/systems/search/trend?measure=AP", headers={"Accept": "text/html"})
    assert resp.status_code == 200 and resp.mimetype == "text/html"
    page = tmp_path / "trend.html"
    page.write_bytes(resp.get_data())
    return doc, page, check, ids


class Dom(HTMLParser):
    """The trend chart's x labels, the FAIL box's text and list items, the baseline marks."""

    def __init__(self, dom: str):
        super().__init__(convert_charrefs=True)
        self.x_labels: list[str] = []
        self.box = ""
        self.box_items: list[tuple[dict, str]] = []
        self.marks: list[dict] = []
        self.legend_baseline = ""
        self._in: list[str] = []
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class") or ""
        if tag == "text" and cls == "x-label":
            self.x_labels.append("")
            self._in.append("x-label")
        elif tag == "title" and self._in and self._in[-1] == "x-label":
            self._in.append("tip")
        elif tag == "div" and "latest" in cls.split():
            self._in.append("box")
        elif tag == "li" and "box" in self._in:
            self.box_items.append((a, ""))
        elif tag == "path" and cls == "baseline-mark":
            self.marks.append(a)
        elif tag == "li" and cls == "baseline-point":
            self._in.append("legend")

    def handle_endtag(self, tag):
        if self._in and ((tag == "text" and self._in[-1] == "x-label")
                         or (tag == "title" and self._in[-1] == "tip")
                         or (tag == "div" and self._in[-1] == "box")
                         or (tag == "li" and self._in[-1] == "legend")):
            self._in.pop()

    def handle_data(self, data):
        where = self._in[-1] if self._in else None
        if where == "x-label":
            self.x_labels[-1] += data
        if "box" in self._in:
            self.box += data
            if self.box_items and where == "box":
                a, text = self.box_items[-1]
                self.box_items[-1] = (a, text + data)
        if where == "legend":
            self.legend_baseline += data


def test_the_dom_names_the_nights_the_failure_and_the_baseline(chromium, trend):
    doc, page, check, ids = trend
    dom = Dom(chromium.dump_dom(page))
    # the x axis: each night's label, four distinct ones
    assert dom.x_labels == ["night-1", "night-2", "night-3", "night-4"]
    # the FAIL box: measure, drop with its CI, what was allowed, the offending topics
    assert dom.box.startswith("Latest gate (night-4): FAIL")
    ((item, text),) = [(a, t) for a, t in dom.box_items if a.get("data-measure") == "map"]
    text = " ".join(text.split())
    low, high = check["drop_ci"]
    assert check["drop"] == pytest.approx(0.5 * 6 / 30) and low < check["drop"] < high
    assert (f"map fail: drop {check['drop']:.4f} [95% CI {low:.4f}, {high:.4f}] against "
            "search@night-1; allowed 0.05; randomization p_adj") in text
    topics = re.findall(r"(t\d\d) \(−0\.5000\)", text.split("offending topics:")[1])
    assert set(topics) == WORSE[4]
    # the baseline's own point: a diamond, named in the legend
    (mark,) = dom.marks
    assert mark["data-id"] == ids[0] and mark["data-baseline"] == "true"
    assert float(mark["data-mean"]) == doc["baseline_point"]["mean"] == 1.0
    assert dom.legend_baseline.strip() == "pinned baseline: night-1"
    # and the page no longer says no baseline is pinned
    assert "Baseline: night-1 (1.0000)" in page.read_text()


def _blobs(mask: np.ndarray) -> list[tuple[slice, slice, float]]:
    """(rows, columns, share of the box filled) of each connected blob of ``mask``."""
    labels, _ = ndimage.label(mask)
    return [(box[0], box[1], float((labels[box] == i).mean()))
            for i, box in enumerate(ndimage.find_objects(labels), start=1)]


def _centre(box) -> tuple[float, float]:
    return (box[0].start + box[0].stop - 1) / 2, (box[1].start + box[1].stop - 1) / 2


def test_the_screenshot_shows_distinct_labels_under_the_points(chromium, trend, tmp_path):
    _, page, _, _ = trend
    png = tmp_path / "trend.png"
    shot = chromium.screenshot(page, (1280, 1400), png=png)
    assert png.stat().st_size > 10_000
    px = shot.pixels

    def exactly(colour) -> np.ndarray:
        return np.all(px == np.array(colour, np.uint8), axis=-1)

    # the points: round marks (8-20 px, as high as wide, not filling their box), the baseline
    # a diamond (about half its box filled), the legend's squares left out
    def round_marks(colour):
        return [_centre((r, c)) for r, c, fill in _blobs(exactly(colour))
                if 8 <= r.stop - r.start <= 22 and abs((r.stop - r.start) - (c.stop - c.start))
                <= 2 and 0.6 < fill < 0.9]

    passed = round_marks(rgb(UP))
    (failed,) = round_marks(rgb(DOWN))
    assert len(passed) == 2
    pink = exactly(rgb(BASELINE_COLOUR))
    diamonds = [_centre((r, c)) for r, c, fill in _blobs(pink)
                if 14 <= r.stop - r.start <= 30 and 0.35 < fill < 0.65]
    dashes = [_centre((r, c)) for r, c, _ in _blobs(pink)
              if r.stop - r.start <= 4 and 4 <= c.stop - c.start <= 20]
    line_row = float(np.median([row for row, _ in dashes]))
    assert sum(abs(row - line_row) <= 2 for row, _ in dashes) >= 10
    # the chart's diamond (the legend's is small, on the legend's row) on the baseline's line
    (diamond,) = [d for d in diamonds if abs(d[0] - line_row) <= 3]
    columns = [diamond[1], *sorted(c for _, c in passed), failed[1]]
    assert columns == sorted(columns) and min(np.diff(columns)) > 100  # evenly, in order
    assert all(abs(row - line_row) < 25 for row, _ in passed)
    assert failed[0] - line_row > 60  # the drop: well below the baseline

    # the x axis: the long grey line under the marks (#333, smoothed over two rows)
    dark = np.all(px < 200, axis=-1)
    rows = np.flatnonzero(dark.sum(axis=1) > 500)
    axis = int(rows[rows > failed[0]].min()) + 1  # (its lower row)
    # under it, the labels' band: ink joined into words, one region per label
    band = dark[axis + 6:axis + 26]
    words = ndimage.binary_dilation(band, structure=np.ones((1, 7), bool))
    regions = [(r, c) for r, c, _ in _blobs(words) if c.stop - c.start > 20]
    regions.sort(key=lambda box: box[1].start)
    assert len(regions) == 4, [(c.start, c.stop) for _, c in regions]
    # each under its point, the four apart (no overlap), none wrapped onto a second line
    for (r, c), column in zip(regions, columns, strict=True):
        assert abs((c.start + c.stop - 1) / 2 - column) < 12
        assert r.stop - r.start <= 16
    assert all(a[1].stop + 20 < b[1].start for a, b in zip(regions, regions[1:], strict=False))
    # no two labels alike: their ink differs pixel for pixel (night-1 … night-4)
    crops = [band[:, c].astype(np.uint8) for _, c in regions]
    width = min(crop.shape[1] for crop in crops)
    trimmed = [crop[:, :width] for crop in crops]
    for i in range(4):
        for j in range(i + 1, 4):
            assert (trimmed[i] != trimmed[j]).sum() > 10, (i, j)

    # the FAIL box, above the chart
    box_rows = np.flatnonzero(exactly(FAIL_BOX).any(axis=1))
    assert box_rows.size and box_rows.max() < min(row for row, _ in dashes)
