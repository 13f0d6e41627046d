"""What the registry says about each measure, as ``GET /v1/measures`` serves it and
``cranfield measures`` prints it: one description per measure, built here once from the
registry's docstrings and parameters and from the names that resolve to it.

Flask-free (the service wraps these documents in HTTP; the CLI prints them).
"""

from __future__ import annotations

import re
import textwrap
from functools import lru_cache

from ..errors import MeasureError
from ..measures import DEFAULT_PROFILE, PROFILES, REGISTRY, Measure
from ..measures.names import parse_measure
from ..measures.peer_names import IR_NAMES, KW_NAMES, RANX_AT_K, RANX_BARE, RANX_BARE_LEVEL
from ..measures.registry import INPUTS

FAMILIES = ("set", "rank", "graded", "diversity", "count", "info")


@lru_cache(maxsize=1)
def _alias_index() -> dict[str, tuple[str, ...]]:
    """Registry name -> the other names that resolve to it: ir_measures' names and aliases
    (``nDCG``, ``Precision``, ``P``: with @k, where the bare name is trec_eval's), ranx's
    spellings (``ndcg@k``, ``mrr``), the registry's own aliases."""
    return {n: tuple(sorted(names)) for n, names in _spelling_index().items()}


def _own_tool(m: Measure) -> str:
    """Whose meaning the registry name itself has."""
    if m.all_trec:
        return "trec_eval"
    if "spelling" in m.extra:
        return m.extra["spelling"]
    return "ir_measures" if m.ir_name == m.name else "cranfield"


@lru_cache(maxsize=1)
def _spelling_index() -> dict[str, dict[str, str]]:
    """Registry name -> {other spelling that resolves to it: the tool whose meaning that
    spelling takes (ir_measures, ranx, trec_eval, cranfield)}."""
    out: dict[str, dict[str, str]] = {n: {a: "ir_measures" for a in m.aliases}
                                      for n, m in REGISTRY.items()}
    for name, (plain, cut) in IR_NAMES.items():
        if plain is not None:
            out[plain].setdefault(name, "ir_measures")
        if cut is not None:
            out[cut].setdefault(name, "ir_measures")
    for name, target in KW_NAMES.items():
        if name != target:
            out[target].setdefault(name, "ir_measures")
    for spelling, meant in RANX_AT_K.items():
        for inst in _resolves(f"{meant}@10"):
            out[inst].setdefault(f"{spelling}@k", "ranx")
    for spelling, meant in RANX_BARE.items():
        for inst in _resolves(meant):
            if spelling not in REGISTRY:
                out[inst].setdefault(spelling, "ranx")
    # ranx's own measures (registered with spelling="ranx"), as ranx spells them
    out["hits"].setdefault("hits@k", "ranx")
    out["ranx_rbp"].setdefault("rbp.<p>", "ranx")
    out["ranx_rbp"].setdefault("rbp@<p>", "ranx")
    # ranx's relevance level suffix, on every measure ranx takes it (written with N = 2: for
    # ndcg and dcg a level above 1 zeroes the grades below it, a measure with gains=)
    for spelling in [*RANX_AT_K, "hits"]:
        for inst in _resolves(f"{spelling}@10-l2"):
            out[inst].setdefault(f"{spelling}@k-l<N>", "ranx")
    for spelling in [*RANX_BARE, *RANX_BARE_LEVEL, "hits", "rbp.<p>", "rbp@<p>"]:
        for inst in _resolves(f"{spelling.replace('<p>', '9')}-l2"):
            out[inst].setdefault(f"{spelling}-l<N>", "ranx")
    return out


def spellings(m: Measure) -> list[dict]:
    """Every spelling of ``m`` (its registry name first) with the tool whose meaning it
    takes: a peer's spelling means the peer's value (issue #28)."""
    others = _spelling_index()[m.name]
    return [{"name": m.name, "tool": _own_tool(m)}] + \
        [{"name": n, "tool": others[n]} for n in sorted(others) if n != m.name]


def _resolves(name: str) -> list[str]:
    try:
        return [i.measure.name for i in parse_measure(name)]
    except MeasureError:
        return []


def aliases(m: Measure) -> list[str]:
    return list(_alias_index()[m.name])


def describe(m: Measure) -> dict:
    """One measure as ``GET /v1/measures`` lists it."""
    return {
        "name": m.name,
        "aliases": aliases(m),
        "spellings": spellings(m),
        "family": m.family,
        "summary": m.summary,
        "formula": m.section("Formula"),
        "zero_rule": m.section("0/0"),
        "reference": m.section("Reference"),
        "parameters": [p.as_dict() for p in m.params],
        "aggregate": m.aggregate,
        "per_topic": m.per_topic,
        "uses_relevance_level": m.uses_rel_level,
        "in_all_trec": list(m.all_trec),
        "input": m.input,
        "qrels_formats": list(INPUTS[m.input]),
    }


