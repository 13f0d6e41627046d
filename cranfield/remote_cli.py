"""``cranfield``'s commands that work on a Cranfield service, all on
:class:`cranfield.client.Client`: ``eval --server``, ``qrels put|list``, ``baseline``,
``gate``, ``trend`` and ``history``. The nightly job needs nothing else.

Every one takes ``--server URL`` (default ``$CRANFIELD_SERVER``) and ``--api-key KEY``
(default ``$CRANFIELD_API_KEY``) and exits with :data:`EXIT_CODES`' codes. Importing this
module costs argparse only: the client, tqdm and the renderers are imported when a command
runs, so ``cranfield eval --server`` starts without the engine's numerics.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

EXIT_OK = 0
EXIT_USAGE = 1
EXIT_INPUT = 2
EXIT_GATE_FAILED = 3
EXIT_DUPLICATE = 4
EXIT_GATE_UNDECIDED = 5
EXIT_NOT_FOUND = 6
EXIT_NO_OVERLAP = 7

EXIT_CODES = """\
exit codes:
  0  done (a gate: passed)
  1  usage error (no --server and no CRANFIELD_SERVER), or an unknown measure
  2  unreadable or malformed input, the service refused the request (a 4xx other than
     404), or the service cannot be reached
  3  the gate failed: a significant drop larger than allowed
  4  a docid repeated within a topic
  5  no check failed, but one could not be decided (the gate fails closed)
  6  not found: no such system, result or qrels, or no baseline pinned
  7  no topic with both results and judgments
