"""``cranfield`` command line. ``cranfield eval`` is a drop-in for ``trec_eval``: same flags,
same output bytes by default, clearer errors.

Exit codes follow trec_eval: 1 usage or unknown measure, 2 unreadable, malformed or empty
input, 4 a docid repeated within a topic, 7 no topic with both results and judgments.
``cranfield compare --gate``: 0 when every gate passes, 3 when one fails (a significant drop
larger than allowed), 5 when none fails but one cannot be decided (the gate fails closed).
The commands that work on a service (``eval --server``, ``qrels``, ``baseline``, ``gate``,
``trend``, ``history``: :mod:`cranfield.remote_cli`) add 6, not found, and 2 for a refused
request or a service that cannot be reached.

This module holds the parser (:func:`build_parser`), ``cranfield measures`` and
:func:`main`, the console entry point; the commands run in :mod:`cranfield.cli_eval`
(``eval``), :mod:`cranfield.cli_compare` (``compare``, ``pool``) and the ``remote_*``
modules (on a service). Room: the top (the command line), beside ``evaluate`` and ``client``.

Start-up (issue #30): importing this module loads no numpy and no command's module; :func:`main`
builds only the parser of the command named first (every parser for ``-h``, ``--version`` or
another first argument), sets ``OPENBLAS_NUM_THREADS`` for the commands that multiply no
matrices, and only then imports the command, and with it the engine.
"""

from __future__ import annotations

import argparse
import sys

from . import remote_cli, remote_parsers
from .version import __version__

COMPARE_DESCRIPTION = """\
Compare RUNs evaluated against QRELS: each run's mean with a (1 - alpha) confidence
interval, and per measure x pair the mean difference with its CI, a paired t-test, a
randomization test (exact for 16 topics or fewer), a bootstrap test (rejects a true null too
often below 30 topics: a warning, and never a gate's test there) and optionally the Wilcoxon
test, p-values adjusted over every measure x pair. Intervals are not adjusted.
"""
COMPARE_EPILOG = """\
--gate decides at a tolerance of 1e-9 whether a drop exceeds MAX_DROP, and adjusts its
p-values over the gated measures x candidates only (ungated measures do not count). A gate is
undecided (it fails closed) when a gated measure has no values or no p-value, when the test
cannot reach ALPHA on so few topics (exact randomization: never at 0.05 on 5 topics or
fewer), or when it is the bootstrap below 30 topics.

exit codes:
  0  done; every gate passed
  1  usage error (too few runs, --names, --baseline), unknown or non-comparable
     measure, or another error of the comparison
  2  malformed command line (an unknown option, a malformed --gate), or unreadable,
     malformed or empty input
  3  a gate failed: a significant drop larger than allowed
  4  a docid repeated within a topic
  5  no gate failed, but one could not be decided (not a pass)
  7  no topic with both results and judgments
"""

EVAL_EPILOG = """\
With --server (or with --record or --qrels-id and $CRANFIELD_SERVER set) the run is sent to a
Cranfield service once, streamed from disk; a queued job is waited for (a progress bar on
standard error when it is a terminal) and its result printed in --format.

""" + remote_cli.EXIT_CODES

# the engine's own commands; any other is looked up among the ``cranfield.commands`` entry
# points (see _commands)
ENGINE_COMMANDS = ("eval", "ndeval", "gdeval", "compare", "measures", "pool",
                   *remote_parsers.REMOTE_COMMANDS)
COMMANDS_GROUP = "cranfield.commands"

PROFILE_ALIASES = {"9.0.8": "trec_eval-9.0.8", "9": "trec_eval-9.0.8", "10": "trec_eval-10",
                   "10.0": "trec_eval-10"}


def _profile(text: str) -> str:
    from .measures import PROFILES

    profile = PROFILE_ALIASES.get(text, text)
    if profile not in PROFILES:
        raise argparse.ArgumentTypeError(
            f"unknown profile {text!r} (choose {', '.join(PROFILES)})")
    return profile


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1")
    return value


def _gate_arg(text: str):
    from .compare.gate import parse_gate

    try:
        return parse_gate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _commands() -> dict:
    """The commands other packages add (``[project.entry-points."cranfield.commands"]``:
    ``serve`` and ``keys`` from ``service.commands``, ``worker`` from ``worker.commands``),
    by name: each a function adding its subparser. Loaded only when asked for, so the engine's
    own commands never import them."""
    from importlib.metadata import entry_points

    found = {}
    for ep in sorted(entry_points(group=COMMANDS_GROUP), key=lambda ep: ep.name):
        if ep.name in ENGINE_COMMANDS or ep.name in found:
            continue
        try:
            found[ep.name] = ep.load()
        except ImportError:  # its package is not installed: no such command
            continue
    return found


