"""The work of a serving step, described and not costed: what is read, computed and reduced.

Laid out as the field's own tools lay a step out (AIConfigurator's ``operations``): one small
description per kind of work, sized from the rows' LLM, format and workload alone. Nothing here
knows a GPU; ``costs`` turns the work into seconds on the rows' GPUs, and ``step`` adds a step
up. Columns as ``build_features`` makes them (``dense_weight_bytes``, ``kv_bytes_per_token``,
...); blanks fall back to ``FALLBACK_SPECS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

# ``Rows``, ``length`` and ``values`` are also read here by ``wattgpu.modeling.serving``
from wattgpu.modeling.physical.columns import Table as Rows
from wattgpu.modeling.physical.columns import length as length
from wattgpu.modeling.physical.columns import values

# Stand-ins for a spec a row leaves blank, so that any row gets a finite prediction (the GPU's
# kernel efficiencies: ``wattgpu.data.kernels.FALLBACK_EFFICIENCIES``, in ``costs``).
FALLBACK_SPECS = {
    "gpu_memory_bandwidth_gb_s": 1000.0,
    "gpu_fp16_tensor_tflops": 150.0,
    "gpu_tdp_w": 300.0,
    "llm_params_b": 7.0,
    "link_bandwidth_gb_s": 32.0,  # PCIe 4.0 x16, one way
}


def expected_experts(num_experts: ArrayLike, per_token: ArrayLike, tokens: ArrayLike) -> np.ndarray:
    """Expected distinct experts hit by ``tokens`` tokens that each pick ``per_token`` of them.

    Uniform routing: an expert escapes one token with probability ``1 - k / E``, all ``B`` with
    ``(1 - k / E) ** B``, so ``E * (1 - (1 - k / E) ** B)`` are hit (``k`` at ``B = 1``, nearly
    ``E`` at large ``B``).
    """
    e = np.asarray(num_experts, dtype=float)
    k = np.asarray(per_token, dtype=float)
    b = np.maximum(np.asarray(tokens, dtype=float), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return e * -np.expm1(b * np.log1p(-k / e))


def weight_layout(
    params_b: ArrayLike,
    active_params_b: ArrayLike,
    num_experts: ArrayLike,
    experts_per_token: ArrayLike,
    embedding_params_b: ArrayLike,
    bytes_per_param: ArrayLike,
    experts_only: ArrayLike,
) -> dict[str, np.ndarray]:
    """Bytes of an LLM's weights: all of them, those outside the routed experts, one expert.

    A routed expert (all its layers) holds ``(total - active) / (E - k)`` parameters: ``k`` of
    the ``E`` are active per token, the rest of the active parameters are read by every token.
    Below 16 bits the embeddings and the output head (``embedding_params_b``) stay 16-bit, and
    where ``experts_only`` (an LLM with experts) so does everything outside the routed experts;
    16 bits and above,
    every weight takes ``bytes_per_param``. Blank expert counts mean a dense LLM.

    Returns:
        ``weight_bytes`` (all weights: memory fit), ``dense_weight_bytes`` (read by every decode
        step) and ``expert_weight_bytes`` (one routed expert, all layers), in bytes.

    """
    params = np.asarray(params_b, dtype=float) * 1e9
    active = np.asarray(active_params_b, dtype=float) * 1e9
    active = np.where(np.isfinite(active), np.minimum(active, params), params)
    e = np.nan_to_num(np.asarray(num_experts, dtype=float))
    k = np.nan_to_num(np.asarray(experts_per_token, dtype=float))
    bpp = np.asarray(bytes_per_param, dtype=float)
    moe = (e > k) & (k >= 1) & (active < params)
    with np.errstate(divide="ignore", invalid="ignore"):
        expert = np.where(moe, (params - active) / np.where(moe, e - k, 1.0), 0.0)
    routed = np.where(moe, e, 0.0) * expert
    outside = params - routed
    embedding = np.minimum(np.nan_to_num(np.asarray(embedding_params_b, float)) * 1e9, outside)
    sixteen = np.where(np.asarray(experts_only, dtype=bool) & moe, outside, embedding)
    sixteen = np.where(bpp < 2.0, sixteen, 0.0)
    # a step reads the weights outside the routed experts (all of a dense LLM's); an LLM that
    # gives active < total without its experts: its active ones, as before experts were known
    read = np.where(moe, outside, active)
    read_sixteen = np.minimum(sixteen, read)
    return {
        "weight_bytes": 2.0 * sixteen + bpp * (params - sixteen),
        "dense_weight_bytes": 2.0 * read_sixteen + bpp * (read - read_sixteen),
        "expert_weight_bytes": bpp * expert,
    }


@dataclass(frozen=True)
class WeightGemms:
    """The weight GEMMs of a decode step: the weights read, and the FLOPs per sequence.

    Attributes:
        dense_bytes: weights every step reads (all of a dense LLM's), bytes.
        expert_bytes: one routed expert's weights, all layers (0 for a dense LLM), bytes.
        experts: routed experts; ``per_token``: routed experts per token.
        flops_per_seq: 2 FLOPs per active parameter, per sequence.

    """

    dense_bytes: np.ndarray
    expert_bytes: np.ndarray
    experts: np.ndarray
    per_token: np.ndarray
    flops_per_seq: np.ndarray


@dataclass(frozen=True)
class KvAttention:
    """Attention over the KV cache.

    Attributes:
        bytes_per_seq: the KV cache one sequence reads per decode step, bytes (at its mean
            context: the closed-form prior's step).
        bytes_per_token: the KV cache bytes a decoded token reads per token of its context
            (the serving loop's step, ``modeling.serving.step``).
        flops_per_pair: a prefilled token's attention FLOPs per earlier token it attends to
            (``QK^T`` and ``PV``: 4 x heads x head_dim per layer, every attention layer).

    """

    bytes_per_seq: np.ndarray
    bytes_per_token: np.ndarray
    flops_per_pair: np.ndarray


@dataclass(frozen=True)
class AllReduces:
    """Tensor parallelism's all-reduces of a step.

    How many, and the bytes a ring moves per sequence over each GPU's link (``2 (N - 1) / N``
    per byte reduced).
    """

    count: np.ndarray
    link_bytes_per_seq: np.ndarray


@dataclass(frozen=True)
class PrefillChunk:
    """One request's prefill, in one chunk.

    Its prompt's tokens, each the FLOPs of a sequence's decode step
    (``WeightGemms.flops_per_seq``).
    """

    tokens: np.ndarray


@dataclass(frozen=True)
class StepWork:
    """Everything a decode step of the rows does, and a request's prefill."""

    gemms: WeightGemms
    attention: KvAttention
    all_reduces: AllReduces
    prefill: PrefillChunk


def describe_step(rows: Rows) -> StepWork:
    """The work of a decode step (and of one prefill) of each row, from LLM and workload."""
    gpus = np.maximum(values(rows, "num_gpus", 1.0), 1.0)
    params = values(rows, "llm_params_b", FALLBACK_SPECS["llm_params_b"], positive=True) * 1e9
    active = values(rows, "llm_active_params_b", np.nan, positive=True) * 1e9
    active = np.where(np.isfinite(active), active, params)
    dense = values(rows, "dense_weight_bytes", np.nan, positive=True)
    dense = np.where(
        np.isfinite(dense), dense, active * values(rows, "bytes_per_param", 2.0, positive=True)
    )
    tokens_in = values(rows, "input_tokens", 512.0)
    tokens_out = np.maximum(values(rows, "output_tokens", 256.0), 1.0)
    context = tokens_in + tokens_out / 2.0  # the mean over a request's decode
    flops = 2.0 * active
    # two all-reduces per layer (after attention and after the MLP) of hidden x 2 bytes each
    layers = values(rows, "llm_num_layers", 32.0, positive=True)
    hidden = values(rows, "llm_hidden_size", 4096.0, positive=True)
    heads = values(rows, "llm_num_attention_heads", np.nan, positive=True)
    head_dim = values(rows, "llm_head_dim", np.nan, positive=True)
    width = np.where(np.isfinite(heads * head_dim), heads * head_dim, hidden)
    attention_layers = np.minimum(values(rows, "llm_num_kv_layers", np.nan, positive=True), layers)
    attention_layers = np.where(np.isfinite(attention_layers), attention_layers, layers)
    kv_per_token = values(rows, "kv_bytes_per_token", 0.0)
    ring = 2.0 * (gpus - 1.0) / gpus
    return StepWork(
        gemms=WeightGemms(
            dense_bytes=dense,
            expert_bytes=values(rows, "expert_weight_bytes", 0.0),
            experts=values(rows, "llm_num_experts", 1.0, positive=True),
            per_token=values(rows, "llm_experts_per_token", 1.0, positive=True),
            flops_per_seq=flops,
        ),
        attention=KvAttention(
            bytes_per_seq=context * kv_per_token,
            bytes_per_token=kv_per_token,
            flops_per_pair=4.0 * width * attention_layers,
        ),
        all_reduces=AllReduces(np.where(gpus > 1.0, 2.0 * layers, 0.0), hidden * 2.0 * ring),
        prefill=PrefillChunk(tokens_in),
    )
