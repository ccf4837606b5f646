"""Accuracy metrics: MdAPE, Pearson r and ranking Kendall tau per group."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats


def mdape(true: np.ndarray, pred: np.ndarray) -> float:
    """Median absolute percentage error, in percent: median(|pred - true| / true) x 100."""
    true = np.asarray(true, dtype=float)
    pred = np.asarray(pred, dtype=float)
    if true.size == 0:
        return float("nan")
    return float(np.median(np.abs(pred - true) / np.abs(true)) * 100.0)


def pearson_r(true: np.ndarray, pred: np.ndarray) -> float:
    """Pearson correlation; NaN for fewer than 3 rows or a constant input."""
    true = np.asarray(true, dtype=float)
    pred = np.asarray(pred, dtype=float)
    if true.size < 3 or np.ptp(true) == 0 or np.ptp(pred) == 0:
        return float("nan")
    return float(stats.pearsonr(true, pred).statistic)


def ranking_tau(frame: pd.DataFrame, item: str, groups: list[str], true: str, pred: str) -> float:
    """Mean Kendall tau of the ranking of ``item`` inside each group.

    Rows are first averaged per (group, item) — several loads of one GPU rank as one GPU — then,
    in every group with at least two items, the true and predicted orders are compared. Groups
    whose true values are all equal carry no ranking and are skipped.

    Args:
        frame: one row per prediction.
        item: the column ranked (``gpu`` for GPU ranking, ``model`` for LLM ranking).
        groups: the columns that define a group (e.g. ``["model", "scenario"]``).
        true: column of measured values.
        pred: column of predicted values.

    Returns:
        The mean tau over groups, or NaN when no group has two items.

    """
    means = frame.groupby([*groups, item], observed=True)[[true, pred]].mean().reset_index()
    taus = []
    for _, group in means.groupby(groups, observed=True):
        if len(group) < 2 or group[true].nunique() < 2:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tau = stats.kendalltau(group[true], group[pred]).statistic
        if np.isfinite(tau):
            taus.append(tau)
    return float(np.mean(taus)) if taus else float("nan")


def summarise(frame: pd.DataFrame, true: str = "true", pred: str = "pred") -> dict[str, float]:
    """MdAPE, Pearson r, GPU tau (per model and scenario) and LLM tau (per GPU and scenario)."""
    return {
        "mdape": mdape(frame[true], frame[pred]),
        "pearson_r": pearson_r(frame[true], frame[pred]),
        "gpu_tau": ranking_tau(frame, "gpu", ["model", "scenario"], true, pred),
        "llm_tau": ranking_tau(frame, "model", ["gpu", "scenario"], true, pred),
        "n_rows": float(len(frame)),
    }
