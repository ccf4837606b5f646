"""``wattgpu recommend --fleet``: the fleet options, the fleet table and the day's chart.

Fleets rank GPU x tensor parallel x replicas for a server's day (``recommendation.fleets``);
this module only parses the options and renders the answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import click
import pandas as pd

FLEET_OPTIONS = ("fleet", "tp", "max_gpus", "scaling", "rank_by")
# What the table format shows of a fleet answer (JSON and CSV carry every column).
FLEET_TABLE_COLUMNS = {
    "rank": "rank",
    "gpu": "GPU",
    "tp": "TP",
    "replicas": "replicas",
    "gpus": "GPUs",
    "mean_gpus": "mean GPUs",
    "gpu_hours_per_day": "GPU-h/day",
    "capacity_rps": "req/s per replica",
    "capacity_users": "users per replica",
    "binding_slo": "binds",
    "power_w": "W/GPU",
    "energy_kwh_per_day": "kWh/day",
    "energy_j_per_token": "J/token",
    "usd_per_day": "$/day",
    "usd_per_1m_tokens": "$/1M tokens",
    "reason": "no fleet because",
}
# The fleets the chart draws, best first.
CHARTED = 5


def fleet_options(func: Any) -> Any:
    """``--fleet``, ``--tp``, ``--max-gpus``, ``--scaling``, ``--rank-by``."""
    options = [
        click.option(
            "--fleet",
            is_flag=True,
            help="Size fleets (GPU x tensor parallel x replicas) for the load instead of one "
            "GPU serving all of it; implied by the options below.",
        ),
        click.option(
            "--tp",
            default=None,
            help="Tensor-parallel sizes a replica may use, comma-separated powers of two from 1 "
            "to 64 (default 1,2,4,8).",
        ),
        click.option(
            "--max-gpus", type=int, default=None, help="The most GPUs a fleet may have (64)."
        ),
        click.option(
            "--scaling",
            default=None,
            help="static: the peak's replicas all day (default); hourly: those each hour needs.",
        ),
        click.option(
            "--rank-by",
            default=None,
            help="energy: J per token (default); cost: $ per 1M tokens (needs --price-file).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def fleet_request(options: dict[str, Any]) -> dict[str, Any] | None:
    """The fleet options, taken out of ``options``; ``None`` where none was given."""
    given = {k: options.pop(k, None) for k in FLEET_OPTIONS}
    if not given["fleet"] and all(given[k] is None for k in FLEET_OPTIONS[1:]):
        return None
    tp = given["tp"]
    sizes = [t.strip() for t in tp.split(",")] if isinstance(tp, str) else tp
    return {"tp": sizes, **{k: given[k] for k in ("max_gpus", "scaling", "rank_by")}}


def _cell(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e6:
            return f"{value:.0f}"
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def format_fleet_table(table: pd.DataFrame) -> str:
    """The fleets as aligned text columns, best first (the columns of ``FLEET_TABLE_COLUMNS``)."""
    columns = [c for c in FLEET_TABLE_COLUMNS if c in table.columns]
    cells = [[FLEET_TABLE_COLUMNS[c] for c in columns]]
    cells += [[_cell(row[c]) for c in columns] for row in table.to_dict("records")]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    text = [c in ("gpu", "reason", "binding_slo") for c in columns]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if left else cell.rjust(width)
            for cell, width, left in zip(row, widths, text, strict=True)
        ).rstrip()
        for row in cells
    )


def fleet_headline(request: Mapping[str, Any]) -> str:
    """How the fleets were sized: ``fleets of TP 1, 2, 4, 8, up to 64 GPUs, static scaling``."""
    sizes = ", ".join(str(t) for t in request.get("tp", ()))
    return (
        f"fleets of TP {sizes}, up to {request.get('max_gpus')} GPUs, "
        f"{request.get('scaling')} scaling, ranked by {request.get('rank_by')}"
    )


def fleet_chart(table: pd.DataFrame) -> Any:
    """The day's GPUs and fleet power, hour by hour, of the first ``CHARTED`` fleets."""
    from wattgpu.lifecycle import plots

    candidates = table.attrs.get("candidates", pd.DataFrame())
    fig = plots.figure(8, 6)
    gpus_ax, power_ax = fig.subplots(2, 1, sharex=True)
    for row in table[table["rank"].notna()].head(CHARTED).to_dict("records"):
        match = candidates[(candidates["gpu"] == row["gpu"]) & (candidates["tp"] == row["tp"])]
        if match.empty:
            continue
        found = match.iloc[0]
        hours = range(len(found["hourly_gpus"]))
        label = f"{row['gpu'].removeprefix('NVIDIA ')} (TP {row['tp']:.0f})"
        gpus_ax.step(hours, found["hourly_gpus"], where="mid", label=label)
        power_ax.step(hours, found["hourly_power_w"] / 1000.0, where="mid", label=label)
    gpus_ax.set_ylabel("GPUs the load needs")
    power_ax.set_ylabel("fleet power (kW)")
    power_ax.set_xlabel("hour of the day")
    request = table.attrs.get("request", {})
    gpus_ax.set_title(f"{request.get('model', '')}: the day's fleets", fontsize=10)
    gpus_ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
