import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import gpu_row, llm_row

from wattgpu.data.measurements import read_measurements, resolve_names
from wattgpu.errors import ConfigError, DataError
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.physics import DEFAULT_CONSTANTS, PhysicalConstants
from wattgpu.modeling.physical.regimes import serving_model
from wattgpu.modeling.physical.synthetic import MEASUREMENT_COLUMNS, calibrate, fidelity, synthesize

# Round numbers for the hand computations: memory 50 %, compute 50 %, 1 ms per step,
# 0.1 ms per sequence, idle 10 % of TDP, memory weight 0.5, compute weight 1, server factor 0.5.
ROUND = PhysicalConstants(
    memory_efficiency=0.5,
    compute_efficiency=0.5,
    step_overhead_s=0.001,
    seq_overhead_s=0.0001,
    idle_fraction=0.1,
    memory_power_weight=0.5,
    compute_power_weight=1.0,
    server_power_factor=0.5,
)


@pytest.fixture(scope="module")
def round_catalog():
    from wattgpu.data.catalog import Catalog

    # 1,000 GB/s, 100 TFLOPS, 500 W, 100 GB; a 1B dense LLM with 1 KV head x 128 dims x 8 layers.
    gpus = pd.DataFrame(
        [
            gpu_row(
                "Round GPU",
                memory_gb=100.0,
                memory_bandwidth_gb_s=1000.0,
                fp16_tensor_tflops=100.0,
                tdp_w=500.0,
                # kernels that reach the sheet: only the constants scale it
                memory_efficiency=1.0,
                compute_efficiency=1.0,
                allreduce_latency_s=1e-5,
                link_efficiency=0.5,
            )
        ]
    )
    llms = pd.DataFrame(
        [
            llm_row(
                "round/llm",
                params_b=1.0,
                active_params_b=1.0,
                num_layers=8,
                num_kv_layers=8,
                num_kv_heads=1,
                head_dim=128,
            )
        ]
    )
    return Catalog.from_frames(gpus, llms)


def features(catalog, **workload):
    row = {"gpu": "Round GPU", "model": "round/llm", "input_tokens": 1000, "output_tokens": 500}
    row.update(workload)
    return build_features(pd.DataFrame([row]), catalog)


def test_offline_step_time_and_power_by_hand(round_catalog):
    rows = features(round_catalog, scenario="offline", batch_size=10)
    # KV bytes per token: 2 (K, V) x 1 head x 128 x 2 bytes x 8 layers = 4,096 B
    assert rows["kv_bytes_per_token"].iloc[0] == 4096
    out = serving_model(rows, ROUND).iloc[0]
    # achieved bandwidth 0.5 x 1e12 = 5e11 B/s, achieved compute 0.5 x 1e14 = 5e13 FLOP/s
    # weights 2e9 B / 5e11 = 4 ms; KV of 10 seqs x (1000 + 500/2) tokens x 4096 B = 51.2 MB
    #   / 5e11 = 0.1024 ms -> t_mem = 4.1024 ms
    # t_comp = 2 x 1e9 x 10 / 5e13 = 0.4 ms
    # step = 1 ms + 10 x 0.1 ms + max(4.1024, 0.4) = 6.1024 ms
    # prefill = 2 x 1e9 x 1000 / 5e13 = 40 ms; stall = 10 x 40 ms / 500 tokens = 0.8 ms
    # ITL = 6.1024 + 0.8 = 6.9024 ms
    assert out["itl_s"] == pytest.approx(6.9024e-3, rel=1e-9)
    assert out["concurrency"] == 10
    # activity = 0.5 x 4.1024/6.1024 + 1 x 0.4/6.1024 = 0.336130 + 0.065548 = 0.401678
    # load = (6.1024 ms x 0.401678 + 0.8 ms x 1 in prefill) / 6.9024 ms = 0.471025
    # power = 50 + (500 - 50) x 0.471025 = 261.96 W
    assert out["power_w"] == pytest.approx(261.961, rel=1e-5)
    # throughput = 10 sequences / 6.9024 ms
    assert out["throughput_tok_s"] == pytest.approx(10 / 6.9024e-3)


