"""Checking prediction queries: one row per (GPU, LLM, workload) asked about.

The model server is lenient (it turns ``null`` into NaN and ignores unknown columns), so every
rule a query must follow is checked here, and each failure names the row and the field and says
what is allowed. Pure functions: a query frame and the catalogue in, a clean frame out.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import GPU_NUMERIC_COLUMNS, LLM_NUMERIC_COLUMNS, Catalog
from wattgpu.data.measurements import SCENARIOS
from wattgpu.errors import QueryError

REQUIRED_FIELDS = ("gpu", "model", "scenario")
# (field, smallest allowed value, must be a whole number)
WORKLOAD_FIELDS = (
    ("request_rate_rps", 0.0, False),
    ("batch_size", 1.0, True),
    ("input_tokens", 1.0, True),
    ("output_tokens", 1.0, True),
    ("num_gpus", 1.0, True),
    ("engine_year", 2000.0, True),
)
TEXT_FIELDS = ("engine", "dtype")
# What describes a GPU or an LLM that is not in the catalogue: the physics features need these.
GPU_SPEC_REQUIRED = (
    "gpu_memory_bandwidth_gb_s",
    "gpu_fp16_tensor_tflops",
    "gpu_tdp_w",
    "gpu_memory_gb",
)
LLM_SPEC_REQUIRED = (
    "llm_params_b",
    "llm_num_layers",
    "llm_hidden_size",
    "llm_num_attention_heads",
    "llm_num_kv_heads",
)
GPU_SPEC_FIELDS = tuple(f"gpu_{c}" for c in GPU_NUMERIC_COLUMNS)
LLM_SPEC_FIELDS = tuple(f"llm_{c}" for c in LLM_NUMERIC_COLUMNS)
GPU_TEXT_SPEC_FIELDS = ("gpu_architecture", "gpu_memory_type", "gpu_form_factor")
LLM_TEXT_SPEC_FIELDS = ("llm_family", "llm_arch")
ALL_FIELDS = (
    *REQUIRED_FIELDS,
    *(f for f, _, _ in WORKLOAD_FIELDS),
    *TEXT_FIELDS,
    *GPU_SPEC_FIELDS,
    *GPU_TEXT_SPEC_FIELDS,
    *LLM_SPEC_FIELDS,
    *LLM_TEXT_SPEC_FIELDS,
)
NUMERIC_FIELDS = (*(f for f, _, _ in WORKLOAD_FIELDS), *GPU_SPEC_FIELDS, *LLM_SPEC_FIELDS)


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def _number(value: Any, field: str, row: int, minimum: float, whole: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, Number | np.number):
        raise QueryError(f"{field} must be a number; got {value!r}", field, row)
    number = float(value)
    if not math.isfinite(number):
        raise QueryError(f"{field} must be a finite number; got {value!r}", field, row)
    if number < minimum:
        raise QueryError(f"{field} must be at least {minimum:g}; got {value!r}", field, row)
    if whole and not number.is_integer():
        raise QueryError(f"{field} must be a whole number; got {value!r}", field, row)
    return number


def _text(value: Any, field: str, row: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise QueryError(f"{field} must be a non-empty string; got {value!r}", field, row)
    return value.strip()


def _resolve(
    kind: str,
    name: str,
    record: dict[str, Any],
    row: int,
    catalog: Catalog,
    required: tuple[str, ...],
) -> tuple[str, bool]:
    """Return (name to use, whether it is in the catalogue) or raise with close matches."""
    found = catalog.find_gpu(name) if kind == "gpu" else catalog.find_llm(name)
    if found is not None:
        return found, True
    missing = [f for f in required if _blank(record.get(f))]
    if not missing:
        return name, False
    suggestions = catalog.suggest(name, catalog.gpus if kind == "gpu" else catalog.llms)
    hint = f"; closest: {', '.join(suggestions)}" if suggestions else ""
    label = "GPU" if kind == "gpu" else "LLM"
    raise QueryError(
        f"{kind} {name!r} is not in the catalogue{hint}; give a catalogue name or describe the "
        f"{label} with {', '.join(required)} (missing: {', '.join(missing)})",
        kind,
        row,
    )


def check_queries(frame: pd.DataFrame, catalog: Catalog) -> pd.DataFrame:
    """Validate query rows and return them with canonical names and typed columns.

    Adds ``gpu_in_catalog`` / ``llm_in_catalog``. Unknown columns are ignored.

    Raises:
        QueryError: naming the first bad row and field, and what is allowed.

    """
    if frame is None or len(frame) == 0:
        raise QueryError("empty query: give at least one row with gpu, model and scenario", None)
    missing = [c for c in REQUIRED_FIELDS if c not in frame.columns]
    if missing:
        raise QueryError(
            f"missing column(s) {', '.join(missing)} (required: {', '.join(REQUIRED_FIELDS)})",
            missing[0],
        )
    records = frame.reset_index(drop=True).to_dict("records")
    clean = []
    for row, record in enumerate(records):
        out: dict[str, Any] = {}
        for field in REQUIRED_FIELDS:
            if _blank(record.get(field)):
                raise QueryError(f"{field} is required", field, row)
            out[field] = _text(record[field], field, row)
        if out["scenario"] not in SCENARIOS:
            raise QueryError(
                f"scenario must be one of {', '.join(SCENARIOS)}; got {record['scenario']!r}",
                "scenario",
                row,
            )
        for field in NUMERIC_FIELDS:
            value = record.get(field)
            if _blank(value):
                out[field] = np.nan
                continue
            minimum, whole = next(
                ((m, w) for f, m, w in WORKLOAD_FIELDS if f == field), (0.0, False)
            )
            out[field] = _number(value, field, row, minimum, whole)
            if field in GPU_SPEC_REQUIRED + LLM_SPEC_REQUIRED and out[field] <= 0:
                raise QueryError(f"{field} must be greater than 0; got {value!r}", field, row)
        if out["scenario"] == "server" and not (out["request_rate_rps"] > 0):
            raise QueryError(
                "request_rate_rps is required for a server and must be greater than 0 (requests/s)",
                "request_rate_rps",
                row,
            )
        for field in (*TEXT_FIELDS, *GPU_TEXT_SPEC_FIELDS, *LLM_TEXT_SPEC_FIELDS):
            value = record.get(field)
            out[field] = None if _blank(value) else _text(value, field, row)
        merged = {**record, **out}
        out["gpu"], out["gpu_in_catalog"] = _resolve(
            "gpu", out["gpu"], merged, row, catalog, GPU_SPEC_REQUIRED
        )
        out["model"], out["llm_in_catalog"] = _resolve(
            "model", out["model"], merged, row, catalog, LLM_SPEC_REQUIRED
        )
        if not out["llm_in_catalog"]:
            out["llm_active_params_b"] = (
                out["llm_params_b"]
                if np.isnan(out["llm_active_params_b"])
                else out["llm_active_params_b"]
            )
            if np.isnan(out["llm_head_dim"]):
                out["llm_head_dim"] = out["llm_hidden_size"] / out["llm_num_attention_heads"]
            if out["llm_num_attention_heads"] % out["llm_num_kv_heads"]:
                raise QueryError(
                    "llm_num_kv_heads must divide llm_num_attention_heads; got "
                    f"{out['llm_num_kv_heads']:g} and {out['llm_num_attention_heads']:g}",
                    "llm_num_kv_heads",
                    row,
                )
        clean.append(out)
    result = pd.DataFrame(clean, columns=[*ALL_FIELDS, "gpu_in_catalog", "llm_in_catalog"])
    for field in NUMERIC_FIELDS:
        result[field] = result[field].astype(float)
    return result
