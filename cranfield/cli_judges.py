"""``cranfield qrels agreement`` and ``cranfield qrels consensus``: many judges (issue #31).

``cranfield qrels agreement FILE`` reads judged qrels here (judgment-group text ``qid judge
docno rel``, its JSON shapes, or an Arrow IPC / Parquet file with columns topic, judge, docid,
rel: :func:`cranfield.judges.judged.read_judged`) and prints how much the judges agree;
``cranfield qrels agreement ID[@VERSION] --server URL`` asks the service
(``GET /v1/qrels/{ID}/agreement``). Both print one document by
:func:`cranfield.judges.agreement_document.format_agreement`, so the text is byte for byte
what the route answers as ``text/plain`` for the same judgments and options.

``cranfield qrels consensus ID --method majority|mean|max|judge [--judge J] --server URL``
stores a consensus of the judges of stored judged qrels as a new version
(``POST /v1/qrels/{ID}/consensus``) and prints ``ID@VERSION`` (``--format json``: the
version's metadata, its recipe as ``consensus``). Room: the top (the command line).
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack

from .remote_cli import EXIT_OK, UsageError, client_for, dump, environment, file_or_stdin

#: the bootstrap's resamples of a local agreement (the service's AGREEMENT_RESAMPLES default)
RESAMPLES = 1000


def _remote(args: argparse.Namespace) -> bool:
    """Whether QRELS names stored qrels: with --server, or $CRANFIELD_SERVER set and no file
    of that name here."""
    if args.server:
        return True
    return args.qrels != "-" and not os.path.exists(args.qrels) and bool(environment().server)


def run_agreement(args: argparse.Namespace) -> int:
    """Print the agreement of a judged qrels file (here) or of stored judged qrels."""
    if _remote(args):
        client = client_for(args)
        accept = "application/json" if args.format == "json" else "text/plain"
        out = client.agreement(args.qrels, resamples=args.resamples, seed=args.seed,
                               level=args.level, per_topic=not args.no_per_topic, accept=accept)
    else:
        out = local_agreement(args)
    if args.format == "json":
        dump(out)
    else:
        sys.stdout.write(out)
    return EXIT_OK


def local_agreement(args: argparse.Namespace):
    """The agreement document (``--format json``) or its text, of the file ``args.qrels``."""
    from .judges.agreement_document import agreement_document, format_agreement
    from .judges.judged import read_judged

    with ExitStack() as stack:
        path = file_or_stdin(args.qrels, stack)
        groups = read_judged(path, name=args.qrels)
    resamples = RESAMPLES if args.resamples is None else args.resamples
    doc = agreement_document(groups, resamples=resamples,
                             seed=0 if args.seed is None else args.seed,
                             level=0.95 if args.level is None else args.level)
    if args.no_per_topic:
        doc["topics"] = []
    return doc if args.format == "json" else format_agreement(doc, not args.no_per_topic)


def run_consensus(args: argparse.Namespace) -> int:
    """Store a consensus of stored judged qrels as a new version; print ``ID@VERSION``. A
    file here (no --server): print its consensus (:mod:`cranfield.cli_history_ops`)."""
    if args.method == "judge" and not args.judge:
        raise UsageError("--method judge takes --judge NAME")
    if args.judge and args.method != "judge":
        raise UsageError("--judge is for --method judge (--judges narrows the others)")
    args.qrels = args.qrels_id
    if not _remote(args):
        from .cli_history_ops import run_local_consensus

        return run_local_consensus(args)
    judges = [j for j in args.judges.split(",") if j] if args.judges else None
    meta = client_for(args).consensus(args.qrels_id, args.method, judge=args.judge,
                                      judges=judges, target=args.target,
                                      if_match=args.if_match)
    if args.format == "json":
        dump(meta)
    else:
        print(f"{meta['id']}@{meta['version']}")
    return EXIT_OK


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: the interval's coverage, in [0.5, 1)")
    return value


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 0")
    return int(text)


def add_parsers(qsub, sub_parser) -> None:
    """``qrels agreement`` and ``qrels consensus``, added to the ``qrels`` subcommands
    (``sub_parser``: how :mod:`cranfield.remote_parsers` makes one)."""
    from .remote_cli import add_server_options

    ag = sub_parser(qsub, "agreement", run_agreement,
                    "how much the judges of judged qrels agree (kappa, alpha)",
                    "How much the judges of judged qrels agree, per topic and overall: every "
                    "pair's Cohen's kappa (unweighted, linear, quadratic), Fleiss' kappa and "
                    "Krippendorff's alpha (nominal, ordinal, interval), the overall ones with "
                    "percentile bootstrap intervals over topics (docs/judges.md). QRELS: a "
                    "file here (qid judge docno rel text, JSON, or an Arrow/Parquet file of "
                    "columns topic, judge, docid, rel; '-' reads standard input), or with "
                    "--server stored judged qrels ID[@VERSION]: the same text as the "
                    "service's GET /v1/qrels/ID/agreement (text/plain).")
    ag.add_argument("qrels", metavar="FILE|ID", help="a judged qrels file, or a stored id")
    ag.add_argument("--resamples", type=_count, default=None, metavar="N",
                    help=f"bootstrap resamples over topics (0: no intervals; default "
                    f"{RESAMPLES}, or the service's)")
    ag.add_argument("--seed", type=_count, default=None, metavar="SEED",
                    help="the bootstrap's seed (default 0)")
    ag.add_argument("--level", type=_level, default=None, metavar="LEVEL",
                    help="the intervals' coverage (default 0.95)")
    ag.add_argument("--no-per-topic", action="store_true",
                    help="only the overall statistics")
    ag.add_argument("--format", choices=("text", "json"), default="text")
    add_server_options(ag)

    co = sub_parser(qsub, "consensus", run_consensus,
                    "store a consensus of stored judged qrels' judges as a new version "
                    "(of a file here: print it)",
                    "Derive one grade per (topic, document) from the judges of stored judged "
                    "qrels ID[@VERSION] and store it as a new version of ID (or of --target), "
                    "its recipe (method, judges, source version, the judges' provenance) in "
                    "the version's metadata: majority (a tie to the lower grade), mean (real "
                    "gains), max, or one judge's (--method judge --judge NAME). Prints "
                    "ID@VERSION. FILE (no --server): the same consensus of a judged qrels file "
                    "printed as TREC qrels, the recipe on standard error (--format json: "
                    "both).")
    co.add_argument("qrels_id", metavar="FILE|ID",
                    help="a judged qrels file here (its consensus printed as TREC qrels, the "
                    "recipe on standard error; '-' reads standard input), or with --server "
                    "stored judged qrels ID[@VERSION]")
    co.add_argument("--method", required=True, choices=("majority", "mean", "max", "judge"))
    co.add_argument("--judge", default=None, metavar="NAME",
                    help="the judge of --method judge")
    co.add_argument("--judges", default=None, metavar="A,B,...",
                    help="consult only these judges (default: all)")
    co.add_argument("--target", default=None, metavar="ID",
                    help="store the consensus as a version of this id (default: ID)")
    co.add_argument("--if-match", default=None, metavar="VERSION",
                    help="store only if the target's latest version is still VERSION")
    co.add_argument("--format", choices=("text", "json"), default="text")
    add_server_options(co)
