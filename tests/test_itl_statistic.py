"""One served ITL: rows that measured another statistic are converted to the median gap.

Every expected value is worked out by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import PLAIN

from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.itl import median_itl
from wattgpu.modeling.physical.regimes import serving_model_columns
from wattgpu.modeling.physical.targets import MEASURED_COLUMN, rows_with_target

# A dense 8B LLM in 16-bit (16 GB read per step) on a 1,000 GB/s, 100 TFLOP/s GPU; no KV cache.
ROW = {
    "llm_params_b": 8.0,
    "llm_active_params_b": 8.0,
    "dense_weight_bytes": 16e9,
    "bytes_per_param": 2.0,
    "gpu_memory_bandwidth_gb_s": 1000.0,
    "gpu_fp16_tensor_tflops": 100.0,
    # kernels that reach the sheet: only the constants scale it
    "gpu_memory_efficiency": 1.0,
    "gpu_compute_efficiency": 1.0,
    "gpu_tdp_w": 300.0,
    "kv_bytes_per_token": 0.0,
    "input_tokens": 1000.0,
    "output_tokens": 100.0,
    "max_concurrent_seqs": 1000.0,
    "num_gpus": 1.0,
}


def test_an_offline_batchs_prefill_share_by_hand():
    rows = pd.DataFrame([{**ROW, "scenario": "offline", "batch_size": 10.0}])
    out = serving_model_columns(rows, PLAIN)
    # step of 10: max(16e9 / 1e12, 2 x 8e9 x 10 / 1e14) = max(0.016, 0.0016) = 0.016 s
    # prefill of one request: 2 x 8e9 x 1000 / 1e14 = 0.16 s; 10 of them per 100 tokens:
    # stall = 10 x 0.16 / 100 = 0.016 s per token -> ITL 0.032 s, half of it prefills
    assert out["itl_s"] == pytest.approx([0.032])
    assert out["prefill_share"] == pytest.approx([0.5])


def test_a_servers_prefill_share_below_its_cap_by_hand():
    rows = pd.DataFrame([{**ROW, "scenario": "server", "request_rate_rps": 1.0}])
    out = serving_model_columns(rows, PLAIN)
    # one request a second, each a 0.16 s prefill: the GPU prefills 16 % of the time
    assert out["prefill_share"] == pytest.approx([0.16])


def test_only_the_statistics_that_count_prefills_are_converted():
    frame = pd.DataFrame(
        {
            "itl_s": [0.02, 0.02, 0.02],
            "itl_statistic": ["median", "mean", "with_prefill"],
            "prior_prefill_share": [0.5, 0.25, 0.1],
        }
    )
    # median as measured; 0.02 x (1 - 0.25) = 0.015; 0.02 x (1 - 0.1) = 0.018
    assert median_itl(frame).tolist() == pytest.approx([0.02, 0.015, 0.018])


def test_the_itl_target_is_the_converted_measurement(small_catalog):
    frame = pd.DataFrame(
        {
            "gpu": ["NVIDIA H100 SXM5"] * 2,
            "model": ["meta-llama/Llama-3.1-8B-Instruct"] * 2,
            "scenario": ["offline"] * 2,
            "batch_size": [64.0, 64.0],
            "input_tokens": [1024.0, 1024.0],
            "output_tokens": [1024.0, 1024.0],
            "mean_power_w": [500.0, 500.0],
            "itl_s": [0.02, 0.02],
            "itl_kind": [
                "median client-side ITL (chunk-smoothed)",
                "batch_latency/output_len (upper bound, incl. prefill)",
            ],
        }
    )
    rows = rows_with_target("itl", build_features(frame, small_catalog))
    assert MEASURED_COLUMN["itl"] == "itl_median_s"
    share = rows["prior_prefill_share"].to_numpy()
    assert 0.0 < share[1] < 0.5
    np.testing.assert_allclose(rows["itl_median_s"], [0.02, 0.02 * (1.0 - share[1])])
