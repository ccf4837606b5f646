"""Importers for public measurement data sets: Watt Counts and the ML.ENERGY leaderboard.

Each importer turns the raw files of one data set into rows of the measurement schema
(:mod:`wattgpu.data.measurements`) and returns them with every row it dropped and why. Nothing
is written here; the CLI writes the CSV. The reasons, in the order they are checked:

1. the raw row cannot be used (e.g. no generated tokens, unreadable request lists);
2. ``GPU name does not resolve: NAME`` through the catalogue;
3. ``MoE`` (the source or the catalogue says active < total parameters);
4. ``LLM does not resolve: NAME``;
5. ``weights not 16-bit (DTYPE)``;
6. ``multi-GPU (N GPUs)``, only when single-GPU rows are asked for;
7. ``fails validation: EXPECTATION(COLUMN)`` of the measurement suite.

Kept rows carry canonical catalogue names in ``gpu``/``model`` and the names exactly as the
source writes them in ``gpu_source_name``/``model_source_name`` (not ``*_as_written``, which
:func:`~wattgpu.data.measurements.resolve_names` overwrites when the file is read back).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.measurements import NUMERIC_COLUMNS, OPTIONAL_COLUMNS, REQUIRED_COLUMNS
from wattgpu.data.suites import derive_measurement_checks, measurement_expectations
from wattgpu.errors import DataError

SCHEMA_COLUMNS = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
SIXTEEN_BIT = ("float16", "bfloat16")

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


@dataclass
class ImportResult:
    """What an importer kept and what it dropped.

    Attributes:
        rows: kept rows in the measurement schema, plus ``itl_kind``,
            ``inv_throughput_s_per_tok``, ``gpu_source_name``, ``model_source_name`` and the
            source's provenance columns.
        dropped: the source's identifying columns of every dropped row, plus ``reason``.

    """

    rows: pd.DataFrame
    dropped: pd.DataFrame


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
        "_moe": record["model"] in WATT_COUNTS_MOE,
    }
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
    return _finish(tidy, ids, catalog, single_gpu=single_gpu, provenance=("source_row",))


# ---------------------------------------------------------------------------------------------
# ML.ENERGY leaderboard (github.com/ml-energy/leaderboard and leaderboard-v2)
# ---------------------------------------------------------------------------------------------

MLENERGY_SOURCE = "mlenergy leaderboard ({family})"
# 2023 names that are not Hugging Face repositories -> the HF id of the same weights (or, for
# LLaMA-1, Vicuna and Koala, of an architecture-equivalent release).
MLENERGY_2023_MODEL_IDS = {
    "BAIR/koala-13b": "TheBloke/koala-13B-HF",
    "BAIR/koala-7b": "TheBloke/koala-7B-HF",
    "BlinkDL/RWKV-4-Raven-7B-v12-Eng98%-Other2%-20230521-ctx8192.pth": "RWKV/rwkv-raven-7b",
    "lmsys/vicuna-13B": "lmsys/vicuna-13b-v1.3",
    "lmsys/vicuna-7B": "lmsys/vicuna-7b-v1.3",
    "metaai/Llama-2-13b-chat-hf": "meta-llama/Llama-2-13b-chat-hf",
    "metaai/Llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-chat-hf",
    "metaai/llama-13B": "huggyllama/llama-13b",
    "metaai/llama-7B": "huggyllama/llama-7b",
    "tatsu-lab/alpaca-7B": "tatsu-lab/alpaca-7b-wdiff",
}
MLENERGY_V3_TEXT_TASKS = ("gpqa", "lm-arena-chat", "sourcegraph-fim")
ITL_KIND_2023 = "mean_latency/mean_response_length (incl. prefill)"
ITL_KIND_V2 = "mean TPOT over engine iterations (vLLM stats)"
ITL_KIND_V3 = "median client-side ITL (chunk-smoothed)"
MLENERGY_ID_COLUMNS = (
    "source_file",
    "source_row",
    "family",
    "task",
    "gpu",
    "model_source_name",
    "engine",
    "scenario",
    "num_gpus",
    "batch_size",
    "request_rate_rps",
)
_CSV_NAME = re.compile(r"([^_/]+)_(.+)_benchmark\.csv")
_RATE_NAME = re.compile(r"rate[0-9.]+\.json")
_BS_NAME = re.compile(r"bs\d+\+tp\d+\+pp\d+\.json")


def _base(family: str, rel: str, index: int, task: str | None, model: str) -> dict[str, Any]:
    return {
        "source_file": rel,
        "source_row": index,
        "family": family,
        "task": task,
        "model_source_name": model,
        "model": MLENERGY_2023_MODEL_IDS.get(model, model),
        "source": MLENERGY_SOURCE.format(family=family),
        "input_tokens": math.nan,
        "pipeline_parallel": 1,
        "_reason": None,
        "_moe": False,
    }


def _after(parts: tuple[str, ...], folder: str) -> str | None:
    return parts[parts.index(folder) + 1] if folder in parts[:-1] else None


def _read_2023_csv(path: Path, rel: str) -> list[dict[str, Any]]:
    """Legacy batch-1 CSVs and the batch branch's CSVs (``batch_size`` column)."""
    match = _CSV_NAME.fullmatch(path.name)
    gpu, task = match.groups() if match else (None, None)
    frame = pd.read_csv(path)
    batched = "batch_size" in frame.columns
    family = "hf_batch_branch_2023" if batched else "legacy_hf_bs1_2023"
    rows = []
    for index, raw in enumerate(frame.to_dict("records")):
        batch = float(raw["batch_size"]) if batched else 1.0
        latency, length, energy = raw["latency"], raw["response_length"], raw["energy"]
        throughput = batch * length / latency
        row = _base(family, rel, index, task, raw["model"])
        row.update(
            gpu=gpu,
            engine="hf",
            scenario="offline",
            batch_size=batch,
            request_rate_rps=math.nan,
            num_gpus=1,
            tensor_parallel=1,
            # the script stores energy per request (batch energy / batch size) and batch latency
            mean_power_w=energy * batch / latency,
            # a batch runs until its longest answer ends, so only batch 1 gives a per-request ITL
            itl_s=latency / length if batch == 1 else math.nan,
            itl_kind=ITL_KIND_2023 if batch == 1 else None,
            energy_per_token_j=energy / length,
            throughput_tok_s=throughput,
            inv_throughput_s_per_tok=1 / throughput,
            output_tokens=length,
            dtype="float16",
        )
        rows.append(row)
    return rows


