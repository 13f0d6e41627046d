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
their names), :mod:`cranfield.reports` (the documents and renderings of an evaluation) and
:mod:`cranfield.compare` (comparisons and their statistics, the gate, pooling); at the top,
:func:`evaluate` and its pieces, the command line (:mod:`cranfield.cli`) and the API client
(:mod:`cranfield.client`). ``__all__`` below is the public API; ``cranfield.compare`` and
``cranfield.reports`` load on first use, so ``import cranfield`` (and ``cranfield eval``)
loads neither.
"""

from .errors import CranfieldError, EvaluationError, InputError, MeasureError  # noqa: E402
from .evaluate import Evaluation, TopicSets, evaluate  # noqa: E402
from .evaluate_many import evaluate_many  # noqa: E402
from .inputs.io import read_qrels, read_run  # noqa: E402
from .inputs.run_qrels import Qrels, Run  # noqa: E402
from .measures import PROFILES, REGISTRY, Measure  # noqa: E402
from .measures.names import Instance, parse_measure  # noqa: E402
from .version import __version__  # noqa: E402

__all__ = [
    "CranfieldError", "Evaluation", "EvaluationError", "InputError", "Instance", "Measure",
    "MeasureError", "PROFILES", "Qrels", "REGISTRY", "Run", "TopicSets", "evaluate",
    "evaluate_many", "parse_measure", "read_qrels", "read_run", "__version__",
]

_ROOMS = ("inputs", "measures", "reports", "compare")


def __getattr__(name: str):
    """A room not imported yet (``cranfield.compare``, ``cranfield.reports``) loads on first
    use."""
    if name in _ROOMS:
        from importlib import import_module

        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
