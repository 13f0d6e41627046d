"""Self-contained HTML reports of evaluation and comparison documents.

One HTML5 page per document, with inline CSS and inline SVG charts: no scripts, no template
engine, no external assets (a Content-Security-Policy forbids loading any), so the page can
be saved, mailed or attached to a CI job and opens offline. Every piece of text taken from the
document is escaped; numbers have 4 decimals and missing values (None, NaN) show as "–".

Pages: :func:`render_evaluation`, :func:`render_comparison` and :func:`render_trend` (a
system's recorded results over time, issue #18).

Charts are ``<svg class="chart …">`` elements with a ``<title>`` and a viewBox; their data
elements carry ``data-run`` (lines) or ``data-topic`` (bars) attributes; per-topic charts
(``data-measure``: one per measure) label every k-th bar with its topic, so that labels never
overlap, the first and last bar always. A page opens with its title, then (comparisons) the
gate's verdict, then the input warnings.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence

import numpy as np

# Okabe & Ito's colour-blind-safe palette, most legible first; past 8 runs lines get dashes
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000",
           "#F0E442")
UP, DOWN, FLAT = "#009E73", "#D55E00", "#999999"
MAX_BARS = 2000
LABEL_BAND = 56  # extra room under a bar chart for its rotated topic labels
LABEL_PITCH = 16.0  # least horizontal distance between two labelled bars (11px text at 45°)
LABEL_CHARS = 14  # longer topic ids are cut, with "…" (the bar's tooltip has the whole id)
TESTS = (("randomization", "randomization test"), ("t_test", "paired t-test"),
         ("bootstrap", "paired bootstrap test"), ("wilcoxon", "Wilcoxon signed-rank test"))
_FAMILY_KEY = {"t_test": "t"}
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 380, 64, 16, 16, 64  # chart viewBox and margins
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1b;
 margin:1.5em auto;max-width:1200px;padding:0 1em;background:#fff}
h1{font-size:1.5em;margin:.2em 0 .6em}h2{font-size:1.15em;margin:1.6em 0 .4em}h3{font-size:1em}
table{border-collapse:collapse;margin:.4em 0 1em}
th,td{border-bottom:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em}
dl.prov{display:grid;grid-template-columns:max-content auto;gap:.15em 1em}dl.prov dt{color:#555}
dl.prov dd{margin:0}.note{color:#555;font-style:italic}.warn{color:#8a3100}
.subtitle{color:#555;margin:-.4em 0 .8em}
.warn-box{background:#fff4db;border:2px solid #E69F00;border-left-width:8px;border-radius:6px;
 padding:.3em .9em;margin:.4em 0 1em}.warn-box ul{margin:.3em 0;padding-left:1.2em}
.gate{font-size:1.6em;font-weight:700;padding:.45em .9em;border-radius:6px;margin:.6em 0}
.gate-pass{background:#e3f4ec;color:#00553f;border:3px solid #009E73}
.gate-fail{background:#fbe7dc;color:#8a3100;border:3px solid #D55E00}
.gate-unknown{background:#eee;border:3px solid #999}
.sig-up{color:#00704f;font-weight:700}.sig-down{color:#b34700;font-weight:700}
tr.ref td{background:#f7f7fb}strong.sig{color:#000}
svg.chart{max-width:100%;height:auto;display:block;margin:.3em 0}
svg.chart text{font:12px system-ui,sans-serif;fill:#333}
svg.chart text.tick-label{font-size:11px}
svg.chart .grid{stroke:#e5e5e5}svg.chart .axis,svg.chart .zero{stroke:#333}
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.2em}
.sw{display:inline-block;width:1.6em;height:.8em;margin-right:.4em;vertical-align:middle}
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _finite(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and math.isfinite(v)


def _num(v, digits: int = 4) -> str:
    """A value as escaped text: ints as they are, floats with ``digits`` decimals, "–" for
    None and NaN."""
    if v is None:
        return "–"
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if math.isnan(v):
            return "–"
        return f"{v:.{digits}f}" if math.isfinite(v) else ("∞" if v > 0 else "−∞")
    return _e(v)


def _p(v) -> str:
    return "&lt;0.0001" if _finite(v) and 0 <= v < 0.00005 else _num(v)


def _ci(mean, lo, hi) -> str:
    if lo is None and hi is None:
        return _num(mean)
    return f"{_num(mean)} [{_num(lo)}, {_num(hi)}]"


def _short(digest, n: int = 12) -> str:
    if not digest:
        return "–"
    s = str(digest)
    return f'<span class="mono" title="{_e(s)}">{_e(s[:n])}{"…" if len(s) > n else ""}</span>'


def _table(head: Sequence[str], rows: Sequence[str], cls: str = "") -> str:
    """``head`` cells are escaped; ``rows`` are ready-made ``<tr>`` markup."""
    ths = "".join(f"<th>{_e(h)}</th>" for h in head)
    return (f'<table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _page(title: str, body: Sequence[str]) -> str:
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _nice(lo: float, hi: float, n: int = 5) -> tuple[list[float], float, float]:
    """Round tick values spanning [lo, hi] (widened to whole steps), and the widened range."""
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    lo, hi = math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step
    ticks = [round(lo + i * step, 10) for i in range(round((hi - lo) / step) + 1)]
    return ticks, lo, hi


def _y_scale(lo: float, hi: float, *, height: int = H, bottom: int = BOTTOM
             ) -> Callable[[float], float]:
    """y of a value: ``lo`` at the x axis (``height - bottom``), ``hi`` at TOP."""
    def sy(v: float) -> float:
        return height - bottom - (v - lo) / (hi - lo) * (height - TOP - bottom)
    return sy


def _svg_open(cls: str, title: str, extra: str = "", *, height: int = H) -> str:
    return (f'<svg class="chart {cls}" viewBox="0 0 {W} {height}" width="{W}" '
            f'height="{height}" role="img" preserveAspectRatio="xMinYMin meet"{extra}>'
            f"<title>{_e(title)}</title>")


def _axes(xticks: Sequence[float], yticks: Sequence[float], sx: Callable, sy: Callable,
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
               f'text-anchor="middle">{_e(xlabel)}</text>'
               f'<text transform="translate(16 {(TOP + foot) / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{_e(ylabel)}</text>')
    return out


def _pr_chart(series: Sequence[tuple[str, Sequence, Sequence]], title: str) -> str:
    """One polyline per (name, recall levels, precisions), axes 0–1, and an HTML legend."""
    ticks, _, _ = _nice(0.0, 1.0)
    def sx(r):
        return LEFT + r * (W - LEFT - RIGHT)

    scale = _y_scale(0.0, 1.0)

    def sy(p):
        return scale(min(max(p, 0.0), 1.0))

    parts = [_svg_open("pr-curve", title)]
    parts += _axes(ticks, ticks, sx, sy, "recall", "interpolated precision")
    legend = []
    for i, (name, xs, ys) in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        dash = f' stroke-dasharray="{4 + 2 * (i // len(PALETTE))} 3"' if i >= len(PALETTE) else ""
        pts = [(sx(x), sy(y)) for x, y in zip(xs or [], ys or [], strict=False)
               if _finite(x) and _finite(y)]
        parts.append(f'<polyline class="series" data-run="{_e(name)}" fill="none" '
                     f'stroke="{colour}" stroke-width="2.5"{dash} stroke-linejoin="round" '
                     f'points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}"/>')
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in pts]
        legend.append(f'<li><span class="sw" style="background:{colour}"></span>{_e(name)}</li>')
    parts.append("</svg>")
    return "".join(parts) + f'<ul class="legend">{"".join(legend)}</ul>'


def _labelled(n: int, step: float) -> list[int]:
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


def _bar_chart(cls: str, title: str, items: list[tuple[str, float]], ylabel: str, *,
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
    ticks, lo, hi = _nice(lo, hi)
    height, bottom = H + LABEL_BAND, BOTTOM + LABEL_BAND

    sy = _y_scale(lo, hi, height=height, bottom=bottom)

    xlabel = f"{xlabel or 'topics, sorted by value'} ({n_all:,} topic{'s' * (n_all != 1)})"
    extra = (f' data-run="{_e(run)}"' if run is not None else "") + \
        (f' data-measure="{_e(measure)}"' if measure is not None else "")
    parts = [_svg_open(cls, title, extra, height=height),
             *_axes([], ticks, lambda v: 0, sy, xlabel, ylabel, height=height, bottom=bottom)]
    step = min((W - LEFT - RIGHT) / max(len(items), 1), 48.0)
    gap = step * 0.2 if step > 4 else 0.0
    width, foot = max(step - gap, 0.25), height - bottom  # (a bar's width, the x axis)
    y0 = sy(0.0)
    labelled = set(_labelled(len(items), step))
    for i, (topic, v) in enumerate(items):
        x, y = LEFT + i * step + gap / 2, sy(v)
        fill = (UP if v > 0 else DOWN if v < 0 else FLAT) if diff else PALETTE[0]
        parts.append(f'<rect class="bar" data-topic="{_e(topic)}" data-value="{v:.6g}" '
                     f'x="{x:.2f}" y="{min(y, y0):.2f}" width="{width:.2f}" '
                     f'height="{abs(y0 - y):.2f}" fill="{fill}"><title>{_e(topic)}: '
                     f"{_num(v)}</title></rect>")
        if i in labelled:
            label = topic if len(topic) <= LABEL_CHARS else topic[:LABEL_CHARS - 1] + "…"
            cx = x + width / 2
            parts.append(f'<line class="axis" x1="{cx:.1f}" x2="{cx:.1f}" '
                         f'y1="{foot}" y2="{foot + 4}"/>'
                         f'<text class="tick-label" transform="translate({cx:.1f} '
                         f'{foot + 12}) rotate(-45)" text-anchor="end">'
                         f"{_e(label)}</text>")
    parts.append(f'<line class="zero" x1="{LEFT}" x2="{W - RIGHT}" y1="{y0:.1f}" '
                 f'y2="{y0:.1f}"/></svg>')
    return "".join(parts) + note


def _chart_measures(measures: Sequence[dict], keys) -> list[str]:
    """The keys of the measures to chart per topic, in the document's order: those with
    per-topic values, without the count and info families unless nothing else is left."""
    ms = [m for m in measures if m.get("key") in keys]
    return [m["key"] for m in ([m for m in ms if m.get("family") not in ("count", "info")]
                               or ms)]


def _json(v) -> str:
    """A value as JSON spells it (true, null, 1, "macro"), numpy scalars included."""
    if isinstance(v, np.generic):
        v = v.item()
    try:
        return json.dumps(v, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return json.dumps(str(v), ensure_ascii=False)


def _options(opts: dict) -> str:
    """Evaluation options as a request's ``options`` object spells them: the provenance's keys
    are the API's field names (``relevance_level``, ``judged_only``, ``complete_topics``,
    ``depth``, …: ``OptionsSchema`` loads a request into exactly these), with JSON values."""
    return ", ".join(f'<code class="option">{_e(_json(str(k)))}: {_e(_json(v))}</code>'
                     for k, v in opts.items()) or "–"


# The curves' label (cranfield.curves.INTERPOLATION_NOTE in a sentence for the page).
_INTERPOLATION_LABEL = (
    "Textbook interpolation: the best precision at any rank whose recall reaches the level. "
    "Not trec_eval's <code>iprec_at_recall</code>, which rounds each level to a count of "
    "relevant documents first: the two are not comparable.")


def _warnings(doc: dict) -> str:
    """The input warnings (topics only in the run, judged topics missing from it, …; in a
    comparison each run's, ``data-run`` naming it, before the comparison's own): a
    ``.warn-box`` when there are any, "None." when not."""
    items = []
    for w in doc.get("warnings") or []:
        topics = w.get("topics") or []
        run = f' data-run="{_e(w["run"])}"' if w.get("run") is not None else ""
        items.append(f'<li class="warn"{run}><code>{_e(w.get("code", ""))}</code> '
                     f'{_e(w.get("message", ""))}'
                     f'{f" (topics: {_topic_list(topics, 10)})" if topics else ""}</li>')
    return ('<h2 id="warnings">Warnings</h2>'
            + (f'<div class="warn warn-box" role="note"><ul>{"".join(items)}</ul></div>'
               if items else '<p class="no-warnings">None.</p>'))


def _topic_list(topics: Sequence, most: int) -> str:
    """The first ``most`` topics, escaped, comma-separated; " …" when there are more."""
    return ", ".join(_e(t) for t in topics[:most]) + (" …" if len(topics) > most else "")


def _head(title: str, subtitle: str | None) -> list[str]:
    return [f"<h1>{_e(title)}</h1>"] + (
        [f'<p class="subtitle">{_e(subtitle)}</p>'] if subtitle else [])


def render_evaluation(doc: dict, title: str | None = None, *,
                      subtitle: str | None = None) -> str:
    """An HTML page for an evaluation document (``report.evaluation_document``): the title
    ("Evaluation of RUNID" by default) and ``subtitle`` under it, the input warnings, provenance
    (engine version, profile, shortened run and qrels digests, runid, options as a request's
    ``options`` spells them), topic counts, a table of measures (key, canonical name, aggregate
    value, how it aggregates), efficiency figures when present, the precision–recall curve
    (mean 11-point interpolated precision, ``svg.pr-curve``) when ``doc["curves"]`` is present,
    and one bar chart per topic for every measure with per-topic values (``svg.topic-bars``
    with ``data-measure``; counts and info left out unless there is nothing else) when
    ``doc["per_topic"]`` is present."""
    prov = doc.get("provenance") or {}
    runid = prov.get("runid") or doc.get("aggregate", {}).get("runid") or "run"
    title = title or f"Evaluation of {runid}"
    body = [*_head(title, subtitle), _warnings(doc), "<h2>Provenance</h2>",
            '<dl class="prov">']
    opts = prov.get("options") or {}
    for label, value in (
            ("engine", _e(f"{prov.get('engine', 'cranfield')} {prov.get('engine_version', '')}")),
            ("profile", _e(prov.get("profile", "–"))), ("runid", _e(runid)),
            ("run SHA-256", _short(prov.get("run_sha256"))),
            ("qrels SHA-256", _short(prov.get("qrels_sha256"))),
            ("qrels version", _e(prov.get("qrels_version", "–"))),
            ("options", _options(opts))):
        body.append(f"<dt>{label}</dt><dd>{value}</dd>")
    topics = doc.get("topics") or {}
    body.append("</dl><h2>Topics</h2><p>" + "; ".join(
        f"{len(topics.get(k) or [])} {label}" for k, label in (
            ("evaluated", "evaluated"), ("run_only", "only in the run (not evaluated)"),
            ("qrels_only", "judged but missing from the run"))) + "</p>")
    agg = doc.get("aggregate") or {}
    rows = [f'<tr><td><code>{_e(m.get("key"))}</code></td><td class="mono">'
            f'{_e(m.get("canonical", ""))}</td><td class="n">{_num(agg.get(m.get("key")))}</td>'
            f'<td>{_e(m.get("aggregate", ""))}</td></tr>' for m in doc.get("measures") or []]
    body += ["<h2>Measures</h2>", _table(["measure", "canonical", "value", "aggregate"], rows,
                                          "measures")]
    if doc.get("segments") is not None:  # topic metadata (docs/segments.md)
        keys = [m.get("key") for m in doc.get("measures") or []
                if m.get("key") in (doc.get("weighted") or {})]
        rows = [f"<tr><td>{_e(label)}</td><td class=\"n\">{_num(seg.get('topics'))}</td>"
                + "".join(f'<td class="n">{_num((seg.get("aggregate") or {}).get(k))}</td>'
                          for k in keys) + "</tr>"
                for label, seg in doc["segments"].items()]
        rows.append("<tr><td><em>weighted</em></td><td></td>" + "".join(
            f'<td class="n">{_num(doc["weighted"].get(k))}</td>' for k in keys) + "</tr>")
        body += ["<h2>Segments</h2>", _table(["segment", "topics", *keys], rows, "segments"),
                 '<p class="note">Each segment: the summary over the evaluated topics carrying '
                 "its label; weighted: each topic weighted by the topic metadata (1 where it "
                 "has none).</p>"]
    if doc.get("efficiency"):
        eff = doc["efficiency"]
        body.append("<h2>Efficiency</h2><p>" + ", ".join(
            f"{_e(k)} {_num(v) if not isinstance(v, list) else len(v)}" for k, v in eff.items()
            if k != "method") + "</p>")
    curves = doc.get("curves")
    if curves:
        n = curves.get("topics_averaged")
        body += ["<h2>Precision–recall</h2>", _pr_chart(
            [(str(runid), curves.get("recall_levels"), curves.get("mean_interpolated_precision"))],
            f"Mean 11-point interpolated precision of {runid}"),
            f'<p class="note">Mean over {_num(n)} topic(s): the topics the measures above '
            f"average. {_INTERPOLATION_LABEL}</p>"]
    per_topic = doc.get("per_topic")
    keys = _chart_measures(doc.get("measures") or [],
                           {k for row in (per_topic or {}).values() for k in row})
    if per_topic and keys:
        body.append("<h2>Per topic</h2>")
    for key in keys:  # (none without per_topic)
        items = [(str(t), float(row[key])) for t, row in per_topic.items()
                 if _finite(row.get(key))]
        if not items:
            continue
        items.sort(key=lambda tv: -tv[1])
        body += [f"<h3>Per topic: {_e(key)}</h3>", _bar_chart(
            "topic-bars", f"{key} per topic", items, key, measure=str(key),
            xlabel=f"topics, sorted by {key}, highest first")]
        if len(items) < len(per_topic):
            body.append(f'<p class="note">{len(per_topic) - len(items)} topic(s) without a '
                        "value are not drawn.</p>")
    return _page(title, body)


def _offender(t) -> str:
    """A gate's offending topic: an id, or ``{"topic", "drop", …}``."""
    if isinstance(t, dict):
        return f"{_e(t.get('topic', ''))} ({_num(t.get('drop'))})"
    return _e(t)


