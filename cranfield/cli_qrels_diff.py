"""``cranfield qrels diff``: two versions of qrels compared (issue #31), per changed topic the
judgments added, removed and regraded, with the totals and the pool depth each covers.

``cranfield qrels diff OLD NEW`` compares two files here (plain qrels; ``--diversity``
subtopic qrels; ``-R qrels_jg`` judgment groups); ``cranfield qrels diff ID [--from V1]
[--to V2] --server URL`` asks the service (``GET /v1/qrels/{ID}/diff``, every page) and
prints what its ``text/plain`` answers for the whole diff, byte for byte: both render one
document by :func:`cranfield.reports.qrels_diff_text.format_diff`. Room: the top (the
command line).
"""

from __future__ import annotations

import argparse
import sys

from .remote_cli import EXIT_OK, UsageError, client_for, dump

#: changed topics asked per page of the service's diff (its MAX_PAGE_ITEMS default)
PAGE = 1000


def run_qrels_diff(args: argparse.Namespace) -> int:
    """Print the diff of OLD and NEW (files) or of stored qrels ID's versions."""
    if args.new is not None:
        if args.version_from or args.version_to:
            raise UsageError("--from and --to name versions of stored qrels ID; two files "
                             "are compared as they are")
        doc = local_diff(args.old, args.new, args.qrels_format, args.diversity)
    else:
        if args.diversity or args.qrels_format != "qrels":
            raise UsageError("stored qrels know their kind: --diversity and -R are for two "
                             "files")
        doc = remote_diff(args)
    if args.format == "json":
        dump(doc)
    else:
        from .reports.qrels_diff_text import format_diff

        sys.stdout.write(format_diff(doc))
    return EXIT_OK


def local_diff(old: str, new: str, qrels_format: str = "qrels", diversity: bool = False
               ) -> dict:
    """The diff document of two qrels files (their pool depth unknown: a file has none)."""
    from .inputs.qrels_diff import diff_qrels
    from .reports.qrels_diff_text import diff_document, side

    if qrels_format == "qrels_jg":
        from .inputs.judgment_files import read_qrels_jg

        before, after = read_qrels_jg(old), read_qrels_jg(new)
        kind = "qrels_jg"
    elif qrels_format == "qrels":
        from .inputs.io import read_qrels

        before = read_qrels(old, diversity=diversity)
        after = read_qrels(new, diversity=diversity)
        kind = "subtopics" if diversity else "qrels"
    else:
        raise UsageError(f"-R {qrels_format}: a diff compares graded judgments (qrels, "
                         "qrels_jg); preferences have no grade to compare")
    diff = diff_qrels(before, after, kind)
    t = diff["totals"]
    return diff_document(diff, side(old, t["judgments_from"], t["topics_from"], unknown="file"),
                         side(new, t["judgments_to"], t["topics_to"], unknown="file"))


def remote_diff(args: argparse.Namespace) -> dict:
    """The whole diff of stored qrels ``args.old`` from the service: its pages' changed
    topics in one document, as one page holding them all."""
    import json
    from urllib.parse import quote, urlencode

    from .client import ApiError

    client = client_for(args)
    query = {k: v for k, v in (("from", args.version_from), ("to", args.version_to)) if v}
    base = f"/v1/qrels/{quote(args.old, safe='')}/diff?"
    path: str | None = base + urlencode({**query, "limit": PAGE})
    doc: dict | None = None
    topics: list[dict] = []
    while path:
        try:
            _, _, raw = client.request("GET", path)
        except ApiError as exc:
            # a service whose MAX_PAGE_ITEMS is below PAGE: its own page size
            if doc is not None or "limit" not in (exc.problem.get("errors") or {}):
                raise
            path = base + urlencode(query)
            continue
        page = json.loads(raw)
        doc = doc or page
        topics += page["topics"]
        path = page.get("next")
    assert doc is not None
    return {**doc, "offset": 0, "limit": len(topics), "next": None, "topics": topics}


def add_parser(qsub, sub_parser) -> None:
    """``qrels diff``'s parser, added to the ``qrels`` subcommands (``sub_parser``: how
    :mod:`cranfield.remote_parsers` makes one)."""
    from .remote_cli import add_server_options

    df = sub_parser(qsub, "diff", run_qrels_diff,
                    "compare two qrels versions: judgments added, removed, regraded",
                    "Compare two versions of qrels: per changed topic the judgments added "
                    "(+ docid grade), removed (- docid grade) and regraded (~ docid old -> new), "
                    "the totals, the topics added and removed, and the pool depth each "
                    "version covers (PUT's pool_depth; unknown for files). OLD NEW: two files "
                    "compared here. ID: stored qrels on the service (--server), --from "
                    "(default: the version put before --to) and --to (default: the latest); "
                    "prints what GET /v1/qrels/ID/diff answers as text/plain.")
    df.add_argument("old", metavar="OLD|ID", help="the older qrels file, or a stored qrels id")
    df.add_argument("new", metavar="NEW", nargs="?", default=None,
                    help="the newer qrels file (absent: OLD is a stored qrels id)")
    df.add_argument("--from", dest="version_from", default=None, metavar="V1",
                    help="the version of ID to compare from")
    df.add_argument("--to", dest="version_to", default=None, metavar="V2",
                    help="the version of ID to compare to")
    df.add_argument("--diversity", action="store_true",
                    help="two files of subtopic qrels (topic subtopic docid grade)")
    df.add_argument("-R", "--qrels-format", dest="qrels_format", default="qrels",
                    choices=("qrels", "qrels_jg"),
                    help="two files of this kind: qrels (default) or qrels_jg (judgment "
                    "groups, compared per judgment group)")
    df.add_argument("--format", choices=("text", "json"), default="text")
    add_server_options(df)
