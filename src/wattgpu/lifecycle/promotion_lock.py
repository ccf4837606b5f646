"""A lock in the MLflow Model Registry that serialises the writes to one registered model.

Why it is needed: the registry has no transactions, and the quality gate is a read (production's
LOGO MdAPE) followed by writes (the alias, the stages, the decision tag). Two promotions
interleaving compare against the same production and both win; a ``register`` racing a
promotion can lose its ``challenger`` alias. So promotions and registrations of a model run
under a lock that every writer of the model takes, on SQLite as through a tracking server, with
nothing but the registry's own API.

How it works. The lock of ``wattgpu-power`` is a registered model named
``wattgpu-power.promotion-lock`` whose tags say who holds it (``owner``: a fresh random id per
attempt, the fencing token; ``holder``: host and pid, for people) and for how long (``lease_s``).

- *Acquire* = ``create_registered_model(lock)``. The store's unique key on model names makes
  this an atomic test-and-set: of two creators exactly one succeeds (SQLite and PostgreSQL
  enforce the key in one statement; a tracking server passes the same error back as
  ``RESOURCE_ALREADY_EXISTS``). Name and tags are written in one transaction, so nobody sees a
  lock without its owner.
- *The lease is measured, never compared between clocks.* The holder's lease runs on its own
  monotonic clock from just before its create request was sent; a waiter's runs on the waiter's
  own monotonic clock from the first read that showed it that very lock (same ``owner``), which
  came back after the lock was created. So the holder's lease always ends before any waiter can
  judge it expired, whatever the two machines' wall clocks say: no expiry time is written, and
  no timestamp is read, because on an SQLite or PostgreSQL URI the "registry's" timestamps are
  each client's own clock (the store runs in the client), so they are no common clock either.
- *Release* = rename the lock to ``<lock>.gone-<owner>``, then delete that name. The lock of
  owner X only ever leaves its name by a rename to ``<lock>.gone-X``, a name unique to X, so the
  rename succeeds only while the lock under the name is still X's: an atomic compare-and-delete.
  A holder never deletes the lock by its shared name, which could remove someone else's.
- *A holder that stalls or dies* (SIGSTOP, a REST call retrying for minutes, SIGKILL, a lost
  machine) keeps its lock until its lease is over; a waiter that has seen the same lock for a
  whole lease takes it away with the same rename (``<lock>.gone-X``: of several waiters only one
  rename succeeds, and none can hit a newer lock, whose owner differs), then races for the lock
  again by creating it. The taker leaves the ``gone-X`` model behind: deleting it would let a
  slow waiter that saw X's lease run out rename a newer lock later. Such tombstones appear only
  when a holder stalled or died.
- *Fencing.* Every write of a promotion (and a registration's version and alias) is fenced
  (``fenced``, ``fence``): right before it, the holder checks on its own clock that at least
  ``MARGIN_S`` of its lease is left and reads the lock back to see its own ``owner`` token under
  the name; right after it, that the write returned inside the lease. A stalled holder that
  wakes up after a takeover is refused at its next write. What the fence cannot do: the registry
  has no conditional write, so a write whose request was sent after a passed check and then took
  longer than ``MARGIN_S`` to reach the store (one request, with MLflow's retries) can still
  land after a takeover. The holder then learns it (the write returns past its lease) and says
  so; the next promotion tidies the aliases and stages again from the aliases.

A promotion takes about a second; the lease is ``LEASE_S`` = 30 s, and a waiter waits up to
``WAIT_S`` = 60 s, so a dead holder delays the next promotion by at most one lease
(``configure`` sets them from ``WATTGPU_PROMOTION_LEASE_S``, read once by the CLI).

*SQLite's own lock.* A process stopped inside a write transaction (SIGSTOP, a debugger) holds
the whole SQLite file locked, and every other writer fails with "database is locked". Every
registry call of a promotion goes through ``patient``: such a call is retried until at least a
lease has passed (a transaction that failed so was rolled back, so a retry cannot write twice),
then it gives up with one ``StoreLocked`` line.
"""

from __future__ import annotations

import functools
import os
import random
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from wattgpu.errors import ConfigError, WattgpuError

LEASE_S = 30.0
WAIT_S = 60.0
MARGIN_S = 5.0
ALREADY_EXISTS = "RESOURCE_ALREADY_EXISTS"
DOES_NOT_EXIST = "RESOURCE_DOES_NOT_EXIST"
T = TypeVar("T")


