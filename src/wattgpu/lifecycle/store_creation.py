"""Creating a store's tables once, when several jobs open a fresh store at the same moment.

MLflow (its tracking and registry tables) and Optuna (its schema) create their tables when a
store is first opened, each with a check-then-create that two processes can both pass: the
loser dies with ``table ... already exists``. Two ways to serialise that:

- an SQLite file: an exclusive ``flock`` on ``<database>.lock`` beside it, held while the store
  is opened (a second opener waits, then finds the tables there);
- a server database (PostgreSQL, MySQL): no shared file, so the opening is retried while it
  fails with "already exists" (or a schema that the other creator has not finished), which
  passes once the other creator is done.

Any other store (a tracking server, which creates its own tables) is opened as it is.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# How long a server database's creation race may last before the error is shown as it is.
RETRY_S = 30.0
# Words of the errors a creator that lost the race meets (SQLite, PostgreSQL, MySQL; MLflow's
# check of a schema another process is still upgrading).
RACE_WORDS = ("already exists", "duplicate", "out-of-date database schema", "unique constraint")


def sqlite_file(url: str) -> Path | None:
    """The database file of an ``sqlite:///`` URL (``None`` for any other store)."""
    if not url.startswith("sqlite:///"):
        return None
    return Path(url.removeprefix("sqlite:///").split("?", 1)[0]).expanduser().resolve()


def is_server_database(url: str) -> bool:
    """A SQLAlchemy URL of a database server (``postgresql+psycopg2://``, ``mysql://``, ...)."""
    scheme = url.split("://", 1)[0]
    return "://" in url and scheme.split("+")[0] in ("postgresql", "mysql", "mssql")


@contextmanager
def file_lock(database: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<database>.lock`` beside the database for the block.

    No folder is made: a database in a folder that does not exist is the caller's to refuse
    (SQLite says "unable to open database file"), so without its folder no lock is taken.
    """
    if not database.parent.is_dir():
        yield
        return
    with open(database.with_name(database.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        yield


def opened_once(url: str, open_store: Callable[[], T]) -> T:
    """``open_store()``, serialised against other processes opening the same fresh store.

    Args:
        url: the store's URL (decides the strategy: see the module's comment).
        open_store: opens the store, creating its tables when they are missing.

    """
    database = sqlite_file(url)
    if database is not None:
        with file_lock(database):
            return open_store()
    if not is_server_database(url):
        return open_store()
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            return open_store()
        except Exception as exc:  # SQLAlchemy, driver and MLflow errors come in many types
            if time.monotonic() > deadline or not lost_race(exc):
                raise
            time.sleep(0.5)


def lost_race(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) says that another process created the table first."""
    for _ in range(10):  # a chain of causes, never a cycle followed forever
        if exc is None:
            return False
        if any(word in str(exc).lower() for word in RACE_WORDS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
