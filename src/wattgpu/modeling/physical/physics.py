"""The constants of the analytical prior, fitted to real measurements.

``PhysicalConstants`` (the efficiencies, overheads and power weights of the closed-form serving
model, ``regimes``), the host-side floors of the engines, the engines' and their release years'
effects on a decode step (``EngineEffects``) and what the analytical TTFT leaves out
(``TtftTerms``), with the values fitted to the reference rows
(``wattgpu.modeling.physical.prior`` fits them; refit with ``python bench/prior_fidelity.py
--refit``) and the bounds a fit may choose from. Data only: ``regimes`` and ``prior_columns``
compute with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from wattgpu.arrays import unique_codes
from wattgpu.data.kernels import IDLE_SHARE

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
