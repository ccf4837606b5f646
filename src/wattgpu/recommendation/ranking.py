"""The pure core of the recommendation: rank the GPUs for one LLM and load, and say the verdict.

``rank_gpus`` takes the catalogue, the day's load and a predictor, and returns one row per GPU
(the columns of ``COLUMNS``) with memory fit, power, ITL, energy, cost and rank; no MLflow,
files or network. The predictor is any callable ``(queries, target) -> predictions`` with the
columns of ``wattgpu.modeling.answering.inference.predict_queries`` (``prediction``, ``lower``,
``upper``, ``warnings``; power in W, ITL in ms), one row per query in order; the arithmetic is
documented in :mod:`wattgpu.recommendation`. ``verdict`` says the answer in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.kernel_paths import NO_KERNEL
from wattgpu.errors import ConfigError, QueryError
from wattgpu.modeling.answering.configs import CONFIG_FIELD, config_columns
from wattgpu.modeling.answering.domain import memory_fits
from wattgpu.modeling.answering.queries import ENGINE_FIELDS, SETUP_FIELDS, show
from wattgpu.modeling.answering.tails import PERCENTILES, TAILED
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.physics import ENGINE_MAX_BATCH
from wattgpu.modeling.physical.sizes import KV_CACHE_MEMORY_SHARE
from wattgpu.modeling.physical.workload import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS

# ``(queries, target) -> answers``, one row per query in order, as ``wattgpu predict`` answers.
Predictor = Callable[[pd.DataFrame, str], pd.DataFrame]

IDLE_RATE_RPS = 0.01
HOURS = 24
# The percentiles the latency targets may be held at: 50 is the median the models predict, 90
# and 99 their tails (``answering.tails``).
SLO_PERCENTILES = (50, 90, 99)
MEDIAN = SLO_PERCENTILES[0]
# Every column of the answer, in order, with its meaning (the CLI's --help and README use this).
COLUMNS = {
    "rank": "1 = least energy per output token among the GPUs that fit and meet the SLO",
    "gpu": "catalogue name",
    "memory_gb": "GPU memory",
    "fits": "weights and the load's KV cache fit in memory",
    "weights_gb": "weights in the checkpoint's format (or --dtype), all experts",
    "concurrent_seqs": "sequences in flight at the busiest hour (server) or the engine's batch",
    "kv_cache_gb": "KV cache of those sequences at full length (input + output tokens)",
    "power_w": "predicted mean power (time-averaged over the day for a profile)",
    "power_lower_w": "lower end of the power interval",
    "power_upper_w": "upper end of the power interval",
    "power_novelty": "what the power interval is calibrated for (as itl_novelty)",
    "itl_ms": "predicted inter-token latency (the worst hour for a profile)",
    "itl_lower_ms": "lower end of the ITL interval",
    "itl_upper_ms": "upper end of the ITL interval",
    "itl_novelty": (
        "what the ITL interval is calibrated for: measured, unseen GPU, unseen LLM, unseen "
        "set-up (why its upper end is as high as it is)"
    ),
    "itl_analogs": (
        "the measurements of the same workload on other GPUs the ITL answer leans on "
        "(blank: none; the physics and the trees alone)"
    ),
    "itl_p90_ms": "ITL p90: itl_ms times the simulated serving loop's p90 / median, worst hour",
    "itl_p99_ms": "ITL p99, as itl_p90_ms",
    "meets_slo": (
        "the ITL at the SLO's percentile (itl_ms, itl_p90_ms or itl_p99_ms) <= the SLO (blank "
        "without an SLO)"
    ),
    "meets_slo_upper": (
        "the same at the upper end of the ITL interval (itl_upper_ms, times the percentile's "
        "ratio to the median) <= the SLO (blank without an SLO)"
    ),
    "ttft_ms": "predicted time to first token, the worst hour (only with a TTFT SLO)",
    "ttft_p90_ms": "TTFT p90, as itl_p90_ms (only with a TTFT SLO)",
    "ttft_p99_ms": "TTFT p99, as itl_p90_ms (only with a TTFT SLO)",
    "meets_ttft_slo": "the TTFT at the SLO's percentile <= the TTFT SLO (only with a TTFT SLO)",
    "tokens_per_s": "output tokens/s: the load's mean (server) or the batch's throughput (offline)",
    "energy_j_per_token": "GPU energy per output token, J",
    "busy_hours": "hours a day the GPU works: 24 for a server; offline, the day's batch work",
    "energy_kwh_per_day": "GPU energy per day for the load, kWh",
    "usd_per_hour": "price (only with prices)",
    "usd_per_day": "cost per day (only with prices)",
    "usd_per_1m_tokens": "cost per million output tokens (only with prices)",
    "cost_rank": "1 = cheapest per token among the ranked GPUs (only with prices)",
    "pareto": "on the power-ITL Pareto front (no other GPU is both lower in power and in ITL)",
    "reason": "why the GPU is not ranked ('' when it is)",
    "warnings": "the models' warnings (query outside the training domain, ...)",
}
PRICE_COLUMNS = ("usd_per_hour", "usd_per_day", "usd_per_1m_tokens", "cost_rank")
TTFT_COLUMNS = ("ttft_ms", "ttft_p90_ms", "ttft_p99_ms", "meets_ttft_slo")


def check_percentile(value: object, name: str = "slo_percentile") -> int:
    """``value`` as one of ``SLO_PERCENTILES``, else ``QueryError`` naming ``name``."""
    if isinstance(value, bool) or value not in SLO_PERCENTILES:
        allowed = ", ".join(str(p) for p in SLO_PERCENTILES)
        raise QueryError(f"{name} must be one of {allowed}; got {show(value)}", "slo_percentile")
    return int(value)  # type: ignore[call-overload]


def at_percentile(column: str, percentile: int) -> str:
    """A latency column at ``percentile``: ``itl_ms`` at 90 is ``itl_p90_ms`` (at 50, itself)."""
    if percentile == MEDIAN:
        return column
    head, _, unit = column.rpartition("_")
    return f"{head}_p{percentile}_{unit}"


def latency_name(name: str, percentile: int = MEDIAN) -> str:
    """A latency at ``percentile`` in words: ``ITL`` (the median), ``ITL p90``."""
    return name if percentile == MEDIAN else f"{name} p{percentile}"


def pareto_front(power: pd.Series, itl: pd.Series) -> pd.Series:
    """True where no other point is at most as high in both and lower in one (NaN: False)."""
    p, t = power.to_numpy(float), itl.to_numpy(float)
    known = np.isfinite(p) & np.isfinite(t)
    front = np.zeros(len(p), bool)
    for i in np.flatnonzero(known):
        others = known & (p <= p[i]) & (t <= t[i]) & ((p < p[i]) | (t < t[i]))
        front[i] = not others.any()
    return pd.Series(front, index=power.index)


def medians_of(predictor: Predictor) -> Predictor:
    """The predictor's form that may leave a latency's tails blank, where it has one.

    A registry's predictor (``model_predictor``) has ``medians``, which simulates no serving
    loop (most of a latency query's time); any other predictor answers in full.
    """
    medians = getattr(predictor, "medians", None)
    return medians if callable(medians) else predictor


def ask_checked(
    predictor: Predictor, queries: pd.DataFrame, target: str, percentile: int = MEDIAN
) -> pd.DataFrame:
    """The predictor's answer to ``queries`` for ``target``, checked: one row per query, in order.

    Raises:
        ConfigError: an answer of the wrong length or order, or a model that lacks what is
            asked of it (the client and engine knobs, the tail at ``percentile``).

    """
    answer = predictor(queries, target).reset_index(drop=True)
    if len(answer) != len(queries):
        raise ConfigError(
            f"the {target} predictor answered {len(answer)} rows for {len(queries)} queries"
        )
    if any(c in queries.columns for c in SETUP_FIELDS) and "client" not in answer.columns:
        raise ConfigError(
            f"the {target} model predates the client and engine knobs and would ignore them: "
            "use a model trained since, or leave them out"
        )
    tail = f"p{percentile}"
    if percentile != MEDIAN and target in TAILED and tail not in answer.columns:
        raise ConfigError(
            f"the {target} model gives no {tail} (a model logged before its tails): rank at "
            f"the median (percentile {MEDIAN}), or use a model trained since"
        )
    if "gpu" in answer.columns and list(answer["gpu"]) != list(queries["gpu"]):
        raise ConfigError(f"the {target} predictor answered the queries out of order")
    if "warnings" not in answer.columns:
        answer["warnings"] = ""
    return answer


def _hourly_predictions(
    preds: dict[str, pd.DataFrame], grid: pd.DataFrame, hourly: pd.DataFrame, scenario: str
) -> pd.DataFrame:
    """One row per (GPU, hour): that hour's rate and the predictions at it."""
    long = grid.rename(columns={"request_rate_rps": "query_rate"}).copy()
    for target, answer in preds.items():
        unit = "w" if target == "power" else "ms"
        long[f"{target}_{unit}"] = answer["prediction"].to_numpy(float)
        long[f"{target}_lower_{unit}"] = answer["lower"].to_numpy(float)
        long[f"{target}_upper_{unit}"] = answer["upper"].to_numpy(float)
        for tail in PERCENTILES if target in TAILED else ():
            found = answer[tail] if tail in answer.columns else pd.Series(np.nan, answer.index)
            long[f"{target}_{tail}_{unit}"] = pd.to_numeric(found).to_numpy(float)
        long[f"{target}_warnings"] = answer["warnings"].fillna("").astype(str).to_numpy()
        # a model logged before the kinds of novelty answers without them
        novelty = answer["novelty"] if "novelty" in answer.columns else pd.Series("", answer.index)
        long[f"{target}_novelty"] = novelty.fillna("").astype(str).to_numpy()
        analogs = answer["analogs"] if "analogs" in answer.columns else pd.Series("", answer.index)
        long[f"{target}_analogs"] = analogs.fillna("").astype(str).to_numpy()
    if scenario != "server":  # offline: one row per GPU, whatever the day's rates
        return long.assign(hour=0, rate=np.nan)
    hours = hourly.assign(query_rate=np.where(hourly["rate"] > 0, hourly["rate"], IDLE_RATE_RPS))
    return hours.merge(long, on="query_rate", how="inner")


def _at_worst_itl(busy: pd.DataFrame, column: str) -> pd.Series:
    """Per GPU, ``column`` at its highest ITL (the hour ``itl_ms`` reports)."""
    if busy.empty:
        return pd.Series(dtype=object)
    worst = busy["itl_ms"].fillna(-np.inf).groupby(busy["gpu"], sort=False).idxmax()
    return pd.Series(busy.loc[worst.to_numpy(), column].to_numpy(), index=worst.index)


def _join_warnings(texts: pd.Series) -> str:
    return "; ".join(dict.fromkeys(w for t in texts for w in t.split("; ") if w))


def _aggregate(
    long: pd.DataFrame, scenario: str, output_tokens: float, day_tokens: float
) -> pd.DataFrame:
    """Per GPU: power and ITL over the day, concurrency, throughput, energy."""
    groups = long.groupby("gpu", sort=False)
    busy = long[~(long["rate"] <= 0)]  # idle hours carry power, not latency
    out = pd.DataFrame(
        {
            "power_w": groups["power_w"].mean(),
            "power_lower_w": groups["power_lower_w"].mean(),
            "power_upper_w": groups["power_upper_w"].mean(),
            "itl_ms": busy.groupby("gpu")["itl_ms"].max(),
            "itl_lower_ms": busy.groupby("gpu")["itl_lower_ms"].max(),
            "itl_upper_ms": busy.groupby("gpu")["itl_upper_ms"].max(),
            **{f"itl_{t}_ms": busy.groupby("gpu")[f"itl_{t}_ms"].max() for t in PERCENTILES},
            # a GPU's kind of novelty is the same at every rate of its day
            "power_novelty": groups["power_novelty"].first(),
            "itl_novelty": groups["itl_novelty"].first(),
            # the analogs of its busiest hour (the ITL the ranking reads)
            "itl_analogs": _at_worst_itl(busy, "itl_analogs"),
            "warnings": long.filter(like="_warnings")
            .agg("; ".join, axis=1)
            .groupby(long["gpu"], sort=False)
            .agg(_join_warnings),
        }
    )
    if "ttft_ms" in long.columns:
        for column in ("ttft_ms", *(f"ttft_{t}_ms" for t in PERCENTILES)):
            out[column] = busy.groupby("gpu")[column].max()
    if scenario == "server":
        # Little's law: requests in flight = arrival rate x time each spends decoding.
        in_flight = busy["rate"] * output_tokens * busy["itl_ms"] / 1000.0
        out["concurrent_seqs"] = np.ceil(in_flight.groupby(busy["gpu"]).max() - 1e-9).clip(lower=1)
        out["tokens_per_s"] = day_tokens / (HOURS * 3600.0)
        out["busy_hours"] = float(HOURS)
    return out


def _offline(out: pd.DataFrame, phys: pd.DataFrame, day_tokens: float) -> pd.DataFrame:
    """Offline: the engine's batch, its throughput and the hours of work the day needs."""
    out = out.copy()
    batch = np.floor(phys.loc[out.index, "max_concurrent_seqs"].clip(lower=1.0))
    out["concurrent_seqs"] = np.minimum(ENGINE_MAX_BATCH, batch)
    out["tokens_per_s"] = out["concurrent_seqs"] / (out["itl_ms"] / 1000.0)
    out["busy_hours"] = day_tokens / out["tokens_per_s"] / 3600.0
    return out


def _closed_loop(out: pd.DataFrame, users: float) -> pd.DataFrame:
    """A closed loop of ``users``: that many sequences decode, one token each per ITL, all day.

    The prefills between a user's requests are left out of the throughput (they are short
    beside a request's decode at the default lengths), so tokens/s is an upper bound.
    """
    out = out.copy()
    out["concurrent_seqs"] = float(users)
    out["tokens_per_s"] = users / (out["itl_ms"] / 1000.0)
    out["busy_hours"] = float(HOURS)
    return out


def rank_gpus(
    model: str,
    catalog: Catalog,
    predictor: Predictor,
    *,
    load: pd.DataFrame | None,
    itl_slo_ms: float | None = None,
    scenario: str = "server",
    output_tokens: float = DEFAULT_OUTPUT_TOKENS,
    input_tokens: float = DEFAULT_INPUT_TOKENS,
    gpus: list[str] | None = None,
    prices: Mapping[str, float] | None = None,
    strict: bool = False,
    concurrency: float | None = None,
    ttft_slo_ms: float | None = None,
    model_config: str | None = None,
    slo_percentile: int = MEDIAN,
    setup: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Rank GPUs for serving ``model`` (pure: no MLflow, files or network).

    Args:
        model: canonical LLM id, or the name of the LLM ``model_config`` describes.
        catalog: both catalogues.
        predictor: ``(queries, target) -> predictions`` (see the module docstring).
        load: the day's load from ``daily_load`` (required for a server).
        itl_slo_ms: ITL target; GPUs above it are listed but not ranked.
        scenario: ``server`` or ``offline``.
        output_tokens: mean output tokens per request.
        input_tokens: mean prompt tokens per request.
        gpus: canonical GPU names (default: the whole catalogue).
        prices: canonical GPU name -> $/hour.
        strict: rank only GPUs whose ITL interval's upper end meets the SLO.
        concurrency: a server's load as users of a closed loop, all day (instead of ``load``).
        ttft_slo_ms: a time-to-first-token target; GPUs above it are listed but not ranked.
        model_config: the JSON text of the config.json that describes the LLM (one the
            catalogue lacks); every query carries it, and the memory checks use its columns.
        slo_percentile: the percentile of ``SLO_PERCENTILES`` both latency targets hold at
            (50: the median; 90, 99: the answers' tails).
        setup: the client, engine knobs, engine and weights' format every query states
            (``queries.SETUP_FIELDS``, ``ENGINE_FIELDS``; none: the defaults).

    Returns:
        One row per GPU with the columns of ``COLUMNS`` (price columns only with prices), the
        ranked GPUs first, best first.

    Raises:
        QueryError: a server without a load, or a percentile not in ``SLO_PERCENTILES``.
        ConfigError: a tail asked of a predictor that gives none.

    """
    slo_percentile = check_percentile(slo_percentile)
    _check_load(scenario, load, concurrency)
    names = list(dict.fromkeys(gpus)) if gpus else [str(g) for g in catalog.gpus.index]
    hourly = load if load is not None else pd.DataFrame({"hour": [0], "rate": [np.nan]})
    day_tokens = (
        float((hourly["rate"] * 3600.0 * output_tokens).sum()) if load is not None else np.nan
    )
    workload: dict[str, Any] = {"model": model, "scenario": scenario}
    if concurrency is not None:
        workload["concurrency"] = float(concurrency)
    workload |= {"input_tokens": float(input_tokens), "output_tokens": float(output_tokens)}
    workload |= {k: v for k, v in (setup or {}).items() if k in ENGINE_FIELDS}  # sizes
    # an LLM a config describes: its catalogue columns, for the weights, KV cache and kernels
    described = config_columns(model_config) if model_config is not None else {}
    phys = build_features(pd.DataFrame({"gpu": names}).assign(**workload, **described), catalog)
    if model_config is not None:
        workload[CONFIG_FIELD] = model_config
    workload |= dict(setup or {})  # the queries carry them; the memory checks do not use them
    phys = phys.set_index("gpu")
    targets = ("power", "itl", "ttft") if ttft_slo_ms is not None else ("power", "itl")
    table = _predicted(
        names, phys, predictor, workload, hourly, day_tokens, targets, slo_percentile
    )
    table = _memory_and_energy(table, phys, input_tokens + output_tokens)
    slos = {"itl": itl_slo_ms, "ttft": ttft_slo_ms}
    table = _judged(table, phys, slos, strict, slo_percentile)
    if prices is not None:
        table = _priced(table, prices)
    return _ordered(table, prices is not None, ttft_slo_ms is not None)


def _check_load(scenario: str, load: pd.DataFrame | None, concurrency: float | None) -> None:
    """A server needs one load: a day's rates or a number of concurrent users."""
    if scenario == "server" and load is None and concurrency is None:
        raise QueryError(
            "a server needs a load: give rate, requests_per_day, load_profile or concurrency",
            "rate",
        )
    if concurrency is not None and (load is not None or scenario != "server"):
        raise QueryError("concurrency is a server's whole load: give no other load", "concurrency")


def runnable(phys: pd.DataFrame) -> np.ndarray:
    """Whether some engine has a kernel for the LLM's weight format on each GPU."""
    return (phys["kernel_path"] != NO_KERNEL).to_numpy()


def _predicted(
    names: list[str],
    phys: pd.DataFrame,
    predictor: Predictor,
    workload: dict[str, Any],
    hourly: pd.DataFrame,
    day_tokens: float,
    targets: tuple[str, ...] = ("power", "itl"),
    percentile: int = MEDIAN,
) -> pd.DataFrame:
    """One row per GPU: the day's power, ITL, concurrency and throughput where the weights fit.

    Every column of ``COLUMNS`` is there (NaN where not yet known).
    """
    scenario = str(workload["scenario"])
    closed = "concurrency" in workload  # a closed loop: one query per GPU, like offline
    weights_fit = memory_fits(phys["free_memory_gb"], phys["max_concurrent_seqs"], np.nan)
    weights_fit &= runnable(phys)
    candidates = [g for g, fits in zip(names, weights_fit, strict=True) if fits]
    if scenario == "server" and not closed:
        rates = np.unique(np.where(hourly["rate"] > 0, hourly["rate"], IDLE_RATE_RPS))
    else:
        rates = np.array([np.nan])
    grid = pd.DataFrame(
        [(g, r) for g in candidates for r in rates], columns=["gpu", "request_rate_rps"]
    )
    table = pd.DataFrame(index=pd.Index(names, name="gpu"))
    if len(grid):
        queries = grid.assign(**workload)
        if scenario != "server" or closed:
            queries = queries.drop(columns="request_rate_rps")
        preds = {t: ask_checked(predictor, queries, t, percentile) for t in targets}
        per_gpu = "offline" if closed else scenario  # one row per GPU, whatever the hours
        long = _hourly_predictions(preds, grid, hourly, per_gpu)
        found = _aggregate(long, per_gpu, workload["output_tokens"], day_tokens)
        if closed:
            found = _closed_loop(found, workload["concurrency"])
        elif scenario != "server":
            found = _offline(found, phys, day_tokens)
        table = table.join(found)
    for column in COLUMNS:
        if column not in table.columns and column != "gpu":
            table[column] = np.nan
    return table


def _memory_and_energy(table: pd.DataFrame, phys: pd.DataFrame, tokens: float) -> pd.DataFrame:
    """Memory, weights, KV cache of ``tokens``-long sequences, the fit and the energy."""
    table = table.copy()
    table["memory_gb"] = phys["gpu_memory_gb"].astype(float)
    table["weights_gb"] = phys["weight_bytes"] / 1e9
    kv_per_seq_gb = phys["kv_bytes_per_token"] * tokens / 1e9
    table["kv_cache_gb"] = table["concurrent_seqs"] * kv_per_seq_gb
    table["energy_kwh_per_day"] = table["power_w"] * table["busy_hours"] / 1000.0
    table["energy_j_per_token"] = table["power_w"] / table["tokens_per_s"]
    table["fits"] = memory_fits(
        phys["free_memory_gb"], phys["max_concurrent_seqs"], table["concurrent_seqs"]
    ) & runnable(phys)
    return table


def _judged(
    table: pd.DataFrame,
    phys: pd.DataFrame,
    slos: Mapping[str, float | None],
    strict: bool,
    percentile: int = MEDIAN,
) -> pd.DataFrame:
    """Whether each GPU meets the SLOs, why it is not ranked, its rank and the Pareto front.

    ``slos``: the ``itl`` and ``ttft`` targets (ms, or None), each held at ``percentile``.
    """
    table = table.copy()
    if slos["ttft"] is not None:
        table["meets_ttft_slo"] = _meets(table[at_percentile("ttft_ms", percentile)], slos["ttft"])
    usable_gb = table["weights_gb"] + phys["free_memory_gb"].clip(lower=0) * KV_CACHE_MEMORY_SHARE
    if slos["itl"] is None:
        table["meets_slo"] = pd.array([pd.NA] * len(table), dtype="boolean")
        table["meets_slo_upper"] = pd.array([pd.NA] * len(table), dtype="boolean")
    else:
        table["meets_slo"] = _meets(table[at_percentile("itl_ms", percentile)], slos["itl"])
        table["meets_slo_upper"] = _meets(itl_upper(table, percentile), slos["itl"])
    no_kernel = pd.Series(~runnable(phys), index=phys.index)
    table["reason"] = [
        _no_kernel_reason(phys.loc[gpu])
        if no_kernel[gpu]
        else _reason(row, usable_gb[gpu], slos["itl"], strict, percentile)
        or _ttft_reason(row, slos["ttft"], percentile)
        for gpu, row in table.iterrows()
    ]
    ranked = table["reason"] == ""
    order = table.loc[ranked].sort_values(["energy_j_per_token", "itl_ms"]).index
    table["rank"] = pd.array([pd.NA] * len(table), dtype="Int64")
    table.loc[order, "rank"] = np.arange(1, len(order) + 1)
    table["pareto"] = pareto_front(table["power_w"], table["itl_ms"]) & table["fits"]
    return table


def _meets(values: pd.Series, slo: float) -> pd.Series:
    """``values <= slo``, blank where a value is."""
    return (values <= slo).astype("boolean").where(values.notna(), pd.NA)


def itl_upper(table: pd.DataFrame | pd.Series, percentile: int = MEDIAN) -> Any:
    """The upper end of the ITL interval at ``percentile``: the median's, times the tail's ratio.

    A tail is the median times a ratio (``answering.tails``), so the interval of the median
    carries to it by the same ratio.
    """
    if percentile == MEDIAN:
        return table["itl_upper_ms"]
    return table["itl_upper_ms"] * table[at_percentile("itl_ms", percentile)] / table["itl_ms"]


def _priced(table: pd.DataFrame, prices: Mapping[str, float]) -> pd.DataFrame:
    """Price, cost per day and per million tokens, and the cost rank of the ranked GPUs."""
    table = table.copy()
    table["usd_per_hour"] = pd.Series(dict(prices), dtype=float).reindex(table.index)
    table["usd_per_day"] = table["usd_per_hour"] * table["busy_hours"]
    table["usd_per_1m_tokens"] = table["usd_per_hour"] / (table["tokens_per_s"] * 3600.0) * 1e6
    priced = table.loc[(table["reason"] == "") & table["usd_per_1m_tokens"].notna()]
    by_cost = priced.sort_values(["usd_per_1m_tokens", "energy_j_per_token"]).index
    table["cost_rank"] = pd.array([pd.NA] * len(table), dtype="Int64")
    table.loc[by_cost, "cost_rank"] = np.arange(1, len(by_cost) + 1)
    return table


def _ordered(table: pd.DataFrame, with_prices: bool, with_ttft: bool = False) -> pd.DataFrame:
    """The answer's columns and rows: ranked best first, then the unranked that fit, by energy."""
    table = table.copy()
    table["concurrent_seqs"] = table["concurrent_seqs"].astype("Int64")
    table["warnings"] = ["" if pd.isna(w) else str(w) for w in table["warnings"]]
    columns = [c for c in COLUMNS if with_prices or c not in PRICE_COLUMNS]
    columns = [c for c in columns if with_ttft or c not in TTFT_COLUMNS]
    table = table.reset_index()[columns]
    order = np.lexsort(
        (
            table["energy_j_per_token"].fillna(np.inf),
            ~table["fits"].to_numpy(bool),
            table["rank"].astype(float).fillna(np.inf),
        )
    )
    return table.iloc[order].reset_index(drop=True)


def _no_kernel_reason(phys: pd.Series) -> str:
    """Why a GPU cannot serve the LLM's weight format at all (``data.kernel_paths``)."""
    capability = float(phys["gpu_compute_capability"])
    return f"no engine runs {phys['dtype']} weights on compute capability {capability:.1f}"


def _ttft_reason(row: pd.Series, ttft_slo_ms: float | None, percentile: int = MEDIAN) -> str:
    """Why a GPU that meets everything else misses the TTFT SLO ('' when it does not)."""
    if ttft_slo_ms is None:
        return ""
    return _missed(row[at_percentile("ttft_ms", percentile)], ttft_slo_ms, "TTFT", percentile)


def _missed(value: float, slo: float, name: str, percentile: int, digits: int = 0) -> str:
    """``TTFT p90 612 ms > 500 ms`` where ``value`` misses ``slo`` ('' where it meets it)."""
    if pd.isna(value):  # a tail the simulation gave no number for is not held to a target
        return "" if percentile == MEDIAN else f"no {latency_name(name, percentile)} to hold"
    if value <= slo:
        return ""
    return f"{latency_name(name, percentile)} {value:.{digits}f} ms > {slo:g} ms"


def _reason(
    row: pd.Series,
    usable_gb: float,
    itl_slo_ms: float | None,
    strict: bool,
    percentile: int = MEDIAN,
) -> str:
    """Why a GPU is not ranked ('' when it is)."""
    if row["weights_gb"] > row["memory_gb"]:
        return f"weights {row['weights_gb']:.1f} GB > {row['memory_gb']:g} GB"
    if not row["fits"]:
        return (
            f"weights {row['weights_gb']:.1f} GB + KV cache for {int(row['concurrent_seqs'])} "
            f"concurrent sequences {row['kv_cache_gb']:.1f} GB > {usable_gb:.1f} GB usable of "
            f"{row['memory_gb']:g} GB"
        )
    if row["concurrent_seqs"] > ENGINE_MAX_BATCH:
        return (
            f"the load keeps {int(row['concurrent_seqs'])} sequences in flight, more than the "
            f"engine's batch of {ENGINE_MAX_BATCH:g}: it cannot keep up"
        )
    if row["busy_hours"] > HOURS:
        return f"the day's load needs {row['busy_hours']:.1f} h of batch work"
    if itl_slo_ms is None:
        return ""
    itl = row[at_percentile("itl_ms", percentile)]
    missed = _missed(itl, itl_slo_ms, "ITL", percentile, digits=1)
    upper = itl_upper(row, percentile)
    if not missed and strict and upper > itl_slo_ms:
        return (
            f"{latency_name('ITL', percentile)} up to {upper:.1f} ms > {itl_slo_ms:g} ms "
            f"(strict{_calibrated_for(row)})"
        )
    return missed


def verdict(
    table: pd.DataFrame,
    itl_slo_ms: float | None = None,
    strict: bool = False,
    ttft_slo_ms: float | None = None,
    slo_percentile: int = MEDIAN,
) -> str:
    """One line: the best GPU with its numbers against every limit, or why there is none.

    ``slo_percentile``: the percentile the limits hold at (as ``rank_gpus`` ranked them).
    """
    limits = limits_text(itl_slo_ms, ttft_slo_ms, slo_percentile) or "the load"
    best = table[table["rank"] == 1]
    if len(best):
        return _best_line(table, best.iloc[0], itl_slo_ms, strict, ttft_slo_ms, slo_percentile)
    itl = at_percentile("itl_ms", slo_percentile)
    fitting = table[table["fits"] & table[itl].notna()]
    if (itl_slo_ms is not None or ttft_slo_ms is not None) and len(fitting):
        fitting = fitting.assign(itl_upper_at=itl_upper(fitting, slo_percentile))
        column = "itl_upper_at" if strict else itl
        where = " at the upper end of its interval" if strict and itl_slo_ms is not None else ""
        ttft = at_percentile("ttft_ms", slo_percentile)
        candidates, shown, name = fitting, column, "" if slo_percentile == MEDIAN else "ITL "
        if ttft_slo_ms is not None:  # closest in TTFT among those that meet the ITL limit
            meet_itl = fitting if itl_slo_ms is None else fitting[fitting[column] <= itl_slo_ms]
            if len(meet_itl) and meet_itl[ttft].notna().any():
                candidates, shown = meet_itl, ttft
            name = "TTFT " if shown == ttft else "ITL "
        if name:
            name = latency_name(name.strip(), slo_percentile) + " "
        closest = candidates.loc[candidates[shown].idxmin()]
        return (
            f"no GPU meets {limits}{where}; closest: {closest['gpu']} "
            f"({name}{closest[shown]:.1f} ms)"
        )
    if not table["fits"].any():
        largest = table.loc[table["memory_gb"].idxmax()]
        return f"no GPU fits the model: {largest['gpu']}, the largest, says {largest['reason']}"
    first = table[table["fits"]].iloc[0]
    return f"no GPU can serve {limits}; closest: {first['gpu']} ({first['reason']})"


def limits_text(
    itl_slo_ms: float | None, ttft_slo_ms: float | None, percentile: int = MEDIAN
) -> str:
    """The latency limits a ranking is under, in words: ``ITL ≤ 80 ms and TTFT ≤ 500 ms``.

    At a tail's percentile each limit names it: ``ITL p90 ≤ 80 ms``.
    """
    limits = [
        f"{latency_name(name, percentile)} ≤ {slo:g} ms"
        for name, slo in (("ITL", itl_slo_ms), ("TTFT", ttft_slo_ms))
        if slo is not None
    ]
    return " and ".join(limits)


def _best_line(
    table: pd.DataFrame,
    row: pd.Series,
    itl_slo_ms: float | None,
    strict: bool,
    ttft_slo_ms: float | None,
    percentile: int = MEDIAN,
) -> str:
    """``Best: GPU — W, J/token, kWh/day, ITL (its limit), TTFT (its limit)[, cost]``."""
    parts = [f"{row['power_w']:.0f} W", f"{row['energy_j_per_token']:.3g} J/token"]
    if pd.notna(row["energy_kwh_per_day"]):
        parts.append(f"{row['energy_kwh_per_day']:.3g} kWh/day")
    itl = row[at_percentile("itl_ms", percentile)]
    latency = f"{latency_name('ITL', percentile)} {itl:.0f} ms"
    if itl_slo_ms is not None:
        upper = itl_upper(row, percentile)
        latency += f" (≤ {itl_slo_ms:g} ms"
        if strict:
            latency += f", and {upper:.0f} ms at the upper end of its interval"
        elif not row["meets_slo_upper"]:
            latency += (
                f"; up to {upper:.0f} ms at the upper end of its interval{_calibrated_for(row)}"
            )
        latency += ")"
    parts.append(latency)
    if ttft_slo_ms is not None:
        ttft = row[at_percentile("ttft_ms", percentile)]
        parts.append(f"{latency_name('TTFT', percentile)} {ttft:.0f} ms (≤ {ttft_slo_ms:g} ms)")
    line = f"Best: {row['gpu']} — {', '.join(parts)}"
    if "cost_rank" in table.columns and (table["cost_rank"] == 1).any():
        cheap = table[table["cost_rank"] == 1].iloc[0]
        cost = f"${cheap['usd_per_1m_tokens']:.3g}/1M tokens"
        line += (
            f", {cost}" if cheap["gpu"] == row["gpu"] else f". Cheapest: {cheap['gpu']} ({cost})"
        )
    return line


def _calibrated_for(row: pd.Series) -> str:
    """``, an interval for an unseen GPU``: what sets the ITL interval's width, if known."""
    novelty = row.get("itl_novelty")
    return f", an interval for {novelty}" if isinstance(novelty, str) and novelty else ""
