"""The nightly commands on a Cranfield service: ``qrels put|list``, ``baseline``, ``gate``
(with its verdict's reports) and ``trend`` / ``history``, with their tables.
Room: the top (the command line)."""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from datetime import UTC, datetime

from .remote_cli import (
    EXIT_GATE_FAILED,
    EXIT_GATE_UNDECIDED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    ProgressBar,
    UsageError,
    client_for,
    dump,
    environment,
    exit_code,
    file_or_stdin,
    recorded_line,
)


def _table(head: tuple, rows: list[tuple]) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=False)]
    for row in (head, *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _num(value) -> str:
    return "-" if value is None else f"{value:.4f}"


# -- cranfield qrels put|list --------------------------------------------------------------------

def run_qrels_put(args: argparse.Namespace) -> int:
    client = client_for(args)
    judges = None
    if args.judges is not None:  # each judge's provenance (issue #31)
        from .cli_history_ops import judges_file

        judges = judges_file(args.judges)
    with ExitStack() as stack:
        meta = client.put_qrels(args.qrels_id, file_or_stdin(args.file, stack),
                                diversity=args.diversity, if_match=args.if_match,
                                qrels_format=args.qrels_format, judges=judges,
                                pool_depth=args.pool_depth,
                                gains="real" if args.real_gains else "integer")
    if args.format == "json":
        dump(meta)
    else:
        print(f"{meta.get('id', args.qrels_id)}@{meta['version']}")
    return EXIT_OK


def _when(value) -> str:
    """A stored time (ISO 8601 text, or seconds since the epoch) as ``YYYY-MM-DDTHH:MM:SS``."""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return str(value or "")[:19]


def run_qrels_list(args: argparse.Namespace) -> int:
    items = client_for(args).all_qrels()
    if args.format == "json":
        dump({"items": items, "total": len(items)})
        return EXIT_OK
    _table(("id", "version", "topics", "judgments", "created"),
           [(q.get("id", ""), q.get("version", ""), q.get("topics", ""),
             q.get("judgments", ""), _when(q.get("created_at", q.get("created"))))
            for q in items])
    return EXIT_OK


# -- cranfield baseline --------------------------------------------------------------------------

def run_baseline(args: argparse.Namespace) -> int:
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
        dump(summary)
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


def run_gate(args: argparse.Namespace) -> int:
    from .compare import verdicts

    client = client_for(args)
    env = environment()
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
        run = file_or_stdin(args.run, stack)
        try:
            doc = client.evaluate(run=run, qrels_id=args.qrels_id, measures=measures,
                                  per_topic=False, record=record, progress=bar)
        finally:
            bar.close()
    recorded = doc["recorded"]
    recorded_line(recorded)
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
    from .compare import verdicts

    junit, markdown, text = ((verdicts.pinned_junit, verdicts.pinned_markdown,
                              verdicts.pinned_text) if pinned else
                             (verdicts.junit, verdicts.markdown, verdicts.text))
    fmt = args.format
    if fmt == "json":
        dump(doc)
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

def run_trend(args: argparse.Namespace) -> int:
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
        dump(doc)
    else:
        _trend_table(doc, args.measure)
    return EXIT_OK


def _trend_table(doc: dict, measure: str) -> None:
    rows = [(p["created_at"][:19], p["label"], _num(p.get("mean")),
             f"[{_num(p.get('ci_low'))}, {_num(p.get('ci_high'))}]", str(p.get("n_topics", "")),
             (p.get("gate") or {}).get("verdict", "-"),
             "*" if p["id"] == doc.get("baseline") else "", p["id"])
            for p in doc["points"]]
    head = ("recorded", "label", doc.get("measure") or measure, "95% CI", "topics", "gate",
            "baseline", "id")
    if "series" in doc:  # (issue #31) a re-scored night is a second point of the same time
        qrels = _points_qrels(doc["series"])
        rows = [(*r[:2], qrels.get(p["id"], "-"), *r[2:])
                for r, p in zip(rows, doc["points"], strict=True)]
        head = (*head[:2], "qrels", *head[2:])
    _table(head, rows)


def _points_qrels(series: list[dict]) -> dict[str, str]:
    """Each trend point's qrels, from the series that holds it: its stored version (else
    ``sha256:`` and the digest's first 12 digits), ``(re-score)`` after a re-scored one."""
    out = {}
    for s in series:
        name = s.get("qrels_version") or f"sha256:{str(s.get('qrels_sha256'))[:12]}"
        for p in s["points"]:
            out[p["id"]] = f"{name} (re-score)" if p.get("rescores") else name
    return out


def run_history(args: argparse.Namespace) -> int:
    client = client_for(args)
    if args.measure:
        doc = client.trend(args.system, args.measure, since=args.since, until=args.until,
                           limit=args.limit)
    else:
        doc = client.results(args.system, limit=args.limit or 20, since=args.since,
                             until=args.until)
    if args.format == "json":
        dump(doc)
        return EXIT_OK
    if args.measure:
        _trend_table(doc, args.measure)
    else:
        _table(("recorded", "label", "commit", "tags", "id"),
               [(r["created_at"][:19], r["label"], r.get("commit") or "",
                 ",".join(r.get("tags") or []), r["id"]) for r in doc["items"]])
    return EXIT_OK
