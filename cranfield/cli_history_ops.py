"""The command line of a history under changing judgments (issue #31).

``cranfield stability --measure M --from ID@V1 --to ID@V2 --server URL`` prints what ``GET
/v1/stability`` answers: its ``text/plain`` byte for byte (``--format json``: the document;
``--format html`` or ``-o FILE``: the stability page). ``cranfield rescore SYSTEM [SYSTEM...]
--qrels-id ID@V --server URL`` queues the re-score of the systems' kept runs (``POST
/v1/systems/{name}/rescore``, or ``POST /v1/rescores`` for several) and prints its id; with
``--wait`` it polls ``GET /v1/rescores/{id}``, a progress line on standard error each time the
counts change, then prints the items (exit 0 when none failed, 1 when any did).

``cranfield qrels consensus FILE --method ...`` (here, no service) derives the consensus of a
judged qrels file by :func:`cranfield.judges.consensus.consensus`, the function ``POST
/v1/qrels/{id}/consensus`` stores, and prints it as TREC qrels (``topic 0 docid grade``, in
the order of the service's canonical text) with its recipe on standard error, or with
``--format json`` both as one document. ``cranfield qrels put --judges FILE --pool-depth N``'s
judges file is read here (:func:`judges_file`). Room: the top (the command line).
"""

from __future__ import annotations

import argparse
import sys

from .remote_cli import EXIT_OK, UsageError, client_for, dump

#: ``cranfield rescore --wait``'s exit code when an item failed
EXIT_RESCORE_FAILED = 1


# -- cranfield qrels put --judges / consensus FILE ------------------------------------------------

def judges_file(path: str) -> dict:
    """Each judge's provenance from a JSON file (``{name: {kind, model, ...}}``), as PUT's
    ``judges`` member takes it; an unreadable or malformed file is an InputError (exit 2)."""
    import json

    from .errors import InputError

    try:
        with open(path, encoding="utf-8") as fh:
            value = json.load(fh)
    except OSError as exc:
        raise InputError(path, f"cannot read the judges file: {exc.strerror}",
                         field="judges") from None
    except ValueError as exc:
        raise InputError(path, f"the judges file is not JSON: {exc}", field="judges") from None
    if not isinstance(value, dict) or not value:
        raise InputError(path, "the judges file must hold a JSON object {judge: provenance}",
                         field="judges")
    return value


def consensus_text(qrels) -> str:
    """A consensus :class:`~cranfield.inputs.run_qrels.Qrels` as TREC qrels text, one line
    ``topic 0 docid grade`` per judgment in (topic, docid) order; a real gain written as
    Python's repr of the double (the shortest text reading back to it), as the service's
    canonical text writes it."""
    rows = sorted(zip((qrels.topics[t] for t in qrels.topic_index.tolist()),
                      qrels.docids.tolist(), qrels.grades.tolist(), strict=True))
    return "".join(f"{t} 0 {d} {g!r}\n" for t, d, g in rows)


def run_local_consensus(args: argparse.Namespace) -> int:
    """``cranfield qrels consensus FILE``: the consensus of a judged qrels file here."""
    import json
    from contextlib import ExitStack

    from .judges.consensus import consensus
    from .judges.judged import read_judged
    from .remote_cli import file_or_stdin

    if args.target or args.if_match:
        raise UsageError("--target and --if-match name stored qrels: a file's consensus is "
                         "printed (store it with cranfield qrels put)")
    with ExitStack() as stack:
        groups = read_judged(file_or_stdin(args.qrels_id, stack), name=args.qrels_id)
    judges = [args.judge] if args.method == "judge" else \
        ([j for j in args.judges.split(",") if j] if args.judges else None)
    qrels, recipe = consensus(groups, args.method, judges)
    recipe["source"] = {"file": args.qrels_id}
    text = consensus_text(qrels)
    if args.format == "json":
        grades: dict = {}
        for line in text.splitlines():
            topic, _, docid, grade = line.split(" ")
            grades.setdefault(topic, {})[docid] = float(grade) \
                if recipe["gains"] == "real" else int(grade)
        dump({"consensus": recipe, "topics": len(grades), "judgments": len(qrels),
              "qrels": grades})
    else:
        sys.stdout.write(text)
        print(f"cranfield: consensus recipe: {json.dumps(recipe)}", file=sys.stderr)
    return EXIT_OK


# -- cranfield stability --------------------------------------------------------------------------

def run_stability(args: argparse.Namespace) -> int:
    """Print (or save) ``GET /v1/stability``'s answer for the two versions."""
    client = client_for(args)
    options = {k: getattr(args, k) for k in ("test", "correction", "alpha", "level",
                                             "persistence", "resamples", "permutations",
                                             "seed")}
    if args.output or args.format == "html":
        page = client.stability(args.measure, args.version_from, args.version_to,
                                accept="text/html", **options)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(page)
            print(f"cranfield: stability page saved to {args.output}", file=sys.stderr)
        if args.format == "html":
            if not args.output:
                sys.stdout.write(page)
            return EXIT_OK
    if args.format == "json":
        dump(client.stability(args.measure, args.version_from, args.version_to, **options))
    else:
        sys.stdout.write(client.stability(args.measure, args.version_from, args.version_to,
                                          accept="text/plain", **options))
    return EXIT_OK


# -- cranfield rescore ----------------------------------------------------------------------------

def progress_line(doc: dict) -> str:
    """One line of a re-score's progress: ``rescore ID: STATE, D of T done, F failed, S
    skipped, Q queued``."""
    return (f"rescore {doc['id']}: {doc['state']}, {doc['done']} of {doc['total']} done, "
            f"{doc['failed']} failed, {doc['skipped']} skipped, {doc['queued']} queued")