def _read_v1(data: dict[str, Any], rel: str, parts: tuple[str, ...]) -> dict[str, Any]:
    """A server run at one target request rate: power only (no token counts in the files)."""
    gpus = int(data["#GPUs"])
    row = _base("v1_server_rate_2024", rel, 0, _after(parts, "llm"), data["Model"])
    row.update(
        gpu=data["GPU model"],
        engine=str(data["Backend"]).lower(),
        scenario="server",
        batch_size=math.nan,
        request_rate_rps=float(data["Request rate"]),
        num_gpus=gpus,
        tensor_parallel=gpus,
        mean_power_w=data["Energy per request (J)"] * data["Requests per second"] / gpus,
        itl_s=math.nan,
        itl_kind=None,
        energy_per_token_j=math.nan,
        throughput_tok_s=math.nan,
        inv_throughput_s_per_tok=math.nan,
        output_tokens=math.nan,
        dtype=None,
    )
    return row


def _read_v2(data: dict[str, Any], rel: str, parts: tuple[str, ...]) -> dict[str, Any]:
    """A steady-state vLLM run at one maximum batch size and TP x PP layout."""
    gpus = int(data["TP"]) * int(data["PP"])
    per_token = data["Energy/req (J)"] / data["Avg Output Tokens"]
    throughput = data["Token tput (tok/s)"]
    row = _base("v2_vllm_batch_2024", rel, 0, _after(parts, "llm_text_generation"), data["Model"])
    row.update(
        gpu=data["GPU"],
        engine="vllm",
        scenario="offline",
        batch_size=float(data["Max BS (reqs)"]),
        request_rate_rps=math.nan,
        num_gpus=gpus,
        tensor_parallel=int(data["TP"]),
        pipeline_parallel=int(data["PP"]),
        mean_power_w=per_token * throughput / gpus,
        itl_s=data["Avg TPOT (s)"],
        itl_kind=ITL_KIND_V2,
        energy_per_token_j=per_token,
        throughput_tok_s=throughput,
        inv_throughput_s_per_tok=1 / throughput,
        output_tokens=data["Avg Output Tokens"],
        dtype=None,
    )
    return row


