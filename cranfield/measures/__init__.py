"""The measure registry. Importing this package registers every measure."""

from . import trec  # noqa: F401, I001  (registers trec_eval's measures, in their order: ...
from . import trec_graded  # noqa: F401  (... from G on, after trec's)
from . import extended  # noqa: F401  (measures beyond trec_eval)
from . import cwl  # noqa: F401  (ir_measures' C/W/L measures, cwl_eval's definitions)
from . import diversity  # noqa: F401  (ndeval's, from subtopic qrels)
from . import judgments  # noqa: F401  (trec_eval's, from judgment groups and preferences)
from .context import Context
from .registry import DEFAULT_PROFILE, NICKNAMES, PROFILES, REGISTRY, Measure, Param, Profile

__all__ = ["Context", "DEFAULT_PROFILE", "Measure", "NICKNAMES", "PROFILES", "Param", "Profile",
           "REGISTRY"]
