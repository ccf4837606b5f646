"""Per-GPU efficiencies from the shipped kernel table, and a small model of them from specs.

``data/kernels.csv`` (built by ``wattgpu data import aiconfigurator-kernels``, see
:mod:`wattgpu.data.importers.aiconfigurator_kernels`) holds the shares of the spec sheet that
real kernels reach on the 7 profiled systems. The prior needs, per GPU:

* ``memory_efficiency``: the median share of the sheet's bandwidth a decode-shaped 16-bit GEMM
  reaches (``m <= 16``, the median over the engines' medians);
* ``compute_efficiency``: the same of the 16-bit tensor peak for prefill-shaped GEMMs
  (``m > 1024``);
* ``allreduce_latency_s``: a small 16-bit NCCL all-reduce's time (the link's fixed cost, the
  median over 2, 4 and 8 GPUs of messages up to 4 kB);
* ``link_efficiency``: the share of the link's one-way bandwidth a large all-reduce reaches,
  counting the ``2 (N - 1) / N`` bytes a ring moves per byte reduced (messages of 8 MB and up);
* ``<format>_gemm_factor`` (``PATH_FACTOR_COLUMNS``): a weight-only decode GEMM's bandwidth
  share in that kernel format over the 16-bit one's, which costs a weight-only kernel path
  (:mod:`wattgpu.data.kernel_paths`);
* ``memory_power_factor``: how the GPU's draw while its memory is busy compares with the other
  GPUs with per-kernel NVML power (H200, B200, GB200): it scales the power prior's weight of
  memory-bound work (``memory_power_factors``); only GPUs of the same architecture inherit it,
  every other GPU keeps the fitted weight alone (factor 1).

A profiled GPU gets its measured values (``efficiency_source`` names the system). Every other GPU
gets them from ``spec_efficiencies``: the median over the profiled GPUs of its architecture and
memory family (HBM, or GDDR and LPDDR), else of its memory family, else of all; the link's terms
from the profiled GPUs with the same kind of link (NVLink or PCIe). ``bench/kernels.py`` checks this
model leave-one-system-out on the kernel tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from wattgpu.errors import DataError

KERNELS_FILE = "kernels.csv"
EFFICIENCY_COLUMNS = (
    "memory_efficiency",
    "compute_efficiency",
    "allreduce_latency_s",
    "link_efficiency",
)
# Per weight-only kernel format a kernel path is costed with (``wattgpu.data.kernel_paths``), its
# decode GEMMs' share of the bandwidth over 16-bit GEMMs' on the same GPU.
PATH_FORMATS = ("int8_wo", "int4_wo")
PATH_FACTOR_COLUMNS = tuple(f"{f}_gemm_factor" for f in PATH_FORMATS)
# How a GPU's draw while its memory is busy compares with the profiled GPUs': the NVML power of
# its decode-shaped 16-bit GEMMs above idle, over the median of the GPUs measured so.
MEMORY_POWER_COLUMN = "memory_power_factor"
# The prior's idle power, a share of the power limit (``physics.DEFAULT_CONSTANTS.idle_fraction``).
IDLE_SHARE = 0.1
EFFICIENCY_SOURCE = "efficiency_source"
# What the spec model gives (``spec_efficiencies``), and what it reads of a GPU.
MODELLED_COLUMNS = (*EFFICIENCY_COLUMNS, *PATH_FACTOR_COLUMNS, MEMORY_POWER_COLUMN)
SPEC_MODEL_INPUTS = ("architecture", "memory_type", "interconnect")
SPEC_MODEL = "spec model"
DECODE_M = 16
PREFILL_M = 1025
SMALL_MESSAGE_BYTES = 4096
LARGE_MESSAGE_BYTES = 8 * 2**20
# What ``link_bandwidth`` reads of a GPU, in its order.
LINK_INPUTS = ("interconnect", "nvlink_bandwidth_gb_s", "pcie_generation", "pcie_lanes")
# One lane's one-way bandwidth per PCIe generation, GB/s (after line coding).
PCIE_LANE_GB_S = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# What a GPU with no profiled peer gets (the medians of the 7 profiled systems, rounded).
FALLBACK_EFFICIENCIES = {
    "memory_efficiency": 0.79,
    "compute_efficiency": 0.74,
    "allreduce_latency_s": 7e-6,
    "link_efficiency": 0.6,
}


def read_kernels(path: Path) -> pd.DataFrame:
    """The tidy kernel table at ``path``."""
    try:
        return pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"kernel table {path} is not a readable CSV: {exc}") from None


def memory_family(memory_type: object) -> str:
    """``HBM`` or ``GDDR`` (or ``unknown``) for a catalogue ``memory_type``.

    LPDDR (GB10's LPDDR5X) counts as ``GDDR``: DRAM chips on the board, beside the GPU's
    package, not stacks on it, whose controllers reach a like share of their peak.
    """
    text = str(memory_type).upper()
    if text.startswith("HBM"):
        return "HBM"
    return "GDDR" if text.startswith(("GDDR", "LPDDR")) else "unknown"


def link_bandwidth(
    interconnect: Any, nvlink_gb_s: Any, pcie_generation: Any, pcie_lanes: Any
) -> np.ndarray:
    """Each GPU's one-way bandwidth to its peers, GB/s (NaN where its specs do not say).

    NVLink where ``interconnect`` says so (any case): the sheets' total, both directions, so
    half of it; else PCIe, ``lanes x PCIE_LANE_GB_S[generation]``.
    """
    nvlink = np.asarray(pd.to_numeric(np.asarray(nvlink_gb_s), errors="coerce"), float) / 2.0
    generation = np.asarray(pd.to_numeric(np.asarray(pcie_generation), errors="coerce"), float)
    lane = np.array([PCIE_LANE_GB_S.get(int(g), np.nan) if g == g else np.nan for g in generation])
    lanes = np.asarray(pd.to_numeric(np.asarray(pcie_lanes), errors="coerce"), float)
    kind = np.char.lower(np.asarray(interconnect, dtype=object).astype(str))
    return np.where((kind == "nvlink") & np.isfinite(nvlink), nvlink, lanes * lane)


def link_bandwidth_gb_s(gpus: pd.DataFrame) -> pd.Series:
    """``link_bandwidth`` of each GPU of a catalogue table, on its index."""
    blank = pd.Series(np.nan, index=gpus.index)
    return pd.Series(link_bandwidth(*(gpus.get(c, blank) for c in LINK_INPUTS)), index=gpus.index)


def profiled(gpus: pd.DataFrame) -> pd.DataFrame:
    """The catalogue rows whose efficiencies were measured (``efficiency_source``)."""
    return gpus[gpus[EFFICIENCY_SOURCE].astype(str).str.startswith("kernels")]


def measured_efficiencies(kernels: pd.DataFrame, gpus: pd.DataFrame) -> pd.DataFrame:
    """``EFFICIENCY_COLUMNS`` of each profiled GPU (index: the catalogue's name)."""
    decode = gemm_shares(kernels)
    prefill = kernels[
        (kernels["op"] == "gemm")
        & (kernels["dtype"] == "bfloat16")
        & (kernels["metric"] == "flops_share")
        & (kernels["size_lo"] >= PREFILL_M)
    ]
    compute = prefill.groupby(["gpu", "engine"])["value"].median().groupby("gpu").median()
    nccl = kernels[(kernels["op"] == "all_reduce") & (kernels["engine"] == "nccl")]
    latency = nccl[nccl["size_hi"] <= SMALL_MESSAGE_BYTES].groupby("gpu")["value"].median()
    large = nccl[nccl["size_lo"] >= LARGE_MESSAGE_BYTES]
    links = link_bandwidth_gb_s(gpus).reindex(large["gpu"]).to_numpy() * 1e9
    ring = 2.0 * (large["num_gpus"] - 1.0) / large["num_gpus"]
    achieved = large["size_lo"] * ring / large["value"] / links
    link = achieved.groupby(large["gpu"]).median()
    frame = pd.DataFrame(
        {
            "memory_efficiency": decode["bfloat16"],
            "compute_efficiency": compute,
            "allreduce_latency_s": latency,
            "link_efficiency": link,
        }
    )
    frame[MEMORY_POWER_COLUMN] = memory_power_factors(kernels).reindex(frame.index)
    for fmt, column in zip(PATH_FORMATS, PATH_FACTOR_COLUMNS, strict=True):
        ratio = decode.get(fmt, pd.Series(dtype=float)) / decode["bfloat16"]
        frame[column] = ratio.reindex(frame.index)
    systems = kernels.groupby("gpu")["system"].first()
    frame[EFFICIENCY_SOURCE] = "kernels: " + systems.reindex(frame.index)
    return frame


def memory_power_factors(kernels: pd.DataFrame) -> pd.Series:
    """Per GPU with per-kernel power: its memory-busy dynamic power over the measured median.

    The dynamic share of a decode-shaped 16-bit GEMM, ``(power / limit - idle) / (1 - idle)``,
    the median over engines, divided by the median of that over the GPUs that have it.
    """
    power = kernels[
        (kernels["op"] == "gemm")
        & (kernels["dtype"] == "bfloat16")
        & (kernels["metric"] == "power_share")
        & (kernels["size_hi"] <= DECODE_M)
    ]
    share = power.groupby(["gpu", "engine"])["value"].median().groupby("gpu").median()
    dynamic = (share - IDLE_SHARE) / (1.0 - IDLE_SHARE)
    return dynamic / dynamic.median() if len(dynamic) else dynamic


def gemm_shares(kernels: pd.DataFrame) -> pd.DataFrame:
    """Each GPU's decode-shaped GEMM bandwidth share per format (median over engines)."""
    decode = kernels[
        (kernels["op"] == "gemm")
        & (kernels["metric"] == "bandwidth_share")
        & (kernels["size_hi"] <= DECODE_M)
    ]
    by_engine = decode.groupby(["gpu", "dtype", "engine"])["value"].median()
    return by_engine.groupby(["gpu", "dtype"]).median().unstack()


def spec_efficiencies(profiled: pd.DataFrame, gpus: pd.DataFrame) -> pd.DataFrame:
    """``EFFICIENCY_COLUMNS`` of each GPU of ``gpus`` from the ``profiled`` GPUs' values.

    ``profiled``: the catalogue rows of profiled GPUs (``architecture``, ``memory_type``,
    ``interconnect`` and the efficiency columns). See the module docstring for the rule.
    """
    family = profiled["memory_type"].map(memory_family)
    kind = profiled.get("interconnect", pd.Series("", index=profiled.index))
    out = pd.DataFrame(
        index=gpus.index,
        columns=[*EFFICIENCY_COLUMNS, *PATH_FACTOR_COLUMNS, MEMORY_POWER_COLUMN],
        dtype=float,
    )
    everyone = pd.Series(True, index=profiled.index)
    by_kind: dict[tuple[str, object, object], pd.Series] = {}
    for name, row in gpus.iterrows():
        key = (
            memory_family(row.get("memory_type")),
            row.get("architecture"),
            row.get("interconnect"),
        )
        if key not in by_kind:
            by_kind[key] = _spec_model(profiled, family == key[0], key[1], kind == key[2], everyone)
        out.loc[name] = by_kind[key]
    for column, value in FALLBACK_EFFICIENCIES.items():
        out[column] = out[column].fillna(value)
    return out.fillna({c: 1.0 for c in (*PATH_FACTOR_COLUMNS, MEMORY_POWER_COLUMN)})


def _spec_model(
    profiled: pd.DataFrame,
    same_family: pd.Series,
    architecture: object,
    same_link: pd.Series,
    everyone: pd.Series,
) -> pd.Series:
    """The modelled columns of a GPU of one memory family, architecture and link."""
    peers = [same_family & (profiled["architecture"] == architecture), same_family, everyone]
    out = {
        column: _first_median(profiled[column], peers)
        for column in ("memory_efficiency", "compute_efficiency", *PATH_FACTOR_COLUMNS)
    }
    # power: only the GPUs of its architecture speak for it (1: the fitted constant alone)
    out[MEMORY_POWER_COLUMN] = _first_median(profiled[MEMORY_POWER_COLUMN], peers[:1])
    for column in ("allreduce_latency_s", "link_efficiency"):
        out[column] = _first_median(profiled[column], [same_link, everyone])
    return pd.Series(out)


def _first_median(values: pd.Series, masks: list[pd.Series]) -> float:
    """The median of ``values`` under the first mask that selects any non-blank value."""
    for mask in masks:
        chosen = values[mask.to_numpy()].dropna()
        if not chosen.empty:
            return float(chosen.median())
    return float("nan")


def with_efficiencies(gpus: pd.DataFrame, kernels: pd.DataFrame | None) -> pd.DataFrame:
    """The GPU table with ``EFFICIENCY_COLUMNS`` and ``efficiency_source`` for every GPU.

    ``kernels`` (the tidy kernel table) gives the profiled GPUs theirs; without it, columns
    already in ``gpus`` (a model's catalogue snapshot) are kept as they are.
    """
    out = gpus.copy()
    columns = (*EFFICIENCY_COLUMNS, *PATH_FACTOR_COLUMNS, MEMORY_POWER_COLUMN)
    if kernels is None:
        if all(c in out.columns for c in columns):
            return out
        for column in columns:
            out[column] = out[column] if column in out.columns else np.nan
        if EFFICIENCY_SOURCE not in out.columns:
            out[EFFICIENCY_SOURCE] = SPEC_MODEL
    else:
        measured = measured_efficiencies(kernels, out.set_index("gpu", drop=False))
        measured = measured.reindex(out["gpu"])
        for column in (*columns, EFFICIENCY_SOURCE):
            out[column] = measured[column].to_numpy()
    modelled = spec_efficiencies(profiled(out), out)
    for column in columns:
        out[column] = out[column].where(out[column].notna(), modelled[column])
    out[EFFICIENCY_SOURCE] = out[EFFICIENCY_SOURCE].fillna(SPEC_MODEL)
    return out
