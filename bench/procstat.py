"""What the service benchmarks read of other processes, from Linux's /proc: their children and
their CPU time. Cheap enough to call while measuring (no scan of all of /proc)."""

from __future__ import annotations

import os
from pathlib import Path


def children(pid: int) -> list[int]:
    """A process's children (forked by its main thread: gunicorn's workers, an RQ worker's
    work horse and scheduler), from the kernel's own list, in pid order."""
    try:
        return sorted(int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text()
                      .split())
    except OSError:
        return []


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and of the children it has waited for (an RQ
    worker's work horses), in seconds; 0 for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
