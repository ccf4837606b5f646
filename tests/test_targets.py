import math

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.physics import DEFAULT_TTFT_TERMS
from wattgpu.modeling.physical.targets import decode, encode


def test_power_is_learnt_as_the_log_ratio_to_the_prior_with_the_engine_floor():
    # measured 350 W where the prior (with the engine's floor) says 280 W -> log(1.25)
    rows = pd.DataFrame({"mean_power_w": [350.0], "prior_power_cpu_w": [280.0]})
    assert encode("power", rows).iloc[0] == pytest.approx(math.log(1.25))
    assert decode("power", rows, np.array([0.0]))[0] == pytest.approx(280.0)
    assert decode("power", rows, np.array([math.log(1.25)]))[0] == pytest.approx(350.0)


def test_itl_is_learnt_as_the_log_ratio_to_the_physics_prior():
    # measured 30 ms where the analytical model says 20 ms -> log(1.5)
    rows = pd.DataFrame({"itl_median_s": [0.030], "prior_itl_s": [0.020]})
    assert encode("itl", rows).iloc[0] == pytest.approx(math.log(1.5))
    # a zero correction returns the prior itself
    assert decode("itl", rows, np.array([0.0]))[0] == pytest.approx(0.020)
    assert decode("itl", rows, np.array([math.log(1.5)]))[0] == pytest.approx(0.030)


def test_served_rows_carry_the_prior_the_itl_target_needs(small_catalog):
    query = pd.DataFrame(
        [{"gpu": "NVIDIA L4", "model": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "offline"}]
    )
    rows = build_features(query, small_catalog)
    assert np.isfinite(rows["prior_itl_s"]).all() and (rows["prior_itl_s"] > 0).all()
    assert decode("itl", rows, np.array([0.0]))[0] == pytest.approx(rows["prior_itl_s"].iloc[0])


def test_ttft_is_learnt_as_the_log_ratio_to_its_prior():
    # measured 120 ms where the prior says 40 ms -> log(3); reported in ms
    rows = pd.DataFrame({"ttft_s": [0.120], "prior_ttft_s": [0.040]})
    assert encode("ttft", rows).iloc[0] == pytest.approx(math.log(3.0))
    assert decode("ttft", rows, np.array([math.log(3.0)]))[0] == pytest.approx(0.120)


def test_offline_ttft_prior_is_the_own_prefill_plus_a_step(small_catalog):
    query = pd.DataFrame(
        [
            {
                "gpu": "NVIDIA L4",
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "scenario": "offline",
                "input_tokens": 1000,
            }
        ]
    )
    row = build_features(query, small_catalog).iloc[0]
    # prefill = 2 x active params x 1000 tokens / FP16 FLOP/s = compute_latency_s x 1000, plus a
    # step; then the fitted terms: a request's fixed cost + the scale of the analytical time
    analytical = row["compute_latency_s"] * 1000 + row["prior_itl_s"]
    terms = DEFAULT_TTFT_TERMS
    assert row["prior_ttft_s"] == pytest.approx(terms.overhead_s + terms.prefill_scale * analytical)
    assert (terms.overhead_s, terms.prefill_scale) == (0.002239, 9.036)


def test_power_is_capped_at_the_gpus_power_limit():
    import numpy as np

    from wattgpu.modeling.physical.targets import decode

    frame = pd.DataFrame({"prior_power_cpu_w": [500.0, 500.0], "gpu_tdp_w": [700.0, 400.0]})
    # exp(0.2) x 500 W = 610.7 W: under the H100's 700 W, over a 400 W limit
    assert decode("power", frame, np.array([0.2, 0.2])).tolist() == pytest.approx(
        [500.0 * np.exp(0.2), 400.0]
    )
    # latency is never capped
    itl = pd.DataFrame({"prior_itl_s": [0.01], "gpu_tdp_w": [1.0]})
    assert decode("itl", itl, np.array([1.0]))[0] == pytest.approx(0.01 * np.e)
