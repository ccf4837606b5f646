"""The parts every expectation suite is built from, as the plain dictionaries GE stores.

:mod:`wattgpu.data.suites` (the catalogues and the measurements) and
:mod:`wattgpu.data.serving_suites` (engine lines, clients, length distributions) build their
suites from these; nothing here imports Great Expectations.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# pandas 3 reads text as dtype "str" (a column with no value at all reads as float64);
# integers as int64, or float64 when a value is blank. expect_column_values_to_be_in_type_list
# does not recognise the "str" dtype, so text columns use expect_column_values_to_be_of_type.
TEXT_TYPE = "str"
NUMERIC_TYPES = ["int64", "float64", "Int64", "Float64"]


def expectation(kind: str, meta: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Return one expectation as the plain dictionary Great Expectations stores.

    Args:
        kind: the snake_case expectation type, e.g. ``"expect_column_values_to_be_between"``.
        meta: free-form notes kept with the expectation (``examples_from`` is read by validation).
        **kwargs: the expectation's arguments (``column``, ``min_value``, ...).

    """
    return {"type": kind, "kwargs": kwargs, "meta": meta or {}}


def exists(columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """One ``expect_column_to_exist`` per column."""
    return [expectation("expect_column_to_exist", column=c) for c in columns]


def not_null(columns: tuple[str, ...], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Not-null checks whose failing examples name the row (its ``keys``), not a blank value."""
    return [
        expectation(
            "expect_column_values_to_not_be_null",
            column=c,
            meta=None if c in keys else examples_from(*keys),
        )
        for c in columns
    ]


def text_types(columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The columns hold text."""
    return [
        expectation("expect_column_values_to_be_of_type", column=c, type_=TEXT_TYPE)
        for c in columns
    ]


def numeric_types(columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The columns hold numbers (integers, or floats where a value is blank)."""
    return [
        expectation("expect_column_values_to_be_in_type_list", column=c, type_list=NUMERIC_TYPES)
        for c in columns
    ]


def between(column: str, low: float | None, high: float | None, **extra: Any) -> dict[str, Any]:
    """The column's values lie in [low, high] (``strict_min`` / ``strict_max`` in ``extra``)."""
    return expectation(
        "expect_column_values_to_be_between", column=column, min_value=low, max_value=high, **extra
    )


def in_set(column: str, values: list[Any], **extra: Any) -> dict[str, Any]:
    """The column's values are among ``values`` (blanks pass)."""
    return expectation(
        "expect_column_values_to_be_in_set", column=column, value_set=values, **extra
    )


def holds(column: str, *keys: str) -> dict[str, Any]:
    """A derived check column is True on every row; failing examples show the row's ``keys``."""
    return in_set(column, [True], meta=examples_from(*keys))


def examples_from(*columns: str) -> dict[str, Any]:
    """The ``meta`` that makes validation report these columns of a failing row as its example."""
    return {"examples_from": list(columns)}


def numeric(frame: pd.DataFrame, column: str) -> pd.Series:
    """Return the column as floats; blank (NaN) where it is missing or not numeric."""
    if column not in frame.columns:
        return pd.Series(np.nan, index=frame.index, dtype=float)
    return pd.to_numeric(frame[column], errors="coerce").astype(float)
