"""A replica's capacity: the highest load it serves within every limit, every lower load too.

Pure: each candidate's loads on a grid (rising), and for each limit (an SLO, the memory) the
ratio of what is predicted at each load to what is allowed, in; per candidate the capacity and
the limit that binds out. A load meets a limit where its ratio is at most 1; a ratio that is
NaN (nothing to hold the limit to) does not meet it.

The capacity is the *lowest* crossing: the first grid load that misses a limit ends the search,
even where a higher load would meet every limit again (a non-monotone prediction), so every
load below the capacity meets them all. Between the last load that meets every limit and the
first that misses one, the crossing is read off the straight line through the two ratios: exact
where a ratio is a line in the load, and below the true crossing where it bends upwards (as
latencies do with load), so on the safe side. ``refined_grid`` puts a finer grid into that
bracket for a second pass.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

# What binds when no load of the grid misses a limit: the capacity is the grid's end.
UNBOUNDED = "none"


def rate_grid(low: float = 0.05, high: float = 2_000.0, points: int = 17) -> np.ndarray:
    """Request rates (req/s) from ``low`` to ``high``, evenly spaced on a log scale."""
    return np.geomspace(low, high, points)


def user_grid(high: int = 4_096, points: int = 17) -> np.ndarray:
    """``points`` concurrent users from 1 to ``high``, evenly on a log scale, whole and rising.

    Rounding makes neighbours equal at the low end; the repeats stay, so every candidate's grid
    has the same length.
    """
    return np.maximum.accumulate(np.round(np.geomspace(1, max(high, 2), points)))


def lowest_crossing(
    loads: np.ndarray, ratios: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate (row), the load where a limit is first missed, and that limit's name.

    Args:
        loads: ``(candidates, grid)`` loads, rising along each row.
        ratios: per limit, ``(candidates, grid)`` predicted / allowed at each load.

    Returns:
        ``capacity`` (the load, 0 where the grid's first load already misses a limit, the
        grid's last where none is missed) and ``binding`` (the limit's name; ``UNBOUNDED`` where
        none is missed). Where two limits are missed at the same grid load, the one whose line
        crosses 1 first binds.

    """
    loads = np.asarray(loads, dtype=float)
    names = list(ratios)
    stack = np.stack([np.asarray(ratios[n], dtype=float) for n in names])  # (limits, n, m)
    missed = ~(stack <= 1.0)  # NaN misses
    any_missed = missed.any(axis=0)
    rows = np.arange(loads.shape[0])
    first = np.where(any_missed.any(axis=1), any_missed.argmax(axis=1), loads.shape[1])
    capacity = loads[rows, np.minimum(first, loads.shape[1] - 1)].copy()
    binding = np.full(loads.shape[0], UNBOUNDED, dtype=object)
    inside = first < loads.shape[1]
    at = np.minimum(first, loads.shape[1] - 1)
    before = np.maximum(at - 1, 0)
    low, high = loads[rows, before], loads[rows, at]
    r_low, r_high = stack[:, rows, before], stack[:, rows, at]  # (limits, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        line = low + (1.0 - r_low) * (high - low) / (r_high - r_low)
    # a limit missed for want of a number (NaN) holds the load to the last one that met it
    line = np.where(np.isfinite(line), np.clip(line, low, high), low)
    line = np.where(missed[:, rows, at], line, np.inf)
    limit = line.argmin(axis=0)
    crossing = line[limit, rows]
    capacity = np.where(inside, np.where(first == 0, 0.0, crossing), capacity)
    binding[inside] = np.array(names, dtype=object)[limit[inside]]
    return capacity, binding


def bracket(loads: np.ndarray, capacity: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grid loads on either side of each capacity: the last at or below, the next above."""
    loads = np.asarray(loads, dtype=float)
    rows = np.arange(loads.shape[0])
    above = (loads > capacity[:, None]).argmax(axis=1)
    none_above = ~(loads > capacity[:, None]).any(axis=1)
    above = np.where(none_above, loads.shape[1] - 1, above)
    below = np.maximum(above - 1, 0)
    return loads[rows, below], loads[rows, above]


def refined_grid(low: np.ndarray, high: np.ndarray, points: int = 8) -> np.ndarray:
    """``points`` loads per candidate, evenly from ``low`` to ``high`` (both included)."""
    steps = np.linspace(0.0, 1.0, points)
    return low[:, None] + (high - low)[:, None] * steps[None, :]
