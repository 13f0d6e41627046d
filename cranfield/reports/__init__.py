"""Reports: documents and renderings of evaluations, and pages of comparison documents and
trends (rendered here, never computed here).

The evaluation document (the API's JSON answer, with its input lint, details and provenance;
the one of judgment groups and preferences), trec_eval's text, CSV and JSON Lines output,
precision-recall curves, the measures' descriptions (``GET /v1/measures``, ``cranfield
measures``), and the self-contained HTML pages (an evaluation, a comparison document, a
system's trend), which render documents and import no comparison code.

May import: core, inputs, measures and evaluation (cranfield.evaluate and its pieces).

The names below load their module on first use
(``from cranfield.reports import format_trec``).
"""

from ..lazy import lazy_exports

_EXPORTS = {
    "format_trec": "trec_format", "format_csv": "trec_format", "format_json": "trec_format",
    "evaluation_document": "result_document", "format_jsonl": "jsonl",
    "precision_recall": "curves", "render_evaluation": "html_report",
    "render_comparison": "html_report", "render_trend": "html_trend",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
