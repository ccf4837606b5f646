"""CatBoost regressors on the feature matrix — fit and predict (``predict_si``), nothing else.

A target's model is the mean, in target space, of a few CatBoost *members*, each fitted on the
feature matrix less some columns; which columns, and with which settings, its recipe says
(``wattgpu.modeling.recipe``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from catboost import CatBoostRegressor, Pool

from wattgpu.modeling.features import CATEGORICAL_FEATURES, matrix_columns
from wattgpu.modeling.recipe import Recipe
from wattgpu.modeling.targets import PRIOR_COLUMN, decode, encode


@dataclass
class Regressor:
    """A target's fitted members: (left-out columns, CatBoost model) pairs."""

    target: str
    members: list[tuple[tuple[str, ...], CatBoostRegressor]]

    def feature_importance(self) -> pd.Series:
        """Mean CatBoost importance per feature over the members (0 where a member lacks it)."""
        parts = [
            pd.Series(model.get_feature_importance(), index=model.feature_names_)
            for _, model in self.members
        ]
        return pd.concat(parts, axis=1).fillna(0.0).mean(axis=1).sort_values()


# Below this many rows a CatBoost Pool is built fastest from one object array (0.1 ms for a
# row, against 0.5 ms from a DataFrame); above it, from a DataFrame (one array per column).
SMALL_POOL_ROWS = 200


def pool(
    target: str,
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    without: tuple[str, ...],
    label: pd.Series | np.ndarray | None = None,
) -> Pool:
    """CatBoost's input for ``frame``'s feature matrix less the columns ``without``."""
    columns = matrix_columns(frame, target, without)
    cats = [i for i, c in enumerate(columns) if c in CATEGORICAL_FEATURES]
    n = len(next(iter(columns.values())))
    if label is None and n < SMALL_POOL_ROWS:
        matrix = np.empty((n, len(columns)), dtype=object)
        for i, values in enumerate(columns.values()):
            matrix[:, i] = values
        return Pool(matrix, cat_features=cats, feature_names=list(columns))
    index = frame.index if isinstance(frame, pd.DataFrame) else None
    return Pool(pd.DataFrame(columns, index=index), label=label, cat_features=cats)


class Pools:
    """CatBoost inputs of one set of rows, built once per left-out column set.

    A query's members and its interval's difficulty model leave out the same columns (the
    member without the raw GPU specs), so they share one input instead of building it twice.
    """

    def __init__(self, target: str, frame: pd.DataFrame | Mapping[str, np.ndarray]) -> None:
        self.target, self.frame = target, frame
        self._built: dict[tuple[str, ...], Pool] = {}

    def __call__(self, without: tuple[str, ...]) -> Pool:
        """The input of the feature matrix less ``without``."""
        if without not in self._built:
            self._built[without] = pool(self.target, self.frame, without)
        return self._built[without]


def fit_members(
    target: str,
    frame: pd.DataFrame,
    label: pd.Series,
    members: tuple[tuple[str, ...], ...],
    settings: dict[str, Any],
    seed: int = 0,
) -> Regressor:
    """Fit one CatBoost member per left-out column set of ``members`` on ``label``."""
    fitted = []
    for without in members:
        model = CatBoostRegressor(
            **settings,
            loss_function="RMSE",
            random_seed=seed,
            allow_writing_files=False,
            verbose=False,
        )
        model.fit(pool(target, frame, without, label))
        fitted.append((without, model))
    return Regressor(target, fitted)


def fit(
    recipe: Recipe,
    frame: pd.DataFrame,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    threads: int = -1,
) -> Regressor:
    """Fit the recipe's members with ``params`` (tuned) on rows with features and measurements.

    ``threads``: CatBoost's threads per fit (-1: all cores; 1 where folds run side by side).
    """
    target = recipe.target
    settings = {**recipe.catboost_params(params), "thread_count": threads}
    return fit_members(target, frame, encode(target, frame), recipe.members, settings, seed)


def raw_predict(
    model: Regressor, frame: pd.DataFrame | Mapping[str, np.ndarray], pools: Pools | None = None
) -> np.ndarray:
    """The members' mean answer in target space (before ``decode``)."""
    pools = pools or Pools(model.target, frame)
    # One thread: on a query CatBoost's thread pool costs more than it saves (a 1,000-row batch
    # took 0.74 ms on 2 threads, 0.34 ms on one), and each server worker is a process of its own.
    return np.mean(
        [member.predict(pools(without), thread_count=1) for without, member in model.members],
        axis=0,
    )


def predict_si(
    target: str,
    model: Regressor,
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    pools: Pools | None = None,
) -> np.ndarray:
    """Predict ``target`` in SI units (W, or s per token) for rows (or columns) with features."""
    raw = raw_predict(model, frame, pools)
    if not isinstance(frame, pd.DataFrame):
        # decode reads the prior column only: frame that one, not the ~80 feature columns
        _, prior = PRIOR_COLUMN[target]
        frame = pd.DataFrame({prior: frame[prior]})
    return decode(target, frame, raw)
