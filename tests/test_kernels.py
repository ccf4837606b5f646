"""The kernel table: its importer on real rows, per-GPU efficiencies, and the links' cost."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import PLAIN, REFERENCE, gpu_row, llm_row

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.catalog import Catalog
from wattgpu.data.importers.aiconfigurator_kernels import import_kernels, read_kernel_tables
from wattgpu.data.kernel_paths import kernel_path
from wattgpu.data.kernels import (
    FALLBACK_EFFICIENCIES,
    KERNELS_FILE,
    SPEC_MODEL,
    measured_efficiencies,
    read_kernels,
)
from wattgpu.errors import QueryError
from wattgpu.modeling.answering.queries import check_queries
from wattgpu.modeling.physical.features import build_features
from wattgpu.modeling.physical.regimes import serving_model

FIXTURE = Path(__file__).parent / "fixtures" / "aiconfigurator_kernels"
RAW_KERNELS = (
    REFERENCE
    / "aiconfigurator"
    / "raw"
    / "ai-dynamo+aiconfigurator@095f58a"
    / "aic-core"
    / "src"
    / "aiconfigurator_core"
    / "systems"
    / "data"
)


@pytest.fixture(scope="module")
def shipped_catalog() -> Catalog:
    return Catalog.load(SHIPPED_DATA_DIR / "gpus.csv", SHIPPED_DATA_DIR / "llms.csv")


@pytest.fixture(scope="module")
def tidy(shipped_catalog) -> pd.DataFrame:
    return import_kernels(read_kernel_tables(FIXTURE), shipped_catalog)


def _value(tidy: pd.DataFrame, **where: object) -> float:
    rows = tidy
    for column, value in where.items():
        rows = rows[rows[column] == value]
    assert len(rows) == 1, where
    return float(rows["value"].iloc[0])


def test_the_importer_turns_real_gemm_rows_into_shares_of_the_sheet_by_hand(tidy):
    # H100 SXM5: 3,350 GB/s, 989.4 TFLOPS (16-bit). Decode bucket (m <= 16), two rows:
    # m=1, n=k=4096, 0.015045 ms: 4096 x 4096 x 2 + 4096 x 2 + 4096 x 2 = 33,570,816 B
    # m=8, n=8192, k=4096, 0.024788 ms: 8192 x 4096 x 2 + 8 x 4096 x 2 + 8 x 8192 x 2 = 67,305,472 B
    first = 33_570_816 / 15.045e-6 / 3.35e12
    second = 67_305_472 / 24.788e-6 / 3.35e12
    got = _value(tidy, op="gemm", size_lo=1, metric="bandwidth_share")
    assert got == pytest.approx((first + second) / 2, rel=1e-5)
    # the prefill bucket: m=n=k=4096 in 0.166026 ms, 2 x 4096^3 FLOPs
    flops = 2 * 4096**3 / 166.026e-6 / 989.4e12
    assert _value(tidy, op="gemm", size_lo=1025, metric="flops_share") == pytest.approx(
        flops, rel=1e-5
    )
    # the row with n = 1024 is no weight matrix of an LLM: left out, so two kernels in decode
    decode = tidy[(tidy["op"] == "gemm") & (tidy["size_lo"] == 1)]
    assert set(decode["kernels"]) == {2}
    assert set(tidy["gpu"]) == {"NVIDIA H100 SXM5", "NVIDIA L40S"}


def test_the_importer_keeps_nccl_all_reduce_latency_by_message_bytes(tidy):
    reduce = tidy[tidy["op"] == "all_reduce"]
    # 256 and 4,194,304 16-bit elements = 512 B and 8 MiB; the all_gather row is left out
    assert reduce["size_lo"].tolist() == [512.0, 8_388_608.0]
    assert reduce["value"].tolist() == pytest.approx([7.74e-6, 428.90e-6])
    assert set(reduce["engine"]) == {"nccl"} and set(reduce["num_gpus"]) == {2}


def test_measured_efficiencies_of_the_cut_rows_by_hand(tidy, shipped_catalog):
    measured = measured_efficiencies(tidy, shipped_catalog.gpus)
    l40s = measured.loc["NVIDIA L40S"]
    # PCIe 4.0 x16 one way: 16 x 1.969 GB/s; an 8 MiB ring all-reduce over 2 GPUs moves
    # 2 (2 - 1) / 2 = 1 byte per byte in 428.9 us
    assert l40s["link_efficiency"] == pytest.approx(8_388_608 / 428.9e-6 / (16 * 1.969e9))
    assert l40s["allreduce_latency_s"] == pytest.approx(7.74e-6)
    assert l40s["efficiency_source"] == "kernels: l40s"


def _catalog_with(kernels: pd.DataFrame) -> Catalog:
    gpus = pd.DataFrame(
        [
            gpu_row("Profiled Hopper", interconnect="NVLink", nvlink_bandwidth_gb_s=900),
            gpu_row("Other Hopper", interconnect="NVLink", nvlink_bandwidth_gb_s=900),
            gpu_row(
                "Some Ada",
                architecture="Ada Lovelace",
                memory_type="GDDR6",
                interconnect="PCIe",
                pcie_generation=4,
                pcie_lanes=16,
            ),
        ]
    )
    return Catalog.from_frames(gpus, pd.DataFrame([llm_row("m/llm")]), kernels)


def _kernel_rows(gpu: str, memory: float, compute: float) -> pd.DataFrame:
    common = {"system": "x", "gpu": gpu, "op": "gemm", "dtype": "bfloat16", "num_gpus": 1}
    return pd.DataFrame(
        [
            {
                **common,
                "engine": "vllm",
                "size_lo": 1,
                "size_hi": 16,
                "metric": "bandwidth_share",
                "value": memory,
                "kernels": 1,
            },
            {
                **common,
                "engine": "vllm",
                "size_lo": 1025,
                "size_hi": 1 << 30,
                "metric": "flops_share",
                "value": compute,
                "kernels": 1,
            },
        ]
    )


def test_a_profiled_gpu_gets_its_tables_and_another_the_profiled_peers_of_its_specs():
    catalog = _catalog_with(_kernel_rows("Profiled Hopper", 0.8, 0.7))
    gpus = catalog.gpus
    assert gpus.loc["Profiled Hopper", "memory_efficiency"] == 0.8
    assert gpus.loc["Profiled Hopper", "compute_efficiency"] == 0.7
    # same architecture and memory family (Hopper, HBM): the profiled one's values
    assert gpus.loc["Other Hopper", "memory_efficiency"] == 0.8
    assert gpus.loc["Other Hopper", "efficiency_source"] == SPEC_MODEL
    # no profiled GDDR GPU: the median over every profiled GPU, here the one
    assert gpus.loc["Some Ada", "compute_efficiency"] == 0.7
    # no all-reduce measured anywhere: the fallbacks
    assert gpus.loc["Some Ada", "link_efficiency"] == FALLBACK_EFFICIENCIES["link_efficiency"]


def test_without_a_kernel_table_a_snapshot_keeps_the_efficiencies_it_carries():
    catalog = _catalog_with(_kernel_rows("Profiled Hopper", 0.8, 0.7))
    again = Catalog.from_frames(
        catalog.gpus.reset_index(drop=True), catalog.llms.reset_index(drop=True)
    )
    assert again.gpus["memory_efficiency"].tolist() == catalog.gpus["memory_efficiency"].tolist()


def test_two_way_tensor_parallelism_over_pcie_4_costs_more_per_step_than_over_nvlink():
    link = {"allreduce_latency_s": 1e-5, "link_efficiency": 0.5}
    specs = {"memory_efficiency": 0.8, "compute_efficiency": 0.7, **link}
    gpus = pd.DataFrame(
        [
            gpu_row("Over NVLink", interconnect="NVLink", nvlink_bandwidth_gb_s=600, **specs),
            gpu_row("Over PCIe", interconnect="PCIe", pcie_generation=4, pcie_lanes=16, **specs),
        ]
    )
    catalog = Catalog.from_frames(gpus, pd.DataFrame([llm_row("m/llm")]))
    rows = build_features(
        pd.DataFrame(
            {
                "gpu": ["Over NVLink", "Over PCIe"],
                "model": "m/llm",
                "scenario": "offline",
                "batch_size": 10,
                "num_gpus": 2,
            }
        ),
        catalog,
    )
    itl = serving_model(rows, PLAIN)["itl_s"].to_numpy()
    # Llama-3.1-8B: 32 layers, hidden 4096. Each of 2 x 32 all-reduces moves 10 sequences x 4096
    # x 2 bytes, x 2 (2 - 1) / 2 = 1 over the link's one-way bandwidth at 50 %: NVLink 600 / 2
    # = 300 GB/s, PCIe 4.0 x16 16 x 1.969 GB/s; the fixed 10 us is the same on both
    moved = 2 * 32 * 10 * 4096 * 2
    extra = moved / (16 * 1.969e9 * 0.5) - moved / (300e9 * 0.5)
    assert itl[1] - itl[0] == pytest.approx(extra, rel=1e-9)
    assert itl[1] > itl[0]


@pytest.mark.skipif(not RAW_KERNELS.is_dir(), reason="needs ../shared/reference")
def test_the_importer_rebuilds_the_shipped_table_from_the_raw_files(shipped_catalog):
    rebuilt = import_kernels(read_kernel_tables(RAW_KERNELS), shipped_catalog)
    shipped = read_kernels(SHIPPED_DATA_DIR / KERNELS_FILE)
    pd.testing.assert_frame_equal(
        rebuilt.reset_index(drop=True), shipped, check_dtype=False, atol=1e-9
    )


@pytest.mark.parametrize(
    ("dtype", "capability", "path"),
    [
        ("bfloat16", 7.0, "native"),  # run as FP16 on Volta
        ("fp8", 9.0, "native"),  # Hopper's FP8 tensor cores
        ("fp8", 8.0, "weight-only"),  # Marlin FP8 on the A100
        ("fp8", 7.5, None),  # no FP8 kernel on Turing
        ("nvfp4", 10.0, "native"),
        ("mxfp4", 9.0, "weight-only"),  # Marlin FP4 on Hopper
        ("nvfp4", 7.0, None),
        ("int4", 7.0, "weight-only"),  # GPTQ on Volta
        ("int8", 7.0, None),  # INT8 W8A8 from Turing
    ],
)
def test_the_kernel_path_of_a_format_on_a_gpu(dtype, capability, path):
    assert kernel_path(dtype, capability) == path


def test_a_format_a_gpu_cannot_run_is_refused_in_one_line_naming_both(shipped_catalog):
    query = pd.DataFrame(
        [
            {
                "gpu": "T4",
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "scenario": "offline",
                "dtype": "nvfp4",
            }
        ]
    )
    with pytest.raises(QueryError) as caught:
        check_queries(query, shipped_catalog)
    message = str(caught.value)
    assert "\n" not in message and caught.value.field == "dtype"
    assert "NVIDIA Tesla T4" in message and "nvfp4" in message and "8.0" in message


def test_a_weight_only_path_is_costed_at_its_own_kernels_share(shipped_catalog):
    rows = build_features(
        pd.DataFrame(
            {
                "gpu": "NVIDIA A100 SXM4 80GB",
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "scenario": "offline",
                "batch_size": 1,
                "dtype": ["fp8", "bfloat16"],
            }
        ),
        shipped_catalog,
    )
    assert rows["kernel_path"].tolist() == ["weight-only", "native"]
    # FP8 weights on the A100 go through 8-bit weight-only GEMMs: the A100's measured int8_wo
    # decode share over its bf16 one, from the shipped table
    kernels = read_kernels(SHIPPED_DATA_DIR / KERNELS_FILE)
    decode = kernels[
        (kernels["gpu"] == "NVIDIA A100 SXM4 80GB")
        & (kernels["op"] == "gemm")
        & (kernels["metric"] == "bandwidth_share")
        & (kernels["size_lo"] == 1)
    ]
    share = decode.groupby("dtype")["value"].median()
    assert rows["path_memory_factor"].tolist() == pytest.approx(
        [share["int8_wo"] / share["bfloat16"], 1.0]
    )


def test_the_memory_busy_power_of_profiled_gpus_scales_the_power_weight_by_hand():
    power = {
        "op": "gemm",
        "dtype": "bfloat16",
        "num_gpus": 1,
        "engine": "vllm",
        "size_lo": 1,
        "size_hi": 16,
        "metric": "power_share",
        "kernels": 1,
        "system": "x",
    }
    kernels = pd.concat(
        [
            _kernel_rows("Profiled Hopper", 0.8, 0.7),
            _kernel_rows("Some Ada", 0.8, 0.7),
            pd.DataFrame(
                [
                    {**power, "gpu": "Profiled Hopper", "value": 0.73},
                    {**power, "gpu": "Some Ada", "value": 0.55},
                ]
            ),
        ]
    )
    gpus = _catalog_with(kernels).gpus
    # dynamic shares above 10 % idle: (0.73 - 0.1) / 0.9 = 0.7 and (0.55 - 0.1) / 0.9 = 0.5;
    # each over their median, 0.6
    assert gpus.loc["Profiled Hopper", "memory_power_factor"] == pytest.approx(0.7 / 0.6)
    assert gpus.loc["Some Ada", "memory_power_factor"] == pytest.approx(0.5 / 0.6)
    # a GPU of a profiled architecture and memory family inherits it
    assert gpus.loc["Other Hopper", "memory_power_factor"] == pytest.approx(0.7 / 0.6)


def test_a_gpu_described_by_its_specs_gets_the_efficiencies_of_its_profiled_peers(
    shipped_catalog,
):
    query = pd.DataFrame(
        [
            {
                "gpu": "Workstation Blackwell",
                "gpu_memory_bandwidth_gb_s": 1000,
                "gpu_fp16_tensor_tflops": 200,
                "gpu_tdp_w": 300,
                "gpu_memory_gb": 48,
                "gpu_memory_type": "GDDR7",
                "gpu_architecture": "Blackwell",
                "gpu_interconnect": "PCIe",
                "gpu_pcie_generation": 5,
                "gpu_pcie_lanes": 16,
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "scenario": "offline",
                "num_gpus": 2,
            }
        ]
    )
    row = build_features(check_queries(query, shipped_catalog), shipped_catalog).iloc[0]
    # the one profiled Blackwell GPU with GDDR memory is the RTX PRO 6000 Server
    peer = shipped_catalog.gpus.loc["NVIDIA RTX PRO 6000 Blackwell Server Edition"]
    assert row["gpu_memory_efficiency"] == peer["memory_efficiency"]
    assert row["gpu_compute_efficiency"] == peer["compute_efficiency"]
    # PCIe 5.0 x16, one way: 16 x 3.938 GB/s
    assert row["link_bandwidth_gb_s"] == pytest.approx(16 * 3.938)
