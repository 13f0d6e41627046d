"""Measure names: trec_eval's ``-m`` grammar and ir_measures-style names, resolved against the
registry into concrete measure instances.

trec_eval:  ``map``, ``P.5,10``, ``P_5``, ``ndcg_cut.10``, ``ndcg_cut_10``, ``set_F.0.25``,
            ``ndcg.1=3,2=9``, ``iprec_at_recall..10,.20``, nicknames ``official``, ``all_trec``.
ir_measures: ``AP``, ``AP@100``, ``nDCG@10``, ``P(rel=2)@5``, ``R@1000``, ``RR``, ``RR@10``,
            ``Judged@10``, ``SetF(beta=0.5)``, ``RBP(p=0.8)``.

Every instance knows the key it is reported under (trec_eval's printed name for trec_eval
names, the ir_measures name as written for the others) and a canonical name with every
parameter explicit, so that a stored number can be recomputed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .errors import MeasureError, closest
from .measures.registry import NICKNAMES, PROFILES, REGISTRY, REL, KwArgs, Measure

# ir_measures-style name -> (measure without cutoff, measure with @k)
IR_NAMES: dict[str, tuple[str | None, str | None]] = {
    "AP": ("map", "map_cut"),
    "MAP": ("map", "map_cut"),
    "GMAP": ("gm_map", None),
    "nDCG": ("ndcg", "ndcg_cut"),
    "NDCG": ("ndcg", "ndcg_cut"),
    "DCG": ("dcg", None),
    "P": (None, "P"),
    "R": (None, "recall"),
    "RR": ("recip_rank", "RR_cut"),
    "MRR": ("recip_rank", "RR_cut"),
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
    "SetR": ("set_recall", None),
    "SetF": ("set_F", None),
    "RBP": ("rbp", None),
    "Judged": (None, "Judged"),
}


@dataclass(frozen=True)
class Instance:
    """One reported number per topic: a measure with all its parameters fixed."""

    key: str                  # the name results are reported under
    measure: Measure
    value: Any                # cutoff, recall level, gains dict, ... (None: no parameter)
    param_text: str | None    # trec_eval parameter string as typed, if any
    rel_level: int | None = None   # per-measure relevance level (ir_measures ``rel=``)
    options: dict = field(default_factory=dict, compare=False, hash=False)

    def level(self, relevance_level: int) -> int:
        """The relevance level this instance reads: its own ``rel=`` (0 included), else the
        evaluation's."""
        return relevance_level if self.rel_level is None else self.rel_level

    def canonical(self, profile: str, relevance_level: int, judged_only: bool = False,
                  depth: int | None = None) -> str:
        """The measure with every parameter explicit, e.g.
        ``ndcg_cut(k=10,gain=grade,discount=log2,profile=trec_eval-9.0.8)``."""
        m = self.measure
        parts: list[str] = []
        if m.kind in ("cutoffs", "int"):
            parts.append(f"k={self.value}" if m.kind == "cutoffs" else f"n={self.value}")
        elif m.kind == "fcutoffs":
            parts.append(f"{m.params[0].name}={self.value:g}")
        elif m.kind == "gains":
            gains = self.value or {}
            parts.append("gain=grade" + "".join(f",gain{k}={v:g}" for k, v in
                                                sorted(gains.items())))
        elif m.kind in ("floats", "float"):
            vals = self.value if isinstance(self.value, tuple) else (self.value,)
            parts.append(f"{m.params[0].name}=" + ",".join(f"{v:g}" for v in vals))
        elif m.kind == "pair":
            parts.append("p=%g" % float(dict(self.value or {}).get("p", 0.9)))
        elif m.kind == "kw":
            parts += [f"{p.name}={_text(self.value[p.name])}" for p in m.params]
        if m.family == "graded" and m.kind != "kw" and m.name not in ("rbp", "rbp_resid"):
            parts.append("discount=log2")
        if m.uses_rel_level:
            parts.append(f"rel={self.level(relevance_level)}")
        if judged_only:
            parts.append("judged_only=true")
        if depth is not None:
            parts.append(f"depth={depth}")
        parts.append(f"profile={profile}")
        return f"{m.name}({','.join(parts)})"


def _text(value) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


