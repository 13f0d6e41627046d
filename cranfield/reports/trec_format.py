"""trec_eval's text output, byte for byte (``meas_print_single.c``, ``meas_print_final.c``),
and CSV / JSON renderings of the same numbers (the JSON is the API's evaluation document)."""

from __future__ import annotations

import math
from typing import Any

from ..evaluate import Evaluation
from ..measures.printed_names import printed_lines
from .document_segments import segments_from_document


def _value_text(measure, value: Any, zscored: bool = False) -> str:
    if measure.name == "relstring":
        return f"'{value}'"
    if measure.name == "runid":
        return str(value)
    if measure.integer and not zscored:  # -Z prints every number %6.4f
        return str(int(value))
    if isinstance(value, float) and math.isnan(value):
        if zscored and math.copysign(1.0, value) > 0 and \
                measure.aggregate != "mean_reported":
            return "   nan"  # a nan from the z-scores file: glibc prints its sign
        # a measure's "no value" (Accuracy's, z-scored or not) is spelled as the 0/0 NaN
        return "  -nan"  # glibc prints the sign of the 0/0 NaN trec_eval produces
    return "%6.4f" % value


def format_trec(ev: Evaluation, per_topic: bool = False, summary: bool = True) -> str:
    """The text ``trec_eval [-q] [-n]`` prints: ``%-22s\\t%s\\t<value>`` lines, topics in
    strcmp order, measures in measures.c order, then the ``all`` block. A trec_eval measure
    asked for by another name (``nDCG@10``, ``AP``, ``P@5``) is printed as trec_eval prints
    it (``ndcg_cut_10``, ``map``, ``P_5``: :func:`printed_lines`)."""
    out: list[str] = []
    z = bool(ev.options.get("zscores"))  # -Z: a "Z" before each number's %-22s name
    lines = [(("Z" if z and i.measure.name not in ("runid", "relstring") else "") + "%-22s"
              % name, i) for name, i in printed_lines(ev.instances)]
    if per_topic:
        for topic, row in ev.per_topic.items():
            for name, inst in lines:
                if inst.measure.per_topic:
                    out.append("%s\t%s\t%s\n" % (name, topic,
                                                 _value_text(inst.measure, row[inst.key], z)))
    if summary:
        for name, inst in lines:
            if inst.key in ev.aggregate:
                out.append("%s\tall\t%s\n" % (name, _value_text(inst.measure,
                                                                ev.aggregate[inst.key], z)))
        if ev.segments is not None:
            out.append(_segment_lines(ev, lines, z))
    return "".join(out)


def _segment_lines(ev: Evaluation, lines, z: bool) -> str:
    """With topic metadata (:mod:`cranfield.inputs.segments`), after the ``all`` block: each
    segment's summary as ``name\\tsegment=LABEL\\tvalue`` lines (labels in byte order, values
    as the ``all`` line prints them), then ``name\\tweighted\\tvalue`` (always ``%6.4f``: a
    weighted count need not be whole; ``-nan`` when the weights sum to 0)."""
    out: list[str] = []
    for label, seg in ev.segments.items():
        for name, inst in lines:
            if inst.key in seg["aggregate"]:
                out.append("%s\tsegment=%s\t%s\n" % (name, label, _value_text(
                    inst.measure, seg["aggregate"][inst.key], z)))
    for name, inst in lines:
        value = (ev.weighted or {}).get(inst.key)
        if value is not None:
            out.append("%s\tweighted\t%s\n" % (name, "  -nan" if value != value
                                               else "%6.4f" % value))
    return "".join(out)


def format_json(ev: Evaluation, run_sha256: str, qrels_sha256: str, per_topic: bool = True,
                curves: bool = False, interface: str = "cli") -> str:
    """The evaluation document the API answers with
    (:func:`cranfield.reports.result_document.evaluation_document`: the same keys and types;
    warnings name options as ``interface`` spells them), as JSON."""
    import json

    from .result_document import evaluation_document

    doc = evaluation_document(ev, {"per_topic": per_topic, "curves": curves}, run_sha256,
                              qrels_sha256, None, interface=interface)
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def format_csv(ev: Evaluation, per_topic: bool = True, summary: bool = True) -> str:
    """One row per topic (and an ``all`` row), one column per measure key."""
    import csv
    import io

    keys = [i.key for i in ev.instances]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["topic", *keys])
    if per_topic:
        for topic, row in ev.per_topic.items():
            writer.writerow([topic, *(_csv_cell(row.get(k, "")) for k in keys)])
    if summary:
        writer.writerow(["all", *(_csv_cell(ev.aggregate.get(k, "")) for k in keys)])
        if ev.segments is not None:  # topic metadata: as the text's segment= and weighted
            for label, seg in ev.segments.items():
                writer.writerow([f"segment={label}", *(_csv_cell(seg["aggregate"].get(k, ""))
                                                       for k in keys)])
            writer.writerow(["weighted", *(_csv_cell((ev.weighted or {}).get(k, ""))
                                           for k in keys)])
    return buf.getvalue()


def _csv_cell(v: Any) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return str(v)


def document_evaluation(doc: dict) -> Evaluation:
    """An evaluation document (the API's, a finished job's result) as an :class:`Evaluation`
    that :func:`format_trec` and :func:`format_csv` print exactly as they print the
    evaluation it was made from: its measures in order (each its registry measure), its
    per-topic rows (when it has them) and aggregate, a null (JSON's NaN) back to NaN. Only
    for printing: it has no ranking."""
    from types import SimpleNamespace

    import numpy as np

    from ..evaluate import TopicSets
    from ..measures import REGISTRY

    def value(v: Any) -> Any:
        return math.nan if v is None else v

    instances = [SimpleNamespace(key=m["key"], measure=REGISTRY[m["measure"]])
                 for m in doc["measures"]]
    per_topic = doc.get("per_topic") or {}
    topics = list(per_topic)
    values = {}
    for inst in instances:
        if inst.measure.per_topic:
            column = np.empty(len(topics), dtype=object)  # each value as the document has it
            column[:] = [value(per_topic[t].get(inst.key)) for t in topics]
            values[inst.key] = column
    sets = doc.get("topics") or {}
    return Evaluation(
        instances=instances, values=values, topic_order=topics,
        printed=np.ones(len(topics), bool),
        aggregate={k: value(v) for k, v in (doc.get("aggregate") or {}).items()},
        measures={m["key"]: {k: v for k, v in m.items() if k != "key"}
                  for m in doc["measures"]},
        topics=TopicSets(list(sets.get("evaluated", topics)), list(sets.get("run_only", [])),
                         list(sets.get("qrels_only", []))),
        runid=str((doc.get("provenance") or {}).get("runid", "")),
        options=dict((doc.get("provenance") or {}).get("options") or {}),
        **segments_from_document(doc))