def _test_name(doc: dict, test: str) -> str | None:
    pairs = doc.get("pairs") or []
    present = [k for k, _ in TESTS if any(isinstance(p.get(k), dict) for p in pairs)]
    return test if test in present else (present[0] if present else None)


def render_comparison(doc: dict, title: str | None = None, *,
                      test: str = "randomization", subtitle: str | None = None) -> str:
    """An HTML page for a comparison document (``cranfield.compare``): the title ("Comparison:
    a vs b" by default) and ``subtitle`` under it, the gate verdict (when present) first, the
    input warnings, the gate's checks, the runs, a measures table (one row per run, one column per
    measure: mean [95% CI], with ▲/▼ where the run is significantly better/worse than the
    baseline — or, without one, the first run — by ``test``'s adjusted p < alpha, explained in
    a legend), the pairs table (mean difference b − a with CI, p and adjusted p per test, d_z,
    wins/ties/losses, largest losses), precision–recall curves of all runs on one chart
    (``svg.pr-curve``), and per-topic differences against the baseline for every measure, one
    ``svg.topic-diff`` chart per measure and other run (``data-measure``, ``data-run``; needs
    ``per_topic``: the page says so otherwise)."""
    runs = [r.get("name") for r in doc.get("runs") or []]
    names = [str(r) for r in runs]
    title = title or "Comparison: " + " vs ".join(names)
    ref = doc.get("baseline") if doc.get("baseline") is not None else (runs[0] if runs else None)
    alpha = doc.get("alpha", 0.05)
    _alpha = f"{alpha:g}" if _finite(alpha) else _num(alpha)
    measures = [m.get("key") for m in doc.get("measures") or []]
    tag = " (baseline)" if doc.get("baseline") is not None else " (reference)"
    body = _head(title, subtitle)
    gate = doc.get("gate")
    if gate:
        verdict = str(gate.get("verdict", "unknown"))
        cls = verdict if verdict in ("pass", "fail") else "unknown"
        body.append(f'<div class="gate gate-{cls}">Gate: {_e(verdict.upper())}</div>')
    body.append(_warnings(doc))
    if gate:
        rows = [f'<tr><td>{_e(c.get("candidate", ""))}</td><td>{_e(c.get("baseline", ""))}</td>'
                f'<td>{_e(c.get("measure", ""))}</td><td>{_e(c.get("verdict", ""))}</td><td>'
                + "<br>".join(_e(r) for r in c.get("reasons") or []) + "</td><td>"
                + ", ".join(_offender(t) for t in (c.get("offending_topics") or [])[:20])
                + "</td></tr>" for c in gate.get("checks") or []]
        body += ["<h2>Gate checks</h2>", _table(
            ["candidate", "baseline", "measure", "verdict", "reasons",
             "offending topics (drop)"], rows, "gate-checks")]
    rows = [f"<tr><td>{_e(r.get('name'))}{tag if r.get('name') == ref else ''}</td>"
            f"<td>{_e(r.get('runid', ''))}</td><td class=\"n\">{_num(r.get('topics_evaluated'))}"
            "</td></tr>" for r in doc.get("runs") or []]
    corr = doc.get("correction") or {}
    body += ["<h2>Runs</h2>", _table(["run", "runid", "topics evaluated"], rows, "runs"),
             f"<p>{len(doc.get('topics') or [])} common topic(s); α = {_alpha}; "
             f"correction: {_e(corr.get('method', '–'))}.</p>"]
    tkey = _test_name(doc, test)
    pairs = {(p.get("measure"), p.get("a"), p.get("b")): p for p in doc.get("pairs") or []}
    level = (doc.get("options") or {}).get("level", 0.95)
    summary = doc.get("summary") or {}
    rows = []
    for run in runs:
        cells = []
        for m in measures:
            s = (summary.get(m) or {}).get(run) or {}
            mark = ""
            p, sign = pairs.get((m, ref, run)), 1
            if p is None:
                p, sign = pairs.get((m, run, ref)), -1
            block = (p or {}).get(tkey) if tkey else None
            if run != ref and isinstance(block, dict):
                padj = block.get("p_adjusted", block.get("p_value"))
                diff = (p.get("mean_diff") or 0.0) * sign
                if _finite(padj) and padj < alpha:
                    up = diff > 0
                    mark = (f' <span class="sig-{"up" if up else "down"}" title="significantly '
                            f'{"better" if up else "worse"} than {_e(ref)} (adjusted p = '
                            f'{_p(padj)})">{"▲" if up else "▼"}</span>')
            cells.append(f'<td class="n">{_ci(s.get("mean"), s.get("ci_low"), s.get("ci_high"))}'
                         f"{mark}</td>")
        rows.append(f'<tr class="{"ref" if run == ref else "run"}"><td>{_e(run)}'
                    f'{tag if run == ref else ""}</td>'
                    + "".join(cells) + "</tr>")
    body += ["<h2>Measures</h2>", _table(["run", *measures], rows, "summary")]
    fam = corr.get("family_size") or {}
    fam_n = fam.get(_FAMILY_KEY.get(tkey, tkey)) if tkey else None
    test_label = dict(TESTS).get(tkey, "no test")
    body.append(f'<p class="legend-sig">Cells: mean [{_num(level * 100, 0)}% CI]. ▲ / ▼: '
                f"significantly higher / lower than {_e(ref)} — adjusted p &lt; α = "
                f"{_alpha} by the {_e(test_label)}, {_e(corr.get('method', 'no'))} "
                f"correction" + (f" over {_num(fam_n)} comparisons" if fam_n else "") + ".</p>")
    tests = [(k, lab) for k, lab in TESTS if any(isinstance(p.get(k), dict)
                                                 for p in pairs.values())]
    rows = []
    for p in pairs.values():
        cells = [_e(p.get("measure")), _e(p.get("a")), _e(p.get("b"))]
        cells.append(_ci(p.get("mean_diff"), p.get("ci_low"), p.get("ci_high")))
        for k, _ in tests:
            b = p.get(k) or {}
            text = f"{_p(b.get('p_value'))} ({_p(b.get('p_adjusted'))})"
            sig = _finite(b.get("p_adjusted")) and b["p_adjusted"] < alpha
            cells.append(f'<strong class="sig">{text}</strong>' if sig else text)
        cells.append(_num((p.get("effect_size") or {}).get("cohens_dz")))
        cells.append(f"{_num(p.get('wins'))}/{_num(p.get('ties'))}/{_num(p.get('losses'))}")
        cells.append(", ".join(f"{_e(x.get('topic'))} ({_num(x.get('diff'))})"
                               for x in (p.get("largest_losses") or [])[:5]))
        rows.append("<tr>" + "".join(f'<td class="n">{c}</td>' if i > 2 and i < len(cells) - 1
                                     else f"<td>{c}</td>" for i, c in enumerate(cells)) + "</tr>")
    body += ["<h2>Pairs</h2>", _table(["measure", "a", "b", "mean diff b − a [CI]",
                                       *(f"{lab}: p (adjusted)" for _, lab in tests),
                                       "d_z", "W/T/L", "largest losses"], rows, "pairs"),
             '<p class="note">Bold: adjusted p &lt; α.</p>']
    body += _segment_sections(doc, tests, alpha)
    curves = doc.get("curves")
    if curves:
        series = [(str(r), (curves.get(r) or {}).get("recall_levels"),
                   (curves.get(r) or {}).get("mean_interpolated_precision"))
                  for r in runs if r in curves]
        body += ["<h2>Precision–recall</h2>",
                 _pr_chart(series, "Mean 11-point interpolated precision per run"),
                 f'<p class="note">{_INTERPOLATION_LABEL}</p>']
    per_topic = doc.get("per_topic")
    body.append("<h2>Per-topic differences</h2>")
    if not per_topic or not measures or ref not in per_topic:
        body.append('<p class="note">No per-topic values in this comparison document: ask for '
                    "per_topic to see per-topic differences.</p>")
    else:
        base = per_topic[ref]
        topics = doc.get("topics") or list(base)
        keys = _chart_measures(doc.get("measures") or [],
                               {k for rows in per_topic.values() for row in rows.values()
                                for k in row})
        for m in keys:
            body.append(f"<h3>Per topic: {_e(m)}</h3>")
            for run in runs:
                if run == ref:
                    continue
                vals = per_topic.get(run) or {}
                items = [(str(t), float(vals[t][m] - base[t][m])) for t in topics
                         if _finite((vals.get(t) or {}).get(m))
                         and _finite((base.get(t) or {}).get(m))]
                items.sort(key=lambda tv: -tv[1])
                body.append(f"<h4>{_e(m)}: {_e(run)} − {_e(ref)}</h4>")
                body.append(_bar_chart(
                    "topic-diff", f"{m}: {run} − {ref} per topic", items, f"{m}: {run} − {ref}",
                    diff=True, run=str(run), measure=str(m),
                    xlabel=f"topics, sorted by {m} difference {run} − {ref}, largest gain "
                           "first"))
    return _page(title, body)


