"""Per-step jitter (modeling/serving/jitter.py, loop.jittered), checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_serving_loop import costs, host, scheduler

from wattgpu.modeling.serving.jitter import Jitter, fit_jitter
from wattgpu.modeling.serving.loop import CLOSED, Client, _add, _quantile, jittered, simulate
from wattgpu.modeling.serving.scheduler import DECODE_FIRST

# Eight steps in ten take their own time, one 1.5 times as long, one twice.
TEN_POINTS = np.array([1.0] * 8 + [1.5, 2.0])


def two_steps() -> np.ndarray:
    """One row's gaps: 80 % of 10 ms steps, 20 % of 30 ms ones (a prefill in the step)."""
    hist = np.zeros((1, 2, 900))
    _add(hist, np.array([0, 0]), np.array([0.010, 0.030]), np.array([0.8, 0.2]))
    return hist


def test_two_step_values_spread_over_a_known_jitter_give_the_p90_and_p99_by_hand():
    hist = two_steps()
    # without jitter p90 and p99 both land on the 30 ms step
    assert _quantile(hist, 0.9)[0] == pytest.approx(0.030)
    assert _quantile(hist, 0.99)[0] == pytest.approx(0.030)
    # spread: 10 ms 0.64, 15 ms 0.08, 20 ms 0.08, 30 ms 0.16, 45 ms 0.02, 60 ms 0.02; the
    # cumulative weights 0.64, 0.72, 0.80, 0.96, 0.98, 1.00 put the p50 at 10 ms, the p90 at
    # 30 ms (0.80 < 0.9 <= 0.96) and the p99 at 60 ms (0.98 < 0.99)
    spread = jittered(hist, TEN_POINTS)
    assert spread[0, 0].sum() == pytest.approx(1.0)
    assert _quantile(spread, 0.5)[0] == pytest.approx(0.010)
    assert _quantile(spread, 0.9)[0] == pytest.approx(0.030)
    assert _quantile(spread, 0.99)[0] == pytest.approx(0.060)
    # with a heavier jitter (four steps in ten twice as long) the p90 leaves the 30 ms step:
    # 10 ms 0.48, 20 ms 0.32, 30 ms 0.12, 60 ms 0.08; cumulative 0.48, 0.80, 0.92, 1.00
    heavy = jittered(hist, np.array([1.0] * 6 + [2.0] * 4))
    assert _quantile(heavy, 0.9)[0] == pytest.approx(0.030)
    assert _quantile(heavy, 0.5)[0] == pytest.approx(0.020)
    assert _quantile(heavy, 0.99)[0] == pytest.approx(0.060)


def one_user(answer: float = 51) -> Client:
    return Client(
        kind=np.array([CLOSED]),
        users=np.ones(1),
        rate=np.zeros(1),
        prompt=np.array([100.0]),
        answer=np.array([answer]),
        prompt_shape=np.ones((1, 21)),
        answer_shape=np.ones((1, 21)),
        warmup=np.zeros(1),
        measured=np.array([4.0]),
    )


def test_the_loop_reads_its_gap_percentiles_after_the_jitter_and_nothing_else_moves():
    # one user alone: every gap is one 10 ms decode step (the weights' read)
    plain = simulate(costs(), host(), scheduler(DECODE_FIRST), one_user())
    for level in ("p50", "p90", "p99"):
        assert plain[f"itl_{level}_s"][0] == pytest.approx(0.010)
    spread = simulate(costs(), host(), scheduler(DECODE_FIRST), one_user(), jitter=TEN_POINTS)
    # 10 ms x (1 eight times in ten, 1.5, 2): p50 10 ms; p90 15 ms (0.8 < 0.9 <= 0.9); p99 20 ms
    assert spread["itl_p50_s"][0] == pytest.approx(0.010)
    assert spread["itl_p90_s"][0] == pytest.approx(0.015)
    assert spread["itl_p99_s"][0] == pytest.approx(0.020)
    for name in plain:
        if not name.startswith("itl_p"):
            np.testing.assert_array_equal(spread[name], plain[name], err_msg=name)


