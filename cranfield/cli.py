"""``cranfield`` command line. ``cranfield eval`` is a drop-in for ``trec_eval``: same flags,
same output bytes by default, clearer errors.

Exit codes follow trec_eval: 1 usage or unknown measure, 2 unreadable, malformed or empty
input, 4 a docid repeated within a topic, 7 no topic with both results and judgments.
``cranfield compare --gate``: 0 when every gate passes, 3 when one fails (a significant drop
larger than allowed), 5 when none fails but one cannot be decided (the gate fails closed).
The commands that work on a service (``eval --server``, ``qrels``, ``baseline``, ``gate``,
``trend``, ``history``: :mod:`cranfield.remote_cli`) add 6, not found, and 2 for a refused
request or a service that cannot be reached.
"""

from __future__ import annotations

import argparse
import os
import sys

from . import remote_cli
from .version import __version__
from .errors import CranfieldError, InputError, error_report
from .evaluate import evaluate
from .measure_docs import FAMILIES
from .measures import DEFAULT_PROFILE, PROFILES
from .trec_format import format_csv, format_json, format_trec

# ``cranfield compare --gate``: codes no usage or input error uses (1, 2, 4, 7)
EXIT_GATE_FAILED = 3
EXIT_GATE_UNDECIDED = 5
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
                   *remote_cli.REMOTE_COMMANDS)
COMMANDS_GROUP = "cranfield.commands"

PROFILE_ALIASES = {"9.0.8": "trec_eval-9.0.8", "9": "trec_eval-9.0.8", "10": "trec_eval-10",
                   "10.0": "trec_eval-10"}


def _profile(text: str) -> str:
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
    from .gate import parse_gate

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


