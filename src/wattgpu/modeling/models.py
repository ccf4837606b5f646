"""CatBoost regressors on the feature matrix — fit and predict, nothing else."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from catboost import CatBoostRegressor, Pool

from wattgpu.modeling.features import CATEGORICAL_FEATURES, feature_matrix
from wattgpu.modeling.targets import decode, encode

# Not tuned: single-feature categorical statistics and 64 borders make each fit about twice as
# fast (a tuning trial is dozens of fits), in exchange for coarser splits.
FIXED_PARAMS: dict[str, Any] = {"max_ctr_complexity": 1, "border_count": 64}
DEFAULT_PARAMS: dict[str, Any] = {
    "iterations": 300,
    "depth": 6,
    "learning_rate": 0.1,
    "l2_leaf_reg": 3.0,
}


def _pool(target: str, frame: pd.DataFrame, label: pd.Series | None = None) -> Pool:
    return Pool(feature_matrix(frame, target), label=label, cat_features=list(CATEGORICAL_FEATURES))


def fit(
    target: str, frame: pd.DataFrame, params: dict[str, Any] | None = None, seed: int = 0
) -> CatBoostRegressor:
    """Fit a CatBoost regressor for ``target`` on rows with features and measurements."""
    settings = {**DEFAULT_PARAMS, **FIXED_PARAMS, "thread_count": -1, **(params or {})}
    model = CatBoostRegressor(
        **settings,
        loss_function="RMSE",
        random_seed=seed,
        allow_writing_files=False,
        verbose=False,
    )
    model.fit(_pool(target, frame, encode(target, frame)))
    return model


def predict(target: str, model: CatBoostRegressor, frame: pd.DataFrame) -> np.ndarray:
    """Predict ``target`` in SI units (W, or s per token) for rows with features."""
    return decode(target, frame, model.predict(_pool(target, frame)))