class LockBusy(WattgpuError):
    """Another promotion of the same model holds the lock (or this one lost it)."""


class StoreLocked(LockBusy):
    """The SQLite store stayed locked by another process for longer than a lease."""


def configure(lease_s: float) -> None:
    """Set the lease (seconds), the wait (two leases) and the fence's margin (a sixth of a lease).

    Raises:
        ConfigError: ``lease_s`` is not a positive number.

    """
    global LEASE_S, WAIT_S, MARGIN_S
    if not lease_s > 0:
        raise ConfigError(
            f"the promotion lease must be a positive number of seconds; got {lease_s}"
        )
    LEASE_S, WAIT_S, MARGIN_S = lease_s, 2 * lease_s, lease_s / 6


class patient:  # noqa: N801 - used like a function: ``patient(MlflowClient())``
    """An ``MlflowClient`` whose calls wait out SQLite's "database is locked" for a lease or more.

    A call that fails so is retried until ``LEASE_S`` has passed since it was made, then
    ``StoreLocked`` says so in one line. Any other error passes through at once.
    """

    def __init__(self, client: MlflowClient) -> None:
        """Wrap ``client``."""
        self._client = client

    def __getattr__(self, name: str) -> Any:
        """The client's attribute; a method comes back wrapped in the retry."""
        found = getattr(self._client, name)
        if not callable(found):
            return found

        @functools.wraps(found)
        def call(*args: Any, **kwargs: Any) -> Any:
            first = time.monotonic()
            while True:
                try:
                    return found(*args, **kwargs)
                except MlflowException as exc:
                    if "database is locked" not in str(exc.message):
                        raise
                    if time.monotonic() - first > LEASE_S:
                        raise StoreLocked(
                            f"the SQLite store stayed locked by another process for "
                            f"{time.monotonic() - first:.0f} s, past a {LEASE_S:g} s lease (a "
                            f"stalled job or promotion holds a write transaction); nothing was "
                            f"written by this call, try again once that process is gone"
                        ) from None
                    time.sleep(0.5)

        return call


@dataclass(frozen=True)
class Lease:
    """A held lock: its registered-model name, this holder's token and the lease's end.

    Attributes:
        name: the lock's registered-model name.
        owner: this holder's random token, written on the lock as tag ``owner``.
        expires: the end of the lease on this process's ``time.monotonic()`` clock.

    """

    name: str
    owner: str
    expires: float


def lock_name(model: str) -> str:
    """The registered model that serves as ``model``'s promotion lock."""
    return f"{model}.promotion-lock"


def tombstone(name: str, owner: str) -> str:
    """The one name the lock of ``owner`` is renamed to when it leaves ``name``."""
    return f"{name}.gone-{owner}"


@contextmanager
def held(
    client: MlflowClient, model: str, wait_s: float | None = None, lease_s: float | None = None
) -> Iterator[Lease]:
    """Hold ``model``'s promotion lock for the block (see the module's comment).

    ``wait_s`` and ``lease_s`` default to the module's ``WAIT_S`` and ``LEASE_S`` at call time.
    """
    lease = acquire(client, model, WAIT_S if wait_s is None else wait_s, lease_s)
    try:
        yield lease
    finally:
        release(client, lease)


