"""The test suite's wall time, on an idle machine and beside a chosen load (issue #29).

    .venv/bin/python -m bench.suite_time              # idle: the suite alone
    .venv/bin/python -m bench.suite_time --load 4     # beside four CPU-bound processes

Runs ``make test``'s pytest command (``python -m pytest -q``, with ``CI=true`` so nothing
skips) in the repository, with ``--load`` busy processes (each an endless arithmetic loop)
started first and killed after, and prints: the wall time, pytest's own summary line, the
1-minute load average sampled every 5 s (mean and max), and the machine's cores. A load of 4
on these 2-core machines means two runnable processes per core beside the suite's own.

This is a measurement, not a test: nothing here fails on a time. The suite's tests wait on
events (or on bounds derived from work measured in the same run), so a busy machine makes the
run longer, not red: the exit code is pytest's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def burn() -> None:  # pragma: no cover - runs in a child process until killed
    x = 0
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", type=int, default=0,
                        help="CPU-bound processes to run beside the suite (default 0)")
    parser.add_argument("pytest_args", nargs="*",
                        help="arguments for pytest instead of the whole suite")
    args = parser.parse_args(argv)

    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(args.load)]
    for proc in burners:
        proc.start()
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(5):
            samples.append(load_average())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    env = {**os.environ, "CI": "true"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               *args.pytest_args]
    start = time.perf_counter()
    out = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    done.set()
    for proc in burners:
        proc.kill()
        proc.join()
    summary = next((line for line in reversed(out.stdout.splitlines())
                    if re.search(r"\b(passed|failed|error)", line)), "(no summary)")
    cores = os.cpu_count()
    print(f"suite: {' '.join(command[1:])} (CI=true), {args.load} busy processes beside it")
    print(f"wall time: {wall:.1f} s ({wall / 60:.1f} min)")
    print(f"pytest: {summary.strip('= ')}")
    if samples:
        print(f"load average (1 min, every 5 s): mean {sum(samples) / len(samples):.1f}, "
              f"max {max(samples):.1f}, on {cores} cores")
    if out.returncode:
        print(out.stdout[-4000:], out.stderr[-2000:], sep="\n")
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
