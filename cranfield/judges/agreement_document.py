"""The agreement of many judges as a document: every statistic of
:mod:`cranfield.judges.agreement` per topic and over all topics, the overall ones with
percentile bootstrap intervals over topics, and the same as text.

Scopes. Cohen's kappa is a pair's: every pair of judges, over the documents both judged.
Fleiss' kappa needs one number of judges per document: in a topic, the documents judged by
the most judges any of its documents has; overall, those judged by the most judges any
document has (``fleiss.items`` and ``fleiss.judges`` say which). Krippendorff's alpha takes
every document judged at least twice. The overall statistics are those of all topics'
documents together (sums of the per-topic counts), not means of per-topic values.

The bootstrap resamples topics with replacement (``resamples`` times, numpy's PCG64 seeded by
``seed``), recomputes every overall statistic from the resampled topics' summed counts and
gives the percentile interval at ``level`` over the resamples where it is defined (None when
it is defined in none). Reference: B. Efron and R. Tibshirani, An Introduction to the
Bootstrap (1993), ch. 13.

Room: judges.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ..inputs.judgment_files import JudgmentGroups
from .agreement import (
    LEVELS,
    alpha_from_coincidences,
    coincidences,
    confusion,
    fleiss_agreements,
    fleiss_counts,
    fleiss_from_sums,
    kappa_from_confusion,
)
from .judged import count_judgments, grade_scale, judges_of, topic_judgments

__all__ = ["agreement_document", "agreement_work", "format_agreement", "KAPPAS", "ALPHAS"]

#: the kappa keys of a pair, by weighting
KAPPAS = {None: "kappa", "linear": "kappa_linear", "quadratic": "kappa_quadratic"}
#: the alpha keys, by level
ALPHAS = {level: f"alpha_{level}" for level in LEVELS}


def _round(value) -> float | None:
    return None if value is None or np.isnan(value) else round(float(value), 12)


def _fleiss_sums(values: np.ndarray, cats: np.ndarray, judges: int) -> np.ndarray:
    """[items, sum P_i, totals per category...] of the documents of a judges x documents
    matrix judged by exactly ``judges`` judges (>= 2)."""
    counts = fleiss_counts(values, cats)
    if judges < 2:
        return np.zeros(2 + len(cats))
    keep = counts[counts.sum(1) == judges]
    agree = float(fleiss_agreements(keep).sum()) if len(keep) else 0.0
    return np.concatenate([[len(keep), agree], keep.sum(0)])


def _statistics(conf: np.ndarray, fleiss: np.ndarray, coinc: np.ndarray,
                cats: np.ndarray) -> dict[str, np.ndarray]:
    """Every statistic of a stack of scopes (leading axes ...) from their summed counts:
    confusions (..., pairs, K, K), Fleiss sums (..., 2 + K), coincidences (..., K, K);
    ``cohen_KEY`` (..., pairs), ``fleiss`` and ``ALPHA`` (...), NaN where undefined."""
    out = {f"cohen_{key}": np.asarray(kappa_from_confusion(conf[..., None, :, :, :], w)
                                      ).reshape(conf.shape[:-2])
           for w, key in KAPPAS.items()}
    out["fleiss"] = np.asarray(fleiss_from_sums(fleiss[..., None, 0], fleiss[..., None, 1],
                                                fleiss[..., None, 2:])).reshape(
        fleiss.shape[:-1])
    for level, key in ALPHAS.items():
        out[key] = np.asarray(alpha_from_coincidences(coinc[..., None, :, :], cats, level)
                              ).reshape(coinc.shape[:-2])
    return out


def _scope(stats: dict, at: tuple, conf: np.ndarray, fleiss: np.ndarray, coinc: np.ndarray,
           pairs: list[tuple[str, str]], keep: list[int]) -> dict:
    """One scope's block of the document: the statistics at index ``at`` of ``stats``, for
    the pairs ``keep`` (indices into ``pairs``), with the counts they came from."""
    cohen = []
    for p in keep:
        row = {"judges": list(pairs[p]), "items": int(conf[p].sum())}
        row.update({key: _round(stats[f"cohen_{key}"][(*at, p)]) for key in KAPPAS.values()})
        cohen.append(row)
    krippendorff = {"pairable": _round(coinc.sum())}
    krippendorff.update({key: _round(stats[key][at]) for key in ALPHAS.values()})
    return {"cohen": cohen,
            "fleiss": {"kappa": _round(stats["fleiss"][at]), "items": int(fleiss[0])},
            "krippendorff": krippendorff}


def _interval(values: np.ndarray, level: float) -> list[float] | None:
    """The percentile interval at ``level`` of the defined (not NaN) resampled values."""
    defined = values[~np.isnan(values)]
    if len(defined) == 0:
        return None
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(defined, [tail, 1.0 - tail])
    return [_round(lo), _round(hi)]


#: the cost of one topic's block, per (pair of judges + 16): its counts and dictionaries
#: (about 30 microseconds a pair and 500 a topic here, at about 10 ns a unit)
TOPIC_WORK = 3000
#: how many cells a chunk of resamples holds at once: its draws and weights (chunk x
#: topics) and its count matrices (chunk x pairs x K^2) are each at most this
CHUNK_CELLS = 4_000_000


def agreement_work(groups: JudgmentGroups, resamples: int) -> int:
    """Units of work of :func:`agreement_document`, from sizes alone (read before the
    work): (resamples + 1) x (pairs of judges + 2) x (topics + 1) x categories^2, the
    count matrices summed over topics once and per resample; topics x (pairs + 16) x
    TOPIC_WORK, each topic's counts and block; and the judgments times the judges (each
    topic's judges x documents matrix)."""
    judges = len(judges_of(groups))
    k = len(grade_scale(groups))
    pairs = judges * (judges - 1) // 2
    topics = len(groups.topics)
    return ((resamples + 1) * (pairs + 2) * (topics + 1) * k * k
            + topics * (pairs + 16) * TOPIC_WORK + count_judgments(groups) * max(judges, 1))


