"""Physics features of an (LLM, GPU, workload) triple — pure functions of DataFrames.

The same functions build the training matrix and the served model's input, so training and
serving cannot drift apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.modeling import physics
from wattgpu.modeling.physics import ENGINE_MAX_BATCH

# What a query may leave out, and what it then means.
DEFAULT_INPUT_TOKENS = 512.0
DEFAULT_OUTPUT_TOKENS = 256.0
DEFAULT_ENGINE = "vllm"
DEFAULT_NUM_GPUS = 1.0
DEFAULT_DTYPE = "bfloat16"
# The serving software's generation, as the year of its release: the same H100, vLLM and
# Llama-3.1-8B draw 276 W with the 2024 engine of ML.ENERGY's runs and 691 W with the 2025 one
# (a CPU-bound scheduler against an overlapped one), a difference no hardware spec explains. A
# query that names no year means the most recent measured one.
DEFAULT_ENGINE_YEAR = 2025.0
# Which per-request ITL statistic a row's ``itl_s`` is (``itl_statistic`` reads the free-text
# ``itl_kind`` of a measurement file): the median gap between two tokens, the mean time per
# output token after the first, or a request's (or batch's) latency / output tokens, which
# includes the prefill. A query asks for the median unless it says otherwise: it is what the
# most recent engine runs report, and what a user sees for a typical token.
ITL_STATISTICS = ("median", "mean", "with_prefill")
DEFAULT_ITL_STATISTIC = "median"
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
    # MXFP4 (gpt-oss): 4-bit experts with a shared 8-bit scale per 32 weights; the 16-bit
    # attention weights are a few per cent of the total.
    "mxfp4": 0.53,
}


# The GPU enters the model through the physical quantities that set power and latency (memory,
# bandwidth, FP16 peak, TDP) and the analytical model's prior, not through specs that mostly
# name the product (architecture, release year, transistors, clocks, SMs, ...): with five GPUs
# in the real data, those let the trees memorise GPUs instead of generalising to unseen ones
# (leave-one-GPU-out MdAPE on ../shared/reference with CatBoost defaults: power offline
# 21.7 -> 20.2 %, server 18.6 -> 14.3 %, ITL 13.0 -> 12.8 %).
CATEGORICAL_FEATURES = (
    "scenario",
    "engine",
    "itl_statistic",
    "llm_family",
    "llm_arch",
)
# Features that describe the ITL measurement itself: constant (the default) for other targets.
ITL_ONLY_FEATURES = ("itl_statistic",)
NUMERIC_FEATURES = (
    "request_rate_rps",
    "engine_year",
    "batch_size",
    "input_tokens",
    "output_tokens",
    "num_gpus",
    "bytes_per_param",
    "gpu_memory_gb",
    "gpu_memory_bandwidth_gb_s",
    "gpu_fp16_tensor_tflops",
    "gpu_tdp_w",
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


def attach_specs(frame: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Add the catalogue's GPU (``gpu_*``) and LLM (``llm_*``) columns to rows with canonical names.

    Spec columns already present on a row (a query describing an uncatalogued GPU or LLM) win
    over the catalogue's; rows whose names are not in the catalogue keep only what they carry.
    """
    # Columns gathered in a dict and framed once: ~40 DataFrame insertions would dominate
    # the time of a one-row query.
    columns = {c: frame[c] for c in frame.columns}
    for key, specs in (("gpu", catalog.gpu_specs), ("model", catalog.llm_specs)):
        looked_up = specs.reindex(frame[key].to_numpy())
        looked_up.index = frame.index
        for column in looked_up.columns:
            given = columns.get(column)
            columns[column] = (
                looked_up[column]
                if given is None
                else given.where(given.notna(), looked_up[column])
            )
    return pd.DataFrame(columns, index=frame.index)


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
    out["engine_year"] = engine_year(out)
    return out


def _year(values: pd.Series, pattern: str) -> pd.Series:
    found = values.astype("object").fillna("").astype(str).str.extract(pattern, expand=False)
    return pd.to_numeric(found, errors="coerce").astype(float)


def engine_year(frame: pd.DataFrame) -> pd.Series:
    """The release year of the serving software of each row (``DEFAULT_ENGINE_YEAR`` if unknown).

    In order: the row's own ``engine_year``; the year of ``measured_at``; the year that ends the
    name of the source's data ``family`` (the reference data names its generations so, e.g.
    ``v2_vllm_batch_2024``); the year of the source file's ``data_commit_date``.
    """
    blank = pd.Series(np.nan, index=frame.index)
    year = pd.to_numeric(frame.get("engine_year", blank), errors="coerce").astype(float)
    for column, pattern in (
        ("measured_at", r"^\s*((?:19|20)\d\d)"),
        ("family", r"_((?:19|20)\d\d)$"),
        ("data_commit_date", r"^\s*((?:19|20)\d\d)"),
    ):
        if column in frame.columns:
            year = year.fillna(_year(frame[column], pattern))
    return year.fillna(DEFAULT_ENGINE_YEAR)


