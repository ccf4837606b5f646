"""The AIConfigurator importer: NVIDIA's measured serving rows ("silicon") into server rows.

Reads ``silicon_sample.csv`` of github.com/ai-dynamo/aiconfigurator (folder
``aic-core/src/aiconfigurator_core/systems``, commit 095f58a, Apache-2.0): one row per measured
serving configuration of TensorRT-LLM, SGLang or vLLM on H100 SXM, H200 SXM, B200 or GB200
(shared reference README, "Source 4"). Each is a closed loop of N concurrent requests with fixed
input and output lengths; the row gives the measured TTFT and TPOT. Power was not measured.

How a row is read (the source ships no documentation of its columns beyond their names, so the
reading below is checked on the rows themselves):

* ``batch_size`` is the batch of **one attention data-parallel rank**: where
  ``silicon_data_source`` states ``silicon_concurrency=N``, N = ``batch_size`` x
  ``attention_dp_size`` on every row whose layout is consistent (e.g. MiniMax-M2.5 on vLLM,
  tp 4, attention_dp 4: batch 64, concurrency 256). ``concurrency`` is therefore N (the closed
  loop's requests), or ``batch_size`` x ``attention_dp_size`` where the source states no N.
  A row where the two disagree is dropped: its deployment (replicas, layout) is not stated.
* The GPUs of an aggregated deployment are ``tp_size`` x ``attention_dp_size`` x ``pp_size``
  (attention tensor-parallel ranks times data-parallel ranks, per pipeline stage), and the MoE
  layers spread over the same GPUs, ``moe_tp_size`` x ``moe_ep_size`` of them: the two agree
  on all but 19 of the 3,364 aggregated rows (e.g. DeepSeek on TensorRT-LLM, tp 1, attention_dp 64,
  moe 8 x 8: 64 GPUs; the row ids spell ``tp1 ... dp64``). ``attention_dp_size`` blank or 0
  means 1; a MoE layout of 0 or 1 GPU (``moe_tp_size`` x ``moe_ep_size``: the defaults, which
  dense LLMs carry beside any ``tp_size``) means not stated. A row whose MoE layout covers
  more GPUs, but another number than its attention layout, is dropped.
* TPOT is AIConfigurator's: (request time - TTFT) / (output tokens - 1), a request's mean gap
  between tokens, averaged over the requests (``itl_kind`` says so).
* The weight format is the GEMMs' and the experts' quantization (``gemm_quant_mode``,
  ``moe_quant_mode``, else ``precision``); where they differ they differ only in the scales
  (``fp8`` vs ``fp8_block``, both one byte a weight), and ``dtype`` is ``fp8``. A row whose two
  modes have different widths would be dropped (none here). ``precision`` blank: the
  checkpoint's own weights (``dtype`` blank).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.data.formats import BYTES_PER_PARAM, canonical_format
from wattgpu.data.importers.common import (
    RAW_ROW_ID_COLUMNS,
    ImportResult,
    finish_import,
    read_raw_files,
)

AIC_FILE = "silicon_sample.csv"
AIC_SOURCE = "nvidia aiconfigurator (silicon_sample)"
AIC_FAMILY = "aiconfigurator_silicon"
# The harness (data/clients.csv): a closed loop at the stated concurrency with fixed input and
# output lengths, TTFT and TPOT as request means (serving_dynamics.md, B5).
AIC_CLIENT = "aiconfigurator"
# No "median" and no "prefill" in the text: itl_statistic reads it as the mean.
AIC_ITL_KIND = "mean TPOT per request: (request time - TTFT) / (output tokens - 1)"
# AIConfigurator's systems -> the catalogue's variants (its systems/<name>.yaml spec files:
# H100 SXM 80 GB, H200 SXM 141 GB, B200 SXM, GB200 NVL72).
AIC_GPUS = {
    "h100_sxm": "NVIDIA H100 SXM5",
    "h200_sxm": "NVIDIA H200 SXM",
    "b200_sxm": "NVIDIA B200",
    "gb200": "NVIDIA GB200",
}
AIC_ENGINES = ("trtllm", "sglang", "vllm")
AIC_DISAGG = "disaggregated serving (separate prefill and decode pools): not modelled"
AIC_LAYOUT_MISMATCH = (
    "parallel layout inconsistent: the experts (moe_tp_size x moe_ep_size) span another number "
    "of GPUs than the attention (tp_size x attention_dp_size)"
)
AIC_CONCURRENCY_MISMATCH = (
    "batch_size x attention_dp_size differs from silicon_concurrency "
    "(replicas or layout not stated)"
)
AIC_COLUMNS = (
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)
AIC_ID_COLUMNS = (*RAW_ROW_ID_COLUMNS, "source_id", "num_gpus", "concurrency")
# AIConfigurator's quantization modes -> the project's formats (wattgpu.data.formats).
AIC_FORMATS = {
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "fp4": "nvfp4",
    "nvfp4": "nvfp4",
    "int4": "int4_wo",
    "int4_wo": "int4_wo",
}
_CONCURRENCY = re.compile(r"silicon_concurrency=(\d+)")
_MEASURED = re.compile(r"measured=([^;]+)")
# A container image named in the source: registry/path:tag (a date has no "/" before its ":").
_IMAGE = re.compile(r"(?:^|[;\s=])([\w.-]+(?:/[\w.-]+)+):([\w.+-]+)\s*(?:;|$)")
# NVIDIA Dynamo's runtime images (``ai-dynamo/tensorrtllm-runtime:0.8.1``) are tagged with
# Dynamo's version, not the engine's: such a version is written ``dynamo-0.8.1``, so that
# ``data/engines.csv`` dates Dynamo's release, not TensorRT-LLM's 0.8 of 2024.
DYNAMO_IMAGE = "ai-dynamo/"


def _number(value: Any) -> float:
    number = pd.to_numeric(value, errors="coerce")
    return float(number) if pd.notna(number) else math.nan


def _text(value: Any) -> str | None:
    return None if pd.isna(value) or not str(value).strip() else str(value).strip()


def engine_version(backend_version: Any, data_source: Any) -> str | None:
    """``backend_version``, else the tag of the container image ``silicon_data_source`` names.

    A version that is the tag of one of Dynamo's runtime images is Dynamo's: ``dynamo-TAG``.
    """
    version = _text(backend_version)
    found = _IMAGE.search(str(data_source or ""))
    if found is not None and DYNAMO_IMAGE in found.group(1) and version in (None, found.group(2)):
        return f"dynamo-{found.group(2)}"
    if version is not None:
        return version
    return found.group(2) if found else None


def weight_dtype(precision: Any, gemm: Any, moe: Any) -> tuple[str | None, str | None]:
    """The row's ``dtype`` and, where it cannot be had, the reason to drop the row."""
    modes = [m.lower() for m in (_text(gemm), _text(moe)) if m is not None]
    if not modes and _text(precision) is not None:
        modes = [str(precision).lower()]
    if not modes:
        return None, None
    unknown = [m for m in modes if m not in AIC_FORMATS]
    if unknown:
        return None, f"weights in a format the project does not know ({unknown[0]})"
    formats = {canonical_format(AIC_FORMATS[m]) for m in modes}
    widths = {BYTES_PER_PARAM[f] for f in formats}
    if len(widths) > 1:
        return None, f"GEMMs and experts in formats of different widths ({' / '.join(modes)})"
    return sorted(formats)[0], None


