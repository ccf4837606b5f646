"""A fleet hour by hour: the replicas each hour's load needs, their energy, GPU-hours and cost.

Pure arithmetic over arrays; each row is one candidate (a GPU at a tensor-parallel size ``t``
with its capacity), each column one hour of the day (any number of hours, each 1 h long):

- replicas(h) = ceil(rate(h) / capacity), at least 1: a served model stays up, and an hour
  without requests runs one replica at the trickle rate (``ranking.IDLE_RATE_RPS``);
- the load is spread evenly: each replica that runs serves rate(h) / replicas(h);
- ``static`` (the default) keeps the peak's replicas all day, those an hour does not need
  idling at the trickle's power; ``hourly`` runs only the replicas each hour needs;
- energy counts every GPU of every replica: replicas x t x power per GPU at its load, 1 h each;
- GPU-hours (and cost) follow the policy: static rents the peak's GPUs all day, hourly rents
  what runs; ``mean_gpus`` is the day's mean of the GPUs the load needs, whatever the policy.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SCALING = ("static", "hourly")


def replicas_by_hour(rates: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """``(candidates, hours)`` replicas: ceil(rate / capacity), at least 1 (NaN: no capacity)."""
    rates = np.asarray(rates, dtype=float)[None, :]
    capacity = np.asarray(capacity, dtype=float)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        needed = np.ceil(rates / capacity - 1e-9)  # a load exactly at capacity needs no more
    needed = np.where(capacity > 0, np.maximum(needed, 1.0), np.nan)
    return needed


def per_replica_rates(rates: np.ndarray, replicas: np.ndarray, idle_rate: float) -> np.ndarray:
    """Each running replica's request rate: rate(h) / replicas(h); the trickle where idle."""
    rates = np.asarray(rates, dtype=float)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = rates / replicas
    return np.where(rates > 0, share, idle_rate)


def fleet_day(
    rates: np.ndarray,
    replicas: np.ndarray,
    tp: np.ndarray,
    busy_power_w: np.ndarray,
    idle_power_w: np.ndarray,
    output_tokens: float,
    scaling: str = "static",
    usd_per_gpu_hour: np.ndarray | None = None,
    tokens_per_s: np.ndarray | None = None,
) -> pd.DataFrame:
    """The day of each candidate's fleet under ``scaling``.

    Args:
        rates: ``(hours,)`` request rate of each hour, req/s.
        replicas: ``(candidates, hours)`` replicas each hour needs (``replicas_by_hour``).
        tp: ``(candidates,)`` GPUs per replica.
        busy_power_w: ``(candidates, hours)`` power per GPU of a running replica at its load.
        idle_power_w: ``(candidates,)`` power per GPU of an idle replica (the trickle's).
        output_tokens: mean output tokens per request.
        scaling: ``static`` or ``hourly``.
        usd_per_gpu_hour: ``(candidates,)`` price of one GPU an hour (NaN: unpriced).
        tokens_per_s: ``(candidates,)`` output tokens/s where ``rates`` do not give them (a
            closed loop's users: their tokens follow from the ITL); default: rate x tokens.

    Returns:
        One row per candidate: ``replicas`` and ``gpus`` at the peak, ``peak_hour`` (the
        first of the busiest hours, counted from 0; NaN for the same load every hour),
        ``mean_gpus``, ``gpu_hours_per_day``,
        ``fleet_power_w`` (the day's mean), ``power_w`` (per rented GPU, the day's mean),
        ``energy_kwh_per_day``, ``tokens_per_s``, ``energy_j_per_token``, and with prices
        ``usd_per_day`` and ``usd_per_1m_tokens``.

    """
    if scaling not in SCALING:
        raise ValueError(f"scaling must be one of {', '.join(SCALING)}; got {scaling!r}")
    rates = np.asarray(rates, dtype=float)
    tp = np.asarray(tp, dtype=float)[:, None]
    hours = rates.size
    peak = np.nanmax(replicas, axis=1)
    running = replicas if scaling == "hourly" else np.broadcast_to(peak[:, None], replicas.shape)
    idle = running - replicas  # replicas kept up but not needed this hour
    wh = (replicas * busy_power_w + idle * np.asarray(idle_power_w, float)[:, None]) * tp
    energy_kwh = wh.sum(axis=1) / 1000.0
    gpu_hours = (running * tp).sum(axis=1)
    if tokens_per_s is None:
        day_tokens = np.full(len(tp), (rates * 3600.0 * output_tokens).sum())
    else:
        day_tokens = np.asarray(tokens_per_s, dtype=float) * 3600.0 * hours
    out = pd.DataFrame(
        {
            "replicas": peak,
            "gpus": peak * tp[:, 0],
            "peak_hour": np.nan if (rates == rates[0]).all() else float(np.argmax(rates)),
            "mean_gpus": (replicas * tp).mean(axis=1),
            "gpu_hours_per_day": gpu_hours,
            "fleet_power_w": energy_kwh * 1000.0 / hours,
            "power_w": energy_kwh * 1000.0 / gpu_hours,
            "energy_kwh_per_day": energy_kwh,
            "tokens_per_s": day_tokens / (hours * 3600.0),
            "energy_j_per_token": energy_kwh * 3.6e6 / day_tokens,
        }
    )
    if usd_per_gpu_hour is not None:
        usd_per_day = np.asarray(usd_per_gpu_hour, dtype=float) * gpu_hours
        out["usd_per_day"] = usd_per_day
        out["usd_per_1m_tokens"] = usd_per_day / day_tokens * 1e6
    return out
