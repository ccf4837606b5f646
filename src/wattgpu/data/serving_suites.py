"""The expectation suites of the serving tables, built in code, and their derived check columns.

The simulated serving loop reads three tables: ``engine_lines.csv`` (each engine release line's
scheduler, defaults and host time: :mod:`wattgpu.data.engine_lines`), ``clients.csv`` (each
benchmark's harness) and ``length_distributions.csv`` (named length distributions, quantiles of a
length over its mean: :mod:`wattgpu.data.clients`). Their loaders check what they need in order
to read them; these suites check every value, as the catalogues' suites do
(:mod:`wattgpu.data.suites` gathers all of them).

Rules that span cells, rows or tables are checked on derived columns added by the
``derive_*_checks`` functions: a tiered default's every value, the tiers against their bounds,
a distribution's quantiles rising, a client's distribution present in the length table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data import engine_lines
from wattgpu.data.clients import (
    FACTS,
    FIXED,
    KINDS,
    LENGTH_COLUMNS,
    LOGNORMAL,
    MAX_LOGNORMAL_SPREAD,
    NUMERIC,
    QUANTILES,
    REQUIRED,
    SIDES,
    TTFT_STATISTICS,
    UNIFORM,
    UNKNOWN,
    distribution_names,
    provenance_fields,
)
from wattgpu.data.suite_parts import (
    between,
    exists,
    expectation,
    holds,
    in_set,
    not_null,
    numeric,
    numeric_types,
    text_types,
)

ENGINE_LINE_TEXT = (
    "line",
    "engine",
    "policy",
    "max_batched_tokens",
    "max_num_seqs",
    "memory_of",
    "reserve",
    "preemption",
    "source",
)
ENGINE_LINE_NUMERIC = ("first_year", "last_year", "chunked_prefill", *engine_lines.NUMERIC)
HOST_COLUMNS = ("host_fixed_s", "host_per_seq_s", "host_per_shard_s", "host_per_layer_s")
# A step's host time is milliseconds; a part of it at 0.1 s or more is a unit mistake (ms for s).
MAX_HOST_S = 0.1
# A token budget may be the LLM's context length, written so.
CONTEXT = "context"
CLIENT_TEXT = ("client", "kind", "lengths", "ttft_statistic", "source")
CLIENT_PROVENANCE = ("inferred", "unknown")
LENGTH_TEXT = ("distribution", "side", "source")
# How engine_lines.csv and clients.csv are read for validation: text stays text.
ENGINE_LINE_DTYPES = {
    c: str
    for c in (
        "versions",
        "max_batched_tokens",
        "max_num_seqs",
        "tier_gib",
        "tier_excludes",
        "to_fit",
    )
}
CLIENT_DTYPES = {c: str for c in (*CLIENT_TEXT, *CLIENT_PROVENANCE, "engine_line")}


def engine_line_expectations() -> list[dict[str, Any]]:
    """Return the engine line table's expectations."""
    return [
        *exists(engine_lines.REQUIRED),
        *text_types(ENGINE_LINE_TEXT),
        *numeric_types(ENGINE_LINE_NUMERIC),
        expectation("expect_column_values_to_be_unique", column="line"),
        *not_null(
            (*ENGINE_LINE_TEXT, "chunked_prefill", "memory_fraction", *HOST_COLUMNS), ("line",)
        ),
        in_set("policy", list(engine_lines.POLICIES)),
        in_set("preemption", list(engine_lines.PREEMPTIONS)),
        in_set("reserve", list(engine_lines.RESERVES)),
        in_set("memory_of", list(engine_lines.MEMORY_OF)),
        in_set("chunked_prefill", [0, 1]),
        between("memory_fraction", 0, 1, strict_min=True),
        *[between(c, 0, MAX_HOST_S, strict_max=True) for c in HOST_COLUMNS],
        between("waiting_served_ratio", 0, None, strict_min=True),
        between("max_waiting_steps", 1, None),
        between("first_year", 2000, 2100),
        between("last_year", 2000, 2100),
        holds("budgets_positive", "line", "max_batched_tokens"),
        holds("caps_positive", "line", "max_num_seqs"),
        holds("tiers_match", "line", "tier_gib"),
        holds("years_in_order", "line"),
        holds("to_fit_names_values", "line", "to_fit"),
    ]


