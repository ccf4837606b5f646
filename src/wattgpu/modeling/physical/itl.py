"""Which ITL statistic a measurement reports, and a measured ITL as the served statistic.

A row's ``itl_s`` is the median gap between two tokens, the mean time per output token after
the first, or a request's (or batch's) latency / output tokens, which includes the prefill
(``itl_statistic`` reads the free-text ``itl_kind`` of a measurement file). The model serves the
median (``median_itl``): it is what the most recent engine runs report, and what a user sees for
a typical token. No feature says how a row's ITL was measured: a query cannot send it, and each
data set measures one statistic, so it would name the data set.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.modeling.physical.columns import (
    Column,
    Columns,
    column_as_given,
    columns_of,
    count,
    floats,
    get,
    map_unique,
)

ITL_STATISTICS = ("median", "mean", "with_prefill")
DEFAULT_ITL_STATISTIC = "median"
# The statistics that count prefills in the time per token (see ``median_itl``).
ITL_WITH_PREFILLS = ("mean", "with_prefill")


def itl_statistic(kind: Column) -> Column:
    """The ITL statistic (``ITL_STATISTICS``) a free-text ``itl_kind`` names.

    A name of the statistic itself passes through; text that mentions the prefill, or a latency
    divided by a length, is ``with_prefill``; "median" is ``median``; "mean"/"TPOT" is ``mean``;
    anything else (and blank) is ``DEFAULT_ITL_STATISTIC``.
    """
    return column_as_given(map_unique(np.asarray(kind), _one_itl_statistic, object), kind)


def with_statistic(columns: Columns) -> Columns:
    """Rows with their ``itl_statistic`` (``DEFAULT_ITL_STATISTIC`` where no ``itl_kind``)."""
    out = dict(columns)
    kind = out.get("itl_kind")
    out["itl_statistic"] = (
        np.full(count(out), DEFAULT_ITL_STATISTIC, dtype=object)
        if kind is None
        else map_unique(kind, _one_itl_statistic, object)
    )
    return out


def _one_itl_statistic(kind: Any) -> str:
    text = "" if pd.isna(kind) else str(kind).lower()
    if text in ITL_STATISTICS:
        return text
    if "prefill" in text or re.search(r"latency\s*/", text):
        return "with_prefill"
    if "median" in text:
        return "median"
    if re.search("mean|tpot", text):
        return "mean"
    return DEFAULT_ITL_STATISTIC


def median_itl(rows: pd.DataFrame | Columns) -> Any:
    """Each row's measured ITL as the served statistic: the median gap between two tokens, s.

    A row that measured the median passes through. A row that measured a time per token that
    counts prefills (``ITL_WITH_PREFILLS``: an offline batch's latency / output tokens, its own
    prefill included, or the mean time per output token, which counts the prefills of the
    requests that join the batch while it decodes) is scaled by ``1 - prior_prefill_share``:
    the analytical model's share of that time spent in prefills (``M * t_pre / output_tokens``
    of ``t(M) + M * t_pre / output_tokens``, ``regimes``). The gaps between the prefills are
    plain decode steps, so what is left is the typical gap: the median. Needs the prior columns
    (``with_prior``) and ``itl_statistic``. A Series for a frame, an array for columns.
    """
    return column_as_given(median_itl_of(columns_of(rows)), rows)


def median_itl_of(columns: Columns) -> np.ndarray:
    """``median_itl`` of rows held as columns."""
    n = count(columns)
    itl = floats(columns["itl_s"])
    statistic = get(columns, "itl_statistic", n)
    with_prefills = np.isin(np.asarray(statistic, dtype=object), ITL_WITH_PREFILLS)
    share = floats(columns["prior_prefill_share"])
    return np.where(with_prefills, itl * (1.0 - share), itl)
