"""``cranfield eval``: a run evaluated against qrels locally (trec_eval's text, CSV, JSON or
JSON lines), or sent to a service with ``--server`` (:mod:`cranfield.remote_eval`); ``-R``'s
judgment groups and preferences; the input lint on standard error; several runs against
one qrels read once (``cranfield eval QRELS RUN RUN...``; with ``--server`` one batch
request). Room: the top (the command line)."""

from __future__ import annotations

import argparse
import os
import sys

from .cli_files import file_bytes, input_source, topic_metadata_file, zscores_file
from .errors import InputError


def run_eval(args: argparse.Namespace) -> int:
    # the engine (numpy) loads here, once cranfield.cli.main has set the environment up
    from .evaluate import evaluate
    from .inputs.io import read_qrels, read_run
    from .measures.names import needs_subtopics
    from .reports.result_document import warnings_for

    if args.topic_metadata is not None and args.format == "jsonl":
        print("cranfield: --topic-metadata prints with --format trec, csv or json (jsonl is "
              "ir_measures' shape, which has no segments)", file=sys.stderr)
        return 1
    if isinstance(args.run, list):  # RUN [RUN ...]: one run is evaluated as it always was
        if len(args.run) > 1:
            return _run_eval_many(args)
        args.run = args.run[0]
    if args.topic_metadata == "-" and "-" in (args.qrels, args.run):
        print("cranfield: --topic-metadata - and QRELS or RUN cannot both be standard input",
              file=sys.stderr)
        return 1
    if args.rel_format != "qrels" and _rel_format_refused(args):
        return 2  # locally and with --server alike (review R1 F9)
    if evaluates_on_a_service(args):
        if args.zscores is not None:  # the upload is a multipart form: options as text fields
            print("cranfield: -Z is evaluated locally only (the API takes options.zscores "
                  "as JSON); drop --server", file=sys.stderr)
            return 1
        from . import remote_eval

        return remote_eval.run_eval(args)  # --topic-metadata: read here, sent as its text
    if args.record:
        print("cranfield: --record needs --server (results are kept by the service)",
              file=sys.stderr)
        return 2
    if args.qrels_id:
        print("cranfield: --qrels-id needs --server (qrels are stored by the service)",
              file=sys.stderr)
        return 1

    run_source, run_name = input_source(args.run)
    qrels_source, qrels_name = input_source(args.qrels)
    if args.rel_format != "qrels":
        return _run_eval_rel_format(args, run_source, run_name, qrels_source, qrels_name)
    try:  # the qrels first (their reader's transient memory comes before the run's columns)
        try:
            # diversity measures read subtopic qrels, where a docid appears once per subtopic
            qrels = read_qrels(qrels_source, name=qrels_name,
                               diversity=needs_subtopics(args.measures, args.profile),
                               gains=read_gains(args))
        except Exception as exc:
            failed = exc
        else:
            failed = None
        # (read even when the qrels failed: with both bad, the run's problem is named first)
        runs = [read_run(run_source, name=run_name)]
        if failed is not None:
            raise failed
    except InputError:
        raise_if_swapped(qrels_source, qrels_name, run_source)
        raise
    run_digest = sha256_of(run_source, runs[0]) if args.format == "json" else None
    # evaluate holds the run alone, and lets its columns go once ranked (peak memory)
    ev = evaluate(qrels, runs.pop(), args.measures, profile=args.profile,
                  relevance_level=args.rel_level, judged_only=args.judged_only,
                  depth=args.depth, complete_topics=args.complete,
                  collection_size=args.collection_size, aggregation=args.aggregation,
                  zscores=zscores_file(args.zscores),
                  topic_metadata=topic_metadata_file(args.topic_metadata),
                  gains=gains_arg(args))
    if args.format == "json":  # the API's evaluation document; warnings are in it
        from .reports.trec_format import format_json

        text = format_json(ev, run_digest, sha256_of(qrels_source, qrels),
                           per_topic=args.per_topic, curves=args.curves, interface="cli")
    else:
        if args.format == "csv":
            from .reports.trec_format import format_csv

            text = format_csv(ev, per_topic=args.per_topic, summary=not args.no_summary)
        elif args.format == "jsonl":
            from .reports.jsonl import format_jsonl

            text = format_jsonl(ev, per_topic=args.per_topic, summary=not args.no_summary)
        else:
            from .reports.trec_format import format_trec

            text = format_trec(ev, per_topic=args.per_topic, summary=not args.no_summary)
        if not args.no_warnings:
            print_warnings(warnings_for(ev, "cli"))
    sys.stdout.write(text)
    return 0