def _segment_sections(doc: dict, tests, alpha: float) -> list[str]:
    """A comparison's segments (topic metadata, docs/segments.md): per segment its pairs,
    their p-values adjusted over the segment's own family; then the weighted means."""
    out: list[str] = []
    for label, seg in (doc.get("segments") or {}).items():
        fam = seg.get("family") or {}
        out.append(f"<h2>Segment {_e(label)}</h2><p>{len(seg.get('topics') or [])} common "
                   f"topic(s); p-values adjusted by {_e(fam.get('correction', '–'))} over this "
                   f"segment's {_num(fam.get('tests'))} comparison(s).</p>")
        rows = []
        for p in seg.get("pairs") or []:
            cells = [_e(p.get("measure")), _e(p.get("a")), _e(p.get("b")),
                     _ci(p.get("mean_diff"), p.get("ci_low"), p.get("ci_high"))]
            for k, _ in tests:
                b = p.get(k) or {}
                text = f"{_p(b.get('p_value'))} ({_p(b.get('p_adjusted'))})"
                sig = _finite(b.get("p_adjusted")) and b["p_adjusted"] < alpha
                cells.append(f'<strong class="sig">{text}</strong>' if sig else text)
            cells.append(f"{_num(p.get('wins'))}/{_num(p.get('ties'))}/{_num(p.get('losses'))}")
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        if rows:
            out.append(_table(["measure", "a", "b", "mean diff b − a [CI]",
                               *(f"{lab}: p (adjusted)" for _, lab in tests), "W/T/L"], rows,
                              "segment-pairs"))
    weighted = doc.get("weighted") or {}
    if weighted:
        runs = [r.get("name") for r in doc.get("runs") or []]
        rows = [f"<tr><td>{_e(key)}</td>" + "".join(
            f'<td class="n">{_num(per_run.get(r))}</td>' for r in runs) + "</tr>"
            for key, per_run in weighted.items()]
        out += ["<h2>Weighted means</h2>", _table(["measure", *runs], rows, "weighted"),
                '<p class="note">Over the common topics, each weighted by the topic metadata '
                "(1 where it has none).</p>"]
    return out