def layout(row: pd.Series) -> tuple[float, float, str | None]:
    """GPUs and concurrent requests of an aggregated row, or the reason they are not stated."""
    tp, pp = _number(row["tp_size"]), _number(row["pp_size"])
    dp = _number(row["attention_dp_size"])
    dp = 1.0 if math.isnan(dp) or dp == 0 else dp
    pp = 1.0 if math.isnan(pp) or pp == 0 else pp
    if math.isnan(tp) or tp < 1:
        return math.nan, math.nan, "no tensor-parallel size"
    attention_gpus = tp * dp
    moe_gpus = _number(row["moe_tp_size"]) * _number(row["moe_ep_size"])
    if moe_gpus > 1 and moe_gpus != attention_gpus:
        return math.nan, math.nan, AIC_LAYOUT_MISMATCH
    batch = _number(row["batch_size"])
    found = _CONCURRENCY.search(str(row["silicon_data_source"] or ""))
    stated = float(found.group(1)) if found else math.nan
    if not math.isnan(stated) and stated != batch * dp:
        return math.nan, math.nan, AIC_CONCURRENCY_MISMATCH
    return attention_gpus * pp, stated if found else batch * dp, None


def _tidy_row(row: pd.Series, index: int, rel: str) -> dict[str, Any]:
    """One raw row in the measurement schema (names as written, ``_reason`` where unusable)."""
    system, source = str(row["system"]), str(row["silicon_data_source"] or "")
    measured = _MEASURED.search(source)
    out: dict[str, Any] = {
        "source_file": rel,
        "source_row": index,
        "source_id": row["id"],
        "family": AIC_FAMILY,
        "task": f"isl{int(_number(row['isl']))}_osl{int(_number(row['osl']))}",
        "gpu": system,
        "_gpu_lookup": AIC_GPUS.get(system, system),
        "model": row["model_path"],
        "model_source_name": row["model_path"],
        "engine": str(row["backend"]),
        "engine_version": engine_version(row["backend_version"], source),
        "scenario": "server",
        "input_tokens": _number(row["isl"]),
        "output_tokens": _number(row["osl"]),
        "ttft_s": _number(row["silicon_ttft_ms"]) / 1000,
        "itl_s": _number(row["silicon_tpot_ms"]) / 1000,
        "itl_kind": AIC_ITL_KIND,
        "mean_power_w": math.nan,
        "measured_at": measured.group(1).strip() if measured else None,
        "source": AIC_SOURCE,
        "client": AIC_CLIENT,
        "tensor_parallel": _number(row["tp_size"]),
        "pipeline_parallel": _number(row["pp_size"]),
        "attention_dp": _number(row["attention_dp_size"]),
        "moe_tensor_parallel": _number(row["moe_tp_size"]),
        "moe_expert_parallel": _number(row["moe_ep_size"]),
        "precision": _text(row["precision"]),
        "gemm_quant_mode": _text(row["gemm_quant_mode"]),
        "moe_quant_mode": _text(row["moe_quant_mode"]),
        "num_gpus": math.nan,
        "concurrency": math.nan,
        "_reason": None,
    }
    if str(row["mode"]) != "agg":
        out["_reason"] = AIC_DISAGG if str(row["mode"]) == "disagg" else f"mode {row['mode']!r}"
        return out
    if out["engine"] not in AIC_ENGINES:
        out["_reason"] = f"engine {out['engine']!r} not one of {', '.join(AIC_ENGINES)}"
        return out
    out["dtype"], reason = weight_dtype(
        row["precision"], row["gemm_quant_mode"], row["moe_quant_mode"]
    )
    out["num_gpus"], out["concurrency"], layout_reason = layout(row)
    out["_reason"] = reason or layout_reason
    return out


