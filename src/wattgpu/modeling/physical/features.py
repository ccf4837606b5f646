"""Physics features of an (LLM, GPU, workload) triple — pure functions of DataFrames.

The same functions build the training matrix and the served model's input, so training and
serving cannot drift apart. One function per concept, arrays inside and frames at the edges:
each takes a DataFrame or columns held as numpy arrays (``Columns``), works on arrays, and
answers in the kind it was given (a frame on the given index, or columns). The served model
passes columns from end to end: pandas' per-column overhead (alignment, copies, dtype checks)
cost about 30 ms for a one-row query, twenty times the arithmetic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from wattgpu.arrays import blanks, pair_codes, unique_codes
from wattgpu.data.catalog import KERNEL_FEATURES, Catalog
from wattgpu.data.engines import DEFAULT_ENGINE, engine_years
from wattgpu.data.formats import BYTES_PER_PARAM, EXPERTS_ONLY_FORMATS, canonical_format
from wattgpu.data.kernel_paths import FORMAT_PATHS, NO_KERNEL, kernel_path
from wattgpu.data.kernels import LINK_INPUTS, SPEC_MODEL_INPUTS, link_bandwidth
from wattgpu.modeling.physical import operations, physics
from wattgpu.modeling.physical.physics import ENGINE_MAX_BATCH

# What a query may leave out, and what it then means.
DEFAULT_INPUT_TOKENS = 512.0
DEFAULT_OUTPUT_TOKENS = 256.0
DEFAULT_NUM_GPUS = 1.0
DEFAULT_DTYPE = "bfloat16"
# Which per-request ITL statistic a row's ``itl_s`` is (``itl_statistic`` reads the free-text
# ``itl_kind`` of a measurement file): the median gap between two tokens, the mean time per
# output token after the first, or a request's (or batch's) latency / output tokens, which
# includes the prefill. A query asks for the median unless it says otherwise: it is what the
# most recent engine runs report, and what a user sees for a typical token.
ITL_STATISTICS = ("median", "mean", "with_prefill")
DEFAULT_ITL_STATISTIC = "median"
# The statistics that count prefills in the time per token (see ``median_itl``).
ITL_WITH_PREFILLS = ("mean", "with_prefill")
# The GPU's tensor throughput (a ``gpu_*`` catalogue column) that a weight format computes at
# when the GPU has it (``tensor_tflops``); any other format computes in 16 bits.
TENSOR_FORMAT_COLUMN = {
    "fp8": "gpu_fp8_tensor_tflops",
    "float8": "gpu_fp8_tensor_tflops",
    "fp8_block": "gpu_fp8_tensor_tflops",
    "int8": "gpu_int8_tensor_tops",
    "nvfp4": "gpu_fp4_tensor_tflops",
    "mxfp4": "gpu_fp4_tensor_tflops",
}
# Share of the memory left after the weights that an engine gives to the KV cache.
KV_CACHE_MEMORY_SHARE = 0.9

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

# Columns of a frame as arrays: what the functions below pass to each other.
Columns = dict[str, np.ndarray]
# Rows as a caller holds them: a frame (training, tests) or columns (the served model).
Rows = TypeVar("Rows", pd.DataFrame, Columns)
# One column as a caller holds it: a Series (of a frame) or an array.
Column = TypeVar("Column", pd.Series, np.ndarray)

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


def columns_of(frame: pd.DataFrame | Mapping[str, Any]) -> Columns:
    """A frame's (or a mapping's) columns as numpy arrays (no copy where pandas allows).

    Columns already held as arrays are taken as they are: every feature step starts here, and a
    served query's ~100 columns are arrays from end to end.
    """
    if isinstance(frame, pd.DataFrame):
        return {str(c): np.asarray(frame[c]) for c in frame.columns}
    return {str(c): v if type(v) is np.ndarray else np.asarray(v) for c, v in frame.items()}


def _as_given(columns: Columns, given: Any) -> Any:
    """Frame in, frame out (on the given index); columns in, columns out.

    Text columns stay NumPy object arrays: pandas would make them Arrow strings, and every later
    ``iloc`` and ``to_numpy`` of a fold would convert them back, string by string (a third of a
    job's time went to such round trips).
    """
    if not isinstance(given, pd.DataFrame):
        return columns
    index = given.index
    return pd.DataFrame(
        {
            name: pd.Series(values, index=index, dtype=object, copy=False)
            if values.dtype == object
            else values
            for name, values in columns.items()
        },
        index=index,
    )


def _column_as_given(values: np.ndarray, given: Any) -> Any:
    """A Series on the given frame's (or Series') index, or the array for columns."""
    if isinstance(given, pd.DataFrame | pd.Series):
        return pd.Series(values, index=given.index)
    return values


def _floats(values: Any) -> np.ndarray:
    """A column as floats (blank -> NaN), like ``Series.astype(float)``."""
    array = np.asarray(values)
    return array if array.dtype == np.float64 else array.astype(float)


def _filled(values: np.ndarray, default: Any) -> np.ndarray:
    """``values`` with blanks (None, NaN) replaced by ``default`` (an array or a scalar)."""
    blank = blanks(values)
    if isinstance(default, np.ndarray) and default.dtype == values.dtype and blank.all():
        return default  # what np.where would copy (a query's absent specs: the catalogue's)
    return np.where(blank, default, values)


def _map_unique(values: np.ndarray, func: Callable[[Any], Any], dtype: Any) -> np.ndarray:
    """``func`` applied once per distinct value, then spread back over the rows."""
    codes, uniques = unique_codes(values)
    mapped = np.empty(len(uniques), dtype=dtype)
    mapped[:] = [func(u) for u in uniques]
    return mapped[codes]


def _get(columns: Mapping[str, np.ndarray], name: str, n: int) -> np.ndarray:
    """A column, or NaNs when the frame has none."""
    return columns[name] if name in columns else np.full(n, np.nan)


def _length(columns: Mapping[str, np.ndarray]) -> int:
    return len(next(iter(columns.values()))) if columns else 0


def attach_specs(rows: Rows, catalog: Catalog) -> Rows:
    """Add the catalogue's GPU (``gpu_*``) and LLM (``llm_*``) columns to rows with canonical names.

    Spec columns already present on a row (a query describing an uncatalogued GPU or LLM) win
    over the catalogue's; rows whose names are not in the catalogue keep only what they carry.
    """
    return _as_given(_specs_attached(columns_of(rows), catalog), rows)


def _specs_attached(columns: Columns, catalog: Catalog) -> Columns:
    out = dict(columns)
    for key, kind in (("gpu", "gpu"), ("model", "llm")):
        for column, looked_up in catalog.spec_arrays(kind, columns[key]).items():
            given = out.get(column)
            out[column] = looked_up if given is None else _filled(given, looked_up)
    unlisted = blanks(out["gpu_memory_efficiency"]) if "gpu_memory_efficiency" in out else None
    if unlisted is not None and unlisted.any():
        # a GPU described by its specs: the efficiencies of the profiled GPUs like it
        modelled = catalog.modelled_efficiencies(
            {c: out.get(f"gpu_{c}", np.full(len(unlisted), None)) for c in SPEC_MODEL_INPUTS}
        )
        for column, values in modelled.items():
            out[column] = np.where(unlisted, values, out[column])
    return out


def fill_workload_defaults(rows: Rows) -> Rows:
    """Fill the workload fields a query may omit with the documented defaults."""
    return _as_given(_workload_filled(columns_of(rows)), rows)


def _workload_filled(columns: Columns) -> Columns:
    out = dict(columns)
    n = _length(columns)
    for column, default in (
        ("input_tokens", DEFAULT_INPUT_TOKENS),
        ("output_tokens", DEFAULT_OUTPUT_TOKENS),
        ("engine", DEFAULT_ENGINE),
        ("num_gpus", DEFAULT_NUM_GPUS),
        ("dtype", DEFAULT_DTYPE),
    ):
        out[column] = (
            _filled(columns[column], default)
            if column in columns
            else np.full(n, default, dtype=object if isinstance(default, str) else float)
        )
    for column in ("request_rate_rps", "batch_size"):
        out[column] = _floats(_get(columns, column, n))
    out["users"] = _users(columns, n)
    # A closed loop's rate is what its users achieved: an outcome of the latency, which no query
    # can send (log(users / rate) is the request time). Its load is the users.
    out["request_rate_rps"] = np.where(np.isnan(out["users"]), out["request_rate_rps"], np.nan)
    out["engine_year"] = _engine_year(columns, n)
    if "dtype" not in columns or blanks(columns["dtype"]).any():
        # a row that names no format: the checkpoint's own where it ships below 16 bits
        shipped = _get(columns, "llm_weight_format", n)
        quantized = bytes_per_param(shipped) < 2.0
        given = columns["dtype"] if "dtype" in columns else np.full(n, None, dtype=object)
        out["dtype"] = np.where(blanks(given) & quantized, shipped, out["dtype"])
    return out


def _users(columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """A closed-loop server's concurrent users: the stated ``concurrency`` of a server row.

    Kept as ``users`` because ``with_prior`` replaces ``concurrency`` by the sequences decoding
    (the stated users capped by the KV cache, or Little's law at a rate); a frame that already
    has ``users`` (features being refitted) keeps them.
    """
    if "users" in columns:
        return _floats(columns["users"])
    stated = _floats(_get(columns, "concurrency", n))
    return np.where(np.asarray(_get(columns, "scenario", n)) == "server", stated, np.nan)


def engine_year(rows: pd.DataFrame | Columns) -> Any:
    """The release year of the serving software of each row (``wattgpu.data.engines``).

    The row's own ``engine_year``, else the year of its ``engine_version``, else today's release
    of its engine (a query that states neither means the newest). Never read from a file's
    dates: those would tell the trees which data set a row comes from. A Series for a frame, an
    array for columns.
    """
    columns = columns_of(rows)
    return _column_as_given(_engine_year(columns, _length(columns)), rows)


def _engine_year(columns: Columns, n: int) -> np.ndarray:
    engines = _filled(np.asarray(_get(columns, "engine", n), dtype=object), DEFAULT_ENGINE)
    stated = _get(columns, "engine_year", n)
    if stated.dtype != np.float64:
        stated = pd.to_numeric(stated, errors="coerce").astype(float)
    versions = np.asarray(_get(columns, "engine_version", n), dtype=object)
    return engine_years(engines, versions, stated)


def itl_statistic(kind: Column) -> Column:
    """The ITL statistic (``ITL_STATISTICS``) a free-text ``itl_kind`` names.

    A name of the statistic itself passes through; text that mentions the prefill, or a latency
    divided by a length, is ``with_prefill``; "median" is ``median``; "mean"/"TPOT" is ``mean``;
    anything else (and blank) is ``DEFAULT_ITL_STATISTIC``.
    """
    return _column_as_given(_map_unique(np.asarray(kind), _one_itl_statistic, object), kind)


def _one_itl_statistic(kind: Any) -> str:
    text = "" if pd.isna(kind) else str(kind).lower()
    if text in ITL_STATISTICS:
        return text
    if "prefill" in text or re.search(r"latency\s*/", text):
        return "with_prefill"
    if "median" in text:
        return "median"
    if re.search("mean|tpot", text):
        return "mean"
    return DEFAULT_ITL_STATISTIC


def bytes_per_param(dtype: Column) -> Column:
    """Bytes per weight for a format name (``wattgpu.data.formats``); blank means 16-bit.

    Queries and imported rows are checked against the known formats before they get here.
    """
    values = _map_unique(
        np.asarray(dtype), lambda d: BYTES_PER_PARAM.get(str(d).lower(), 2.0), float
    )
    return _column_as_given(values, dtype)


def physics_features(rows: Rows) -> Rows:
    """Add the derived physics columns (see DESIGN.md) to rows that carry specs and workload.

    ``weight_bytes``: all weights in the row's format (``operations.weight_layout``: what stays
    16-bit counted as 16-bit), which memory fit uses; ``dense_weight_bytes`` /
    ``expert_weight_bytes``: what every decode step reads and one routed expert;
    ``bandwidth_latency_s``: time to read the weights a decode step of the row's concurrency
    touches at full memory bandwidth of all GPUs (``with_prior``); ``compute_latency_s``: 2 FLOP
    per active parameter at the tensor peak of the row's format (``tensor_tflops``);
    ``kv_bytes_per_token``: K and V, 16-bit, every KV layer.
    """
    return _as_given(_physics(columns_of(rows)), rows)


def _physics(columns: Columns) -> Columns:
    out = _workload_filled(columns)
    n = _length(out)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        num_gpus = np.maximum(_floats(out["num_gpus"]), 1.0)
        bpp = bytes_per_param(out["dtype"])
        out["bytes_per_param"] = bpp
        params_b = _floats(out["llm_params_b"])
        params = params_b * 1e9
        active = _filled(_floats(out["llm_active_params_b"]), params_b) * 1e9
        out["tensor_tflops"] = tensor_tflops(out)
        out["link_bandwidth_gb_s"] = link_bandwidth(
            *(_get(out, f"gpu_{c}", n) for c in LINK_INPUTS)
        )
        out["kernel_path"], out["path_memory_factor"] = kernel_paths(out)
        flops = out["tensor_tflops"] * 1e12
        out["log_params"] = np.log10(params)
        out.update(_weight_layout(out, bpp))
        out["weight_bytes_per_gpu"] = out["weight_bytes"] / num_gpus
        out["compute_latency_s"] = 2.0 * active / (flops * num_gpus)
        tokens_per_seq = _floats(out["input_tokens"]) + _floats(out["output_tokens"])
        out["kv_bytes_per_token"] = kv_bytes_per_token(out, tokens_per_seq)
        total_memory = _floats(out["gpu_memory_gb"]) * 1e9 * num_gpus
        out["free_memory_gb"] = (total_memory - out["weight_bytes"]) / 1e9
        out["fits_in_memory"] = (out["free_memory_gb"] > 0).astype(float)
        kv_per_seq = out["kv_bytes_per_token"] * tokens_per_seq
        kv_per_seq = np.where(kv_per_seq == 0.0, np.nan, kv_per_seq)
        free = np.maximum(out["free_memory_gb"], 0.0)  # NaN stays NaN, as in Series.clip
        max_seqs = (free * 1e9 * KV_CACHE_MEMORY_SHARE) / kv_per_seq
        max_seqs = np.where(np.isnan(max_seqs), ENGINE_MAX_BATCH * 16, max_seqs)
        out["max_concurrent_seqs"] = np.minimum(max_seqs, 1e5)
        # from the capability, so that a GPU described by its specs gets it too
        capability = _floats(_get(out, "gpu_compute_capability", n))
        fused = (capability >= KERNEL_FEATURES["fused_attention"]).astype(float)
        out["gpu_fused_attention"] = np.where(np.isnan(capability), np.nan, fused)
        boost = _floats(_get(out, "gpu_boost_clock_mhz", n))
        out["clock_ratio"] = boost / _floats(_get(out, "gpu_base_clock_mhz", n))
    kind = out.get("itl_kind")
    out["itl_statistic"] = (
        np.full(n, DEFAULT_ITL_STATISTIC, dtype=object)
        if kind is None
        else _map_unique(kind, _one_itl_statistic, object)
    )
    _add_prior(out)
    return out


def kv_bytes_per_token(out: Mapping[str, np.ndarray], tokens_per_seq: np.ndarray) -> np.ndarray:
    """KV-cache bytes one token of a ``tokens_per_seq``-token sequence holds, 16-bit, all layers.

    Per layer: K and V of every KV head (``2 x kv_heads x head_dim x 2`` bytes), or under
    multi-head latent attention (MLA, DeepSeek) the compressed latent and the rotary key
    (``(kv_lora_rank + qk_rope_head_dim) x 2``). Full-attention layers (``num_kv_layers``) hold
    every token; sliding-window layers hold the last ``sliding_window`` tokens, a share
    ``min(1, window / tokens)`` of the sequence; linear-attention layers keep a fixed-size state
    and no cache per token.
    """
    n = _length(out)
    layers = _floats(out["llm_num_layers"])
    full = _filled(_floats(_get(out, "llm_num_kv_layers", n)), layers)
    heads = 2.0 * _floats(out["llm_num_kv_heads"]) * _floats(out["llm_head_dim"]) * 2.0
    latent = (
        _floats(_get(out, "llm_kv_lora_rank", n)) + _floats(_get(out, "llm_qk_rope_head_dim", n))
    ) * 2.0
    per_layer = np.where(np.isfinite(latent), latent, heads)
    sliding = _filled(_floats(_get(out, "llm_num_sliding_layers", n)), 0.0)
    window = _floats(_get(out, "llm_sliding_window", n))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(np.isfinite(window), np.minimum(1.0, window / tokens_per_seq), 1.0)
    return per_layer * (full + sliding * share)


def kernel_paths(out: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The kernel path of each row's weight format on its GPU, and the factor it costs.

    ``native``, ``weight-only`` or ``none`` (``wattgpu.data.kernel_paths``: no engine runs the
    format on the GPU; queries refuse it, the recommendation leaves the GPU out); the factor is
    the GPU's ``gpu_<format>_gemm_factor`` of the weight-only kernel format the path is costed
    with (1: a native path, costed as 16-bit GEMMs; see ``wattgpu.data.kernel_paths``).
    """
    n = _length(out)
    capability = _floats(_get(out, "gpu_compute_capability", n))
    codes, pairs = pair_codes(np.asarray(out["dtype"], dtype=object), capability)
    paths = np.empty(len(pairs), dtype=object)
    columns = np.empty(len(pairs), dtype=object)
    for i, (dtype, cap) in enumerate(pairs):
        path = kernel_path(dtype, float(cap)) or NO_KERNEL
        known = FORMAT_PATHS.get(canonical_format(dtype))
        runs = known is not None and path != NO_KERNEL
        kernel = known.weight_only_kernel if runs and path == "weight-only" else None
        paths[i], columns[i] = path, None if kernel is None else f"gpu_{kernel}_gemm_factor"
    factor = np.ones(n)
    for column in set(columns) - {None}:
        rows = columns[codes] == column
        factor[rows] = _floats(_get(out, column, n))[rows]
    factor = np.where(np.isfinite(factor) & (factor > 0), factor, 1.0)
    return paths[codes], factor


