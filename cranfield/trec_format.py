"""trec_eval's text output, byte for byte (``meas_print_single.c``, ``meas_print_final.c``),
and CSV / JSON renderings of the same numbers (the JSON is the API's evaluation document)."""

from __future__ import annotations

import math
from typing import Any

from .evaluate import Evaluation


def _value_text(measure, value: Any) -> str:
    if measure.name == "relstring":
        return f"'{value}'"
    if measure.name == "runid":
        return str(value)
    if measure.integer:
        return str(int(value))
    if isinstance(value, float) and math.isnan(value):
        return "  -nan"  # glibc prints the sign of the 0/0 NaN trec_eval produces
    return "%6.4f" % value


def format_trec(ev: Evaluation, per_topic: bool = False, summary: bool = True) -> str:
    """The text ``trec_eval [-q] [-n]`` prints: ``%-22s\\t%s\\t<value>`` lines, topics in
    strcmp order, measures in measures.c order, then the ``all`` block."""
    out: list[str] = []
    if per_topic:
        for topic, row in ev.per_topic.items():
            for inst in ev.instances:
                if inst.measure.per_topic:
                    out.append("%-22s\t%s\t%s\n" % (inst.key, topic,
                                                    _value_text(inst.measure, row[inst.key])))
    if summary:
        for inst in ev.instances:
            if inst.key in ev.aggregate:
                out.append("%-22s\tall\t%s\n" % (inst.key, _value_text(inst.measure,
                                                                      ev.aggregate[inst.key])))
    return "".join(out)


def format_json(ev: Evaluation, run_sha256: str, qrels_sha256: str, per_topic: bool = True,
                curves: bool = False, interface: str = "cli") -> str:
    """The evaluation document the API answers with
    (:func:`cranfield.result_document.evaluation_document`: the same keys and types; warnings
    name options as ``interface`` spells them), as JSON."""
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

    from .evaluate import TopicSets
    from .measures import REGISTRY

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
        options=dict((doc.get("provenance") or {}).get("options") or {}))
