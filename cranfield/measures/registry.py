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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PROFILES = ("trec_eval-9.0.8", "trec_eval-10")
DEFAULT_PROFILE = "trec_eval-9.0.8"


@dataclass(frozen=True)
class Param:
    """One parameter of a measure, as ``GET /v1/measures`` describes it."""

    name: str
    type: str
    default: Any
    description: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None

    def as_dict(self) -> dict:
        out = {"name": self.name, "type": self.type, "default": self.default,
               "description": self.description}
        if self.choices is not None:
            out["enum"] = list(self.choices)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        return out


@dataclass(frozen=True)
class Measure:
    """A registered measure.

    ``compute(ctx, value)`` returns one value per evaluated topic; ``value`` is one cutoff for
    the cutoff kinds, else the whole parameter (a tuple of floats, a dict of gains, ...).
    ``aggregate`` says how trec_eval's ``all`` line is formed: ``mean``, ``sum``, ``gmean``
    (geometric mean with values floored at 1e-5), ``num_q``, ``runid`` or ``none``.
    """

    name: str
    compute: Callable
    family: str
    kind: str = "none"
    defaults: tuple = ()
    aggregate: str = "mean"
    integer: bool = False
    per_topic: bool = True
    all_trec: tuple[str, ...] = PROFILES
    ir_name: str | None = None
    aliases: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    uses_rel_level: bool = True
    order: int = 0
    extra: dict = field(default_factory=dict)

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
        return self.doc.split("\n", 1)[0]

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
                if not line.strip() or (line[:1].isalpha() and ":" in line.split(" ")[0]):
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
}