"""

SERVER_HELP = "the Cranfield service (default: $CRANFIELD_SERVER)"
API_KEY_HELP = "API key, sent as a Bearer token (default: $CRANFIELD_API_KEY)"

# problem types (the last segment of a problem's "type") that say "there is no such thing"
NOT_FOUND_KINDS = frozenset({"not-found", "unknown-qrels", "unknown-result", "no-baseline"})

Handler = Callable[[argparse.Namespace], int]


class UsageError(Exception):
    """A command line the command cannot run (exit 1)."""


# -- shared plumbing ----------------------------------------------------------------------------

def add_server_options(parser: argparse.ArgumentParser, *, required_help: str = SERVER_HELP
                       ) -> None:
    parser.add_argument("--server", default=None, metavar="URL", help=required_help)
    parser.add_argument("--api-key", default=None, metavar="KEY", help=API_KEY_HELP)


def _environment():
    from .settings import CliEnvironment

    return CliEnvironment.from_environ()


def client_for(args: argparse.Namespace):
    """The :class:`~cranfield.client.Client` of ``--server``/``--api-key`` (or their
    environment variables); UsageError when no server is named."""
    from .client import Client

    env = _environment()
    server = args.server or env.server
    if not server:
        raise UsageError("give --server URL or set CRANFIELD_SERVER")
    args.server = server
    return Client(server, api_key=getattr(args, "api_key", None) or env.api_key)


def exit_code(exc: Exception) -> int:
    """The exit code of an error from the client: an engine error's own (the problem's
    ``code``: 1 unknown measure, 4 repeated docid, 7 no overlap, 2 bad input), 6 for
    anything not found, 2 for any other refusal or a service that cannot be reached."""
    from .client import ApiError
    from .errors import ERROR_CODES

    if not isinstance(exc, ApiError):
        return EXIT_INPUT
    code = exc.problem.get("code")
    if code in ERROR_CODES and code != "invalid-request":
        return ERROR_CODES[code][2]
    if exc.status == 404 or exc.kind in NOT_FOUND_KINDS:
        return EXIT_NOT_FOUND
    if exc.kind == "unknown-measure":
        return EXIT_USAGE
    return EXIT_INPUT


def run_command(handler: Handler, args: argparse.Namespace) -> int:
    """Run a server command: its errors said on standard error (one line, ``cranfield: …``)
    and turned into its exit code."""
    from .client import ApiError
    from .errors import CranfieldError, error_report

    try:
        return handler(args)
    except UsageError as exc:
        print(f"cranfield: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as exc:
        print(f"cranfield: {exc}", file=sys.stderr)
        return exit_code(exc)
    except CranfieldError as exc:  # a file the client could not read
        print(f"cranfield: {exc}", file=sys.stderr)
        return error_report(exc).exit_code
    except TimeoutError as exc:
        print(f"cranfield: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:
        if exc.filename is not None:  # a local file (a report it writes), not the service
            print(f"cranfield: {exc.filename}: {exc.strerror}", file=sys.stderr)
            return EXIT_INPUT
        reason = getattr(exc, "reason", None) or exc
        print(f"cranfield: cannot reach {args.server}: {reason}", file=sys.stderr)
        return EXIT_INPUT


def _dump(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _table(head: tuple, rows: list[tuple]) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=False)]
    for row in (head, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _num(value) -> str:
    return "-" if value is None else f"{value:.4f}"


def _refuse_swapped_files(qrels_name: str, qrels: str | None, run: str) -> None:
    """QRELS holding a run's lines and RUN qrels' (their first lines): the local command's
    message (the client's would name its Python call), before anything is sent."""
    from .errors import InputError
    from .swapped import QRELS, RUN, kind_of

    if qrels is None:
        return
    q, r = kind_of(qrels), kind_of(run)
    if q and r and (q[0], r[0]) == (RUN, QRELS):
        raise InputError(qrels_name, "looks like a run file; trec_eval takes QRELS first "
                                     "(cranfield eval QRELS RUN)")


def _file_or_stdin(path: str, stack: ExitStack) -> str:
    """A path to read; ``-`` is standard input copied to a temporary file first (in pieces:
    the upload is then streamed from disk like any file)."""
    if path != "-":
        return path
    tmp = stack.enter_context(tempfile.NamedTemporaryFile(prefix="cranfield-stdin-"))
    shutil.copyfileobj(sys.stdin.buffer, tmp, 1 << 20)
    tmp.flush()
    return tmp.name


class ProgressBar:
    """A queued job's progress on standard error (tqdm), while it is queued or running: its
    stage, topics done of total and shards done of total as the service reports them. Off
    (never imports tqdm) when standard error is not a terminal or ``enabled`` is false."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.bar = None

    def __call__(self, job: dict) -> None:
        if not self.enabled:
            return
        progress = job.get("progress") or {}
        status = job.get("status")
        if self.bar is None:
            if status not in ("queued", "started"):
                return
            from tqdm import tqdm

            self.bar = tqdm(total=None, unit=" topics", file=sys.stderr, leave=False,
                            dynamic_ncols=True, desc=f"job {job.get('id', '')[:8]}")
        # topics done of total once the run's topics are known; before that, a sharded
        # job's shards done of total (a shard's topics are known when it starts)
        total, done, unit = progress.get("topics_total"), progress.get("topics_done"), \
            " topics"
        if total is None and progress.get("shards_total"):
            total, done, unit = progress["shards_total"], progress.get("shards_done"), \
                " shards"
        self.bar.unit = unit
        if self.bar.total != total:
            self.bar.total = total
        if done is not None:
            self.bar.n = done
        stage = progress.get("stage") or status
        post = {"status": stage}
        if progress.get("shards_total") and unit == " topics":
            post["shards"] = f"{progress.get('shards_done', 0)}/{progress['shards_total']}"
        if progress.get("runs_total"):
            post["runs"] = f"{progress.get('runs_done', 0)}/{progress['runs_total']}"
        self.bar.set_postfix(post, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _recorded_line(recorded: dict | None) -> None:
    if recorded:
        print(f"cranfield: recorded as {recorded.get('id')} ({recorded.get('system')}, "
              f"{recorded.get('label')})", file=sys.stderr)


# -- cranfield eval --server ---------------------------------------------------------------------

def run_eval(args: argparse.Namespace) -> int:
    """``cranfield eval --server``: the run sent once (streamed from disk), what the service
    answers printed (trec_eval's text, CSV or JSON), a queued job waited for with a progress
    bar and fetched in the format asked."""
    return run_command(_eval, args)


def _eval(args: argparse.Namespace) -> int:
    from .result_document import warnings_for_interface

    client = client_for(args)
    options = {"profile": args.profile, "relevance_level": args.rel_level,
               "judged_only": args.judged_only, "depth": args.depth,
               "complete_topics": args.complete, "collection_size": args.collection_size,
               "aggregation": args.aggregation}
    if getattr(args, "rel_format", "qrels") != "qrels":  # -R: the service reads it so too
        options["qrels_format"] = args.rel_format
    if getattr(args, "topic_metadata", None) is not None:  # read here: errors name the line
        from pathlib import Path

        from .segments import read_topic_metadata

        options["topic_metadata"] = read_topic_metadata(
            sys.stdin.buffer.read() if args.topic_metadata == "-" else Path(args.topic_metadata),
            name="<stdin>" if args.topic_metadata == "-" else args.topic_metadata)
    # jsonl: the evaluation document, printed as the local command prints it
    accept = {"trec": "text/plain", "csv": "text/csv", "json": "application/json",
              "jsonl": "application/json"}[args.format]
    bar = ProgressBar()
    with ExitStack() as stack:
        if args.run == "-" and args.qrels == "-" and not args.qrels_id:
            raise UsageError("QRELS and RUN cannot both be standard input")
        run = _file_or_stdin(args.run, stack)
        qrels = None if args.qrels_id else _file_or_stdin(args.qrels, stack)
        _refuse_swapped_files(args.qrels, qrels, run)
        try:
            out = client.evaluate(qrels, run, qrels_id=args.qrels_id, measures=args.measures,
                                  options=options, per_topic=args.per_topic, accept=accept,
                                  record=args.record, progress=bar)
        finally:
            bar.close()
    if isinstance(out, dict):
        _recorded_line(out.get("recorded") if isinstance(out.get("recorded"), dict) else None)
        if args.format == "jsonl":
            from .jsonl import format_jsonl
            from .trec_format import document_evaluation

            sys.stdout.write(format_jsonl(document_evaluation(out), per_topic=args.per_topic,
                                          summary=not args.no_summary))
            return EXIT_OK
        if isinstance(out.get("warnings"), list):
            out["warnings"] = warnings_for_interface(out["warnings"], "cli")
        _dump(out)
        return EXIT_OK
    _recorded_line(getattr(out, "recorded", None))
    text = str(out)
    if args.format == "trec" and args.no_summary:
        text = "".join(line for line in text.splitlines(keepends=True) if "\tall\t" not in line)
    sys.stdout.write(text)
    return EXIT_OK


# -- cranfield qrels put|list --------------------------------------------------------------------

def _qrels_put(args: argparse.Namespace) -> int:
    client = client_for(args)
    with ExitStack() as stack:
        meta = client.put_qrels(args.qrels_id, _file_or_stdin(args.file, stack),
                                diversity=args.diversity, if_match=args.if_match,
                                qrels_format=args.qrels_format)
    if args.format == "json":
        _dump(meta)
    else:
        print(f"{meta.get('id', args.qrels_id)}@{meta['version']}")
    return EXIT_OK


def _when(value) -> str:
    """A stored time (ISO 8601 text, or seconds since the epoch) as ``YYYY-MM-DDTHH:MM:SS``."""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return str(value or "")[:19]


def _qrels_list(args: argparse.Namespace) -> int:
    items = client_for(args).all_qrels()
    if args.format == "json":
        _dump({"items": items, "total": len(items)})
        return EXIT_OK
    _table(("id", "version", "topics", "judgments", "created"),
           [(q.get("id", ""), q.get("version", ""), q.get("topics", ""),
             q.get("judgments", ""), _when(q.get("created_at", q.get("created"))))
            for q in items])
    return EXIT_OK


# -- cranfield baseline --------------------------------------------------------------------------

def _baseline(args: argparse.Namespace) -> int:
    client = client_for(args)
    if args.result_id is not None and args.latest:
        raise UsageError("give RESULT_ID or --latest, not both")
    if args.result_id is not None or args.latest:
        summary = client.pin_baseline(args.system, args.result_id, latest=args.latest)
        print(f"cranfield: pinned {summary['id']} as {args.system}'s baseline",
              file=sys.stderr)
    else:
        summary = client.baseline(args.system)
    if args.format == "json":
        _dump(summary)
    else:
        _table(("system", "id", "label", "commit", "recorded"),
               [(summary.get("system", args.system), summary["id"], summary.get("label", ""),
                 summary.get("commit") or "", _when(summary.get("created_at")))])
    return EXIT_OK


# -- cranfield gate ------------------------------------------------------------------------------

def _label(args: argparse.Namespace, env) -> str:
    if args.label:
        return args.label
    if env.run_number:
        return f"ci-{env.run_number}"
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gate(args: argparse.Namespace) -> int:
    from . import verdicts

    client = client_for(args)
    env = _environment()
    label = _label(args, env)
    record = {"system": args.system, "label": label}
    commit = args.commit or env.commit
    if commit:
        record["commit"] = commit
    if args.tags:
        record["tags"] = [t.strip() for t in args.tags.split(";") if t.strip()]
    gates = [g.text for g in args.gate]
    measures = list(dict.fromkeys((args.measures or []) + [g.measure for g in args.gate]))
    bar = ProgressBar()
    with ExitStack() as stack:
        run = _file_or_stdin(args.run, stack)
        try:
            doc = client.evaluate(run=run, qrels_id=args.qrels_id, measures=measures,
                                  per_topic=False, record=record, progress=bar)
        finally:
            bar.close()
    recorded = doc["recorded"]
    _recorded_line(recorded)
    try:
        pinned = client.baseline(args.system)
    except Exception as exc:  # noqa: BLE001 - only "none pinned" is handled here
        from .client import ApiError

        if not (isinstance(exc, ApiError) and exit_code(exc) == EXIT_NOT_FOUND):
            raise
        if args.pin_if_none:
            client.pin_baseline(args.system, recorded["id"])
            print(f"cranfield: {args.system} had no baseline pinned: pinned {recorded['id']} "
                  f"({label}); nothing to gate against tonight", file=sys.stderr)
            # the reports are written all the same: a CI step that reads them finds them
            write_verdicts(verdicts.pinned_document(args.system, dict(recorded, label=label),
                                                    gates),
                           args, system=args.system, github=False,
                           step_summary=env.step_summary if env.github_actions else None,
                           pinned=True)
            return EXIT_OK
        print(f"cranfield: {args.system} has no baseline pinned, so nothing was gated; the "
              f"result is recorded. Pin it with: cranfield baseline {args.system} "
              f"{recorded['id']}", file=sys.stderr)
        return EXIT_NOT_FOUND
    name = f"{args.system}@{label}"
    if name == f"{pinned.get('system', args.system)}@{pinned.get('label')}":
        name = f"{name} ({recorded['id'][:8]})"
    bar = ProgressBar()
    try:
        comparison = client.gate(args.system, recorded["id"], measures, gates, name=name,
                                 progress=bar)
    finally:
        bar.close()
    write_verdicts(comparison, args, system=args.system, github=env.github_actions,
                   step_summary=env.step_summary if env.github_actions else None)
    return {"pass": EXIT_OK, "fail": EXIT_GATE_FAILED}.get(verdicts.verdict(comparison),
                                                          EXIT_GATE_UNDECIDED)


def write_verdicts(doc: dict, args: argparse.Namespace, *, system: str | None,
                   github: bool = False, step_summary: str | None = None,
                   pinned: bool = False) -> None:
    """A gated comparison's verdict: ``args.format`` on standard output (text, json, junit,
    markdown), ``--junit FILE`` / ``--markdown FILE`` written as well; on GitHub Actions the
    workflow commands on standard output and the Markdown appended to the step summary
    (``step_summary``). ``pinned``: ``doc`` is :func:`verdicts.pinned_document`, a first
    night's report."""
    from . import verdicts

    junit, markdown, text = ((verdicts.pinned_junit, verdicts.pinned_markdown,
                              verdicts.pinned_text) if pinned else
                             (verdicts.junit, verdicts.markdown, verdicts.text))
    fmt = args.format
    if fmt == "json":
        _dump(doc)
    elif fmt in ("junit", "markdown"):
        sys.stdout.write((junit if fmt == "junit" else markdown)(doc, system))
    else:
        sys.stdout.write(text(doc))
    for path, render in ((getattr(args, "junit", None), junit),
                         (getattr(args, "markdown", None), markdown)):
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(render(doc, system))
    if github and not pinned:
        sys.stdout.write(verdicts.github_annotations(doc))
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as fh:
            fh.write(markdown(doc, system) + "\n")


# -- cranfield trend / history -------------------------------------------------------------------

def _trend(args: argparse.Namespace) -> int:
    client = client_for(args)
    window = {"since": args.since, "until": args.until, "limit": args.limit}
    if args.output or args.format == "html":
        page = client.trend(args.system, args.measure, accept="text/html", **window)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(page)
            print(f"cranfield: trend page saved to {args.output}", file=sys.stderr)
        if args.format == "html":
            if not args.output:
                sys.stdout.write(page)
            return EXIT_OK
    doc = client.trend(args.system, args.measure, **window)
    if args.format == "json":
        _dump(doc)
    else:
        _trend_table(doc, args.measure)
    return EXIT_OK


def _trend_table(doc: dict, measure: str) -> None:
    rows = [(p["created_at"][:19], p["label"], _num(p.get("mean")),
             f"[{_num(p.get('ci_low'))}, {_num(p.get('ci_high'))}]", str(p.get("n_topics", "")),
             (p.get("gate") or {}).get("verdict", "-"),
             "*" if p["id"] == doc.get("baseline") else "", p["id"])
            for p in doc["points"]]
    _table(("recorded", "label", doc.get("measure") or measure, "95% CI", "topics", "gate",
            "baseline", "id"), rows)


def _history(args: argparse.Namespace) -> int:
    client = client_for(args)
    if args.measure:
        doc = client.trend(args.system, args.measure, since=args.since, until=args.until,
                           limit=args.limit)
    else:
        doc = client.results(args.system, limit=args.limit or 20, since=args.since,
                             until=args.until)
    if args.format == "json":
        _dump(doc)
        return EXIT_OK
    if args.measure:
        _trend_table(doc, args.measure)
    else:
        _table(("recorded", "label", "commit", "tags", "id"),
               [(r["created_at"][:19], r["label"], r.get("commit") or "",
                 ",".join(r.get("tags") or []), r["id"]) for r in doc["items"]])
    return EXIT_OK


# -- parsers -------------------------------------------------------------------------------------

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
    from .gate import parse_gate

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
    subparsers."""
    qr = _sub(sub, "qrels", None, "stored qrels on a Cranfield service: put, list",
              "Store qrels on the service (each version immutable, named by its content) or "
              "list them.")
    qsub = qr.add_subparsers(dest="qrels_command", required=True)
    put = _sub(qsub, "put", _qrels_put, "store FILE as qrels ID (prints ID@VERSION)",
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
    put.add_argument("--format", choices=("text", "json"), default="text")
    add_server_options(put)
    ls = _sub(qsub, "list", _qrels_list, "the stored qrels", "List the stored qrels: id, "
              "latest version, topics, judgments.")
    ls.add_argument("--format", choices=("table", "json"), default="table")
    add_server_options(ls)

    bl = _sub(sub, "baseline", _baseline, "pin or show a system's accepted baseline",
              "With RESULT_ID or --latest, pin that recorded result (or SYSTEM's newest) as "
              "SYSTEM's accepted baseline; with neither, show the pinned one (exit 6 if "
              "none). Prints the result: id, label, commit, when recorded.")
    bl.add_argument("system", metavar="SYSTEM")
    bl.add_argument("result_id", nargs="?", default=None, metavar="RESULT_ID")
    bl.add_argument("--latest", action="store_true", help="pin SYSTEM's newest result")
    bl.add_argument("--format", choices=("table", "json"), default="table")
    add_server_options(bl)

    gt = _sub(sub, "gate", _gate, "evaluate and record a run, gate it against the pinned "
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

    tr = _sub(sub, "trend", _trend, "a measure's mean and CI over a system's recorded results",
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

    hs = _sub(sub, "history", _history, "a system's recorded results on a Cranfield service, "
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


REMOTE_COMMANDS = ("qrels", "baseline", "gate", "trend", "history")


def main(args: argparse.Namespace) -> int:
    """Run the server command ``args`` names (its ``remote`` handler)."""
    return run_command(args.remote, args)
