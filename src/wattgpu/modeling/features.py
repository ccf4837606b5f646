"""Physics features of an (LLM, GPU, workload) triple — pure functions of DataFrames.

The same functions build the training matrix and the served model's input, so training and
serving cannot drift apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.data.catalog import GPU_NUMERIC_COLUMNS, GPU_TEXT_COLUMNS, LLM_NUMERIC_COLUMNS, Catalog

# What a query may leave out, and what it then means.
DEFAULT_INPUT_TOKENS = 512.0
DEFAULT_OUTPUT_TOKENS = 256.0
DEFAULT_ENGINE = "vllm"
DEFAULT_NUM_GPUS = 1.0
DEFAULT_DTYPE = "bfloat16"
# vLLM's default max_num_seqs: the batch an engine picks when the user sets none.
ENGINE_MAX_BATCH = 256.0
# Share of the memory left after the weights that an engine gives to the KV cache.
KV_CACHE_MEMORY_SHARE = 0.9

BYTES_PER_PARAM = {
    "float32": 4.0,
    "fp32": 4.0,
    "float16": 2.0,
    "fp16": 2.0,
    "bfloat16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "float8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

GPU_SPEC_COLUMNS = tuple(f"gpu_{c}" for c in (*GPU_TEXT_COLUMNS, *GPU_NUMERIC_COLUMNS))
LLM_SPEC_COLUMNS = tuple(f"llm_{c}" for c in ("family", "arch", *LLM_NUMERIC_COLUMNS))

CATEGORICAL_FEATURES = (
    "scenario",
    "engine",
    "gpu_architecture",
    "gpu_memory_type",
    "gpu_form_factor",
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
    "gpu_fp32_tflops",
    "gpu_tdp_w",
    "gpu_base_clock_mhz",
    "gpu_boost_clock_mhz",
    "gpu_sm_count",
    "gpu_l2_cache_mb",
    "gpu_transistors_m",
    "gpu_process_nm",
    "gpu_release_year",
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
    "clock_ratio",
    "fits_in_memory",
)
FEATURE_COLUMNS = CATEGORICAL_FEATURES + NUMERIC_FEATURES


def attach_specs(frame: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Add the catalogue's GPU (``gpu_*``) and LLM (``llm_*``) columns to rows with canonical names.

    Spec columns already present on a row (a query describing an uncatalogued GPU or LLM) win
    over the catalogue's; rows whose names are not in the catalogue keep only what they carry.
    """
    out = frame.copy()
    gpu_specs = catalog.gpus.add_prefix("gpu_").drop(
        columns=["gpu_gpu", "gpu_aliases"], errors="ignore"
    )
    llm_specs = catalog.llms.add_prefix("llm_").drop(
        columns=["llm_model", "llm_aliases"], errors="ignore"
    )
    for key, specs in (("gpu", gpu_specs), ("model", llm_specs)):
        looked_up = specs.reindex(out[key].to_numpy())
        looked_up.index = out.index
        for column in looked_up.columns:
            if column in out.columns:
                out[column] = out[column].where(out[column].notna(), looked_up[column])
            else:
                out[column] = looked_up[column]
    return out


def fill_workload_defaults(frame: pd.DataFrame) -> pd.DataFrame:
    """Fill the workload fields a query may omit with the documented defaults."""
    out = frame.copy()
    defaults = {
        "input_tokens": DEFAULT_INPUT_TOKENS,
        "output_tokens": DEFAULT_OUTPUT_TOKENS,
        "engine": DEFAULT_ENGINE,
        "num_gpus": DEFAULT_NUM_GPUS,
        "dtype": DEFAULT_DTYPE,
    }
    for column, default in defaults.items():
        if column not in out.columns:
            out[column] = default
        else:
            out[column] = out[column].where(out[column].notna(), default)
    for column in ("request_rate_rps", "batch_size"):
        if column not in out.columns:
            out[column] = np.nan
    out["request_rate_rps"] = out["request_rate_rps"].astype(float)
    out["batch_size"] = out["batch_size"].astype(float)
    return out


def bytes_per_param(dtype: pd.Series) -> pd.Series:
    """Bytes per weight for a precision name; unknown or blank means 16-bit."""
    return dtype.astype(str).str.lower().map(BYTES_PER_PARAM).fillna(2.0).astype(float)