def tensor_tflops(out: Mapping[str, np.ndarray]) -> np.ndarray:
    """The dense tensor TFLOP/s each row's weight format computes at on its GPU.

    An FP8 checkpoint runs FP8 matrix products on a GPU with FP8 tensor cores, an FP4 one (NVFP4,
    MXFP4) FP4 products on a GPU with FP4 tensor cores, INT8 INT8 ones; on a GPU without them,
    and for weight-only formats (INT4 AWQ/GPTQ), the weights are widened and multiplied in 16 bits,
    with FP32 accumulation (``gpu_fp32acc_tensor_tflops``: half the FP16-accumulate figure on
    GeForce cards; blank: the FP16 figure).
    """
    n = _length(out)
    fp16 = _floats(out["gpu_fp16_tensor_tflops"])
    fp32acc = _floats(_get(out, "gpu_fp32acc_tensor_tflops", n))
    fp16 = np.where(np.isfinite(fp32acc) & (fp32acc > 0), fp32acc, fp16)
    formats = _map_unique(out["dtype"], lambda d: TENSOR_FORMAT_COLUMN.get(str(d).lower()), object)
    faster = fp16.copy()
    for column in set(TENSOR_FORMAT_COLUMN.values()):
        rows = formats == column
        if rows.any():
            faster[rows] = _floats(_get(out, column, n))[rows]
    return np.where(np.isfinite(faster) & (faster > 0), faster, fp16)