# ir_measures-style names of keyword measures (cranfield.measures.extended); a name also in
# IR_NAMES goes to the keyword measure only with one of ``KW_ONLY``'s parameters, or an @k
# that the IR_NAMES measure does not take
KW_NAMES: dict[str, str] = {m.ir_name: n for n, m in REGISTRY.items()
                            if m.kind == "kw" and m.ir_name}
KW_ONLY = {"nDCG": {"gain", "discount", "b"}, "DCG": {"gain", "discount", "b"},
           "AP": {"norm"}}


def _kw_value(measure: Measure, args: dict[str, str], k: str | None, name: str) -> KwArgs:
    """Typed, checked keyword parameters (defaults filled in) for a ``kw`` measure."""
    out = KwArgs()
    given = dict(args)
    if k is not None:
        given["k"] = k
    for p in measure.params:
        if p.name not in given:
            if p.name == "k" and "required" in p.description:
                raise MeasureError(name, f"{measure.ir_name} needs a cutoff (@k)")
            out[p.name] = p.default
            continue
        text = given.pop(p.name)
        try:
            value: Any = (int(text) if p.type == "integer" else float(text)
                          if p.type == "number" else text)
        except ValueError:
            raise MeasureError(name, f"{p.name} must be {'an' if p.type == 'integer' else 'a'} "
                               f"{p.type}, got {text!r}") from None
        out[p.name] = p.check(value, measure.name, name)
    if given:
        what = "takes no cutoff" if set(given) == {"k"} else \
            f"has no parameter(s) {sorted(given)}"
        raise MeasureError(name, f"{measure.ir_name} {what}")
    return out


def _check_value(measure: Measure, value: Any, name: str) -> Any:
    """``value`` as parsed for ``measure``'s kind (a cutoff, a tuple, a mapping, ...), checked
    against the ranges its parameters declare at registration (:meth:`Param.check`); a
    :class:`MeasureError` naming the measure, the parameter and the range otherwise. Every
    way of writing a measure ends here (or in :func:`_kw_value` for keyword measures)."""
    if value is None or not measure.params:
        return value
    first = measure.params[0]
    if measure.kind in ("cutoffs", "fcutoffs", "floats"):
        for v in value if isinstance(value, tuple) else (value,):
            first.check(v, measure.name, name)
    elif measure.kind in ("float", "int", "gains"):
        first.check(value, measure.name, name)
    elif measure.kind == "pair":
        by_name = {p.name: p for p in measure.params}
        for key, v in dict(value).items():
            if key not in by_name:
                raise MeasureError(name, f"{measure.name} has no parameter {key!r} (it takes "
                                         f"{', '.join(by_name)})")
            by_name[key].check(v, measure.name, name)
    return value


