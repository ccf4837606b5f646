"""Model targets and their way back to physical units.

Power is learnt as ``mean_power_w / tdp_w`` (one model spans 70 W and 1,000 W cards). ITL is
learnt as ``log(itl_s / prior_itl_s)``: the log-ratio of the measurement to the analytical
model's per-request ITL for the same row (``wattgpu.modeling.physics``, added by
``build_features``), so the trees learn only what the physics misses and an unseen GPU's
bandwidth acts through the prior, which extrapolates, instead of through tree splits, which
cannot (leave-one-GPU-out MdAPE on all ITL rows of ../shared/reference, CatBoost defaults:
23 % with ``log(itl_s)``, 13.5 % with the ratio; the same model's GPU-ranking tau rose from
about 0 to 0.5).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.errors import ConfigError

TARGETS = ("power", "itl")
# The measured column each target predicts, and the unit it is reported in.
MEASURED_COLUMN = {"power": "mean_power_w", "itl": "itl_s"}
UNIT = {"power": "W", "itl": "ms"}
# SI (W, s per token) -> the reported unit
REPORT_SCALE = {"power": 1.0, "itl": 1000.0}


def check_target(target: str) -> str:
    """Return ``target`` if it is known, else raise ``ConfigError``."""
    if target not in TARGETS:
        raise ConfigError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    return target


def encode(target: str, frame: pd.DataFrame) -> pd.Series:
    """Measured value -> model target: power/TDP, or log(ITL / the analytical model's ITL)."""
    if check_target(target) == "power":
        return frame["mean_power_w"].astype(float) / frame["gpu_tdp_w"].astype(float)
    return np.log(frame["itl_s"].astype(float) / frame["prior_itl_s"].astype(float))


def decode(target: str, frame: pd.DataFrame, raw: np.ndarray) -> np.ndarray:
    """Model output -> physical value in SI units (W, or s per token)."""
    raw = np.asarray(raw, dtype=float)
    if check_target(target) == "power":
        return raw * frame["gpu_tdp_w"].to_numpy(dtype=float)
    return np.exp(raw) * frame["prior_itl_s"].to_numpy(dtype=float)


def rows_with_target(target: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that carry a positive, finite measurement of ``target``."""
    values = frame[MEASURED_COLUMN[check_target(target)]].astype(float)
    keep = np.isfinite(values) & (values > 0)
    return frame[keep.to_numpy()].reset_index(drop=True)
