"""Who runs a tuning job, and whether it is still alive: the records of a killed job are swept.

A tuning job stamps its MLflow parent run and each Optuna trial with its worker identity,
``host:pid:start``, where ``start`` is the process's start time in clock ticks since boot
(``/proc/PID/stat``), so a pid the kernel reused for another process does not pass for the
dead one. A later job of the same study asks ``is_dead`` of every record still marked running.
Only a worker on this host can be checked; one on another machine is left to Optuna's
heartbeat (its trials fail after the grace period) and to its own host's next job.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def identity(pid: int | None = None) -> str:
    """``host:pid:start`` of a process (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def is_dead(worker: str) -> bool:
    """True when ``worker`` (an ``identity``) ran on this host and its process is gone.

    False when it is alive, ran elsewhere, or the identity cannot be read: a record is only
    swept when its owner is known to be dead.
    """
    try:
        host, pid, start = worker.rsplit(":", 2)
        pid_number = int(pid)
    except ValueError:
        return False
    if host != socket.gethostname() or not start:
        return False
    return _start_ticks(pid_number) != start


def _start_ticks(pid: int) -> str:
    """Field 22 of ``/proc/PID/stat`` (start time), or "" when the process does not exist.

    A zombie (exited, not yet reaped by its parent) counts as gone: it runs nothing.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    # the command name (field 2) may hold spaces and parentheses: split after its last ")"
    fields = stat.rsplit(")", 1)[1].split()
    state, start = fields[0], fields[19]
    return "" if state in ("Z", "X") else start
