"""Diversity measures in the registry, with ndeval 4.5's definitions (see
:func:`cranfield.measures.webtrack.ndeval`, which reproduces ndeval's CSVs).

They need subtopic qrels (``topic subtopic docno judgment``), so :func:`cranfield.evaluate`
computes them apart from the other measures (:func:`diversity_values`): the run is ranked
as trec_eval ranks it (score descending, docno descending: ndeval's ``-traditional``, with
scores as doubles in every profile), the topics are trec_eval's (run topics with qrels; all
qrels topics with ``complete_topics``), and each value is ndeval's. Names:
``alpha_nDCG(alpha=0.5)@20``, ``alpha_DCG@10``, ``ERR_IA@20``, ``nERR_IA@20``, ``P_IA@10``,
``strec@10``, ``NRBP(alpha=0.5,beta=0.5)``, ``nNRBP``, ``MAP_IA``, and ir_measures'
spellings ``StRecall@10``, ``AP_IA``, ``α_nDCG@20``. Every one takes ``rel=`` (judgments >=
rel are relevant; ndeval's and the default: 1) and, where it has a cutoff, can go without
one (the whole ranking).
"""

from __future__ import annotations

import numpy as np

from ..errors import EvaluationError, InputError
from .registry import Param, register

_ALPHA = Param("alpha", "number", 0.5, "novelty discount: a subtopic already covered n times "
               "gains (1 - alpha)^n", minimum=0.0, maximum=1.0)
_BETA = Param("beta", "number", 0.5, "NRBP patience (probability of going on)", minimum=0.0,
              maximum=1.0)
_K = Param("k", "integer", None, "rank cutoff (none: the whole ranking; at most 10^6, as the "
           "ideal-ideal normalisers sum every rank up to k)", minimum=1, maximum=10 ** 6)
_REL = Param("rel", "integer", 1, "relevance level: judgments >= rel are relevant to their "
             "subtopic (ndeval: > 0)")

# measure name -> ndeval column (with {k} for the cutoff)
COLUMN = {"alpha_DCG": "alpha-DCG@{k}", "alpha_nDCG": "alpha-nDCG@{k}", "ERR_IA": "ERR-IA@{k}",
          "nERR_IA": "nERR-IA@{k}", "P_IA": "P-IA@{k}", "strec": "strec@{k}", "NRBP": "NRBP",
          "nNRBP": "nNRBP", "MAP_IA": "MAP-IA"}


def _no_cutoff_alpha(p: dict) -> str | None:
    """Without a cutoff the ideal-ideal normaliser of alpha_DCG and ERR_IA sums every rank:
    it is finite for alpha > 0 only."""
    if p.get("k") is None and p.get("alpha", 0.5) == 0:
        return "without a cutoff (@k), alpha must be > 0 (the normaliser diverges)"
    return None


def _register(name: str, doc: str, params: tuple, aliases: tuple[str, ...] = ()) -> None:
    """Register a diversity measure: its docstring is its documentation; its values come from
    :func:`diversity_values` (evaluate() routes them there), never from a Context."""
    def compute(ctx, p):
        raise EvaluationError("diversity measures are computed from subtopic qrels by "
                              "evaluate()")

    compute.__doc__ = doc
    check = {"check": _no_cutoff_alpha} if name in ("alpha_DCG", "ERR_IA") else {}
    register(name, family="diversity", kind="kw", all_trec=(), uses_rel_level=False,
             params=params + (_REL,), ir_name=name, aliases=aliases, extra=check)(compute)


_register("alpha_DCG", """alpha-DCG@k as ndeval prints it: normalised by the "ideal ideal".

    Formula: sum_{r<=k} g(r) disc(r) / sum_{r<=k} S (1-alpha)^{r-1} disc(r), with
    g(r) = sum_j rel_j(r) (1-alpha)^{c_j(r)}, disc(r) = 1/log2(r+1), S the subtopics with a
    relevant document, c_j(r) the documents above r relevant to subtopic j, rel_j(r) the
    document at r judged >= rel for subtopic j. Without @k: the whole ranking over the
    ideal-ideal summed over every rank (alpha > 0).
    0/0: S = 0 gives 0.
    Reference: Clarke et al. 2008, Novelty and diversity in information retrieval evaluation;
    ndeval 4.5.
    """, (_K, _ALPHA), ("α_DCG",))
_register("alpha_nDCG", """alpha-nDCG@k: the run's alpha-DCG over the greedy ideal ranking's.

    Formula: sum_{r<=k} g(r) disc(r) / the same for ndeval's greedy ideal (at each rank the
    judged document with the largest g, ties to the larger docno). Without @k: the whole
    ranking over the whole greedy ideal.
    0/0: a run alpha-DCG of 0 gives 0 (and S = 0).
    Reference: Clarke et al. 2008; ndeval 4.5.
    """, (_K, _ALPHA), ("α_nDCG",))
