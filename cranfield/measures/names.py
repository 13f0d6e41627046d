"""Measure names: trec_eval's ``-m`` grammar, ir_measures' names and ranx's spellings,
resolved against the registry into concrete measure instances (:class:`Instance`), and the
names suggested for an unknown one. The peers' spellings are tabled in
:mod:`cranfield.measures.peer_names`, the parameters a name carries are read in
:mod:`cranfield.measures.name_params`. Room: measures.

trec_eval:   ``map``, ``P.5,10``, ``P_5``, ``ndcg_cut.10``, ``ndcg_cut_10``, ``set_F.0.25``,
             ``ndcg.1=3,2=9``, ``iprec_at_recall..10,.20``, nicknames ``official``,
             ``all_trec``. A trec_eval name keeps trec_eval's meaning.
ir_measures: every name of ir_measures 0.4.3's registry and its aliases, with ir_measures'
             meaning: ``AP``, ``AP@100``, ``nDCG@10``, ``nDCG(dcg=exp-log2)@10``,
             ``P(rel=2)@5``, ``Precision@5``, ``R@1000``, ``RR@10``, ``Judged@10``,
             ``SetF(beta=0.5)``, ``SetP(relative=true)``, ``RBP(rel=1,p=0.8)``, ``ERR@20``,
             ``BPM(T=1,max_rel=3)@10``, ``alpha_nDCG@20``, ``StRecall@10``, ...
ranx:        ``ndcg@10``, ``ndcg_burges@10``, ``map@100``, ``mrr``, ``mrr@10``,
             ``recall@100``, ``precision@5``, ``hit_rate@5``, ``hit_rate``, ``f1@10``,
             ``r-precision``, ``hits``, ``rbp.95``, each with ranx's level suffix
             (``ndcg@10-l2``, ``map-l2``, ``recall-l1``); a bare spelling that is also a
             trec_eval name (``map``, ``recall``) keeps trec_eval's meaning.

Every instance knows the key it is reported under (trec_eval's printed name for trec_eval
names, the name as written for the others) and a canonical name with every parameter
explicit, so that a stored number can be recomputed. Repeating a measure with other
parameters (``-m P.10 -m P.5``) evaluates all of them (trec_eval keeps only the first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..errors import MeasureError
from .name_params import (
    FALSE,
    BadToken,
    ascii_float,
    ascii_int,
    check_value,
    gains_value,
    kw_value,
    param_named,
    parse_value,
    read_boolean,
    read_number,
    read_rel_level,
    split_args,
)
from .peer_names import (
    ALIASES,
    IR_NAMES,
    KW_NAMES,
    KW_ONLY,
    KW_WITH_CUTOFF,
    RANX_AT_K,
    RANX_BARE,
    ranx_ir_name,
)
from .registry import (
    DEFAULT_PROFILE,
    NICKNAMES,
    QRELS_FORMATS,
    REGISTRY,
    Measure,
    input_problem,
)


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


def known_names() -> list[str]:
    return sorted(set(REGISTRY) | set(IR_NAMES) | set(KW_NAMES) | set(NICKNAMES)
                  | set(RANX_AT_K) | set(RANX_BARE))


def _unknown(name: str, why: str = "unknown measure") -> MeasureError:
    return MeasureError(name, why, suggest(name))


@lru_cache(maxsize=1)
def _candidates() -> tuple[tuple[str, str, bool], ...]:
    """(spelling to compare with, name to suggest, takes a number) for every known name:
    trec_eval names (a number goes after '.'), ir_measures names (after '@'), ranx spellings
    (suggested as the ir_measures name they mean)."""
    out: list[tuple[str, str, bool]] = []
    for n, m in REGISTRY.items():
        if m.kind != "kw":
            out.append((n, n, m.kind in ("cutoffs", "fcutoffs")))
    for n in NICKNAMES:
        out.append((n, n, False))
    for n, (_plain, cut) in IR_NAMES.items():
        out.append((n, n, cut is not None))
    for n, target in KW_NAMES.items():
        k = next((p for p in REGISTRY[target].params if p.name == "k"), None)
        out.append((n, n, k is not None))
    for n, target in RANX_AT_K.items():
        out.append((n, target, True))
    for n, target in RANX_BARE.items():
        # (hit_rate, success at any rank: suggested as written, not as Success@<int64 max>)
        out.append((n, n if "@" in target else target, False))
    return tuple(out)


def suggest(name: str, n: int = 3) -> list[str]:
    """The names ``name`` most likely meant, best first, written so that they resolve: a
    number the name carries goes where the suggested name takes it (``ndcg_cut10`` ->
    ``ndcg_cut.10``, ``ndgc@10`` -> ``nDCG@10``, ``recal@100`` -> ``R@100``). Ranked by
    similarity ignoring case, then the same style (``@k`` or trec_eval's ``.k``), then
    similarity respecting case, then a name over its alias; one name per measure."""
    import difflib  # only when a name is unknown: not at every start-up (issue #30)

    text = name.strip()
    number = re.search(r"(\d+(?:\.\d+)?)\s*$", text)
    digits = number.group(1) if number else None
    typed = text.lower()
    scored: dict[str, tuple[float, bool, float, bool]] = {}
    for spelling, shown, takes in _candidates():
        forms = [(spelling, shown)]
        if takes and digits is not None:
            sep = "." if _is_trec(shown) else "@"
            forms = [(f"{spelling}.{digits}", f"{shown}{sep}{digits}"),
                     (f"{spelling}@{digits}", f"{shown}{sep}{digits}"),
                     (f"{spelling}_{digits}", f"{shown}{sep}{digits}")]
        for compared, suggestion in forms:
            # ratio() is at most 2·min(len)/Σlen (real_quick_ratio): a name far longer than
            # every candidate (a request's) is not compared character by character
            if 2 * min(len(typed), len(compared)) < 0.6 * (len(typed) + len(compared)):
                continue
            ratio = difflib.SequenceMatcher(None, typed, compared.lower()).ratio()
            if ratio < 0.6:
                continue
            exact = difflib.SequenceMatcher(None, text, compared).ratio()
            style = ("@" in text) == ("@" in suggestion)
            key = (ratio, style, exact, spelling == shown and shown not in ALIASES)
            if key > scored.get(suggestion, (0.0, False, 0.0, False)):
                scored[suggestion] = key
    out: list[str] = []
    meanings: set[tuple] = set()
    for suggestion in sorted(scored, key=lambda s: (tuple(-x for x in scored[s]), len(s), s)):
        if suggestion == text:
            continue
        try:
            meaning = tuple((i.measure.name, repr(i.value), i.rel_level)
                            for i in parse_measure(suggestion))
        except MeasureError:
            continue
        if meaning in meanings:
            continue
        meanings.add(meaning)
        out.append(suggestion)
        if len(out) == n:
            break
    return out


def _is_trec(name: str) -> bool:
    return name in REGISTRY and REGISTRY[name].kind != "kw"


def _expand(measure: Measure, value: Any, param_text: str | None, key_base: str | None = None,
            rel_level: int | None = None) -> list[Instance]:
    name = key_base or measure.name
    if measure.kind in ("cutoffs", "fcutoffs"):
        values = value if value is not None else measure.defaults
        fmt = (lambda v: f"{name}_{v}") if measure.kind == "cutoffs" else \
            (lambda v: f"{name}_{v:3.2f}")
        return [Instance(fmt(v), measure, v, param_text, rel_level) for v in values]
    if measure.kind == "kw":
        return [Instance(name, measure, kw_value(measure, {}, None, name), None, rel_level)]
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
        return [(m, check_value(m, parse_value(m, text, name), name), text)]
    # trec_eval's printed form: ndcg_cut_10, P_5, iprec_at_recall_0.10
    stem, _, suffix = name.rpartition("_")
    if stem in REGISTRY and REGISTRY[stem].kind in ("cutoffs", "fcutoffs") and suffix:
        m = REGISTRY[stem]
        return [(m, check_value(m, parse_value(m, suffix, name), name), suffix)]
    # the printed form of the other parameterised measures (set_F_0.5, utility_1,-1,0,0,
    # ndcg_rel_0=0,1=1): what a result was recorded under reads back as that measure; the
    # longest measure name before an underscore (ndcg_rel, not ndcg) whose parameters read
    # (else the name is unknown, with suggestions: ndcg_cut10 is not ndcg's)
    for i in sorted((i for i, ch in enumerate(name) if ch == "_"), reverse=True):
        m = REGISTRY.get(name[:i])
        if m is not None and m.kind not in ("none", "kw", "cutoffs", "fcutoffs") \
                and name[i + 1:]:
            text = name[i + 1:]
            try:
                return [(m, check_value(m, parse_value(m, text, name), name), text)]
            except MeasureError:
                continue
    raise _unknown(name)


# the cutoff after '@' is taken whole (whatever it holds) and read by ascii_int/ascii_float,
# so that ``P@1_0``, ``nDCG@１`` and ``P@+5`` are refused naming the cutoff, not misread
_IR_RE = re.compile(r"^(?P<name>[^\W\d]\w*)(?:\((?P<args>.*)\))?(?:@(?P<k>[^@()]*))?$")


_SEPARATOR_SPACES = re.compile(r"\s*([(),={}:])\s*")


def parse_ir_name(name: str) -> Instance | None:
    """Resolve an ir_measures-style name (or a ranx spelling); None if ``name`` is in neither
    style."""
    # spaces beside the separators of a name are dropped (``nDCG(dcg=exp-log2, gain=exp)``),
    # not those inside a token (``RBP(p=0. 8)`` is not p=0.8) nor the cutoff's after '@':
    # ``P@ 5`` is refused as ``P@+5`` is
    head, at, tail = name.rpartition("@")
    if not at or ")" in tail:
        head, at, tail = name, "", ""
    name = _SEPARATOR_SPACES.sub(r"\1", head).strip() + at + tail
    meant = ranx_ir_name(name)
    if meant is not None and meant != name:
        inst = parse_ir_name(meant)
        if inst is None:  # a bare trec_eval name (Rprec)
            ((measure, value, text),) = parse_trec_name(meant, DEFAULT_PROFILE)
            inst = _expand(measure, value, text)[0]
        return Instance(name, inst.measure, inst.value, None, inst.rel_level)
    m = _IR_RE.match(name)
    if not m or (m.group("name") not in IR_NAMES and m.group("name") not in KW_NAMES):
        return None
    if m.group("name") in REGISTRY and m.group("args") is None and m.group("k") is None:
        return None  # a bare trec_eval name (P, Rprec, infAP) keeps trec_eval's meaning
    args = split_args(m.group("args") or "", name)
    k = m.group("k")
    base = m.group("name")
    if args.get("judged_only", "false") in FALSE:
        args.pop("judged_only", None)
    else:
        raise MeasureError(name, "judged_only is an option of the whole evaluation "
                                 "(judged_only, trec_eval's -J), not of one measure")
    if base in ("nDCG", "NDCG") and "dcg" in args:
        dcg = args.pop("dcg")
        if dcg == "exp-log2":  # gdeval's nDCG (ir_measures' gdeval provider)
            args["gain"] = "exp"
        elif dcg != "log2":
            raise MeasureError(name, f"dcg must be log2 or exp-log2, got {dcg!r}")
    if base in KW_NAMES and (base not in IR_NAMES or set(args) & KW_ONLY.get(base, set())
                             or (k is not None and IR_NAMES[base][1] is None)
                             or (k is not None and set(args) & KW_WITH_CUTOFF.get(base, set()))):
        measure = REGISTRY[KW_NAMES[base]]
        rel_level = read_rel_level(measure, args, name)
        return Instance(name, measure, kw_value(measure, args, k, name), None, rel_level)
    plain, cut = IR_NAMES[base]
    if base in ("SetP", "SetRelP") and "relative" in args:
        try:
            relative = read_boolean(args.pop("relative"))
        except ValueError:
            raise MeasureError(name, "relative must be true or false") from None
        plain = "set_relative_P" if relative else "set_P"
    if base == "NumRet" and "rel" in args:
        plain = "num_rel_ret"  # ir_measures: NumRet(rel=r) counts the relevant retrieved
    target = cut if k is not None else plain
    if target is None:
        need = "needs a cutoff (@k)" if k is None else "takes no cutoff"
        raise MeasureError(name, f"{m.group('name')} {need}")
    measure = REGISTRY[target]
    gains: dict = {}
    if "gains" in args:
        if measure.name not in ("ndcg", "dcg"):
            raise MeasureError(name, f"{m.group('name')} takes no gains")
        gains = gains_value(args.pop("gains"), name)
    rel = read_rel_level(measure, args, name)
    value: Any = None
    if k is not None:
        try:
            value = ascii_float(k) if measure.kind == "fcutoffs" else ascii_int(k)
        except BadToken as bad:
            what = measure.params[0].name if measure.params else "k"
            raise MeasureError(name, bad.why(f"the cutoff ({what}) of {measure.name}")) \
                from None
    if measure.name == "set_F":
        # ir_measures hands beta to trec_eval's set_F as it is: SetF(beta=2) is set_F.2, the
        # weight of recall (F's own beta is squared: F(beta=2) is set_F.4)
        beta = read_number(args.pop("beta", "1"), "beta", name)
        param_named(REGISTRY["F"], "beta").check(beta, measure.name, name)
        value = beta
    elif measure.kind == "pair" and "p" in args:
        value = {"p": read_number(args.pop("p"), "p", name)}
    elif measure.kind == "pair":
        value = {}
    elif measure.kind == "gains":
        value = gains
    if args:
        raise MeasureError(name, f"unknown parameter(s) {sorted(args)} for {m.group('name')}")
    return Instance(name, measure, check_value(measure, value, name), None, rel)


def needs_subtopics(names, profile: str = DEFAULT_PROFILE) -> bool:
    """Whether these measures are diversity measures, read from subtopic qrels."""
    return any(i.measure.family == "diversity" for i in resolve(names, profile))


def parse_measure(name: str, profile: str = DEFAULT_PROFILE) -> list[Instance]:
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


# the measures evaluated when none are named, per qrels format: trec_eval's official set for
# qrels; the nickname of their own measures for judgment groups and preferences (with those,
# trec_eval's default, official, fails)
DEFAULT_MEASURES = {"qrels": "official", "qrels_jg": "qrels_jg", "prefs": "all_prefs",
                    "qrels_prefs": "all_prefs"}


def resolve(names: list[str] | str | None, profile: str,
            qrels_format: str = "qrels") -> list[Instance]:
    """The instances for a list of names, trec_eval style: trec_eval measures in registry
    order with the first explicit parameter string winning; ir_measures-style names after
    them in the order given; duplicates dropped. ``qrels_format`` (trec_eval's ``-R``) is
    what the judgments are read as: a name standing for a measure computed from another
    input (``map_avgjg`` from qrels, ``map`` from prefs) is a :class:`MeasureError` naming
    the format it needs (:func:`cranfield.measures.registry.input_problem`)."""
    if names is None:
        names = [DEFAULT_MEASURES[qrels_format]]
    if isinstance(names, str):
        names = [names]
    if all(isinstance(n, str) for n in names):
        return list(_resolve_cached(tuple(names), profile, qrels_format))
    return _resolve(names, profile, qrels_format)


@lru_cache(maxsize=256)
def _resolve_cached(names: tuple[str, ...], profile: str,
                    qrels_format: str) -> tuple[Instance, ...]:
    """Services ask for the same few measure lists over and over."""
    return tuple(_resolve(list(names), profile, qrels_format))


def _resolve(names: list, profile: str, qrels_format: str = "qrels") -> list[Instance]:
    given: dict[str, list[tuple[Any, str | None]]] = {}
    ir: list[Instance] = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise MeasureError(str(name), "empty measure name")
        inst = parse_ir_name(name.strip())
        if inst is not None:
            parse_measure(name, profile)  # validates cutoff presence
            _check_input(inst.measure, name, qrels_format)
            if inst.key not in {i.key for i in ir}:
                ir.append(inst)
            continue
        for measure, value, text in parse_trec_name(name.strip(), profile):
            _check_input(measure, name, qrels_format)
            given.setdefault(measure.name, []).append((value, text))
    out: list[Instance] = []
    for mname in sorted(given, key=lambda n: REGISTRY[n].order):
        out.extend(_merge(REGISTRY[mname], given[mname]))
    keys: set[str] = set()
    unique = []
    for inst in out + ir:
        if inst.key not in keys:
            keys.add(inst.key)
            unique.append(inst)
    return unique


def _check_input(measure: Measure, name: str, qrels_format: str) -> None:
    """A :class:`MeasureError` for ``name`` when ``measure`` is not computed from judgments
    read as ``qrels_format``."""
    if qrels_format not in QRELS_FORMATS:
        raise MeasureError(name, f"unknown qrels_format {qrels_format!r}; choose one of "
                                 f"{list(QRELS_FORMATS)}")
    problem = input_problem(measure, qrels_format)
    if problem is not None:
        raise MeasureError(name.strip(), problem)


def _merge(measure: Measure, given: list[tuple[Any, str | None]]) -> list[Instance]:
    """The instances of one trec_eval measure named (perhaps) several times: every explicit
    parameter string counts (cutoffs are merged: ``P.10`` and ``P.5`` give P_5 and P_10;
    ``set_F.0.5`` and ``set_F.2`` give both), where trec_eval keeps only the first; a
    mention without parameters (``P``, or a nickname's) gives the defaults when no mention
    has parameters."""
    explicit = [(v, t) for v, t in given if t is not None]
    if not explicit:
        return _expand(measure, None, None)
    if measure.kind in ("cutoffs", "fcutoffs"):
        values = tuple(sorted({x for v, _ in explicit for x in v}))
        return _expand(measure, values, ",".join(t for _, t in explicit))
    return [i for v, t in explicit for i in _expand(measure, v, t)]


def measure_meaning(inst: Instance) -> tuple:
    """What a reported number is, whatever the spelling that asked for it: ``ndcg_cut.10``,
    ``ndcg_cut_10`` and ``nDCG@10`` mean the same."""
    return (inst.measure.name, repr(inst.value), inst.rel_level,
            repr(sorted(inst.options.items())))


def recorded_keys(name: str, keys, profile: str = DEFAULT_PROFILE) -> list[str]:
    """The keys among ``keys`` (measure keys as results were reported under them) that hold
    the one measure ``name`` spells, in any spelling the registry resolves: ``ndcg_cut.10``,
    ``ndcg_cut_10`` and ``nDCG@10`` each find both ``ndcg_cut_10`` and ``nDCG@10``. ``name``
    itself, when it is one of the keys, comes first; [] when none holds it. Raises
    :class:`MeasureError` (with suggestions) for a name the registry does not resolve, or one
    that stands for several measures (a nickname, a cutoff list)."""
    keys = list(dict.fromkeys(keys))
    name = name.strip() if isinstance(name, str) else name
    try:
        instances = parse_measure(name, profile)
    except MeasureError:
        # trec_eval prints some parameterised measures as keys the registry cannot read
        # back (set_F_0.5, utility_1,-1,0,0, ndcg_0=0,1=1): a recorded key finds itself
        if name in keys:
            return [name]
        raise
    if len(instances) != 1:
        if name in keys:
            return [name]
        shown = ", ".join(i.key for i in instances[:5]) + (" …" if len(instances) > 5 else "")
        raise MeasureError(name, f"stands for {len(instances)} measures ({shown}); name one")
    wanted, printed = measure_meaning(instances[0]), instances[0].key
    found = [name] if name in keys else []
    for key in keys:
        if key in found:
            continue
        try:
            meant = [measure_meaning(i) for i in parse_measure(key, profile)]
        except MeasureError:
            # a key no spelling reads back: found by the name that prints as it (set_F.0.5
            # prints as set_F_0.5), and by itself
            if key == printed:
                found.append(key)
            continue
        if meant == [wanted]:
            found.append(key)
    return found
