"""Per-row prediction intervals: normalised split-conformal on held-out-GPU residuals.

A prediction's interval is ``[pred x exp(q_lo x d), pred x exp(q_hi x d)]``. ``d`` is the row's
*difficulty*: a small CatBoost model's estimate of ``|log(true / pred)|`` from the row's features,
learnt on leave-one-GPU-out residuals (errors the model made on GPUs it had not seen, the
situation of every query about new hardware). ``q_lo``/``q_hi`` are conformal quantiles of the
normalised residuals ``log(true / pred) / d``, computed on difficulties predicted for GPUs the
difficulty model had not seen either (cross-fitted by GPU), so the calibration is not fooled by
the difficulty model's own fit. A 7B model in a well-measured regime then gets a narrow interval
and a query unlike anything measured a wide one, at the same nominal coverage.

The conformal factors are fitted per scenario (offline and server residuals differ in spread and
skew), on the pooled residuals for a scenario with too few rows to calibrate on its own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from catboost import CatBoostRegressor

from wattgpu.modeling.learning.models import Pools, fits_side_by_side, pool
from wattgpu.modeling.learning.recipe import Recipe
from wattgpu.modeling.physical.targets import capped

COVERAGE = 0.9
# |log residual| floor: keeps log(|r|) finite and the smallest intervals away from zero width.
MIN_RESIDUAL = 0.01


@dataclass
class IntervalModel:
    """What turns a prediction into an interval: the difficulty model and the conformal factors.

    ``q_low``/``q_high`` are the pooled factors; ``by_scenario`` the factors of each scenario
    calibrated on its own (a scenario not in it gets the pooled ones).
    """

    target: str
    without: tuple[str, ...]
    difficulty: CatBoostRegressor | float
    q_low: float
    q_high: float
    coverage: float = COVERAGE
    by_scenario: dict[str, tuple[float, float]] = field(default_factory=dict)

    def factors(self, scenarios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The lower and upper conformal factors of rows of these scenarios."""
        low = np.full(len(scenarios), self.q_low)
        high = np.full(len(scenarios), self.q_high)
        for scenario, (q_low, q_high) in self.by_scenario.items():
            rows = scenarios == scenario
            low[rows], high[rows] = q_low, q_high
        return low, high


def log_residuals(oof: pd.DataFrame) -> np.ndarray:
    """``log(true / pred)`` per out-of-fold row."""
    return np.log(oof["true"].to_numpy(float) / oof["pred"].to_numpy(float))


def fit_difficulty(
    recipe: Recipe,
    frame: pd.DataFrame,
    residuals: np.ndarray,
    seed: int = 0,
    threads: int = 1,
) -> CatBoostRegressor | float:
    """Fit log |residual| on the rows' features (less the recipe's ``difficulty_without``).

    Returns the CatBoost model, or the one difficulty of every row when all residuals are alike
    (CatBoost refuses a constant label).
    """
    label = np.log(np.maximum(np.abs(residuals), MIN_RESIDUAL))
    if np.ptp(label) == 0.0:
        return float(np.exp(label[0]))
    model = CatBoostRegressor(
        **recipe.fixed_params,
        **recipe.difficulty_params,
        loss_function="RMSE",
        random_seed=seed,
        thread_count=threads,
        allow_writing_files=False,
        verbose=False,
    )
    model.fit(pool(recipe.target, frame, recipe.difficulty_without(), label))
    return model


def difficulty(
    model: CatBoostRegressor | float,
    target: str,
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    without: tuple[str, ...],
    pools: Pools | None = None,
) -> np.ndarray:
    """The difficulty ``d`` of each row (> 0), for rows (or feature columns)."""
    if isinstance(model, float):
        return np.full(len(frame["gpu"]), model)
    pools = pools or Pools(target, frame)
    return np.exp(model.predict(pools(without), thread_count=1))


def conformal_quantiles(scores: np.ndarray, coverage: float = COVERAGE) -> tuple[float, float]:
    """Lower and upper split-conformal quantiles of ``scores`` for a central interval.

    The finite-sample correction ``ceil((n + 1)(1 - tail)) / n`` keeps the coverage at or above
    nominal on exchangeable rows.
    """
    scores = np.sort(np.asarray(scores, float))
    n = len(scores)
    tail = (1.0 - coverage) / 2.0
    k_high = min(n, math.ceil((n + 1) * (1.0 - tail)))
    k_low = max(1, math.floor((n + 1) * tail))
    return float(scores[k_low - 1]), float(scores[k_high - 1])


def _cross_fitted_difficulty(
    recipe: Recipe,
    frame: pd.DataFrame,
    residuals: np.ndarray,
    groups: np.ndarray,
    seed: int,
) -> np.ndarray:
    """Each row's difficulty from a difficulty model fitted without the row's group."""
    target, without = recipe.target, recipe.difficulty_without()
    n_groups = len(np.unique(groups))
    if n_groups < 2:  # nothing to hold out: the in-sample fit is all there is
        model = fit_difficulty(recipe, frame, residuals, seed)
        return difficulty(model, target, frame, without)
    out = np.full(len(frame), np.nan)
    from sklearn.model_selection import GroupKFold  # fitting only: the served model needs none

    folds = GroupKFold(
        n_splits=min(recipe.interval_folds, n_groups), shuffle=True, random_state=seed
    )
    for train, test in folds.split(frame, groups=groups):
        model = fit_difficulty(recipe, frame.iloc[train], residuals[train], seed)
        out[test] = difficulty(model, target, frame.iloc[test], without)
    return out


