"""Comparing runs: several runs evaluated against one qrels, compared over their topics.

The comparison (per-run means, paired tests for every measure and pair, corrections for
multiple comparisons, its settings, scope and work budget), the statistics it runs on
(measure-agnostic, plain numbers per topic), comparisons of segments, the regression gate
and its verdicts for CI systems, a comparison as text, and pooling (which documents to judge).
A comparison document carries each run's input lint and mean curves, built by the reports.

May import: core, inputs, measures, evaluation (cranfield.evaluate and its pieces) and
reports.

The names below load their module on first use (``from cranfield.compare import compare``):
importing the engine or one of the rooms below loads no comparison (nor scipy).
"""

from ..lazy import lazy_exports

_EXPORTS = {
    "compare": "comparison", "compare_evaluations": "comparison", "run_names": "comparison",
    "TESTS": "comparison_settings", "CORRECTIONS": "comparison_settings",
    "Gate": "gate", "parse_gate": "gate", "gate_results": "gate",
    "format_text": "comparison_text", "pool": "pooling", "format_pool": "pooling",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
