"""A stability document (:func:`cranfield.compare.stability.stability`, as ``GET
/v1/stability`` answers it) as plain text, :func:`format_text` (compare room, issue #31)."""

from __future__ import annotations

LABELS = {"kendall_tau": "Kendall tau_b", "tau_ap": "tau_AP (to against from)",
          "tau_ap_symmetric": "tau_AP symmetric", "rbo": "RBO_ext"}
MOST_TOPICS = 20  # topics named when some are left out


def _num(v, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _signed(v) -> str:
    return "-" if v is None else f"{v:+.4f}"


def format_text(doc: dict) -> str:
    """The document as text: the judgments, the statistics with their CIs, the systems'
    means and ranks under each judgment, the pairs' counts and every changed pair, and the
    warnings. Numbers with 4 decimals; an undefined one (null) as ``-``."""
    boot, tested = doc["bootstrap"], doc["pairs_tested"]
    level = f"{round(100 * boot['level'], 6):g}%"
    head = f"Stability of {doc['measure']}"
    if "from" in doc and "to" in doc:
        head += f" from {doc['from']} to {doc['to']}"
    lines = [head, f"{doc['n_systems']} systems, {doc['n_topics']} topics"]
    left = doc.get("topics_left_out")
    if left and left.get("count"):
        shown = ", ".join(left["topics"][:MOST_TOPICS])
        more = " ..." if left["count"] > MOST_TOPICS else ""
        lines.append(f"topics left out ({left['count']}, a result lacks them): {shown}{more}")
    lines += ["", f"{'statistic':<26}{'value':>8}  {level} CI (bootstrap)"]
    for key, label in LABELS.items():
        s = doc["statistics"][key]
        if key == "rbo":
            label = f"{label} (p={doc['persistence']:g})"
        lines.append(f"{label:<26}{_num(s['value']):>8}  [{_num(s['ci_low'])}, "
                     f"{_num(s['ci_high'])}]")
    lines.append(f"bootstrap: {boot['resamples']} resamples, seed {boot['seed']}, "
                 f"{boot['method']}")
    lines += ["", f"{'system':<24}{'from mean':>10}{'rank':>6}{'to mean':>10}{'rank':>6}"
                  "  paired by"]
    for s in doc["systems"]:
        lines.append(f"{s['name'][:24]:<24}{_num(s['from']['mean']):>10}"
                     f"{s['from']['rank']:>6}{_num(s['to']['mean']):>10}{s['to']['rank']:>6}"
                     f"  {s.get('paired_by', '-')}")
    counts = doc["pair_counts"]
    lines += ["", f"pairs ({tested['test']} test, {tested['correction']} correction, alpha "
                  f"{tested['alpha']:g}): " + ", ".join(f"{k} {v}" for k, v in counts.items())]
    for p in doc["changed_pairs"]:
        f, t = p["from"], p["to"]
        lines.append(f"  {p['status']:<9} {p['b']} - {p['a']}: from {_signed(f['mean_diff'])} "
                     f"(p_adj {_num(f['p_adjusted'])}), to {_signed(t['mean_diff'])} "
                     f"(p_adj {_num(t['p_adjusted'])})")
    if not doc["changed_pairs"]:
        lines.append("  no significant difference appeared, vanished or flipped")
    for w in doc.get("warnings", []):
        lines.append(f"warning: {w['message']}")
    return "\n".join(lines) + "\n"