def build_parser(commands: bool = True) -> argparse.ArgumentParser:
    """``cranfield``'s parser; with ``commands``, also the commands other packages add
    (:func:`_commands`)."""
    parser = argparse.ArgumentParser(prog="cranfield",
                                     description="Evaluate search runs (trec_eval-compatible).")
    parser.add_argument("--version", action="version", version=f"cranfield {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="evaluate a run against qrels, like trec_eval",
                        description="Evaluate RUN against QRELS. Output is trec_eval's text by "
                                    "default.", epilog=EVAL_EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ev.add_argument("qrels", metavar="QRELS", help="qrels file: TREC text, Parquet or Arrow "
                                                   "IPC ('-' reads standard input)")
    ev.add_argument("run", metavar="RUN", help="run file: TREC text, Parquet or Arrow IPC "
                                               "('-' reads standard input)")
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
    ev.add_argument("--profile", type=_profile, default=DEFAULT_PROFILE,
                    help=f"compatibility profile: {', '.join(PROFILES)} (default %(default)s)")
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
    ev.add_argument("--qrels-id", default=None, metavar="ID",
                    help="with --server: use stored qrels ID[@VERSION]; QRELS is then ignored "
                         "(pass -)")
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
    gd = sub.add_parser("gdeval", help="nDCG@k (exponential gain) and ERR@k exactly as the TREC "
                                       "Web track's gdeval 1.3 prints them (CSV)")
    gd.add_argument("qrels", metavar="QRELS", help="graded qrels: topic 0 docno grade (<= 4)")
    gd.add_argument("run", metavar="RUN", help="run file")
    gd.add_argument("-c", action="store_true", dest="complete",
                    help="average over all topics with a relevant document")
    gd.add_argument("-k", type=int, default=20, dest="k", help="cutoff (default 20)")
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
    cmp.add_argument("--permutations", type=remote_cli.positive_int, default=10000, metavar="N",
                     help="randomization test sign vectors (default %(default)s; exact for "
                          "16 topics or fewer)")
    cmp.add_argument("--bootstrap", type=remote_cli.positive_int, default=10000, metavar="N",
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
    cmp.add_argument("--profile", type=_profile, default=DEFAULT_PROFILE,
                     help=f"compatibility profile: {', '.join(PROFILES)} (default %(default)s)")
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
    pl = sub.add_parser("pool", help="the judging pool of runs: the union of their top-k "
                                     "documents per topic",
                        description="Pool RUNs at depth k (trec_eval's ranking order), minus "
                                    "documents already judged in --judged.")
    pl.add_argument("runs", metavar="RUN", nargs="+", help="run files")
    pl.add_argument("-k", type=remote_cli.positive_int, required=True, dest="depth",
                    metavar="DEPTH",
                    help="pool depth: each run's first DEPTH documents per topic")
    pl.add_argument("--judged", default=None, metavar="QRELS",
                    help="leave out documents these qrels already judge")
    pl.add_argument("--format", choices=("trec", "json"), default="trec",
                    help="trec: 'topic 0 docid' lines (default); json: the pool with counts")
    pl.add_argument("--profile", type=_profile, default=DEFAULT_PROFILE,
                    help="ranking profile: 9.0.8 compares scores as float32 (default)")
    remote_cli.register(sub)
    if commands:
        for register in _commands().values():
            register(sub)
    return parser


def _source(path: str) -> tuple:
    """A path, or standard input's bytes for '-' (as trec_eval 10 allows)."""
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    return path, path


def _file_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    if os.path.isdir(path):
        raise InputError(path, "is a directory")
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None


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


def run_eval(args: argparse.Namespace) -> int:
    from .io import read_qrels, read_run
    from .names import needs_subtopics
    from .result_document import warnings_for

    if args.topic_metadata is not None and args.format == "jsonl":
        print("cranfield: --topic-metadata prints with --format trec, csv or json (jsonl is "
              "ir_measures' shape, which has no segments)", file=sys.stderr)
        return 1
    if args.topic_metadata == "-" and "-" in (args.qrels, args.run):
        print("cranfield: --topic-metadata - and QRELS or RUN cannot both be standard input",
              file=sys.stderr)
        return 1
    if args.rel_format != "qrels" and _rel_format_refused(args):
        return 2  # locally and with --server alike (review R1 F9)
    if args.server or ((args.record or args.qrels_id) and _environment_server()):
        if args.zscores is not None:  # the upload is a multipart form: options as text fields
            print("cranfield: -Z is evaluated locally only (the API takes options.zscores "
                  "as JSON); drop --server", file=sys.stderr)
            return 1
        return remote_cli.run_eval(args)  # --topic-metadata: read here, sent as its text
    if args.record:
        print("cranfield: --record needs --server (results are kept by the service)",
              file=sys.stderr)
        return 2
    if args.qrels_id:
        print("cranfield: --qrels-id needs --server (qrels are stored by the service)",
              file=sys.stderr)
        return 1

    run_source, run_name = _source(args.run)
    qrels_source, qrels_name = _source(args.qrels)
    if args.rel_format != "qrels":
        return _run_eval_rel_format(args, run_source, run_name, qrels_source, qrels_name)
    try:
        run = read_run(run_source, name=run_name)
        # diversity measures read subtopic qrels, where a docid appears once per subtopic
        qrels = read_qrels(qrels_source, name=qrels_name,
                           diversity=needs_subtopics(args.measures, args.profile))
    except InputError:
        _raise_if_swapped(qrels_source, qrels_name, run_source)
        raise
    ev = evaluate(qrels, run, args.measures, profile=args.profile,
                  relevance_level=args.rel_level, judged_only=args.judged_only,
                  depth=args.depth, complete_topics=args.complete,
                  collection_size=args.collection_size, aggregation=args.aggregation,
                  zscores=_zscores(args.zscores),
                  topic_metadata=_topic_metadata(args.topic_metadata))
    if args.format == "json":  # the API's evaluation document; warnings are in it
        text = format_json(ev, _sha256(run_source, run), _sha256(qrels_source, qrels),
                           per_topic=args.per_topic, curves=args.curves, interface="cli")
    else:
        if args.format == "csv":
            text = format_csv(ev, per_topic=args.per_topic, summary=not args.no_summary)
        elif args.format == "jsonl":
            from .jsonl import format_jsonl

            text = format_jsonl(ev, per_topic=args.per_topic, summary=not args.no_summary)
        else:
            text = format_trec(ev, per_topic=args.per_topic, summary=not args.no_summary)
        if not args.no_warnings:
            _print_warnings(warnings_for(ev, "cli"))
    sys.stdout.write(text)
    return 0


def _rel_format_refused(args) -> bool:
    """Whether ``-R`` (qrels_jg, prefs, qrels_prefs) is asked with options it does not take:
    said on stderr (the caller exits 2), before any input is read or sent to a server."""
    refused = [flag for flag, on in (("-J", args.judged_only
                                      and args.rel_format != "qrels_jg"),
                                     ("-Z", args.zscores is not None),
                                     ("--topic-metadata", args.topic_metadata is not None),
                                     ("-N", bool(args.collection_size)),
                                     ("--micro", args.aggregation == "micro"),
                                     ("--format " + args.format, args.format != "trec"),
                                     ("--curves", args.curves),
                                     ("-l", args.rel_level != 1
                                      and args.rel_format != "qrels_jg")) if on]
    if refused:
        print(f"cranfield: -R {args.rel_format} does not take {', '.join(refused)}",
              file=sys.stderr)
    return bool(refused)


def _run_eval_rel_format(args, run_source, run_name, qrels_source, qrels_name) -> int:
    """-R qrels_jg / prefs / qrels_prefs (cranfield.prefs): judgment groups and preference
    judgments, with their own measures and trec_eval's text output."""
    from .io import read_run
    from .prefs import evaluate_jg, evaluate_prefs, format_jg, read_prefs, read_qrels_jg

    if _rel_format_refused(args):
        return 2
    data = _file_bytes(args.qrels) if isinstance(qrels_source, str) else qrels_source
    run = read_run(run_source, name=run_name)
    if args.rel_format == "qrels_jg":
        ev = evaluate_jg(read_qrels_jg(data, name=qrels_name), run, args.measures,
                         relevance_level=args.rel_level, depth=args.depth,
                         profile=args.profile, complete_topics=args.complete,
                         judged_only=args.judged_only)
    else:  # prefs, qrels_prefs: -l does not apply (rel_level > 0 is relevant, as trec_eval)
        prefs = read_prefs(data, name=qrels_name, qrels=args.rel_format == "qrels_prefs")
        ev = evaluate_prefs(prefs, run, args.measures, depth=args.depth,
                            profile=args.profile, complete_topics=args.complete,
                            qrels=args.rel_format == "qrels_prefs")
    sys.stdout.write(format_jg(ev, per_topic=args.per_topic, summary=not args.no_summary))
    return 0


def _zscores(path: str | None):
    """-Z FILE read once (cranfield.zscores), '-' from standard input."""
    if path is None:
        return None
    from .zscores import read_zscores

    return _side_file(path, read_zscores)


def _topic_metadata(path: str | None):
    """--topic-metadata FILE read once (cranfield.segments), '-' from standard input."""
    if path is None:
        return None
    from .segments import read_topic_metadata

    return _side_file(path, read_topic_metadata)


def _side_file(path: str, reader):
    """A per-topic side file (-Z, --topic-metadata) read once by ``reader``: '-' from
    standard input (named <stdin>), else the file named (as a Path: never read as text)."""
    from pathlib import Path

    if path == "-":
        return reader(sys.stdin.buffer.read(), name="<stdin>")
    return reader(Path(path), name=path)


def _environment_server() -> str | None:
    from .settings import CliEnvironment

    return CliEnvironment.from_environ().server


def _raise_if_swapped(qrels_source, qrels_name: str, run_source) -> None:
    """After a file could not be read: when QRELS's lines have a run's fields (6 or more) and
    RUN's a qrels file's (4), the two were given the wrong way round; say so."""
    from .io import first_line_fields

    qrels_fields = first_line_fields(qrels_source)
    if qrels_fields is not None and qrels_fields >= 6 and first_line_fields(run_source) == 4:
        raise InputError(qrels_name, "looks like a run file; trec_eval takes QRELS first "
                                     "(cranfield eval QRELS RUN)") from None


def _sha256(source, read=None) -> str:
    """The SHA-256 of a file's bytes (or of standard input's), as the API digests TREC text;
    of a Parquet or Arrow file's columns (``read``: the run or qrels read from it), as the
    API digests such an upload (by content: the same as the same data sent as a mapping)."""
    import hashlib

    if read is not None and _is_table_file(source):
        from .json_body import columns_sha256

        return columns_sha256(read)
    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest()
    digest = hashlib.sha256()
    with open(source, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_table_file(source) -> bool:
    """Whether a file (a path, or standard input's bytes) is a Parquet or Arrow IPC file, by
    its magic bytes, as the readers tell it (:func:`cranfield.columnar.sniff`)."""
    from .columnar import sniff

    if isinstance(source, bytes):
        return sniff(source) is not None
    with open(source, "rb") as fh:
        head = fh.read(12)
        if not head.startswith((b"ARROW1", b"\xff\xff\xff\xff", b"PAR1")):
            return False
        fh.seek(-4, os.SEEK_END)
        return sniff(head + fh.read(4)) is not None


def _print_warnings(warnings: list[dict]) -> None:
    """The input lint on standard error (standard output stays trec_eval's text), one line
    each, options named by their flags."""
    for w in warnings:
        topics = w.get("topics") or []
        shown = f" (topics: {', '.join(topics[:5])}{', …' if len(topics) > 5 else ''})" \
            if topics else ""
        print(f"cranfield: warning: {w['message']}{shown}", file=sys.stderr)


def _tests_arg(value: str) -> tuple[str, ...]:
    from .compare import TESTS

    tests = tuple(t.strip() for t in value.split(",") if t.strip())
    unknown = [t for t in tests if t not in TESTS]
    if not tests or unknown:
        raise argparse.ArgumentTypeError(f"tests are {', '.join(TESTS)}; got {value!r}")
    return tests


def _run_names(paths: list[str], names: str | None) -> list[str]:
    """--names, else :func:`cranfield.compare.run_names` of the paths (the API names
    uploaded files by the same rule)."""
    from .compare import run_names

    if names is not None:
        given = [n.strip() for n in names.split(",")]
        if len(given) != len(paths) or not all(given) or len(set(given)) != len(given):
            raise InputError("--names", f"needs {len(paths)} distinct non-empty names, got "
                             f"{names!r}")
        return given
    return run_names(paths)


def run_compare(args: argparse.Namespace) -> int:
    """Exit 0; with --gate ``EXIT_GATE_FAILED`` (3) when a gate fails and
    ``EXIT_GATE_UNDECIDED`` (5) when none fails but one cannot be decided; usage errors 1,
    input errors as ``eval``."""
    import json

    from .compare import compare
    from .comparison_text import format_text

    if len(args.runs) < 2:
        print("cranfield: compare needs at least two runs", file=sys.stderr)
        return 1
    if args.format in ("junit", "markdown") and not args.gate:
        print(f"cranfield: --format {args.format} renders a gate's verdict: give --gate",
              file=sys.stderr)
        return 1
    try:
        names = _run_names(args.runs, args.names)
    except InputError as exc:
        print(f"cranfield: {exc.reason}", file=sys.stderr)
        return 1
    if args.baseline is not None and args.baseline not in names:
        print(f"cranfield: --baseline {args.baseline!r} is not one of the runs "
              f"({', '.join(names)})", file=sys.stderr)
        return 1
    runs = {name: _source(path)[0] for name, path in zip(names, args.runs, strict=True)}
    tests = list(args.tests or ("t", "randomization", "bootstrap"))
    if args.wilcoxon and "wilcoxon" not in tests:
        tests.append("wilcoxon")
    doc = compare(_source(args.qrels)[0], runs, args.measures, baseline=args.baseline,
                  tests=tuple(tests), correction=args.correction, alpha=args.alpha,
                  n_permutations=args.permutations, n_samples=args.bootstrap, seed=args.seed,
                  gate=args.gate or None, profile=args.profile,
                  relevance_level=args.rel_level, complete_topics=args.complete,
                  interface="cli", topic_metadata=_topic_metadata(args.topic_metadata))
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif args.format == "html":
        from .html_report import render_comparison

        sys.stdout.write(render_comparison(doc, title="Cranfield comparison: "
                                           + " vs ".join(names)))
    elif args.format in ("junit", "markdown"):
        from . import verdicts

        sys.stdout.write(verdicts.RENDERERS[args.format](doc))
    else:
        sys.stdout.write(format_text(doc))
    verdict = doc.get("gate", {}).get("verdict", "pass")
    return {"pass": 0, "fail": EXIT_GATE_FAILED}.get(verdict, EXIT_GATE_UNDECIDED)


def run_measures(args: argparse.Namespace) -> int:
    """``cranfield measures [--family F] [NAME]``: the registry, or what NAME stands for."""
    import json

    from . import measure_docs as docs

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


def run_pool(args: argparse.Namespace) -> int:
    import json

    from .pooling import format_pool, pool

    names = _run_names(args.runs, None)
    runs = {name: _source(path)[0] for name, path in zip(names, args.runs, strict=True)}
    result = pool(runs, args.depth, judged=args.judged,
                  float32_scores=PROFILES[args.profile].float32_scores)
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(format_pool(result))
    return 0


def _wants_commands(argv: list[str]) -> bool:
    """Whether ARGV's command is not one of the engine's (or there is none: ``--help``)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first not in ENGINE_COMMANDS


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(commands=_wants_commands(argv))
    args = parser.parse_args(argv)
    try:
        if args.command == "eval":
            return run_eval(args)
        if args.command in ("ndeval", "gdeval"):
            from . import webtrack

            qrels, run = _file_bytes(args.qrels), _file_bytes(args.run)
            if args.command == "ndeval":
                result = webtrack.ndeval(qrels, run, alpha=args.alpha, beta=args.beta,
                                         traditional=args.traditional,
                                         complete=args.complete, max_depth=args.depth)
            else:
                result = webtrack.gdeval(qrels, run, k=args.k, complete=args.complete)
            sys.stdout.write(result.csv())
            return 0
        if args.command == "compare":
            return run_compare(args)
        if args.command == "pool":
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
