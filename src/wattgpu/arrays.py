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


def unique_codes(values: Any) -> tuple[np.ndarray, list[Any]]:
    """Codes (positions in ``uniques``) of each value, and the distinct values in first-seen order.

    Blanks (None, NaN) are values like any other. Raises ``TypeError`` for unhashable values.
    """
    array = np.asarray(values, dtype=object)
    if len(array) > SMALL:
        codes, uniques = pd.factorize(array, use_na_sentinel=False)
        return codes, list(uniques)
    index: dict[Any, int] = {}
    codes = np.empty(len(array), dtype=np.intp)
    for i, value in enumerate(array.tolist()):
        codes[i] = index.setdefault(value, len(index))
    return codes, list(index)