def _weight_layout(out: Columns, bpp: np.ndarray) -> Columns:
    """``operations.weight_layout`` of each row's LLM in its format."""
    n = _length(out)
    tie = _get(out, "llm_tie_word_embeddings", n)
    tied = _map_unique(tie, lambda t: str(t).lower() == "true", bool)
    vocab, hidden = _floats(out["llm_vocab_size"]), _floats(out["llm_hidden_size"])
    embedding = vocab * hidden * np.where(tied, 1.0, 2.0) / 1e9
    experts_only = _map_unique(out["dtype"], lambda d: str(d).lower() in EXPERTS_ONLY_FORMATS, bool)
    return operations.weight_layout(
        _floats(out["llm_params_b"]),
        _floats(out["llm_active_params_b"]),
        _floats(_get(out, "llm_num_experts", n)),
        _floats(_get(out, "llm_experts_per_token", n)),
        embedding,
        bpp,
        experts_only,
    )


def _bandwidth_latency(out: Columns) -> np.ndarray:
    """Time to read the weights a decode step of the row's ``concurrency`` touches, s."""
    n = _length(out)
    hit = operations.expected_experts(
        _get(out, "llm_num_experts", n), _get(out, "llm_experts_per_token", n), out["concurrency"]
    )
    expert = _floats(out.get("expert_weight_bytes", np.zeros(n)))
    read = _floats(out["dense_weight_bytes"]) + np.where(expert > 0, expert * hit, 0.0)
    gpus = np.maximum(_floats(out["num_gpus"]), 1.0)
    return read / (_floats(out["gpu_memory_bandwidth_gb_s"]) * 1e9 * gpus)