def test_server_littles_law_fixed_point_by_hand(round_catalog):
    rows = features(round_catalog, scenario="server", request_rate_rps=1.0)
    out = serving_model(rows, ROUND).iloc[0]
    # prefill share = 1 req/s x 40 ms = 0.04; k = 1 x 500 / 0.96 = 520.83
    # memory line: a = 1 + 4 = 5 ms, b = 0.1 ms + 10.24 us = 0.11024 ms
    #   N = k (a + b) / (1 - k b) = 2.66158 / 0.942583 = 2.82371
    # compute line: a = 1 ms, b = 0.14 ms -> N = 0.64045; the larger one wins
    assert out["concurrency"] == pytest.approx(2.823711, rel=1e-6)
    # step(1 + N = 3.82371) = 1 + 0.382371 + 4 + 0.039155 = 5.421526 ms; / 0.96 = 5.647423 ms
    assert out["itl_s"] == pytest.approx(5.647423e-3, rel=1e-6)
    # Little's law holds: N = rate x output tokens x ITL
    assert out["concurrency"] == pytest.approx(1.0 * 500 * out["itl_s"], rel=1e-9)
    # busy = 1 - exp(-2.82371) = 0.940600; batch while busy = 2.82371 / 0.9406 = 3.00203
    # activity(3.00203) = 0.5 x 4.030741/5.330944 + 0.120081/5.330944 = 0.400578
    # load = 0.04 + 0.96 x 0.9406 x 0.400578 = 0.401708, x server factor 0.5 = 0.200854
    # power = 50 + 450 x 0.200854 = 140.39 W
    assert out["power_w"] == pytest.approx(140.386, rel=1e-5)
    # TTFT = 40 ms / 0.96 + ITL
    assert out["ttft_s"] == pytest.approx(0.04 / 0.96 + 5.647423e-3, rel=1e-6)


def test_closed_loop_server_is_a_batch_of_its_users_by_hand(round_catalog):
    rows = features(round_catalog, scenario="server", concurrency=10)
    assert rows["users"].iloc[0] == 10 and rows["concurrency"].iloc[0] == 10
    out = serving_model(rows, ROUND).iloc[0]
    # ten users, each sending its next request as the last ends: the offline batch of 10 above,
    # ITL 6.9024 ms, power 261.96 W (no server factor: it is fitted to open loops)
    assert out["itl_s"] == pytest.approx(6.9024e-3, rel=1e-9)
    assert out["power_w"] == pytest.approx(261.961, rel=1e-5)
    # below the cap nobody waits for a slot: TTFT = prefill 40 ms + ITL 6.9024 ms
    assert out["ttft_s"] == pytest.approx(46.9024e-3, rel=1e-9)


def test_closed_loop_users_beyond_the_engine_batch_wait_for_a_slot_by_hand(round_catalog):
    out = serving_model(features(round_catalog, scenario="server", concurrency=300), ROUND)
    out = out.iloc[0]
    # M = min(300, 256) = 256: t_mem = 4 + 256 x 1250 x 4096 B / 5e11 = 6.62144 ms,
    # t_comp = 2e9 x 256 / 5e13 = 10.24 ms; step = 1 + 25.6 + 10.24 = 36.84 ms;
    # stall = 256 x 40 / 500 = 20.48 ms -> ITL = 57.32 ms
    assert out["concurrency"] == 256
    assert out["itl_s"] == pytest.approx(57.32e-3, rel=1e-9)
    # a slot serves a request in 40 + 500 x 57.32 = 28,700 ms;
    # TTFT = 300/256 x 28,700 - 28,660 + 57.32 = 33,632.8125 - 28,602.68 = 5,030.1325 ms
    assert out["ttft_s"] == pytest.approx(5.0301325, rel=1e-9)


def grid(catalog, gpu, model, **columns):
    size = max(len(v) if np.ndim(v) else 1 for v in columns.values())
    frame = pd.DataFrame({"gpu": gpu, "model": model, **columns}, index=range(size))
    return build_features(frame, catalog)


@pytest.mark.parametrize("scenario", ["offline", "server"])
def test_higher_bandwidth_gives_lower_itl(catalog, scenario):
    for model in ("meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-0.5B-Instruct"):
        load = {"request_rate_rps": [0.1, 1.0, 4.0, 30.0], "batch_size": [1.0, 8.0, 64.0, 256.0]}
        base = grid(catalog, "NVIDIA A100 SXM4 80GB", model, scenario=scenario, **load)
        itl = [
            serving_model(base.assign(gpu_memory_bandwidth_gb_s=bw), DEFAULT_CONSTANTS)[
                "itl_s"
            ].to_numpy()
            for bw in (500.0, 1000.0, 2000.0, 4000.0)
        ]
        assert (np.diff(np.stack(itl), axis=0) < 0).all()