# --------------------------------------------------------------------------------------------
# A system's trend (issue #18)
# --------------------------------------------------------------------------------------------
# The trend page: one measure's mean and 95% CI for each recorded result, oldest first, the
# pinned baseline drawn as a line, gate verdicts marked, and each point linking to its
# comparison with the previous result.
#
# Made from the trend document ``GET /v1/systems/{name}/trend`` answers in JSON (``system``,
# ``measure``, ``baseline``, ``baseline_point``, ``points``, ``total``), with the report pages'
# style: inline CSS and SVG, no scripts, no external assets.
#
# The chart is ``<svg class="chart trend">``; each point is an ``<a class="point">`` holding a
# ``<circle>`` with ``data-id``, ``data-mean`` and ``data-verdict`` (pass, fail, undecided or
# none), its CI a ``<line class="ci">``; the baseline a ``<line class="baseline">`` at its mean
# and, when it is one of the points, its own point a diamond (``<path class="baseline-mark">``,
# in the legend too). Under each point (every k-th when they crowd) a ``<text
# class="x-label">`` names it: the results' labels when they tell them apart, else their day,
# else day and time (to the second) — never one clock time repeated — cut to
# TREND_LABEL_CHARS with "…" and turned 35° when they would not fit side by side. Links are
# built by ``link(point, previous)``, so the page does not know the service's routes.
#
# The latest gate's box, first under the title, names per check the measure, the drop with its
# CI (``drop_ci``, kept with the verdict), what the gate allowed, and the offending topics with
# their drops.

