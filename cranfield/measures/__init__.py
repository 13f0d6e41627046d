"""The measure registry. Importing this package registers every measure."""

from . import trec  # noqa: F401  (registers trec_eval's measures)
from .context import Context
from .registry import DEFAULT_PROFILE, NICKNAMES, PROFILES, REGISTRY, Measure, Param

__all__ = ["Context", "DEFAULT_PROFILE", "Measure", "NICKNAMES", "PROFILES", "Param",
           "REGISTRY"]
