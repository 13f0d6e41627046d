"""``cranfield`` command line. ``cranfield eval`` is a drop-in for ``trec_eval``: same flags,
same output bytes by default, clearer errors.

Exit codes follow trec_eval: 1 usage or unknown measure, 2 unreadable or malformed input,
4 a docid repeated within a topic, 7 no topic with both results and judgments.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .errors import EvaluationError, InputError, MeasureError
from .evaluate import evaluate
from .measures import DEFAULT_PROFILE, PROFILES
from .trec_format import format_csv, format_json, format_trec

PROFILE_ALIASES = {"9.0.8": "trec_eval-9.0.8", "9": "trec_eval-9.0.8", "10": "trec_eval-10",
                   "10.0": "trec_eval-10"}


def _profile(text: str) -> str:
    profile = PROFILE_ALIASES.get(text, text)
    if profile not in PROFILES:
        raise argparse.ArgumentTypeError(
            f"unknown profile {text!r} (choose {', '.join(PROFILES)})")
    return profile


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cranfield",
                                     description="Evaluate search runs (trec_eval-compatible).")
    parser.add_argument("--version", action="version", version=f"cranfield {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("eval", help="evaluate a run against qrels, like trec_eval",
                        description="Evaluate RUN against QRELS. Output is trec_eval's text by "
                                    "default.")
    ev.add_argument("qrels", metavar="QRELS", help="qrels file ('-' reads standard input)")
    ev.add_argument("run", metavar="RUN", help="run file ('-' reads standard input)")
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
    ev.add_argument("--format", choices=("trec", "json", "csv"), default="trec",
                    help="output format (default trec: trec_eval's text)")
    ev.add_argument("--server", default=None, metavar="URL",
                    help="evaluate on a Cranfield service instead of locally (same output)")
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
    serve = sub.add_parser("serve", help="run the HTTP API (development: gunicorn, as in "
                                         "production, with the repository's config)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=None,
                       help="gunicorn workers (default: the config file's)")
    work = sub.add_parser("worker", help="run an RQ worker for queued evaluations")
    work.add_argument("--redis-url", default=None, help="default: $REDIS_URL")
    work.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    work.add_argument("--name", default=None)
    work.add_argument("--monitoring-interval", type=int, default=None,
                      help="seconds between job heartbeats (RQ's default 30)")
    work.add_argument("--maintenance-interval", type=int, default=None,
                      help="seconds between registry clean-ups that retry jobs of dead "
                           "workers (RQ's default 600)")
    return parser


def run_serve(args: argparse.Namespace) -> int:
    """Start gunicorn with service/gunicorn.conf.py on HOST:PORT (replaces this process)."""
    import os
    from pathlib import Path

    try:
        import service
    except ImportError:
        print("cranfield: the service package is not installed", file=sys.stderr)
        return 1
    conf = Path(service.__file__).resolve().parent / "gunicorn.conf.py"
    argv = [sys.executable, "-m", "gunicorn", "-c", str(conf), "--bind",
            f"{args.host}:{args.port}"]
    if args.workers:
        argv += ["--workers", str(args.workers)]
    argv.append("service.app:create_app()")
    print(f"Cranfield API on http://{args.host}:{args.port}  (docs: "
          f"http://{args.host}:{args.port}/docs/)", file=sys.stderr, flush=True)
    os.execv(sys.executable, argv)
    return 0  # not reached


def _source(path: str) -> tuple:
    """A path, or standard input's bytes for '-' (as trec_eval 10 allows)."""
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    return path, path


def _file_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror}") from None


def run_remote(args: argparse.Namespace) -> int:
    """``--server``: send the files, print what the service answers (trec_eval's text, CSV or
    JSON), waiting on queued jobs with back-off."""
    import json

    from .client import ApiError, Client

    options = {"profile": args.profile, "relevance_level": args.rel_level,
               "judged_only": args.judged_only, "depth": args.depth,
               "complete_topics": args.complete, "collection_size": args.collection_size,
               "aggregation": args.aggregation}
    accept = {"trec": "text/plain", "csv": "text/csv", "json": "application/json"}[args.format]
    run = sys.stdin.read() if args.run == "-" else args.run
    qrels = None if args.qrels_id else (sys.stdin.read() if args.qrels == "-" else args.qrels)
    try:
        out = Client(args.server).evaluate(run, qrels, qrels_id=args.qrels_id,
                                           measures=args.measures, options=options,
                                           per_topic=args.per_topic, accept=accept)
    except ApiError as exc:
        print(f"cranfield: {exc}", file=sys.stderr)
        return 1 if exc.status == 422 and "measure" in str(exc.problem.get("title", "")
                                                                 ).lower() else 2
    except OSError as exc:
        print(f"cranfield: cannot reach {args.server}: {exc}", file=sys.stderr)
        return 2
    if args.format == "trec" and args.no_summary:
        out = "".join(line for line in out.splitlines(keepends=True) if "\tall\t" not in line)
    sys.stdout.write(out if isinstance(out, str) else json.dumps(out, indent=2) + "\n")
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from .io import read_qrels, read_run

    if args.server:
        return run_remote(args)

    run_source, run_name = _source(args.run)
    qrels_source, qrels_name = _source(args.qrels)
    run = read_run(run_source, name=run_name)
    qrels = read_qrels(qrels_source, name=qrels_name)
    ev = evaluate(run, qrels, args.measures, profile=args.profile,
                  relevance_level=args.rel_level, judged_only=args.judged_only,
                  depth=args.depth, complete_topics=args.complete,
                  collection_size=args.collection_size, aggregation=args.aggregation)
    if args.format == "json":
        text = format_json(ev, per_topic=args.per_topic, curves=args.curves)
    elif args.format == "csv":
        text = format_csv(ev, per_topic=args.per_topic, summary=not args.no_summary)
    else:
        text = format_trec(ev, per_topic=args.per_topic, summary=not args.no_summary)
    sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "eval":
            return run_eval(args)
        if args.command in ("ndeval", "gdeval"):
            from . import webtrack

            qrels, run = _file_bytes(args.qrels), _file_bytes(args.run)
            if args.command == "ndeval":
                result = webtrack.ndeval(run, qrels, alpha=args.alpha, beta=args.beta,
                                         traditional=args.traditional,
                                         complete=args.complete, max_depth=args.depth)
            else:
                result = webtrack.gdeval(run, qrels, k=args.k, complete=args.complete)
            sys.stdout.write(result.csv())
            return 0
        if args.command == "serve":
            return run_serve(args)
        if args.command == "worker":
            from worker.cli import run_worker

            return run_worker(args.redis_url, burst=args.burst, name=args.name,
                              monitoring_interval=args.monitoring_interval,
                              maintenance_interval=args.maintenance_interval)
    except MeasureError as exc:
        print(f"cranfield: {exc}", file=sys.stderr)
        return 1
    except InputError as exc:
        print(f"cranfield: {exc}", file=sys.stderr)
        return 4 if "twice" in exc.reason else 2
    except EvaluationError as exc:
        print(f"cranfield: {exc}", file=sys.stderr)
        return 7 if "no topic" in str(exc) else 1
    except BrokenPipeError:
        return 0
    parser.error(f"unknown command {args.command}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
