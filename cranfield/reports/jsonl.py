"""JSON Lines output (``cranfield eval --format jsonl``), line for line as ir_measures 0.4.3's
command line prints it with ``--output_format jsonl``: one JSON object per line, ir_measures'
``Metric`` field names.

- Without per-topic values (no ``-q``): the aggregate, one ``{"measure": M, "value": V}``
  per measure (ir_measures drops ``query_id`` there).
- With ``-q``: ``{"query_id": T, "measure": M, "value": V}`` per topic and measure, topics
  in trec_eval's (strcmp) order, then the aggregate as ``query_id`` ``all`` (trec_eval's
  summary, not recomputed); ``-n`` leaves the aggregate out. Without ``-q``, ``-n`` leaves
  nothing, as with trec_eval.

``M`` is the measure as asked for, the key of :attr:`Evaluation.aggregate` (``nDCG@10`` stays
``nDCG@10``, ``P.5`` reads ``P_5``), so ir_measures' names give ir_measures' lines (an alias
stays as typed: ``NumRelRet``, which ir_measures prints ``NumRet(rel=1)``). ``V`` is a number
as ir_measures writes it: a float, counts too (``1500.0``), in Python's ``json`` spelling
(the shortest repr that reads back to the same double); a string for ``runid`` and
``relstring``; ``null`` where trec_eval prints ``-nan`` (JSON has no NaN; ir_measures would
print a bare ``NaN``) or for an infinity. A topic without a value of a measure that
ir_measures aggregates over the topics that have one (``Accuracy@k``: no relevant document
in the top k) has no line, as ir_measures prints none.

Measures come in the evaluation's order (trec_eval's, as ``--format trec`` prints them), not
ir_measures' (as typed; per topic, its provider's): the same lines, perhaps in another
order. ``NumQ`` (trec_eval's ``num_q``) has only an aggregate, where ir_measures also prints
1.0 per topic.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ..evaluate import Evaluation


def format_jsonl(ev: Evaluation, per_topic: bool = False, summary: bool = True) -> str:
    """``ev`` as JSON Lines (see the module docstring); ``per_topic`` is ``-q``, ``summary``
    False is ``-n``."""
    out: list[str] = []
    if per_topic:
        keys = [(i.key, i.measure.aggregate == "mean_reported") for i in ev.instances
                if i.measure.per_topic]
        for topic, row in ev.per_topic.items():
            out.extend(_line({"query_id": topic, "measure": k, "value": _value(row[k])})
                       for k, reported in keys if not (reported and _no_value(row[k])))
    if summary:
        for inst in ev.instances:
            if inst.key not in ev.aggregate:
                continue
            line = {"measure": inst.key, "value": _value(ev.aggregate[inst.key])}
            out.append(_line({"query_id": "all", **line} if per_topic else line))
    return "".join(out)


def _no_value(v: Any) -> bool:
    """A per-topic NaN of a measure aggregated as ir_measures does (Accuracy): the topic has
    no value, and ir_measures prints no line for it."""
    return isinstance(v, float | np.floating) and math.isnan(v)


def _value(v: Any) -> Any:
    if hasattr(v, "item"):  # a numpy scalar
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, int | float):
        return v  # text: runid, relstring
    v = float(v)  # ir_measures' values are floats, counts too (1500.0)
    return v if math.isfinite(v) else None


def _line(obj: dict) -> str:
    # json.dumps' defaults, as ir_measures writes them (", " and ": ", ASCII escapes)
    return json.dumps(obj, allow_nan=False) + "\n"
