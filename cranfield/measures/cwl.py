"""The C/W/L measures of ir_measures' registry (BPM, SDCG, NERR8-11, INST, INSQ), with
cwl_eval's definitions (ir_measures' provider for them).

In the C/W/L framework (Moffat et al. 2013; Azzopardi, Thomas & Moffat 2019) a user goes
on from rank i to rank i + 1 with probability C_i; a measure is the expected rate of gain,

    EU = sum_i W_i g_i,    W_i = prod_{j<i} C_j / sum_m prod_{j<m} C_j,

over cwl_eval's horizon of ranks 1..1000 (ranks past the ranking's end gain 0; ranks past
1000 are never seen). Gains are graded, scaled to [0, 1] from ``min_rel``..``max_rel``:
g = (clip(max(grade, 0), min_rel, max_rel) - min_rel) / (max_rel - min_rel); a document
not in the qrels gains 0. ``max_rel`` is required, as in ir_measures.

The weights depend on the gains seen so far, so the topics are laid out as a dense
(topics x 1000) gain matrix, a block of topics at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .context import Context
from .registry import Param, register

HORIZON = 1000  # cwl_eval's max_n: the ranks its user model runs over
_BLOCK = 2048   # topics per dense block (2048 x 1000 doubles = 16 MB)

_K_REQUIRED = Param("k", "integer", None, "rank cutoff (required: @k)", minimum=1,
                    required=True)
_MIN_REL = Param("min_rel", "integer", 0, "grade that gains 0 (lower grades are clipped to it)")
_MAX_REL = Param("max_rel", "integer", None, "grade that gains 1 (higher grades are clipped to "
                 "it; required)", required=True)
_T = Param("T", "number", 1.0, "the total gain the user wants (on the 0..1 gain scale)",
           minimum=0.0)


def _check_rel_range(p: dict) -> str | None:
    """Why the parameters are inconsistent (cranfield.measures.names refuses the name), or None."""
    if p["min_rel"] >= p["max_rel"]:
        return f"min_rel ({p['min_rel']}) must be less than max_rel ({p['max_rel']})"
    return None


def _gains(ctx: Context, p: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(topic, 0-based rank, gain) of the hits within the horizon."""
    keep = ctx.hr <= HORIZON
    lo, hi = float(p["min_rel"]), float(p["max_rel"])
    grade = np.maximum(ctx.hl[keep], 0).astype(np.float64)  # negative grades count as 0
    gain = (np.clip(grade, lo, hi) - lo) / (hi - lo)
    return ctx.ht[keep], ctx.hr[keep] - 1, gain


