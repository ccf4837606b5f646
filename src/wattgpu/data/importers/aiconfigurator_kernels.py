"""AIConfigurator's kernel measurements into one small tidy table of what the prior needs.

Reads the parquet tables under ``systems/data/<system>/<op>/<engine>/<version>/`` of
github.com/ai-dynamo/aiconfigurator (commit 095f58a, Apache-2.0; shared reference README,
"Source 5"): latencies of the kernels TensorRT-LLM, SGLang and vLLM run, measured on 7 NVIDIA
systems. Each kernel's time is set against the catalogue's spec sheet of its GPU, so the table
holds shares of the sheet that travel to other GPUs, not raw latencies:

* ``gemm``: per engine and weight format, along ``m`` (decode to prefill shapes, ``M_BUCKETS``),
  the median achieved share of the memory bandwidth (weights, activations and output read or
  written once) and of the format's tensor peak (``2 m n k`` FLOPs); only ``n, k >= 4096``
  (an LLM's weight matrices, not toy shapes). Where the table has per-kernel NVML power, the
  median ``power / power_limit`` too.
* ``decode_attention``: per engine, along the KV tokens one call reads (batch x KV length), the
  median achieved bandwidth share of reading the 16-bit KV cache, and its power share.
* ``all_reduce``: per collective implementation (NCCL, newest version per system; the engines'
  own CUDA-graph all-reduce) and GPU count, the latency in seconds of a 16-bit all-reduce by
  message size in bytes.

Row columns (``KERNEL_COLUMNS``): ``system``, ``gpu`` (the catalogue's name), ``op``, ``engine``,
``engine_version``, ``dtype``, ``num_gpus``, ``size_lo`` / ``size_hi`` (the bucket: ``m``, KV
tokens, or message bytes), ``metric`` (``bandwidth_share``, ``flops_share``, ``power_share``,
``latency_s``), ``value`` and ``kernels`` (measurements summarised).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.data.catalog import Catalog
from wattgpu.errors import DataError

# AIConfigurator's systems -> the catalogue's variants (its systems/<name>.yaml spec files).
KERNEL_SYSTEMS = {
    "a100_sxm": "NVIDIA A100 SXM4 80GB",
    "l40s": "NVIDIA L40S",
    "rtx_pro_6000_server": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "h100_sxm": "NVIDIA H100 SXM5",
    "h200_sxm": "NVIDIA H200 SXM",
    "b200_sxm": "NVIDIA B200",
    "gb200": "NVIDIA GB200",
}
KERNEL_COLUMNS = (
    "system",
    "gpu",
    "op",
    "engine",
    "engine_version",
    "dtype",
    "num_gpus",
    "size_lo",
    "size_hi",
    "metric",
    "value",
    "kernels",
)
# GEMM rows along m: decode (a batch of up to 16 sequences), mid batches, prefill chunks.
M_BUCKETS = ((1, 16), (17, 128), (129, 1024), (1025, 1 << 30))
# Decode-attention calls by KV tokens read (batch x KV length): small calls are latency-bound.
KV_BUCKETS = ((1, 4095), (4096, 65535), (65536, 1 << 40))
MIN_WEIGHT_DIM = 4096
# Bytes per weight and per activation, and the catalogue column of the tensor peak the math runs
# at, for each GEMM format of the tables (weight-only formats widen weights to 16 bits).
GEMM_FORMATS: dict[str, tuple[float, float, str]] = {
    "bfloat16": (2.0, 2.0, "fp16_tensor_tflops"),
    "float16": (2.0, 2.0, "fp16_tensor_tflops"),
    "fp8": (1.0, 1.0, "fp8_tensor_tflops"),
    "fp8_block": (1.0, 1.0, "fp8_tensor_tflops"),
    "nvfp4": (0.5625, 0.5625, "fp4_tensor_tflops"),  # 4 bits and one 8-bit scale per 16
    "int8_wo": (1.0, 2.0, "fp16_tensor_tflops"),
    "int4_wo": (0.5, 2.0, "fp16_tensor_tflops"),
}
# The engines' own all-reduce under CUDA graphs (what a decode step runs), by kernel name.
GRAPH_ALLREDUCE = ("graph", "TRTLLM")
OP_NAMES = {"gemm": "gemm", "attention": "decode_attention", "comm": "all_reduce"}


def read_kernel_tables(raw_dir: Path) -> dict[tuple[str, str, str, str, str], pd.DataFrame]:
    """Every kernel table under ``raw_dir``, by (system, op, engine, version, file stem).

    ``raw_dir``: AIConfigurator's ``systems/data`` folder, or any folder above it.
    """
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(f"kernel tables folder not found: {raw_dir}")
    tables = {}
    for path in sorted(raw_dir.rglob("*.parquet")):
        parts = path.parts
        for i in range(len(parts) - 5, -1, -1):
            if parts[i] in KERNEL_SYSTEMS:
                system, op, engine, version = parts[i : i + 4]
                tables[(system, op, engine, version, path.stem)] = pd.read_parquet(path)
                break
    if not tables:
        raise DataError(
            f"no kernel tables under {raw_dir}: expected <system>/<op>/<engine>/<version>/"
            f"*.parquet with a system among {', '.join(KERNEL_SYSTEMS)}"
        )
    return tables


def import_kernels(
    tables: dict[tuple[str, str, str, str, str], pd.DataFrame], catalog: Catalog
) -> pd.DataFrame:
    """The tidy kernel table (see the module docstring) of ``read_kernel_tables``' tables."""
    parts = []
    for (system, op, engine, version, stem), table in tables.items():
        gpu = KERNEL_SYSTEMS[system]
        specs = catalog.gpus.loc[gpu]
        if op == "gemm" and stem == "gemm_perf":
            part = _gemm(table, specs)
        elif op == "attention" and stem == "generation_attention_perf":
            part = _decode_attention(table, specs)
        elif op == "comm":
            part = _all_reduce(table, stem)
        else:
            continue
        if part.empty:
            continue
        part.insert(0, "engine_version", version)
        part.insert(0, "engine", engine)
        part.insert(0, "op", OP_NAMES[op])
        part.insert(0, "gpu", gpu)
        part.insert(0, "system", system)
        parts.append(part)
    tidy = pd.concat(parts, ignore_index=True)
    tidy = _newest_nccl(tidy)
    # six significant digits: shares near 1 and latencies of microseconds alike
    tidy["value"] = [float(f"{v:.6g}") for v in tidy["value"].astype(float)]
    tidy = tidy[list(KERNEL_COLUMNS)]
    return tidy.sort_values(list(KERNEL_COLUMNS[:9])).reset_index(drop=True)


