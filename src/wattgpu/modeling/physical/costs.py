"""What each operation of a step costs on the rows' GPUs, from their kernels' efficiencies.

The one place where work (``operations``) meets silicon: the GPU's sheet (bandwidth, the tensor
peak of the row's format, its link) at the share its kernels reach (``gpu_memory_efficiency``,
``gpu_compute_efficiency``, ``gpu_link_efficiency``, ``gpu_allreduce_latency_s``, measured or
from its specs: ``wattgpu.data.kernels``) times the fitted serving shares of the constants.
Costs are the coefficients of a step's time in the sequences ``M`` it decodes (``step``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from wattgpu.data.kernels import FALLBACK_EFFICIENCIES
from wattgpu.modeling.physical.columns import Table as Rows
from wattgpu.modeling.physical.columns import values
from wattgpu.modeling.physical.operations import FALLBACK_SPECS, StepWork, expected_experts

# What a GPU column falls back to where a row leaves it blank.
GPU_FALLBACKS = {
    **FALLBACK_SPECS,
    **{f"gpu_{name}": value for name, value in FALLBACK_EFFICIENCIES.items()},
}


def gpu_spec(rows: Rows, column: str) -> np.ndarray:
    """A positive GPU column of ``rows``, ``GPU_FALLBACKS`` where blank."""
    return values(rows, column, GPU_FALLBACKS[column], positive=True)


@dataclass(frozen=True)
class Silicon:
    """What the rows' GPUs achieve, all of a row's GPUs together.

    Attributes:
        bandwidth: bytes/s reading the KV cache and 16-bit weights.
        weight_bandwidth: bytes/s reading the weights through the format's kernel path.
        flops: FLOP/s of the format's tensor math.
        link: bytes/s one GPU's link carries one way, at the link's measured share.
        allreduce_latency: s, one all-reduce's fixed cost.

    """

    bandwidth: np.ndarray
    weight_bandwidth: np.ndarray
    flops: np.ndarray
    link: np.ndarray
    allreduce_latency: np.ndarray


def silicon(rows: Rows, memory_share: float, compute_share: float) -> Silicon:
    """The achieved rates of each row's GPUs; ``*_share``: the constants' serving shares."""
    gpus = np.maximum(values(rows, "num_gpus", 1.0), 1.0)
    fp16 = gpu_spec(rows, "gpu_fp16_tensor_tflops")
    # the tensor peak of the row's weight format, where the features gave it (``tensor_tflops``)
    peak = values(rows, "tensor_tflops", np.nan, positive=True)
    peak = np.where(np.isfinite(peak), peak, fp16)
    memory_eff = gpu_spec(rows, "gpu_memory_efficiency") * memory_share
    compute_eff = gpu_spec(rows, "gpu_compute_efficiency") * compute_share
    bandwidth = gpu_spec(rows, "gpu_memory_bandwidth_gb_s") * 1e9 * memory_eff * gpus
    return Silicon(
        bandwidth=bandwidth,
        # the weights go through the GEMMs of the format's kernel path, at that path's share
        weight_bandwidth=bandwidth * values(rows, "path_memory_factor", 1.0, positive=True),
        flops=peak * 1e12 * compute_eff * gpus,
        link=gpu_spec(rows, "link_bandwidth_gb_s") * 1e9 * gpu_spec(rows, "gpu_link_efficiency"),
        allreduce_latency=gpu_spec(rows, "gpu_allreduce_latency_s"),
    )


@dataclass(frozen=True)
class StepCosts:
    """The costs of a step's operations on the rows' GPUs, s.

    A step of ``M`` sequences takes ``max(mem_a(M) + mem_b M, comp_b M) + reduce_a + reduce_b
    M`` on the GPUs (``step``), with ``mem_a(M) = mem_dense + mem_expert x
    expected_experts(experts, per_token, M)``; a request's prefill takes ``prefill``.
    """

    mem_dense: np.ndarray  # s: weights every step reads (all of a dense LLM's)
    mem_expert: np.ndarray  # s: one routed expert's weights (0 for a dense LLM)
    experts: np.ndarray  # routed experts
    per_token: np.ndarray  # routed experts per token
    mem_b: np.ndarray  # s per sequence: its KV cache read once per step
    comp_b: np.ndarray  # s per sequence: its tensor-core work
    reduce_a: np.ndarray  # s: a step's all-reduces' fixed cost (0 on one GPU)
    reduce_b: np.ndarray  # s per sequence: the bytes its all-reduces move
    prefill: np.ndarray  # s: one request's prefill

    def mem_a(self, m: ArrayLike) -> np.ndarray:
        """Time to read the weights a step of ``m`` sequences touches, s."""
        hit = expected_experts(self.experts, self.per_token, m)
        return self.mem_dense + self.mem_expert * np.where(self.mem_expert > 0, hit, 0.0)


def step_costs(work: StepWork, gpu: Silicon) -> StepCosts:
    """The cost of each operation of ``work`` on ``gpu``."""
    comp_b = work.gemms.flops_per_seq / gpu.flops
    reduces = work.all_reduces
    return StepCosts(
        mem_dense=work.gemms.dense_bytes / gpu.weight_bandwidth,
        mem_expert=work.gemms.expert_bytes / gpu.weight_bandwidth,
        experts=work.gemms.experts,
        per_token=work.gemms.per_token,
        mem_b=work.attention.bytes_per_seq / gpu.bandwidth,
        comp_b=comp_b,
        reduce_a=reduces.count * gpu.allreduce_latency,
        reduce_b=reduces.count * reduces.link_bytes_per_seq / gpu.link,
        prefill=comp_b * work.prefill.tokens,
    )
