"""A lock in the MLflow Model Registry that serialises promotions of one registered model.

Why it is needed: the registry has no transactions, and the quality gate is a read (production's
LOGO MdAPE) followed by writes (the decision tag, the alias). Two promotions interleaving
compare against the same production and both win, so the gate must run under a lock that every
promoter of the model takes, on SQLite as through a tracking server, with nothing but the
registry's own API.

How it works. The lock of ``wattgpu-power`` is a registered model named
``wattgpu-power.promotion-lock`` whose tags say who holds it (``owner``: a fresh random id per
attempt, with host and pid for people) and until when (``expires``: Unix time, a lease of
``LEASE_S`` seconds).

- *Acquire* = ``create_registered_model(lock)``. The store's unique key on model names makes
  this an atomic test-and-set: of two creators exactly one succeeds (SQLite and PostgreSQL
  enforce the key in one statement; a tracking server passes the same error back as
  ``RESOURCE_ALREADY_EXISTS``). Name and tags are written in one transaction, so nobody sees a
  lock without its owner.
- *Release* = rename the lock to ``<lock>.gone-<owner>``, then delete that name. The lock of
  owner X only ever leaves its name by a rename to ``<lock>.gone-X``, a name unique to X, so the
  rename succeeds only while the lock under the name is still X's: an atomic compare-and-delete.
  A holder never deletes the lock by its shared name, which could remove someone else's.
- *A holder that dies* (SIGKILL, lost machine) leaves its lock until the lease expires. A
  waiter that reads an expired lease takes it away with the same rename (``<lock>.gone-X``:
  of several waiters only one rename succeeds, and none can hit a newer lock, whose owner
  differs), then races for the lock again by creating it. The taker leaves the ``gone-X``
  model behind: deleting it would let a slow waiter that read X's expired lease rename a newer
  lock later. Such tombstones appear only when a holder died.
- *A holder that overruns its lease* could have been taken over, so it checks the lease
  (``check``) right before the write that commits the promotion and gives up if fewer than
  ``MARGIN_S`` seconds are left; the margin also covers clock skew between machines. It deletes
  its tombstone only while well inside its lease, when no waiter can have seen it expired.

A promotion takes about a second; the lease is ``LEASE_S`` = 30 s, and a waiter waits up to
``WAIT_S`` = 60 s, so a dead holder delays the next promotion by at most its lease.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from wattgpu.errors import WattgpuError

LEASE_S = 30.0
WAIT_S = 60.0
MARGIN_S = 5.0
ALREADY_EXISTS = "RESOURCE_ALREADY_EXISTS"
DOES_NOT_EXIST = "RESOURCE_DOES_NOT_EXIST"


class LockBusy(WattgpuError):
    """Another promotion of the same model holds the lock (or this one lost it)."""


@dataclass(frozen=True)
class Lease:
    """A held lock: its registered-model name, this holder's id and the lease's end."""

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
    client: MlflowClient, model: str, wait_s: float = WAIT_S, lease_s: float = LEASE_S
) -> Iterator[Lease]:
    """Hold ``model``'s promotion lock for the block (see the module's comment)."""
    lease = acquire(client, model, wait_s, lease_s)
    try:
        yield lease
    finally:
        release(client, lease)


def acquire(client: MlflowClient, model: str, wait_s: float, lease_s: float) -> Lease:
    """Create the lock, taking away an expired one; wait up to ``wait_s`` for a live one.

    Raises:
        LockBusy: a live holder kept the lock for ``wait_s`` seconds.

    """
    name = lock_name(model)
    deadline = time.monotonic() + wait_s
    while True:
        lease = Lease(name, os.urandom(8).hex(), time.time() + lease_s)
        tags = {
            "owner": lease.owner,
            "expires": f"{lease.expires:.3f}",
            "holder": f"{socket.gethostname()} pid {os.getpid()}",
        }
        try:
            client.create_registered_model(
                name, tags=tags, description=f"promotion lock of {model} (wattgpu)"
            )
            return lease
        except MlflowException as exc:
            # The SQL store answers a taken name by reading the holder back; when the holder
            # released it in between, that read says "not found": the lock is free, try again.
            if exc.error_code == DOES_NOT_EXIST:
                continue
            if exc.error_code != ALREADY_EXISTS:
                raise
        holder = _holder(client, name)
        if holder is not None and _expires(holder) < time.time():
            _rename(client, name, tombstone(name, holder.get("owner", "")))
            continue
        if time.monotonic() > deadline:
            who = holder.get("holder", "?") if holder else "?"
            raise LockBusy(
                f"another promotion of {model} holds the lock ({who}) after {wait_s:.0f} s; "
                f"try again, or delete registered model {name!r} if its holder is gone"
            )
        time.sleep(0.1 + random.random() * 0.3)  # jitter: waiters do not retry in step


def check(lease: Lease) -> None:
    """Raise ``LockBusy`` when too little of the lease is left to commit safely."""
    if time.time() > lease.expires - MARGIN_S:
        raise LockBusy(
            f"the promotion lock's lease ran out before the promotion was committed; "
            f"nothing was moved, try again (lock {lease.name!r})"
        )


def release(client: MlflowClient, lease: Lease) -> None:
    """Give the lock back, unless a waiter already took it away after the lease expired."""
    gone = tombstone(lease.name, lease.owner)
    if not _rename(client, lease.name, gone):
        return
    if time.time() < lease.expires - MARGIN_S:
        client.delete_registered_model(gone)


def _holder(client: MlflowClient, name: str) -> dict[str, str] | None:
    try:
        return dict(client.get_registered_model(name).tags)
    except MlflowException:
        return None  # released between our create and this read: try again


def _expires(tags: dict[str, str]) -> float:
    try:
        return float(tags.get("expires", "0"))
    except ValueError:
        return 0.0  # a lock without a readable lease was not written by us: it is stale


def _rename(client: MlflowClient, name: str, new_name: str) -> bool:
    """Rename ``name``; False when it is gone or ``new_name`` exists (someone else did it)."""
    try:
        client.rename_registered_model(name, new_name)
        return True
    except MlflowException as exc:
        if exc.error_code in (ALREADY_EXISTS, DOES_NOT_EXIST):
            return False
        raise
