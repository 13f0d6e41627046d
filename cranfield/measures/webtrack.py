"""The TREC Web track's own evaluators: ndeval 4.5 (diversity) and gdeval 1.3 (graded).

These are not trec_eval measures with other names: they read their inputs differently
(ndeval orders by the rank column unless ``traditional``; gdeval keeps only positive
judgments and caps grades at 4), count topics differently, and print their own CSV. Each is
implemented here with its tool's exact semantics (``docs/ndeval_semantics.md`` in the shared
docs, summarised in each docstring) and reproduces the tools' outputs on the TREC 2012 Web
track runs (``tests/engine/test_webtrack_conformance.py``).

Per-topic sums are numpy ``bincount`` over (topic, rank, subtopic) pairs; only the greedy
ideal ranking of ndeval is a loop, over its ranks (it is greedy by definition), run for all
topics at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..inputs.ranking import within_topic_index
from ..inputs.swapped import refuse_swapped
from ..inputs.trec_source import refuse_bom

NDEVAL_DEPTHS = (5, 10, 20)
GDEVAL_MAX_JUDGMENT = 4


@dataclass
class WebTrackResult:
    """Rows of a Web-track tool: ``per_topic`` {topic: {column: value}} in the tool's topic
    order, ``amean`` {column: value}, the ``runid`` the tool prints, and its print format."""

    runid: str
    columns: tuple[str, ...]
    per_topic: dict[str, dict[str, float]]
    amean: dict[str, float]
    decimals: int

    def csv(self) -> str:
        """The tool's CSV, byte for byte (glibc prints 0/0 as ``-nan``)."""
        def fmt(v: float) -> str:
            return "-nan" if math.isnan(v) else f"{v:.{self.decimals}f}"

        lines = [",".join(("runid", "topic") + self.columns)]
        for topic, row in list(self.per_topic.items()) + [("amean", self.amean)]:
            lines.append(",".join([self.runid, topic] + [fmt(row[c]) for c in self.columns]))
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------------------------

def _lines(data: bytes | str, label: str, nfields: int) -> list[list[str]]:
    # a UTF-8 byte-order mark refused with the sentence every TREC reader gives
    # (io.refuse_bom), not as a first topic that is not a number: one input, one answer.
    # Text is its first character's bytes (surrogatepass: a lone surrogate is never the mark)
    refuse_bom(data[:1].encode("utf-8", "surrogatepass") if isinstance(data, str) else data,
               label)
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) != nfields:
            raise InputError(label, f"expected {nfields} fields, found {len(fields)}"
                             + (" (a blank line)" if not fields else ""), line=lineno)
        out.append(fields)
    return out


def _natural(text: str, label: str, lineno: int, what: str) -> int:
    if not text.isdigit():
        raise InputError(label, f"{what} {text!r} is not a natural number", line=lineno)
    return int(text)


@dataclass
class _RankedRun:
    topic: np.ndarray   # int topic of each kept line, grouped by topic ascending
    rank: np.ndarray    # 1-based rank after ordering (and the -M cut)
    docno: list[str]
    runid: str


