"""A comparison's gate as CI systems read verdicts: JUnit XML (one test case per gated check;
Jenkins, GitLab and GitHub test reporters show a failed check as a failed test), Markdown (a
table for a pull-request comment or ``$GITHUB_STEP_SUMMARY``), GitHub Actions workflow
commands (``::error``/``::warning`` annotations) and a short text.

Everything is rendered from a comparison document's ``gate`` (:mod:`cranfield.compare.gate`: the
checks with measure, candidate, baseline, means, drop, test, p-values and offending topics)
and its ``pairs`` (the CI of each mean difference); the standard library only, so ``cranfield
gate`` renders a service's document without the engine's numerics.
"""

from __future__ import annotations

import math
import re
from typing import Any
from xml.etree import ElementTree as ET

SUITE = "cranfield gate"
WORST_TOPICS = 5          # named in a failure's message and an annotation
WORST_TOPICS_TABLE = 10   # listed under the Markdown table per failed check
VERDICT_WORDS = {"pass": "PASS", "fail": "FAIL", "undecided": "UNDECIDED"}


def verdict(doc: dict) -> str | None:
    """The gate's overall verdict ("pass", "fail", "undecided"), None without a gate."""
    return (doc.get("gate") or {}).get("verdict")


def checks(doc: dict) -> list[dict]:
    """The gate's checks, each with ``ci``: the (low, high) interval of the mean difference
    candidate − baseline at the document's level, (None, None) when it has none."""
    out = []
    for check in (doc.get("gate") or {}).get("checks") or []:
        out.append(dict(check, ci=difference_ci(doc, check)))
    return out


def difference_ci(doc: dict, check: dict) -> tuple[float | None, float | None]:
    """The CI of candidate − baseline on the check's measure, from the document's pair of
    the two runs (its ``a − b`` turned round when the pair lists the candidate first)."""
    for pair in doc.get("pairs") or []:
        if pair.get("measure") != check["measure"]:
            continue
        low, high = pair.get("ci_low"), pair.get("ci_high")
        if (pair.get("a"), pair.get("b")) == (check["baseline"], check["candidate"]):
            return low, high
        if (pair.get("a"), pair.get("b")) == (check["candidate"], check["baseline"]):
            return (None if high is None else -high), (None if low is None else -low)
    return None, None


def level(doc: dict) -> float:
    """The confidence level of the document's intervals (0.95 unless it says otherwise)."""
    return float((doc.get("ci") or {}).get("level") or 1 - float(doc.get("alpha") or 0.05))


