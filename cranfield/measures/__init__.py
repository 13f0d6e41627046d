"""The measures: the one registry (importing this package registers every measure), the
measures, and what names, computes and bounds them.

trec_eval's measures (trec, trec_graded, and judgments: those of judgment groups and
preferences, computed by jg_measures and prefs_measures), those beyond trec_eval (extended
and textbook), ir_measures' C/W/L measures (cwl), ndeval's diversity measures (diversity) and
the TREC Web track's own evaluators (webtrack); what every measure reads (context); measure names in
trec_eval's, ir_measures' and ranx's spellings (names, name_params, peer_names, and
printed_names: the name trec_eval prints); trec_eval's summary and the weighted and
per-segment aggregates (aggregation); ``-Z`` applied to per-topic values
(zscore_standardise); budgets counted before work (budget).

May import: core (cranfield.errors, cranfield.settings, cranfield.version) and inputs.
"""

from . import trec  # noqa: F401, I001  (registers trec_eval's measures, in their order: ...
from . import trec_graded  # noqa: F401  (... from G on, after trec's)
from . import extended  # noqa: F401  (measures beyond trec_eval)
from . import textbook  # noqa: F401  (... and the textbook set, after extended's)
from . import cwl  # noqa: F401  (ir_measures' C/W/L measures, cwl_eval's definitions)
from . import diversity  # noqa: F401  (ndeval's, from subtopic qrels)
from . import judgments  # noqa: F401  (trec_eval's, from judgment groups and preferences)
from .context import Context
from .registry import (
    DEFAULT_PROFILE,
    NICKNAMES,
    PROFILES,
    REAL_GAINS_PROFILE,
    REGISTRY,
    Measure,
    Param,
    Profile,
    resolve_profile,
)

__all__ = ["Context", "DEFAULT_PROFILE", "Measure", "NICKNAMES", "PROFILES", "Param", "Profile",
           "REAL_GAINS_PROFILE", "REGISTRY", "resolve_profile"]
