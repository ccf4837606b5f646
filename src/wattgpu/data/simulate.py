"""An analytical model of LLM serving, and a generator of a measurement set marked as generated.

A roofline of the decode step plus queueing, with a few constants fitted to real measurements
(``bench/simulator_fidelity.py``). Per GPU, with ``M`` sequences decoded together:

* decode step ``t(M) = step_overhead + M * seq_overhead + max(t_mem(M), t_comp(M))``, with
  ``t_mem = (active weight bytes + M * context * kv_bytes_per_token) / (bandwidth * mem_eff)``,
  ``t_comp = 2 * active_params * M / (fp16_peak * comp_eff)`` and
  ``context = input_tokens + output_tokens / 2`` (the mean over a request's decode);
* prefill of one request ``t_pre = 2 * active_params * input_tokens / (fp16_peak * comp_eff)``.
  The prefills of the requests that replace finished ones stall the running ones, so offline the
  per-request ITL is ``t(M) + M * t_pre / output_tokens`` (also what "batch latency / output
  length" measures), and for a server ``t(1 + N) / (1 - rate * t_pre)``: a request decodes beside
  the ``N`` others in the system on average;
* server concurrency from Little's law, ``N = rate * output_tokens * ITL(N)``, solved in closed
  form (``t`` is the larger of two lines in ``N``), capped by the KV-cache memory and the engine's
  maximum batch; a server that cannot keep up runs at that cap, like an offline batch;
* power = idle + (TDP - idle) x min(1, load), where load is the time-averaged activity: 1 in
  prefill, 0 while a server has no request (probability ``exp(-N)``), and in a decode step
  ``min(1, memory_power_weight * u_mem + compute_power_weight * u_comp)`` (``u`` = share of the
  step the memory or the tensor cores are busy; the fixed overheads leave the GPU waiting). A
  server's load is scaled by ``server_power_factor``. Never above TDP.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from wattgpu.data.catalog import Catalog
from wattgpu.errors import ConfigError, DataError
from wattgpu.modeling.features import ENGINE_MAX_BATCH, build_features
from wattgpu.modeling.metrics import mdape


@dataclass(frozen=True)
class PhysicalConstants:
    """The constants of the analytical model.

    Attributes:
        memory_efficiency: achieved share of the peak memory bandwidth while decoding.
        compute_efficiency: achieved share of the dense FP16 tensor peak.
        step_overhead_s: fixed time of one engine step (scheduling, launches, sampling), s.
        seq_overhead_s: extra step time per sequence in the batch (CPU-side bookkeeping), s.
        idle_fraction: board power with no request in the system, as a share of TDP.
        memory_power_weight: dynamic power share (of TDP - idle) of a step that keeps memory busy
            throughout.
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
# CPU-bound v2_vllm_batch_2024 family; see bench/simulator_fidelity.py). Refit with
#   python bench/simulator_fidelity.py --refit
DEFAULT_CONSTANTS = PhysicalConstants(
    memory_efficiency=0.7797,
    compute_efficiency=1.0,  # at its bound: decode never looked compute-bound in the real rows
    step_overhead_s=0.002247,
    seq_overhead_s=7.417e-05,
    idle_fraction=0.1,  # held, not fitted (see calibrate)
    memory_power_weight=0.6771,
    compute_power_weight=4.802,
    server_power_factor=0.6157,
)

# What a fit may choose from: efficiencies within (0, 1], overheads below 50 ms and 2 ms.
CONSTANT_BOUNDS: dict[str, tuple[float, float]] = {
    "memory_efficiency": (0.05, 1.0),
    "compute_efficiency": (0.05, 1.0),
    "step_overhead_s": (0.0, 0.05),
    "seq_overhead_s": (0.0, 0.002),
    "idle_fraction": (0.02, 0.6),
    "memory_power_weight": (0.0, 1.5),
    "compute_power_weight": (0.0, 10.0),
    "server_power_factor": (0.2, 1.5),
}

# Stand-ins for a spec a row leaves blank, so that any row gets a finite prediction.
FALLBACK_SPECS = {
    "gpu_memory_bandwidth_gb_s": 1000.0,
    "gpu_fp16_tensor_tflops": 150.0,
    "gpu_tdp_w": 300.0,
    "llm_params_b": 7.0,
}
# A server spending more of its time than this in prefills counts as overloaded.
MAX_PREFILL_SHARE = 0.95
# (prediction column, measured column) of each target.
TARGETS = {"power": ("power_w", "mean_power_w"), "itl": ("itl_s", "itl_s")}