def acquire(client: MlflowClient, model: str, wait_s: float, lease_s: float | None = None) -> Lease:
    """Create the lock, taking away one whose lease ran out; wait up to ``wait_s`` for a live one.

    Raises:
        LockBusy: a live holder kept the lock for ``wait_s`` seconds.

    """
    lease_s = LEASE_S if lease_s is None else lease_s
    name = lock_name(model)
    deadline = time.monotonic() + wait_s
    seen: tuple[str, float] | None = None  # (owner, when this process first saw that lock)
    while True:
        owner = os.urandom(8).hex()
        started = time.monotonic()  # before the request: the lease ends no later than we think
        tags = {
            "owner": owner,
            "lease_s": f"{lease_s:g}",
            "holder": f"{socket.gethostname()} pid {os.getpid()}",
        }
        try:
            client.create_registered_model(
                name, tags=tags, description=f"promotion lock of {model} (wattgpu)"
            )
            lease = Lease(name, owner, started + lease_s)
            if time.monotonic() < started + lease_s / 2:
                return lease
            # The store kept the request half a lease or more (a locked SQLite file, a slow
            # server): a lock with little lease left is of no use. Give it back, take it afresh.
            release(client, lease)
            if time.monotonic() > deadline:
                raise LockBusy(
                    f"the registry took half a {lease_s:g} s lease or more to answer each "
                    f"attempt to take the promotion lock of {model} for {wait_s:.0f} s; try again"
                )
            continue
        except MlflowException as exc:
            # The SQL store answers a taken name by reading the holder back; when the holder
            # released it in between, that read says "not found": the lock is free, try again.
            if exc.error_code == DOES_NOT_EXIST:
                continue
            if exc.error_code != ALREADY_EXISTS:
                raise
        holder = _holder(client, name)
        now = time.monotonic()  # after the read: the lock we saw existed before this instant
        if holder is None:
            continue
        if seen is None or seen[0] != holder.get("owner", ""):
            seen = (holder.get("owner", ""), now)
        elif now - seen[1] > _lease_of(holder):
            _rename(client, name, tombstone(name, seen[0]))
            seen = None
            continue
        if now > deadline:
            raise LockBusy(
                f"another promotion of {model} holds the lock ({holder.get('holder', '?')}) "
                f"after {wait_s:.0f} s; try again, or delete registered model {name!r} if its "
                f"holder is gone"
            )
        time.sleep(0.1 + random.random() * 0.3)  # jitter: waiters do not retry in step


def check(lease: Lease) -> None:
    """Raise ``LockBusy`` when less than ``MARGIN_S`` of the lease is left on this clock."""
    if time.monotonic() > lease.expires - MARGIN_S:
        raise LockBusy(
            f"lost the promotion lock: its lease ran out before the write was made "
            f"(lock {lease.name!r}); the write was refused, try again"
        )


def fence(client: MlflowClient, lease: Lease) -> None:
    """Raise ``LockBusy`` unless this holder still holds the lock, with the margin left.

    The lease on this process's clock, then the lock's ``owner`` read back from the registry
    (someone who took the lock over, or deleted it by hand, has another token there), then the
    lease again (the read itself may have stalled).
    """
    check(lease)
    holder = _holder(client, lease.name)
    if holder is None or holder.get("owner") != lease.owner:
        raise LockBusy(
            f"lost the promotion lock: {lease.name!r} is no longer held by this promotion "
            f"(token {lease.owner}); the write was refused, try again"
        )
    check(lease)


def fenced(client: MlflowClient, lease: Lease, write: Callable[..., T], *args: Any) -> T:
    """Make one registry write under the fence (see the module's comment); return its answer.

    Raises:
        LockBusy: the fence refused the write, or the write returned after the lease ended (it
            may have landed after a takeover).

    """
    fence(client, lease)
    answer = write(*args)
    if time.monotonic() > lease.expires:
        raise LockBusy(
            f"a registry write ({getattr(write, '__name__', write)}) returned after the promotion "
            f"lock's lease ended, so it may have landed after another promotion took the lock "
            f"over; run the promotion again to check the aliases"
        )
    return answer


def release(client: MlflowClient, lease: Lease) -> None:
    """Give the lock back, unless a waiter already took it away after the lease ran out."""
    gone = tombstone(lease.name, lease.owner)
    if not _rename(client, lease.name, gone):
        return
    if time.monotonic() < lease.expires - MARGIN_S:
        client.delete_registered_model(gone)


def _holder(client: MlflowClient, name: str) -> dict[str, str] | None:
    try:
        return dict(client.get_registered_model(name).tags)
    except MlflowException as exc:
        if exc.error_code == DOES_NOT_EXIST:
            return None  # released between our create and this read: try again
        raise


def _lease_of(tags: dict[str, str]) -> float:
    try:
        return float(tags.get("lease_s", LEASE_S))
    except ValueError:
        return LEASE_S  # a lock without a readable lease was not written by us: the default


def _rename(client: MlflowClient, name: str, new_name: str) -> bool:
    """Rename ``name``; False when it is gone or ``new_name`` exists (someone else did it)."""
    try:
        client.rename_registered_model(name, new_name)
        return True
    except MlflowException as exc:
        if exc.error_code in (ALREADY_EXISTS, DOES_NOT_EXIST):
            return False
        raise
