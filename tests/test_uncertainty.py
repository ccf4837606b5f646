import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.uncertainty import apply_interval, held_out_gpu_coverage, interval_quantiles


def test_quantiles_and_interval_by_hand():
    # true/pred ratios 1, 2, 4 -> log residuals 0, ln 2, ln 4; coverage 0: both ends at the median
    oof = pd.DataFrame(
        {
            "gpu": ["a", "b", "c"],
            "scenario": "server",
            "true": [1.0, 2.0, 4.0],
            "pred": [1.0, 1.0, 1.0],
        }
    )
    q = interval_quantiles(oof, coverage=0.0)
    assert q["server"] == pytest.approx((np.log(2), np.log(2)))
    lower, upper = apply_interval(np.array([10.0]), pd.Series(["server"]), q)
    assert lower == pytest.approx([20.0]) and upper == pytest.approx([20.0])


def test_full_coverage_spans_min_to_max():
    oof = pd.DataFrame(
        {"gpu": list("abcd"), "scenario": "offline", "true": [0.5, 1.0, 1.0, 2.0], "pred": 1.0}
    )
    low, high = interval_quantiles(oof, coverage=1.0)["offline"]
    assert (low, high) == pytest.approx((np.log(0.5), np.log(2.0)))


def test_unknown_scenario_gets_the_widest_interval():
    q = {"offline": (-0.1, 0.1), "server": (-0.3, 0.2)}
    lower, upper = apply_interval(np.array([1.0]), pd.Series(["other"]), q)
    assert lower == pytest.approx(np.exp([-0.3])) and upper == pytest.approx(np.exp([0.2]))


def test_held_out_coverage_leaves_each_gpu_out():
    # log residuals a: 0, b: ln 1.1, c: ln 10; full-coverage interval from the two others:
    # a -> [ln 1.1, ln 10] misses 0; b -> [0, ln 10] holds ln 1.1; c -> [0, ln 1.1] misses ln 10
    oof = pd.DataFrame(
        {"gpu": ["a", "b", "c"], "scenario": "server", "true": [1.0, 1.1, 10.0], "pred": 1.0}
    )
    assert held_out_gpu_coverage(oof, coverage=1.0) == pytest.approx(1 / 3)
