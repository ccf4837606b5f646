"""One decode step: its costs added up, and how busy it keeps the GPU (for power)."""

from __future__ import annotations

import numpy as np

from wattgpu.modeling.physical.costs import StepCosts


def step_time(
    costs: StepCosts,
    m: np.ndarray,
    fixed_s: float,
    per_seq_s: float,
    memory_weight: np.ndarray,
    compute_weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The time of a step of ``m`` sequences, s, and its activity in [0, 1].

    ``fixed_s + per_seq_s x m`` (the engine's own overheads) ``+ max(t_mem, t_comp)`` (the
    weights and the KV cache read, or the tensor math, whichever is longer) ``+ t_reduce`` (the
    all-reduces). Activity: ``memory_weight x t_mem / t + compute_weight x t_comp / t``, at most
    1 (the overheads leave the GPU waiting).
    """
    t_mem, t_comp = costs.mem_a(m) + costs.mem_b * m, costs.comp_b * m
    t_reduce = costs.reduce_a + costs.reduce_b * m
    t = fixed_s + per_seq_s * m + np.maximum(t_mem, t_comp) + t_reduce
    use = memory_weight * t_mem / t + compute_weight * t_comp / t
    return t, np.minimum(use, 1.0)
