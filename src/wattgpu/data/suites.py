"""The expectation suites of the three tables, built in code, and the derived check columns.

This module is the source of truth for the suites in ``expectations/*.json``:
``python -m wattgpu.data.validation`` rewrites those files from :func:`build_suites`, and a test
fails when they drift apart.

Some rules span columns or tables (boost clock at least the base clock, heads dividing the hidden
size, power within 1.5 x the GPU's TDP, names that resolve through the catalogue). Those are
checked on derived columns that the ``derive_*_checks`` functions add to a copy of the table
before Great Expectations sees it. An expectation whose ``meta`` names ``examples_from`` reports
the values of those columns as its failing examples (the GPU name, not ``False``).

Nothing here imports Great Expectations; :mod:`wattgpu.data.validation` turns these plain
dictionaries into suites.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import (
    GPU_COLUMNS,
    GPU_LINK_COLUMNS,
    GPU_NUMERIC_COLUMNS,
    GPU_THROUGHPUT_COLUMNS,
    KERNEL_FEATURES,
    LLM_ATTENTION_COLUMNS,
    LLM_COLUMNS,
    Catalog,
)
from wattgpu.data.formats import KNOWN_FORMATS
from wattgpu.data.measurements import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, SCENARIOS

TABLES = ("gpus", "llms", "measurements")

# pandas 3 reads text as dtype "str" (a column with no value at all reads as float64);
# integers as int64, or float64 when a value is blank. expect_column_values_to_be_in_type_list
# does not recognise the "str" dtype, so text columns use expect_column_values_to_be_of_type.
TEXT_TYPE = "str"
NUMERIC_TYPES = ["int64", "float64", "Int64", "Float64"]

MEMORY_TYPES = [
    "GDDR5",
    "GDDR5X",
    "GDDR6",
    "GDDR6X",
    "GDDR7",
    "HBM2",
    "HBM2e",
    "HBM3",
    "HBM3e",
    "LPDDR5X",
]
LLM_DTYPES = ["bfloat16", "float16", "float32"]
# The attention layout: multi-head, grouped-query, multi-query, multi-head latent (DeepSeek's
# compressed KV), sliding (some layers attend to a window only, e.g. gpt-oss), linear_hybrid
# (linear-attention layers beside a few full ones, e.g. Qwen3.5), or none (a recurrent model).
LLM_ATTENTION = ["mha", "gqa", "mqa", "mla", "sliding", "linear_hybrid", "none"]
# Optional catalogue columns (blank: a dense LLM, its attention read from its heads, its
# checkpoint in ``dtype``); derive_llm_checks adds them as blanks where a table lacks them.
LLM_OPTIONAL_COLUMNS = (
    "num_experts",
    "experts_per_token",
    "shared_experts",
    "attention",
    "weight_format",
    "moe_intermediate_size",
    *LLM_ATTENTION_COLUMNS,
)
LLM_ARCHS = ["decoder", "encoder-decoder", "recurrent", "hybrid"]
GPU_VENDORS = ["NVIDIA"]
# CUDA compute capabilities of Volta to Blackwell Ultra (7.2, 8.7, 11.0 and 12.1 are Jetson/Thor
# and DGX Spark parts, here so a user's catalogue may list them).
COMPUTE_CAPABILITIES = [7.0, 7.2, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 11.0, 12.0, 12.1]
# What every GPU needs: the physical quantities the features and the prior read (memory,
# bandwidth, FP16 peak, TDP), its year, process and compute capability. The rest may be blank
# where the vendor publishes no figure (GB200/GB300 clocks, SMs, L2): blank, never a guess.
GPU_REQUIRED_NUMERIC = (
    "release_year",
    "memory_gb",
    "memory_bandwidth_gb_s",
    "fp16_tensor_tflops",
    "tdp_w",
    "process_nm",
    "compute_capability",
)
GPU_ALL_NUMERIC = (
    *GPU_NUMERIC_COLUMNS,
    "compute_capability",
    *GPU_THROUGHPUT_COLUMNS,
    *GPU_LINK_COLUMNS,
)
# How GPUs reach their peers (``interconnect``); blank: not stated.
INTERCONNECTS = ["NVLink", "PCIe"]

# num_kv_layers is optional (the catalogue defaults it to num_layers).
LLM_REQUIRED_COLUMNS = tuple(c for c in LLM_COLUMNS if c != "num_kv_layers")
LLM_REQUIRED_NUMERIC = (
    "params_b",
    "active_params_b",
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
)
MEASUREMENT_NUMERIC = ("mean_power_w", "itl_s")

# (column, min, max) for expect_column_values_to_be_between, bounds inclusive.
GPU_RANGES = (
    ("release_year", 2015, 2030),
    ("memory_gb", 4, 300),
    ("memory_bandwidth_gb_s", 100, 20000),
    ("fp16_tensor_tflops", 5, 5000),
    ("fp32_tflops", 1, 1000),
    ("tdp_w", 30, 1500),
    ("base_clock_mhz", 300, 3000),
    ("boost_clock_mhz", 300, 3000),
    ("sm_count", 10, 300),
    ("l2_cache_mb", 1, 1024),
    ("transistors_m", 1000, 1000000),
    ("process_nm", 2, 20),
    ("fp8_tensor_tflops", 10, 50000),
    ("fp4_tensor_tflops", 10, 100000),
    ("int8_tensor_tops", 5, 50000),
    ("int4_tensor_tops", 10, 100000),
    ("fp32acc_tensor_tflops", 5, 5000),
    ("nvlink_bandwidth_gb_s", 50, 4000),  # both directions, per GPU
    ("pcie_generation", 3, 6),
    ("pcie_lanes", 1, 16),
)
LLM_RANGES = (
    # up to Kimi-K2's 1.03 trillion
    ("params_b", 0.01, 2000),
    ("num_layers", 1, 200),
    ("hidden_size", 64, 32768),
    ("num_attention_heads", 1, 1024),
    ("num_kv_heads", 1, 1024),
    ("head_dim", 16, 512),
    ("vocab_size", 1000, 300000),
)
MEASUREMENT_MINIMA = (
    ("request_rate_rps", 0),
    ("batch_size", 1),
    ("input_tokens", 1),
    ("output_tokens", 1),
    ("concurrency", 1),
)
MAX_POWER_OVER_TDP = 1.5
MAX_ITL_S = 60
# A first token later than 10 minutes is a stalled run or a unit mistake (ms for s).
MAX_TTFT_S = 600


def expectation(kind: str, meta: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Return one expectation as the plain dictionary Great Expectations stores.

    Args:
        kind: the snake_case expectation type, e.g. ``"expect_column_values_to_be_between"``.
        meta: free-form notes kept with the expectation (``examples_from`` is read by validation).
        **kwargs: the expectation's arguments (``column``, ``min_value``, ...).

    """
    return {"type": kind, "kwargs": kwargs, "meta": meta or {}}


