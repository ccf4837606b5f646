"""Per-step jitter: a measured step's time varies from one step to the next; a simulated one not.

Between two events the simulated loop takes identical steps, so a gap percentile lands on one
step: on most cards the ITL p90 was the median. A measured gap varies (kernel launches, the host,
the clocks), and where one user runs alone nothing but the step itself varies: the spread of
one-user gaps is the step's own (serving_dynamics.md, section G).

The jitter is a table of log(gap / median gap) at ``LEVELS`` (the median's is 0), fitted on the
training rows that ran one user and measured their gaps' p90 and p99 (LLM-Pilot's today), pooled
over their engines. Between the levels the log ratio is linear in the level; below the median a
step takes its own time (no step runs faster than the loop's), above the last level the last
ratio. ``multipliers`` turns it into equally likely step multipliers, over which the loop spreads
its gap histogram after the run (``loop.jittered``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# The quantile levels of the table, above the median (whose log ratio is 0).
LEVELS = (0.9, 0.99)
# Equally likely multipliers that stand for the jitter (their levels (i + 1/2) / POINTS): 200
# reach the 0.9975 level, past the p99 the loop reads.
POINTS = 200
# The fewest one-user rows a table is fitted on; with fewer there is no jitter.
MIN_ROWS = 3


@dataclass(frozen=True)
class Jitter:
    """log(gap / median gap) at each of ``LEVELS``, and the rows it was fitted on."""

    log_ratios: tuple[float, ...]
    rows: int

    def multipliers(self, points: int = POINTS) -> np.ndarray:
        """``points`` equally likely multipliers of a step, at levels (i + 1/2) / points."""
        levels = (np.arange(points) + 0.5) / points
        knots = np.array([0.5, *LEVELS])
        ratios = np.array([0.0, *self.log_ratios])
        return np.exp(np.interp(levels, knots, ratios, left=0.0, right=ratios[-1]))

    def to_dict(self) -> dict[str, Any]:
        """The jitter as plain JSON values (a model card's), with the levels it is at."""
        return {"levels": list(LEVELS), **asdict(self), "log_ratios": list(self.log_ratios)}

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> Jitter | None:
        """The jitter a model card stored (None: an empty record, a model without one)."""
        if not stored:
            return None
        return cls(tuple(float(r) for r in stored["log_ratios"]), int(stored["rows"]))


def fit_jitter(rows: Any) -> Jitter | None:
    """The median log ratio of each level's gap to the median gap, over one-user rows.

    ``rows``: training rows with ``users``, ``itl_s`` (the median gap) and ``itl_p90_s`` and
    ``itl_p99_s``; rows that measured no tail, or more than one user, are left out. Each ratio is
    at least 0 and the p99's at least the p90's (a percentile is never below a lower one).
    None where fewer than ``MIN_ROWS`` rows qualify.
    """
    if any(c not in rows for c in ("users", "itl_s", "itl_p90_s", "itl_p99_s")):
        return None
    users = np.asarray(rows["users"], dtype=float)
    median = np.asarray(rows["itl_s"], dtype=float)
    tails = [np.asarray(rows[f"itl_p{round(level * 100)}_s"], dtype=float) for level in LEVELS]
    alone = (users == 1) & (median > 0)
    for tail in tails:
        alone &= np.isfinite(tail) & (tail > 0)
    if alone.sum() < MIN_ROWS:
        return None
    ratios = [max(float(np.median(np.log(tail[alone] / median[alone]))), 0.0) for tail in tails]
    ratios = list(np.maximum.accumulate(ratios))
    return Jitter(tuple(float(r) for r in ratios), int(alone.sum()))
