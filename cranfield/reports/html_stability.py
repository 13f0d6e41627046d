"""The stability page: do the conclusions hold between two judgments? (issue #31),
:func:`render_stability`.

Room: cranfield/reports/ (the HTML pages).

Made from the stability document ``GET /v1/stability`` answers in JSON (made by
:func:`cranfield.compare.stability.stability`): the statistics with their bootstrap CIs in
``<table class="statistics">`` (a row ``data-statistic`` per statistic, its value in
``data-value``); the rankings under both judgments as a slope chart (``<svg class="chart
ranks">``: one ``<line class="rank-line">`` per system with ``data-system``, ``data-from`` and
``data-to`` ranks, a system that moved drawn in colour); the systems' table; the pairs whose
significant difference appeared, vanished or flipped (``<table class="changed">``, a row
``data-status`` each) and the pairs' counts. The report pages' style: inline CSS and SVG, no
script, no external asset; every text from the document escaped.
"""

from __future__ import annotations

from .html_charts import W
from .html_page import DOWN, FLAT, UP, esc, heading, num, page, pval, table

LABELS = {"kendall_tau": ("Kendall τ_b", "rank correlation, every swap alike"),
          "tau_ap": ("τ_AP (to against from)", "swaps near the top cost more (Yilmaz et al. "
                     "2008)"),
          "tau_ap_symmetric": ("τ_AP, symmetric", "the mean of τ_AP both ways"),
          "rbo": ("RBO_ext", "rank-biased overlap (Webber et al. 2010)")}
STATUS_STYLE = {"flipped": ("st-flip", "flipped"), "vanished": ("st-gone", "vanished"),
                "appeared": ("st-new", "appeared")}
STABILITY_CSS = f"""
svg.ranks .rank-line{{stroke:{FLAT};stroke-width:1.5}}
svg.ranks .rank-line.up{{stroke:{UP};stroke-width:2.5}}
svg.ranks .rank-line.down{{stroke:{DOWN};stroke-width:2.5}}
svg.ranks text.name{{font-size:12px}}
tr.st-flip td.status{{color:#8a3100;font-weight:700}}
tr.st-gone td.status{{color:#555;font-weight:700}}
tr.st-new td.status{{color:#00553f;font-weight:700}}
.verdict{{font-size:1.1em;padding:.45em .9em;border-radius:6px;margin:.6em 0;
 background:#f3f4f6;border:2px solid #999}}
"""
ROW = 22          # px between two ranks in the slope chart
MOST_RANKED = 60  # systems drawn in the slope chart (the table lists them all)
NAME_CHARS = 28


def _clip(text: str, most: int = NAME_CHARS) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _statistics(doc: dict) -> str:
    level = f"{round(100 * doc['bootstrap']['level'], 6):g}%"
    rows = []
    for key, (label, what) in LABELS.items():
        s = doc["statistics"][key]
        if key == "rbo":
            label += f" (p = {doc['persistence']:g})"
        value = "" if s["value"] is None else f' data-value="{s["value"]!r}"'
        rows.append(f'<tr data-statistic="{key}"{value}><td>{esc(label)}</td>'
                    f'<td class="n">{num(s["value"])}</td>'
                    f'<td class="n">[{num(s["ci_low"])}, {num(s["ci_high"])}]</td>'
                    f'<td class="note">{esc(what)}</td></tr>')
    return table(["statistic", "value", f"{level} CI (bootstrap)", ""], rows, "statistics")


def _slope_chart(systems: list[dict]) -> str:
    """Each system's rank under ``from`` (left) joined to its rank under ``to`` (right)."""
    shown = [s for s in systems if max(s["from"]["rank"], s["to"]["rank"]) <= MOST_RANKED]
    n = min(len(systems), MOST_RANKED)
    height = 40 + ROW * n
    left, right = 250, W - 250
    out = [f'<svg class="chart ranks" viewBox="0 0 {W} {height}" width="{W}" '
           f'height="{height}" role="img" preserveAspectRatio="xMinYMin meet">'
           "<title>The systems' ranks under both judgments</title>",
           f'<text x="{left}" y="16" text-anchor="middle">from</text>',
           f'<text x="{right}" y="16" text-anchor="middle">to</text>']

    def y(rank: int) -> float:
        return 30 + ROW * (rank - 1)

    for s in shown:
        a, b = s["from"]["rank"], s["to"]["rank"]
        cls = "up" if b < a else "down" if b > a else "same"
        name = esc(s["name"])
        out.append(f'<line class="rank-line {cls}" data-system="{name}" data-from="{a}" '
                   f'data-to="{b}" x1="{left}" y1="{y(a)}" x2="{right}" y2="{y(b)}">'
                   f"<title>{name}: {a} → {b}</title></line>")
        out.append(f'<text class="name" x="{left - 8}" y="{y(a) + 4}" text-anchor="end">'
                   f"{a}. {esc(_clip(s['name']))}</text>")
        out.append(f'<text class="name" x="{right + 8}" y="{y(b) + 4}">{b}. '
                   f"{esc(_clip(s['name']))}</text>")
    out.append("</svg>")
    return "".join(out)