def _read_silicon_file(path: Path, rel: str) -> list[dict[str, Any]]:
    frame = pd.read_csv(path, dtype={"backend_version": str})
    missing = [c for c in AIC_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"lacks column(s) {', '.join(missing)}")
    return [_tidy_row(row, int(i), rel) for i, row in frame.iterrows()]


def read_aiconfigurator(raw_dir: Path) -> pd.DataFrame:
    """Read every ``silicon_sample.csv`` under ``raw_dir`` into tidy rows (names as written).

    ``source_file`` is the path relative to ``raw_dir``, ``source_row`` the row's 0-based
    position among the file's data rows, ``source_id`` the source's own ``id``.

    Raises:
        DataError: ``raw_dir`` is not a folder, holds no silicon_sample.csv, or it is unreadable.

    """

    def read_file(path: Path, rel: str) -> list[dict[str, Any]]:
        return _read_silicon_file(path, rel) if path.name == AIC_FILE else []

    return read_raw_files(
        raw_dir,
        "AIConfigurator",
        read_file,
        f"no {AIC_FILE} under {{raw_dir}} (expected aic-core/src/aiconfigurator_core/systems/)",
    )


def import_aiconfigurator(
    raw_dir: Path, catalog: Catalog, *, single_gpu: bool = False
) -> ImportResult:
    """Read AIConfigurator's silicon rows under ``raw_dir`` and turn them into measurement rows.

    One ``server`` row per aggregated configuration: ``concurrency`` = the closed loop's
    requests (``request_rate_rps`` blank: a closed loop has no set rate, and an achieved rate
    is an outcome of the latency), ``input_tokens`` / ``output_tokens`` = isl / osl,
    ``num_gpus`` = the deployment's GPUs, ``ttft_s`` and ``itl_s`` (mean TPOT) in seconds,
    ``mean_power_w`` blank (not measured), the parallel layout and quantization modes as
    provenance. Disaggregated rows are dropped.

    Args:
        raw_dir: folder holding silicon_sample.csv (e.g. the repository's checkout).
        catalog: GPU and LLM catalogues the names must resolve through.
        single_gpu: drop rows that ran on more than one GPU (kept by default).

    """
    tidy = read_aiconfigurator(raw_dir)
    ids = tidy[list(AIC_ID_COLUMNS)].copy()
    ids["source_row"] = pd.to_numeric(ids["source_row"]).astype("Int64")
    for column in ("num_gpus", "concurrency"):
        ids[column] = pd.to_numeric(ids[column]).astype("Int64")
    provenance = (
        "tensor_parallel",
        "pipeline_parallel",
        "attention_dp",
        "moe_tensor_parallel",
        "moe_expert_parallel",
        "precision",
        "gemm_quant_mode",
        "moe_quant_mode",
        "source_file",
        "source_row",
        "source_id",
        "family",
        "task",
    )
    return finish_import(tidy, ids, catalog, single_gpu=single_gpu, provenance=provenance)


