"""The HTML reports in a real browser: headless chromium loads each page, its DOM after load
holds the charts with their data elements, and its screenshot is not blank — many colours,
ink on the page, the palette's colours, and the page's own CSS applied (the page's
Content-Security-Policy must not block its inline styles); the input warnings' box in the
top part of the page, and one per-topic chart per measure."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from browser_tools import Image, decode_png

import cranfield
from cranfield.reports.html_page import DOWN, PALETTE, UP
from cranfield.reports.html_report import render_comparison, render_evaluation
from cranfield.reports.result_document import evaluation_document

DATA = Path(__file__).resolve().parents[1] / "data" / "trec_eval"
RUNS = ["bm25", "bm25+rm3", "dense <v2> & co"]
MEASURES = ["ndcg_cut_10", "map"]
N_TOPICS = 60
WARN_BOX = (0xFF, 0xF4, 0xDB)  # .warn-box's background
TOP = 500  # pixels: the title, the gate's verdict and the warnings fit above


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))


class ChartCounter(HTMLParser):
    """Counts elements inside each chart: ``counts[svg class][tag]``; ``runs`` and ``topics``
    collect the data-run / data-topic attributes."""

    def __init__(self, dom: str):
        super().__init__()
        self.counts: dict[str, Counter] = {}
        self.runs: list[str] = []
        self.topics: list[str] = []
        self.measures: list[str] = []  # data-measure of each chart
        self.svg: list[str] = []
        self.feed(dom)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svg.append(a.get("class", ""))
            if "data-measure" in a:
                self.measures.append(a["data-measure"])
            self.counts.setdefault(a.get("class", ""), Counter())["svg"] += 1
        elif self.svg:
            self.counts[self.svg[-1]][tag] += 1
        if "data-run" in a and tag != "svg":
            self.runs.append(a["data-run"])
        if "data-topic" in a:
            self.topics.append(a["data-topic"])

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg.pop()


def evaluation_doc(warned: bool = False) -> dict:
    """The trec_eval test data; ``warned``: topic 303 left out of the qrels, so the run has a
    topic without judgments (a coverage warning)."""
    qrels = str(DATA / "qrels.test")
    if warned:
        qrels = "".join(line for line in (DATA / "qrels.test").read_text().splitlines(True)
                        if not line.startswith("303 "))
    ev = cranfield.evaluate(qrels, str(DATA / "results.test"))
    return evaluation_document(ev, {"per_topic": True, "curves": True}, "0" * 64, "f" * 64, None)


def charted(doc: dict) -> list[str]:
    """The measures an evaluation page charts per topic: all with a per-topic value but the
    counts and the runid."""
    return [m["key"] for m in doc["measures"] if m["family"] not in ("count", "info")
            and any(isinstance(row.get(m["key"]), float) and np.isfinite(row[m["key"]])
                    for row in doc["per_topic"].values())]


def evaluation_page(tmp_path: Path, warned: bool = False) -> Path:
    path = tmp_path / "evaluation.html"
    path.write_text(render_evaluation(evaluation_doc(warned)), encoding="utf-8")
    return path


def rows(image: Image, start: int, stop: int | None = None) -> Image:
    part = image.pixels[start:stop]
    return Image(image.width, part.shape[0], part)


def bands(image: Image, colours, min_px: int, merge: int = 6) -> list[tuple[int, int]]:
    """Runs of rows with at least ``min_px`` pixels of these colours (runs at most ``merge``
    rows apart joined: a zero line drawn over the bars splits them), as (first, last) row."""
    mask = np.zeros(image.pixels.shape[:2], bool)
    for colour in colours:
        mask |= np.all(image.pixels == np.array(colour, np.uint8), axis=-1)
    hit = np.flatnonzero(mask.sum(axis=1) >= min_px)
    out: list[tuple[int, int]] = []
    for y in hit:
        if out and y - out[-1][1] <= merge:
            out[-1] = (out[-1][0], int(y))
        else:
            out.append((int(y), int(y)))
    return out


def comparison_doc() -> dict:
    rng = np.random.default_rng(7)
    topics = [f"q{i:03d}" for i in range(N_TOPICS)]
    base = rng.uniform(0, 0.8, N_TOPICS)
    scores = {r: np.clip(base + rng.normal(0.05 * k, 0.1, N_TOPICS), 0, 1)
              for k, r in enumerate(RUNS)}
    pairs = []
    for m, b in ((m, b) for m in MEASURES for b in RUNS[1:]):
        d = scores[b] - scores[RUNS[0]]
        block = {"p_value": 0.001, "p_adjusted": 0.002, "significant": True}
        pairs.append({"measure": m, "a": RUNS[0], "b": b, "mean_diff": d.mean(),
                      "ci_low": d.mean() - 0.02, "ci_high": d.mean() + 0.02,
                      "t_test": {"statistic": 3.0, "df": N_TOPICS - 1, **block},
                      "randomization": {**block, "n_permutations": 10000, "seed": 0,
                                        "exact": False},
                      "effect_size": {"cohens_dz": d.mean() / d.std(ddof=1)},
                      "wins": int((d > 0).sum()), "ties": int((d == 0).sum()),
                      "losses": int((d < 0).sum()), "largest_losses": []})
    return {
        "runs": [{"name": r, "runid": r, "topics_evaluated": N_TOPICS} for r in RUNS],
        "baseline": RUNS[0], "measures": [{"key": "ndcg_cut_10", "canonical": "nDCG@10"},
                                          {"key": "map", "canonical": "map"}],
        "topics": topics, "alpha": 0.05,
        "correction": {"method": "holm", "family_size": {"randomization": 2, "t": 2}},
        "summary": {m: {r: {"mean": float(s.mean()), "ci_low": float(s.mean()) - .03,
                            "ci_high": float(s.mean()) + .03} for r, s in scores.items()}
                    for m in MEASURES},
        "pairs": pairs,
        "per_topic": {r: {t: {m: float(v) for m in MEASURES}
                          for t, v in zip(topics, s, strict=True)} for r, s in scores.items()},
        "curves": {r: {"recall_levels": [i / 10 for i in range(11)],
                       "mean_interpolated_precision": [0.8 * (1 - i / 10) ** (1 + k / 2)
                                                       for i in range(11)]}
                   for k, r in enumerate(RUNS)},
        "gate": {"verdict": "fail", "checks": [{"candidate": RUNS[2], "measure": "ndcg_cut_10",
                                                "verdict": "fail", "reasons": ["too many losses"],
                                                "offending_topics": topics[:3]}]},
        "warnings": [{"code": "topics-qrels-only", "message": "2 judged topic(s) are missing "
                      "from the run", "topics": ["q998", "q999"]}], "options": {}}


def comparison_page(tmp_path: Path) -> Path:
    path = tmp_path / "comparison.html"
    path.write_text(render_comparison(comparison_doc()), encoding="utf-8")
    return path


def test_evaluation_page_dom(chromium, tmp_path):
    dom = chromium.dump_dom(evaluation_page(tmp_path))
    charts = ChartCounter(dom)
    assert charts.counts["chart pr-curve"]["polyline"] == 1
    measures = charted(evaluation_doc())
    assert len(measures) >= 20 and charts.measures == measures  # one chart per measure
    assert charts.counts["chart topic-bars"]["svg"] == len(measures)
    assert charts.counts["chart topic-bars"]["rect"] == 3 * len(measures)
    assert charts.counts["chart topic-bars"]["text"] >= 3 * len(measures)  # topic labels
    assert charts.runs == ["STANDARD"]
    assert Counter(charts.topics) == {t: len(measures) for t in ("301", "302", "303")}


def test_comparison_page_dom(chromium, tmp_path):
    dom = chromium.dump_dom(comparison_page(tmp_path))
    charts = ChartCounter(dom)
    assert charts.counts["chart pr-curve"]["polyline"] == 3
    assert charts.runs == RUNS
    n = len(MEASURES) * (len(RUNS) - 1)  # a chart per measure and run against the baseline
    assert charts.counts["chart topic-diff"]["svg"] == n
    assert charts.measures == [m for m in MEASURES for _ in RUNS[1:]]
    assert charts.counts["chart topic-diff"]["rect"] == n * N_TOPICS
    assert Counter(charts.topics) == {f"q{i:03d}": n for i in range(N_TOPICS)}
    assert "<script" not in dom and "dense &lt;v2&gt; &amp; co" in dom


def test_evaluation_page_screenshot(chromium, tmp_path):
    image = chromium.screenshot(evaluation_page(tmp_path), size=(1280, 2000))
    assert (image.width, image.height) == (1280, 2000)
    assert len(image.colours()) >= 20
    assert image.non_white() > 0.02
    assert image.share(rgb(PALETTE[0])) * image.width * image.height >= 200
    assert image.share(WARN_BOX) == 0  # no warnings: no box


def test_evaluation_warnings_box_is_at_the_top(chromium, tmp_path):
    image = chromium.screenshot(evaluation_page(tmp_path, warned=True), size=(1280, 2000))
    top, rest = rows(image, 0, TOP), rows(image, TOP)
    assert top.share(WARN_BOX) * top.width * top.height >= 5000
    assert rest.share(WARN_BOX) == 0


def test_comparison_page_screenshot(chromium, tmp_path):
    image = chromium.screenshot(comparison_page(tmp_path), size=(1280, 2000))
    assert len(image.colours()) >= 20
    assert image.non_white() > 0.02
    pixels = image.width * image.height
    for colour in (*PALETTE[:3], UP, DOWN):  # run lines and legend; bars above and below 0
        assert image.share(rgb(colour)) * pixels >= 100, colour
    assert image.share((0xFB, 0xE7, 0xDC)) * pixels >= 5000  # the FAIL banner's background
    # the warnings right under the verdict, at the top
    top, rest = rows(image, 0, TOP), rows(image, TOP)
    assert top.share(WARN_BOX) * top.width * top.height >= 5000
    assert rest.share(WARN_BOX) == 0


def test_comparison_page_has_a_chart_per_measure_and_run(chromium, tmp_path):
    """Seen on the page: tall bands of rows full of the bars' colours, one per chart."""
    image = chromium.screenshot(comparison_page(tmp_path), size=(1280, 5000))
    charts = [b for b in bands(image, (rgb(UP), rgb(DOWN)), min_px=100) if b[1] - b[0] >= 40]
    assert len(charts) == len(MEASURES) * (len(RUNS) - 1), charts