def _read_ndeval_run(data, traditional: bool, max_depth: int | None) -> _RankedRun:
    """ndeval's run reader: 6 fields; topic prefix up to the first ``-`` dropped; rank column
    order (or score desc, docno desc with ``traditional``); duplicates are fatal."""
    rows = _lines(data, "run", 6)
    if not rows:
        raise InputError("run", "is empty")
    topics = np.array([_natural(r[0].split("-", 1)[-1] if "-" in r[0] else r[0], "run", i + 1,
                                "topic") for i, r in enumerate(rows)], dtype=np.int64)
    ranks = np.array([_natural(r[3], "run", i + 1, "rank") for i, r in enumerate(rows)],
                     dtype=np.int64)
    try:
        scores = np.array([float(r[4]) for r in rows])
    except ValueError as exc:
        raise InputError("run", f"a score is not a number: {exc}") from None
    docnos = np.array([r[2] for r in rows], dtype=object)
    if traditional:
        # score descending, then docno descending (strcmp order: compare UTF-8 bytes)
        order = np.lexsort((-docno_rank(docnos.tolist()), -scores, topics))
    else:
        order = np.lexsort((ranks, topics))
        same = (topics[order][1:] == topics[order][:-1]) & \
            (ranks[order][1:] == ranks[order][:-1])
        if same.any():
            i = int(order[1:][same][0])
            raise InputError("run", f"rank {ranks[i]} appears twice in topic {topics[i]}",
                             line=i + 1, code="duplicate-rank")
    topics, docnos = topics[order], docnos[order]
    start = np.searchsorted(topics, topics, side="left")
    new_rank = np.arange(len(topics)) - start + 1
    pair = sorted(zip(topics.tolist(), docnos.tolist(), strict=True))
    for a, b in zip(pair, pair[1:], strict=False):
        if a == b:
            raise InputError("run", f"docno {a[1]!r} appears twice in topic {a[0]}",
                             code="duplicate-docid")
    keep = new_rank <= max_depth if max_depth else np.ones(len(topics), dtype=bool)
    return _RankedRun(topics[keep], new_rank[keep], docnos[keep].tolist(), rows[0][5])


def docno_rank(docnos) -> np.ndarray:
    """Each docno's position in strcmp order (UTF-8 bytes; equal docnos share one): the tie
    key of trec_eval's and ndeval's orderings."""
    keys = np.array([d.encode("utf-8", "surrogateescape") for d in docnos], dtype=object)
    return np.unique(keys, return_inverse=True)[1].astype(np.int64).reshape(-1)


def _read_subtopic_qrels(data) -> tuple[dict[tuple[int, str], list[int]], dict[int, int]]:
    """ndeval's qrels: ``topic subtopic docno judgment``, all natural numbers, judgment > 1
    read as 1. Returns {(topic, docno): [relevant subtopics]} (every judged doc, relevant or
    not) and {topic: number of subtopic slots}."""
    judged: dict[tuple[int, str], list[int]] = {}
    slots: dict[int, int] = {}
    for i, (t, s, d, j) in enumerate(_lines(data, "qrels", 4), 1):
        topic = _natural(t, "qrels", i, "topic")
        sub = _natural(s, "qrels", i, "subtopic")
        grade = _natural(j, "qrels", i, "judgment")
        rels = judged.setdefault((topic, d), [])
        slots[topic] = max(slots.get(topic, 0), sub + 1)
        if grade > 0 and sub not in rels:
            rels.append(sub)
    for rels in judged.values():
        rels.sort()  # gains are summed over subtopics in ascending order
    return judged, slots


# --------------------------------------------------------------------------------------------
# ndeval
# --------------------------------------------------------------------------------------------

