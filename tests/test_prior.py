"""The analytical prior refitted per fold: fitted on the training side only, and on which rows."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.physics import DEFAULT_TTFT_TERMS
from wattgpu.modeling.physical.prior import (
    FLOOR_GRID,
    NEUTRAL_START,
    calibration_mask,
    fit_constants,
    fit_engine_floors,
    fit_prior,
    refit_prior,
    refit_prior_for,
)
from wattgpu.modeling.physical.prior_columns import with_prior
from wattgpu.modeling.serving.prior import refit_for


@pytest.fixture(scope="module")
def generated(catalog):
    from wattgpu.modeling.physical.features import build_features
    from wattgpu.modeling.physical.physics import DEFAULT_CONSTANTS
    from wattgpu.modeling.physical.synthetic import synthesize

    # the generator's truth differs from where a refit starts (the paper's 0.6 / 0.9)
    truth = replace(DEFAULT_CONSTANTS, server_power_factor=0.55)
    assert NEUTRAL_START.server_power_factor != pytest.approx(truth.server_power_factor, abs=0.05)
    return build_features(synthesize(catalog, seed=0, constants=truth), catalog)


def test_calibration_rows_are_single_gpu_dense_16_bit_vllm_outside_the_cpu_bound_runs():
    rows = pd.DataFrame(
        {
            "num_gpus": [1.0, 2.0, 1.0, 1.0, 1.0, 1.0, np.nan],
            "llm_params_b": [8.0, 8.0, 47.0, 8.0, 8.0, 8.0, 8.0],
            "llm_active_params_b": [8.0, 8.0, 13.0, 8.0, 8.0, 8.0, 8.0],
            "dtype": ["bfloat16", "bfloat16", "bfloat16", "fp8", "bfloat16", "float16", "bf16"],
            "engine": ["vllm", "vllm", "vllm", "vllm", "hf", "vllm", "vllm"],
            "family": [
                "a_2025",
                "a_2025",
                "a_2025",
                "a_2025",
                "a_2025",
                "v2_vllm_batch_2024",
                None,
            ],
        }
    )
    assert calibration_mask(rows).tolist() == [True, False, False, False, False, False, True]


def test_a_refit_recovers_the_generators_server_power_factor(generated):
    # generated rows come from DEFAULT_CONSTANTS with a server power factor of 0.55 (serving
    # share of the kernels' bandwidth 1.061); the fit starts at the paper's 0.667 and must find
    # the generator's values from the rows
    constants = fit_constants(generated)
    assert constants.server_power_factor == pytest.approx(0.55, abs=0.02)
    assert constants.memory_efficiency == pytest.approx(1.061, abs=0.03)


def test_without_server_rows_the_server_factor_stays_at_the_papers_ratio(generated):
    offline = generated[generated["scenario"] == "offline"]
    assert fit_constants(offline).server_power_factor == pytest.approx(0.6 / 0.9)


def test_the_held_out_side_never_moves_the_prior(generated):
    gpus = sorted(generated["gpu"].unique())
    train = generated[generated["gpu"] != gpus[0]]
    test = generated[generated["gpu"] == gpus[0]]
    scrambled = test.assign(mean_power_w=test["mean_power_w"] * 3.0, itl_s=test["itl_s"] / 5.0)
    _, before = refit_prior(train, test)
    _, after = refit_prior(train, scrambled)
    np.testing.assert_allclose(before["prior_power_w"], after["prior_power_w"])
    np.testing.assert_allclose(before["prior_itl_s"], after["prior_itl_s"])


def test_a_power_or_itl_refit_keeps_the_shipped_ttft_terms_and_changes_nothing_else(generated):
    gpus = sorted(generated["gpu"].unique())
    train = generated[generated["gpu"] != gpus[0]]
    test = generated[generated["gpu"] == gpus[0]]
    full = fit_prior(train)
    assert full[3] != DEFAULT_TTFT_TERMS  # the fit moves them, so keeping them shows
    _, everything = refit_prior(train, test)
    for target in ("power", "itl"):
        constants, floors, effects, ttft = fit_prior(train, target)
        assert (constants, floors, effects) == full[:3]
        assert ttft == DEFAULT_TTFT_TERMS
        _, for_target = refit_prior_for(target)(train, test)
        for column in ("prior_power_cpu_w", "prior_itl_s", "log_prior_itl_cpu_s"):
            np.testing.assert_array_equal(for_target[column], everything[column])
    assert fit_prior(train, "ttft") == full


def test_engine_floor_slows_the_step_and_idles_the_gpu_by_hand(small_catalog):
    query = pd.DataFrame(
        [
            {"gpu": "NVIDIA H100 SXM5", "model": "meta-llama/Llama-3.1-8B-Instruct", "engine": e}
            for e in ("hf", "vllm")
        ]
    ).assign(scenario="offline", batch_size=1.0)
    rows = with_prior(build_features(query, small_catalog), floors={"hf": 1e-3})
    hf, vllm = rows.iloc[0], rows.iloc[1]
    # 32 layers x 1 ms = 32 ms, far above the H100's batch-1 step of a few ms
    assert hf["cpu_floor_s"] == pytest.approx(0.032)
    assert hf["prior_itl_s"] < 0.01
    # busy for the engine's analytical step (the prior ITL before its release year's effect)
    # of every 32 ms; idle power 10 % of the 700 W TDP
    busy = np.exp(hf["log_prior_itl_s"]) / 0.032
    expected = 70.0 + (hf["prior_power_w"] - 70.0) * busy
    assert hf["prior_power_cpu_w"] == pytest.approx(expected)
    assert hf["log_prior_itl_cpu_s"] == pytest.approx(np.log(0.032))
    # no floor for vLLM: the prior as it is
    assert vllm["cpu_floor_s"] == 0.0
    assert vllm["prior_power_cpu_w"] == pytest.approx(vllm["prior_power_w"])


def test_engine_floors_are_fitted_per_engine_from_its_itls():
    layers = np.tile([16.0, 32.0, 48.0, 80.0], 6)
    n = len(layers)
    rows = pd.DataFrame(
        {
            "engine": ["hf"] * n + ["vllm"] * n + ["tgi"] * 5,
            "llm_num_layers": np.concatenate([layers, layers, layers[:5]]),
            "prior_itl_s": 0.001,
            # hf: 2 ms of host time per layer; vLLM and a 5-row engine: not fitted
            "itl_s": np.concatenate([0.002 * layers, 0.5 * np.ones(n), 0.01 * np.ones(5)]),
            "mean_power_w": 100.0,
        }
    )
    floors = fit_engine_floors(rows)
    assert set(floors) == {"hf"}
    step = FLOOR_GRID[1] / FLOOR_GRID[0]  # the grid's spacing
    assert 0.002 / step <= floors["hf"] <= 0.002 * step


def _paired(residuals: list[tuple[str, float, float]], setups: int = 10) -> pd.DataFrame:
    """``setups`` copies of one set-up measured as (engine, year, log(measured / prior))."""
    rows = []
    for setup in range(setups):
        for engine, year, residual in residuals:
            rows.append(
                {"model": f"m{setup}", "gpu": "g", "scenario": "server", "concurrency": 8.0}
                | {"engine": engine, "engine_year": year, "prior_itl_s": 0.01}
                | {"itl_median_s": 0.01 * np.exp(residual)}
            )
    return pd.DataFrame(rows)


def test_engine_effects_come_from_set_ups_measured_on_several_engines():
    from wattgpu.modeling.physical.prior import fit_engine_effects

    # per set-up: vLLM of 2025 at the prior x 2, TensorRT-LLM of 2025 at 0.8 x that, vLLM of
    # 2026 at 1.1 x that: the set-up's own offset (log 2) cancels, and what is left is the
    # engine's log 0.8 and 0.1 per year (the median year of the paired rows is the reference)
    base = np.log(2.0)
    rows = _paired(
        [
            ("vllm", 2025.0, base),
            ("trtllm", 2025.0, base + np.log(0.8)),
            ("vllm", 2026.0, base + 0.1),
        ]
    )
    # a set-up measured once says nothing about engines
    lone = rows.iloc[:1].assign(model="alone", engine="sglang", itl_median_s=1.0)
    effects = fit_engine_effects(pd.concat([rows, lone], ignore_index=True))
    assert effects.factors == pytest.approx({"trtllm": np.log(0.8)})
    assert effects.per_year == pytest.approx(0.1)
    assert effects.reference_year == 2025.0


def test_engine_effects_are_bounded():
    from wattgpu.modeling.physical.physics import MAX_ENGINE_EFFECT, MAX_YEAR_EFFECT
    from wattgpu.modeling.physical.prior import fit_engine_effects

    # 2x per year and 10x for an engine: clipped to 15 % per year and 4x
    rows = _paired(
        [("vllm", 2024.0, 0.0), ("vllm", 2025.0, np.log(2.0)), ("hf", 2024.0, np.log(10.0))]
    )
    effects = fit_engine_effects(rows)
    assert effects.per_year == pytest.approx(MAX_YEAR_EFFECT) == pytest.approx(np.log(1.15))
    assert effects.factors["hf"] == pytest.approx(MAX_ENGINE_EFFECT) == pytest.approx(np.log(4.0))


def test_too_few_paired_rows_give_no_engine_effects():
    from wattgpu.modeling.physical.physics import NO_ENGINE_EFFECTS
    from wattgpu.modeling.physical.prior import fit_engine_effects

    rows = _paired([("vllm", 2025.0, 0.0), ("trtllm", 2025.0, -0.5)], setups=9)  # 18 rows < 20
    assert fit_engine_effects(rows) == NO_ENGINE_EFFECTS


def test_ttft_terms_are_a_fixed_cost_and_a_scale_fitted_on_measured_ttfts():
    from wattgpu.modeling.physical.prior import fit_ttft_terms

    # measured = 0.1 s + 5 x analytical, for analytical TTFTs of 10 ms to 1 s: both on the grids
    # (0.1 = 10^-1, the 41st of 61 log steps from 1 ms to 1 s; 5 is not, the nearest is taken)
    analytical = np.geomspace(0.01, 1.0, 30)
    rows = pd.DataFrame({"prior_ttft_s": analytical, "ttft_s": 0.1 + 5.0 * analytical})
    terms = fit_ttft_terms(rows)
    assert terms.overhead_s == pytest.approx(0.1, rel=0.05)
    assert terms.prefill_scale == pytest.approx(5.0, rel=0.03)
    assert fit_ttft_terms(rows.iloc[:19]).prefill_scale == 1.0  # fewer than 20 rows: none


def test_the_held_out_side_never_moves_the_simulated_prior_either(generated):
    gpus = sorted(generated["gpu"].unique())
    # a few rows each side: every row's serving loop is simulated
    train = generated[generated["gpu"] != gpus[0]].iloc[::40]
    test = generated[generated["gpu"] == gpus[0]].iloc[::20]
    scrambled = test.assign(
        mean_power_w=test["mean_power_w"] * 3.0, itl_s=test["itl_s"] / 5.0, ttft_s=9.0
    )
    simulated = refit_for("itl", "simulated")
    _, before = simulated(train, test)
    _, after = simulated(train, scrambled)
    # nor a host time or prefill efficiency the held-out rows carry (fitted on rows that held
    # them in)
    _, carried = simulated(
        train, test.assign(host_fixed_s=1.0, host_per_seq_s=0.1, prefill_scale=8.0)
    )
    for column in ("prior_power_cpu_w", "prior_itl_s", "prior_ttft_s"):
        np.testing.assert_array_equal(before[column], after[column])
        np.testing.assert_array_equal(before[column], carried[column])
    # and it is another prior than the closed form's
    _, closed = refit_for("itl")(train, test)
    assert not np.allclose(before["prior_itl_s"], closed["prior_itl_s"])
