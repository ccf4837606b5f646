"""Optuna studies over CatBoost hyperparameters — the only module that imports Optuna.

The objective is the leave-one-GPU-out MdAPE: the error on GPUs the model never saw, which is
what WattGPU is for. Studies live in any SQLAlchemy storage and resume where they stopped.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import Any

import numpy as np
import optuna
import pandas as pd

from wattgpu.errors import ConfigError
from wattgpu.lifecycle import store_creation
from wattgpu.lifecycle.workers import HEARTBEAT_GRACE_S, HEARTBEAT_S
from wattgpu.modeling.learning.evaluation import (
    FOLD_COLUMNS,
    Prepare,
    PreparedSplit,
    Tuner,
    predict_folds,
    prepare_split,
    score,
)
from wattgpu.modeling.learning.recipe import Recipe
from wattgpu.modeling.learning.side_by_side import Stopped
from wattgpu.modeling.metrics import mdape

TrialLogger = Callable[[int, dict[str, Any], dict[str, float]], None]
WORKER_ATTR = "wattgpu.worker"
# What a study minimises: the MdAPE on GPUs its model never saw.
OBJECTIVE_SPLIT = "LOGO"


def suggest(trial: optuna.Trial, recipe: Recipe) -> dict[str, Any]:
    """The CatBoost hyperparameters a trial draws from the recipe's search space."""
    params: dict[str, Any] = {}
    for name, dim in recipe.search_space.items():
        if dim.integer:
            params[name] = trial.suggest_int(name, int(dim.low), int(dim.high), step=dim.step)
        else:
            params[name] = trial.suggest_float(name, dim.low, dim.high, log=dim.log)
    return params


# What a trial cut short by Ctrl-C fails with: the interrupt itself, or on the main job's other
# targets the stopped workers (``side_by_side.stop``).
STOPPED = (KeyboardInterrupt, Stopped, CancelledError)


def _untraced_when_stopped(record: logging.LogRecord) -> bool:
    """Optuna's line for a trial that failed because the job was stopped, without the trace."""
    if record.exc_info and isinstance(record.exc_info[1], STOPPED):
        record.exc_info = None
    return True


