"""Per-row prediction intervals: normalised split-conformal, calibrated per kind of novelty.

A prediction's interval is ``[pred x exp(q_lo x d), pred x exp(q_hi x d)]``. ``d`` is the row's
*difficulty*: a small CatBoost model's estimate of ``|log(true / pred)|`` from the row's features,
learnt on leave-one-GPU-out residuals. ``q_lo``/``q_hi`` are conformal quantiles of normalised
residuals ``log(true / pred) / d``, with difficulties predicted for GPUs the difficulty model had
not seen (cross-fitted by GPU), so the calibration is not fooled by the difficulty model's own
fit. A 7B model in a well-measured regime then gets a narrow interval and a query unlike
anything measured a wide one, at the same nominal coverage.

The factors are calibrated per kind of novelty (``unseen``): a query on a measured GPU and
set-up gets factors from grouped cross-validation's residuals, one on an unseen GPU from
leave-one-GPU-out's, an unseen LLM from leave-one-LLM-out's, an unseen set-up from
leave-one-source-out's; a query new in several ways gets the widest. Within a kind they are
fitted per scenario (offline and server residuals differ in spread and skew) where the scenario
has the residuals for it -- at least ``min_scenario_rows`` of them, from at least two held-out
groups of the kind -- and otherwise the kind's pooled factors serve it, marked not validated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from catboost import CatBoostRegressor

from wattgpu.data.measurements import SCENARIOS
from wattgpu.modeling.learning.models import Pools, fit_alone, pool
from wattgpu.modeling.learning.recipe import Recipe
from wattgpu.modeling.learning.splits import split_groups
from wattgpu.modeling.learning.unseen import (
    KINDS,
    MEASURED,
    PHRASE,
    SPLIT_OF_KIND,
    UNSEEN_GPU,
    Seen,
    novelty_labels,
)
from wattgpu.modeling.physical.features import ANALOG_FEATURES
from wattgpu.modeling.physical.targets import capped

COVERAGE = 0.9
# |log residual| floor: keeps log(|r|) finite and the smallest intervals away from zero width.
MIN_RESIDUAL = 0.01


@dataclass(frozen=True)
class Calibration:
    """One kind of novelty's conformal factors (log scale), pooled and per scenario.

    Attributes:
        q_low: the pooled factor of the lower end.
        q_high: the pooled factor of the upper end.
        by_scenario: the factors of each scenario calibrated on its own residuals (from at
            least two GPUs); a scenario not in it gets the pooled ones.
        not_validated: scenarios served the pooled factors although their own residuals are
            too few or from one GPU: their coverage on this kind was never measured.
        residuals: how many residuals the factors come from.
        borrowed: the kind had no residuals of its own: the factors are an unseen GPU's, and
            not validated for any scenario.

    """

    q_low: float
    q_high: float
    by_scenario: dict[str, tuple[float, float]] = field(default_factory=dict)
    not_validated: tuple[str, ...] = ()
    residuals: int = 0
    borrowed: bool = False

    def factors(self, scenarios: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The lower and upper factors of rows of these scenarios."""
        low = np.full(len(scenarios), self.q_low)
        high = np.full(len(scenarios), self.q_high)
        for scenario, (q_low, q_high) in self.by_scenario.items():
            rows = scenarios == scenario
            low[rows], high[rows] = q_low, q_high
        return low, high

    def validated(self, scenarios: np.ndarray) -> np.ndarray:
        """Whether each row's factors were checked on residuals of its scenario and kind."""
        if self.borrowed:
            return np.zeros(len(scenarios), dtype=bool)
        return ~np.isin(scenarios.astype(str), self.not_validated)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (for the model card)."""
        return {
            "q_low": self.q_low,
            "q_high": self.q_high,
            "by_scenario": {k: list(v) for k, v in self.by_scenario.items()},
            "not_validated": list(self.not_validated),
            "residuals": self.residuals,
            "borrowed": self.borrowed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        """The inverse of ``to_dict``."""
        return cls(
            float(data["q_low"]),
            float(data["q_high"]),
            {k: (float(lo), float(hi)) for k, (lo, hi) in data.get("by_scenario", {}).items()},
            tuple(data.get("not_validated", ())),
            int(data.get("residuals", 0)),
            bool(data.get("borrowed", False)),
        )


@dataclass(frozen=True)
class Intervals:
    """A batch's intervals and what they rest on, row by row."""

    lower: np.ndarray
    upper: np.ndarray
    novelty: np.ndarray  # the row's kinds of novelty in words (``unseen.novelty_labels``)
    kind: np.ndarray  # the kind whose factors bound the row (the widest of its kinds)
    validated: np.ndarray  # whether that kind's factors were checked on the row's scenario


