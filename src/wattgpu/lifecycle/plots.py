"""Figures logged with each tuning run: pure functions from tables to matplotlib figures."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no screen here, in CI or on a server

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from wattgpu.modeling.physical.targets import REPORT_SCALE, UNIT  # noqa: E402


def predicted_vs_measured(oof: pd.DataFrame, target: str, split: str) -> Figure:
    """Scatter of out-of-fold predictions against measurements, one colour per scenario."""
    fig, ax = plt.subplots(figsize=(5.5, 5))
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
    fig, ax = plt.subplots(figsize=(7, max(3.0, 0.3 * len(means))))
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
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(order) + 1))
    ax.barh([names[i] for i in order], importance[order])
    ax.set_xlabel("CatBoost feature importance")
    fig.tight_layout()
    return fig


def close(fig: Figure) -> None:
    """Free a figure's memory once it is logged."""
    plt.close(fig)
