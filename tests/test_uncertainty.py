import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.learning.recipe import recipe_of
from wattgpu.modeling.learning.uncertainty import (
    IntervalModel,
    conformal_quantiles,
    fit_difficulty,
    fit_interval,
    held_out_intervals,
    interval,
    interval_figures,
    interval_figures_by_gpu,
    scenario_quantiles,
)
from wattgpu.modeling.physical.features import build_features

FAST = recipe_of("power", "fast")
WITHOUT = FAST.difficulty_without()


def test_conformal_quantiles_by_hand():
    scores = np.arange(10, 0, -1, dtype=float)  # 10 scores, 1 ... 10, unsorted
    # coverage 0.8: tails 0.1; k_low = floor(11 x 0.1) = 1, k_high = ceil(11 x 0.9) = 10
    assert conformal_quantiles(scores, 0.8) == (1.0, 10.0)
    # coverage 0.5: tails 0.25; k_low = floor(11 x 0.25) = 2, k_high = ceil(11 x 0.75) = 9
    assert conformal_quantiles(scores, 0.5) == (2.0, 9.0)


def test_interval_figures_by_hand():
    true = np.array([1.0, 2.0, 3.0, 4.0])
    pred = np.array([2.0, 2.0, 2.0, 2.0])
    lower = np.array([0.5, 1.0, 3.5, 3.0])
    upper = np.array([1.5, 3.0, 4.0, np.nan])  # the last row has no interval
    figures = interval_figures(true, pred, lower, upper)
    # inside: 1 in [0.5, 1.5], 2 in [1, 3], 3 not in [3.5, 4] -> 2 of 3
    assert figures["interval_coverage"] == pytest.approx(2 / 3)
    # widths 1/2, 2/2, 0.5/2 -> median 0.5
    assert figures["interval_width"] == pytest.approx(0.5)


def test_each_scenario_with_enough_rows_gets_its_own_factors():
    # 100 offline scores 1..100 and 99 server scores -1..-99: server is below the threshold
    scores = np.concatenate([np.arange(1.0, 101.0), -np.arange(1.0, 100.0)])
    scenarios = np.array(["offline"] * 100 + ["server"] * 99)
    # offline alone, coverage 0.9: k_low = floor(101 x 0.05) = 5, k_high = ceil(101 x 0.95) = 96
    assert scenario_quantiles(scores, scenarios, 100, 0.9) == {"offline": (5.0, 96.0)}


def test_the_factors_of_a_row_are_its_scenarios_or_the_pooled_ones():
    bounds = IntervalModel("power", (), 1.0, -1.0, 1.0, by_scenario={"server": (-0.5, 2.0)})
    low, high = bounds.factors(np.array(["server", "offline", "server"]))
    assert low.tolist() == [-0.5, -1.0, -0.5] and high.tolist() == [2.0, 1.0, 2.0]


def test_interval_figures_by_gpu_by_hand():
    oof = pd.DataFrame(
        {
            "gpu": ["A", "A", "B", "B"],
            "scenario": ["offline", "offline", "offline", "server"],
            "true": [1.0, 5.0, 2.0, 2.0],
            "pred": [2.0, 4.0, 2.0, 1.0],
        }
    )
    lower = np.array([0.5, 1.0, 1.0, 1.0])
    upper = np.array([1.5, 3.0, 3.0, 3.0])
    table = interval_figures_by_gpu(oof, lower, upper)
    assert table[["gpu", "scenario", "n_rows"]].values.tolist() == [
        ["A", "offline", 2],
        ["B", "offline", 1],
        ["B", "server", 1],
    ]
    # A: 1 in [0.5, 1.5] yes, 5 in [1, 3] no -> 1/2; widths 1/2 and 2/4 -> median 0.5
    # B offline: 2 in [1, 3], width 2/2 = 1; B server: 2 in [1, 3], width 2/1 = 2
    assert table["interval_coverage"].tolist() == pytest.approx([0.5, 1.0, 1.0])
    assert table["interval_width"].tolist() == pytest.approx([0.5, 1.0, 2.0])