def _expected_utility(ctx: Context, p: dict,
                      continuation: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """EU per topic for a C vector given by ``continuation(gains, ranks)`` ((B x 1000) gains,
    1-based ranks) -> (B x 1000) C."""
    t, r, g = _gains(ctx, p)
    ranks = np.arange(1, HORIZON + 1, dtype=np.float64)
    out = np.zeros(ctx.T)
    for start in range(0, ctx.T, _BLOCK):
        stop = min(start + _BLOCK, ctx.T)
        sel = (t >= start) & (t < stop)
        G = np.zeros((stop - start, HORIZON))
        G[t[sel] - start, r[sel]] = g[sel]
        C = continuation(G, ranks)
        # reach[i] = prod_{j < i} C_j (reach[0] = 1); C at the last rank is never used
        reach = np.ones_like(C)
        np.cumprod(C[:, :-1], axis=1, out=reach[:, 1:])
        out[start:stop] = (reach * G).sum(axis=1) / reach.sum(axis=1)
    return out


def _cut(C: np.ndarray, ranks: np.ndarray, k: int) -> np.ndarray:
    """C with the user stopping at rank k: C_i = 0 for i >= k."""
    return np.where(ranks < k, C, 0.0)


@register("BPM", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(_K_REQUIRED, _T, _MIN_REL, _MAX_REL), ir_name="BPM",
          extra={"check": _check_rel_range})
def bejeweled_player_model(ctx: Context, p: dict):
    """Bejeweled Player Model (static): the user reads until they have gained T or read k
    documents, whichever comes first; the mean gain of what they read.

    Formula: BPM = (1/L) sum_{i <= L} g_i, L = min(k, 1000, the first i with sum_{j <= i}
    g_j >= T) (cwl_eval: C_i = [sum_{j <= i} g_j < T and i < k]).
    0/0: never (L >= 1).
    Reference: Zhang, Liu, Li, Zhang, Xu & Ma 2017, Evaluating web search with a Bejeweled
    Player Model (SIGIR); cwl_eval BPMCWLMetric.
    """
    def cont(G, ranks):
        return ((np.cumsum(G, axis=1) < p["T"]) & (ranks < p["k"])).astype(np.float64)

    return _expected_utility(ctx, p, cont)


@register("SDCG", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(_K_REQUIRED,
                  Param("dcg", "enum", "log2", "DCG formulation (log2 only, as ir_measures)",
                        choices=("log2",)),
                  _MIN_REL, _MAX_REL), ir_name="SDCG", extra={"check": _check_rel_range})
def scaled_dcg(ctx: Context, p: dict):
    """Scaled DCG: DCG@k over the DCG of k documents of the highest gain, as if at least k
    fully relevant documents existed.

    Formula: SDCG@k = sum_{i <= k} g_i / log2(i + 1) / sum_{i <= k} 1 / log2(i + 1), k at
    most 1000 (cwl_eval: C_i = log2(i + 1) / log2(i + 2) for i < k).
    0/0: never.
    Reference: Järvelin & Kekäläinen 2002; Azzopardi, Thomas & Moffat 2019, cwl_eval
    NDCGCWLMetric; ir_measures SDCG.
    """
    def cont(G, ranks):
        return _cut(np.log(ranks + 1.0) / np.log(ranks + 2.0), ranks, p["k"]) * \
            np.ones_like(G)

    return _expected_utility(ctx, p, cont)


@register("NERR8", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(_K_REQUIRED, _MIN_REL, _MAX_REL), ir_name="NERR8",
          extra={"check": _check_rel_range})
def nerr_eq8(ctx: Context, p: dict):
    """Not (but nearly) ERR, equation 8: ERR's stopping on gain, as C/W/L, cut at k.

    Formula: C_i = 1 - g_i for i < k, 0 from k on; EU = sum_i W_i g_i.
    0/0: never.
    Reference: Azzopardi, Mackenzie & Moffat 2021, ERR is not C/W/L (ICTIR), eq. 8;
    cwl_eval NERReq8CWLMetric.
    """
    return _expected_utility(ctx, p, lambda G, ranks: _cut(1.0 - G, ranks, p["k"]))


@register("NERR9", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(_K_REQUIRED, _MIN_REL, _MAX_REL), ir_name="NERR9",
          extra={"check": _check_rel_range})
def nerr_eq9(ctx: Context, p: dict):
    """Not (but nearly) ERR, equation 9: stopping on gain and a reciprocal-rank discount, cut
    at k.

    Formula: C_i = (i / (i + 1)) (1 - g_i) for i < k, 0 from k on; EU = sum_i W_i g_i.
    0/0: never.
    Reference: Azzopardi, Mackenzie & Moffat 2021, ERR is not C/W/L (ICTIR), eq. 9;
    cwl_eval NERReq9CWLMetric.
    """
    return _expected_utility(
        ctx, p, lambda G, ranks: _cut(ranks / (ranks + 1.0) * (1.0 - G), ranks, p["k"]))


@register("NERR10", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(Param("p", "number", 0.9, "persistence (RBP's)", minimum=0.0, maximum=1.0),
                  _MIN_REL, _MAX_REL), ir_name="NERR10", extra={"check": _check_rel_range})
def nerr_eq10(ctx: Context, p: dict):
    """Not (but nearly) ERR, equation 10: stopping on gain with RBP's persistence p, over
    the 1000-rank horizon.

    Formula: C_i = p (1 - g_i); EU = sum_i W_i g_i.
    0/0: never.
    Reference: Azzopardi, Mackenzie & Moffat 2021, ERR is not C/W/L (ICTIR), eq. 10;
    cwl_eval NERReq10CWLMetric.
    """
    return _expected_utility(ctx, p, lambda G, ranks: p["p"] * (1.0 - G))


def _inst_base(ranks: np.ndarray, T: float) -> np.ndarray:
    return ((ranks + 2.0 * T - 1.0) / (ranks + 2.0 * T)) ** 2


@register("NERR11", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(_T, _MIN_REL, _MAX_REL), ir_name="NERR11", extra={"check": _check_rel_range})
def nerr_eq11(ctx: Context, p: dict):
    """Not (but nearly) ERR, equation 11 (ir_measures' "Eq 11"; cwl_eval's equation 12):
    stopping on gain with INSQ's goal T, over the 1000-rank horizon.

    Formula: C_i = ((i + 2T - 1) / (i + 2T))^2 (1 - g_i); EU = sum_i W_i g_i.
    0/0: never (T = 0 stops the user at rank 1).
    Reference: Azzopardi, Mackenzie & Moffat 2021, ERR is not C/W/L (ICTIR);
    cwl_eval NERReq11CWLMetric.
    """
    return _expected_utility(ctx, p, lambda G, ranks: _inst_base(ranks, p["T"]) * (1.0 - G))


@register("INSQ", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(_T, _MIN_REL, _MAX_REL), ir_name="INSQ", extra={"check": _check_rel_range})
def insq(ctx: Context, p: dict):
    """INSQ: a user wanting T units of gain goes on with a probability that grows with the
    rank, whatever they have found.

    Formula: C_i = ((i + 2T - 1) / (i + 2T))^2; EU = sum_{i <= 1000} W_i g_i.
    0/0: never (T = 0 stops the user at rank 1).
    Reference: Moffat, Scholer & Thomas 2012, Models and metrics: IR evaluation as a user
    process (ADCS); cwl_eval INSQCWLMetric.
    """
    return _expected_utility(ctx, p, lambda G, ranks: _inst_base(ranks, p["T"]) *
                             np.ones_like(G))


@register("INST", family="graded", kind="kw", all_trec=(), uses_rel_level=False,
          params=(_T, _MIN_REL, _MAX_REL), ir_name="INST", extra={"check": _check_rel_range})
def inst(ctx: Context, p: dict):
    """INST: INSQ whose goal shrinks with the gain found, T_i = T - sum_{j <= i} g_j.

    Formula: C_i = ((i + T + T_i - 1) / (i + T + T_i))^2; EU = sum_{i <= 1000} W_i g_i.
    0/0: a zero denominator (T = 0 and every document so far of gain 1) stops the user.
    Reference: Moffat, Bailey, Scholer & Thomas 2015, INST: an adaptive metric for
    information retrieval evaluation (ADCS); cwl_eval INSTCWLMetric.
    """
    def cont(G, ranks):
        den = ranks + 2.0 * p["T"] - np.cumsum(G, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            c = ((den - 1.0) / den) ** 2
        return np.where(den != 0, c, 0.0)

    return _expected_utility(ctx, p, cont)
