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

from .errors import InputError

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
        keys = np.array([d.encode() for d in docnos.tolist()], dtype=object)
        order = np.lexsort((_desc_bytes_rank(keys), -scores, topics))
    else:
        order = np.lexsort((ranks, topics))
        same = (topics[order][1:] == topics[order][:-1]) & \
            (ranks[order][1:] == ranks[order][:-1])
        if same.any():
            i = int(order[1:][same][0])
            raise InputError("run", f"rank {ranks[i]} appears twice in topic {topics[i]}",
                             line=i + 1)
    topics, docnos = topics[order], docnos[order]
    start = np.searchsorted(topics, topics, side="left")
    new_rank = np.arange(len(topics)) - start + 1
    pair = sorted(zip(topics.tolist(), docnos.tolist(), strict=True))
    for a, b in zip(pair, pair[1:], strict=False):
        if a == b:
            raise InputError("run", f"docno {a[1]!r} appears twice in topic {a[0]}")
    keep = new_rank <= max_depth if max_depth else np.ones(len(topics), dtype=bool)
    return _RankedRun(topics[keep], new_rank[keep], docnos[keep].tolist(), rows[0][5])


def _desc_bytes_rank(keys: np.ndarray) -> np.ndarray:
    """A sort key that orders byte strings descending (for lexsort, which sorts ascending)."""
    uniq, inverse = np.unique(keys, return_inverse=True)
    return len(uniq) - inverse


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

