"""What every measure reads: one run ranked against one qrels, as flat arrays over all topics.

Measures are written as array expressions over the judged documents the run retrieved
("hits", sorted by topic then rank) and over the qrels rows of the evaluated topics; per-topic
totals are ``np.bincount`` sums. No measure loops over topics or documents.
"""

from __future__ import annotations

import numpy as np

from ..inputs.ranking import Ranked, within_topic_index


class cached_property:  # noqa: N801 (named like the functools decorator it replaces)
    """``functools.cached_property`` without the lock Python 3.11 takes on every first access
    (3.12 dropped it too): a Context belongs to one evaluation in one thread, and a small
    evaluation reads a dozen of these."""

    def __init__(self, func):
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.func(instance)
        return value


def no_topics(tie_cutoffs=()) -> Ranked:
    """The ranked view of a run against qrels with no judgment at all: no evaluated topic
    (evaluations that allow no overlap, such as a shard none of whose topics is judged)."""
    none = np.zeros(0, dtype=np.int64)
    return Ranked([], none, none, none, none, none, none, np.zeros(0, dtype=bool),
                  {k: np.zeros(0, dtype=bool) for k in tie_cutoffs})


def safe_div(num, den) -> np.ndarray:
    """num / den with 0 where den == 0 (trec_eval initialises every value to 0 and skips the
    division when its denominator is 0)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape)
    np.divide(num, den, out=out, where=den != 0)
    return out


def f_beta(precision, recall, beta_squared: float):
    """F from precision and recall (arrays or scalars) with weight beta^2: (beta^2 + 1) P R /
    (beta^2 P + R), 0 where P + R = 0."""
    return safe_div((beta_squared + 1.0) * precision * recall, beta_squared * precision + recall)


class Context:
    """Per-evaluation arrays shared by all measures (computed once, on first use)."""

    def __init__(self, ranked: Ranked, relevance_level: int, profile: str,
                 collection_size: int = 0):
        self.ranked = ranked
        self.collection_size = collection_size
        self.profile = profile
        self.rel_level = relevance_level
        self.T = len(ranked.topics)
        self.N = ranked.num_ret
        self.ht = ranked.hit_topic
        self.hr = ranked.hit_rank
        self.hl = ranked.hit_label
        self.qt = ranked.q_topic
        self.qg = ranked.q_grade

    # ---- per-topic sums ---------------------------------------------------------------------
    def tsum(self, topics: np.ndarray, weights=None) -> np.ndarray:
        """Sum ``weights`` (or count) per topic."""
        if weights is None:
            return np.bincount(topics, minlength=self.T).astype(np.int64)
        return np.bincount(topics, weights=weights, minlength=self.T)

    # ---- qrels side -------------------------------------------------------------------------
    @cached_property
    def R(self) -> np.ndarray:
        """num_rel: qrels entries with grade >= relevance level."""
        return self.tsum(self.qt[self.qg >= self.rel_level])

    @cached_property
    def NR(self) -> np.ndarray:
        """Judged non-relevant qrels entries: 0 <= grade < relevance level."""
        return self.tsum(self.qt[(self.qg >= 0) & (self.qg < self.rel_level)])

    @cached_property
    def max_grade(self) -> np.ndarray:
        """Largest non-negative grade in each topic's qrels (-1 if none); float64 for real
        gains (qrels declaring ``gains="real"``), as the grades are."""
        out = np.full(self.T, -1, dtype=np.float64 if self.qg.dtype.kind == "f" else np.int64)
        ok = self.qg >= 0
        np.maximum.at(out, self.qt[ok], self.qg[ok])
        return out

    def ideal(self, gains: np.ndarray):
        """The ideal ranking of each topic: qrels gains > 0 sorted descending.

        ``gains`` is the gain of every qrels row. Returns (topic, 1-based position, gain)
        arrays sorted by topic then position, and each topic's start offset.
        """
        pos = gains > 0
        t, g = self.qt[pos], gains[pos]
        srt = np.lexsort((-g, t))
        t, g = t[srt], g[srt]
        k = within_topic_index(t, self.T) + 1
        start = t.searchsorted(np.arange(self.T + 1, dtype=t.dtype))
        return t, k, g, start

    def contingency(self, n: int | None):
        """Per topic, as floats: (a, b, c, d) = relevant retrieved, non-relevant retrieved
        (unjudged counts as non-relevant), relevant not retrieved, and the rest of an
        ``n``-document collection (``d`` is None without ``n``)."""
        a = self.num_rel_ret.astype(np.float64)
        b = self.N.astype(np.float64) - a
        c = self.R.astype(np.float64) - a
        return a, b, c, (float(n) - a - b - c if n else None)

    # ---- run side ---------------------------------------------------------------------------
    @cached_property
    def is_rel(self) -> np.ndarray:
        return self.hl >= self.rel_level

    @cached_property
    def rel_t(self) -> np.ndarray:
        """Topic of each relevant retrieved doc (sorted by topic, rank)."""
        return self.ht[self.is_rel]

    @cached_property
    def rel_r(self) -> np.ndarray:
        """Rank of each relevant retrieved doc."""
        return self.hr[self.is_rel]

    @cached_property
    def rel_k(self) -> np.ndarray:
        """1-based count of relevant docs up to and including each relevant retrieved doc."""
        return within_topic_index(self.rel_t, self.T) + 1

    @cached_property
    def rel_start(self) -> np.ndarray:
        return self.rel_t.searchsorted(np.arange(self.T + 1, dtype=self.rel_t.dtype))

    @cached_property
    def num_rel_ret(self) -> np.ndarray:
        return self.tsum(self.rel_t)

    def rel_in_top(self, k) -> np.ndarray:
        """#relevant docs at ranks <= k (k a scalar or a per-topic array)."""
        k = np.asarray(k)
        lim = k if k.ndim == 0 else k[self.rel_t]
        return self.tsum(self.rel_t[self.rel_r <= lim])

    def cumsum_in_topic(self, topics: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Inclusive running sum of ``values`` within each topic (``topics`` sorted).

        Integers: one global cumsum minus each topic's offset (exact). Floats: a segmented
        doubling scan, so a topic's sum never absorbs the rounding error of the sums of all
        the topics before it.
        """
        values = np.asarray(values)
        if values.dtype.kind in "iub":
            c = values.cumsum()
            start = topics.searchsorted(np.arange(self.T, dtype=topics.dtype))
            before = np.concatenate(([0], c))[start]
            return c - before[topics]
        pos = within_topic_index(topics, self.T)
        out = values.astype(np.float64, copy=True)
        step = 1
        longest = int(pos.max()) + 1 if len(pos) else 0
        while step < longest:
            take = (pos >= step).nonzero()[0]
            prev = out.copy()
            out[take] += prev[take - step]
            step *= 2
        return out
