"""Self-contained HTML reports of evaluation and comparison documents.

Room: cranfield/reports/ (the HTML pages).

One HTML5 page per document, with inline CSS and inline SVG charts: no scripts, no template
engine, no external assets (a Content-Security-Policy forbids loading any), so the page can
be saved, mailed or attached to a CI job and opens offline. Every piece of text taken from the
document is escaped; numbers have 4 decimals and missing values (None, NaN) show as "–".

Pages: :func:`render_evaluation` and :func:`render_comparison` (a system's trend over time is
:func:`cranfield.reports.html_trend.render_trend`; the shared page parts are in
:mod:`cranfield.reports.html_page`, the charts in :mod:`cranfield.reports.html_charts`).

Charts are ``<svg class="chart …">`` elements with a ``<title>`` and a viewBox; their data
elements carry ``data-run`` (lines) or ``data-topic`` (bars) attributes; per-topic charts
(``data-measure``: one per measure) label every k-th bar with its topic, so that labels never
overlap, the first and last bar always. A page opens with its title, then (comparisons) the
gate's verdict, then the input warnings.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from .html_charts import bar_chart, pr_chart
from .html_page import esc, finite, heading, num, page, pval, table, topic_list

TESTS = (("randomization", "randomization test"), ("t_test", "paired t-test"),
         ("bootstrap", "paired bootstrap test"), ("wilcoxon", "Wilcoxon signed-rank test"))
_FAMILY_KEY = {"t_test": "t"}


def _ci(mean, lo, hi) -> str:
    if lo is None and hi is None:
        return num(mean)
    return f"{num(mean)} [{num(lo)}, {num(hi)}]"


def _short(digest, n: int = 12) -> str:
    if not digest:
        return "–"
    s = str(digest)
    return f'<span class="mono" title="{esc(s)}">{esc(s[:n])}{"…" if len(s) > n else ""}</span>'


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
    return ", ".join(f'<code class="option">{esc(_json(str(k)))}: {esc(_json(v))}</code>'
                     for k, v in opts.items()) or "–"


# The curves' label (cranfield.reports.curves.INTERPOLATION_NOTE in a sentence for the page).
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
        run = f' data-run="{esc(w["run"])}"' if w.get("run") is not None else ""
        items.append(f'<li class="warn"{run}><code>{esc(w.get("code", ""))}</code> '
                     f'{esc(w.get("message", ""))}'
                     f'{f" (topics: {topic_list(topics, 10)})" if topics else ""}</li>')
    return ('<h2 id="warnings">Warnings</h2>'
            + (f'<div class="warn warn-box" role="note"><ul>{"".join(items)}</ul></div>'
               if items else '<p class="no-warnings">None.</p>'))


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
    body = [*heading(title, subtitle), _warnings(doc), "<h2>Provenance</h2>",
            '<dl class="prov">']
    opts = prov.get("options") or {}
    for label, value in (
            ("engine", esc(f"{prov.get('engine', 'cranfield')} {prov.get('engine_version', '')}")),
            ("profile", esc(prov.get("profile", "–"))), ("runid", esc(runid)),
            ("run SHA-256", _short(prov.get("run_sha256"))),
            ("qrels SHA-256", _short(prov.get("qrels_sha256"))),
            ("qrels version", esc(prov.get("qrels_version", "–"))),
            ("options", _options(opts))):
        body.append(f"<dt>{label}</dt><dd>{value}</dd>")
    topics = doc.get("topics") or {}
    body.append("</dl><h2>Topics</h2><p>" + "; ".join(
        f"{len(topics.get(k) or [])} {label}" for k, label in (
            ("evaluated", "evaluated"), ("run_only", "only in the run (not evaluated)"),
            ("qrels_only", "judged but missing from the run"))) + "</p>")
    agg = doc.get("aggregate") or {}
    rows = [f'<tr><td><code>{esc(m.get("key"))}</code></td><td class="mono">'
            f'{esc(m.get("canonical", ""))}</td><td class="n">{num(agg.get(m.get("key")))}</td>'
            f'<td>{esc(m.get("aggregate", ""))}</td></tr>' for m in doc.get("measures") or []]
    body += ["<h2>Measures</h2>", table(["measure", "canonical", "value", "aggregate"], rows,
                                         "measures")]
    if doc.get("segments") is not None:  # topic metadata (docs/segments.md)
        keys = [m.get("key") for m in doc.get("measures") or []
                if m.get("key") in (doc.get("weighted") or {})]
        rows = [f"<tr><td>{esc(label)}</td><td class=\"n\">{num(seg.get('topics'))}</td>"
                + "".join(f'<td class="n">{num((seg.get("aggregate") or {}).get(k))}</td>'
                          for k in keys) + "</tr>"
                for label, seg in doc["segments"].items()]
        rows.append("<tr><td><em>weighted</em></td><td></td>" + "".join(
            f'<td class="n">{num(doc["weighted"].get(k))}</td>' for k in keys) + "</tr>")
        body += ["<h2>Segments</h2>", table(["segment", "topics", *keys], rows, "segments"),
                 '<p class="note">Each segment: the summary over the evaluated topics carrying '
                 "its label; weighted: each topic weighted by the topic metadata (1 where it "
                 "has none).</p>"]
    if doc.get("efficiency"):
        eff = doc["efficiency"]
        body.append("<h2>Efficiency</h2><p>" + ", ".join(
            f"{esc(k)} {num(v) if not isinstance(v, list) else len(v)}" for k, v in eff.items()
            if k != "method") + "</p>")
    curves = doc.get("curves")
    if curves:
        n = curves.get("topics_averaged")
        body += ["<h2>Precision–recall</h2>", pr_chart(
            [(str(runid), curves.get("recall_levels"), curves.get("mean_interpolated_precision"))],
            f"Mean 11-point interpolated precision of {runid}"),
            f'<p class="note">Mean over {num(n)} topic(s): the topics the measures above '
            f"average. {_INTERPOLATION_LABEL}</p>"]
    per_topic = doc.get("per_topic")
    keys = _chart_measures(doc.get("measures") or [],
                           {k for row in (per_topic or {}).values() for k in row})
    if per_topic and keys:
        body.append("<h2>Per topic</h2>")
    for key in keys:  # (none without per_topic)
        items = [(str(t), float(row[key])) for t, row in per_topic.items()
                 if finite(row.get(key))]
        if not items:
            continue
        items.sort(key=lambda tv: -tv[1])
        body += [f"<h3>Per topic: {esc(key)}</h3>", bar_chart(
            "topic-bars", f"{key} per topic", items, key, measure=str(key),
            xlabel=f"topics, sorted by {key}, highest first")]
        if len(items) < len(per_topic):
            body.append(f'<p class="note">{len(per_topic) - len(items)} topic(s) without a '
                        "value are not drawn.</p>")
    return page(title, body)


def _offender(t) -> str:
    """A gate's offending topic: an id, or ``{"topic", "drop", …}``."""
    if isinstance(t, dict):
        return f"{esc(t.get('topic', ''))} ({num(t.get('drop'))})"
    return esc(t)