def with_prior(
    rows: Rows,
    constants: physics.PhysicalConstants = physics.DEFAULT_CONSTANTS,
    floors: dict[str, float] | None = None,
    effects: physics.EngineEffects | None = None,
    ttft: physics.TtftTerms | None = None,
) -> Rows:
    """Add (or replace) the analytical model's answer and the server concurrency it implies.

    ``prior_power_w`` / ``prior_itl_s`` / ``prior_ttft_s``: the physics prior (the ITL and TTFT
    targets are the log-ratios of the measurements to it, see targets.py). ``cpu_floor_s``: the
    engine's host-side time per step,
    ``floors[engine]`` (s per layer, default ``physics.DEFAULT_ENGINE_FLOORS``) x layers; 0 for
    vLLM and unknown engines. ``prior_power_cpu_w``: the prior power when a step lasts at least
    that long, the GPU busy for ``prior_itl_s`` of it and idle for the rest (the power target is
    the log-ratio to it); their logs are features. ``effects`` (default
    ``physics.DEFAULT_ENGINE_EFFECTS``) scale the prior ITL by the row's engine and its release
    year, within the bounds of ``physics``; ``ttft`` (default ``physics.DEFAULT_TTFT_TERMS``)
    adds a request's fixed cost and scales the analytical TTFT. ``concurrency`` of a server
    row: the sequences decoding at once, by Little's law at its request rate or, for a closed
    loop, its ``users`` (capped by the KV cache), so that a server and an offline batch with the
    same load look alike to the trees.
    """
    out = columns_of(rows)
    _add_prior(out, constants, floors, effects, ttft)
    return _as_given(out, rows)


