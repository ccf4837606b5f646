"""The Argonne LLM-Inference-Bench importer: its two result CSVs into measurement rows.

Reads ``Plots/All_results.csv`` (the latency sweep: no power) and
``Plots/Fig_16_a_b/power_results.csv`` (the power sweep: one GPU, NVML power in milliwatts) of
github.com/argonne-lcf/LLM-Inference-Bench (commit 4211f5d, BSD-3-Clause) into one tidy row per
run, following the shared reference README ("Source 2"), and hands them to the shared filters
and validation of :mod:`wattgpu.data.importers.common`.

One departure from the reference table: its llama.cpp rows take ``Batch Size`` as the number of
sequences, but llama-bench generates one sequence and ``-b`` is its prompt-processing batch (the
source's own ``Throughput`` is (in + out) / latency at every batch size, and latency does not grow
with it). Here llama.cpp rows get ``batch_size`` 1 and a one-sequence throughput; the setting as
written stays in ``source_batch_size``.
"""

from __future__ import annotations

import math
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

ARGONNE_SOURCE = "argonne llm-inference-bench ({family})"
# The tail of each file's path in the repository -> the family its rows belong to. Other CSVs of
# Plots/ (and InferenceGraphPlotter/'s All_results.csv) are subsets or figure copies of these.
ARGONNE_FILES = {
    ("Plots", "All_results.csv"): "latency_sweep",
    ("Plots", "Fig_16_a_b", "power_results.csv"): "power_sweep",
}
ARGONNE_COLUMNS = (
    "Hardware",
    "Num of Hardware",
    "Framework",
    "Model",
    "Input Output Length",
    "Batch Size",
    "Latency",
)
ARGONNE_ENGINES = {
    "vLLM": "vllm",
    "TensorRT-LLM": "trtllm",
    "Deepspeed-MII": "deepspeed-mii",
    "llama.cpp": "llama.cpp",
}
ARGONNE_ITL_KIND = "batch_latency/output_len (upper bound, incl. prefill)"
# The harness (data/clients.csv): one offline batch of B random-token prompts sent at t = 0,
# input = output length, ignore_eos, latency = the batch's end-to-end time
# (serving_dynamics.md, B3).
ARGONNE_CLIENT = "argonne"
# The serving software of the runs is of 2024, as the paper describes it (PMBS 2024, arXiv
# 2411.00136); the rows name no version. Without it the rows would mean today's engines.
ARGONNE_ENGINE_YEAR = 2024
# Under 2 ms per output token a 7B-72B model cannot have generated its output (33 runs: GH200
# vLLM 2048/2048 of 2k-context models, H100 TensorRT-LLM Qwen2): ITL and throughput are blanked.
ARGONNE_MIN_STEP_S = 0.002
ARGONNE_ID_COLUMNS = (*RAW_ROW_ID_COLUMNS, "num_gpus", "source_batch_size")


def _argonne_row(raw: dict[str, Any], family: str, rel: str, index: int) -> dict[str, Any]:
    """One tidy row (``_reason`` set when the run is not NVIDIA or holds nothing usable)."""
    hardware, length = str(raw["Hardware"]), float(raw["Input Output Length"])
    latency, gpus = float(raw["Latency"]), int(raw["Num of Hardware"])
    engine = ARGONNE_ENGINES.get(raw["Framework"], str(raw["Framework"]).lower())
    # llama-bench generates one sequence; its "batch size" (-b) is the prompt-processing batch
    # (the source's own Throughput for llama.cpp is (in + out) / latency at every batch size).
    batch = 1.0 if engine == "llama.cpp" else float(raw["Batch Size"])
    power = float(raw.get("avg_power", math.nan)) / 1000  # NVML milliwatts
    plausible = latency / length >= ARGONNE_MIN_STEP_S
    tokens = batch * length
    row = {
        "source_file": rel,
        "source_row": index,
        "family": family,
        "task": f"random_in{int(length)}_out{int(length)}",
        "gpu": hardware,
        "model": raw["Model"],
        "model_source_name": raw["Model"],
        "engine": engine,
        "engine_year": ARGONNE_ENGINE_YEAR,
        "scenario": "offline",
        "batch_size": batch,
        "source_batch_size": int(raw["Batch Size"]),
        "request_rate_rps": math.nan,
        "num_gpus": gpus,
        "mean_power_w": power,
        # a whole batch's latency over its output length: an upper bound that includes prefill
        "itl_s": latency / length if plausible else math.nan,
        "itl_kind": ARGONNE_ITL_KIND if plausible else None,
        # the power window holds ~2 s of idle and a separate run of the batch: approximate
        "energy_per_token_j": power * latency / tokens if plausible else math.nan,
        "throughput_tok_s": tokens / latency if plausible else math.nan,
        "inv_throughput_s_per_tok": latency / tokens if plausible else math.nan,
        "input_tokens": length,
        "output_tokens": length,
        # not stated per row; the scripts run 16-bit weights (TensorRT-LLM float16, llama.cpp
        # f16 GGUF, vLLM dtype auto), so blank passes the 16-bit filter, as in the reference
        "dtype": None,
        "source": ARGONNE_SOURCE.format(family=family),
        "client": ARGONNE_CLIENT,
        "_reason": None,
    }
    if not hardware.lower().startswith("nvidia"):
        row["_reason"] = f"not an NVIDIA GPU ({hardware})"
    elif not plausible and math.isnan(power):
        row["_reason"] = "implausibly short latency (< 2 ms per output token)"
    return row


