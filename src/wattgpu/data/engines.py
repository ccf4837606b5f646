"""Serving engines and the release year of each version (``data/engines.csv``).

A user states the engine they run by name and, optionally, by version (``--engine vllm
--engine-version 0.19.0``) or by its release year (``--engine-year 2025``); with neither, the
query means today's release of the engine (the newest year the table lists for it). The table's
keys are version prefixes: ``0.8.1.post2`` is found under ``0.8`` (the longest listed prefix
wins, so ``1.2.0rc6.post1`` finds ``1.2.0rc6`` before ``1.2``). Measurement rows state their
version the same way, so the release year of a row is a fact of the software, never read from a
file's date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.arrays import blanks, pair_codes, unique_codes
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.errors import DataError

# What a query that names no engine runs: vLLM, the most used open engine.
DEFAULT_ENGINE = "vllm"
ENGINES_FILE = "engines.csv"
# A leading "v" of a tag (v0.19.0) is not part of the version.
_LEADING_V = re.compile(r"^v(?=\d)")


@dataclass(frozen=True)
class EngineReleases:
    """The release year of each (engine, version prefix) of ``engines.csv``."""

    years: dict[str, dict[str, int]]

    @classmethod
    def read(cls, path: Path) -> EngineReleases:
        """Load ``engines.csv`` (columns ``engine``, ``version``, ``release_year``, ``source``)."""
        try:
            frame = pd.read_csv(path, dtype={"version": str})
        except (OSError, pd.errors.ParserError) as exc:
            raise DataError(f"engine table {path} is not a readable CSV: {exc}") from None
        years: dict[str, dict[str, int]] = {}
        for engine, version, year in frame[["engine", "version", "release_year"]].itertuples(
            index=False
        ):
            years.setdefault(str(engine), {})[str(version).lower()] = int(year)
        return cls(years)

    def engines(self) -> tuple[str, ...]:
        """The engines the table lists."""
        return tuple(sorted(self.years))

    def current_year(self, engine: str) -> float:
        """Today's release of ``engine``: the newest year listed for it (NaN if unlisted)."""
        listed = self.years.get(str(engine))
        return float(max(listed.values())) if listed else float("nan")

    def release_year(self, engine: str, version: object) -> float:
        """The release year of ``engine`` at ``version`` (NaN when the table does not know it)."""
        listed = self.years.get(str(engine))
        if not listed or version is None or pd.isna(version):
            return float("nan")
        text = normalised_version(version)
        found = [v for v in listed if text == v or extends(text, v)]
        return float(listed[max(found, key=len)]) if found else float("nan")

    def years_of(self, engines: np.ndarray, versions: np.ndarray) -> np.ndarray:
        """``release_year`` of each (engine, version) pair, NaN where unknown."""
        if blanks(versions).all():  # no version stated: no pair to look up
            return np.full(len(engines), np.nan)
        codes, uniques = pair_codes(engines, versions)
        looked_up = np.array([self.release_year(e, v) for e, v in uniques], dtype=float)
        return looked_up[codes] if len(uniques) else np.full(len(engines), np.nan)


def normalised_version(version: object) -> str:
    """A version as the tables key it: lower case, no leading ``v`` of a tag ("" for blank)."""
    if version is None or pd.isna(version):
        return ""
    return _LEADING_V.sub("", str(version).strip().lower())


def extends(version: str, prefix: str) -> bool:
    """Whether ``version`` is ``prefix`` followed by a finer part (``0.8.1`` of ``0.8``)."""
    return version.startswith(prefix) and not version[len(prefix)].isdigit()


@cache
def releases(path: Path = SHIPPED_DATA_DIR / ENGINES_FILE) -> EngineReleases:
    """The engine table at ``path`` (default: the shipped one), read once per process."""
    return EngineReleases.read(path)


def engine_years(engines: np.ndarray, versions: np.ndarray, years: np.ndarray) -> np.ndarray:
    """Each row's engine release year: its stated year, else its version's, else today's.

    ``years`` may hold NaN (not stated); a version the table does not know counts as not stated
    (a query's version is checked against the table before it gets here). Today's release of an
    engine the table does not list is today's vLLM.
    """
    table = releases()
    stated = np.asarray(years, dtype=float)
    engines = np.asarray(engines, dtype=object)
    by_version = table.years_of(engines, np.asarray(versions, dtype=object))
    codes, uniques = unique_codes(np.where(blanks(engines), DEFAULT_ENGINE, engines))
    today_of = np.array([table.current_year(e) for e in uniques], dtype=float)
    today = today_of[codes] if len(uniques) else np.full(len(engines), np.nan)
    today = np.where(np.isnan(today), table.current_year(DEFAULT_ENGINE), today)
    return np.where(np.isnan(stated), np.where(np.isnan(by_version), today, by_version), stated)
