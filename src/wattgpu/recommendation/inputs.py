"""The recommendation's inputs, checked: the day's load and the GPU prices, as values or CSV files.

The load comes as a constant rate, requests a day or a 24-hour profile (``daily_load`` turns
each into 24 rows of hour and rate); prices map catalogue GPUs to $/hour. Every fault is raised
as a ``QueryError`` (naming the field and the bad value) or, for an unreadable file, a
``DataError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Number
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.errors import DataError, QueryError
from wattgpu.modeling.answering.queries import show
from wattgpu.recommendation.ranking import HOURS


def check_positive(value: Any, field: str, allow_zero: bool = False) -> float:
    """``value`` as a float if it is a finite number > 0 (>= 0 with ``allow_zero``).

    Raises:
        QueryError: naming ``field``, what is allowed and the bad value.

    """
    if isinstance(value, bool) or not isinstance(value, Number | np.number):
        raise QueryError(f"{field} must be a number; got {show(value)}", field)
    number = float(value)
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        allowed = "a finite number >= 0" if allow_zero else "a finite number > 0"
        raise QueryError(f"{field} must be {allowed}; got {show(value)}", field)
    return number


def check_tokens(value: Any, field: str, default: float) -> float:
    """A token count: a whole number >= 1, or ``default`` when ``value`` is ``None``."""
    if value is None:
        return default
    number = check_positive(value, field)
    if number < 1 or not number.is_integer():
        raise QueryError(f"{field} must be a whole number >= 1; got {show(value)}", field)
    return number


def check_profile(profile: pd.DataFrame) -> pd.DataFrame:
    """A load profile checked: columns ``hour`` (each of 0-23 once) and ``rate`` (req/s, >= 0).

    Returns:
        The 24 rows sorted by hour, ``hour`` as int and ``rate`` as float.

    Raises:
        QueryError: naming the field at fault and the bad value.

    """
    missing = [c for c in ("hour", "rate") if c not in profile.columns]
    if missing:
        raise QueryError(
            f"load profile lacks column(s) {', '.join(missing)} (needs hour 0-23 and rate, "
            f"req/s); got {', '.join(map(str, profile.columns))}",
            missing[0],
        )
    hours = pd.to_numeric(profile["hour"], errors="coerce")
    bad = profile["hour"][hours.isna() | (hours % 1 != 0) | (hours < 0) | (hours > 23)]
    if len(bad):
        raise QueryError(f"load profile: hour must be a whole number 0-23; got {bad.iloc[0]!r}")
    dupes = hours[hours.duplicated()]
    if len(dupes):
        raise QueryError(f"load profile: hour must be unique; got {int(dupes.iloc[0])} twice")
    absent = sorted(set(range(HOURS)) - set(hours.astype(int)))
    if absent:
        raise QueryError(
            f"load profile: hour must cover the whole day 0-23; missing {absent[:6]}", "hour"
        )
    rates = pd.to_numeric(profile["rate"], errors="coerce")
    bad = profile["rate"][rates.isna() | ~np.isfinite(rates) | (rates < 0)]
    if len(bad):
        raise QueryError(f"load profile: rate must be a finite number >= 0; got {bad.iloc[0]!r}")
    if not (rates > 0).any():
        raise QueryError("load profile: rate must be > 0 in at least one hour; got all 0", "rate")
    out = pd.DataFrame({"hour": hours.astype(int), "rate": rates.astype(float)})
    return out.sort_values("hour").reset_index(drop=True)


def daily_load(
    rate: float | None = None,
    requests_per_day: float | None = None,
    load_profile: pd.DataFrame | None = None,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame | None:
    """The day's load as 24 rows (hour, rate req/s) from exactly one of the three forms, or None.

    ``names``: what a message calls each of the three (default: its keyword).
    """
    named = {"rate": "rate", "requests_per_day": "requests_per_day"}
    named |= {"load_profile": "load_profile", **(names or {})}
    given = [
        n for n, v in (("rate", rate), ("requests_per_day", requests_per_day)) if v is not None
    ]
    if load_profile is not None:
        given.append("load_profile")
    if len(given) > 1:
        raise QueryError(f"give one load, not {' and '.join(named[n] for n in given)}", given[1])
    if load_profile is not None:
        return check_profile(load_profile)
    if requests_per_day is not None:
        rate = check_positive(requests_per_day, named["requests_per_day"]) / 86400.0
    if rate is None:
        return None
    rate = check_positive(rate, named["rate"])
    return pd.DataFrame({"hour": range(HOURS), "rate": rate})


def check_prices(
    prices: Mapping[str, Any], catalog: Catalog, label: str = "prices"
) -> dict[str, float]:
    """Prices keyed by canonical GPU name; unknown names and negative prices raise.

    ``label``: what a message calls the prices (the CLI: ``--price-file``).
    """
    out: dict[str, float] = {}
    for name, price in prices.items():
        found = catalog.match("gpu", str(name))
        gpu = found.canonical
        if gpu is None:
            raise QueryError(f"{label}: gpu {name!r} {found.problem}", "gpu")
        if gpu in out:
            raise QueryError(f"{label}: gpu {gpu!r} is priced twice (also as {name!r})", "gpu")
        try:
            out[gpu] = check_positive(price, "usd_per_hour", allow_zero=True)
        except QueryError as exc:
            raise QueryError(f"{label}: {exc} (gpu {name!r})", "usd_per_hour") from None
    return out


def _read_csv(path: Path, what: str, columns: str) -> pd.DataFrame:
    if Path(path).is_dir():
        raise DataError(f"{what} {path} is a directory; give a CSV file with columns {columns}")
    if not Path(path).is_file():
        raise DataError(f"{what} not found: {path} (a CSV with columns {columns})")
    try:
        return pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DataError(f"{what} {path} is not a readable CSV: {exc}") from None


def read_load_profile(path: Path) -> pd.DataFrame:
    """A load profile CSV (columns hour, rate), checked."""
    frame = _read_csv(path, "load profile", "hour, rate")
    try:
        return check_profile(frame)
    except QueryError as exc:
        raise QueryError(f"{path}: {exc}", exc.field) from None


def read_prices(path: Path) -> dict[str, Any]:
    """A price CSV (columns gpu, usd_per_hour) as a dict; names and values are checked later."""
    frame = _read_csv(path, "price file", "gpu, usd_per_hour")
    missing = [c for c in ("gpu", "usd_per_hour") if c not in frame.columns]
    if missing:
        raise QueryError(
            f"price file {path} lacks column(s) {', '.join(missing)} (needs gpu, usd_per_hour)",
            missing[0],
        )
    values = pd.to_numeric(frame["usd_per_hour"], errors="coerce")
    bad = frame["usd_per_hour"][values.isna()]
    if len(bad):
        raise QueryError(
            f"price file {path}: usd_per_hour must be a number; got {bad.iloc[0]!r}",
            "usd_per_hour",
        )
    return dict(zip(frame["gpu"].astype(str), values.astype(float), strict=True))