def _bootstrap(conf, fleiss, coinc, cats, resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Every overall statistic of ``resamples`` resamples of the topics (rows of the count
    stacks), drawn with replacement by PCG64(``seed``): arrays of (resamples, ...). The
    resamples are drawn a chunk at a time (the stream's numbers in the same order as one
    draw of them all), so that what is held at once is bounded by CHUNK_CELLS whatever the
    number of resamples and topics, not resamples x topics."""
    topics = len(conf)
    rng = np.random.Generator(np.random.PCG64(seed))
    chunk = max(1, CHUNK_CELLS // max(1, topics, conf[0].size))
    parts: list[dict[str, np.ndarray]] = []
    for start in range(0, resamples, chunk):
        block = rng.integers(0, topics, (min(chunk, resamples - start), topics))
        weights = np.zeros((len(block), topics))
        np.add.at(weights, (np.arange(len(block))[:, None], block), 1.0)
        parts.append(_statistics(np.einsum("bt,tpkl->bpkl", weights, conf), weights @ fleiss,
                                 np.einsum("bt,tkl->bkl", weights, coinc), cats))
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def agreement_document(groups: JudgmentGroups, *, resamples: int = 1000, seed: int = 0,
                       level: float = 0.95) -> dict:
    """The agreement document of judged qrels (module docstring): ``judges``,
    ``categories`` (the grade scale), ``overall`` (each statistic with its ``*_ci``
    interval), ``topics`` (per topic, in byte order), ``bootstrap`` (resamples, seed,
    level). ``resamples`` 0: no intervals."""
    judges = judges_of(groups)
    cats = grade_scale(groups)
    topics = topic_judgments(groups, judges)
    pairs = list(combinations(judges, 2))
    index = {j: i for i, j in enumerate(judges)}
    most = max((int((~np.isnan(t.values)).sum(0).max()) for t in topics if t.values.size),
               default=0)
    t_count, k = len(topics), len(cats)
    conf = np.zeros((t_count, len(pairs), k, k))
    fleiss_all = np.zeros((t_count, 2 + k))
    fleiss_own = np.zeros((t_count, 2 + k))
    coinc = np.zeros((t_count, k, k))
    own = np.zeros(t_count, dtype=int)
    first = [index[a] for a, _ in pairs]
    second = [index[b] for _, b in pairs]
    for t, tj in enumerate(topics):
        if pairs:
            conf[t] = confusion(tj.values[first], tj.values[second], cats)
        fleiss_all[t] = _fleiss_sums(tj.values, cats, most)
        own[t] = int((~np.isnan(tj.values)).sum(0).max()) if tj.values.size else 0
        fleiss_own[t] = _fleiss_sums(tj.values, cats, own[t])
        coinc[t] = coincidences(tj.values, cats)
    each = _statistics(conf, fleiss_own, coinc, cats)
    per_topic = []
    for t, tj in enumerate(topics):
        judged = ~np.isnan(tj.values)
        present = [j for j in judges if judged[index[j]].any()]
        keep = [p for p, (a, b) in enumerate(pairs) if a in present and b in present]
        doc = _scope(each, (t,), conf[t], fleiss_own[t], coinc[t], pairs, keep)
        doc["fleiss"]["judges"] = int(own[t])
        per_topic.append({"topic": tj.topic, "documents": len(tj.docids),
                          "judgments": int(judged.sum()), "judges": present, **doc})
    total = conf.sum(0), fleiss_all.sum(0), coinc.sum(0)
    overall = _scope(_statistics(*total, cats), (), *total, pairs, list(range(len(pairs))))
    overall["fleiss"]["judges"] = most
    if resamples > 0 and topics:
        boots = _bootstrap(conf, fleiss_all, coinc, cats, resamples, seed)
        for p, row in enumerate(overall["cohen"]):
            for key in KAPPAS.values():
                row[f"{key}_ci"] = _interval(boots[f"cohen_{key}"][:, p], level)
        overall["fleiss"]["kappa_ci"] = _interval(boots["fleiss"], level)
        for key in ALPHAS.values():
            overall["krippendorff"][f"{key}_ci"] = _interval(boots[key], level)
    return {"judges": judges, "categories": [_round(c) for c in cats.tolist()],
            "judgments": count_judgments(groups), "overall": overall, "topics": per_topic,
            "bootstrap": {"resamples": resamples, "seed": seed, "level": level,
                          "over": "topics"}}


def _number(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.4f}"


def _lines(scope: str, doc: dict, intervals: bool) -> list[str]:
    def ci(block: dict, key: str) -> str:
        if not intervals:
            return ""
        interval = block.get(f"{key}_ci")
        return "\t[undefined]" if interval is None else \
            f"\t[{interval[0]:.4f}, {interval[1]:.4f}]"

    out = []
    for row in doc["cohen"]:
        pair = f"{row['judges'][0]},{row['judges'][1]}"
        for key in KAPPAS.values():
            out.append(f"cohen_{key}({pair})\t{scope}\t{_number(row[key])}{ci(row, key)}")
    out.append(f"fleiss_kappa\t{scope}\t{_number(doc['fleiss']['kappa'])}"
               f"{ci(doc['fleiss'], 'kappa')}")
    for key in ALPHAS.values():
        out.append(f"krippendorff_{key}\t{scope}\t{_number(doc['krippendorff'][key])}"
                   f"{ci(doc['krippendorff'], key)}")
    return out


def format_agreement(doc: dict, per_topic: bool = True) -> str:
    """The document as text: ``statistic<TAB>topic<TAB>value`` lines (trec_eval's layout),
    each topic's first when ``per_topic``, then ``all`` with the interval in brackets; a
    statistic its formula leaves undefined reads ``undefined``."""
    boot = doc["bootstrap"]
    lines = [f"# judges: {' '.join(doc['judges'])}",
             f"# bootstrap over topics: {boot['resamples']} resamples, seed {boot['seed']}, "
             f"level {boot['level']}"]
    if per_topic:
        for topic in doc["topics"]:
            lines += _lines(topic["topic"], topic, False)
    lines += _lines("all", doc["overall"], boot["resamples"] > 0)
    return "\n".join(lines) + "\n"