def _systems(doc: dict) -> str:
    rows = []
    for s in sorted(doc["systems"], key=lambda s: s["from"]["rank"]):
        f, t = s["from"], s["to"]
        rows.append(f'<tr data-system="{esc(s["name"])}"><td>{esc(s["name"])}</td>'
                    f'<td class="n">{num(f["mean"])}</td><td class="n">{f["rank"]}</td>'
                    f'<td class="n">{num(t["mean"])}</td><td class="n">{t["rank"]}</td>'
                    f'<td>{esc(s.get("paired_by", "–"))}</td></tr>')
    return table(["system", "mean (from)", "rank", "mean (to)", "rank", "paired by"], rows,
                 "systems")


def _changed(doc: dict) -> str:
    rows = []
    for p in doc["changed_pairs"]:
        cls, label = STATUS_STYLE[p["status"]]
        f, t = p["from"], p["to"]
        rows.append(f'<tr class="{cls}" data-status="{esc(p["status"])}" '
                    f'data-a="{esc(p["a"])}" data-b="{esc(p["b"])}">'
                    f'<td>{esc(p["b"])} − {esc(p["a"])}</td><td class="status">{label}</td>'
                    f'<td class="n">{num(f["mean_diff"])}</td><td class="n">'
                    f'{pval(f["p_adjusted"])}</td><td class="n">{num(t["mean_diff"])}</td>'
                    f'<td class="n">{pval(t["p_adjusted"])}</td></tr>')
    return table(["pair (b − a)", "", "difference (from)", "p adjusted", "difference (to)",
                  "p adjusted"], rows, "changed")


def render_stability(doc: dict, title: str | None = None) -> str:
    """The stability page of ``doc`` (a stability document)."""
    measure = str(doc.get("measure", ""))
    judged = f" from {doc['from']} to {doc['to']}" if "from" in doc and "to" in doc else ""
    title = title or f"Do the conclusions hold? {measure}{judged}"
    tested = doc["pairs_tested"]
    counts = doc["pair_counts"]
    changed = len(doc["changed_pairs"])
    subtitle = (f"{doc['n_systems']} systems with results under both judgments, "
                f"{doc['n_topics']} topics")
    body = [f"<style>{STABILITY_CSS}</style>", *heading(title, subtitle)]
    body.append(f'<p class="verdict">{changed} of {sum(counts.values())} pairs changed: '
                f"{counts['appeared']} appeared, {counts['vanished']} vanished, "
                f"{counts['flipped']} flipped ({esc(tested['test'])} test, "
                f"{esc(tested['correction'])} correction, α = {tested['alpha']:g}).</p>")
    if doc.get("warnings"):
        body.append('<div class="warn-box"><ul>' + "".join(
            f"<li>{esc(w.get('message', ''))}</li>" for w in doc["warnings"]) + "</ul></div>")
    left = doc.get("topics_left_out") or {}
    if left.get("count"):
        body.append(f'<p class="note">{left["count"]} topic(s) left out: a chosen result '
                    "has no value for them.</p>")
    boot = doc["bootstrap"]
    body += ["<h2>Rank correlation</h2>", _statistics(doc),
             f'<p class="note">CIs: {esc(boot["method"])}, {boot["resamples"]} resamples, '
             f"seed {boot['seed']}.</p>"]
    if doc["systems"]:
        body += ["<h2>Ranks</h2>", _slope_chart(doc["systems"])]
        if len(doc["systems"]) > MOST_RANKED:
            body.append(f'<p class="note">The chart draws the systems ranked in the top '
                        f"{MOST_RANKED} under both judgments; the table lists all "
                        f"{len(doc['systems'])}.</p>")
        body.append(_systems(doc))
    body.append("<h2>Significant differences that changed</h2>")
    if doc["changed_pairs"]:
        body.append(_changed(doc))
    else:
        body.append('<p class="note">No significant difference appeared, vanished or '
                    "flipped.</p>")
    body.append(f'<p class="note">Pairs held: {counts["held"]}; significant under neither: '
                f'{counts["none"]}.</p>')
    return page(title, body)