def _read_v3(data: dict[str, Any], rel: str) -> list[dict[str, Any]]:
    """One row per configuration of a V3 model file (power summed over GPUs in the file)."""
    task = data.get("task")
    moe = data.get("architecture") == "MoE" or (
        data.get("activated_params_billions") != data.get("total_params_billions")
    )
    rows = []
    for index, config in enumerate(data.get("configurations") or []):
        gpus = int(config.get("num_gpus") or 1)
        throughput = config.get("output_throughput_tokens_per_sec", math.nan)
        row = _base("v3_vllm_batch_2025", rel, index, task, data["model_id"])
        row.update(
            gpu=config.get("gpu_model"),
            engine="vllm",
            scenario="offline",
            batch_size=float(config.get("max_num_seqs", math.nan)),
            request_rate_rps=math.nan,
            num_gpus=gpus,
            tensor_parallel=(config.get("parallelization") or {}).get("tensor_parallel"),
            mean_power_w=config.get("avg_power_watts", math.nan) / gpus,
            itl_s=config.get("median_itl_ms", math.nan) / 1000,
            itl_kind=ITL_KIND_V3,
            energy_per_token_j=config.get("energy_per_token_joules", math.nan),
            throughput_tok_s=throughput,
            inv_throughput_s_per_tok=1 / throughput if throughput else math.nan,
            output_tokens=config.get("avg_output_len", math.nan),
            dtype=data.get("weight_precision"),
            _moe=moe,
        )
        if task not in MLENERGY_V3_TEXT_TASKS:
            row["_reason"] = f"not a text-generation task ({task})"
        rows.append(row)
    return rows


def _read_mlenergy_file(path: Path, rel: str) -> list[dict[str, Any]]:
    parts = tuple(Path(rel).parts)
    if _CSV_NAME.fullmatch(path.name):
        return _read_2023_csv(path, rel)
    if path.suffix != ".json" or path.name == "models.json":
        return []
    is_v3 = parts[-4:-1] == ("public", "data", "models")
    if not (is_v3 or _RATE_NAME.fullmatch(path.name) or _BS_NAME.fullmatch(path.name)):
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    if is_v3:
        return _read_v3(data, rel)
    if _RATE_NAME.fullmatch(path.name):
        return [_read_v1(data, rel, parts)]
    return [_read_v2(data, rel, parts)]


