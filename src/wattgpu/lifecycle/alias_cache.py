"""Where a registered model's alias pointed, remembered for an SQLite store that has not changed.

Opening MLflow's SQL store costs `wattgpu predict` and `recommend` about 0.7 s of their 2-3 s
(SQLAlchemy, Alembic and the mapping of MLflow's tables), only to learn which version an alias
names and where its files lie. Both answers are kept in ``<store>.wattgpu-aliases.json`` beside
the database, under a stamp of the database file (size and modification time, and those of its
journal): any write to the store, a promotion included, changes the stamp, and the next command
asks MLflow again. As git does for its index, an answer is not kept while the database was
modified within ``SETTLE_S`` (a later write in the same clock tick could leave the stamp as it
was), nor while a journal shows a write under way. Only local model folders are kept; anything
else is always asked of MLflow. No failure of the cache is ever an error: it is then not used.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from wattgpu.lifecycle import store_creation

# A database modified less than this many seconds ago is not stamped (see the module docstring).
SETTLE_S = 2.0
SUFFIX = ".wattgpu-aliases.json"
# SQLite's files beside the database while a write is under way (rollback journal, WAL).
JOURNALS = ("-journal", "-wal")


def _stamp(database: Path) -> list[int] | None:
    """The database's (size, mtime in ns) and its journals', or None when it cannot be trusted."""
    try:
        stat = database.stat()
    except OSError:
        return None
    if time.time() - stat.st_mtime < SETTLE_S:
        return None
    stamp = [stat.st_size, stat.st_mtime_ns]
    for suffix in JOURNALS:
        journal = database.with_name(database.name + suffix)
        if journal.exists():
            try:
                size = journal.stat().st_size
            except OSError:
                return None
            if size:  # a journal with content: a write is under way or was interrupted
                return None
    return stamp


def _read(database: Path) -> dict:
    try:
        return json.loads(database.with_name(database.name + SUFFIX).read_text())
    except (OSError, ValueError):
        return {}


def lookup(tracking_uri: str, name: str, alias: str) -> tuple[int | None, str] | None:
    """(version, local model folder) of ``name@alias`` if kept for the store as it is now.

    ``(None, "")``: no version held the alias (an optional model, such as TTFT, not trained).
    """
    database = store_creation.sqlite_file(tracking_uri)
    if database is None:
        return None
    stamp = _stamp(database)
    kept = _read(database)
    if stamp is None or kept.get("stamp") != stamp:
        return None
    found = kept.get("aliases", {}).get(f"{name}@{alias}")
    if found == [None, ""]:
        return None, ""
    if not isinstance(found, list) or len(found) != 2 or not Path(str(found[1])).is_dir():
        return None
    return int(found[0]), str(found[1])


def remember(
    tracking_uri: str,
    name: str,
    alias: str,
    answer: tuple[int | None, str],
    before: list[int] | None,
) -> None:
    """Keep ``name@alias`` -> ``answer`` (version, local model folder) for the store as it is.

    ``(None, "")`` keeps that no version holds the alias. ``before`` is ``stamp_now`` taken
    before MLflow was asked: when the store changed since (a promotion between the question and
    now), nothing is kept.
    """
    version, location = answer
    database = store_creation.sqlite_file(tracking_uri)
    if database is None or before is None:
        return
    if version is not None and not (location and Path(location).is_dir()):
        return
    stamp = _stamp(database)
    if stamp != before:
        return
    kept = _read(database)
    aliases = kept.get("aliases", {}) if kept.get("stamp") == stamp else {}
    aliases[f"{name}@{alias}"] = (
        [None, ""] if version is None else [int(version), str(Path(location).resolve())]
    )
    target = database.with_name(database.name + SUFFIX)
    partial = target.with_name(f"{target.name}.{os.getpid()}")
    try:
        partial.write_text(json.dumps({"stamp": stamp, "aliases": aliases}))
        os.replace(partial, target)  # readers see the old file or the new one, never half
    except OSError:
        partial.unlink(missing_ok=True)


def stamp_now(tracking_uri: str) -> list[int] | None:
    """The stamp of the store's database now (None: no SQLite store, or one not to trust)."""
    database = store_creation.sqlite_file(tracking_uri)
    return None if database is None else _stamp(database)
