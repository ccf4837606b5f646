"""The pipeline's first stage: a row made whole, its GPU's and LLM's specs and its workload.

``workload`` joins the catalogue's specs to rows with canonical names and fills what a query may
leave out with the documented defaults; the later stages (``sizes``, ``operations``, ``costs``,
``step``, ``regimes``, ``prior_columns``) read only what it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.arrays import blanks
from wattgpu.data.catalog import Catalog
from wattgpu.data.engines import DEFAULT_ENGINE, engine_years
from wattgpu.data.formats import bytes_per_param
from wattgpu.data.kernels import SPEC_MODEL_INPUTS
from wattgpu.modeling.physical.columns import (
    Columns,
    Rows,
    as_given,
    column_as_given,
    columns_of,
    count,
    filled,
    floats,
    get,
)

# What a query may leave out, and what it then means.
DEFAULT_INPUT_TOKENS = 512.0
DEFAULT_OUTPUT_TOKENS = 256.0
DEFAULT_NUM_GPUS = 1.0
DEFAULT_DTYPE = "bfloat16"


def workload(columns: Columns, catalog: Catalog | None) -> Columns:
    """Rows made whole: the catalogue's specs (none without a catalogue), then the defaults."""
    return workload_filled(columns if catalog is None else specs_attached(columns, catalog))


def attach_specs(rows: Rows, catalog: Catalog) -> Rows:
    """Add the catalogue's GPU (``gpu_*``) and LLM (``llm_*``) columns to rows with canonical names.

    Spec columns already present on a row (a query describing an uncatalogued GPU or LLM) win
    over the catalogue's; rows whose names are not in the catalogue keep only what they carry.
    """
    return as_given(specs_attached(columns_of(rows), catalog), rows)


def specs_attached(columns: Columns, catalog: Catalog) -> Columns:
    """``attach_specs`` on columns."""
    out = dict(columns)
    for key, kind in (("gpu", "gpu"), ("model", "llm")):
        for column, looked_up in catalog.spec_arrays(kind, columns[key]).items():
            given = out.get(column)
            out[column] = looked_up if given is None else filled(given, looked_up)
    unlisted = blanks(out["gpu_memory_efficiency"]) if "gpu_memory_efficiency" in out else None
    if unlisted is not None and unlisted.any():
        # a GPU described by its specs: the efficiencies of the profiled GPUs like it
        modelled = catalog.modelled_efficiencies(
            {c: out.get(f"gpu_{c}", np.full(len(unlisted), None)) for c in SPEC_MODEL_INPUTS}
        )
        for column, values in modelled.items():
            out[column] = np.where(unlisted, values, out[column])
    return out


def fill_workload_defaults(rows: Rows) -> Rows:
    """Fill the workload fields a query may omit with the documented defaults."""
    return as_given(workload_filled(columns_of(rows)), rows)


def workload_filled(columns: Columns) -> Columns:
    """``fill_workload_defaults`` on columns."""
    out = dict(columns)
    n = count(columns)
    for column, default in (
        ("input_tokens", DEFAULT_INPUT_TOKENS),
        ("output_tokens", DEFAULT_OUTPUT_TOKENS),
        ("engine", DEFAULT_ENGINE),
        ("num_gpus", DEFAULT_NUM_GPUS),
        ("dtype", DEFAULT_DTYPE),
    ):
        out[column] = (
            filled(columns[column], default)
            if column in columns
            else np.full(n, default, dtype=object if isinstance(default, str) else float)
        )
    for column in ("request_rate_rps", "batch_size"):
        out[column] = floats(get(columns, column, n))
    out["users"] = _users(columns, n)
    # A closed loop's rate is what its users achieved: an outcome of the latency, which no query
    # can send (log(users / rate) is the request time). Its load is the users.
    out["request_rate_rps"] = np.where(np.isnan(out["users"]), out["request_rate_rps"], np.nan)
    out["engine_year"] = engine_year_of(columns, n)
    if "dtype" not in columns or blanks(columns["dtype"]).any():
        # a row that names no format: the checkpoint's own where it ships below 16 bits
        shipped = get(columns, "llm_weight_format", n)
        quantized = bytes_per_param(shipped) < 2.0
        given = columns["dtype"] if "dtype" in columns else np.full(n, None, dtype=object)
        out["dtype"] = np.where(blanks(given) & quantized, shipped, out["dtype"])
    return out


def _users(columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    """A closed-loop server's concurrent users: the stated ``concurrency`` of a server row.

    Kept as ``users`` because ``with_prior`` replaces ``concurrency`` by the sequences decoding
    (the stated users capped by the KV cache, or Little's law at a rate); a frame that already
    has ``users`` (features being refitted) keeps them.
    """
    if "users" in columns:
        return floats(columns["users"])
    stated = floats(get(columns, "concurrency", n))
    return np.where(np.asarray(get(columns, "scenario", n)) == "server", stated, np.nan)


def engine_year(rows: pd.DataFrame | Columns) -> Any:
    """The release year of the serving software of each row (``wattgpu.data.engines``).

    The row's own ``engine_year``, else the year of its ``engine_version``, else today's release
    of its engine (a query that states neither means the newest). Never read from a file's
    dates: those would tell the trees which data set a row comes from. A Series for a frame, an
    array for columns.
    """
    columns = columns_of(rows)
    return column_as_given(engine_year_of(columns, count(columns)), rows)


def engine_year_of(columns: Columns, n: int) -> np.ndarray:
    """``engine_year`` of ``n`` rows held as columns."""
    engines = filled(np.asarray(get(columns, "engine", n), dtype=object), DEFAULT_ENGINE)
    stated = get(columns, "engine_year", n)
    if stated.dtype != np.float64:
        stated = pd.to_numeric(stated, errors="coerce").astype(float)
    versions = np.asarray(get(columns, "engine_version", n), dtype=object)
    return engine_years(engines, versions, stated)
