"""Tensor peaks derived from the architecture (data/tensor_rates.csv) against vendor sheets.

Expected values are worked out by hand: SMs x clock (MHz) x dense operations per SM per clock,
divided by 1e6 for TFLOPS.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu.config import SHIPPED_DATA_DIR
from wattgpu.data.suites import derive_gpu_checks
from wattgpu.data.tensor_rates import (
    PEAK_TOLERANCE,
    SHEET_EXCEPTIONS,
    derive_peaks,
    peak_ratios,
    peaks_agree,
    read_tensor_rates,
)
from wattgpu.data.validation import validate_table
from wattgpu.errors import DataError


def sheet_gpus() -> pd.DataFrame:
    """Four GPUs with the figures their vendor sheets state."""
    return pd.DataFrame(
        {
            "gpu": [
                "NVIDIA H100 SXM5",
                "NVIDIA GeForce RTX 4090",
                "NVIDIA A100 SXM4 80GB",
                "NVIDIA RTX A6000",
            ],
            "compute_capability": [9.0, 8.9, 8.0, 8.6],
            "sm_count": [132, 128, 108, 84],
            "boost_clock_mhz": [1980, 2520, 1410, 1800],
            "tensor_clock_mhz": [1830, np.nan, np.nan, np.nan],
            # H100 datasheet (SXM): 1979 / 3958 TFLOPS sparse, halved; RTX 4090: Ada
            # whitepaper, Appendix A; A100 and RTX A6000: their datasheets
            "fp16_tensor_tflops": [989.4, 330.3, 312.0, 154.8],
            "fp8_tensor_tflops": [1978.9, 660.6, np.nan, np.nan],
            "fp32acc_tensor_tflops": [np.nan, 165.2, np.nan, np.nan],
        }
    )


def test_rate_table_has_each_capability_once() -> None:
    rates = read_tensor_rates()
    assert rates["compute_capability"].tolist() == [
        7.0, 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 12.0, 12.1
    ]  # fmt: skip
    assert rates["source"].notna().all()


def test_derived_fp16_and_fp8_peaks_of_h100_sxm_and_rtx_4090() -> None:
    derived = derive_peaks(sheet_gpus(), read_tensor_rates())
    # H100 SXM: 132 x 1830 = 241,560 SM-MHz; x 4096 = 989,429,760 -> 989.4 TFLOPS FP16;
    #           x 8192 = 1,978,859,520 -> 1978.9 FP8 (and INT8)
    # RTX 4090: 128 x 2520 = 322,560; x 1024 = 330,301,440 -> 330.3 FP16;
    #           x 2048 = 660,602,880 -> 660.6 FP8; x 512 (GeForce FP32 accumulate) -> 165.2
    # A100: 108 x 1410 = 152,280; x 2048 = 311,869,440 -> 311.9 (sheet: 312)
    # RTX A6000: 84 x 1800 = 151,200; x 1024 = 154,828,800 -> 154.8
    assert derived["fp16_tensor_tflops"].tolist() == [989.4, 330.3, 311.9, 154.8]
    assert derived["fp8_tensor_tflops"].tolist()[:2] == [1978.9, 660.6]
    assert derived["fp8_tensor_tflops"].iloc[2:].isna().all()  # Ampere has no FP8
    assert derived["int8_tensor_tops"].tolist() == [1978.9, 660.6, 623.7, 309.7]
    # A100: 152,280 x 8192 = 1,247,477,760 -> 1247.5 INT4; Hopper has none
    assert np.isnan(derived["int4_tensor_tops"].iloc[0])
    assert derived["int4_tensor_tops"].iloc[2] == 1247.5
    # FP32 accumulation at half rate on GeForce only; the RTX A6000 (same GA102 rates) is blank
    fp32acc = derived["fp32acc_tensor_tflops"]
    assert fp32acc.iloc[1] == 165.2
    assert fp32acc.drop(index=1).isna().all()
    assert derived["fp4_tensor_tflops"].isna().all()


def test_sheets_agree_within_tolerance() -> None:
    gpus = sheet_gpus()
    ratios = peak_ratios(gpus, read_tensor_rates())
    # A100: 312 / 311.9 = 1.0003; the others equal their derived figures
    assert (ratios - 1).abs().max().max() <= 0.001
    assert peaks_agree(gpus, read_tensor_rates()).all()


def test_hopper_sheet_quoted_below_its_boost_clock_needs_the_tensor_clock() -> None:
    gpus = sheet_gpus().assign(tensor_clock_mhz=np.nan)
    derived = derive_peaks(gpus, read_tensor_rates())
    # at the 1980 MHz boost: 132 x 1980 x 4096 = 1,070,530,560 -> 1070.5, 8.2 % over 989.4
    assert derived["fp16_tensor_tflops"].iloc[0] == 1070.5
    assert peaks_agree(gpus, read_tensor_rates()).tolist() == [False, True, True, True]


def test_a_peak_six_percent_off_fails_the_suite() -> None:
    gpus = sheet_gpus()
    gpus.loc[3, "fp16_tensor_tflops"] = 164.1  # 164.1 / 154.8 = 1.06
    assert peaks_agree(gpus, read_tensor_rates()).tolist() == [True, True, True, False]
    checks = derive_gpu_checks(gpus)
    assert checks["peaks_agree_with_architecture"].tolist() == [True, True, True, False]


def test_shipped_catalogue_agrees_with_the_architecture() -> None:
    gpus = pd.read_csv(SHIPPED_DATA_DIR / "gpus.csv")
    ratios = peak_ratios(gpus, read_tensor_rates())
    off = [
        (gpu, column, round(ratio, 3))
        for column in ratios.columns
        for gpu, ratio in zip(gpus["gpu"], ratios[column], strict=True)
        if abs(ratio - 1) > PEAK_TOLERANCE and (gpu, column) not in SHEET_EXCEPTIONS
    ]
    assert off == []
    # every named exception still names a shipped GPU that is off (else it is stale)
    for gpu, column in SHEET_EXCEPTIONS:
        ratio = ratios.loc[gpus["gpu"] == gpu, column].iloc[0]
        assert abs(ratio - 1) > PEAK_TOLERANCE, (gpu, column)
    # compared: the FP16 peak of every shipped GPU with an SM count and a clock (T4 ... RTX 5080)
    assert ratios["fp16_tensor_tflops"].notna().sum() >= 50


def test_tensor_clock_above_boost_fails_validation() -> None:
    gpus = pd.read_csv(SHIPPED_DATA_DIR / "gpus.csv")
    row = gpus["gpu"] == "NVIDIA H100 SXM5"
    gpus.loc[row, "tensor_clock_mhz"] = 2000  # above its 1980 MHz boost
    report = validate_table("gpus", gpus)
    failed = [(r.column, r.examples) for r in report.results if not r.success]
    # and at 2000 MHz the derived peak (132 x 2000 x 4096 -> 1081.3) is 9 % over the sheet's
    assert failed == [
        ("peaks_agree_with_architecture", ["NVIDIA H100 SXM5"]),
        ("tensor_clock_over_boost", ["NVIDIA H100 SXM5"]),
    ]


def test_rate_table_with_a_capability_twice_is_refused(tmp_path) -> None:
    rates = read_tensor_rates()
    path = tmp_path / "rates.csv"
    pd.concat([rates, rates.tail(1)]).to_csv(path, index=False)
    with pytest.raises(DataError, match=r"compute capability twice\. Got 12\.1\."):
        read_tensor_rates(path)
