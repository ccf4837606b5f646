"""What the model was trained on, and warnings for queries outside it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# How far beyond the trained range a value may go before the answer is flagged as extrapolated.
RANGE_MARGIN = 1.25


def training_domain(rows: pd.DataFrame) -> dict[str, Any]:
    """Ranges and categories seen in training (stored with the model as JSON)."""

    def span(column: str) -> list[float]:
        values = rows[column].astype(float).dropna()
        return [float(values.min()), float(values.max())] if len(values) else [float("nan")] * 2

    return {
        "llm_params_b": span("llm_params_b"),
        "gpu_memory_bandwidth_gb_s": span("gpu_memory_bandwidth_gb_s"),
        "gpu_fp16_tensor_tflops": span("gpu_fp16_tensor_tflops"),
        "request_rate_rps": span("request_rate_rps"),
        "batch_size": span("concurrency"),
        "num_gpus": span("num_gpus"),
        "engine_year": span("engine_year"),
        "engines": sorted(str(e) for e in rows["engine"].dropna().unique()),
        "moe_seen": bool((rows["llm_active_params_b"] < rows["llm_params_b"]).any()),
    }


def domain_warnings(features: pd.DataFrame, domain: dict[str, Any]) -> list[str]:
    """One ``"; "``-joined warning string per row ('' when the row is inside the domain)."""
    notes: list[list[str]] = [[] for _ in range(len(features))]

    def flag(mask: np.ndarray, text: Any) -> None:
        for i in np.flatnonzero(mask):
            notes[i].append(text(i) if callable(text) else text)

    free = features["free_memory_gb"].to_numpy(float)
    flag(
        free <= 0,
        lambda i: (
            f"does not fit: weights need {features['weight_bytes'].iloc[i] / 1e9:.0f} GB, the "
            f"GPU(s) have {features['gpu_memory_gb'].iloc[i] * features['num_gpus'].iloc[i]:.0f} GB"
        ),
    )
    seqs = features["max_concurrent_seqs"].to_numpy(float)
    conc = features["concurrency"].to_numpy(float)
    flag(
        (free > 0) & (seqs < conc),
        lambda i: (
            f"KV cache holds only {seqs[i]:.0f} sequences of this length, "
            f"fewer than the batch of {conc[i]:.0f}"
        ),
    )
    moe = (features["llm_active_params_b"] < features["llm_params_b"]).to_numpy()
    if not domain.get("moe_seen", False):
        flag(moe, "mixture-of-experts LLM: the model was trained on dense LLMs only")
    for column, label in (
        ("llm_params_b", "parameters"),
        ("gpu_memory_bandwidth_gb_s", "memory bandwidth"),
        ("gpu_fp16_tensor_tflops", "FP16 TFLOPS"),
        ("request_rate_rps", "request rate"),
        ("num_gpus", "GPU count"),
    ):
        low, high = domain.get(column, [np.nan, np.nan])
        values = features[column].to_numpy(float)
        if np.isfinite(high):
            flag(
                np.isfinite(values) & (values > high * RANGE_MARGIN),
                lambda i, v=values, lab=label, h=high: (
                    f"{lab} {v[i]:g} beyond the trained range (max {h:g})"
                ),
            )
        if np.isfinite(low):
            flag(
                np.isfinite(values) & (values < low / RANGE_MARGIN),
                lambda i, v=values, lab=label, lo=low: (
                    f"{lab} {v[i]:g} below the trained range (min {lo:g})"
                ),
            )
    low, high = domain.get("engine_year", [np.nan, np.nan])
    if np.isfinite(low) and np.isfinite(high):
        years = features["engine_year"].to_numpy(float)
        flag(
            (years < low) | (years > high),
            lambda i: f"engine year {years[i]:g} outside the trained years ({low:g}-{high:g})",
        )
    engines = set(domain.get("engines", []))
    if engines:
        flag(
            ~features["engine"].astype(str).isin(engines).to_numpy(),
            lambda i: (
                f"engine {features['engine'].iloc[i]!r} not seen in training "
                f"({', '.join(sorted(engines))})"
            ),
        )
    for column, kind in (("gpu_in_catalog", "GPU"), ("llm_in_catalog", "LLM")):
        if column in features.columns:
            flag(
                ~features[column].fillna(True).astype(bool).to_numpy(),
                f"{kind} described by its specs, not in the catalogue",
            )
    return ["; ".join(n) for n in notes]
