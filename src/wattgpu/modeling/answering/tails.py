"""The tails of a latency answer: ITL and TTFT at p90 and p99 beside the median the model predicts.

A tail is the model's median times the simulated serving loop's own ratio of that percentile to
its median, for the query's client and engine (``modeling.serving.run.simulate_rows``, one call
for a batch of queries): the trees correct the median, and the spread around it is the
simulation's. The interval stays the median's. Power has no tails (it is a mean over the
window), nor has a query that cannot run.

The simulated steps are spread by the model's step jitter where its card carries one (fitted on
its training rows' one-user gaps, ``serving.jitter``). TTFT's tails are the median times a
measured ratio instead where the card carries one for the query's kind of client and users, and
the query states nothing the measured rows did not run (``answering.tail_ratios``): no simulator
change reaches the measured TTFT tails, the measured ratio at that many users does
(``bench/tails.py``). The answer says which (``tails``: ``SIMULATED`` or ``MEASURED_RATIO``).
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wattgpu.modeling.answering.tail_ratios import (
    PERCENTILES,
    TailRatios,
    as_measured,
    client_kinds,
)
from wattgpu.modeling.physical.columns import columns_of
from wattgpu.modeling.physical.operations import values
from wattgpu.modeling.serving.jitter import Jitter
from wattgpu.modeling.serving.run import TTFT_OVERHEAD, simulate_rows

# The targets with tails (the simulation's statistics are named after them: ``itl_p90_s``).
TAILED = ("itl", "ttft")
# Where the tails come from: the simulation's ratio, or the measured rows' at that many users.
SIMULATED, MEASURED_RATIO = "simulated", "measured ratio"
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
        ``tails``: ``SIMULATED`` where there are tails, else ''.

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
    out["tails"] = np.where(known, SIMULATED, "").astype(object)
    return out


def untailed(rows: int) -> dict[str, np.ndarray]:
    """``tails``' columns for ``rows`` rows without tails: p90 and p99 NaN, ``tails`` ''."""
    out: dict[str, np.ndarray] = {p: np.full(rows, np.nan) for p in PERCENTILES}
    out["tails"] = np.full(rows, "", dtype=object)
    return out


def from_ratios(
    out: Mapping[str, np.ndarray], median: Any, log_ratios: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """``out``'s tails, the median times exp(``log_ratios``) where a row has both (NaN: none)."""
    median = np.asarray(median, dtype=float)
    known = np.isfinite(median)
    for percentile in PERCENTILES:
        known &= np.isfinite(np.asarray(log_ratios[percentile], dtype=float))
    replaced = {name: np.array(column, copy=True) for name, column in out.items()}
    for percentile in PERCENTILES:
        ratio = np.exp(np.asarray(log_ratios[percentile], dtype=float)[known])
        replaced[percentile][known] = median[known] * ratio
    replaced["tails"][known] = MEASURED_RATIO
    return replaced


def simulated_tails(
    target: str,
    rows: Mapping[str, Any],
    median: Any,
    jitter: Jitter | None = None,
    ratios: TailRatios | None = None,
) -> dict[str, np.ndarray]:
    """``tails`` of the rows with a median, their serving loops simulated in one call.

    Args:
        target: ``itl`` or ``ttft``.
        rows: the queries' features (``physical.features.build_features``).
        median: the answer's median per row; a row without one (it cannot run) is not simulated.
        jitter: the model's step jitter (``serving.jitter``; None: steps take their time).
        ratios: the model's measured tail ratios (``answering.tail_ratios``; None: none), which
            answer ``target`` where they were measured and the row's set-up is as measured.

    Raises:
        QueryError: a row's client or engine knob cannot be run (``serving.checks``).

    """
    median = np.asarray(median, dtype=float)
    log_ratios = {p: np.full(len(median), np.nan) for p in PERCENTILES}
    if ratios is not None and ratios.target == target:
        log_ratios = ratios.log_ratios(client_kinds(rows), values(rows, "users", np.nan))
        unlike = ~as_measured(rows)
        for percentile in PERCENTILES:
            log_ratios[percentile][unlike] = np.nan
    measured = np.isfinite(log_ratios[PERCENTILES[0]]) & np.isfinite(log_ratios[PERCENTILES[1]])
    # a row answered from a measured ratio is not simulated (a loop is most of a query's time)
    runs = np.flatnonzero(np.isfinite(median) & ~measured)
    simulated = {f"{target}_{p}_s": np.full(len(median), np.nan) for p in ("p50", *PERCENTILES)}
    if len(runs):
        some = {name: column[runs] for name, column in columns_of(rows).items()}
        stats = simulate_rows(some, jitter=jitter)
        # a per-request overhead (a model on the simulated prior) delays every first token alike
        delay = values(some, TTFT_OVERHEAD, 0.0) if target == "ttft" else np.zeros(len(runs))
        for name, column in simulated.items():
            column[runs] = stats[name].to_numpy(float) + delay
    out = tails(target, simulated, median)
    return from_ratios(out, median, log_ratios)
