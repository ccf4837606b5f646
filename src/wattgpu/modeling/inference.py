"""Answering prediction queries: check -> features -> model -> interval and warnings.

The one code path behind the served pyfunc, ``wattgpu predict`` and ``wattgpu recommend``; it
calls the same feature function as training.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.modeling import models
from wattgpu.modeling.domain import domain_warnings
from wattgpu.modeling.features import build_features
from wattgpu.modeling.queries import check_queries
from wattgpu.modeling.targets import REPORT_SCALE, UNIT
from wattgpu.modeling.uncertainty import IntervalModel, interval

OUTPUT_COLUMNS = (
    "gpu",
    "model",
    "scenario",
    "target",
    "prediction",
    "lower",
    "upper",
    "unit",
    "warnings",
)


def predict_queries(
    target: str,
    model: Any,
    bounds: IntervalModel,
    catalog: Catalog,
    metadata: dict[str, Any],
    queries: pd.DataFrame,
) -> pd.DataFrame:
    """Predict ``target`` for raw query rows.

    Args:
        target: ``power`` or ``itl``.
        model: the fitted CatBoost regressor.
        bounds: the interval model (the row's difficulty and the conformal factors).
        catalog: the catalogue snapshot the model was trained with.
        metadata: the training ``domain`` stored with the model.
        queries: rows with ``gpu``, ``model``, ``scenario`` and optional workload/spec columns.

    Returns:
        One row per query: canonical names, the prediction with its interval (W or ms), the unit
        and a ``; ``-joined warning string.

    Raises:
        QueryError: a row is invalid (names the row and the field).

    """
    clean = check_queries(queries, catalog)
    rows = build_features(clean, catalog)
    value = models.predict(target, model, rows)
    lower, upper = interval(bounds, rows, value)
    scale = REPORT_SCALE[target]
    return pd.DataFrame(
        {
            "gpu": rows["gpu"].to_numpy(),
            "model": rows["model"].to_numpy(),
            "scenario": rows["scenario"].to_numpy(),
            "target": target,
            "prediction": np.asarray(value, float) * scale,
            "lower": lower * scale,
            "upper": upper * scale,
            "unit": UNIT[target],
            "warnings": domain_warnings(rows, metadata["domain"]),
        },
        columns=list(OUTPUT_COLUMNS),
    )