def _bucketed(
    frame: pd.DataFrame, size: pd.Series, buckets: tuple[tuple[int, int], ...], by: list[str]
) -> pd.DataFrame:
    """Medians of the ``*_share`` columns of ``frame`` per bucket of ``size`` and ``by``."""
    metrics = [c for c in ("bandwidth_share", "flops_share", "power_share") if c in frame]
    out = []
    for lo, hi in buckets:
        inside = frame[(size >= lo) & (size <= hi)]
        if inside.empty:
            continue
        grouped = inside.groupby(by)[metrics]
        medians = grouped.median().reset_index()
        medians["kernels"] = grouped.size().to_numpy()
        long = medians.melt(
            id_vars=[*by, "kernels"], value_vars=metrics, var_name="metric", value_name="value"
        ).dropna(subset=["value"])
        long["size_lo"], long["size_hi"] = lo, hi
        out.append(long)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _gemm(table: pd.DataFrame, specs: pd.Series) -> pd.DataFrame:
    """GEMM shares of the sheet's bandwidth and tensor peak by format and ``m`` bucket."""
    frame = table[
        table["gemm_dtype"].isin(list(GEMM_FORMATS))
        & (table["n"] >= MIN_WEIGHT_DIM)
        & (table["k"] >= MIN_WEIGHT_DIM)
        & (table["latency"] > 0)
    ].copy()
    if frame.empty:
        return pd.DataFrame()
    m, n, k = (frame[c].to_numpy(float) for c in ("m", "n", "k"))
    formats = frame["gemm_dtype"].map(GEMM_FORMATS)
    weight = np.array([f[0] for f in formats])
    activation = np.array([f[1] for f in formats])
    peak = np.array([float(specs.get(f[2], np.nan)) for f in formats]) * 1e12
    seconds = frame["latency"].to_numpy(float) / 1e3
    moved = n * k * weight + m * k * activation + m * n * 2.0
    frame["bandwidth_share"] = moved / seconds / (float(specs["memory_bandwidth_gb_s"]) * 1e9)
    frame["flops_share"] = 2.0 * m * n * k / seconds / peak
    if "power" in frame and "power_limit" in frame:
        frame["power_share"] = frame["power"] / frame["power_limit"]
    frame = frame.rename(columns={"gemm_dtype": "dtype"})
    frame["num_gpus"] = 1
    return _bucketed(frame, frame["m"], M_BUCKETS, ["dtype", "num_gpus"])


