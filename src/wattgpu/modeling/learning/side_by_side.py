"""Independent CatBoost fits run side by side, each in a worker process of its own.

Processes, not threads: every CatBoost fit sets one process-wide interrupt callback when it
starts and clears it when it ends, and its training loop reads that pointer twice per check
(test, then call). A fit that ends between another thread's two reads makes that thread call
address 0: the main job and a test worker each died once of it (SIGSEGV). In a process of its
own a fit is the only one, and CatBoost's results do not depend on where it runs.

The workers come from a fork server that has imported the fitting code once, so a pool starts
in a second or so; they are kept for the next batch of the same job and die with it, even when
it is killed with SIGKILL: each watches the job's process, not its own parent (the fork server,
which lives as long as its children do).

As with any process pool, a script that fits through this module must start under ``if __name__
== "__main__":`` (the workers import the script, and must not run it).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import pickle
import select
import shutil
import signal
import tempfile
import threading
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# What a worker runs, imported once by the fork server instead of by every worker.
PRELOAD = ("wattgpu.modeling.learning.evaluation", "wattgpu.modeling.learning.interval_check")
# How often a worker looks whether its job still runs, where it cannot wait on a pidfd.
JOB_POLL_S = 0.5

# A worker keeps this many shared values (``Shared``), the least recently used let go first: a
# study's folds of the main job's three targets, and an evaluation's.
KEPT_VALUES = 48
# The folder of a job's shared values' files: this, its process id, a dash, a random part.
SHARED_PREFIX = "wattgpu-shared-"

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()  # the main job's targets share the pool from threads of their own
_stopped = False  # ``stop`` was called: batches are refused until the next ``warm_up``


class FitCrashed(RuntimeError):
    """A worker process died while it fitted (a native crash, or killed from outside)."""


class Stopped(RuntimeError):
    """The job was stopped (``stop``): no more batches are taken."""


class Shared(Generic[T]):
    """A value that jobs name many times and each worker reads once (a study's folds).

    A job's arguments travel to its worker pickled, each time: a fold's rows, sent with every
    trial of a study, were pickled and read again for each fit. A shared value is written to a
    file the first time a job carries it; a worker reads it the first time a job names it and
    keeps it, with what its jobs derive from it (``derived``), for the jobs after.
    """

    def __init__(self, value: T) -> None:
        self.key = uuid.uuid4().hex
        self._path: str | None = None
        self._writing = threading.Lock()
        self._here: dict[str, Any] | None = {"value": value}

    @property
    def value(self) -> T:
        """The value (read from its file once per worker)."""
        return self._kept()["value"]

    def derived(self, name: str, make: Callable[[T], Any]) -> Any:
        """``make(value)``, made once per process and kept beside the value under ``name``."""
        kept = self._kept()
        if name not in kept:
            kept[name] = make(kept["value"])
        return kept[name]

    def _kept(self) -> dict[str, Any]:
        if self._here is not None:  # the process that made it
            return self._here
        kept = _kept_values.get(self.key)
        if kept is None:
            with open(self._path, "rb") as file:  # type: ignore[arg-type]
                kept = {"value": pickle.load(file)}
            _kept_values[self.key] = kept
            while len(_kept_values) > KEPT_VALUES:
                _kept_values.popitem(last=False)
        _kept_values.move_to_end(self.key)
        return kept

    def __getstate__(self) -> dict[str, Any]:
        with self._writing:
            if self._path is None:
                self._path = str(_shared_folder() / self.key)
                with open(self._path, "wb") as file:
                    pickle.dump(self.value, file, protocol=pickle.HIGHEST_PROTOCOL)
                weakref.finalize(self, _remove, self._path)  # gone with the last job naming it
        return {"key": self.key, "path": self._path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.key, self._path, self._here = state["key"], state["path"], None


_kept_values: OrderedDict[str, dict[str, Any]] = OrderedDict()
_folder: Path | None = None
_folder_lock = threading.Lock()


def _shared_folder() -> Path:
    """The folder of the shared values' files that this process wrote (removed at its exit).

    A job killed with SIGKILL cannot remove its own: the next job removes the folders of jobs
    that are gone, named by their process id.
    """
    global _folder
    with _folder_lock:
        if _folder is None:
            for left in Path(tempfile.gettempdir()).glob(f"{SHARED_PREFIX}*-*"):
                pid = left.name.removeprefix(SHARED_PREFIX).split("-", 1)[0]
                if pid.isdigit() and not _alive(int(pid)):
                    shutil.rmtree(left, ignore_errors=True)
            _folder = Path(tempfile.mkdtemp(prefix=f"{SHARED_PREFIX}{os.getpid()}-"))
            atexit.register(shutil.rmtree, _folder, True)
        return _folder


def _remove(path: str) -> None:
    Path(path).unlink(missing_ok=True)


def cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def run(task: Callable[..., T], jobs: Sequence[tuple[Any, ...]]) -> list[T]:
    """``[task(*job) for job in jobs]``, one job per core at a time, in that order.

    ``task`` must be a module-level function and the jobs picklable. With one core or one job
    the jobs run here, with no worker. An exception of a job is raised here, with the worker's
    trace as its cause.

    Raises:
        FitCrashed: a worker died mid-job; the next call starts a fresh pool.

    """
    return submit(task, jobs)()


def submit(task: Callable[..., T], jobs: Sequence[tuple[Any, ...]]) -> Callable[[], list[T]]:
    """Start ``run(task, jobs)`` in the workers; return the call that waits for its answers.

    The caller does other work meanwhile (with one core or one job, the jobs run when the
    answers are asked for). The returned call raises as ``run`` does.
    """
    return _started(task, jobs, here=min(len(jobs), cores()) <= 1)


def aside(task: Callable[..., T], *args: Any) -> Callable[[], T]:
    """Start ``task(*args)`` on a worker, beside what this process does next.

    Returns the call that waits for its answer (with one core, the call runs it here). ``task``
    must be a module-level function; it raises as ``run`` does.
    """
    answers = _started(task, [args], here=cores() <= 1)
    return lambda: answers()[0]


def _started(
    task: Callable[..., T], jobs: Sequence[tuple[Any, ...]], *, here: bool
) -> Callable[[], list[T]]:
    """The jobs submitted to the workers (``here``: run here once asked for); their answers."""
    refuse_when_stopped()
    if here:
        return lambda: [task(*job) for job in jobs]
    pool = _executor()
    futures: list[Future[T]] = []
    try:
        futures = [pool.submit(task, *job) for job in jobs]
    except BrokenProcessPool as error:
        _cancel(futures)
        raise _crashed(error) from error

    def answers() -> list[T]:
        try:
            return [future.result() for future in futures]
        except BrokenProcessPool as error:
            raise _crashed(error) from error
        finally:
            _cancel(futures)

    return answers


def warm_up() -> None:
    """Start the workers now, without waiting for them: the first batch then finds them ready.

    Their start (the fork server importing the fitting code, a few seconds) overlaps with
    whatever the job does next. A thread of its own waits for the fork server: a pool's first
    job waits until the server has imported the fitting code (the main job's first second).
    """
    global _stopped
    _stopped = False
    if cores() > 1:
        pool = _executor()
        threading.Thread(target=_start_workers, args=(pool,), daemon=True).start()


def _start_workers(pool: ProcessPoolExecutor) -> None:
    with contextlib.suppress(BrokenProcessPool, RuntimeError):  # the pool was closed meanwhile
        for _ in range(cores()):
            pool.submit(os.getpid)


def _crashed(error: BrokenProcessPool) -> FitCrashed:
    """The error of a batch whose worker died; the pool is closed, so the next starts anew."""
    close()
    return FitCrashed(f"a worker process died while it fitted ({error}); the job stopped, rerun it")


def _cancel(futures: list[Future[Any]]) -> None:
    for future in futures:
        future.cancel()


def close() -> None:
    """Stop the workers (the next ``run`` starts new ones)."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None


def stop() -> None:
    """Stop the workers and refuse new batches until the next ``warm_up`` (an interrupted job).

    A batch waiting for its answers gets ``CancelledError`` for the fits not yet started; a
    thread that asks for another batch gets ``Stopped``: the job's other threads end at once.
    """
    global _stopped
    _stopped = True
    close()


def stopped() -> bool:
    """Whether the job was stopped (``stop``) and takes no more batches."""
    return _stopped


def refuse_when_stopped() -> None:
    """Raise ``Stopped`` once the job was stopped: a step that starts then does not start.

    Every batch asks; so do the steps of a job that use no worker (packaging, registering).
    """
    if _stopped:
        raise Stopped("the job was stopped; no more work is started")


def _executor() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _new_pool()
        return _pool


def _new_pool() -> ProcessPoolExecutor:
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if context.get_start_method() == "forkserver":
        # ``__main__`` is the default: a script is imported once, not once per worker.
        context.set_forkserver_preload(["__main__", *PRELOAD])
    return ProcessPoolExecutor(
        cores(), mp_context=context, initializer=_worker_set_up, initargs=(os.getpid(),)
    )


def _worker_set_up(job: int) -> None:
    # Ctrl-C reaches the whole process group: the job answers it, its workers stay quiet.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(
        target=_exit_when_gone, args=(job,), name="wattgpu-job-watch", daemon=True
    ).start()


def _exit_when_gone(job: int) -> None:
    """Return only to kill this worker, once process ``job`` has ended."""
    try:
        if hasattr(os, "pidfd_open"):
            select.select([os.pidfd_open(job)], [], [])  # readable once the process ends
        else:
            while _alive(job):
                time.sleep(JOB_POLL_S)
    except ProcessLookupError:
        pass  # ended before this worker started
    os.kill(os.getpid(), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, as another user
    return True
