"""The promotion log: the one record of which version holds ``staging`` and ``production``.

Why it is needed: MLflow has no compare-and-set on aliases. A promotion that stalls past its
lease (``promotion_lock``) can have one write in flight when it wakes up, and an alias write
that lands then cannot be refused by the store. So the aliases are not the truth: they, and
the classic stages, are derived from this log, and every holder of the lock puts them back in
line with it (``registry``) before it moves anything and again before it reports success.

How it works. The log of ``wattgpu-power`` is a series of registered models named
``wattgpu-power.promotions.000001``, ``...000002``, ... Each entry holds, in its tags, the
whole state after one promotion (``production`` and ``staging``: a version or blank), the
promotion that wrote it (``stage``, ``version``, the lease ``owner`` token) and its decision
record. The head (highest number) is the state.

- *Commit* = ``create_registered_model`` of entry head + 1: the store's unique key on names makes
  it a compare-and-set. A holder that stalled past its lease and then commits either finds the
  number taken (whoever took the lock over committed it: nothing lands) or lands an entry that
  the next holder sees before it decides (it then compares with what that entry says, as one
  order of the two promotions would).
- *Old entries* are deleted once a newer head exists; only the head is needed. An entry
  recreated late below the head changes nothing: the head wins.
- A registry with no log yet (written by an older wattgpu) starts from its aliases.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlflow.exceptions import MlflowException

from wattgpu.lifecycle.promotion_lock import ALREADY_EXISTS, DOES_NOT_EXIST, Lease, fenced

STAGE_NAMES = ("staging", "production")


@dataclass(frozen=True)
class Entry:
    """One committed state.

    Attributes:
        seq: its number in the log.
        state: per stage, the version holding it (``None``: none).
        tags: everything the entry holds (who wrote it, its decision record, its figures).

    """

    seq: int
    state: dict[str, int | None]
    tags: dict[str, str] = field(default_factory=dict)


def entry_name(model: str, seq: int) -> str:
    """The registered-model name of entry ``seq`` of ``model``'s log."""
    return f"{model}.promotions.{seq:06d}"


def entries(client: Any, model: str) -> list[Entry]:
    """Every entry of ``model``'s log, oldest first."""
    prefix = entry_name(model, 0)[:-6]
    found = []
    for registered in _search(client, f"name LIKE '{prefix}%'"):
        suffix = registered.name[len(prefix) :]
        if registered.name.startswith(prefix) and suffix.isdigit():
            tags = dict(registered.tags)
            state = {s: int(tags[s]) if tags.get(s, "").isdigit() else None for s in STAGE_NAMES}
            found.append(Entry(int(suffix), state, tags))
    return sorted(found, key=lambda entry: entry.seq)


def head(client: Any, model: str) -> Entry | None:
    """The newest entry of ``model``'s log (``None``: no promotion was logged yet)."""
    found = entries(client, model)
    return found[-1] if found else None


def commit(
    client: Any,
    lease: Lease,
    model: str,
    after: Entry | None,
    state: dict[str, int | None],
    tags: dict[str, str],
) -> Entry | None:
    """Write entry ``after.seq + 1`` holding ``state`` (fenced); ``None`` when that number is taken.

    A taken number means that a holder that lost the lock committed late: the caller reads the
    log again and decides on what it says.

    Raises:
        LockBusy: the fence refused the write, or it returned after the lease ended.

    """
    seq = (after.seq if after else 0) + 1
    tags = {**tags, **{s: "" if v is None else str(v) for s, v in state.items()}}
    tags["owner"] = lease.owner
    try:
        fenced(client, lease, client.create_registered_model, entry_name(model, seq), tags)
    except MlflowException as exc:
        # the SQL store reads a taken name back, and may find it pruned meanwhile
        if exc.error_code not in (ALREADY_EXISTS, DOES_NOT_EXIST):
            raise
        return None
    return Entry(seq, dict(state), tags)


def prune(client: Any, lease: Lease, model: str, keep: Entry) -> None:
    """Delete the entries older than ``keep`` (fenced; one already gone is fine)."""
    for entry in entries(client, model):
        if entry.seq >= keep.seq:
            continue
        try:
            fenced(client, lease, client.delete_registered_model, entry_name(model, entry.seq))
        except MlflowException as exc:
            if exc.error_code != DOES_NOT_EXIST:
                raise


def _search(client: Any, filter_string: str) -> list[Any]:
    """Every registered model matching ``filter_string``, all pages."""
    found, token = [], None
    while True:
        page = client.search_registered_models(filter_string=filter_string, page_token=token)
        found += list(page)
        token = page.token
        if not token:
            return found