def ndeval(qrels, run, *, alpha: float = 0.5, beta: float = 0.5, traditional: bool = False,
           complete: bool = False, max_depth: int | None = None) -> WebTrackResult:
    """ndeval 4.5: diversity measures from subtopic qrels (``topic subtopic docno judgment``).

    With g(r) = sum_j rel_j(r) (1-alpha)^{c_j(r)} (c_j(r): docs above r relevant to j),
    disc(r) = log 2 / log(r+1) and S the subtopics with a relevant doc:
    alpha-DCG@k = sum_{r<=k} g(r) disc(r) / sum_{r<=k} S (1-alpha)^{r-1} disc(r);
    ERR-IA@k = sum_{r<=k} g(r)/r / sum_{r<=k} S (1-alpha)^{r-1}/r; alpha-nDCG@k and
    nERR-IA@k divide the raw sums by those of the greedy ideal ranking (0 when the run's
    alpha-DCG@k is 0); NRBP = (1-(1-alpha) beta)/S sum_r beta^{r-1} g(r) over the whole
    list, nNRBP = NRBP / the ideal's (NaN when S = 0); MAP-IA = mean_j AP_j; P-IA@k =
    sum_{r<=k} sum_j rel_j(r) / (k S); strec@k = subtopics covered in the top k / S.

    Rows: every run topic, ascending; amean = row sums / topics in both (``complete``: / qrels
    topics). Reference: Clarke et al. 2008 (alpha-nDCG), Chapelle et al. 2011 (ERR-IA),
    Clarke et al. 2009 (NRBP); ndeval.c 4.5, TREC Web track.
    """
    refuse_swapped(qrels, run, "cranfield.measures.webtrack.ndeval", "ndeval(qrels, run, ...)")
    ranked = _read_ndeval_run(run, traditional, max_depth)
    judged, _ = _read_subtopic_qrels(qrels)
    qrels_topics = sorted({t for t, _ in judged})
    run_topics = sorted(set(ranked.topic.tolist()))
    # one row per run topic and per qrels topic (the latter only for the ideal and S)
    topics = sorted(set(run_topics) | set(qrels_topics))
    index = {t: i for i, t in enumerate(topics)}
    in_qrels = np.array([t in set(qrels_topics) for t in topics])
    in_both = in_qrels & np.isin(topics, run_topics)
    subs_of_run = [judged.get(k, ()) for k in zip(ranked.topic.tolist(), ranked.docno,
                                                  strict=True)]
    keep = [i for i, subs in enumerate(subs_of_run) if subs]
    hit_pairs = _subtopic_pairs(keep, dict(enumerate(subs_of_run)))
    docs = list(judged)
    doc_topic = np.array([index[t] for t, _ in docs], dtype=np.int64)
    doc_key = docno_rank([d for _, d in docs])
    pair_doc, pair_sub = _subtopic_pairs(docs, judged)
    ideal = greedy_gains(len(topics), doc_topic, doc_key, pair_doc, pair_sub, alpha)
    table = diversity_table(len(topics), np.array([index[t] for t in
                                                    ranked.topic[keep].tolist()], np.int64),
                            ranked.rank[keep], *hit_pairs, ideal, doc_topic[pair_doc],
                            pair_sub, in_both, alpha, beta, NDEVAL_DEPTHS)
    columns = columns_for(NDEVAL_DEPTHS)
    rows = {str(t): {c: float(table[c][index[t]]) for c in columns} for t in run_topics}
    divisor = len(qrels_topics) if complete else len(set(run_topics) & set(qrels_topics))
    amean = {c: (sum(r[c] for r in rows.values()) / divisor if divisor else 0.0)
             for c in columns}
    return WebTrackResult(ranked.runid, columns, rows, amean, 6)


def columns_for(depths) -> tuple[str, ...]:
    """ndeval's columns at these depths, in its order."""
    return tuple([f"ERR-IA@{k}" for k in depths] + [f"nERR-IA@{k}" for k in depths]
                 + [f"alpha-DCG@{k}" for k in depths] + [f"alpha-nDCG@{k}" for k in depths]
                 + ["NRBP", "nNRBP", "MAP-IA"] + [f"P-IA@{k}" for k in depths]
                 + [f"strec@{k}" for k in depths])


def _pairs(doc_topic, doc_rank, pair_doc, pair_sub):
    """(topic, rank, subtopic) of every relevant (document, subtopic) pair — ``pair_doc``
    indexes ``doc_topic``/``doc_rank`` — sorted by topic, rank, subtopic, with c: how many
    documents above it were relevant to that subtopic."""
    topic = np.asarray(doc_topic, dtype=np.int64)[pair_doc]
    rank = np.asarray(doc_rank, dtype=np.int64)[pair_doc]
    sub = np.asarray(pair_sub, dtype=np.int64)
    order = np.lexsort((sub, rank, topic))
    topic, rank, sub = topic[order], rank[order], sub[order]
    by_sub = np.lexsort((rank, sub, topic))
    t2, s2 = topic[by_sub], sub[by_sub]
    first = np.r_[True, (t2[1:] != t2[:-1]) | (s2[1:] != s2[:-1])] if len(t2) else t2 > 0
    group = np.cumsum(first) - 1  # one group per (topic, subtopic), in rank order
    seen = np.empty(len(by_sub), dtype=np.int64)
    seen[by_sub] = within_topic_index(group, int(group[-1]) + 1 if len(group) else 0)
    return topic, rank, sub, seen