def _values(rows: pd.DataFrame, column: str, default: float, positive: bool = False) -> np.ndarray:
    """Return a float column; missing, non-finite, negative (zero if ``positive``) -> default."""
    if column not in rows.columns:
        return np.full(len(rows), default, dtype=float)
    values = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(values) & ((values > 0) if positive else (values >= 0))
    return np.where(ok, values, default)


def predict(rows: pd.DataFrame, constants: PhysicalConstants = DEFAULT_CONSTANTS) -> pd.DataFrame:
    """Mean board power per GPU and per-request ITL of each row, from specs and workload alone.

    Args:
        rows: rows as made by ``build_features`` (``gpu_*``/``llm_*`` specs, ``scenario``,
            ``batch_size``, ``request_rate_rps``, tokens, ``num_gpus`` and physics columns).
            Blank specs fall back to ``FALLBACK_SPECS``; a scenario other than ``server`` is
            treated as offline.
        constants: the model's constants.

    Returns:
        A frame with the rows' index: ``power_w``, ``itl_s``, ``concurrency`` (sequences
        decoding), ``throughput_tok_s`` (all positive and finite) and ``ttft_s`` (NaN offline).

    """
    c = constants
    n = len(rows)
    gpus = np.maximum(_values(rows, "num_gpus", 1.0), 1.0)
    params = _values(rows, "llm_params_b", FALLBACK_SPECS["llm_params_b"], positive=True) * 1e9
    active = _values(rows, "llm_active_params_b", np.nan, positive=True) * 1e9
    active = np.where(np.isfinite(active), active, params)
    weight_bytes = active * _values(rows, "bytes_per_param", 2.0, positive=True)
    bandwidth = _values(
        rows, "gpu_memory_bandwidth_gb_s", FALLBACK_SPECS["gpu_memory_bandwidth_gb_s"], True
    )
    flops = _values(rows, "gpu_fp16_tensor_tflops", FALLBACK_SPECS["gpu_fp16_tensor_tflops"], True)
    tdp = _values(rows, "gpu_tdp_w", FALLBACK_SPECS["gpu_tdp_w"], positive=True)
    bandwidth = bandwidth * 1e9 * c.memory_efficiency * gpus  # achieved bytes/s, all GPUs
    flops = flops * 1e12 * c.compute_efficiency * gpus  # achieved FLOP/s, all GPUs
    kv = _values(rows, "kv_bytes_per_token", 0.0)
    tokens_in = _values(rows, "input_tokens", 512.0)
    tokens_out = np.maximum(_values(rows, "output_tokens", 256.0), 1.0)
    cap = np.maximum(_values(rows, "max_concurrent_seqs", ENGINE_MAX_BATCH), 1.0)
    batch = _values(rows, "batch_size", np.nan, positive=True)
    rate = _values(rows, "request_rate_rps", 0.0)
    server = (rows["scenario"] == "server").to_numpy() if "scenario" in rows else np.zeros(n, bool)

    # t(M) = max(mem_a + mem_b * M, comp_b * M) + step_overhead + seq_overhead * M
    mem_a = weight_bytes / bandwidth
    mem_b = (tokens_in + tokens_out / 2.0) * kv / bandwidth
    comp_b = 2.0 * active / flops
    prefill = comp_b * tokens_in

    def step(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Step time and its activity (see the module docstring)."""
        t_mem, t_comp = mem_a + mem_b * m, comp_b * m
        t = c.step_overhead_s + c.seq_overhead_s * m + np.maximum(t_mem, t_comp)
        use = c.memory_power_weight * t_mem / t + c.compute_power_weight * t_comp / t
        return t, np.minimum(use, 1.0)

    # Offline, or a server at its cap: M sequences, as many as the KV cache holds.
    engine_batch = np.minimum(ENGINE_MAX_BATCH, cap)
    m_full = np.where(server | ~np.isfinite(batch), engine_batch, np.clip(batch, 1.0, cap))
    m_full = np.maximum(m_full, 1.0)
    t_full, use_full = step(m_full)
    stall = m_full * prefill / tokens_out
    itl_full = t_full + stall
    load_full = (t_full * use_full + stall) / itl_full

    # Server: N = k t(1 + N), k = rate * out / (1 - rate * t_pre). On a line t = a + b M this is
    # N = k (a + b) / (1 - k b); the least fixed point of the larger line is the larger of the two.
    prefill_share = rate * prefill
    k = rate * tokens_out / np.maximum(1.0 - prefill_share, 1e-9)
    lines = (
        (c.step_overhead_s + mem_a, c.seq_overhead_s + mem_b),
        (np.full(n, c.step_overhead_s), c.seq_overhead_s + comp_b),
    )
    stable = prefill_share < MAX_PREFILL_SHARE
    n_free = np.zeros(n)
    for a, b in lines:
        stable &= k * b < 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            n_free = np.maximum(n_free, k * (a + b) / (1.0 - k * b))
    free = server & stable & (n_free + 1.0 < engine_batch)
    n_free = np.where(free, n_free, 0.0)
    itl_free = step(1.0 + n_free)[0] / np.maximum(1.0 - prefill_share, 1e-9)
    p_busy = -np.expm1(-n_free)  # P(at least one request decoding), Poisson occupancy
    m_busy = np.where(p_busy > 1e-9, n_free / np.maximum(p_busy, 1e-9), 1.0)
    load_free = prefill_share + (1.0 - prefill_share) * p_busy * step(np.maximum(m_busy, 1.0))[1]

    itl = np.where(free, itl_free, itl_full)
    load = np.where(free, load_free, load_full) * np.where(server, c.server_power_factor, 1.0)
    load = np.clip(load, 0.0, 1.0)
    decoding = np.where(free, n_free, m_full)
    idle = c.idle_fraction * tdp
    ttft = prefill / np.where(free, np.maximum(1.0 - prefill_share, 1e-9), 1.0) + itl
    return pd.DataFrame(
        {
            "power_w": idle + (tdp - idle) * load,
            "itl_s": itl,
            "concurrency": decoding,
            "throughput_tok_s": np.maximum(decoding, 1e-9) / itl,
            "ttft_s": np.where(server, ttft, np.nan),
        },
        index=rows.index,
    )


def _group_keys(rows: pd.DataFrame) -> pd.Series:
    """Name the data set of each row: ``source/family`` as far as the row says."""
    parts = [
        rows[c].astype("object").fillna("?").astype(str) for c in ("source", "family") if c in rows
    ]
    if not parts:
        return pd.Series("all", index=rows.index)
    key = parts[0]
    for part in parts[1:]:
        key = key + "/" + part
    return key


def fidelity(
    rows: pd.DataFrame, constants: PhysicalConstants, fitted: pd.Series | None = None
) -> pd.DataFrame:
    """MdAPE of the model against measured rows, per target and data set (and engine), and overall.

    Args:
        rows: measured rows from ``build_features`` with ``mean_power_w`` and/or ``itl_s``.
        constants: the constants to evaluate.
        fitted: boolean mask of the rows a fit used; adds an overall line ``fitted`` for them.

    Returns:
        Columns ``target, data_set, engine, n_rows, mdape_pct, median_log_ratio`` (the bias:
        median of log(pred / true)). The overall lines have data set ``all`` (and ``fitted``).

    """
    pred = predict(rows, constants)
    keys = _group_keys(rows)
    engine = (
        rows["engine"].astype("object").fillna("?")
        if "engine" in rows
        else pd.Series("?", rows.index)
    )
    out = []
    for target, (p, t) in TARGETS.items():
        true = (
            pd.to_numeric(rows[t], errors="coerce") if t in rows else pd.Series(np.nan, rows.index)
        )
        have = true.notna() & (true > 0)
        frame = pd.DataFrame({"true": true, "pred": pred[p], "key": keys, "engine": engine})[have]
        parts = [(k, e, g) for (k, e), g in frame.groupby(["key", "engine"], sort=True)]
        parts.append(("all", "any", frame))
        if fitted is not None:
            parts.append(("fitted", "any", frame[fitted.astype(bool)[have]]))
        for key, eng, g in parts:
            if len(g):
                out.append(
                    {
                        "target": target,
                        "data_set": key,
                        "engine": eng,
                        "n_rows": len(g),
                        "mdape_pct": mdape(g["true"], g["pred"]),
                        "median_log_ratio": float(np.median(np.log(g["pred"] / g["true"]))),
                    }
                )
    return pd.DataFrame(out)


def calibrate(
    rows: pd.DataFrame,
    fit_mask: pd.Series | None = None,
    start: PhysicalConstants = DEFAULT_CONSTANTS,
    fixed: tuple[str, ...] = ("idle_fraction",),
    f_scale: float = 0.1,
) -> tuple[PhysicalConstants, pd.DataFrame]:
    """Fit the constants to measured rows by robust least squares on log errors of both targets.

    Every (target, data set) group weighs the same whatever its size, so one large data set cannot
    drown the others; the soft-L1 loss (scale ``f_scale`` in log units) keeps a few odd rows from
    dragging the fit.

    Args:
        rows: measured rows from ``build_features`` (``mean_power_w`` and/or per-request
            ``itl_s``; ``source``/``family`` name the data set when present).
        fit_mask: the rows to fit on (default: all); the report covers every row.
        start: the starting point, and the values of the ``fixed`` constants.
        fixed: constants held at their ``start`` value. Idle power is by default: real serving
            runs rarely leave the GPU idle long enough to tell idle power from dynamic power.
        f_scale: residual size, in log units, beyond which the loss grows linearly.

    Returns:
        The fitted constants and ``fidelity(rows, fitted, fit_mask)``.

    """
    fit_mask = pd.Series(True, index=rows.index) if fit_mask is None else fit_mask.astype(bool)
    fit_rows = rows[fit_mask.to_numpy()]
    keys = _group_keys(fit_rows)
    weights, targets = {}, {}
    for target, (_, t) in TARGETS.items():
        true = pd.to_numeric(fit_rows[t], errors="coerce") if t in fit_rows else None
        if true is None:
            continue
        have = (true.notna() & (true > 0)).to_numpy()
        sizes = keys[have].map(keys[have].value_counts())
        targets[target] = (have, true.to_numpy(dtype=float)[have])
        weights[target] = 1.0 / np.sqrt(sizes.to_numpy(dtype=float))
    if not any(len(v[1]) for v in targets.values()):
        raise DataError(
            f"calibrate needs rows with a positive mean_power_w or itl_s; got {len(fit_rows)} "
            "rows with neither"
        )
    unknown = set(fixed) - {f.name for f in fields(PhysicalConstants)}
    if unknown:
        allowed = ", ".join(f.name for f in fields(PhysicalConstants))
        raise ConfigError(f"fixed must name constants ({allowed}); got {sorted(unknown)}")
    names = [f.name for f in fields(PhysicalConstants) if f.name not in fixed]
    low = np.array([CONSTANT_BOUNDS[n][0] for n in names])
    high = np.array([CONSTANT_BOUNDS[n][1] for n in names])
    x0 = np.clip([getattr(start, n) for n in names], low, high)

    def constants_of(x: np.ndarray) -> PhysicalConstants:
        return replace(start, **{n: float(v) for n, v in zip(names, x, strict=True)})

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = predict(fit_rows, constants_of(x))
        parts = []
        for target, (have, true) in targets.items():
            r = np.log(pred[TARGETS[target][0]].to_numpy()[have] / true)
            robust = np.sign(r) * np.sqrt(
                2.0 * f_scale**2 * (np.sqrt(1.0 + (r / f_scale) ** 2) - 1.0)
            )
            parts.append(weights[target] * robust)
        return np.concatenate(parts)

    result = least_squares(residuals, x0, bounds=(low, high), x_scale=high - low)
    constants = constants_of(result.x)
    return constants, fidelity(rows, constants, fit_mask)


# The generated workload grid: single GPU, vLLM, both scenarios.
OFFLINE_BATCH_SIZES = (1, 8, 32, 128)
SERVER_RATES_RPS = (0.1, 0.5, 1.0, 2.0, 4.0)
TOKEN_LENGTHS = ((512, 256), (1024, 1024))  # (input, output)
LLMS_PER_GPU = 6
MAX_PARAMS_B = 75.0
MIN_KV_SEQS = 8  # sequences of the longest length the KV cache must hold for an LLM to count
POWER_NOISE = 0.03  # log-normal sigma
ITL_NOISE = 0.05
MEASUREMENT_COLUMNS = (
    "gpu", "model", "scenario", "request_rate_rps", "batch_size", "input_tokens", "output_tokens",
    "engine", "dtype", "num_gpus", "mean_power_w", "itl_s", "ttft_s", "throughput_tok_s",
    "energy_per_token_j", "source", "measured_at",
)  # fmt: skip


def _generated_source(seed: int) -> str:
    return f"generated: wattgpu data simulate (analytical model, seed {seed}) — not measured"


def _candidate_llms(catalog: Catalog) -> pd.DataFrame:
    """Pick the dense decoder LLMs up to ``MAX_PARAMS_B``, with the 16-bit dtype they run in."""
    llms = catalog.llms
    params = pd.to_numeric(llms["params_b"], errors="coerce")
    active = pd.to_numeric(llms["active_params_b"], errors="coerce").fillna(params)
    experts = pd.to_numeric(llms.get("num_experts", pd.Series(np.nan, llms.index)), errors="coerce")
    arch = llms["arch"].astype("object").fillna("decoder") if "arch" in llms else "decoder"
    keep = (params <= MAX_PARAMS_B) & (active >= params) & ~(experts > 1) & (arch == "decoder")
    out = llms.loc[keep, ["model", "params_b"]].reset_index(drop=True)
    dtype = llms.loc[keep, "dtype"].astype("object").str.lower().to_numpy()
    out["dtype"] = np.where(np.isin(dtype, ["float16", "bfloat16"]), dtype, "bfloat16")
    return out


def _pick_llms(catalog: Catalog, rng: np.random.Generator) -> pd.DataFrame:
    """Up to ``LLMS_PER_GPU`` LLMs per GPU that fit with room for KV cache, spread over sizes.

    The fitting LLMs of a GPU are cut into ``LLMS_PER_GPU`` size bands; from each band the LLM
    used least so far is taken (ties broken by a seeded shuffle), so most LLMs appear somewhere.
    """
    llms = _candidate_llms(catalog)
    order = rng.permutation(len(llms))
    used = np.zeros(len(llms))
    longest_in, longest_out = max(TOKEN_LENGTHS, key=sum)
    pairs = []
    for gpu in catalog.gpus["gpu"]:
        probe = llms[["model", "dtype"]].assign(
            gpu=gpu, scenario="offline", input_tokens=longest_in, output_tokens=longest_out
        )
        fits = (build_features(probe, catalog)["max_concurrent_seqs"] >= MIN_KV_SEQS).to_numpy()
        index = np.flatnonzero(fits)
        index = index[np.argsort(llms["params_b"].to_numpy()[index], kind="stable")]
        for band in np.array_split(index, min(LLMS_PER_GPU, len(index))) if len(index) else []:
            best = band[np.lexsort((order[band], used[band]))[0]]
            used[best] += 1
            pairs.append((gpu, llms.at[best, "model"], llms.at[best, "dtype"]))
    return pd.DataFrame(pairs, columns=["gpu", "model", "dtype"])


def simulate(
    catalog: Catalog, seed: int = 0, constants: PhysicalConstants = DEFAULT_CONSTANTS
) -> pd.DataFrame:
    """Generate a measurement set: every catalogue GPU, most dense LLMs, both scenarios.

    Single GPU, engine vllm; offline at ``OFFLINE_BATCH_SIZES``, server at ``SERVER_RATES_RPS``
    (Poisson), each (GPU, LLM) pair at one of ``TOKEN_LENGTHS`` drawn at random (a size that
    keeps a tuning trial's 28 leave-one-GPU-out fits to seconds); the model's values times
    log-normal noise
    (``POWER_NOISE``, ``ITL_NOISE``), power never above TDP. ``source`` says the rows are
    generated; ``measured_at`` is blank.

    Args:
        catalog: the GPU and LLM catalogues.
        seed: seeds the choice of LLMs per GPU and the noise.
        constants: the model's constants.

    Returns:
        Rows in the measurement schema (``MEASUREMENT_COLUMNS``).

    """
    rng = np.random.default_rng(seed)
    pairs = _pick_llms(catalog, rng)
    loads = [("offline", np.nan, float(b)) for b in OFFLINE_BATCH_SIZES]
    loads += [("server", float(r), np.nan) for r in SERVER_RATES_RPS]
    grid = pd.DataFrame(loads, columns=["scenario", "request_rate_rps", "batch_size"])
    lengths = np.asarray(TOKEN_LENGTHS, dtype=float)[
        rng.integers(0, len(TOKEN_LENGTHS), len(pairs))
    ]
    pairs = pairs.assign(input_tokens=lengths[:, 0], output_tokens=lengths[:, 1])
    rows = pairs.merge(grid, how="cross")
    rows["engine"] = "vllm"
    rows["num_gpus"] = 1.0
    features = build_features(rows, catalog)
    pred = predict(features, constants)
    tdp = features["gpu_tdp_w"].to_numpy(dtype=float)
    itl_noise = np.exp(rng.normal(0.0, ITL_NOISE, len(rows)))
    rows["mean_power_w"] = np.minimum(
        pred["power_w"] * np.exp(rng.normal(0.0, POWER_NOISE, len(rows))), tdp
    )
    rows["itl_s"] = pred["itl_s"] * itl_noise
    rows["ttft_s"] = pred["ttft_s"] * itl_noise
    rows["throughput_tok_s"] = pred["throughput_tok_s"] / itl_noise
    rows["energy_per_token_j"] = rows["mean_power_w"] * rows["num_gpus"] / rows["throughput_tok_s"]
    rows["source"] = _generated_source(seed)
    rows["measured_at"] = ""
    return rows[list(MEASUREMENT_COLUMNS)]


def write_simulated(path: Path, catalog: Catalog, seed: int = 0) -> int:
    """Write ``simulate(catalog, seed)`` to the CSV ``path`` and return its number of rows."""
    frame = simulate(catalog, seed)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)
    return len(frame)