def client_expectations() -> list[dict[str, Any]]:
    """Return the client table's expectations."""
    return [
        *exists(REQUIRED),
        *text_types(CLIENT_TEXT),
        *numeric_types(NUMERIC),
        expectation("expect_column_values_to_be_unique", column="client"),
        *not_null((*CLIENT_TEXT, "batch_is_max_num_seqs"), ("client",)),
        in_set("kind", list(KINDS)),
        in_set("ttft_statistic", list(TTFT_STATISTICS)),
        in_set("batch_is_max_num_seqs", [0, 1]),
        in_set("chunked_prefill", [0, 1]),
        # a lognormal's sigma of log length (a uniform's, below 1: ``spread_fits_lengths``)
        between("spread", 0, MAX_LOGNORMAL_SPREAD),
        between("warmup_per_user", 0, None),
        between("requests_per_user", 0, None, strict_min=True),
        between("total_requests", 1, None),
        between("max_batched_tokens", 0, None, strict_min=True),
        between("memory_fraction", 0, 1, strict_min=True),
        between("host_share", 0, 1, strict_min=True),
        holds("lengths_known", "client", "lengths"),
        holds("engine_line_known", "client", "engine_line"),
        holds("spread_fits_lengths", "client"),
        # what a source does not state is named and left blank, never filled with a stand-in
        holds("provenance_names_facts", "client", "inferred", "unknown"),
        holds("unknown_left_blank", "client", "unknown"),
        holds("inferred_or_unknown", "client"),
    ]


def length_expectations() -> list[dict[str, Any]]:
    """Return the length distribution table's expectations."""
    return [
        *exists(LENGTH_COLUMNS),
        *text_types(LENGTH_TEXT),
        *numeric_types(("quantile", "ratio_to_mean")),
        *not_null(LENGTH_COLUMNS, ("distribution", "side")),
        in_set("side", list(SIDES)),
        in_set("quantile", [float(q) for q in QUANTILES]),
        between("ratio_to_mean", 0, None, strict_min=True),
        holds("quantiles_complete", "distribution", "side"),
        holds("quantiles_rising", "distribution", "side", "quantile"),
    ]


def _column(frame: pd.DataFrame, name: str) -> pd.Series:
    """The column, or blanks where the table lacks it (its own expectation reports that)."""
    return frame[name] if name in frame.columns else pd.Series(None, index=frame.index)


def _parts(value: object) -> list[str]:
    """The ``|``-separated values of a cell ([] when blank)."""
    if pd.isna(value):
        return []
    return [part.strip() for part in str(value).split("|")]


def _positive(parts: list[str], words: tuple[str, ...] = ()) -> bool:
    """Every part is a positive finite number (or one of ``words``), and there is one."""
    if not parts:
        return False
    for part in parts:
        if part in words:
            continue
        try:
            number = float(part)
        except ValueError:
            return False
        if not (np.isfinite(number) and number > 0):
            return False
    return True


def _tiers_match(bounds: list[str], *tiered: list[str]) -> bool:
    """The bounds are rising positive numbers; each tiered value gives one or one per tier."""
    if bounds and not _positive(bounds):
        return False
    if bounds and (np.diff([float(b) for b in bounds]) <= 0).any():
        return False
    return all(len(values) in (1, len(bounds) + 1) for values in tiered)


