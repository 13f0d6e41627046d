"""Inline SVG charts of the HTML pages: tick values and scales, axes, the precision–recall
chart and the per-topic bar chart, and which bars get a topic label.

Room: cranfield/reports/ (the HTML pages).

Charts are ``<svg class="chart …">`` elements with a ``<title>`` and a viewBox; their data
elements carry ``data-run`` (lines) or ``data-topic`` (bars) attributes; per-topic charts
(``data-measure``: one per measure) label every k-th bar with its topic, so that labels never
overlap, the first and last bar always.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .html_page import DOWN, FLAT, PALETTE, UP, esc, finite, num

MAX_BARS = 2000
LABEL_BAND = 56  # extra room under a bar chart for its rotated topic labels
LABEL_PITCH = 16.0  # least horizontal distance between two labelled bars (11px text at 45°)
LABEL_CHARS = 14  # longer topic ids are cut, with "…" (the bar's tooltip has the whole id)
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 380, 64, 16, 16, 64  # chart viewBox and margins


def nice_ticks(lo: float, hi: float, n: int = 5) -> tuple[list[float], float, float]:
    """Round tick values spanning [lo, hi] (widened to whole steps), and the widened range."""
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    lo, hi = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    ticks = [round(lo + i * step, 10) for i in range(round((hi - lo) / step) + 1)]
    return ticks, lo, hi


def y_scale(lo: float, hi: float, *, height: int = H, bottom: int = BOTTOM
            ) -> Callable[[float], float]:
    """y of a value: ``lo`` at the x axis (``height - bottom``), ``hi`` at TOP."""
    def sy(v: float) -> float:
        return height - bottom - (v - lo) / (hi - lo) * (height - TOP - bottom)
    return sy


def svg_open(cls: str, title: str, extra: str = "", *, height: int = H) -> str:
    return (f'<svg class="chart {cls}" viewBox="0 0 {W} {height}" width="{W}" '
            f'height="{height}" role="img" preserveAspectRatio="xMinYMin meet"{extra}>'
            f"<title>{esc(title)}</title>")


def axes(xticks: Sequence[float], yticks: Sequence[float], sx: Callable, sy: Callable,
         xlabel: str, ylabel: str, *, height: int = H, bottom: int = BOTTOM) -> list[str]:
    """Grid lines and tick values of y, ticks of x, both axes and their labels; the plot area
    spans [TOP, height - bottom] and the x label sits at the foot of the chart."""
    out = []
    foot = height - bottom  # the x axis
    for v in yticks:
        y = sy(v)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" '
                   f'y2="{y:.1f}"/><text x="{LEFT - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{v:g}</text>')
    for v in xticks:
        x = sx(v)
        out.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{foot}" '
                   f'y2="{foot + 5}"/><text x="{x:.1f}" y="{foot + 18}" '
                   f'text-anchor="middle">{v:g}</text>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{foot}"/>'
               f'<line class="axis" x1="{LEFT}" x2="{W - RIGHT}" y1="{foot}" '
               f'y2="{foot}"/>'
               f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{height - 12}" '
               f'text-anchor="middle">{esc(xlabel)}</text>'
               f'<text transform="translate(16 {(TOP + foot) / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{esc(ylabel)}</text>')
    return out


def pr_chart(series: Sequence[tuple[str, Sequence, Sequence]], title: str) -> str:
    """One polyline per (name, recall levels, precisions), axes 0–1, and an HTML legend."""
    ticks, _, _ = nice_ticks(0.0, 1.0)
    def sx(r):
        return LEFT + r * (W - LEFT - RIGHT)

    scale = y_scale(0.0, 1.0)

    def sy(p):
        return scale(min(max(p, 0.0), 1.0))

    parts = [svg_open("pr-curve", title)]
    parts += axes(ticks, ticks, sx, sy, "recall", "interpolated precision")
    legend = []
    for i, (name, xs, ys) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        dash = f' stroke-dasharray="{4 + 2 * (i // len(PALETTE))} 3"' if i >= len(PALETTE) else ""
        pts = [(sx(x), sy(y)) for x, y in zip(xs or [], ys or [], strict=False)
               if finite(x) and finite(y)]
        parts.append(f'<polyline class="series" data-run="{esc(name)}" fill="none" '
                     f'stroke="{colour}" stroke-width="2.5"{dash} stroke-linejoin="round" '
                     f'points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}"/>')
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in pts]
        legend.append(f'<li><span class="sw" style="background:{colour}"></span>{esc(name)}</li>')
    parts.append("</svg>")
    return "".join(parts) + f'<ul class="legend">{"".join(legend)}</ul>'


def labelled_bars(n: int, step: float) -> list[int]:
    """Which of ``n`` bars ``step`` apart get a topic label: every k-th, k the fewest bars
    that keep labels LABEL_PITCH apart, and always the first and the last (the label before
    the last goes when the two would overlap)."""
    if n == 0:
        return []
    k = max(1, math.ceil(LABEL_PITCH / step - 1e-9))
    picked = list(range(0, n, k))
    if picked[-1] != n - 1:
        if n - 1 - picked[-1] < k and len(picked) > 1:
            picked.pop()
        picked.append(n - 1)
    return picked


def bar_chart(cls: str, title: str, items: list[tuple[str, float]], ylabel: str, *,
              diff: bool = False, run: str | None = None, measure: str | None = None,
              xlabel: str | None = None) -> str:
    """Bars for (topic, value) pairs, in the given order; at most MAX_BARS drawn (evenly
    spaced, first and last kept) with a note saying so. ``diff`` colours by sign. Topic labels
    under the bars: every k-th bar so that they do not overlap, first and last always; each
    bar's ``<title>`` names its topic and value. ``xlabel`` names the x axis (it gets the
    count of topics)."""
    n_all, note = len(items), ""
    if n_all > MAX_BARS:
        keep = np.unique(np.linspace(0, n_all - 1, MAX_BARS).round().astype(int))
        items = [items[i] for i in keep]
        note = (f'<p class="note">{n_all:,} topics: {len(items):,} bars drawn, evenly spaced in '
                "sorted order (first and last kept).</p>")
    vals = [v for _, v in items]
    lo, hi = min([0.0, *vals]), max([0.0, *vals])
    if hi == lo:
        lo, hi = (-1.0, 1.0) if diff else (0.0, 1.0)
    ticks, lo, hi = nice_ticks(lo, hi)
    height, bottom = H + LABEL_BAND, BOTTOM + LABEL_BAND

    sy = y_scale(lo, hi, height=height, bottom=bottom)

    xlabel = f"{xlabel or 'topics, sorted by value'} ({n_all:,} topic{'s' * (n_all != 1)})"
    extra = (f' data-run="{esc(run)}"' if run is not None else "") + \
        (f' data-measure="{esc(measure)}"' if measure is not None else "")
    parts = [svg_open(cls, title, extra, height=height),
             *axes([], ticks, lambda v: 0, sy, xlabel, ylabel, height=height, bottom=bottom)]
    step = min((W - LEFT - RIGHT) / max(len(items), 1), 48.0)
    gap = step * 0.2 if step > 4 else 0.0
    width, foot = max(step - gap, 0.25), height - bottom  # (a bar's width, the x axis)
    y0 = sy(0.0)
    labelled = set(labelled_bars(len(items), step))
    for i, (topic, v) in enumerate(items):
        x, y = LEFT + i * step + gap / 2, sy(v)
        fill = (UP if v > 0 else DOWN if v < 0 else FLAT) if diff else PALETTE[0]
        parts.append(f'<rect class="bar" data-topic="{esc(topic)}" data-value="{v:.6g}" '
                     f'x="{x:.2f}" y="{min(y, y0):.2f}" width="{width:.2f}" '
                     f'height="{abs(y0 - y):.2f}" fill="{fill}"><title>{esc(topic)}: '
                     f"{num(v)}</title></rect>")
        if i in labelled:
            label = topic if len(topic) <= LABEL_CHARS else topic[:LABEL_CHARS - 1] + "…"
            cx = x + width / 2
            parts.append(f'<line class="axis" x1="{cx:.1f}" x2="{cx:.1f}" '
                         f'y1="{foot}" y2="{foot + 4}"/>'
                         f'<text class="tick-label" transform="translate({cx:.1f} '
                         f'{foot + 12}) rotate(-45)" text-anchor="end">'
                         f"{esc(label)}</text>")
    parts.append(f'<line class="zero" x1="{LEFT}" x2="{W - RIGHT}" y1="{y0:.1f}" '
                 f'y2="{y0:.1f}"/></svg>')
    return "".join(parts) + note
