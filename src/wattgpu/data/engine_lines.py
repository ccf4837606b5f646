"""Engine release lines as data (``data/engine_lines.csv``): each line's scheduler and defaults.

A line is a run of releases of one engine that schedule alike (vLLM's V0 engine of 0.2 - 0.5,
its V0 with overlapped output processing of 0.6 - 0.7, its V1 engine of 0.8 on, SGLang,
TensorRT-LLM, TGI before and after 2.0, ...). Each row says how its scheduler builds a step
(``policy``, ``chunked_prefill``), its defaults (the token budget ``max_batched_tokens``, the most
running requests ``max_num_seqs``, the memory given to weights and KV cache, what admission
reserves, whether a full cache preempts), a pausing engine's knobs, and the host time of a step
(``host_fixed_s``, ``host_per_seq_s``, ``host_per_shard_s`` per GPU beyond the first,
``host_per_layer_s``), each with its ``source``. Defaults that depend on the GPU's memory list
one value per tier: ``tier_gib`` gives the tiers' lower bounds (``2048|8192`` with ``70``: 2,048
below 70 GiB, 8,192 from it), and ``tier_excludes`` names GPUs that stay in the lowest tier.
``context`` as a budget means the LLM's context length (at least 2,048 tokens). ``to_fit`` names
the values that no source publishes (``|``-separated): the table's value is where a fit starts.

A row's line is found by its version (the longest listed prefix, as ``data.engines`` does),
else by its release year (the newest line whose years hold it), else the engine's newest line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.arrays import pair_codes
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.engines import DEFAULT_ENGINE, extends, normalised_version
from wattgpu.errors import DataError

ENGINE_LINES_FILE = "engine_lines.csv"
# The scheduling policies, in the order of ``modeling.physical.scheduler``'s codes.
POLICIES = (
    "prefill_first",
    "decode_first",
    "inflight",
    "prefill_pause",
    "static",
    "prefill_pause_decay",
)
PREEMPTIONS = ("recompute", "none")
RESERVES = ("current", "full")
MEMORY_OF = ("total", "free")
# A budget of ``context`` is the LLM's context length, but never below this (vLLM V0's rule).
MIN_CONTEXT_BUDGET = 2048.0
NUMERIC = (
    "memory_fraction",
    "waiting_served_ratio",
    "max_waiting_steps",
    "host_fixed_s",
    "host_per_seq_s",
    "host_per_shard_s",
    "host_per_layer_s",
)
REQUIRED = (
    "line",
    "engine",
    "versions",
    "first_year",
    "last_year",
    "policy",
    "chunked_prefill",
    "max_batched_tokens",
    "max_num_seqs",
    "tier_gib",
    "tier_excludes",
    "memory_of",
    "reserve",
    "preemption",
    *NUMERIC,
    "to_fit",
    "source",
)
# What ``to_fit`` may name: the values no source publishes (host times, a cap nobody documents),
# kept in the table as the fit's starting point and fitted on each fold's training rows.
FITTABLE = ("max_batched_tokens", "max_num_seqs", *NUMERIC)


@dataclass(frozen=True)
class EngineLines:
    """The table of engine release lines, one row per line (``REQUIRED`` columns)."""

    table: pd.DataFrame

    @classmethod
    def read(cls, path: Path) -> EngineLines:
        """Load and check ``engine_lines.csv``."""
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (OSError, pd.errors.ParserError) as exc:
            raise DataError(f"engine line table {path} is not a readable CSV: {exc}") from None
        missing = [c for c in REQUIRED if c not in frame.columns]
        if missing:
            raise DataError(f"engine line table {path} lacks the columns {', '.join(missing)}")
        for column, allowed in (
            ("policy", POLICIES),
            ("preemption", PREEMPTIONS),
            ("reserve", RESERVES),
            ("memory_of", MEMORY_OF),
        ):
            bad = sorted(set(frame[column]) - set(allowed))
            if bad:
                raise DataError(
                    f"engine line table {path}: {column} must be one of {', '.join(allowed)}; "
                    f"got {bad[0]!r}"
                )
        return cls(frame.reset_index(drop=True))

    def line_of(self, engine: str, version: object, year: float) -> int:
        """The row of ``engine``'s line for ``version`` (or ``year``); -1 for an unlisted engine."""
        rows = self.table.index[self.table["engine"] == str(engine)]
        if not len(rows):
            return -1
        text = normalised_version(version)
        if text:
            best, length = -1, 0
            for row in rows:
                for prefix in filter(None, self.table.at[row, "versions"].lower().split("|")):
                    if (text == prefix or extends(text, prefix)) and len(prefix) > length:
                        best, length = int(row), len(prefix)
            if best >= 0:
                return best
        if np.isfinite(year):
            held = [
                int(row)
                for row in rows
                if _year(self.table.at[row, "first_year"], -np.inf)
                <= year
                <= _year(self.table.at[row, "last_year"], np.inf)
            ]
            if held:
                return max(held, key=lambda r: _year(self.table.at[r, "first_year"], -np.inf))
        return int(max(rows, key=lambda r: _year(self.table.at[r, "first_year"], -np.inf)))

    def lines_of(self, engines: np.ndarray, versions: np.ndarray, years: np.ndarray) -> np.ndarray:
        """``line_of`` for each row (an unlisted engine gets today's vLLM line)."""
        codes, pairs = pair_codes(np.asarray(engines, object), np.asarray(versions, object))
        found = np.empty(len(codes), dtype=int)
        years = np.asarray(years, float)
        cache_: dict[tuple[int, float], int] = {}
        default = self.line_of(DEFAULT_ENGINE, None, np.nan)
        for i, (code, year) in enumerate(zip(codes, years, strict=True)):
            key = (int(code), float(year))
            if key not in cache_:
                engine, version = pairs[code]
                line = self.line_of(engine, version, year)
                cache_[key] = default if line < 0 else line
            found[i] = cache_[key]
        return found

    def column(self, name: str) -> pd.Series:
        """One column of the table (the numeric ones as floats, blank as NaN)."""
        values = self.table[name]
        if name in NUMERIC:
            return pd.to_numeric(values.replace("", np.nan), errors="coerce").astype(float)
        return values

    def tiered(
        self, name: str, lines: np.ndarray, memory_gib: np.ndarray, gpu: np.ndarray
    ) -> np.ndarray:
        """A tiered default (``max_batched_tokens`` / ``max_num_seqs``) of each row's line.

        ``context`` comes back as NaN (the LLM's context length: the caller's to fill).
        """
        out = np.full(len(lines), np.nan)
        for line in np.unique(lines):
            rows = lines == line
            values = [_number(v) for v in self.table.at[line, name].split("|")]
            bounds = [float(b) for b in filter(None, self.table.at[line, "tier_gib"].split("|"))]
            tier = np.zeros(int(rows.sum()), dtype=int)
            for bound in bounds:
                tier += memory_gib[rows] >= bound
            excluded = self.table.at[line, "tier_excludes"]
            if excluded:
                names = np.asarray(gpu[rows], dtype=str)
                tier = np.where(np.char.find(np.char.lower(names), excluded.lower()) >= 0, 0, tier)
            out[rows] = np.asarray(values)[np.minimum(tier, len(values) - 1)]
        return out


def _year(text: str, default: float) -> float:
    return float(text) if str(text).strip() else default


def _number(text: str) -> float:
    return np.nan if text.strip() == "context" else float(text)


@cache
def engine_lines(path: Path = SHIPPED_DATA_DIR / ENGINE_LINES_FILE) -> EngineLines:
    """The engine line table at ``path`` (default: the shipped one), read once per process."""
    return EngineLines.read(path)
