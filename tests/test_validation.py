"""Real Great Expectations runs of the suites on small in-memory tables and the shipped ones."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from wattgpu.config import EXPECTATIONS_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.serving_suites import (
    derive_client_checks,
    derive_engine_line_checks,
    derive_length_checks,
)
from wattgpu.data.suites import (
    TABLES,
    build_suites,
    derive_gpu_checks,
    derive_llm_checks,
    derive_measurement_checks,
)
from wattgpu.data.validation import (
    MAX_EXAMPLES,
    data_docs_index,
    format_reports,
    raise_on_failure,
    read_serving_table,
    suite_to_json,
    validate_all,
    validate_frames,
    validate_table,
)
from wattgpu.data.verdict import of_reports
from wattgpu.errors import DataError, ValidationFailed


def gpus_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "gpu": ["NVIDIA H100 SXM5 80GB", "NVIDIA A100 PCIe 80GB"],
            "aliases": ["NVIDIA H100 80GB HBM3|H100 SXM", "NVIDIA A100 80GB PCIe"],
            "vendor": ["NVIDIA", "NVIDIA"],
            "architecture": ["Hopper", "Ampere"],
            "release_year": [2022, 2021],
            "form_factor": ["SXM", "PCIe"],
            "memory_gb": [80, 80],
            "memory_type": ["HBM3", "HBM2e"],
            "memory_bandwidth_gb_s": [3350.0, 1935.0],
            "fp16_tensor_tflops": [989.4, 312.0],
            "fp32_tflops": [66.9, 19.5],
            "tdp_w": [700, 300],
            "base_clock_mhz": [1590, 1065],
            "boost_clock_mhz": [1980, 1410],
            # the H100 sheet's 989.4 TFLOPS is 132 SMs x 1830 MHz x 4096 (data/tensor_rates.csv)
            "tensor_clock_mhz": [1830, np.nan],
            "sm_count": [132, 108],
            "l2_cache_mb": [50.0, 40.0],
            "transistors_m": [80000, 54200],
            "process_nm": [4, 7],
            "compute_capability": [9.0, 8.0],
            "fp8_tensor_tflops": [1978.9, np.nan],
            "fp4_tensor_tflops": [np.nan, np.nan],
            "int8_tensor_tops": [1978.9, 624.0],
            "int4_tensor_tops": [np.nan, 1248.0],
        }
    )


def llms_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"],
            "aliases": ["llama-3.1-8b-instruct", np.nan],
            "family": ["llama", "qwen2"],
            "arch": ["decoder", "decoder"],
            "dtype": ["bfloat16", "bfloat16"],
            "params_b": [8.03, 0.494],
            "active_params_b": [8.03, 0.494],
            "num_layers": [32, 24],
            "hidden_size": [4096, 896],
            "num_attention_heads": [32, 14],
            "num_kv_heads": [8, 2],
            "head_dim": [128, 64],
            "intermediate_size": [14336, 4864],
            "vocab_size": [128256, 151936],
            "max_position_embeddings": [131072, 32768],
        }
    )


def measurements_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "gpu": ["NVIDIA H100 80GB HBM3", "NVIDIA A100 80GB PCIe", "H100 SXM"],
            "model": [
                "meta-llama/Llama-3.1-8B-Instruct",
                "Qwen/Qwen2.5-0.5B-Instruct",
                "llama-3.1-8b-instruct",
            ],
            "scenario": ["offline", "server", "server"],
            "request_rate_rps": [np.nan, 0.5, 2.0],
            "batch_size": [256.0, np.nan, np.nan],
            "input_tokens": [512.0, 400.0, 400.0],
            "output_tokens": [256.0, 300.0, 300.0],
            "num_gpus": [1.0, 1.0, np.nan],
            "mean_power_w": [620.0, 150.0, 400.0],
            "itl_s": [0.03, 0.012, 0.015],
        }
    )


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.from_frames(gpus_frame(), llms_frame())


def engine_lines_frame() -> pd.DataFrame:
    return read_serving_table("engine_lines")


def clients_frame() -> pd.DataFrame:
    return read_serving_table("clients")


def lengths_frame() -> pd.DataFrame:
    return read_serving_table("length_distributions")


FRAMES: dict[str, Callable[[], pd.DataFrame]] = {
    "gpus": gpus_frame,
    "llms": llms_frame,
    "measurements": measurements_frame,
    # the serving tables as shipped
    "engine_lines": engine_lines_frame,
    "clients": clients_frame,
    "length_distributions": lengths_frame,
}


def failures(report) -> set[tuple[str, str | None]]:
    return {(r.expectation, r.column) for r in report.results if not r.success}


def test_valid_tables_pass(catalog, capsys):
    reports = validate_frames({t: FRAMES[t]() for t in TABLES}, catalog)
    assert [r.table for r in reports] == list(TABLES)
    assert [failures(r) for r in reports] == [set()] * len(TABLES)
    assert all(r.success for r in reports)
    assert [r.rows for r in reports] == [2, 2, 3, 11, 11, 84]
    assert capsys.readouterr().out == ""  # no progress bars or log lines on stdout


def set_value(column: str, row: int, value) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame.loc[row, column] = value
        return frame

    return change


def set_values(row: int, **values) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        for column, value in values.items():
            frame.loc[row, column] = value
        return frame

    return change


def duplicate_first_gpu(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[1, "gpu"] = frame.loc[0, "gpu"]
    return frame


BROKEN = [
    pytest.param(
        "gpus",
        duplicate_first_gpu,
        ("expect_column_values_to_be_unique", "gpu"),
        "NVIDIA H100 SXM5 80GB",
        id="duplicate-gpu",
    ),
    pytest.param(
        "gpus",
        set_value("memory_bandwidth_gb_s", 1, 0.0),
        ("expect_column_values_to_be_between", "memory_bandwidth_gb_s"),
        0.0,
        id="bandwidth-zero",
    ),
    pytest.param(
        # the catalogue holds GPUs of 8 GB and more: a 6 GB card is a wrong row (issue 59)
        "gpus",
        set_value("memory_gb", 1, 6.0),
        ("expect_column_values_to_be_between", "memory_gb"),
        6.0,
        id="memory-below-8-gb",
    ),
    pytest.param(
        "gpus",
        # the base raised above the 1410 MHz boost (a lower boost would break the tensor peaks)
        set_value("base_clock_mhz", 1, 1500),
        ("expect_column_values_to_be_between", "boost_over_base_clock"),
        "NVIDIA A100 PCIe 80GB",
        id="boost-below-base",
    ),
    pytest.param(
        "gpus",
        set_value("compute_capability", 1, 8.5),
        ("expect_column_values_to_be_in_set", "compute_capability"),
        "NVIDIA A100 PCIe 80GB",
        id="unknown-compute-capability",
    ),
    pytest.param(
        "gpus",
        set_value("fp8_tensor_tflops", 1, 624.0),
        ("expect_column_values_to_be_in_set", "fp8_given_iff_capable"),
        "NVIDIA A100 PCIe 80GB",
        id="fp8-on-ampere",
    ),
    pytest.param(
        "gpus",
        set_value("fp8_tensor_tflops", 0, np.nan),
        ("expect_column_values_to_be_in_set", "fp8_given_iff_capable"),
        "NVIDIA H100 SXM5 80GB",
        id="no-fp8-on-hopper",
    ),
    pytest.param(
        "gpus",
        set_value("fp4_tensor_tflops", 0, 3957.8),
        ("expect_column_values_to_be_in_set", "fp4_only_if_capable"),
        "NVIDIA H100 SXM5 80GB",
        id="fp4-on-hopper",
    ),
    pytest.param(
        "gpus",
        # without an SM count the tensor peaks are not derived, so only the ordering fails
        set_values(0, fp8_tensor_tflops=900.0, sm_count=np.nan),
        ("expect_column_values_to_be_between", "fp8_over_fp16"),
        "NVIDIA H100 SXM5 80GB",
        id="fp8-below-fp16",
    ),
    pytest.param(
        "gpus",
        # 350 / (108 SMs x 1410 MHz x 2048 = 311.9 TFLOPS) = 1.12, over the 5 % tolerance
        set_value("fp16_tensor_tflops", 1, 350.0),
        ("expect_column_values_to_be_in_set", "peaks_agree_with_architecture"),
        "NVIDIA A100 PCIe 80GB",
        id="fp16-peak-off-the-architecture",
    ),
    pytest.param(
        "gpus",
        set_value("vendor", 0, "AMD"),
        ("expect_column_values_to_be_in_set", "vendor"),
        "AMD",
        id="vendor-not-nvidia",
    ),
    pytest.param(
        "llms",
        set_value("num_attention_heads", 0, 24),
        ("expect_column_values_to_be_in_set", "hidden_size_mod_heads"),
        "meta-llama/Llama-3.1-8B-Instruct",
        id="heads-not-dividing-hidden",
    ),
    pytest.param(
        "llms",
        set_value("num_kv_heads", 0, 5),
        ("expect_column_values_to_be_in_set", "heads_mod_kv_heads"),
        "meta-llama/Llama-3.1-8B-Instruct",
        id="kv-heads-not-dividing-heads",
    ),
    pytest.param(
        "llms",
        set_value("active_params_b", 1, 0.9),
        ("expect_column_values_to_be_between", "active_params_fraction"),
        "Qwen/Qwen2.5-0.5B-Instruct",
        id="active-above-total",
    ),
    pytest.param(
        "llms",
        set_value("dtype", 1, "int4"),
        ("expect_column_values_to_be_in_set", "dtype"),
        "int4",
        id="unknown-dtype",
    ),
    pytest.param(
        "measurements",
        set_value("mean_power_w", 0, 2100.0),
        ("expect_column_values_to_be_between", "power_over_tdp"),
        {"gpu": "NVIDIA H100 80GB HBM3", "mean_power_w": 2100.0},
        id="power-3x-tdp",
    ),
    pytest.param(
        "measurements",
        set_value("request_rate_rps", 1, -1.0),
        ("expect_column_values_to_be_between", "request_rate_rps"),
        -1.0,
        id="negative-rate",
    ),
    pytest.param(
        "measurements",
        set_value("scenario", 2, "batch"),
        ("expect_column_values_to_be_in_set", "scenario"),
        "batch",
        id="unknown-scenario",
    ),
    pytest.param(
        "measurements",
        set_value("gpu", 1, "NVIDIA Z9000"),
        ("expect_column_values_to_be_in_set", "gpu_resolves"),
        "NVIDIA Z9000",
        id="unresolvable-gpu",
    ),
    pytest.param(
        "measurements",
        lambda f: f.assign(
            itl_s=[np.nan, *f["itl_s"][1:]], mean_power_w=[np.nan, *f["mean_power_w"][1:]]
        ),
        ("expect_column_values_to_be_in_set", "has_measurement"),
        {"gpu": "NVIDIA H100 80GB HBM3", "model": "meta-llama/Llama-3.1-8B-Instruct"},
        id="row-without-power-or-itl-names-its-row",
    ),
    pytest.param(
        "measurements",
        lambda f: f.assign(engine_year=[2025.0, 1995.0, np.nan]),
        ("expect_column_values_to_be_between", "engine_year"),
        1995.0,
        id="engine-year-before-2000",
    ),
    pytest.param(
        "measurements",
        set_value("itl_s", 1, 75.0),
        ("expect_column_values_to_be_between", "itl_s"),
        75.0,
        id="itl-too-long",
    ),
    # measured tails (itl_s is the median of the rows that give them): p99 >= p90 >= median
    pytest.param(
        "measurements",
        lambda f: f.assign(itl_p90_s=[0.05, 0.010, np.nan], itl_p99_s=[0.08, 0.02, np.nan]),
        ("expect_column_values_to_be_in_set", "tails_ordered"),
        {"gpu": "NVIDIA A100 80GB PCIe", "model": "Qwen/Qwen2.5-0.5B-Instruct"},
        id="itl-p90-below-the-median",
    ),
    pytest.param(
        "measurements",
        lambda f: f.assign(ttft_s=[0.2, 0.3, 0.4], ttft_p90_s=[0.5, 0.6, 0.7]).assign(
            ttft_p99_s=[0.9, 0.55, np.nan]
        ),
        ("expect_column_values_to_be_in_set", "tails_ordered"),
        {"gpu": "NVIDIA A100 80GB PCIe", "model": "Qwen/Qwen2.5-0.5B-Instruct"},
        id="ttft-p99-below-p90",
    ),
    pytest.param(
        "measurements",
        lambda f: f.assign(ttft_p99_s=[np.nan, 0.0, np.nan]),
        ("expect_column_values_to_be_between", "ttft_p99_s"),
        0.0,
        id="ttft-tail-not-positive",
    ),
    pytest.param(
        "measurements",
        lambda f: f.assign(itl_p99_s=[np.nan, 75.0, np.nan]),
        ("expect_column_values_to_be_between", "itl_p99_s"),
        75.0,
        id="itl-tail-too-long",
    ),
    pytest.param(
        "measurements",
        set_value("client", 1, "nonesuch"),
        ("expect_column_values_to_be_in_set", "client_known"),
        "nonesuch",
        id="unknown-client",
    ),
    # the serving tables: the shipped ones, one value broken
    pytest.param(
        "engine_lines",
        set_value("policy", 0, "fcfs"),
        ("expect_column_values_to_be_in_set", "policy"),
        "fcfs",
        id="unknown-policy",
    ),
    pytest.param(
        "engine_lines",
        set_value("preemption", 0, "swap"),
        ("expect_column_values_to_be_in_set", "preemption"),
        "swap",
        id="unknown-preemption",
    ),
    pytest.param(
        "engine_lines",
        set_value("reserve", 0, "half"),
        ("expect_column_values_to_be_in_set", "reserve"),
        "half",
        id="unknown-reserve",
    ),
    pytest.param(
        "engine_lines",
        set_value("max_batched_tokens", 2, "0|8192"),
        ("expect_column_values_to_be_in_set", "budgets_positive"),
        {"line": "vllm-v1", "max_batched_tokens": "0|8192"},
        id="budget-tier-zero",
    ),
    pytest.param(
        "engine_lines",
        set_value("max_num_seqs", 0, "-256"),
        ("expect_column_values_to_be_in_set", "caps_positive"),
        {"line": "vllm-v0", "max_num_seqs": "-256"},
        id="negative-cap",
    ),
    pytest.param(
        "engine_lines",
        set_value("tier_gib", 2, "70|80"),
        ("expect_column_values_to_be_in_set", "tiers_match"),
        {"line": "vllm-v1", "tier_gib": "70|80"},
        id="two-bounds-for-two-tiers",
    ),
    pytest.param(
        "engine_lines",
        set_value("memory_fraction", 0, 1.2),
        ("expect_column_values_to_be_between", "memory_fraction"),
        1.2,
        id="memory-fraction-above-one",
    ),
    pytest.param(
        "engine_lines",
        set_value("host_fixed_s", 0, 1.5),
        ("expect_column_values_to_be_between", "host_fixed_s"),
        1.5,
        id="host-time-in-ms",
    ),
    pytest.param(
        "engine_lines",
        set_value("host_per_seq_s", 0, -0.0001),
        ("expect_column_values_to_be_between", "host_per_seq_s"),
        -0.0001,
        id="negative-host-time",
    ),
    pytest.param(
        "engine_lines",
        set_value("source", 0, np.nan),
        ("expect_column_values_to_not_be_null", "source"),
        "vllm-v0",
        id="engine-line-without-source",
    ),
    pytest.param(
        "engine_lines",
        set_value("first_year", 0, 2025.0),
        ("expect_column_values_to_be_in_set", "years_in_order"),
        "vllm-v0",
        id="first-year-after-last",
    ),
    pytest.param(
        "clients",
        set_value("kind", 0, "open"),
        ("expect_column_values_to_be_in_set", "kind"),
        "open",
        id="unknown-client-kind",
    ),
    pytest.param(
        "clients",
        set_value("ttft_statistic", 0, "p50"),
        ("expect_column_values_to_be_in_set", "ttft_statistic"),
        "p50",
        id="unknown-ttft-statistic",
    ),
    pytest.param(
        "clients",
        set_value("lengths", 0, "sharegpt"),
        ("expect_column_values_to_be_in_set", "lengths_known"),
        {"client": "closed", "lengths": "sharegpt"},
        id="length-distribution-not-in-the-table",
    ),
    pytest.param(
        "clients",
        set_value("spread", 0, float("nan")),  # row 0, the closed loop, is lognormal
        ("expect_column_values_to_be_in_set", "spread_fits_lengths"),
        "closed",
        id="lognormal-without-spread",
    ),
    pytest.param(
        # a uniform spread of 1 reaches lengths of zero; a lognormal's sigma may be 1
        "clients",
        set_values(0, lengths="uniform", spread=1.0),
        ("expect_column_values_to_be_in_set", "spread_fits_lengths"),
        "closed",
        id="uniform-spread-reaching-zero",
    ),
    pytest.param(
        "clients",
        set_value("spread", 0, 3.5),
        ("expect_column_values_to_be_between", "spread"),
        3.5,
        id="lognormal-spread-too-wide",
    ),
    pytest.param(
        # row 3, AIConfigurator, does not state its memory fraction: a value there is a guess
        "clients",
        set_value("memory_fraction", 3, 0.9),
        ("expect_column_values_to_be_in_set", "unknown_left_blank"),
        {
            "client": "aiconfigurator",
            "unknown": "max_num_seqs|max_batched_tokens|memory_fraction|chunked_prefill",
        },
        id="unknown-value-filled-in",
    ),
    pytest.param(
        # a scheduling policy is a fact of the engine's code, never a value to fit
        "engine_lines",
        set_value("to_fit", 0, "host_fixed_s|policy"),
        ("expect_column_values_to_be_in_set", "to_fit_names_values"),
        {"line": "vllm-v0", "to_fit": "host_fixed_s|policy"},
        id="policy-to-fit",
    ),
    pytest.param(
        # row 5, ML.ENERGY 2024, does not publish its lengths' shape
        "clients",
        set_value("lengths", 5, "lmarena"),
        ("expect_column_values_to_be_in_set", "unknown_left_blank"),
        {"client": "mlenergy-v2", "unknown": "lengths"},
        id="unknown-lengths-given-a-shape",
    ),
    pytest.param(
        "clients",
        set_value("inferred", 4, "kind|think_time"),
        ("expect_column_values_to_be_in_set", "provenance_names_facts"),
        {
            "client": "llm-pilot",
            "inferred": "kind|think_time",
            "unknown": "warmup_per_user|requests_per_user|max_num_seqs|max_batched_tokens|"
            "memory_fraction|chunked_prefill",
        },
        id="inferred-names-no-field",
    ),
    pytest.param(
        # row 7, ML.ENERGY v1: its lengths are unknown, so they cannot be inferred as well
        "clients",
        set_value("inferred", 7, "kind|lengths"),
        ("expect_column_values_to_be_in_set", "inferred_or_unknown"),
        "mlenergy-v1",
        id="inferred-and-unknown",
    ),
    pytest.param(
        "clients",
        set_value("memory_fraction", 0, 0.0),
        ("expect_column_values_to_be_between", "memory_fraction"),
        0.0,
        id="client-memory-fraction-zero",
    ),
    pytest.param(
        "clients",
        set_value("total_requests", 1, 0.0),
        ("expect_column_values_to_be_between", "total_requests"),
        0.0,
        id="no-requests",
    ),
    pytest.param(
        "clients",
        set_value("client", 1, "closed"),
        ("expect_column_values_to_be_unique", "client"),
        "closed",
        id="duplicate-client",
    ),
    pytest.param(
        "clients",
        set_value("source", 3, np.nan),
        ("expect_column_values_to_not_be_null", "source"),
        "aiconfigurator",
        id="client-without-source",
    ),
    pytest.param(
        "length_distributions",
        set_value("ratio_to_mean", 10, 0.01),
        ("expect_column_values_to_be_in_set", "quantiles_rising"),
        {"distribution": "llm_pilot", "side": "input", "quantile": 0.5},
        id="quantiles-falling",
    ),
    pytest.param(
        "length_distributions",
        set_value("ratio_to_mean", 0, -0.1),
        ("expect_column_values_to_be_between", "ratio_to_mean"),
        -0.1,
        id="negative-ratio",
    ),
]


@pytest.mark.parametrize(("table", "breaker", "expected", "example"), BROKEN)
def test_each_broken_case_fails_exactly_its_expectation(catalog, table, breaker, expected, example):
    frame = breaker(FRAMES[table]())
    before = frame.copy()
    report = validate_table(table, frame, catalog)
    assert failures(report) == {expected}
    assert not report.success
    (failed,) = [r for r in report.results if not r.success]
    assert example in failed.examples
    # One broken row, except a duplicate, which makes both of its rows unexpected.
    assert failed.unexpected_count == (2 if expected[0].endswith("unique") else 1)
    pd.testing.assert_frame_equal(frame, before)  # validation never mutates its input


def test_an_unknown_client_fails_in_one_line(catalog):
    frame = measurements_frame().assign(client=["argonne", "nonesuch", np.nan])
    report = validate_table("measurements", frame, catalog)
    lines = format_reports([report]).splitlines()
    assert len(lines) == 2  # the failure, then the total
    assert lines[0].startswith("FAIL  measurements expect_column_values_to_be_in_set")
    assert "client_known" in lines[0] and lines[0].endswith("unexpected=1  examples: nonesuch")
    with pytest.raises(ValidationFailed) as info:
        raise_on_failure([report])
    assert str(info.value) == (
        "data validation failed, 1 expectation(s): measurements: "
        "expect_column_values_to_be_in_set(client_known) e.g. 'nonesuch'"
    )


def test_a_closed_loop_row_without_users_fails(catalog):
    # row 1 is a server row at a rate: as an llm-pilot (closed loop) row it names no users; row 0
    # is an offline batch, whose batch size counts as the users of a loop of batches
    frame = measurements_frame().assign(client=["llm-pilot", "llm-pilot", "poisson"])
    report = validate_table("measurements", frame, catalog)
    assert failures(report) == {("expect_column_values_to_be_in_set", "client_has_its_load")}
    (failed,) = [r for r in report.results if not r.success]
    assert failed.unexpected_count == 1
    assert validate_table(
        "measurements", frame.assign(concurrency=[np.nan, 16.0, np.nan]), catalog
    ).success


def test_an_offline_row_with_a_poisson_client_fails(catalog):
    # row 0 is offline (a batch of 256): an open loop of arrivals never drove it
    frame = measurements_frame().assign(client=["poisson", "poisson", "poisson"])
    report = validate_table("measurements", frame, catalog)
    assert failures(report) == {
        ("expect_column_values_to_be_in_set", "client_fits_scenario"),
        # nor does it give a rate, which a Poisson client's row must
        ("expect_column_values_to_be_in_set", "client_has_its_load"),
    }
    assert all(r.unexpected_count == 1 for r in report.results if not r.success)
    assert validate_table(
        "measurements", frame.assign(client=["batch", "poisson", "poisson"]), catalog
    ).success


def test_an_engine_line_without_a_policy_fails():
    lines = engine_lines_frame()
    lines.loc[lines["line"] == "tgi", "policy"] = np.nan
    report = validate_table("engine_lines", lines)
    assert failures(report) == {
        ("expect_column_values_to_not_be_null", "policy"),
    }
    assert "tgi" in format_reports([report]).splitlines()[0]


def test_a_measured_engine_needs_a_line(catalog):
    # the simulation schedules each row by its engine's line: an engine with none is refused
    frame = measurements_frame().assign(engine=["vllm", "mlc-llm", np.nan])
    lines = engine_lines_frame()
    (report, _) = validate_frames({"measurements": frame, "engine_lines": lines}, catalog)
    assert failures(report) == {("expect_column_values_to_be_in_set", "engine_has_line")}
    assert format_reports([report]).splitlines()[0].endswith("examples: mlc-llm")
    (report, _) = validate_frames(
        {"measurements": frame, "engine_lines": lines[lines["engine"] != "vllm"]}, catalog
    )
    (failed,) = [r for r in report.results if not r.success]
    assert failed.unexpected_count == 2  # vllm now has no line either


def test_tables_validated_together_read_each_other(catalog):
    # a measurement's client is looked up in the clients validated beside it, and a client's
    # length distribution in the length table beside it (else in the shipped ones)
    clients = clients_frame()
    lengths = lengths_frame()
    measured = measurements_frame().assign(client="llm-pilot", concurrency=8.0)
    alone = validate_frames(
        {
            "measurements": measured,
            "clients": clients[clients["client"] != "llm-pilot"],
            "length_distributions": lengths[lengths["distribution"] != "lmarena"],
        },
        catalog,
    )
    assert failures(alone[0]) == {("expect_column_values_to_be_in_set", "client_known")}
    assert failures(alone[1]) == {("expect_column_values_to_be_in_set", "lengths_known")}
    (unknown,) = [r for r in alone[1].results if not r.success]
    assert unknown.unexpected_count == 1  # ML.ENERGY v3, the one client drawing lmarena's lengths
    assert all(r.success for r in validate_frames({"measurements": measured}, catalog))


def test_a_distribution_gives_every_quantile_once():
    lengths = lengths_frame()
    report = validate_table("length_distributions", lengths.drop(index=30))
    (failed,) = [r for r in report.results if not r.success]
    assert (failed.expectation, failed.column) == (
        "expect_column_values_to_be_in_set",
        "quantiles_complete",
    )
    assert failed.unexpected_count == 20  # the other rows of llm_pilot's output side
    assert failed.examples == [{"distribution": "llm_pilot", "side": "output"}]
    doubled = pd.concat([lengths, lengths.iloc[[5]]], ignore_index=True)
    assert failures(validate_table("length_distributions", doubled)) == {
        ("expect_column_values_to_be_in_set", "quantiles_complete")
    }


def test_examples_are_distinct_and_capped(catalog):
    frame = pd.concat([measurements_frame()] * 4, ignore_index=True)
    frame["gpu"] = [f"NVIDIA Z{9000 + i}" for i in range(len(frame))]
    report = validate_table("measurements", frame, catalog)
    (failed,) = [r for r in report.results if r.column == "gpu_resolves"]
    assert failed.unexpected_count == 12
    assert failed.examples == [f"NVIDIA Z{9000 + i}" for i in range(MAX_EXAMPLES)]


def test_wrong_text_type_is_reported():
    frame = gpus_frame()
    frame["memory_bandwidth_gb_s"] = ["3350", "fast"]
    report = validate_table("gpus", frame)
    failed = failures(report)
    assert ("expect_column_values_to_be_in_type_list", "memory_bandwidth_gb_s") in failed
    (typed,) = [
        r
        for r in report.results
        if r.expectation == "expect_column_values_to_be_in_type_list"
        and r.column == "memory_bandwidth_gb_s"
    ]
    assert typed.examples == ["observed str"]


def test_derived_columns_leave_input_untouched(catalog):
    for table, derive in (
        ("gpus", derive_gpu_checks),
        ("llms", derive_llm_checks),
        ("measurements", lambda f: derive_measurement_checks(f, catalog)),
        ("engine_lines", derive_engine_line_checks),
        ("clients", derive_client_checks),
        ("length_distributions", derive_length_checks),
    ):
        frame = FRAMES[table]()
        before = frame.copy()
        out = derive(frame)
        pd.testing.assert_frame_equal(frame, before)
        assert len(out.columns) > len(frame.columns)
    derived = derive_measurement_checks(measurements_frame(), catalog)
    assert derived["power_over_tdp"].round(4).tolist() == [
        round(620 / 700, 4),
        0.5,
        round(400 / 700, 4),
    ]
    assert derived["gpu_resolves"].tolist() == [True, True, True]


def test_format_and_raise(catalog):
    good = validate_table("llms", llms_frame())
    bad = validate_table(
        "measurements", set_value("gpu", 1, "NVIDIA Z9000")(measurements_frame()), catalog
    )
    assert len(format_reports([good, bad], verbose=True).splitlines()) == (
        len(good.results) + len(bad.results) + 1
    )
    lines = format_reports([good, bad]).splitlines()
    assert len(lines) == 2  # by default: the failure and the total
    (fail_line,) = [line for line in lines if line.startswith("FAIL")]
    assert "measurements" in fail_line and "gpu_resolves" in fail_line
    assert "unexpected=1" in fail_line and "NVIDIA Z9000" in fail_line
    assert lines[-1].startswith("2 tables, 5 rows,") and "1 failed" in lines[-1]
    assert "FAILED (measurements)" in lines[-1]
    raise_on_failure([good])
    with pytest.raises(ValidationFailed) as info:
        raise_on_failure([good, bad])
    message = str(info.value)
    assert "\n" not in message
    assert "measurements: expect_column_values_to_be_in_set(gpu_resolves)" in message


def test_validate_all_reads_files_and_writes_data_docs(tmp_path):
    gpus_frame().to_csv(tmp_path / "gpus.csv", index=False)
    llms_frame().to_csv(tmp_path / "llms.csv", index=False)
    folder = tmp_path / "measurements"
    folder.mkdir()
    measurements_frame().to_csv(folder / "runs.csv", index=False)
    docs = tmp_path / "docs"
    reports = validate_all(tmp_path / "gpus.csv", tmp_path / "llms.csv", [folder], docs_dir=docs)
    assert [r.table for r in reports] == list(TABLES)
    assert all(r.success for r in reports), format_reports(reports)
    index = data_docs_index(docs)
    assert index.is_file()
    html = index.read_text(encoding="utf-8")
    for table in TABLES:
        assert f"wattgpu_{table}" in html
    assert len(list((docs / "validations").rglob("*.html"))) == len(TABLES)


def test_missing_files_raise_data_error(tmp_path):
    gpus_frame().to_csv(tmp_path / "gpus.csv", index=False)
    llms_frame().to_csv(tmp_path / "llms.csv", index=False)
    with pytest.raises(DataError, match="not found"):
        validate_all(tmp_path / "nope.csv", tmp_path / "llms.csv", [tmp_path])
    with pytest.raises(DataError, match="not found"):
        validate_all(tmp_path / "gpus.csv", tmp_path / "llms.csv", [tmp_path / "missing.csv"])
    with pytest.raises(DataError, match="suite not found"):
        validate_table("gpus", gpus_frame(), suites_dir=tmp_path)
    folder = tmp_path / "measurements"
    folder.mkdir()
    measurements_frame().to_csv(folder / "runs.csv", index=False)
    with pytest.raises(DataError, match=f"engine_lines table not found: {tmp_path}"):
        validate_all(tmp_path / "gpus.csv", tmp_path / "llms.csv", [folder], serving_dir=tmp_path)


def test_committed_suites_match_the_generator():
    specs = build_suites()
    assert sorted(specs) == sorted(TABLES)
    for table, spec in specs.items():
        committed = json.loads((EXPECTATIONS_DIR / f"{table}.json").read_text(encoding="utf-8"))
        generated = suite_to_json(spec)
        # The GE version stamp may differ after an upgrade; everything else must not.
        committed["meta"].pop("great_expectations_version", None)
        generated["meta"].pop("great_expectations_version", None)
        assert committed == generated, (
            f"expectations/{table}.json drifted: run python -m wattgpu.data.validation"
        )


def test_missing_column_fails_without_crashing():
    report = validate_table("gpus", gpus_frame().drop(columns=["tdp_w"]))
    failed = failures(report)
    assert ("expect_column_to_exist", "tdp_w") in failed
    assert {column for _, column in failed} == {"tdp_w"}
    assert any("tdp_w" in (r.error or "") for r in report.results if not r.success)


def test_measurements_need_a_catalogue():
    with pytest.raises(ValueError, match="catalogue"):
        validate_table("measurements", measurements_frame())


def test_a_verdict_says_the_reports_in_words(catalog):
    good = validate_table("llms", llms_frame())
    bad = validate_table(
        "measurements", set_value("gpu", 1, "NVIDIA Z9000")(measurements_frame()), catalog
    )
    failed = of_reports([good, bad])
    assert not failed.ok
    assert failed.report == format_reports([good, bad], verbose=True)
    assert failed.failures == format_reports([good, bad])
    with pytest.raises(ValidationFailed) as info:
        raise_on_failure([good, bad])
    assert failed.error == str(info.value)
    passed = of_reports([good])
    assert passed.ok and passed.error == ""
    assert pickle.loads(pickle.dumps(failed)) == failed  # it crosses from a worker


def test_a_job_reads_a_verdict_without_importing_great_expectations():
    # the main job validates on a worker: its own process never pays the import
    code = (
        "import sys, wattgpu.lifecycle.pipeline, wattgpu.data.verdict;"
        "print('great_expectations' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def with_new_gpu(**overrides) -> pd.DataFrame:
    """The two-GPU table and an RTX A5000 (its datasheet and the GA102 whitepaper, by hand)."""
    a5000 = {
        "gpu": "NVIDIA RTX A5000",
        "aliases": "RTX A5000|A5000",
        "vendor": "NVIDIA",
        "architecture": "Ampere",
        "release_year": 2021,
        "form_factor": "PCIe",
        "memory_gb": 24,
        "memory_type": "GDDR6",
        "memory_bandwidth_gb_s": 768.0,  # 384 bits / 8 x 16 Gbps
        "fp16_tensor_tflops": 111.1,
        "fp32_tflops": 27.8,
        "tdp_w": 230,
        "base_clock_mhz": np.nan,
        "boost_clock_mhz": np.nan,
        "sm_count": 64,
        "l2_cache_mb": np.nan,
        "transistors_m": np.nan,
        "process_nm": 8,
        "compute_capability": 8.6,
        "fp8_tensor_tflops": np.nan,
        "fp4_tensor_tflops": np.nan,
        "int8_tensor_tops": np.nan,
        "int4_tensor_tops": np.nan,
        "memory_bus_bits": 384,
        "memory_data_rate_gbps": 16.0,
    }
    a5000.update(overrides)
    return pd.concat([gpus_frame(), pd.DataFrame([a5000])], ignore_index=True)


@pytest.mark.parametrize(
    ("bandwidth", "passes"),
    [
        (768.0, True),  # the sheet's figure: 384 / 8 x 16 exactly
        (790.0, True),  # 2.9 % over: a sheet's rounding is allowed up to 3 %
        (792.0, False),  # 3.1 % over
        (868.0, False),  # a typo, 13 % over
        (691.2, False),  # 14.4 Gbps written for 16
    ],
)
def test_a_new_gpu_must_have_the_bandwidth_of_its_bus_and_data_rate(bandwidth, passes):
    report = validate_table("gpus", with_new_gpu(memory_bandwidth_gb_s=bandwidth))
    assert report.success is passes
    if not passes:
        assert failures(report) == {
            ("expect_column_values_to_be_between", "bandwidth_over_bus_rate")
        }
        (failed,) = [r for r in report.results if not r.success]
        assert failed.examples == ["NVIDIA RTX A5000"] and failed.unexpected_count == 1


def test_the_bandwidth_rule_holds_only_where_bus_and_rate_are_both_given():
    frame = with_new_gpu(memory_bandwidth_gb_s=868.0, memory_data_rate_gbps=np.nan)
    assert validate_table("gpus", frame).success
    # gpus_frame() has no memory bus columns at all: they are optional
    assert derive_gpu_checks(gpus_frame())["bandwidth_over_bus_rate"].isna().all()


@pytest.mark.parametrize(
    "alias",
    [
        "h100-sxm",  # row 0's alias "H100 SXM", spelt otherwise
        "nvidia h100 sxm5 80gb",  # row 0's name
    ],
)
def test_a_spelling_two_gpus_share_fails_naming_both(alias):
    frame = gpus_frame()
    frame.loc[1, "aliases"] = f"NVIDIA A100 80GB PCIe|{alias}"
    report = validate_table("gpus", frame)
    assert failures(report) == {("expect_column_values_to_be_in_set", "names_its_own")}
    (failed,) = [r for r in report.results if not r.success]
    assert failed.examples == ["NVIDIA H100 SXM5 80GB", "NVIDIA A100 PCIe 80GB"]


def test_a_gpu_may_repeat_its_own_spellings():
    frame = gpus_frame()
    frame.loc[0, "aliases"] = "NVIDIA H100 80GB HBM3|H100 SXM|h100-sxm|NVIDIA H100 SXM5 80GB"
    assert derive_gpu_checks(frame)["names_its_own"].tolist() == [True, True]


def test_the_shipped_gpu_catalogue_passes_its_suite():
    from wattgpu.config import SHIPPED_DATA_DIR

    shipped = pd.read_csv(SHIPPED_DATA_DIR / "gpus.csv")
    report = validate_table("gpus", shipped)
    assert report.success, format_reports([report])
    assert report.rows == len(shipped) >= 80