def _add_prior(
    out: Columns,
    constants: physics.PhysicalConstants = physics.DEFAULT_CONSTANTS,
    floors: dict[str, float] | None = None,
    effects: physics.EngineEffects | None = None,
    ttft: physics.TtftTerms | None = None,
) -> None:
    """``with_prior``'s columns, added to ``out`` in place."""
    prior = physics.serving_model_columns(out, constants)
    effects = physics.DEFAULT_ENGINE_EFFECTS if effects is None else effects
    years = out["engine_year"] if "engine_year" in out else _engine_year(out, _length(out))
    out["prior_power_w"] = prior["power_w"]
    # the release year scales the answer's base, never a feature, so that the trees cannot
    # amplify it: a year moves an answer by at most ``physics.MAX_YEAR_EFFECT``
    engine_itl = prior["itl_s"] * np.exp(effects.engine_log_factor(out["engine"]))
    out["prior_itl_s"] = engine_itl * np.exp(effects.year_log_factor(years))
    out["prior_prefill_share"] = prior["prefill_share"]
    if "itl_s" in out:
        out["itl_median_s"] = _median_itl(out)
    ttft = physics.DEFAULT_TTFT_TERMS if ttft is None else ttft
    out["prior_ttft_s"] = ttft.overhead_s + ttft.prefill_scale * _prior_ttft(out, prior["ttft_s"])
    out["concurrency"] = _concurrency(out, prior["concurrency"])
    if "dense_weight_bytes" in out:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["bandwidth_latency_s"] = _bandwidth_latency(out)
    floors = physics.DEFAULT_ENGINE_FLOORS if floors is None else floors
    per_layer = _map_unique(out["engine"], lambda e: floors.get(e, np.nan), float)
    per_layer = np.where(np.isnan(per_layer), 0.0, per_layer)
    layers = _floats(out["llm_num_layers"])
    out["cpu_floor_s"] = per_layer * np.where(np.isnan(layers), 0.0, layers)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.maximum(engine_itl, out["cpu_floor_s"])
        tdp = _floats(out["gpu_tdp_w"])
        idle = constants.idle_fraction * tdp
        busy = engine_itl / step
        out["prior_power_cpu_w"] = idle + (out["prior_power_w"] - idle) * busy
        positive_tdp = np.where(tdp > 0, tdp, np.nan)
        out["log_prior_power_tdp"] = np.log(out["prior_power_w"] / positive_tdp)
        out["log_prior_itl_s"] = np.log(engine_itl)
        out["log_prior_power_cpu_tdp"] = np.log(out["prior_power_cpu_w"] / positive_tdp)
        out["log_prior_itl_cpu_s"] = np.log(step)


