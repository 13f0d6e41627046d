"""The inputs: runs and qrels read into columns, and everything read beside them.

The Run and Qrels model; the input grammar and the TREC text readers (line by line, and the
fast pyarrow and compiled readers); mappings, JSON bodies and columns (Arrow, Parquet, data
frames) with their bounds; judgment groups and preferences, topic metadata and z-score files;
docid hashing and key packing; a run ranked against qrels as trec_eval ranks it; swapped
arguments told from bad inputs. And the compiled kernels: ``_mapscan.c``, ``_jsonscan.c``,
``_rankpass.c`` (a run mapping checked, looked up and ranked in one pass), ``_seeded_mix.h``
and ``_mapping_values.h`` build the extension ``cranfield.inputs._mapscan`` (optional: without
it the same answers come from Python), ``_json_kernels`` names its JSON kernels.

May import: core (cranfield.errors, cranfield.settings, cranfield.version) and nothing else of
the engine.

The names below load their module on first use, so importing one reader loads no other.
"""

from ..lazy import lazy_exports

_EXPORTS = {
    "Qrels": "run_qrels", "Run": "run_qrels", "read_qrels": "io", "read_run": "io",
    "TopicMetadata": "segments", "read_topic_metadata": "segments",
    "ZScores": "zscores", "read_zscores": "zscores",
    "read_prefs": "judgment_files", "read_qrels_jg": "judgment_files",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
