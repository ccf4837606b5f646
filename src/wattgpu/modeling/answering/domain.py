"""What the model was trained on, and warnings for queries outside it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from wattgpu.arrays import blanks, row_codes, unique_codes
from wattgpu.data.formats import canonical_format

# How far beyond the trained range a value may go before the answer is flagged as extrapolated.
RANGE_MARGIN = 1.25


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


def _fit_reason(
    weight_bytes: float,
    gpu_memory_gb: float,
    num_gpus: float,
    free_memory_gb: float,
    input_tokens: float,
    output_tokens: float,
    kv_bytes_per_token: float,
) -> str:
    weights = weight_bytes / 1e9
    memory = gpu_memory_gb * num_gpus
    if free_memory_gb <= 0:
        return f"does not fit: weights need {weights:.0f} GB, the GPU(s) have {memory:.0f} GB"
    tokens = input_tokens + output_tokens
    sequence = kv_bytes_per_token * tokens / 1e9
    return (
        f"does not fit: after {weights:.0f} GB of weights the GPU(s)' {memory:.0f} GB leave no "
        f"room for the KV cache of one {tokens:.0f}-token sequence ({sequence:.1f} GB)"
    )


FIT_REASON_COLUMNS = (
    "weight_bytes",
    "gpu_memory_gb",
    "num_gpus",
    "free_memory_gb",
    "input_tokens",
    "output_tokens",
    "kv_bytes_per_token",
)


class Notes:
    """The warnings of a batch of rows, collected per warning and joined per distinct pattern.

    Each ``flag`` is one warning over a mask of rows; its text is a constant, or a function of
    the values of a few columns, called once per distinct combination of them. ``joined`` then
    writes one string per distinct pattern of texts: a 10,000-row request from a handful of
    configurations costs a handful of joins, not a Python loop per row.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        # per flag: the code of each row's text (-1: not flagged) and the texts
        self.flags: list[tuple[np.ndarray, list[str]]] = []

    def flag(self, mask: np.ndarray, text: str | Callable[..., str], *columns: Any) -> None:
        """Add ``text`` (or ``text(*values)`` of ``columns`` at the row) to the rows of ``mask``."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        codes = np.full(self.n, -1, dtype=np.intp)
        if not callable(text):
            codes[mask] = 0
            self.flags.append((codes, [text]))
            return
        rows = np.flatnonzero(mask)
        values = [np.asarray(c)[rows] for c in columns]
        if len(values) == 1:
            found, distinct = unique_codes(values[0])
            texts = [text(v) for v in distinct]
        else:
            table = np.column_stack([np.asarray(v, dtype=float) for v in values])
            distinct, found = np.unique(table, axis=0, return_inverse=True)
            texts = [text(*(float(v) for v in row)) for row in distinct]
        codes[rows] = np.asarray(found).reshape(-1)
        self.flags.append((codes, texts))

    def joined(self) -> list[str]:
        """One ``"; "``-joined string per row, in the order the warnings were flagged."""
        out = np.full(self.n, "", dtype=object)
        if not self.flags:
            return out.tolist()
        table = np.column_stack([codes for codes, _ in self.flags])
        flagged = np.flatnonzero((table >= 0).any(axis=1))
        table = table[flagged]
        where, first = row_codes(list(table.T))
        patterns = table[first]
        texts = np.empty(len(patterns), dtype=object)
        texts[:] = [
            "; ".join(self.flags[k][1][code] for k, code in enumerate(row) if code >= 0)
            for row in patterns.tolist()
        ]
        out[flagged] = texts[np.asarray(where).reshape(-1)]
        return out.tolist()


def domain_warnings(features: Mapping[str, Any], domain: dict[str, Any]) -> list[str]:
    """One ``"; "``-joined warning string per row ('' when the row is inside the domain).

    ``features`` is a frame or columns from ``build_features``.
    """
    notes = Notes(len(np.asarray(features["free_memory_gb"])))

    def values(column: str) -> np.ndarray:
        return np.asarray(features[column], dtype=float)

    unrunnable = cannot_run(features)
    notes.flag(unrunnable, _fit_reason, *(features[c] for c in FIT_REASON_COLUMNS))
    seqs, conc = values("max_concurrent_seqs"), values("concurrency")
    notes.flag(
        ~unrunnable & (seqs < conc),
        lambda held, batch: (
            f"KV cache holds only {held:.0f} sequences of this length, "
            f"fewer than the batch of {batch:.0f}"
        ),
        seqs,
        conc,
    )
    moe = values("llm_active_params_b") < values("llm_params_b")
    if not domain.get("moe_seen", False):
        notes.flag(
            moe, "mixture-of-experts LLM: the model was trained on no mixture-of-experts LLM"
        )
    _flag_formats(notes, features, domain)
    _flag_ranges(notes, features, domain)
    _flag_load(notes, features, domain)
    _flag_engines(notes, features, domain)
    # a GPU the catalogue lacks: its specs from a named source (the GPU database), else given;
    # an LLM a query describes: by its config.json, else by its specs
    read = np.asarray(features.get("llm_from_config", np.zeros(notes.n)), dtype=bool)
    sources = np.asarray(features.get("gpu_specs_source", np.full(notes.n, None)), dtype=object)
    sourced = ~blanks(sources)
    for column, kind, by_source in (
        ("gpu_in_catalog", "GPU", sourced),
        ("llm_in_catalog", "LLM", read),
    ):
        if column in features:
            known = _known(np.asarray(features[column]))
            notes.flag(~known & ~by_source, f"{kind} described by its specs, not in the catalogue")
    if "gpu_in_catalog" in features:
        notes.flag(
            ~_known(np.asarray(features["gpu_in_catalog"])) & sourced,
            lambda source: (
                f"GPU not in the catalogue: specs from {source}, not a curated vendor sheet"
            ),
            sources,
        )
    notes.flag(read, "LLM read from its config.json, not from the catalogue")
    return notes.joined()


def _known(in_catalog: np.ndarray) -> np.ndarray:
    """Catalogue flags as booleans, blank counting as known (the checked queries' are bool)."""
    if in_catalog.dtype == bool:
        return in_catalog
    return pd.Series(in_catalog).fillna(True).astype(bool).to_numpy()


def _distinct(values: Any, func: Callable[[Any], Any]) -> np.ndarray:
    """``func`` of each row's value, called once per distinct value (an object array)."""
    codes, uniques = unique_codes(values)
    out = np.empty(len(uniques), dtype=object)
    out[:] = [func(u) for u in uniques]
    return out[codes]


def _flag_formats(notes: Notes, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
    """Flag a weight format no training row had (nothing for a model that predates the list)."""
    seen = domain.get("formats_seen")
    if not seen or "dtype" not in features:
        return
    formats = _distinct(features["dtype"], canonical_format)
    notes.flag(
        _distinct(formats, lambda name: name not in seen).astype(bool),
        lambda name: f"weights in {name}: the model was trained on none ({', '.join(seen)} only)",
        formats,
    )


def _flag_ranges(notes: Notes, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
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
            notes.flag(
                np.isfinite(column_values) & (column_values > high * RANGE_MARGIN),
                lambda v, lab=label, h=high: f"{lab} {v:g} beyond the trained range (max {h:g})",
                column_values,
            )
        if np.isfinite(low):
            notes.flag(
                np.isfinite(column_values) & (column_values < low / RANGE_MARGIN),
                lambda v, lab=label, lo=low: f"{lab} {v:g} below the trained range (min {lo:g})",
                column_values,
            )


def _flag_load(notes: Notes, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
    """Flag a scenario, or a kind of server load (rate or users), that training never saw.

    Models trained before the domain recorded scenarios and users are not flagged.
    """
    scenarios = domain.get("scenarios")
    if not scenarios:
        return
    scenario = _distinct(features["scenario"], str)
    notes.flag(
        _distinct(scenario, lambda name: name not in scenarios).astype(bool),
        lambda name: f"scenario {name} not seen in training ({', '.join(scenarios)} only)",
        scenario,
    )
    if "server" not in scenarios or "users" not in domain or "users" not in features:
        return
    closed = (scenario == "server") & np.isfinite(np.asarray(features["users"], dtype=float))
    rates_seen = np.isfinite(domain["request_rate_rps"][1])
    users_seen = np.isfinite(domain["users"][1])
    if not users_seen:
        notes.flag(
            closed, "load as concurrent users: the model saw servers given by request rate only"
        )
    if not rates_seen:
        notes.flag(
            (scenario == "server") & ~closed,
            "load as a request rate: the model saw servers given by concurrent users only",
        )


def _flag_engines(notes: Notes, features: Mapping[str, Any], domain: dict[str, Any]) -> None:
    """Flag an engine not seen in training.

    A release year outside the trained ones is not flagged: the year acts only through a trend
    bounded to 15 % a year (``physics.MAX_YEAR_EFFECT``), never through the trees, so nothing
    is extrapolated beyond that bound (and today's release, the default, would flag every query
    of a model trained on last year's engines).
    """
    engines = set(domain.get("engines", []))
    if engines:
        engine = _distinct(features["engine"], str)
        notes.flag(
            _distinct(engine, lambda name: name not in engines).astype(bool),
            lambda name: f"engine {name!r} not seen in training ({', '.join(sorted(engines))})",
            engine,
        )
