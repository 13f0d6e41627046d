"""Ranking a run against qrels: the exact trec_eval rank of every judged document, without
sorting whole topics by docno.

trec_eval sorts each topic by score descending and breaks ties by docno descending (byte
order), then labels each rank with its qrels grade, ``-2`` (in the qrels with a negative grade:
pooled but unjudged) or ``-1`` (not in the qrels). Every trec_eval measure depends on that
labelled list only through the ranks of the documents in the qrels and the list length, so
the rank of a judged document ``x`` is all we compute:

    rank(x) = 1 + #{y : s(y) > s(x)} + #{y : s(y) = s(x) and docno(y) > docno(x)}

The first count is a binary search in the topic's sorted scores (vectorised over all judged
documents at once); docnos are compared only inside tie groups whose labels differ, since
reordering documents with the same label cannot change any measure. Which judged documents
the run retrieved is found by :mod:`.matching`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .docid_keys import topic_blocks
from .mappings import MappedRun
from .matching import KEEP_KEYS_MAX_ROWS, match_judged
from .run_qrels import Qrels, Run
from .text_pass import PassedRun
from .trec_fast import release_memory

try:  # compiled score searches (cranfield/inputs/_mapscan.c); without it, numpy's
    from . import _mapscan
except ImportError:  # pragma: no cover - an install without a C compiler
    _mapscan = None

NONPOOL = -1
UNJUDGED = -2


@dataclass(eq=False)
class Ranked:
    """The judged view of a run: for each evaluated topic its list length and the ranks and
    labels of the qrels documents it retrieved (sorted by topic, then rank).

    ``qrels_rows`` maps each evaluated topic to its qrels rows (for num_rel, ideal gains...).
    Topics are indexed 0..T-1 in ``topics`` order.
    """

    topics: list[str]
    num_ret: np.ndarray          # int64[T]
    hit_topic: np.ndarray        # int64[H]
    hit_rank: np.ndarray         # int64[H], 1-based
    hit_label: np.ndarray        # int64[H]: grade >= 0, or UNJUDGED
    q_topic: np.ndarray          # int64[J]: evaluated-topic index of each qrels row used
    q_grade: np.ndarray          # int64[J]
    in_run: np.ndarray           # bool[T]: False for qrels topics missing from the run
    cutoff_ties: dict = field(default_factory=dict)  # k -> bool[T]: a tie straddles rank k
    # each hit's tie group (equal scores as the profile reads them) as 1-based ranks
    # first..last, inclusive: what tie-averaged DCG (ties=average) reads; None: not known
    hit_tie_first: np.ndarray | None = None  # int64[H]
    hit_tie_last: np.ndarray | None = None   # int64[H]



def _as_float32(*scores: np.ndarray) -> tuple[np.ndarray, ...]:
    """Scores as trec_eval 9.0.8 holds them, in a C float: beyond its range they become
    +-inf (a cast, not an error). Several arrays at once: entering errstate costs a few us,
    which a small evaluation notices."""
    with np.errstate(over="ignore"):
        return tuple(s.astype(np.float32) for s in scores)

def segmented_search(values: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     keep_going) -> np.ndarray:
    """Vectorised binary search: for each i, the first index j in [lo[i], hi[i]) for which
    ``keep_going(values[j], i)`` is False, given that it is True on a prefix of the range."""
    lo = lo.astype(np.int64, copy=True)
    hi = hi.astype(np.int64, copy=True)
    active = (lo < hi).nonzero()[0]
    while active.size:
        mid = (lo[active] + hi[active]) // 2
        go = keep_going(values[mid], active)
        lo[active[go]] = mid[go] + 1
        hi[active[~go]] = mid[~go]
        active = active[lo[active] < hi[active]]
    return lo


# Below this many rows, one global sort of integer keys beats a vectorised binary search
# (fewer numpy calls); above it, the sort would cost more than the search.
GLOBAL_KEYS_MAX_ROWS = 200_000
# Judged documents searched for at once (bounds the vectorised search's temporaries).
SEARCH_BLOCK = 1 << 17


def score_positions(scores: np.ndarray, tix: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    query: np.ndarray, *, global_keys: bool | None = None):
    """For each query score q in segment [lo, hi) of ``scores`` (each segment sorted
    descending, rows of one topic): the first position whose score is not > q, and the first
    whose score is not >= q (so [first, second) is q's tie group)."""
    if len(lo) and lo[0] == 0 and hi[0] == len(scores) and (lo[0] == lo).all():
        # every query in one segment spanning the array (a one-topic run): the descending
        # scores negated are ascending, so two plain searches answer (negation is exact)
        negated = -scores
        return (negated.searchsorted(-query, "left"),
                negated.searchsorted(-query, "right"))
    if global_keys is None:
        global_keys = len(scores) <= GLOBAL_KEYS_MAX_ROWS
    if not global_keys or len(query) == 0:
        if len(query) > SEARCH_BLOCK:  # in blocks: the search's temporaries stay small
            parts = [score_positions(scores, tix, lo[a:a + SEARCH_BLOCK],
                                     hi[a:a + SEARCH_BLOCK], query[a:a + SEARCH_BLOCK],
                                     global_keys=False)
                     for a in range(0, len(query), SEARCH_BLOCK)]
            return (np.concatenate([p[0] for p in parts]),
                    np.concatenate([p[1] for p in parts]))
        if _mapscan is not None and scores.dtype == query.dtype and \
                scores.dtype in (np.float64, np.float32):  # the same searches, compiled
            first, second = _mapscan.positions(
                np.ascontiguousarray(scores), np.ascontiguousarray(lo, np.int64),
                np.ascontiguousarray(hi, np.int64), np.ascontiguousarray(query))
            return np.frombuffer(first, np.int64), np.frombuffer(second, np.int64)
        first = segmented_search(scores, lo, hi, lambda v, i: query[i] < v)
        second = segmented_search(scores, first, hi, lambda v, i: query[i] <= v)
        return first, second
    # exact integer keys ascending along the array: (segment ordinal, descending score rank)
    uniq, rank = np.unique(scores, return_inverse=True)
    n = len(uniq) + 1
    ordinal = np.cumsum(np.concatenate(([1], tix[1:] != tix[:-1]))) if len(tix) else tix
    keys = ordinal.astype(np.int64) * n + (len(uniq) - rank)
    q_key = ordinal[lo].astype(np.int64) * n + (len(uniq) - uniq.searchsorted(query))
    return keys.searchsorted(q_key, "left"), keys.searchsorted(q_key, "right")


def rank_run(run: Run | MappedRun | PassedRun, qrels: Qrels, *, float32_scores: bool,
             depth: int | None = None, judged_only: bool = False,
             complete_topics: bool = False, tie_cutoffs: tuple[int, ...] = ()) -> Ranked:
    """Rank ``run`` against ``qrels`` with trec_eval's rules.

    Evaluated topics: run topics that have qrels, plus (``complete_topics``, trec_eval's
    ``-c``) qrels topics missing from the run, which get an empty ranking. A
    :class:`MappedRun` is checked, looked up and ranked in one compiled pass
    (:func:`_rank_mapped`); where that declines it is read as columns (which names any
    problem) and ranked as those are. A :class:`PassedRun` (a run file the compiled text pass
    read and ranked, :mod:`.text_pass`) comes with its hits.
    """
    topics, run_to_qrels, eval_of_qrels, run_to_eval = _evaluated_topics(
        run.topics, qrels, complete_topics)
    if isinstance(run, MappedRun):
        ranked = _rank_mapped(run, qrels, topics, run_to_qrels, eval_of_qrels, run_to_eval,
                              float32_scores=float32_scores, depth=depth,
                              judged_only=judged_only, tie_cutoffs=tie_cutoffs)
        if ranked is not None:
            return ranked
        run = run.columns()
    elif isinstance(run, PassedRun):  # read and ranked by the compiled text pass
        if run.fits(qrels, float32_scores, tie_cutoffs):
            return ranked_hits(qrels, topics, eval_of_qrels, run_to_eval, tie_cutoffs,
                               run.num_ret, run.hit_topic, run.hit_qrow, run.hit_rank,
                               run.hit_first, run.hit_last, run.cut_tied, depth=depth,
                               judged_only=judged_only)
        run = run.columns()
    return _ranked(run, qrels, topics, run_to_qrels, eval_of_qrels, run_to_eval,
                   float32_scores=float32_scores, depth=depth, judged_only=judged_only,
                   tie_cutoffs=tie_cutoffs)


def _evaluated_topics(run_topics: list[str], qrels: Qrels, complete_topics: bool):
    """(the evaluated topics in qrels order, each run topic's qrels topic, each qrels topic's
    evaluated index, each run topic's evaluated index; -1: none)."""
    if run_topics == qrels.topics:  # both sides name the same topics (both in strcmp order)
        same = np.arange(len(qrels.topics), dtype=np.int64)
        return list(qrels.topics), same, same, same
    qpos = {t: i for i, t in enumerate(qrels.topics)}
    run_to_qrels = np.asarray([qpos.get(t, -1) for t in run_topics], dtype=np.int64)
    if complete_topics:
        topics = list(qrels.topics)
        eval_of_qrels = np.arange(len(qrels.topics), dtype=np.int64)
    else:
        present = np.zeros(len(qrels.topics), dtype=bool)
        present[run_to_qrels[run_to_qrels >= 0]] = True
        eval_of_qrels = present.cumsum() - 1
        eval_of_qrels[~present] = -1
        topics = [t for t, p in zip(qrels.topics, present, strict=True) if p]
    # evaluated-topic index of each run topic (-1: not evaluated)
    run_to_eval = np.where(run_to_qrels >= 0, eval_of_qrels[np.maximum(run_to_qrels, 0)], -1)
    return topics, run_to_qrels, eval_of_qrels, run_to_eval


# Docid comparisons the compiled pass may make inside tie groups, per run row and judgment
# (plus a floor): past it, scores tied on purpose take the columns' path, which sorts.
TIE_WORK_PER_ROW = 16
TIE_WORK_MIN = 1 << 20


def _rank_mapped(run: MappedRun, qrels: Qrels, topics: list[str], run_to_qrels: np.ndarray,
                 eval_of_qrels: np.ndarray, run_to_eval: np.ndarray, *, float32_scores: bool,
                 depth: int | None, judged_only: bool,
                 tie_cutoffs: tuple[int, ...]) -> Ranked | None:
    """:func:`rank_run` of a run mapping by the compiled ``rank_mapping`` (one pass: the
    grammar, the judged docids' lookups, their ranks and tie groups, the cutoff ties), or
    None where it is not built or declines."""
    if _mapscan is None:
        return None
    ks = np.asarray(tie_cutoffs, dtype=np.int64)
    docids = qrels.docids  # (an object array is read through its buffer: no list of it)
    if not (isinstance(docids, np.ndarray) and docids.dtype == object and
            docids.flags.c_contiguous):
        docids = docids.tolist()
    got = _mapscan.rank_mapping(
        run.mapping if run.dicts is None else run.dicts, run.topics,
        np.ascontiguousarray(run_to_qrels, np.int64),
        qrels.offsets.astype(np.int64), docids, float32_scores, ks,
        TIE_WORK_PER_ROW * (len(run) + len(qrels)) + TIE_WORK_MIN)
    if got is None:
        return None
    lens, h_rt, h_qrow, rank, first, last = (np.frombuffer(b, np.int64) for b in got[:6])
    cut = np.frombuffer(got[6], np.bool_).reshape(len(ks), len(run.topics))
    return ranked_hits(qrels, topics, eval_of_qrels, run_to_eval, tie_cutoffs, lens, h_rt,
                       h_qrow, rank, first, last, cut, depth=depth, judged_only=judged_only)


def ranked_hits(qrels: Qrels, topics: list[str], eval_of_qrels: np.ndarray,
                run_to_eval: np.ndarray, tie_cutoffs: tuple[int, ...], lens: np.ndarray,
                h_rt: np.ndarray, h_qrow: np.ndarray, rank: np.ndarray, first: np.ndarray,
                last: np.ndarray, cut: np.ndarray, *, depth: int | None,
                judged_only: bool) -> Ranked:
    """The :class:`Ranked` of a compiled pass's output (``rank_mapping``'s, ``rank_text``'s):
    each run topic's length, the hits (run topic, qrels row, rank, tie group) by run topic
    then rank, and ``cut`` (bool[cutoffs, run topics]: a tie across the cutoff)."""
    evaluated_rt = (run_to_eval >= 0).nonzero()[0]
    ties = {}
    for c, k in enumerate(tie_cutoffs):
        row = np.zeros(len(topics), dtype=bool)
        row[run_to_eval[evaluated_rt]] = cut[c, evaluated_rt]
        ties[k] = row
    label = qrels.grades[h_qrow].astype(np.int64)
    label[label < 0] = UNJUDGED
    e_topic = run_to_eval[h_rt]
    # (hits come by run topic, then rank: in evaluated-topic order too, both in strcmp order)
    in_order = bool(len(e_topic) < 2 or (e_topic[1:] >= e_topic[:-1]).all())
    return assemble_ranked(qrels, topics, eval_of_qrels, run_to_eval, lens, ties, e_topic,
                           rank, label, first, last, depth=depth, judged_only=judged_only,
                           in_order=in_order)


def _ranked(run: Run, qrels: Qrels, topics: list[str], run_to_qrels: np.ndarray,
            eval_of_qrels: np.ndarray, run_to_eval: np.ndarray, *, float32_scores: bool,
            depth: int | None, judged_only: bool, tie_cutoffs: tuple[int, ...]) -> Ranked:
    """:func:`rank_run` once the evaluated topics are known: ``topics`` (evaluated, in qrels
    order), and for each run topic its qrels and evaluated index, for each qrels topic its
    evaluated index (-1: none)."""
    T = len(topics)
    tix = run.topic_index
    n_run_topics = len(run.topics)
    seg_lo, seg_hi = topic_blocks(tix, n_run_topics)  # (None: a topic's rows are scattered)

    # --- judged documents that the run retrieved ------------------------------------------
    j_rt, j_raw_score, j_qrow, j_row = match_judged(run, qrels, run_to_qrels, (seg_lo, seg_hi))
    if len(run) >= KEEP_KEYS_MAX_ROWS:  # (the run's keys, dropped: back to the OS, peak memory)
        release_memory()
    keep = run_to_eval[j_rt] >= 0
    if not keep.all():
        j_rt, j_raw_score, j_qrow = j_rt[keep], j_raw_score[keep], j_qrow[keep]
        j_row = j_row[keep] if j_row is not None else None

    # --- each topic's rows as one block, scores descending (usually nothing to do) --------
    scores, j_score = (_as_float32(run.scores, j_raw_score) if float32_scores
                       else (run.scores, j_raw_score))
    order = None
    if seg_lo is None:  # a topic's rows are scattered: group them (stable, so ties keep order)
        order = np.argsort(tix, kind="stable")
        tix = tix[order]
        scores = scores[order]
        seg_lo, seg_hi = topic_blocks(tix, n_run_topics)
    if len(scores) > 1:
        rising = (scores[1:] > scores[:-1]) & (tix[1:] == tix[:-1])
        if rising.any():
            inner = np.lexsort((-scores, tix))
            order = inner if order is None else order[inner]
            scores = scores[inner]
            tix = tix[inner]
            seg_lo, seg_hi = topic_blocks(tix, n_run_topics)

    j_label = qrels.grades[j_qrow].astype(np.int64)
    j_label[j_label < 0] = UNJUDGED

    lo, hi = seg_lo[j_rt], seg_hi[j_rt]
    if j_row is not None:  # the judged rows' own places: their tie groups, no search
        if order is not None:
            where = np.empty(len(order), dtype=np.int64)
            where[order] = np.arange(len(order))
            j_row = where[j_row]
            del where
        above, tie_end = tie_groups(scores, tix, j_row, lo, hi)
    else:
        above, tie_end = score_positions(scores, tix, lo, hi, j_score)
    del hi, j_score, j_row
    rank = above - lo + 1                                # rank ignoring docno tie-breaks
    tie_first, tie_last = rank.copy(), tie_end - lo      # the hit's tie group, ranks
    del lo
    tied = (tie_end - above > 1).nonzero()[0]
    if tied.size:
        rank[tied] += _docno_tie_offsets(run, qrels, order, above[tied], tie_end[tied],
                                         j_qrow[tied], j_label[tied])
    # (each step drops what it no longer needs: a run's arrays are large)
    del above, tie_end, tied, order, tix, j_qrow

    lens = seg_hi - seg_lo
    evaluated_run = run_to_eval >= 0
    ties = {}
    if tie_cutoffs:  # does the k-th score equal the (k+1)-th? (input lint; all k at once)
        evaluated_rt = evaluated_run.nonzero()[0]
        ks = np.asarray(tie_cutoffs, dtype=np.int64)
        long_enough = lens[evaluated_rt] > ks[:, None]             # [cutoffs, topics]
        # (positions of topics shorter than k are clipped into range, then masked out)
        at = np.minimum(seg_lo[evaluated_rt] + ks[:, None] - 1, max(len(scores) - 2, 0))
        cut_tied = np.zeros((len(ks), T), dtype=bool)
        if len(scores) > 1:
            cut_tied[:, run_to_eval[evaluated_rt]] = long_enough & (scores[at] == scores[at + 1])
        ties = dict(zip(tie_cutoffs, cut_tied, strict=True))
    del scores

    return assemble_ranked(qrels, topics, eval_of_qrels, run_to_eval, lens, ties,
                           run_to_eval[j_rt], rank, j_label, tie_first, tie_last,
                           depth=depth, judged_only=judged_only)


def assemble_ranked(qrels: Qrels, topics: list[str], eval_of_qrels: np.ndarray,
                    run_to_eval: np.ndarray, lens: np.ndarray, ties: dict,
                    e_topic: np.ndarray, rank: np.ndarray, label: np.ndarray,
                    tie_first: np.ndarray, tie_last: np.ndarray, *, depth: int | None,
                    judged_only: bool, in_order: bool = False) -> Ranked:
    """The :class:`Ranked` of a run's hits (judged documents retrieved: evaluated topic,
    rank, label, tie group), whichever way they were ranked: each run topic's length
    ``lens``, depth (-M) and -J applied, the qrels rows of the evaluated topics.
    ``in_order``: the hits already come by topic, then rank."""
    T = len(topics)
    evaluated_run = run_to_eval >= 0
    num_ret = np.zeros(T, dtype=np.int64)
    num_ret[run_to_eval[evaluated_run]] = lens[evaluated_run]
    in_run = np.zeros(T, dtype=bool)
    in_run[run_to_eval[evaluated_run]] = True

    if in_order:
        h_topic, h_rank, h_label, h_first, h_last = e_topic, rank, label, tie_first, tie_last
    else:
        srt = np.lexsort((rank, e_topic))
        h_topic, h_rank, h_label = e_topic[srt], rank[srt], label[srt]
        h_first, h_last = tie_first[srt], tie_last[srt]
        del srt
    del e_topic, rank, label, tie_first, tie_last
    if depth is not None:
        kept = h_rank <= depth
        h_topic, h_rank, h_label = h_topic[kept], h_rank[kept], h_label[kept]
        # a group the depth cuts keeps the members trec_eval's docno tie-break ranks first
        h_first, h_last = h_first[kept], np.minimum(h_last[kept], depth)
        num_ret = np.minimum(num_ret, depth)
    if judged_only:
        kept = h_label >= 0
        h_topic, h_rank, h_label = h_topic[kept], h_rank[kept], h_label[kept]
        h_first = h_first[kept]
        num_ret = np.bincount(h_topic, minlength=T).astype(np.int64)
        h_rank = within_topic_index(h_topic, T) + 1
        h_first, h_last = _regroup(h_topic, h_first, h_rank)

    if len(qrels.topics) == T and (eval_of_qrels == np.arange(T)).all():
        q_topic = qrels.topic_index.astype(np.int64)  # every qrels topic evaluated
        q_grade = qrels.grades.astype(np.int64, copy=False)
    else:
        q_keep = eval_of_qrels[qrels.topic_index] >= 0
        q_topic = eval_of_qrels[qrels.topic_index[q_keep]]
        q_grade = qrels.grades[q_keep].astype(np.int64)
    return Ranked(topics, num_ret, h_topic, h_rank, h_label, q_topic, q_grade, in_run, ties,
                  h_first, h_last)


def _regroup(topic: np.ndarray, group: np.ndarray, rank: np.ndarray):
    """Tie groups renumbered after documents were dropped (-J): the kept members of a group
    (same topic and old first rank; sorted by topic then rank, so adjacent) span the new ranks
    of its first and last kept member."""
    if not len(topic):
        return rank.copy(), rank.copy()
    starts = np.concatenate(([True], (topic[1:] != topic[:-1]) | (group[1:] != group[:-1])))
    gid = np.cumsum(starts) - 1
    begin = starts.nonzero()[0]
    end = np.concatenate((begin[1:], [len(rank)])) - 1
    return rank[begin][gid], rank[end][gid]


def tie_groups(scores: np.ndarray, tix: np.ndarray, pos: np.ndarray, lo: np.ndarray,
               hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows ``pos`` of a run whose topics' rows are blocks [lo, hi) with scores
    descending: the first and the end position of each one's tie group (equal scores in one
    topic), as :func:`score_positions` finds them by searching for a row's own score. A row
    whose neighbours have other scores is its own group; only the others are searched."""
    n = len(scores)
    above = pos.astype(np.int64, copy=True)
    end = above + 1
    if n < 2 or not len(pos):
        return above, end
    own = scores[pos]
    tied = ((above > lo) & (scores[np.maximum(above - 1, 0)] == own)) | \
        ((end < hi) & (scores[np.minimum(end, n - 1)] == own))
    t = tied.nonzero()[0]
    if t.size:
        above[t], end[t] = score_positions(scores, tix, lo[t], hi[t], own[t],
                                           global_keys=False)
    return above, end


def top_documents(run: Run, depth: int, *, float32_scores: bool) -> dict[str, list[str]]:
    """The first ``depth`` docids of each topic in trec_eval's order (score descending, docno
    descending). Sorts only each topic's candidates: scores at or above its depth-th score."""
    scores = _as_float32(run.scores)[0] if float32_scores else run.scores
    order = np.lexsort((-scores, run.topic_index))
    tix, srt = run.topic_index[order], scores[order]
    start = tix.searchsorted(np.arange(len(run.topics) + 1, dtype=tix.dtype))
    pos = np.arange(len(tix)) - start[tix]
    lens = np.diff(start)
    kth = np.where(lens >= depth, srt[np.minimum(start[:-1] + depth - 1, max(len(srt) - 1, 0))],
                   -np.inf) if len(srt) else np.zeros(0)
    cand = ((pos < depth) | (srt >= kth[tix])).nonzero()[0]
    rows = order[cand]
    docs = run.docids_at(rows).astype(str)
    final = np.lexsort((docs, srt[cand], tix[cand]))[::-1]  # all keys descending
    out: dict[str, list[str]] = {}
    for t, d in zip(tix[cand][final].tolist(), docs[final].tolist(), strict=True):
        lst = out.setdefault(run.topics[t], [])
        if len(lst) < depth:
            lst.append(d)
    return {t: out.get(t, []) for t in reversed(list(out))}


