"""Mixture-of-experts and quantized weights: bytes per format, experts a step reads, memory fit.

Every expected value is worked out by hand in the comments.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu.cli import cli
from wattgpu.data.formats import BYTES_PER_PARAM
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.operations import expected_experts, weight_layout


def test_bytes_per_format_count_their_scales():
    # INT4 (AWQ/GPTQ): 4 bits + a 16-bit scale and a 4-bit zero per 128: 0.5 + 2.5/128
    assert BYTES_PER_PARAM["int4"] == 0.51953125
    # MXFP4: 4 bits + one 8-bit scale per 32: 0.5 + 1/32
    assert BYTES_PER_PARAM["mxfp4"] == 0.53125
    assert BYTES_PER_PARAM["fp8"] == 1.0 and BYTES_PER_PARAM["bfloat16"] == 2.0


def test_weight_bytes_of_llama_3_1_8b_in_fp8_int4_and_bf16():
    # Llama-3.1-8B: 8.03e9 parameters, untied embeddings and head of 128256 x 4096 each:
    # 2 x 128256 x 4096 = 1,050,673,152 stay 16-bit.
    # FP8:  2 x 1,050,673,152 + 1 x (8,030,000,000 - 1,050,673,152)
    #     = 2,101,346,304 + 6,979,326,848 = 9,080,673,152 bytes (about 9 GB, not 8)
    # INT4: 2,101,346,304 + 0.51953125 x 6,979,326,848
    #     = 2,101,346,304 + 3,489,663,424 + 136,314,977.5 = 5,727,324,705.5
    # BF16: 2 x 8.03e9 = 16,060,000,000
    embedding = 2 * 128256 * 4096 / 1e9
    bpp = np.array([1.0, BYTES_PER_PARAM["int4"], 2.0])
    layout = weight_layout(8.03, 8.03, np.nan, np.nan, embedding, bpp, False)
    np.testing.assert_allclose(
        layout["weight_bytes"], [9_080_673_152, 5_727_324_705.5, 16_060_000_000], rtol=1e-12
    )
    # dense: every step reads all of it, and there is no expert
    np.testing.assert_allclose(layout["dense_weight_bytes"], layout["weight_bytes"], rtol=1e-12)
    assert (layout["expert_weight_bytes"] == 0).all()


def test_weight_bytes_of_gpt_oss_120b_in_mxfp4():
    # 116.83e9 total, 5.13e9 active, 128 experts, 4 per token:
    # one expert (all layers) = (116.83 - 5.13)e9 / (128 - 4) = 111.7e9 / 124 = 900,806,451.6
    # routed = 128 x 900,806,451.6 = 115,303,225,806.5; outside = 116.83e9 - that
    #        = 1,526,774,193.5, all 16-bit in an MXFP4 checkpoint
    # total  = 2 x 1,526,774,193.5 + 0.53125 x 115,303,225,806.5
    #        = 3,053,548,387.1 + 61,254,838,709.7 = 64,308,387,096.8 (fits one 80 GB GPU)
    embedding = 2 * 201088 * 2880 / 1e9
    layout = weight_layout(116.83, 5.13, 128, 4, embedding, 0.53125, True)
    assert float(layout["weight_bytes"]) == pytest.approx(64_308_387_096.8, rel=1e-9)
    assert float(layout["dense_weight_bytes"]) == pytest.approx(3_053_548_387.1, rel=1e-9)
    # one expert: 0.53125 x 900,806,451.6 = 478,553,427.4
    assert float(layout["expert_weight_bytes"]) == pytest.approx(478_553_427.4, rel=1e-9)


def test_expected_distinct_experts():
    # E (1 - (1 - k/E)^B), E = 128, k = 8: 1 - 8/128 = 0.9375
    # B = 1: 128 x (1 - 0.9375) = 8 (the active ones)
    # B = 2: 128 x (1 - 0.87890625) = 128 x 0.12109375 = 15.5
    # B = 3: 128 x (1 - 0.823974609375) = 22.53125
    got = expected_experts(128, 8, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(got, [8.0, 15.5, 22.53125], rtol=1e-12)
    # gpt-oss-120b, E = 128, k = 4, B = 2: 128 x (1 - (124/128)^2) = 128 x 0.0615234375 = 7.875
    assert float(expected_experts(128, 4, 2.0)) == pytest.approx(7.875, rel=1e-12)
    # a very large batch reads nearly every expert
    assert 127.9 < float(expected_experts(128, 8, 4096.0)) <= 128.0


@pytest.mark.parametrize(
    ("model", "dtype", "num_gpus", "fits"),
    [
        ("openai/gpt-oss-120b", None, 1, True),  # MXFP4 by default: 64.3 GB in 80 GB
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", "bfloat16", 4, False),  # 470 GB in 320 GB
        ("Qwen/Qwen3-235B-A22B-Instruct-2507", "fp8", 4, True),
    ],
)
def test_memory_fit_uses_all_weights(catalog, model, dtype, num_gpus, fits):
    query = {"gpu": "NVIDIA H100 SXM5", "model": model, "scenario": "offline"}
    query |= {"batch_size": 1.0, "num_gpus": float(num_gpus), "dtype": dtype}
    features = build_features(pd.DataFrame([query]), catalog)
    assert bool(features["free_memory_gb"].iloc[0] > 0) is fits


def test_a_step_reads_more_experts_at_a_larger_batch(catalog):
    query = {"gpu": "NVIDIA H100 SXM5", "model": "Qwen/Qwen3-30B-A3B-Instruct-2507"}
    rows = pd.DataFrame([query | {"scenario": "offline", "batch_size": b} for b in (1.0, 256.0)])
    features = build_features(rows, catalog)
    one, many = features["bandwidth_latency_s"]
    # batch 1 reads the active weights: the dense part and 8 of 128 experts
    active = features["dense_weight_bytes"].iloc[0] + 8 * features["expert_weight_bytes"].iloc[0]
    assert one == pytest.approx(active / 3350e9, rel=1e-9)  # H100 SXM5: 3,350 GB/s
    # batch 256 reads nearly all 128: 128 x (1 - (120/128)^256) = 128 - 8e-6
    assert many == pytest.approx(features["weight_bytes"].iloc[0] / 3350e9, rel=1e-6)


def test_unknown_dtype_is_refused_in_one_line(tmp_path, monkeypatch):
    from click.testing import CliRunner

    monkeypatch.setenv("WATTGPU_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    args = ["predict", "--gpu", "H100", "--model", "openai/gpt-oss-120b", "--dtype", "fp6"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    assert result.output.strip().splitlines() == [
        "Error: --dtype must be one of float32, fp32, float16, fp16, bfloat16, bf16, fp8, "
        "float8, int8, int4, mxfp4, nvfp4, fp8_block, int4_wo; got 'fp6'"
    ]


def test_an_uncatalogued_moe_llm_is_described_by_its_experts(catalog):
    from wattgpu.errors import QueryError
    from wattgpu.modeling.answering.queries import check_queries

    spec = {"gpu": "NVIDIA H100 SXM5", "model": "example-org/moe-30b", "scenario": "offline"}
    spec |= {"batch_size": 1.0, "llm_params_b": 30.0, "llm_active_params_b": 3.0}
    spec |= {"llm_num_layers": 48, "llm_hidden_size": 2048, "llm_num_attention_heads": 32}
    spec |= {"llm_num_kv_heads": 4, "llm_vocab_size": 151936}
    spec |= {"llm_num_experts": 128, "llm_experts_per_token": 8}
    features = build_features(check_queries(pd.DataFrame([spec]), catalog), catalog)
    # one expert = (30 - 3)e9 / (128 - 8) = 225,000,000 parameters x 2 bytes = 450,000,000
    assert features["expert_weight_bytes"].iloc[0] == pytest.approx(450_000_000, rel=1e-12)
    with pytest.raises(QueryError, match="llm_experts_per_token must be at most llm_num_experts"):
        check_queries(pd.DataFrame([spec | {"llm_experts_per_token": 200}]), catalog)
