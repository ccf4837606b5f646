"""One engine step of the serving loop: its tokens' costs added up, the host's time, what was busy.

A step carries ``M`` decoded sequences and ``P`` prefilled prompt tokens (the scheduler's
choice, ``scheduler``): the GPUs read the weights those ``M + P`` tokens touch and the decodes'
KV cache, or compute their tensor work, whichever is longer, then all-reduce; the engine's host
(scheduling, input preparation, sampling, the API server) adds its own time, during which the
GPUs wait. The costs per token come from the prior's own description of a step's work
(``physical.operations.describe_step``) on its GPUs (``physical.costs.silicon``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike

from wattgpu.modeling.physical.costs import Silicon
from wattgpu.modeling.physical.operations import StepWork, expected_experts


@dataclass(frozen=True)
class TokenCosts:
    """The costs of a step's operations on the rows' GPUs, per token it carries, s.

    A step carrying ``T`` tokens (``M`` decoded sequences and ``P`` prefilled prompt tokens)
    whose decodes attend to ``C`` tokens of context and whose prefills to ``A`` (token, earlier
    token) pairs reads ``mem_a(T) + kv_read C`` and computes ``comp T + attn A``.
    ``mem_a(T) = mem_dense + mem_expert x expected_experts(experts, per_token, T)``.
    """

    mem_dense: np.ndarray  # s: weights every step reads (all of a dense LLM's)
    mem_expert: np.ndarray  # s: one routed expert's weights (0 for a dense LLM)
    experts: np.ndarray  # routed experts
    per_token: np.ndarray  # routed experts per token
    kv_read: np.ndarray  # s per token of context a decoded sequence reads
    comp: np.ndarray  # s per token: its weight GEMMs' tensor work
    attn: np.ndarray  # s per (prefilled token, earlier token) pair of attention
    reduce_a: np.ndarray  # s: a step's all-reduces' fixed cost (0 on one GPU)
    reduce_b: np.ndarray  # s per token: the bytes its all-reduces move
    # a prompt token's tensor work (GEMMs and attention) over the prior's: the engine line's
    # prefill efficiency, fitted on TTFT rows (``ttft_terms``); None: 1
    prompt_scale: np.ndarray | None = None

    def mem_a(self, tokens: ArrayLike) -> np.ndarray:
        """Time to read the weights a step of ``tokens`` tokens touches, s."""
        if not (self.mem_expert > 0).any():
            # dense LLMs only: no routed expert to count (the loop asks every step)
            return self.mem_dense
        hit = expected_experts(self.experts, self.per_token, tokens)
        return self.mem_dense + self.mem_expert * np.where(self.mem_expert > 0, hit, 0.0)

    def take(self, rows: np.ndarray) -> TokenCosts:
        """The costs of the rows ``rows`` (an index or a mask) only."""
        return TokenCosts(
            **{
                f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[rows]
                for f in fields(self)
            }
        )


def token_costs(work: StepWork, gpu: Silicon) -> TokenCosts:
    """The cost of each operation of ``work`` on ``gpu``, per token a step carries.

    A decoded sequence is one token, so the prior's per-sequence GEMM work and all-reduce bytes
    are per token too.
    """
    reduces = work.all_reduces
    return TokenCosts(
        mem_dense=work.gemms.dense_bytes / gpu.weight_bandwidth,
        mem_expert=work.gemms.expert_bytes / gpu.weight_bandwidth,
        experts=work.gemms.experts,
        per_token=work.gemms.per_token,
        kv_read=work.attention.bytes_per_token / gpu.bandwidth,
        comp=work.gemms.flops_per_seq / gpu.flops,
        attn=work.attention.flops_per_pair / gpu.flops,
        reduce_a=reduces.count * gpu.allreduce_latency,
        reduce_b=reduces.count * reduces.link_bytes_per_seq / gpu.link,
    )


@dataclass(frozen=True)
class HostTime:
    """The engine's host time per step, s: ``fixed + per_seq x sequences in the step``.

    ``fixed`` already holds the parts per extra shard and per layer of the row's engine line.
    """

    fixed: np.ndarray
    per_seq: np.ndarray

    def take(self, rows: np.ndarray) -> HostTime:
        """The host times of the rows ``rows`` only."""
        return HostTime(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})


@dataclass(frozen=True)
class StepTime:
    """A step's wall time and its parts, s.

    Attributes:
        total: host time plus GPU time.
        gpu: the GPUs' share of it (memory or tensor work, whichever is longer, and the
            all-reduces).
        memory: time the memory is busy reading weights and KV cache.
        compute: time the tensor cores are busy.

    """

    total: np.ndarray
    gpu: np.ndarray
    memory: np.ndarray
    compute: np.ndarray


def step_time(
    costs: TokenCosts,
    host: HostTime,
    decodes: np.ndarray,
    context: np.ndarray,
    prefill: np.ndarray,
    pairs: np.ndarray,
) -> StepTime:
    """The time of a step of ``decodes`` sequences and ``prefill`` prompt tokens.

    Args:
        costs: the rows' operation costs.
        host: the rows' host time.
        decodes: sequences decoded (one token each).
        context: tokens of context those sequences read from the KV cache, all together.
        prefill: prompt tokens prefilled.
        pairs: (prefilled token, earlier token) pairs their attention computes.

    Returns:
        The step's time and parts; a step with nothing in it takes no time.

    """
    tokens = decodes + prefill
    busy = tokens > 0
    memory = np.where(busy, costs.mem_a(tokens), 0.0) + costs.kv_read * context
    if costs.prompt_scale is None:
        compute = costs.comp * tokens + costs.attn * pairs
    else:
        prompts = costs.comp * prefill + costs.attn * pairs
        compute = costs.comp * decodes + costs.prompt_scale * prompts
    reduce = np.where(busy, costs.reduce_a, 0.0) + costs.reduce_b * tokens
    gpu = np.maximum(memory, compute) + reduce
    total = np.where(busy, host.fixed + host.per_seq * decodes, 0.0) + gpu
    return StepTime(total=total, gpu=gpu, memory=memory, compute=compute)
