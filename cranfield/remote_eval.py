"""``cranfield eval --server``: the run sent once to a Cranfield service (streamed from disk),
a queued job waited for with a progress bar, the answer printed in ``--format``.
Room: the top (the command line)."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack

from .remote_cli import (
    EXIT_OK,
    ProgressBar,
    UsageError,
    client_for,
    dump,
    file_or_stdin,
    recorded_line,
    run_command,
)


def _refuse_swapped_files(qrels_name: str, qrels: str | None, run: str) -> None:
    """QRELS holding a run's lines and RUN qrels' (their first lines): the local command's
    message (the client's would name its Python call), before anything is sent."""
    from .errors import InputError
    from .inputs.swapped import QRELS, RUN, kind_of

    if qrels is None:
        return
    q, r = kind_of(qrels), kind_of(run)
    if q and r and (q[0], r[0]) == (RUN, QRELS):
        raise InputError(qrels_name, "looks like a run file; trec_eval takes QRELS first "
                                     "(cranfield eval QRELS RUN)")


def run_eval(args: argparse.Namespace) -> int:
    """``cranfield eval --server``: the run sent once (streamed from disk), what the service
    answers printed (trec_eval's text, CSV or JSON), a queued job waited for with a progress
    bar and fetched in the format asked."""
    return run_command(_eval, args)


def _eval(args: argparse.Namespace) -> int:
    from .reports.result_document import warnings_for_interface

    client = client_for(args)
    # profile: None unless named (the client sends no None option): the service settles it,
    # as for the API (stored qrels declaring real gains: cranfield's; issue #31)
    options = {"profile": args.profile, "relevance_level": args.rel_level,
               "judged_only": args.judged_only, "depth": args.depth,
               "complete_topics": args.complete, "collection_size": args.collection_size,
               "aggregation": args.aggregation}
    if getattr(args, "rel_format", "qrels") != "qrels":  # -R: the service reads it so too
        options["qrels_format"] = args.rel_format
    if getattr(args, "real_gains", False):  # --real-gains: the service reads them so too
        options["gains"] = "real"
    if getattr(args, "topic_metadata", None) is not None:  # read here: errors name the line
        from pathlib import Path

        from .inputs.segments import read_topic_metadata

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
        run = file_or_stdin(args.run, stack)
        qrels = None if args.qrels_id else file_or_stdin(args.qrels, stack)
        _refuse_swapped_files(args.qrels, qrels, run)
        try:
            out = client.evaluate(qrels, run, qrels_id=args.qrels_id, measures=args.measures,
                                  options=options, per_topic=args.per_topic, accept=accept,
                                  record=args.record, progress=bar)
        finally:
            bar.close()
    if isinstance(out, dict):
        recorded_line(out.get("recorded") if isinstance(out.get("recorded"), dict) else None)
        if args.format == "jsonl":
            from .reports.jsonl import format_jsonl
            from .reports.trec_format import document_evaluation

            sys.stdout.write(format_jsonl(document_evaluation(out), per_topic=args.per_topic,
                                          summary=not args.no_summary))
            return EXIT_OK
        if isinstance(out.get("warnings"), list):
            out["warnings"] = warnings_for_interface(out["warnings"], "cli")
        dump(out)
        return EXIT_OK
    recorded_line(getattr(out, "recorded", None))
    text = str(out)
    if args.format == "trec" and args.no_summary:
        text = "".join(line for line in text.splitlines(keepends=True) if "\tall\t" not in line)
    sys.stdout.write(text)
    return EXIT_OK
