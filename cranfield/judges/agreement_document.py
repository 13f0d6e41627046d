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


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 12)


def _fleiss_sums(values: np.ndarray, cats: np.ndarray, judges: int) -> np.ndarray:
    """[items, sum P_i, totals per category...] of the documents of a judges x documents
    matrix judged by exactly ``judges`` judges (>= 2)."""
    counts = fleiss_counts(values, cats)
    if judges < 2:
        return np.zeros(2 + len(cats))
    keep = counts[counts.sum(1) == judges]
    agree = float(fleiss_agreements(keep).sum()) if len(keep) else 0.0
    return np.concatenate([[len(keep), agree], keep.sum(0)])


def _scope(confusions: np.ndarray, fleiss: np.ndarray, coinc: np.ndarray, cats: np.ndarray,
           pairs: list[tuple[str, str]]) -> dict:
    """The statistics of one scope from its summed counts: confusions (pairs x K x K),
    Fleiss sums, coincidences (K x K)."""
    cohen = []
    for (a, b), matrix in zip(pairs, confusions, strict=True):
        row = {"judges": [a, b], "items": int(matrix.sum())}
        row.update({key: _round(kappa_from_confusion(matrix, w)) for w, key in KAPPAS.items()})
        cohen.append(row)
    krippendorff = {"pairable": _round(coinc.sum())}
    krippendorff.update({key: _round(alpha_from_coincidences(coinc, cats, level))
                         for level, key in ALPHAS.items()})
    return {"cohen": cohen,
            "fleiss": {"kappa": _round(fleiss_from_sums(fleiss[0], fleiss[1], fleiss[2:])),
                       "items": int(fleiss[0])},
            "krippendorff": krippendorff}


def _interval(values: list[float | None], level: float) -> list[float] | None:
    defined = np.array([v for v in values if v is not None], dtype=float)
    if len(defined) == 0:
        return None
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(defined, [tail, 1.0 - tail])
    return [_round(lo), _round(hi)]


#: the work one resample costs beside its counts (a statistic computed in Python)
STATISTIC_WORK = 1000


def agreement_work(groups: JudgmentGroups, resamples: int) -> int:
    """Units of work of :func:`agreement_document`, from sizes alone (read before the
    work): (resamples + 1) x (pairs of judges + 2) x (topics x categories^2 +
    STATISTIC_WORK), the summed count matrices of each statistic once and per resample;
    topics x (pairs + 2) x STATISTIC_WORK, each topic's own statistics; and the judgments
    times the judges (each topic's judges x documents matrix)."""
    judges = len(judges_of(groups))
    k = len(grade_scale(groups))
    pairs = judges * (judges - 1) // 2
    topics = len(groups.topics)
    return ((resamples + 1) * (pairs + 2) * (topics * k * k + STATISTIC_WORK)
            + topics * (pairs + 2) * STATISTIC_WORK + count_judgments(groups) * max(judges, 1))


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
    most = max((int((~np.isnan(t.values)).sum(0).max()) for t in topics), default=0)
    conf = np.zeros((len(topics), len(pairs), len(cats), len(cats)))
    fleiss_all = np.zeros((len(topics), 2 + len(cats)))
    coinc = np.zeros((len(topics), len(cats), len(cats)))
    per_topic = []
    for t, tj in enumerate(topics):
        for p, (a, b) in enumerate(pairs):
            conf[t, p] = confusion(tj.values[index[a]], tj.values[index[b]], cats)
        fleiss_all[t] = _fleiss_sums(tj.values, cats, most)
        coinc[t] = coincidences(tj.values, cats)
        judged = ~np.isnan(tj.values)
        own = int(judged.sum(0).max()) if tj.values.size else 0
        fleiss_own = _fleiss_sums(tj.values, cats, own)
        present = [(a, b) for a, b in pairs if judged[index[a]].any() and judged[index[b]].any()]
        keep = [pairs.index(pq) for pq in present]
        doc = _scope(conf[t, keep], fleiss_own, coinc[t], cats, present)
        doc["fleiss"]["judges"] = own
        per_topic.append({"topic": tj.topic, "documents": len(tj.docids),
                          "judgments": int(judged.sum()),
                          "judges": [j for j in judges if judged[index[j]].any()], **doc})
    overall = _scope(conf.sum(0), fleiss_all.sum(0), coinc.sum(0), cats, pairs)
    overall["fleiss"]["judges"] = most
    if resamples > 0 and topics:
        rng = np.random.Generator(np.random.PCG64(seed))
        draws = rng.integers(0, len(topics), (resamples, len(topics)))
        weights = np.stack([np.bincount(d, minlength=len(topics)) for d in draws]).astype(float)
        boots = [_scope(np.einsum("t,tpkl->pkl", w, conf), w @ fleiss_all,
                        np.einsum("t,tkl->kl", w, coinc), cats, pairs) for w in weights]
        for p, row in enumerate(overall["cohen"]):
            for key in KAPPAS.values():
                row[f"{key}_ci"] = _interval([b["cohen"][p][key] for b in boots], level)
        overall["fleiss"]["kappa_ci"] = _interval([b["fleiss"]["kappa"] for b in boots], level)
        for key in ALPHAS.values():
            overall["krippendorff"][f"{key}_ci"] = _interval(
                [b["krippendorff"][key] for b in boots], level)
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

