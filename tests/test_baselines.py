import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.baselines import load_scaled_tdp, roofline_itl


def test_load_scaled_tdp_by_hand():
    rows = pd.DataFrame(
        {
            "scenario": ["offline", "server", "server", "server"],
            "request_rate_rps": [np.nan, 0.1, 0.2, 4.0],
            "gpu_tdp_w": [700.0, 700.0, 700.0, 72.0],
        }
    )
    # 0.9 x 700, 0.2 x 700 below 0.2 req/s, 0.6 x 700 at 0.2 req/s, 0.6 x 72
    assert load_scaled_tdp(rows) == pytest.approx([630.0, 140.0, 420.0, 43.2])


def test_roofline_is_weight_read_time_not_divided_by_batch():
    rows = pd.DataFrame(
        {
            "llm_params_b": [8.03, 8.03],
            "gpu_memory_bandwidth_gb_s": [3350.0, 3350.0],
            "num_gpus": [1, 2],
            "batch_size": [1, 256],
        }
    )
    # 2 x 8.03e9 B / 3.35e12 B/s = 4.794 ms; with two GPUs half of it
    assert roofline_itl(rows) == pytest.approx([4.79403e-3, 2.39701e-3], rel=1e-5)
