"""Prediction intervals from held-out-GPU residuals (split-conformal style), and their check.

The interval of a prediction is ``[pred x exp(q_lo), pred x exp(q_hi)]`` where ``q_lo``/``q_hi``
are quantiles of ``log(true / pred)`` over leave-one-GPU-out predictions of the same scenario:
errors the model made on GPUs it had not seen, which is the situation of every real query.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COVERAGE = 0.9


def log_residuals(oof: pd.DataFrame) -> pd.Series:
    """``log(true / pred)`` per out-of-fold row."""
    return np.log(oof["true"].astype(float) / oof["pred"].astype(float))


def interval_quantiles(
    oof: pd.DataFrame, coverage: float = COVERAGE
) -> dict[str, tuple[float, float]]:
    """Per scenario, the (lower, upper) quantiles of the log residuals for a central interval."""
    tail = (1.0 - coverage) / 2.0
    out = {}
    for scenario, rows in oof.assign(r=log_residuals(oof)).groupby("scenario"):
        out[str(scenario)] = (
            float(rows["r"].quantile(tail)),
            float(rows["r"].quantile(1.0 - tail)),
        )
    return out


def apply_interval(
    pred: np.ndarray, scenario: pd.Series, quantiles: dict[str, tuple[float, float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of each prediction (an unknown scenario gets the widest interval)."""
    widest = (min(q[0] for q in quantiles.values()), max(q[1] for q in quantiles.values()))
    bounds = np.array([quantiles.get(str(s), widest) for s in scenario])
    return pred * np.exp(bounds[:, 0]), pred * np.exp(bounds[:, 1])


def held_out_gpu_coverage(oof: pd.DataFrame, coverage: float = COVERAGE) -> float:
    """Share of rows inside an interval whose quantiles were computed without their own GPU.

    For each GPU, the quantiles come from the other GPUs' leave-one-GPU-out residuals only, so
    this is an honest check of the interval on a GPU nobody measured.
    """
    inside = []
    for gpu, rows in oof.groupby("gpu"):
        others = oof[oof["gpu"] != gpu]
        if others.empty:
            continue
        lower, upper = apply_interval(
            rows["pred"].to_numpy(float), rows["scenario"], interval_quantiles(others, coverage)
        )
        true = rows["true"].to_numpy(float)
        inside.extend(((true >= lower) & (true <= upper)).tolist())
    return float(np.mean(inside)) if inside else float("nan")