def _subtopic_pairs(keys: list, subs: dict) -> tuple[np.ndarray, np.ndarray]:
    """(document index, subtopic) arrays of a {key: [subtopics]} map, for ``keys`` in order."""
    lengths = np.fromiter((len(subs[k]) for k in keys), np.int64, len(keys))
    pair_doc = np.repeat(np.arange(len(keys)), lengths)
    pair_sub = np.fromiter((x for k in keys for x in subs[k]), np.int64, int(lengths.sum()))
    return pair_doc, pair_sub


def greedy_gains(n_topics: int, doc_topic: np.ndarray, doc_key: np.ndarray,
                  pair_doc: np.ndarray, pair_sub: np.ndarray, alpha: float) -> np.ndarray:
    """ndeval's ``idealResult`` for every topic at once: each topic's judged documents picked
    greedily by largest current gain, ties to the larger docno (``doc_key``: larger = larger
    docno), each pick decaying its subtopics by (1 - alpha). Returns the ideal's gain at each
    rank (topics x the most judged documents of a topic), 0 past a topic's list."""
    n = len(doc_topic)
    order = np.lexsort((-np.asarray(doc_key), doc_topic))  # docno descending in each topic
    t = np.asarray(doc_topic)[order]
    start = np.searchsorted(t, np.arange(n_topics))
    pos = np.arange(n) - start[t]
    width = int(pos.max()) + 1 if n else 0
    n_sub = int(pair_sub.max()) + 1 if len(pair_sub) else 1
    rel = np.zeros((n_topics, width, n_sub), dtype=bool)
    pos_of_doc = np.empty(n, dtype=np.int64)
    pos_of_doc[order] = pos
    rel[np.asarray(doc_topic)[pair_doc], pos_of_doc[pair_doc], pair_sub] = True
    valid = np.zeros((n_topics, width), dtype=bool)
    valid[t, pos] = True
    weight = np.ones((n_topics, n_sub))
    picked = np.zeros((n_topics, width), dtype=bool)
    gains = np.zeros((n_topics, width))
    live = np.flatnonzero(valid.any(axis=1))
    for step in range(width):
        live = live[valid[live, step]] if step else live  # topics with a document left
        if not len(live):
            break
        gain = np.zeros((len(live), width))
        for j in range(n_sub):  # summed over subtopics in order, as ndeval adds them
            gain = gain + np.where(rel[live, :, j], weight[live, j][:, None], 0.0)
        gain = np.where(valid[live] & ~picked[live], gain, -1.0)
        best = gain.argmax(axis=1)
        gains[live, step] = gain[np.arange(len(live)), best]
        picked[live, best] = True
        hit = rel[live, best]
        weight[live] = np.where(hit, weight[live] * (1.0 - alpha), weight[live])
    return np.maximum(gains, 0.0)


