"""``cranfield worker``: an RQ worker on Cranfield's queue, found by ``cranfield`` through the
``cranfield.commands`` entry point (pyproject).

Only argparse and the standard library at import time (``cranfield --help`` loads this
module); RQ and Redis are imported when the command runs (``worker.cli.run_worker``)."""

from __future__ import annotations

import argparse


def worker(sub) -> None:
    """Adds ``cranfield worker`` to ``cranfield``'s subcommands."""
    parser = sub.add_parser("worker", help="run an RQ worker for queued evaluations")
    parser.add_argument("--redis-url", default=None, help="default: $REDIS_URL")
    parser.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    parser.add_argument("--name", default=None)
    parser.add_argument("--monitoring-interval", type=int, default=None,
                        help="seconds between job heartbeats (default 10; a heartbeat lapses "
                             "20 s after it is due)")
    parser.add_argument("--maintenance-interval", type=int, default=None,
                        help="seconds between registry clean-ups that retry jobs of dead "
                             "workers (default 10: a killed worker's job is taken over within "
                             "~45 s)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> int:
    from worker.cli import run_worker

    return run_worker(args.redis_url, burst=args.burst, name=args.name,
                      monitoring_interval=args.monitoring_interval,
                      maintenance_interval=args.maintenance_interval)