# verdict -> (fill colour, label); Okabe & Ito as the report pages: pass bluish green,
# fail vermillion, undecided grey, no gate blue
VERDICT_STYLE = {"pass": (UP, "gate passed"), "fail": (DOWN, "gate failed"),
                 "undecided": (FLAT, "gate undecided"), None: (PALETTE[0], "no gate")}
BASELINE_COLOUR = PALETTE[4]
TREND_CSS = """
svg.trend .line{fill:none;stroke:#0072B2;stroke-width:2}
svg.trend .ci{stroke:#555;stroke-width:1.5}
svg.trend .baseline{stroke:#CC79A7;stroke-width:2.5;stroke-dasharray:8 5}
svg.trend a.point circle,svg.trend .baseline-mark{stroke:#fff;stroke-width:1.5}
svg.trend text.x-label{font-size:11px}
.latest{font-size:1.05em;padding:.5em .9em;border-radius:6px;margin:.6em 0}
.latest .head{display:block;font-size:1.25em;font-weight:700}
.latest ul{margin:.3em 0 .1em;padding-left:1.2em}.latest li{margin:.15em 0}
.latest-fail{background:#fbe7dc;color:#8a3100;border:3px solid #D55E00}
.latest-pass{background:#e3f4ec;color:#00553f;border:3px solid #009E73}
.latest-undecided{background:#eee;border:3px solid #999}
table.trend td{white-space:nowrap}
table.trend td.label{max-width:22em;overflow:hidden;text-overflow:ellipsis}
ul.legend li,.latest .nw{white-space:nowrap}
ul.legend svg{vertical-align:middle;margin-right:.4em}
"""
TREND_LABEL_CHARS = 18  # longer x labels are cut in the middle, "…" (the whole in a tooltip)
CHAR_WIDTH = 6.4        # of 11px system-ui text, about: whether labels fit side by side
X_LABEL_ANGLE = 35      # degrees, when they do not