def _family(path: Path) -> str | None:
    """The family of a raw file, from the tail of its path; None for any other file."""
    parts = path.resolve().parts
    return next((f for tail, f in ARGONNE_FILES.items() if parts[-len(tail) :] == tail), None)


def _read_argonne_file(path: Path, rel: str, family: str) -> list[dict[str, Any]]:
    """The rows of one raw CSV (blank lines skipped; ``source_row`` counts data rows from 0)."""
    frame = pd.read_csv(path)
    needed = (*ARGONNE_COLUMNS, "avg_power") if family == "power_sweep" else ARGONNE_COLUMNS
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ValueError(f"lacks column(s) {', '.join(missing)}")
    records = frame.to_dict("records")
    return [_argonne_row(raw, family, rel, index) for index, raw in enumerate(records)]


def read_argonne(raw_dir: Path) -> pd.DataFrame:
    """Read every Argonne run under ``raw_dir`` into one tidy row each (names as written).

    Recognised files, anywhere below ``raw_dir``: ``Plots/All_results.csv`` and
    ``Plots/Fig_16_a_b/power_results.csv``. ``source_file`` is the path relative to
    ``raw_dir``; ``source_row`` the row's position among the file's data rows. Rows of other
    vendors are read too, with ``_reason`` set.

    Raises:
        DataError: ``raw_dir`` is not a folder, holds neither file, or a file is unreadable.

    """

    def read_file(path: Path, rel: str) -> list[dict[str, Any]]:
        family = _family(path)
        return [] if family is None else _read_argonne_file(path, rel, family)

    return read_raw_files(
        raw_dir,
        "Argonne",
        read_file,
        "no Argonne results file under {raw_dir} (expected Plots/All_results.csv or "
        "Plots/Fig_16_a_b/power_results.csv)",
    )


def import_argonne(raw_dir: Path, catalog: Catalog, *, single_gpu: bool = False) -> ImportResult:
    """Read the Argonne raw files under ``raw_dir`` and turn them into measurement rows.

    NVIDIA rows only; ``mean_power_w`` = ``avg_power`` / 1000 (power sweep only, one GPU),
    ``itl_s`` = ``Latency / output_len`` (an upper bound: the batch's latency includes its
    prefill), ``throughput_tok_s`` = batch x output_len / ``Latency`` and its inverse,
    ``energy_per_token_j`` = power x latency / tokens (approximate), ``input_tokens`` =
    ``output_tokens`` = the "Input Output Length". Runs under 2 ms per output token lose their
    ITL and throughput, and are dropped when no power is left.

    Args:
        raw_dir: folder holding the raw files (e.g. ``data/external/argonne``).
        catalog: GPU and LLM catalogues the names must resolve through.
        single_gpu: drop rows that ran on more than one GPU (kept by default).

    """
    tidy = read_argonne(raw_dir)
    tidy["_gpu_lookup"] = tidy["gpu"]
    ids = tidy[list(ARGONNE_ID_COLUMNS)].copy()
    provenance = ("source_batch_size", "source_file", "source_row", "family", "task")
    return finish_import(tidy, ids, catalog, single_gpu=single_gpu, provenance=provenance)