def _add_eval(sub) -> None:
    """``cranfield eval``'s parser."""
    from .measures import DEFAULT_PROFILE, PROFILES, REAL_GAINS_PROFILE

    ev = sub.add_parser("eval", help="evaluate a run (or several) against qrels, like "
                                     "trec_eval",
                        description="Evaluate RUN against QRELS. Output is trec_eval's text by "
                                    "default.\n\nSeveral RUNs are evaluated in turn against "
                                    "QRELS read once, each run's output as for\none RUN, in "
                                    "order: trec's blocks each start with the run's runid "
                                    "line, csv and jsonl\nhave a leading run column or key, "
                                    "json is one document listing them (see docs/cli.md).",
                        epilog=EVAL_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("qrels", metavar="QRELS", help="qrels file: TREC text, Parquet or Arrow "
                                                   "IPC ('-' reads standard input)")
    ev.add_argument("run", metavar="RUN", nargs="+",
                    help="run file: TREC text, Parquet or Arrow IPC ('-' reads standard "
                         "input); several are evaluated in turn, named by their file names "
                         "(as cranfield compare names them)")
    ev.add_argument("-q", action="store_true", dest="per_topic",
                    help="print per-topic values as well as the summary")
    ev.add_argument("-c", action="store_true", dest="complete",
                    help="average over all qrels topics; missing ones score 0")
    ev.add_argument("-n", action="store_true", dest="no_summary",
                    help="do not print the summary ('all') lines")
    ev.add_argument("-l", type=int, default=1, dest="rel_level", metavar="N",
                    help="relevance level: grades >= N are relevant (default 1)")
    ev.add_argument("-J", action="store_true", dest="judged_only",
                    help="evaluate judged documents only")
    ev.add_argument("--real-gains", action="store_true", dest="real_gains",
                    help="QRELS hold real-valued gains (e.g. 0.75; not trec_eval): gain-based "
                         "measures (nDCG, DCG, ERR, RBP...) use them as they are, binary ones "
                         "need rel= (P(rel=0.5)@10); read under the cranfield profile (a "
                         "trec_eval --profile refuses a grade that is not an integer); see "
                         "docs/measures.md")
    ev.add_argument("-M", type=int, default=None, dest="depth", metavar="N",
                    help="evaluate only the top N documents of each topic")
    ev.add_argument("-N", type=int, default=0, dest="collection_size", metavar="N",
                    help="number of documents in the collection (for utility)")
    ev.add_argument("-R", default="qrels", dest="rel_format",
                    choices=("qrels", "qrels_jg", "prefs", "qrels_prefs"),
                    help="format of QRELS, as trec_eval's -R: qrels (default), qrels_jg "
                         "(qid jg docno rel: judgment groups, measures qrels_jg / *_avgjg), "
                         "prefs (qid jg jsg docno rel_level) or qrels_prefs (a qrels file "
                         "read as preferences); measures all_prefs / prefs_*")
    ev.add_argument("-Z", "--Zscore", default=None, dest="zscores", metavar="FILE",
                    help="print z-scores: each per-topic value as (value - mean) / stddev "
                         "from FILE's 'topic measure mean stddev' lines (-1000000 where a "
                         "pair is missing), the summary formed from them, names prefixed Z")
    ev.add_argument("--topic-metadata", default=None, dest="topic_metadata", metavar="FILE",
                    help="segments and weights: FILE's 'topic label[,label...]|- [weight]' "
                         "lines add, after the summary, each segment's summary "
                         "('segment=LABEL' lines) and the weighted means ('weighted' lines); "
                         "see docs/segments.md")
    ev.add_argument("--curves", action="store_true",
                    help="with --format json: precision-recall curves (per topic with -q, and "
                         "the mean 11-point interpolated curve)")
    ev.add_argument("--micro", action="store_const", const="micro", default="macro",
                    dest="aggregation", help="micro-average the set measures (sum the "
                    "contingency table over topics); others stay macro")
    ev.add_argument("-m", action="append", dest="measures", metavar="MEASURE",
                    help="measure to compute (repeatable): trec_eval names such as map, "
                         "P.5,10, ndcg_cut.10, all_trec, or ir_measures names such as nDCG@10")
    ev.add_argument("--profile", type=_profile, default=None,
                    help=f"compatibility profile: {', '.join(PROFILES)} (default "
                         f"{DEFAULT_PROFILE}; {REAL_GAINS_PROFILE} with --real-gains, which "
                         "the trec_eval profiles do not read; with --server, unless named, "
                         "the service's: stored qrels declaring real gains run under "
                         f"{REAL_GAINS_PROFILE})")
    ev.add_argument("--format", choices=("trec", "json", "csv", "jsonl"), default="trec",
                    help="output format (default trec: trec_eval's text); jsonl: a JSON "
                         "object per line as ir_measures' --output_format jsonl prints "
                         "them ({\"measure\", \"value\"}; with -q {\"query_id\", "
                         "\"measure\", \"value\"} per topic and measure, then query_id "
                         "all)")
    ev.add_argument("--no-warnings", action="store_true",
                    help="do not print the input lint (topics missing from the run, unjudged "
                         "documents, ties at a cutoff...) on standard error; with --format "
                         "json it is the document's warnings")
    ev.add_argument("--server", default=None, metavar="URL",
                    help="evaluate on a Cranfield service instead of locally (same output; "
                         "default: $CRANFIELD_SERVER when --record or --qrels-id is given)")
    ev.add_argument("--api-key", default=None, metavar="KEY", help=remote_cli.API_KEY_HELP)
    ev.add_argument("--record", type=_record_arg, default=None,
                    metavar="system=NAME,label=LABEL[,commit=SHA][,tags=T1;T2]",
                    help="with --server: keep the result in the service's history under "
                         "SYSTEM (see cranfield history); 'recorded as ID' on standard error")
    ev.add_argument("--keep-run", action="store_true",
                    help="with --record: the service keeps the run with the result (once "
                         "per content digest), to read back or re-score later")
    ev.add_argument("--qrels-id", default=None, metavar="ID",
                    help="with --server: use stored qrels ID[@VERSION]; QRELS is then ignored "
                         "(pass -)")


def _add_ndeval(sub) -> None:
    """``cranfield ndeval``'s parser."""
    nd = sub.add_parser("ndeval", help="diversity measures exactly as NIST's ndeval 4.5 prints "
                                       "them (CSV)")
    nd.add_argument("qrels", metavar="QRELS", help="subtopic qrels: topic subtopic docno judgment")
    nd.add_argument("run", metavar="RUN", help="run file")
    nd.add_argument("-c", action="store_true", dest="complete",
                    help="average over all qrels topics")
    nd.add_argument("-traditional", "--traditional", action="store_true",
                    help="order by score then docno (TREC 2012-2014 official), not by rank")
    nd.add_argument("-alpha", "--alpha", type=float, default=0.5)
    nd.add_argument("-beta", "--beta", type=float, default=0.5, help="NRBP patience")
    nd.add_argument("-M", type=int, default=None, dest="depth", metavar="N",
                    help="keep the first N results of each topic")


def _add_gdeval(sub) -> None:
    """``cranfield gdeval``'s parser."""
    gd = sub.add_parser("gdeval", help="nDCG@k (exponential gain) and ERR@k exactly as the TREC "
                                       "Web track's gdeval 1.3 prints them (CSV)")
    gd.add_argument("qrels", metavar="QRELS", help="graded qrels: topic 0 docno grade (<= 4)")
    gd.add_argument("run", metavar="RUN", help="run file")
    gd.add_argument("-c", action="store_true", dest="complete",
                    help="average over all topics with a relevant document")
    gd.add_argument("-k", type=int, default=20, dest="k", help="cutoff (default 20)")


def _add_compare(sub) -> None:
    """``cranfield compare``'s parser."""
    from .measures import DEFAULT_PROFILE, PROFILES, REAL_GAINS_PROFILE

    cmp = sub.add_parser("compare", help="compare runs over topics: means with CIs, paired "
                                         "tests, multiple-comparison correction, a gate",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description=COMPARE_DESCRIPTION, epilog=COMPARE_EPILOG)
    cmp.add_argument("qrels", metavar="QRELS", help="qrels file")
    cmp.add_argument("runs", metavar="RUN", nargs="+", help="run files (two or more)")
    cmp.add_argument("-m", action="append", dest="measures", metavar="MEASURE",
                     help="measure to compare (repeatable; default map, ndcg_cut.10, P.10, "
                          "recall.1000, recip_rank)")
    cmp.add_argument("--baseline", default=None, metavar="NAME",
                     help="compare every run with this one (default: all pairs)")
    cmp.add_argument("--names", default=None, metavar="A,B,...",
                     help="run names, comma-separated (default: the file names without "
                          "extension)")
    cmp.add_argument("--correction", choices=("holm", "bonferroni", "bh", "none"),
                     default="holm", help="multiple-comparison correction over all measure x "
                                          "pair comparisons (default %(default)s)")
    cmp.add_argument("--alpha", type=_probability, default=0.05,
                     help="significance level (default %(default)s); confidence intervals are "
                          "at 1 - ALPHA and not adjusted for multiple comparisons")
    cmp.add_argument("--permutations", type=remote_parsers.positive_int, default=10000, metavar="N",
                     help="randomization test sign vectors (default %(default)s; exact for "
                          "16 topics or fewer)")
    cmp.add_argument("--bootstrap", type=remote_parsers.positive_int, default=10000, metavar="N",
                     help="bootstrap resamples (default %(default)s)")
    cmp.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    cmp.add_argument("--tests", type=_tests_arg, default=None, metavar="T,...",
                     help="the tests, comma-separated, spelled as the API's 'tests': t, "
                          "randomization, bootstrap, wilcoxon (default t,randomization,"
                          "bootstrap)")
    cmp.add_argument("--wilcoxon", action="store_true",
                     help="add wilcoxon to the tests: the Wilcoxon signed-rank test "
                          "(Cranfield's own: exact for at most 50 untied non-zero "
                          "differences, else normal with tie correction; zeros dropped)")
    cmp.add_argument("--format", choices=("text", "json", "html", "junit", "markdown"),
                     default="text",
                     help="html: the self-contained report page (inline SVG), as the API's "
                          "text/html; redirect it to a file. junit, markdown: the --gate "
                          "verdict as JUnit XML (a test case per check) or a Markdown table")
    cmp.add_argument("--gate", action="append", type=_gate_arg, default=[],
                     metavar="MEASURE:MAX_DROP[%][@ALPHA]",
                     help="fail (exit 3) when a run's mean drops below the baseline (or the "
                          "first run) by more than MAX_DROP (absolute, or %% of the baseline; "
                          "tolerance 1e-9) and the randomization test finds the drop "
                          "significant at ALPHA (default 0.05), p-values adjusted over the "
                          "gated measures x candidates only; exit 5 when it cannot be decided "
                          "(see below); repeatable")
    cmp.add_argument("-c", action="store_true", dest="complete",
                     help="use all qrels topics; topics missing from a run score 0")
    cmp.add_argument("--topic-metadata", default=None, dest="topic_metadata", metavar="FILE",
                     help="segments and weights ('topic label[,label...]|- [weight]' lines): "
                          "each segment compared as well, with the same tests, its p-values "
                          "adjusted over its own family; and each run's weighted mean")
    cmp.add_argument("-l", type=int, default=1, dest="rel_level", metavar="N",
                     help="relevance level: grades >= N are relevant (default 1)")
    cmp.add_argument("--real-gains", action="store_true", dest="real_gains",
                     help="QRELS hold real-valued gains (e.g. 0.75; not trec_eval): gain-based "
                          "measures (nDCG, DCG, ERR, RBP...) use them as they are, binary ones "
                          "need rel= (P(rel=0.5)@10); read under the cranfield profile (a "
                          "trec_eval --profile refuses a grade that is not an integer); see "
                          "docs/measures.md")
    cmp.add_argument("--profile", type=_profile, default=None,
                     help=f"compatibility profile: {', '.join(PROFILES)} (default "
                          f"{DEFAULT_PROFILE}; {REAL_GAINS_PROFILE} with --real-gains, which "
                          "the trec_eval profiles do not read)")


def _add_measures(sub) -> None:
    """``cranfield measures``'s parser."""
    from .measures import DEFAULT_PROFILE
    from .reports.measure_docs import FAMILIES

    ms = sub.add_parser("measures", help="list the measure registry (trec_eval's -h), or "
                                         "describe one measure",
                        description="List the measures (name, family, summary), or with NAME "
                                    "describe the measures a name stands for: its reported "
                                    "keys, canonical names, formula, 0/0 rule, reference and "
                                    "parameters. The same documents as GET /v1/measures.")
    ms.add_argument("name", nargs="?", metavar="NAME",
                    help="a measure name in any accepted spelling (P.10, P_10, P@10, "
                         "precision@10, nDCG(dcg=exp-log2)@20, ...)")
    ms.add_argument("--family", choices=FAMILIES, default=None,
                    help="only the measures of this family")
    ms.add_argument("-l", "--long", action="store_true",
                    help="describe every listed measure in full (as NAME does)")
    ms.add_argument("--format", choices=("text", "json"), default="text",
                    help="json: GET /v1/measures's document (with NAME, "
                         "GET /v1/measures/NAME's)")
    ms.add_argument("--profile", type=_profile, default=DEFAULT_PROFILE,
                    help="profile of the canonical names shown for NAME")


def _add_pool(sub) -> None:
    """``cranfield pool``'s parser."""
    from .measures import DEFAULT_PROFILE

    pl = sub.add_parser("pool", help="the judging pool of runs: the union of their top-k "
                                     "documents per topic",
                        description="Pool RUNs at depth k (trec_eval's ranking order), minus "
                                    "documents already judged in --judged.")
    pl.add_argument("runs", metavar="RUN", nargs="+", help="run files")
    pl.add_argument("-k", type=remote_parsers.positive_int, required=True, dest="depth",
                    metavar="DEPTH",
                    help="pool depth: each run's first DEPTH documents per topic")
    pl.add_argument("--judged", default=None, metavar="QRELS",
                    help="leave out documents these qrels already judge")
    pl.add_argument("--format", choices=("trec", "json"), default="trec",
                    help="trec: 'topic 0 docid' lines (default); json: the pool with counts")
    pl.add_argument("--profile", type=_profile, default=DEFAULT_PROFILE,
                    help="ranking profile: 9.0.8 compares scores as float32 (default)")


# the engine's local commands' parsers, in the order ``cranfield -h`` lists them
LOCAL_PARSERS = {"eval": _add_eval, "ndeval": _add_ndeval, "gdeval": _add_gdeval,
                 "compare": _add_compare, "measures": _add_measures, "pool": _add_pool}


def build_parser(commands: bool = True, only: str | None = None) -> argparse.ArgumentParser:
    """``cranfield``'s parser; with ``commands``, also the commands other packages add
    (:func:`_commands`). With ``only`` (one of :data:`ENGINE_COMMANDS`), the parser of that
    command alone (the service commands' parsers together): what ``main`` parses a command
    line naming it with, in a fraction of the time. Its usage line (printed with an error
    such as an unrecognized argument) still lists every engine command."""
    parser = argparse.ArgumentParser(prog="cranfield",
                                     description="Evaluate search runs (trec_eval-compatible).")
    parser.add_argument("--version", action="version", version=f"cranfield {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add in LOCAL_PARSERS.items():
        if only is None or only == name:
            add(sub)
    if only is None or only in remote_parsers.REMOTE_COMMANDS:
        remote_parsers.register(sub)
    if only is not None:  # the usage line argparse writes for every engine command
        sub.metavar = "{" + ",".join(ENGINE_COMMANDS) + "}"
    if commands:
        for register in _commands().values():
            register(sub)
    return parser


RECORD_KEYS = ("system", "label", "commit", "tags")


def _record_arg(text: str) -> dict:
    """``system=S,label=L[,commit=C][,tags=a;b]`` -> the API's ``record`` object."""
    record: dict = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in RECORD_KEYS or not value.strip():
            raise argparse.ArgumentTypeError(
                f"{part!r}: give KEY=VALUE pairs, KEY one of {', '.join(RECORD_KEYS)}")
        if key in record:
            raise argparse.ArgumentTypeError(f"{key} given twice")
        record[key] = ([t.strip() for t in value.split(";") if t.strip()] if key == "tags"
                       else value.strip())
    missing = [k for k in ("system", "label") if k not in record]
    if missing:
        raise argparse.ArgumentTypeError(f"needs {' and '.join(missing)}")
    return record


def _tests_arg(value: str) -> tuple[str, ...]:
    from .compare.comparison_settings import TESTS

    tests = tuple(t.strip() for t in value.split(",") if t.strip())
    unknown = [t for t in tests if t not in TESTS]
    if not tests or unknown:
        raise argparse.ArgumentTypeError(f"tests are {', '.join(TESTS)}; got {value!r}")
    return tests


def run_measures(args: argparse.Namespace) -> int:
    """``cranfield measures [--family F] [NAME]``: the registry, or what NAME stands for."""
    import json

    from .reports import measure_docs as docs

    if args.name is None:
        doc = docs.measures_document(args.family)
        if args.format == "json":
            text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        elif args.long:
            text = "\n\n".join(docs.format_measure(d) for d in doc["measures"]) + "\n"
        else:
            text = docs.format_list(doc)
        sys.stdout.write(text)
        return 0
    doc = docs.resolution_document(args.name, args.profile)
    if args.family is not None and all(d["family"] != args.family for d in doc["measures"]):
        print(f"cranfield: {args.name!r} is not a measure of family {args.family!r} "
              f"({', '.join(sorted({d['family'] for d in doc['measures']}))})", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
                     if args.format == "json" else docs.format_resolution(doc))
    return 0


def _wants_commands(argv: list[str]) -> bool:
    """Whether ARGV's command is not one of the engine's (or there is none: ``--help``)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first not in ENGINE_COMMANDS


def _on_a_service(args: argparse.Namespace) -> bool:
    """Whether ``cranfield eval`` sends its runs to a service (:mod:`cranfield.remote_eval`)."""
    from .cli_eval import evaluates_on_a_service

    return evaluates_on_a_service(args)


# commands that do no matrix product (only ``compare``'s statistics do: compare/stats.py)
NO_BLAS_COMMANDS = tuple(c for c in ENGINE_COMMANDS if c != "compare")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # the command named first (``cranfield eval ...``): only its parser is built; with any
    # other first argument (``-h``, ``--version``, an unknown or another package's command)
    # every parser is, so help and errors list them all
    command = argv[0] if argv and argv[0] in ENGINE_COMMANDS else None
    if command in NO_BLAS_COMMANDS and "numpy" not in sys.modules:
        # numpy's OpenBLAS starts a thread per core when numpy is imported (about 55 ms of a
        # 150 ms `cranfield eval`, issue #30); these commands never multiply matrices, so one
        # thread does. Set before numpy loads (it is read then), and never over the user's;
        # in a process that has numpy already (a test calling main) it would change nothing.
        from .settings import one_blas_thread

        one_blas_thread()
    parser = build_parser(commands=_wants_commands(argv), only=command)
    args = parser.parse_args(argv)
    if getattr(args, "keep_run", False):  # cranfield eval --keep-run: record.keep_run
        if not args.record:
            parser.error("--keep-run needs --record (the run is kept with the result)")
        args.record["keep_run"] = True
    if hasattr(args, "profile") and args.profile is None and not (
            args.command == "eval" and _on_a_service(args)):
        # (--real-gains: cranfield's) settled here for a local command; a service settles
        # it itself (stored qrels declaring real gains: cranfield's), so --server sends
        # only a profile the user named
        from .measures.registry import resolve_profile

        args.profile = resolve_profile(None, "real" if getattr(args, "real_gains", False)
                                       else None)
    from .errors import CranfieldError, error_report

    try:
        if args.command == "eval":
            from .cli_eval import run_eval

            return run_eval(args)
        if args.command in ("ndeval", "gdeval"):
            from .cli_files import file_bytes
            from .measures import webtrack

            qrels, run = file_bytes(args.qrels), file_bytes(args.run)
            if args.command == "ndeval":
                result = webtrack.ndeval(qrels, run, alpha=args.alpha, beta=args.beta,
                                         traditional=args.traditional,
                                         complete=args.complete, max_depth=args.depth)
            else:
                result = webtrack.gdeval(qrels, run, k=args.k, complete=args.complete)
            sys.stdout.write(result.csv())
            return 0
        if args.command == "compare":
            from .cli_compare import run_compare

            return run_compare(args)
        if args.command == "pool":
            from .cli_compare import run_pool

            return run_pool(args)
        if args.command == "measures":
            return run_measures(args)
        if getattr(args, "remote", None) is not None:  # a command on a service
            return remote_cli.main(args)
        handler = getattr(args, "handler", None)
        if handler is not None:  # a command of another package (``cranfield.commands``)
            return handler(args, parser)
    except CranfieldError as exc:  # the exit code follows the error's code (errors.py)
        print(f"cranfield: {exc}", file=sys.stderr)
        return error_report(exc).exit_code
    except BrokenPipeError:
        return 0
    parser.error(f"unknown command {args.command}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