def _verdict(point: dict) -> str | None:
    gate = point.get("gate") or {}
    verdict = gate.get("verdict")
    return verdict if verdict in ("pass", "fail", "undecided") else None


def _ordered_checks(point: dict, measure: str) -> list[dict]:
    """The point's latest gate's checks, those of ``measure`` first."""
    checks = [c for c in (point.get("gate") or {}).get("checks") or [] if isinstance(c, dict)]
    return sorted(checks, key=lambda c: c.get("measure") != measure)


def _offending(point: dict, measure: str) -> list[str]:
    """The topics the point's latest gate found dropping (on ``measure`` first)."""
    out: list[str] = []
    for check in _ordered_checks(point, measure):
        for t in check.get("offending_topics") or []:
            topic = t.get("topic") if isinstance(t, dict) else t
            if topic is not None and str(topic) not in out:
                out.append(str(topic))
    return out


def _day(created: str) -> str:
    return str(created or "")[:10]


def _clip(text: str, most: int = TREND_LABEL_CHARS) -> str:
    """``text`` cut in the middle to ``most`` characters ("…"): both ends tell labels apart
    (a date in front, a build number or commit behind)."""
    if len(text) <= most:
        return text
    head = most // 2
    return text[:head] + "…" + text[len(text) - (most - 1 - head):]


def _x_labels(points: Sequence[dict]) -> tuple[list[str], str]:
    """One distinct x label per point and what they are: the results' labels when they tell
    them apart (cut to TREND_LABEL_CHARS), else the day they were recorded, else day and time
    to the minute, then to the second, then their order."""
    created = [str(p.get("created_at") or "") for p in points]
    candidates = [
        ("label", [_clip(str(p.get("label") or "")) for p in points]),
        ("day recorded", [c[:10] for c in created]),
        ("time recorded (UTC)", [f"{c[5:10]} {c[11:16]}" for c in created]),
        ("time recorded (UTC)", [f"{c[5:10]} {c[11:19]}" for c in created]),
    ]
    for what, labels in candidates:
        if all(labels) and len(set(labels)) == len(labels):
            return labels, what
    return [f"#{i + 1}" for i in range(len(points))], "order recorded"


def _legend_mark(shape: str, colour: str) -> str:
    """A small inline SVG of a chart's mark for the legend: a disc, a diamond or a dash."""
    if shape == "disc":
        inner = f'<circle cx="7" cy="7" r="5.5" fill="{colour}"/>'
    elif shape == "diamond":
        inner = f'<path d="M7 0.5L13.5 7L7 13.5L0.5 7Z" fill="{colour}"/>'
    else:
        inner = (f'<line x1="0" x2="26" y1="7" y2="7" stroke="{colour}" stroke-width="2.5" '
                 'stroke-dasharray="8 5"/>')
    width = 26 if shape == "dash" else 14
    return (f'<svg width="{width}" height="14" viewBox="0 0 {width} 14" aria-hidden="true">'
            f"{inner}</svg>")