def _test_name(doc: dict, test: str) -> str | None:
    pairs = doc.get("pairs") or []
    present = [k for k, _ in TESTS if any(isinstance(p.get(k), dict) for p in pairs)]
    return test if test in present else (present[0] if present else None)


def render_comparison(doc: dict, title: str | None = None, *,
                      test: str = "randomization", subtitle: str | None = None) -> str:
    """An HTML page for a comparison document (``cranfield.compare.comparison``): the title
    ("Comparison: a vs b" by default) and ``subtitle`` under it, the gate verdict (when present)
    first, the input warnings, the gate's checks, the runs, a measures table (one row per run, one
    column per measure: mean [95% CI], with ▲/▼ where the run is significantly better/worse than the
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
    _alpha = f"{alpha:g}" if finite(alpha) else num(alpha)
    measures = [m.get("key") for m in doc.get("measures") or []]
    tag = " (baseline)" if doc.get("baseline") is not None else " (reference)"
    body = heading(title, subtitle)
    gate = doc.get("gate")
    if gate:
        verdict = str(gate.get("verdict", "unknown"))
        cls = verdict if verdict in ("pass", "fail") else "unknown"
        body.append(f'<div class="gate gate-{cls}">Gate: {esc(verdict.upper())}</div>')
    body.append(_warnings(doc))
    if gate:
        rows = [f'<tr><td>{esc(c.get("candidate", ""))}</td><td>{esc(c.get("baseline", ""))}</td>'
                f'<td>{esc(c.get("measure", ""))}</td><td>{esc(c.get("verdict", ""))}</td><td>'
                + "<br>".join(esc(r) for r in c.get("reasons") or []) + "</td><td>"
                + ", ".join(_offender(t) for t in (c.get("offending_topics") or [])[:20])
                + "</td></tr>" for c in gate.get("checks") or []]
        body += ["<h2>Gate checks</h2>", table(
            ["candidate", "baseline", "measure", "verdict", "reasons",
             "offending topics (drop)"], rows, "gate-checks")]
    rows = [f"<tr><td>{esc(r.get('name'))}{tag if r.get('name') == ref else ''}</td>"
            f"<td>{esc(r.get('runid', ''))}</td><td class=\"n\">{num(r.get('topics_evaluated'))}"
            "</td></tr>" for r in doc.get("runs") or []]
    corr = doc.get("correction") or {}
    body += ["<h2>Runs</h2>", table(["run", "runid", "topics evaluated"], rows, "runs"),
             f"<p>{len(doc.get('topics') or [])} common topic(s); α = {_alpha}; "
             f"correction: {esc(corr.get('method', '–'))}.</p>"]
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
                if finite(padj) and padj < alpha:
                    up = diff > 0
                    mark = (f' <span class="sig-{"up" if up else "down"}" title="significantly '
                            f'{"better" if up else "worse"} than {esc(ref)} (adjusted p = '
                            f'{pval(padj)})">{"▲" if up else "▼"}</span>')
            cells.append(f'<td class="n">{_ci(s.get("mean"), s.get("ci_low"), s.get("ci_high"))}'
                         f"{mark}</td>")
        rows.append(f'<tr class="{"ref" if run == ref else "run"}"><td>{esc(run)}'
                    f'{tag if run == ref else ""}</td>'
                    + "".join(cells) + "</tr>")
    body += ["<h2>Measures</h2>", table(["run", *measures], rows, "summary")]
    fam = corr.get("family_size") or {}
    fam_n = fam.get(_FAMILY_KEY.get(tkey, tkey)) if tkey else None
    test_label = dict(TESTS).get(tkey, "no test")
    body.append(f'<p class="legend-sig">Cells: mean [{num(level * 100, 0)}% CI]. ▲ / ▼: '
                f"significantly higher / lower than {esc(ref)} — adjusted p &lt; α = "
                f"{_alpha} by the {esc(test_label)}, {esc(corr.get('method', 'no'))} "
                f"correction" + (f" over {num(fam_n)} comparisons" if fam_n else "") + ".</p>")
    tests = [(k, lab) for k, lab in TESTS if any(isinstance(p.get(k), dict)
                                                 for p in pairs.values())]
    rows = []
    for p in pairs.values():
        cells = [esc(p.get("measure")), esc(p.get("a")), esc(p.get("b"))]
        cells.append(_ci(p.get("mean_diff"), p.get("ci_low"), p.get("ci_high")))
        for k, _ in tests:
            b = p.get(k) or {}
            text = f"{pval(b.get('p_value'))} ({pval(b.get('p_adjusted'))})"
            sig = finite(b.get("p_adjusted")) and b["p_adjusted"] < alpha
            cells.append(f'<strong class="sig">{text}</strong>' if sig else text)
        cells.append(num((p.get("effect_size") or {}).get("cohens_dz")))
        cells.append(f"{num(p.get('wins'))}/{num(p.get('ties'))}/{num(p.get('losses'))}")
        cells.append(", ".join(f"{esc(x.get('topic'))} ({num(x.get('diff'))})"
                               for x in (p.get("largest_losses") or [])[:5]))
        rows.append("<tr>" + "".join(f'<td class="n">{c}</td>' if i > 2 and i < len(cells) - 1
                                     else f"<td>{c}</td>" for i, c in enumerate(cells)) + "</tr>")
    body += ["<h2>Pairs</h2>", table(["measure", "a", "b", "mean diff b − a [CI]",
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
                 pr_chart(series, "Mean 11-point interpolated precision per run"),
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
            body.append(f"<h3>Per topic: {esc(m)}</h3>")
            for run in runs:
                if run == ref:
                    continue
                vals = per_topic.get(run) or {}
                items = [(str(t), float(vals[t][m] - base[t][m])) for t in topics
                         if finite((vals.get(t) or {}).get(m))
                         and finite((base.get(t) or {}).get(m))]
                items.sort(key=lambda tv: -tv[1])
                body.append(f"<h4>{esc(m)}: {esc(run)} − {esc(ref)}</h4>")
                body.append(bar_chart(
                    "topic-diff", f"{m}: {run} − {ref} per topic", items, f"{m}: {run} − {ref}",
                    diff=True, run=str(run), measure=str(m),
                    xlabel=f"topics, sorted by {m} difference {run} − {ref}, largest gain "
                           "first"))
    return page(title, body)


def _segment_sections(doc: dict, tests, alpha: float) -> list[str]:
    """A comparison's segments (topic metadata, docs/segments.md): per segment its pairs,
    their p-values adjusted over the segment's own family; then the weighted means."""
    out: list[str] = []
    for label, seg in (doc.get("segments") or {}).items():
        fam = seg.get("family") or {}
        out.append(f"<h2>Segment {esc(label)}</h2><p>{len(seg.get('topics') or [])} common "
                   f"topic(s); p-values adjusted by {esc(fam.get('correction', '–'))} over this "
                   f"segment's {num(fam.get('tests'))} comparison(s).</p>")
        rows = []
        for p in seg.get("pairs") or []:
            cells = [esc(p.get("measure")), esc(p.get("a")), esc(p.get("b")),
                     _ci(p.get("mean_diff"), p.get("ci_low"), p.get("ci_high"))]
            for k, _ in tests:
                b = p.get(k) or {}
                text = f"{pval(b.get('p_value'))} ({pval(b.get('p_adjusted'))})"
                sig = finite(b.get("p_adjusted")) and b["p_adjusted"] < alpha
                cells.append(f'<strong class="sig">{text}</strong>' if sig else text)
            cells.append(f"{num(p.get('wins'))}/{num(p.get('ties'))}/{num(p.get('losses'))}")
            rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
        if rows:
            out.append(table(["measure", "a", "b", "mean diff b − a [CI]",
                              *(f"{lab}: p (adjusted)" for _, lab in tests), "W/T/L"], rows,
                             "segment-pairs"))
    weighted = doc.get("weighted") or {}
    if weighted:
        runs = [r.get("name") for r in doc.get("runs") or []]
        rows = [f"<tr><td>{esc(key)}</td>" + "".join(
            f'<td class="n">{num(per_run.get(r))}</td>' for r in runs) + "</tr>"
            for key, per_run in weighted.items()]
        out += ["<h2>Weighted means</h2>", table(["measure", *runs], rows, "weighted"),
                '<p class="note">Over the common topics, each weighted by the topic metadata '
                "(1 where it has none).</p>"]
    return out
