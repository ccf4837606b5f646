"""Predictions that need no learning: the paper's load-scaled TDP and the memory roofline."""

from __future__ import annotations

import numpy as np
import pandas as pd

OFFLINE_LOAD = 0.9
SERVER_LOW_LOAD = 0.2
SERVER_HIGH_LOAD = 0.6
SERVER_RATE_THRESHOLD_RPS = 0.2


def load_scaled_tdp(frame: pd.DataFrame) -> np.ndarray:
    """Power = rho x TDP: rho 0.9 offline, 0.2 for a server below 0.2 req/s, 0.6 at or above."""
    rate = frame["request_rate_rps"].astype(float).fillna(0.0)
    server_rho = np.where(rate < SERVER_RATE_THRESHOLD_RPS, SERVER_LOW_LOAD, SERVER_HIGH_LOAD)
    rho = np.where(frame["scenario"] == "offline", OFFLINE_LOAD, server_rho)
    return rho * frame["gpu_tdp_w"].to_numpy(dtype=float)


def roofline_itl(frame: pd.DataFrame) -> np.ndarray:
    """Per-request ITL lower bound, s: time to read the 16-bit weights once, 2 x params / bandwidth.

    One decode step serves every sequence of the batch, so this is not divided by the batch
    (dividing would estimate aggregate time per token, 1 / throughput, a different quantity).
    Tensor-parallel rows read their share of the weights from each GPU at once.
    """
    params = frame["llm_params_b"].to_numpy(dtype=float) * 1e9
    bandwidth = frame["gpu_memory_bandwidth_gb_s"].to_numpy(dtype=float) * 1e9
    gpus = frame["num_gpus"].astype(float).fillna(1.0).clip(lower=1.0).to_numpy()
    return 2.0 * params / (bandwidth * gpus)


BASELINES = {"power": ("load-scaled-tdp", load_scaled_tdp), "itl": ("roofline", roofline_itl)}
