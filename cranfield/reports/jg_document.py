"""The evaluation document (the API's JSON answer, a queued job's result) of an evaluation
against judgment groups or preferences (``qrels_format`` ``qrels_jg``, ``prefs`` or
``qrels_prefs``: :class:`cranfield.measures.jg_measures.JgEvaluation`), and the way back to
trec_eval's text (:func:`cranfield.reports.jg_text.format_jg`) from it, so that a queued job's text
is the synchronous answer's byte for byte.

The document has the shape of every evaluation document (``measures``, ``aggregate``,
``per_topic``, ``topics``, ``warnings``, ``provenance``): measures under the names trec_eval
prints (``P_avgjg_5``, ``prefs_simp``), ``runid`` and ``num_q`` first when trec_eval prints
them, counts (``prefs_num_prefs_*``: summed over topics) as integers, the means as numbers
(null for a value that is not finite), ``provenance.options.qrels_format`` the format."""

from __future__ import annotations

import math
from typing import Any

from ..inputs.run_qrels import byte_key
from ..measures.jg_measures import JgEvaluation
from ..version import __version__

#: the formats (trec_eval's -R) read by cranfield.inputs.judgment_files; "qrels" is the ordinary one
REL_FORMATS = ("qrels_jg", "prefs", "qrels_prefs")
QRELS_FORMATS = ("qrels", *REL_FORMATS)


def _clean(value: Any, integer: bool) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value) if integer else value


def _sorted(topics) -> list[str]:
    return sorted(topics, key=byte_key)


def jg_document(ev: JgEvaluation, options: dict, run_topics, judged_topics,
                run_digest: str, qrels_digest: str, *, per_topic: bool = True,
                qrels_version: str | None = None, latency_ms: dict | None = None) -> dict:
    """The document of ``ev``, made with ``options`` (the request's, ``qrels_format``
    among them) from a run with ``run_topics`` against judgments of ``judged_topics``."""
    from ..measures.names import resolve

    fmt = options["qrels_format"]
    profile = options["profile"]
    # each key's registry instance (review R1 F11): its registry name, canonical and family,
    # as GET /v1/measures and an ordinary evaluation's document say them
    instances = {i.key: i for i in resolve(list(ev.names), profile, fmt)}
    measures: list[dict] = []
    aggregate: dict[str, Any] = {}
    if "runid" in ev.header:
        measures.append({"key": "runid", "measure": "runid", "canonical": "runid",
                         "family": "info", "aggregate": "runid", "per_topic": False})
        aggregate["runid"] = ev.runid
    if "num_q" in ev.header:
        measures.append({"key": "num_q", "measure": "num_q", "canonical": "num_q",
                         "family": "info", "aggregate": "num_q", "per_topic": False})
        aggregate["num_q"] = len(ev.per_topic) if ev.num_q is None else ev.num_q
    for name in ev.names:
        counted = name in ev.counts
        inst = instances[name]
        measures.append({"key": name, "measure": inst.measure.name,
                         "canonical": inst.canonical(
                             profile, options.get("relevance_level", 1),
                             bool(options.get("judged_only", False)), options.get("depth")),
                         "family": inst.measure.family,
                         "aggregate": "sum" if counted else "mean", "per_topic": True})
    aggregate.update({k: _clean(v, k in ev.counts) for k, v in ev.summary().items()})
    run_topics, judged_topics = set(run_topics), set(judged_topics)
    run_only = _sorted(run_topics - judged_topics)
    qrels_only = _sorted(judged_topics - run_topics)
    warnings = []
    if run_only:
        warnings.append({"code": "topics-run-only", "message": f"{len(run_only)} run "
                         "topic(s) have no judgments and were not evaluated",
                         "topics": run_only[:20]})
    if qrels_only:
        warnings.append({"code": "topics-qrels-only", "message": f"{len(qrels_only)} judged "
                         "topic(s) are missing from the run (not evaluated)",
                         "topics": qrels_only[:20]})
    doc: dict[str, Any] = {
        "measures": measures,
        "aggregate": aggregate,
        "topics": {"evaluated": list(ev.per_topic), "run_only": run_only,
                   "qrels_only": qrels_only},
        "warnings": warnings,
        "provenance": {"engine": "cranfield", "engine_version": __version__,
                       "profile": profile, "options": dict(options),
                       "run_sha256": run_digest, "qrels_sha256": qrels_digest,
                       "runid": ev.runid},
    }
    if qrels_version:
        doc["provenance"]["qrels_version"] = qrels_version
    if per_topic:
        doc["per_topic"] = {t: {k: _clean(row[k], k in ev.counts) for k in ev.names}
                            for t, row in ev.per_topic.items()}
    if latency_ms:
        from .result_document import efficiency

        doc["efficiency"] = efficiency(latency_ms, list(ev.per_topic))
    return doc


def is_jg_document(doc: dict) -> bool:
    """Whether ``doc`` is the document of a judgment-group or preference evaluation."""
    options = (doc.get("provenance") or {}).get("options") or {}
    return options.get("qrels_format", "qrels") in REL_FORMATS


def document_jg(doc: dict) -> JgEvaluation:
    """A :func:`jg_document` back as the :class:`JgEvaluation`
    :func:`cranfield.reports.jg_text.format_jg` prints exactly as it printed the evaluation the
    document was made from (its per-topic rows when it has them; its summary is the document's
    aggregate). Only for printing."""
    keys = [m["key"] for m in doc["measures"]]
    header = tuple(k for k in keys if k in ("runid", "num_q"))
    names = [k for k in keys if k not in header]
    counts = frozenset(m["key"] for m in doc["measures"] if m["aggregate"] == "sum")
    nan = float("nan")
    aggregate = {k: nan if doc["aggregate"].get(k) is None else doc["aggregate"][k]
                 for k in names}
    rows = doc.get("per_topic") or {}
    per_topic = {t: {k: nan if rows.get(t, {}).get(k) is None else rows[t][k] for k in names}
                 for t in doc["topics"]["evaluated"]}

    class _Documented(JgEvaluation):
        def summary(self) -> dict[str, float]:
            return aggregate

    num_q = doc["aggregate"].get("num_q", len(per_topic))
    return _Documented(runid=str(doc["provenance"].get("runid", "")), per_topic=per_topic,
                       names=names, counts=counts, header=header, num_q=num_q)
