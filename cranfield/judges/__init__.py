"""Many judges (issue #31): qrels that carry a judge per judgment, how much the judges agree,
and a consensus of them.

Judged qrels (``topic -> docid -> judge -> grade``) read from trec_eval's judgment-group text
(``qid jg docno rel``, the group naming the judge), JSON (nested or rows) and columns; the
agreement statistics (Cohen's kappa, unweighted and weighted, Fleiss' kappa, Krippendorff's
alpha at three levels) per topic and overall, with bootstrap intervals over topics; and
consensus qrels (majority, max, mean, or one judge) with the recipe that made them.

May import: core (cranfield.errors, cranfield.settings) and inputs (the grammar and the
judgment-group reader).

The names below load their module on first use.
"""

from ..lazy import lazy_exports

_EXPORTS = {
    "cohen_kappa": "agreement", "fleiss_kappa": "agreement", "krippendorff_alpha": "agreement",
    "read_judged": "judged", "topic_judgments": "judged",
    "consensus": "consensus", "CONSENSUS_METHODS": "consensus",
    "agreement_document": "agreement_document", "format_agreement": "agreement_document",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