def _quiet_optuna() -> None:
    """Optuna's warnings only; a trial stopped by Ctrl-C in one line, not with its trace."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for handler in logging.getLogger("optuna").handlers:
        if _untraced_when_stopped not in handler.filters:
            handler.addFilter(_untraced_when_stopped)


def sampler(recipe: Recipe, seed: int) -> optuna.samplers.TPESampler:
    """TPE, seeded, modelling after the recipe's few random startup trials.

    Optuna's default of 10 startup trials would make the main job's 10 trials a random search.
    """
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=recipe.startup_trials)


def open_study(storage: str, study_name: str, recipe: Recipe, seed: int) -> optuna.Study:
    """Create the study, or load it when it exists (how a crashed or finished study resumes).

    Raises:
        ConfigError: the storage URL cannot be opened.

    """
    _quiet_optuna()
    try:
        with warnings.catch_warnings():
            # experimental in name since Optuna 2.9; the interface has not changed since
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # The heartbeat lets any worker fail the running trials of a worker that died on
            # another machine once HEARTBEAT_GRACE_S has passed without a beat.
            # Optuna creates its schema on first open: serialised, so that two jobs starting
            # on a fresh storage do not both create it (store_creation).
            rdb = store_creation.opened_once(
                storage,
                lambda: optuna.storages.RDBStorage(
                    storage,
                    heartbeat_interval=int(HEARTBEAT_S),
                    grace_period=int(HEARTBEAT_GRACE_S),
                ),
            )
        return optuna.create_study(
            study_name=study_name,
            storage=rdb,
            load_if_exists=True,
            direction="minimize",
            sampler=sampler(recipe, seed),
            pruner=pruner(recipe),
        )
    except Exception as exc:  # SQLAlchemy, driver and URL errors come in many types
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"cannot open Optuna storage {storage!r} (expected an SQLAlchemy URL such as "
            f"sqlite:///optuna.db or postgresql+psycopg2://user@host/db): {reason}"
        ) from None


def fail_dead_trials(study: optuna.Study, is_dead: Callable[[str], bool]) -> list[int]:
    """Mark FAIL the running trials whose worker (user attr ``WORKER_ATTR``) is dead."""
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        if is_dead(str(trial.user_attrs.get(WORKER_ATTR, ""))):
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
            failed.append(trial.number)
    return failed


def completed_trials(study: optuna.Study) -> int:
    """Number of trials that finished with a value."""
    return sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


# A trial is done when it finished with a value or was pruned: ``--trials`` counts both.
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def finished_trials(study: optuna.Study) -> int:
    """Number of trials that finished with a value or were pruned."""
    return sum(t.state in FINISHED for t in study.trials)


def pruner(recipe: Recipe) -> optuna.pruners.BasePruner:
    """Stops a trial whose first stage of folds is worse than the recipe's percentile.

    The percentile is of the trials finished before it at the same stage (``recipe.pruning``).
    """
    return optuna.pruners.PercentilePruner(
        recipe.pruning.percentile,
        n_startup_trials=recipe.pruning.startup_trials,
        n_warmup_steps=0,
    )


class BestPredictions:
    """The out-of-fold predictions of the best trial this process ran (kept for the evaluation).

    A study resumed from its storage may hold a better trial from another process: then
    ``of(trial)`` has nothing, and the evaluation fits that trial's folds again.
    """

    def __init__(self) -> None:
        self._number: int | None = None
        self._value = np.inf
        self._oof: pd.DataFrame | None = None

    def offer(self, number: int, value: float, oof: pd.DataFrame) -> None:
        """Keep ``oof`` if trial ``number`` beats every trial offered before."""
        if value < self._value:
            self._number, self._value, self._oof = number, value, oof

    def of(self, trial_number: int) -> pd.DataFrame | None:
        """The predictions of trial ``trial_number``, if this process kept them."""
        return self._oof if trial_number == self._number else None


def make_objective(
    recipe: Recipe,
    frame: pd.DataFrame,
    seed: int,
    split: str,
    log_trial: TrialLogger | None,
    worker: str = "",
    best: BestPredictions | None = None,
    prepare: Prepare | None = None,
    ready: PreparedSplit | None = None,
) -> Callable[[optuna.Trial], float]:
    """The objective: overall MdAPE of out-of-fold predictions on ``split``.

    The folds are fitted in the recipe's stages (``fold_stages``): after the first, the MdAPE
    of the rows predicted so far is reported, and the study's pruner (``pruner``) stops a trial
    already worse than most: its remaining folds are never fitted.

    ``worker`` (a ``workers.identity``) is stamped on each trial, so that a later job can tell
    a trial left running by a killed worker. ``best``, when given, keeps the best trial's
    predictions. ``prepare`` (``prior.refit_prior_for``) rewrites each fold from its training side
    once, here, for every trial; ``ready``, when given, are ``split``'s folds of ``frame`` so
    rewritten already (``evaluation.prepare_split`` with the same seed and ``prepare``).
    """
    target = recipe.target
    if ready is None:
        ready = prepare_split(recipe, frame, split, seed, prepare)
    elif ready.split != split:
        raise ValueError(f"the prepared folds are {ready.split}'s, the objective {split}'s")
    folds, prepared = ready.folds, ready.prepared
    stages = fold_stages(folds, recipe.pruning.after)

    def objective(trial: optuna.Trial) -> float:
        if worker:
            trial.set_user_attr(WORKER_ATTR, worker)
        params = suggest(trial, recipe)
        parts = []
        for step, stage in enumerate(stages):
            parts.append(
                predict_folds(
                    recipe,
                    frame,
                    [folds[i] for i in stage],
                    [params] * len(stage),
                    seed=seed,
                    prepared=[prepared[i] for i in stage],
                )
            )
            if step < len(stages) - 1:
                _prune_if_behind(trial, merged(parts), step, split, params, log_trial)
        oof = merged(parts)
        value = mdape(oof["true"], oof["pred"])
        if not np.isfinite(value):
            raise optuna.TrialPruned(f"objective is not finite: {value}")
        if best is not None:
            best.offer(trial.number, value, oof)
        metrics = {f"{split}_mdape": value}
        for record in score(oof, "catboost", target, split):
            prefix = f"{split}_{record['scenario']}"
            metrics.update(
                {
                    f"{prefix}_{k}": float(record[k])
                    for k in ("mdape", "pearson_r", "gpu_tau", "llm_tau")
                }
            )
        if log_trial is not None:
            log_trial(trial.number, params, metrics)
        return value

    return objective


def _prune_if_behind(
    trial: optuna.Trial,
    so_far: pd.DataFrame,
    step: int,
    split: str,
    params: dict[str, Any],
    log_trial: TrialLogger | None,
) -> None:
    """Report the MdAPE of the rows predicted so far; stop the trial where the pruner says.

    Raises:
        optuna.TrialPruned: the trial is stopped (logged first with its partial figure).

    """
    done = so_far["pred"].notna()
    partial = mdape(so_far["true"][done], so_far["pred"][done])
    trial.report(partial, step)
    if trial.should_prune():
        if log_trial is not None:
            log_trial(trial.number, params, {f"{split}_mdape_partial": partial})
        raise optuna.TrialPruned(f"{split} MdAPE {partial:.2f} % after stage {step + 1}")


def fold_stages(folds: list[tuple[np.ndarray, np.ndarray]], first_share: float) -> list[list[int]]:
    """The folds' numbers in the order a trial fits them: a first stage, then the rest.

    The first stage holds the folds with the most test rows, ``first_share`` of the folds (at
    least two, so that both cores work): its MdAPE speaks for most rows at a fraction of the
    fits. A share of 1, or too few folds, is one stage.
    """
    count = max(2, round(first_share * len(folds)))
    if count >= len(folds):
        return [list(range(len(folds)))]
    by_size = sorted(range(len(folds)), key=lambda i: (-len(folds[i][1]), i))
    return [sorted(by_size[:count]), sorted(by_size[count:])]


def merged(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Out-of-fold frames of disjoint folds as one (each row from the part that predicted it).

    Every per-fold answer comes along: the model's, the prior's and ``FOLD_COLUMNS`` (the
    scaled analogs' answer and the analog inputs).
    """
    out = parts[0].copy()
    answers = [c for c in ("pred", "prior", *FOLD_COLUMNS) if c in out.columns]
    for part in parts[1:]:
        out[answers] = out[answers].fillna(part[answers])
    return out