def _chart(doc: dict, link: Callable[[dict, dict | None], str]) -> str:
    points = doc.get("points") or []
    measure = str(doc.get("measure", ""))
    base = doc.get("baseline_point")
    values = [v for p in points for v in (p.get("mean"), p.get("ci_low"), p.get("ci_high"))
              if _finite(v)]
    if base is not None and _finite(base.get("mean")):
        values.append(base["mean"])
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (hi - lo) * 0.08 or 0.05
    yticks, lo, hi = _nice(max(lo - pad, 0.0) if lo >= 0 else lo - pad, hi + pad)
    n = len(points)
    # x labels: side by side when the widest fits its slot (the last point moved in so that
    # its label is not cut at the edge), else turned (and every k-th when even turned they
    # would crowd), the chart made taller by what they need
    labels, what = _x_labels(points)
    widest = max((len(t) for t in labels), default=0) * CHAR_WIDTH
    inner = W - LEFT - RIGHT - 40
    edge = max(0.0, len(labels[-1]) * CHAR_WIDTH / 2 + 4 - (RIGHT + 20)) if n > 1 else 0.0
    slot = (inner - edge) / (n - 1) if n > 1 else float(inner)
    turned = widest + 8 > slot
    lead = 20.0  # from the y axis to the first point
    if not turned:
        inner -= edge
    else:  # turned labels reach left of their point: the first one's must not be cut
        lead = max(lead, widest * math.cos(math.radians(X_LABEL_ANGLE)) + 4 - LEFT)
        inner = W - LEFT - RIGHT - 20 - lead
        slot = inner / (n - 1) if n > 1 else float(inner)

    def sx(i: float) -> float:
        return LEFT + lead + (inner * i / (n - 1) if n > 1 else inner / 2)

    shown = set(_labelled(n, slot)) if turned else set(range(n))
    band = math.ceil(widest * math.sin(math.radians(X_LABEL_ANGLE))) + 4 if turned else 0
    height, bottom = H + band, BOTTOM + band
    sy = _y_scale(lo, hi, height=height, bottom=bottom)
    foot = height - bottom

    title = f"{measure} of {doc.get('system', '')}: mean and 95% CI per recorded result"
    parts = [_svg_open("trend", title, f' data-measure="{_e(measure)}"', height=height)]
    parts += _axes([], yticks, sx, sy, f"{n} recorded result(s), oldest first, by {what}",
                   f"{measure} (mean, 95% CI)", height=height, bottom=bottom)
    for i, p in enumerate(points):
        if i not in shown:
            continue
        x = sx(i)
        tip = f"{p.get('label', '')}, recorded {p.get('created_at', '')}"
        place = (f'transform="translate({x:.1f} {foot + 14}) rotate(-{X_LABEL_ANGLE})" '
                 'text-anchor="end"' if turned
                 else f'x="{x:.1f}" y="{foot + 17}" text-anchor="middle"')
        parts.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{foot}" '
                     f'y2="{foot + 4}"/><text class="x-label" {place} '
                     f'data-id="{_e(p.get("id", ""))}">{_e(labels[i])}<title>{_e(tip)}'
                     "</title></text>")
    base_id = base.get("id") if base is not None else None
    if base is not None and _finite(base.get("mean")):
        y = sy(base["mean"])
        parts.append(f'<line class="baseline" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" data-id="{_e(base_id or "")}"><title>baseline '
                     f'{_e(base.get("label", ""))}: {_num(base["mean"])}</title></line>'
                     f'<text x="{W - RIGHT - 4}" y="{y - 6:.1f}" text-anchor="end" '
                     f'fill="{BASELINE_COLOUR}">baseline {_e(_clip(str(base.get("label", ""))))}'
                     "</text>")
    line = [(sx(i), sy(p["mean"])) for i, p in enumerate(points)
            if _finite(p.get("mean"))]
    if len(line) > 1:
        parts.append('<polyline class="line" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y in line) + '"/>')
    previous = None
    for i, p in enumerate(points):
        mean = p.get("mean")
        if not _finite(mean):
            previous = p
            continue
        x, y = sx(i), sy(mean)
        if _finite(p.get("ci_low")) and _finite(p.get("ci_high")):
            parts.append(f'<line class="ci" x1="{x:.1f}" x2="{x:.1f}" '
                         f'y1="{sy(p["ci_low"]):.1f}" y2="{sy(p["ci_high"]):.1f}"/>')
        verdict = _verdict(p)
        colour, what_gate = VERDICT_STYLE[verdict]
        is_base = base_id is not None and p.get("id") == base_id
        tip = (f"{p.get('label', '')} ({_day(p.get('created_at'))}): {_num(mean)} "
               f"[{_num(p.get('ci_low'))}, {_num(p.get('ci_high'))}]; {what_gate}"
               + ("; the pinned baseline" if is_base else ""))
        data = (f'data-id="{_e(p.get("id", ""))}" data-mean="{mean:.6g}" '
                f'data-verdict="{verdict or "none"}"')
        if is_base:  # the baseline's own point: a diamond in its colour (a verdict's ring)
            r = 9.5
            ring = f' style="stroke:{colour};stroke-width:3"' if verdict else ""
            mark = (f'<path class="baseline-mark" d="M{x:.1f} {y - r:.1f}L{x + r:.1f} '
                    f'{y:.1f}L{x:.1f} {y + r:.1f}L{x - r:.1f} {y:.1f}Z" '
                    f'fill="{BASELINE_COLOUR}"{ring} {data} data-baseline="true">'
                    f"<title>{_e(tip)}</title></path>")
        else:
            radius = 7 if verdict == "fail" else 5.5
            mark = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="{colour}" '
                    f"{data}><title>{_e(tip)}</title></circle>")
        parts.append(f'<a class="point" href="{_e(link(p, previous))}">{mark}</a>')
        previous = p
    parts.append("</svg>")
    # the legend's verdict swatches stay squares: round marks on the page are points only
    legend = "".join(f'<li><span class="sw" style="background:{c}"></span>{_e(label)}</li>'
                     for c, label in VERDICT_STYLE.values())
    if base is not None:
        name = _e(_clip(str(base.get("label", "")), 40))
        if base_id is not None and any(p.get("id") == base_id for p in points):
            legend += (f'<li class="baseline-point">{_legend_mark("diamond", BASELINE_COLOUR)}'
                       f"pinned baseline: {name}</li>")
        legend += (f'<li>{_legend_mark("dash", BASELINE_COLOUR)}the pinned baseline\'s mean'
                   "</li>")
    return "".join(parts) + f'<ul class="legend">{legend}</ul>'


def _percent(level: float) -> str:
    """A confidence level as a percentage's digits (0.95 -> 95, 0.975 -> 97.5)."""
    return f"{level * 100:.6g}"


def _amount(value, relative: bool = False) -> str:
    if not _finite(value):
        return "–"
    return f"{value:.2%}" if relative else f"{value:.4f}"


