"""What the model was trained on, and warnings for queries outside it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from wattgpu.data.formats import canonical_format

# How far beyond the trained range a value may go before the answer is flagged as extrapolated.
RANGE_MARGIN = 1.25
# Adds a warning (a text, or a function of the row number) to each row of a mask.
Flag = Callable[[np.ndarray, Any], None]


def training_domain(rows: pd.DataFrame) -> dict[str, Any]:
    """Ranges and categories seen in training (stored with the model as JSON).

    The load as the rows state it: ``request_rate_rps`` spans the open-loop servers only (a
    closed loop's rate is what it achieved), ``users`` the closed loops' concurrent users;
    ``scenarios`` and ``itl_statistics`` list what the rows measured.
    """
    users = rows["users"] if "users" in rows.columns else pd.Series(np.nan, index=rows.index)
    open_loop = (rows["scenario"] == "server") & users.isna()

    def span(column: str, keep: pd.Series | None = None) -> list[float]:
        values = (rows[column] if keep is None else rows.loc[keep, column]).astype(float).dropna()
        return [float(values.min()), float(values.max())] if len(values) else [float("nan")] * 2

    return {
        "scenarios": sorted(str(s) for s in rows["scenario"].dropna().unique()),
        "itl_statistics": sorted(str(s) for s in rows["itl_statistic"].dropna().unique())
        if "itl_statistic" in rows.columns
        else [],
        "users": span("users") if "users" in rows.columns else [float("nan")] * 2,
        "llm_params_b": span("llm_params_b"),
        "gpu_memory_bandwidth_gb_s": span("gpu_memory_bandwidth_gb_s"),
        "gpu_fp16_tensor_tflops": span("gpu_fp16_tensor_tflops"),
        "request_rate_rps": span("request_rate_rps", open_loop),
        "batch_size": span("concurrency"),
        "num_gpus": span("num_gpus"),
        "engine_year": span("engine_year"),
        "engines": sorted(str(e) for e in rows["engine"].dropna().unique()),
        "moe_seen": bool((rows["llm_active_params_b"] < rows["llm_params_b"]).any()),
        "formats_seen": sorted({canonical_format(d) for d in rows["dtype"].dropna()}),
    }


def memory_fits(
    free_memory_gb: ArrayLike, max_concurrent_seqs: ArrayLike, sequences: ArrayLike = 1.0
) -> np.ndarray:
    """Where the weights and the KV cache of ``sequences`` full-length sequences fit in memory.

    The one memory-fit check. ``free_memory_gb`` (memory left after the weights) and
    ``max_concurrent_seqs`` (sequences the KV cache holds) are ``build_features``' columns. A NaN
    ``sequences`` checks the weights only; a NaN memory figure counts as fitting (nothing is
    known against it).
    """
    free = np.asarray(free_memory_gb, dtype=float)
    held = np.asarray(max_concurrent_seqs, dtype=float)
    return ~((free <= 0) | (held < np.asarray(sequences, dtype=float)))


def cannot_run(features: Mapping[str, Any]) -> np.ndarray:
    """Rows whose GPUs cannot hold the weights and the KV cache of one full sequence."""
    return ~memory_fits(features["free_memory_gb"], features["max_concurrent_seqs"])


def _fit_reason(features: Mapping[str, Any], i: int) -> str:
    weights = float(features["weight_bytes"][i]) / 1e9
    memory = float(features["gpu_memory_gb"][i]) * float(features["num_gpus"][i])
    if float(features["free_memory_gb"][i]) <= 0:
        return f"does not fit: weights need {weights:.0f} GB, the GPU(s) have {memory:.0f} GB"
    tokens = float(features["input_tokens"][i]) + float(features["output_tokens"][i])
    sequence = float(features["kv_bytes_per_token"][i]) * tokens / 1e9
    return (
        f"does not fit: after {weights:.0f} GB of weights the GPU(s)' {memory:.0f} GB leave no "
        f"room for the KV cache of one {tokens:.0f}-token sequence ({sequence:.1f} GB)"
    )


def domain_warnings(features: Mapping[str, Any], domain: dict[str, Any]) -> list[str]:
    """One ``"; "``-joined warning string per row ('' when the row is inside the domain).

    ``features`` is a frame or columns from ``build_features``/``feature_columns``.
    """
    n = len(np.asarray(features["free_memory_gb"]))
    notes: list[list[str]] = [[] for _ in range(n)]

    def flag(mask: np.ndarray, text: Any) -> None:
        for i in np.flatnonzero(mask):
            notes[i].append(text(i) if callable(text) else text)

    def values(column: str) -> np.ndarray:
        return np.asarray(features[column], dtype=float)

    unrunnable = cannot_run(features)
    flag(unrunnable, lambda i: _fit_reason(features, i))
    seqs, conc = values("max_concurrent_seqs"), values("concurrency")
    flag(
        ~unrunnable & (seqs < conc),
        lambda i: (
            f"KV cache holds only {seqs[i]:.0f} sequences of this length, "
            f"fewer than the batch of {conc[i]:.0f}"
        ),
    )
    moe = values("llm_active_params_b") < values("llm_params_b")
    if not domain.get("moe_seen", False):
        flag(moe, "mixture-of-experts LLM: the model was trained on no mixture-of-experts LLM")
    _flag_formats(flag, features, domain)
    _flag_ranges(flag, features, domain)
    _flag_load(flag, features, domain)
    _flag_engines(flag, features, domain)
    for column, kind in (("gpu_in_catalog", "GPU"), ("llm_in_catalog", "LLM")):
        if column in features:
            known = pd.Series(np.asarray(features[column])).fillna(True).astype(bool).to_numpy()
            flag(~known, f"{kind} described by its specs, not in the catalogue")
    return ["; ".join(n) for n in notes]


def _flag_formats(flag: Flag, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
    """Flag a weight format no training row had (nothing for a model that predates the list)."""
    seen = domain.get("formats_seen")
    if not seen or "dtype" not in features:
        return
    formats = np.array([canonical_format(d) for d in np.asarray(features["dtype"])], dtype=object)
    flag(
        ~np.isin(formats, seen),
        lambda i: (
            f"weights in {formats[i]}: the model was trained on none ({', '.join(seen)} only)"
        ),
    )


def _flag_ranges(flag: Flag, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
    """Flag numbers beyond the trained range (by more than ``RANGE_MARGIN``) or below it."""
    for column, label in (
        ("llm_params_b", "parameters"),
        ("gpu_memory_bandwidth_gb_s", "memory bandwidth"),
        ("gpu_fp16_tensor_tflops", "FP16 TFLOPS"),
        ("request_rate_rps", "request rate"),
        ("users", "concurrency"),
        ("num_gpus", "GPU count"),
    ):
        low, high = domain.get(column, [np.nan, np.nan])
        if column not in features:
            continue
        column_values = np.asarray(features[column], dtype=float)
        if np.isfinite(high):
            flag(
                np.isfinite(column_values) & (column_values > high * RANGE_MARGIN),
                lambda i, v=column_values, lab=label, h=high: (
                    f"{lab} {v[i]:g} beyond the trained range (max {h:g})"
                ),
            )
        if np.isfinite(low):
            flag(
                np.isfinite(column_values) & (column_values < low / RANGE_MARGIN),
                lambda i, v=column_values, lab=label, lo=low: (
                    f"{lab} {v[i]:g} below the trained range (min {lo:g})"
                ),
            )


def _flag_load(flag: Flag, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
    """Flag a scenario, or a kind of server load (rate or users), that training never saw.

    Models trained before the domain recorded scenarios and users are not flagged.
    """
    scenarios = domain.get("scenarios")
    if not scenarios:
        return
    scenario = np.asarray(features["scenario"]).astype(str)
    flag(
        ~np.isin(scenario, scenarios),
        lambda i: f"scenario {scenario[i]} not seen in training ({', '.join(scenarios)} only)",
    )
    if "server" not in scenarios or "users" not in domain or "users" not in features:
        return
    closed = (scenario == "server") & np.isfinite(np.asarray(features["users"], dtype=float))
    rates_seen = np.isfinite(domain["request_rate_rps"][1])
    users_seen = np.isfinite(domain["users"][1])
    if not users_seen:
        flag(closed, "load as concurrent users: the model saw servers given by request rate only")
    if not rates_seen:
        flag(
            (scenario == "server") & ~closed,
            "load as a request rate: the model saw servers given by concurrent users only",
        )


def _flag_engines(flag: Flag, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
    """Flag an engine or engine year not seen in training."""
    low, high = domain.get("engine_year", [np.nan, np.nan])
    if np.isfinite(low) and np.isfinite(high):
        years = np.asarray(features["engine_year"], dtype=float)
        flag(
            (years < low) | (years > high),
            lambda i: f"engine year {years[i]:g} outside the trained years ({low:g}-{high:g})",
        )
    engines = set(domain.get("engines", []))
    if engines:
        engine = np.asarray(features["engine"]).astype(str)
        flag(
            ~np.isin(engine, sorted(engines)),
            lambda i: (
                f"engine {str(engine[i])!r} not seen in training ({', '.join(sorted(engines))})"
            ),
        )
