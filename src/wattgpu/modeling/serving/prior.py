"""The simulated prior: each row's own harness simulated, scaled by terms fitted on training rows.

Like with like: each row's ITL and TTFT prior is the simulated statistic its source measured
(the median gap, a request's mean TPOT, or a latency per output token that counts the prefill;
a TTFT mean or median, by its client), never a conversion of the measurement. The simulation
itself uses no serving row (its step costs are the prior's, its host time the engine tables');
the terms fitted on a fold's training rows are few:

* per engine release line, a scale on the simulated ITL and one on the simulated TTFT (the
  median ratio of measured to simulated over the line's training rows; a line with fewer than
  ``MIN_LINE_ROWS`` rows takes the scale of all of them): what the tables' host time and the
  kernels' shares miss;
* power per GPU ``idle + (TDP - idle) x min(1, weight x busy)``, ``busy`` the simulated GPUs'
  busy share of the measured window, ``idle = idle_share x TDP``: the two numbers on a grid.

Pure; ``modeling.serving.run.simulate_rows`` gives the simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu.data.clients import clients
from wattgpu.modeling.physical.features import itl_statistic
from wattgpu.modeling.serving.workload import client_names, engine_line_names

# The simulated column of each ITL statistic a source measured (``features.ITL_STATISTICS``).
ITL_OF_STATISTIC = {
    "median": "itl_p50_s",
    "mean": "tpot_mean_s",
    "with_prefill": "latency_per_token_s",
}
TTFT_OF_STATISTIC = {"median": "ttft_p50_s", "mean": "ttft_mean_s"}
# Rows an engine line needs for scales of its own.
MIN_LINE_ROWS = 20
IDLE_SHARES = np.linspace(0.02, 0.6, 59)
BUSY_WEIGHTS = np.linspace(0.2, 2.0, 91)


@dataclass(frozen=True)
class SimulatedTerms:
    """What a fold's training rows fit on top of the simulation.

    Attributes:
        itl_scale: engine line -> scale on its simulated ITL (``""``: every line's).
        ttft_scale: the same of TTFT.
        idle_share: a GPU's idle power over its TDP.
        busy_weight: the load a fully busy window puts on the GPU, over its TDP's dynamic part.

    """

    itl_scale: dict[str, float]
    ttft_scale: dict[str, float]
    idle_share: float
    busy_weight: float


def simulated_itl(rows: pd.DataFrame, sim: pd.DataFrame) -> np.ndarray:
    """Each row's simulated ITL in the statistic its ``itl_kind`` names (blank: the median)."""
    kinds = itl_statistic(rows["itl_kind"].to_numpy(object)) if "itl_kind" in rows else None
    kinds = np.asarray(kinds if kinds is not None else ["median"] * len(rows), dtype=object)
    out = np.full(len(rows), np.nan)
    for statistic, column in ITL_OF_STATISTIC.items():
        mine = kinds == statistic
        out[mine] = sim[column].to_numpy(float)[mine]
    return out


def simulated_ttft(rows: pd.DataFrame, sim: pd.DataFrame) -> np.ndarray:
    """Each row's simulated TTFT in the statistic its client reports."""
    statistic = clients().table["ttft_statistic"]
    named = [str(name) for name in client_names(rows)]
    means = statistic.reindex(named).to_numpy(object) == "mean"
    return np.where(means, sim[TTFT_OF_STATISTIC["mean"]], sim[TTFT_OF_STATISTIC["median"]])


def _scales(lines: np.ndarray, measured: np.ndarray, simulated: np.ndarray) -> dict[str, float]:
    ok = np.isfinite(measured) & np.isfinite(simulated) & (measured > 0) & (simulated > 0)
    if not ok.any():
        return {"": 1.0}
    ratio = measured[ok] / simulated[ok]
    scales = {"": float(np.median(ratio))}
    for line in np.unique(lines[ok]):
        mine = lines[ok] == line
        if mine.sum() >= MIN_LINE_ROWS:
            scales[str(line)] = float(np.median(ratio[mine]))
    return scales


def _scaled(scales: dict[str, float], lines: np.ndarray, simulated: np.ndarray) -> np.ndarray:
    return simulated * np.array([scales.get(str(line), scales[""]) for line in lines])


def power_prior(
    rows: pd.DataFrame, sim: pd.DataFrame, idle_share: float, busy_weight: float
) -> np.ndarray:
    """Power per GPU from the simulated busy share, W (never above TDP)."""
    tdp = rows["gpu_tdp_w"].to_numpy(float)
    busy = sim["busy_share"].to_numpy(float)
    return tdp * (idle_share + (1.0 - idle_share) * np.minimum(busy_weight * busy, 1.0))


def fit_terms(train: pd.DataFrame, sim: pd.DataFrame) -> SimulatedTerms:
    """The terms of ``SimulatedTerms`` on training rows and their simulation (same index)."""
    lines = engine_line_names(train)
    itl = _scales(lines, train["itl_s"].to_numpy(float), simulated_itl(train, sim))
    ttft_true = (
        train["ttft_s"].to_numpy(float) if "ttft_s" in train else np.full(len(train), np.nan)
    )
    ttft = _scales(lines, ttft_true, simulated_ttft(train, sim))
    idle, weight = 0.1, 1.0
    power = train["mean_power_w"].to_numpy(float)
    measured = np.isfinite(power) & (power > 0)
    if measured.any():
        tdp = train["gpu_tdp_w"].to_numpy(float)[measured]
        busy = sim["busy_share"].to_numpy(float)[measured]
        load = np.minimum(BUSY_WEIGHTS[None, :, None] * busy[:, None, None], 1.0)
        guess = tdp[:, None, None] * (
            IDLE_SHARES[None, None, :] + (1.0 - IDLE_SHARES[None, None, :]) * load
        )
        error = np.median(np.abs(np.log(guess / power[measured][:, None, None])), axis=0)
        i, j = np.unravel_index(int(np.argmin(error)), error.shape)
        weight, idle = float(BUSY_WEIGHTS[i]), float(IDLE_SHARES[j])
    return SimulatedTerms(itl, ttft, idle, weight)


def simulated_prior(
    rows: pd.DataFrame, sim: pd.DataFrame, terms: SimulatedTerms
) -> dict[str, np.ndarray]:
    """``prior_itl_s``, ``prior_ttft_s`` and ``prior_power_w`` of rows from their simulation."""
    lines = engine_line_names(rows)
    return {
        "prior_itl_s": _scaled(terms.itl_scale, lines, simulated_itl(rows, sim)),
        "prior_ttft_s": _scaled(terms.ttft_scale, lines, simulated_ttft(rows, sim)),
        "prior_power_w": power_prior(rows, sim, terms.idle_share, terms.busy_weight),
    }
