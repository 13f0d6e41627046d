"""The names trec_eval prints for an evaluation's measures: a measure asked for in another
spelling (ir_measures', ranx's: ``nDCG@10``, ``AP``, ``P@5``) printed under trec_eval's name
(``ndcg_cut_10``, ``map``, ``P_5``) and in trec_eval's order, as ``trec_eval`` text and -Z's
lookup of a measure's mean and stddev name it. Room: measures (measure names)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any


def printed_lines(instances) -> list[tuple[str, Any]]:
    """(the name a line prints, the instance whose values it prints) for each measure of an
    evaluation, as trec_eval would print them had every measure been asked for by its
    trec_eval name: a measure trec_eval has, asked for in ir_measures' or ranx's spelling
    (``nDCG@10``, ``AP``, ``P@5``, ``mrr``), prints under trec_eval's name (``ndcg_cut_10``,
    ``map``, ``P_5``, ``recip_rank``) among the trec_eval measures, in trec_eval's order; a
    measure named two ways (``nDCG@10`` and ``ndcg_cut.10``) prints once. Measures trec_eval
    lacks (``ERR@20``, ``RR@10``, ``P(rel=2)@5``: no per-measure relevance level in
    trec_eval) keep their key and come last, in the order asked. An evaluation of trec_eval
    names only prints exactly as its instances are ordered."""
    spelled = [(inst, _trec_spelling(inst.key)) for inst in instances]
    if all(s is None or s[0] == inst.key for inst, s in spelled):
        return [(inst.key, inst) for inst in instances]
    last = float("inf")

    def position(item: tuple[int, tuple]) -> tuple:
        index, (inst, s) = item
        return (s[2], index) if s is not None else ((last, 0), index)

    out: list[tuple[str, Any]] = []
    names: set[str] = set()
    meanings: set[tuple] = set()
    for _, (inst, s) in sorted(enumerate(spelled), key=position):
        name = s[0] if s is not None else inst.key
        renamed = s is not None and name != inst.key
        # a renamed measure already printed under another spelling is not printed twice
        if renamed and (name in names or s[1] in meanings):
            continue
        names.add(name)
        if s is not None and s[1] is not None:
            meanings.add(s[1])
        out.append((name, inst))
    return out


@lru_cache(maxsize=4096)
def _trec_spelling(key: str) -> tuple[str, tuple | None, tuple] | None:
    """(the name trec_eval prints for the measure reported under ``key``, that measure's
    meaning (:func:`cranfield.measures.names.measure_meaning`; None when the key does not read
    back), its place in trec_eval's order: (registry order, cutoff)); None for a measure trec_eval
    lacks. A key in trec_eval's spelling is its own name; another spelling is given
    trec_eval's only when that name reads back as the very same measure."""
    from ..errors import MeasureError
    from .names import measure_meaning, parse_ir_name, parse_measure
    from .peer_names import ANY_RANK

    try:
        ir = parse_ir_name(key)
    except MeasureError:
        return None
    if ir is None:  # trec_eval's own spelling (or a recorded key the registry cannot read)
        try:
            back = parse_measure(key)
        except MeasureError:
            return None
        if len(back) != 1 or not back[0].measure.all_trec:
            return None
        return key, measure_meaning(back[0]), _place(back[0])
    m = ir.measure
    if not m.all_trec or ir.rel_level is not None or ir.options:
        return None
    if m.kind == "none":
        name = m.name
    elif m.kind == "cutoffs":
        if ir.value == ANY_RANK:  # ranx's hit_rate: no trec_eval name, printed as its key
            return None
        name = f"{m.name}_{ir.value}"
    elif m.kind == "fcutoffs":
        name = f"{m.name}_{ir.value:3.2f}"
    elif m.kind == "gains":
        name = m.name + ("_" + ",".join(f"{g}={v:g}" for g, v in sorted(ir.value.items()))
                         if ir.value else "")
    elif m.kind == "float":
        name = m.name if ir.value == m.defaults[0] else f"{m.name}_{ir.value:g}"
    else:
        return None
    try:
        back = parse_measure(name)
    except MeasureError:
        return None
    if len(back) != 1 or back[0].key != name or measure_meaning(back[0]) != measure_meaning(ir):
        return None
    return name, measure_meaning(ir), _place(ir)


def _place(inst) -> tuple:
    cutoff = inst.value if inst.measure.kind in ("cutoffs", "fcutoffs") else 0
    return (inst.measure.order, cutoff)