def test_higher_rate_gives_higher_power_never_above_tdp(catalog):
    rates = np.geomspace(0.01, 200.0, 120)
    for gpu in ("NVIDIA Tesla T4", "NVIDIA L40S", "NVIDIA H100 SXM5", "NVIDIA B200"):
        for model in ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct"):
            rows = grid(catalog, gpu, model, scenario="server", request_rate_rps=rates)
            out = serving_model(rows)
            power = out["power_w"].to_numpy()
            assert (np.diff(power) >= -1e-9).all()
            assert power[-1] > power[0]
            assert (power <= rows["gpu_tdp_w"].to_numpy() + 1e-9).all()
            assert (np.diff(out["itl_s"].to_numpy()) >= -1e-12).all()


def test_any_row_gets_finite_positive_values(catalog):
    rows = build_features(
        pd.DataFrame(
            [
                # does not fit: 70B on a 24 GB card
                {"gpu": "NVIDIA L4", "model": "meta-llama/Llama-3.1-70B", "scenario": "offline"},
                {
                    "gpu": "NVIDIA L4",
                    "model": "meta-llama/Llama-3.1-70B",
                    "scenario": "server",
                    "request_rate_rps": 5.0,
                },
                {
                    "gpu": "NVIDIA H100 SXM5",
                    "model": "meta-llama/Llama-3.1-8B",
                    "scenario": "server",
                    "request_rate_rps": 0.0,
                },
                {
                    "gpu": "NVIDIA H100 SXM5",
                    "model": "meta-llama/Llama-3.1-8B",
                    "scenario": "offline",
                    "batch_size": 1e6,
                },
                # an unseen GPU and LLM, with no specs at all
                {
                    "gpu": "Future GPU",
                    "model": "future/llm",
                    "scenario": "server",
                    "request_rate_rps": 1.0,
                    "output_tokens": 0,
                },
                # an unseen GPU described by its specs
                {
                    "gpu": "Spec GPU",
                    "model": "meta-llama/Llama-3.1-8B",
                    "scenario": "offline",
                    "gpu_memory_gb": 64.0,
                    "gpu_memory_bandwidth_gb_s": 2500.0,
                    "gpu_fp16_tensor_tflops": 500.0,
                    "gpu_tdp_w": 450.0,
                },
            ]
        ),  # fmt: skip
        catalog,
    )
    out = serving_model(rows)
    values = out[["power_w", "itl_s", "concurrency"]].to_numpy()
    assert np.isfinite(values).all()
    assert (out[["power_w", "itl_s"]].to_numpy() > 0).all()
    assert out.index.equals(rows.index)


def test_predict_does_not_change_its_input(catalog):
    rows = grid(catalog, "NVIDIA H100 SXM5", "meta-llama/Llama-3.1-8B", scenario="server",
                request_rate_rps=[1.0, 2.0])  # fmt: skip
    before = rows.copy()
    serving_model(rows)
    pd.testing.assert_frame_equal(rows, before)


@pytest.fixture(scope="module")
def generated(catalog):
    return synthesize(catalog, seed=0)


def test_generated_set_covers_every_gpu_and_both_scenarios(catalog, generated):
    assert set(generated["gpu"]) == set(catalog.gpus["gpu"])
    assert set(generated["scenario"]) == {"offline", "server"}
    for _, per_gpu in generated.groupby("gpu"):
        assert set(per_gpu["scenario"]) == {"offline", "server"}
    # about 54 rows a GPU (its LLMs x token lengths x loads): a set that grows with the
    # catalogue (1,890 rows on 35 GPUs, 5,076 on 94)
    assert 30 * len(catalog.gpus) <= len(generated) <= 60 * len(catalog.gpus)
    # most catalogue LLMs appear, none of them MoE or beyond 75B
    llms = catalog.llms.loc[generated["model"].unique()]
    assert (llms["active_params_b"] == llms["params_b"]).all()
    assert (llms["params_b"] <= 75).all()
    assert generated["model"].nunique() >= 0.5 * len(catalog.llms)


def test_generated_set_says_it_is_generated(generated):
    assert list(generated.columns) == list(MEASUREMENT_COLUMNS)
    assert generated["source"].str.startswith("generated:").all()
    assert generated["source"].str.contains("not measured").all()
    assert (generated["measured_at"] == "").all()
    assert (generated["engine"] == "vllm").all() and (generated["num_gpus"] == 1).all()


