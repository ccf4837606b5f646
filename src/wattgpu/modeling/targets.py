"""Model targets and their way back to physical units."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.errors import ConfigError

TARGETS = ("power", "itl")
# The measured column each target predicts, and the unit it is reported in.
MEASURED_COLUMN = {"power": "mean_power_w", "itl": "itl_s"}
UNIT = {"power": "W", "itl": "ms"}


def check_target(target: str) -> str:
    """Return ``target`` if it is known, else raise ``ConfigError``."""
    if target not in TARGETS:
        raise ConfigError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    return target


def encode(target: str, frame: pd.DataFrame) -> pd.Series:
    """Measured value -> model target: power/TDP, or log ITL."""
    if check_target(target) == "power":
        return frame["mean_power_w"].astype(float) / frame["gpu_tdp_w"].astype(float)
    return np.log(frame["itl_s"].astype(float))


def decode(target: str, frame: pd.DataFrame, raw: np.ndarray) -> np.ndarray:
    """Model output -> physical value in SI units (W, or s per token)."""
    raw = np.asarray(raw, dtype=float)
    if check_target(target) == "power":
        return raw * frame["gpu_tdp_w"].to_numpy(dtype=float)
    return np.exp(raw)


def rows_with_target(target: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows that carry a positive, finite measurement of ``target``."""
    values = frame[MEASURED_COLUMN[check_target(target)]].astype(float)
    keep = np.isfinite(values) & (values > 0)
    return frame[keep.to_numpy()].reset_index(drop=True)