_register("ERR_IA", """Intent-aware ERR@k as ndeval computes it (uniform intents, stopping
    probability alpha).

    Formula: sum_{r<=k} g(r)/r / sum_{r<=k} S (1-alpha)^{r-1}/r. Without @k: the whole
    ranking over S sum_{r>=1} (1-alpha)^{r-1}/r = -S ln(alpha) / (1 - alpha) (alpha > 0).
    0/0: S = 0 gives 0.
    Reference: Chapelle et al. 2011, Intent-based diversity metrics; ndeval 4.5.
    """, (_K, _ALPHA))
_register("nERR_IA", """ERR-IA@k normalised by the greedy ideal ranking's.

    Formula: sum_{r<=k} g(r)/r / the same for the greedy ideal. Without @k: the whole
    ranking over the whole greedy ideal.
    0/0: a run alpha-DCG@k of 0 gives 0.
    Reference: Chapelle et al. 2011; ndeval 4.5.
    """, (_K, _ALPHA))
_register("P_IA", """Intent-aware precision at k.

    Formula: (1/S) sum_j (1/k) sum_{r<=k} rel_j(r); missing ranks count 0, the divisor is k.
    Without @k: over the whole ranking, divided by its length N.
    0/0: S = 0 (or N = 0 without @k) gives 0.
    Reference: Agrawal et al. 2009, Diversifying search results; ndeval 4.5.
    """, (_K,))
_register("strec", """Subtopic recall at k.

    Formula: |{j : some r <= k has rel_j(r)}| / S; without @k, over the whole ranking.
    0/0: S = 0 gives 0.
    Reference: Zhai, Cohen & Lafferty 2003, Beyond independent relevance; ndeval 4.5.
    """, (_K,), ("StRecall",))
_register("NRBP", """Novelty- and rank-biased precision, over the whole ranking.

    Formula: (1 - (1-alpha) beta)/S sum_r beta^{r-1} g(r).
    0/0: S = 0 gives 0.
    Reference: Clarke, Kolla & Vechtomova 2009, An effectiveness measure for ambiguous and
    underspecified queries; ndeval 4.5.
    """, (_ALPHA, _BETA))
_register("nNRBP", """NRBP over the greedy ideal ranking's NRBP.

    Formula: NRBP / NRBP(greedy ideal).
    0/0: S = 0 gives NaN (as ndeval, so the mean is NaN too; JSON shows null).
    Reference: Clarke, Kolla & Vechtomova 2009; ndeval 4.5.
    """, (_ALPHA, _BETA))
_register("MAP_IA", """Intent-aware mean average precision, over the whole ranking.

    Formula: (1/S) sum_j AP_j, AP_j = sum_{r: rel_j(r)} (#rel_j in the top r)/r / R_j.
    0/0: S = 0 gives 0.
    Reference: Agrawal et al. 2009; ndeval 4.5.
    """, (), ("AP_IA",))


