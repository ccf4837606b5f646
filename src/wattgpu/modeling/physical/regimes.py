"""The serving stage of the closed-form prior: power and per-request ITL from specs and workload.

Pure functions of DataFrames (no I/O). ``wattgpu.modeling.physical.synthetic`` generates a
measurement set with it and fits its constants; ``wattgpu.modeling.physical.prior_columns`` adds
its predictions to every row as a physics prior that the trees correct. A roofline of the decode
step plus queueing, with a few constants fitted to real measurements (``bench/prior_fidelity.py``).
A step is laid out as the field's tools lay it out: ``operations`` describes its work (weight
GEMMs, attention over the KV cache, all-reduces, a prefill chunk), ``costs`` prices each on the
rows' GPUs from their kernels' efficiencies, ``step`` adds them up; this module holds the serving
regimes around the step (batches, Little's law, closed loops) and power, and ``physics`` their
constants. It is the prior by default; ``wattgpu.modeling.serving`` simulates the serving loop
instead, an option. Per GPU, with ``M`` sequences decoded together:

* decode step ``t(M) = step_overhead + M * seq_overhead + max(t_mem(M), t_comp(M)) + t_ar(M)``,
  with
  ``t_mem = (weight bytes read(M) + M * context * kv_bytes_per_token) / (bandwidth * mem_eff)``,
  ``t_comp = 2 * active_params * M / (tensor_peak * comp_eff)`` (each efficiency the GPU's
  measured kernel efficiency, ``wattgpu.data.kernels``, times a fitted serving share),
  ``t_ar`` the all-reduces of tensor parallelism over the GPUs' link (``operations.AllReduces``) and
  ``context = input_tokens + output_tokens / 2`` (the mean over a request's decode); the weights
  read are all of a dense LLM's, and of a mixture-of-experts LLM its non-routed weights (attention,
  shared experts, embeddings) plus the distinct routed experts the step's ``M`` tokens hit,
  ``expected_experts(E, k, M)`` of them (``operations.weight_layout``);
* prefill of one request ``t_pre = 2 * active_params * input_tokens / (fp16_peak * comp_eff)``.
  The prefills of the requests that replace finished ones stall the running ones, so offline the
  per-request ITL is ``t(M) + M * t_pre / output_tokens`` (also what "batch latency / output
  length" measures), and for a server ``t(1 + N) / (1 - rate * t_pre)``: a request decodes beside
  the ``N`` others in the system on average;
* server concurrency from Little's law, ``N = rate * output_tokens * ITL(N)``, solved in closed
  form (``t`` is the larger of two lines in ``N``), capped by the KV-cache memory and the engine's
  maximum batch; a server that cannot keep up runs at that cap, like an offline batch;
* a closed-loop server (``users`` concurrent users, each sending its next request when the
  last one ends, as LLM-Pilot, llmperf and vLLM's ``--max-concurrency`` run it) is an offline
  batch of ``M = min(users, cap)`` with its refill prefills, at no ``server_power_factor`` (that
  factor is fitted to open-loop Poisson servers, which idle between bursts); a user waits for a
  slot when ``users > M``: a slot serves a request in ``cycle = t_pre + output_tokens * ITL``,
  so ``TTFT = max(1, users / M) * cycle - output_tokens * ITL + ITL`` (Little's law over the
  closed loop), which is ``t_pre + ITL`` below the cap;
* power = idle + (TDP - idle) x min(1, load), where load is the time-averaged activity: 1 in
  prefill, 0 while a server has no request (probability ``exp(-N)``), and in a decode step
  ``min(1, memory_power_weight * u_mem + compute_power_weight * u_comp)`` (``u`` = share of the
  step the memory or the tensor cores are busy; the fixed overheads leave the GPU waiting). A
  server's load is scaled by ``server_power_factor``. Never above TDP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.modeling.physical.columns import length, values
from wattgpu.modeling.physical.costs import StepCosts, gpu_spec, silicon, step_costs
from wattgpu.modeling.physical.operations import describe_step
from wattgpu.modeling.physical.physics import (
    DEFAULT_CONSTANTS,
    ENGINE_MAX_BATCH,
    PhysicalConstants,
)
from wattgpu.modeling.physical.step import step_time

# Passes of the server's concurrency fixed point when an LLM's weights read grow with it.
MOE_FIXED_POINT_PASSES = 6
# A server spending more of its time than this in prefills counts as overloaded.
MAX_PREFILL_SHARE = 0.95


def serving_model(
    rows: pd.DataFrame, constants: PhysicalConstants = DEFAULT_CONSTANTS
) -> pd.DataFrame:
    """``serving_model_columns`` as a frame with the rows' index (see there)."""
    return pd.DataFrame(serving_model_columns(rows, constants), index=rows.index)


