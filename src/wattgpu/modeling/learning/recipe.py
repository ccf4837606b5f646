"""Recipes: how a target's model is built, tuned and checked, in one object per target.

A recipe holds everything that sets the cost and the shape of a job: the CatBoost members and
their fixed and default hyperparameters, the search space Optuna draws from, the interval's
difficulty model, and how many folds each split and calibration uses. Two ship:

- ``full``: what the main job trains and serves;
- ``fast``: few iterations and few, grouped folds, for tests and quick looks. It trains the same
  kind of model on the same features, only coarser, so a test that passes with it exercises the
  same code as the main job.

Pure data: ``wattgpu.lifecycle.tuning`` turns the search space into Optuna's suggestions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wattgpu.config import CLOSED_FORM, DEFAULT_RECIPE, RECIPES, target_prior
from wattgpu.errors import ConfigError
from wattgpu.modeling.learning.splits import DEFAULT_FOLDS, Folds
from wattgpu.modeling.physical.features import (
    ANALOG_FEATURES,
    CPU_FLOOR_FEATURES,
    PRIOR_FEATURES,
    RAW_GPU_SPECS,
)
from wattgpu.modeling.physical.targets import check_target


@dataclass(frozen=True)
class Dimension:
    """One hyperparameter's range in the search space (``integer`` ones step by ``step``)."""

    low: float
    high: float
    log: bool = False
    integer: bool = False
    step: int = 1


@dataclass(frozen=True)
class Pruning:
    """When a tuning trial is stopped before all its folds are fitted.

    Attributes:
        after: the share of a trial's folds (those with the most test rows) fitted before it
            may be stopped (1: never stopped early).
        percentile: a trial whose MdAPE on those folds is worse than this percentile of the
            earlier trials' is stopped there (Optuna's ``PercentilePruner``).
        startup_trials: the first trials, which always finish.

    """

    after: float
    percentile: float
    startup_trials: int


