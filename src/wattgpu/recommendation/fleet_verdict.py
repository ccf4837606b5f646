"""The fleet answer in one line: the best fleet with its numbers, or why there is none."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from wattgpu.recommendation.ranking import limits_text


def fleet_name(row: Mapping[str, Any]) -> str:
    """``3 × 2 × NVIDIA H100 SXM5 (TP 2)``; at TP 1, ``3 × NVIDIA L4``."""
    if row["tp"] == 1:
        return f"{row['replicas']:.0f} × {row['gpu']}"
    return f"{row['replicas']:.0f} × {row['tp']:.0f} × {row['gpu']} (TP {row['tp']:.0f})"


def fleet_verdict(table: pd.DataFrame, request: Mapping[str, Any]) -> str:
    """One line: the best fleet (its peak, mean GPUs, energy, cost, what binds) or why none.

    ``request``: the answer's ``attrs["request"]`` (limits, percentile, load, ``max_gpus``).
    """
    limits = limits_text(
        request.get("itl_slo_ms"), request.get("ttft_slo_ms"), request.get("slo_percentile", 50)
    )
    best = table[table["rank"] == 1]
    if len(best):
        return _best_line(best.iloc[0], request, limits)
    with_fleet = table[table["gpus"].notna()] if "gpus" in table else table.iloc[:0]
    if len(with_fleet):
        closest = with_fleet.sort_values(["gpus", "energy_j_per_token"]).iloc[0]
        return (
            f"no fleet meets {limits or 'the load'} within {request.get('max_gpus')} GPUs; "
            f"closest: {fleet_name(closest)} ({closest['reason']})"
        )
    tp = tuple(request.get("tp") or (1,))
    if (table["min_tp"] <= max(tp)).any():  # held, but one replica misses a limit at any load
        first = table.iloc[0]
        return (
            f"no GPU can serve {limits or 'the load'}; closest: {first['gpu']} ({first['reason']})"
        )
    sizes = table["min_tp"].dropna()
    if sizes.empty:
        largest = table.loc[table["memory_gb"].idxmax()]
        return (
            f"no GPU holds the model, even 64 to a replica: {largest['gpu']}'s {largest['reason']}"
        )
    smallest = table.loc[sizes.sort_values(kind="stable").index[0]]
    size = f"{smallest['min_tp']:.0f}"
    return (
        f"no GPU holds the model at TP {', '.join(str(t) for t in tp)}: the smallest size that "
        f"would is TP {size} ({size} x {smallest['gpu']}); allow it with --tp"
    )


def _best_line(row: pd.Series, request: Mapping[str, Any], limits: str) -> str:
    """``Best: 3 × 2 × GPU (TP 2) at the 18:00 peak, 4.1 GPUs on average, kWh, J/token, ...``."""
    flat = pd.isna(row["peak_hour"])  # the same load every hour: no peak
    when = "all day" if flat else f"at the {int(row['peak_hour']):02d}:00 peak"
    parts = [
        f"{row['mean_gpus']:.3g} GPU{'' if row['mean_gpus'] == 1 else 's'} on average",
        f"{row['energy_kwh_per_day']:.3g} kWh/day",
        f"{row['energy_j_per_token']:.3g} J/token",
    ]
    if "usd_per_day" in row and pd.notna(row["usd_per_day"]):
        parts.append(f"${row['usd_per_day']:.4g}/day (${row['usd_per_1m_tokens']:.3g}/1M tokens)")
    capacity, unit = _capacity(row)
    held = f"one replica holds {capacity:.3g} {unit}"
    if limits:
        held += f" under {limits}"
    binds = row["binding_slo"]
    held += f"; {'memory' if binds == 'memory' else binds.upper()} binds" if binds != "none" else ""
    return f"Best: {fleet_name(row)} {when}, {', '.join(parts)} ({held})"


def _capacity(row: pd.Series) -> tuple[float, str]:
    if "capacity_users" in row:
        return float(row["capacity_users"]), "users"
    return float(row["capacity_rps"]), "req/s"
