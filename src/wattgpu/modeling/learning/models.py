"""CatBoost regressors on the feature matrix — fit and predict (``predict_si``), nothing else.

A target's model is the mean, in target space, of a few CatBoost *members*, each fitted on the
feature matrix less some columns; which columns, and with which settings, its recipe says
(``wattgpu.modeling.learning.recipe``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from catboost import CatBoostRegressor, FeaturesData, Pool

from wattgpu.modeling.learning.analogs import Evidence, blended, with_analogs
from wattgpu.modeling.learning.novelty import Familiarity
from wattgpu.modeling.learning.recipe import CORRECTION_WEIGHT, Recipe
from wattgpu.modeling.physical.columns import columns_of
from wattgpu.modeling.physical.features import (
    CATEGORICAL_FEATURES,
    NUMERIC_FEATURES,
    feature_matrix,
)
from wattgpu.modeling.physical.targets import decode, encode


@dataclass
class Regressor:
    """A target's fitted members: (left-out columns, CatBoost model) pairs."""

    target: str
    members: list[tuple[tuple[str, ...], CatBoostRegressor]]
    # what the members were trained on: their correction shrinks with a query's distance from
    # it (``novelty``); None keeps the correction whole
    familiarity: Familiarity | None = None
    # the training rows a query's analogs are found among (``analogs``); None: a model fitted
    # without them (every analog input blank)
    evidence: Evidence | None = None

    def with_analogs(self, rows: Any) -> Any:
        """``rows`` (with features) and the analog inputs their answer rests on."""
        return with_analogs(rows, self.evidence)

    def feature_importance(self) -> pd.Series:
        """Mean CatBoost importance per feature over the members (0 where a member lacks it)."""
        parts = [
            pd.Series(model.get_feature_importance(), index=model.feature_names_)
            for _, model in self.members
        ]
        return pd.concat(parts, axis=1).fillna(0.0).mean(axis=1).sort_values()


class Pools:
    """CatBoost inputs of one set of rows: the feature matrix built once, a Pool per member.

    The members and the interval's difficulty model of one query (and the members of one fit)
    differ only in the columns they leave out, so the rows are featurised once and each Pool
    takes its columns from that. A query's members and its difficulty model that leave out the
    same columns share one Pool.

    To predict, the matrix is one float32 array of the numeric features and one object array of
    the categorical ones (``catboost.FeaturesData``), with no pandas frame in between: CatBoost
    matches the columns to a model's features by name and reads floats as float32 anyway, so
    the answer is the same as from a frame, at a tenth of the cost (1,000 rows: 0.5 ms against
    4 ms). To fit, the Pool is a frame in ``FEATURE_COLUMNS`` order, the order the models were
    always fitted in (CatBoost's fit depends on the order of its columns).
    """

    def __init__(
        self,
        target: str,
        frame: pd.DataFrame | Mapping[str, np.ndarray],
        label: pd.Series | np.ndarray | None = None,
    ) -> None:
        self.target = target
        self.label = None if label is None else np.asarray(label, dtype=float)
        # columns are copied into a new dict by feature_matrix itself; a frame is read once here
        given = columns_of(frame) if isinstance(frame, pd.DataFrame) else frame
        self.columns = feature_matrix(given, target)
        self.n = len(next(iter(self.columns.values())))
        self._numeric: np.ndarray | None = None
        self._categorical: np.ndarray | None = None
        self._built: dict[tuple[str, ...], Pool] = {}

    def __call__(self, without: tuple[str, ...]) -> Pool:
        """The input of the feature matrix less the columns ``without``."""
        if without not in self._built:
            self._built[without] = (
                self._features(without) if self.label is None else self._frame(without)
            )
        return self._built[without]

    def _features(self, without: tuple[str, ...]) -> Pool:
        if self._numeric is None:
            numeric = [c for c in NUMERIC_FEATURES if c in self.columns]
            # column-major, as CatBoost holds features: a row-major matrix costs it a transposed
            # copy (10,000 rows: 3 ms of numbers, 2 ms of categories, against 0.1 and 4 ms)
            self._numeric = np.empty((self.n, len(numeric)), dtype=np.float32, order="F")
            for i, column in enumerate(numeric):
                self._numeric[:, i] = self.columns[column]
            categorical = [c for c in CATEGORICAL_FEATURES if c in self.columns]
            self._categorical = np.empty((self.n, len(categorical)), dtype=object, order="F")
            for i, column in enumerate(categorical):
                self._categorical[:, i] = self.columns[column]
        numeric = [c for c in NUMERIC_FEATURES if c in self.columns]
        categorical = [c for c in CATEGORICAL_FEATURES if c in self.columns]
        keep_numeric = [i for i, c in enumerate(numeric) if c not in without]
        keep_categorical = [i for i, c in enumerate(categorical) if c not in without]
        data = FeaturesData(
            num_feature_data=_columns(self._numeric, keep_numeric),
            cat_feature_data=_columns(self._categorical, keep_categorical),
            num_feature_names=[numeric[i] for i in keep_numeric],
            cat_feature_names=[categorical[i] for i in keep_categorical],
        )
        return Pool(data)

    def _frame(self, without: tuple[str, ...]) -> Pool:
        names = [c for c in self.columns if c not in without]
        cats = [i for i, c in enumerate(names) if c in CATEGORICAL_FEATURES]
        frame = pd.DataFrame({c: self.columns[c] for c in names}, copy=False)
        return Pool(frame, label=self.label, cat_features=cats)


