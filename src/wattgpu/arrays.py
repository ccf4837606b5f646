"""Small numpy helpers shared by the catalogue and the modeling code (no I/O, no pandas frames).

Query columns are mostly a few distinct values repeated (one GPU name over a 1,000-row batch), so
work per distinct value, spread back with integer codes, costs the same for one row or 100,000.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

# Below this many values a dict beats pandas' hash table, whose set-up costs ~30 us a call.
SMALL = 64


def blanks(values: np.ndarray) -> np.ndarray:
    """Where ``values`` are blank (None, NaN, NA), like ``pd.isna`` of an array.

    A float array needs no look at its cells' types: ``np.isnan`` is one ufunc call, ``pd.isna``
    a few microseconds of dispatch per call, which adds up over the ~50 columns of a query.
    """
    if values.dtype.kind == "f":
        return np.isnan(values)
    return pd.isna(values)


def unique_codes(values: Any) -> tuple[np.ndarray, list[Any]]:
    """Codes (positions in ``uniques``) of each value, and the distinct values in first-seen order.

    Blanks (None, NaN) are values like any other. Raises ``TypeError`` for unhashable values.
    """
    array = np.asarray(values, dtype=object)
    if len(array) > SMALL and _one_text(array):
        # one text over the whole batch (a scenario, an engine, one GPU): a comparison per
        # value costs a third of hashing each one
        return np.zeros(len(array), dtype=np.intp), [array[0]]
    if len(array) > SMALL:
        # pandas' own keeping of blanks (``use_na_sentinel=False``) first runs ``isna`` over the
        # whole object array, a third of the cost: blanks are coded -1 here and put in place
        codes, found = pd.factorize(array)
        uniques = list(found)
        blank = codes < 0
        if blank.any():
            at = int(codes[: int(blank.argmax())].max(initial=-1)) + 1  # first seen here
            codes = np.where(blank, at, codes + (codes >= at))
            uniques.insert(at, np.nan)
        return codes, uniques
    index: dict[Any, int] = {}
    codes = np.empty(len(array), dtype=np.intp)
    for i, value in enumerate(array.tolist()):
        codes[i] = index.setdefault(value, len(index))
    return codes, list(index)


def _one_text(array: np.ndarray) -> bool:
    """Whether every value is the same string (the ends are compared first, for a quick no)."""
    first, last = array[0], array[-1]
    if not (isinstance(first, str) and isinstance(last, str) and first == last):
        return False
    try:
        return bool((array == first).all())
    except (TypeError, ValueError):  # a value whose == is no boolean: code it by hashing
        return False


def pair_codes(first: Any, second: Any) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """``unique_codes`` of the rows' (first, second) pairs: codes, and the distinct pairs.

    Each column is coded on its own and the two codes combined as integers: pandas' MultiIndex,
    the obvious way, costs ~0.5 ms a call and ~4 ms per 10,000 rows.
    """
    first_codes, first_values = unique_codes(first)
    second_codes, second_values = unique_codes(second)
    combined = first_codes * len(second_values) + second_codes
    codes, found = unique_codes(combined) if len(combined) <= SMALL else _factorized(combined)
    width = max(len(second_values), 1)
    pairs = [(first_values[c // width], second_values[c % width]) for c in found]
    return codes, pairs


def row_codes(columns: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Codes of each row's combination of values over ``columns``, and each code's first row.

    The columns are coded one by one (``unique_codes``; numeric columns of many rows by pandas'
    factorize, without a detour through objects, NaN a value like any other) and folded into
    one integer per row, recoded after each column so that it never overflows.
    """
    n = len(columns[0])
    codes, count = np.zeros(n, dtype=np.intp), 1
    for column in columns:
        column = np.asarray(column)
        whole = column.dtype.kind in "iubf" and n > SMALL
        column_codes, values = _factorized(column) if whole else unique_codes(column)
        combined = codes * len(values) + column_codes
        codes, found = unique_codes(combined) if n <= SMALL else _factorized(combined)
        codes, count = np.asarray(codes, dtype=np.intp), len(found)
    first = np.empty(count, dtype=np.intp)
    first[codes[::-1]] = np.arange(n - 1, -1, -1)
    return codes, first


def _factorized(values: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """``unique_codes`` of a numeric array, by pandas' factorize (NaN a value like any other)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return codes, uniques.tolist()