def measures_document(family: str | None = None) -> dict:
    """The registry (of one family), in registration order: ``GET /v1/measures``."""
    if family is not None and family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}: choose one of {', '.join(FAMILIES)}")
    items = [describe(m) for m in sorted(REGISTRY.values(), key=lambda m: m.order)
             if family is None or m.family == family]
    return {"measures": items, "profiles": list(PROFILES), "default_profile": DEFAULT_PROFILE}


def resolution_document(name: str, profile: str = DEFAULT_PROFILE) -> dict:
    """What a name stands for: its instances (reported key, registry measure, canonical name)
    and the measures they are instances of: ``GET /v1/measures/{name}``. Raises
    :class:`MeasureError` (with suggestions) for a name that does not resolve."""
    instances = parse_measure(name, profile)
    measures = {i.measure.name: describe(i.measure) for i in instances}
    return {"name": name,
            "instances": [{"key": i.key, "measure": i.measure.name,
                           "canonical": i.canonical(profile, 1)} for i in instances],
            "measures": list(measures.values())}


# ---- text for the terminal (``cranfield measures``) -------------------------------------------

def _wrap(label: str, text: str, width: int = 96) -> list[str]:
    if not text:
        return []
    return textwrap.wrap(text, width=width, initial_indent=f"    {label:<12}",
                         subsequent_indent=" " * 16)


def _param_text(p: dict) -> str:
    bits = [p["type"]]
    if p.get("required"):
        bits.append("required")
    elif p["default"] not in (None, [], {}):
        bits.append(f"default {p['default']}")
    if "enum" in p:
        bits.append("one of " + ", ".join(p["enum"]))
    if "minimum" in p and p["minimum"] > -2 ** 63:
        bits.append(f">= {p['minimum']}")
    if "maximum" in p and p["maximum"] < 2 ** 63 - 1:
        bits.append(f"<= {p['maximum']}")
    return f"{p['name']} ({'; '.join(bits)}): {plain(p['description'])}"


def plain(text: str) -> str:
    """A docstring's words as a terminal shows them: RST's inline literals (``ERR@k``)
    without their backticks."""
    return re.sub(r"``([^`]+)``", r"\1", text)


def format_measure(d: dict) -> str:
    """One measure's full description, the fields of :func:`describe` as plain text."""
    d = {k: plain(v) if isinstance(v, str) else v for k, v in d.items()}
    lines = [f"{d['name']}  [{d['family']}]  {d['summary']}"]
    if d.get("spellings"):
        # each spelling with the tool whose meaning (and summary) it takes
        lines += _wrap("names:", ", ".join(f"{x['name']} ({x['tool']})"
                                            for x in d["spellings"]))
    elif d["aliases"]:
        lines += _wrap("names:", ", ".join(d["aliases"]))
    lines += _wrap("formula:", d["formula"])
    lines += _wrap("0/0:", d["zero_rule"])
    lines += _wrap("reference:", d["reference"])
    for i, p in enumerate(d["parameters"]):
        lines += _wrap("parameters:" if i == 0 else "", _param_text(p))
    how = d["aggregate"] + ("" if d["per_topic"] else ", summary only")
    trec = ", ".join(d["in_all_trec"]) or "no"
    lines += _wrap("summary:", f"{how}; relevance level: "
                               f"{'yes' if d['uses_relevance_level'] else 'no'}; in all_trec: "
                               f"{trec}")
    if d.get("input", "qrels") not in ("qrels", "any"):  # what -R / qrels_format must say
        lines += _wrap("input:", f"{d['input']} (" + ", ".join(
            f"-R {f}" for f in d["qrels_formats"]) + ")")
    return "\n".join(lines)


def format_list(doc: dict) -> str:
    """The registry as a table: name, family, summary (what trec_eval's -h lists)."""
    rows = doc["measures"]
    width = max((len(d["name"]) for d in rows), default=4)
    out = [f"{d['name']:<{width}}  {d['family']:<9}  {plain(d['summary'])}" for d in rows]
    out.append("")
    out.append("`cranfield measures NAME` describes one (any accepted spelling: trec_eval's "
               "P.10, ir_measures' P@10, ranx's precision@10).")
    return "\n".join(out) + "\n"


def format_resolution(doc: dict) -> str:
    lines = [f"{doc['name']} is reported as:"]
    width = max(len(i["key"]) for i in doc["instances"])
    lines += [f"  {i['key']:<{width}}  {i['canonical']}" for i in doc["instances"]]
    lines.append("")
    lines += [format_measure(d) + "\n" for d in doc["measures"]]
    return "\n".join(lines)