def fit_interval(
    recipe: Recipe,
    frame: pd.DataFrame,
    oof: pd.DataFrame,
    groups: np.ndarray,
    coverage: float = COVERAGE,
    seed: int = 0,
) -> IntervalModel:
    """The interval model of ``frame``'s rows from their out-of-fold predictions ``oof``.

    Args:
        recipe: the target's recipe (the difficulty model's settings, the calibration's folds).
        frame: rows with features, in the order of ``oof``.
        oof: out-of-fold ``true``/``pred`` of the rows (leave-one-GPU-out for the served model).
        groups: the rows' held-out groups (GPUs for leave-one-GPU-out): the calibration's
            difficulties come from models fitted without the row's group.
        coverage: nominal coverage of the central interval.
        seed: CatBoost's and the inner folds' seed.

    """
    residuals = log_residuals(oof)
    groups = np.asarray(groups)
    scores = residuals / _cross_fitted_difficulty(recipe, frame, residuals, groups, seed)
    q_low, q_high = conformal_quantiles(scores, coverage)
    model = fit_difficulty(recipe, frame, residuals, seed)
    by_scenario = scenario_quantiles(
        scores, frame["scenario"].to_numpy(), recipe.min_scenario_rows, coverage
    )
    without = recipe.difficulty_without()
    return IntervalModel(recipe.target, without, model, q_low, q_high, coverage, by_scenario)


def scenario_quantiles(
    scores: np.ndarray, scenarios: np.ndarray, min_rows: int, coverage: float = COVERAGE
) -> dict[str, tuple[float, float]]:
    """``conformal_quantiles`` of each scenario with at least ``min_rows`` scores.

    With fewer, the 5 % tails hold too few rows to place the bounds, and the pooled factors
    serve the scenario.
    """
    return {
        str(scenario): conformal_quantiles(scores[scenarios == scenario], coverage)
        for scenario in np.unique(scenarios)
        if (scenarios == scenario).sum() >= min_rows
    }


def interval(
    model: IntervalModel,
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    pred: np.ndarray,
    pools: Pools | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of the predictions ``pred`` of ``frame``'s rows.

    ``pools``, when given, are the CatBoost inputs already built for the same rows.
    """
    d = difficulty(model.difficulty, model.target, frame, model.without, pools)
    pred = np.asarray(pred, float)
    q_low, q_high = model.factors(np.asarray(frame["scenario"]))
    upper = capped(model.target, frame, pred * np.exp(q_high * d))
    return np.minimum(pred * np.exp(q_low * d), upper), upper


def held_out_intervals(
    recipe: Recipe,
    frame: pd.DataFrame,
    oof: pd.DataFrame,
    groups: np.ndarray,
    coverage: float = COVERAGE,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's interval from an interval model fitted without the row's group.

    The honest check of the intervals: neither the difficulty model nor the conformal factors
    that bound a held-out GPU's (or LLM's, or fold's) rows ever saw that group's residuals.
    The groups' interval models are fitted side by side, one single-threaded fit per core.
    """
    groups = np.asarray(groups)
    lower = np.full(len(frame), np.nan)
    upper = np.full(len(frame), np.nan)
    held_out = [groups == group for group in np.unique(groups)]
    held_out = [held for held in held_out if not held.all()]
    pred = oof["pred"].to_numpy(float)

    def bounds(held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        train = np.flatnonzero(~held)
        model = fit_interval(
            recipe, frame.iloc[train], oof.iloc[train], groups[train], coverage, seed
        )
        return interval(model, frame[held], pred[held])

    jobs = max(1, min(len(held_out), os.cpu_count() or 1))
    # Threads: CatBoost releases the GIL while it fits (see evaluation.FOLD_BACKEND).
    with fits_side_by_side():
        from joblib import Parallel, delayed

        answers = Parallel(n_jobs=jobs, backend="threading")(delayed(bounds)(h) for h in held_out)
    for held, (low, high) in zip(held_out, answers, strict=True):
        lower[held], upper[held] = low, high
    return lower, upper


def interval_figures(
    true: np.ndarray, pred: np.ndarray, lower: np.ndarray, upper: np.ndarray
) -> dict[str, float]:
    """Coverage and width of intervals, over the rows that have one.

    ``interval_coverage`` is the share of true values inside; ``interval_width`` the median of
    (upper - lower) / prediction.
    """
    true, pred = np.asarray(true, float), np.asarray(pred, float)
    lower, upper = np.asarray(lower, float), np.asarray(upper, float)
    ok = np.isfinite(lower) & np.isfinite(upper)
    if not ok.any():
        return {"interval_coverage": math.nan, "interval_width": math.nan}
    inside = (true[ok] >= lower[ok]) & (true[ok] <= upper[ok])
    return {
        "interval_coverage": float(inside.mean()),
        "interval_width": float(np.median((upper[ok] - lower[ok]) / pred[ok])),
    }


def interval_figures_by_gpu(
    oof: pd.DataFrame, lower: np.ndarray, upper: np.ndarray
) -> pd.DataFrame:
    """``interval_figures`` of each (GPU, scenario) of the out-of-fold rows ``oof``, with counts.

    Columns: ``gpu``, ``scenario``, ``n_rows``, ``interval_coverage``, ``interval_width``.
    """
    records = []
    for (gpu, scenario), rows in oof.groupby(["gpu", "scenario"], sort=True).indices.items():
        figures = interval_figures(
            oof["true"].to_numpy()[rows], oof["pred"].to_numpy()[rows], lower[rows], upper[rows]
        )
        records.append({"gpu": gpu, "scenario": scenario, "n_rows": len(rows), **figures})
    return pd.DataFrame.from_records(
        records, columns=["gpu", "scenario", "n_rows", "interval_coverage", "interval_width"]
    )
