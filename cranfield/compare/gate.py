"""The regression gate of a comparison (``cranfield compare --gate``, the API's ``gate``):
does a run's mean drop below the baseline's by more than allowed, significantly?

A gate (:class:`Gate`, or the text ``MEASURE:MAX_DROP[%][@ALPHA]``, :func:`parse_gate`) is
checked on a comparison document (:mod:`cranfield.compare.comparison`): :func:`gate` for one gate on
a finished document, :func:`gate_results` for the gates a comparison was asked for, their
p-values adjusted over the gated measures × candidates only. A gate that cannot be decided
fails closed (``undecided``).

Compare room; above :mod:`cranfield.compare.comparison_settings`, below
:mod:`cranfield.compare.comparison` (which checks the gates a comparison was asked for).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import InputError, MeasureError
from ..measures import DEFAULT_PROFILE
from ..measures.names import resolve
from . import stats
from .comparison_settings import BOOTSTRAP_MIN_TOPICS, TEST_KEYS, TESTS, num

# A gate's drop exceeds its allowance only by more than this (× max(1, |baseline mean|)):
# float rounding must not decide a verdict (0.4 − 0.3 is 0.10000000000000003).
GATE_TOL = 1e-9
MAX_OFFENDING_TOPICS = 20


@dataclass(frozen=True)
class Gate:
    """A regression gate: ``measure`` may not drop by more than ``max_drop`` (an absolute
    difference, or with ``relative`` a fraction of the baseline's mean) with significance
    (``test``'s adjusted p < ``alpha``). ``baseline``/``candidate`` None: see :func:`gate`."""

    measure: str
    max_drop: float
    relative: bool = False
    alpha: float = 0.05
    test: str = "randomization"
    baseline: str | None = None
    candidate: str | None = None
    #: a segment of the comparison's topic metadata (issue #28): the gate is held on that
    #: segment's own comparison (its topics, means, paired tests and correction family,
    #: :func:`cranfield.compare.segment_comparison.segment_document`); None: the whole comparison
    segment: str | None = None


SEGMENT_SUFFIX = "@segment="
_GATE_FORM = re.compile(r"^(?P<drop>[^%@]+?)(?P<percent>%)?(?:@(?P<alpha>.+))?$")


def parse_gate(text: str) -> Gate:
    """Parse the command line's ``MEASURE:MAX_DROP[%][@ALPHA][@segment=LABEL]``.

    ``map:0.01`` (MAP may not fall by more than 0.01), ``ndcg_cut.10:2%@0.01`` (nDCG@10 may not
    fall by more than 2% of the baseline's mean, significance at 0.01). The measure ends at
    the last ``:``, so ir_measures names with ``@`` work (``nDCG@10:0.02``). ALPHA defaults
    to 0.05. ``@segment=LABEL`` (last) holds the gate on that segment of the comparison's
    topic metadata (``map:0.01@segment=tail``); the label is everything after ``=`` (labels
    may hold ``:`` and ``@``). Raises ValueError saying what is wrong.
    """
    text, has_segment, segment = str(text).strip().partition(SEGMENT_SUFFIX)
    if has_segment:
        segment = segment.strip()
        from ..inputs.segments import label_problem

        problem = label_problem(segment) if segment else "the segment label is empty"
        if problem is not None:
            raise ValueError(f"gate {text + SEGMENT_SUFFIX + segment!r}: {problem}")
    gate = _parse_gate(text)
    return replace(gate, segment=segment) if has_segment else gate


def _parse_gate(text: str) -> Gate:
    measure, sep, rest = str(text).strip().rpartition(":")
    if not sep or not measure.strip() or not rest.strip():
        raise ValueError(f"gate {text!r}: expected MEASURE:MAX_DROP[%][@ALPHA], e.g. "
                         "map:0.01 or ndcg_cut.10:2%@0.01")
    m = _GATE_FORM.match(rest.strip())
    if m is None:
        raise ValueError(f"gate {text!r}: expected MAX_DROP[%][@ALPHA] after the ':', got "
                         f"{rest!r}")
    try:
        drop = float(m["drop"])
    except ValueError:
        raise ValueError(f"gate {text!r}: max drop {m['drop']!r} is not a number") from None
    if not math.isfinite(drop) or drop < 0:
        raise ValueError(f"gate {text!r}: max drop must be a finite number ≥ 0")
    alpha = 0.05
    if m["alpha"] is not None:
        try:
            alpha = float(m["alpha"])
        except ValueError:
            raise ValueError(f"gate {text!r}: alpha {m['alpha']!r} is not a number") from None
        if not 0 < alpha < 1:
            raise ValueError(f"gate {text!r}: alpha must be between 0 and 1")
    relative = m["percent"] is not None
    return Gate(measure.strip(), drop / 100 if relative else drop, relative, alpha)


def gate(document: dict, *, measure: str, max_drop: float, baseline: str | None = None,
         candidate: str | None = None, relative: bool = False, alpha: float = 0.05,
         test: str = "randomization", segment: str | None = None) -> dict:
    """Pass or fail a candidate against a baseline on one measure of a comparison document.

    Rule: a check FAILS when both (1) the candidate's mean drop versus the baseline over the
    compared topics exceeds ``max_drop`` (drop = mean(baseline) − mean(candidate); with
    ``relative``, drop / |mean(baseline)| is compared with ``max_drop`` as a fraction, e.g.
    0.02 = 2%), and (2) the drop is significant: ``test``'s p-value (t, randomization,
    bootstrap, wilcoxon), adjusted over **the gate's own family** — its checks, one per gated
    measure × candidate (``correction`` of the document, e.g. holm) — is below ``alpha``. The
    rest of the document (ungated measures, other pairs) does not enter the gate's
    correction, so adding an ungated measure cannot change a verdict.

    Tolerance: (1) is decided at ``GATE_TOL`` (1e-9): the drop exceeds the allowance only
    when ``drop > allowed + 1e-9 · max(1, |mean(baseline)|)`` (allowed = ``max_drop``, or
    ``max_drop · |mean(baseline)|`` with ``relative``), so a drop of exactly ``max_drop``
    passes whatever the floating-point rounding of the means (0.4 → 0.3 as 0.5 → 0.4).

    A check PASSES when the drop is within the allowance (whatever the test), or exceeds it
    but is not significant with a test that could have found it significant.

    It is UNDECIDED — not a pass: the gate fails closed — when the drop exceeds the allowance
    and (a) the gated measure has no mean difference or no p-value (non-numeric per-topic
    values, too few topics for the test), or (b) the test cannot reach ``p_adj < alpha`` on
    these topics at all (its smallest attainable p-value, adjusted over the gate's family, is
    ≥ alpha: the exact randomization test's is 2/2^n for n non-zero differences, so it never
    rejects at 0.05 on 5 topics or fewer; the Monte Carlo tests' 1/(B+1); the Wilcoxon test's
    with every sign alike, 2/2^n when exact), or (c) the test is the bootstrap on fewer than
    ``BOOTSTRAP_MIN_TOPICS`` (30) topics, where its size is too far above alpha to gate on.
    Every check gives its reasons in words.

    ``baseline`` None: the document's baseline, else its first run. ``candidate`` None: every
    other run, one check each. The overall verdict is "fail" if any check fails, else
    "undecided" if any check is undecided, else "pass". Each check lists
    ``offending_topics`` (at most 20, worst first): topics where the candidate drops by more
    than ``max_drop`` (per topic, absolute or relative to the baseline's value, at the same
    tolerance). They come from the document's ``per_topic`` values when present (compare
    passes its own), else from the pair's ``largest_losses`` (``offending_topics_from`` says
    which).

    ``segment``: hold the gate on that segment of the document's topic metadata (its own
    comparison: :func:`segment_view`); each check then names it (``"segment"``).

    Returns ``{"verdict", "reasons", "correction": {"method", "family_size", "family"},
    "checks": [{"measure", "baseline", "candidate", "verdict", "reasons", "mean_baseline",
    "mean_candidate", "drop", "relative_drop", "max_drop", "relative", "test", "alpha",
    "p_value", "p_adjusted", "smallest_p_adjusted", "offending_topics",
    "offending_topics_from"}]}`` (``p_adjusted`` over the gate's family).
    """
    spec = Gate(measure, max_drop, relative, alpha, test, baseline, candidate, segment)
    lookup = None
    if "per_topic" in document:
        lookup = {(run, key): np.array([np.nan if row[key] is None else row[key]
                                        for row in (per[t] for t in document["topics"])])
                  for run, per in document["per_topic"].items()
                  for key in (m["key"] for m in document["measures"])}
    return gate_results(document, [spec], lookup)


def gate_specs(gates) -> list[Gate]:
    """The gates a comparison was asked for (None, one :class:`Gate`, its dict, its text, or a
    list of them), each checked, as a list."""
    if gates is None:
        return []
    if isinstance(gates, Gate | Mapping | str):
        gates = [gates]
    out = []
    for g in gates:
        if isinstance(g, Gate):
            out.append(g)
        elif isinstance(g, str):  # the command line's MEASURE:MAX_DROP[%][@ALPHA]
            try:
                out.append(parse_gate(g))
            except ValueError as exc:
                raise InputError("gate", str(exc), field="gate") from None
        elif isinstance(g, Mapping):
            try:
                out.append(Gate(**g))
            except TypeError as exc:
                raise InputError("gate", f"not a gate: {exc}", field="gate") from None
        else:
            raise InputError("gate", f"not a gate: {g!r}", field="gate")
    return [_check_gate(g) for g in out]


def _document_key(document: dict, name: str) -> str:
    """The document's key for a measure name (its key, or a name with the same canonical)."""
    keys = [m["key"] for m in document["measures"]]
    if name in keys:
        return name
    opts = document.get("options", {})
    profile = opts.get("profile", DEFAULT_PROFILE)
    try:
        insts = resolve([name], profile)
    except MeasureError:
        insts = []
    for inst in insts:
        canonical = inst.canonical(profile, opts.get("relevance_level", 1),
                                   opts.get("judged_only", False), opts.get("depth"))
        for m in document["measures"]:
            if m["canonical"] == canonical or m["key"] == inst.key:
                return m["key"]
    raise MeasureError(name, f"is not among the compared measures ({', '.join(keys)})",
                       [k for k in keys if k.lower().startswith(name.lower()[:2])][:3])


def _check_gate(spec: Gate) -> Gate:
    if isinstance(spec.max_drop, bool) or not isinstance(spec.max_drop, int | float) or not (
            0 <= spec.max_drop < math.inf):
        raise InputError("gate", f"max_drop must be a finite number ≥ 0, got "
                         f"{spec.max_drop!r}", field="gate.max_drop")
    if not isinstance(spec.alpha, int | float) or not 0 < spec.alpha < 1:
        raise InputError("gate", f"alpha must be between 0 and 1, got {spec.alpha!r}",
                         field="gate.alpha")
    if spec.test not in TESTS:
        raise InputError("gate", f"unknown test {spec.test!r}; choose from {list(TESTS)}",
                         field="gate.test")
    if not isinstance(spec.measure, str) or not spec.measure.strip():
        raise InputError("gate", "a gate needs a measure", field="gate.measure")
    if spec.segment is not None:
        from ..inputs.segments import label_problem

        problem = label_problem(spec.segment)
        if problem is not None:
            raise InputError("gate", problem, field="gate.segment")
    return spec


def gate_results(document: dict, specs: list[Gate], lookup: dict | None) -> dict:
    """Every check of every gate, their p-values adjusted over the gate's own family (the
    distinct test × segment × measure × baseline × candidate of its checks), then each
    decided. A gate on a segment is checked on that segment's comparison
    (:func:`segment_view`); its check names the segment."""
    views = {spec.segment: segment_view(document, spec.segment) for spec in specs}
    lookups = {segment: _view_lookup(lookup, document, view)
               for segment, view in views.items()}
    found = [(spec, _gate_pair(views[spec.segment], spec, key, base, cand), key, base, cand)
             for spec in specs
             for key, base, cand in _gate_targets(views[spec.segment], spec)]
    method = document.get("correction", {}).get("method", "holm")
    family: dict[tuple, float] = {}
    for spec, pair, key, base, cand in found:
        p = pair[TEST_KEYS[spec.test]]["p_value"]
        if p is not None:
            family.setdefault((spec.test, spec.segment, key, base, cand), p)
    members = list(family)
    adjusted = dict(zip(members, stats.correct_p_values(
        np.array([family[m] for m in members], dtype=np.float64), method).tolist(),
        strict=True))
    checks = []
    for spec, pair, key, base, cand in found:
        p_adj = adjusted.get((spec.test, spec.segment, key, base, cand))
        checks.append(_check(views[spec.segment], spec, key, base, cand, pair, p_adj,
                             len(members), method, lookups[spec.segment]))
    verdicts = {c["verdict"] for c in checks}
    verdict = ("fail" if "fail" in verdicts else "undecided" if "undecided" in verdicts
               else "pass")
    return {"verdict": verdict, "reasons": [r for c in checks for r in c["reasons"]],
            "correction": {"method": method, "family_size": len(members),
                           "family": "the gate's checks (gated measures × candidates), not "
                                     "every compared measure and pair"},
            "checks": checks}


def segment_view(document: dict, segment: str | None) -> dict:
    """The comparison document a gate on ``segment`` judges: the document itself (None),
    else that segment's comparison (:func:`cranfield.compare.segment_comparison.segment_document`).
    InputError (``gate.segment``), never a pass, when the comparison has no topic metadata,
    no such segment, or no topic of the segment common to the runs (a segment missing from
    a side)."""
    if segment is None:
        return document
    segments = document.get("segments")
    if segments is None:
        raise InputError("gate", f"a gate on segment {segment!r} needs topic metadata "
                         "(options.topic_metadata or topic_metadata_id); this comparison "
                         "has none", field="gate.segment")
    if segment not in segments:
        known = ", ".join(segments) or "none"
        raise InputError("gate", f"segment {segment!r} is not in the topic metadata "
                         f"(its segments: {known})", field="gate.segment")
    if not segments[segment]["topics"]:
        raise InputError("gate", f"segment {segment!r} has no topic common to the compared "
                         "runs (a run has none of its topics): the gate cannot be held on it",
                         field="gate.segment")
    from .segment_comparison import segment_document

    return segment_document(document, segment)


def _view_lookup(lookup: dict | None, document: dict, view: dict) -> dict | None:
    """``lookup`` (per-topic values over ``document``'s topics) over ``view``'s topics."""
    if lookup is None or view is document:
        return lookup
    where = {t: i for i, t in enumerate(document["topics"])}
    rows = np.asarray([where[t] for t in view["topics"]], dtype=np.intp)
    return {k: np.asarray(v)[rows] for k, v in lookup.items()}


def _gate_targets(document: dict, spec: Gate) -> list[tuple[str, str, str]]:
    """(measure key, baseline, candidate) of each check of ``spec``."""
    _check_gate(spec)
    key = _document_key(document, spec.measure)
    names = [r["name"] for r in document["runs"]]
    base = spec.baseline or document.get("baseline") or names[0]
    if base not in names:
        raise InputError("gate", f"baseline {base!r} is not one of the runs "
                         f"({', '.join(names)})", field="gate.baseline")
    if spec.candidate is not None and (spec.candidate not in names or spec.candidate == base):
        raise InputError("gate", f"candidate {spec.candidate!r} is not one of the other runs "
                         f"({', '.join(n for n in names if n != base)})",
                         field="gate.candidate")
    candidates = [spec.candidate] if spec.candidate else [n for n in names if n != base]
    return [(key, base, cand) for cand in candidates]


def _gate_pair(document: dict, spec: Gate, key: str, base: str, cand: str) -> dict:
    """The document's pair comparing ``cand`` with ``base`` on ``key``, with ``spec``'s test."""
    pair = next((p for p in document["pairs"] if p["measure"] == key
                 and {p["a"], p["b"]} == {base, cand}), None)
    if pair is None:
        raise InputError("gate", f"the document does not compare {cand!r} with {base!r} "
                         f"(compare with baseline {base!r}, or without a baseline)",
                         field="gate.baseline")
    if TEST_KEYS[spec.test] not in pair:
        raise InputError("gate", f"the {spec.test} test was not run in this comparison",
                         field="gate.test")
    return pair


def _smallest_p(spec: Gate, pair: dict, n_topics: int) -> float:
    """The smallest p-value ``spec.test`` can give on this pair's topics (0 when not bounded
    below: the t test)."""
    result = pair[TEST_KEYS[spec.test]]
    nonzero = n_topics if pair["wins"] is None else pair["wins"] + pair["losses"]
    if spec.test == "randomization":
        if result.get("exact", True):  # flipping a zero changes nothing: 2^(n−z) patterns
            return min(1.0, 2.0 / 2.0**nonzero)
        return 1.0 / (result["n_permutations"] + 1)
    if spec.test == "bootstrap":
        return 1.0 / (result["n_samples"] + 1)
    if spec.test == "wilcoxon":
        return result.get("smallest_p") or 0.0
    return 0.0


def _exceeds(drop, allowed, scale):
    """``drop > allowed`` at the gate's tolerance (works on arrays too)."""
    return drop > allowed + GATE_TOL * np.maximum(1.0, scale)


def _check(document: dict, spec: Gate, key: str, base: str, cand: str, pair: dict,
           p_adj: float | None, family_size: int, method: str, lookup: dict | None) -> dict:
    summary = document["summary"][key]
    mean_base, mean_cand = summary[base]["mean"], summary[cand]["mean"]
    sign = 1.0 if pair["a"] == base else -1.0   # pairs hold b − a; drop = base − cand
    drop = None if pair["mean_diff"] is None else -sign * pair["mean_diff"]
    rel_drop = (drop / abs(mean_base) if drop is not None and mean_base else None)
    result = pair[TEST_KEYS[spec.test]]
    # the topics the pair's tests are over (Accuracy: those where both runs have a value)
    n_topics = pair.get("n_topics", len(document["topics"]))
    floor = stats.correct_p_values(np.full(max(1, family_size), _smallest_p(spec, pair,
                                                                            n_topics)),
                                   method)[0].item()
    unit = f"{spec.max_drop * 100:g}%" if spec.relative else f"{spec.max_drop:g}"
    check: dict[str, Any] = {
        "measure": key, "baseline": base, "candidate": cand, "mean_baseline": mean_base,
        "mean_candidate": mean_cand, "drop": drop, "relative_drop": rel_drop,
        "max_drop": spec.max_drop, "relative": spec.relative, "test": spec.test,
        "alpha": spec.alpha, "p_value": result["p_value"], "p_adjusted": p_adj,
        "smallest_p_adjusted": floor,
        # the drop's confidence interval (the pair's, turned to baseline − candidate): a
        # verdict kept apart from its comparison (a trend's) still shows it
        "drop_ci": _drop_ci(pair, sign), "ci_level": (document.get("ci") or {}).get("level")}
    what = f"{key} {cand} vs {base}:"
    if spec.segment is not None:  # held on a segment: the check says which
        check["segment"] = spec.segment
        what = f"{key} {cand} vs {base} on segment {spec.segment!r}:"
    scale = abs(mean_base) if mean_base is not None else 0.0
    if drop is None or mean_base is None:
        verdict = "undecided"
        reason = (f"{what} cannot be decided: non-numeric per-topic values (no mean "
                  "difference), so the gate does not pass")
    else:
        allowed = spec.max_drop * abs(mean_base) if spec.relative else spec.max_drop
        exceeds = bool(_exceeds(drop, allowed, scale))
        if spec.relative:
            amount = f"{rel_drop:.2%}" if rel_drop is not None else f"{drop:.4f} (from 0)"
        else:
            amount = f"{drop:.4f}"
        p_text = "no p-value" if p_adj is None else f"{spec.test} p_adj {p_adj:.4g}"
        if not _exceeds(drop, 0.0, scale):
            verdict = "pass"
            reason = (f"{what} no drop ({cand} is {-drop:.4f} higher)" if drop < 0
                      else f"{what} no drop")
        elif not exceeds:
            verdict, reason = "pass", f"{what} drop {amount} within the allowed {unit}"
        elif p_adj is None:
            verdict = "undecided"
            reason = (f"{what} drop {amount} exceeds {unit} but the {spec.test} test gave no "
                      f"p-value ({n_topics} topic(s)): cannot be decided, so the gate does not "
                      "pass")
        elif spec.test == "bootstrap" and n_topics < BOOTSTRAP_MIN_TOPICS:
            verdict = "undecided"
            reason = (f"{what} drop {amount} exceeds {unit}, but the bootstrap test cannot "
                      f"gate on {n_topics} topics (below {BOOTSTRAP_MIN_TOPICS} it rejects a "
                      "true null too often); use the randomization or t test")
        elif p_adj < spec.alpha:
            verdict = "fail"
            reason = (f"{what} drop {amount} (mean {mean_base:.4f} → {mean_cand:.4f}) exceeds "
                      f"the allowed {unit} and is significant ({p_text} < {spec.alpha:g})")
        elif floor >= spec.alpha:
            verdict = "undecided"
            reason = (f"{what} drop {amount} exceeds {unit}, but the {spec.test} test cannot "
                      f"reach p_adj < {spec.alpha:g} on {n_topics} topics (smallest attainable "
                      f"p_adj {floor:.4g}): cannot be decided, so the gate does not pass; use "
                      "more topics (or the t test)")
        else:
            verdict = "pass"
            reason = (f"{what} drop {amount} exceeds {unit} but is not significant "
                      f"({p_text} ≥ {spec.alpha:g})")
    check["verdict"], check["reasons"] = verdict, [reason]
    check["offending_topics"], check["offending_topics_from"] = _offending(
        document, spec, key, base, cand, pair, lookup)
    return check


def _drop_ci(pair: dict, sign: float) -> list:
    """[low, high] of baseline − candidate from the pair's CI of b − a (None where it has
    none)."""
    low, high = pair.get("ci_low"), pair.get("ci_high")
    if low is None or high is None:
        return [None, None]
    return [-high, -low] if sign > 0 else [low, high]


def _offending(document, spec: Gate, key, base, cand, pair, lookup) -> tuple[list, str | None]:
    """Topics where the candidate drops by more than max_drop, worst first (at most 20)."""
    if lookup is not None and (base, key) in lookup:
        base_v, cand_v = lookup[(base, key)], lookup[(cand, key)]
        topics = document["topics"]
        source = "per_topic"
    elif pair["a"] == base:  # largest_losses are the candidate's worst drops
        rows = pair["largest_losses"]
        topics = [r["topic"] for r in rows]
        base_v = np.array([r["a"] for r in rows], dtype=np.float64)
        cand_v = np.array([r["b"] for r in rows], dtype=np.float64)
        source = "largest_losses"
    else:
        return [], None
    drop = base_v - cand_v
    with np.errstate(divide="ignore", invalid="ignore"):
        if spec.relative:
            over = _exceeds(drop, spec.max_drop * np.abs(base_v), np.abs(base_v)) & (drop > 0)
            badness = np.where(base_v != 0, drop / np.abs(base_v), np.inf)
        else:
            over = _exceeds(drop, spec.max_drop, np.abs(base_v))
            badness = drop
    rows = np.flatnonzero(over)
    rows = rows[np.argsort(-badness[rows], kind="stable")][:MAX_OFFENDING_TOPICS]
    return [{"topic": topics[i], "baseline": num(base_v[i]), "candidate": num(cand_v[i]),
             "drop": num(drop[i])} for i in rows.tolist()], source