def _gate_box(point: dict, measure: str, base_label: str | None) -> str:
    """The latest gate's verdict on ``point``: per check (``measure`` first; for a failed or
    undecided gate, the checks that made it so) the measure, the drop with its CI against the
    baseline, what the gate allowed, and the offending topics with their drops. One element
    (no nested div): what it says is the box's text."""
    verdict = _verdict(point)
    checks = _ordered_checks(point, measure)
    if verdict in ("fail", "undecided"):
        checks = [c for c in checks if c.get("verdict") == verdict] or checks
    items = []
    for c in checks:
        drop_ci = c.get("drop_ci") or [None, None]
        level = c.get("ci_level") if _finite(c.get("ci_level")) else 0.95
        allowed = c.get("max_drop")
        allowed_text = ("" if not _finite(allowed) else
                        f"; allowed {allowed * 100:g}%" if c.get("relative") else
                        f"; allowed {allowed:g}")
        p_text = (f'; <span class="nw">{_e(c.get("test", ""))} p_adj '
                  f"{_p(c.get('p_adjusted'))}</span>"
                  if c.get("p_adjusted") is not None else "")
        against = _e(c.get("baseline") or base_label or "the baseline")
        rel = (f" ({_amount(c.get('relative_drop'), True)})"
               if c.get("relative") and _finite(c.get("relative_drop")) else "")
        topics = [t for t in c.get("offending_topics") or [] if isinstance(t, dict)]
        topic_text = ", ".join(
            f"{_e(t.get('topic', ''))} ({'−' if _finite(t.get('drop')) else ''}"
            f"{_amount(abs(t['drop'])) if _finite(t.get('drop')) else '–'})"
            for t in topics[:20]) + (" …" if len(topics) > 20 else "")
        items.append(
            f'<li class="check" data-measure="{_e(c.get("measure", ""))}" '
            f'data-verdict="{_e(c.get("verdict", ""))}"><strong>{_e(c.get("measure", ""))}'
            f"</strong> {_e(c.get('verdict', ''))}: "
            f'<span class="nw">drop {_amount(c.get("drop"))}{rel} '
            f"[{_percent(level)}% CI {_amount(drop_ci[0])}, {_amount(drop_ci[1])}]</span> "
            f"against {against}{allowed_text}{p_text}"
            + (f'<br><span class="topics">offending topics: {topic_text}</span>'
               if topic_text else "") + "</li>")
    if not items:  # a verdict kept without checks: its topics, as they were
        topics = _offending(point, measure)
        if topics:
            items.append(f"<li>offending topics: {_topic_list(topics, 20)}</li>")
    return (f'<div class="latest latest-{verdict}" role="note"><span class="head">Latest gate '
            f'({_e(point.get("label", ""))}): {_e(str(verdict).upper())}</span>'
            + (f'<ul>{"".join(items)}</ul>' if items else "") + "</div>")


def render_trend(doc: dict, link: Callable[[dict, dict | None], str],
                 title: str | None = None) -> str:
    """The trend page of ``doc`` (a trend document); ``link(point, previous)`` gives the URL a
    point leads to (its comparison with ``previous``, or the result itself when None)."""
    system, measure = str(doc.get("system", "")), str(doc.get("measure", ""))
    points = doc.get("points") or []
    title = title or f"{system}: {measure} over time"
    base = doc.get("baseline_point")
    body = [f"<style>{TREND_CSS}</style>", *_head(title, None)]
    if points and _verdict(points[-1]) is not None:
        body.append(_gate_box(points[-1], measure, base.get("label") if base else None))
    total = doc.get("total", len(points))
    first, last_day = (_day(points[0].get("created_at")), _day(points[-1].get("created_at"))) \
        if points else ("–", "–")
    shown_note = (f"the newest {len(points)} of {total}" if total > len(points)
                  else f"{len(points)}")
    if base:
        baseline = f"{_e(base.get('label', ''))} ({_num(base.get('mean'))})"
    elif doc.get("baseline"):  # pinned, but without a value of this measure
        baseline = (f"result {_e(str(doc['baseline'])[:12])}… (pinned; it has no value of "
                    f"{_e(measure)})")
    else:
        baseline = "none pinned"
    body.append(f"<p>{shown_note} recorded result(s) with {_e(measure)}, {first} to "
                f"{last_day}. Baseline: {baseline}.</p>")
    if not points:
        body.append('<p class="note">No recorded result of this system has this measure.</p>')
        return _page(title, body)
    body.append(_chart(doc, link))
    body.append('<p class="note">Each point: the mean over the result\'s topics with its 95% '
                "Student-t confidence interval; a point links to the comparison with the "
                "result before it.</p>")
    rows = []
    for i, p in enumerate(points):
        previous = points[i - 1] if i else None
        verdict = _verdict(p)
        # (a pass's dropping topics stayed within the gate: not offenders)
        topics = _offending(p, measure) if verdict in ("fail", "undecided") else []
        cell = "–" if verdict is None else _e(verdict) + (
            f" ({_topic_list(topics, 10)})" if topics else "")
        created = str(p.get("created_at", ""))
        is_base = base is not None and p.get("id") == base.get("id")
        rows.append(
            f'<tr class="verdict-{verdict or "none"}"><td class="label" '
            f'title="{_e(p.get("label", ""))}">{_e(p.get("label", ""))}'
            + (" (baseline)" if is_base else "") + "</td>"
            f'<td class="mono">{_e(p.get("commit") or "–")}</td>'
            f'<td title="{_e(created)}">{_e(created[:19].replace("T", " "))}</td>'
            f'<td class="n">{_num(p.get("mean"))} [{_num(p.get("ci_low"))}, '
            f'{_num(p.get("ci_high"))}]</td><td class="n">{_num(p.get("n_topics"))}</td>'
            f"<td>{cell}</td>"
            f'<td><a href="{_e(link(p, previous))}">'
            + ("vs previous" if previous is not None else "result") + "</a></td></tr>")
    body += ["<h2>Results</h2>", _table(["label", "commit", "recorded (UTC)",
                                         f"{measure} [95% CI]", "topics", "gate", ""],
                                        rows[::-1], "trend")]
    # (the table newest first, as a system's results are listed)
    return _page(title, body)