def _said(doc: dict) -> None:
    print(f"cranfield: {progress_line(doc)}", file=sys.stderr, flush=True)


def run_rescore(args: argparse.Namespace) -> int:
    """Queue the re-score, print its id; with --wait follow it to the end."""
    client = client_for(args)
    if args.timeout is not None and not args.wait:
        raise UsageError("--timeout is how long --wait waits")
    doc = client.rescore(args.systems, args.qrels_id)
    if not args.wait:
        if args.format == "json":
            dump(doc)
        else:
            print(doc["id"])
        return EXIT_OK
    if args.format != "json":
        print(doc["id"], flush=True)
    _said(doc)
    doc = client.wait_rescore(doc["id"], progress=_said, state=doc,
                              timeout=args.timeout or 24 * 3600.0)
    if args.format == "json":
        dump(doc)
    else:
        _items(doc)
    return EXIT_RESCORE_FAILED if doc["failed"] else EXIT_OK


def _items(doc: dict) -> None:
    """The finished re-score's items: result, system, state, the new result, the reason."""
    head = ("result", "system", "state", "new_result", "reason")
    rows = [(i["result_id"], i["system"], i["state"], i.get("new_result_id") or "-",
             i.get("reason") or "") for i in doc["items"]]
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=False)]
    for row in (head, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


# -- parsers --------------------------------------------------------------------------------------

def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number strictly between 0 and 1")
    return value


def _count(text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 0")
    return int(text)


def positive_int(text: str) -> int:
    value = _count(text) if text.isascii() and text.isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


RESCORE_EXIT = """\
exit codes (with --wait):
  0  every re-scored item is done (skipped items are listed with their reason)
  1  an item failed (its reason listed), or a usage error
  2  the service refused the request or cannot be reached, or --timeout passed
  6  no such system (or re-score)
"""


def add_parsers(sub, sub_parser) -> None:
    """``stability`` and ``rescore``, added to ``cranfield``'s subcommands (``sub_parser``:
    how :mod:`cranfield.remote_parsers` makes one)."""
    from .remote_cli import add_server_options

    st = sub_parser(sub, "stability", run_stability,
                    "do the conclusions hold under new judgments? (tau, tau_AP, RBO, pairs)",
                    "For your systems with results recorded under both qrels versions --from "
                    "(the truth) and --to (re-scored nights, or the latest under each): the "
                    "system ranking by MEASURE compared (Kendall's tau_b, tau_AP, RBO, each "
                    "with a bootstrap interval over topics) and every pair of systems whose "
                    "significant difference appeared, vanished or flipped. Prints what GET "
                    "/v1/stability answers as text/plain; --format json the document; "
                    "--format html or -o FILE the stability page.")
    st.add_argument("--measure", required=True, metavar="M",
                    help="a measure in any spelling (ndcg_cut.10, nDCG@10, map)")
    st.add_argument("--from", dest="version_from", required=True, metavar="ID@V1",
                    help="the qrels version taken as the truth")
    st.add_argument("--to", dest="version_to", required=True, metavar="ID@V2",
                    help="the other qrels version")
    st.add_argument("--test", default=None, choices=("t", "randomization", "bootstrap",
                                                     "wilcoxon"),
                    help="the paired test of each pair (default: the service's, t)")
    st.add_argument("--correction", default=None, choices=("holm", "bonferroni", "bh", "none"),
                    help="the correction over the pairs (default: holm)")
    st.add_argument("--alpha", type=_fraction, default=None, help="significance (default 0.05)")
    st.add_argument("--level", type=_fraction, default=None,
                    help="the bootstrap intervals' level (default 0.95)")
    st.add_argument("--persistence", type=_fraction, default=None,
                    help="RBO's p (default 0.9)")
    st.add_argument("--resamples", type=positive_int, default=None, metavar="N",
                    help="bootstrap resamples of the topics (default 1000)")
    st.add_argument("--permutations", type=positive_int, default=None, metavar="N",
                    help="the randomization test's sign vectors (default 10000)")
    st.add_argument("--seed", type=_count, default=None, help="the resampling's seed (default 0)")
    st.add_argument("--format", choices=("text", "json", "html"), default="text")
    st.add_argument("-o", dest="output", default=None, metavar="FILE",
                    help="save the stability page (the service's text/html) to FILE")
    add_server_options(st)

    rs = sub_parser(sub, "rescore", run_rescore,
                    "re-score systems' kept runs under a stored qrels version",
                    "Queue one job per recorded result of each SYSTEM that kept its run "
                    "(cranfield eval --record ... --keep-run): each evaluates the kept run "
                    "against stored qrels --qrels-id with the measures it was recorded with and "
                    "records a new result linked to the original (its time, label, commit). A "
                    "result without a kept run is skipped, with the reason. Prints the "
                    "re-score's id; with --wait, a progress line on standard error each time "
                    "its counts change, then its items (result, system, state, new result, "
                    "reason).")
    rs.epilog = RESCORE_EXIT  # (its own: an item failed is 1)
    rs.add_argument("systems", nargs="+", metavar="SYSTEM")
    rs.add_argument("--qrels-id", required=True, metavar="ID[@VERSION]",
                    help="the stored qrels to re-score under (ID alone: its latest version)")
    rs.add_argument("--wait", action="store_true",
                    help="follow the re-score until no item is queued")
    rs.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                    help="with --wait, give up after this long (exit 2; default 1 day)")
    rs.add_argument("--format", choices=("text", "json"), default="text",
                    help="json: the re-score document (with --wait, the finished one)")
    add_server_options(rs)


__all__ = ["add_parsers", "consensus_text", "judges_file", "run_local_consensus",
           "run_rescore", "run_stability"]