# The LLMs of the kept rows that the catalogue lacked, built from the configs AIConfigurator
# ships (model_configs/<org>--<name>_config.json): (catalogue id, config file stem, aliases,
# what the config does not say). ``wattgpu data llms-from-configs`` writes them to llms.csv.
AIC_LLMS = (
    ("deepseek-ai/DeepSeek-R1", "deepseek-ai--DeepSeek-R1", "", ""),
    ("deepseek-ai/DeepSeek-V3", "deepseek-ai--DeepSeek-V3", "", ""),
    (
        "meta-llama/Llama-3.1-70B",
        "meta-llama--Meta-Llama-3.1-70B",
        "meta-llama/Meta-Llama-3.1-70B",
        "base model (the Instruct row is its own entry); the repository's former name is the "
        "config file's",
    ),
    ("MiniMaxAI/MiniMax-M2.5", "MiniMaxAI--MiniMax-M2.5", "", ""),
    (
        "Qwen/Qwen3-235B-A22B",
        "Qwen--Qwen3-235B-A22B",
        "Qwen/Qwen3-235B-A22B-FP8",
        "alias -FP8 is Qwen's block-wise FP8 release of the same model (its config: same "
        "structure plus the quantization_config)",
    ),
    ("Qwen/Qwen3.5-397B-A17B", "Qwen--Qwen3.5-397B-A17B", "", "vision tower not counted"),
    ("moonshotai/Kimi-K2.5", "moonshotai--Kimi-K2.5", "", "vision tower not counted"),
    (
        "zai-org/GLM-5",
        "zai-org--GLM-5",
        "zhipuai/GLM-5",
        "AIConfigurator's rows name it zhipuai/GLM-5 (Zhipu AI's former organisation name); "
        "head_dim = v_head_dim (the config's head_dim 64 is the rope part); DSA indexer "
        "(index_n_heads 32 x index_head_dim 128, top-2048 tokens) counted",
    ),
)
