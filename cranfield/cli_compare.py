"""``cranfield compare`` (runs compared over topics, a gate's verdict and its exit code) and
``cranfield pool`` (the judging pool of runs), with the runs' names. Room: the top (the
command line)."""

from __future__ import annotations

import argparse
import sys

from .cli_files import input_source, topic_metadata_file
from .errors import InputError
from .measures import PROFILES

# ``cranfield compare --gate``: codes no usage or input error uses (1, 2, 4, 7)
EXIT_GATE_FAILED = 3
EXIT_GATE_UNDECIDED = 5


def _run_names(paths: list[str], names: str | None) -> list[str]:
    """--names, else :func:`cranfield.compare.comparison.run_names` of the paths (the API names
    uploaded files by the same rule)."""
    from .compare.comparison import run_names

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

    from .compare.comparison import compare
    from .compare.comparison_text import format_text

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
    runs = {name: input_source(path)[0] for name, path in zip(names, args.runs, strict=True)}
    tests = list(args.tests or ("t", "randomization", "bootstrap"))
    if args.wilcoxon and "wilcoxon" not in tests:
        tests.append("wilcoxon")
    doc = compare(input_source(args.qrels)[0], runs, args.measures, baseline=args.baseline,
                  tests=tuple(tests), correction=args.correction, alpha=args.alpha,
                  n_permutations=args.permutations, n_samples=args.bootstrap, seed=args.seed,
                  gate=args.gate or None, profile=args.profile,
                  **({"gains": "real"} if args.real_gains else {}),
                  relevance_level=args.rel_level, complete_topics=args.complete,
                  interface="cli", topic_metadata=topic_metadata_file(args.topic_metadata))
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif args.format == "html":
        from .reports.html_report import render_comparison

        sys.stdout.write(render_comparison(doc, title="Cranfield comparison: "
                                           + " vs ".join(names)))
    elif args.format in ("junit", "markdown"):
        from .compare import verdicts

        sys.stdout.write(verdicts.RENDERERS[args.format](doc))
    else:
        sys.stdout.write(format_text(doc))
    verdict = doc.get("gate", {}).get("verdict", "pass")
    return {"pass": 0, "fail": EXIT_GATE_FAILED}.get(verdict, EXIT_GATE_UNDECIDED)


def run_pool(args: argparse.Namespace) -> int:
    import json

    from .compare.pooling import format_pool, pool

    names = _run_names(args.runs, None)
    runs = {name: input_source(path)[0] for name, path in zip(names, args.runs, strict=True)}
    result = pool(runs, args.depth, judged=args.judged,
                  float32_scores=PROFILES[args.profile].float32_scores)
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(format_pool(result))
    return 0