def _num(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if abs(value) < 0.5 * 10 ** -digits:
        value = 0.0  # not "-0.0000" for a rounding error's sign
    return f"{value:.{digits}f}"


def _p(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def _ci(ci: tuple, digits: int = 4) -> str:
    low, high = ci
    if low is None or high is None:
        return "–"
    return f"[{_num(low, digits)}, {_num(high, digits)}]"


def _drop(check: dict) -> str:
    text = _num(check.get("drop"))
    relative = check.get("relative_drop")
    if check.get("relative") and relative is not None:
        # a drop that rounds to 0.0% is shown without the sign of its rounding error
        text += f" ({0.0 if abs(relative) < 0.0005 else relative:.1%})"
    return text


def _allowed(check: dict) -> str:
    return (f"{check['max_drop']:.1%} of the baseline" if check.get("relative")
            else _num(check.get("max_drop")))


def worst_topics(check: dict, n: int = WORST_TOPICS) -> str:
    """``t03 (−0.8333), t08 (−0.5000)``: the check's worst topics and how much each dropped."""
    topics = check.get("offending_topics") or []
    return ", ".join(f"{t['topic']} (−{_num(t.get('drop'))})" for t in topics[:n])


def title(check: dict) -> str:
    """``map: candidate vs baseline``, a check's test case name."""
    return f"{check['measure']}: {check['candidate']} vs {check['baseline']}"


def message(check: dict, doc: dict) -> str:
    """One sentence about a check: measure, drop with its CI, adjusted p-value, worst topics."""
    parts = [f"{check['measure']} {check['candidate']} vs {check['baseline']}: "
             f"{VERDICT_WORDS.get(check.get('verdict'), check.get('verdict'))}; drop "
             f"{_drop(check)} (mean {_num(check.get('mean_baseline'))} → "
             f"{_num(check.get('mean_candidate'))}; allowed {_allowed(check)}), "
             f"{level(doc):.0%} CI of the difference {_ci(check['ci'])}, "
             f"p adjusted {_p(check.get('p_adjusted'))} ({check.get('test')}, alpha "
             f"{check.get('alpha')})"]
    worst = worst_topics(check)
    if worst:
        parts.append(f"; worst topics: {worst}")
    return "".join(parts)


# -- JUnit XML ----------------------------------------------------------------------------------

# characters XML 1.0 cannot carry, even escaped (a run named by a file name may hold them):
# ElementTree writes them as they are and every JUnit reader then refuses the whole report
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml(suite: ET.Element) -> str:
    for element in suite.iter():
        if element.text:
            element.text = _NOT_XML.sub("\ufffd", element.text)
        for key, value in element.attrib.items():
            element.attrib[key] = _NOT_XML.sub("\ufffd", value)
    ET.indent(suite)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            + ET.tostring(suite, encoding="unicode") + "\n")

def junit(doc: dict, system: str | None = None) -> str:
    """The gate as one JUnit ``<testsuite name="cranfield gate">``: a ``<testcase>`` per
    check (classname ``cranfield.gate.<system, else the candidate>``, name
    ``<measure>: <candidate> vs <baseline>``); a failed check has a ``<failure>`` whose
    message names the measure, the drop, its CI, the adjusted p-value and the worst topics,
    an undecided one a ``<failure type="undecided">`` (the gate fails closed); the reasons
    and the offending topics are the failure's text."""
    items = checks(doc)
    failed = sum(c.get("verdict") != "pass" for c in items)
    suite = ET.Element("testsuite", {"name": SUITE, "tests": str(len(items)),
                                     "failures": str(failed), "errors": "0", "skipped": "0"})
    props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", verdict(doc) or "none"),
                        ("correction", ((doc.get("gate") or {}).get("correction") or {})
                         .get("method", "")),
                        ("ci_level", f"{level(doc):g}")):
        ET.SubElement(props, "property", {"name": name, "value": str(value)})
    for check in items:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"cranfield.gate.{system or check['candidate']}",
            "name": title(check)})
        if check.get("verdict") == "pass":
            ET.SubElement(case, "system-out").text = "\n".join(check.get("reasons") or [])
            continue
        kind = "undecided" if check.get("verdict") == "undecided" else "regression"
        failure = ET.SubElement(case, "failure", {"message": message(check, doc),
                                                  "type": kind})
        lines = list(check.get("reasons") or [])
        topics = check.get("offending_topics") or []
        if topics:
            lines.append("offending topics (worst first): topic baseline candidate drop")
            lines += [f"  {t['topic']} {_num(t.get('baseline'))} {_num(t.get('candidate'))} "
                      f"{_num(t.get('drop'))}" for t in topics]
        failure.text = "\n".join(lines)
    return _xml(suite)


# -- Markdown -----------------------------------------------------------------------------------

MARKDOWN_HEAD = ("measure", "baseline mean", "candidate mean", "drop",
                 "95% CI of the difference", "p (adjusted)", "verdict")


# what Markdown would read as markup in a name or topic id (a table's pipe, a backslash that
# would escape it, HTML, a link, emphasis, a code span): each backslash-escaped, so a run
# file's or a record's text reads as it is and cannot reshape the table
_MARKUP = re.compile(r"([\\`*\[\]<>&|~])")


def _cell(text: str) -> str:
    return _MARKUP.sub(r"\\\1", str(text)).replace("\r", " ").replace("\n", " ")