def evaluates_on_a_service(args) -> bool:
    """Whether ``cranfield eval`` sends its run(s) to a service: --server, or --record or
    --qrels-id with $CRANFIELD_SERVER set. There the service settles the profile the user
    did not name (stored qrels declaring real gains: cranfield's), so none is sent."""
    return bool(args.server or ((args.record or args.qrels_id) and environment_server()))


def gains_arg(args) -> str | None:
    """--real-gains as evaluate's ``gains`` (issue #31): "real", or None (integer grades)."""
    return "real" if getattr(args, "real_gains", False) else None


def read_gains(args) -> str:
    """How QRELS' grades are read: ``"real"`` with --real-gains under a profile that reads
    real gains (cranfield's), else ``"integer"`` (a trec_eval profile refuses a grade that
    is not an integer exactly as without --real-gains)."""
    return "real" if real_gains_read(args) else "integer"


def real_gains_read(args) -> bool:
    """Whether --real-gains is read: under the profile named, or (none named) the one it
    settles, cranfield's; a trec_eval --profile ignores it (issue #31)."""
    from .measures import PROFILES, resolve_profile

    return bool(gains_arg(args)) and \
        PROFILES[resolve_profile(args.profile, gains_arg(args))].reads_real_gains


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
                                     ("--real-gains", real_gains_read(args)),
                                     ("-l", args.rel_level != 1
                                      and args.rel_format != "qrels_jg")) if on]
    if refused:
        print(f"cranfield: -R {args.rel_format} does not take {', '.join(refused)}",
              file=sys.stderr)
    return bool(refused)


def _run_eval_rel_format(args, run_source, run_name, qrels_source, qrels_name) -> int:
    """-R qrels_jg / prefs / qrels_prefs (cranfield.inputs.judgment_files, jg_measures,
    prefs_measures, jg_text): judgment groups and preference judgments, with their own
    measures and trec_eval's text output."""
    from .inputs.io import read_run
    from .inputs.judgment_files import read_prefs, read_qrels_jg
    from .measures.jg_measures import evaluate_jg
    from .measures.prefs_measures import evaluate_prefs
    from .reports.jg_text import format_jg

    if _rel_format_refused(args):
        return 2
    data = file_bytes(args.qrels) if isinstance(qrels_source, str) else qrels_source
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


def environment_server() -> str | None:
    from .settings import CliEnvironment

    return CliEnvironment.from_environ().server


def raise_if_swapped(qrels_source, qrels_name: str, run_source) -> None:
    """After a file could not be read: when QRELS's lines have a run's fields (6 or more) and
    RUN's a qrels file's (4), the two were given the wrong way round; say so."""
    from .inputs.trec_source import first_line_fields

    qrels_fields = first_line_fields(qrels_source)
    if qrels_fields is not None and qrels_fields >= 6 and first_line_fields(run_source) == 4:
        raise InputError(qrels_name, "looks like a run file; trec_eval takes QRELS first "
                                     "(cranfield eval QRELS RUN)") from None


