"""The Watt Counts importer: its CSV of per-run measurements into rows of the measurement schema.

Reads ``data/watt_counts_subset.csv`` of github.com/maufadel/wattgpu (per-request lists stored
as text), derives power, energy per token, ITL and token counts per run, maps its nvidia-smi GPU
names to catalogue products, and hands the rows to the shared filters and validation of
:mod:`wattgpu.data.importers.common`.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.importers.common import ImportResult, finish_import
from wattgpu.errors import DataError

# ---------------------------------------------------------------------------------------------
# Watt Counts (github.com/maufadel/wattgpu, data/watt_counts_subset.csv)
# ---------------------------------------------------------------------------------------------

WATT_COUNTS_SOURCE = "watt-counts (maufadel/wattgpu)"
WATT_COUNTS_COLUMNS = (
    "model",
    "gpu_type",
    "lambda_qps",
    "generation_tokens_total",
    "measurement_duration",
    "gpu_energy",
    "gpu_0_power_draw_watts_mean",
)
WATT_COUNTS_LISTS = (
    "time_to_first_token_seconds_events",
    "e2e_request_latency_seconds_events",
    "request_generation_tokens",
)

# Watt Counts writes GPUs as nvidia-smi reports them (`gpu_type`); its gpu_features.csv names the
# product of each in `gpu_db_name`. Its "NVIDIA H200" is an H200 NVL, whereas nvidia-smi's
# "NVIDIA H200" (our catalogue's alias) is the H200 SXM, so names go through this table first
# (gpu_type -> gpu_db_name, copied from gpu_features.csv at commit 4e01035). Other names resolve
# through the catalogue as written.
WATT_COUNTS_GPUS = {
    "NVIDIA A30": "A30 PCIe",
    "NVIDIA H200": "H200 NVL",
    "NVIDIA A100-SXM4-40GB": "A100 SXM4 40 GB",
    "NVIDIA L40S": "L40S",
    "NVIDIA H100 PCIe": "H100 PCIe 80 GB",
    "NVIDIA H100 NVL": "H100 NVL 94 GB",
    "Tesla V100-SXM2-32GB": "Tesla V100 SXM2 32 GB",
    "NVIDIA L4": "L4",
    "NVIDIA GeForce RTX 3090": "GeForce RTX 3090",
    "Tesla T4": "Tesla T4",
    "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
}

# The paper keeps the models whose total and active parameters are equal in its
# model_features.csv; these are the ones it drops, so they read "MoE" even when our catalogue
# lacks them.
WATT_COUNTS_MOE = frozenset(
    {
        "allenai/OLMoE-1B-7B-0924",
        "microsoft/Phi-tiny-MoE-instruct",
        "openai/gpt-oss-20b",
        "unsloth/gpt-oss-20b-BF16",
        "ibm-granite/granite-3.1-3b-a800m-instruct",
        "deepseek-ai/deepseek-moe-16b-base",
        "Qwen/Qwen1.5-MoE-A2.7B-Chat",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    }
)
WATT_COUNTS_ITL_KIND = "mean over requests of (e2e-ttft)/(tokens-1)"


def read_watt_counts(path: Path) -> pd.DataFrame:
    """Read a Watt Counts CSV, leaving the lists as text.

    The file's first column, when unnamed, is its row index (kept as the frame's index and
    later as ``source_row``); a file without one is indexed from 0.

    Raises:
        DataError: the file is missing or not a readable CSV.

    """
    try:
        header = pd.read_csv(path, nrows=0).columns
        indexed = len(header) > 0 and str(header[0]).startswith("Unnamed: 0")
        return pd.read_csv(path, index_col=0 if indexed else None, low_memory=False)
    except FileNotFoundError:
        raise DataError(f"Watt Counts file not found: {path}") from None
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"Watt Counts file {path} is not a readable CSV: {exc}") from None


def parse_list(value: Any) -> list[float]:
    """Parse a per-request list stored as text: ``"[1.0, 2.0]"`` or numpy's ``"[1. 2.]"``.

    Tried in turn: JSON, a Python literal (``ast.literal_eval``), numpy's space-separated
    print. A blank cell is an empty list. Raises ``ValueError`` for anything else.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    if isinstance(value, list | tuple | np.ndarray):
        return [float(v) for v in value]
    text = str(value).strip()
    if not text:
        return []
    try:
        # JSON is the same text for a list of numbers and far faster on the 22 MB file
        parsed = json.loads(text)
    except ValueError:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            if not (text.startswith("[") and text.endswith("]")):
                raise ValueError(f"not a list: {text[:40]!r}") from None
            parsed = [float(v) for v in text[1:-1].replace(",", " ").split()]
    if not isinstance(parsed, list | tuple):
        raise ValueError(f"not a list: {text[:40]!r}")
    return [float(v) for v in parsed]


