"""The one registry of measures. The CLI, the API and ``GET /v1/measures`` all read it.

A :class:`Measure` is a per-topic function plus what is needed to name, parameterise and
aggregate it. Parameter *kinds* follow trec_eval's ``-m name.params`` grammar:

========== ============================================ ==================================
kind       parameters                                    printed name per instance
========== ============================================ ==================================
none       none                                          ``name``
cutoffs    positive integers (atol), sorted, distinct    ``name_k`` per cutoff
fcutoffs   floats, sorted                                ``name_%3.2f`` per value
floats     a float list kept as typed                    ``name`` / ``name_<as typed>``
gains      ``level=gain`` pairs                          ``name`` / ``name_<as typed>``
pair       ``key=value`` pairs (e.g. ``p=0.9``)          ``name`` / ``name_<as typed>``
int        one integer                                   ``name`` / ``name_<as typed>``
kw         keyword parameters (``Param``s, ``k`` = @k)   the ir_measures name as written
========== ============================================ ==================================
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import MeasureError


@dataclass(frozen=True)
class Profile:
    """A compatibility profile: the trec_eval version whose numbers and output Cranfield
    reproduces, or Cranfield's own (``cranfield``: trec_eval 10's arithmetic and output, and
    qrels that declare real-valued gains, which trec_eval cannot read). Code asks a profile's
    flags (``PROFILES[name].float32_scores``), never its name."""

    name: str
    # scores are compared as C floats when ranking (9.0.8 reads them with atof into a float)
    float32_scores: bool
    # recall level p as a count of relevant documents: lround(p * R) (10.0), else
    # (long)(p * R + 0.9) (9.x)
    rounded_recall_cutoffs: bool
    # per-topic lines (-q) for every evaluated topic, also qrels topics missing from the run
    # (-c); 9.0.8 prints only the run's topics
    prints_topics_missing_from_run: bool
    # -c: a qrels topic missing from the run keeps the values of the one-document ranking
    # (10.0; the reset measures aside); 9.0.8 scores it 0
    keeps_missing_topic_values: bool
    # a line of a prefs, qrels_prefs or qrels_jg file starting with '#' is a comment (10.0);
    # 9.0.8's readers of those formats have no comments and refuse it
    # (cranfield.measures.jg_measures)
    skips_judgment_comments: bool
    # all_trec names the measures trec_eval 10 added to it (rbp, rbp_resid, unj_5/10/20:
    # Measure.all_trec, cranfield.measures.trec_graded); 9.0.8's all_trec has none of them
    all_trec_has_10_measures: bool
    # qrels declaring real-valued gains (gains="real", issue #31) are read as such; a
    # trec_eval profile reads every grade as trec_eval does, refusing one that is not an
    # integer exactly as without the declaration (cranfield.measures.real_gains)
    reads_real_gains: bool = False


# by name, in the order they are listed (the first is the default)
PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("trec_eval-9.0.8", float32_scores=True, rounded_recall_cutoffs=False,
            prints_topics_missing_from_run=False, keeps_missing_topic_values=False,
            skips_judgment_comments=False, all_trec_has_10_measures=False),
    Profile("trec_eval-10", float32_scores=False, rounded_recall_cutoffs=True,
            prints_topics_missing_from_run=True, keeps_missing_topic_values=True,
            skips_judgment_comments=True, all_trec_has_10_measures=True),
    Profile("cranfield", float32_scores=False, rounded_recall_cutoffs=True,
            prints_topics_missing_from_run=True, keeps_missing_topic_values=True,
            skips_judgment_comments=True, all_trec_has_10_measures=True,
            reads_real_gains=True),
)}
DEFAULT_PROFILE = "trec_eval-9.0.8"
# the profile of an evaluation that names none and whose qrels declare real gains
REAL_GAINS_PROFILE = "cranfield"
# the profiles whose all_trec names the measures trec_eval 10 added (a Measure's all_trec)
ALL_TREC_10 = tuple(name for name, p in PROFILES.items() if p.all_trec_has_10_measures)


def resolve_profile(profile: str | None, gains: str | None = None) -> str:
    """The profile an evaluation runs under: ``profile`` as given, or, when none is given,
    :data:`REAL_GAINS_PROFILE` for qrels declaring real gains (``gains == "real"``: the
    declaration says the grades are not trec_eval's) and :data:`DEFAULT_PROFILE` otherwise.
    Whoever knows the qrels' declaration settles the profile here: the library
    (:func:`cranfield.evaluate_checks.plan_evaluation`), the local command line, the
    service (its options schema; for stored qrels, their version's ``gains``) and a re-score
    (the new version's ``gains``, unless the recorded request named a profile). A caller
    that does not know it names none: ``cranfield eval --server`` sends only a profile the
    user named, and the service settles it."""
    if profile is not None:
        return profile
    return REAL_GAINS_PROFILE if gains == "real" else DEFAULT_PROFILE

# What a measure is computed from (Measure.input) -> the qrels formats that give it: trec_eval's
# -R, the library's and the API's qrels_format. "any": runid and num_q, read from no judgment.
INPUTS: dict[str, tuple[str, ...]] = {
    "qrels": ("qrels",),
    "qrels_jg": ("qrels_jg",),
    "prefs": ("prefs", "qrels_prefs"),
    "any": ("qrels", "qrels_jg", "prefs", "qrels_prefs"),
}
QRELS_FORMATS = INPUTS["any"]
_INPUT_WORDS = {"qrels": "relevance judgments", "qrels_jg": "judgment groups",
                "prefs": "preference judgments",
                "qrels_prefs": "relevance judgments read as preferences"}


def input_problem(measure: Measure, qrels_format: str) -> str | None:
    """Why ``measure`` cannot be computed from judgments read as ``qrels_format`` (trec_eval's
    ``-R``), naming the format(s) that give it; None when it can."""
    formats = INPUTS[measure.input]
    if qrels_format in formats:
        return None
    flags = " or ".join(f"-R {f}" for f in formats)
    fields = " or ".join(f"qrels_format={f!r}" for f in formats)
    default = ", the default" if formats == ("qrels",) else ""
    return (f"{measure.name} is computed from {_INPUT_WORDS[measure.input]}: give them with "
            f"{flags} ({fields}{default}), not {_INPUT_WORDS[qrels_format]} "
            f"(-R {qrels_format})")


# integers (cutoffs, grades, relevance levels, collection sizes) are int64 throughout
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


@dataclass(frozen=True)
class Param:
    """One parameter of a measure, as ``GET /v1/measures`` describes it, and its range.

    The range is declared here once and every measure name is checked against it
    (:meth:`check`, called by :mod:`cranfield.measures.names` for every way of writing a measure):
    ``integer`` types (and lists of them) take ints within ``minimum``..``maximum``, which
    default to int64's bounds; ``number``/``float`` types take finite numbers within the
    bounds given (none: any finite number); ``enum`` one of ``choices``; ``boolean`` True or
    False; a ``mapping`` type maps keys checked by ``key`` to finite numbers within the
    bounds given. A parameter whose default is None and that ``required`` says must be given
    has no default.
    """

    name: str
    type: str
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    key: Param | None = None
    required: bool = False

    def __post_init__(self):
        if self.type.startswith("integer"):
            if self.minimum is None:
                object.__setattr__(self, "minimum", INT64_MIN)
            if self.maximum is None:
                object.__setattr__(self, "maximum", INT64_MAX)

    def as_dict(self) -> dict:
        out = {"name": self.name, "type": self.type, "default": self.default,
               "description": self.description}
        if self.choices is not None:
            out["enum"] = list(self.choices)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.required:
            out["required"] = True
        return out

    def allowed(self) -> str:
        """The declared range in words, e.g. ``a finite number, p >= 0 and <= 1``."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        if self.type == "boolean":
            return "true or false"
        if self.key is not None:
            values = self._span(self)
            return (f"{self.key.name}=value pairs with {self.key.name}s {self._span(self.key)} "
                    f"and {'values ' + values if values else 'finite values'}")
        if self.type.startswith("integer"):
            what = {0: "a non-negative integer", 1: "a positive integer"}.get(
                self.minimum, "an integer")
        else:
            what = "a finite number"
        span = self._span(self)
        return f"{what}, {self.name} {span}" if span else what

    @staticmethod
    def _span(p: Param) -> str:
        bounds = ([f">= {_num(p.minimum)}"] if p.minimum is not None else []) + \
            ([f"<= {_num(p.maximum)}"] if p.maximum is not None else [])
        return " and ".join(bounds)

    def check(self, value: Any, measure: str, written: str) -> Any:
        """``value`` (one element of a list type; a whole mapping) if it is in range, else a
        :class:`MeasureError` for the measure ``written`` naming the parameter and its range."""
        if self.key is not None and isinstance(value, Mapping):
            for k, v in value.items():
                try:
                    self.key.check(k, measure, written)
                except MeasureError:
                    raise self.error(k, measure, written, label=self.key.name) from None
                if not _finite(v) or (self.minimum is not None and v < self.minimum) or \
                        (self.maximum is not None and v > self.maximum):
                    raise self.error(v, measure, written, label=f"{self.name}[{k}]")
            return value
        if self.type == "string":
            return value
        if self.type == "boolean":
            if not isinstance(value, bool):
                raise self.error(value, measure, written)
            return value
        if self.choices is not None:
            if value not in self.choices:
                raise self.error(value, measure, written)
            return value
        if self.type.startswith("integer"):
            ok = isinstance(value, int | np.integer) and not isinstance(value, bool)
        else:
            ok = _finite(value)
        if not ok or (self.minimum is not None and value < self.minimum) or \
                (self.maximum is not None and value > self.maximum):
            raise self.error(value, measure, written)
        return value

    def error(self, value: Any, measure: str, written: str, label: str | None = None
              ) -> MeasureError:
        shown = _num(value)
        return MeasureError(written, f"parameter {label or self.name}={shown} of {measure} is "
                                     f"out of range: it must be {self.allowed()}")


def _finite(value: Any) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and \
        not isinstance(value, bool) and math.isfinite(value)


def _num(value: Any) -> str:
    """A number as written: ``2`` for 2.0, but every digit a bound needs (``1.0000001``)."""
    if isinstance(value, float | np.floating):
        short = f"{value:g}"
        return short if not math.isfinite(value) or float(short) == value else repr(float(value))
    return str(value)


# ir_measures' ``rel=``: a per-measure relevance level, for the measures that use one
# (``Measure.uses_rel_level``); its range is the evaluation's relevance_level's
REL = Param("rel", "integer", None, "relevance level: grades >= rel are relevant (default: the "
            "evaluation's relevance_level, trec_eval's -l)")


@dataclass(frozen=True)
class Measure:
    """A registered measure.

    ``compute(ctx, value)`` returns one value per evaluated topic; ``value`` is one cutoff for
    the cutoff kinds, else the whole parameter (a tuple of floats, a dict of gains, ...).
    ``aggregate`` says how trec_eval's ``all`` line is formed: ``mean``, ``sum``, ``gmean``
    (geometric mean with values floored at 1e-5), ``num_q``, ``runid`` or ``none``; or
    ``mean_reported``: the mean over the topics that have a value (a NaN per-topic value is
    none), as ir_measures averages a measure that reports no value for some topics.
    ``uses_rel_level``: the measure reads the relevance level (so it takes ir_measures'
    ``rel=``); ``uses_collection_size``: it reads the collection size (trec_eval's ``-N``, or
    its own ``N`` parameter). ``input``: the judgments it is computed from (:data:`INPUTS`):
    ``qrels`` (the default), ``qrels_jg`` (judgment groups, trec_eval's ``-R qrels_jg``),
    ``prefs`` (preference judgments, ``-R prefs`` or ``-R qrels_prefs``) or ``any`` (the
    summary's runid and num_q lines, which every evaluation can print); for the last three
    ``compute(values, value)`` reads the values :mod:`cranfield.measures.jg_measures` and
    :mod:`cranfield.measures.prefs_measures` compute for one judgment group or topic.
    """

    name: str
    compute: Callable
    family: str
    kind: str = "none"
    defaults: tuple = ()
    aggregate: str = "mean"
    integer: bool = False
    per_topic: bool = True
    all_trec: tuple[str, ...] = tuple(PROFILES)
    ir_name: str | None = None
    aliases: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    uses_rel_level: bool = True
    uses_collection_size: bool = False
    input: str = "qrels"
    order: int = 0
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.input not in INPUTS:
            raise ValueError(f"measure {self.name}: input {self.input!r} is not one of "
                             f"{', '.join(INPUTS)}")

    def __reduce__(self):
        # a measure is its registry entry: pickled by name (its functions may be lambdas),
        # so evaluations travel between processes (RQ job results)
        return (_registered, (self.name,))

    @property
    def doc(self) -> str:
        import inspect

        return inspect.cleandoc(self.compute.__doc__ or "")

    @property
    def summary(self) -> str:
        """The docstring's first paragraph, on one line."""
        return " ".join(self.doc.split("\n\n", 1)[0].split())

    def section(self, heading: str) -> str:
        """A ``Heading:`` paragraph of the docstring (Formula, Reference, ...)."""
        lines = self.doc.splitlines()
        out: list[str] = []
        grab = False
        for line in lines:
            if line.startswith(heading + ":"):
                grab = True
                rest = line[len(heading) + 1:].strip()
                if rest:
                    out.append(rest)
                continue
            if grab:
                # a heading is capitalised (Formula:, Reference:); a wrapped formula line
                # may start with a variable and a colon (``b: the mean ...``): it continues
                if not line.strip() or line.startswith("0/0:") or (
                        line[:1].isupper() and ":" in line.split(" ")[0]):
                    break
                out.append(line.strip())
        return " ".join(out)


def _registered(name: str) -> Measure:
    return REGISTRY[name]


class KwArgs(dict):
    """The keyword parameters of a ``kw`` measure instance (hashable, so instances are)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


REGISTRY: dict[str, Measure] = {}
_order = 0


def register(name: str, *, family: str, **kw) -> Callable:
    """Decorator: register ``fn`` as measure ``name`` (registration order = measures.c order,
    which is the order trec_eval prints in)."""

    def wrap(fn: Callable) -> Callable:
        global _order
        if name in REGISTRY:
            raise ValueError(f"measure {name} registered twice")
        _order += 1
        REGISTRY[name] = Measure(name=name, compute=fn, family=family, order=_order, **kw)
        return fn

    return wrap


NICKNAMES: dict[str, Callable[[str], list[str]]] = {
    "official": lambda profile: ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map",
                                 "gm_map", "Rprec", "bpref", "recip_rank", "iprec_at_recall",
                                 "P"],
    "all_trec": lambda profile: [m.name for m in sorted(REGISTRY.values(), key=lambda m: m.order)
                                 if profile in m.all_trec],
    # trec_eval's set_names (measures.c): the measures of the retrieved set as a whole
    "set": lambda profile: ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility",
                            "set_P", "set_recall", "set_relative_P", "set_map", "set_F"],
    # trec_eval's prefs_names, prefs_off_name and qrels_jg_names (measures.c): the measures of
    # preference judgments (-R prefs / qrels_prefs) and of judgment groups (-R qrels_jg)
    "all_prefs": lambda profile: ["runid", "num_q", *_PREFS],
    "prefs": lambda profile: ["runid", "num_q", *_PREFS[:6]],
    "qrels_jg": lambda profile: ["runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg"],
}
_PREFS = ("prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp",
          "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
          "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp",
          "prefs_avgjg_imp")