def diversity_table(n_topics: int, hit_topic, hit_rank, pair_hit, pair_sub,
                    ideal_gain: np.ndarray, judged_topic, judged_sub,
                    in_both: np.ndarray, alpha: float, beta: float, depths
                    ) -> dict[str, np.ndarray]:
    """ndeval's columns for ``n_topics`` topics at once, from the relevant (document,
    subtopic) pairs of the ranked lists (``pair_hit`` indexes the hits' topic and rank),
    each topic's greedy ideal gains, and the (topic, subtopic) of every relevant judgment
    (for S and the relevant documents per subtopic). Sums run in rank order, as ndeval's
    loops add them. ``in_both``: the topics in the run and the qrels, the ones ndeval prints
    a row for with S from the qrels; one with S = 0 has nNRBP NaN, any other topic (a qrels
    topic missing from the run, which -c counts but prints no row for) 0."""
    cols = {c: np.zeros(n_topics) for c in columns_for(depths)}
    one_minus = 1.0 - alpha
    p_topic, p_rank, p_sub, seen = _pairs(hit_topic, hit_rank, pair_hit, pair_sub)
    # relevant documents per (topic, subtopic), and S: the subtopics that have one
    n_sub = int(max(np.max(judged_sub, initial=0), np.max(p_sub, initial=0))) + 1
    n_rel = np.bincount(np.asarray(judged_topic) * n_sub + np.asarray(judged_sub),
                        minlength=n_topics * n_sub).reshape(n_topics, n_sub)
    S = (n_rel > 0).sum(axis=1)
    weight = np.power(one_minus, seen.astype(np.float64))
    # g(r) per (topic, rank), pairs added in subtopic order
    key = p_topic * (int(p_rank.max(initial=0)) + 1) + p_rank
    uniq, first = np.unique(key, return_index=True)
    h_of_pair = np.searchsorted(uniq, key)
    g = np.bincount(h_of_pair, weights=weight, minlength=len(uniq))
    h_topic, h_rank = p_topic[first], p_rank[first].astype(np.float64)
    disc = np.log(2.0) / np.log(h_rank + 1.0)
    inv = 1.0 / h_rank
    # the ideal's ranks past its last document gain 0: its sums stop there (adding 0.0 changes
    # no bit), so only the 1-D ideal-ideal normalisers are as long as the largest depth
    width = ideal_gain.shape[1]
    ranks = np.arange(1, max(width, max(depths)) + 1, dtype=np.float64)
    i_disc = np.log(2.0) / np.log(ranks + 1.0)
    i_inv = 1.0 / ranks
    ideal = ideal_gain

    def ideal_sum(weights: np.ndarray, k: int) -> np.ndarray:
        kk = min(k, width)
        return np.cumsum(ideal[:, :kk] * weights[:kk], axis=1)[:, -1] if kk else \
            np.zeros(n_topics)

    ok = S > 0
    Sf = np.where(ok, S, 1).astype(np.float64)
    decay = np.power(one_minus, ranks - 1.0)
    for k in depths:
        top = h_rank <= k
        dcg = np.bincount(h_topic[top], weights=g[top] * disc[top], minlength=n_topics)
        err = np.bincount(h_topic[top], weights=g[top] * inv[top], minlength=n_topics)
        # the ideal-ideal normalisers: S (1-alpha)^{r-1} per rank, summed in rank order
        levels = np.unique(Sf)  # a handful of distinct S: each normaliser once
        ii_dcg = np.array([np.cumsum(x * decay[:k] * i_disc[:k])[-1] for x in levels])[
            np.searchsorted(levels, Sf)]
        ii_err = np.array([np.cumsum(x * decay[:k] * i_inv[:k])[-1] for x in levels])[
            np.searchsorted(levels, Sf)]
        i_dcg = ideal_sum(i_disc, k)
        i_err = ideal_sum(i_inv, k)
        cols[f"alpha-DCG@{k}"] = np.where(ok, dcg / ii_dcg, 0.0)
        cols[f"ERR-IA@{k}"] = np.where(ok, err / ii_err, 0.0)
        scored = ok & (dcg != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            cols[f"alpha-nDCG@{k}"] = np.where(scored, dcg / i_dcg, 0.0)
            cols[f"nERR-IA@{k}"] = np.where(scored, err / i_err, 0.0)
        pk = p_rank <= k
        cols[f"P-IA@{k}"] = np.where(ok, np.bincount(p_topic[pk], minlength=n_topics)
                                     / (k * Sf), 0.0)
        covered = pk & (seen == 0)
        cols[f"strec@{k}"] = np.where(ok, np.bincount(p_topic[covered], minlength=n_topics)
                                      / Sf, 0.0)
    scale = (1.0 - one_minus * beta) / Sf
    nrbp = scale * np.bincount(h_topic, weights=np.power(beta, h_rank - 1.0) * g,
                               minlength=n_topics)
    i_nrbp = scale * ideal_sum(np.power(beta, ranks - 1.0), width)
    cols["NRBP"] = np.where(ok, nrbp, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cols["nNRBP"] = np.where(ok, np.where(i_nrbp != 0, nrbp / i_nrbp, np.nan),
                                 np.where(in_both, np.nan, 0.0))
    # MAP-IA: per (topic, subtopic) AP over its relevant documents, then the mean over S
    ap_terms = (seen + 1) / p_rank / n_rel[p_topic, p_sub]
    cols["MAP-IA"] = np.where(ok, np.bincount(p_topic, weights=ap_terms,
                                              minlength=n_topics) / Sf, 0.0)
    return cols


def _perl_number(text: str) -> float:
    """A string as Perl reads it in numeric context: its leading number, else 0 (so "Q0"
    passes gdeval's check that the second qrels field is 0)."""
    import re

    match = re.match(r"\s*[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)", text)
    return float(match.group(0)) if match else 0.0


def gdeval(qrels, run, *, k: int = 20, complete: bool = False) -> WebTrackResult:
    """gdeval 1.3: nDCG@k with exponential gain and ERR@k, as the TREC Web track computed them.

    Formula: ndcg@k = sum_{i<=k} (2^{g_i} - 1)/log2(i+1) / the same over the topic's positive
    judgments sorted descending; err@k = sum_{r<=k} R_r/r prod_{i<r} (1 - R_i) with
    R = (2^g - 1)/16 (fixed: MAX_JUDGMENT = 4). Only judgments > 0 count; grades > 4 are
    errors. Order: score descending, docno descending (the rank column is ignored);
    duplicate docs count twice. Topics: those with a positive judgment ("seen"); run topics
    not seen print no row; ``complete`` divides by all seen topics.
    Reference: Chapelle et al. 2009 (ERR); gdeval.pl 1.3, TREC Web track.
    """
    refuse_swapped(qrels, run, "cranfield.measures.webtrack.gdeval", "gdeval(qrels, run, ...)")
    grades: dict[int, dict[str, int]] = {}
    for i, (t, it, d, j) in enumerate(_lines(qrels, "qrels", 4), 1):
        topic = _natural(t.rsplit("-", 1)[-1], "qrels", i, "topic")
        try:
            grade = int(j)
            if _perl_number(it) != 0:
                raise ValueError
        except ValueError:
            raise InputError("qrels", "expected `topic 0 docno judgment`", line=i) from None
        if grade > GDEVAL_MAX_JUDGMENT:
            raise InputError("qrels", f"judgment {grade} exceeds {GDEVAL_MAX_JUDGMENT}", line=i)
        if grade > 0:
            grades.setdefault(topic, {})[d] = grade
    rows = _lines(run, "run", 6)
    if not rows:
        raise InputError("run", "is empty")
    by_topic: dict[int, list[tuple[float, bytes, str]]] = {}
    for i, (t, q0, d, rank, score, _) in enumerate(rows, 1):
        if q0 != "Q0" or not rank.isdigit():
            raise InputError("run", "expected `topic Q0 docno rank score runid`", line=i)
        topic = _natural(t.rsplit("-", 1)[-1], "run", i, "topic")
        by_topic.setdefault(topic, []).append((float(score), d.encode(), d))
    out_rows: dict[str, dict[str, float]] = {}
    columns = (f"ndcg@{k}", f"err@{k}")
    discount = 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))
    for t in sorted(by_topic):
        if t not in grades:
            continue
        ranked = sorted(by_topic[t], key=lambda x: (x[0], x[1]), reverse=True)[:k]
        g = np.array([grades[t].get(d, 0) for _, _, d in ranked], dtype=np.float64)
        gain = np.power(2.0, g) - 1.0
        ideal = np.sort(np.array(list(grades[t].values()), dtype=np.float64))[::-1][:k]
        dcg = float(np.sum(gain * discount[:len(gain)]))
        idcg = float(np.sum((np.power(2.0, ideal) - 1.0) * discount[:len(ideal)]))
        stop = gain / 2.0 ** GDEVAL_MAX_JUDGMENT
        reach = np.cumprod(np.r_[1.0, 1.0 - stop[:-1]]) if len(stop) else stop
        err = float(np.sum(stop * reach / np.arange(1, len(stop) + 1)))
        out_rows[str(t)] = {columns[0]: dcg / idcg if idcg else 0.0, columns[1]: err}
    divisor = len(grades) if complete else len(out_rows)
    amean = {c: (sum(r[c] for r in out_rows.values()) / divisor if divisor else 0.0)
             for c in columns}
    return WebTrackResult(rows[-1][5], columns, out_rows, amean, 5)
