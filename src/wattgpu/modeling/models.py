"""CatBoost regressors on the feature matrix — fit and predict (``predict_si``), nothing else.

A target's model is the mean, in target space, of a few CatBoost *members*, each fitted on the
feature matrix less some columns (``MEMBERS``). Power is learnt without the GPU specs that name
the product (``RAW_GPU_SPECS``) and sees the prior with the engine's host-side floor; the ITL
log-ratio averages a member with the specs and one without, a geometric mean of the two ITLs
(with the specs the trees fit the known GPUs closer, without them they rank unseen GPUs better),
and sees the prior without the floor (all measured by ``bench/ablation.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from catboost import CatBoostRegressor, Pool

from wattgpu.modeling.features import (
    CATEGORICAL_FEATURES,
    CPU_FLOOR_FEATURES,
    PRIOR_FEATURES,
    RAW_GPU_SPECS,
    matrix_columns,
)
from wattgpu.modeling.targets import PRIOR_COLUMN, check_target, decode, encode

# Not tuned: single-feature categorical statistics and 64 borders make each fit about twice as
# fast (a tuning trial is dozens of fits), in exchange for coarser splits.
FIXED_PARAMS: dict[str, Any] = {"max_ctr_complexity": 1, "border_count": 64}
DEFAULT_PARAMS: dict[str, Any] = {
    "iterations": 300,
    "depth": 6,
    "learning_rate": 0.1,
    "l2_leaf_reg": 3.0,
}
# Per target, the columns each member leaves out of the feature matrix.
MEMBERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "power": ((*RAW_GPU_SPECS, *PRIOR_FEATURES),),
    "itl": (CPU_FLOOR_FEATURES, (*RAW_GPU_SPECS, *CPU_FLOOR_FEATURES)),
    # TTFT: the ITL recipe's GPU-agnostic member (one member: few rows, one engine so far)
    "ttft": ((*RAW_GPU_SPECS, *CPU_FLOOR_FEATURES),),
}


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
    params: dict[str, Any] | None = None,
    seed: int = 0,
) -> Regressor:
    """Fit one CatBoost member per left-out column set of ``members`` on ``label``."""
    settings = {**DEFAULT_PARAMS, **FIXED_PARAMS, "thread_count": -1, **(params or {})}
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
    target: str, frame: pd.DataFrame, params: dict[str, Any] | None = None, seed: int = 0
) -> Regressor:
    """Fit ``target``'s members on rows with features and measurements."""
    members = MEMBERS[check_target(target)]
    return fit_members(target, frame, encode(target, frame), members, params, seed)


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
