"""Which GPU should serve this LLM, under this latency target and this load, for the least energy.

``rank_gpus`` is the pure core: catalogue, load and a predictor in, one row per GPU out. The
predictor is any callable ``(queries, target) -> predictions`` with the columns of
``wattgpu.modeling.answering.inference.predict_queries`` (``prediction``, ``lower``, ``upper``,
``warnings``; power in W, ITL in ms), one row per query in order. ``recommend`` adds the loading:
catalogue from the data folder, predictor from the Model Registry or running model servers.

Arithmetic (documented in the column table ``COLUMNS``):

- server: a day is 24 hours, each at its request rate (constant, or from a load profile); power
  and ITL are predicted at each hour's rate; energy per day = the sum of each hour's power x 1 h;
  tokens per day = the sum of rate x 3600 s x output tokens; J per token = energy / tokens (for a
  constant rate: W / (rate x output tokens)). Concurrent sequences (Little's law) = rate x output
  tokens x ITL, rounded up, at the busiest hour. An hour at 0 req/s is the GPU idling, counted at
  the power predicted for a trickle of ``IDLE_RATE_RPS``.
- offline: the engine's batch (vLLM's cap, or what the KV cache holds); throughput = batch / ITL;
  J per token = W / throughput; energy per day = W x the hours of batch work the day's tokens need
  (idle hours not counted).
- cost: server $/day = $/h x 24 (the GPU is rented all day); offline $/day = $/h x busy hours.

The package: :mod:`~wattgpu.recommendation.ranking` (the pure core: ``rank_gpus``, ``verdict``,
the column table), :mod:`~wattgpu.recommendation.inputs` (the load and price checks and their
CSV files); ``recommend`` and ``model_predictor`` live here. With ``fleet`` (``--fleet``) the
answer is fleets instead, GPU x tensor parallel x replicas for the day's load:
:mod:`~wattgpu.recommendation.capacity` (the lowest crossing of every limit on a grid),
:mod:`~wattgpu.recommendation.replicas` (candidates and one replica's capacity),
:mod:`~wattgpu.recommendation.fleet` (the day hour by hour: replicas, energy, GPU-hours, cost),
:mod:`~wattgpu.recommendation.fleets` (``size_fleets``: kept and ranked per GPU) and
:mod:`~wattgpu.recommendation.fleet_verdict`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.config import Settings, load_settings
from wattgpu.data.catalog import Catalog
from wattgpu.data.measurements import SCENARIOS
from wattgpu.errors import QueryError
from wattgpu.modeling.answering.configs import config_columns
from wattgpu.modeling.answering.queries import (
    ENGINE_FIELDS,
    SETUP_FIELDS,
    WORKLOAD_RANGES,
    checked_engine,
    checked_setup,
    show,
)
from wattgpu.modeling.physical.workload import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
from wattgpu.modeling.serving.checks import check_setup
from wattgpu.recommendation.fleet_verdict import fleet_verdict
from wattgpu.recommendation.fleets import FLEET_COLUMNS, checked_fleet, fleets_for
from wattgpu.recommendation.inputs import (
    check_positive,
    check_prices,
    check_profile,
    check_tokens,
    daily_load,
    read_load_profile,
    read_prices,
)
from wattgpu.recommendation.ranking import (
    COLUMNS,
    HOURS,
    IDLE_RATE_RPS,
    MEDIAN,
    PRICE_COLUMNS,
    SLO_PERCENTILES,
    TTFT_COLUMNS,
    Predictor,
    at_percentile,
    check_percentile,
    latency_name,
    limits_text,
    pareto_front,
    rank_gpus,
    verdict,
)

__all__ = [
    "COLUMNS",
    "FLEET_COLUMNS",
    "HOURS",
    "IDLE_RATE_RPS",
    "MEDIAN",
    "PRICE_COLUMNS",
    "SLO_PERCENTILES",
    "TTFT_COLUMNS",
    "Predictor",
    "at_percentile",
    "check_percentile",
    "check_prices",
    "check_profile",
    "daily_load",
    "fleet_verdict",
    "latency_name",
    "limits_text",
    "model_predictor",
    "pareto_front",
    "rank_gpus",
    "read_load_profile",
    "read_prices",
    "recommend",
    "verdict",
]


USERS_RANGE = WORKLOAD_RANGES["concurrency"]


def model_predictor(
    settings: Settings,
    alias: str = "production",
    power_url: str | None = None,
    itl_url: str | None = None,
) -> Predictor:
    """A predictor over the registry's ``alias`` models, or model servers where a URL is given.

    The registry models are loaded once, here, so one predictor answers many rankings fast;
    ``rank_gpus`` asks each for every GPU (and hour) in one call. A model is read from its
    folder without MLflow where the store allows (``client.load_model``, as ``wattgpu predict``
    does); MLflow's check of a model's pinned packages is skipped (``wattgpu recommend`` hides
    MLflow's warnings). Its ``medians`` answers without tails (``ranking.medians_of``).
    """
    return _RegistryPredictor(settings, alias, {"power": power_url, "itl": itl_url})


class _RegistryPredictor:
    """``model_predictor``'s: the registry's models, loaded once, or their servers' URLs."""

    def __init__(self, settings: Settings, alias: str, urls: dict[str, str | None]) -> None:
        from wattgpu.lifecycle import client

        self.settings, self.alias, self.urls = settings, alias, urls
        self.loaded = {
            t: client.load_model(settings, t, alias) for t, url in urls.items() if not url
        }

    def __call__(self, queries: pd.DataFrame, target: str) -> pd.DataFrame:
        return self._ask(queries, target, with_tails=True)

    def medians(self, queries: pd.DataFrame, target: str) -> pd.DataFrame:
        """The answer without a latency's p90 and p99, no serving loop simulated.

        A model server's answer is in full (the REST contract has no such option).
        """
        return self._ask(queries, target, with_tails=False)

    def _ask(self, queries: pd.DataFrame, target: str, with_tails: bool) -> pd.DataFrame:
        from wattgpu.lifecycle import client

        url = self.urls.get(target)
        if url:
            return client.ask_server(url, queries)
        if target not in self.loaded:  # TTFT: loaded when a TTFT SLO asks for it
            self.loaded[target] = client.load_model(self.settings, target, self.alias)
        return client.ask_loaded_model(self.loaded[target], queries, with_tails)


def recommend(
    model: str,
    *,
    itl_slo_ms: float | None = None,
    scenario: str = "server",
    rate: float | None = None,
    requests_per_day: float | None = None,
    load_profile: pd.DataFrame | str | Path | None = None,
    output_tokens: float | None = None,
    input_tokens: float | None = None,
    gpus: list[str] | None = None,
    prices: Mapping[str, float] | str | Path | None = None,
    alias: str = "production",
    power_url: str | None = None,
    itl_url: str | None = None,
    settings: Settings | None = None,
    catalog: Catalog | None = None,
    predictor: Predictor | None = None,
    strict: bool = False,
    concurrency: float | None = None,
    ttft_slo_ms: float | None = None,
    names: Mapping[str, str] | None = None,
    model_config: str | Mapping[str, Any] | None = None,
    slo_percentile: int = MEDIAN,
    setup: Mapping[str, Any] | None = None,
    fleet: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Rank the GPUs that can serve ``model`` under a latency target and a load, least energy first.

    Args:
        model: LLM name or alias from the catalogue (with ``model_config``: the name shown).
        itl_slo_ms: the inter-token latency target, ms (none: every GPU that fits is ranked).
        scenario: ``server`` (Poisson arrivals) or ``offline`` (batch).
        rate: requests/s, all day.
        requests_per_day: N requests a day, i.e. a rate of N / 86400 req/s.
        load_profile: 24 rows (hour 0-23, rate req/s), or the path of such a CSV.
        output_tokens: mean output tokens per request (default 256).
        input_tokens: mean prompt tokens per request (default 512).
        gpus: GPU names or aliases to consider (default: the whole catalogue).
        prices: GPU -> $/hour, or the path of a CSV with columns gpu, usd_per_hour.
        alias: registry alias of the models to use.
        power_url: a running power model server to ask instead of the registry.
        itl_url: a running ITL model server to ask instead of the registry.
        settings: where data and runs live (default: from the environment).
        catalog: the catalogues (default: read from ``settings.data_dir``).
        predictor: ``(queries, target) -> predictions``; replaces the registry and the servers.
        strict: rank only GPUs that meet the SLO at the upper end of the ITL interval.
        concurrency: a server's load as concurrent users of a closed loop (instead of a rate).
        ttft_slo_ms: the time-to-first-token target, ms (asks the TTFT model too).
        names: what a message calls each input, by keyword (the CLI's: its options' names).
        model_config: the config.json (text or parsed) of an LLM the catalogue lacks.
        slo_percentile: where both latency targets hold: 50 (the median), 90 or 99 (a tail).
        setup: the client, engine knobs, engine and weights' format queries state (``_day_load``).
        fleet: rank fleets instead (``fleets.size_fleets``' ``tp``, ``max_gpus``, ``scaling``,
            ``rank_by``; each optional): a server's load, spread over replicas.

    Returns:
        One row per GPU considered (columns ``COLUMNS``), ranked GPUs first; ``attrs["request"]``
        holds the resolved inputs; ``verdict`` says it in one line.

    Raises:
        QueryError: a bad input (names the field and the bad value).
        UnknownNameError: an LLM or GPU not in the catalogue (with close matches).
        DataError: an unreadable profile or price file, or a config no LLM can be read from.
        ModelNotFound: no registry model holds ``alias``.

    """
    settings = settings or load_settings()
    catalog = catalog or Catalog.load(settings.gpus_csv, settings.llms_csv)
    named = _Names({"model": "LLM", "gpus": "GPU", **(names or {})})
    request = _checked_request(
        catalog, model, scenario, itl_slo_ms, output_tokens, input_tokens, named, model_config
    )
    request |= _day_load(request, rate, requests_per_day, load_profile, concurrency, setup, named)
    request |= _limits_and_gpus(catalog, named, ttft_slo_ms, slo_percentile, gpus, prices)
    sizing = None if fleet is None else checked_fleet(fleet, **_fleet_context(request, named))
    predictor = predictor or model_predictor(settings, alias, power_url, itl_url)
    table = _answer(request, sizing, catalog, predictor, strict)
    table.attrs["request"] = _summary(request, strict) | (sizing or {})
    return table


class _Names(dict):
    """What a message calls each input: ``names("rate")`` is its given name, else ``rate``."""

    def __call__(self, key: str) -> str:
        """The name of input ``key`` in messages."""
        return self.get(key, key)


def _checked_load(
    rate: float | None,
    requests_per_day: float | None,
    load_profile: pd.DataFrame | str | Path | None,
    named: _Names,
) -> pd.DataFrame | None:
    """The day's load from a rate, a daily count or a profile (a frame or a CSV's path)."""
    if isinstance(load_profile, str | Path):
        load_profile = read_load_profile(Path(load_profile))
    return daily_load(rate, requests_per_day, load_profile, named)


def _checked_users(
    concurrency: float | None, load: pd.DataFrame | None, scenario: str, named: _Names
) -> float | None:
    """Concurrent users: a whole number from 1, for a server given no other load."""
    if concurrency is None:
        return None
    field = named("concurrency")
    users = check_positive(concurrency, field)
    if users != int(users) or users > USERS_RANGE.high:
        raise QueryError(f"{field} must be {USERS_RANGE.describe()}; got {show(concurrency)}")
    if load is not None:
        raise QueryError(f"give one load, not {named('rate')} and {field}", "concurrency")
    if scenario != "server":
        raise QueryError(f"{field} applies to a server only", "concurrency")
    return users


def _day_load(
    request: Mapping[str, Any],
    rate: float | None,
    requests_per_day: float | None,
    load_profile: pd.DataFrame | str | Path | None,
    concurrency: float | None,
    setup: Mapping[str, Any] | None,
    named: _Names,
) -> dict[str, Any]:
    """The day's ``load``, its ``concurrency`` and its serving ``setup``, checked.

    ``setup``: the client (one of ``data/clients.csv``; default: the load's own, a closed loop
    for ``concurrency``, Poisson for a rate, a batch offline) and the engine knobs
    (``max_num_seqs``, ``max_batched_tokens``, ``chunked_prefill`` on or off) that every query
    states (``queries.SETUP_FIELDS``; unstated: ``None`` or left out). They act on the ITL and
    TTFT tails (the simulated serving loop's), not on the medians or power, as each answer's
    warnings say. Beside them, the engine, its release and the weights' format
    (``queries.ENGINE_FIELDS``: ``engine``, ``engine_version`` or ``engine_year``, ``dtype``;
    unstated: vLLM of today and the checkpoint's own format), checked as ``predict`` checks
    them; the format sizes the weights.
    """
    scenario = str(request["scenario"])
    load = _checked_load(rate, requests_per_day, load_profile, named)
    day = {"load": load, "concurrency": _checked_users(concurrency, load, scenario, named)}
    engine = _checked_engine({k: v for k, v in (setup or {}).items() if k in ENGINE_FIELDS}, named)
    return day | {"setup": _checked_setup(setup or {}, scenario, day, named) | engine}


def _checked_engine(engine: Mapping[str, Any], named: _Names) -> dict[str, Any]:
    """The stated engine, release and weight format, checked; a message names the options."""
    try:
        return checked_engine(engine)
    except QueryError as exc:
        words = {f: named(f) for f in ENGINE_FIELDS}
        message = re.sub(r"\b(" + "|".join(words) + r")\b", lambda m: words[m.group(1)], str(exc))
        raise QueryError(message, exc.field) from None


def _limits_and_gpus(
    catalog: Catalog,
    named: _Names,
    ttft_slo_ms: float | None,
    slo_percentile: int,
    gpus: list[str] | None,
    prices: Mapping[str, float] | str | Path | None,
) -> dict[str, Any]:
    """The TTFT target, the percentile, the GPUs (canonical names) and the prices, checked."""
    return {
        "ttft_slo_ms": _positive_or_none(ttft_slo_ms, named("ttft_slo_ms")),
        "slo_percentile": check_percentile(slo_percentile, named("slo_percentile")),
        "gpus": [catalog.resolve_gpu(g, named("gpus")) for g in gpus] if gpus else None,
        "prices": _checked_prices(prices, catalog, named("prices")),
    }


def _answer(
    request: dict[str, Any],
    sizing: Mapping[str, Any] | None,
    catalog: Catalog,
    predictor: Predictor,
    strict: bool,
) -> pd.DataFrame:
    """The GPUs ranked (``rank_gpus``), or with ``sizing`` the fleets (``fleets_for``)."""
    if sizing is None:
        return rank_gpus(catalog=catalog, predictor=predictor, strict=strict, **request)
    return fleets_for(request, sizing, catalog=catalog, predictor=predictor, strict=strict)


def _fleet_context(request: Mapping[str, Any], named: _Names) -> dict[str, Any]:
    """What ``checked_fleet`` needs of the request beside the fleet's own options."""
    return {
        "scenario": request["scenario"],
        "names": named,
        "priced": request["prices"] is not None,
    }


def _positive_or_none(value: float | None, name: str) -> float | None:
    """``value`` checked positive, or ``None`` when not given."""
    return None if value is None else check_positive(value, name)


def _checked_setup(
    setup: Mapping[str, Any], scenario: str, request: Mapping[str, Any], named: _Names
) -> dict[str, Any]:
    """The stated client and engine knobs, checked before any prediction (none: ``{}``)."""
    try:
        checked = checked_setup(setup)
        if checked:  # the client must exist and suit the load: one row of the load's kind
            users = request["concurrency"]
            row = {
                "scenario": np.array([scenario], dtype=object),
                "users": np.array([np.nan if users is None else users]),
                "request_rate_rps": np.array([np.nan if request["load"] is None else 1.0]),
            }
            row |= {k: np.array([v], dtype=object) for k, v in checked.items()}
            check_setup(row)
    except QueryError as exc:
        words = {**{f: named(f) for f in SETUP_FIELDS}, "concurrency": named("concurrency")}
        words["request_rate_rps"] = named("rate")
        message = str(exc).removeprefix("row 0: ")
        message = re.sub(r"\b(" + "|".join(words) + r")\b", lambda m: words[m.group(1)], message)
        raise QueryError(message, exc.field) from None
    return checked


def _checked_prices(
    prices: Mapping[str, float] | str | Path | None, catalog: Catalog, name: str
) -> dict[str, float] | None:
    """Prices by canonical GPU name, from a mapping or a CSV's path (``None``: no prices)."""
    if isinstance(prices, str | Path):
        prices = read_prices(Path(prices))
    return check_prices(prices, catalog, name) if prices is not None else None


def _checked_request(
    catalog: Catalog,
    model: str,
    scenario: str,
    itl_slo_ms: float | None,
    output_tokens: float | None,
    input_tokens: float | None,
    named: _Names,
    model_config: str | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The LLM, scenario, SLO and token counts checked, as ``rank_gpus`` keywords.

    An LLM a config describes keeps its name as given, and its config travels as JSON text.
    """
    if scenario not in SCENARIOS:
        raise QueryError(
            f"{named('scenario')} must be one of {', '.join(SCENARIOS)}; got {show(scenario)}"
        )
    if model_config is None:
        canonical, config = catalog.resolve_llm(model, named("model")), None
    else:
        config = model_config if isinstance(model_config, str) else json.dumps(model_config)
        config_columns(config)  # refuse a config that describes no LLM before any prediction
        canonical = model
    if itl_slo_ms is not None:
        itl_slo_ms = check_positive(itl_slo_ms, named("itl_slo_ms"))
    outputs = check_tokens(output_tokens, named("output_tokens"), DEFAULT_OUTPUT_TOKENS)
    return {
        "model": canonical,
        "model_config": config,
        "scenario": scenario,
        "itl_slo_ms": itl_slo_ms,
        "output_tokens": outputs,
        "input_tokens": check_tokens(input_tokens, named("input_tokens"), DEFAULT_INPUT_TOKENS),
    }


def _summary(request: dict[str, Any], strict: bool) -> dict[str, Any]:
    """The resolved inputs, as ``attrs["request"]`` of the answer holds them."""
    return {
        "model": request["model"],
        "scenario": request["scenario"],
        "itl_slo_ms": request["itl_slo_ms"],
        "requests_per_day": (
            float(request["load"]["rate"].sum() * 3600.0) if request["load"] is not None else None
        ),
        "output_tokens": request["output_tokens"],
        "input_tokens": request["input_tokens"],
        "concurrency": request["concurrency"],
        "ttft_slo_ms": request["ttft_slo_ms"],
        "slo_percentile": request["slo_percentile"],
        "strict": strict,
        **request["setup"],  # the client and engine knobs stated (none: nothing)
    }
