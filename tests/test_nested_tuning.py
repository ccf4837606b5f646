"""Nested tuning: hyperparameters of every held-out group are chosen without that group."""

import json
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.lifecycle import tuning
from wattgpu.modeling.learning.evaluation import nested_out_of_fold, studies_needed
from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.targets import rows_with_target

FAST = recipe_of("power", "fast")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rows():

    from wattgpu.data.catalog import Catalog
    from wattgpu.modeling.physical.synthetic import synthesize

    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    generated = synthesize(catalog, seed=0)
    gpus = sorted(generated["gpu"].unique())[:4]
    generated = generated[generated["gpu"].isin(gpus)].reset_index(drop=True)
    return rows_with_target("power", build_features(generated, catalog))


def test_default_trial_is_a_point_of_the_search_space():
    assert recipe_of("power").default_trial() == {
        "iterations": 300,
        "depth": 6,
        "learning_rate": 0.1,
        "l2_leaf_reg": 3.0,
        "random_strength": 1.0,
        "correction_weight": 1.0,  # the whole learnt correction (novelty shrinks it far away)
    }
    for name in ("full", "fast"):
        for target in ("power", "itl", "ttft"):
            chosen = recipe_of(target, name)
            for key, value in chosen.default_trial().items():
                dimension = chosen.search_space[key]
                assert dimension.low <= value <= dimension.high, (name, target, key)


def test_logo_runs_one_study_per_gpu_without_it(rows):
    oof, chosen = nested_out_of_fold(FAST, rows, "LOGO", tuning.tuner(FAST, trials=1))
    assert sorted(c["held_out"][0] for c in chosen) == sorted(rows["gpu"].unique())
    assert all(c["tuned_on"] == "LOGO" and len(c["held_out"]) == 1 for c in chosen)
    assert np.isfinite(oof["pred"]).all() and len(oof) == len(rows)


def test_lolo_blocks_cover_every_llm_once(rows):
    oof, chosen = nested_out_of_fold(FAST, rows, "LOLO", tuning.tuner(FAST, trials=1))
    held = [llm for c in chosen for llm in c["held_out"]]
    # tuned for unseen LLMs, as LOLO measures
    assert {c["tuned_on"] for c in chosen} == {"LLM-blocks"}
    assert len(chosen) == studies_needed(FAST, rows, "LOLO") == FAST.lolo_tuning_blocks == 2
    assert sorted(held) == sorted(rows["model"].unique())
    assert np.isfinite(oof["pred"]).all()


def record_sides(log: Path, train: pd.DataFrame, test: pd.DataFrame):
    """A ``prepare`` that changes nothing and notes the GPUs of each side it is given (the outer
    folds run it in worker processes, so it writes them to a file)."""
    with log.open("a", encoding="utf-8") as out:
        out.write(json.dumps([sorted(set(train["gpu"])), sorted(set(test["gpu"]))]) + "\n")
    return train, test


def test_prepare_sees_only_training_rows_of_each_fold(rows, tmp_path):
    log = tmp_path / "sides.jsonl"
    prepare = partial(record_sides, log)
    nested_out_of_fold(FAST, rows, "LOGO", tuning.tuner(FAST, trials=1), prepare=prepare)
    lines = log.read_text(encoding="utf-8").splitlines()
    seen = [(set(train), set(test)) for train, test in map(json.loads, lines)]
    folds = [s for s in seen if s[1]]  # the outer folds (a study's rows come with no test side)
    assert len(folds) == rows["gpu"].nunique() == len(seen) - len(folds)
    assert all(len(test) == 1 and not (train & test) for train, test in folds)
