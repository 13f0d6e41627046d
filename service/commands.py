"""``cranfield serve`` and ``cranfield keys``: the commands that start or configure the HTTP
service, found by ``cranfield`` through the ``cranfield.commands`` entry points (pyproject).

Only argparse and the standard library at import time: ``cranfield --help`` loads this module
to list the commands, and Flask is imported only when a command runs.

Each entry point is a function ``(subparsers) -> None`` that adds its subcommand and sets the
``handler`` default: a function ``(args, parser) -> int`` (``parser`` is ``cranfield``'s own, for
usage errors)."""

from __future__ import annotations

import argparse
import sys


def serve(sub) -> None:
    """``cranfield serve``: gunicorn with the repository's config."""
    parser = sub.add_parser("serve", help="run the HTTP API (development: gunicorn, as in "
                                          "production, with the repository's config)")
    parser.add_argument("--host", default=None,
                        help="default: CRANFIELD_BIND's host (127.0.0.1)")
    parser.add_argument("--port", type=int, default=None,
                        help="default: CRANFIELD_BIND's port (8000)")
    parser.add_argument("--workers", type=int, default=None,
                        help="gunicorn workers (default: the config file's)")
    parser.set_defaults(handler=run_serve)


def keys(sub) -> None:
    """``cranfield keys new``: an API key and its keys-file line."""
    parser = sub.add_parser("keys", help="make an API key for the service (it stores only the "
                                         "hash)",
                            description="Print a new API key and the line to add to "
                                        "CRANFIELD_API_KEYS_FILE (its SHA-256, role, tenant). "
                                        "The key is shown once; the service keeps only the "
                                        "hash.")
    keys_sub = parser.add_subparsers(dest="keys_command", required=True)
    new = keys_sub.add_parser("new", help="a new key and its keys-file line")
    new.add_argument("--role", choices=("read", "write", "admin"), required=True)
    new.add_argument("--tenant", required=True,
                     help="whose qrels and jobs the key sees (1-64 letters, digits, . _ -)")
    new.add_argument("--name", default=None, help="a label for logs and metrics")
    parser.set_defaults(handler=run_keys)


def run_keys(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from service.auth import TENANT, key_line, new_key

    if not TENANT.match(args.tenant):
        parser.error("--tenant must be 1-64 letters, digits, '.', '_' or '-'")
    key = new_key()
    print(f"key:  {key}")
    print(f"line: {key_line(key, args.role, args.tenant, args.name)}")
    return 0


def run_serve(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    """Start gunicorn with service/gunicorn.conf.py on HOST:PORT (replaces this process)."""
    import os
    from pathlib import Path

    from backend.config import ConfigError, bind_address

    try:
        host, port = bind_address()  # CRANFIELD_BIND, read where configuration is read
    except ConfigError as exc:
        raise SystemExit(f"cranfield serve: {exc}") from None
    host = args.host or host
    port = args.port or port
    conf = Path(__file__).resolve().parent / "gunicorn.conf.py"
    argv = [sys.executable, "-m", "gunicorn", "-c", str(conf), "--bind", f"{host}:{port}"]
    if args.workers:
        argv += ["--workers", str(args.workers)]
    argv.append("service.app:create_app()")
    print(f"Cranfield API on http://{host}:{port}  (docs: http://{host}:{port}/docs/)",
          file=sys.stderr, flush=True)
    os.execv(sys.executable, argv)
    return 0  # not reached
