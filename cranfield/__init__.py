"""Cranfield: search-engine evaluation with trec_eval's semantics, as a library.

    >>> import cranfield
    >>> ev = cranfield.evaluate({"q1": {"d2": 1}}, {"q1": {"d1": 2.0, "d2": 1.0}}, ["map", "P.1"])
    >>> ev.aggregate["map"], ev.per_topic["q1"]["P_1"]
    (0.5, 0.0)

The engine needs numpy only (pyarrow, when installed, speeds up reading TREC files); it never
imports the web service, Redis or RQ.
"""

from .errors import CranfieldError, EvaluationError, InputError, MeasureError  # noqa: E402
from .evaluate import Evaluation, TopicSets, evaluate  # noqa: E402
from .inputs.io import read_qrels, read_run  # noqa: E402
from .inputs.run_qrels import Qrels, Run  # noqa: E402
from .measures import PROFILES, REGISTRY, Measure  # noqa: E402
from .measures.names import Instance, parse_measure  # noqa: E402
from .version import __version__  # noqa: E402

__all__ = [
    "CranfieldError", "Evaluation", "EvaluationError", "InputError", "Instance", "Measure",
    "MeasureError", "PROFILES", "Qrels", "REGISTRY", "Run", "TopicSets", "evaluate",
    "parse_measure", "read_qrels", "read_run", "__version__",
]
