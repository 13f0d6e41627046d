"""``cranfield``'s commands that work on a Cranfield service, all on
:class:`cranfield.client.Client`: ``eval --server``, ``qrels put|list``, ``baseline``,
``gate``, ``trend`` and ``history``. The nightly job needs nothing else.

Every one takes ``--server URL`` (default ``$CRANFIELD_SERVER``) and ``--api-key KEY``
(default ``$CRANFIELD_API_KEY``) and exits with :data:`EXIT_CODES`' codes. Importing this
module costs argparse only: the client, tqdm and the renderers are imported when a command
runs, so ``cranfield eval --server`` starts without the engine's numerics.

This module holds what they share: the exit codes, the client of ``--server``, errors turned
into exit codes, standard input to a file, the progress bar, and :func:`main`. The commands
are in :mod:`cranfield.remote_eval` (``eval --server``) and :mod:`cranfield.remote_nightly`
(the others), their parsers in :mod:`cranfield.remote_parsers`. Room: the top (the command
line).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import ExitStack
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


def environment():
    from .settings import CliEnvironment

    return CliEnvironment.from_environ()


def client_for(args: argparse.Namespace):
    """The :class:`~cranfield.client.Client` of ``--server``/``--api-key`` (or their
    environment variables); UsageError when no server is named."""
    from .client import Client

    env = environment()
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


def dump(doc: Any) -> None:
    import json

    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def file_or_stdin(path: str, stack: ExitStack) -> str:
    """A path to read; ``-`` is standard input copied to a temporary file first (in pieces:
    the upload is then streamed from disk like any file)."""
    import shutil
    import tempfile

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


def recorded_line(recorded: dict | None) -> None:
    if recorded:
        print(f"cranfield: recorded as {recorded.get('id')} ({recorded.get('system')}, "
              f"{recorded.get('label')})", file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    """Run the server command ``args`` names (its ``remote`` handler)."""
    return run_command(args.remote, args)
