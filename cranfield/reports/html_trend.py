"""The trend page: a system's recorded results over time (issue #18), :func:`render_trend`.

Room: cranfield/reports/ (the HTML pages).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .html_charts import (
    BOTTOM,
    LEFT,
    RIGHT,
    TOP,
    H,
    W,
    axes,
    labelled_bars,
    nice_ticks,
    svg_open,
    y_scale,
)
from .html_page import (
    DOWN,
    FLAT,
    PALETTE,
    UP,
    esc,
    finite,
    heading,
    num,
    page,
    pval,
    table,
    topic_list,
)

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
# Judgments that changed (issue #31): with more than one qrels version among the points
# (the document's ``series``), each version is a ``<polyline class="line series">`` of its own
# colour (``data-qrels-version``), its points ringed in that colour and on one time axis
# (a re-scored result keeps its original's time: the nights line up, one x label each), and
# each of the document's ``boundaries`` a ``<line class="boundary">`` labelled
# ``qrels A → B`` (``<text class="boundary-label">``): between the last result evaluated under
# A and the first under B, or, for a version only re-scoring reached, right of the last result
# evaluated. The legend names each series; the table gains a qrels column.
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
svg.trend .series{fill:none;stroke-width:2.5}
svg.trend .boundary{stroke:#555;stroke-width:2;stroke-dasharray:3 3}
svg.trend text.boundary-label{font-size:12px;fill:#333}
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
# a line per qrels version: Okabe & Ito colours other than the verdicts' and the baseline's
SERIES_COLOURS = (PALETTE[0], PALETTE[1], PALETTE[5], PALETTE[6], PALETTE[7])
BOUNDARY_COLOUR = "#555555"
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
    elif shape == "line":
        inner = f'<line x1="0" x2="26" y1="7" y2="7" stroke="{colour}" stroke-width="3"/>'
    elif shape == "boundary":
        inner = (f'<line x1="13" x2="13" y1="0" y2="14" stroke="{colour}" stroke-width="2" '
                 'stroke-dasharray="3 3"/>')
    else:
        inner = (f'<line x1="0" x2="26" y1="7" y2="7" stroke="{colour}" stroke-width="2.5" '
                 'stroke-dasharray="8 5"/>')
    width = 26 if shape in ("dash", "line", "boundary") else 14
    return (f'<svg width="{width}" height="14" viewBox="0 0 {width} 14" aria-hidden="true">'
            f"{inner}</svg>")


def version_name(version: dict | None) -> str:
    """How the page names a qrels version: its stored ``id@version``, else its digest's
    start (inline qrels)."""
    version = version or {}
    if version.get("qrels_version"):
        return str(version["qrels_version"])
    sha = version.get("qrels_sha256")
    return f"sha256 {str(sha)[:12]}" if sha else "unknown qrels"


def _series_of(doc: dict) -> tuple[list[dict], dict[str, int]]:
    """The document's series when there are several (else []), and each point id's
    series."""
    series = [s for s in doc.get("series") or [] if isinstance(s, dict)]
    if len(series) < 2:
        return [], {}
    return series, {str(p.get("id")): k for k, s in enumerate(series)
                    for p in s.get("points") or []}


def _slots(points: Sequence[dict], several: bool) -> tuple[list[dict], list[int]]:
    """The x positions: one per point (one series), or one per recorded time when there are
    several series (a re-score shares its original's time), represented by the point
    recorded by an evaluation; and each point's position."""
    if not several:
        return list(points), list(range(len(points)))
    slots: list[dict] = []
    at: dict[str, int] = {}
    index = []
    for p in points:
        key = str(p.get("created_at") or p.get("id"))
        if key not in at:
            at[key] = len(slots)
            slots.append(p)
        index.append(at[key])
    return slots, index


def _chart(doc: dict, link: Callable[[dict, dict | None], str]) -> str:
    all_points = doc.get("points") or []
    series, series_of = _series_of(doc)
    slots, slot_of = _slots(all_points, bool(series))
    points = slots  # the x axis' points (all of them, unless several series share times)
    measure = str(doc.get("measure", ""))
    base = doc.get("baseline_point")
    values = [v for p in all_points
              for v in (p.get("mean"), p.get("ci_low"), p.get("ci_high")) if finite(v)]
    if base is not None and finite(base.get("mean")):
        values.append(base["mean"])
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (hi - lo) * 0.08 or 0.05
    yticks, lo, hi = nice_ticks(max(lo - pad, 0.0) if lo >= 0 else lo - pad, hi + pad)
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

    shown = set(labelled_bars(n, slot)) if turned else set(range(n))
    band = math.ceil(widest * math.sin(math.radians(X_LABEL_ANGLE))) + 4 if turned else 0
    height, bottom = H + band, BOTTOM + band
    sy = y_scale(lo, hi, height=height, bottom=bottom)
    foot = height - bottom

    title = f"{measure} of {doc.get('system', '')}: mean and 95% CI per recorded result"
    parts = [svg_open("trend", title, f' data-measure="{esc(measure)}"', height=height)]
    parts += axes([], yticks, sx, sy, f"{n} recorded result(s), oldest first, by {what}",
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
                     f'data-id="{esc(p.get("id", ""))}">{esc(labels[i])}<title>{esc(tip)}'
                     "</title></text>")
    base_id = base.get("id") if base is not None else None
    if base is not None and finite(base.get("mean")):
        y = sy(base["mean"])
        parts.append(f'<line class="baseline" x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" '
                     f'y2="{y:.1f}" data-id="{esc(base_id or "")}"><title>baseline '
                     f'{esc(base.get("label", ""))}: {num(base["mean"])}</title></line>'
                     f'<text x="{W - RIGHT - 4}" y="{y - 6:.1f}" text-anchor="end" '
                     f'fill="{BASELINE_COLOUR}">baseline {esc(_clip(str(base.get("label", ""))))}'
                     "</text>")
    position = {str(p.get("id")): slot_of[i] for i, p in enumerate(all_points)}
    if not series:
        line = [(sx(i), sy(p["mean"])) for i, p in enumerate(points)
                if finite(p.get("mean"))]
        if len(line) > 1:
            parts.append('<polyline class="line" points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in line) + '"/>')
    for k, s in enumerate(series):
        colour = SERIES_COLOURS[k % len(SERIES_COLOURS)]
        line = [(sx(position[str(p.get("id"))]), sy(p["mean"])) for p in s.get("points") or []
                if finite(p.get("mean")) and str(p.get("id")) in position]
        parts.append(f'<polyline class="line series" data-series="{k}" '
                     f'data-qrels-version="{esc(version_name(s))}" style="stroke:{colour}" '
                     'points="' + " ".join(f"{x:.1f},{y:.1f}" for x, y in line) + '">'
                     f"<title>qrels {esc(version_name(s))}</title></polyline>")
    parts += _boundaries(doc, position, sx, n, foot)
    previous_in: dict[int, dict] = {}
    for i, p in enumerate(all_points):
        k = series_of.get(str(p.get("id")), 0)
        previous = previous_in.get(k)
        mean = p.get("mean")
        if not finite(mean):
            previous_in[k] = p
            continue
        x, y = sx(slot_of[i]), sy(mean)
        if finite(p.get("ci_low")) and finite(p.get("ci_high")):
            parts.append(f'<line class="ci" x1="{x:.1f}" x2="{x:.1f}" '
                         f'y1="{sy(p["ci_low"]):.1f}" y2="{sy(p["ci_high"]):.1f}"/>')
        verdict = _verdict(p)
        colour, what_gate = VERDICT_STYLE[verdict]
        is_base = base_id is not None and p.get("id") == base_id
        tip = (f"{p.get('label', '')} ({_day(p.get('created_at'))}): {num(mean)} "
               f"[{num(p.get('ci_low'))}, {num(p.get('ci_high'))}]; {what_gate}"
               + ("; the pinned baseline" if is_base else ""))
        data = (f'data-id="{esc(p.get("id", ""))}" data-mean="{mean:.6g}" '
                f'data-verdict="{verdict or "none"}"')
        if is_base:  # the baseline's own point: a diamond in its colour (a verdict's ring)
            r = 9.5
            ring = f' style="stroke:{colour};stroke-width:3"' if verdict else ""
            mark = (f'<path class="baseline-mark" d="M{x:.1f} {y - r:.1f}L{x + r:.1f} '
                    f'{y:.1f}L{x:.1f} {y + r:.1f}L{x - r:.1f} {y:.1f}Z" '
                    f'fill="{BASELINE_COLOUR}"{ring} {data} data-baseline="true">'
                    f"<title>{esc(tip)}</title></path>")
        elif series:  # ringed in its series' colour; filled with it when no gate checked it
            ring = SERIES_COLOURS[k % len(SERIES_COLOURS)]
            radius = 7 if verdict == "fail" else 6
            mark = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" '
                    f'fill="{colour if verdict else ring}" style="stroke:{ring};stroke-width:2.5"'
                    f' {data} data-series="{k}"><title>{esc(tip)}; qrels '
                    f"{esc(version_name(series[k]))}</title></circle>")
        else:
            radius = 7 if verdict == "fail" else 5.5
            mark = (f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{radius}" fill="{colour}" '
                    f"{data}><title>{esc(tip)}</title></circle>")
        parts.append(f'<a class="point" href="{esc(link(p, previous))}">{mark}</a>')
        previous_in[k] = p
    parts.append("</svg>")
    # the legend's verdict swatches stay squares: round marks on the page are points only
    legend = "".join(f'<li><span class="sw" style="background:{c}"></span>{esc(label)}</li>'
                     for c, label in VERDICT_STYLE.values())
    if base is not None:
        name = esc(_clip(str(base.get("label", "")), 40))
        if base_id is not None and any(p.get("id") == base_id for p in points):
            legend += (f'<li class="baseline-point">{_legend_mark("diamond", BASELINE_COLOUR)}'
                       f"pinned baseline: {name}</li>")
        legend += (f'<li>{_legend_mark("dash", BASELINE_COLOUR)}the pinned baseline\'s mean'
                   "</li>")
    for k, ser in enumerate(series):
        legend += (f'<li class="series" data-series="{k}">'
                   f"{_legend_mark('line', SERIES_COLOURS[k % len(SERIES_COLOURS)])}"
                   f"qrels {esc(version_name(ser))} ({len(ser.get('points') or [])} "
                   "result(s))</li>")
    if series and doc.get("boundaries"):
        legend += (f'<li>{_legend_mark("boundary", BOUNDARY_COLOUR)}where the qrels changed'
                   "</li>")
    return "".join(parts) + f'<ul class="legend">{legend}</ul>'


def _boundaries(doc: dict, position: dict[str, int], sx: Callable[[float], float], n: int,
                foot: float) -> list[str]:
    """The document's qrels boundaries as labelled vertical lines: between the positions of
    ``after`` and ``before``, or half a step right of ``after`` (within the chart) when the
    new version has no result of its own evaluated (re-scores only)."""
    out = []
    step = (sx(1) - sx(0)) if n > 1 else 40.0
    for b in doc.get("boundaries") or []:
        if not isinstance(b, dict) or str(b.get("after")) not in position:
            continue
        x0 = sx(position[str(b["after"])])
        if b.get("before") is not None and str(b["before"]) in position:
            x = (x0 + sx(position[str(b["before"])])) / 2
        else:
            x = min(x0 + step / 2, W - RIGHT - 2)
        text = f"qrels {version_name(b.get('from'))} → {version_name(b.get('to'))}"
        anchor, dx = ("end", -4) if x > W / 2 else ("start", 4)
        out.append(f'<line class="boundary" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" '
                   f'y2="{foot}" data-from="{esc(version_name(b.get("from")))}" '
                   f'data-to="{esc(version_name(b.get("to")))}"><title>{esc(text)}</title>'
                   f'</line><text class="boundary-label" x="{x + dx:.1f}" y="{TOP + 12}" '
                   f'text-anchor="{anchor}">{esc(text)}</text>')
    return out


def _percent(level: float) -> str:
    """A confidence level as a percentage's digits (0.95 -> 95, 0.975 -> 97.5)."""
    return f"{level * 100:.6g}"


def _amount(value, relative: bool = False) -> str:
    if not finite(value):
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
        level = c.get("ci_level") if finite(c.get("ci_level")) else 0.95
        allowed = c.get("max_drop")
        allowed_text = ("" if not finite(allowed) else
                        f"; allowed {allowed * 100:g}%" if c.get("relative") else
                        f"; allowed {allowed:g}")
        p_text = (f'; <span class="nw">{esc(c.get("test", ""))} p_adj '
                  f"{pval(c.get('p_adjusted'))}</span>"
                  if c.get("p_adjusted") is not None else "")
        against = esc(c.get("baseline") or base_label or "the baseline")
        rel = (f" ({_amount(c.get('relative_drop'), True)})"
               if c.get("relative") and finite(c.get("relative_drop")) else "")
        topics = [t for t in c.get("offending_topics") or [] if isinstance(t, dict)]
        topic_text = ", ".join(
            f"{esc(t.get('topic', ''))} ({'−' if finite(t.get('drop')) else ''}"
            f"{_amount(abs(t['drop'])) if finite(t.get('drop')) else '–'})"
            for t in topics[:20]) + (" …" if len(topics) > 20 else "")
        items.append(
            f'<li class="check" data-measure="{esc(c.get("measure", ""))}" '
            f'data-verdict="{esc(c.get("verdict", ""))}"><strong>{esc(c.get("measure", ""))}'
            f"</strong> {esc(c.get('verdict', ''))}: "
            f'<span class="nw">drop {_amount(c.get("drop"))}{rel} '
            f"[{_percent(level)}% CI {_amount(drop_ci[0])}, {_amount(drop_ci[1])}]</span> "
            f"against {against}{allowed_text}{p_text}"
            + (f'<br><span class="topics">offending topics: {topic_text}</span>'
               if topic_text else "") + "</li>")
    if not items:  # a verdict kept without checks: its topics, as they were
        topics = _offending(point, measure)
        if topics:
            items.append(f"<li>offending topics: {topic_list(topics, 20)}</li>")
    return (f'<div class="latest latest-{verdict}" role="note"><span class="head">Latest gate '
            f'({esc(point.get("label", ""))}): {esc(str(verdict).upper())}</span>'
            + (f'<ul>{"".join(items)}</ul>' if items else "") + "</div>")


def render_trend(doc: dict, link: Callable[[dict, dict | None], str],
                 title: str | None = None) -> str:
    """The trend page of ``doc`` (a trend document); ``link(point, previous)`` gives the URL a
    point leads to (its comparison with ``previous``, or the result itself when None)."""
    system, measure = str(doc.get("system", "")), str(doc.get("measure", ""))
    points = doc.get("points") or []
    title = title or f"{system}: {measure} over time"
    base = doc.get("baseline_point")
    body = [f"<style>{TREND_CSS}</style>", *heading(title, None)]
    if points and _verdict(points[-1]) is not None:
        body.append(_gate_box(points[-1], measure, base.get("label") if base else None))
    total = doc.get("total", len(points))
    first, last_day = (_day(points[0].get("created_at")), _day(points[-1].get("created_at"))) \
        if points else ("–", "–")
    shown_note = (f"the newest {len(points)} of {total}" if total > len(points)
                  else f"{len(points)}")
    if base:
        baseline = f"{esc(base.get('label', ''))} ({num(base.get('mean'))})"
    elif doc.get("baseline"):  # pinned, but without a value of this measure
        baseline = (f"result {esc(str(doc['baseline'])[:12])}… (pinned; it has no value of "
                    f"{esc(measure)})")
    else:
        baseline = "none pinned"
    body.append(f"<p>{shown_note} recorded result(s) with {esc(measure)}, {first} to "
                f"{last_day}. Baseline: {baseline}.</p>")
    if not points:
        body.append('<p class="note">No recorded result of this system has this measure.</p>')
        return page(title, body)
    body.append(_chart(doc, link))
    series, series_of = _series_of(doc)
    body.append('<p class="note">Each point: the mean over the result\'s topics with its 95% '
                "Student-t confidence interval; a point links to the comparison with the "
                "result before it" + (" under the same qrels. A line per qrels version: a "
                "result re-scored under a new version keeps its original's time."
                if series else ".") + "</p>")
    rows = []
    previous_in: dict[int, dict] = {}
    for p in points:
        k = series_of.get(str(p.get("id")), 0)
        previous = previous_in.get(k)
        previous_in[k] = p
        qrels_cell = (f'<td class="mono">{esc(version_name(series[k]))}</td>' if series
                      else "")
        verdict = _verdict(p)
        # (a pass's dropping topics stayed within the gate: not offenders)
        topics = _offending(p, measure) if verdict in ("fail", "undecided") else []
        cell = "–" if verdict is None else esc(verdict) + (
            f" ({topic_list(topics, 10)})" if topics else "")
        created = str(p.get("created_at", ""))
        is_base = base is not None and p.get("id") == base.get("id")
        rows.append(
            f'<tr class="verdict-{verdict or "none"}"><td class="label" '
            f'title="{esc(p.get("label", ""))}">{esc(p.get("label", ""))}'
            + (" (baseline)" if is_base else "") + "</td>"
            f'<td class="mono">{esc(p.get("commit") or "–")}</td>'
            f'<td title="{esc(created)}">{esc(created[:19].replace("T", " "))}</td>'
            f'<td class="n">{num(p.get("mean"))} [{num(p.get("ci_low"))}, '
            f'{num(p.get("ci_high"))}]</td><td class="n">{num(p.get("n_topics"))}</td>'
            f"<td>{cell}</td>{qrels_cell}"
            f'<td><a href="{esc(link(p, previous))}">'
            + ("vs previous" if previous is not None else "result") + "</a></td></tr>")
    body += ["<h2>Results</h2>", table(["label", "commit", "recorded (UTC)",
                                        f"{measure} [95% CI]", "topics", "gate",
                                        *(["qrels"] if series else []), ""],
                                       rows[::-1], "trend")]
    # (the table newest first, as a system's results are listed)
    return page(title, body)
