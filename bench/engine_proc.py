"""What the engine benchmark's workers and cases share (issue #30): this process's memory and
CPU time, its children's, the load average, the trec_eval binary it runs and how a worker
prints its measurement. Standard library only: a worker imports this before the tool under
test, so its memory holds nothing of ours."""

from __future__ import annotations

import os
import pickle
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
#: The machine's cores: a tool using all of them can at most divide its wall time by this.
CORES = os.cpu_count() or 1


def current_rss_mb() -> float:
    """Resident set size of this process now, in MB."""
    with open("/proc/self/statm") as handle:
        resident_pages = int(handle.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def peak_rss_mb() -> float:
    """This process's high-water mark (``VmHWM``: ``ru_maxrss`` would carry the driver's)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def children_peak_rss_mb() -> float:
    """Largest peak RSS of the waited-for children (``ru_maxrss``), in MB."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6


def children_cpu() -> float:
    """User + system CPU seconds of the waited-for children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def _other_threads_ticks() -> int:
    """CPU clock ticks used so far by this process's threads other than the calling one
    (/proc/self/task/*/stat utime + stime; 0 where /proc is not there)."""
    me, total = threading.get_native_id(), 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:  # (the thread ended)
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def settle_threads(step: float = 0.02, limit: float = 2.0) -> float:
    """Wait until this process's other threads stop using CPU, at most ``limit`` seconds;
    returns the seconds waited. numpy's import-time check (a float32 dot) wakes OpenBLAS's
    thread pool, which spins about 0.1 s before it sleeps: a clock started inside that spin
    charges every tool that imported numpy just before it (cranfield's warm-up import
    does) with another thread's CPU, and on 2 cores with a core's share under load. A
    long-lived process never pays it per call, so no timed span here does either."""
    started = time.perf_counter()
    before = _other_threads_ticks()
    while time.perf_counter() - started < limit:
        time.sleep(step)
        now = _other_threads_ticks()
        if now == before:
            break
        before = now
    return time.perf_counter() - started


class Clock:
    """Wall and CPU time (this process's, all its threads) of a block, and the load at its
    start: ``with Clock() as c: ...; c.wall, c.cpu``."""

    def __enter__(self) -> Clock:
        self.settled = settle_threads()
        self.load = load()
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def load_pickle(path: str):
    with open(path, "rb") as handle:
        return pickle.load(handle)


def import_cranfield():
    """cranfield, with what an evaluation imports already loaded: ``import cranfield`` is
    lazy (a name loads its module on first use), so without this the timed call would pay
    the imports that pytrec_eval and ranx pay before the clock. A one-topic evaluation of
    mappings loads them (about 0.2 s of CPU here, where no bytecode is cached)."""
    try:
        import cranfield
    except ImportError:  # not installed: the working tree's package
        sys.path.append(str(REPO_ROOT))
        import cranfield
    _ = cranfield.read_run, cranfield.read_qrels
    _ = cranfield.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0, "e": 0.5}},
                           ["map", "ndcg_cut.10", "P.10", "recall.100", "recip_rank"]).per_topic
    return cranfield


def cranfield_map(evaluation) -> float | None:
    """Mean ``map`` of a cranfield evaluation, if it has one (a sanity figure, untimed)."""
    try:
        return float(evaluation.aggregate["map"])
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def pytrec_map(per_topic: dict) -> float:
    """Mean ``map`` over a pytrec_eval result."""
    values = [topic["map"] for topic in per_topic.values()]
    return sum(values) / len(values)


def trec_eval_binary(given: str | None = None) -> str | None:
    """The trec_eval binary to run: ``given`` (``--trec-eval``), else the one on PATH."""
    if given:
        return str(Path(given).resolve()) if Path(given).is_file() else None
    return shutil.which("trec_eval")


def trec_eval_version(binary: str | None) -> str:
    """What ``trec_eval -v`` says (it prints on stdout or stderr, by version)."""
    if not binary:
        return "none"
    try:
        done = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"
    return (done.stdout + done.stderr).strip().splitlines()[0] if (done.stdout + done.stderr
                                                                   ).strip() else "unknown"


def ratio_text(slow: float, fast: float) -> str:
    return f"{slow / fast:.2f}x" if fast else "n/a"
