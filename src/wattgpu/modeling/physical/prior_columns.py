"""The pipeline's last stage: the prior answers that each target is the log-ratio to.

``with_prior`` runs the serving stage (``regimes``: the closed-form model, whose step
``operations`` describes, ``costs`` prices and ``step`` adds up) and turns its answer into the
columns the targets and the trees read: the prior power, ITL and TTFT, the engine's host-side
floor and the power of a GPU that waits for it, and the sequences decoding together.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.modeling.physical import physics
from wattgpu.modeling.physical.columns import (
    Columns,
    Rows,
    as_given,
    column_as_given,
    columns_of,
    count,
    filled,
    floats,
    get,
    map_unique,
)
from wattgpu.modeling.physical.itl import median_itl_of
from wattgpu.modeling.physical.operations import expected_experts
from wattgpu.modeling.physical.physics import ENGINE_MAX_BATCH
from wattgpu.modeling.physical.regimes import serving_model_columns
from wattgpu.modeling.physical.workload import engine_year_of


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
    return as_given(prior_columns(columns_of(rows), constants, floors, effects, ttft), rows)


def prior_columns(
    columns: Columns,
    constants: physics.PhysicalConstants = physics.DEFAULT_CONSTANTS,
    floors: dict[str, float] | None = None,
    effects: physics.EngineEffects | None = None,
    ttft: physics.TtftTerms | None = None,
) -> Columns:
    """``with_prior`` on columns: a new dict, ``columns`` untouched."""
    out = dict(columns)
    prior = serving_model_columns(out, constants)
    effects = physics.DEFAULT_ENGINE_EFFECTS if effects is None else effects
    years = out["engine_year"] if "engine_year" in out else engine_year_of(out, count(out))
    out["prior_power_w"] = prior["power_w"]
    # the release year scales the answer's base, never a feature, so that the trees cannot
    # amplify it: a year moves an answer by at most ``physics.MAX_YEAR_EFFECT``
    engine_itl = prior["itl_s"] * np.exp(effects.engine_log_factor(out["engine"]))
    out["prior_itl_s"] = engine_itl * np.exp(effects.year_log_factor(years))
    out["prior_prefill_share"] = prior["prefill_share"]
    if "itl_s" in out:
        out["itl_median_s"] = median_itl_of(out)
    ttft = physics.DEFAULT_TTFT_TERMS if ttft is None else ttft
    out["prior_ttft_s"] = ttft.overhead_s + ttft.prefill_scale * prior_ttft(out, prior["ttft_s"])
    out["concurrency"] = _concurrency(out, prior["concurrency"])
    if "dense_weight_bytes" in out:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["bandwidth_latency_s"] = _bandwidth_latency(out)
    floors = physics.DEFAULT_ENGINE_FLOORS if floors is None else floors
    _add_host_floor(out, engine_itl, floors, constants.idle_fraction)
    return out


def _add_host_floor(
    out: Columns, engine_itl: np.ndarray, floors: Mapping[str, float], idle_fraction: float
) -> None:
    """The engine's host-side floor, the prior power under it and the prior's logs, in place."""
    per_layer = map_unique(out["engine"], lambda e: floors.get(e, np.nan), float)
    per_layer = np.where(np.isnan(per_layer), 0.0, per_layer)
    layers = floats(out["llm_num_layers"])
    out["cpu_floor_s"] = per_layer * np.where(np.isnan(layers), 0.0, layers)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.maximum(engine_itl, out["cpu_floor_s"])
        tdp = floats(out["gpu_tdp_w"])
        idle = idle_fraction * tdp
        busy = engine_itl / step
        out["prior_power_cpu_w"] = idle + (out["prior_power_w"] - idle) * busy
        positive_tdp = np.where(tdp > 0, tdp, np.nan)
        out["log_prior_power_tdp"] = np.log(out["prior_power_w"] / positive_tdp)
        out["log_prior_itl_s"] = np.log(engine_itl)
        out["log_prior_power_cpu_tdp"] = np.log(out["prior_power_cpu_w"] / positive_tdp)
        out["log_prior_itl_cpu_s"] = np.log(step)


def prior_ttft(columns: Mapping[str, np.ndarray], server_ttft: np.ndarray) -> np.ndarray:
    """The TTFT prior before ``TtftTerms``, s.

    A server's comes from the analytical model: its prefill at the FP16 peak, stretched by the
    share of time other prefills hold the GPU, plus a step (a closed loop adds the wait for a
    slot). Offline: the request's own prefill, 2 x active params x input tokens / FP16 FLOP/s,
    plus one decode step (an offline batch's queueing depends on how the engine admits its
    prompts, which no row describes).
    """
    prefill = columns["compute_latency_s"] * floats(columns["input_tokens"])
    own = prefill + columns["prior_itl_s"]
    return np.where(np.isfinite(server_ttft), server_ttft, own)


def concurrency(rows: pd.DataFrame | Columns, server_concurrency: Any) -> Any:
    """Sequences decoded together.

    Offline: the batch (the engine's cap when blank). Server: ``server_concurrency`` (the
    analytical model's Little's-law answer), at least 1. A Series for a frame, an array for
    columns.
    """
    return column_as_given(_concurrency(columns_of(rows), server_concurrency), rows)


def _concurrency(columns: Columns, server_concurrency: Any) -> np.ndarray:
    engine_batch = np.minimum(ENGINE_MAX_BATCH, np.maximum(columns["max_concurrent_seqs"], 1.0))
    offline = filled(floats(columns["batch_size"]), engine_batch)
    server = np.maximum(np.asarray(server_concurrency, dtype=float), 1.0)
    return np.where(columns["scenario"] == "offline", offline, server).astype(float)


def _bandwidth_latency(out: Columns) -> np.ndarray:
    """Time to read the weights a decode step of the row's ``concurrency`` touches, s."""
    n = count(out)
    hit = expected_experts(
        get(out, "llm_num_experts", n), get(out, "llm_experts_per_token", n), out["concurrency"]
    )
    expert = floats(out.get("expert_weight_bytes", np.zeros(n)))
    read = floats(out["dense_weight_bytes"]) + np.where(expert > 0, expert * hit, 0.0)
    gpus = np.maximum(floats(out["num_gpus"]), 1.0)
    return read / (floats(out["gpu_memory_bandwidth_gb_s"]) * 1e9 * gpus)