def _columns(matrix: np.ndarray, keep: list[int]) -> np.ndarray:
    """The columns ``keep`` of ``matrix``: the matrix itself when it keeps them all."""
    return matrix if len(keep) == matrix.shape[1] else np.asfortranarray(matrix[:, keep])


def pool(
    target: str,
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    without: tuple[str, ...],
    label: pd.Series | np.ndarray | None = None,
) -> Pool:
    """CatBoost's input for ``frame``'s feature matrix less the columns ``without``."""
    return Pools(target, frame, label)(without)


# One CatBoost fit at a time per process: a fit sets a process-wide interrupt callback and
# clears it when it ends, and a fit on another thread that reads it in between crashes the
# process (``side_by_side``). The main job's targets run on threads of one process.
_ONE_FIT = threading.Lock()


def fit_alone(model: CatBoostRegressor, data: Pool) -> CatBoostRegressor:
    """``model.fit(data)``, never beside another fit of this process."""
    with _ONE_FIT:
        return model.fit(data)


def fit_members(
    target: str,
    frame: pd.DataFrame,
    label: pd.Series,
    members: tuple[tuple[str, ...], ...],
    settings: dict[str, Any],
    seed: int = 0,
    novelty_scale: float = math.inf,
    pools: Pools | None = None,
) -> Regressor:
    """Fit one CatBoost member per left-out column set of ``members`` on ``label``.

    ``novelty_scale``: the distance from the training rows (``novelty``) at which a query's
    correction keeps 1/e of itself (infinite: never shrunk). ``pools``: the rows' ``Pools``
    with ``label``, when already built (every trial of a study fits the same folds).
    """
    pools = pools or Pools(target, frame, label)  # featurised once for every member
    fitted = []
    for without in members:
        model = CatBoostRegressor(
            **settings,
            loss_function="RMSE",
            random_seed=seed,
            allow_writing_files=False,
            verbose=False,
        )
        fitted.append((without, fit_alone(model, pools(without))))
    return Regressor(target, fitted, Familiarity.of(frame, novelty_scale))


def fit(
    recipe: Recipe,
    frame: pd.DataFrame,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    threads: int = -1,
    pools: Pools | None = None,
    evidence: Evidence | None = None,
) -> Regressor:
    """Fit the recipe's members with ``params`` (tuned) on rows with features and measurements.

    ``threads``: CatBoost's threads per fit (-1: all cores; 1 where folds run side by side).
    ``pools``: ``training_pools(recipe, frame)``, and ``evidence``: ``Evidence.of`` the rows,
    when already built (every trial of a study fits the same folds).
    """
    target = recipe.target
    settings = {**recipe.catboost_params(params), "thread_count": threads}
    trust = settings.pop(CORRECTION_WEIGHT)
    label = encode(target, frame)
    model = fit_members(
        target, frame, label, recipe.members, settings, seed, recipe.novelty_scale, pools
    )
    familiarity = replace(model.familiarity, trust=trust)
    if recipe.analogs and evidence is None:
        evidence = Evidence.of(target, frame)
    return replace(model, familiarity=familiarity, evidence=evidence if recipe.analogs else None)


def training_pools(recipe: Recipe, frame: pd.DataFrame) -> Pools:
    """The ``Pools`` that ``fit`` fits the recipe's members on, for rows with measurements."""
    return Pools(recipe.target, frame, encode(recipe.target, frame))


def raw_predict(
    model: Regressor, frame: pd.DataFrame | Mapping[str, np.ndarray], pools: Pools | None = None
) -> np.ndarray:
    """The answer in target space (before ``decode``), with the row's measured analogs.

    The members' correction, shrunk with novelty, blended with the analogs' residual
    (``analogs.blended``). ``pools``, when given, were built from ``model.with_analogs(frame)``.
    """
    pools = pools or Pools(model.target, model.with_analogs(frame))
    # One thread: on a query CatBoost's thread pool costs more than it saves (a 1,000-row batch
    # took 0.74 ms on 2 threads, 0.34 ms on one), and each server worker is a process of its own.
    correction = np.mean(
        [member.predict(pools(without), thread_count=1) for without, member in model.members],
        axis=0,
    )
    if model.familiarity is not None:
        correction = correction * model.familiarity.weight(frame)
    if model.evidence is None:  # a model without analogs (fitted or logged before them)
        return correction
    return blended(correction, pools.columns)


def predict_si(
    target: str,
    model: Regressor,
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    pools: Pools | None = None,
) -> np.ndarray:
    """Predict ``target`` in SI units (W, or s per token) for rows (or columns) with features."""
    return decode(target, frame, raw_predict(model, frame, pools))