def _code(text: str) -> str:
    """``text`` as an inline code span whatever backticks it holds (a longer fence)."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown(doc: dict, system: str | None = None) -> str:
    """The gate as Markdown: the overall verdict as a heading, a table (measure, baseline
    mean, candidate mean, drop, CI of the difference, adjusted p, verdict: one row per
    check), then the worst topics of each failed check."""
    items = checks(doc)
    overall = verdict(doc)
    pairs = sorted({(c["candidate"], c["baseline"]) for c in items})
    against = "; ".join(f"{_code(c)} vs baseline {_code(b)}" for c, b in pairs)
    lines = [f"### Cranfield gate{f' for {_cell(system)}' if system else ''}: "
             f"{VERDICT_WORDS.get(overall, 'no gate')}", ""]
    if against:
        lines += [against, ""]
    head = list(MARKDOWN_HEAD)
    head[4] = f"{level(doc):.0%} CI of the difference"
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    several = len(pairs) > 1
    for c in items:
        measure = f"{c['measure']} ({c['candidate']})" if several else c["measure"]
        row = (measure, _num(c.get("mean_baseline")), _num(c.get("mean_candidate")),
               _drop(c), _ci(c["ci"]), _p(c.get("p_adjusted")), c.get("verdict", ""))
        # the numbers are ours (digits, an interval's brackets): only the names escaped
        lines.append("| " + " | ".join([_cell(row[0]), *row[1:6], _cell(row[6])]) + " |")
    for c in items:
        if c.get("verdict") == "pass":
            continue
        lines += ["", f"**{_cell(title(c))}: {VERDICT_WORDS.get(c.get('verdict'))}** — "
                  + _cell("; ".join(c.get("reasons") or []))]
        topics = (c.get("offending_topics") or [])[:WORST_TOPICS_TABLE]
        if topics:
            lines += ["", "| topic | baseline | candidate | drop |", "|---|---|---|---|"]
            lines += [f"| {_cell(t['topic'])} | {_num(t.get('baseline'))} | "
                      f"{_num(t.get('candidate'))} | {_num(t.get('drop'))} |" for t in topics]
    return "\n".join(lines) + "\n"


# -- GitHub Actions ------------------------------------------------------------------------------

def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(doc: dict) -> str:
    """GitHub Actions workflow commands: ``::error`` per failed check, ``::warning`` per
    undecided one (nothing for a pass)."""
    out = []
    for c in checks(doc):
        command = {"fail": "error", "undecided": "warning"}.get(c.get("verdict"))
        if command is None:
            continue
        what = "failed" if command == "error" else "undecided"
        out.append(f"::{command} title={_escape_property(f'Cranfield gate {what}: {title(c)}')}"
                   f"::{_escape_data(message(c, doc))}")
    return "".join(line + "\n" for line in out)


# -- text ----------------------------------------------------------------------------------------

def text(doc: dict) -> str:
    """The verdict in a few lines: the overall one, then one line per check."""
    items = checks(doc)
    lines = [f"gate: {VERDICT_WORDS.get(verdict(doc), 'none')}"]
    lines += [f"  {message(c, doc)}" for c in items]
    return "\n".join(lines) + "\n"


RENDERERS = {"junit": junit, "markdown": markdown}


# -- the first night: nothing to gate against ----------------------------------------------------

def pinned_document(system: str, recorded: dict, gates: list[str]) -> dict:
    """What ``cranfield gate --pin-if-none`` reports on a system's first night, when tonight's
    result became the baseline and nothing was gated: the gates it will hold later, the
    result pinned. Rendered by :func:`pinned_junit`, :func:`pinned_markdown` and
    :func:`pinned_text` (its JSON is this document)."""
    return {"gate": None, "pinned": {"system": system, "result_id": recorded.get("id"),
                                     "label": recorded.get("label")}, "gates": list(gates)}


def _pinned_sentence(doc: dict) -> str:
    pinned = doc["pinned"]
    return (f"no baseline was pinned for {pinned['system']}: tonight's result "
            f"{pinned['result_id']} ({pinned['label']}) is now its baseline; nothing gated")


def pinned_junit(doc: dict, system: str | None = None) -> str:
    """One skipped test case per gate (a CI's test report shows the gates it will hold, and
    that they did not run tonight, rather than a missing file)."""
    gates = doc["gates"]
    suite = ET.Element("testsuite", {"name": SUITE, "tests": str(len(gates)), "failures": "0",
                                     "errors": "0", "skipped": str(len(gates))})
    props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", "baseline-pinned"),
                        ("baseline", doc["pinned"]["result_id"])):
        ET.SubElement(props, "property", {"name": name, "value": str(value)})
    for gate in gates:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"cranfield.gate.{system or doc['pinned']['system']}", "name": gate})
        ET.SubElement(case, "skipped", {"message": _pinned_sentence(doc)})
    return _xml(suite)


def pinned_markdown(doc: dict, system: str | None = None) -> str:
    pinned = doc["pinned"]
    return (f"### Cranfield gate for {_cell(system or pinned['system'])}: BASELINE PINNED\n\n"
            f"No baseline was pinned: tonight's result {_code(pinned['result_id'])} "
            f"({_code(pinned['label'])}) is now the baseline. Nothing was gated; the next "
            f"night is gated against it ({_cell(', '.join(doc['gates']))}).\n")


def pinned_text(doc: dict) -> str:
    return f"gate: BASELINE PINNED\n  {_pinned_sentence(doc)}\n"
