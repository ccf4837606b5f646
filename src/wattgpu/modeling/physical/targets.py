"""Model targets and their way back to physical units.

Both targets are the log-ratio of the measurement to the analytical model's answer for the same
row (``wattgpu.modeling.physical.regimes``, added by ``build_features``), so the trees learn
only what the physics misses, and an unseen GPU's bandwidth and TDP act through the prior, which
extrapolates, instead of through tree splits, which cannot. Power: ``log(mean_power_w /
prior_power_cpu_w)``, the prior power of a GPU that waits for the engine's host-side step time; ITL:
``log(itl_median_s / prior_itl_s)`` (the measured ITL as the served statistic,
``itl.median_itl``); TTFT: ``log(ttft_s / prior_ttft_s)``, the prior being the request's
prefill at the FP16 peak plus its queueing under the load (``prior_columns.with_prior``). What each
choice is worth on real data: ``bench/ablation.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.errors import ConfigError

TARGETS = ("power", "itl", "ttft")
# The column of a measurement file that holds each target.
SOURCE_COLUMN = {"power": "mean_power_w", "itl": "itl_s", "ttft": "ttft_s"}
# The measured column each target predicts (``build_features`` adds ``itl_median_s``: the file's
# ``itl_s`` as the served statistic, ``itl.median_itl``), and the unit it is reported in.
MEASURED_COLUMN = {"power": "mean_power_w", "itl": "itl_median_s", "ttft": "ttft_s"}
UNIT = {"power": "W", "itl": "ms", "ttft": "ms"}
# (measured column, the prior column the target is relative to)
PRIOR_COLUMN = {
    "power": ("mean_power_w", "prior_power_cpu_w"),
    "itl": ("itl_median_s", "prior_itl_s"),
    "ttft": ("ttft_s", "prior_ttft_s"),
}
# Targets that only some data sets measure: the main job skips them when the data has none.
OPTIONAL_TARGETS = ("ttft",)
# SI (W, s) -> the reported unit
REPORT_SCALE = {"power": 1.0, "itl": 1000.0, "ttft": 1000.0}


def check_target(target: str) -> str:
    """Return ``target`` if it is known, else raise ``ConfigError``."""
    if target not in TARGETS:
        raise ConfigError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    return target


def encode(target: str, frame: pd.DataFrame) -> pd.Series:
    """Measured value -> model target: the log-ratio to the analytical prior (see the module)."""
    measured, prior = PRIOR_COLUMN[check_target(target)]
    return np.log(frame[measured].astype(float) / frame[prior].astype(float))


def decode(
    target: str, frame: pd.DataFrame | Mapping[str, np.ndarray], raw: np.ndarray
) -> np.ndarray:
    """Model output -> physical value in SI units (W, or s per token), for rows or columns.

    A GPU's mean power never exceeds its power limit: power is capped at ``gpu_tdp_w``.
    """
    raw = np.asarray(raw, dtype=float)
    _, prior = PRIOR_COLUMN[check_target(target)]
    value = np.exp(raw) * np.asarray(frame[prior], dtype=float)
    return capped(target, frame, value)


def capped(target: str, frame: pd.DataFrame | Mapping[str, np.ndarray], value: Any) -> np.ndarray:
    """``value`` of ``target``, power capped at each row's power limit (``gpu_tdp_w``)."""
    value = np.asarray(value, dtype=float)
    if target != "power" or "gpu_tdp_w" not in frame:
        return value
    limit = np.asarray(frame["gpu_tdp_w"], dtype=float)
    return np.where(np.isfinite(limit), np.minimum(value, limit), value)


def rows_with_target(target: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that carry a positive, finite measurement of ``target``."""
    return rows_measuring(MEASURED_COLUMN[check_target(target)], frame)


def rows_measuring(column: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows whose ``column`` holds a positive, finite value."""
    values = frame[column].astype(float)
    keep = np.isfinite(values) & (values > 0)
    return frame[keep.to_numpy()].reset_index(drop=True)
