"""Tuning trials stopped early: fold stages, the pruner, and what ``--trials`` counts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import optuna
import pandas as pd
import pytest

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.errors import ConfigError
from wattgpu.lifecycle import tuning
from wattgpu.modeling.learning.recipe import Pruning, recipe_of


def fold(n_test: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(0), np.arange(start, start + n_test)


def test_the_first_stage_holds_the_folds_with_the_most_test_rows():
    sizes = [64, 168, 1136, 184, 1956, 61, 328, 2307, 764, 72]
    folds = [fold(n) for n in sizes]
    # 40 % of ten folds: the four largest (2307, 1956, 1136, 764), in their own order
    assert tuning.fold_stages(folds, 0.4) == [[2, 4, 7, 8], [0, 1, 3, 5, 6, 9]]


def test_at_least_two_folds_come_first_and_a_share_of_one_is_one_stage():
    folds = [fold(n) for n in (10, 30, 20, 40, 50)]
    assert tuning.fold_stages(folds, 0.1) == [[3, 4], [0, 1, 2]]
    assert tuning.fold_stages(folds, 1.0) == [[0, 1, 2, 3, 4]]
    assert tuning.fold_stages(folds[:2], 0.4) == [[0, 1]]


def test_merged_takes_each_row_from_the_part_that_predicted_it():
    base = {"gpu": ["a", "b", "c"], "true": [1.0, 2.0, 3.0]}
    first = pd.DataFrame({**base, "pred": [1.5, np.nan, np.nan], "prior": [1.0, np.nan, np.nan]})
    second = pd.DataFrame({**base, "pred": [np.nan, 2.5, 3.5], "prior": [np.nan, 2.0, 3.0]})
    out = tuning.merged([first, second])
    assert out["pred"].tolist() == [1.5, 2.5, 3.5]
    assert out["prior"].tolist() == [1.0, 2.0, 3.0]
    assert first["pred"].isna().sum() == 2  # the parts are left as they were


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    from wattgpu.data.catalog import Catalog
    from wattgpu.modeling.physical.features import build_features
    from wattgpu.modeling.physical.synthetic import synthesize
    from wattgpu.modeling.physical.targets import rows_with_target

    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    generated = synthesize(catalog, seed=0)
    gpus = sorted(generated["gpu"].unique())[:5]
    generated = generated[generated["gpu"].isin(gpus)].reset_index(drop=True)
    return rows_with_target("power", build_features(generated, catalog))


def test_a_trial_worse_than_the_earlier_ones_at_its_first_stage_is_pruned_and_counted(
    rows, tmp_path
):
    # Prune anything not better than every earlier trial (percentile 0), after one trial.
    recipe = replace(
        recipe_of("power", "fast"), pruning=Pruning(after=0.4, percentile=0.0, startup_trials=1)
    )
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = tuning.open_study(storage, "s", recipe, seed=0)
    logged: list[tuple[int, dict]] = []
    tuning.run_study(
        study,
        recipe,
        rows,
        trials=6,
        timeout=None,
        log_trial=lambda number, _params, metrics: logged.append((number, metrics)),
    )
    states = [t.state for t in study.trials]
    assert len(states) == 6
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert states[0] == optuna.trial.TrialState.COMPLETE  # the startup trial always finishes
    assert pruned, "no trial was worse than the first at its first stage?"
    for trial in pruned:
        # its first stage was worse than every complete trial's before it
        earlier = [t.intermediate_values[0] for t in complete if t.number < trial.number]
        assert trial.intermediate_values[0] > min(earlier)
    assert study.best_trial.state == optuna.trial.TrialState.COMPLETE
    # a pruned trial is logged with its partial figure only; a complete one with the whole
    assert {n for n, m in logged if "LOGO_mdape_partial" in m} == {t.number for t in pruned}
    assert {n for n, m in logged if "LOGO_mdape" in m} == {t.number for t in complete}
    # --trials counts finished trials, pruned ones included: the study is done
    assert tuning.finished_trials(study) == 6
    assert tuning.completed_trials(study) == len(complete)
    tuning.run_study(study, recipe, rows, trials=6, timeout=None)
    assert len(study.trials) == 6


class StampSpy(optuna.samplers.RandomSampler):
    """Records, as each trial starts running, the worker stamp it already carries in storage."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.seen: list[tuple[optuna.trial.TrialState, object]] = []

    def before_trial(self, study, trial) -> None:
        self.seen.append((trial.state, trial.user_attrs.get(tuning.WORKER_ATTR)))


def test_a_trial_is_running_only_once_it_carries_its_worker(rows, tmp_path):
    # A job killed between a trial's start and its objective must still leave a stamped trial,
    # or the next job's sweep can never tell that its worker is dead.
    recipe = recipe_of("power", "fast")
    spy = StampSpy()
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'optuna.db'}", sampler=spy)
    tuning.run_study(study, recipe, rows, trials=3, timeout=None, worker="host:1:2")
    running = optuna.trial.TrialState.RUNNING
    assert spy.seen == [(running, "host:1:2")] * 3
    assert [t.params for t in study.trials][0] == recipe.default_trial()
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 3


def test_a_study_out_of_time_starts_no_trial_and_says_so(rows, tmp_path):
    recipe = recipe_of("power", "fast")
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    with pytest.raises(ConfigError, match="finished no trial"):
        tuning.run_study(study, recipe, rows, trials=3, timeout=0.0)
    assert [t.state for t in study.trials] == []


def test_a_staged_trials_predictions_keep_every_folds_answers():
    # two stages, each answering its own rows: the model's, the prior's, the scaled analogs'
    # answer and the analog inputs all come through for every row
    nan = np.nan
    first = pd.DataFrame(
        {
            "true": [1.0, 2.0, 3.0],
            "pred": [1.1, nan, nan],
            "prior": [0.9, nan, nan],
            "scaled": [1.2, nan, nan],
            "analog_count": [2.0, nan, nan],
        }
    )
    second = pd.DataFrame(
        {
            "true": [1.0, 2.0, 3.0],
            "pred": [nan, 2.2, 3.3],
            "prior": [nan, 1.8, 2.7],
            "scaled": [nan, 2.4, 3.6],
            "analog_count": [nan, 0.0, 5.0],
        }
    )
    out = tuning.merged([first, second])
    assert out["pred"].tolist() == [1.1, 2.2, 3.3]
    assert out["prior"].tolist() == [0.9, 1.8, 2.7]
    assert out["scaled"].tolist() == [1.2, 2.4, 3.6]
    assert out["analog_count"].tolist() == [2.0, 0.0, 5.0]