def median_itl(rows: pd.DataFrame | Columns) -> Any:
    """Each row's measured ITL as the served statistic: the median gap between two tokens, s.

    A row that measured the median passes through. A row that measured a time per token that
    counts prefills (``ITL_WITH_PREFILLS``: an offline batch's latency / output tokens, its own
    prefill included, or the mean time per output token, which counts the prefills of the
    requests that join the batch while it decodes) is scaled by ``1 - prior_prefill_share``:
    the analytical model's share of that time spent in prefills (``M * t_pre / output_tokens``
    of ``t(M) + M * t_pre / output_tokens``, ``physics``). The gaps between the prefills are
    plain decode steps, so what is left is the typical gap: the median. Needs the prior columns
    (``with_prior``) and ``itl_statistic``. A Series for a frame, an array for columns.
    """
    return _column_as_given(_median_itl(columns_of(rows)), rows)


def _median_itl(columns: Columns) -> np.ndarray:
    n = _length(columns)
    itl = _floats(columns["itl_s"])
    statistic = _get(columns, "itl_statistic", n)
    with_prefills = np.isin(np.asarray(statistic, dtype=object), ITL_WITH_PREFILLS)
    share = _floats(columns["prior_prefill_share"])
    return np.where(with_prefills, itl * (1.0 - share), itl)


