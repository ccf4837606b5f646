"""LLMs described by their ``config.json`` in a query: one reading per distinct config.

A row's ``model_config`` (the JSON text of a model's config.json, or the object a REST request
parsed from it) describes its LLM as a catalogue row would: every ``llm_*`` column, the
parameters counted from the config (``wattgpu.data.llm_configs.read_config``). Pure: the served
model reads no file and no network; the CLI hands over the text it read.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.llm_configs import parse_config, read_config
from wattgpu.errors import DataError, QueryError

CONFIG_FIELD = "model_config"

Columns = dict[str, np.ndarray]


def config_columns(config: Any) -> dict[str, Any]:
    """The ``llm_*`` columns of the LLM one config describes (its JSON text, or the object).

    Raises:
        DataError: the config is no JSON object, or describes an LLM it cannot be read as
            (naming ``model_config`` and the field).

    """
    row = read_config(parse_config(config, CONFIG_FIELD), CONFIG_FIELD)
    return {f"llm_{column}": value for column, value in row.items()}


def _blank(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return (isinstance(value, float) and value != value) or (
        isinstance(value, str) and not value.strip()
    )


def _key(value: Any) -> str:
    """One key per distinct config: its text, or the object written with sorted keys."""
    if isinstance(value, str | bytes):
        return value if isinstance(value, str) else value.decode(errors="replace")
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):  # not JSON at all: parse_config says so
        return repr(value)


def described_columns(values: np.ndarray) -> tuple[np.ndarray, Columns]:
    """Which rows a config describes, and their ``llm_*`` columns (blank on the other rows).

    Each distinct config is read once. Numbers come back as floats (NaN blank), anything else
    (text, ``tie_word_embeddings``) as objects (``None`` blank).

    Raises:
        QueryError: naming ``model_config``, its first bad row, the field and the bad value.

    """
    keys = np.array([None if _blank(v) else _key(v) for v in values], dtype=object)
    described = keys != None  # noqa: E711 (elementwise)
    read: dict[str, dict[str, Any]] = {}
    for row in np.flatnonzero(described):
        if keys[row] in read:
            continue
        try:
            read[keys[row]] = config_columns(values[row])
        except DataError as exc:
            raise QueryError(str(exc), CONFIG_FIELD, int(row)) from None
    columns: Columns = {}
    for name in dict.fromkeys(c for columns_of in read.values() for c in columns_of):
        cells = [read[k].get(name) if k is not None else None for k in keys]
        numeric = all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in cells if v is not None
        )
        if numeric:
            columns[name] = np.array([np.nan if v is None else v for v in cells], dtype=float)
        else:
            columns[name] = np.array(cells, dtype=object)
    return np.asarray(described, dtype=bool), columns
