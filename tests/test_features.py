import math

import pandas as pd
import pytest

from wattgpu.modeling.physical.features import (
    FEATURE_COLUMNS,
    build_features,
    feature_matrix,
    itl_statistic,
)
from wattgpu.modeling.physical.physics import DEFAULT_CONSTANTS, DEFAULT_ENGINE_EFFECTS
from wattgpu.modeling.physical.workload import engine_year


def query(**overrides):
    row = {
        "gpu": "NVIDIA H100 SXM5",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "scenario": "offline",
    }
    row.update(overrides)
    return pd.DataFrame([row])


def test_llama_3_1_8b_on_h100_sxm5_by_hand(small_catalog):
    row = build_features(
        query(batch_size=32, input_tokens=512, output_tokens=256), small_catalog
    ).iloc[0]
    # 8.03e9 parameters x 2 bytes
    assert row["weight_bytes"] == pytest.approx(16.06e9)
    # 16.06e9 B / 3.35e12 B/s = 4.7940 ms
    assert row["bandwidth_latency_s"] == pytest.approx(4.79403e-3, rel=1e-5)
    # 2 x 8.03e9 FLOP / 989.4e12 FLOP/s = 16.232 us
    assert row["compute_latency_s"] == pytest.approx(1.62321e-5, rel=1e-5)
    # K and V x 8 KV heads x 128 dims x 2 bytes x 32 layers = 131,072 B
    assert row["kv_bytes_per_token"] == 131072
    # 80 GB - 16.06 GB
    assert row["free_memory_gb"] == pytest.approx(63.94)
    # 0.9 x 63.94e9 B / (131072 B x 768 tokens) = 571.67 sequences
    assert row["max_concurrent_seqs"] == pytest.approx(571.67, rel=1e-4)
    assert row["concurrency"] == 32
    assert row["clock_ratio"] == pytest.approx(1980 / 1590)
    assert row["log_params"] == pytest.approx(math.log10(8.03e9))
    assert row["fits_in_memory"] == 1.0


def test_defaults_fill_what_a_query_leaves_out(small_catalog):
    row = build_features(query(), small_catalog).iloc[0]
    assert (row["input_tokens"], row["output_tokens"], row["engine"], row["num_gpus"]) == (
        512,
        256,
        "vllm",
        1,
    )
    # no batch given offline: the engine's cap of 256, which fits (571 sequences would)
    assert row["concurrency"] == 256


def test_server_concurrency_follows_littles_law_and_keeps_the_rate(small_catalog):
    light = build_features(query(scenario="server", request_rate_rps=0.5), small_catalog).iloc[0]
    busy = build_features(query(scenario="server", request_rate_rps=20.0), small_catalog).iloc[0]
    # the analytical ITL before the engine's effect (today's vLLM, of 2026, see below)
    effect = math.exp(
        DEFAULT_ENGINE_EFFECTS.per_year * (2026 - DEFAULT_ENGINE_EFFECTS.reference_year)
    )
    for row, rate in ((light, 0.5), (busy, 20.0)):
        # Little's law: requests in the system = rate x decode time (256 tokens x ITL), at least 1
        itl = row["prior_itl_s"] / effect
        assert row["concurrency"] == pytest.approx(max(1.0, rate * 256 * itl))
        assert row["request_rate_rps"] == rate
    assert busy["concurrency"] > 2 * light["concurrency"]


def test_engine_year_from_the_row_its_version_else_today_never_from_file_dates():
    rows = pd.DataFrame(
        {
            "engine": ["tgi", "vllm", "trtllm", "sglang", "vllm", "hf"],
            "engine_year": [2023.0, None, None, None, None, None],
            "engine_version": [None, "0.8.1.post2", "1.2.0rc6.post1", "v0.5.9", None, None],
            # file dates say nothing about the software
            "measured_at": ["2030-01-01"] * 6,
            "family": ["x_2031"] * 6,
            "data_commit_date": ["2032-02-16"] * 6,
        }
    )
    # data/engines.csv: vLLM 0.8 of 2025, TensorRT-LLM 1.2.0rc6 of 2026, SGLang 0.5.9 of 2026;
    # no version: today's release of the engine (vLLM 0.19, 2026), today's vLLM for an
    # engine the table does not list (hf)
    assert engine_year(rows).tolist() == [2023.0, 2025.0, 2026.0, 2026.0, 2026.0, 2026.0]


