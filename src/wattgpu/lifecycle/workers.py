"""Who runs a tuning job, and whether it is still alive: the records of a killed job are swept.

A tuning job stamps its MLflow parent run and each Optuna trial with its worker identity,
``host:pid:start``, where ``start`` is the process's start time in clock ticks since boot
(``/proc/PID/stat``), so a pid the kernel reused for another process does not pass for the
dead one. A later job of the same study asks ``is_dead`` of every record still marked running.
A worker on this host is checked by its process; one on another machine by its last heartbeat
(the MLflow run's, given by the caller; Optuna's own heartbeat fails such a worker's trials).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path


def identity(pid: int | None = None) -> str:
    """``host:pid:start`` of a process (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


# A worker on another machine beats every HEARTBEAT_S; one silent for HEARTBEAT_GRACE_S is dead.
HEARTBEAT_S = 30.0
HEARTBEAT_GRACE_S = 120.0


def is_dead(worker: str, last_beat: float | None = None) -> bool:
    """True when ``worker`` (an ``identity``) is known to be dead.

    On this host: its process is gone. On another: ``last_beat`` (Unix time) is older than
    ``HEARTBEAT_GRACE_S``. False when it is alive, or nothing says otherwise (no heartbeat, an
    unreadable identity): a record is only swept when its owner is known to be dead.
    """
    try:
        host, pid, start = worker.rsplit(":", 2)
        pid_number = int(pid)
    except ValueError:
        return False
    if host == socket.gethostname() and start:
        return _start_ticks(pid_number) != start
    return last_beat is not None and time.time() - last_beat > HEARTBEAT_GRACE_S


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
