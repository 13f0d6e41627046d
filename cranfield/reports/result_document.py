"""The evaluation document the API returns, built from an :class:`Evaluation`: measures with
canonical specs, aggregate and per-topic values, an input lint, provenance, optional details
and efficiency figures. Shared by the web service and the queue workers (no web imports)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..evaluate import Evaluation, TopicSets
from ..inputs.run_qrels import Qrels, Run
from ..measures import PROFILES
from ..version import __version__
from .document_segments import segments_from_document

# How each interface spells the evaluation options a warning can be about: the CLI's flag
# (trec_eval's) and the API's field of the request body. A warning about an option carries
# its key (``"option": "complete_topics"``) and names it in its message the way the interface
# it is shown in does: ``-c`` in ``cranfield eval``, ``options.complete_topics`` in the API.
OPTION_NAMES: dict[str, dict[str, str]] = {
    "complete_topics": {"cli": "-c", "api": "options.complete_topics"},
    "relevance_level": {"cli": "-l", "api": "options.relevance_level"},
    "judged_only": {"cli": "-J", "api": "options.judged_only"},
    "depth": {"cli": "-M", "api": "options.depth"},
    "collection_size": {"cli": "-N", "api": "options.collection_size"},
    "profile": {"cli": "--profile", "api": "options.profile"},
    "aggregation": {"cli": "--micro", "api": "options.aggregation"},
}
INTERFACES = ("api", "cli")


def option_name(option: str, interface: str = "api") -> str:
    """``option`` (an Options key) as ``interface`` ("api" or "cli") spells it."""
    if interface not in INTERFACES:
        raise ValueError(f"unknown interface {interface!r}; choose one of {list(INTERFACES)}")
    return OPTION_NAMES[option][interface]


def warnings_for_interface(warnings: list[dict], interface: str) -> list[dict]:
    """``warnings`` made for the API (a document from a service) with the options their
    messages name spelled as ``interface`` spells them (new dicts; the rest unchanged)."""
    out = []
    for w in warnings:
        option = w.get("option")
        if option in OPTION_NAMES and interface != "api":
            w = dict(w, message=str(w.get("message", "")).replace(
                option_name(option, "api"), option_name(option, interface)))
        out.append(w)
    return out


def warnings_for(ev: Evaluation, interface: str = "api") -> list[dict]:
    """An input lint: things that make numbers easy to misread. A warning about an option
    has its key in ``option`` and names it as ``interface`` ("api" or "cli") spells it."""
    def name(option: str) -> str:
        return option_name(option, interface)

    out: list[dict] = []
    t = ev.topics
    if t.run_only:
        out.append({"code": "topics-run-only", "message": f"{len(t.run_only)} run topic(s) "
                    "have no judgments and were not evaluated", "topics": t.run_only[:20]})
    if t.qrels_only:
        counted = (f"counted as 0: {name('complete_topics')}" if ev.options["complete_topics"]
                   else f"not evaluated; {name('complete_topics')} counts them as 0")
        out.append({"code": "topics-qrels-only", "message": f"{len(t.qrels_only)} judged "
                    f"topic(s) are missing from the run ({counted})",
                    "topics": t.qrels_only[:20], "option": "complete_topics"})
    ranked = ev.ranked
    empty = [ranked.topics[i] for i in ((ranked.num_ret == 0) & ranked.in_run).nonzero()[0]]
    if empty:
        out.append({"code": "empty-topics", "message": f"{len(empty)} topic(s) retrieved no "
                    "documents", "topics": empty[:20]})
    no_rel = np.bincount(ranked.q_topic[ranked.q_grade >= ev.options["relevance_level"]],
                         minlength=len(ranked.topics)) == 0
    if no_rel.any():
        names = [ranked.topics[i] for i in no_rel.nonzero()[0]]
        level = ev.options["relevance_level"]
        out.append({"code": "topics-without-relevant", "message": f"{len(names)} topic(s) "
                    f"have no relevant document in the qrels (grade >= {level}, "
                    f"{name('relevance_level')}); most measures score them 0",
                    "topics": names[:20], "option": "relevance_level"})
    top = np.minimum(ranked.num_ret, 10)
    judged = np.bincount(ranked.hit_topic[(ranked.hit_rank <= 10) & (ranked.hit_label >= 0)],
                         minlength=len(ranked.topics))
    holes = (top - judged) > 0
    if holes.any():
        share = float((top - judged).sum() / max(int(top.sum()), 1))
        out.append({"code": "unjudged-in-top-10", "message": f"{int(holes.sum())} topic(s) have "
                    f"unjudged documents in their top 10 ({share:.1%} of those ranks); they "
                    f"count as non-relevant ({name('judged_only')} drops them instead)",
                    "topics": [ranked.topics[i] for i in holes.nonzero()[0][:20]],
                    "option": "judged_only"})
    md = ev.topic_metadata
    if md is not None:
        evaluated = ranked.topics if ev.options["complete_topics"] else t.evaluated
        missing = [x for x in evaluated if x not in md.labels]
        if missing:
            out.append({"code": "topics-without-metadata", "message": f"{len(missing)} "
                        "evaluated topic(s) are not in the topic metadata: they weigh 1 and "
                        "belong to no segment", "topics": missing[:20]})
        seen = set(evaluated)
        unused = [x for x in md.labels if x not in seen]
        if unused:
            out.append({"code": "metadata-topics-not-evaluated", "message": f"{len(unused)} "
                        "topic(s) of the topic metadata were not evaluated", "topics":
                        unused[:20]})
    for k, tied in sorted(ev.cutoff_ties.items()):
        if tied.any():
            names = [ranked.topics[i] for i in tied.nonzero()[0]]
            out.append({"code": "tie-at-cutoff", "message": f"in {len(names)} topic(s) a score "
                        f"tie straddles rank {k}: which document counts is decided by docno",
                        "cutoff": k, "topics": names[:20]})
    return out


def details_for(ev: Evaluation, run: Run, qrels: Qrels, depth: int) -> dict:
    """Per topic, like Elasticsearch's rank_eval: ranks of the relevant documents retrieved,
    and the unjudged documents in the top ``depth``."""
    from ..inputs.ranking import top_documents

    ranked = ev.ranked
    level = ev.options["relevance_level"]
    out: dict[str, dict] = {}
    tops = top_documents(run, depth, float32_scores=PROFILES[ev.profile].float32_scores)
    names = qrels.topics
    judged = {(names[t], d) for t, d, g in zip(qrels.topic_index.tolist(), qrels.docids.tolist(),
                                                qrels.grades.tolist(), strict=True) if g >= 0}
    hit_topic = ranked.hit_topic
    starts = hit_topic.searchsorted(np.arange(len(ranked.topics) + 1, dtype=hit_topic.dtype))
    for i, topic in enumerate(ranked.topics):
        if not ranked.in_run[i]:
            continue
        lo, hi = starts[i], starts[i + 1]
        rel = ranked.hit_rank[lo:hi][ranked.hit_label[lo:hi] >= level]
        docs = tops.get(topic, [])
        unjudged = [d for d in docs if (topic, d) not in judged]
        out[topic] = {"relevant_ranks": rel.tolist(), "unjudged_in_top": unjudged,
                      "depth": depth}
    return out


def efficiency(latency: dict[str, float], evaluated: list[str]) -> dict:
    values = np.asarray(list(latency.values()), dtype=np.float64)
    out = {"topics": len(values), "mean_ms": float(values.mean()),
           "p50_ms": float(np.percentile(values, 50)),
           "p95_ms": float(np.percentile(values, 95)),
           "p99_ms": float(np.percentile(values, 99)),
           "queries_per_second": float(1000.0 / values.mean()) if values.mean() > 0 else None,
           "method": "percentiles by linear interpolation; queries/s = 1000 / mean latency"}
    missing = sorted(set(evaluated) - set(latency))
    if missing:
        out["topics_without_latency"] = missing[:20]
    return out


def evaluation_document(ev, req: dict, run_digest: str, qrels_digest: str,
                        details: dict | None, qrels_version: str | None = None, *,
                        interface: str = "api") -> dict:
    """The JSON document for ``ev`` with its input lint: what ``POST /v1/evaluations``
    answers, the workers store and ``cranfield eval --format json`` prints (one shape:
    ``measures`` a list of specs, run and options under ``provenance``). ``req`` holds the
    request's ``per_topic``, ``latency_ms`` and ``curves`` (precision-recall curves);
    ``qrels_version`` names stored qrels (``id@version``); ``interface`` ("api" or "cli")
    how the warnings name options (``options.complete_topics`` or ``-c``)."""
    def clean(v):
        return None if isinstance(v, float) and v != v else v

    doc: dict[str, Any] = {
        "measures": [{"key": k, **v} for k, v in ev.measures.items()],
        "aggregate": {k: clean(v) for k, v in ev.aggregate.items()},
        "topics": ev.topics.as_dict(),
        "warnings": warnings_for(ev, interface),
        "provenance": {
            "engine": "cranfield", "engine_version": __version__,
            "profile": ev.profile, "options": ev.options,
            "run_sha256": run_digest, "qrels_sha256": qrels_digest, "runid": ev.runid,
        },
    }
    if qrels_version:
        doc["provenance"]["qrels_version"] = qrels_version
    if ev.segments is not None:  # topic metadata (cranfield.inputs.segments)
        doc["segments"] = {label: {"topics": seg["topics"],
                                   "aggregate": {k: clean(v) for k, v in
                                                 seg["aggregate"].items()}}
                           for label, seg in ev.segments.items()}
        doc["weighted"] = {k: clean(v) for k, v in (ev.weighted or {}).items()}
    if req["per_topic"]:
        doc["per_topic"] = {t: {k: clean(v) for k, v in row.items()}
                            for t, row in ev.per_topic.items()}
    if details is not None:
        doc["details"] = details
    if req.get("latency_ms"):
        doc["efficiency"] = efficiency(req["latency_ms"], ev.topics.evaluated)
    if req.get("curves"):
        from .curves import precision_recall

        doc["curves"] = precision_recall(ev, per_topic=req["per_topic"])
    return doc


def evaluation_from_document(doc: dict) -> Evaluation:
    """The per-topic side of an :class:`~cranfield.Evaluation` from its JSON document (a
    finished job's result), enough to compare it with others (:mod:`cranfield.compare.comparison`):
    values per measure key over the document's topics, the measures' descriptions, options,
    topic sets, aggregates and its input lint (``warnings``, kept for comparisons to show). The
    ranking is not in a document, so it has no curves.
    Raises ``ValueError`` when the document has no per-topic values."""
    per_topic = doc.get("per_topic")
    if not per_topic:
        raise ValueError("it has no per-topic values (it was made with per_topic false)")
    topics = list(per_topic)
    measures = {m["key"]: {k: v for k, v in m.items() if k != "key"} for m in doc["measures"]}
    values = {}
    for key, desc in measures.items():
        if not desc.get("per_topic"):
            continue
        column = [per_topic[t].get(key) for t in topics]
        numeric = all(v is None or isinstance(v, int | float) for v in column)
        values[key] = (np.asarray([np.nan if v is None else v for v in column], np.float64)
                       if numeric else np.asarray(column, dtype=object))
    prov = doc.get("provenance", {})
    sets = doc.get("topics", {})
    return Evaluation(
        instances=[], values=values, topic_order=topics,
        printed=np.ones(len(topics), bool), aggregate=dict(doc.get("aggregate", {})),
        measures=measures,
        topics=TopicSets(list(sets.get("evaluated", topics)), list(sets.get("run_only", [])),
                         list(sets.get("qrels_only", []))),
        runid=str(prov.get("runid", "")), options=dict(prov.get("options", {})), ranked=None,
        lint=[dict(w) for w in doc.get("warnings") or [] if isinstance(w, dict)],
        **segments_from_document(doc))