def _number(text: str, what: str, name: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise MeasureError(name, f"{what} must be a number, got {text!r}") from None


def _rel_level(measure: Measure, args: dict[str, str], name: str) -> int | None:
    """ir_measures' ``rel=`` (popped from ``args``), checked: only a measure that reads the
    relevance level takes it, and it is an integer in the relevance level's range."""
    if "rel" not in args:
        return None
    text = args.pop("rel")
    if not measure.uses_rel_level:
        raise MeasureError(name, f"{measure.name} takes no parameter rel: it does not use a "
                                 "relevance level")
    try:
        level = int(text)
    except ValueError:
        raise MeasureError(name, f"rel must be an integer grade, got {text!r}") from None
    return REL.check(level, measure.name, name)


def known_names() -> list[str]:
    return sorted(set(REGISTRY) | set(IR_NAMES) | set(NICKNAMES))


def _unknown(name: str, why: str = "unknown measure") -> MeasureError:
    base = re.split(r"[.(@]", name, maxsplit=1)[0]
    return MeasureError(name, why, closest(base, known_names()))


def _atol(text: str) -> int:
    """C's atol: leading sign and digits, the rest ignored (so ``23.4`` is 23)."""
    m = re.match(r"\s*([+-]?\d+)", text)
    if not m:
        raise ValueError(text)
    return int(m.group(1))


def _parse_value(measure: Measure, text: str, name: str) -> Any:
    """Parse trec_eval's parameter string for ``measure`` (the part after the first '.')."""
    items = [s for s in text.split(",")]
    try:
        if measure.kind == "cutoffs":
            return tuple(sorted({_atol(s) for s in items}))
        if measure.kind == "fcutoffs":
            return tuple(sorted({float(s) for s in items}))
        if measure.kind == "floats":
            return tuple(float(s) for s in items)
        if measure.kind == "float":
            return float(text)
        if measure.kind == "int":
            return _atol(text)
        if measure.kind in ("gains", "pair"):
            pairs = {}
            for item in items:
                k, sep, v = item.partition("=")
                if not sep:
                    raise MeasureError(name, f"expected key=value pairs, got {item!r}")
                if measure.kind == "gains":
                    pairs[_atol(k)] = float(v)
                else:
                    pairs[k.strip()] = float(v)
            return pairs
    except MeasureError:
        raise
    except ValueError:
        raise MeasureError(name, f"cannot read parameters {text!r} for {measure.name} "
                           f"({measure.kind})") from None
    raise MeasureError(name, f"{measure.name} takes no parameters")


def _expand(measure: Measure, value: Any, param_text: str | None, key_base: str | None = None,
            rel_level: int | None = None) -> list[Instance]:
    name = key_base or measure.name
    if measure.kind in ("cutoffs", "fcutoffs"):
        values = value if value is not None else measure.defaults
        fmt = (lambda v: f"{name}_{v}") if measure.kind == "cutoffs" else \
            (lambda v: f"{name}_{v:3.2f}")
        return [Instance(fmt(v), measure, v, param_text, rel_level) for v in values]
    if measure.kind == "kw":
        return [Instance(name, measure, _kw_value(measure, {}, None, name), None, rel_level)]
    if value is None:
        default = measure.defaults
        if measure.kind in ("float", "int"):
            default = measure.defaults[0]
        elif measure.kind in ("gains", "pair"):
            default = {}
        return [Instance(name, measure, default if measure.kind != "none" else None, None,
                         rel_level)]
    return [Instance(f"{name}_{param_text}", measure, value, param_text, rel_level)]


def parse_trec_name(name: str, profile: str) -> list[tuple[Measure, Any, str | None]]:
    """Resolve one trec_eval ``-m`` argument to (measure, parsed params or None, text)."""
    if name in NICKNAMES:
        return [(REGISTRY[n], None, None) for n in NICKNAMES[name](profile)]
    base, dot, text = name.partition(".")
    if base in REGISTRY:
        m = REGISTRY[base]
        if not dot:
            return [(m, None, None)]
        if m.kind == "none":
            raise MeasureError(name, f"{base} takes no parameters")
        if m.kind == "kw":
            raise MeasureError(name, f"write {base}'s parameters ir_measures-style, e.g. "
                               f"{m.ir_name}(...)@10")
        return [(m, _check_value(m, _parse_value(m, text, name), name), text)]
    # trec_eval's printed form: ndcg_cut_10, P_5, iprec_at_recall_0.10
    stem, _, suffix = name.rpartition("_")
    if stem in REGISTRY and REGISTRY[stem].kind in ("cutoffs", "fcutoffs") and suffix:
        m = REGISTRY[stem]
        return [(m, _check_value(m, _parse_value(m, suffix, name), name), suffix)]
    raise _unknown(name)


_IR_RE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\((?P<args>[^)]*)\))?"
                    r"(?:@(?P<k>[0-9.]+))?$")