def per_request_itl(e2e: list[float], ttft: list[float], tokens: list[float]) -> float:
    """Mean over requests with at least two tokens of ``(e2e - ttft) / (tokens - 1)``.

    Returns NaN when the three lists differ in length or no request has two tokens.
    """
    if not e2e or not (len(e2e) == len(ttft) == len(tokens)):
        return math.nan
    gaps = [(e - t) / (n - 1) for e, t, n in zip(e2e, ttft, tokens, strict=True) if n >= 2]
    return sum(gaps) / len(gaps) if gaps else math.nan


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _number(value: Any) -> float:
    """The value as a float; NaN when blank or not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _watt_counts_row(record: dict[str, Any]) -> dict[str, Any]:
    """One tidy row (with ``_reason`` set when the raw row is unusable)."""
    rate = _number(record["lambda_qps"])
    tokens_total = _number(record["generation_tokens_total"])
    duration = _number(record["measurement_duration"])
    energy = _number(record["gpu_energy"])
    row: dict[str, Any] = {
        "gpu": record["gpu_type"],
        "model": record["model"],
        "scenario": "offline" if math.isnan(rate) else "server",
        "mean_power_w": _number(record["gpu_0_power_draw_watts_mean"]),
        "itl_s": math.nan,
        "request_rate_rps": rate,
        "engine": "vllm",
        "dtype": "bfloat16",
        "num_gpus": 1.0,
        "source": WATT_COUNTS_SOURCE,
        "_reason": None,
        "_gpu_lookup": WATT_COUNTS_GPUS.get(record["gpu_type"], record["gpu_type"]),
    }
    if record["model"] in WATT_COUNTS_MOE:
        # The subset writes every run as bfloat16, which gpt-oss's MXFP4 experts are not; without
        # each MoE checkpoint's real format these rows cannot be read right.
        row["_reason"] = "MoE (weight format not recorded)"
        return row
    if not tokens_total > 0:
        row["_reason"] = "no generated tokens"
        return row
    row["energy_per_token_j"] = energy / tokens_total
    row["inv_throughput_s_per_tok"] = duration / tokens_total
    row["throughput_tok_s"] = tokens_total / duration if duration > 0 else math.nan
    lists = {}
    for column in (*WATT_COUNTS_LISTS, "request_prompt_tokens"):
        try:
            lists[column] = parse_list(record.get(column))
        except (ValueError, TypeError):
            row["_reason"] = f"unreadable per-request list ({column})"
            return row
    ttft = lists["time_to_first_token_seconds_events"]
    tokens = lists["request_generation_tokens"]
    row["ttft_s"] = _mean(ttft)
    row["output_tokens"] = _mean(tokens)
    row["input_tokens"] = _mean(lists["request_prompt_tokens"])
    row["itl_s"] = per_request_itl(lists["e2e_request_latency_seconds_events"], ttft, tokens)
    row["itl_kind"] = None if math.isnan(row["itl_s"]) else WATT_COUNTS_ITL_KIND
    return row


def import_watt_counts(
    frame: pd.DataFrame, catalog: Catalog, *, single_gpu: bool = False
) -> ImportResult:
    """Turn the Watt Counts table into measurement rows.

    Offline runs (blank ``lambda_qps``) and server runs alike get ``itl_s`` = the mean over
    requests with two or more tokens of ``(e2e - ttft) / (tokens - 1)`` where the per-request
    lists are there (Watt Counts' offline runs record no per-request TTFT, so theirs is blank),
    ``inv_throughput_s_per_tok`` = ``measurement_duration / generation_tokens_total`` (the
    paper's offline "ITL"), ``mean_power_w`` = ``gpu_0_power_draw_watts_mean``,
    ``energy_per_token_j`` = ``gpu_energy / generation_tokens_total``, ``ttft_s``,
    ``output_tokens`` and ``input_tokens`` = means over requests.

    Args:
        frame: the table as read by :func:`read_watt_counts` (index = the file's index column).
        catalog: GPU and LLM catalogues the names must resolve through.
        single_gpu: drop multi-GPU rows (Watt Counts has none; kept for symmetry).

    Raises:
        DataError: a required column is missing.

    """
    frame = frame.copy()
    unnamed = [c for c in frame.columns if str(c) == "" or str(c).startswith("Unnamed: 0")]
    if unnamed:
        frame = frame.set_index(unnamed[0])
    missing = [c for c in (*WATT_COUNTS_COLUMNS, *WATT_COUNTS_LISTS) if c not in frame.columns]
    if missing:
        raise DataError(
            f"Watt Counts table lacks column(s) {', '.join(missing)} (expected the format of "
            "data/watt_counts_subset.csv in github.com/maufadel/wattgpu)"
        )
    if "request_prompt_tokens" not in frame.columns:
        frame["request_prompt_tokens"] = None
    records = frame.reset_index(names="source_row").to_dict("records")
    tidy = pd.DataFrame([_watt_counts_row(r) for r in records])
    tidy["source_row"] = [r["source_row"] for r in records]
    ids = pd.DataFrame(
        {
            "source_row": tidy["source_row"],
            "model": frame["model"].to_numpy(),
            "gpu_type": frame["gpu_type"].to_numpy(),
            "lambda_qps": frame["lambda_qps"].to_numpy(),
        }
    )
    return finish_import(tidy, ids, catalog, single_gpu=single_gpu, provenance=("source_row",))
