"""TTFT tails from measured ratios: the median times the measured p90 / median at that many users.

No change to the simulated loop reaches the measured TTFT tails (serving_dynamics.md, section G;
``bench/tails.py``): on LLM-Pilot's rows, one GPU left out, the simulation's own ratio is 20.8 /
26.5 % off at p90 / p99, a pooled measured ratio 11.6 / 24.5 %, the measured ratio at the row's
number of users 8.2 / 21.7 %. So a TTFT tail is the median times the training rows' measured
ratio for the query's kind of client (a closed loop of users, today's only measured kind) at its
number of users: the median of log(percentile / median) over the rows at each number of users,
linear in log(users) between two, the nearest beyond them.

The ratio stands for the set-up that was measured: a client of that kind whose lengths vary, the
engine's own knobs. A query that states a spread of lengths or an engine knob, or whose client
sends equal lengths, is the simulation's to answer (``answering.tails``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.clients import clients
from wattgpu.modeling.answering.queries import SETUP_FIELDS
from wattgpu.modeling.physical.operations import values
from wattgpu.modeling.serving.workload import assumed_spread, client_names

# The tails every latency answer gives (``answering.tails``), and the ratios are fitted for.
PERCENTILES = ("p90", "p99")
# The fewest measured rows at one number of users that give it a ratio.
MIN_ROWS = 3
# The targets whose tails come from measured ratios (ITL's the jittered simulation carries).
RATIO_TARGETS = ("ttft",)


@dataclass(frozen=True)
class TailRatios:
    """Per kind of client: the numbers of users measured and each percentile's log ratio there."""

    target: str
    by_kind: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    rows: int = 0

    def log_ratios(self, kinds: np.ndarray, users: np.ndarray) -> dict[str, np.ndarray]:
        """Each row's log(percentile / median), NaN where its kind or its users were not measured.

        Linear in log(users) between two measured numbers of users, the nearest's beyond them;
        the p99's never below the p90's.
        """
        kinds = np.asarray(kinds, dtype=object)
        users = np.asarray(users, dtype=float)
        out = {p: np.full(len(users), np.nan) for p in PERCENTILES}
        for kind, table in self.by_kind.items():
            rows = (kinds == kind) & np.isfinite(users) & (users > 0)
            if not rows.any():
                continue
            at = np.log(np.asarray(table["users"], dtype=float))
            for percentile in PERCENTILES:
                ratios = np.asarray(table[percentile], dtype=float)
                out[percentile][rows] = np.interp(np.log(users[rows]), at, ratios)
        out["p99"] = np.fmax(out["p99"], out["p90"])
        return out

    def to_dict(self) -> dict[str, Any]:
        """The ratios as plain JSON values (a model card's)."""
        return {"target": self.target, "by_kind": self.by_kind, "rows": self.rows}

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> TailRatios | None:
        """The ratios a model card stored (None: an empty record, a model without them)."""
        if not stored:
            return None
        by_kind = {
            str(kind): {str(k): [float(x) for x in v] for k, v in table.items()}
            for kind, table in stored["by_kind"].items()
        }
        return cls(str(stored["target"]), by_kind, int(stored["rows"]))


def client_kinds(rows: Any) -> np.ndarray:
    """Each row's kind of client (``data/clients.csv``: closed, rounds, poisson, batch)."""
    kinds = clients().table["kind"]
    return np.array([kinds[str(name)] for name in client_names(rows)], dtype=object)


def fit_tail_ratios(rows: Any, target: str) -> TailRatios | None:
    """The median measured log ratio of each percentile at each kind of client and users.

    Over the rows that measured ``{target}_p90_s``, ``_p99_s`` and the median ``{target}_s``;
    a number of users with fewer than ``MIN_ROWS`` such rows has none. None: no row measured
    them.
    """
    median = values(rows, f"{target}_s", np.nan)
    logs = {p: np.log(values(rows, f"{target}_{p}_s", np.nan) / median) for p in PERCENTILES}
    users = values(rows, "users", np.nan)
    measured = np.isfinite(users) & (users > 0)
    for ratio in logs.values():
        measured &= np.isfinite(ratio)
    if not measured.any():
        return None
    frame = pd.DataFrame({p: logs[p][measured] for p in PERCENTILES})
    frame["kind"] = client_kinds(rows)[measured]
    frame["users"] = users[measured]
    grouped = frame.groupby(["kind", "users"])
    table = grouped[list(PERCENTILES)].median()[grouped.size() >= MIN_ROWS]
    by_kind = {
        str(kind): {
            "users": part.index.get_level_values("users").astype(float).tolist(),
            **{p: part[p].astype(float).tolist() for p in PERCENTILES},
        }
        for kind, part in table.groupby(level="kind")
    }
    return TailRatios(target, by_kind, int(measured.sum())) if by_kind else None


def as_measured(rows: Any) -> np.ndarray:
    """The rows whose set-up is the one a measured ratio stands for.

    No stated spread of lengths or engine knob (``SETUP_FIELDS`` but the client), and a client
    whose lengths vary (a spread, a trace or a uniform one: not every request alike).
    """
    out = assumed_spread(rows) != 0  # NaN: a traced or uniform spread, which varies
    for column in SETUP_FIELDS:
        if column != "client" and column in rows:
            out &= ~np.isfinite(np.asarray(rows[column], dtype=float))
    return out
