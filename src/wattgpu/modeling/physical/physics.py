"""The analytical model of LLM serving: power and per-request ITL from specs and workload alone.

Pure functions of DataFrames (no I/O). ``wattgpu.modeling.physical.synthetic`` generates a
measurement set with it and fits its constants; ``wattgpu.modeling.physical.features`` adds its
predictions to every row as a physics prior that the trees correct. A roofline of the decode step
plus queueing, with a few constants fitted to real measurements (``bench/prior_fidelity.py``).
A step is laid out as the field's tools lay it out: ``operations`` describes its work (weight
GEMMs, attention over the KV cache, all-reduces, a prefill chunk), ``costs`` prices each on the
rows' GPUs from their kernels' efficiencies, ``step`` adds them up; this module holds the serving
regimes around the step (batches, Little's law, closed loops) and power. Per GPU, with ``M``
sequences decoded together:

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

from wattgpu.arrays import unique_codes
from wattgpu.data.kernels import IDLE_SHARE
from wattgpu.modeling.physical.costs import StepCosts, gpu_spec, silicon, step_costs
from wattgpu.modeling.physical.operations import describe_step, length, values
from wattgpu.modeling.physical.step import step_time

# vLLM's default max_num_seqs: the batch an engine picks when the user sets none.
ENGINE_MAX_BATCH = 256.0


@dataclass(frozen=True)
class PhysicalConstants:
    """The constants of the analytical model.

    Attributes:
        memory_efficiency: a serving step's share of the bandwidth its GPU's GEMM kernels reach
            (``gpu_memory_efficiency``, measured or from specs: ``wattgpu.data.kernels``).
        compute_efficiency: the same of the tensor peak its kernels reach
            (``gpu_compute_efficiency``).
        step_overhead_s: fixed time of one engine step (scheduling, launches, sampling), s.
        seq_overhead_s: extra step time per sequence in the batch (CPU-side bookkeeping), s.
        idle_fraction: board power with no request in the system, as a share of TDP.
        memory_power_weight: dynamic power share (of TDP - idle) of a step that keeps memory busy
            throughout, on a GPU whose per-kernel power matches the profiled median (scaled by
            its ``gpu_memory_power_factor``, ``wattgpu.data.kernels``).
        compute_power_weight: the same for the tensor cores; above 1 because the board reaches
            its power limit long before the tensor cores reach their peak.
        server_power_factor: a server's dynamic power relative to an offline batch with the same
            activity (empirical: the only real server runs draw about 2/3 of what the offline
            runs would suggest, as the WattGPU paper's 0.6 vs 0.9 load-scaled TDP baseline does).

    """

    memory_efficiency: float
    compute_efficiency: float
    step_overhead_s: float
    seq_overhead_s: float
    idle_fraction: float
    memory_power_weight: float
    compute_power_weight: float
    server_power_factor: float


# Fitted to the real single-GPU 16-bit dense vLLM rows of ../shared/reference (all but the
# CPU-bound v2_vllm_batch_2024 family; see bench/prior_fidelity.py). Refit with
#   python bench/prior_fidelity.py --refit
DEFAULT_CONSTANTS = PhysicalConstants(
    memory_efficiency=1.061,
    compute_efficiency=1.3,  # at its bound: decode never looked compute-bound in the real rows
    step_overhead_s=0.002702,
    seq_overhead_s=7.611e-05,
    idle_fraction=IDLE_SHARE,  # held, not fitted (see calibrate)
    memory_power_weight=0.6608,
    compute_power_weight=4.416,
    server_power_factor=0.6629,
)

# The host-side time per layer of one decode step of engines other than vLLM (whose overheads the
# constants above carry), in s: an engine whose kernels are launched layer by layer from Python
# cannot step faster than this, however fast the GPU, which then waits (and draws less power).
# Fitted to every reference row with an ITL (``modeling.physical.prior.fit_engine_floors``);
# refit with  python bench/prior_fidelity.py --refit
DEFAULT_ENGINE_FLOORS: dict[str, float] = {
    "deepspeed-mii": 4.111e-04,
    "hf": 1.049e-03,
    "llama.cpp": 3.628e-04,
    "sglang": 1.561e-04,
    "tgi": 4.242e-04,
    "trtllm": 1.040e-04,
}

# The most one year of a stated engine release may change a decode step: a user who states the
# wrong year, or a release nobody measured, moves no answer by more than 15 % per year.
MAX_YEAR_EFFECT = float(np.log(1.15))
# The most an engine's own factor may scale the analytical step (4x either way).
MAX_ENGINE_EFFECT = float(np.log(4.0))


@dataclass(frozen=True)
class EngineEffects:
    """How the serving engine scales the analytical decode step, learnt from paired rows.

    ``step x exp(factors[engine] + per_year x (year - reference_year))``, fitted where the same
    LLM, GPU and workload ran on several engines or releases
    (``modeling.physical.prior.fit_engine_effects``) and bounded by ``MAX_ENGINE_EFFECT`` and
    ``MAX_YEAR_EFFECT``. An engine with no factor (vLLM, or one never paired) scales by 1.

    Attributes:
        factors: log factor per engine name.
        per_year: log change of the step per year of engine release.
        reference_year: the release year at which ``per_year`` contributes nothing.

    """

    factors: Mapping[str, float]
    per_year: float
    reference_year: float

    def engine_log_factor(self, engines: np.ndarray) -> np.ndarray:
        """The log factor of each row's engine (0 for one without a factor)."""
        codes, names = unique_codes(engines)  # once per distinct engine, no sort
        return np.array([self.factors.get(str(e), 0.0) for e in names], dtype=float)[codes]

    def year_log_factor(self, years: np.ndarray) -> np.ndarray:
        """The log factor of each row's engine release year (0 where unknown)."""
        year = np.asarray(years, dtype=float) - self.reference_year
        return self.per_year * np.where(np.isnan(year), 0.0, year)


NO_ENGINE_EFFECTS = EngineEffects({}, 0.0, 2025.0)


@dataclass(frozen=True)
class TtftTerms:
    """What the analytical TTFT leaves out, fitted to measured TTFTs.

    ``prior_ttft = overhead_s + prefill_scale x (analytical TTFT)``: a request's fixed cost before
    its prefill (the HTTP request, tokenisation, scheduling, sampling the first token) and how far
    a real prefill and its queueing run from the tensor peak (``modeling.physical.prior
    .fit_ttft_terms``).

    Attributes:
        overhead_s: the fixed time of a request before its first token, s.
        prefill_scale: measured over analytical prefill and queueing time.

    """

    overhead_s: float
    prefill_scale: float


NO_TTFT_TERMS = TtftTerms(0.0, 1.0)
# Fitted to the reference rows (``modeling.physical.prior.fit_engine_effects``); refit with
#   python bench/prior_fidelity.py --refit
DEFAULT_ENGINE_EFFECTS = EngineEffects(
    factors={"deepspeed-mii": 0.1911, "llama.cpp": 0.7178, "sglang": -0.0025, "trtllm": -0.1629},
    per_year=-0.0269,
    reference_year=2024,
)

# Fitted to the reference rows with a TTFT (``modeling.physical.prior.fit_ttft_terms``); refit
# with  python bench/prior_fidelity.py --refit
DEFAULT_TTFT_TERMS = TtftTerms(overhead_s=0.002239, prefill_scale=9.036)

# What a fit may choose from: serving shares of the kernels' efficiencies within (0, 1.3] (a
# kernel table's median shape is not every shape), overheads below 50 ms and 2 ms.
CONSTANT_BOUNDS: dict[str, tuple[float, float]] = {
    "memory_efficiency": (0.05, 1.3),
    "compute_efficiency": (0.05, 1.3),
    "step_overhead_s": (0.0, 0.05),
    "seq_overhead_s": (0.0, 0.002),
    "idle_fraction": (0.02, 0.6),
    "memory_power_weight": (0.0, 1.5),
    "compute_power_weight": (0.0, 10.0),
    "server_power_factor": (0.2, 1.5),
}


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