def _png(pixels: np.ndarray, filters: list[int]) -> bytes:
    """An RGB PNG with the given filter type on each row (the encoder side of PNG §9)."""
    h, w, _ = pixels.shape
    rows = pixels.reshape(h, w * 3).astype(np.int64)
    raw = bytearray()
    for y in range(h):
        cur, prev = rows[y], rows[y - 1] if y else np.zeros(w * 3, np.int64)
        left = np.concatenate([np.zeros(3, np.int64), cur[:-3]])
        up_left = np.concatenate([np.zeros(3, np.int64), prev[:-3]])
        p = left + prev - up_left
        pa, pb, pc = abs(p - left), abs(p - prev), abs(p - up_left)
        paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, up_left))
        pred = [0, left, prev, (left + prev) // 2, paeth][filters[y]]
        raw += bytes([filters[y]]) + ((cur - pred) % 256).astype(np.uint8).tobytes()

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body)))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b""))


@pytest.mark.parametrize("seed", [0, 1])
def test_png_decoder_undoes_every_filter_type(seed):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (25, 17, 3), dtype=np.uint8)
    pixels[5:9] = 255  # flat stretches too
    image = decode_png(_png(pixels, [y % 5 for y in range(25)]))
    assert (image.width, image.height) == (17, 25)
    assert np.array_equal(image.pixels, pixels)
