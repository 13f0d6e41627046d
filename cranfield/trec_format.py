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
