"""Peers' spellings of measure names, mapped to the registry's measures: ir_measures' names
and aliases (``AP``, ``MAP``, ``nDCG``, ``P``, ``R``, ``RR``, the keyword measures' names such as
``RBP`` and ``ERR``) and ranx's spellings (``ndcg@10``, ``mrr``, ``hit_rate``, ``rbp.95``, the
``-lN`` level suffix), with :func:`ranx_ir_name` rewriting a ranx spelling as the
ir_measures-style name it means. :mod:`cranfield.measures.names` parses names with these tables.
Room: measures.
"""

from __future__ import annotations

import re

from ..errors import MeasureError
from .name_params import BadToken, ascii_int
from .registry import REGISTRY

# ir_measures' names of trec_eval measures -> (the measure without a cutoff, the measure with
# @k); each measure's aliases (declared where it is registered: ``MAP`` for ``AP``) are added
# after its name by _with_aliases
_IR_NAMES: dict[str, tuple[str | None, str | None]] = {
    "AP": ("map", "map_cut"),
    "GMAP": ("gm_map", None),
    "nDCG": ("ndcg", "ndcg_cut"),
    "DCG": ("dcg", None),
    "P": (None, "P"),
    "R": (None, "recall"),
    "RR": ("recip_rank", "RR_cut"),
    "Rprec": ("Rprec", None),
    "Bpref": ("bpref", None),
    "infAP": ("infAP", None),
    "Success": (None, "success"),
    "IPrec": (None, "iprec_at_recall"),
    "NumQ": ("num_q", None),
    "NumRet": ("num_ret", None),
    "NumRel": ("num_rel", None),
    "NumRelRet": ("num_rel_ret", None),
    "SetP": ("set_P", None),
    "SetRelP": ("set_relative_P", None),
    "SetR": ("set_recall", None),
    "SetF": ("set_F", None),
    "SetAP": ("set_map", None),
}