def run_study(
    study: optuna.Study,
    recipe: Recipe,
    frame: pd.DataFrame,
    *,
    trials: int,
    timeout: float | None,
    seed: int = 0,
    split: str = OBJECTIVE_SPLIT,
    log_trial: TrialLogger | None = None,
    on_trial_done: Callable[[], None] | None = None,
    worker: str = "",
    best: BestPredictions | None = None,
    prepare: Prepare | None = None,
    ready: PreparedSplit | None = None,
) -> optuna.Study:
    """Run ``study`` (from ``open_study``) until it holds ``trials`` completed trials.

    ``trials`` is a total: a study resumed from its storage only runs the trials still missing.
    It stops early once ``timeout`` seconds have passed. ``prepare``, ``ready``: see
    ``make_objective``.

    Raises:
        ConfigError: ``trials`` is below 1, or no trial finished.

    """
    if trials < 1:
        raise ConfigError(f"trials must be at least 1; got {trials}")
    remaining = trials - finished_trials(study)
    objective = make_objective(recipe, frame, seed, split, log_trial, worker, best, prepare, ready)
    callbacks = [lambda _study, _trial: on_trial_done()] if on_trial_done else []
    deadline = None if timeout is None else time.monotonic() + timeout
    for _ in range(max(remaining, 0)):
        # Workers sharing one study (PostgreSQL) stop together once it holds `trials` finished.
        if finished_trials(study) >= trials or (
            deadline is not None and time.monotonic() >= deadline
        ):
            break
        _enqueue_stamped(study, recipe, worker)
        study.optimize(objective, n_trials=1, callbacks=callbacks, catch=())
    if completed_trials(study) == 0:
        raise ConfigError(
            f"study {study.study_name!r} finished no trial (timeout {timeout}s too short?)"
        )
    return study


def _enqueue_stamped(study: optuna.Study, recipe: Recipe, worker: str) -> None:
    """Queue the next trial with its worker already stamped (the first: the recipe's default).

    ``optimize`` takes the oldest waiting trial, so a trial is RUNNING only once it carries a
    worker's identity: a job killed before its objective starts still leaves a trial that the
    next job can tell is dead (a trial created RUNNING would be stamped only in the objective).
    """
    stamp = {WORKER_ATTR: worker} if worker else None
    if not study.trials:
        study.enqueue_trial(recipe.default_trial(), user_attrs=stamp, skip_if_exists=True)
    else:
        study.enqueue_trial({}, user_attrs=stamp)


def best_params(study: optuna.Study) -> dict[str, Any]:
    """The best completed trial's hyperparameters."""
    return dict(study.best_trial.params)


def tuner(recipe: Recipe, *, trials: int, seed: int = 0, prepare: Prepare | None = None) -> Tuner:
    """The tuner ``modeling.learning.evaluation.nested_out_of_fold`` asks for: ``tune_params``.

    ``prepare`` rewrites each inner fold from its own training side (once per study).

    Raises:
        ConfigError: ``trials`` is below 1.

    """
    if trials < 1:
        raise ConfigError(f"trials must be at least 1; got {trials}")

    def tune(rows: pd.DataFrame, split: str) -> dict[str, Any]:
        return tune_params(recipe, rows, trials=trials, seed=seed, split=split, prepare=prepare)

    return tune


def tune_params(
    recipe: Recipe,
    frame: pd.DataFrame,
    *,
    trials: int,
    seed: int = 0,
    split: str = OBJECTIVE_SPLIT,
    prepare: Prepare | None = None,
) -> dict[str, Any]:
    """Best hyperparameters of an in-memory study on ``frame`` alone (objective: ``split`` MdAPE).

    The first trial is the recipe's ``default_trial()``. Nothing is logged or stored: this is
    the inner loop of a nested evaluation, where ``frame`` is a training fold.
    """
    if trials < 1:
        raise ConfigError(f"trials must be at least 1; got {trials}")
    _quiet_optuna()
    study = optuna.create_study(
        direction="minimize", sampler=sampler(recipe, seed), pruner=pruner(recipe)
    )
    study.enqueue_trial(recipe.default_trial())
    objective = make_objective(recipe, frame, seed, split, None, prepare=prepare)
    study.optimize(objective, n_trials=trials, catch=())
    return best_params(study)