def serving_model_columns(
    rows: pd.DataFrame | Mapping[str, Any], constants: PhysicalConstants = DEFAULT_CONSTANTS
) -> dict[str, np.ndarray]:
    """Mean board power per GPU and per-request ITL of each row, from specs and workload alone.

    Args:
        rows: rows as made by ``build_features`` (``gpu_*``/``llm_*`` specs, ``scenario``,
            ``batch_size``, ``request_rate_rps``, tokens, ``num_gpus`` and physics columns).
            Blank specs fall back to ``operations.FALLBACK_SPECS``; a scenario other than
            ``server`` is treated as offline.
        constants: the model's constants.

    Returns:
        Arrays: ``power_w``, ``itl_s``, ``concurrency`` (sequences
        decoding), ``throughput_tok_s`` (all positive and finite), ``ttft_s`` (NaN offline) and
        ``prefill_share``: the share of ``itl_s`` that prefills stalling the decode take (the
        ``M * t_pre / output_tokens`` term offline and at the cap, ``rate * t_pre`` below it).

    """
    c = constants
    w = _workload(rows, c)
    full = _at_cap(w, c)
    below, free = _below_cap(w, c)
    free &= ~w.closed
    itl = np.where(free, below.itl, full.itl)
    load = np.where(free, below.load, full.load)
    load = load * np.where(w.server & ~w.closed, c.server_power_factor, 1.0)
    load = np.clip(load, 0.0, 1.0)
    decoding = np.where(free, below.concurrency, full.concurrency)
    idle = c.idle_fraction * w.tdp
    queued = np.where(free, np.maximum(1.0 - below.prefill_share, 1e-9), 1.0)
    ttft = w.prefill / queued + itl
    cycle = w.prefill + w.tokens_out * itl
    waits = np.maximum(1.0, w.users / decoding) * cycle - w.tokens_out * itl + itl
    ttft = np.where(w.closed, waits, ttft)
    return {
        "power_w": idle + (w.tdp - idle) * load,
        "itl_s": itl,
        "concurrency": decoding,
        "throughput_tok_s": np.maximum(decoding, 1e-9) / itl,
        "ttft_s": np.where(w.server, ttft, np.nan),
        "prefill_share": np.where(free, below.prefill_share, full.prefill_share),
    }


@dataclass(frozen=True)
class _Workload:
    """Per-row workload of the model, and the costs of its step (``costs.StepCosts``)."""

    n: int
    tdp: np.ndarray
    tokens_out: np.ndarray
    cap: np.ndarray
    batch: np.ndarray
    engine_batch: np.ndarray  # the most sequences the engine decodes together
    rate: np.ndarray
    server: np.ndarray
    users: np.ndarray  # a closed loop's concurrent users (NaN for an open-loop rate)
    closed: np.ndarray  # a server row given as concurrent users
    memory_power_factor: np.ndarray  # the GPU's memory-busy draw over the profiled median
    costs: StepCosts

    @property
    def prefill(self) -> np.ndarray:
        """s: one request's prefill."""
        return self.costs.prefill


@dataclass(frozen=True)
class _Regime:
    """Sequences decoding, per-request ITL and load of each row in one regime."""

    concurrency: np.ndarray
    itl: np.ndarray
    load: np.ndarray
    prefill_share: np.ndarray  # share of the per-request ITL that other requests' prefills take


def _workload(rows: pd.DataFrame | Mapping[str, Any], c: PhysicalConstants) -> _Workload:
    """Read the workload of ``rows``; cost its step's operations on its GPUs."""
    n = length(rows)
    gpus = silicon(rows, c.memory_efficiency, c.compute_efficiency)
    cap = np.maximum(values(rows, "max_concurrent_seqs", ENGINE_MAX_BATCH), 1.0)
    server = np.asarray(rows["scenario"] == "server") if "scenario" in rows else np.zeros(n, bool)
    users = values(rows, "users", np.nan, positive=True)
    closed = server & np.isfinite(users)
    return _Workload(
        n=n,
        tdp=gpu_spec(rows, "gpu_tdp_w"),
        tokens_out=np.maximum(values(rows, "output_tokens", 256.0), 1.0),
        cap=cap,
        batch=np.where(closed, users, values(rows, "batch_size", np.nan, positive=True)),
        engine_batch=np.minimum(ENGINE_MAX_BATCH, cap),
        rate=values(rows, "request_rate_rps", 0.0),
        server=server,
        users=users,
        closed=closed,
        memory_power_factor=values(rows, "gpu_memory_power_factor", 1.0, positive=True),
        costs=step_costs(describe_step(rows), gpus),
    )