def read_mlenergy(raw_dir: Path) -> pd.DataFrame:
    """Read every LLM measurement under ``raw_dir`` into one tidy row each (names as written).

    Recognised files, anywhere below ``raw_dir``: ``<GPU>_<task>_benchmark.csv`` (2023, batch 1,
    or with a ``batch_size`` column: the batch branch), ``data/llm/<task>/.../rate<r>.json``
    (V1 server runs), ``data/llm_text_generation/<task>/.../bs<N>+tp<T>+pp<P>.json`` (V2) and
    ``public/data/models/<org>__<model>__<task>.json`` (V3). Other files (``models.json``,
    scores, ...) are not measurements and are passed over. ``source_file`` is the path relative
    to ``raw_dir``; ``source_row`` the row's position in its file.

    Raises:
        DataError: ``raw_dir`` is not a folder, holds no recognised file, or a file is unreadable.

    """
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(f"ML.ENERGY folder not found: {raw_dir} (give the folder of raw files)")
    rows: list[dict[str, Any]] = []
    for path in sorted(p for p in raw_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(raw_dir).as_posix()
        try:
            rows.extend(_read_mlenergy_file(path, rel))
        except (KeyError, TypeError, ValueError, ZeroDivisionError, pd.errors.ParserError) as exc:
            raise DataError(f"ML.ENERGY file {rel} is not in a known format: {exc!r}") from None
    if not rows:
        raise DataError(
            f"no ML.ENERGY measurement file under {raw_dir} (expected *_benchmark.csv, "
            "rate*.json, bs*+tp*+pp*.json or public/data/models/*.json)"
        )
    return pd.DataFrame(rows)


def import_mlenergy(raw_dir: Path, catalog: Catalog, *, single_gpu: bool = False) -> ImportResult:
    """Read the ML.ENERGY raw files under ``raw_dir`` and turn them into measurement rows.

    The derivations follow the shared reference README: per-GPU ``mean_power_w`` (total /
    ``num_gpus``), ``itl_s`` only where a per-request statistic exists (batch-1 latency/length in
    2023, vLLM's mean TPOT in V2, the median client-side ITL in V3; V1 has no token counts),
    ``energy_per_token_j`` summed over GPUs, ``batch_size`` = the engine's maximum concurrency.

    Args:
        raw_dir: folder holding the raw files (e.g. ``data/external/mlenergy``).
        catalog: GPU and LLM catalogues the names must resolve through.
        single_gpu: drop rows that ran on more than one GPU (kept by default, per-GPU power).

    """
    tidy = read_mlenergy(raw_dir)
    tidy["_gpu_lookup"] = tidy["gpu"]
    ids = tidy[list(MLENERGY_ID_COLUMNS)].copy()
    provenance = (
        "tensor_parallel",
        "pipeline_parallel",
        "source_file",
        "source_row",
        "family",
        "task",
    )
    return _finish(tidy, ids, catalog, single_gpu=single_gpu, provenance=provenance)


# ---------------------------------------------------------------------------------------------
# Shared: resolution, filters, validation, summary
# ---------------------------------------------------------------------------------------------


def _finish(
    tidy: pd.DataFrame,
    ids: pd.DataFrame,
    catalog: Catalog,
    *,
    single_gpu: bool,
    provenance: tuple[str, ...],
) -> ImportResult:
    """Resolve names, apply the filters in order, validate, and split kept from dropped."""
    tidy = tidy.reset_index(drop=True)
    ids = ids.reset_index(drop=True)
    for column in SCHEMA_COLUMNS:
        if column not in tidy.columns:
            tidy[column] = None
    reason = tidy["_reason"].astype(object).where(tidy["_reason"].notna(), None)
    gpu = tidy["_gpu_lookup"].map(lambda n: catalog.find_gpu(n) if pd.notna(n) else None)
    llm = tidy["model"].map(lambda n: catalog.find_llm(n) if pd.notna(n) else None)
    active = pd.to_numeric(llm.map(catalog.llms["active_params_b"]), errors="coerce")
    total = pd.to_numeric(llm.map(catalog.llms["params_b"]), errors="coerce")
    dtype = tidy["dtype"].astype(object)
    num_gpus = pd.to_numeric(tidy["num_gpus"], errors="coerce")
    checks: list[tuple[pd.Series, Callable[[int], str]]] = [
        (gpu.isna(), lambda i: f"GPU name does not resolve: {tidy.at[i, 'gpu']!r}"),
        (tidy["_moe"].astype(bool) | (active < total), lambda i: "MoE"),
        (llm.isna(), lambda i: f"LLM does not resolve: {tidy.at[i, 'model']!r}"),
        (
            dtype.notna() & ~dtype.isin(SIXTEEN_BIT),
            lambda i: f"weights not 16-bit ({dtype.at[i]})",
        ),
        (
            (num_gpus > 1) & single_gpu,
            lambda i: f"multi-GPU ({int(num_gpus.at[i])} GPUs)",
        ),
    ]
    for mask, describe in checks:
        for i in tidy.index[mask.to_numpy() & reason.isna().to_numpy()]:
            reason.at[i] = describe(i)

    kept = tidy[reason.isna()].copy()
    kept["gpu_source_name"] = kept["gpu"]
    if "model_source_name" not in kept.columns:
        kept["model_source_name"] = kept["model"]
    kept["gpu"] = gpu[kept.index]
    kept["model"] = llm[kept.index]
    columns = [*SCHEMA_COLUMNS, "gpu_source_name", "model_source_name", *provenance]
    kept = _typed(kept[columns])
    failures = _validation_reasons(kept, catalog)
    reason[failures.dropna().index] = failures.dropna()

    rows = kept[failures.isna()].reset_index(drop=True)
    dropped = ids[reason.notna()].assign(reason=reason[reason.notna()]).reset_index(drop=True)
    return ImportResult(rows=rows, dropped=dropped)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as float64, text as str (what the measurement suite expects of a read CSV)."""
    out = frame.copy()
    for column in out.columns:
        if column in NUMERIC_COLUMNS:
            out[column] = pd.to_numeric(out[column], errors="coerce").astype(float)
        elif column in ("source_row", "tensor_parallel", "pipeline_parallel"):
            out[column] = pd.to_numeric(out[column], errors="coerce").astype("Int64")
        elif column in ("gpu", "model", "scenario", "engine", "dtype", "itl_kind", "source"):
            out[column] = out[column].astype("str").where(out[column].notna(), None)
    return out


def _unexpected(derived: pd.DataFrame, kind: str, kwargs: dict[str, Any]) -> pd.Series | None:
    """Rows that break a column-map expectation (GE's semantics: blanks pass), else None."""
    column = kwargs.get("column")
    if column not in derived.columns:
        return None
    values = derived[column]
    if kind == "expect_column_values_to_not_be_null":
        return values.isna()
    if kind == "expect_column_values_to_be_in_set":
        return values.notna() & ~values.isin(kwargs["value_set"])
    if kind == "expect_column_values_to_be_between":
        numbers = pd.to_numeric(values, errors="coerce")
        bad = pd.Series(False, index=values.index)
        low, high = kwargs.get("min_value"), kwargs.get("max_value")
        if low is not None:
            bad |= numbers <= low if kwargs.get("strict_min") else numbers < low
        if high is not None:
            bad |= numbers >= high if kwargs.get("strict_max") else numbers > high
        return bad & numbers.notna()
    return None


def _validation_reasons(rows: pd.DataFrame, catalog: Catalog) -> pd.Series:
    """``fails validation: EXPECTATION(COLUMN)`` for each row the measurement suite flags.

    Great Expectations says which expectations failed and how many rows each; the rows
    themselves are found on the same derived check columns it validated.

    Raises:
        DataError: an expectation fails for the table as a whole (an importer bug).

    """
    reasons = pd.Series(None, index=rows.index, dtype=object)
    if rows.empty:
        return reasons
    # Imported here: Great Expectations is slow to import and only validation imports it.
    from wattgpu.data.validation import validate_table

    report = validate_table("measurements", rows, catalog)
    if report.success:
        return reasons
    derived = derive_measurement_checks(rows, catalog)
    specs = {
        (e["type"], e["kwargs"].get("column")): e["kwargs"] for e in measurement_expectations()
    }
    for result in report.results:
        if result.success:
            continue
        label = f"{result.expectation}({result.column})"
        mask = _unexpected(
            derived, result.expectation, specs.get((result.expectation, result.column), {})
        )
        if mask is None or (
            result.unexpected_count is not None and int(mask.sum()) != result.unexpected_count
        ):
            raise DataError(
                f"imported rows fail {label} as a table, not row by row; this is an importer "
                f"bug (error: {result.error or 'none'})"
            )
        flagged = pd.Series(mask.to_numpy(), index=rows.index) & reasons.isna()
        reasons[flagged] = f"fails validation: {label}"
    return reasons


def _examples(frame: pd.DataFrame, n: int = 3) -> str:
    column = next(c for c in ("model_source_name", "model") if c in frame.columns)
    names = list(dict.fromkeys(str(v) for v in frame[column].dropna()))
    return ", ".join(names[:n]) + (", ..." if len(names) > n else "")


def summarise(result: ImportResult) -> str:
    """A short table: rows kept, multi-GPU rows kept, rows without ITL, dropped rows by reason."""
    rows, dropped = result.rows, result.dropped
    multi = int((rows["num_gpus"] > 1).sum()) if len(rows) else 0
    no_itl = int(rows["itl_s"].isna().sum()) if len(rows) else 0
    table = [
        ("rows kept", len(rows), ""),
        ("  multi-GPU (per-GPU power)", multi, ""),
        ("  without itl_s", no_itl, ""),
        ("rows dropped", len(dropped), ""),
    ]
    if len(dropped):
        for reason, count in dropped["reason"].value_counts(sort=True).items():
            examples = _examples(dropped[dropped["reason"] == reason])
            table.append((f"  {reason}", int(count), f"e.g. {examples}"))
    width = max(len(label) for label, _, _ in table)
    return "\n".join(
        f"{label:<{width}} {count:>6}  {examples}".rstrip() for label, count, examples in table
    )