def sha256_of(source, read=None) -> str:
    """The SHA-256 of a file's bytes (or of standard input's), as the API digests TREC text;
    of a Parquet or Arrow file's columns (``read``: the run or qrels read from it), as the
    API digests such an upload (by content: the same as the same data sent as a mapping)."""
    import hashlib

    if read is not None and is_table_file(source):
        from .inputs.json_body import columns_sha256

        return columns_sha256(read)
    if isinstance(source, bytes):
        return hashlib.sha256(source).hexdigest()
    digest = hashlib.sha256()
    with open(source, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_table_file(source) -> bool:
    """Whether a file (a path, or standard input's bytes) is a Parquet or Arrow IPC file, by
    its magic bytes, as the readers tell it (:func:`cranfield.inputs.table_bytes.sniff`)."""
    from .inputs.table_bytes import sniff

    if isinstance(source, bytes):
        return sniff(source) is not None
    with open(source, "rb") as fh:
        head = fh.read(12)
        if not head.startswith((b"ARROW1", b"\xff\xff\xff\xff", b"PAR1")):
            return False
        fh.seek(-4, os.SEEK_END)
        return sniff(head + fh.read(4)) is not None


def print_warnings(warnings: list[dict], run: str | None = None) -> None:
    """The input lint on standard error (standard output stays trec_eval's text), one line
    each, options named by their flags; with several runs, each names its ``run``."""
    about = f"run {run}: " if run is not None else ""
    for w in warnings:
        topics = w.get("topics") or []
        shown = f" (topics: {', '.join(topics[:5])}{', …' if len(topics) > 5 else ''})" \
            if topics else ""
        print(f"cranfield: warning: {about}{w['message']}{shown}", file=sys.stderr)


# trec_eval's runid line, starting each run's block when runid is not among the measures
RUNID_LINE = "%-22s\tall\t%s\n"


def _run_eval_many(args: argparse.Namespace) -> int:
    """``cranfield eval`` with more than one RUN (``args.run``: their paths): QRELS read
    once (:func:`cranfield.evaluate_many.iter_evaluations`), each run's output printed as soon
    as it is evaluated, as docs/cli.md says. trec: each block what one RUN prints, starting
    with trec_eval's runid line unless runid is among the measures; csv: a leading run column,
    the header once; jsonl: a leading "run" key; json: one document shaped as the API's
    POST /v1/evaluations/batch answer, printed once every run is evaluated. A run that cannot
    be evaluated stops the command with its error; what was printed before it stays."""
    from .errors import CranfieldError, error_report
    from .evaluate_many import iter_evaluations
    from .inputs.io import read_qrels
    from .inputs.run_naming import run_names
    from .measures.names import needs_subtopics

    refused = _refused(args)
    if refused:
        print(f"cranfield: {refused}", file=sys.stderr)
        return 1
    if evaluates_on_a_service(args):  # (--record: refused above)
        from .remote_cli import run_command

        return run_command(_run_eval_many_remote, args)
    qrels_source, qrels_name = input_source(args.qrels)
    names = run_names(args.run)
    runs = {name: (input_source(path)[0] if path == "-" else path)
            for name, path in zip(names, args.run, strict=True)}
    try:  # read here as for one run (named by its path), so the same refusals
        qrels = read_qrels(qrels_source, name=qrels_name,
                           diversity=needs_subtopics(args.measures, args.profile),
                           gains=read_gains(args))
    except InputError:
        raise_if_swapped(qrels_source, qrels_name, runs[names[0]])
        raise
    evaluations = iter_evaluations(
        qrels, runs, args.measures, profile=args.profile, relevance_level=args.rel_level,
        judged_only=args.judged_only, depth=args.depth, complete_topics=args.complete,
        collection_size=args.collection_size, aggregation=args.aggregation,
        zscores=zscores_file(args.zscores),
        topic_metadata=topic_metadata_file(args.topic_metadata), gains=gains_arg(args))
    try:
        if args.format == "json":
            return _print_json(args, evaluations, runs, qrels_source, qrels)
        return _print_blocks(args, evaluations)
    except CranfieldError as exc:  # a run's error: said with its name (cli.main's exit code)
        run = getattr(exc, "run", None)
        if run is None or run in str(exc):
            raise
        print(f"cranfield: run {run}: {exc}", file=sys.stderr)
        return error_report(exc).exit_code


def _print_blocks(args: argparse.Namespace, evaluations, lint=None) -> int:
    """trec, csv, jsonl: each run's lines (and its lint: ``lint(name, ev)``, by default
    the local one) as soon as it is evaluated."""
    runids: dict[str, str] = {}
    for i, (name, ev) in enumerate(evaluations):
        sys.stdout.write(_block(args, name, ev, first=i == 0))
        sys.stdout.flush()  # each run's lines as it is done
        if not args.no_warnings:
            from .reports.result_document import warnings_for

            print_warnings(lint(name, ev) if lint else warnings_for(ev, "cli"), run=name)
        if args.format == "trec" and ev.runid in runids:
            print(f"cranfield: warning: runs {runids[ev.runid]} and {name} share the runid "
                  f"{ev.runid!r}: their blocks tell them apart only by their order "
                  "(--format csv or jsonl names each run)", file=sys.stderr)
        runids.setdefault(ev.runid, name)
    return 0


def _refused(args: argparse.Namespace) -> str | None:
    """Why several RUNs cannot be evaluated with these options (None: they can)."""
    if args.record:
        return "--record keeps one result: give one RUN"
    if args.qrels_id and not (args.server or environment_server()):
        return "--qrels-id needs --server (qrels are stored by the service)"
    if args.rel_format != "qrels":
        return f"-R {args.rel_format} evaluates one RUN per call: give one RUN"
    if args.zscores is not None and args.server:
        return "-Z is evaluated locally only (the API takes options.zscores as JSON); drop " \
               "--server"
    stdin = [p for p in (args.qrels, *args.run, args.zscores, args.topic_metadata) if p == "-"]
    if len(stdin) > 1:
        return "standard input ('-') can be read once: give it as one of QRELS, RUN, -Z " \
               "and --topic-metadata at most"
    return None


def _block(args: argparse.Namespace, name: str, ev, first: bool) -> str:
    """One run's output in ``args.format`` (trec, csv, jsonl)."""
    if args.format == "csv":
        return _csv_block(args, name, ev, header=first)
    if args.format == "jsonl":
        import json

        from .reports.jsonl import format_jsonl

        text = format_jsonl(ev, per_topic=args.per_topic, summary=not args.no_summary)
        return "".join(json.dumps({"run": name, **json.loads(line)}, allow_nan=False) + "\n"
                       for line in text.splitlines())
    from .reports.trec_format import format_trec

    text = format_trec(ev, per_topic=args.per_topic, summary=not args.no_summary)
    if any(i.measure.name == "runid" for i in ev.instances):
        return text
    return RUNID_LINE % ("runid", ev.runid) + text


def _csv_block(args: argparse.Namespace, name: str, ev, header: bool) -> str:
    import csv
    import io

    from .reports.trec_format import format_csv

    text = format_csv(ev, per_topic=args.per_topic, summary=not args.no_summary)
    rows = csv.reader(io.StringIO(text))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    head = next(rows)
    if header:
        writer.writerow(["run", *head])
    for row in rows:
        writer.writerow([name, *row])
    return buf.getvalue()


def _print_json(args: argparse.Namespace, evaluations, runs: dict, qrels_source,
                qrels) -> int:
    """``--format json``: the batch document, printed once every run is evaluated (the
    warnings are in each run's document)."""
    import json

    from .inputs.io import read_run
    from .reports.result_document import evaluation_document

    qrels_sha256 = sha256_of(qrels_source, qrels)
    docs = []
    for name, ev in evaluations:
        source = runs[name]
        read = read_run(source) if is_table_file(source) else None  # digested by columns
        doc = evaluation_document(ev, {"per_topic": args.per_topic, "curves": args.curves},
                                  sha256_of(source, read), qrels_sha256, None,
                                  interface="cli")
        docs.append({"name": name, **doc})
    sys.stdout.write(json.dumps({"evaluations": docs, "qrels": {"sha256": qrels_sha256}},
                                indent=2, allow_nan=False) + "\n")
    return 0


def _run_eval_many_remote(args: argparse.Namespace) -> int:
    """``--server`` with several RUNs: one ``POST /v1/evaluations/batch`` (the client's
    ``evaluate_many``: the service reads the qrels once), each run's document printed as the
    local command prints that run (trec, csv, jsonl through the same blocks, the service's
    lint on standard error), json as the batch document."""
    import json

    from .client import ApiError
    from .remote_cli import client_for
    from .reports.result_document import warnings_for_interface
    from .reports.trec_format import document_evaluation

    def text(path: str):  # a path is read (and sent) by the client; '-' here
        return sys.stdin.buffer.read().decode("utf-8") if path == "-" else path

    client = client_for(args)
    # profile: None unless named (the client sends no None option): the service settles it
    options = {"profile": args.profile, "relevance_level": args.rel_level,
               "judged_only": args.judged_only, "depth": args.depth,
               "complete_topics": args.complete, "collection_size": args.collection_size,
               "aggregation": args.aggregation}
    if gains_arg(args):
        options["gains"] = gains_arg(args)
    if args.topic_metadata is not None:  # read here: its errors name the line
        options["topic_metadata"] = topic_metadata_file(args.topic_metadata)
    runs = {name: text(path) for name, path in zip(run_names_of(args.run), args.run,
                                                   strict=True)}
    try:
        docs = client.evaluate_many(None if args.qrels_id else text(args.qrels), runs,
                                    args.measures, qrels_id=args.qrels_id, options=options,
                                    per_topic=args.per_topic, curves=args.curves)
    except ApiError as exc:  # the service names a run runs[i].run; the user gave a file
        raise ApiError(exc.status, _problem_naming_files(exc.problem, args.run)) from None
    if args.format == "json":
        first = next(iter(docs.values()), {})
        qrels = {"sha256": (first.get("provenance") or {}).get("qrels_sha256")}
        sys.stdout.write(json.dumps({"evaluations": [{"name": n, **d} for n, d in docs.items()],
                                     "qrels": qrels}, indent=2, allow_nan=False) + "\n")
        return 0
    return _print_blocks(args, ((n, document_evaluation(d)) for n, d in docs.items()),
                         lint=lambda name, ev: warnings_for_interface(
                             docs[name].get("warnings") or [], "cli"))


def _problem_naming_files(problem: dict, paths: list[str]) -> dict:
    """A batch problem with each ``runs[i].run`` (the service's name for the i-th run) said
    as the file the user named (``-`` standard input), as the local command names it."""
    import re

    def named(text: str) -> str:
        return re.sub(r"runs\[(\d+)\]\.run",
                      lambda m: paths[int(m[1])] if int(m[1]) < len(paths) else m[0], text)

    out = dict(problem)
    if isinstance(out.get("detail"), str):
        out["detail"] = named(out["detail"])
    if isinstance(out.get("errors"), dict):
        out["errors"] = {named(str(k)): v for k, v in out["errors"].items()}
    return out


def run_names_of(paths: list[str]) -> list[str]:
    """The names of RUNs given by path, as cranfield compare names them."""
    from .inputs.run_naming import run_names

    return run_names(paths)