def itl_statistic(kind: pd.Series) -> pd.Series:
    """The ITL statistic (``ITL_STATISTICS``) a free-text ``itl_kind`` names.

    A name of the statistic itself passes through; text that mentions the prefill, or a latency
    divided by a length, is ``with_prefill``; "median" is ``median``; "mean"/"TPOT" is ``mean``;
    anything else (and blank) is ``DEFAULT_ITL_STATISTIC``.
    """
    text = kind.astype("object").fillna("").astype(str).str.lower()
    known = text.where(text.isin(ITL_STATISTICS))
    prefill = text.str.contains("prefill") | text.str.contains(r"latency\s*/", regex=True)
    out = np.select(
        [known.notna(), prefill, text.str.contains("median"), text.str.contains("mean|tpot")],
        [known, "with_prefill", "median", "mean"],
        default=DEFAULT_ITL_STATISTIC,
    )
    return pd.Series(out, index=kind.index, dtype=object)


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
    out["clock_ratio"] = out["gpu_boost_clock_mhz"].astype(float) / out[
        "gpu_base_clock_mhz"
    ].astype(float)
    kind = out["itl_kind"] if "itl_kind" in out.columns else pd.Series(np.nan, index=out.index)
    out["itl_statistic"] = itl_statistic(kind)
    return with_prior(out)


def with_prior(
    frame: pd.DataFrame,
    constants: physics.PhysicalConstants = physics.DEFAULT_CONSTANTS,
    floors: dict[str, float] | None = None,
) -> pd.DataFrame:
    """Add (or replace) the analytical model's answer and the server concurrency it implies.

    ``prior_power_w`` / ``prior_itl_s``: the physics prior (the ITL target is the log-ratio of the
    measurement to it, see targets.py). ``cpu_floor_s``: the engine's host-side time per step,
    ``floors[engine]`` (s per layer, default ``physics.DEFAULT_ENGINE_FLOORS``) x layers; 0 for
    vLLM and unknown engines. ``prior_power_cpu_w``: the prior power when a step lasts at least
    that long, the GPU busy for ``prior_itl_s`` of it and idle for the rest (the power target is
    the log-ratio to it). Their logs are features. ``concurrency`` of a server row: the sequences
    decoding at once by Little's law at its request rate, so that a server and an offline batch
    with the same load look alike to the trees.
    """
    out = frame.copy()
    prior = physics.predict(out, constants)
    out["prior_power_w"] = prior["power_w"].to_numpy()
    out["prior_itl_s"] = prior["itl_s"].to_numpy()
    out["concurrency"] = concurrency(out, prior["concurrency"])
    floors = physics.DEFAULT_ENGINE_FLOORS if floors is None else floors
    per_layer = out["engine"].astype("object").map(floors).astype(float).fillna(0.0)
    out["cpu_floor_s"] = per_layer * out["llm_num_layers"].astype(float).fillna(0.0)
    step = np.maximum(out["prior_itl_s"], out["cpu_floor_s"])
    tdp = out["gpu_tdp_w"].astype(float)
    idle = constants.idle_fraction * tdp
    busy = out["prior_itl_s"] / step
    out["prior_power_cpu_w"] = idle + (out["prior_power_w"] - idle) * busy
    out["log_prior_power_tdp"] = np.log(out["prior_power_w"] / tdp.where(tdp > 0))
    out["log_prior_itl_s"] = np.log(out["prior_itl_s"])
    out["log_prior_power_cpu_tdp"] = np.log(out["prior_power_cpu_w"] / tdp.where(tdp > 0))
    out["log_prior_itl_cpu_s"] = np.log(step)
    return out


def concurrency(frame: pd.DataFrame, server_concurrency: pd.Series) -> pd.Series:
    """Sequences decoded together.

    Offline: the batch (the engine's cap when blank). Server: ``server_concurrency`` (the
    analytical model's Little's-law answer), at least 1.
    """
    engine_batch = np.minimum(ENGINE_MAX_BATCH, frame["max_concurrent_seqs"].clip(lower=1.0))
    offline = frame["batch_size"].astype(float).fillna(engine_batch)
    server = server_concurrency.clip(lower=1.0)
    return offline.where(frame["scenario"] == "offline", server).astype(float)


def feature_matrix(
    frame: pd.DataFrame, target: str | None = None, without: tuple[str, ...] = ()
) -> pd.DataFrame:
    """The model input: categoricals as strings ("missing" for blanks), numerics as floats.

    For a ``target`` other than ``itl``, ``ITL_ONLY_FEATURES`` hold their default on every row:
    how a data set reported its ITL says nothing about power, but would tell the trees which data
    set a row comes from. Columns named in ``without`` are left out.
    """
    columns: dict[str, pd.Series] = {}
    blank = pd.Series(np.nan, index=frame.index)
    for column in CATEGORICAL_FEATURES:
        values = frame[column] if column in frame.columns else blank
        if target not in (None, "itl") and column in ITL_ONLY_FEATURES:
            values = pd.Series(DEFAULT_ITL_STATISTIC, index=frame.index)
        columns[column] = values.astype("object").where(values.notna(), "missing").astype(str)
    for column in NUMERIC_FEATURES:
        values = frame[column] if column in frame.columns else blank
        columns[column] = pd.to_numeric(values, errors="coerce").astype(float)
    for column in without:
        columns.pop(column)
    return pd.DataFrame(columns, index=frame.index)


def build_features(measurements: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Join catalogue specs to rows with canonical names and add the physics features."""
    return physics_features(attach_specs(measurements, catalog))