def test_a_closed_loop_rate_is_no_input(small_catalog):
    closed = query(scenario="server", concurrency=16.0, request_rate_rps=3.0)
    rows = pd.concat([closed, query(scenario="server", request_rate_rps=3.0)], ignore_index=True)
    features = build_features(rows, small_catalog)
    assert math.isnan(features.loc[0, "request_rate_rps"])
    assert features.loc[1, "request_rate_rps"] == 3.0


def test_70b_does_not_fit_on_l4(small_catalog):
    row = build_features(
        query(gpu="NVIDIA L4", model="meta-llama/Llama-3.1-70B-Instruct"), small_catalog
    ).iloc[0]
    # 24 GB - 141.2 GB
    assert row["free_memory_gb"] == pytest.approx(-117.2)
    assert row["fits_in_memory"] == 0.0
    assert row["max_concurrent_seqs"] == 0.0


def test_tensor_parallel_divides_weights_and_step_time(small_catalog):
    row = build_features(
        query(model="meta-llama/Llama-3.1-70B-Instruct", num_gpus=4), small_catalog
    ).iloc[0]
    # 141.2e9 B / 4 GPUs
    assert row["weight_bytes_per_gpu"] == pytest.approx(35.3e9)
    # 141.2e9 B / (4 x 3.35e12 B/s) = 10.537 ms
    assert row["bandwidth_latency_s"] == pytest.approx(10.5373e-3, rel=1e-4)


def test_fp8_weight_bytes_keep_embeddings_and_head_in_16_bit(small_catalog):
    row = build_features(query(dtype="fp8"), small_catalog).iloc[0]
    # 2 x 128256 x 4096 = 1,050,673,152 embedding + head weights at 2 bytes, the rest at 1:
    # 2,101,346,304 + (8,030,000,000 - 1,050,673,152) = 9,080,673,152
    assert row["weight_bytes"] == pytest.approx(9_080_673_152, rel=1e-12)


def test_spec_columns_on_the_row_describe_an_uncatalogued_gpu(small_catalog):
    frame = query(gpu="Future GPU", gpu_memory_bandwidth_gb_s=6700.0)
    frame["gpu_fp16_tensor_tflops"] = 2000.0
    frame["gpu_memory_gb"] = 100.0
    row = build_features(frame, small_catalog).iloc[0]
    # 16.06e9 B / 6.7e12 B/s
    assert row["bandwidth_latency_s"] == pytest.approx(2.397e-3, rel=1e-3)


def test_inputs_are_not_mutated(small_catalog):
    frame = query()
    before = frame.copy()
    build_features(frame, small_catalog)
    pd.testing.assert_frame_equal(frame, before)


def test_feature_matrix_has_every_column_and_no_nan_categoricals(small_catalog):
    matrix = feature_matrix(build_features(query(engine=None), small_catalog))
    assert list(matrix.columns) == list(FEATURE_COLUMNS)
    assert matrix.loc[0, "engine"] == "vllm"
    assert matrix.loc[0, "llm_family"] == "llama"
    assert "itl_statistic" not in matrix.columns


def test_itl_statistic_reads_the_free_text_itl_kind():
    kinds = pd.Series(
        [
            "median client-side ITL (chunk-smoothed)",
            "mean TPOT over engine iterations (vLLM stats)",
            "batch_latency/output_len (upper bound, incl. prefill)",
            "mean_latency/mean_response_length (incl. prefill)",
            "mean over requests of (e2e-ttft)/(tokens-1)",
            "with_prefill",
            None,
            "something else",
        ]
    )
    assert itl_statistic(kinds).tolist() == [
        "median",
        "mean",
        "with_prefill",
        "with_prefill",
        "mean",
        "with_prefill",
        "median",
        "median",
    ]