def test_a_table_becomes_equally_likely_multipliers_linear_in_the_level():
    jitter = Jitter((math.log(2.0), math.log(4.0)), rows=5)
    # levels 0.05, 0.15, ..., 0.95: none below the median, then log2 of the multiplier rises
    # linearly from 0 at 0.5 to 1 at 0.9 and 2 at 0.99
    expected = [1.0] * 5 + [2**0.125, 2**0.375, 2**0.625, 2**0.875, 2 ** (1 + 5 / 9)]
    np.testing.assert_allclose(jitter.multipliers(10), expected)
    # past the last level, its ratio: 4 (levels 0.9925 and 0.9975 of 200 points)
    assert jitter.multipliers()[-2:] == pytest.approx([4.0, 4.0])
    assert Jitter.from_dict(jitter.to_dict()) == jitter
    assert Jitter.from_dict({}) is None


def test_the_table_is_fitted_on_one_user_rows_that_measured_their_tails():
    rows = pd.DataFrame(
        {
            "users": [1, 1, 1, 2, 1],
            "itl_s": [0.010, 0.010, 0.020, 0.010, 0.010],
            # p90 / median: 1.1, 1.2, 1.0 (the two-user row and the one without tails left out)
            "itl_p90_s": [0.011, 0.012, 0.020, 0.050, np.nan],
            # p99 / median: 2, 1.5, 1.5
            "itl_p99_s": [0.020, 0.015, 0.030, 0.100, 0.050],
        }
    )
    jitter = fit_jitter(rows)
    assert jitter is not None and jitter.rows == 3
    assert jitter.log_ratios == pytest.approx((math.log(1.1), math.log(1.5)))
    # a p99 below the p90 is raised to it; a ratio below 1 counts as 1
    low = rows.assign(itl_p90_s=[0.030] * 5, itl_p99_s=[0.020] * 5)
    assert fit_jitter(low).log_ratios == pytest.approx((math.log(3.0), math.log(3.0)))
    fast = rows.assign(itl_p90_s=[0.005] * 5, itl_p99_s=[0.005] * 5)
    assert fit_jitter(fast).log_ratios == (0.0, 0.0)
    # too few one-user rows, or no tails at all: no jitter
    assert fit_jitter(rows.iloc[[0, 1, 3]]) is None
    assert fit_jitter(rows.drop(columns="itl_p99_s")) is None


@pytest.fixture(scope="module")
def pilot_rows():
    """LLM-Pilot's shipped rows (1 to 128 users of TGIS, each with measured tails), as trained."""
    from wattgpu.config import SHIPPED_DATA_DIR, load_settings
    from wattgpu.lifecycle.pipeline import load_data, training_rows

    data = load_data(load_settings(), [SHIPPED_DATA_DIR / "measurements" / "llm_pilot.csv"])
    return training_rows("itl", data).reset_index(drop=True)


def test_a_simulated_p99_is_steady_doubling_the_requests_moves_it_under_2_percent(
    pilot_rows, monkeypatch
):
    from wattgpu.modeling.serving import workload
    from wattgpu.modeling.serving.run import forget_simulated, simulate_rows

    rows = pilot_rows.iloc[::2]  # every other row: 1 to 128 users on all four GPUs
    jitter = fit_jitter(pilot_rows)
    forget_simulated()
    served = simulate_rows(rows, jitter=jitter)
    monkeypatch.setattr(workload, "SETTLED_MEASURED", 2 * workload.SETTLED_MEASURED)
    monkeypatch.setattr(workload, "MIN_MEASURED", 2 * workload.MIN_MEASURED)
    forget_simulated()
    doubled = simulate_rows(rows, jitter=jitter)
    forget_simulated()
    change = np.abs(doubled["itl_p99_s"] / served["itl_p99_s"] - 1).to_numpy()
    assert np.isfinite(change).all()
    assert np.median(change) < 0.02
