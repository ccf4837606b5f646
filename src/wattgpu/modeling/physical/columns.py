"""Rows as the physical pipeline passes them: columns held as numpy arrays.

Every stage takes a DataFrame or columns (``Columns``) and works on arrays; ``columns_of`` and
``as_given`` are the edges where a frame becomes columns and back. The served model passes
columns from end to end: pandas' per-column overhead (alignment, copies, dtype checks) cost
about 30 ms for a one-row query, twenty times the arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from wattgpu.arrays import blanks, unique_codes

# Columns of a frame as arrays: what the stages pass to each other.
Columns = dict[str, np.ndarray]
# Rows as a caller holds them: a frame (training, tests) or columns (the served model).
Rows = TypeVar("Rows", pd.DataFrame, Columns)
# One column as a caller holds it: a Series (of a frame) or an array.
Column = TypeVar("Column", pd.Series, np.ndarray)
# Rows of either kind, as the stages after ``workload`` read them.
Table = pd.DataFrame | Mapping[str, Any]


def columns_of(frame: pd.DataFrame | Mapping[str, Any]) -> Columns:
    """A frame's (or a mapping's) columns as numpy arrays (no copy where pandas allows).

    Columns already held as arrays are taken as they are: every feature step starts here, and a
    served query's ~100 columns are arrays from end to end.
    """
    if isinstance(frame, pd.DataFrame):
        return {str(c): np.asarray(frame[c]) for c in frame.columns}
    return {str(c): v if type(v) is np.ndarray else np.asarray(v) for c, v in frame.items()}


def as_given(columns: Columns, given: Any) -> Any:
    """Frame in, frame out (on the given index); columns in, columns out.

    Text columns stay NumPy object arrays: pandas would make them Arrow strings, and every later
    ``iloc`` and ``to_numpy`` of a fold would convert them back, string by string (a third of a
    job's time went to such round trips).
    """
    if not isinstance(given, pd.DataFrame):
        return columns
    index = given.index
    return pd.DataFrame(
        {
            name: pd.Series(values, index=index, dtype=object, copy=False)
            if values.dtype == object
            else values
            for name, values in columns.items()
        },
        index=index,
    )


def column_as_given(values: np.ndarray, given: Any) -> Any:
    """A Series on the given frame's (or Series') index, or the array for columns."""
    if isinstance(given, pd.DataFrame | pd.Series):
        return pd.Series(values, index=given.index)
    return values


def floats(values: Any) -> np.ndarray:
    """A column as floats (blank -> NaN), like ``Series.astype(float)``."""
    array = np.asarray(values)
    return array if array.dtype == np.float64 else array.astype(float)


def filled(values: np.ndarray, default: Any) -> np.ndarray:
    """``values`` with blanks (None, NaN) replaced by ``default`` (an array or a scalar)."""
    blank = blanks(values)
    if isinstance(default, np.ndarray) and default.dtype == values.dtype and blank.all():
        return default  # what np.where would copy (a query's absent specs: the catalogue's)
    return np.where(blank, default, values)


def map_unique(values: np.ndarray, func: Callable[[Any], Any], dtype: Any) -> np.ndarray:
    """``func`` applied once per distinct value, then spread back over the rows."""
    codes, uniques = unique_codes(values)
    mapped = np.empty(len(uniques), dtype=dtype)
    mapped[:] = [func(u) for u in uniques]
    return mapped[codes]


def get(columns: Mapping[str, np.ndarray], name: str, n: int) -> np.ndarray:
    """A column, or NaNs when the frame has none."""
    return columns[name] if name in columns else np.full(n, np.nan)


def count(columns: Mapping[str, np.ndarray]) -> int:
    """The number of rows of columns."""
    return len(next(iter(columns.values()))) if columns else 0


def values(rows: Table, column: str, default: float, positive: bool = False) -> np.ndarray:
    """A float column; missing, non-finite, negative (zero if ``positive``) -> ``default``."""
    if column not in rows:
        return np.full(length(rows), default, dtype=float)
    found = np.asarray(rows[column])
    if found.dtype != np.float64:
        found = np.asarray(pd.to_numeric(found, errors="coerce"), dtype=float)
    ok = np.isfinite(found) & ((found > 0) if positive else (found >= 0))
    return np.where(ok, found, default)


def length(rows: Table) -> int:
    """The number of rows of a frame or of columns."""
    if isinstance(rows, pd.DataFrame):
        return len(rows)
    return len(next(iter(rows.values()))) if rows else 0
