"""The operations' sizes: a row's weights, KV cache, kernel path and memory, from its specs.

The second stage of the pipeline (``wattgpu.modeling.physical.pipeline``): ``sized`` adds, to rows
made whole by ``workload``, what ``operations.describe_step`` sizes a step's work from and what
the trees read as physics features (see DESIGN.md):

``weight_bytes``: all weights in the row's format (``operations.weight_layout``: what stays
16-bit counted as 16-bit), which memory fit uses; ``dense_weight_bytes`` /
``expert_weight_bytes``: what every decode step reads and one routed expert;
``compute_latency_s``: 2 FLOP per active parameter at the tensor peak of the row's format
(``tensor_tflops``); ``kv_bytes_per_token``: K and V, 16-bit, every KV layer; the memory left
for the KV cache and the sequences it holds. The time to read the weights a decode step touches
(``bandwidth_latency_s``) waits for the concurrency, which the serving stage sets
(``prior_columns``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from wattgpu.arrays import pair_codes
from wattgpu.data.catalog import KERNEL_FEATURES
from wattgpu.data.formats import EXPERTS_ONLY_FORMATS, bytes_per_param, canonical_format
from wattgpu.data.kernel_paths import FORMAT_PATHS, NO_KERNEL, kernel_path
from wattgpu.data.kernels import LINK_INPUTS, link_bandwidth
from wattgpu.modeling.physical import operations
from wattgpu.modeling.physical.columns import Columns, count, filled, floats, get, map_unique
from wattgpu.modeling.physical.physics import ENGINE_MAX_BATCH

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


def sized(columns: Columns) -> Columns:
    """Rows with the sizes of their work and memory (see the module) added."""
    out = dict(columns)
    n = count(out)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        num_gpus = np.maximum(floats(out["num_gpus"]), 1.0)
        bpp = bytes_per_param(out["dtype"])
        out["bytes_per_param"] = bpp
        params_b = floats(out["llm_params_b"])
        params = params_b * 1e9
        active = filled(floats(out["llm_active_params_b"]), params_b) * 1e9
        out["tensor_tflops"] = tensor_tflops(out)
        out["link_bandwidth_gb_s"] = link_bandwidth(*(get(out, f"gpu_{c}", n) for c in LINK_INPUTS))
        out["kernel_path"], out["path_memory_factor"] = kernel_paths(out)
        flops = out["tensor_tflops"] * 1e12
        out["log_params"] = np.log10(params)
        out.update(_weight_layout(out, bpp))
        out["weight_bytes_per_gpu"] = out["weight_bytes"] / num_gpus
        out["compute_latency_s"] = 2.0 * active / (flops * num_gpus)
        _add_memory(out, num_gpus)
        # from the capability, so that a GPU described by its specs gets it too
        capability = floats(get(out, "gpu_compute_capability", n))
        fused = (capability >= KERNEL_FEATURES["fused_attention"]).astype(float)
        out["gpu_fused_attention"] = np.where(np.isnan(capability), np.nan, fused)
        boost = floats(get(out, "gpu_boost_clock_mhz", n))
        out["clock_ratio"] = boost / floats(get(out, "gpu_base_clock_mhz", n))
    return out


def _add_memory(out: Columns, num_gpus: np.ndarray) -> None:
    """The KV cache's bytes per token, the memory the weights leave and the sequences it holds."""
    tokens_per_seq = floats(out["input_tokens"]) + floats(out["output_tokens"])
    out["kv_bytes_per_token"] = kv_bytes_per_token(out, tokens_per_seq)
    total_memory = floats(out["gpu_memory_gb"]) * 1e9 * num_gpus
    out["free_memory_gb"] = (total_memory - out["weight_bytes"]) / 1e9
    out["fits_in_memory"] = (out["free_memory_gb"] > 0).astype(float)
    kv_per_seq = out["kv_bytes_per_token"] * tokens_per_seq
    kv_per_seq = np.where(kv_per_seq == 0.0, np.nan, kv_per_seq)
    free = np.maximum(out["free_memory_gb"], 0.0)  # NaN stays NaN, as in Series.clip
    max_seqs = (free * 1e9 * KV_CACHE_MEMORY_SHARE) / kv_per_seq
    max_seqs = np.where(np.isnan(max_seqs), ENGINE_MAX_BATCH * 16, max_seqs)
    out["max_concurrent_seqs"] = np.minimum(max_seqs, 1e5)


def kv_bytes_per_token(out: Mapping[str, np.ndarray], tokens_per_seq: np.ndarray) -> np.ndarray:
    """KV-cache bytes one token of a ``tokens_per_seq``-token sequence holds, 16-bit, all layers.

    Per layer: K and V of every KV head (``2 x kv_heads x head_dim x 2`` bytes), or under
    multi-head latent attention (MLA, DeepSeek) the compressed latent and the rotary key
    (``(kv_lora_rank + qk_rope_head_dim) x 2``). Full-attention layers (``num_kv_layers``) hold
    every token; sliding-window layers hold the last ``sliding_window`` tokens, a share
    ``min(1, window / tokens)`` of the sequence; linear-attention layers keep a fixed-size state
    and no cache per token.
    """
    n = count(out)
    layers = floats(out["llm_num_layers"])
    full = filled(floats(get(out, "llm_num_kv_layers", n)), layers)
    heads = 2.0 * floats(out["llm_num_kv_heads"]) * floats(out["llm_head_dim"]) * 2.0
    latent = (
        floats(get(out, "llm_kv_lora_rank", n)) + floats(get(out, "llm_qk_rope_head_dim", n))
    ) * 2.0
    per_layer = np.where(np.isfinite(latent), latent, heads)
    sliding = filled(floats(get(out, "llm_num_sliding_layers", n)), 0.0)
    window = floats(get(out, "llm_sliding_window", n))
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
    n = count(out)
    capability = floats(get(out, "gpu_compute_capability", n))
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
        factor[rows] = floats(get(out, column, n))[rows]
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
    n = count(out)
    fp16 = floats(out["gpu_fp16_tensor_tflops"])
    fp32acc = floats(get(out, "gpu_fp32acc_tensor_tflops", n))
    fp16 = np.where(np.isfinite(fp32acc) & (fp32acc > 0), fp32acc, fp16)
    formats = map_unique(out["dtype"], lambda d: TENSOR_FORMAT_COLUMN.get(str(d).lower()), object)
    faster = fp16.copy()
    for column in set(TENSOR_FORMAT_COLUMN.values()):
        rows = formats == column
        if rows.any():
            faster[rows] = floats(get(out, column, n))[rows]
    return np.where(np.isfinite(faster) & (faster > 0), faster, fp16)


def _weight_layout(out: Columns, bpp: np.ndarray) -> Columns:
    """``operations.weight_layout`` of each row's LLM in its format."""
    n = count(out)
    tie = get(out, "llm_tie_word_embeddings", n)
    tied = map_unique(tie, lambda t: str(t).lower() == "true", bool)
    vocab, hidden = floats(out["llm_vocab_size"]), floats(out["llm_hidden_size"])
    embedding = vocab * hidden * np.where(tied, 1.0, 2.0) / 1e9
    experts_only = map_unique(out["dtype"], lambda d: str(d).lower() in EXPERTS_ONLY_FORMATS, bool)
    return operations.weight_layout(
        floats(out["llm_params_b"]),
        floats(out["llm_active_params_b"]),
        floats(get(out, "llm_num_experts", n)),
        floats(get(out, "llm_experts_per_token", n)),
        embedding,
        bpp,
        experts_only,
    )