def derive_engine_line_checks(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of the engine line table with the derived check columns added.

    ``budgets_positive``: every tier of ``max_batched_tokens`` is a positive number or
    ``context``; ``caps_positive``: every tier of ``max_num_seqs`` is a positive number;
    ``tiers_match``: ``tier_gib`` holds rising positive bounds and each tiered column one value
    or one per tier; ``years_in_order``: ``first_year`` is not after ``last_year``;
    ``to_fit_names_values``: ``to_fit`` names only values a fit can set (``FITTABLE``).
    """
    out = frame.reset_index(drop=True)
    budgets, caps, bounds = (
        [_parts(v) for v in _column(out, name)]
        for name in ("max_batched_tokens", "max_num_seqs", "tier_gib")
    )
    out["budgets_positive"] = [_positive(b, (CONTEXT,)) for b in budgets]
    out["caps_positive"] = [_positive(c) for c in caps]
    out["tiers_match"] = [_tiers_match(*parts) for parts in zip(bounds, budgets, caps, strict=True)]
    first, last = numeric(out, "first_year"), numeric(out, "last_year")
    out["years_in_order"] = (first.isna() | last.isna() | (first <= last)).astype(bool)
    fittable = set(engine_lines.FITTABLE)
    out["to_fit_names_values"] = [set(_parts(v)) <= fittable for v in _column(out, "to_fit")]
    return out


def derive_client_checks(
    frame: pd.DataFrame, distributions: Iterable[str] | None = None
) -> pd.DataFrame:
    """Return a copy of the client table with the derived check columns added.

    ``lengths_known``: ``lengths`` is ``fixed``, ``uniform`` or a distribution of
    ``distributions`` (default: those of the shipped ``length_distributions.csv``);
    ``spread_fits_lengths``: a ``uniform`` client states its ``spread``, below 1 (a uniform
    spread of 1 would reach lengths of zero), a ``lognormal`` one states its sigma;
    ``engine_line_known``: an ``engine_line`` names a line of ``engine_lines.csv``;
    ``provenance_names_facts``: ``inferred`` and ``unknown`` name only fields of ``FACTS``;
    ``unknown_left_blank``: every field named unknown is blank in the row (``lengths``:
    ``unknown``); ``inferred_or_unknown``: no field is named both.
    """
    out = frame.reset_index(drop=True)
    named = distribution_names() if distributions is None else frozenset(distributions)
    lengths = _column(out, "lengths")
    allowed = {FIXED, UNIFORM, LOGNORMAL, UNKNOWN, *named}
    out["lengths_known"] = (lengths.isna() | lengths.isin(allowed)).astype(bool)
    spread = numeric(out, "spread")
    out["spread_fits_lengths"] = (
        ((lengths != UNIFORM) | (spread < 1.0)) & ((lengths != LOGNORMAL) | spread.notna())
    ).astype(bool)
    line = _column(out, "engine_line")
    known_lines = set(engine_lines.engine_lines().table["line"])
    out["engine_line_known"] = (line.isna() | line.isin(known_lines)).astype(bool)
    inferred = [provenance_fields(v) for v in _column(out, "inferred")]
    unknown = [provenance_fields(v) for v in _column(out, "unknown")]
    out["provenance_names_facts"] = [
        set(i) <= set(FACTS) and set(u) <= set(FACTS)
        for i, u in zip(inferred, unknown, strict=True)
    ]
    out["unknown_left_blank"] = [
        all(_left_blank(out, row, field) for field in fields) for row, fields in enumerate(unknown)
    ]
    out["inferred_or_unknown"] = [
        not set(i) & set(u) for i, u in zip(inferred, unknown, strict=True)
    ]
    return out


def _left_blank(frame: pd.DataFrame, row: int, field: str) -> bool:
    """Whether a field a client names unknown holds no value (``unknown`` for its lengths)."""
    if field == "lengths":
        return frame.at[row, "lengths"] == UNKNOWN if "lengths" in frame.columns else True
    if field not in frame.columns:
        return True  # a fact the table has no column for (the engine's cap on requests)
    return bool(pd.isna(frame.at[row, field]))


def derive_length_checks(frame: pd.DataFrame) -> pd.DataFrame:
    """Return a copy of the length table with the derived check columns added.

    ``quantiles_complete``: the row's (distribution, side) gives each of the 21 quantile levels
    once; ``quantiles_rising``: its ratio is not below the ratio of the level before it.
    """
    out = frame.reset_index(drop=True)
    if not {"distribution", "side"} <= set(out.columns):
        out["quantiles_complete"] = False
        out["quantiles_rising"] = False
        return out
    quantile, ratio = numeric(out, "quantile"), numeric(out, "ratio_to_mean")
    keys = [out["distribution"].fillna(""), out["side"].fillna("")]
    levels = sorted(float(q) for q in QUANTILES)
    complete = quantile.groupby(keys).transform(lambda q: sorted(q.tolist()) == levels)
    out["quantiles_complete"] = complete.astype(bool)
    order = quantile.sort_values(kind="stable").index
    previous = ratio[order].groupby([k[order] for k in keys]).shift()
    out["quantiles_rising"] = (previous.isna() | (ratio[order] >= previous)).reindex(out.index)
    out["quantiles_rising"] = out["quantiles_rising"].astype(bool)
    return out