@dataclass
class IntervalModel:
    """What turns a prediction into an interval: a difficulty model and factors per kind.

    Per kind of novelty (``unseen.KINDS``), the conformal factors are calibrated on that kind's
    held-out residuals.

    ``seen`` (the training rows' GPUs, LLM architectures and set-ups) says which kinds a row
    falls in; without it (a model logged before the kinds) every row is an unseen GPU, the kind
    every interval model has.
    """

    target: str
    without: tuple[str, ...]
    difficulty: CatBoostRegressor | float
    calibrations: dict[str, Calibration]
    seen: Seen | None = None
    coverage: float = COVERAGE

    def calibration(self, kind: str) -> Calibration:
        """``kind``'s calibration; for a kind without one, borrowed and not validated.

        Borrowed from an unseen GPU's (every interval model of a main job has it), else from
        the widest one there is.
        """
        if kind in self.calibrations:
            return self.calibrations[kind]
        lender = self.calibrations.get(UNSEEN_GPU) or max(
            self.calibrations.values(), key=lambda c: c.q_high - c.q_low
        )
        return Calibration(lender.q_low, lender.q_high, dict(lender.by_scenario), borrowed=True)

    def kinds(self, rows: pd.DataFrame | Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Per kind, which rows fall in it (``measured``: none of the unseen kinds)."""
        n = len(np.asarray(rows["scenario"]))
        if self.seen is None:
            return {UNSEEN_GPU: np.ones(n, dtype=bool)}
        unseen = self.seen.unseen(rows)
        measured = ~np.logical_or.reduce(list(unseen.values()))
        return {MEASURED: measured, **unseen}

    def factors(
        self, rows: pd.DataFrame | Mapping[str, Any]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Each row's lower and upper factors, novelty words, bounding kind and validation.

        Of the kinds a row falls in, the one with the widest factors for its scenario bounds it.
        """
        scenarios = np.asarray(rows["scenario"]).astype(str)
        n = len(scenarios)
        low, high = np.zeros(n), np.full(n, -np.inf)
        kind = np.full(n, "", dtype=object)
        validated = np.zeros(n, dtype=bool)
        falls_in = self.kinds(rows)
        for name in KINDS:
            rows_in = falls_in.get(name)
            if rows_in is None or not rows_in.any():
                continue
            calibration = self.calibration(name)
            k_low, k_high = calibration.factors(scenarios)
            wider = rows_in & (k_high - k_low > high - low)
            low[wider], high[wider], kind[wider] = k_low[wider], k_high[wider], name
            validated[wider] = calibration.validated(scenarios)[wider]
        words = novelty_labels({k: m for k, m in falls_in.items() if k != MEASURED}, n)
        return low, high, words, kind, validated


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
    return fit_alone(model, pool(recipe.target, frame, recipe.difficulty_without(), label))


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


def held_out_analogs(oof: pd.DataFrame) -> dict[str, np.ndarray]:
    """The analog inputs (``ANALOG_FEATURES``) each row of ``oof`` had when it was held out.

    Empty for predictions made without them.
    """
    if not all(c in oof.columns for c in ANALOG_FEATURES):
        return {}
    return {c: oof[c].to_numpy(dtype=float) for c in ANALOG_FEATURES}


def with_held_out_analogs(frame: pd.DataFrame, oof: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """``frame`` with the analog inputs its rows had when their GPU was held out (``LOGO``).

    What the difficulty model learns from: its label is the unseen GPU's residual, which the
    row's analogs among the other GPUs' rows shaped (a served query's analogs are found so too).
    """
    split = "LOGO" if "LOGO" in oof else next(iter(oof), None)
    return frame if split is None else frame.assign(**held_out_analogs(oof[split]))


def kind_residuals(oof: Mapping[str, pd.DataFrame]) -> dict[str, np.ndarray]:
    """Per kind of novelty, ``log(true / pred)`` of every row, from its own split.

    That is the split that held the kind out (``unseen.SPLIT_OF_KIND``); a split missing from
    ``oof`` gives no kind.
    """
    return {
        kind: log_residuals(oof[split]) for kind, split in SPLIT_OF_KIND.items() if split in oof
    }


def fit_interval(
    recipe: Recipe,
    frame: pd.DataFrame,
    residuals: Mapping[str, np.ndarray],
    coverage: float = COVERAGE,
    seed: int = 0,
) -> IntervalModel:
    """The interval model of ``frame``'s rows from their held-out residuals of each kind.

    Args:
        recipe: the target's recipe (the difficulty model's settings, the calibration's folds).
        frame: training rows with features.
        residuals: per kind (``unseen.KINDS``), each row's ``log(true / pred)`` from the split
            that held that kind out (``kind_residuals``; NaN where it has none). The difficulty
            model learns from the unseen GPU's (else from the first kind given).
        coverage: nominal coverage of the central interval.
        seed: CatBoost's and the inner folds' seed.

    The difficulty model is fitted on the unseen-GPU residuals; the calibration's difficulties
    come from models fitted without the row's GPU (cross-fitted), and each kind's factors are
    conformal quantiles of that kind's residuals over them.

    """
    gpus = frame["gpu"].to_numpy()
    anchor = np.asarray(
        residuals[UNSEEN_GPU if UNSEEN_GPU in residuals else next(iter(residuals))], float
    )
    model = fit_difficulty(recipe, frame, anchor, seed)
    scale = _cross_fitted_difficulty(recipe, frame, anchor, gpus, seed)
    scenarios = frame["scenario"].to_numpy().astype(str)
    calibrations = {}
    for kind, values in residuals.items():
        values = np.asarray(values, float)
        ok = np.isfinite(values)
        if ok.sum() < 2:
            continue
        groups = split_groups(frame, SPLIT_OF_KIND[kind])
        calibrations[kind] = calibrate(
            values[ok] / scale[ok],
            scenarios[ok],
            groups[ok],
            gpus[ok],
            recipe.min_scenario_rows,
            coverage,
        )
    return IntervalModel(
        recipe.target, recipe.difficulty_without(), model, calibrations, Seen.of(frame), coverage
    )


def calibrate(
    scores: np.ndarray,
    scenarios: np.ndarray,
    groups: np.ndarray,
    gpus: np.ndarray,
    min_rows: int,
    coverage: float = COVERAGE,
) -> Calibration:
    """One kind's factors: pooled, and per scenario where the scenario has the data.

    A scenario gets factors of its own from at least ``min_rows`` scores (fewer leave the 5 %
    tails too thin to place the bounds). Its factors are validated where its scores come from at
    least two GPUs and two held-out ``groups`` of the kind (residuals of one GPU say nothing
    about the next one); otherwise it is served the pooled factors and marked not validated.
    """
    q_low, q_high = conformal_quantiles(scores, coverage)
    own, not_validated = {}, []
    for scenario in SCENARIOS:
        rows = scenarios == scenario
        if not rows.any():  # a scenario the target has no rows of: the domain's warning says so
            continue
        spread = min(len(np.unique(groups[rows])), len(np.unique(gpus[rows])))
        if spread < 2:
            not_validated.append(scenario)
        elif rows.sum() >= min_rows:
            own[scenario] = conformal_quantiles(scores[rows], coverage)
    return Calibration(q_low, q_high, own, tuple(not_validated), len(scores))


def intervals(
    model: IntervalModel,
    frame: pd.DataFrame | Mapping[str, np.ndarray],
    pred: np.ndarray,
    pools: Pools | None = None,
) -> Intervals:
    """The intervals of the predictions ``pred`` of ``frame``'s rows, with what they rest on.

    The one path from an interval model to intervals: the served model and every held-out
    check call it. ``pools``, when given, are the CatBoost inputs already built for the rows.
    """
    d = difficulty(model.difficulty, model.target, frame, model.without, pools)
    pred = np.asarray(pred, float)
    q_low, q_high, novelty, kind, validated = model.factors(frame)
    upper = capped(model.target, frame, pred * np.exp(q_high * d))
    lower = np.minimum(pred * np.exp(q_low * d), upper)
    return Intervals(lower, upper, novelty, kind, validated)


def not_validated_note(target: str, scenario: str, kind: str) -> str:
    """The warning of an interval never checked on its kind and scenario."""
    return f"{scenario} {target} intervals not validated on {PHRASE[kind]}"


def not_validated_notes(model: IntervalModel) -> list[str]:
    """Every (kind, scenario) whose served factors were never checked, as warnings."""
    notes = []
    for kind in KINDS:
        calibration = model.calibration(kind)
        for scenario in SCENARIOS:
            if not calibration.validated(np.array([scenario]))[0]:
                notes.append(not_validated_note(model.target, scenario, kind))
    return notes
