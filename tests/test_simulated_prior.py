"""The simulated prior's terms (modeling/serving/prior.py), fitted on rows built by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.serving.prior import fit_terms, simulated_prior


def rows_and_simulation(n_v1: int = 20, n_tgi: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    # n_v1 rows of vLLM 0.19 (line vllm-v1) measured at twice their simulated median gap, and
    # n_tgi rows of TGI 1.4 (line tgi) at four times: too few for a scale of their own
    n = n_v1 + n_tgi
    v1 = np.arange(n) < n_v1
    sim_gap = np.linspace(0.01, 0.03, n)
    rows = pd.DataFrame(
        {
            "engine": np.where(v1, "vllm", "tgi"),
            "engine_version": np.where(v1, "0.19.0", "1.4.5"),
            "scenario": "server",
            "users": 8.0,
            "client": np.where(v1, "aiconfigurator", "closed"),
            "itl_kind": "median gap",
            "itl_s": np.where(v1, 2.0, 4.0) * sim_gap,
            # TTFT: aiconfigurator reports the mean (simulated 0.4 s), closed the median (0.3 s)
            "ttft_s": np.where(v1, 0.8, 0.3),
            "gpu_tdp_w": 700.0,
            # power = TDP x (0.1 + 0.9 x min(1, 1.0 x busy)) with busy 0.2 ... 0.9
            "mean_power_w": 700.0 * (0.1 + 0.9 * np.linspace(0.2, 0.9, n)),
        }
    )
    sim = pd.DataFrame(
        {
            "itl_p50_s": sim_gap,
            "tpot_mean_s": np.nan,
            "latency_per_token_s": np.nan,
            "ttft_mean_s": 0.4,
            "ttft_p50_s": 0.3,
            "busy_share": np.linspace(0.2, 0.9, n),
        }
    )
    return rows, sim


def test_an_engine_line_with_enough_rows_gets_its_own_scale_and_a_small_one_the_pooled():
    rows, sim = rows_and_simulation()
    terms = fit_terms(rows, sim)
    # 20 ratios of 2 and 2 of 4: the pooled median is 2, vllm-v1's own is 2; tgi has 2 rows
    assert terms.itl_scale == {"": 2.0, "vllm-v1": 2.0}
    # TTFT in each client's statistic: 0.8 / 0.4 (the mean) on vllm-v1, 0.3 / 0.3 on tgi
    assert terms.ttft_scale == {"": 2.0, "vllm-v1": 2.0}
    answer = simulated_prior(rows, sim, terms)
    # tgi's rows take the pooled scale: 2 x their simulated gap, half what they measured
    np.testing.assert_allclose(answer["prior_itl_s"][-2:], 2.0 * sim["itl_p50_s"][-2:])
    np.testing.assert_allclose(answer["prior_ttft_s"][:2], [0.8, 0.8])


def test_power_terms_recover_the_idle_share_and_busy_weight_that_made_the_rows():
    rows, sim = rows_and_simulation()
    terms = fit_terms(rows, sim)
    assert (terms.idle_share, terms.busy_weight) == (pytest.approx(0.1), pytest.approx(1.0))
    answer = simulated_prior(rows, sim, terms)
    # the busiest row: 700 x (0.1 + 0.9 x 0.9) = 637 W
    assert answer["prior_power_w"][-1] == pytest.approx(637.0)
