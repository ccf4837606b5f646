import math

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.metrics import mdape, pearson_r, ranking_tau, summarise


def test_mdape_by_hand():
    # errors 10 %, 20 %, 50 % -> median 20 %
    assert mdape(np.array([100.0, 200.0, 10.0]), np.array([110.0, 160.0, 15.0])) == pytest.approx(
        20.0
    )


def test_mdape_even_count_takes_the_middle_mean():
    # errors 0 %, 10 %, 30 %, 100 % -> (10 + 30) / 2
    assert mdape(np.array([1.0, 1.0, 1.0, 1.0]), np.array([1.0, 1.1, 0.7, 2.0])) == pytest.approx(
        20.0
    )


def test_pearson_perfect_and_degenerate():
    assert pearson_r(np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0])) == pytest.approx(1.0)
    assert math.isnan(pearson_r(np.array([1.0, 1.0, 1.0]), np.array([1.0, 2.0, 3.0])))


def test_gpu_ranking_tau_by_hand():
    rows = pd.DataFrame(
        {
            "model": ["m1"] * 3 + ["m2"] * 3,
            "scenario": ["offline"] * 6,
            "gpu": ["a", "b", "c"] * 2,
            # m1: predicted order equals the true order -> tau 1
            # m2: one discordant pair of three (b, c swapped) -> (2 - 1) / 3
            "true": [1.0, 2.0, 3.0, 1.0, 2.0, 3.0],
            "pred": [10.0, 20.0, 30.0, 1.0, 3.0, 2.0],
        }
    )
    assert ranking_tau(rows, "gpu", ["model", "scenario"], "true", "pred") == pytest.approx(
        (1 + 1 / 3) / 2
    )


def test_ranking_averages_repeats_per_item_first():
    rows = pd.DataFrame(
        {
            "model": ["m"] * 4,
            "scenario": ["server"] * 4,
            "gpu": ["a", "a", "b", "b"],
            # a: true mean 2, pred mean 5; b: true mean 4, pred mean 3 -> reversed -> tau -1
            "true": [1.0, 3.0, 4.0, 4.0],
            "pred": [5.0, 5.0, 2.0, 4.0],
        }
    )
    assert ranking_tau(rows, "gpu", ["model", "scenario"], "true", "pred") == pytest.approx(-1.0)


def test_groups_with_one_item_are_skipped():
    rows = pd.DataFrame(
        {"model": ["m"], "scenario": ["server"], "gpu": ["a"], "true": [1.0], "pred": [2.0]}
    )
    assert math.isnan(ranking_tau(rows, "gpu", ["model", "scenario"], "true", "pred"))


def test_summarise_names_every_metric():
    rows = pd.DataFrame(
        {
            "model": ["m"] * 3,
            "scenario": ["offline"] * 3,
            "gpu": ["a", "b", "c"],
            "true": [1.0, 2.0, 4.0],
            "pred": [1.0, 2.0, 4.0],
        }
    )
    result = summarise(rows)
    assert result["mdape"] == 0.0
    assert result["gpu_tau"] == pytest.approx(1.0)
    assert result["n_rows"] == 3
