"""The ML.ENERGY leaderboard importer: its raw files of four generations into measurement rows.

Reads the 2023 benchmark CSVs, the V1 server-rate and V2 batch JSON files
(github.com/ml-energy/leaderboard) and the V3 per-model JSON files (leaderboard-v2) into one
tidy row per measured configuration, with per-GPU power, and hands them to the shared filters
and validation of :mod:`wattgpu.data.importers.common`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.importers.common import (
    RAW_ROW_ID_COLUMNS,
    ImportResult,
    finish_import,
    read_raw_files,
)

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
# The release year of the serving software of each generation of the leaderboard, as the
# leaderboard describes its runs (FastChat on the transformers of 2023; TGI and vLLM of 2024 for
# the V1 server runs and the V2 batch runs; the vLLM of 2025 for V3). The rows name no version.
MLENERGY_ENGINE_YEARS = {
    "legacy_hf_bs1_2023": 2023,
    "hf_batch_branch_2023": 2023,
    "v1_server_rate_2024": 2024,
    "v2_vllm_batch_2024": 2024,
    "v3_vllm_batch_2025": 2025,
}
# The harness of each generation (data/clients.csv). serving_dynamics.md describes the 2024 batch
# runs (B1: 2,000 requests at t = 0 to vLLM 0.5.4, chunked prefill off, TPOT over the steady
# state) and the 2025 ones (B2: 1,024 x repeats requests at t = 0 to vLLM 0.11.1, median
# client-side ITL); the shared reference README ("Source 1") the others: FastChat's generate
# answering one batch after another (2023), servers under a target request rate (2024 V1).
MLENERGY_CLIENTS = {
    "legacy_hf_bs1_2023": "mlenergy-hf",
    "hf_batch_branch_2023": "mlenergy-hf",
    "v1_server_rate_2024": "mlenergy-v1",
    "v2_vllm_batch_2024": "mlenergy-v2",
    "v3_vllm_batch_2025": "mlenergy-v3",
}
MLENERGY_V3_TEXT_TASKS = ("gpqa", "lm-arena-chat", "sourcegraph-fim")
# Where V3's per-model files lie: public/data/models/<org>__<model>__<task>.json.
MLENERGY_V3_FOLDER = ("public", "data", "models")
ITL_KIND_2023 = "mean_latency/mean_response_length (incl. prefill)"
ITL_KIND_V2 = "mean TPOT over engine iterations (vLLM stats)"
ITL_KIND_V3 = "median client-side ITL (chunk-smoothed)"
MLENERGY_ID_COLUMNS = (
    *RAW_ROW_ID_COLUMNS,
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
        "engine_year": MLENERGY_ENGINE_YEARS[family],
        "client": MLENERGY_CLIENTS[family],
        "input_tokens": math.nan,
        "pipeline_parallel": 1,
        "_reason": None,
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
    is_v3 = parts[-4:-1] == MLENERGY_V3_FOLDER
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
    return read_raw_files(
        raw_dir,
        "ML.ENERGY",
        _read_mlenergy_file,
        "no ML.ENERGY measurement file under {raw_dir} (expected *_benchmark.csv, "
        "rate*.json, bs*+tp*+pp*.json or public/data/models/*.json)",
    )


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
    return finish_import(tidy, ids, catalog, single_gpu=single_gpu, provenance=provenance)