def _step(w: _Workload, c: PhysicalConstants, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Step time of ``m`` sequences and its activity (see the module docstring)."""
    memory_weight = c.memory_power_weight * w.memory_power_factor
    return step_time(
        w.costs, m, c.step_overhead_s, c.seq_overhead_s, memory_weight, c.compute_power_weight
    )


def _at_cap(w: _Workload, c: PhysicalConstants) -> _Regime:
    """Offline, a closed loop, or a server at its cap: M sequences, at most what the KV cache holds.

    An offline batch or a closed loop decodes its batch (its users); an open-loop server at its
    cap, or an offline row with no batch, the engine's maximum.
    """
    open_loop = w.server & ~w.closed
    # a server engine decodes at most its maximum batch; an offline batch is what was asked
    most = np.where(w.closed, w.engine_batch, w.cap)
    m_full = np.where(
        open_loop | ~np.isfinite(w.batch), w.engine_batch, np.clip(w.batch, 1.0, most)
    )
    m_full = np.maximum(m_full, 1.0)
    t_full, use_full = _step(w, c, m_full)
    stall = m_full * w.prefill / w.tokens_out
    itl_full = t_full + stall
    load_full = (t_full * use_full + stall) / itl_full
    return _Regime(m_full, itl_full, load_full, stall / itl_full)


def _below_cap(w: _Workload, c: PhysicalConstants) -> tuple[_Regime, np.ndarray]:
    """A server below its cap: concurrency from Little's law, its ITL and load.

    ``N = k t(1 + N)``, ``k = rate * out / (1 - rate * t_pre)``. On a line ``t = a + b M`` this
    is ``N = k (a + b) / (1 - k b)``; the least fixed point of the larger line is the larger of
    the two.

    Returns:
        The regime, where each row is in it (``free``: a server whose fixed point is below the
        cap), and the share of time spent in prefills.

    """
    prefill_share = w.rate * w.prefill
    k = w.rate * w.tokens_out / np.maximum(1.0 - prefill_share, 1e-9)
    n_free = np.zeros(w.n)
    # The weights a step reads grow with the sequences in it when the LLM has experts: iterate
    # from the active ones (N = 0) to the fixed point (a dense LLM's first pass is its answer).
    for _ in range(MOE_FIXED_POINT_PASSES if (w.costs.mem_expert > 0).any() else 1):
        costs = w.costs
        mem_a = costs.mem_a(1.0 + np.nan_to_num(n_free, nan=0.0, posinf=1e9))
        fixed, per_seq = c.step_overhead_s + costs.reduce_a, c.seq_overhead_s + costs.reduce_b
        lines = ((fixed + mem_a, per_seq + costs.mem_b), (fixed, per_seq + costs.comp_b))
        stable = prefill_share < MAX_PREFILL_SHARE
        n_free = np.zeros(w.n)
        for a, b in lines:
            stable &= k * b < 1.0
            with np.errstate(divide="ignore", invalid="ignore"):
                n_free = np.maximum(n_free, k * (a + b) / (1.0 - k * b))
    free = w.server & stable & (n_free + 1.0 < w.engine_batch)
    n_free = np.where(free, n_free, 0.0)
    itl_free = _step(w, c, 1.0 + n_free)[0] / np.maximum(1.0 - prefill_share, 1e-9)
    p_busy = -np.expm1(-n_free)  # P(at least one request decoding), Poisson occupancy
    m_busy = np.where(p_busy > 1e-9, n_free / np.maximum(p_busy, 1e-9), 1.0)
    busy_use = _step(w, c, np.maximum(m_busy, 1.0))[1]
    load_free = prefill_share + (1.0 - prefill_share) * p_busy * busy_use
    return _Regime(n_free, itl_free, load_free, prefill_share), free