def parse_ir_name(name: str) -> Instance | None:
    """Resolve an ir_measures-style name; None if ``name`` is not in that style."""
    m = _IR_RE.match(name.replace(" ", ""))
    if not m or (m.group("name") not in IR_NAMES and m.group("name") not in KW_NAMES):
        return None
    if m.group("name") in REGISTRY and not m.group("args") and m.group("k") is None:
        return None  # a bare trec_eval name (P, Rprec, infAP) keeps trec_eval's meaning
    args: dict[str, str] = {}
    if m.group("args"):
        for item in m.group("args").split(","):
            k, sep, v = item.partition("=")
            if not sep:
                raise MeasureError(name, f"expected key=value in parentheses, got {item!r}")
            args[k.strip()] = v.strip()
    k = m.group("k")
    base = m.group("name")
    if base in KW_NAMES and (base not in IR_NAMES or set(args) & KW_ONLY.get(base, set())
                             or (k is not None and IR_NAMES[base][1] is None)):
        measure = REGISTRY[KW_NAMES[base]]
        rel_level = _rel_level(measure, args, name)
        return Instance(name, measure, _kw_value(measure, args, k, name), None, rel_level)
    plain, cut = IR_NAMES[base]
    target = cut if k is not None else plain
    if target is None:
        need = "needs a cutoff (@k)" if k is None else "takes no cutoff"
        raise MeasureError(name, f"{m.group('name')} {need}")
    if target not in REGISTRY:
        raise MeasureError(name, "not implemented yet")
    measure = REGISTRY[target]
    rel = _rel_level(measure, args, name)
    value: Any = None
    if k is not None:
        try:
            value = float(k) if measure.kind == "fcutoffs" else int(k)
        except ValueError:
            raise MeasureError(name, f"bad cutoff {k!r}") from None
    if measure.name == "set_F":
        # SetF takes beta, as F does (the same parameter, with F's range); set_F beta^2
        beta = _number(args.pop("beta", "1"), "beta", name)
        _param(REGISTRY["F"], "beta").check(beta, measure.name, name)
        value = beta * beta
    elif measure.kind == "pair" and "p" in args:
        value = {"p": _number(args.pop("p"), "p", name)}
    elif measure.kind == "pair":
        value = {}
    elif measure.kind == "gains":
        value = {}
    if args:
        raise MeasureError(name, f"unknown parameter(s) {sorted(args)} for {m.group('name')}")
    return Instance(name, measure, _check_value(measure, value, name), None, rel)


def _param(measure: Measure, name: str):
    return next(p for p in measure.params if p.name == name)


def needs_subtopics(names, profile: str = PROFILES[0]) -> bool:
    """Whether these measures are diversity measures, read from subtopic qrels."""
    return any(i.measure.family == "diversity" for i in resolve(names, profile))


def parse_measure(name: str, profile: str = PROFILES[0]) -> list[Instance]:
    """All the instances one measure name stands for (a nickname or cutoff list gives many).

    Raises :class:`MeasureError` naming the closest known names for an unknown name.
    """
    if not isinstance(name, str) or not name.strip():
        raise MeasureError(str(name), "empty measure name")
    name = name.strip()
    ir = parse_ir_name(name)
    if ir is not None:
        if ir.measure.kind in ("cutoffs", "fcutoffs") and ir.value is None:
            raise MeasureError(name, "needs a cutoff (@k)")
        return [ir]
    out: list[Instance] = []
    for measure, value, text in parse_trec_name(name, profile):
        out.extend(_expand(measure, value, text))
    return out


def resolve(names: list[str] | str | None, profile: str) -> list[Instance]:
    """The instances for a list of names, trec_eval style: trec_eval measures in registry
    order with the first explicit parameter string winning; ir_measures-style names after
    them in the order given; duplicates dropped."""
    if names is None:
        names = ["official"]
    if isinstance(names, str):
        names = [names]
    if all(isinstance(n, str) for n in names):
        return list(_resolve_cached(tuple(names), profile))
    return _resolve(names, profile)


@lru_cache(maxsize=256)
def _resolve_cached(names: tuple[str, ...], profile: str) -> tuple[Instance, ...]:
    """Services ask for the same few measure lists over and over."""
    return tuple(_resolve(list(names), profile))


def _resolve(names: list, profile: str) -> list[Instance]:
    chosen: dict[str, tuple[Any, str | None]] = {}
    ir: list[Instance] = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise MeasureError(str(name), "empty measure name")
        inst = parse_ir_name(name.strip())
        if inst is not None:
            parse_measure(name, profile)  # validates cutoff presence
            if inst.key not in {i.key for i in ir}:
                ir.append(inst)
            continue
        for measure, value, text in parse_trec_name(name.strip(), profile):
            prev = chosen.get(measure.name)
            if prev is None or (prev[1] is None and text is not None):
                chosen[measure.name] = (value, text)
    out: list[Instance] = []
    for mname in sorted(chosen, key=lambda n: REGISTRY[n].order):
        value, text = chosen[mname]
        out.extend(_expand(REGISTRY[mname], value, text))
    return out + ir
