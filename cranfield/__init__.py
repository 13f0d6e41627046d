"""Cranfield: search-engine evaluation with trec_eval's semantics, as a library.

    >>> import cranfield
    >>> ev = cranfield.evaluate({"q1": {"d2": 1}}, {"q1": {"d1": 2.0, "d2": 1.0}}, ["map", "P.1"])
    >>> ev.aggregate["map"], ev.per_topic["q1"]["P_1"]
    (0.5, 0.0)

The engine needs numpy only (pyarrow, when installed, speeds up reading TREC files); it never
imports the web service, Redis or RQ.

The engine's rooms, each a subpackage whose docstring says what it holds and what it may import
(``tests/engine/test_import_rules.py`` holds them to it): :mod:`cranfield.inputs` (runs, qrels
and everything read beside them), :mod:`cranfield.measures` (the registry, the measures and
their names), :mod:`cranfield.reports` (documents and renderings of evaluations, and pages of
comparisons and trends) and :mod:`cranfield.compare` (comparisons and their statistics, the
gate, pooling). The modules at the top form three groups, which the rooms' docstrings name:
*core* (:mod:`cranfield.version`, :mod:`cranfield.errors`, :mod:`cranfield.settings`), below
every room; *evaluation* (:mod:`cranfield.evaluate` and its pieces, such as
``evaluate_checks`` and ``shards``), above the measures and below the reports; *interfaces*,
above everything: the command line (:mod:`cranfield.cli` and its pieces) and the API client
(:mod:`cranfield.client`). ``__all__`` below is the public API.

Every name loads on first use (PEP 562, issue #30): ``import cranfield`` loads nothing but the
version, ``cranfield.evaluate`` loads the engine (numpy) when first asked for, and a room
(``cranfield.compare``, ``cranfield.reports``) when first named. So ``cranfield eval`` loads
neither the comparisons nor the reports it does not print, and the command line sets up the
environment numpy reads (``OPENBLAS_NUM_THREADS``: :func:`cranfield.cli.main`) before numpy
loads.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING

from .version import __version__

if TYPE_CHECKING:  # the names as type checkers and editors see them; at run time, _EXPORTS
    from .errors import CranfieldError, EvaluationError, InputError, MeasureError
    from .evaluate import Evaluation, TopicSets, evaluate
    from .evaluate_many import evaluate_many
    from .inputs.io import read_qrels, read_run
    from .inputs.run_qrels import Qrels, Run
    from .measures import PROFILES, REGISTRY, Measure
    from .measures.names import Instance, parse_measure

__all__ = [
    "CranfieldError", "Evaluation", "EvaluationError", "InputError", "Instance", "Measure",
    "MeasureError", "PROFILES", "Qrels", "REGISTRY", "Run", "TopicSets", "evaluate",
    "evaluate_many", "parse_measure", "read_qrels", "read_run", "__version__",
]

# each public name (but __version__) -> the module it is defined in, imported on first use
_EXPORTS = {
    "CranfieldError": "errors", "EvaluationError": "errors", "InputError": "errors",
    "MeasureError": "errors",
    "Evaluation": "evaluate", "TopicSets": "evaluate", "evaluate": "evaluate",
    "evaluate_many": "evaluate_many",
    "read_qrels": "inputs.io", "read_run": "inputs.io",
    "Qrels": "inputs.run_qrels", "Run": "inputs.run_qrels",
    "PROFILES": "measures", "REGISTRY": "measures", "Measure": "measures",
    "Instance": "measures.names", "parse_measure": "measures.names",
}

_ROOMS = ("inputs", "measures", "reports", "compare")


def __getattr__(name: str):
    """A public name, or a room, not loaded yet: imported now, then kept (so this runs once
    per name)."""
    if name in _ROOMS:
        return import_module(f"{__name__}.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_ROOMS})


class _Package(ModuleType):
    """The package's module type. Importing a submodule sets it as an attribute of its
    package; ``cranfield.evaluate`` and ``cranfield.evaluate_many`` are modules and functions
    of the same name, and the name stays the function's (as when the root imported them
    eagerly): such a submodule is not set, and the function loads on first use."""

    def __setattr__(self, name: str, value) -> None:
        if (isinstance(value, ModuleType) and _EXPORTS.get(name) == name
                and value.__name__ == f"{__name__}.{name}"):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
