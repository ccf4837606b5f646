"""The learning features of an (LLM, GPU, workload) triple — pure functions of DataFrames.

The same functions build the training matrix and the served model's input, so training and
serving cannot drift apart. ``build_features`` asks the physical pipeline
(``wattgpu.modeling.physical.pipeline``: workload -> operations -> costs -> step -> serving ->
targets) once for a batch of rows; this module keeps what the trees learn from: which columns
are features (``FEATURE_COLUMNS``) and the model input made of them (``feature_matrix``). Rows
come as a DataFrame or as columns held as numpy arrays (``columns.Columns``) and go back in the
kind they came.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.modeling.physical.columns import (
    Columns,
    Rows,
    as_given,
    columns_of,
    count,
    get,
    map_unique,
)

# ``wattgpu.modeling.serving.prior`` reads ``columns_of`` and ``itl_statistic`` here still
from wattgpu.modeling.physical.itl import itl_statistic as itl_statistic
from wattgpu.modeling.physical.pipeline import physical_columns

# What the measured analogs of a row say (``wattgpu.modeling.learning.analogs`` fills them from
# the training rows; blank where a row has none): their weighted residual to the prior, its
# spread, their count, their weighted distance from the row and the part of it their GPUs make.
ANALOG_FEATURES = (
    "analog_residual",
    "analog_spread",
    "analog_count",
    "analog_distance",
    "analog_gpu_distance",
)

# The GPU enters the model through the physical quantities that set power and latency (memory,
# bandwidth, FP16 peak, TDP) and the analytical model's prior, not through specs that mostly
# name the product (architecture, release year, transistors, clocks, SMs, ...): with five GPUs
# in the real data, those let the trees memorise GPUs instead of generalising to unseen ones
# (leave-one-GPU-out MdAPE on ../shared/reference with CatBoost defaults: power offline
# 21.7 -> 20.2 %, server 18.6 -> 14.3 %, ITL 13.0 -> 12.8 %).
# No feature says how a row's ITL was measured (``itl_statistic``): a query cannot send it, and
# each data set measures one statistic, so it named the data set. ``median_itl`` turns every
# row's ITL into the served statistic before it becomes a target instead.
CATEGORICAL_FEATURES = (
    "scenario",
    "engine",
    "llm_family",
    "llm_arch",
)
NUMERIC_FEATURES = (
    "request_rate_rps",
    "batch_size",
    "input_tokens",
    "output_tokens",
    "num_gpus",
    "bytes_per_param",
    "gpu_memory_gb",
    "gpu_memory_bandwidth_gb_s",
    "gpu_fp16_tensor_tflops",
    "gpu_tdp_w",
    # 1 where the GPU runs fused (FlashAttention-class) attention kernels, 0 on Volta and Turing,
    # where engines fall back to slower attention (``catalog.KERNEL_FEATURES``)
    "gpu_fused_attention",
    "llm_params_b",
    "llm_active_params_b",
    "llm_num_layers",
    "llm_hidden_size",
    "llm_num_attention_heads",
    "llm_num_kv_heads",
    "llm_head_dim",
    "llm_intermediate_size",
    "llm_vocab_size",
    "log_params",
    "weight_bytes_per_gpu",
    "bandwidth_latency_s",
    "compute_latency_s",
    "kv_bytes_per_token",
    "free_memory_gb",
    "max_concurrent_seqs",
    "concurrency",
    "fits_in_memory",
    "log_prior_power_tdp",
    "log_prior_itl_s",
    "log_prior_power_cpu_tdp",
    "log_prior_itl_cpu_s",
    *ANALOG_FEATURES,
)
FEATURE_COLUMNS = CATEGORICAL_FEATURES + NUMERIC_FEATURES
# The analytical prior without and with the engine's host-side floor (see ``with_prior``): the
# power model sees the second pair, the ITL model the first (measured by bench/ablation.py).
PRIOR_FEATURES = ("log_prior_power_tdp", "log_prior_itl_s")
CPU_FLOOR_FEATURES = ("log_prior_power_cpu_tdp", "log_prior_itl_cpu_s")
# GPU specs that also name the product: with five GPUs in the real data, trees split on them to
# tell the GPUs apart rather than to learn physics, and a new GPU lands on the wrong side of such
# a split. The physics features (latencies, the prior) carry the same specs as ratios.
RAW_GPU_SPECS = (
    "gpu_memory_gb",
    "gpu_memory_bandwidth_gb_s",
    "gpu_fp16_tensor_tflops",
    "gpu_tdp_w",
)


def feature_matrix(rows: Rows, target: str | None = None, without: tuple[str, ...] = ()) -> Rows:
    """The model input: categoricals as strings ("missing" for blanks), numerics as floats.

    The same columns for every ``target`` (kept for the callers that name one). Columns named in
    ``without`` are left out; the rest come in the order of ``FEATURE_COLUMNS``.
    """
    columns = columns_of(rows)
    n = count(columns)
    out: Columns = {}
    for column in CATEGORICAL_FEATURES:
        if column not in without:
            out[column] = map_unique(get(columns, column, n), _category, object)
    for column in NUMERIC_FEATURES:
        if column not in without:
            values = get(columns, column, n)
            out[column] = (
                values
                if values.dtype == np.float64
                else pd.to_numeric(values, errors="coerce").astype(float)
            )
    return as_given(out, rows)


def _category(value: Any) -> str:
    return "missing" if pd.isna(value) else str(value)


def build_features(rows: Rows, catalog: Catalog) -> Rows:
    """Join catalogue specs to rows with canonical names and add the physical columns.

    One pass of the pipeline (``pipeline.physical_columns``) for the whole batch.
    """
    return as_given(physical_columns(columns_of(rows), catalog), rows)
