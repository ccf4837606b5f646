"""The GPU catalogue against two independent copies of the same spec sheets.

NVIDIA AIConfigurator's system files (``systems/*.yaml``: bandwidth, memory, dense tensor FLOP/s
per format, power, SM version) and the WattGPU paper's ``gpu_features.csv`` (TechPowerUp-style
specs of 11 GPUs) lie in ``../shared/reference``; the test skips where that is absent (outside
CI). The catalogue follows the vendor's sheet: every figure where a copy says otherwise is listed
below with the copy's value and why, so a new disagreement (or a fixed one) fails the test.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REFERENCE

from wattgpu.data.catalog import Catalog

AICONFIGURATOR = (
    REFERENCE
    / "aiconfigurator/raw/ai-dynamo+aiconfigurator@095f58a/aic-core/src/aiconfigurator_core/systems"
)
GPU_FEATURES = REFERENCE / "wattgpu" / "gpu_features.csv"
# b60 is an Intel Arc Pro B60, not an NVIDIA GPU.
NOT_NVIDIA = {"b60"}

# AIConfigurator's key -> (catalogue column, the key's unit in the catalogue's).
AIC_FIELDS = {
    "mem_bw": ("memory_bandwidth_gb_s", 1e9),
    "mem_capacity": ("memory_gb", 2**30),  # bytes of GiB: NVIDIA's "80 GB" HBM is 80 GiB
    "bfloat16_tc_flops": ("fp16_tensor_tflops", 1e12),
    "fp8_tc_flops": ("fp8_tensor_tflops", 1e12),
    "fp4_tc_flops": ("fp4_tensor_tflops", 1e12),
    "int8_tc_flops": ("int8_tensor_tops", 1e12),
    "power": ("tdp_w", 1.0),
    "sm_version": ("compute_capability", 10.0),  # 90 -> 9.0
}
# (system, column) -> (AIConfigurator's value in the catalogue's unit, or None for no figure; why)
AIC_DIFFERENCES = {
    ("b200_sxm", "memory_bandwidth_gb_s"): (
        7700.0,
        "the bus width CUDA reports (~7.7 TB/s); the HGX B200 sheet says 64 TB/s / 8 = 8 TB/s",
    ),
    ("b300_sxm", "memory_bandwidth_gb_s"): (
        7750.0,
        "AIConfigurator divides a 62 TB/s node total by 8; NVIDIA's Blackwell Ultra figure is "
        "8 TB/s per GPU",
    ),
    ("b300_sxm", "memory_gb"): (
        275040 / 1024,
        "nvidia-smi's usable memory (275040 MiB); the sheet's capacity is 288 GB",
    ),
    ("gb200", "memory_gb"): (
        189471 / 1024,
        "nvidia-smi's usable memory (189471 MiB); the sheet: 372 GB per superchip, 186 per GPU",
    ),
    ("gb300", "memory_gb"): (
        284208 / 1024,
        "nvidia-smi's usable memory (284208 MiB); the sheet's capacity is 288 GB",
    ),
    ("l40s", "memory_gb"): (
        46068 / 1024,
        "nvidia-smi's memory with ECC on (46068 MiB); the sheet's capacity is 48 GB",
    ),
    ("rtx_pro_6000_server", "memory_gb"): (
        97887 / 1024,
        "nvidia-smi's usable memory (97887 MiB); the sheet's capacity is 96 GB",
    ),
    ("b300_sxm", "fp4_tensor_tflops"): (
        14000.0,
        "copies of the HGX B300 sheet disagree on its dense FP4 figure, so the catalogue has none",
    ),
    ("b300_sxm", "int8_tensor_tops"): (
        153.5,
        "copies of the HGX B300 sheet disagree on its INT8 figure, so the catalogue has none",
    ),
    ("gb300", "int8_tensor_tops"): (
        165.0,
        "not a figure of the GB300 NVL72 sheet known with confidence, so the catalogue has none",
    ),
    ("rtx_pro_6000_server", "int8_tensor_tops"): (
        935.601069927397,
        "the Server Edition sheet gives no INT8 figure, so the catalogue has none",
    ),
    # AIConfigurator scales the sheet's peaks (4 PFLOPS sparse FP4 at the boost clock) to a
    # sustained 2430 MHz clock; the catalogue keeps the sheet's peak.
    ("rtx_pro_6000_server", "fp16_tensor_tflops"): (467.800534963698, "scaled to 2430 MHz"),
    ("rtx_pro_6000_server", "fp8_tensor_tflops"): (935.601069927397, "scaled to 2430 MHz"),
    ("rtx_pro_6000_server", "fp4_tensor_tflops"): (1871.202139854795, "scaled to 2430 MHz"),
}

# gpu_features.csv column -> catalogue column.
TPU_FIELDS = {
    "memory_size_gb": "memory_gb",
    "memory_bandwidth_gb_s": "memory_bandwidth_gb_s",
    "memory_type": "memory_type",
    "thermal_design_power_w": "tdp_w",
    "streaming_multiprocessors": "sm_count",
    "l2_cache_mb": "l2_cache_mb",
    "base_clock_mhz": "base_clock_mhz",
    "boost_clock_mhz": "boost_clock_mhz",
    "transistor_count_m": "transistors_m",
    "process_size_nm": "process_nm",
    "compute_capability": "compute_capability",
    "tensor_tflops": "fp16_tensor_tflops",
    "release_year": "release_year",
}
TSMC_4N = "TechPowerUp writes TSMC 4N (NVIDIA's custom 5 nm-class node) as 5; the catalogue 4"
FP32_ACCUMULATE = (
    "the FP32-accumulate rate; the catalogue's consumer cards carry the whitepaper's"
    " FP16-accumulate one"
)
BANDWIDTH_FROM_CLOCK = "TechPowerUp computes bandwidth from the memory clock; the sheet rounds"
# (gpu_db_name, column) -> (gpu_features.csv's value, why the catalogue differs)
TPU_DIFFERENCES = {
    ("A30 PCIe", "memory_bandwidth_gb_s"): (933.1, BANDWIDTH_FROM_CLOCK),
    ("A30 PCIe", "memory_type"): ("HBM2e", "the A30 datasheet says HBM2"),
    ("A100 SXM4 40 GB", "memory_bandwidth_gb_s"): (1560.0, "the A100 datasheet says 1555 GB/s"),
    ("A100 SXM4 40 GB", "memory_type"): ("HBM2e", "the A100 40GB datasheet says HBM2"),
    ("Tesla V100 SXM2 32 GB", "memory_bandwidth_gb_s"): (898.0, "the V100 sheet says 900 GB/s"),
    ("L4", "memory_bandwidth_gb_s"): (300.1, BANDWIDTH_FROM_CLOCK),
    ("L4", "sm_count"): (60, "the L4 has 7424 CUDA cores = 58 SMs of 128; 60 is the full AD104"),
    ("L4", "process_nm"): (5, TSMC_4N),
    ("GeForce RTX 3090", "memory_bandwidth_gb_s"): (936.2, BANDWIDTH_FROM_CLOCK),
    ("GeForce RTX 3090", "fp16_tensor_tflops"): (
        71,
        FP32_ACCUMULATE,
    ),
    ("GeForce RTX 4090", "memory_bandwidth_gb_s"): (1010.0, "21 Gbps x 384 bit = 1008 GB/s"),
    ("GeForce RTX 4090", "fp16_tensor_tflops"): (
        165,
        FP32_ACCUMULATE,
    ),
    ("GeForce RTX 4090", "process_nm"): (5, TSMC_4N),
    ("L40S", "l2_cache_mb"): (48.0, "AD102 with 142 SMs has 96 MB of L2"),
    ("L40S", "release_year"): (2022, "NVIDIA launched the L40S in August 2023"),
    ("L40S", "process_nm"): (5, TSMC_4N),
    ("H100 PCIe 80 GB", "memory_bandwidth_gb_s"): (2040.0, "the H100 datasheet says 2 TB/s"),
    ("H100 PCIe 80 GB", "base_clock_mhz"): (1095.0, "the H100 PCIe product brief says 1125 MHz"),
    ("H100 PCIe 80 GB", "process_nm"): (5, TSMC_4N),
    ("H100 NVL 94 GB", "memory_bandwidth_gb_s"): (3940.0, "the H100 datasheet says 3.9 TB/s"),
    ("H100 NVL 94 GB", "process_nm"): (5, TSMC_4N),
    ("H200 NVL", "memory_bandwidth_gb_s"): (4890.0, "the H200 datasheet says 4.8 TB/s"),
    ("H200 NVL", "tdp_w"): (700, "the H200 datasheet's NVL column: up to 600 W"),
    ("H200 NVL", "process_nm"): (5, TSMC_4N),
}


def _need(path: Path) -> Path:
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI: the reference copy is missing at {path}")
        pytest.skip(f"reference copy not found at {path}")
    return path


def _same(catalogue: object, reference: object) -> bool:
    """The same figure: both blank, equal, or the reference writing it in whole units."""
    if pd.isna(catalogue) or pd.isna(reference):
        return pd.isna(catalogue) and pd.isna(reference)
    if isinstance(reference, str) or isinstance(catalogue, str):
        return reference == catalogue
    value = float(catalogue)
    # AIConfigurator and TechPowerUp write 989.4 TFLOPS as 989 and 1978.9 as 1978
    return math.isclose(float(reference), value) or float(reference) in (
        math.floor(value),
        round(value),
    )


def _check(found: dict, allowed: dict) -> None:
    """Every disagreement is an allowed one with the stated value, and every allowed one occurs."""
    unexplained = {k: v for k, v in found.items() if k not in allowed}
    assert not unexplained, f"catalogue and reference copy disagree: {unexplained}"
    for key, (value, _why) in allowed.items():
        assert key in found, f"{key}: documented difference no longer occurs; drop it"
        assert _same(found[key][1], value), f"{key}: the reference now says {found[key][1]}"


def test_aiconfigurator_system_files_agree_with_the_catalogue(catalog: Catalog):
    paths = sorted(_need(AICONFIGURATOR).glob("*.yaml"))
    systems = [p for p in paths if p.stem not in NOT_NVIDIA]
    assert len(systems) == 13
    found = {}
    for path in systems:
        gpu = catalog.find_gpu(path.stem)
        assert gpu is not None, f"AIConfigurator system {path.stem!r} is no catalogue alias"
        spec = yaml.safe_load(path.read_text())["gpu"]
        row = catalog.gpus.loc[gpu]
        for key, (column, unit) in AIC_FIELDS.items():
            reference = spec[key] / unit if key in spec else None
            if not _same(row[column], reference):
                found[(path.stem, column)] = (row[column], reference)
    _check(found, AIC_DIFFERENCES)


def test_gpu_features_csv_agrees_with_the_catalogue(catalog: Catalog):
    table = pd.read_csv(_need(GPU_FEATURES), sep=";")
    assert len(table) == 11
    table["compute_capability"] = table["cuda_major_version"] + table["cuda_minor_version"] / 10
    found = {}
    for _, spec in table.iterrows():
        # gpu_db_name names the variant ("H200 NVL"); its gpu_type ("NVIDIA H200") does not
        gpu = catalog.find_gpu(spec["gpu_db_name"])
        assert gpu is not None, f"gpu_features.csv GPU {spec['gpu_db_name']!r} is not catalogued"
        for source, column in TPU_FIELDS.items():
            if not _same(catalog.gpus.loc[gpu, column], spec[source]):
                found[(spec["gpu_db_name"], column)] = (
                    catalog.gpus.loc[gpu, column],
                    spec[source],
                )
    _check(found, TPU_DIFFERENCES)


@pytest.mark.skipif(not AICONFIGURATOR.is_dir(), reason="needs ../shared/reference")
@pytest.mark.parametrize(
    "system",
    ["a100_sxm", "l40s", "rtx_pro_6000_server", "h100_sxm", "h200_sxm", "b200_sxm", "gb200"],
)
def test_each_profiled_gpus_link_is_the_one_aiconfigurator_gives(system):
    from wattgpu.config import SHIPPED_DATA_DIR
    from wattgpu.data.importers.aiconfigurator_kernels import KERNEL_SYSTEMS
    from wattgpu.data.kernels import link_bandwidth_gb_s

    spec = yaml.safe_load((AICONFIGURATOR / f"{system}.yaml").read_text(encoding="utf-8"))
    catalog = Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")
    ours = link_bandwidth_gb_s(catalog.gpus).loc[KERNEL_SYSTEMS[system]]
    # AIConfigurator's intra_node_bw: bytes/s per GPU, one direction (PCIe rounded to 32 or 64
    # GB/s, where the lanes give 31.5 and 63.0)
    assert ours == pytest.approx(spec["node"]["intra_node_bw"] / 1e9, rel=0.03)
