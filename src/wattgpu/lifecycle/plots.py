"""Figures logged with each tuning run: pure functions from tables to matplotlib figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from wattgpu.modeling.physical.targets import REPORT_SCALE, UNIT


def figure(width: float, height: float) -> Figure:
    """A figure drawn by Agg, without pyplot.

    No screen is needed (in CI, on a server), and there is no process-wide list of figures for
    the main job's side-by-side targets to share or for a caller to close.
    """
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def predicted_vs_measured(oof: pd.DataFrame, target: str, split: str) -> Figure:
    """Scatter of out-of-fold predictions against measurements, one colour per scenario."""
    fig = figure(5.5, 5)
    ax = fig.subplots()
    scale = REPORT_SCALE[target]
    for scenario, rows in oof.groupby("scenario"):
        ax.scatter(rows["true"] * scale, rows["pred"] * scale, s=8, alpha=0.5, label=scenario)
    low = float(min(oof["true"].min(), oof["pred"].min()) * scale)
    high = float(max(oof["true"].max(), oof["pred"].max()) * scale)
    ax.plot([low, high], [low, high], color="black", linewidth=0.8)
    if target in ("itl", "ttft"):
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"measured {target} ({UNIT[target]})")
    ax.set_ylabel(f"predicted {target} ({UNIT[target]})")
    ax.set_title(f"{target}: {split} out-of-fold predictions")
    ax.legend()
    fig.tight_layout()
    return fig


def gpu_ranking(oof: pd.DataFrame, target: str) -> Figure:
    """Mean measured and predicted value per GPU (held out in turn), sorted by the measurement."""
    scale = REPORT_SCALE[target]
    means = oof.groupby("gpu")[["true", "pred"]].mean().sort_values("true") * scale
    fig = figure(7, max(3.0, 0.3 * len(means)))
    ax = fig.subplots()
    y = np.arange(len(means))
    ax.barh(y - 0.2, means["true"], height=0.4, label="measured")
    ax.barh(y + 0.2, means["pred"], height=0.4, label="predicted (GPU unseen)")
    ax.set_yticks(y, means.index, fontsize=7)
    ax.set_xlabel(f"mean {target} ({UNIT[target]})")
    ax.set_title(f"{target}: GPU ranking, leave-one-GPU-out")
    ax.legend()
    fig.tight_layout()
    return fig


def feature_importance(names: list[str], importance: np.ndarray, top: int = 20) -> Figure:
    """Horizontal bars of the largest feature importances."""
    order = np.argsort(importance)[-top:]
    fig = figure(6, 0.3 * len(order) + 1)
    ax = fig.subplots()
    ax.barh([names[i] for i in order], importance[order])
    ax.set_xlabel("CatBoost feature importance")
    fig.tight_layout()
    return fig
