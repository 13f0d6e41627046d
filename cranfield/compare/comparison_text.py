"""A comparison document (:mod:`cranfield.compare.comparison`) as text: what ``cranfield compare``
prints by default and the API answers for ``Accept: text/plain``."""

from __future__ import annotations

from .comparison_settings import TEST_KEYS, TESTS, percent

_SHORT = {"t": "t", "randomization": "rand", "bootstrap": "boot", "wilcoxon": "wilcoxon"}


def format_text(document: dict) -> str:
    """A comparison document as a readable table: per measure, each run's mean with its CI
    (1 − alpha, unadjusted; and trec_eval aggregate), then each pair: mean difference b − a
    with its CI, each test's adjusted p-value (``*`` when significant) and wins/ties/losses
    of b; then the gate, with the family its p-values are adjusted over."""

    def fmt(x, signed=False) -> str:  # 7 wide, so columns line up
        return f"{'-':>7}" if x is None else (f"{x:+7.4f}" if signed else f"{x:7.4f}")

    names = [r["name"] for r in document["runs"]]
    width = max(12, *(len(n) for n in names))
    pair_width = max(16, *(len(p["b"]) + len(p["a"]) + 4 for p in document["pairs"]))
    corr = document["correction"]
    tests = [t for t in TESTS if t in corr["family_size"]]
    base = document["baseline"]
    out = [f"{len(names)} runs over {len(document['topics'])} topics"
           + (f", baseline {base}" if base else ", all pairs")
           + f"; p-values adjusted by {corr['method']} over "
           + ", ".join(f"{n} {_SHORT[t]}" for t, n in corr["family_size"].items())
           + f" comparisons; * = p_adj < {document['alpha']:g}\n"]
    level = document.get("ci", {}).get("level", 0.95)
    ci_head = f"{percent(level)}% CI"
    out.append(f"{ci_head}s are not adjusted for multiple comparisons\n")
    for w in document["warnings"]:
        out.append(f"warning: {w['message']}\n")
    tables = {"names": names, "width": width, "pair_width": pair_width, "tests": tests,
              "ci_head": ci_head, "fmt": fmt}
    out += _tables(document, document["summary"], document["pairs"], **tables)
    for label, seg in (document.get("segments") or {}).items():
        fam = seg["family"]
        sizes = seg["correction"]["family_size"]
        if not seg["topics"]:
            out.append(f"\nsegment {label}: no common topic carries it; nothing compared\n")
            continue
        out.append(f"\nsegment {label}: {len(seg['topics'])} topics; p-values adjusted by "
                   f"{fam['correction']} over this segment's family ("
                   + ", ".join(f"{n} {_SHORT[t]}" for t, n in sizes.items())
                   + " comparisons)\n")
        for w in seg.get("warnings", []):
            out.append(f"warning: {w['message']}\n")
        out += _tables(document, seg["summary"], seg["pairs"], **tables)
    if document.get("weighted"):
        out.append(f"\nweighted means (over the {len(document['topics'])} topics, weights of "
                   "the topic metadata; a topic it lacks weighs 1)\n")
        out.append(f"  {'measure':<{width}}" + "".join(f"  {n:>{max(7, len(n))}}" for n in names)
                   + "\n")
        for key, per_run in document["weighted"].items():
            out.append(f"  {key:<{width}}" + "".join(
                f"  {fmt(per_run[n]):>{max(7, len(n))}}" for n in names) + "\n")
    if "gate" in document:
        g = document["gate"]
        corr = g.get("correction")
        family = (f" (p-values adjusted by {corr['method']} over the gate's "
                  f"{corr['family_size']} check(s), not the whole table)" if corr else "")
        out.append(f"\ngate: {g['verdict'].upper()}{family}\n")
        for check in document["gate"]["checks"]:
            out.append(f"  {check['verdict']}: {'; '.join(check['reasons'])}\n")
            if check["verdict"] == "fail" and check["offending_topics"]:
                worst = ", ".join(f"{o['topic']} ({-o['drop']:+.4f})" if o["drop"] is not None
                                  else o["topic"] for o in check["offending_topics"][:10])
                out.append(f"    worst topics: {worst}\n")
    return "".join(out)


def _tables(document: dict, summary: dict, pairs: list[dict], *, names, width, pair_width,
            tests, ci_head, fmt) -> list[str]:
    """Per measure: each run's mean (and its own aggregate, when ``summary`` has it), then
    each pair's difference and tests."""
    out: list[str] = []
    for m in document["measures"]:
        key = m["key"]
        if key not in summary:
            continue
        out.append(f"\n{key}  ({m['canonical']})\n")
        out.append(f"  {'run':<{width}}  {'mean':>7}  {ci_head:<18}  {'aggregate':>9}\n")
        for name in names:
            s = summary[key][name]
            out.append(f"  {name:<{width}}  {fmt(s['mean']):>7}  "
                       f"[{fmt(s['ci_low'])}, {fmt(s['ci_high'])}]  "
                       f"{fmt(s.get('aggregate')):>9}\n")
        head = "".join(f"  {_SHORT[t] + ' p_adj':>11}" for t in tests)
        out.append(f"  {'b vs a':<{pair_width}}  {'diff':>7}  {ci_head:<18}{head}  W/T/L\n")
        for p in pairs:
            if p["measure"] != key:
                continue
            cells = ""
            for t in tests:
                r = p[TEST_KEYS[t]]
                mark = "*" if r["significant"] else " "
                cells += f"  {fmt(r['p_adjusted']):>10}{mark}"
            wtl = "-" if p["wins"] is None else f"{p['wins']}/{p['ties']}/{p['losses']}"
            out.append(f"  {p['b'] + ' vs ' + p['a']:<{pair_width}}  "
                       f"{fmt(p['mean_diff'], True):>7}  "
                       f"[{fmt(p['ci_low'], True)}, {fmt(p['ci_high'], True)}]{cells}  {wtl}\n")
    return out
