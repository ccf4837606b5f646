"""Optuna studies over CatBoost hyperparameters — the only module that imports Optuna.

The objective is the leave-one-GPU-out MdAPE: the error on GPUs the model never saw, which is
what WattGPU is for. Studies live in any SQLAlchemy storage and resume where they stopped.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
import pandas as pd
from joblib import Parallel, delayed
from sklearn.model_selection import GroupKFold

from wattgpu.errors import ConfigError
from wattgpu.lifecycle.workers import HEARTBEAT_GRACE_S, HEARTBEAT_S
from wattgpu.modeling import models
from wattgpu.modeling.evaluation import FOLD_BACKEND, out_of_fold, score
from wattgpu.modeling.metrics import mdape
from wattgpu.modeling.splits import LLM_BLOCKS, split_indices
from wattgpu.modeling.targets import MEASURED_COLUMN

TrialLogger = Callable[[int, dict[str, Any], dict[str, float]], None]
WORKER_ATTR = "wattgpu.worker"


def search_space(trial: optuna.Trial) -> dict[str, Any]:
    """The CatBoost hyperparameters a trial draws."""
    return {
        "iterations": trial.suggest_int("iterations", 100, 400, step=50),
        "depth": trial.suggest_int("depth", 4, 8),
        "learning_rate": trial.suggest_float("learning_rate", 0.02, 0.3, log=True),
        "l2_leaf_reg": trial.suggest_float("l2_leaf_reg", 0.5, 30.0, log=True),
        "random_strength": trial.suggest_float("random_strength", 0.1, 10.0, log=True),
    }


def default_trial() -> dict[str, Any]:
    """The CatBoost defaults as a point of ``search_space``: every study tries them first."""
    keys = ("iterations", "depth", "learning_rate", "l2_leaf_reg")
    return {**{k: models.DEFAULT_PARAMS[k] for k in keys}, "random_strength": 1.0}


def open_study(storage: str, study_name: str, seed: int) -> optuna.Study:
    """Create the study, or load it when it exists (how a crashed or finished study resumes).

    Raises:
        ConfigError: the storage URL cannot be opened.

    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            # experimental in name since Optuna 2.9; the interface has not changed since
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # The heartbeat lets any worker fail the running trials of a worker that died on
            # another machine once HEARTBEAT_GRACE_S has passed without a beat.
            rdb = optuna.storages.RDBStorage(
                storage,
                heartbeat_interval=int(HEARTBEAT_S),
                grace_period=int(HEARTBEAT_GRACE_S),
            )
        return optuna.create_study(
            study_name=study_name,
            storage=rdb,
            load_if_exists=True,
            direction="minimize",
            sampler=optuna.samplers.TPESampler(seed=seed),
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


def make_objective(
    target: str,
    frame: pd.DataFrame,
    seed: int,
    split: str,
    log_trial: TrialLogger | None,
    worker: str = "",
) -> Callable[[optuna.Trial], float]:
    """The objective: overall MdAPE of out-of-fold predictions on ``split``.

    ``worker`` (a ``workers.identity``) is stamped on each trial, so that a later job can tell
    a trial left running by a killed worker.
    """

    def objective(trial: optuna.Trial) -> float:
        if worker:
            trial.set_user_attr(WORKER_ATTR, worker)
        params = search_space(trial)
        oof = out_of_fold(target, frame, split, params, seed=seed)
        value = mdape(oof["true"], oof["pred"])
        if not np.isfinite(value):
            raise optuna.TrialPruned(f"objective is not finite: {value}")
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


def run_study(
    target: str,
    frame: pd.DataFrame,
    *,
    trials: int,
    timeout: float | None,
    storage: str,
    study_name: str,
    seed: int = 0,
    split: str = "LOGO",
    log_trial: TrialLogger | None = None,
    on_trial_done: Callable[[], None] | None = None,
    worker: str = "",
) -> optuna.Study:
    """Run the study until it holds ``trials`` completed trials (or ``timeout`` seconds pass).

    ``trials`` is a total: a study resumed from its storage only runs the trials still missing.
    """
    if trials < 1:
        raise ConfigError(f"trials must be at least 1; got {trials}")
    study = open_study(storage, study_name, seed)
    remaining = trials - completed_trials(study)
    if not study.trials:
        study.enqueue_trial(default_trial(), skip_if_exists=True)
    if remaining > 0:
        # Workers sharing one study (PostgreSQL) stop together once it holds `trials` complete.
        callbacks = [
            optuna.study.MaxTrialsCallback(trials, states=(optuna.trial.TrialState.COMPLETE,))
        ]
        if on_trial_done:
            callbacks.append(lambda _study, _trial: on_trial_done())
        study.optimize(
            make_objective(target, frame, seed, split, log_trial, worker),
            n_trials=remaining,
            timeout=timeout,
            callbacks=callbacks,
            catch=(),
        )
    if completed_trials(study) == 0:
        raise ConfigError(f"study {study_name!r} finished no trial (timeout {timeout}s too short?)")
    return study


def best_params(study: optuna.Study) -> dict[str, Any]:
    """The best completed trial's hyperparameters."""
    return dict(study.best_trial.params)


def tune_params(
    target: str, frame: pd.DataFrame, *, trials: int, seed: int = 0, split: str = "LOGO"
) -> dict[str, Any]:
    """Best hyperparameters of an in-memory study on ``frame`` alone (objective: ``split`` MdAPE).

    The first trial is ``default_trial()``. Nothing is logged or stored: this is the inner loop of
    a nested evaluation, where ``frame`` is a training fold.
    """
    if trials < 1:
        raise ConfigError(f"trials must be at least 1; got {trials}")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
    study.enqueue_trial(default_trial())
    study.optimize(make_objective(target, frame, seed, split, None), n_trials=trials, catch=())
    return best_params(study)


# LOLO has one fold per LLM (dozens): tuning once per fold would cost dozens of studies, so the
# LLMs are cut into this many blocks and each block's LLMs share the hyperparameters tuned
# without any of them.
LOLO_TUNING_BLOCKS = 5
# The inner objective of a nested evaluation: the same kind of held-out group as the outer split.
INNER_SPLIT = {"CV": "CV", "LOGO": "LOGO", "LOLO": LLM_BLOCKS}


def nested_out_of_fold(
    target: str,
    frame: pd.DataFrame,
    split: str,
    *,
    trials: int,
    seed: int = 0,
    tuning_split: str | None = None,
    on_study_done: Callable[[], None] | None = None,
    prepare: Callable[[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]]
    | None = None,
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Out-of-fold predictions from models whose hyperparameters never saw the held-out group.

    Each study's objective is ``tuning_split`` MdAPE, by default the kind of generalisation the
    outer split measures (``INNER_SPLIT``: unseen GPUs for LOGO, unseen LLMs for LOLO).
    CV and LOGO: every outer fold runs its own study (``tune_params``, objective ``tuning_split``
    MdAPE) on its training rows only. LOLO: the LLMs are cut into ``LOLO_TUNING_BLOCKS`` blocks;
    a study runs on the rows of the other blocks, and each LLM of the block is then predicted by a
    model fitted on every row but its own with those parameters. So no held-out row, GPU or LLM
    ever influences the hyperparameters of the model that predicts it.

    ``prepare(train, test)``, when given, rewrites both sides of every study's rows and every
    outer fold from the training side alone (``wattgpu.modeling.prior.refit_prior`` refits the
    analytical prior so).

    Returns:
        The predictions (``gpu``, ``model``, ``scenario``, ``true``, ``pred``) and, per study,
        the held-out groups and the chosen parameters.

    """
    pred = np.full(len(frame), np.nan)
    folds = list(split_indices(frame, split, seed=seed))
    if split == "LOLO":
        llms = frame["model"].astype(str).to_numpy()
        blocks = GroupKFold(
            n_splits=min(LOLO_TUNING_BLOCKS, len(np.unique(llms))), shuffle=True, random_state=seed
        )
        studies = [
            (tune_rows, np.unique(llms[held]))
            for tune_rows, held in blocks.split(frame, groups=llms)
        ]
    else:
        studies = [(train, None) for train, _ in folds]
    chosen: list[dict[str, Any]] = []
    fold_params: list[dict[str, Any] | None] = [None] * len(folds)
    for number, (tune_rows, held_llms) in enumerate(studies):
        rows = frame.iloc[tune_rows]
        if prepare is not None:
            rows, _ = prepare(rows, rows.iloc[:0])
        inner = tuning_split or INNER_SPLIT[split]
        column = {"LOGO": "gpu", "LOLO": "model", LLM_BLOCKS: "model"}.get(inner)
        if column is not None and rows[column].nunique() < 2:
            inner = "CV"
        params = tune_params(target, rows, trials=trials, seed=seed, split=inner)
        if held_llms is None:
            fold_params[number] = params
            held = (
                sorted(set(frame["gpu"].iloc[folds[number][1]].astype(str)))
                if split == "LOGO"
                else [f"CV fold {number + 1}"]
            )
        else:
            for index, (_, test) in enumerate(folds):
                if frame["model"].iloc[test[0]] in held_llms:
                    fold_params[index] = params
            held = sorted(held_llms)
        chosen.append({"split": split, "held_out": held, "tuned_on": inner, "params": params})
        if on_study_done is not None:
            on_study_done()
    jobs = min(len(folds), os.cpu_count() or 1)
    answers = Parallel(n_jobs=jobs, backend=FOLD_BACKEND)(
        delayed(_fit_predict)(
            target, *_prepared(prepare, frame.iloc[train], frame.iloc[test]), params, seed
        )
        for (train, test), params in zip(folds, fold_params, strict=True)
    )
    for (_, test), answer in zip(folds, answers, strict=True):
        pred[test] = answer
    predictions = pd.DataFrame(
        {
            "gpu": frame["gpu"].to_numpy(),
            "model": frame["model"].to_numpy(),
            "scenario": frame["scenario"].to_numpy(),
            "true": frame[MEASURED_COLUMN[target]].to_numpy(dtype=float),
            "pred": pred,
        }
    )
    return predictions, chosen


def studies_needed(frame: pd.DataFrame, split: str) -> int:
    """How many studies ``nested_out_of_fold`` runs for ``split`` (for a progress bar)."""
    if split == "LOLO":
        return min(LOLO_TUNING_BLOCKS, frame["model"].nunique())
    return len(list(split_indices(frame, split)))


def _prepared(
    prepare: Callable[[pd.DataFrame, pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]] | None,
    train: pd.DataFrame,
    test: pd.DataFrame,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    return (train, test) if prepare is None else prepare(train, test)


def _fit_predict(
    target: str,
    train: pd.DataFrame,
    test: pd.DataFrame,
    params: dict[str, Any] | None,
    seed: int,
) -> np.ndarray:
    model = models.fit(target, train, {**(params or {}), "thread_count": 1}, seed=seed)
    return models.predict(target, model, test)