def test_the_itl_statistic_is_read_but_is_no_feature(small_catalog):
    rows = build_features(query(itl_kind="mean TPOT"), small_catalog)
    assert rows.loc[0, "itl_statistic"] == "mean"
    assert "itl_statistic" not in feature_matrix(rows, "itl").columns


def test_physics_prior_of_llama_8b_on_h100_at_batch_1_by_hand(small_catalog):
    row = build_features(
        query(batch_size=1, input_tokens=512, output_tokens=256), small_catalog
    ).iloc[0]
    c = DEFAULT_CONSTANTS
    # the small catalogue profiles no GPU and has no kernel table: the kernels' efficiencies
    # are the fallbacks, 79 % of the sheet's bandwidth and 74 % of its tensor peak
    assert (row["gpu_memory_efficiency"], row["gpu_compute_efficiency"]) == (0.79, 0.74)
    bandwidth = 3.35e12 * 0.79 * c.memory_efficiency
    flops = 989.4e12 * 0.74 * c.compute_efficiency
    # memory time of one step: weights + 1 sequence x 640 tokens of context x 131,072 B
    t_mem = (16.06e9 + 640 * 131072) / bandwidth
    t_comp = 2 * 8.03e9 / flops
    step = c.step_overhead_s + c.seq_overhead_s + max(t_mem, t_comp)
    # one prefill of 512 tokens per 256 output tokens stalls the sequence
    itl = step + 2 * 8.03e9 * 512 / flops / 256
    # the engine: vLLM (no factor of its own) of today's release, 2026, two years after the
    # effects' reference year: exp(per_year x 2)
    engine = math.exp(
        DEFAULT_ENGINE_EFFECTS.per_year * (2026 - DEFAULT_ENGINE_EFFECTS.reference_year)
    )
    assert (
        DEFAULT_ENGINE_EFFECTS.reference_year == 2024
        and "vllm" not in DEFAULT_ENGINE_EFFECTS.factors
    )
    assert row["prior_itl_s"] == pytest.approx(itl * engine, rel=1e-9)
    # the feature is the analytical ITL of the engine, without its release year's effect
    assert row["log_prior_itl_s"] == pytest.approx(math.log(itl))
    activity = min(
        1.0, c.memory_power_weight * t_mem / step + c.compute_power_weight * t_comp / step
    )
    stall = 2 * 8.03e9 * 512 / flops / 256
    load = (step * activity + stall) / itl
    power = 70.0 + (700.0 - 70.0) * load
    assert row["prior_power_w"] == pytest.approx(power, rel=1e-9)
    assert row["log_prior_power_tdp"] == pytest.approx(math.log(power / 700.0))


def test_mxfp4_weights_take_about_half_a_byte(small_catalog):
    row = build_features(query(dtype="mxfp4"), small_catalog).iloc[0]
    # a dense LLM: all but embeddings and head at 0.53125 bytes (an E8M0 scale per 32 weights):
    # 2,101,346,304 + 0.53125 x 6,979,326,848 = 2,101,346,304 + 3,707,767,388 = 5,809,113,692
    assert row["weight_bytes"] == pytest.approx(5_809_113_692, rel=1e-12)


