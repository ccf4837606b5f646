"""Accuracy metrics: MdAPE, Pearson r and ranking Kendall tau per group."""

from __future__ import annotations

import numpy as np
import pandas as pd


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
    from scipy import stats  # here, not at import: 0.4 s that `wattgpu predict` never needs

    return float(stats.pearsonr(true, pred).statistic)


# What makes one workload for the GPU ranking: GPUs rank against each other only on the same
# LLM, scenario, load, prompt and output lengths and GPU count (a GPU measured at batch 1 and
# another at batch 64 say nothing about which is faster). The load is a closed loop's users, an
# offline batch (blank when the engine chose) or an open server's request rate; a closed loop's
# achieved rate is an outcome, not its load.
LOAD_COLUMNS = ("users", "batch_size", "request_rate_rps")
# Mean token counts are outcomes of sampling (the same requests on two GPUs give means a few %
# apart; ML.ENERGY's LLMs stop when they choose): means within 10 % of each other (chained,
# in sorted order) are one length.
TOKEN_TOLERANCE = 0.10


def workload_labels(frame: pd.DataFrame) -> np.ndarray:
    """One label per row naming its workload, the group a GPU ranking compares.

    A workload is (LLM, scenario, load, input and output tokens, GPU count) (``LOAD_COLUMNS``,
    ``TOKEN_TOLERANCE``). A column the frame lacks counts as blank, so a frame with ``model``
    and ``scenario`` alone groups by those.
    """
    key = np.array(
        [
            f"{m}\x1f{s}"
            for m, s in zip(_column(frame, "model"), _column(frame, "scenario"), strict=True)
        ],
        dtype=object,
    )
    key = key + "\x1f" + _column(frame, "num_gpus").astype(str) + "\x1f" + _load(frame)
    for tokens in ("input_tokens", "output_tokens"):
        values = pd.to_numeric(pd.Series(_column(frame, tokens)), errors="coerce").to_numpy(float)
        key = key + "\x1f" + _chained(key, values).astype(str)
    return key


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name in frame.columns:
        return frame[name].to_numpy(dtype=object)
    return np.full(len(frame), np.nan, dtype=object)


def _load(frame: pd.DataFrame) -> np.ndarray:
    """``u<users>``, else ``b<batch>``, else ``r<rate>`` (blank ``b`` when none is given)."""
    users, batch, rate = (
        pd.to_numeric(pd.Series(_column(frame, c)), errors="coerce").to_numpy(float)
        for c in LOAD_COLUMNS
    )
    return np.where(
        ~np.isnan(users),
        np.char.add("u", users.astype(str)),
        np.where(
            ~np.isnan(batch) | np.isnan(rate),
            np.char.add("b", batch.astype(str)),
            np.char.add("r", rate.astype(str)),
        ),
    ).astype(object)


def _chained(key: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per row, the number of its cluster of ``values`` within its ``key``.

    Sorted values within ``TOKEN_TOLERANCE`` of the previous one join its cluster; blanks form
    one.
    """
    order = np.lexsort((values, key.astype(str)))
    k, v = key[order], values[order]
    with np.errstate(invalid="ignore"):
        close = (v[1:] <= v[:-1] * (1.0 + TOKEN_TOLERANCE)) | (np.isnan(v[1:]) & np.isnan(v[:-1]))
    new = np.ones(len(v), dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | ~close
    clusters = np.empty(len(v), dtype=int)
    clusters[order] = np.cumsum(new)
    return clusters


def ranking_tau(frame: pd.DataFrame, item: str, groups: list[str], true: str, pred: str) -> float:
    """Mean Kendall tau (tau-b, as ``scipy.stats.kendalltau``) of the ranking of ``item`` per group.

    Rows are first averaged per (group, item) — repeats of one GPU rank as one GPU — then,
    in every group with at least two items, the true and predicted orders are compared. Groups
    whose true values are all equal carry no ranking and are skipped, as are groups with a
    missing value or a constant prediction (scipy's NaN).

    Args:
        frame: one row per prediction.
        item: the column ranked (``gpu`` for GPU ranking, ``model`` for LLM ranking).
        groups: the columns that define a group (e.g. ``["model", "scenario"]``).
        true: column of measured values.
        pred: column of predicted values.

    Returns:
        The mean tau over groups, or NaN when no group has two items.

    """
    means = frame.groupby([*groups, item], observed=True, dropna=False, sort=True)[
        [true, pred]
    ].mean()
    group = means.groupby(level=list(range(len(groups))), observed=True, dropna=False).ngroup()
    taus = _group_kendall_tau(
        group.to_numpy(), means[true].to_numpy(float), means[pred].to_numpy(float)
    )
    taus = taus[np.isfinite(taus)]
    return float(taus.mean()) if taus.size else float("nan")


def _group_kendall_tau(group: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of ``x`` against ``y`` inside each group (codes 0..G-1, rows sorted by it).

    tau-b = sum(sign dx * sign dy) / sqrt(#pairs with dx != 0 * #pairs with dy != 0) over the
    group's pairs: one vectorised pass per distinct group size, instead of one scipy call (and
    one pandas group) per group, which cost most of an evaluation. NaN where a group has under
    two items, ties all through ``x`` or ``y``, or a missing value.
    """
    n_groups = int(group.max()) + 1 if group.size else 0
    concordance = np.zeros(n_groups)
    x_pairs = np.zeros(n_groups)
    y_pairs = np.zeros(n_groups)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[starts, group.size])
    for size in np.unique(sizes[sizes >= 2]):
        first = starts[sizes == size]
        rows = first[:, None] + np.arange(size)  # each group's rows, one group per line
        i, j = np.triu_indices(size, 1)
        dx = np.sign(x[rows[:, i]] - x[rows[:, j]])
        dy = np.sign(y[rows[:, i]] - y[rows[:, j]])
        codes = group[first]
        concordance[codes] = (dx * dy).sum(axis=1)
        x_pairs[codes] = (dx != 0).sum(axis=1)
        y_pairs[codes] = (dy != 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return concordance / np.sqrt(x_pairs * y_pairs)


def gpu_ranking_tau(frame: pd.DataFrame, true: str = "true", pred: str = "pred") -> float:
    """Mean Kendall tau of the GPU ranking within each workload (``workload_labels``)."""
    labelled = frame.assign(_workload=workload_labels(frame))
    return ranking_tau(labelled, "gpu", ["_workload"], true, pred)


def summarise(frame: pd.DataFrame, true: str = "true", pred: str = "pred") -> dict[str, float]:
    """MdAPE, Pearson r, GPU tau (per workload) and LLM tau (per GPU and scenario)."""
    return {
        "mdape": mdape(frame[true], frame[pred]),
        "pearson_r": pearson_r(frame[true], frame[pred]),
        "gpu_tau": gpu_ranking_tau(frame, true, pred),
        "llm_tau": ranking_tau(frame, "model", ["gpu", "scenario"], true, pred),
        "n_rows": float(len(frame)),
    }
