import math

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.metrics import (
    gpu_ranking_tau,
    mdape,
    pearson_r,
    ranking_tau,
    summarise,
    workload_labels,
)


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


def test_ties_count_as_tau_b_and_constant_groups_are_skipped():
    rows = pd.DataFrame(
        {
            "model": ["m1"] * 3 + ["m2"] * 3 + ["m3"] * 2,
            "scenario": ["offline"] * 8,
            "gpu": ["a", "b", "c"] * 2 + ["a", "b"],
            # m1: true 1, 2, 2 (one tie in true), pred 1, 2, 3. Pairs ab +1, ac +1, bc tied in
            #     true: S = 2, pairs untied in true 2, in pred 3 -> 2 / sqrt(2 x 3)
            # m2: a constant prediction carries no ranking -> skipped (scipy's NaN)
            # m3: both true values equal -> skipped
            "true": [1.0, 2.0, 2.0, 1.0, 2.0, 3.0, 5.0, 5.0],
            "pred": [1.0, 2.0, 3.0, 7.0, 7.0, 7.0, 1.0, 2.0],
        }
    )
    assert ranking_tau(rows, "gpu", ["model", "scenario"], "true", "pred") == pytest.approx(
        2 / math.sqrt(6)
    )


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


def test_gpu_tau_ranks_gpus_within_one_workload_by_hand():
    # One LLM, one scenario, three GPUs a < b < c (true), measured under three workloads:
    # W1 batch 1, 100 -> 200 tokens (output means 200 and 205: within 10 %, one length);
    # W2 batch 64, same tokens; W3 batch 1, 100 -> 1000 tokens.
    rows = pd.DataFrame(
        {
            "model": "m",
            "scenario": "offline",
            "num_gpus": 1,
            "gpu": ["a", "b", "c", "a", "b", "c", "a", "b"],
            "batch_size": [1, 1, 1, 64, 64, 64, 1, 1],
            "input_tokens": 100.0,
            "output_tokens": [200.0, 205.0, 200.0, 200.0, 200.0, 200.0, 1000.0, 1000.0],
            "true": [1.0, 2.0, 3.0, 10.0, 20.0, 30.0, 5.0, 6.0],
            # W1: a, b, c predicted in order -> tau 1; W2: c first, a, b -> pairs (a,b)
            # concordant, (a,c) and (b,c) discordant -> (1 - 2) / 3; W3: b below a -> -1
            "pred": [1.0, 2.0, 3.0, 20.0, 25.0, 15.0, 6.0, 5.0],
        }
    )
    labels = workload_labels(rows)
    assert len(set(labels)) == 3
    assert labels[0] == labels[1] == labels[2] != labels[3]
    assert gpu_ranking_tau(rows) == pytest.approx((1 + (1 - 2) / 3 - 1) / 3)
    assert summarise(rows)["gpu_tau"] == pytest.approx((1 - 1 / 3 - 1) / 3)
    # Per (LLM, scenario) alone, the three workloads pooled per GPU (a 16/3, b 28/3, c 16.5
    # true; a 9, b 32/3, c 9 predicted) would rank differently: the workload matters.
    pooled = ranking_tau(rows, "gpu", ["model", "scenario"], "true", "pred")
    assert pooled != pytest.approx(gpu_ranking_tau(rows))


def test_a_closed_loop_ranks_by_its_users_not_its_achieved_rate():
    rows = pd.DataFrame(
        {
            "model": "m",
            "scenario": "server",
            "gpu": ["a", "b", "a", "b"],
            "users": [8, 8, 64, 64],
            "request_rate_rps": [1.3, 2.9, 4.1, 7.7],  # what each GPU achieved
            "input_tokens": [500.0, 510.0, 500.0, 490.0],
            "output_tokens": 128.0,
            "true": [2.0, 1.0, 4.0, 3.0],
            "pred": [2.0, 1.0, 3.0, 4.0],  # 8 users: right; 64 users: wrong
        }
    )
    assert len(set(workload_labels(rows))) == 2
    assert gpu_ranking_tau(rows) == pytest.approx(0.0)
