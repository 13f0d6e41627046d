"""The parsers of ``cranfield``'s commands on a service (``qrels``, ``baseline``, ``gate``,
``trend``, ``history``: :func:`register`) and their argument types (``positive_int``, a
``--gate``'s text). Room: the top (the command line)."""

from __future__ import annotations

import argparse

from .remote_cli import EXIT_CODES, Handler, add_server_options


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


class GateText(str):
    """A ``--gate`` as given (sent to the service as is), checked by the engine's grammar."""

    text: str
    measure: str


def _gate_text(text: str) -> GateText:
    from .compare.gate import parse_gate

    try:
        parsed = parse_gate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    out = GateText(text)
    out.text, out.measure = text.strip(), parsed.measure
    return out


def _sub(sub, name: str, handler: Handler | None, help_: str, description: str, **kw
         ) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_, description=description, epilog=EXIT_CODES,
                            formatter_class=argparse.RawDescriptionHelpFormatter, **kw)
    if handler is not None:
        parser.set_defaults(remote=handler)
    return parser


def register(sub) -> None:
    """Add ``qrels``, ``baseline``, ``gate``, ``trend`` and ``history`` to ``cranfield``'s
    subparsers. Their handlers' module loads here: ``cranfield``'s other commands build no
    service command's parser (:func:`cranfield.cli.build_parser`), so never load it."""
    from .remote_nightly import (
        run_baseline,
        run_gate,
        run_history,
        run_qrels_list,
        run_qrels_put,
        run_trend,
    )

    qr = _sub(sub, "qrels", None, "stored qrels on a Cranfield service: put, list, diff, "
              "agreement, consensus",
              "Store qrels on the service (each version immutable, named by its content), "
              "list them, or compare two versions (diff: also two files, here).")
    qsub = qr.add_subparsers(dest="qrels_command", required=True)
    put = _sub(qsub, "put", run_qrels_put, "store FILE as qrels ID (prints ID@VERSION)",
               "Store FILE's judgments as qrels ID. The same judgments again are the same "
               "version (unchanged, exit 0). Prints ID@VERSION.")
    put.add_argument("qrels_id", metavar="ID")
    put.add_argument("file", metavar="FILE", help="TREC qrels ('-' reads standard input)")
    put.add_argument("--diversity", action="store_true",
                     help="subtopic qrels (ndeval's: topic subtopic docid grade)")
    put.add_argument("-R", "--qrels-format", dest="qrels_format", default="qrels",
                     choices=("qrels", "qrels_jg", "prefs", "qrels_prefs"),
                     help="the kind of judgments, as trec_eval's -R (qrels_jg: judgment "
                     "groups; prefs, qrels_prefs: preferences): stored as that kind, which "
                     "eval --qrels-id then reads")
    put.add_argument("--if-match", default=None, metavar="VERSION",
                     help="store only if ID's latest version is still VERSION (else exit 2)")
    put.add_argument("--judges", default=None, metavar="JUDGES.json",
                     help="-R qrels_jg: each judge's provenance, a JSON object {judge: "
                     "{kind, model, prompt_digest, ...}} kept in the version's metadata")
    put.add_argument("--pool-depth", type=positive_int, default=None, metavar="N",
                     help="the depth of the pool these judgments cover (cranfield pool -k), "
                     "kept in the version's metadata and shown by qrels diff")
    put.add_argument("--real-gains", action="store_true",
                     help="the grades are real-valued gains (LLM probabilities, a mean "
                     "consensus), stored declaring gains real (issue #31)")
    put.add_argument("--format", choices=("text", "json"), default="text")
    add_server_options(put)
    ls = _sub(qsub, "list", run_qrels_list, "the stored qrels", "List the stored qrels: id, "
              "latest version, topics, judgments.")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    add_server_options(ls)
    from .cli_qrels_diff import add_parser as add_qrels_diff

    add_qrels_diff(qsub, _sub)
    from .cli_judges import add_parsers as add_judges  # agreement, consensus (issue #31)

    add_judges(qsub, _sub)
    from .cli_history_ops import add_parsers as add_history_ops  # stability, rescore (#31)

    add_history_ops(sub, _sub)

    bl = _sub(sub, "baseline", run_baseline, "pin or show a system's accepted baseline",
              "With RESULT_ID or --latest, pin that recorded result (or SYSTEM's newest) as "
              "SYSTEM's accepted baseline; with neither, show the pinned one (exit 6 if "
              "none). Prints the result: id, label, commit, when recorded.")
    bl.add_argument("system", metavar="SYSTEM")
    bl.add_argument("result_id", nargs="?", default=None, metavar="RESULT_ID")
    bl.add_argument("--latest", action="store_true", help="pin SYSTEM's newest result")
    bl.add_argument("--format", choices=("table", "json"), default="table")
    add_server_options(bl)

    gt = _sub(sub, "gate", run_gate, "evaluate and record a run, gate it against the pinned "
              "baseline (CI's nightly step)",
              "Evaluate RUN against stored qrels (one upload), record it as a result of "
              "SYSTEM (label: --label, else ci-$GITHUB_RUN_NUMBER or ci-$CI_PIPELINE_IID, "
              "else the UTC time; commit: --commit, else $GITHUB_SHA or $CI_COMMIT_SHA), "
              "then gate it against SYSTEM's pinned baseline on the service; the verdict is "
              "kept with the result. With GITHUB_ACTIONS=true, also ::error / ::warning "
              "annotations on standard output and the Markdown appended to "
              "$GITHUB_STEP_SUMMARY.")
    gt.add_argument("system", metavar="SYSTEM")
    gt.add_argument("run", metavar="RUN", help="run file ('-' reads standard input)")
    gt.add_argument("--qrels-id", required=True, metavar="ID[@VERSION]",
                    help="stored qrels (cranfield qrels put)")
    gt.add_argument("-m", action="append", dest="measures", metavar="MEASURE",
                    help="measure to record (repeatable; the gated ones are added)")
    gt.add_argument("--gate", action="append", type=_gate_text, required=True,
                    metavar="MEASURE:MAX_DROP[%][@ALPHA]",
                    help="fail (exit 3) when MEASURE drops below the baseline by more than "
                         "MAX_DROP (absolute, or %% of the baseline) significantly at ALPHA "
                         "(default 0.05); repeatable")
    gt.add_argument("--label", default=None)
    gt.add_argument("--commit", default=None, metavar="SHA")
    gt.add_argument("--tags", default=None, metavar="a;b")
    gt.add_argument("--format", choices=("text", "json", "junit", "markdown"), default="text",
                    help="how the verdict is printed on standard output")
    gt.add_argument("--junit", default=None, metavar="FILE",
                    help="also write the verdict as JUnit XML to FILE")
    gt.add_argument("--markdown", default=None, metavar="FILE",
                    help="also write the verdict as Markdown to FILE")
    gt.add_argument("--pin-if-none", action="store_true",
                    help="with no baseline pinned, pin this result (exit 0) instead of exit 6")
    add_server_options(gt)

    tr = _sub(sub, "trend", run_trend, "a measure's mean and CI over a system's recorded results",
              "SYSTEM's recorded results, oldest first: MEASURE's mean and 95% CI, topics, "
              "latest gate verdict, the pinned baseline marked. -o FILE saves the trend page "
              "(HTML).")
    tr.add_argument("system", metavar="SYSTEM")
    tr.add_argument("--measure", required=True, metavar="M",
                    help="a measure in any spelling (ndcg_cut.10, nDCG@10, ndcg_cut_10)")
    tr.add_argument("--format", choices=("table", "json", "html"), default="table")
    tr.add_argument("-o", dest="output", default=None, metavar="FILE",
                    help="save the trend page (the service's text/html) to FILE")
    _window_options(tr, "the newest N results")
    add_server_options(tr)

    hs = _sub(sub, "history", run_history, "a system's recorded results on a Cranfield service, "
              "newest first, or one measure's trend",
              "List SYSTEM's recorded results (cranfield eval --server ... --record "
              "system=SYSTEM,...) on the service, or with --measure the measure's mean and "
              "95% CI per result, oldest first.")
    hs.add_argument("system", metavar="SYSTEM")
    hs.add_argument("--measure", default=None, metavar="M",
                    help="a measure in any spelling (ndcg_cut.10, nDCG@10, ndcg_cut_10)")
    _window_options(hs, "the newest this many (default: 20 results; with --measure, as many "
                        "points as the service gives)")
    hs.add_argument("--format", choices=("table", "json"), default="table")
    add_server_options(hs)


def _window_options(parser: argparse.ArgumentParser, limit_help: str) -> None:
    """--limit, --since and --until: which recorded results a listing covers."""
    parser.add_argument("--limit", type=positive_int, default=None, help=limit_help)
    parser.add_argument("--since", default=None, metavar="WHEN",
                        help="recorded at or after (ISO 8601: 2026-11-01, "
                             "2026-11-01T06:00:00Z)")
    parser.add_argument("--until", default=None, metavar="WHEN", help="recorded at or before")


REMOTE_COMMANDS = ("qrels", "baseline", "gate", "trend", "history", "stability", "rescore")