@dataclass(frozen=True)
class Recipe:
    """How one target's model is fitted, tuned and checked.

    Attributes:
        name: ``full`` or ``fast``.
        target: ``power``, ``itl`` or ``ttft``.
        members: per CatBoost member, the feature columns it leaves out; the model is their mean
            in target space.
        fixed_params: CatBoost settings never tuned.
        default_params: CatBoost's starting point, the first trial of every study.
        search_space: the hyperparameters a trial draws, by name.
        difficulty_params: CatBoost settings of the interval's difficulty model (beside the
            fixed ones).
        interval_folds: folds of the interval's cross-fitted calibration.
        min_scenario_rows: residuals a scenario needs for conformal factors of its own.
        folds: folds of grouped cross-validation and blocks of the leave-LLMs-out split.
        lolo_tuning_blocks: studies of the nested leave-one-LLM-out evaluation.
        startup_trials: random trials before the TPE sampler starts modelling.
        pruning: when a trial is stopped early (``Pruning``).
        interval_checks: the splits whose held-out groups the main job bounds as served to
            check its intervals (``interval_check``; the accuracy bench checks all four).
        novelty_scale: the distance from the training rows (``novelty``, in decades outside
            their ranges, one per unseen engine) at which a query's learnt correction keeps 1/e
            of itself; infinite keeps it whole.
        analogs: whether the answer leans on measured analogs (``analogs.blended``).
        prior: what the targets are relative to (``config.PRIORS``): the closed-form serving
            regimes or each row's serving loop simulated (``config.TARGET_PRIORS``: each
            target's own).

    """

    name: str
    target: str
    members: tuple[tuple[str, ...], ...]
    fixed_params: Mapping[str, Any]
    default_params: Mapping[str, Any]
    search_space: Mapping[str, Dimension]
    difficulty_params: Mapping[str, Any]
    interval_folds: int
    min_scenario_rows: int
    folds: Folds
    lolo_tuning_blocks: int
    startup_trials: int
    pruning: Pruning
    interval_checks: tuple[str, ...]
    novelty_scale: float = math.inf
    analogs: bool = True
    prior: str = CLOSED_FORM

    def catboost_params(self, tuned: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A fit's settings: the defaults, overridden by the fixed and ``tuned``.

        CatBoost's own, plus ``CORRECTION_WEIGHT`` (``models.fit`` takes it out).
        """
        return {**self.default_params, **self.fixed_params, **(tuned or {})}

    def default_trial(self) -> dict[str, Any]:
        """The default parameters as a point of the search space (every study tries it first)."""
        return {name: self.default_params[name] for name in self.search_space}

    def difficulty_without(self) -> tuple[str, ...]:
        """The columns the interval's difficulty model leaves out: the last member's.

        That member lacks the GPU specs that name the product: with them the difficulty model
        would learn which GPUs were hard instead of which regimes are, and a query's GPU is
        usually one it has not seen. Unlike the members, it sees the analogs: close, agreeing
        ones make an answer easier.
        """
        return tuple(c for c in self.members[-1] if c not in ANALOG_FEATURES)


# Per target, the columns each member leaves out of the feature matrix. Power is learnt without
# the GPU specs that name the product and sees the prior with the engine's host-side floor; the
# ITL log-ratio averages a member with the specs and one without (with them the trees fit the
# known GPUs closer, without them they rank unseen GPUs better) and sees the prior without the
# floor; TTFT takes the ITL recipe's GPU-agnostic member. The ITL trees do not see the engine's
# name: it acts through the prior's engine floor and paired-row factor only (LOGO offline 17.7
# -> 15.1 %, LOSO offline 41.2 -> 38.3 %, server 39.3 -> 41.0 %). Each choice measured by
# bench/ablation.py.
# No member sees the analogs (``analogs``): their residual is blended into the answer after the
# trees (``analogs.blended``); as tree inputs they lost LOGO ITL points (docs/model.md).
MEMBERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "power": ((*RAW_GPU_SPECS, *PRIOR_FEATURES, *ANALOG_FEATURES),),
    "itl": (
        (*CPU_FLOOR_FEATURES, "engine", *ANALOG_FEATURES),
        (*RAW_GPU_SPECS, *CPU_FLOOR_FEATURES, "engine", *ANALOG_FEATURES),
    ),
    "ttft": ((*RAW_GPU_SPECS, *CPU_FLOOR_FEATURES, *ANALOG_FEATURES),),
}

# Per target, whether the answer leans on measured analogs (``analogs``). Power does not: on
# leave-one-GPU-out the blend took offline MdAPE 19.8 -> 19.5 % but the GPU ranking's tau 0.37
# -> 0.08, and recommend ranks GPUs by energy (bench/ablation.py, docs/accuracy.md).
LEANS_ON_ANALOGS = {"power": False, "itl": True, "ttft": True}

# The share of the trees' correction to the prior that a model keeps (``novelty``), tuned with
# CatBoost's hyperparameters: on leave-one-source-out and leave-one-GPU-out, ITL answered best
# keeping about half of it (bench/ablation.py, docs/accuracy.md).
CORRECTION_WEIGHT = "correction_weight"
# Per target, the distance at which a query's correction keeps 1/e of itself (``novelty``), from
# bench/ablation.py --splits LOSO LOGO (CatBoost defaults): ITL at 0.5 decade, LOSO server 46.6
# -> 39.3 % (offline 38.7 -> 40.2 %), LOGO within 0.3 points; TTFT LOSO 64.6 -> 57.5 %, LOGO
# unchanged; power is not shrunk with distance (LOGO 18.8 -> 20.2 % offline, 15.1 -> 18.1 %
# server when it was).
NOVELTY_SCALE = {"power": math.inf, "itl": 0.5, "ttft": 0.5}
# Not tuned: single-feature categorical statistics and few borders make each fit about twice as
# fast (a tuning trial is dozens of fits), in exchange for coarser splits.
_FIXED = {"max_ctr_complexity": 1}
# Per target, CatBoost settings never tuned.
# - ITL and TTFT one-hot encode the categorical features (none has more than a few dozen
#   values): it skips CatBoost's ordered target statistics, which made an ITL fit 4x faster, and
#   on the nested bench (bench/accuracy.py --quick) LOGO ITL went 15.6 -> 14.5 % offline,
#   11.3 -> 11.0 % server, TTFT 20.5 -> 18.6 %. Power keeps the statistics: one-hot cost it 2
#   points on its server rows (13.1 -> 15.2 %), and a power fit is cheap either way.
# - 32 borders per feature instead of 64 fit a tree in about 0.7 of the time; in the main job
#   (LOGO MdAPE of the tuned model) power went 18.08 -> 17.76 % and ITL 17.60 -> 17.00 %, TTFT
#   33.66 -> 34.97 %: TTFT keeps 64.
_OWN_FIXED = {
    "power": {"border_count": 32},
    "itl": {"border_count": 32, "one_hot_max_size": 255},
    "ttft": {"border_count": 64, "one_hot_max_size": 255},
}

# Both recipes: the largest 40 % of the folds hold most rows (LOGO ITL: 4 GPUs of 10, 88 % of the
# rows); a trial not in the best quarter of the earlier ones there is stopped, its other folds
# never fitted. The default trial and one more always finish, so that there is a quarter to
# compare with. A quarter instead of half left the main job's answers the same to the digit with
# 30 fewer fits: TPE ranks a stopped trial after every finished one, so while the best trial
# finishes, it draws the same next trials.
_PRUNING = Pruning(after=0.4, percentile=25.0, startup_trials=2)

_FULL = {
    # CatBoost's own defaults but for the iterations (random_strength 1 is CatBoost's too).
    "default_params": {
        "iterations": 300,
        "depth": 6,
        "learning_rate": 0.1,
        "l2_leaf_reg": 3.0,
        "random_strength": 1.0,
        CORRECTION_WEIGHT: 1.0,
    },
    "search_space": {
        "iterations": Dimension(100, 400, integer=True, step=50),
        "depth": Dimension(4, 8, integer=True),
        "learning_rate": Dimension(0.02, 0.3, log=True),
        "l2_leaf_reg": Dimension(0.5, 30.0, log=True),
        "random_strength": Dimension(0.1, 10.0, log=True),
        CORRECTION_WEIGHT: Dimension(0.25, 1.0),
    },
    # Deliberately small: a few hundred residuals, and it only ranks regimes by how wrong the
    # main model tends to be in them. Not cheaper: 100 trees at twice the rate and 3 folds saved
    # the main job about 7 s but widened the unseen set-up's intervals at the same coverage
    # (the main job's LOSO check, median width: ITL server 4.5 -> 5.7 x the prediction, TTFT
    # 6.0 -> 7.3 x, at the same coverage).
    "difficulty_params": {
        "iterations": 200,
        "depth": 4,
        "learning_rate": 0.05,
        "l2_leaf_reg": 10.0,
    },
    # Enough to keep every row's calibrated difficulty honest, few enough to stay cheap.
    "interval_folds": 5,
    # With fewer residuals the 5 % tails hold too few rows to place the bounds.
    "min_scenario_rows": 100,
    "folds": DEFAULT_FOLDS,
    "lolo_tuning_blocks": 5,
    # Well below the main job's 10 trials, so that TPE models the last ones.
    "startup_trials": 4,
    "pruning": _PRUNING,
    # The kinds a user's query most often is, an unseen GPU or set-up: each check is an interval
    # model per held-out group, and all four splits cost the main job 3.5x the fits of these two.
    "interval_checks": ("LOGO", "LOSO"),
}

# CatBoost's fit time here is bound by iterations, not rows (30 fit in 0.06 s, 300 in 0.5 s).
_FAST = {
    "default_params": {
        "iterations": 40,
        "depth": 4,
        "learning_rate": 0.3,
        "l2_leaf_reg": 3.0,
        "random_strength": 1.0,
        CORRECTION_WEIGHT: 1.0,
    },
    "search_space": {
        "iterations": Dimension(30, 60, integer=True, step=10),
        "depth": Dimension(3, 5, integer=True),
        "learning_rate": Dimension(0.1, 0.5, log=True),
        "l2_leaf_reg": Dimension(1.0, 10.0, log=True),
        "random_strength": Dimension(0.1, 10.0, log=True),
        CORRECTION_WEIGHT: Dimension(0.25, 1.0),
    },
    "difficulty_params": {"iterations": 30, "depth": 3, "learning_rate": 0.2, "l2_leaf_reg": 10.0},
    "interval_folds": 3,
    "min_scenario_rows": 100,
    "folds": Folds(cv=3, llm_blocks=3),
    "lolo_tuning_blocks": 2,
    "startup_trials": 2,
    "pruning": _PRUNING,
    # every split: cheap here, and the tests see every kind checked
    "interval_checks": ("CV", "LOGO", "LOLO", "LOSO"),
}

_SETTINGS = {"full": _FULL, "fast": _FAST}

# A target's own search space where the recipe's common one does not fit it. ITL has the most
# rows (7,040, AIConfigurator's included) and two members: a depth-8, 400-tree trial cost 3x the
# default one and never won, and its study was half the main job. Its full space stops at depth
# 6 and 200 trees, which its default takes.
_OWN_SEARCH_SPACE: dict[tuple[str, str], Mapping[str, Dimension]] = {
    ("full", "itl"): {
        "iterations": Dimension(100, 200, integer=True, step=50),
        "depth": Dimension(4, 6, integer=True),
        "learning_rate": Dimension(0.05, 0.3, log=True),
        "l2_leaf_reg": Dimension(0.5, 30.0, log=True),
        "random_strength": Dimension(0.1, 10.0, log=True),
        CORRECTION_WEIGHT: Dimension(0.25, 1.0),
    },
}


# A target's own pruning where the recipe's common one does not fit it. ITL's study is the main
# job's largest (two members, ten GPUs): its two largest folds hold 61 % of its rows, and a trial
# judged on them stops at 4 fits instead of 8. In the main job the same trials stopped and every
# figure stayed the same to the digit, 20 fits fewer; TTFT judged on two folds of seven (70 % of
# its rows) finished another trial and lost 1.2 points of LOGO MdAPE, so it keeps the common one.
_OWN_PRUNING: dict[tuple[str, str], Pruning] = {
    ("full", "itl"): Pruning(after=0.2, percentile=25.0, startup_trials=2),
}


# A target's own defaults where its search space needs them (the default trial must lie in it).
_OWN_DEFAULTS: dict[tuple[str, str], Mapping[str, Any]] = {("full", "itl"): {"iterations": 200}}


def recipe_of(target: str, name: str = DEFAULT_RECIPE, prior: str | None = None) -> Recipe:
    """The recipe ``name`` (``full`` or ``fast``) of ``target``, on ``prior`` (None: its own).

    Raises:
        ConfigError: an unknown target, recipe name or prior.

    """
    check_target(target)
    prior = target_prior(target, prior)
    if name not in _SETTINGS:
        raise ConfigError(f"recipe must be one of {', '.join(RECIPES)}; got {name!r}")
    settings = dict(_SETTINGS[name])
    settings["search_space"] = _OWN_SEARCH_SPACE.get((name, target), settings["search_space"])
    settings["pruning"] = _OWN_PRUNING.get((name, target), settings["pruning"])
    settings["default_params"] = {
        **settings["default_params"],
        **_OWN_DEFAULTS.get((name, target), {}),
    }
    return Recipe(
        name=name,
        target=target,
        members=MEMBERS[target],
        fixed_params={**_FIXED, **_OWN_FIXED[target]},
        novelty_scale=NOVELTY_SCALE[target],
        analogs=LEANS_ON_ANALOGS[target],
        prior=prior,
        **settings,
    )
