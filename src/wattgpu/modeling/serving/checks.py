"""A serving set-up checked before it is simulated: refused in one line naming the field.

Each row's client must be one of ``data/clients.csv`` and suit the row's load (a closed loop or
rounds need users: ``concurrency``, or ``batch_size`` offline; a Poisson client a server's
``request_rate_rps``; a batch an offline job), and each engine knob it states must lie in
``workload.KNOB_RANGES`` (``max_num_seqs`` and ``max_batched_tokens`` whole numbers,
``chunked_prefill`` 0 or 1). Pure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.data.clients import clients
from wattgpu.errors import QueryError
from wattgpu.modeling.physical.operations import Rows, length, values
from wattgpu.modeling.serving.workload import KNOB_RANGES, client_names

# What each kind of client needs of the row, in words (``{name}``: the client).
NEEDS = {
    "closed": "client {name!r} is a closed loop of users: give concurrency for a server, "
    "or batch_size for offline",
    "rounds": "client {name!r} sends rounds of requests together: give concurrency for a "
    "server, or batch_size for offline",
    "poisson": "client {name!r} sends requests at a rate: give request_rate_rps for a server",
    "batch": "client {name!r} sends every request at once: it applies to offline only",
}


def check_setup(rows: Rows) -> None:
    """Refuse the first row whose client or engine knob the simulator cannot run.

    Raises:
        QueryError: naming the field, the row and what is allowed.

    """
    _check_knobs(rows)
    names = client_names(rows)
    known = clients().table
    unknown = np.array([str(name) not in known.index for name in names])
    if unknown.any():
        row = int(unknown.argmax())
        allowed = ", ".join(sorted(known.index))
        raise QueryError(f"client must be one of {allowed}; got {names[row]!r}", "client", row)
    n = length(rows)
    server = np.asarray(rows["scenario"] == "server") if "scenario" in rows else np.zeros(n, bool)
    users, rate, batch = (
        np.isfinite(values(rows, name, np.nan, positive=True))
        for name in ("users", "request_rate_rps", "batch_size")
    )
    suits = {
        "closed": (server & users) | (~server & batch),
        "rounds": (server & users) | (~server & batch),
        "poisson": server & rate,
        "batch": ~server,
    }
    kinds = known["kind"].reindex([str(name) for name in names]).to_numpy()
    for kind, fine in suits.items():
        bad = (kinds == kind) & ~fine
        if bad.any():
            row = int(bad.argmax())
            raise QueryError(NEEDS[kind].format(name=str(names[row])), "client", row)


def _check_knobs(rows: Rows) -> None:
    for knob, (low, high) in KNOB_RANGES.items():
        given = _stated(rows, knob)
        stated = np.isfinite(given)
        whole = knob != "chunked_prefill"
        inside = (given >= low) & (given <= high) & (~whole | (given == np.round(given)))
        if knob == "chunked_prefill":
            inside &= np.isin(given, (0.0, 1.0))
        bad = stated & ~inside
        if bad.any():
            row = int(bad.argmax())
            allowed = (
                "0 or 1" if knob == "chunked_prefill" else f"a whole number {low:.0f}-{high:.0f}"
            )
            raise QueryError(f"{knob} must be {allowed}; got {given[row]:g}", knob, row)


def _stated(rows: Rows, column: str) -> np.ndarray:
    """A column as floats, as stated (negative kept; missing or not a number: NaN)."""
    if column not in rows:
        return np.full(length(rows), np.nan)
    return np.asarray(pd.to_numeric(np.asarray(rows[column]), errors="coerce"), dtype=float)