def _with_aliases(ir_names: dict[str, tuple[str | None, str | None]]
                  ) -> dict[str, tuple[str | None, str | None]]:
    """``ir_names`` with, after each name, the aliases of the measures registered under that
    ir_measures name (``MAP`` after ``AP``, ``NDCG`` after ``nDCG``): the same meaning."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for name, meaning in ir_names.items():
        out[name] = meaning
        for m in REGISTRY.values():
            if m.ir_name == name:
                for alias in m.aliases:
                    out.setdefault(alias, meaning)
    return out


IR_NAMES = _with_aliases(_IR_NAMES)


# ranx's spellings -> the ir_measures-style name they mean (with @k: the cutoff is appended).
# A bare spelling that is also a trec_eval name (map, recall, ndcg, dcg, bpref, rbp) keeps
# trec_eval's meaning (the same number as ranx's but for ``recall``: trec_eval's recall at its
# cutoffs, ranx's of the whole ranking, which ``recall-l1`` spells). ``hits`` / ``hits@k``
# are ranx's hits (a mean over topics, where trec_eval's num_rel_ret sums) and ``rbp.95`` is
# ranx's RBP (the gain is the grade): the measures registered with spelling="ranx". Without
# @k ranx reads the whole ranking: ``hit_rate`` is success at any rank.
RANX_AT_K: dict[str, str] = {
    "ndcg": "nDCG", "ndcg_burges": "nDCG(gain=exp)", "dcg": "DCG", "dcg_burges": "DCG(gain=exp)",
    "map": "AP", "mrr": "RR", "recall": "R", "precision": "P", "hit_rate": "Success",
    "f1": "F",
}
# the cutoff that stands for "at any rank" (ranx's bare hit_rate); printed under its key, as
# trec_eval has no name for it (not success_9223372036854775807)
ANY_RANK = 2 ** 63 - 1
RANX_BARE: dict[str, str] = {
    "mrr": "RR", "r-precision": "Rprec", "r_precision": "Rprec", "precision": "SetP",
    "f1": "F", "ndcg_burges": "nDCG(gain=exp)",
    "dcg_burges": "DCG(gain=exp)", "hit_rate": f"Success@{ANY_RANK}",
}
# ranx's bare spellings that are also trec_eval names, read as ranx's only with the ``-lN``
# suffix (``map-l2``, ``recall-l2``): what they mean there
RANX_BARE_LEVEL: dict[str, str] = {
    "map": "AP", "ndcg": "nDCG", "dcg": "DCG", "recall": "SetR", "bpref": "Bpref",
}


# ir_measures-style names (and aliases) of keyword measures; a name also in IR_NAMES goes
# to the keyword measure only with one of ``KW_ONLY``'s parameters, or an @k that the
# IR_NAMES measure does not take
KW_NAMES: dict[str, str] = {alias: n for n, m in REGISTRY.items() if m.kind == "kw"
                            for alias in ((m.ir_name,) if m.ir_name else
                                          (n,) if m.extra.get("spelling") == "ranx" else ())
                            + m.aliases}
KW_ONLY = {"nDCG": {"gain", "discount", "b", "ties", "min_grade"},
           "DCG": {"gain", "discount", "b", "ties", "min_grade"},
           "NDCG": {"ties", "min_grade"},
           "AP": {"norm"}}
# ... and these with @k (nDCG(gains={...}) without a cutoff is trec_eval's ndcg.<gains>)
KW_WITH_CUTOFF = {"nDCG": {"gains"}, "NDCG": {"gains"}}


# ir_measures' aliases (every measure's, declared where it is registered): suggested only when
# nothing else spells the measure as well
ALIASES = frozenset(alias for m in REGISTRY.values() for alias in m.aliases)


_RANX_RE = re.compile(r"^(?P<name>[a-z][a-z0-9_-]*)(?:@(?P<k>[^@()]*))?$")


def ranx_ir_name(name: str) -> str | None:
    """The ir_measures-style name a ranx spelling means, or None. ranx's ``-lN`` suffix
    (``ndcg@10-l2``: judgments >= N are relevant) becomes the measure's ``rel=N``."""
    level = re.fullmatch(r"(?P<stem>.+)-l(?P<n>[0-9]+)", name)
    if level is not None:
        stem = level.group("stem")
        # hits / hits@k are read as the registered measure itself (no ir_measures name)
        meant = ranx_ir_name(stem) or RANX_BARE_LEVEL.get(stem) or \
            (stem if re.fullmatch(r"hits(@[^@()]*)?", stem) else None)
        if meant is None:
            return None
        n = int(level.group("n"))
        rel = f"rel={n}"
        head, at, k = meant.partition("@")
        if head.startswith(("nDCG", "DCG")):
            # ranx drops the judgments below N and gains the grade (burges: 2^grade - 1) of
            # the rest: min_grade=N, one parameter whatever N (never an entry per grade)
            if n <= 1:
                return meant
            low = f"min_grade={n}"
            head = head[:-1] + "," + low + ")" if head.endswith(")") else f"{head}({low})"
            return head + at + k
        if "(rel=" in head or ",rel=" in head:
            head = re.sub(r"rel=[0-9]+", rel, head)
        elif head.endswith(")"):
            head = head[:-1] + "," + rel + ")"
        else:
            head += f"({rel})"
        return head + at + k
    # ranx's rbp.95 (or rbp@95): p = 0.95, each rank weighed by its grade (ranx's own RBP)
    rbp = re.fullmatch(r"rbp[.@]([0-9]+)", name)
    if rbp:
        return f"ranx_rbp(p=0.{rbp.group(1)},rel=1)"
    m = _RANX_RE.match(name)
    if not m:
        return None
    base, k = m.group("name"), m.group("k")
    if k is not None and base in RANX_AT_K:
        try:
            ascii_int(k)
        except BadToken as bad:
            raise MeasureError(name, bad.why(f"the cutoff of {base}")) from None
        return f"{RANX_AT_K[base]}@{k}"
    if k is None and base in RANX_BARE and base not in REGISTRY:
        return RANX_BARE[base]
    return None
