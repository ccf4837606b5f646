"""The TTFT terms (modeling/serving/ttft_terms.py): a known overhead and efficiency given back.

Round costs as in tests/test_serving_loop.py: a step reads 10 ms of weights and a prompt token
costs 0.1 ms of tensor work, so a 1,000-token prompt alone takes 100 ms x g, and eight of them
prefilled in one step 800 ms x g. Rows "measured" with o = 50 ms and g = 2: one user waits
0.05 + 0.2 = 0.25 s, eight users 0.05 + 1.6 = 1.65 s.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_serving_loop import client, costs, host, scheduler

from wattgpu.modeling.serving.loop import ONESHOT, simulate
from wattgpu.modeling.serving.scheduler import DECODE_FIRST
from wattgpu.modeling.serving.ttft_terms import (
    EFFICIENCIES,
    best_overhead,
    fit_group,
    fit_terms,
    with_terms,
)

OVERHEAD, EFFICIENCY = 0.05, 2.0


def simulated_ttft(users: int, efficiency: float) -> float:
    """The loop's mean TTFT of ``users`` 1,000-token prompts sent at once, at ``efficiency``."""
    scaled = replace(costs(), prompt_scale=np.array([efficiency]))
    out = simulate(scaled, host(), scheduler(DECODE_FIRST), client(ONESHOT, users, 1000, 10))
    return float(out["ttft_mean_s"][0])


def test_the_prompt_scale_multiplies_the_prompts_tensor_work_only():
    # one prompt: 1,000 x 0.1 ms x g; eight in one step: 8,000 x 0.1 ms x g
    assert simulated_ttft(1, 1.0) == pytest.approx(0.1)
    assert simulated_ttft(1, 2.0) == pytest.approx(0.2)
    assert simulated_ttft(8, 0.5) == pytest.approx(0.4)
    # a decode step still reads its 10 ms of weights: g does not touch it
    scaled = replace(costs(), prompt_scale=np.array([4.0]))
    out = simulate(scaled, host(), scheduler(DECODE_FIRST), client(ONESHOT, 1, 1000, 11))
    assert out["itl_p50_s"][0] == pytest.approx(0.01)


def test_two_rows_at_one_and_eight_users_give_back_the_overhead_and_the_efficiency():
    simulated = np.array([[simulated_ttft(users, g) for g in EFFICIENCIES] for users in (1, 8)])
    measured = np.array([OVERHEAD + 0.1 * EFFICIENCY, OVERHEAD + 0.8 * EFFICIENCY])
    terms = fit_group(measured, simulated)
    assert terms.efficiency == EFFICIENCY
    assert terms.overhead_s == pytest.approx(OVERHEAD)
    assert terms.mdape == pytest.approx(0.0, abs=1e-9) and terms.rows == 2


def test_the_overhead_is_the_least_relative_absolute_offset_and_never_negative():
    # rows of 1 s and 2 s simulated at 0.5 s and 1 s: sum(|0.5 + o - 1| / 1 + |1 + o - 2| / 2)
    # falls with slope -1.5 up to o = 0.5, then rises (+1 - 0.5): o = 0.5 s, the weighted
    # median of the gaps 0.5 (weight 1) and 1.0 (weight 1/2)
    assert best_overhead(np.array([1.0, 2.0]), np.array([0.5, 1.0])) == pytest.approx(0.5)
    # three equal weights: the middle gap
    assert best_overhead(np.ones(3), np.array([0.9, 0.5, 0.7])) == pytest.approx(0.3)
    # a simulation already above what was measured gets none
    assert best_overhead(np.array([1.0]), np.array([1.5])) == 0.0


def test_a_group_with_too_few_rows_takes_the_pooled_terms():
    # four rows of line a (o = 50 ms, g = 2), one of line b: b gets the pooled terms, which
    # all five rows fit exactly too
    users = np.array([1, 8, 1, 8, 8])
    simulated = 0.1 * users[:, None] * EFFICIENCIES[None, :]
    measured = OVERHEAD + 0.1 * users * EFFICIENCY
    groups = np.array(["a", "a", "a", "a", "b"])
    fitted = fit_terms(groups, measured, simulated)
    assert set(fitted) == {"", "a"}
    assert fitted[""].efficiency == EFFICIENCY and fitted["a"].efficiency == EFFICIENCY
    np.testing.assert_allclose(with_terms(groups, fitted, simulated), measured)


def test_an_efficiency_held_at_one_fits_the_overhead_alone():
    # the two rows of 1 and 8 users, o = 50 ms and g = 2, read at g = 1: the gaps are
    # 0.25 - 0.1 = 0.15 s and 1.65 - 0.8 = 0.85 s, weighted 1 / 0.25 = 4 and 1 / 1.65 = 0.61:
    # the weighted median is the first, 0.15 s
    users = np.array([1.0, 8.0])
    simulated = 0.1 * users[:, None] * EFFICIENCIES[None, :]
    measured = OVERHEAD + 0.1 * users * EFFICIENCY
    terms = fit_group(measured, simulated, held=1.0)
    assert (terms.efficiency, terms.overhead_s) == (1.0, pytest.approx(0.15))
    # |0.1 + 0.15 - 0.25| / 0.25 = 0 and |0.8 + 0.15 - 1.65| / 1.65 = 0.42: the median 21.2 %
    assert terms.mdape == pytest.approx(50.0 * 0.7 / 1.65)
    fitted = fit_terms(
        np.array(["a", "a", "a", "a"]),
        np.tile(measured, 2),
        np.tile(simulated, (2, 1)),
        pooled_efficiency=1.0,
    )
    assert fitted[""].efficiency == 1.0 and fitted["a"].efficiency == EFFICIENCY