def ndeval(run, qrels, *, alpha: float = 0.5, beta: float = 0.5, traditional: bool = False,
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
    ranked = _read_ndeval_run(run, traditional, max_depth)
    judged, _ = _read_subtopic_qrels(qrels)
    qrels_topics = sorted({t for t, _ in judged})
    run_topics = sorted(set(ranked.topic.tolist()))
    # each topic's relevant subtopics (S) and their relevant-doc counts
    n_rel_sub: dict[int, dict[int, int]] = {}
    for (t, _), subs in judged.items():
        counts = n_rel_sub.setdefault(t, {})
        for s in subs:
            counts[s] = counts.get(s, 0) + 1
    S = {t: len(n_rel_sub.get(t, {})) for t in qrels_topics}

    run_gain = _gains(ranked.topic, ranked.rank, [judged.get(k, ()) for k in
                      zip(ranked.topic.tolist(), ranked.docno, strict=True)], alpha)
    ideal = _greedy_ideal(judged, qrels_topics, alpha)
    one_minus = 1.0 - alpha
    rows: dict[str, dict[str, float]] = {}
    for t in run_topics:
        rows[str(t)] = _ndeval_row(t, S.get(t, 0), run_gain.get(t), ideal.get(t),
                                   n_rel_sub.get(t, {}), alpha, beta, one_minus,
                                   t in S)
    divisor = len(qrels_topics) if complete else len(set(run_topics) & set(qrels_topics))
    columns = columns_for(NDEVAL_DEPTHS)
    amean = {c: (sum(r[c] for r in rows.values()) / divisor if divisor else 0.0)
             for c in columns}
    return WebTrackResult(ranked.runid, columns, rows, amean, 6)


@dataclass
class _TopicGains:
    """One topic's ranked list: per rank r (1-based, all ranks up to the list length), the
    novelty gain g(r), the relevant-subtopic count, and the (rank, subtopic) relevant pairs."""

    length: int
    gain: np.ndarray       # g(r), index r-1
    n_rel: np.ndarray      # sum_j rel_j(r)
    pair_rank: np.ndarray  # rank of each (doc, relevant subtopic) pair
    pair_sub: np.ndarray   # its subtopic
    pair_seen: np.ndarray  # docs above it relevant to the same subtopic (c_j(r))


def _gains(topics: np.ndarray, ranks: np.ndarray, subs: list, alpha: float
           ) -> dict[int, _TopicGains]:
    """Novelty gains of ranked lists given each position's relevant subtopics."""
    lengths = np.fromiter(map(len, subs), np.int64, len(subs))
    p_topic = np.repeat(topics, lengths)
    p_rank = np.repeat(ranks, lengths)
    p_sub = np.fromiter((s for ss in subs for s in ss), np.int64, int(lengths.sum()))
    # c_j(r): earlier pairs of the same (topic, subtopic), in rank order
    order = np.lexsort((p_rank, p_sub, p_topic))
    key_t, key_s = p_topic[order], p_sub[order]
    first = np.r_[True, (key_t[1:] != key_t[:-1]) | (key_s[1:] != key_s[:-1])]
    group_start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    seen = np.empty(len(order), dtype=np.int64)
    seen[order] = np.arange(len(order)) - group_start
    weight = np.power(1.0 - alpha, seen.astype(np.float64))
    out: dict[int, _TopicGains] = {}
    if not len(topics):
        return out
    bounds = np.searchsorted(topics, np.unique(topics))
    ends = np.r_[bounds[1:], len(topics)]
    # pairs are in (topic, rank, subtopic-as-listed) order: sums run in that order
    p_bounds = np.searchsorted(p_topic, np.unique(topics))
    p_ends = np.r_[p_bounds[1:], len(p_topic)]
    for t, a, b, pa, pb in zip(np.unique(topics).tolist(), bounds.tolist(), ends.tolist(),
                               p_bounds.tolist(), p_ends.tolist(), strict=True):
        length = int(ranks[a:b].max()) if b > a else 0
        r = p_rank[pa:pb]
        gain = np.bincount(r - 1, weights=weight[pa:pb], minlength=length)
        n_rel = np.bincount(r - 1, minlength=length)
        out[t] = _TopicGains(length, gain, n_rel, r, p_sub[pa:pb], seen[pa:pb])
    return out


def _greedy_ideal(judged: dict, topics: list[int], alpha: float) -> dict[int, _TopicGains]:
    """ndeval's ``idealResult``: every judged doc of a topic, picked greedily by largest
    current gain, ties to the larger docno; all topics advance one rank per step."""
    docs_by_topic: dict[int, list[tuple[str, list[int]]]] = {t: [] for t in topics}
    for (t, d), subs in judged.items():
        docs_by_topic[t].append((d, subs))
    n_topics = len(topics)
    width = max((len(v) for v in docs_by_topic.values()), default=0)
    n_sub = max((s + 1 for v in docs_by_topic.values() for _, subs in v for s in subs),
                default=1)
    # docs sorted by docno descending, so that argmax (the first maximum) is the larger docno
    rel = np.zeros((n_topics, width, n_sub), dtype=bool)
    valid = np.zeros((n_topics, width), dtype=bool)
    names: list[list[str]] = []
    for i, t in enumerate(topics):
        docs = sorted(docs_by_topic[t], key=lambda x: x[0].encode(), reverse=True)
        names.append([d for d, _ in docs])
        valid[i, :len(docs)] = True
        for j, (_, subs) in enumerate(docs):
            rel[i, j, subs] = True
    weight = np.ones((n_topics, n_sub))
    picked = np.zeros((n_topics, width), dtype=bool)
    chosen = np.zeros((n_topics, width), dtype=np.int64)
    rows = np.arange(n_topics)
    for step in range(width):
        gain = np.zeros((n_topics, width))
        for j in range(n_sub):  # sequential sum over subtopics, as ndeval adds them
            gain = gain + np.where(rel[:, :, j], weight[:, None, j], 0.0)
        gain = np.where(valid & ~picked, gain, -1.0)
        best = gain.argmax(axis=1)
        chosen[:, step] = best
        picked[rows, best] = True
        hit = rel[rows, best] & valid[rows, best][:, None]
        weight = np.where(hit, weight * (1.0 - alpha), weight)
    out: dict[int, _TopicGains] = {}
    for i, t in enumerate(topics):
        n = int(valid[i].sum())
        order = chosen[i, :n].tolist()
        subs = [np.flatnonzero(rel[i, j]).tolist() for j in order]
        gains = _gains(np.full(n, t, dtype=np.int64), np.arange(1, n + 1), subs, alpha)
        out[t] = gains.get(t, _TopicGains(0, np.zeros(0), np.zeros(0, np.int64),
                                          np.zeros(0, np.int64), np.zeros(0, np.int64),
                                          np.zeros(0, np.int64)))
    return out


def _prefix_at(values: np.ndarray, weights: np.ndarray, k: int) -> float:
    """sum_{r<=k} values[r-1] weights[r-1], added in rank order."""
    n = min(k, len(values))
    return float(np.cumsum(values[:n] * weights[:n])[-1]) if n else 0.0


def columns_for(depths) -> tuple[str, ...]:
    """ndeval's columns at these depths, in its order."""
    return tuple([f"ERR-IA@{k}" for k in depths] + [f"nERR-IA@{k}" for k in depths]
                 + [f"alpha-DCG@{k}" for k in depths] + [f"alpha-nDCG@{k}" for k in depths]
                 + ["NRBP", "nNRBP", "MAP-IA"] + [f"P-IA@{k}" for k in depths]
                 + [f"strec@{k}" for k in depths])


def _ndeval_row(t, S, run: _TopicGains | None, ideal: _TopicGains | None, n_rel_sub: dict,
                alpha, beta, one_minus, in_qrels, depths=NDEVAL_DEPTHS) -> dict[str, float]:
    row = dict.fromkeys(columns_for(depths), 0.0)
    if S == 0 or run is None:
        if in_qrels and S == 0:
            row["nNRBP"] = float("nan")
        return row
    depth = max(depths)
    ranks = np.arange(1, max(depth, run.length, ideal.length) + 1, dtype=np.float64)
    disc = math.log(2.0) / np.log(ranks + 1.0)
    inv = 1.0 / ranks
    ideal_ideal = S * np.power(one_minus, ranks - 1.0)
    for k in depths:
        dcg = _prefix_at(run.gain, disc, k)
        err = _prefix_at(run.gain, inv, k)
        dcg_ii = _prefix_at(ideal_ideal, disc, k)
        err_ii = _prefix_at(ideal_ideal, inv, k)
        row[f"alpha-DCG@{k}"] = dcg / dcg_ii
        row[f"ERR-IA@{k}"] = err / err_ii
        if dcg != 0.0:
            row[f"alpha-nDCG@{k}"] = dcg / _prefix_at(ideal.gain, disc, k)
            row[f"nERR-IA@{k}"] = err / _prefix_at(ideal.gain, inv, k)
        row[f"P-IA@{k}"] = float(run.n_rel[:k].sum()) / (k * S)
        row[f"strec@{k}"] = len(set(run.pair_sub[run.pair_rank <= k].tolist())) / S
    scale = (1.0 - one_minus * beta) / S
    nrbp = scale * _prefix_at(run.gain, np.power(beta, ranks - 1.0), run.length)
    ideal_nrbp = scale * _prefix_at(ideal.gain, np.power(beta, ranks - 1.0), ideal.length)
    row["NRBP"] = nrbp
    row["nNRBP"] = nrbp / ideal_nrbp if ideal_nrbp else float("nan")
    ap = 0.0
    for sub, n_rel in n_rel_sub.items():
        mine = run.pair_sub == sub
        ap += float(np.sum((run.pair_seen[mine] + 1) / run.pair_rank[mine])) / n_rel
    row["MAP-IA"] = ap / S
    return row


# --------------------------------------------------------------------------------------------
# gdeval
# --------------------------------------------------------------------------------------------

def _perl_number(text: str) -> float:
    """A string as Perl reads it in numeric context: its leading number, else 0 (so "Q0"
    passes gdeval's check that the second qrels field is 0)."""
    import re

    match = re.match(r"\s*[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+([eE][-+]?\d+)?)", text)
    return float(match.group(0)) if match else 0.0


def gdeval(run, qrels, *, k: int = 20, complete: bool = False) -> WebTrackResult:
    """gdeval 1.3: nDCG@k with exponential gain and ERR@k, as the TREC Web track computed them.

    Formula: ndcg@k = sum_{i<=k} (2^{g_i} - 1)/log2(i+1) / the same over the topic's positive
    judgments sorted descending; err@k = sum_{r<=k} R_r/r prod_{i<r} (1 - R_i) with
    R = (2^g - 1)/16 (fixed: MAX_JUDGMENT = 4). Only judgments > 0 count; grades > 4 are
    errors. Order: score descending, docno descending (the rank column is ignored);
    duplicate docs count twice. Topics: those with a positive judgment ("seen"); run topics
    not seen print no row; ``complete`` divides by all seen topics.
    Reference: Chapelle et al. 2009 (ERR); gdeval.pl 1.3, TREC Web track.
    """
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