def _exists(columns: tuple[str, ...]) -> list[dict[str, Any]]:
    return [expectation("expect_column_to_exist", column=c) for c in columns]


def _not_null(columns: tuple[str, ...], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Not-null checks whose failing examples name the row (its ``keys``), not a blank value."""
    return [
        expectation(
            "expect_column_values_to_not_be_null",
            column=c,
            meta=None if c in keys else _examples_from(*keys),
        )
        for c in columns
    ]


def _text_types(columns: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        expectation("expect_column_values_to_be_of_type", column=c, type_=TEXT_TYPE)
        for c in columns
    ]


def _numeric_types(columns: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        expectation("expect_column_values_to_be_in_type_list", column=c, type_list=NUMERIC_TYPES)
        for c in columns
    ]


def _between(column: str, low: float | None, high: float | None, **extra: Any) -> dict[str, Any]:
    return expectation(
        "expect_column_values_to_be_between", column=column, min_value=low, max_value=high, **extra
    )


def _examples_from(*columns: str) -> dict[str, Any]:
    return {"examples_from": list(columns)}


def gpu_expectations() -> list[dict[str, Any]]:
    """Return the GPU catalogue's expectations."""
    text = ("gpu", "vendor", "architecture", "form_factor", "memory_type")
    return [
        *_exists((*GPU_COLUMNS, *GPU_THROUGHPUT_COLUMNS)),
        *_text_types((*text, "aliases")),
        *_numeric_types(GPU_ALL_NUMERIC),
        expectation("expect_column_values_to_be_unique", column="gpu"),
        *_not_null((*text, *GPU_REQUIRED_NUMERIC), ("gpu",)),
        *[_between(c, lo, hi) for c, lo, hi in GPU_RANGES],
        _between("boost_over_base_clock", 1, None, meta=_examples_from("gpu")),
        expectation(
            "expect_column_values_to_be_in_set",
            column="compute_capability",
            value_set=COMPUTE_CAPABILITIES,
            meta=_examples_from("gpu"),
        ),
        # FP8 tensor cores arrive with SM89 (Ada) and SM90 (Hopper), FP4 with SM100 (Blackwell):
        # a figure on an older GPU, or none on a newer one, is a wrong row or a wrong capability.
        expectation(
            "expect_column_values_to_be_in_set",
            column="fp8_given_iff_capable",
            value_set=[True],
            meta=_examples_from("gpu"),
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="fp4_only_if_capable",
            value_set=[True],
            meta=_examples_from("gpu"),
        ),
        # Halving the precision never lowers the peak: FP8 at least the dense FP16 figure.
        _between("fp8_over_fp16", 1, None, meta=_examples_from("gpu")),
        # FP32 accumulation runs at the FP16-accumulate rate or at half of it (GeForce cards).
        _between("fp32acc_over_fp16", 0.5, 1, meta=_examples_from("gpu")),
        expectation(
            "expect_column_values_to_be_in_set", column="interconnect", value_set=INTERCONNECTS
        ),
        expectation("expect_column_values_to_be_in_set", column="vendor", value_set=GPU_VENDORS),
        expectation(
            "expect_column_values_to_be_in_set", column="memory_type", value_set=MEMORY_TYPES
        ),
    ]


def llm_expectations() -> list[dict[str, Any]]:
    """Return the LLM catalogue's expectations."""
    text = ("model", "family", "arch", "dtype")
    return [
        *_exists(LLM_REQUIRED_COLUMNS),
        *_text_types((*text, "aliases")),
        *_numeric_types(LLM_REQUIRED_NUMERIC),
        expectation("expect_column_values_to_be_unique", column="model"),
        *_not_null((*text, *LLM_REQUIRED_NUMERIC), ("model",)),
        *[_between(c, lo, hi) for c, lo, hi in LLM_RANGES],
        _between("active_params_b", 0, None, strict_min=True),
        _between("active_params_fraction", 0, 1, strict_min=True, meta=_examples_from("model")),
        expectation(
            "expect_column_values_to_be_in_set",
            column="hidden_size_mod_heads",
            value_set=[0],
            meta=_examples_from("model"),
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="heads_mod_kv_heads",
            value_set=[0],
            meta=_examples_from("model"),
        ),
        expectation("expect_column_values_to_be_in_set", column="dtype", value_set=LLM_DTYPES),
        expectation("expect_column_values_to_be_in_set", column="arch", value_set=LLM_ARCHS),
        expectation(
            "expect_column_values_to_be_in_set", column="attention", value_set=LLM_ATTENTION
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="weight_format",
            value_set=list(KNOWN_FORMATS),
        ),
        _between("num_experts", 1, None),
        _between("moe_intermediate_size", 1, None),
        *[_between(c, 1, None) for c in LLM_ATTENTION_COLUMNS],
        _between("shared_experts", 0, None),
        _between("experts_per_expert_count", 0, 1, strict_min=True, meta=_examples_from("model")),
    ]


def measurement_expectations() -> list[dict[str, Any]]:
    """Return the measurement table's expectations (optional columns may be blank)."""
    return [
        *_exists(REQUIRED_COLUMNS),
        *_text_types(("gpu", "model", "scenario")),
        *_numeric_types(MEASUREMENT_NUMERIC),
        # A row may measure power only or ITL only (ML.ENERGY's server files have no tokens),
        # but it must measure something.
        *_not_null(("gpu", "model", "scenario"), ("gpu", "model")),
        expectation(
            "expect_column_values_to_be_in_set",
            column="has_measurement",
            value_set=[True],
            meta=_examples_from("gpu", "model"),
        ),
        expectation(
            "expect_column_values_to_be_in_set", column="scenario", value_set=list(SCENARIOS)
        ),
        _between("mean_power_w", 0, None, strict_min=True),
        _between(
            "power_over_tdp",
            None,
            MAX_POWER_OVER_TDP,
            meta=_examples_from("gpu", "mean_power_w"),
        ),
        _between("itl_s", 0, MAX_ITL_S, strict_min=True, strict_max=True),
        _between("ttft_s", 0, MAX_TTFT_S, strict_min=True, strict_max=True),
        *[_between(c, lo, None) for c, lo in MEASUREMENT_MINIMA],
        # up to a GB200 NVL72 rack (one NVLink domain of 72 GPUs)
        _between("num_gpus", 1, 72),
        _between("engine_year", 2000, 2100),
        expectation(
            "expect_column_values_to_be_in_set",
            column="gpu_resolves",
            value_set=[True],
            meta=_examples_from("gpu"),
        ),
        expectation(
            "expect_column_values_to_be_in_set",
            column="model_resolves",
            value_set=[True],
            meta=_examples_from("model"),
        ),
    ]


def build_suites() -> dict[str, dict[str, Any]]:
    """Return the three suites as keyword dictionaries for ``gx.ExpectationSuite(**suite)``."""
    builders = {
        "gpus": gpu_expectations,
        "llms": llm_expectations,
        "measurements": measurement_expectations,
    }
    return {table: {"name": table, "expectations": build()} for table, build in builders.items()}


def _numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    """Return the column as floats; blank (NaN) where it is missing or not numeric."""
    if column not in frame.columns:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").astype(float)


def derive_gpu_checks(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of the GPU table with the derived check columns added.

    ``boost_over_base_clock`` = boost / base clock; ``fp8_given_iff_capable`` says an FP8 figure
    is given exactly when the compute capability has FP8 tensor cores; ``fp4_only_if_capable``
    that an FP4 figure is given only when it has FP4 ones (thresholds from
    ``catalog.KERNEL_FEATURES``); ``fp8_over_fp16`` = FP8 / FP16 dense tensor peak (blank where
    either is blank). Absent throughput columns (``GPU_THROUGHPUT_COLUMNS``) are added as blanks.
    """
    out = frame.reset_index(drop=True)
    for column in (*GPU_THROUGHPUT_COLUMNS, *GPU_LINK_COLUMNS, "interconnect"):
        if column not in out.columns:
            out[column] = np.nan
    boost, base = _numeric(out, "boost_clock_mhz"), _numeric(out, "base_clock_mhz")
    out["boost_over_base_clock"] = boost / base
    capability = _numeric(out, "compute_capability")
    fp8, fp4 = _numeric(out, "fp8_tensor_tflops"), _numeric(out, "fp4_tensor_tflops")
    out["fp8_given_iff_capable"] = (fp8.notna() == (capability >= KERNEL_FEATURES["fp8"])).astype(
        bool
    )
    out["fp4_only_if_capable"] = (fp4.isna() | (capability >= KERNEL_FEATURES["fp4"])).astype(bool)
    out["fp8_over_fp16"] = fp8 / _numeric(out, "fp16_tensor_tflops")
    out["fp32acc_over_fp16"] = _numeric(out, "fp32acc_tensor_tflops") / _numeric(
        out, "fp16_tensor_tflops"
    )
    return out


def derive_llm_checks(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of the LLM table with the derived check columns added.

    ``active_params_fraction`` = active / total parameters; ``hidden_size_mod_heads`` =
    hidden_size % num_attention_heads; ``heads_mod_kv_heads`` = num_attention_heads % num_kv_heads;
    ``experts_per_expert_count`` = experts_per_token / num_experts (blank where an input is
    blank or the divisor is zero). Absent optional columns (``LLM_OPTIONAL_COLUMNS``) are added
    as blanks.
    """
    out = frame.reset_index(drop=True)
    for column in LLM_OPTIONAL_COLUMNS:
        if column not in out.columns:
            out[column] = np.nan
    out["experts_per_expert_count"] = _numeric(out, "experts_per_token") / _numeric(
        out, "num_experts"
    )
    heads = _numeric(out, "num_attention_heads")
    kv_heads = _numeric(out, "num_kv_heads")
    out["active_params_fraction"] = _numeric(out, "active_params_b") / _numeric(out, "params_b")
    out["hidden_size_mod_heads"] = _numeric(out, "hidden_size") % heads.replace(0, np.nan)
    out["heads_mod_kv_heads"] = heads % kv_heads.replace(0, np.nan)
    return out


def derive_measurement_checks(frame: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Return a copy of the measurement table with the derived check columns added.

    Optional columns that are absent are added as blanks (as ``read_measurements`` does).
    ``gpu_resolves`` / ``model_resolves`` say whether the name resolves through the catalogue;
    ``power_over_tdp`` is ``mean_power_w`` over the resolved GPU's ``tdp_w`` (blank when the GPU
    does not resolve); ``has_measurement`` says the row holds a power or an ITL.
    """
    out = frame.reset_index(drop=True)
    for column in OPTIONAL_COLUMNS:
        if column not in out.columns:
            out[column] = np.nan
    blank = pd.Series(None, index=out.index, dtype=object)
    gpus = out["gpu"] if "gpu" in out.columns else blank
    models = out["model"] if "model" in out.columns else blank
    canonical_gpu = gpus.map(lambda n: catalog.find_gpu(n) if pd.notna(n) else None)
    canonical_llm = models.map(lambda n: catalog.find_llm(n) if pd.notna(n) else None)
    out["gpu_resolves"] = canonical_gpu.notna().astype(bool)
    out["model_resolves"] = canonical_llm.notna().astype(bool)
    tdp = pd.to_numeric(canonical_gpu.map(catalog.gpus["tdp_w"]), errors="coerce").astype(float)
    out["power_over_tdp"] = _numeric(out, "mean_power_w") / tdp
    out["has_measurement"] = (
        _numeric(out, "mean_power_w").notna() | _numeric(out, "itl_s").notna()
    ).astype(bool)
    return out