def physics_features(frame: pd.DataFrame) -> pd.DataFrame:
    """Add the derived physics columns (see DESIGN.md) to rows that carry specs and workload.

    ``weight_bytes``: total weights; ``bandwidth_latency_s``: time to read the weights active per
    token once at full memory bandwidth of all GPUs; ``compute_latency_s``: 2 FLOP per active
    parameter at FP16 tensor peak; ``kv_bytes_per_token``: K and V, 16-bit, every KV layer.
    """
    out = fill_workload_defaults(frame)
    num_gpus = out["num_gpus"].astype(float).clip(lower=1.0)
    bpp = bytes_per_param(out["dtype"])
    out["bytes_per_param"] = bpp
    params = out["llm_params_b"].astype(float) * 1e9
    active = out["llm_active_params_b"].astype(float).fillna(out["llm_params_b"]) * 1e9
    bandwidth = out["gpu_memory_bandwidth_gb_s"].astype(float) * 1e9
    flops = out["gpu_fp16_tensor_tflops"].astype(float) * 1e12

    out["log_params"] = np.log10(params)
    out["weight_bytes"] = params * bpp
    out["weight_bytes_per_gpu"] = out["weight_bytes"] / num_gpus
    out["bandwidth_latency_s"] = active * bpp / (bandwidth * num_gpus)
    out["compute_latency_s"] = 2.0 * active / (flops * num_gpus)
    kv_layers = out.get("llm_num_kv_layers", out["llm_num_layers"])
    kv_layers = kv_layers.astype(float).fillna(out["llm_num_layers"].astype(float))
    out["kv_bytes_per_token"] = (
        2.0
        * out["llm_num_kv_heads"].astype(float)
        * out["llm_head_dim"].astype(float)
        * 2.0
        * kv_layers
    )
    total_memory = out["gpu_memory_gb"].astype(float) * 1e9 * num_gpus
    out["free_memory_gb"] = (total_memory - out["weight_bytes"]) / 1e9
    out["fits_in_memory"] = (out["free_memory_gb"] > 0).astype(float)
    tokens_per_seq = out["input_tokens"].astype(float) + out["output_tokens"].astype(float)
    kv_per_seq = (out["kv_bytes_per_token"] * tokens_per_seq).replace(0.0, np.nan)
    max_seqs = (out["free_memory_gb"].clip(lower=0.0) * 1e9 * KV_CACHE_MEMORY_SHARE) / kv_per_seq
    out["max_concurrent_seqs"] = max_seqs.fillna(ENGINE_MAX_BATCH * 16).clip(upper=1e5)
    out["concurrency"] = concurrency(out)
    out["clock_ratio"] = out["gpu_boost_clock_mhz"].astype(float) / out[
        "gpu_base_clock_mhz"
    ].astype(float)
    return out


def concurrency(frame: pd.DataFrame) -> pd.Series:
    """Sequences decoded together: the batch offline (the engine's cap when blank), 1 for a server.

    A server's real concurrency depends on the latency it is trying to predict; the request rate
    is a feature of its own, so here a server row counts as one sequence.
    """
    engine_batch = np.minimum(ENGINE_MAX_BATCH, frame["max_concurrent_seqs"].clip(lower=1.0))
    offline = frame["batch_size"].astype(float).fillna(engine_batch)
    return offline.where(frame["scenario"] == "offline", 1.0).astype(float)


def feature_matrix(frame: pd.DataFrame) -> pd.DataFrame:
    """The model input: categoricals as strings ("missing" for blanks), numerics as floats."""
    out = pd.DataFrame(index=frame.index)
    for column in CATEGORICAL_FEATURES:
        values = frame[column] if column in frame.columns else pd.Series(pd.NA, index=frame.index)
        out[column] = values.astype("object").where(values.notna(), "missing").astype(str)
    for column in NUMERIC_FEATURES:
        values = frame[column] if column in frame.columns else np.nan
        out[column] = (
            pd.to_numeric(values, errors="coerce").astype(float)
            if column in frame.columns
            else np.nan
        )
    return out


def build_features(measurements: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Join catalogue specs to rows with canonical names and add the physics features."""
    return physics_features(attach_specs(measurements, catalog))
