"""How many of which GPU: fleets of GPU x tensor parallel x replicas for a day's load, ranked.

``size_fleets`` is the pure core (catalogue, load and a predictor in; no MLflow, files or
network): every GPU at every allowed tensor-parallel size that holds the LLM is a candidate
(:mod:`~wattgpu.recommendation.replicas`), its capacity found under every limit, its fleet
laid out hour by hour (:mod:`~wattgpu.recommendation.fleet`) with power predicted per GPU at
each replica's share of the load. Per GPU the size that needs the least energy per token (or
cost, ``rank_by="cost"``) is kept, and the GPUs are ranked on it. ``attrs["candidates"]`` holds
every candidate's row, ``attrs["hourly"]`` the kept fleets' GPUs and power by the hour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.kernel_paths import NO_KERNEL
from wattgpu.errors import QueryError
from wattgpu.modeling.answering.configs import CONFIG_FIELD, config_columns
from wattgpu.modeling.answering.queries import ENGINE_FIELDS
from wattgpu.recommendation.capacity import rate_grid, user_grid
from wattgpu.recommendation.fleet import SCALING, fleet_day, per_replica_rates, replicas_by_hour
from wattgpu.recommendation.ranking import (
    HOURS,
    IDLE_RATE_RPS,
    MEDIAN,
    Predictor,
    ask_checked,
    check_percentile,
    latency_name,
)
from wattgpu.recommendation.replicas import (
    DEFAULT_TP,
    TP_SIZES,
    candidates,
    capacities,
    check_tp,
)

DEFAULT_MAX_GPUS = 64
RANK_BY = ("energy", "cost")
# Every column of a fleet answer, in order, with its meaning.
FLEET_COLUMNS = {
    "rank": "1 = least energy per output token (or cost, --rank-by cost) among the fleets",
    "gpu": "catalogue name",
    "tp": "tensor-parallel size: GPUs per replica",
    "replicas": "replicas at the peak",
    "gpus": "GPUs at the peak: replicas x tp",
    "peak_hour": "the busiest hour (the first of them), 0-23; blank: the same load all day",
    "mean_gpus": "the day's mean of the GPUs the load needs each hour, whatever the policy",
    "gpu_hours_per_day": "GPU-hours rented: the peak's GPUs all day (static), or what runs",
    "capacity": (
        "one replica's highest load within every limit, every lower load too: capacity_rps "
        "(req/s), or capacity_users for a closed loop"
    ),
    "binding_slo": "the limit that sets the capacity: itl, ttft, memory (KV cache or batch)",
    "power_w": "mean power per rented GPU over the day",
    "fleet_power_w": "mean power of the whole fleet over the day",
    "energy_kwh_per_day": "energy of every GPU of every replica, kWh a day",
    "energy_j_per_token": "fleet energy per output token, J",
    "tokens_per_s": "output tokens/s, the day's mean",
    "usd_per_day": "cost of the GPU-hours rented (only with prices)",
    "usd_per_1m_tokens": "cost per million output tokens (only with prices)",
    "weights_gb": "weights in the format served, all GPUs of a replica together",
    "memory_gb": "memory of one GPU",
    "reason": "why the GPU has no fleet ('' when it has)",
    "min_tp": "the smallest tensor-parallel size whose GPUs hold the weights and one sequence",
}
FLEET_PRICE_COLUMNS = ("usd_per_day", "usd_per_1m_tokens")
# The columns a fleet's day adds (``fleet.fleet_day``'s, with prices).
DAY_COLUMNS = (
    "replicas",
    "gpus",
    "peak_hour",
    "mean_gpus",
    "gpu_hours_per_day",
    "fleet_power_w",
    "power_w",
    "energy_kwh_per_day",
    "tokens_per_s",
    "energy_j_per_token",
    *FLEET_PRICE_COLUMNS,
)


def checked_fleet(
    fleet: Mapping[str, Any], scenario: str, names: Callable[[str], str], priced: bool = True
) -> dict[str, Any]:
    """The fleet's options checked, with their defaults: ``tp``, ``max_gpus``, ``scaling``, ...

    ``rank_by`` too, and ``fleet`` (True). ``names``: what a message calls each option;
    ``priced``: whether prices were given (``rank_by`` cost needs them).

    Raises:
        QueryError: naming the option and what is allowed.

    """
    if scenario != "server":
        raise QueryError(f"fleets serve a server's load; got {names('scenario')} {scenario}")
    tp = fleet.get("tp")
    sizes = check_tp(DEFAULT_TP if tp is None else tp, names("tp"))
    max_gpus = DEFAULT_MAX_GPUS if fleet.get("max_gpus") is None else fleet["max_gpus"]
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int | np.integer) or max_gpus < 1:
        raise QueryError(f"{names('max_gpus')} must be a whole number from 1; got {max_gpus!r}")
    chosen = {"scaling": fleet.get("scaling") or "static", "rank_by": fleet.get("rank_by")}
    chosen["rank_by"] = chosen["rank_by"] or "energy"
    for key, allowed in (("scaling", SCALING), ("rank_by", RANK_BY)):
        if chosen[key] not in allowed:
            raise QueryError(
                f"{names(key)} must be one of {', '.join(allowed)}; got {chosen[key]!r}", key
            )
    if chosen["rank_by"] == "cost" and not priced:
        raise QueryError(f"{names('rank_by')} cost needs prices: give {names('prices')}")
    return {"fleet": True, "tp": sizes, "max_gpus": int(max_gpus), **chosen}


def fleets_for(
    request: Mapping[str, Any],
    sizing: Mapping[str, Any],
    *,
    catalog: Catalog,
    predictor: Predictor,
    strict: bool = False,
) -> pd.DataFrame:
    """``size_fleets`` for a checked request (``recommend``'s) and checked fleet options."""
    workload = {k: request[k] for k in ("scenario", "input_tokens", "output_tokens")}
    workload |= dict(request["setup"])
    if request.get("model_config") is not None:
        workload[CONFIG_FIELD] = request["model_config"]
    return size_fleets(
        request["model"],
        catalog,
        predictor,
        load=request["load"],
        concurrency=request["concurrency"],
        slos={"itl": request["itl_slo_ms"], "ttft": request["ttft_slo_ms"]},
        workload=workload,
        gpus=request["gpus"],
        prices=request["prices"],
        **{k: sizing[k] for k in ("tp", "max_gpus", "scaling", "rank_by")},
        slo_percentile=request["slo_percentile"],
        strict=strict,
    )


def size_fleets(
    model: str,
    catalog: Catalog,
    predictor: Predictor,
    *,
    load: pd.DataFrame | None = None,
    concurrency: float | None = None,
    slos: Mapping[str, float | None],
    workload: Mapping[str, Any],
    gpus: Sequence[str] | None = None,
    prices: Mapping[str, float] | None = None,
    tp: Sequence[int] = DEFAULT_TP,
    max_gpus: int = DEFAULT_MAX_GPUS,
    scaling: str = "static",
    rank_by: str = "energy",
    slo_percentile: int = MEDIAN,
    strict: bool = False,
) -> pd.DataFrame:
    """Rank the fleets that serve ``model`` under ``slos`` and a day's load (pure).

    Args:
        model: canonical LLM id (or the name a config describes, in ``workload``).
        catalog: both catalogues.
        predictor: ``(queries, target) -> predictions``.
        load: the day's load (24 rows of hour and rate), or ``None`` with ``concurrency``.
        concurrency: users of a closed loop, all day (instead of ``load``).
        slos: ``itl`` and ``ttft`` targets, ms (``None``: not held).
        workload: what every query states: scenario, tokens, the engine, the client and its
            knobs, a config (``model_config``).
        gpus: canonical GPU names (default: the catalogue).
        prices: canonical GPU name -> $ per GPU-hour.
        tp: tensor-parallel sizes a replica may use.
        max_gpus: the most GPUs a fleet may have at its peak.
        scaling: ``static`` (the peak's replicas all day) or ``hourly``.
        rank_by: ``energy`` (J per token) or ``cost`` ($ per million tokens; needs prices).
        slo_percentile: the percentile the targets hold at.
        strict: hold the ITL target at the upper end of its interval.

    Returns:
        One row per GPU (``FLEET_COLUMNS``; prices only with prices), ranked fleets first.

    """
    check_percentile(slo_percentile)
    if (load is None) == (concurrency is None):
        raise QueryError("a fleet needs one load: a day's rates or concurrent users", "rate")
    names = list(dict.fromkeys(gpus)) if gpus else [str(g) for g in catalog.gpus.index]
    queries = {"model": model, **workload}
    sized = {k: v for k, v in queries.items() if k in (*ENGINE_FIELDS, "scenario", "model")}
    sized |= {k: queries[k] for k in ("input_tokens", "output_tokens") if k in queries}
    sized |= _config_columns(queries)
    every = candidates(catalog, names, TP_SIZES, sized)  # every size, for what would hold
    found = every[every["tp"].isin(list(tp))].reset_index(drop=True)
    held = found[found["holds"]]
    closed = concurrency is not None
    day = np.array([concurrency]) if closed else load["rate"].to_numpy(float)
    limits = capacities(
        held,
        predictor,
        queries,
        slos,
        closed=closed,
        percentile=slo_percentile,
        strict=strict,
        day=day,
    )
    found = found.join(limits)
    day = _fleets(found, predictor, queries, load, concurrency, scaling, prices)
    found = found.join(day)
    found["reason"] = _reasons(found, max_gpus, closed, slos, slo_percentile)
    table = _kept(found, every, rank_by, prices is not None)
    table = table.rename(columns={"capacity": "capacity_users" if closed else "capacity_rps"})
    table.attrs["candidates"] = found
    return table


def _config_columns(queries: Mapping[str, Any]) -> dict[str, Any]:
    """The catalogue columns of an LLM a config describes (none for a catalogue LLM)."""
    config = queries.get(CONFIG_FIELD)
    return config_columns(config) if config is not None else {}


def _fleets(
    found: pd.DataFrame,
    predictor: Predictor,
    queries: Mapping[str, Any],
    load: pd.DataFrame | None,
    concurrency: float | None,
    scaling: str,
    prices: Mapping[str, float] | None,
) -> pd.DataFrame:
    """Each candidate with a capacity: its fleet's day (``fleet.fleet_day``'s columns)."""
    rows = found[(found["capacity"] > 0).fillna(False).to_numpy(bool)]
    if rows.empty:  # no fleet at all: every column of one, blank
        return pd.DataFrame(np.nan, index=found.index, columns=list(DAY_COLUMNS))
    closed = concurrency is not None
    rates = np.full(HOURS, float(concurrency)) if closed else load["rate"].to_numpy(float)
    replicas = replicas_by_hour(rates, rows["capacity"].to_numpy(float))
    shares = per_replica_rates(rates, replicas, IDLE_RATE_RPS)
    if closed:  # users are whole: the first replicas take one more where they do not divide
        shares = np.ceil(shares - 1e-9)
    busy = _asked(rows, predictor, queries, shares, closed, "power")
    idle = np.zeros(len(rows))
    tokens_per_s = None
    if closed:
        itl_s = _asked(rows, predictor, queries, shares[:, :1], closed, "itl")[:, 0] / 1000.0
        tokens_per_s = float(concurrency) / itl_s
    else:
        idle = _asked(
            rows, predictor, queries, np.full((len(rows), 1), IDLE_RATE_RPS), False, "power"
        )[:, 0]
    price = None
    if prices is not None:
        price = rows["gpu"].map(dict(prices)).to_numpy(float)
    output_tokens = float(queries["output_tokens"])
    day = fleet_day(
        rates,
        replicas,
        rows["tp"].to_numpy(float),
        busy,
        idle,
        output_tokens,
        scaling,
        price,
        tokens_per_s,
    )
    day.index = rows.index
    day["hourly_gpus"] = list(replicas * rows["tp"].to_numpy(float)[:, None])
    running = replicas if scaling == "hourly" else np.nanmax(replicas, axis=1, keepdims=True)
    watts = (replicas * busy + (running - replicas) * idle[:, None]) * rows["tp"].to_numpy(float)[
        :, None
    ]
    day["hourly_power_w"] = list(watts)
    return day


def _asked(
    rows: pd.DataFrame,
    predictor: Predictor,
    queries: Mapping[str, Any],
    loads: np.ndarray,
    closed: bool,
    target: str,
) -> np.ndarray:
    """``target``'s median for each candidate at each of its loads, asked once per distinct one."""
    frame = pd.DataFrame(
        {
            "gpu": np.repeat(rows["gpu"].to_numpy(object), loads.shape[1]),
            "num_gpus": np.repeat(rows["tp"].to_numpy(float), loads.shape[1]),
            "load": loads.reshape(-1),
        }
    )
    distinct = frame.drop_duplicates().reset_index(drop=True)
    column = "concurrency" if closed else "request_rate_rps"
    asked = distinct.rename(columns={"load": column}).assign(**queries)
    answer = ask_checked(predictor, asked, target)["prediction"].to_numpy(float)
    found = frame.merge(distinct.assign(answer=answer), on=["gpu", "num_gpus", "load"], how="left")
    return found["answer"].to_numpy(float).reshape(loads.shape)


def _reasons(
    found: pd.DataFrame,
    max_gpus: int,
    closed: bool,
    slos: Mapping[str, float | None],
    percentile: int = MEDIAN,
) -> list[str]:
    """Why each candidate has no fleet ('' where it has)."""
    unit = "users" if closed else "req/s"
    lowest = (user_grid() if closed else rate_grid())[0]
    out = []
    for row in found.to_dict("records"):
        if row["kernel_path"] == NO_KERNEL:
            capability = float(row["gpu_compute_capability"])
            reason = f"no engine runs {row['dtype']} weights on compute capability {capability:.1f}"
        elif not row["holds"]:
            reason = (
                f"weights {row['weight_bytes'] / 1e9:.1f} GB and one sequence's KV cache do not "
                f"fit {row['tp']} x {row['gpu_memory_gb']:g} GB"
            )
        elif not row["capacity"] > 0:
            limit = row["binding_slo"]
            what = (
                f"{latency_name(limit.upper(), percentile)} ≤ {slos[limit]:g} ms"
                if limit in slos
                else "its memory"
            )
            reason = f"one replica misses {what} even at {lowest:g} {unit}"
        elif row["gpus"] > max_gpus:
            reason = f"needs {row['gpus']:.0f} GPUs at the peak, more than {max_gpus}"
        else:
            reason = ""
        out.append(reason)
    return out


def _kept(found: pd.DataFrame, every: pd.DataFrame, rank_by: str, priced: bool) -> pd.DataFrame:
    """Per GPU the fleet kept (least energy or cost; then fewest GPUs), ranked, or why none.

    A GPU without a fleet shows the candidate that came closest: the fewest GPUs, then the most
    capacity; where no allowed size holds the LLM, the reason names the smallest that would.
    """
    key = "usd_per_1m_tokens" if rank_by == "cost" else "energy_j_per_token"
    found = found.assign(
        weights_gb=found["weight_bytes"] / 1e9,
        memory_gb=found["gpu_memory_gb"].astype(float),
        _key=found[key] if key in found.columns else np.nan,
    )
    served = (found["reason"] == "") & found["_key"].notna()
    order = found.assign(_unserved=~served, _capacity=-found["capacity"].fillna(-1.0))
    order = order.sort_values(
        ["gpu", "_unserved", "_key", "gpus", "_capacity", "tp"], na_position="last"
    )
    kept = order.drop_duplicates("gpu").set_index("gpu")
    kept["min_tp"] = _smallest_holding(every).reindex(kept.index)
    unheld = ~kept["holds"].astype(bool) & (kept["kernel_path"] != NO_KERNEL)
    kept.loc[unheld, "reason"] = [_unheld(row) for _, row in kept[unheld].iterrows()]
    kept["rank"] = pd.array([pd.NA] * len(kept), dtype="Int64")
    # ties (one energy on two GPUs): the fewer GPUs, then the more capacity (the faster GPU)
    ranked = kept[(kept["reason"] == "") & kept["_key"].notna()]
    ranked = ranked.assign(_faster=-ranked["capacity"]).sort_values(["_key", "gpus", "_faster"])
    kept.loc[ranked.index, "rank"] = np.arange(1, len(ranked) + 1)
    kept.loc[(kept["reason"] == "") & kept["_key"].isna(), "reason"] = f"no {key} (no price)"
    for column in ("peak_hour", "replicas", "gpus", "tp"):  # whole numbers, blank where none
        kept[column] = kept[column].round().astype("Int64")
    columns = [c for c in FLEET_COLUMNS if priced or c not in FLEET_PRICE_COLUMNS]
    kept = kept.reset_index()
    kept = kept.assign(_order=kept["rank"].astype(float).fillna(np.inf))
    kept = kept.sort_values(["_order", "min_tp", "gpu"], kind="stable", na_position="last")
    return kept[columns].reset_index(drop=True)


def _unheld(row: pd.Series) -> str:
    """Why no allowed size holds the LLM, naming the smallest that would (if one up to 64)."""
    weights = f"weights {row['weights_gb']:.1f} GB and one sequence's KV cache"
    memory = f"{row['memory_gb']:g} GB"
    if pd.isna(row["min_tp"]):
        return f"{weights} do not fit even {TP_SIZES[-1]} x {memory}"
    return f"{weights} need TP {row['min_tp']:.0f} ({row['min_tp']:.0f} x {memory})"


def _smallest_holding(every: pd.DataFrame) -> pd.Series:
    """Per GPU, the smallest tensor-parallel size that holds the LLM (NaN: none up to 64)."""
    holding = every[every["holds"]]
    return holding.groupby("gpu")["tp"].min().astype(float)