def test_generated_values_are_physical(catalog, generated):
    tdp = generated["gpu"].map(catalog.gpus["tdp_w"])
    assert (generated["mean_power_w"] <= tdp).all()
    assert (generated["mean_power_w"] > 0).all() and (generated["itl_s"] > 0).all()
    offline = generated["scenario"] == "offline"
    assert generated.loc[offline, "request_rate_rps"].isna().all()
    assert generated.loc[~offline, "batch_size"].isna().all()
    assert generated.loc[~offline, "ttft_s"].notna().all()
    energy = generated["mean_power_w"] / generated["throughput_tok_s"]
    assert np.allclose(generated["energy_per_token_j"], energy)


def test_synthesize_is_deterministic_for_a_seed(catalog, generated):
    pd.testing.assert_frame_equal(synthesize(catalog, seed=0), generated)
    other = synthesize(catalog, seed=1)
    assert not other["mean_power_w"].equals(generated["mean_power_w"])
    assert other["source"].iloc[0].endswith("(analytical model, seed 1) — not measured")


def test_noise_is_small_and_centred(catalog, generated):
    rows = build_features(generated, catalog)
    truth = serving_model(rows)
    power_ratio = np.log(generated["mean_power_w"] / truth["power_w"])
    itl_ratio = np.log(generated["itl_s"] / truth["itl_s"])
    assert abs(np.median(itl_ratio)) < 0.01 and 0.04 < itl_ratio.std() < 0.06
    assert abs(np.median(power_ratio)) < 0.01 and power_ratio.std() < 0.035


def test_cli_synthesize_writes_rows_that_read_back_as_measurements(tmp_path, monkeypatch, catalog):
    from click.testing import CliRunner

    from wattgpu.cli import cli

    monkeypatch.delenv("WATTGPU_DATA_DIR", raising=False)
    path = tmp_path / "generated" / "synthetic.csv"
    result = CliRunner().invoke(cli, ["data", "synthesize", "--output", str(path), "--seed", "0"])
    assert result.exit_code == 0, result.output
    count = int(result.output.split()[1])  # "wrote N generated rows to PATH"
    back = read_measurements([path])
    assert len(back) == count
    resolved, unresolved = resolve_names(back, catalog)
    assert len(unresolved) == 0 and len(resolved) == count


def test_calibrate_recovers_a_model_that_generated_its_rows(catalog, generated):
    rows = build_features(generated.iloc[::4], catalog)
    truth = replace(
        DEFAULT_CONSTANTS, memory_efficiency=0.6, step_overhead_s=0.004, server_power_factor=0.8
    )
    exact = serving_model(rows, truth)
    rows = rows.assign(mean_power_w=exact["power_w"], itl_s=exact["itl_s"])
    fitted, report = calibrate(rows)
    overall = report[report["data_set"] == "all"].set_index("target")["mdape_pct"]
    assert overall["power"] < 0.5 and overall["itl"] < 0.5
    assert fitted.memory_efficiency == pytest.approx(0.6, rel=0.05)
    assert fitted.idle_fraction == DEFAULT_CONSTANTS.idle_fraction  # held by default


def test_calibrate_refuses_rows_without_targets_and_unknown_constants(catalog, generated):
    rows = build_features(generated.iloc[:10], catalog)
    with pytest.raises(DataError, match="got 10 rows with neither"):
        calibrate(rows.assign(mean_power_w=np.nan, itl_s=np.nan))
    with pytest.raises(ConfigError, match="'idle'"):
        calibrate(rows, fixed=("idle",))


def test_fidelity_reports_each_target_per_data_set(catalog, generated):
    rows = build_features(generated.iloc[:200], catalog).assign(family="sim")
    report = fidelity(rows, DEFAULT_CONSTANTS, fitted=rows["scenario"] == "offline")
    assert set(report["target"]) == {"power", "itl"}
    assert set(report["data_set"]) == {"generated: wattgpu data synthesize (analytical model, "
                                       "seed 0) — not measured/sim", "all", "fitted"}  # fmt: skip
    lines = report.set_index(["target", "data_set"])
    assert lines.loc[("itl", "all"), "n_rows"] == 200
    assert lines.loc[("itl", "fitted"), "n_rows"] == (rows["scenario"] == "offline").sum()
    assert report["mdape_pct"].map(math.isfinite).all()