def _rows(catalog, batches):
    frame = pd.DataFrame(
        {
            "gpu": ["NVIDIA H100 SXM5", "NVIDIA L4"] * len(batches),
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "scenario": "offline",
            "batch_size": np.repeat(batches, 2).astype(float),
        }
    )
    return build_features(frame, catalog)


def test_interval_is_the_prediction_times_the_factors_at_the_rows_difficulty(small_catalog):
    rows = _rows(small_catalog, [1, 8, 32, 64])
    # every residual 0.1 -> the difficulty model learns log 0.1 everywhere -> d = 0.1
    model = fit_difficulty(FAST, rows, np.full(len(rows), 0.1))
    assert model == pytest.approx(0.1)  # alike residuals: one difficulty, no trees to fit
    bounds = IntervalModel("power", WITHOUT, model, q_low=-2.0, q_high=3.0)
    lower, upper = interval(bounds, rows, np.full(len(rows), 50.0))
    assert lower == pytest.approx(np.full(len(rows), 50.0 * np.exp(-0.2)), rel=1e-3)
    assert upper == pytest.approx(np.full(len(rows), 50.0 * np.exp(0.3)), rel=1e-3)
    # 100 W: the L4's interval ends at its 72 W power limit, the H100's (700 W) does not
    lower, upper = interval(bounds, rows, np.full(len(rows), 100.0))
    l4 = (rows["gpu"] == "NVIDIA L4").to_numpy()
    assert upper[l4] == pytest.approx(72.0) and upper[~l4] == pytest.approx(100.0 * np.exp(0.3))


def test_a_held_out_groups_own_residuals_never_shape_its_interval(small_catalog):
    rows = _rows(small_catalog, [1, 2, 4, 8, 16, 32, 64, 128])
    groups = np.tile(["a", "b", "c", "d"], len(rows) // 4)
    true = np.linspace(100.0, 200.0, len(rows))
    pred = true * np.linspace(0.8, 1.3, len(rows))
    oof = pd.DataFrame({"true": true, "pred": pred, "scenario": "offline"})
    itl = recipe_of("itl", "fast")  # latencies: no power limit caps the bounds
    lower, upper = held_out_intervals(itl, rows, oof, groups)
    # group a's measurements made ten times worse: a's interval stays, the others' widen
    worse = oof.assign(true=np.where(groups == "a", true * 10.0, true))
    lower2, upper2 = held_out_intervals(itl, rows, worse, groups)
    a = groups == "a"
    assert lower2[a] == pytest.approx(lower[a]) and upper2[a] == pytest.approx(upper[a])
    assert (upper2[~a] - lower2[~a] > upper[~a] - lower[~a]).all()


def test_the_interval_shares_a_members_inputs(small_catalog):
    from wattgpu.modeling.learning.models import Pools

    for target in ("power", "itl", "ttft"):
        # the difficulty model leaves out what one member leaves out: one input serves both
        for name in ("full", "fast"):
            chosen = recipe_of(target, name)
            assert chosen.difficulty_without() in chosen.members
    pools = Pools("power", _rows(small_catalog, [1, 8]))
    assert pools(WITHOUT) is pools(WITHOUT)


def test_a_scenario_is_calibrated_on_its_own_residuals(small_catalog):
    rows = _rows(small_catalog, list(range(1, 101)))  # 200 rows, 100 per GPU
    rows["scenario"] = np.where(np.arange(len(rows)) % 2 == 0, "offline", "server")
    # offline residuals small, server residuals ten times larger
    spread = np.where(rows["scenario"] == "offline", 0.02, 0.2) * np.sin(np.arange(len(rows)))
    oof = pd.DataFrame({"true": 100.0 * np.exp(spread), "pred": np.full(len(rows), 100.0)})
    bounds = fit_interval(FAST, rows, oof, rows["gpu"].to_numpy())
    assert set(bounds.by_scenario) == {"offline", "server"}
    lower, upper = interval(bounds, rows, np.full(len(rows), 100.0))
    width = (upper - lower) / 100.0
    offline = (rows["scenario"] == "offline").to_numpy()
    assert np.median(width[~offline]) > 3 * np.median(width[offline])