def _decode_attention(table: pd.DataFrame, specs: pd.Series) -> pd.DataFrame:
    """Decode attention's share of the bandwidth reading a 16-bit KV cache, by KV tokens read."""
    frame = table[
        (table["kv_cache_dtype"] == "bfloat16")
        & (table.get("window_size", 0) == 0)
        & (table["latency"] > 0)
    ].copy()
    if frame.empty:
        return pd.DataFrame()
    tokens = frame["batch_size"].to_numpy(float) * frame["step"].to_numpy(float)
    per_token = frame["num_key_value_heads"].to_numpy(float) * frame["head_dim"] * 2.0 * 2.0
    seconds = frame["latency"].to_numpy(float) / 1e3
    bandwidth = float(specs["memory_bandwidth_gb_s"]) * 1e9
    frame["bandwidth_share"] = tokens * per_token / seconds / bandwidth
    if "power" in frame and "power_limit" in frame:
        frame["power_share"] = frame["power"] / frame["power_limit"]
    frame["dtype"] = "bfloat16"
    frame["num_gpus"] = 1
    return _bucketed(frame, pd.Series(tokens, index=frame.index), KV_BUCKETS, ["dtype", "num_gpus"])


def _all_reduce(table: pd.DataFrame, stem: str) -> pd.DataFrame:
    """16-bit all-reduce latency, s, by GPU count and message bytes (CUDA-graph variants)."""
    if stem == "nccl_perf":
        frame = table[(table["op_name"] == "all_reduce") & (table["nccl_dtype"] == "half")]
    elif stem == "custom_allreduce_perf":
        graph = table["kernel_source"].astype(str).str.contains("|".join(GRAPH_ALLREDUCE))
        frame = table[graph & (table["allreduce_dtype"].isin(["bfloat16", "half", "float16"]))]
    else:
        return pd.DataFrame()
    if frame.empty:
        return pd.DataFrame()
    size = frame["message_size"].astype(float) * 2.0  # 16-bit elements -> bytes
    out = pd.DataFrame(
        {
            "dtype": "bfloat16",
            "num_gpus": frame["num_gpus"].astype(int).to_numpy(),
            "size_lo": size.to_numpy(),
            "size_hi": size.to_numpy(),
            "latency": frame["latency"].to_numpy(float) / 1e3,
        }
    )
    grouped = out.groupby(["dtype", "num_gpus", "size_lo", "size_hi"])["latency"]
    tidy = grouped.median().rename("value").reset_index()
    tidy["kernels"] = grouped.size().to_numpy()
    tidy["metric"] = "latency_s"
    return tidy


def _newest_nccl(tidy: pd.DataFrame) -> pd.DataFrame:
    """Only the newest NCCL version measured on each system (versions compared as numbers)."""
    nccl = tidy["engine"] == "nccl"
    if not nccl.any():
        return tidy
    key = tidy.loc[nccl, "engine_version"].map(
        lambda v: tuple(int(p) for p in str(v).split(".") if p.isdigit())
    )
    newest = key.groupby(tidy.loc[nccl, "system"]).transform("max")
    keep = ~nccl
    keep[nccl] = (key == newest).to_numpy()
    return tidy[keep]
