"""Shared parts of the self-contained HTML pages: the page frame (its Content-Security-Policy
and inline CSS), the colours, escaping, number formatting, tables and headings.

Room: cranfield/reports/ (the HTML pages).

Every piece of text taken from a document is escaped (:func:`esc`); numbers have 4 decimals
and missing values (None, NaN) show as "–" (:func:`num`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np

# Okabe & Ito's colour-blind-safe palette, most legible first; past 8 runs lines get dashes
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000",
           "#F0E442")
UP, DOWN, FLAT = "#009E73", "#D55E00", "#999999"
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


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def finite(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and math.isfinite(v)


def num(v, digits: int = 4) -> str:
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
    return esc(v)


def pval(v) -> str:
    return "&lt;0.0001" if finite(v) and 0 <= v < 0.00005 else num(v)


def table(head: Sequence[str], rows: Sequence[str], cls: str = "") -> str:
    """``head`` cells are escaped; ``rows`` are ready-made ``<tr>`` markup."""
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
    return (f'<table class="{cls}"><thead><tr>{ths}</tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def page(title: str, body: Sequence[str]) -> str:
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def topic_list(topics: Sequence, most: int) -> str:
    """The first ``most`` topics, escaped, comma-separated; " …" when there are more."""
    return ", ".join(esc(t) for t in topics[:most]) + (" …" if len(topics) > most else "")


def heading(title: str, subtitle: str | None) -> list[str]:
    return [f"<h1>{esc(title)}</h1>"] + (
        [f'<p class="subtitle">{esc(subtitle)}</p>'] if subtitle else [])