@pytest.mark.parametrize("target", ["itl", "ttft"])
def test_the_latency_models_take_no_input_a_query_cannot_send(catalog, target):
    """Each trained feature is a function of the query's own fields (and the catalogue).

    The shipped measurement rows, rebuilt from nothing but the columns a query may send
    (``queries.ALL_FIELDS``), give every feature the models use exactly as the full rows do: no
    feature reads a row's source, file dates, measured statistic or achieved rate.
    """
    import glob

    from wattgpu.config import SHIPPED_DATA_DIR
    from wattgpu.data.measurements import read_measurements, resolve_names
    from wattgpu.modeling.answering.queries import ALL_FIELDS
    from wattgpu.modeling.learning.recipe import recipe_of

    files = glob.glob(str(SHIPPED_DATA_DIR / "measurements" / "*.csv"))
    rows, _ = resolve_names(read_measurements([f for f in files if "dropped" not in f]), catalog)
    sendable = rows[[c for c in rows.columns if c in ALL_FIELDS]]
    assert {"source", "measured_at", "itl_kind", "family"}.isdisjoint(sendable.columns)
    used = [
        c
        for c in FEATURE_COLUMNS
        if any(c not in without for without in recipe_of(target, "fast").members)
    ]
    full = feature_matrix(build_features(rows, catalog), target)[used]
    from_query = feature_matrix(build_features(sendable, catalog), target)[used]
    pd.testing.assert_frame_equal(from_query, full)


def test_kv_cache_bytes_per_token_of_mla_sliding_window_and_linear_attention_by_hand():
    import numpy as np

    from wattgpu.modeling.physical.sizes import kv_bytes_per_token

    nan = float("nan")
    columns = {  # DeepSeek-R1 (MLA), gpt-oss-120b (sliding), Qwen3.5-397B (linear hybrid)
        "llm_num_layers": np.array([61.0, 36.0, 60.0]),
        "llm_num_kv_layers": np.array([61.0, 18.0, 15.0]),
        "llm_num_kv_heads": np.array([128.0, 8.0, 2.0]),
        "llm_head_dim": np.array([128.0, 64.0, 256.0]),
        "llm_kv_lora_rank": np.array([512.0, nan, nan]),
        "llm_qk_rope_head_dim": np.array([64.0, nan, nan]),
        "llm_num_sliding_layers": np.array([nan, 18.0, nan]),
        "llm_sliding_window": np.array([nan, 128.0, nan]),
    }
    got = kv_bytes_per_token(columns, np.array([768.0, 768.0, 768.0]))
    # MLA: (512 + 64) x 2 B x 61 layers = 70,272 B
    # gpt-oss: 2 x 8 x 64 x 2 = 2,048 B per layer; 18 full layers + 18 sliding ones holding
    # 128 of 768 tokens: 2,048 x (18 + 18 x 128 / 768) = 2,048 x 21 = 43,008 B
    # Qwen3.5: 2 x 2 x 256 x 2 = 2,048 B x 15 full-attention layers = 30,720 B (45 linear: none)
    assert got.tolist() == [70272.0, 43008.0, 30720.0]


def test_one_year_of_stated_engine_release_moves_an_itl_answer_by_at_most_15_percent(
    small_catalog,
):
    """The trees never see the release year: it acts only through the bounded engine effect."""
    import numpy as np

    from wattgpu.modeling.physical.physics import MAX_YEAR_EFFECT

    rows = pd.concat(
        [
            query(scenario="server", concurrency=64.0, engine=e, engine_year=y)
            for e in ("vllm", "sglang", "trtllm")
            for y in (2024.0, 2025.0)
        ],
        ignore_index=True,
    )
    features = build_features(rows, small_catalog)
    matrix = feature_matrix(features, "itl")
    earlier, later = (
        matrix.iloc[0::2].reset_index(drop=True),
        matrix.iloc[1::2].reset_index(drop=True),
    )
    # no feature moves: the answer's base does, by at most 15 %
    pd.testing.assert_frame_equal(earlier, later)
    base = np.log(features["prior_itl_s"].to_numpy())
    moved = np.abs(base[1::2] - base[0::2])
    assert (moved <= MAX_YEAR_EFFECT + 1e-12).all() and (moved > 0).all()
    assert MAX_YEAR_EFFECT == pytest.approx(math.log(1.15))