def _prior_ttft(columns: Mapping[str, np.ndarray], server_ttft: np.ndarray) -> np.ndarray:
    """The TTFT prior, s.

    A server's comes from the analytical model: its prefill at the FP16 peak, stretched by the
    share of time other prefills hold the GPU, plus a step (a closed loop adds the wait for a
    slot). Offline: the request's own prefill, 2 x active params x input tokens / FP16 FLOP/s,
    plus one decode step (an offline batch's queueing depends on how the engine admits its
    prompts, which no row describes).
    """
    prefill = columns["compute_latency_s"] * _floats(columns["input_tokens"])
    own = prefill + columns["prior_itl_s"]
    return np.where(np.isfinite(server_ttft), server_ttft, own)


def concurrency(rows: pd.DataFrame | Columns, server_concurrency: Any) -> Any:
    """Sequences decoded together.

    Offline: the batch (the engine's cap when blank). Server: ``server_concurrency`` (the
    analytical model's Little's-law answer), at least 1. A Series for a frame, an array for
    columns.
    """
    return _column_as_given(_concurrency(columns_of(rows), server_concurrency), rows)


def _concurrency(columns: Columns, server_concurrency: Any) -> np.ndarray:
    engine_batch = np.minimum(ENGINE_MAX_BATCH, np.maximum(columns["max_concurrent_seqs"], 1.0))
    offline = _filled(_floats(columns["batch_size"]), engine_batch)
    server = np.maximum(np.asarray(server_concurrency, dtype=float), 1.0)
    return np.where(columns["scenario"] == "offline", offline, server).astype(float)


def feature_matrix(rows: Rows, target: str | None = None, without: tuple[str, ...] = ()) -> Rows:
    """The model input: categoricals as strings ("missing" for blanks), numerics as floats.

    The same columns for every ``target`` (kept for the callers that name one). Columns named in
    ``without`` are left out; the rest come in the order of ``FEATURE_COLUMNS``.
    """
    columns = columns_of(rows)
    n = _length(columns)
    out: Columns = {}
    for column in CATEGORICAL_FEATURES:
        if column not in without:
            out[column] = _map_unique(_get(columns, column, n), _category, object)
    for column in NUMERIC_FEATURES:
        if column not in without:
            values = _get(columns, column, n)
            out[column] = (
                values
                if values.dtype == np.float64
                else pd.to_numeric(values, errors="coerce").astype(float)
            )
    return _as_given(out, rows)


def _category(value: Any) -> str:
    return "missing" if pd.isna(value) else str(value)


def build_features(rows: Rows, catalog: Catalog) -> Rows:
    """Join catalogue specs to rows with canonical names and add the physics features."""
    return _as_given(_physics(_specs_attached(columns_of(rows), catalog)), rows)