def within_topic_index(topic: np.ndarray, n_topics: int) -> np.ndarray:
    """0-based position of each element within its topic, for ``topic`` sorted ascending."""
    starts = topic.searchsorted(np.arange(n_topics, dtype=topic.dtype))
    return np.arange(len(topic), dtype=np.int64) - starts[topic]


def _docno_tie_offsets(run: Run, qrels: Qrels, order, start, end, qrow, label) -> np.ndarray:
    """For judged docs inside tie groups [start, end) of the sorted run: how many documents of
    the group have a larger docno (trec_eval ranks those first).

    Groups whose members all carry one label are left in arbitrary order: each judged
    document gets a distinct offset, which is all any measure can see.
    """
    offsets = np.zeros(len(start), dtype=np.int64)
    # group identity = its start position (unique across topics in the sorted run)
    g_id, g_inv, g_count = np.unique(start, return_inverse=True, return_counts=True)
    size_of_group = np.zeros(len(g_id), dtype=np.int64)
    size_of_group[g_inv] = (end - start)
    lab_min = np.full(len(g_id), np.iinfo(np.int64).max)
    lab_max = np.full(len(g_id), np.iinfo(np.int64).min)
    np.minimum.at(lab_min, g_inv, label)
    np.maximum.at(lab_max, g_inv, label)
    homogeneous = (g_count == size_of_group) & (lab_min == lab_max)

    same = homogeneous[g_inv]
    if same.any():
        idx = same.nonzero()[0]
        srt = idx[np.argsort(g_inv[idx], kind="stable")]
        grp = g_inv[srt]
        first = grp.searchsorted(grp)     # first position of each group in srt
        offsets[srt] = np.arange(len(srt)) - first

    mixed_groups = (~homogeneous).nonzero()[0]
    if mixed_groups.size:
        g_start = g_id[mixed_groups]
        g_len = size_of_group[mixed_groups]
        member_pos = np.repeat(g_start, g_len) + within_topic_index(
            np.repeat(np.arange(len(g_len)), g_len), len(g_len))
        member_group = np.repeat(np.arange(len(g_len)), g_len)
        rows = member_pos if order is None else order[member_pos]
        member_doc = run.docids_at(rows).astype(str)
        srt = np.lexsort((member_doc, member_group))
        member_doc = member_doc[srt]
        bounds = np.concatenate(([0], g_len.cumsum()))
        which = (~same).nonzero()[0]
        local = mixed_groups.searchsorted(g_inv[which])
        mine = qrels.docids_at(qrow[which]).astype(str)
        below = segmented_search(member_doc, bounds[local], bounds[local + 1],
                                 lambda v, i: v < mine[i])
        # members with a larger docno = group size - (#smaller) - 1
        offsets[which] = (bounds[local + 1] - below) - 1
    return offsets
