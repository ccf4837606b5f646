"""The tails of a latency answer: ITL and TTFT at p90 and p99 beside the median the model predicts.

A tail is the model's median times the simulated serving loop's own ratio of that percentile to
its median, for the query's client and engine (``modeling.serving.run.simulate_rows``, one call
for a batch of queries): the trees correct the median, and the spread around it is the
simulation's. The interval stays the median's. Power has no tails (it is a mean over the
window), nor has a query that cannot run.

The simulated steps are spread by the model's step jitter where its card carries one (fitted on
its training rows' one-user gaps, ``serving.jitter``). No measured tail corrects the ratio
otherwise (LLM-Pilot's measured tails are set against it in ``bench/tails.py``): every tail is
the simulation's, and the answer says so (``tails``: ``TAILS_FROM``). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wattgpu.modeling.physical.columns import columns_of
from wattgpu.modeling.serving.jitter import Jitter
from wattgpu.modeling.serving.run import simulate_rows

PERCENTILES = ("p90", "p99")
# The targets with tails (the simulation's statistics are named after them: ``itl_p90_s``).
TAILED = ("itl", "ttft")
# Where the tails come from: the simulation alone (no measured tail corrects it).
TAILS_FROM = "simulated"
# The answer's columns of a target with tails (after its interval).
TAIL_COLUMNS = (*PERCENTILES, "tails")


def tails(target: str, simulated: Mapping[str, Any], median: Any) -> dict[str, np.ndarray]:
    """``target``'s p90 and p99 for each row, in the unit of ``median``, and where they come from.

    Args:
        target: ``itl`` or ``ttft`` (one of ``TAILED``).
        simulated: each row's simulated ``{target}_p50_s``, ``_p90_s`` and ``_p99_s``
            (``simulate_rows``' columns; NaN where a row was not simulated).
        median: the answer's median per row (NaN where there is none).

    Returns:
        ``p90`` and ``p99`` (NaN where the median or the simulation has no number) and
        ``tails``: ``TAILS_FROM`` where there are tails, else ''.

    """
    median = np.asarray(median, dtype=float)
    p50 = np.asarray(simulated[f"{target}_p50_s"], dtype=float)
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for percentile in PERCENTILES:
            level = np.asarray(simulated[f"{target}_{percentile}_s"], dtype=float)
            out[percentile] = median * np.where(p50 > 0, level / p50, np.nan)
    known = np.isfinite(out[PERCENTILES[0]]) & np.isfinite(out[PERCENTILES[1]])
    for percentile in PERCENTILES:
        out[percentile] = np.where(known, out[percentile], np.nan)
    out["tails"] = np.where(known, TAILS_FROM, "").astype(object)
    return out


def simulated_tails(
    target: str, rows: Mapping[str, Any], median: Any, jitter: Jitter | None = None
) -> dict[str, np.ndarray]:
    """``tails`` of the rows with a median, their serving loops simulated in one call.

    Args:
        target: ``itl`` or ``ttft``.
        rows: the queries' features (``physical.features.build_features``).
        median: the answer's median per row; a row without one (it cannot run) is not simulated.
        jitter: the model's step jitter (``serving.jitter``; None: steps take their time).

    Raises:
        QueryError: a row's client or engine knob cannot be run (``serving.checks``).

    """
    median = np.asarray(median, dtype=float)
    runs = np.flatnonzero(np.isfinite(median))
    simulated = {f"{target}_{p}_s": np.full(len(median), np.nan) for p in ("p50", *PERCENTILES)}
    if len(runs):
        some = {name: values[runs] for name, values in columns_of(rows).items()}
        stats = simulate_rows(some, jitter=jitter)
        for name, values in simulated.items():
            values[runs] = stats[name].to_numpy(float)
    return tails(target, simulated, median)