def diversity_values(run, qrels, instances, complete_topics: bool, depth: int | None = None):
    """(per-topic values by instance key, the ranked view that fixes the topics) for the
    diversity ``instances``, from subtopic ``qrels``."""
    from ..inputs.ranking import rank_run
    from ..inputs.run_qrels import Qrels
    from .context import no_topics
    from .webtrack import diversity_table, docno_rank, greedy_gains

    if qrels.subtopics is None:
        raise InputError(qrels.source, "diversity measures need subtopic qrels (topic subtopic "
                         "docno judgment) as TREC text or stored diversity qrels")
    # one judged document per (topic, docid), labelled by its position, so the ranking's
    # hits say which document they are (and ties between them resolve exactly by docno)
    try:
        sub_of_row = np.asarray(qrels.subtopics).astype(np.int64)
    except ValueError:
        raise InputError(qrels.source, "subtopics must be numbers") from None
    code, names = docid_codes(qrels.docids)
    row_key = qrels.topic_index.astype(np.int64) * len(names) + code
    keys, first, doc_of_row = np.unique(row_key, return_index=True, return_inverse=True)
    n_docs = len(keys)
    doc_topic = qrels.topic_index[first].astype(np.int64)
    doc_code = code[first]
    n_sub = int(sub_of_row.max(initial=0)) + 1
    docs = Qrels(qrels.topics, doc_topic.astype(np.int32), names[doc_code],
                 np.arange(1, n_docs + 1, dtype=np.int64), None, qrels.source)
    ranked = rank_run(run, docs, float32_scores=False, complete_topics=complete_topics,
                      depth=depth) if qrels.topics else no_topics()
    T = len(ranked.topics)
    topic_of = {name: i for i, name in enumerate(qrels.topics)}
    e_of_q = np.full(len(qrels.topics), -1, dtype=np.int64)
    e_of_q[[topic_of[t] for t in ranked.topics]] = np.arange(T)
    in_eval = e_of_q[doc_topic] >= 0
    ideal_docs = np.flatnonzero(in_eval)
    renumber = np.full(n_docs, -1, dtype=np.int64)
    renumber[ideal_docs] = np.arange(len(ideal_docs))
    doc_key = docno_rank(names.tolist())[doc_code[ideal_docs]]
    hit_doc = ranked.hit_label - 1

    def relevant_pairs(level: int):
        """The (document, subtopic) pairs judged >= level: for the ranking's hits and for
        the ideal (every judged document of an evaluated topic)."""
        rel = qrels.grades >= level
        pair_key = np.unique(doc_of_row[rel].astype(np.int64) * n_sub + sub_of_row[rel])
        pair_doc, pair_sub = pair_key // n_sub, pair_key % n_sub  # sorted by document
        # each hit's document's pairs (CSR by document)
        per_doc = np.bincount(pair_doc, minlength=n_docs)
        pair_start = np.r_[0, np.cumsum(per_doc)]
        keep = np.flatnonzero(per_doc[hit_doc] > 0)
        lengths = per_doc[hit_doc[keep]]
        pair_hit = np.repeat(np.arange(len(keep)), lengths)
        offsets = np.r_[0, np.cumsum(lengths)][:-1]
        hit_pair_sub = pair_sub[np.repeat(pair_start[hit_doc[keep]] - offsets, lengths)
                                + np.arange(int(lengths.sum()))]
        ideal_pairs = in_eval[pair_doc]
        return (ranked.hit_topic[keep], ranked.hit_rank[keep], pair_hit, hit_pair_sub,
                e_of_q[doc_topic[pair_doc[ideal_pairs]]], renumber[pair_doc[ideal_pairs]],
                pair_sub[ideal_pairs])

    groups: dict[tuple[float, float, int], list] = {}
    for inst in instances:
        p = dict(inst.value)
        groups.setdefault((p.get("alpha", 0.5), p.get("beta", 0.5), p.get("rel", 1)),
                          []).append(inst)
    values: dict[str, np.ndarray] = {}
    for (alpha, beta, level), members in groups.items():
        hit_topic, hit_rank, pair_hit, hit_pair_sub, judged_topic, ideal_doc, judged_sub = \
            relevant_pairs(level)
        ideal = greedy_gains(T, e_of_q[doc_topic[ideal_docs]], doc_key, ideal_doc, judged_sub,
                              alpha)
        # no cutoff: the whole ranking and the whole ideal, i.e. any depth past both
        whole = max(int(hit_rank.max(initial=0)), ideal.shape[1], 1)
        ks = {dict(i.value).get("k") for i in members}
        depths = tuple(sorted({whole if k is None else k for k in ks}))
        table = diversity_table(T, hit_topic, hit_rank, pair_hit, hit_pair_sub, ideal,
                                judged_topic, judged_sub, ranked.in_run, alpha, beta, depths)
        for inst in members:
            p = dict(inst.value)
            k = p.get("k")
            column = table[COLUMN[inst.measure.name].format(k=whole if k is None else k)]
            if k is None and "k" in p:
                column = _without_cutoff(inst.measure.name, column, whole, alpha,
                                         ranked.num_ret)
            values[inst.key] = column
    return values, ranked


def _without_cutoff(name: str, at_whole: np.ndarray, whole: int, alpha: float,
                    num_ret: np.ndarray) -> np.ndarray:
    """A cutoff measure over the whole ranking, from its value at a depth ``whole`` past every
    ranking and every ideal ranking: the normalised measures and strec are that value;
    alpha_DCG and ERR_IA divide by the ideal-ideal normaliser summed to infinity instead of
    to ``whole``; P_IA divides by each topic's ranking length instead of ``whole``."""
    if name in ("alpha_nDCG", "nERR_IA", "strec"):
        return at_whole
    if name == "P_IA":
        return np.where(num_ret > 0, at_whole * whole / np.maximum(num_ret, 1), 0.0)
    ranks = np.arange(1, whole + 1, dtype=np.float64)
    discount = 1.0 / ranks if name == "ERR_IA" else np.log(2.0) / np.log(ranks + 1.0)
    finite = float(np.sum(np.power(1.0 - alpha, ranks - 1.0) * discount))
    return at_whole * (finite / _ideal_ideal_sum(name, alpha))


def _ideal_ideal_sum(name: str, alpha: float) -> float:
    """sum_{r >= 1} (1 - alpha)^(r-1) d(r), d(r) = 1/r (ERR_IA) or 1/log2(r + 1) (alpha_DCG),
    for 0 < alpha <= 1: in closed form for ERR_IA, else summed until the terms vanish."""
    x = 1.0 - alpha
    if x == 0.0:
        return 1.0
    if name == "ERR_IA":
        return -np.log(alpha) / x
    total, start, block = 0.0, 1, 1 << 20
    while True:
        r = np.arange(start, start + block, dtype=np.float64)
        terms = np.power(x, r - 1.0) * np.log(2.0) / np.log(r + 1.0)
        total += float(terms.sum())
        if terms[-1] <= 1e-17 * total:
            return total
        start += block


def docid_codes(docids) -> tuple[np.ndarray, np.ndarray]:
    """(a code per docid, the distinct docids as an object array)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        names, code = np.unique(np.asarray(docids, dtype=object), return_inverse=True)
        return code.astype(np.int64), names
    from ..inputs.arrow_arrays import arrow_strings, numpy_of, object_array

    encoded = arrow_strings(np.asarray(docids, dtype=object)).dictionary_encode()
    # (no pandas: see arrow_strings)
    return numpy_of(encoded.indices, np.int32).astype(np.int64), \
        object_array(encoded.dictionary)
